//! One generated list file: what the current file holds (its generated entries per label and the
//! section kept by hand), the new file's text, and writing it atomically.
//!
//! A generated file is a header that names its sources and the fetch time, the fetched entries,
//! then a marker line after which everything is kept by hand and copied unchanged by the next
//! update. In a network list without the marker (the shape of lists written before the updater),
//! entries whose label no source fetches count as kept by hand.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{self, Write};
use std::path::Path;

use super::formats::{Kind, Parsed};
use super::sanity;
use super::{ListError, Source};
use crate::lists::{List, section};
use crate::vocabulary::AiKind;

/// How the line after which a list file is kept by hand starts.
pub(super) const KEPT_PREFIX: &str = "# --- kept by hand";

/// The whole line, as written.
pub(super) const KEPT_MARKER: &str =
    "# --- kept by hand: `quagmire lists update` copies everything below this line unchanged ---";

/// What the current file holds.
#[derive(Debug, Default)]
pub(super) struct Current {
    /// Generated entries per label (`""` for lists without labels).
    pub(super) counts: HashMap<String, usize>,
    /// Lines kept by hand, verbatim.
    pub(super) kept: Vec<String>,
}

impl Current {
    /// Reads `text`, a list of `kind` whose generated labels are `labels`.
    pub(super) fn read(text: &str, kind: Kind, labels: &HashSet<&str>) -> Current {
        let mut current = Current::default();
        let mut lines = text.lines();
        for line in lines.by_ref() {
            if line.starts_with(KEPT_PREFIX) {
                current.kept = lines.map(str::to_string).collect();
                return current;
            }
            let entry = line.split('#').next().unwrap_or("").trim();
            if is_no_entry(kind, entry) {
                continue;
            }
            let label = match kind {
                Kind::Networks => match entry.split_whitespace().collect::<Vec<_>>().as_slice() {
                    [label, _] => *label,
                    _ => "",
                },
                Kind::Tokens | Kind::Asns => "",
            };
            if kind == Kind::Networks && !labels.contains(label) {
                current.kept.push(line.to_string());
            } else {
                *current.counts.entry(label.to_string()).or_default() += 1;
            }
        }
        current
    }

    /// Entries of the kept section, as `dedupe_key` sees them.
    fn kept_keys(&self, kind: Kind) -> HashSet<String> {
        self.kept
            .iter()
            .map(|line| line.split('#').next().unwrap_or("").trim())
            .filter(|entry| !is_no_entry(kind, entry))
            .map(|entry| dedupe_key(kind, entry))
            .collect()
    }
}

/// Whether a line's text (its comment cut off) holds no entry: empty, or a token list's section
/// header.
fn is_no_entry(kind: Kind, entry: &str) -> bool {
    entry.is_empty() || (kind == Kind::Tokens && section(entry).is_some())
}

/// What identifies an entry: a token in any case, an ASN by its number, a network line whole.
fn dedupe_key(kind: Kind, entry: &str) -> String {
    match kind {
        Kind::Tokens => entry.to_lowercase(),
        Kind::Asns => entry.split_whitespace().next().unwrap_or("").to_string(),
        Kind::Networks => entry.split_whitespace().collect::<Vec<_>>().join(" "),
    }
}

/// A source with what it yielded.
pub(super) struct FetchedSource<'a> {
    pub(super) source: &'a Source,
    pub(super) parsed: Parsed,
}

/// A new list file, checked.
#[derive(Debug)]
pub(super) struct Rendered {
    pub(super) text: String,
    /// Entries written per label, in order.
    pub(super) labels: Vec<(String, usize)>,
    /// Entries kept by hand.
    pub(super) kept: usize,
    /// Per source, in order: what it contributed.
    pub(super) sources: Vec<Contribution>,
    /// Entries kept by hand that no source has.
    pub(super) kept_only: usize,
    /// Entries written per kind of AI crawler, for a source that gives kinds.
    pub(super) kinds: Vec<(AiKind, usize)>,
    /// Entries written without a kind because the kind table does not map them.
    pub(super) unmapped: Vec<String>,
}

