//! The page layout: an ordinary-looking article page written straight into one output buffer.
//!
//! Head, site header with navigation, an article of headings, paragraphs, lists and quotes, a
//! "related" list and a footer. Every `href` is a minted trap URL, and every piece of corpus or URL
//! text goes through [`push_escaped`], so nothing in a corpus can inject markup.

use rand::Rng;

use super::PageSettings;
use super::markov::{COPY_BYTES, Chain, Position, WordId, copy_word};
use crate::numbers::{Decimal, below};
use crate::trap_url::TrapUrls;

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// Bytes the page still needs after the article body (related list, footer), per link and fixed.
const TAIL_BYTES_PER_LINK: usize = 110;
const TAIL_BYTES_FIXED: usize = 320;

/// Sentences walked side by side. A power of two, since the walk reduces lane indexes modulo it
/// (24 measured slower than 16 for that reason); 16 beat 8, and 32 walked more sentences that
/// the page end then drops for no clear gain.
const LANES: usize = 16;
/// The longest sentence, in words.
const MAX_SENTENCE_WORDS: usize = 60;

/// A pool of sentences walked side by side, handed out in order as the page needs them.
///
/// A walk is a chain of dependent reads, most of which miss the cache on a multi-megabyte
/// model, so walking one sentence at a time waits for one miss after another. Taking one step
/// in each of `LANES` sentences in turn lets their misses overlap. Sentences are walked to the
/// longest length any part of the page uses and cut when written.
pub(super) struct Walks {
    words: [[WordId; MAX_SENTENCE_WORDS]; LANES],
    lens: [usize; LANES],
    /// The next sentence to hand out; `LANES` when the pool is used up.
    next: usize,
}

impl Walks {
    pub(super) fn new() -> Self {
        Walks { words: [[WordId::default(); MAX_SENTENCE_WORDS]; LANES], lens: [0; LANES], next: LANES }
    }
}

/// Everything one page render needs; the RNG is the only source of variety.
pub(super) struct PageWriter<'a, R: Rng> {
    pub(super) chain: &'a Chain,
    pub(super) urls: &'a TrapUrls,
    pub(super) settings: &'a PageSettings,
    pub(super) rng: R,
    pub(super) out: Page<'a>,
    pub(super) walks: Walks,
}

/// Zeroed room a page keeps past what it has written: enough for most pages' every write, so
/// that the buffer grows once, and for a word copied as one `COPY_BYTES` move.
const SLACK: usize = 4096;

/// The page being written into the caller's buffer: `bytes[..len]` is the page; past it lies
/// zeroed slack of at least `COPY_BYTES` beyond any room asked for, so that a word can be
/// copied as one fixed-size move and the length advanced by its real size. Dropping the page
/// cuts the buffer back to what was written.
pub(super) struct Page<'a> {
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
    fn len(&self) -> usize {
        self.len
    }

    /// The unwritten rest, at least `n + COPY_BYTES` long.
    #[inline]
    fn room(&mut self, n: usize) -> &mut [u8] {
        if self.len + n + COPY_BYTES > self.bytes.len() {
            self.bytes.resize(self.len + n + SLACK, 0);
        }
        &mut self.bytes[self.len..]
    }

    #[inline]
    fn push(&mut self, bytes: &[u8]) {
        let n = bytes.len();
        self.room(n)[..n].copy_from_slice(bytes);
        self.len += n;
    }

    #[inline]
    fn byte(&mut self, byte: u8) {
        self.room(1)[0] = byte;
        self.len += 1;
    }

    /// Writes the first `len` bytes of `text` (a word from the chain's arena).
    #[inline]
    fn word(&mut self, text: &[u8], len: usize) {
        copy_word(self.room(len), 0, text, 0, len);
        self.len += len;
    }

    /// Writes the words `ids` as running text (see `Chain::write_run`).
    #[inline]
    fn run(&mut self, chain: &Chain, ids: &[WordId]) {
        let bytes = chain.run_bytes(ids);
        self.len += chain.write_run(self.room(bytes), ids);
    }

    /// Appends with a function that appends to a `Vec` (a trap URL): it writes past the slack,
    /// and the result is moved down to the page's end.
    fn append_with(&mut self, append: impl FnOnce(&mut Vec<u8>)) -> std::ops::Range<usize> {
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
    fn repeat(&mut self, range: std::ops::Range<usize>) {
        let n = range.len();
        self.room(n);
        self.bytes.copy_within(range, self.len);
        self.len += n;
    }

    /// The bytes written in `range`.
    fn written(&self, range: std::ops::Range<usize>) -> &[u8] {
        &self.bytes[range]
    }
}

