//! The text the Markov model learns from: the embedded default corpus and any files or folders
//! the config names. Read once at start; nothing here runs on the request path.

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
    /// A folder held no `.txt` files.
    #[error("corpus folder {0} holds no .txt files")]
    EmptyFolder(PathBuf),
    /// Nothing to train on: the embedded corpus is off and no path is given.
    #[error("no corpus: the embedded corpus is switched off and no corpus path is given")]
    Nothing,
}

/// The embedded default corpus, decompressed.
pub fn embedded() -> String {
    let mut text = String::new();
    flate2::read::GzDecoder::new(EMBEDDED_GZ)
        .read_to_string(&mut text)
        .expect("the embedded corpus is valid gzipped UTF-8 (made by build.rs)");
    text
}

/// All corpus text: the embedded corpus if `embedded`, then every path in order. A path may be a
/// file (any name) or a folder, whose `.txt` files are read recursively in name order. Invalid
/// UTF-8 is replaced rather than refused, since downloaded books are often Latin-1.
pub fn load(embedded_corpus: bool, paths: &[PathBuf]) -> Result<String, CorpusError> {
    if !embedded_corpus && paths.is_empty() {
        return Err(CorpusError::Nothing);
    }
    let mut text = if embedded_corpus { embedded() } else { String::new() };
    for path in paths {
        let read_error = |source| CorpusError::Read { path: path.clone(), source };
        if fs::metadata(path).map_err(read_error)?.is_dir() {
            let mut files = Vec::new();
            collect_txt(path, &mut files)?;
            if files.is_empty() {
                return Err(CorpusError::EmptyFolder(path.clone()));
            }
            files.sort();
            for file in files {
                append_file(&mut text, &file)?;
            }
        } else {
            append_file(&mut text, path)?;
        }
    }
    Ok(text)
}

fn append_file(text: &mut String, path: &Path) -> Result<(), CorpusError> {
    let bytes = fs::read(path).map_err(|source| CorpusError::Read { path: path.into(), source })?;
    text.push_str(&String::from_utf8_lossy(&bytes));
    text.push_str("\n\n");
    Ok(())
}

fn collect_txt(folder: &Path, files: &mut Vec<PathBuf>) -> Result<(), CorpusError> {
    let read_error = |source| CorpusError::Read { path: folder.into(), source };
    for entry in fs::read_dir(folder).map_err(read_error)? {
        let path = entry.map_err(read_error)?.path();
        if path.is_dir() {
            collect_txt(&path, files)?;
        } else if path.extension().is_some_and(|ext| ext == "txt") {
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
    fn folders_are_read_recursively_and_files_by_name() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("sub")).unwrap();
        fs::write(dir.path().join("b.txt"), "second").unwrap();
        fs::write(dir.path().join("sub/a.txt"), "nested").unwrap();
        fs::write(dir.path().join("skip.md"), "skipped").unwrap();
        let single = dir.path().join("skip.md");
        let text = load(false, &[dir.path().into(), single]).unwrap();
        assert!(text.contains("second") && text.contains("nested"));
        assert_eq!(text.matches("skipped").count(), 1, "only the named file, not the folder's");
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
