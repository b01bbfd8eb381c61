//! A site's look: everything on a trap page that is not corpus text (stylesheet, class names,
//! the skeleton's elements and their order, navigation and footer wording, the date and title
//! formats, whitespace) drawn from a space of plausible variants keyed by the secret and host,
//! so that two deployments' pages share nothing a crawler could match beyond what every HTML
//! page has (`bench/tools/fingerprint.rs` measures it).
//!
//! A look is only a seed. Each piece is drawn when it is written, from a generator seeded by the
//! look and the piece, so a piece is the same on every page of a site, the stylesheet names the
//! classes the elements carry, and nothing is stored or allocated per site.

use rand::Rng;
use rand_pcg::Pcg32;

use super::page_buffer::Page;
use crate::numbers::{Decimal, below};

/// One site's look.
#[derive(Clone, Copy, Debug)]
pub(super) struct Look {
    seed: u64,
}

/// A structural element of the page, each with its own tag, class and place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    Body,
    Wrapper,
    Header,
    SiteName,
    Nav,
    Main,
    Article,
    Meta,
    Related,
    RelatedHeading,
    RelatedList,
    RelatedItem,
    Footer,
    FooterNote,
    FooterNav,
    Subheading,
}

/// Where the related-articles block goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RelatedPlace {
    /// At the end of the article element.
    InArticle,
    /// After the article, inside the main element.
    AfterArticle,
    /// After the main element.
    AfterMain,
}

/// Pieces drawn once per site; each number seeds the piece's own generator.
#[derive(Clone, Copy)]
#[repr(u64)]
enum Piece {
    Lang = 1,
    HeadOrder,
    Description,
    Title,
    Style,
    Newlines,
    Date,
    MetaWords,
    RelatedWords,
    RelatedPlace,
    MetaFirst,
    FooterWords,
    FooterNavFirst,
    NavSeparator,
    ClassWords,
    End,
    Quotes,
    Comments,
    ItemEnd,
    NavCase,
    // Per role, offset by the role's number.
    Tag = 64,
    Class = 128,
}

const LANGS: &[&str] = &["en", "en-US", "en-GB", "en-us", "en-gb"];
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
const META_WORDS: &[&str] = &[
    "Posted",
    "Published",
    "Posted on",
    "Published on",
    "Written",
    "Updated",
    "Last updated",
    "",
    "",
    "Filed",
];
const RELATED_WORDS: &[&str] = &[
    "Related",
    "Related posts",
    "Related articles",
    "Related reading",
    "See also",
    "Read next",
    "More to read",
    "Further reading",
    "You might also like",
    "Also on this site",
    "More from the archive",
    "Recent posts",
    "Elsewhere on the site",
    "Keep reading",
    "More like this",
    "Other articles",
    "Popular posts",
    "From the archive",
];
const NAV_SEPARATORS: &[&str] = &[
    " ",
    "\n",
    " | ",
    " &middot; ",
    " / ",
    " &bull; ",
    " \u{b7} ",
    " - ",
    ", ",
    " &#183; ",
    " :: ",
    "  ",
    " &ndash; ",
    " \u{2022} ",
    " // ",
    " &nbsp;",
    "\n  ",
];
/// Font families, short enough that a declaration naming one is never a long shared string.
const FONTS: &[&str] = &[
    "Georgia",
    "Palatino",
    "Garamond",
    "Charter",
    "Cambria",
    "\"PT Serif\"",
    "\"Noto Serif\"",
    "Merriweather",
    "Lora",
    "Baskerville",
    "Didot",
    "Roboto",
    "Helvetica",
    "Arial",
    "Verdana",
    "Tahoma",
    "system-ui",
    "-apple-system",
    "\"Open Sans\"",
    "Lato",
    "\"Fira Sans\"",
    "Inter",
    "Ubuntu",
    "\"Gill Sans\"",
    "Futura",
    "Avenir",
    "Optima",
    "Candara",
    "Calibri",
    "Corbel",
    "Seravek",
    "\"IBM Plex Sans\"",
    "Nunito",
    "Karla",
    "Rubik",
    "Mulish",
    "Raleway",
    "Montserrat",
    "Oswald",
    "Jost",
];
const GENERIC_FONTS: &[&str] = &["serif", "sans-serif", "serif", "sans-serif", "system-ui"];
const LENGTH_UNITS: &[&str] = &["rem", "em", "px"];

