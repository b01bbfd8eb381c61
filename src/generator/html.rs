//! The page layout: an ordinary-looking article page written straight into one output buffer.
//!
//! Head, site header with navigation, an article of headings, paragraphs, lists and quotes, a
//! "related" list and a footer. Every `href` is a minted trap URL, and every piece of corpus or URL
//! text goes through [`push_escaped`], so nothing in a corpus can inject markup.

use rand::Rng;

use super::PageSettings;
use super::markov::{Chain, Position, WordId};
use crate::numbers::{below, push_number};
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

/// Sentences walked side by side.
const LANES: usize = 8;
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
    pub(super) out: &'a mut String,
    pub(super) walks: Walks,
}

impl<R: Rng> PageWriter<'_, R> {
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

        self.out.push_str(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>",
        );
        let title_start = self.chain.sentence_start(&mut self.rng);
        let title_words = 4 + below(&mut self.rng, 6);
        self.heading(title_start, title_words);
        self.out.push_str(" | ");
        self.site_name(site);
        self.out.push_str("</title>\n<meta name=\"description\" content=\"");
        self.sentence(40);
        self.out.push_str(
            "\">\n<style>body{max-width:44rem;margin:0 auto;padding:1rem;font:17px/1.6 Georgia,serif;\
             color:#222}header,footer{font-family:sans-serif}nav a{margin-right:1em}\
             .meta{color:#666}</style>\n</head>\n<body>\n<header>\n<p class=\"site\">",
        );
        self.site_name(site);
        self.out.push_str("</p>\n<nav>");
        for _ in 0..nav_links {
            self.section_link();
        }
        self.out.push_str("</nav>\n</header>\n<main>\n<article>\n<h1>");
        self.heading(title_start, title_words);
        self.out.push_str("</h1>\n<p class=\"meta\">Posted ");
        self.date();
        self.out.push_str("</p>\n");

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
                    self.out.push_str("<h2>");
                    let at = self.chain.sentence_start(&mut self.rng);
                    let words = 3 + below(&mut self.rng, 5);
                    self.heading(at, words);
                    self.out.push_str("</h2>\n");
                    since_heading = 0;
                }
                _ => {}
            }
        }
        self.out.push_str("</article>\n");
        if related_links > 0 {
            self.out.push_str("<aside>\n<h2>Related</h2>\n<ul>\n");
            for _ in 0..related_links {
                self.out.push_str("<li>");
                self.article_link();
                self.out.push_str("</li>\n");
            }
            self.out.push_str("</ul>\n</aside>\n");
        }
        self.out.push_str("</main>\n<footer>\n<p>&copy; ");
        push_number(self.out, 2026 - below(&mut self.rng, 3), 4);
        self.out.push(' ');
        self.site_name(site);
        self.out.push_str("</p>\n<nav>");
        for _ in 0..footer_links {
            self.section_link();
        }
        self.out.push_str("</nav>\n</footer>\n</body>\n</html>\n");
    }

    /// A paragraph of two to six sentences.
    fn paragraph(&mut self) {
        self.out.push_str("<p>");
        let sentences = 2 + below(&mut self.rng, 5);
        for i in 0..sentences {
            if i > 0 {
                self.out.push(' ');
            }
            self.sentence(60);
        }
        self.out.push_str("</p>\n");
    }

    /// A bulleted list of three to six one-sentence items.
    fn list(&mut self) {
        self.out.push_str("<ul>\n");
        for _ in 0..3 + below(&mut self.rng, 4) {
            self.out.push_str("<li>");
            self.sentence(30);
            self.out.push_str("</li>\n");
        }
        self.out.push_str("</ul>\n");
    }

    fn quote(&mut self) {
        self.out.push_str("<blockquote><p>");
        self.sentence(45);
        self.out.push_str("</p></blockquote>\n");
    }

    /// Refills the pool: `LANES` sentences from fresh sentence starts, one step of each in turn,
    /// each ending where the chain ends a sentence or at `MAX_SENTENCE_WORDS`.
    fn walk_sentences(&mut self) {
        let mut at = [self.chain.sentence_start(&mut self.rng); LANES];
        for lane in at.iter_mut().skip(1) {
            *lane = self.chain.sentence_start(&mut self.rng);
        }
        let walks = &mut self.walks;
        walks.next = 0;
        // The lanes still walking, first `walking` of them: an ended lane is swapped out, so a
        // step visits only live lanes (the longest of eight sentences is often twice the mean).
        let mut live: [usize; LANES] = std::array::from_fn(|lane| lane);
        let mut walking = LANES;
        let mut step = 0;
        while walking > 0 {
            let mut i = 0;
            while i < walking {
                let lane = live[i];
                let word = at[lane].word_id();
                walks.words[lane][step] = word;
                if step + 1 == MAX_SENTENCE_WORDS || self.chain.ends_sentence(word) {
                    walks.lens[lane] = step + 1;
                    walking -= 1;
                    live[i] = live[walking];
                } else {
                    at[lane] = self.chain.step(at[lane], &mut self.rng);
                    i += 1;
                }
            }
            step += 1;
        }
    }

    /// Writes the pool's next sentence, cut at `max_words` (at most `MAX_SENTENCE_WORDS`) and
    /// then closed with a full stop.
    fn sentence(&mut self, max_words: usize) {
        if self.walks.next == LANES {
            self.walk_sentences();
        }
        let lane = self.walks.next;
        self.walks.next += 1;
        let len = self.walks.lens[lane].min(max_words);
        for i in 0..len {
            let word = self.chain.word_by_id(self.walks.words[lane][i]);
            let cut = i + 1 == max_words && !word.ends_sentence;
            if i > 0 && !cut && !word.needs_escape {
                // Most words: the space and the word in one copy.
                self.out.push_str(word.spaced);
                continue;
            }
            if i > 0 {
                self.out.push(' ');
            }
            if cut {
                self.word(word.text.trim_end_matches(|c: char| !c.is_alphanumeric()), i == 0);
                self.out.push('.');
            } else {
                self.corpus_word(word.text, word.needs_escape, i == 0);
            }
        }
    }

    /// A title-like run of about `words` words from `at`, without closing punctuation or quotes,
    /// and not ending on a word such as "the" or "and" that leaves a headline hanging.
    /// Called twice with the same arguments for `<title>` and `<h1>`; it draws no randomness from
    /// the page RNG, so both copies match.
    fn heading(&mut self, at: Position, words: usize) {
        let mut at = at;
        // Headings walk the chain with their own RNG, seeded from the position, so they repeat.
        let mut rng = rand_pcg::Pcg32::new(u64::from(at.index()), 0x0a02_bdbf_7bb3_c0a7);
        let mut written = 0;
        for _ in 0..words + HEADING_OVERRUN {
            let word = self.chain.word(at);
            let ends_sentence = word.ends_sentence;
            let text = bare(word.text);
            if !text.is_empty() {
                if written > 0 {
                    self.out.push(' ');
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
            self.out.push(text.as_bytes()[0].to_ascii_uppercase() as char);
            self.out.push_str(rest);
        } else {
            self.out.push_str(text);
        }
    }

    fn word(&mut self, word: &str, capitalise: bool) {
        let mut chars = word.chars();
        if capitalise && let Some(first) = chars.next() {
            for upper in first.to_uppercase() {
                push_escaped_char(self.out, upper);
            }
            push_escaped(self.out, chars.as_str());
        } else {
            push_escaped(self.out, word);
        }
    }

    /// A navigation link labelled with the section its URL lives in.
    fn section_link(&mut self) {
        self.out.push_str("<a href=\"");
        let url_start = self.out.len();
        self.urls.mint(&mut self.rng, self.out);
        let section_end = self.out[url_start + 1..].find('/').map_or(self.out.len(), |i| url_start + 1 + i);
        self.out.push_str("\">");
        // The section is ASCII lowercase from a fixed list; capitalise its first letter.
        let label_start = self.out.len();
        self.out.extend_from_within(url_start + 1..section_end);
        if let Some(first) = self.out[label_start..].chars().next() {
            let upper = first.to_ascii_uppercase();
            self.out.replace_range(label_start..label_start + 1, upper.encode_utf8(&mut [0; 4]));
        }
        self.out.push_str("</a>");
    }

    /// A link to another "article", labelled like a headline.
    fn article_link(&mut self) {
        self.out.push_str("<a href=\"");
        self.urls.mint(&mut self.rng, self.out);
        self.out.push_str("\">");
        let at = self.chain.sentence_start(&mut self.rng);
        let words = 3 + below(&mut self.rng, 6);
        self.heading(at, words);
        self.out.push_str("</a>");
    }

    fn date(&mut self) {
        self.out.push_str(MONTHS[below(&mut self.rng, 12)]);
        self.out.push(' ');
        push_number(self.out, 1 + below(&mut self.rng, 28), 1);
        self.out.push_str(", ");
        push_number(self.out, 2009 + below(&mut self.rng, 17), 4);
    }

    fn site_name(&mut self, site: [&str; 2]) {
        self.word(site[0], true);
        self.out.push(' ');
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
#[inline]
pub fn push_escaped(out: &mut String, text: &str) {
    let mut clean_from = 0;
    for (i, byte) in text.bytes().enumerate() {
        let entity = match byte {
            b'&' => "&amp;",
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'"' => "&quot;",
            b'\'' => "&#39;",
            _ => continue,
        };
        out.push_str(&text[clean_from..i]);
        out.push_str(entity);
        clean_from = i + 1;
    }
    out.push_str(&text[clean_from..]);
}

fn push_escaped_char(out: &mut String, c: char) {
    push_escaped(out, c.encode_utf8(&mut [0; 4]));
}
