//! Reading access logs: files (plain or gzip, told apart by their first bytes) or standard
//! input, one line at a time, in bounded memory however long a line is.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use flate2::read::MultiGzDecoder;

/// The longest line kept; a longer one is read past and reported, never held whole.
pub(crate) const MAX_LINE: usize = 1 << 20;

/// Where lines come from: a file, or `-` for standard input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A file.
    File(PathBuf),
    /// Standard input.
    Stdin,
}

impl Source {
    /// `-` is standard input; anything else a file.
    pub fn from_arg(arg: &Path) -> Source {
        if arg == Path::new("-") { Source::Stdin } else { Source::File(arg.to_path_buf()) }
    }

    /// How it is named in messages.
    pub fn name(&self) -> String {
        match self {
            Source::File(path) => path.display().to_string(),
            Source::Stdin => "standard input".into(),
        }
    }

    /// The file's size in bytes (as stored: compressed for gzip); `None` for standard input.
    pub fn size(&self) -> Option<u64> {
        match self {
            Source::File(path) => std::fs::metadata(path).ok().map(|meta| meta.len()),
            Source::Stdin => None,
        }
    }
}

/// A source cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {source_name}: {error}")]
pub struct InputError {
    /// The source.
    pub source_name: String,
    /// Why.
    #[source]
    pub error: io::Error,
}

/// One line, or what was wrong with it.
pub(crate) enum Line<'b> {
    /// The line, without its newline; invalid UTF-8 is replaced.
    Text(std::borrow::Cow<'b, str>),
    /// Longer than [`MAX_LINE`]; this many bytes were skipped.
    TooLong(u64),
}

/// A source's lines.
pub(crate) struct Lines {
    reader: Box<dyn BufRead>,
    buffer: Vec<u8>,
    name: String,
    failed: bool,
}

impl Lines {
    /// Opens `source`; `read` counts the bytes read from it as stored, for a progress bar.
    pub(crate) fn open(source: &Source, read: Arc<AtomicU64>) -> Result<Lines, InputError> {
        let name = source.name();
        let error = |error| InputError { source_name: name.clone(), error };
        let raw: Box<dyn Read> = match source {
            Source::File(path) => Box::new(File::open(path).map_err(error)?),
            Source::Stdin => Box::new(io::stdin()),
        };
        let mut counted = BufReader::with_capacity(1 << 16, Counting { inner: raw, read });
        let gzip = counted.fill_buf().map_err(error)?.starts_with(&[0x1f, 0x8b]);
        let reader: Box<dyn BufRead> = if gzip {
            Box::new(BufReader::with_capacity(1 << 16, MultiGzDecoder::new(counted)))
        } else {
            Box::new(counted)
        };
        Ok(Lines { reader, buffer: Vec::with_capacity(4096), name, failed: false })
    }

    /// The next line; `None` at the end. After an error (a truncated or corrupt gzip file, a
    /// failing disk) there are no more lines.
    pub(crate) fn next_line(&mut self) -> Option<Result<Line<'_>, InputError>> {
        if self.failed {
            return None;
        }
        self.buffer.clear();
        let mut skipped = 0u64;
        loop {
            let available = match self.reader.fill_buf() {
                Ok(available) => available,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => {
                    self.failed = true;
                    return Some(Err(InputError { source_name: self.name.clone(), error }));
                }
            };
            if available.is_empty() {
                if self.buffer.is_empty() && skipped == 0 {
                    return None;
                }
                break;
            }
            let (chunk, found) = match memchr::memchr(b'\n', available) {
                Some(at) => (&available[..at], true),
                None => (available, false),
            };
            let used = chunk.len() + usize::from(found);
            if skipped > 0 || self.buffer.len() + chunk.len() > MAX_LINE {
                skipped += (self.buffer.len() + chunk.len()) as u64;
                self.buffer.clear();
            } else {
                self.buffer.extend_from_slice(chunk);
            }
            self.reader.consume(used);
            if found {
                break;
            }
        }
        if skipped > 0 {
            return Some(Ok(Line::TooLong(skipped)));
        }
        if self.buffer.last() == Some(&b'\r') {
            self.buffer.pop();
        }
        Some(Ok(Line::Text(String::from_utf8_lossy(&self.buffer))))
    }
}

/// Counts the bytes read through it.
struct Counting {
    inner: Box<dyn Read>,
    read: Arc<AtomicU64>,
}

impl Read for Counting {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}