impl Look {
    /// The look keyed by `seed` (from the secret and the host).
    pub(super) fn new(seed: u64) -> Look {
        Look { seed }
    }

    fn rng(&self, piece: u64) -> Pcg32 {
        Pcg32::new(self.seed ^ piece.wrapping_mul(0x9e37_79b9_7f4a_7c15), piece.wrapping_mul(2) | 1)
    }

    fn pick<'a>(&self, piece: Piece, options: &[&'a str]) -> &'a str {
        options[below(&mut self.rng(piece as u64), options.len())]
    }

    fn flip(&self, piece: Piece, one_in: usize) -> bool {
        below(&mut self.rng(piece as u64), one_in) == 0
    }

    /// The line break written after block elements: a newline in one of several styles, or
    /// nothing (minified pages).
    pub(super) fn newline(&self, out: &mut Page<'_>) {
        out.push(self.pick(Piece::Newlines, &["\n", "\n", "", "\r\n", "\n\n", " \n"]).as_bytes());
    }

    /// The end of the document: `</body>` and `</html>` as the site writes them (or leaves them
    /// out, as HTML allows).
    pub(super) fn end(&self, out: &mut Page<'_>) {
        match below(&mut self.rng(Piece::End as u64), 4) {
            0 => {
                out.push(b"</body>");
                self.newline(out);
                out.push(b"</html>");
            }
            1 => out.push(b"</body></html>"),
            2 => {}
            _ => out.push(b"</body>\n</html>"),
        }
        self.newline(out);
    }

    /// `<html lang=...>` and `<head>`, before the charset.
    pub(super) fn html_open(&self, out: &mut Page<'_>) {
        out.push(b"<html lang=\"");
        out.push(self.pick(Piece::Lang, LANGS).as_bytes());
        out.push(b"\">");
        self.newline(out);
        out.push(b"<head>");
        self.newline(out);
    }

    /// Whether the stylesheet comes before the viewport meta.
    pub(super) fn style_early(&self) -> bool {
        self.flip(Piece::HeadOrder, 2)
    }

    /// Writes the title's separator between the page heading and the site name.
    pub(super) fn title_separator(&self, out: &mut Page<'_>) {
        out.push(
            self.pick(Piece::Title, &[" | ", " - ", " &mdash; ", " &middot; ", " :: ", " &ndash; "])
                .as_bytes(),
        );
    }

    /// How the description meta is written: `None` when this site has none, else the opening
    /// (up to the content) and the closing.
    pub(super) fn description(&self) -> Option<(&'static str, &'static str)> {
        // The content first: `<meta name="description" content="` would be a run of fixed text
        // longer than the fingerprint allows.
        match below(&mut self.rng(Piece::Description as u64), 7) {
            0 => None,
            1 => Some(("<meta content=\"", "\" name='description'>")),
            2 => Some(("<meta content=\"", "\" name=\"description\">")),
            3 => Some(("<meta content=\"", "\" name=\"description\" />")),
            4 => Some(("<meta content=\"", "\" name=\"description\"/>")),
            5 => Some(("<meta content='", "' name=description>")),
            _ => Some(("<meta content=\"", "\" name=description>")),
        }
    }

    /// The stylesheet, in a `<style>` element.
    pub(super) fn style(&self, words: &[Box<str>], out: &mut Page<'_>) {
        let mut rng = self.rng(Piece::Style as u64);
        let format = &CSS_FORMATS[below(&mut rng, CSS_FORMATS.len())];
        out.push(
            [
                b"<style>".as_slice(),
                b"<style>",
                b"<style type=\"text/css\">",
                b"<style type='text/css'>",
                b"<style media=\"all\">",
                b"<style media=\"screen\">",
                b"<style media=all>",
            ][below(&mut rng, 7)],
        );
        out.push(format.start.as_bytes());
        let mut rules: [u8; 8] = [0, 1, 2, 3, 4, 5, 6, 7];
        // Rule order varies too; the body rule comes first as most sites have it.
        for i in (2..rules.len()).rev() {
            rules.swap(i, 1 + below(&mut rng, i));
        }
        let tight_end = below(&mut rng, 2) == 0;
        for rule in rules {
            let mut css = Css { out: &mut *out, format, first: true };
            match rule {
                0 => {
                    css.selector(b"", Some(Role::Body), self, words);
                    if below(&mut rng, 2) == 0 {
                        css.length(&mut rng, "padding", 4..24, 10);
                    }
                    css.length(&mut rng, "max-width", 34..64, 1);
                    // `margin: X auto` with X drawn, so no two sites share the run of fixed text.
                    css.length(&mut rng, "margin", 0..30, 10);
                    css.out.push(b" auto");
                    if below(&mut rng, 2) == 0 {
                        css.length(&mut rng, "padding", 4..24, 10);
                    }
                    css.font(&mut rng);
                    css.color(&mut rng, "color", 0x10..0x40);
                    if below(&mut rng, 2) == 0 {
                        css.color(&mut rng, "background", 0xe8..0x100);
                    }
                }
                1 => {
                    css.selector(b"", Some(Role::Header), self, words);
                    // The font, when there is one, before or after the rest: a fixed
                    // property after a value from a small range is a run other sites repeat.
                    let font = below(&mut rng, 3);
                    if font == 0 {
                        css.font(&mut rng);
                    }
                    css.length(&mut rng, "margin-bottom", 5..30, 10);
                    if below(&mut rng, 2) == 0 {
                        css.border(&mut rng, "border-bottom");
                    }
                    if font == 1 {
                        css.font(&mut rng);
                    }
                }
                2 => {
                    css.selector(b" a", Some(Role::Nav), self, words);
                    // Every declaration here has a drawn value: fixed ones side by side would be
                    // a string many sites share.
                    let property =
                        ["margin-right", "padding", "margin-left", "padding-right"][below(&mut rng, 4)];
                    if below(&mut rng, 2) == 0 {
                        css.color(&mut rng, "color", 0x20..0xa0);
                    }
                    css.length(&mut rng, property, 2..12, 10);
                }
                3 => {
                    css.selector(b"", Some(Role::Meta), self, words);
                    css.color(&mut rng, "color", 0x50..0x90);
                    css.length(&mut rng, "font-size", 75..95, 100);
                }
                4 => {
                    css.selector(b"", Some(Role::Footer), self, words);
                    css.length(&mut rng, "margin-top", 10..40, 10);
                    css.color(&mut rng, "color", 0x40..0x80);
                    if below(&mut rng, 2) == 0 {
                        css.border(&mut rng, "border-top");
                    }
                }
                5 => {
                    // Each heading scoped (`.post h1, .post h2`), as the rule means: a drawn class
                    // between the headings, where a bare list would be fixed text before the
                    // declarations.
                    const HEADINGS: [&[&[u8]]; 3] =
                        [&[b" h1", b" h2", b" h3"], &[b" h1", b" h2"], &[b" h2", b" h3"]];
                    let headings = HEADINGS[below(&mut rng, 3)];
                    let separator: &[u8] = [b",".as_slice(), b", ", b",\n"][below(&mut rng, 3)];
                    for (i, heading) in headings.iter().enumerate() {
                        if i + 1 < headings.len() {
                            css.scoped(heading, self.scope(), self, words);
                            css.out.push(separator);
                        } else {
                            css.selector(heading, Some(self.scope()), self, words);
                        }
                    }
                    // The line height, a font and a weight, in a drawn order: `line-height: 1.`
                    // after a fixed selector is too long a run to open every site's rule with.
                    css.length(&mut rng, "line-height", 105..160, 100);
                    if below(&mut rng, 2) == 0 {
                        css.font(&mut rng);
                    }
                }
                6 => {
                    // Scoped, so the rule starts with a drawn class name.
                    let selector: &[u8] =
                        [b" a".as_slice(), b" a:link", b" a, a:visited", b" a"][below(&mut rng, 4)];
                    css.selector(selector, Some(self.scope()), self, words);
                    css.color(&mut rng, "color", 0x10..0xa0);
                }
                _ => {
                    // Scoped to the article (its class, or its tag), as themes write it; the
                    // declarations (some optional) in a drawn order, so that no run of them is
                    // likely to be another site's.
                    let selector: &[u8] =
                        [b" blockquote".as_slice(), b" blockquote p", b" blockquote"][below(&mut rng, 3)];
                    css.selector(selector, Some(self.scope()), self, words);
                    let mut declarations: [u8; 4] = [0, 1, 2, 3];
                    for i in (1..declarations.len()).rev() {
                        declarations.swap(i, below(&mut rng, i + 1));
                    }
                    for declaration in declarations {
                        match declaration {
                            0 => {
                                let property = ["padding-left", "padding"][below(&mut rng, 2)];
                                css.length(&mut rng, property, 5..20, 10);
                            }
                            1 => css.border(&mut rng, "border-left"),
                            2 if below(&mut rng, 2) == 0 => css.length(&mut rng, "margin-left", 0..20, 10),
                            3 if below(&mut rng, 2) == 0 => css.color(&mut rng, "color", 0x30..0x70),
                            _ => {}
                        }
                    }
                }
            }
            if rule == rules[rules.len() - 1] && tight_end {
                // Some sites end the stylesheet right at its last brace.
                css.out.push(css.format.close.trim_end().as_bytes());
            } else {
                css.end();
            }
        }
        out.push(b"</style>");
        self.newline(out);
    }

    /// The element article styles are scoped to: the first of the article's containers that has
    /// a class on this site (a class is a drawn word; a bare tag would be text many sites share).
    fn scope(&self) -> Role {
        [Role::Article, Role::Main, Role::Wrapper, Role::Body]
            .into_iter()
            .find(|&role| !self.tag(role).is_empty() && self.has_class(role))
            .unwrap_or(Role::Article)
    }

    /// The tag of `role` on this site.
    fn tag(&self, role: Role) -> &'static str {
        let options: &[&'static str] = match role {
            Role::Body => &["body"],
            Role::Wrapper => &["", "", "div"],
            Role::Header => &["header", "header", "div"],
            Role::SiteName => &["p", "div", "span", "strong"],
            Role::Nav => &["nav", "nav", "div"],
            Role::Main => &["main", "main", "div", "section"],
            Role::Article => &["article", "article", "div", "section"],
            Role::Meta => &["p", "div", "span", "small"],
            Role::Related => &["aside", "section", "div", "nav"],
            Role::RelatedHeading => &["h2", "h3", "h4", "strong"],
            Role::RelatedList => &["ul", "ol", "ul"],
            Role::RelatedItem => &["li"],
            Role::Footer => &["footer", "footer", "div"],
            Role::FooterNote => &["small", "span", "div"],
            Role::FooterNav => &["nav", "div", "span"],
            Role::Subheading => &["h2", "h3", "h2"],
        };
        options[below(&mut self.rng(Piece::Tag as u64 + role as u64), options.len())]
    }

    /// Whether `role` carries a class on this site (the footer note and list never need one,
    /// but may have one).
    fn has_class(&self, role: Role) -> bool {
        let mut rng = self.rng(Piece::Class as u64 + role as u64);
        // Themes name their generic containers; a bare `div` rule would style every one.
        if matches!(self.tag(role), "div" | "span" | "section" | "small") {
            return true;
        }
        match role {
            // A bare `<body>` would leave `</title></head><body><header class=` as a run of
            // fixed text many sites share; themes class their body anyway.
            // Related items and the main container classed too: `</a></li><li><a href="` and
            // `</article></main><footer` are fixed runs otherwise (a classed block gets a
            // closing comment on most sites).
            Role::Meta | Role::Wrapper | Role::Body | Role::RelatedItem | Role::Main | Role::Article => true,
            Role::Header | Role::Nav | Role::Footer => below(&mut rng, 4) != 0,
            Role::Subheading => false,
            _ => below(&mut rng, 2) == 0,
        }
    }

    /// Opens `role`'s element (nothing when this site has no such wrapper).
    pub(super) fn open(&self, role: Role, words: &[Box<str>], out: &mut Page<'_>) {
        let tag = self.tag(role);
        if tag.is_empty() {
            return;
        }
        out.byte(b'<');
        out.push(tag.as_bytes());
        if self.has_class(role) {
            // Minified sites leave class names (plain words here) unquoted, as HTML allows.
            let quote = !self.flip(Piece::Quotes, 3);
            out.push(if quote { b" class=\"" } else { b" class=" });
            self.class(role, words, out);
            if quote {
                out.byte(b'"');
            }
        }
        out.byte(b'>');
    }

    /// Closes `role`'s element; the large blocks of some sites name what they close in a
    /// comment, as many themes do.
    pub(super) fn close(&self, role: Role, words: &[Box<str>], out: &mut Page<'_>) {
        let tag = self.tag(role);
        // Some sites leave list items unclosed, as HTML allows.
        if tag.is_empty() || (role == Role::RelatedItem && self.flip(Piece::ItemEnd, 3)) {
            return;
        }
        out.push(b"</");
        out.push(tag.as_bytes());
        out.byte(b'>');
        let block = matches!(
            role,
            Role::Header | Role::Nav | Role::Main | Role::Article | Role::Related | Role::Footer
        );
        if block && self.has_class(role) {
            let (open, close): (&[u8], &[u8]) = match below(&mut self.rng(Piece::Comments as u64), 7) {
                0 => return,
                1 => (b"<!-- .", b" -->"),
                2 => (b"<!-- /", b" -->"),
                3 => (b"<!-- end ", b" -->"),
                4 => (b"<!--.", b"-->"),
                5 => (b"<!-- #", b" -->"),
                _ => (b"<!--/", b"-->"),
            };
            out.push(open);
            self.class(role, words, out);
            out.push(close);
        }
    }

    /// `role`'s class name: one or two dictionary words, in this site's naming style.
    fn class(&self, role: Role, words: &[Box<str>], out: &mut Page<'_>) {
        let mut rng = self.rng(Piece::Class as u64 + 32 + role as u64);
        let style = below(&mut self.rng(Piece::ClassWords as u64), 3);
        out.push(words[below(&mut rng, words.len())].as_bytes());
        if below(&mut rng, 2) == 0 {
            out.push([b"-".as_slice(), b"_", b"-"][style]);
            out.push(words[below(&mut rng, words.len())].as_bytes());
        }
    }

    /// Where the related-articles block goes.
    pub(super) fn related_place(&self) -> RelatedPlace {
        match below(&mut self.rng(Piece::RelatedPlace as u64), 3) {
            0 => RelatedPlace::InArticle,
            1 => RelatedPlace::AfterArticle,
            _ => RelatedPlace::AfterMain,
        }
    }

    /// Whether the date line comes before the `<h1>`.
    pub(super) fn meta_first(&self) -> bool {
        self.flip(Piece::MetaFirst, 3)
    }

    /// Whether the footer's links come before its note.
    pub(super) fn footer_nav_first(&self) -> bool {
        self.flip(Piece::FooterNavFirst, 2)
    }

    /// The words before a page's date ("Posted", ...), with their space.
    pub(super) fn meta_words(&self, out: &mut Page<'_>) {
        let words = self.pick(Piece::MetaWords, META_WORDS);
        if !words.is_empty() {
            out.push(words.as_bytes());
            out.byte(b' ');
        }
    }

    /// The related block's heading.
    pub(super) fn related_words(&self, out: &mut Page<'_>) {
        out.push(self.pick(Piece::RelatedWords, RELATED_WORDS).as_bytes());
    }

    /// How this site writes its section names in links: 0 capitalised, 1 lowercase, 2 capitals.
    pub(super) fn nav_case(&self) -> usize {
        below(&mut self.rng(Piece::NavCase as u64), 3)
    }

    /// Between two navigation links.
    pub(super) fn nav_separator(&self, out: &mut Page<'_>) {
        out.push(self.pick(Piece::NavSeparator, NAV_SEPARATORS).as_bytes());
    }

    /// A date in this site's format, from the page's random `rng`.
    pub(super) fn date<R: Rng>(&self, rng: &mut R, out: &mut Page<'_>) {
        let month = below(rng, 12);
        let day = 1 + below(rng, 28);
        let year = Decimal::new(2009 + below(rng, 17), 4);
        let name = MONTHS[month];
        match below(&mut self.rng(Piece::Date as u64), 7) {
            0 => {
                out.push(name.as_bytes());
                out.byte(b' ');
                out.push(Decimal::new(day, 1).as_bytes());
                out.push(b", ");
                out.push(year.as_bytes());
            }
            1 => {
                out.push(Decimal::new(day, 1).as_bytes());
                out.byte(b' ');
                out.push(name.as_bytes());
                out.byte(b' ');
                out.push(year.as_bytes());
            }
            2 => {
                out.push(year.as_bytes());
                out.byte(b'-');
                out.push(Decimal::new(month + 1, 2).as_bytes());
                out.byte(b'-');
                out.push(Decimal::new(day, 2).as_bytes());
            }
            3 => {
                out.push(&name.as_bytes()[..3]);
                out.byte(b' ');
                out.push(Decimal::new(day, 1).as_bytes());
                out.push(b", ");
                out.push(year.as_bytes());
            }
            4 => {
                out.push(Decimal::new(month + 1, 2).as_bytes());
                out.byte(b'/');
                out.push(Decimal::new(day, 2).as_bytes());
                out.byte(b'/');
                out.push(year.as_bytes());
            }
            5 => {
                out.push(Decimal::new(day, 1).as_bytes());
                out.byte(b'.');
                out.push(Decimal::new(month + 1, 1).as_bytes());
                out.byte(b'.');
                out.push(year.as_bytes());
            }
            _ => {
                out.push(Decimal::new(day, 1).as_bytes());
                out.byte(b' ');
                out.push(&name.as_bytes()[..3]);
                out.byte(b' ');
                out.push(year.as_bytes());
            }
        }
    }

    /// The footer's note around the site name (written by `site`) and `year`.
    pub(super) fn footer_note(&self, year: usize, out: &mut Page<'_>, site: impl FnOnce(&mut Page<'_>)) {
        let year = Decimal::new(year, 4);
        let year = year.as_bytes();
        match below(&mut self.rng(Piece::FooterWords as u64), 7) {
            0 => {
                out.push(b"&copy; ");
                out.push(year);
                out.byte(b' ');
                site(out);
            }
            1 => {
                out.push(b"Copyright &copy; ");
                out.push(year);
                out.byte(b' ');
                site(out);
            }
            2 => {
                out.push(b"&copy; ");
                site(out);
                out.byte(b' ');
                out.push(year);
            }
            3 => {
                site(out);
                out.push(b" &middot; ");
                out.push(year);
            }
            4 => {
                out.push(b"&copy; ");
                out.push(year);
                out.byte(b' ');
                site(out);
                out.push(b". All rights reserved.");
            }
            5 => {
                out.push(b"Copyright ");
                out.push(year);
                out.push(b", ");
                site(out);
            }
            _ => {
                site(out);
                out.push(b", ");
                out.push(year);
            }
        }
    }
}

