//! Prose out of a site's own files: HTML (a static site generator's output) and Markdown (its
//! content folder), with what is not prose left out: navigation, headers and footers, asides,
//! scripts and styles, code blocks and inline code, forms, front matter.
//!
//! The trap should talk about what the site talks about, in sentences: each block (paragraph,
//! heading, list item, quote) becomes a paragraph of its own, so the chain never runs one
//! block's words into another's.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

/// HTML elements whose contents are never prose.
const SKIPPED_ELEMENTS: &[&str] = &[
    "script", "style", "nav", "header", "footer", "aside", "pre", "code", "noscript", "svg", "form",
    "template", "button", "select", "textarea", "head", "iframe", "object", "kbd", "samp", "figure",
];

/// HTML elements that end a block of text.
const BLOCK_ELEMENTS: &[&str] = &[
    "p",
    "div",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "li",
    "blockquote",
    "br",
    "tr",
    "td",
    "th",
    "dd",
    "dt",
    "article",
    "section",
    "main",
    "ul",
    "ol",
    "table",
    "hr",
    "body",
    "html",
    "title",
    "caption",
];

/// Elements that never have a closing tag, so never open a skipped region.
const VOID_ELEMENTS: &[&str] =
    &["area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"];

/// The prose of an HTML document, a paragraph per block.
pub(crate) fn html_text(html: &str) -> String {
    let mut text = String::with_capacity(html.len() / 2);
    let mut skipping: Vec<String> = Vec::new();
    let mut rest = html;
    while !rest.is_empty() {
        let Some(open) = rest.find('<') else {
            if skipping.is_empty() {
                push_decoded(&mut text, rest);
            }
            break;
        };
        if skipping.is_empty() {
            push_decoded(&mut text, &rest[..open]);
        }
        rest = &rest[open..];
        if let Some(after) = rest.strip_prefix("<!--") {
            rest = after.find("-->").map_or("", |end| &after[end + 3..]);
            continue;
        }
        let Some(close) = rest.find('>') else {
            break;
        };
        let tag = &rest[1..close];
        rest = &rest[close + 1..];
        let closing = tag.starts_with('/');
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .map(|c| c.to_ascii_lowercase())
            .collect();
        if name.is_empty() {
            continue;
        }
        let self_closing = tag.ends_with('/') || VOID_ELEMENTS.contains(&name.as_str());
        if SKIPPED_ELEMENTS.contains(&name.as_str()) && !self_closing {
            if closing {
                if let Some(at) = skipping.iter().rposition(|open| *open == name) {
                    skipping.truncate(at);
                }
            } else {
                skipping.push(name.clone());
                // Script and style hold text with `<` in it: jump to their end tag.
                if name == "script" || name == "style" {
                    let end = format!("</{name}");
                    match find_ignore_case(rest, &end) {
                        Some(at) => rest = &rest[at..],
                        None => rest = "",
                    }
                }
            }
            continue;
        }
        if skipping.is_empty() && BLOCK_ELEMENTS.contains(&name.as_str()) {
            end_block(&mut text);
        }
    }
    tidy(&text)
}

/// The prose of a Markdown document, a paragraph per block.
pub(crate) fn markdown_text(markdown: &str) -> String {
    let mut text = String::with_capacity(markdown.len());
    let options = Options::ENABLE_YAML_STYLE_METADATA_BLOCKS
        | Options::ENABLE_PLUSES_DELIMITED_METADATA_BLOCKS
        | Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH;
    let mut skipping = 0usize;
    for event in Parser::new_ext(markdown, options) {
        match event {
            Event::Start(Tag::CodeBlock(_) | Tag::MetadataBlock(_) | Tag::Image { .. } | Tag::HtmlBlock) => {
                skipping += 1;
            }
            Event::End(TagEnd::CodeBlock | TagEnd::MetadataBlock(_) | TagEnd::Image | TagEnd::HtmlBlock) => {
                skipping = skipping.saturating_sub(1);
            }
            Event::Text(words) if skipping == 0 => text.push_str(&words),
            Event::SoftBreak | Event::HardBreak if skipping == 0 => text.push(' '),
            Event::End(
                TagEnd::Paragraph
                | TagEnd::Heading(_)
                | TagEnd::Item
                | TagEnd::BlockQuote(_)
                | TagEnd::TableCell,
            ) => end_block(&mut text),
            // Inline code, raw HTML, rules, math: not prose.
            _ => {}
        }
    }
    tidy(&text)
}

fn end_block(text: &mut String) {
    if !text.ends_with("\n\n") && !text.is_empty() {
        text.push_str("\n\n");
    }
}

/// Text with its character references decoded (the common named ones and numeric ones).
fn push_decoded(text: &mut String, raw: &str) {
    let mut rest = raw;
    while let Some(amp) = rest.find('&') {
        text.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let end = rest[..rest.len().min(12)].find(';');
        let decoded = end.and_then(|end| decode_reference(&rest[1..end]).map(|c| (c, end)));
        match decoded {
            Some((c, end)) => {
                text.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                text.push('&');
                rest = &rest[1..];
            }
        }
    }
    text.push_str(rest);
}

