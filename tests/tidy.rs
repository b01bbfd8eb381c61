//! House rules that hold for every source file, checked on the tree as it is:
//! - every `src/**/*.rs` starts with a `//!` doc saying what it owns;
//! - `unsafe` appears only in the files listed here, each of which says why at its top;
//! - every `unsafe` block and `unsafe impl` has a `SAFETY:` comment just above it (or on its line).

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

#[test]
fn unsafe_code_lives_only_in_the_listed_files() {
    let allowed: Vec<&str> = UNSAFE_FILES.iter().map(|(file, _)| *file).collect();
    let offending: Vec<String> = all_sources()
        .into_iter()
        .filter(|(name, text)| {
            !allowed.contains(&name.as_str()) && text.lines().any(|line| code(line).contains("unsafe"))
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
