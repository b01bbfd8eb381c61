//! A site's own page as the trap's layout (`trap { template "FILE" }`): an HTML file from the real
//! site (its head, stylesheet links, header, navigation, footer) with placeholders where the trap
//! writes its text, so trap pages look like the site's other pages.
//!
//! Placeholders: `{{title}}` (the page title's heading), `{{content}}` (the date line and the
//! article: paragraphs, lists, quotes, subheadings) and `{{links}}` (a list of links to more trap
//! pages) are required; `{{heading}}` (the same heading, for an `<h1>`) and `{{nav}}` (section
//! links) are optional. Each may appear once. The file is checked when it is loaded: an unknown
//! or repeated placeholder, a missing one, or markup whose elements do not nest is an error that
//! names the line and column. Everything the trap inserts is HTML-escaped, as in every page.

use std::fmt;
use std::path::{Path, PathBuf};

/// A checked template: literal HTML and placeholders, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

/// A piece of a template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Part {
    Literal(String),
    Slot(Slot),
}

/// Where the trap writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Slot {
    Title,
    Heading,
    Content,
    Links,
    Nav,
}

const SLOTS: [(&str, Slot, bool); 5] = [
    ("title", Slot::Title, true),
    ("heading", Slot::Heading, false),
    ("content", Slot::Content, true),
    ("links", Slot::Links, true),
    ("nav", Slot::Nav, false),
];

/// Elements that never have a closing tag.
const VOID: &[&str] =
    &["area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"];
/// Elements whose closing tag HTML lets a page leave out; not required to nest.
const OPTIONAL_END: &[&str] =
    &["p", "li", "dt", "dd", "option", "tr", "td", "th", "thead", "tbody", "html", "head", "body"];

/// A template that cannot be used, with where.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// The file could not be read.
    #[error("cannot read the trap template {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a usable template.
    #[error("{path}:{line}:{column}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column (characters).
        column: usize,
        /// What is wrong.
        message: String,
    },
}

/// The largest template: a site's page is tens of kilobytes, and every trap page is at least
/// the template's size.
pub(crate) const MAX_TEMPLATE_BYTES: u64 = 1 << 20;

impl Template {
    /// Reads and checks the template at `path` (a regular file of at most
    /// [`MAX_TEMPLATE_BYTES`]).
    pub fn load(path: &Path) -> Result<Template, TemplateError> {
        let bytes = crate::support::bounded_file::read(path, MAX_TEMPLATE_BYTES)
            .map_err(|source| TemplateError::Read { path: path.into(), source })?;
        let text = String::from_utf8_lossy(&bytes);
        Template::parse(&text).map_err(|problem| {
            let (line, column) = line_column(&text, problem.at);
            TemplateError::Invalid { path: path.into(), line, column, message: problem.message }
        })
    }

    /// Checks `text` as a template.
    pub(super) fn parse(text: &str) -> Result<Template, Problem> {
        check_nesting(text)?;
        let mut parts = Vec::new();
        let mut seen = [None::<usize>; SLOTS.len()];
        let mut rest = 0;
        while let Some(found) = text[rest..].find("{{") {
            let open = rest + found;
            let Some(length) = text[open..].find("}}") else {
                return Err(Problem::new(open, "`{{` is never closed with `}}`"));
            };
            let name = text[open + 2..open + length].trim();
            let Some(index) = SLOTS.iter().position(|(slot, _, _)| *slot == name) else {
                let known: Vec<String> = SLOTS.iter().map(|(slot, _, _)| format!("{{{{{slot}}}}}")).collect();
                return Err(Problem::new(
                    open,
                    format!(
                        "unknown placeholder `{{{{{name}}}}}`; the placeholders are {}",
                        known.join(", ")
                    ),
                ));
            };
            if let Some(first) = seen[index] {
                let (line, column) = line_column(text, first);
                return Err(Problem::new(
                    open,
                    format!("`{{{{{name}}}}}` appears twice (first at {line}:{column})"),
                ));
            }
            seen[index] = Some(open);
            if open > rest {
                parts.push(Part::Literal(text[rest..open].to_string()));
            }
            parts.push(Part::Slot(SLOTS[index].1));
            rest = open + length + 2;
        }
        if rest < text.len() {
            parts.push(Part::Literal(text[rest..].to_string()));
        }
        if let Some((name, _, _)) = SLOTS
            .iter()
            .zip(seen)
            .find(|((_, _, required), at)| *required && at.is_none())
            .map(|(slot, _)| slot)
        {
            return Err(Problem::new(
                text.len(),
                format!("the placeholder `{{{{{name}}}}}` is missing: title, content and links are required"),
            ));
        }
        Ok(Template { parts })
    }