/// What one source gave a list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contribution {
    /// The source's URL.
    pub url: String,
    /// Entries it listed.
    pub entries: usize,
    /// Entries written because of it: in neither an earlier source nor the kept-by-hand section.
    pub added: usize,
}

/// The new text of list `file` from `fetched`, or why the current file must stay: a label with no
/// entries or fewer than half its current count, or a text that `List::parse` would not read as a
/// list of `kind`.
pub(super) fn render(
    file: &str,
    kind: Kind,
    current: &Current,
    fetched: &[FetchedSource<'_>],
    fetched_at: &str,
) -> Result<Rendered, ListError> {
    let kept_keys = current.kept_keys(kind);
    let mut groups: Vec<(&str, Vec<String>)> = Vec::new();
    let mut seen = HashSet::new();
    let mut sources: Vec<Contribution> = Vec::with_capacity(fetched.len());
    let mut fetched_keys = HashSet::new();
    // Each token's kind, for sources that give kinds: the file is written in sections by kind.
    let mut kinds: HashMap<String, AiKind> = HashMap::new();
    let mut unmapped = Vec::new();
    let kinded = fetched.iter().any(|item| !item.parsed.kinds.is_empty());
    for item in fetched {
        unmapped.extend(item.parsed.unmapped.iter().cloned());
        let mut added = 0;
        let label = item.source.label.as_str();
        let index = match groups.iter().position(|(known, _)| *known == label) {
            Some(index) => index,
            None => {
                groups.push((label, Vec::new()));
                groups.len() - 1
            }
        };
        for (position, entry) in item.parsed.entries.iter().enumerate() {
            let line = if label.is_empty() { entry.clone() } else { format!("{label} {entry}") };
            let key = dedupe_key(kind, &line);
            fetched_keys.insert(key.clone());
            if let Some(Some(entry_kind)) = item.parsed.kinds.get(position) {
                kinds.entry(key.clone()).or_insert(*entry_kind);
            }
            if !kept_keys.contains(&key) && seen.insert(key) {
                groups[index].1.push(line);
                added += 1;
            }
        }
        sources.push(Contribution {
            url: item.source.url.clone(),
            entries: item.parsed.entries.len(),
            added,
        });
    }
    // Counted first: the other checks (compiling the tokens among them) cost with the entries.
    let total: usize = groups.iter().map(|(_, entries)| entries.len()).sum();
    if let Some(reason) = sanity::count(kind, total) {
        return Err(ListError::Refused { label: "entries".into(), reason });
    }
    for (label, entries) in &groups {
        let before = current.counts.get(*label).copied().unwrap_or(0);
        let name = if label.is_empty() { "entries" } else { label };
        if entries.is_empty() || entries.len() * 2 < before {
            return Err(ListError::TooFew { label: name.to_string(), found: entries.len(), current: before });
        }
        let refused = |reason: String| ListError::Refused { label: name.to_string(), reason };
        if let Some(reason) = sanity::growth(entries.len(), before) {
            return Err(refused(reason));
        }
        let fetched = entries.iter().map(|line| line.rsplit(' ').next().unwrap_or(line));
        let problem = match kind {
            Kind::Networks => sanity::networks(fetched),
            Kind::Tokens => sanity::tokens(entries.iter().map(String::as_str)),
            Kind::Asns => None,
        };
        if let Some(reason) = problem {
            return Err(refused(reason));
        }
    }

    let mut text = String::new();
    text.push_str(&format!("# {file} -- written by `quagmire lists update` at {fetched_at}.\n"));
    text.push_str(
        "# The next update rewrites everything above the \"kept by hand\" line; add entries below it.\n",
    );
    text.push_str("# Licences and notes on each source: rules/lists/README.md in quagmire's source.\n#\n");
    for item in fetched {
        let label = if item.source.label.is_empty() { "all entries" } else { item.source.label.as_str() };
        let published =
            item.parsed.published.as_ref().map(|time| format!(", published {time}")).unwrap_or_default();
        text.push_str(&format!(
            "#   {label} <- {} ({}{published}, {} entries)\n",
            item.source.url,
            item.source.format.name(),
            item.parsed.entries.len()
        ));
    }
    text.push_str(match (kind, kinded) {
        (Kind::Networks, _) => "#\n# Format: '<label> <cidr>', one prefix per line.\n#\n",
        (Kind::Tokens, false) => "#\n# Format: one user-agent token per line.\n#\n",
        (Kind::Tokens, true) => {
            "#\n# Format: one user-agent token per line; `[kind]` starts the tokens of one kind of AI crawler\n\
             # (rules/ai-kinds.txt in quagmire's source maps each source entry's function to its kind).\n#\n"
        }
        (Kind::Asns, _) => "#\n# Format: '<asn> <name>', one per line.\n#\n",
    });
    let mut by_kind: Vec<(AiKind, usize)> = Vec::new();
    for (label, entries) in &groups {
        if !label.is_empty() {
            text.push_str(&format!("# {label}\n"));
        }
        if !kinded {
            for entry in entries {
                text.push_str(entry);
                text.push('\n');
            }
            continue;
        }
        // Entries without a kind come first, before any section, so that they carry none.
        let kind_of = |entry: &String| kinds.get(&dedupe_key(kind, entry)).copied();
        let unkinded: Vec<&String> = entries.iter().filter(|entry| kind_of(entry).is_none()).collect();
        if !unkinded.is_empty() {
            text.push_str("# Without a kind: rules/ai-kinds.txt does not map their function yet.\n");
            for entry in unkinded {
                text.push_str(entry);
                text.push('\n');
            }
        }
        for section_kind in AiKind::ALL {
            let of_kind: Vec<&String> =
                entries.iter().filter(|entry| kind_of(entry) == Some(section_kind)).collect();
            if of_kind.is_empty() {
                continue;
            }
            text.push_str(&format!("[{}]\n", section_kind.as_str()));
            for entry in &of_kind {
                text.push_str(entry);
                text.push('\n');
            }
            by_kind.push((section_kind, of_kind.len()));
        }
    }
    text.push_str(KEPT_MARKER);
    text.push('\n');
    for line in &current.kept {
        text.push_str(line);
        text.push('\n');
    }

    let list = List::parse(file, &text)?;
    let read_as = match list {
        List::Networks(_) => Kind::Networks,
        List::Tokens(_) => Kind::Tokens,
        List::Asns(_) => Kind::Asns,
        List::Paths(_) => return Err(ListError::WrongKind { read_as: "paths" }),
        List::Domains(_) => return Err(ListError::WrongKind { read_as: "domains" }),
    };
    if read_as != kind {
        return Err(ListError::WrongKind { read_as: list.kind().to_str().unwrap_or("another kind") });
    }
    let kept = kept_keys.len();
    let kept_only = kept_keys.difference(&fetched_keys).count();
    let labels = groups.into_iter().map(|(label, entries)| (label.to_string(), entries.len())).collect();
    Ok(Rendered { text, labels, kept, sources, kept_only, kinds: by_kind, unmapped })
}

/// Writes `text` to `path` through a temporary file in the same folder and a rename, so a reader
/// (the running service's reload) sees the old file or the new one, never part of one. The
/// temporary name does not end in `.txt`, so a reload in between never reads it as a list.
pub(super) fn write_atomically(path: &Path, text: &str) -> io::Result<()> {
    let folder = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    let temporary = folder.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut file = fs::File::create(&temporary)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        drop(file);
        fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    written
}

pub(super) use crate::support::numbers::rfc3339;
