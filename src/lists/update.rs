//! Lists that stay fresh: fetching the crawler ranges, user-agent tokens and ASNs their
//! publishers maintain, and rewriting the list files built from them, for `quagmire lists update`
//! and for `serve`'s schedule (`lists { refresh-hours }`).
//!
//! Each list file is built from one or more sources (a URL, a [`Format`], and for network lists
//! the label its prefixes get). A list is rewritten only when every one of its sources was
//! fetched and read, each label has at least half the entries it had, and the new text reads back
//! through [`List::parse`](crate::lists::List::parse) as the same kind of list; otherwise
//! the current file stays as it is. Files are replaced by a rename, so the service's reload (on
//! file change) reads the old list or the new one, never half of one. Fetching runs on the async
//! runtime and the rest on the blocking pool, so a refresh never holds a verdict.

mod file;
pub(crate) mod formats;
mod kinds;
pub mod sanity;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::lists::{DEFAULT_LISTS, ListFileError};
use crate::support::outbound::{Fetcher, LIST_REDIRECTS, Options};
pub(crate) use formats::{Format, Kind};

/// The User-Agent of `lists update`'s requests.
const USER_AGENT: &str = concat!("quagmire/", env!("CARGO_PKG_VERSION"), " (lists update)");

/// Most bytes read from one source. The largest published file (Google's special crawlers) is
/// tens of kilobytes; a body this large is not a list.
pub(crate) const MAX_SOURCE_BYTES: usize = 16 << 20;

/// Where the lists come from and how often `serve` refreshes them.
#[derive(Clone, Debug, PartialEq)]
pub struct ListsConfig {
    /// How often `serve` refreshes the lists; `None` is never (the default).
    pub refresh: Option<Duration>,
    /// Longest one source may take, connecting, redirects and body included.
    pub timeout: Duration,
    /// The sources, in order; the embedded default config lists the publishers' own URLs.
    pub sources: Vec<Source>,
}

/// One published source of list entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// The list file it fills, without `.txt` (`search-engines`).
    pub list: String,
    /// The label of its entries in a network list (`Googlebot`); empty for other kinds.
    pub label: String,
    /// How the published file is laid out.
    pub format: Format,
    /// Where it is published.
    pub url: String,
}