    pub(super) fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// Bytes of literal HTML after the content placeholder: what the page still needs once the
    /// article is written.
    pub(super) fn bytes_after_content(&self) -> usize {
        let content = self.parts.iter().position(|part| *part == Part::Slot(Slot::Content)).unwrap_or(0);
        self.parts[content..]
            .iter()
            .map(|part| match part {
                Part::Literal(text) => text.len(),
                Part::Slot(_) => 0,
            })
            .sum()
    }
}

/// A problem at a byte offset of the template.
#[derive(Debug)]
pub(crate) struct Problem {
    at: usize,
    message: String,
}

impl Problem {
    fn new(at: usize, message: impl Into<String>) -> Problem {
        Problem { at, message: message.into() }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: {}", self.at, self.message)
    }
}

/// Checks that elements nest: every closing tag closes the innermost open element, and every
/// element that must be closed is. Comments, the doctype, and script and style contents are
/// skipped; void elements and those whose end tag HTML makes optional need no closing tag.
fn check_nesting(text: &str) -> Result<(), Problem> {
    let mut open: Vec<(String, usize)> = Vec::new();
    let mut at = 0;
    while let Some(found) = text[at..].find('<') {
        let start = at + found;
        let rest = &text[start..];
        if rest.starts_with("<!--") {
            let Some(end) = rest.find("-->") else {
                return Err(Problem::new(start, "a comment `<!--` is never closed"));
            };
            at = start + end + 3;
            continue;
        }
        let Some(end) = tag_end(rest) else {
            return Err(Problem::new(start, "a tag is never closed with `>`"));
        };
        let tag = &rest[1..end];
        at = start + end + 1;
        if tag.starts_with('!') || tag.starts_with('?') {
            continue;
        }
        let closing = tag.starts_with('/');
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .map(|c| c.to_ascii_lowercase())
            .collect();
        if name.is_empty() {
            // A `<` that starts no tag (text such as `a < b`): HTML reads it as text.
            at = start + 1;
            continue;
        }
        if closing {
            if VOID.contains(&name.as_str()) {
                continue;
            }
            // Elements with optional end tags left open inside this one are closed by it.
            while let Some((top, _)) = open.last() {
                if *top != name && OPTIONAL_END.contains(&top.as_str()) {
                    open.pop();
                } else {
                    break;
                }
            }
            match open.pop() {
                Some((top, _)) if top == name => {}
                Some((top, opened)) => {
                    let (line, column) = line_column(text, opened);
                    return Err(Problem::new(
                        start,
                        format!("`</{name}>` closes `<{top}>` (opened at {line}:{column})"),
                    ));
                }
                None if OPTIONAL_END.contains(&name.as_str()) => {}
                None => return Err(Problem::new(start, format!("`</{name}>` closes no open element"))),
            }
        } else if !VOID.contains(&name.as_str()) && !tag.ends_with('/') {
            if name == "script" || name == "style" {
                let close = format!("</{name}");
                match text[at..].to_ascii_lowercase().find(&close) {
                    Some(end) => at += end,
                    None => return Err(Problem::new(start, format!("`<{name}>` is never closed"))),
                }
            }
            open.push((name, start));
        }
    }
    if let Some((name, opened)) =
        open.into_iter().rev().find(|(name, _)| !OPTIONAL_END.contains(&name.as_str()))
    {
        return Err(Problem::new(opened, format!("`<{name}>` is never closed")));
    }
    Ok(())
}

/// The end of the tag starting `rest` (its `>`, outside quoted attribute values).
fn tag_end(rest: &str) -> Option<usize> {
    let mut quote = None;
    for (i, c) in rest.char_indices().skip(1) {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '>') => return Some(i),
            _ => {}
        }
    }
    None
}

