//! The manual is checked against the tree it describes:
//! - every relative link and `#anchor` in README.md and docs/*.md resolves (the file exists, the
//!   heading exists);
//! - every key the config reader accepts (`src/config/kdl.rs`) is in the configuration reference,
//!   and every key the reference names is one the reader accepts;
//! - every fact the rules see (`src/rules/driver.lua`) is in the rules reference, and every
//!   `r.<fact>` the reference names exists.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// README.md and every page of docs/.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// Lines outside fenced code blocks, with their numbers.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            lines.push((index + 1, line));
        }
    }
    lines
}

/// GitHub's anchor for a heading: lowercase, punctuation other than `-` and `_` dropped, spaces
/// as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    prose(text)
        .into_iter()
        .filter_map(|(_, line)| line.strip_prefix('#'))
        .map(|heading| slug(heading.trim_start_matches('#')))
        .collect()
}

/// `(target, line)` of every `[text](target)` link in prose.
fn links(text: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    for (number, line) in prose(text) {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            found.push((after[..end].to_string(), number));
            rest = &after[end..];
        }
    }
    found
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = read(&page);
        let name = page.strip_prefix(root()).unwrap().display().to_string();
        for (target, line) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let file = if path.is_empty() { page.clone() } else { page.parent().unwrap().join(path) };
            if !file.exists() {
                broken.push(format!("{name}:{line}: {target}: no such file"));
                continue;
            }
            if !anchor.is_empty() && !anchors(&read(&file)).contains(anchor) {
                broken.push(format!("{name}:{line}: {target}: no such heading"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The keys the config reader accepts, as (block path, key): `("", "listen")`,
/// `("trap { drip", "enabled")`; read from the lists of known keys in `src/config/kdl.rs`.
fn accepted_keys() -> Vec<(String, String)> {
    let source = read(&root().join("src/config/kdl.rs"));
    let mut keys = Vec::new();
    let mut rest = source.as_str();
    while let Some(at) = rest.find("_KEYS: &[&str] =") {
        let name_start = rest[..at].rfind("const ").unwrap() + "const ".len();
        let block = match &rest[name_start..at] {
            "TOP" => String::new(),
            "DRIP" => "trap { drip".to_string(),
            other => other.to_lowercase().replace('_', "-"),
        };
        let body = &rest[at + "_KEYS: &[&str] =".len()..];
        let list = &body[body.find("&[").unwrap() + 2..body.find("];").unwrap()];
        for key in list.split(',').map(|key| key.trim().trim_matches('"')).filter(|key| !key.is_empty()) {
            keys.push((block.clone(), key.to_string()));
        }
        rest = &body[body.find("];").unwrap()..];
    }
    assert!(keys.len() > 40, "the key lists were not found in kdl.rs: {keys:?}");
    keys
}

#[test]
fn every_config_key_is_documented_and_every_documented_key_exists() {
    let reference = read(&root().join("docs/configuration.md"));
    let rows: Vec<&str> = reference.lines().filter(|line| line.starts_with("| `")).collect();
    let accepted = accepted_keys();
    let mut missing = Vec::new();
    for (block, key) in &accepted {
        let documented = rows.iter().any(|row| {
            let cell = row.split(" | ").next().unwrap_or("");
            if block.is_empty() {
                cell == format!("| `{key}`")
            } else {
                cell.contains(&format!("{block} {{"))
                    && (cell.contains(&format!("{{ {key} ")) || cell.contains(&format!("{{ {key}}}")))
            }
        });
        // Blocks are documented by their keys.
        let is_block =
            accepted.iter().any(|(inner, _)| inner == key || inner.ends_with(&format!("{{ {key}")));
        if !documented && !is_block {
            missing.push(if block.is_empty() { key.clone() } else { format!("{block} {{ {key} }}") });
        }
    }
    assert!(
        missing.is_empty(),
        "keys the reader accepts but docs/configuration.md does not document:\n{}",
        missing.join("\n")
    );

    // Each row's keys: `block { key ...` and its shorthand `{ key }` for the same block.
    let mut gone = Vec::new();
    for row in rows {
        let cell = row.split(" | ").next().unwrap_or("").trim_start_matches("| ");
        let mut block = String::new();
        for part in cell.split('`').filter(|part| !part.trim().is_empty() && !part.contains(',')) {
            let words: Vec<&str> = part.split_whitespace().collect();
            let key = match words.as_slice() {
                [name] => name.to_string(),
                [outer, "{", inner, "{", key, ..] => {
                    block = format!("{outer} {{ {inner}");
                    key.to_string()
                }
                [outer, "{", key, ..] if *outer != "{" => {
                    block = outer.to_string();
                    key.to_string()
                }
                ["{", key, ..] => key.to_string(),
                _ => continue,
            };
            let scope = if words.len() == 1 { String::new() } else { block.clone() };
            if !accepted.iter().any(|(known_block, known)| *known_block == scope && *known == key) {
                gone.push(format!("{cell}: `{key}` in `{scope}`"));
            }
        }
    }
    assert!(gone.is_empty(), "documented keys the reader does not accept:\n{}", gone.join("\n"));
}

/// The facts the rules see: the request fields the driver sets or cuts on first use.
fn facts() -> BTreeSet<String> {
    let driver = read(&root().join("src/rules/driver.lua"));
    let mut facts = BTreeSet::new();
    for line in driver.lines() {
        for part in line.split("request.").skip(1) {
            let name: String = part.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !name.is_empty() && name != "header" {
                facts.insert(name);
            }
        }
    }
    let lazy = &driver[driver.find("local lazy = {").unwrap()..];
    let lazy = &lazy[..lazy.find("\n}\n").unwrap()];
    for line in lazy.lines().skip(1) {
        if let Some((name, _)) = line.trim().split_once(" = function") {
            facts.insert(name.to_string());
        }
    }
    assert!(facts.len() > 20, "{facts:?}");
    facts
}

#[test]
fn every_fact_is_documented_and_every_documented_fact_exists() {
    let reference = read(&root().join("docs/rules.md"));
    let facts = facts();
    let missing: Vec<&String> =
        facts.iter().filter(|fact| !reference.contains(&format!("`r.{fact}`"))).collect();
    assert!(missing.is_empty(), "facts docs/rules.md does not document: {missing:?}");
    let mut named = BTreeSet::new();
    for part in reference.split("r.").skip(1) {
        let name: String = part.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
        named.insert(name);
    }
    // `r.` also ends words ("other.", "per."): only names written as facts count.
    let gone: Vec<&String> = named
        .iter()
        .filter(|name| reference.contains(&format!("`r.{name}`")) && !facts.contains(*name))
        .collect();
    assert!(gone.is_empty(), "docs/rules.md names facts the rules do not see: {gone:?}");
}