/// Why a list keeps its current file.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    /// Sources that could not be fetched or read.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Sources(Vec<SourceError>),
    /// A label lost more than half its entries, or has none.
    #[error("{label}: {found} entries, fewer than half of the {current} in the current list")]
    TooFew {
        /// The label (or `entries` for lists without labels).
        label: String,
        /// Entries fetched.
        found: usize,
        /// Entries in the current file.
        current: usize,
    },
    /// What the source published cannot be right (a prefix too wide for a crawler, a browser's
    /// own token in a crawler list, a list grown past reason); the last good list stays.
    #[error("{label}: refused: {reason}")]
    Refused {
        /// The label (or `entries` for lists without labels).
        label: String,
        /// Why.
        reason: String,
    },
    /// The new text does not read back as a list.
    #[error("the new list does not read back: {0}")]
    RoundTrip(#[from] ListFileError),
    /// The new text would read back as another kind of list.
    #[error("the new list would read back as {read_as}")]
    WrongKind {
        /// The kind it would be read as.
        read_as: &'static str,
    },
    /// The current file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The new file cannot be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// A source that failed: its URL and what went wrong.
#[derive(Debug, thiserror::Error)]
#[error("{url}: {message}")]
pub struct SourceError {
    /// The source's URL.
    pub url: String,
    /// What went wrong (HTTP status, timeout, invalid JSON with its line and column, ...).
    pub message: String,
}

/// What an update did to one list.
#[derive(Debug)]
pub struct ListReport {
    /// The file name (`search-engines.txt`).
    pub file: String,
    /// The entries written, or why the current file stays.
    pub result: Result<Written, ListError>,
    /// Not written, and the folder has no file for it: the rules use the embedded copy.
    pub embedded_in_use: bool,
}

/// A list file written.
#[derive(Debug)]
pub struct Written {
    /// Entries written per label (one unnamed label for lists without labels).
    pub labels: Vec<(String, usize)>,
    /// Entries kept by hand.
    pub kept: usize,
    /// Entries kept by hand that no source has: what the hand-kept section adds.
    pub kept_only: usize,
    /// What each source contributed, in the order they are configured.
    pub sources: Vec<file::Contribution>,
    /// Written from the embedded copy, as the folder had none (a list without sources).
    pub embedded: bool,
    /// Entries written per kind of AI crawler (for a source that gives kinds).
    pub kinds: Vec<(crate::vocabulary::AiKind, usize)>,
    /// Entries written without a kind: the kind table (rules/ai-kinds.txt) does not map their
    /// function. Each is the token with the function it gave.
    pub unmapped: Vec<String>,
}

impl fmt::Display for ListReport {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.result {
            Ok(written) if written.embedded => write!(out, "{}: written from the embedded copy", self.file),
            Ok(written) => {
                let total: usize = written.labels.iter().map(|(_, count)| count).sum();
                let labels: Vec<String> = written
                    .labels
                    .iter()
                    .filter(|(label, _)| !label.is_empty())
                    .map(|(label, count)| format!("{label} {count}"))
                    .collect();
                write!(out, "{}: written, {total} entries", self.file)?;
                if !labels.is_empty() {
                    write!(out, " ({})", labels.join(", "))?;
                }
                write!(out, ", {} kept by hand ({} in no source)", written.kept, written.kept_only)?;
                if !written.kinds.is_empty() {
                    let kinds: Vec<String> = written
                        .kinds
                        .iter()
                        .map(|(kind, count)| format!("{} {count}", kind.as_str()))
                        .collect();
                    write!(out, "\n  by kind: {}", kinds.join(", "))?;
                }
                if !written.unmapped.is_empty() {
                    write!(
                        out,
                        "\n  {} without a kind (add their function to rules/ai-kinds.txt; until then they are trapped whatever the preferences say): {}",
                        written.unmapped.len(),
                        written.unmapped.join(", ")
                    )?;
                }
                // Lists whose sources carry no labels (ASNs, tokens) say what each source added.
                if written.labels.iter().all(|(label, _)| label.is_empty()) {
                    for source in &written.sources {
                        write!(
                            out,
                            "\n  {}: {} entries, {} added",
                            source.url, source.entries, source.added
                        )?;
                    }
                }
                Ok(())
            }
            Err(error) if self.embedded_in_use => write!(
                out,
                "{}: not written: {error}; the folder has no such list, so the rules use the embedded copy",
                self.file
            ),
            Err(error) => write!(out, "{}: kept the current file: {error}", self.file),
        }
    }
}

/// Fetches every source and rewrites each list in `folder` whose sources all succeeded. Lists in
/// the embedded defaults that have no sources and no file in `folder` are written from the
/// embedded copy, so an empty folder becomes a complete one. Never fails as a whole: each list
/// reports its own outcome.
pub async fn update(folder: &Path, config: &ListsConfig) -> Vec<ListReport> {
    let mut urls: Vec<&str> = config.sources.iter().map(|source| source.url.as_str()).collect();
    urls.sort_unstable();
    urls.dedup();
    let bodies: HashMap<String, Result<bytes::Bytes, String>> = match Fetcher::new(Options {
        timeout: config.timeout,
        max_bytes: MAX_SOURCE_BYTES,
        redirects: LIST_REDIRECTS,
        // The sources are the operator's own URLs, a mirror on the local network among them.
        public_only: false,
        user_agent: USER_AGENT,
    }) {
        Ok(fetcher) => {
            let fetches = urls.iter().map(|url| {
                let fetcher = fetcher.clone();
                async move { (url.to_string(), fetcher.get(url).await) }
            });
            futures_util::future::join_all(fetches).await.into_iter().collect()
        }
        Err(error) => urls.iter().map(|url| (url.to_string(), Err(error.clone()))).collect(),
    };
    let folder = folder.to_path_buf();
    let sources = config.sources.clone();
    let written = tokio::task::spawn_blocking(move || write_lists(&folder, &sources, &bodies)).await;
    written.unwrap_or_default()
}

