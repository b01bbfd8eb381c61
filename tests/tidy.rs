//! House rules that hold for every source file, checked on the tree as it is:
//! - every `src/**/*.rs` starts with a `//!` doc saying what it owns;
//! - `unsafe` appears only in the files listed here, each of which says why at its top;
//! - every `unsafe` block and `unsafe impl` has a `SAFETY:` comment just above it (or on its line);
//! - every `crate::` path in library code runs down the layer order ARCHITECTURE.md states
//!   ([`LAYERS`]), never up or across to a module listed after it, so no two modules import each
//!   other, however indirectly.

use std::path::{Path, PathBuf};

/// The only files that may contain `unsafe`, and why each needs it.
const UNSAFE_FILES: &[(&str, &str)] = &[
    ("src/generator/prefetch.rs", "a prefetch hint, which std has no safe form of"),
    ("src/rules/driver.rs", "the rule driver called through Lua's C API"),
    ("src/rules/helpers.rs", "list helpers as Lua C functions"),
    (
        "src/rules/seal.rs",
        "reading upvalues and real metatables to seal a script, which mlua has no safe form of",
    ),
    ("src/rules/watchdog.rs", "the time limit: a signal handler, thread CPU clocks and a Lua hook"),
];

/// The library's top-level modules from the ground up, in layers (ARCHITECTURE.md, "Layers").
/// Code in a module may use the modules listed before it, never one listed after it: within a
/// layer the order is the one the code needs. Tests (`tests.rs`, `tests/`, `#[cfg(test)]`
/// modules) may use anything, as they build whole applications to check one part.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "vocabulary and utilities",
        &[
            "vocabulary",
            "numbers",
            "request_path",
            "prefix_map",
            "log_field",
            "bounded_file",
            "secret",
            "fd_limit",
            "user_agent",
            "client",
            "log_sink",
            "metrics",
            "single_flight",
            "outbound",
        ],
    ),
    ("data", &["trap_url", "lists", "geo", "corpus"]),
    (
        "components",
        &[
            "client_state",
            "owner_tools",
            "claims",
            "facts",
            "crawler",
            "signature",
            "robots",
            "crowdsec",
            "rules",
            "generator",
            "snippets",
            "challenge",
            "lists_update",
        ],
    ),
    ("settings", &["config"]),
    ("assembly", &["app"]),
    ("front doors", &["verdict", "reload", "explain", "replay", "http"]),
];

/// Lines above an `unsafe` block searched for its `SAFETY:` comment.
const SAFETY_WINDOW: usize = 8;

fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

fn all_sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let name = path.strip_prefix(root).unwrap().display().to_string();
            (name, std::fs::read_to_string(&path).unwrap())
        })
        .collect()
}

/// The line without a trailing `//` comment (good enough for this code base: no `//` in strings
/// on lines that matter here).
fn code(line: &str) -> &str {
    line.split("//").next().unwrap_or("")
}

#[test]
fn every_source_file_starts_with_a_module_doc() {
    let missing: Vec<String> = all_sources()
        .into_iter()
        .filter(|(_, text)| !text.trim_start().starts_with("//!"))
        .map(|(name, _)| name)
        .collect();
    assert!(missing.is_empty(), "these files do not start with a `//!` doc: {missing:?}");
}

/// Whether a line of code uses the `unsafe` keyword (a block, fn, impl, trait or extern block),
/// as opposed to the word in a string such as a CSP's `'unsafe-inline'`.
fn uses_unsafe(code: &str) -> bool {
    ["unsafe {", "unsafe fn", "unsafe impl", "unsafe extern", "unsafe trait", "unsafe_code"]
        .iter()
        .any(|keyword| code.contains(keyword))
}

#[test]
fn unsafe_code_lives_only_in_the_listed_files() {
    let allowed: Vec<&str> = UNSAFE_FILES.iter().map(|(file, _)| *file).collect();
    let offending: Vec<String> = all_sources()
        .into_iter()
        .filter(|(name, text)| {
            !allowed.contains(&name.as_str()) && text.lines().any(|line| uses_unsafe(code(line)))
        })
        .map(|(name, _)| name)
        .collect();
    assert!(offending.is_empty(), "unsafe code outside the listed files: {offending:?}");
    for file in allowed {
        let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).unwrap();
        assert!(text.contains("#![allow(unsafe_code)]"), "{file} is listed but does not allow unsafe code");
    }
}

#[test]
fn every_unsafe_block_says_why_it_is_sound() {
    let mut unexplained = Vec::new();
    for (name, text) in all_sources() {
        let lines: Vec<&str> = text.lines().collect();
        for (index, line) in lines.iter().enumerate() {
            let code = code(line);
            if !(code.contains("unsafe {") || code.contains("unsafe impl")) {
                continue;
            }
            let from = index.saturating_sub(SAFETY_WINDOW);
            if !lines[from..=index].iter().any(|line| line.contains("SAFETY:")) {
                unexplained.push(format!("{name}:{}", index + 1));
            }
        }
    }
    assert!(unexplained.is_empty(), "unsafe without a SAFETY: comment at {unexplained:?}");
}

/// The top-level module a source file belongs to (`src/rules/lua.rs` is `rules`); `None` for the
/// crate roots and for test files.
fn module_of(name: &str) -> Option<&str> {
    let path = name.strip_prefix("src/")?;
    if path == "lib.rs" || path == "main.rs" || path.ends_with("/tests.rs") || path.contains("/tests/") {
        return None;
    }
    Some(path.split('/').next()?.trim_end_matches(".rs"))
}

/// The library code of a file: its text up to a `#[cfg(test)]` module, without comments.
fn library_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .windows(2)
        .position(|pair| pair[0].trim() == "#[cfg(test)]" && pair[1].trim_start().starts_with("mod "))
        .unwrap_or(lines.len());
    lines.into_iter().take(end).enumerate().map(|(index, line)| (index + 1, code(line)))
}

#[test]
fn imports_run_down_the_layers_and_never_in_a_circle() {
    let rank: Vec<&str> = LAYERS.iter().flat_map(|(_, modules)| modules.iter().copied()).collect();
    let position = |module: &str| rank.iter().position(|known| *known == module);
    let mut problems = Vec::new();
    for (name, text) in all_sources() {
        let Some(module) = module_of(&name) else { continue };
        let Some(own) = position(module) else {
            problems.push(format!("{name}: module `{module}` is in no layer of tests/tidy.rs"));
            continue;
        };
        for (line, code) in library_lines(&text) {
            for (at, _) in code.match_indices("crate::") {
                let used: String = code[at + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if used == module || used.is_empty() {
                    continue;
                }
                match position(&used) {
                    Some(theirs) if theirs < own => {}
                    Some(_) => {
                        problems.push(format!("{name}:{line}: `{module}` uses `{used}`, which is above it"))
                    }
                    None => problems.push(format!("{name}:{line}: `{used}` is in no layer")),
                }
            }
        }
    }
    assert!(problems.is_empty(), "imports against the layer order:\n{}", problems.join("\n"));
}