/// How a site's stylesheet is laid out: minified, or one of the usual pretty styles.
struct CssFormat {
    start: &'static str,
    open: &'static str,
    indent: &'static str,
    colon: &'static str,
    separator: &'static str,
    close: &'static str,
}

const CSS_FORMATS: [CssFormat; 5] = [
    CssFormat { start: "", open: "{", indent: "", colon: ":", separator: ";", close: "}" },
    CssFormat { start: "\n", open: " {\n", indent: "  ", colon: ": ", separator: ";\n", close: ";\n}\n" },
    CssFormat { start: "\n", open: " {\n", indent: "    ", colon: ": ", separator: ";\n", close: ";\n}\n\n" },
    CssFormat { start: "\n", open: " {\n", indent: "\t", colon: ": ", separator: ";\n", close: "\n}\n" },
    CssFormat { start: "\n", open: " { ", indent: "", colon: ": ", separator: "; ", close: "; }\n" },
];

/// Writes one stylesheet rule.
struct Css<'p, 'a> {
    out: &'p mut Page<'a>,
    format: &'static CssFormat,
    first: bool,
}

impl Css<'_, '_> {
    /// The selector: `element`, or the class of `role` followed by `element`.
    fn selector(&mut self, element: &[u8], role: Option<Role>, look: &Look, words: &[Box<str>]) {
        if let Some(role) = role {
            self.scoped(element, role, look, words);
        } else {
            self.out.push(element);
        }
        self.out.push(self.format.open.as_bytes());
    }