impl Drop for Page<'_> {
    fn drop(&mut self) {
        self.bytes.truncate(self.len);
    }
}

impl<R: Rng + Clone> PageWriter<'_, R> {
    fn push(&mut self, text: &str) {
        self.out.push(text.as_bytes());
    }

    /// Writes the whole page. `site` is the site's display name words.
    pub(super) fn write(mut self, site: [&str; 2]) {
        let settings = self.settings;
        let target = settings.min_bytes
            + below(&mut self.rng, settings.max_bytes.saturating_sub(settings.min_bytes) + 1);
        let links = settings.min_links
            + below(&mut self.rng, settings.max_links.saturating_sub(settings.min_links) + 1);
        let nav_links = links.min(3 + below(&mut self.rng, 3));
        let footer_links = (links - nav_links).min(2);
        let related_links = links - nav_links - footer_links;
        let start = self.out.len();

        self.push(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>",
        );
        let title_start = self.chain.sentence_start(&mut self.rng);
        let title_words = 4 + below(&mut self.rng, 6);
        let title_from = self.out.len();
        self.heading(title_start, title_words);
        let title = title_from..self.out.len();
        self.push(" | ");
        self.site_name(site);
        self.push("</title>\n<meta name=\"description\" content=\"");
        self.sentence(40);
        self.push(
            "\">\n<style>body{max-width:44rem;margin:0 auto;padding:1rem;font:17px/1.6 Georgia,serif;\
             color:#222}header,footer{font-family:sans-serif}nav a{margin-right:1em}\
             .meta{color:#666}</style>\n</head>\n<body>\n<header>\n<p class=\"site\">",
        );
        self.site_name(site);
        self.push("</p>\n<nav>");
        for _ in 0..nav_links {
            self.section_link();
        }
        self.push("</nav>\n</header>\n<main>\n<article>\n<h1>");
        // The same heading as the title, copied rather than walked again.
        self.out.repeat(title);
        self.push("</h1>\n<p class=\"meta\">Posted ");
        self.date();
        self.push("</p>\n");

        let tail = TAIL_BYTES_FIXED + TAIL_BYTES_PER_LINK * (related_links + footer_links);
        let body_end = target.saturating_sub(tail);
        let mut since_heading = 0;
        loop {
            self.paragraph();
            since_heading += 1;
            if self.out.len() - start >= body_end {
                break;
            }
            match below(&mut self.rng, 10) {
                0 => self.list(),
                1 => self.quote(),
                _ if since_heading >= 3 && below(&mut self.rng, 2) == 0 => {
                    self.push("<h2>");
                    let at = self.chain.sentence_start(&mut self.rng);
                    let words = 3 + below(&mut self.rng, 5);
                    self.heading(at, words);
                    self.push("</h2>\n");
                    since_heading = 0;
                }
                _ => {}
            }
        }
        self.push("</article>\n");
        if related_links > 0 {
            self.push("<aside>\n<h2>Related</h2>\n<ul>\n");
            for _ in 0..related_links {
                self.push("<li>");
                self.article_link();
                self.push("</li>\n");
            }
            self.push("</ul>\n</aside>\n");
        }
        self.push("</main>\n<footer>\n<p>&copy; ");
        let year = Decimal::new(2026 - below(&mut self.rng, 3), 4);
        self.out.push(year.as_bytes());
        self.out.byte(b' ');
        self.site_name(site);
        self.push("</p>\n<nav>");
        for _ in 0..footer_links {
            self.section_link();
        }
        self.push("</nav>\n</footer>\n</body>\n</html>\n");
    }

    /// A paragraph of two to six sentences.
    fn paragraph(&mut self) {
        self.push("<p>");
        let sentences = 2 + below(&mut self.rng, 5);
        for i in 0..sentences {
            if i > 0 {
                self.out.byte(b' ');
            }
            self.sentence(60);
        }
        self.push("</p>\n");
    }

    /// A bulleted list of three to six one-sentence items.
    fn list(&mut self) {
        self.push("<ul>\n");
        for _ in 0..3 + below(&mut self.rng, 4) {
            self.push("<li>");
            self.sentence(30);
            self.push("</li>\n");
        }
        self.push("</ul>\n");
    }

    fn quote(&mut self) {
        self.push("<blockquote><p>");
        self.sentence(45);
        self.push("</p></blockquote>\n");
    }

    /// Refills the pool with `LANES` fresh sentences.
    fn walk_sentences(&mut self) {
        self.chain.walk_sentences(&mut self.rng, &mut self.walks.words, &mut self.walks.lens);
        self.walks.next = 0;
    }

    /// Writes the pool's next sentence, cut at `max_words` (at most `MAX_SENTENCE_WORDS`) and
    /// then closed with a full stop. Its first word is a sentence start, so already capitalised.
    fn sentence(&mut self, max_words: usize) {
        if self.walks.next == LANES {
            self.walk_sentences();
        }
        let lane = self.walks.next;
        self.walks.next += 1;
        let words = self.walks.lens[lane].min(max_words);
        let Some((&last, before)) = self.walks.words[lane][..words].split_last() else {
            return;
        };
        if let Some((&first, middle)) = before.split_first() {
            if let Some((text, bytes)) = self.chain.html(first, false, false) {
                self.out.word(text, bytes);
            }
            self.out.run(self.chain, middle);
        }
        let cut = words == max_words && !self.chain.ends_sentence(last);
        if let Some((text, bytes)) = self.chain.html(last, words > 1, cut) {
            self.out.word(text, bytes);
        } else {
            // A cut word that escaping changes: cut its raw text and escape that.
            if words > 1 {
                self.out.byte(b' ');
            }
            let text = self.chain.word_by_id(last).text;
            self.word(text.trim_end_matches(|c: char| !c.is_alphanumeric()), words == 1);
        }
        if cut {
            self.out.byte(b'.');
        }
    }

    /// A title-like run of about `words` words from `at`, without closing punctuation or quotes,
    /// and not ending on a word such as "the" or "and" that leaves a headline hanging.
    /// It draws no randomness from the page RNG: a heading depends only on where it starts.
    fn heading(&mut self, at: Position, words: usize) {
        let mut at = at;
        // Headings walk the chain with their own RNG, seeded from the position.
        let mut rng = rand_pcg::Pcg32::new(u64::from(at.index()), 0x0a02_bdbf_7bb3_c0a7);
        let mut written = 0;
        for _ in 0..words + HEADING_OVERRUN {
            let word = self.chain.word(at);
            let ends_sentence = word.ends_sentence;
            let text = bare(word.text);
            if !text.is_empty() {
                if written > 0 {
                    self.out.byte(b' ');
                }
                // Trimming punctuation adds no character that needs escaping.
                self.corpus_word(text, word.needs_escape, written == 0);
                written += 1;
            }
            if ends_sentence || (written >= words && !is_function_word(text)) {
                break;
            }
            at = self.chain.step(at, &mut rng);
        }
    }

    /// Writes a corpus word (or part of one), escaped unless the chain knows it needs no
    /// escaping.
    fn corpus_word(&mut self, text: &str, needs_escape: bool, capitalise: bool) {
        if needs_escape || (capitalise && !text.starts_with(|c: char| c.is_ascii())) {
            self.word(text, capitalise);
        } else if capitalise && let Some(rest) = text.get(1..) {
            self.out.byte(text.as_bytes()[0].to_ascii_uppercase());
            self.push(rest);
        } else {
            self.push(text);
        }
    }

    fn word(&mut self, word: &str, capitalise: bool) {
        let out = &mut self.out;
        let mut chars = word.chars();
        if capitalise && let Some(first) = chars.next() {
            for upper in first.to_uppercase() {
                escape(upper.encode_utf8(&mut [0; 4]), |piece| out.push(piece));
            }
            escape(chars.as_str(), |piece| out.push(piece));
        } else {
            escape(word, |piece| out.push(piece));
        }
    }

    /// A navigation link labelled with the section its URL lives in.
    fn section_link(&mut self) {
        self.push("<a href=\"");
        let (urls, rng) = (self.urls, &mut self.rng);
        let url = self.out.append_with(|bytes| urls.mint(rng, bytes));
        // The section is ASCII lowercase from a fixed list: `/section/...`.
        let mut label = [0u8; 16];
        let written = self.out.written(url);
        let section = written.get(1..).unwrap_or_default();
        let section = &section[..section.iter().position(|&b| b == b'/').unwrap_or(section.len())];
        let len = section.len().min(label.len());
        label[..len].copy_from_slice(&section[..len]);
        label[0].make_ascii_uppercase();
        self.push("\">");
        self.out.push(&label[..len]);
        self.push("</a>");
    }

    /// A link to another "article", labelled like a headline.
    fn article_link(&mut self) {
        self.push("<a href=\"");
        let (urls, rng) = (self.urls, &mut self.rng);
        self.out.append_with(|bytes| urls.mint(rng, bytes));
        self.push("\">");
        let at = self.chain.sentence_start(&mut self.rng);
        let words = 3 + below(&mut self.rng, 6);
        self.heading(at, words);
        self.push("</a>");
    }

    fn date(&mut self) {
        let month = MONTHS[below(&mut self.rng, 12)];
        self.push(month);
        self.out.byte(b' ');
        let day = Decimal::new(1 + below(&mut self.rng, 28), 1);
        self.out.push(day.as_bytes());
        self.push(", ");
        let year = Decimal::new(2009 + below(&mut self.rng, 17), 4);
        self.out.push(year.as_bytes());
    }

    fn site_name(&mut self, site: [&str; 2]) {
        self.word(site[0], true);
        self.out.byte(b' ');
        self.word(site[1], true);
    }
}