/// 1-based line and column (in characters) of byte `at`.
fn line_column(text: &str, at: usize) -> (usize, usize) {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |line| line.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SITE: &str = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
        <title>{{title}} - The Bike Shed</title>\n<link rel=\"stylesheet\" href=\"/css/site.css\">\n</head>\n\
        <body>\n<header class=\"masthead\"><a href=\"/\">The Bike Shed</a><nav>{{nav}}</nav></header>\n\
        <main><h1>{{heading}}</h1>\n{{content}}\n<section class=\"more\"><h2>More</h2>{{links}}</section></main>\n\
        <footer><p>Open Tuesday to Saturday<br>Est. 1998</footer>\n</body>\n</html>\n";

    fn problem(text: &str) -> String {
        let problem = Template::parse(text).unwrap_err();
        let (line, column) = line_column(text, problem.at);
        format!("{line}:{column}: {}", problem.message)
    }

    #[test]
    fn a_sites_page_with_placeholders_is_a_template() {
        let template = Template::parse(SITE).unwrap();
        let slots: Vec<Slot> = template
            .parts()
            .iter()
            .filter_map(|part| match part {
                Part::Slot(slot) => Some(*slot),
                Part::Literal(_) => None,
            })
            .collect();
        assert_eq!(slots, [Slot::Title, Slot::Nav, Slot::Heading, Slot::Content, Slot::Links]);
        assert!(template.bytes_after_content() > 100);
    }

    #[test]
    fn placeholders_must_be_known_single_and_present() {
        let unknown = SITE.replace("{{nav}}", "{{navigation}}");
        assert!(
            problem(&unknown).starts_with("9:60: unknown placeholder `{{navigation}}`"),
            "{}",
            problem(&unknown)
        );
        let twice = SITE.replace("<h2>More</h2>", "<h2>{{title}}</h2>");
        assert!(problem(&twice).contains("`{{title}}` appears twice (first at 5:8)"), "{}", problem(&twice));
        let missing = SITE.replace("{{links}}", "");
        assert!(problem(&missing).contains("`{{links}}` is missing"), "{}", problem(&missing));
        assert!(problem("<p>{{title</p>").contains("never closed with `}}`"));
    }

    #[test]
    fn markup_that_does_not_nest_is_refused_with_where() {
        let crossed = SITE.replace("</section></main>", "</main></section>");
        assert_eq!(
            problem(&crossed),
            "12:45: `</main>` closes `<section>` (opened at 12:1)",
            "a closing tag must close the innermost element"
        );
        let unclosed = SITE.replace("</main>", "");
        assert_eq!(problem(&unclosed), "14:1: `</body>` closes `<main>` (opened at 10:1)");
        assert_eq!(problem("<main>{{title}}{{content}}{{links}}"), "1:1: `<main>` is never closed");
        let stray = SITE.replace("</header>", "</header></div>");
        assert!(
            problem(&stray).contains("`</div>` closes `<body>`")
                || problem(&stray).contains("closes no open")
        );
        assert!(
            problem("<div>{{title}}{{content}}{{links}}<!-- open").contains("comment `<!--` is never closed")
        );
        // What HTML allows is fine: optional end tags, void elements, `<` in text and scripts.
        let lenient = "<ul><li>one<li>two</ul><p>a < b<br><img src=x><script>if (a<b) {}</script>\
                       {{title}}{{content}}{{links}}";
        assert!(Template::parse(lenient).is_ok());
    }

    #[test]
    fn a_template_file_error_names_the_file_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("page.html");
        std::fs::write(&path, SITE.replace("</main>", "")).unwrap();
        let error = Template::load(&path).unwrap_err().to_string();
        assert!(error.ends_with("page.html:14:1: `</body>` closes `<main>` (opened at 10:1)"), "{error}");
        let error = Template::load(&dir.path().join("missing.html")).unwrap_err().to_string();
        assert!(error.contains("cannot read the trap template") && error.contains("missing.html"), "{error}");
    }

    #[test]
    fn a_template_must_be_a_regular_file_of_at_most_a_megabyte() {
        let reason = |path: &std::path::Path| {
            let error = Template::load(path).unwrap_err();
            std::error::Error::source(&error).map(ToString::to_string).unwrap_or_default()
        };
        assert_eq!(reason(std::path::Path::new("/dev/zero")), "not a regular file");
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.html");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert_eq!(reason(&fifo), "not a regular file", "a FIFO is refused, not waited on");
        let big = dir.path().join("big.html");
        std::fs::write(&big, SITE.repeat(10_000_000 / SITE.len())).unwrap();
        assert_eq!(reason(&big), "larger than 1048576 bytes");
    }
}