    /// `element` within `role`'s element: its class, or its tag.
    fn scoped(&mut self, element: &[u8], role: Role, look: &Look, words: &[Box<str>]) {
        if look.has_class(role) {
            self.out.byte(b'.');
            look.class(role, words, self.out);
        } else {
            // A bare tag under the body's class (which every site has): `header {` alone would
            // open the same run of text on many sites.
            if role != Role::Body {
                self.out.byte(b'.');
                look.class(Role::Body, words, self.out);
                self.out.byte(b' ');
            }
            let tag = look.tag(role);
            self.out.push(if tag.is_empty() { b"div" } else { tag.as_bytes() });
        }
        self.out.push(element);
    }

    fn start(&mut self, property: &str) {
        if !self.first {
            self.out.push(self.format.separator.as_bytes());
        }
        self.first = false;
        self.out.push(self.format.indent.as_bytes());
        self.out.push(property.as_bytes());
        self.out.push(self.format.colon.as_bytes());
    }

    /// A length drawn from `range` / `scale`, in a unit drawn too (line-height has none).
    fn length(&mut self, rng: &mut Pcg32, property: &str, range: std::ops::Range<usize>, scale: usize) {
        self.start(property);
        let value = range.start + below(rng, range.end - range.start);
        let unit = match property {
            "line-height" => "",
            "font-size" => "em",
            _ => LENGTH_UNITS[below(rng, LENGTH_UNITS.len())],
        };
        if unit == "px" {
            // Pixels are whole: ten to the em.
            self.out.push(Decimal::new(value * 10 / scale, 1).as_bytes());
        } else {
            self.number(value, scale);
        }
        self.out.push(unit.as_bytes());
    }