fn decode_reference(name: &str) -> Option<char> {
    if let Some(number) = name.strip_prefix('#') {
        let code = match number.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => number.parse().ok()?,
        };
        return char::from_u32(code).filter(|c| !c.is_control() || c.is_whitespace());
    }
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "mdash" => '\u{2014}',
        "ndash" => '\u{2013}',
        "hellip" => '\u{2026}',
        "rsquo" => '\u{2019}',
        "lsquo" => '\u{2018}',
        "rdquo" => '\u{201d}',
        "ldquo" => '\u{201c}',
        "copy" => '\u{a9}',
        _ => return None,
    })
}

/// Blocks joined by blank lines, each block's whitespace collapsed; blocks without a letter
/// (numbers, punctuation, leftovers) dropped.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for block in text.split("\n\n") {
        let mut words = block.split_whitespace().peekable();
        if words.peek().is_none() || !block.chars().any(char::is_alphabetic) {
            continue;
        }
        for (i, word) in words.enumerate() {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(word);
        }
        out.push_str("\n\n");
    }
    out
}

fn find_ignore_case(haystack: &str, needle: &str) -> Option<usize> {
    haystack
        .as_bytes()
        .windows(needle.len())
        .position(|window| window.eq_ignore_ascii_case(needle.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_keeps_the_prose_and_drops_the_boilerplate() {
        let html = r#"<!DOCTYPE html><html><head><title>Site</title><style>p { color: red }</style>
            <script>if (a < b) { document.write("<p>not prose</p>") }</script></head>
            <body><header><nav><a href="/">Home</a> <a href="/about">About us</a></nav></header>
            <main><article><h1>Growing tomatoes on a balcony</h1>
            <p>Tomatoes need six hours of sun &amp; a deep pot.<br>Water them every morning.</p>
            <!-- a comment with <p>markup</p> -->
            <pre><code>let pot = Pot::new();</code></pre>
            <ul><li>Choose a cherry variety&#8230;</li><li>Feed weekly.</li></ul>
            <p>Inline <code>npm install</code> is dropped, the words around it stay.</p>
            <img src="x.png" alt="a photo"/><figure><figcaption>Caption text</figcaption></figure>
            </article><aside>Subscribe to the newsletter</aside></main>
            <footer>&copy; 2024 The Balcony Garden</footer></body></html>"#;
        let text = html_text(html);
        for kept in [
            "Growing tomatoes on a balcony",
            "Tomatoes need six hours of sun & a deep pot.",
            "Water them every morning.",
            "Choose a cherry variety\u{2026}",
            "Inline is dropped, the words around it stay.",
        ] {
            assert!(text.contains(kept), "{kept:?} missing from {text:?}");
        }
        for dropped in [
            "color",
            "not prose",
            "Home",
            "About us",
            "markup",
            "Pot::new",
            "npm",
            "Subscribe",
            "2024",
            "Caption",
        ] {
            assert!(!text.contains(dropped), "{dropped:?} kept in {text:?}");
        }
        assert!(text.contains("Growing tomatoes on a balcony\n\n"), "blocks are paragraphs: {text:?}");
    }

    #[test]
    fn markdown_keeps_the_prose_and_drops_code_and_front_matter() {
        let markdown = "---\ntitle: Front matter\ndate: 2024-01-01\n---\n\n# Brewing better coffee\n\n\
            Grind the beans *just* before brewing, and use water at [about 94 degrees](https://x.example).\n\n\
            ```sh\ncurl https://example.com | sh\n```\n\n- Weigh the coffee.\n- Pour slowly, with `pour()`.\n\n\
            ![a kettle](kettle.png)\n\n<div class=\"ad\">Buy now</div>\n\n> Patience is the secret.\n";
        let text = markdown_text(markdown);
        for kept in [
            "Brewing better coffee",
            "Grind the beans just before brewing, and use water at about 94 degrees.",
            "Weigh the coffee.",
            "Pour slowly, with .",
            "Patience is the secret.",
        ] {
            assert!(text.contains(kept), "{kept:?} missing from {text:?}");
        }
        for dropped in ["Front matter", "2024-01-01", "curl", "pour()", "kettle", "Buy now", "https"] {
            assert!(!text.contains(dropped), "{dropped:?} kept in {text:?}");
        }
    }

    #[test]
    fn broken_markup_never_panics_and_loses_only_what_it_must() {
        for html in [
            "<p>unclosed <b>bold",
            "<",
            "<<<>>>",
            "<script>never closed",
            "a &#xZZ; b &#99999999; &",
            "<p x='>'>y</p>",
        ] {
            let _ = html_text(html);
        }
        assert_eq!(html_text("<p>unclosed <b>bold words here"), "unclosed bold words here\n\n");
        assert_eq!(html_text("<p>odd &unknown; and &#65;</p>"), "odd &unknown; and A\n\n");
    }
}
