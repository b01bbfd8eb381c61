//! The growing page buffer: a page written into the caller's `Vec`, with zeroed slack past its
//! end so that words are copied as fixed-size moves.

use super::markov::{COPY_BYTES, Chain, WordId, copy_word};

/// Zeroed room a page keeps past what it has written: enough for most pages' every write, so
/// that the buffer grows once, and for a word copied as one `COPY_BYTES` move.
const SLACK: usize = 4096;

/// The page being written into the caller's buffer: `bytes[..len]` is the page; past it lies
/// zeroed slack of at least `COPY_BYTES` beyond any room asked for, so that a word can be
/// copied as one fixed-size move and the length advanced by its real size. Dropping the page
/// cuts the buffer back to what was written.
pub(in crate::trap::generator) struct Page<'a> {
    bytes: &'a mut Vec<u8>,
    len: usize,
}

impl<'a> Page<'a> {
    /// A page appended to `bytes`, which grows once by `expected` bytes and the slack.
    pub(super) fn new(bytes: &'a mut Vec<u8>, expected: usize) -> Self {
        let len = bytes.len();
        bytes.resize(len + expected + SLACK, 0);
        Page { bytes, len }
    }

    /// Bytes written so far (including what the buffer held before the page).
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The unwritten rest, at least `n + COPY_BYTES` long.
    #[inline]
    pub(super) fn room(&mut self, n: usize) -> &mut [u8] {
        if self.len + n + COPY_BYTES > self.bytes.len() {
            self.bytes.resize(self.len + n + SLACK, 0);
        }
        &mut self.bytes[self.len..]
    }

    #[inline]
    pub(super) fn push(&mut self, bytes: &[u8]) {
        let n = bytes.len();
        self.room(n)[..n].copy_from_slice(bytes);
        self.len += n;
    }

    #[inline]
    pub(super) fn byte(&mut self, byte: u8) {
        self.room(1)[0] = byte;
        self.len += 1;
    }

    /// Writes the first `len` bytes of `text` (a word from the chain's arena).
    #[inline]
    pub(super) fn word(&mut self, text: &[u8], len: usize) {
        copy_word(self.room(len), 0, text, 0, len);
        self.len += len;
    }

    /// Writes the words `ids` as running text (see `Chain::write_run`).
    #[inline]
    pub(super) fn run(&mut self, chain: &Chain, ids: &[WordId]) {
        let bytes = chain.run_bytes(ids);
        self.len += chain.write_run(self.room(bytes), ids);
    }

    /// Appends with a function that appends to a `Vec` (a trap URL): it writes past the slack,
    /// and the result is moved down to the page's end.
    pub(super) fn append_with(&mut self, append: impl FnOnce(&mut Vec<u8>)) -> std::ops::Range<usize> {
        let end = self.bytes.len();
        append(self.bytes);
        let n = self.bytes.len() - end;
        if self.len + n + COPY_BYTES <= end {
            self.bytes.copy_within(end..end + n, self.len);
            self.bytes.truncate(end);
        } else {
            // Not enough slack left: close the gap, then restore the slack.
            self.bytes.drain(self.len..end);
            self.bytes.resize(self.len + n + SLACK, 0);
        }
        self.len += n;
        self.len - n..self.len
    }

    /// Writes again the bytes written in `range`.
    pub(super) fn repeat(&mut self, range: std::ops::Range<usize>) {
        let n = range.len();
        self.room(n);
        self.bytes.copy_within(range, self.len);
        self.len += n;
    }

    /// The bytes written in `range`.
    pub(super) fn written(&self, range: std::ops::Range<usize>) -> &[u8] {
        &self.bytes[range]
    }
}

impl Drop for Page<'_> {
    fn drop(&mut self) {
        self.bytes.truncate(self.len);
    }
}
