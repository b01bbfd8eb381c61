//! The page layout: an ordinary-looking article page written straight into one output buffer.
//!
//! Head, site header with navigation, an article of headings, paragraphs, lists and quotes, a
//! "related" list and a footer. Every `href` is a minted trap URL, and every piece of corpus or URL
//! text goes through [`super::escape`], so nothing in a corpus can inject markup.

use rand::Rng;

use super::PageSettings;
use super::escape::escape;
use super::markov::{Chain, Position};
use super::page_buffer::Page;
use super::walks::Walks;
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

/// Everything one page render needs; the RNG is the only source of variety.
pub(super) struct PageWriter<'a, R: Rng> {
    pub(super) chain: &'a Chain,
    pub(super) urls: &'a TrapUrls,
    pub(super) settings: &'a PageSettings,
    pub(super) rng: R,
    pub(super) out: Page<'a>,
    pub(super) walks: Walks,
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

        let title = self.head(site);
        self.site_header(site, nav_links);
        self.push("<main>\n<article>\n<h1>");
        // The same heading as the title, copied rather than walked again.
        self.out.repeat(title);
        self.push("</h1>\n<p class=\"meta\">Posted ");
        self.date();
        self.push("</p>\n");
        let tail = TAIL_BYTES_FIXED + TAIL_BYTES_PER_LINK * (related_links + footer_links);
        self.article_body(start + target.saturating_sub(tail));
        self.push("</article>\n");
        self.related(related_links);
        self.push("</main>\n");
        self.footer(site, footer_links);
    }

    /// The document head; returns where the title's heading was written, for the `<h1>`.
    fn head(&mut self, site: [&str; 2]) -> std::ops::Range<usize> {
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
             .meta{color:#666}</style>\n</head>\n",
        );
        title
    }

    /// The site's header: its name and `nav_links` section links.
    fn site_header(&mut self, site: [&str; 2], nav_links: usize) {
        self.push("<body>\n<header>\n<p class=\"site\">");
        self.site_name(site);
        self.push("</p>\n<nav>");
        for _ in 0..nav_links {
            self.section_link();
        }
        self.push("</nav>\n</header>\n");
    }

    /// Paragraphs, with now and then a list, a quote or a subheading, until the page holds
    /// `end` bytes.
    fn article_body(&mut self, end: usize) {
        let mut since_heading = 0;
        loop {
            self.paragraph();
            since_heading += 1;
            if self.out.len() >= end {
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
    }

    /// A "related" list of `links` article links (nothing when there are none).
    fn related(&mut self, links: usize) {
        if links > 0 {
            self.push("<aside>\n<h2>Related</h2>\n<ul>\n");
            for _ in 0..links {
                self.push("<li>");
                self.article_link();
                self.push("</li>\n");
            }
            self.push("</ul>\n</aside>\n");
        }
    }

    /// The footer: a copyright line and `links` section links; ends the document.
    fn footer(&mut self, site: [&str; 2], links: usize) {
        self.push("<footer>\n<p>&copy; ");
        let year = Decimal::new(2026 - below(&mut self.rng, 3), 4);
        self.out.push(year.as_bytes());
        self.out.byte(b' ');
        self.site_name(site);
        self.push("</p>\n<nav>");
        for _ in 0..links {
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

    /// Writes the pool's next sentence, cut at `max_words` (at most `walks::MAX_SENTENCE_WORDS`) and
    /// then closed with a full stop. Its first word is a sentence start, so already capitalised.
    fn sentence(&mut self, max_words: usize) {
        let walked = self.walks.next(self.chain, &mut self.rng, max_words);
        let words = walked.len();
        let Some((&last, before)) = walked.split_last() else {
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