    /// `value / scale` as a short decimal.
    fn number(&mut self, value: usize, scale: usize) {
        let whole = value / scale;
        let fraction = value % scale;
        if whole > 0 || fraction == 0 {
            self.out.push(Decimal::new(whole, 1).as_bytes());
        }
        if fraction > 0 {
            self.out.byte(b'.');
            let digits = if scale >= 100 { Decimal::new(fraction, 2) } else { Decimal::new(fraction, 1) };
            self.out.push(digits.as_bytes().strip_suffix(b"0").unwrap_or(digits.as_bytes()));
        }
    }

    fn color(&mut self, rng: &mut Pcg32, property: &str, range: std::ops::Range<usize>) {
        self.start(property);
        self.hex_color(rng, range);
    }

    /// A border: width, style and color, in one of the orders CSS allows.
    fn border(&mut self, rng: &mut Pcg32, property: &str) {
        self.start(property);
        let style = ["solid", "dotted", "dashed", "solid", "double"][below(rng, 5)];
        let color_first = below(rng, 3) == 0;
        if color_first {
            self.hex_color(rng, 0x90..0xf0);
            self.out.byte(b' ');
        }
        if below(rng, 2) == 0 {
            self.out.push(Decimal::new(1 + below(rng, 6), 1).as_bytes());
            self.out.push(b"px ");
        } else {
            self.number(5 + below(rng, 30), 100);
            self.out.push([b"em ".as_slice(), b"rem "][below(rng, 2)]);
        }
        self.out.push(style.as_bytes());
        if !color_first {
            self.out.byte(b' ');
            self.hex_color(rng, 0x90..0xf0);
        }
    }

    fn hex_color(&mut self, rng: &mut Pcg32, range: std::ops::Range<usize>) {
        self.out.byte(b'#');
        for _ in 0..3 {
            let channel = range.start + below(rng, range.end - range.start);
            self.out.push(&hex(channel.min(255) as u8));
        }
    }

    /// A font shorthand or family: one to three families from the pool, then a generic one.
    fn font(&mut self, rng: &mut Pcg32) {
        if below(rng, 2) == 0 {
            self.start("font");
            self.out.push(Decimal::new(14 + below(rng, 6), 1).as_bytes());
            self.out.push(b"px/");
            self.number(14 + below(rng, 5), 10);
            self.out.byte(b' ');
        } else {
            self.start("font-family");
        }
        for _ in 0..1 + below(rng, 3) {
            self.out.push(FONTS[below(rng, FONTS.len())].as_bytes());
            self.out.byte(b',');
        }
        self.out.push(GENERIC_FONTS[below(rng, GENERIC_FONTS.len())].as_bytes());
    }

    fn end(self) {
        self.out.push(self.format.close.as_bytes());
    }
}

fn hex(byte: u8) -> [u8; 2] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    [DIGITS[usize::from(byte >> 4)], DIGITS[usize::from(byte & 15)]]
}
