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

mod css;

use super::page_buffer::Page;
use crate::support::numbers::{Decimal, below};

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