/// Reads the fetched bodies and writes the lists (blocking: parsing and file I/O).
fn write_lists(
    folder: &Path,
    sources: &[Source],
    bodies: &HashMap<String, Result<bytes::Bytes, String>>,
) -> Vec<ListReport> {
    let fetched_at = file::rfc3339(
        SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |since| since.as_secs()),
    );
    let mut lists: Vec<&str> = Vec::new();
    for source in sources {
        if !lists.contains(&source.list.as_str()) {
            lists.push(&source.list);
        }
    }
    let mut reports: Vec<ListReport> = lists
        .iter()
        .map(|list| {
            let own: Vec<&Source> = sources.iter().filter(|source| source.list == *list).collect();
            let file = format!("{list}.txt");
            let path = folder.join(&file);
            let result = write_list(&path, &file, &own, bodies, &fetched_at);
            let embedded_in_use =
                result.is_err() && !path.exists() && DEFAULT_LISTS.iter().any(|(name, _)| *name == file);
            ListReport { file, result, embedded_in_use }
        })
        .collect();
    for (file, text) in DEFAULT_LISTS {
        let path = folder.join(file);
        if lists.iter().any(|list| format!("{list}.txt") == *file) || path.exists() {
            continue;
        }
        let result = file::write_atomically(&path, text)
            .map(|()| Written {
                labels: Vec::new(),
                kept: 0,
                kept_only: 0,
                sources: Vec::new(),
                embedded: true,
                kinds: Vec::new(),
                unmapped: Vec::new(),
            })
            .map_err(|source| ListError::Write { path, source });
        reports.push(ListReport { file: file.to_string(), result, embedded_in_use: false });
    }
    reports
}

fn write_list(
    path: &Path,
    file: &str,
    sources: &[&Source],
    bodies: &HashMap<String, Result<bytes::Bytes, String>>,
    fetched_at: &str,
) -> Result<Written, ListError> {
    let mut fetched = Vec::new();
    let mut failed = Vec::new();
    for source in sources {
        let parsed = match bodies.get(&source.url) {
            Some(Ok(body)) => source.format.parse(body),
            Some(Err(message)) => Err(message.clone()),
            None => Err("not fetched".to_string()),
        };
        // Refused as early as it can be, before the entries are copied and compared.
        if let Ok(parsed) = &parsed
            && let Some(reason) = sanity::count(source.format.kind(), parsed.entries.len())
        {
            let label = if source.label.is_empty() { "entries" } else { source.label.as_str() };
            return Err(ListError::Refused { label: label.to_string(), reason });
        }
        match parsed {
            Ok(parsed) => fetched.push(file::FetchedSource { source, parsed }),
            Err(message) => {
                if !failed.iter().any(|failure: &SourceError| failure.url == source.url) {
                    failed.push(SourceError { url: source.url.clone(), message });
                }
            }
        }
    }
    if !failed.is_empty() {
        return Err(ListError::Sources(failed));
    }
    let kind = sources.first().map_or(Kind::Tokens, |source| source.format.kind());
    let current_text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => DEFAULT_LISTS
            .iter()
            .find(|(name, _)| *name == file)
            .map_or_else(String::new, |(_, text)| text.to_string()),
        Err(source) => return Err(ListError::Read { path: path.to_path_buf(), source }),
    };
    let labels: HashSet<&str> = sources.iter().map(|source| source.label.as_str()).collect();
    let current = file::Current::read(&current_text, kind, &labels);
    let rendered = file::render(file, kind, &current, &fetched, fetched_at)?;
    file::write_atomically(path, &rendered.text)
        .map_err(|source| ListError::Write { path: path.to_path_buf(), source })?;
    Ok(Written {
        labels: rendered.labels,
        kept: rendered.kept,
        kept_only: rendered.kept_only,
        sources: rendered.sources,
        embedded: false,
        kinds: rendered.kinds,
        unmapped: rendered.unmapped,
    })
}

#[cfg(test)]
mod tests;
