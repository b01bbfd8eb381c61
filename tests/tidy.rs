//! House rules that hold for every source file, checked on the tree as it is:
//! - every `src/**/*.rs` starts with a `//!` doc saying what it owns;
//! - `unsafe` appears only in the files listed here, each of which says why at its top;
//! - every `unsafe` block and `unsafe impl` has a `SAFETY:` comment just above it (or on its line);
//! - every `crate::` path in library code (grouped ones too) runs down the layer order
//!   ARCHITECTURE.md states ([`LAYERS`]), never up or across to a module listed after it, so no
//!   two top-level modules import each other, however indirectly, and the leaves ([`LEAVES`])
//!   import nothing outside themselves;
//! - inside each folder (`src/http/`, `src/rules/`, ...), the sibling modules' imports of each
//!   other (`super::x`, `crate::folder::x`) form no circle.

use std::path::{Path, PathBuf};

/// The only files that may contain `unsafe`, and why each needs it.
const UNSAFE_FILES: &[(&str, &str)] = &[
    ("src/trap/generator/prefetch.rs", "a prefetch hint, which std has no safe form of"),
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
    ("vocabulary and helpers", &["vocabulary", "support", "client", "observe"]),
    ("data", &["lists", "trap", "enrich"]),
    ("state and facts", &["client_state", "facts"]),
    ("components", &["verify", "rules", "challenge"]),
    ("settings", &["config"]),
    ("assembly", &["app"]),
    ("front doors", &["verdict", "http", "service", "tools"]),
];

/// Top-level modules that import nothing of the crate outside themselves: the shared words and
/// the leaf helpers, which every layer may use because they know no verdict or trap.
const LEAVES: &[&str] = &["vocabulary", "support"];

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

/// The module path of a library source file (`src/rules/lua.rs` is `rules::lua`, `src/rules.rs`
/// is `rules`); `None` for the crate roots and for test files.
fn module_path(name: &str) -> Option<Vec<String>> {
    let path = name.strip_prefix("src/")?;
    if path == "lib.rs" || path == "main.rs" || path.ends_with("/tests.rs") || path.contains("/tests/") {
        return None;
    }
    Some(path.trim_end_matches(".rs").split('/').map(str::to_string).collect())
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

/// Every module path a file's library code names, as absolute paths from the crate root, with
/// the line it is on: `crate::a::b`, `super::x` (from the file's own module), `self::x`, and each
/// item of a group (`use crate::{a::X, b}`, `use super::{x, y}`, over several lines too). The
/// paths run on past the modules into items (`rules::lua::Lane`); callers cut them to modules.
fn named_paths(module: &[String], text: &str) -> Vec<(usize, Vec<String>)> {
    let code: Vec<(usize, &str)> = library_lines(text).collect();
    let joined: String = code.iter().map(|(_, line)| format!("{line}\n")).collect();
    let line_at = |offset: usize| joined[..offset].matches('\n').count() + 1;
    let mut found = Vec::new();
    let bytes = joined.as_bytes();
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    for start in ["crate::", "super::", "self::"] {
        for (at, _) in joined.match_indices(start) {
            if at > 0 && (is_word(bytes[at - 1]) || bytes[at - 1] == b':') {
                continue;
            }
            // The base the path starts from.
            let mut base: Vec<String> = match start {
                "crate::" => Vec::new(),
                "self::" => module.to_vec(),
                _ => module[..module.len().saturating_sub(1)].to_vec(),
            };
            let mut rest = &joined[at + start.len()..];
            // `super::super::x`.
            while let Some(after) = rest.strip_prefix("super::") {
                base.pop();
                rest = after;
            }
            for path in expand(rest) {
                let mut full = base.clone();
                full.extend(path);
                found.push((line_at(at), full));
            }
        }
    }
    found
}

/// The paths a `use` tail names: `a::b::C` is one, `{a::X, b, c::{d, e}}` several.
fn expand(rest: &str) -> Vec<Vec<String>> {
    let mut segments = Vec::new();
    let mut text = rest;
    loop {
        let word: String = text.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if !word.is_empty() {
            text = &text[word.len()..];
            segments.push(word);
            match text.strip_prefix("::") {
                Some(after) => text = after,
                None => return vec![segments],
            }
            continue;
        }
        let Some(inner) = text.strip_prefix('{') else { return vec![segments] };
        // The group's items, split at its own commas.
        let (mut depth, mut item_start, mut paths) = (0usize, 0, Vec::new());
        for (index, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    for tail in expand_items(&inner[item_start..index]) {
                        let mut path = segments.clone();
                        path.extend(tail);
                        paths.push(path);
                    }
                    return paths;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    for tail in expand_items(&inner[item_start..index]) {
                        let mut path = segments.clone();
                        path.extend(tail);
                        paths.push(path);
                    }
                    item_start = index + 1;
                }
                _ => {}
            }
        }
        return paths;
    }
}

/// One group item's paths (`self` names the group's own path).
fn expand_items(item: &str) -> Vec<Vec<String>> {
    let item = item.trim();
    if item.is_empty() {
        return Vec::new();
    }
    expand(item)
        .into_iter()
        .map(|path| path.into_iter().filter(|segment| segment != "self").collect())
        .collect()
}

