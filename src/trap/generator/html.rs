//! The page layout: an ordinary-looking article page written straight into one output buffer.
//!
//! Head, site header with navigation, an article of headings, paragraphs, lists and quotes, a
//! "related" list and a footer, each element as the site's [`Look`] has it (tags, classes, order,
//! wording). Every `href` is a minted trap URL, and every piece of corpus or URL text goes through
//! [`super::escape`], so nothing in a corpus can inject markup.

use rand::Rng;

use super::PageSettings;
use super::escape::escape;
use super::look::{Look, RelatedPlace, Role};
use super::markov::{Chain, Position};
use super::page_buffer::Page;
use super::template::{Part, Slot, Template};
use super::walks::Walks;
use crate::support::numbers::below;
use crate::trap::urls::TrapUrls;

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
    pub(super) look: Look,
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
        let look = self.look;

        let title = self.head(site);
        self.open(Role::Body);
        self.newline();
        self.open(Role::Wrapper);
        self.site_header(site, nav_links);
        self.open(Role::Main);
        self.newline();
        self.open(Role::Article);
        self.newline();
        let meta_first = look.meta_first();
        if meta_first {
            self.meta();
        }
        self.push("<h1>");
        // The same heading as the title, copied rather than walked again.
        self.out.repeat(title);
        self.push("</h1>");
        self.newline();
        if !meta_first {
            self.meta();
        }
        let tail = TAIL_BYTES_FIXED + TAIL_BYTES_PER_LINK * (related_links + footer_links);
        self.article_body(start + target.saturating_sub(tail));
        let place = look.related_place();
        if place == RelatedPlace::InArticle {
            self.related(related_links);
        }
        self.close(Role::Article);
        if place == RelatedPlace::AfterArticle {
            self.related(related_links);
        }
        self.close(Role::Main);
        if place == RelatedPlace::AfterMain {
            self.related(related_links);
        }
        self.footer(site, footer_links);
        self.close(Role::Wrapper);
        self.look.end(&mut self.out);
    }

    /// Writes the page into the site's own `template`.
    /// The site name is the template's own.
    pub(super) fn write_templated(mut self, template: &Template) {
        let settings = self.settings;
        let target = settings.min_bytes
            + below(&mut self.rng, settings.max_bytes.saturating_sub(settings.min_bytes) + 1);
        let links = settings.min_links
            + below(&mut self.rng, settings.max_links.saturating_sub(settings.min_links) + 1);
        let has_nav = template.parts().contains(&Part::Slot(Slot::Nav));
        let nav_links = if has_nav { links.min(3 + below(&mut self.rng, 3)) } else { 0 };
        let related_links = links - nav_links;
        let start = self.out.len();
        let title_start = self.chain.sentence_start(&mut self.rng);
        let title_words = 4 + below(&mut self.rng, 6);
        let mut title = None;
        for part in template.parts() {
            match part {
                Part::Literal(html) => self.push(html),
                Part::Slot(Slot::Title | Slot::Heading) => match &title {
                    // The title and the heading are one heading, walked once.
                    Some(range) => self.out.repeat(std::ops::Range::clone(range)),
                    None => {
                        let from = self.out.len();
                        self.heading(title_start, title_words);
                        title = Some(from..self.out.len());
                    }
                },
                Part::Slot(Slot::Content) => {
                    self.meta();
                    let tail = template.bytes_after_content() + TAIL_BYTES_PER_LINK * related_links;
                    self.article_body(start + target.saturating_sub(tail));
                }
                Part::Slot(Slot::Links) => {
                    self.push("<ul>\n");
                    for _ in 0..related_links {
                        self.push("<li>");
                        self.article_link();
                        self.push("</li>\n");
                    }
                    self.push("</ul>");
                }
                Part::Slot(Slot::Nav) => self.section_links(nav_links),
            }
        }
    }

    fn newline(&mut self) {
        self.look.newline(&mut self.out);
    }

    fn open(&mut self, role: Role) {
        self.look.open(role, self.urls.words(), &mut self.out);
    }

    /// Closes `role` and ends the line.
    fn close(&mut self, role: Role) {
        self.look.close(role, self.urls.words(), &mut self.out);
        self.newline();
    }

    /// The document head; returns where the title's heading was written, for the `<h1>`.
    fn head(&mut self, site: [&str; 2]) -> std::ops::Range<usize> {
        // The doctype and these two metas are what every page has; the rest is the site's look.
        self.push("<!DOCTYPE html>\n");
        self.look.html_open(&mut self.out);
        self.push("<meta charset=\"utf-8\">");
        self.newline();
        // The stylesheet before or after the viewport meta; then the description and the title,
        // last. The order is what keeps runs of fixed markup short: the title ends with the
        // drawn site name, so `</title></head><body class="` is all that follows it, and the
        // description's close is followed only by `<title>`.
        let style_early = self.look.style_early();
        if style_early {
            self.look.style(self.urls.words(), &mut self.out);
        }
        self.push("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
        self.newline();
        if !style_early {
            self.look.style(self.urls.words(), &mut self.out);
        }
        let title_start = self.chain.sentence_start(&mut self.rng);
        let title_words = 4 + below(&mut self.rng, 6);
        self.description();
        let title = self.title(site, title_start, title_words);
        self.push("</head>");
        self.newline();
        title
    }

    /// `<title>` with the heading at `at` and the site name; returns where the heading is.
    fn title(&mut self, site: [&str; 2], at: Position, words: usize) -> std::ops::Range<usize> {
        self.push("<title>");
        let title_from = self.out.len();
        self.heading(at, words);
        let title = title_from..self.out.len();
        self.look.title_separator(&mut self.out);
        self.site_name(site);
        self.push("</title>");
        self.newline();
        title
    }

    /// The description meta, when the site has one: a sentence.
    fn description(&mut self) {
        if let Some((open, close)) = self.look.description() {
            self.push(open);
            self.sentence(40);
            self.push(close);
            self.newline();
        }
    }

    /// The site's header: its name and `nav_links` section links.
    fn site_header(&mut self, site: [&str; 2], nav_links: usize) {
        self.open(Role::Header);
        self.newline();
        self.open(Role::SiteName);
        self.site_name(site);
        self.close(Role::SiteName);
        self.open(Role::Nav);
        self.section_links(nav_links);
        self.close(Role::Nav);
        self.close(Role::Header);
    }

    /// The date line.
    fn meta(&mut self) {
        self.open(Role::Meta);
        self.look.meta_words(&mut self.out);
        self.look.date(&mut self.rng, &mut self.out);
        self.close(Role::Meta);
    }

    /// `links` section links, separated as the site separates them.
    fn section_links(&mut self, links: usize) {
        for i in 0..links {
            if i > 0 {
                self.look.nav_separator(&mut self.out);
            }
            self.section_link();
        }
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
                    self.open(Role::Subheading);
                    let at = self.chain.sentence_start(&mut self.rng);
                    let words = 3 + below(&mut self.rng, 5);
                    self.heading(at, words);
                    self.close(Role::Subheading);
                    since_heading = 0;
                }
                _ => {}
            }
        }
    }

    /// A "related" list of `links` article links (nothing when there are none).
    fn related(&mut self, links: usize) {
        if links == 0 {
            return;
        }
        self.open(Role::Related);
        self.newline();
        self.open(Role::RelatedHeading);
        self.look.related_words(&mut self.out);
        self.close(Role::RelatedHeading);
        self.open(Role::RelatedList);
        self.newline();
        for _ in 0..links {
            self.open(Role::RelatedItem);
            self.article_link();
            self.close(Role::RelatedItem);
        }
        self.close(Role::RelatedList);
        self.close(Role::Related);
    }

    /// The footer: a note (copyright and site name, in the site's wording) and `links` section
    /// links.
    fn footer(&mut self, site: [&str; 2], links: usize) {
        self.open(Role::Footer);
        self.newline();
        let year = 2026 - below(&mut self.rng, 3);
        let nav_first = self.look.footer_nav_first();
        if nav_first {
            self.footer_nav(links);
        }
        self.open(Role::FooterNote);
        let look = self.look;
        look.footer_note(year, &mut self.out, |out| {
            word_into(out, site[0], true);
            out.byte(b' ');
            word_into(out, site[1], true);
        });
        self.close(Role::FooterNote);
        if !nav_first {
            self.footer_nav(links);
        }
        self.close(Role::Footer);
    }

    fn footer_nav(&mut self, links: usize) {
        if links > 0 {
            self.open(Role::FooterNav);
            self.section_links(links);
            self.close(Role::FooterNav);
        }
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
        word_into(&mut self.out, word, capitalise);
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
        match self.look.nav_case() {
            0 => label[0].make_ascii_uppercase(),
            1 => {}
            _ => label.make_ascii_uppercase(),
        }
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

    fn site_name(&mut self, site: [&str; 2]) {
        self.word(site[0], true);
        self.out.byte(b' ');
        self.word(site[1], true);
    }
}

/// Writes `word` escaped, its first letter capitalised when asked.
fn word_into(out: &mut Page<'_>, word: &str, capitalise: bool) {
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
