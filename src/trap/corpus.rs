//! The text the Markov model learns from: the embedded default corpus and any files or folders
//! the config names: plain text, and a site's own HTML and Markdown, whose prose [`extract`]
//! takes out. Read once at start; nothing here runs on the request path.

pub(crate) mod extract;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::{fs, io};

/// `corpus/*.txt` gzipped by `build.rs`.
const EMBEDDED_GZ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/corpus.txt.gz"));

/// A corpus source that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    /// A file or folder could not be read.
    #[error("cannot read corpus {path}")]
    Read {
        /// The file or folder.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: io::Error,
    },
    /// A folder held no text, Markdown or HTML files.
    #[error("corpus folder {0} holds no .txt, .md, .markdown, .html or .htm files")]
    EmptyFolder(PathBuf),
    /// Nothing to train on: the embedded corpus is off and no path is given.
    #[error("no corpus: the embedded corpus is switched off and no corpus path is given")]
    Nothing,
}

/// The largest corpus file read (a regular file only): a book is a few megabytes, and the
/// embedded corpus is about 2 MB.
pub(crate) const MAX_FILE_BYTES: u64 = 64 << 20;

/// The embedded default corpus, decompressed.
pub fn embedded() -> String {
    let mut text = String::new();
    flate2::read::GzDecoder::new(EMBEDDED_GZ)
        .read_to_string(&mut text)
        .expect("the embedded corpus is valid gzipped UTF-8 (made by build.rs)");
    text
}

/// How much one source gave the corpus, for the start log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SourceReport {
    /// The embedded corpus, or the path as configured.
    pub source: String,
    /// Files read from it.
    pub files: usize,
    /// Words learned from it (after extraction).
    pub words: usize,
}

/// All corpus text: the embedded corpus if `embedded`, then every path in order (see
/// [`load_reporting`]).
pub fn load(embedded_corpus: bool, paths: &[PathBuf]) -> Result<String, CorpusError> {
    load_reporting(embedded_corpus, paths).map(|(text, _)| text)
}

/// All corpus text, and how many words came from where. A path may be a file or a folder, whose
/// `.txt`, `.md`/`.markdown` and `.html`/`.htm` files are read recursively in name order; the
/// prose of HTML and Markdown files is extracted ([`extract`]), other files are taken as plain
/// text. Invalid UTF-8 is replaced rather than refused, since downloaded books are often Latin-1.
pub(crate) fn load_reporting(
    embedded_corpus: bool,
    paths: &[PathBuf],
) -> Result<(String, Vec<SourceReport>), CorpusError> {
    if !embedded_corpus && paths.is_empty() {
        return Err(CorpusError::Nothing);
    }
    let mut reports = Vec::new();
    let mut text = String::new();
    if embedded_corpus {
        text = embedded();
        reports.push(SourceReport { source: "embedded".into(), files: 1, words: words(&text) });
    }
    for path in paths {
        let read_error = |source| CorpusError::Read { path: path.clone(), source };
        let before = text.len();
        let mut files = Vec::new();
        if fs::metadata(path).map_err(read_error)?.is_dir() {
            collect(path, &mut files)?;
            if files.is_empty() {
                return Err(CorpusError::EmptyFolder(path.clone()));
            }
            files.sort();
        } else {
            files.push(path.clone());
        }
        for file in &files {
            append_file(&mut text, file)?;
        }
        let words = words(&text[before..]);
        reports.push(SourceReport { source: path.display().to_string(), files: files.len(), words });
    }
    Ok((text, reports))
}

fn words(text: &str) -> usize {
    text.split_whitespace().count()
}