/// The modules of folder `folder` (`["http"]` is `src/http/`): its files and subfolders, tests
/// left out.
fn folder_modules(folder: &[String]) -> Vec<String> {
    let dir =
        folder.iter().fold(Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), |dir, part| dir.join(part));
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut modules: Vec<String> = entries
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let name = path.file_stem()?.to_str()?.to_string();
            let module = path.is_dir() || path.extension().is_some_and(|ext| ext == "rs");
            (module && name != "tests").then_some(name)
        })
        .collect();
    modules.sort();
    modules.dedup();
    modules
}

#[test]
fn imports_run_down_the_layers_and_never_in_a_circle() {
    let rank: Vec<&str> = LAYERS.iter().flat_map(|(_, modules)| modules.iter().copied()).collect();
    let position = |module: &str| rank.iter().position(|known| *known == module);
    let top_level = folder_modules(&[]);
    let mut problems: Vec<String> = rank
        .iter()
        .filter(|listed| !top_level.iter().any(|module| module == *listed))
        .map(|listed| format!("`{listed}` is in a layer of tests/tidy.rs but is no module in src/"))
        .collect();
    // Inside each folder: which sibling module imports which.
    let mut edges: std::collections::BTreeMap<Vec<String>, std::collections::BTreeSet<(String, String)>> =
        Default::default();
    for (name, text) in all_sources() {
        let Some(module) = module_path(&name) else { continue };
        let Some(own) = position(&module[0]) else {
            problems.push(format!("{name}: module `{}` is in no layer of tests/tidy.rs", module[0]));
            continue;
        };
        for (line, path) in named_paths(&module, &text) {
            let Some(used) = path.first() else { continue };
            if *used != module[0] {
                if !top_level.contains(used) {
                    continue;
                }
                if LEAVES.contains(&module[0].as_str()) {
                    problems.push(format!("{name}:{line}: `{}` is a leaf but uses `{used}`", module[0]));
                    continue;
                }
                match position(used) {
                    Some(theirs) if theirs < own => {}
                    Some(_) => problems
                        .push(format!("{name}:{line}: `{}` uses `{used}`, which is above it", module[0])),
                    None => problems.push(format!("{name}:{line}: `{used}` is in no layer")),
                }
                continue;
            }
            // Within the same top-level module: the folder where the two paths part, and the
            // sibling module on each side of it.
            let common = module.iter().zip(&path).take_while(|(a, b)| a == b).count();
            let (Some(from), Some(to)) = (module.get(common), path.get(common)) else { continue };
            let folder = module[..common].to_vec();
            if folder_modules(&folder).contains(to) {
                edges.entry(folder).or_default().insert((from.clone(), to.clone()));
            }
        }
    }
    for (folder, edges) in &edges {
        if let Some(circle) = find_circle(edges) {
            problems.push(format!(
                "src/{}/: modules import each other in a circle: {}",
                folder.join("/"),
                circle.join(" -> ")
            ));
        }
    }
    assert!(problems.is_empty(), "imports against the layer order:\n{}", problems.join("\n"));
}

/// A circle among `edges` (module imports module), as the modules around it, if there is one.
fn find_circle(edges: &std::collections::BTreeSet<(String, String)>) -> Option<Vec<String>> {
    fn visit<'a>(
        node: &'a str,
        edges: &'a std::collections::BTreeSet<(String, String)>,
        path: &mut Vec<&'a str>,
        done: &mut std::collections::BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|known| *known == node) {
            let mut circle: Vec<String> = path[start..].iter().map(|s| s.to_string()).collect();
            circle.push(node.to_string());
            return Some(circle);
        }
        if !done.insert(node) {
            return None;
        }
        path.push(node);
        for (_, to) in edges.iter().filter(|(from, _)| from == node) {
            if let Some(circle) = visit(to, edges, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        None
    }
    let mut done = std::collections::BTreeSet::new();
    edges.iter().find_map(|(from, _)| visit(from, edges, &mut Vec::new(), &mut done))
}

#[test]
fn the_import_scanner_reads_groups_super_and_paths_over_lines() {
    let module = ["http".to_string(), "challenge".to_string()];
    let text = "use super::{forwarded, verdict::page};\nuse crate::{\n    app::App,\n    rules::{Compiled, lua},\n};\nfn f() { super::super::numbers::below(1); self::inner::x(); }\n";
    let paths: Vec<String> = named_paths(&module, text)
        .into_iter()
        .map(|(line, path)| format!("{line}:{}", path.join("::")))
        .collect();
    assert_eq!(
        paths,
        [
            "2:app::App",
            "2:rules::Compiled",
            "2:rules::lua",
            "1:http::forwarded",
            "1:http::verdict::page",
            "6:numbers::below",
            "6:http::challenge::inner::x",
        ]
    );
    let circle: std::collections::BTreeSet<(String, String)> =
        [("a", "b"), ("b", "c"), ("c", "a")].map(|(a, b)| (a.to_string(), b.to_string())).into();
    assert_eq!(find_circle(&circle).unwrap().len(), 4);
    let line: std::collections::BTreeSet<(String, String)> =
        [("a", "b"), ("b", "c")].map(|(a, b)| (a.to_string(), b.to_string())).into();
    assert_eq!(find_circle(&line), None);
}