/// `word` without leading or trailing punctuation; most words have none, which two byte tests
/// tell without decoding characters.
fn bare(word: &str) -> &str {
    match word.as_bytes() {
        [first, .., last] if first.is_ascii_alphanumeric() && last.is_ascii_alphanumeric() => word,
        [only] if only.is_ascii_alphanumeric() => word,
        _ => word.trim_matches(|c: char| !c.is_alphanumeric()),
    }
}

/// Words a heading may run past its length to avoid ending on a function word.
const HEADING_OVERRUN: usize = 4;

/// Words that leave a headline hanging when they end it.
fn is_function_word(word: &str) -> bool {
    const WORDS: &[&str] = &[
        "a", "an", "and", "as", "at", "be", "but", "by", "for", "from", "he", "her", "his", "i", "in",
        "into", "is", "it", "its", "my", "nor", "not", "of", "on", "or", "our", "shall", "so", "that", "the",
        "their", "them", "they", "this", "thou", "thy", "to", "unto", "upon", "was", "we", "were", "which",
        "who", "will", "with", "ye", "you", "your",
    ];
    WORDS.iter().any(|candidate| candidate.eq_ignore_ascii_case(word))
}

/// Appends `text` with `&`, `<`, `>`, `"` and `'` escaped for HTML text and attribute values.
pub fn push_escaped(out: &mut Vec<u8>, text: &str) {
    escape(text, |piece| out.extend_from_slice(piece));
}

/// Hands `text` to `emit` in pieces, with `&`, `<`, `>`, `"` and `'` replaced by entities.
#[inline]
fn escape(text: &str, mut emit: impl FnMut(&[u8])) {
    let text = text.as_bytes();
    let mut clean_from = 0;
    for (i, &byte) in text.iter().enumerate() {
        let entity: &[u8] = match byte {
            b'&' => b"&amp;",
            b'<' => b"&lt;",
            b'>' => b"&gt;",
            b'"' => b"&quot;",
            b'\'' => b"&#39;",
            _ => continue,
        };
        emit(&text[clean_from..i]);
        emit(entity);
        clean_from = i + 1;
    }
    emit(&text[clean_from..]);
}