/// What kind of text a file holds, by its extension.
fn kind(path: &Path) -> Option<Kind> {
    let extension = path.extension()?.to_str()?.to_ascii_lowercase();
    match extension.as_str() {
        "txt" => Some(Kind::Text),
        "md" | "markdown" => Some(Kind::Markdown),
        "html" | "htm" => Some(Kind::Html),
        _ => None,
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Text,
    Markdown,
    Html,
}

fn append_file(text: &mut String, path: &Path) -> Result<(), CorpusError> {
    let bytes = crate::support::bounded_file::read(path, MAX_FILE_BYTES)
        .map_err(|source| CorpusError::Read { path: path.into(), source })?;
    let raw = String::from_utf8_lossy(&bytes);
    match kind(path) {
        Some(Kind::Html) => text.push_str(&extract::html_text(&raw)),
        Some(Kind::Markdown) => text.push_str(&extract::markdown_text(&raw)),
        // A named file of any other name is plain text, as it always was.
        Some(Kind::Text) | None => text.push_str(&raw),
    }
    text.push_str("\n\n");
    Ok(())
}

fn collect(folder: &Path, files: &mut Vec<PathBuf>) -> Result<(), CorpusError> {
    let read_error = |source| CorpusError::Read { path: folder.into(), source };
    for entry in fs::read_dir(folder).map_err(read_error)? {
        let path = entry.map_err(read_error)?.path();
        if path.is_dir() {
            collect(&path, files)?;
        } else if kind(&path).is_some() {
            files.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_corpus_is_large_english_prose() {
        let text = embedded();
        assert!(text.len() >= 2_000_000, "{} bytes", text.len());
        assert!(text.contains(" the "));
    }

    #[test]
    fn a_corpus_file_must_be_a_regular_file() {
        let error = load(false, &[PathBuf::from("/dev/zero")]).unwrap_err();
        assert!(error.to_string().contains("/dev/zero"), "{error}");
        let source = std::error::Error::source(&error).map(ToString::to_string).unwrap_or_default();
        assert_eq!(source, "not a regular file");
    }

    #[test]
    fn folders_are_read_recursively_and_files_by_name() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("sub")).unwrap();
        fs::write(dir.path().join("b.txt"), "second").unwrap();
        fs::write(dir.path().join("sub/a.txt"), "nested").unwrap();
        fs::write(dir.path().join("skip.json"), "skipped").unwrap();
        let single = dir.path().join("skip.json");
        let text = load(false, &[dir.path().into(), single]).unwrap();
        assert!(text.contains("second") && text.contains("nested"));
        assert_eq!(text.matches("skipped").count(), 1, "only the named file, not the folder's");
    }

    #[test]
    fn a_sites_html_and_markdown_give_their_prose_and_a_report() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("public")).unwrap();
        fs::write(
            dir.path().join("public/index.html"),
            "<html><body><nav>Home Blog About</nav><p>Our bakery opens at seven every morning.</p>\
             <footer>Copyright</footer></body></html>",
        )
        .unwrap();
        fs::write(
            dir.path().join("post.md"),
            "# Sourdough\n\nFeed the starter twice a day.\n\n```\ncode\n```\n",
        )
        .unwrap();
        let (text, report) = load_reporting(false, &[dir.path().into()]).unwrap();
        assert!(text.contains("Our bakery opens at seven every morning."), "{text}");
        assert!(text.contains("Feed the starter twice a day."), "{text}");
        for dropped in ["Home Blog About", "Copyright", "code"] {
            assert!(!text.contains(dropped), "{dropped} in {text}");
        }
        assert_eq!(report.len(), 1);
        assert_eq!((report[0].files, report[0].words), (2, 14), "{report:?}");
    }

    #[test]
    fn missing_and_empty_sources_are_errors_naming_the_path() {
        let err = load(false, &["/no/such/corpus".into()]).unwrap_err();
        assert!(err.to_string().contains("/no/such/corpus"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let err = load(false, &[dir.path().into()]).unwrap_err();
        assert!(matches!(err, CorpusError::EmptyFolder(_)), "{err}");
        assert!(matches!(load(false, &[]), Err(CorpusError::Nothing)));
    }
}
