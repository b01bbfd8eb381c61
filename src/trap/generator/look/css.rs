//! A look's stylesheet: its layout (minified or one of the usual pretty styles), the rules for
//! the elements and classes the page carries, and the values (lengths, colours, fonts) drawn
//! from the look's seed.

use rand_pcg::Pcg32;

use super::{Look, Piece, Role};
use crate::support::numbers::{Decimal, below};
use crate::trap::generator::page_buffer::Page;

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
    /// The stylesheet, in a `<style>` element.
    pub(in crate::trap::generator) fn style(&self, words: &[Box<str>], out: &mut Page<'_>) {
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
