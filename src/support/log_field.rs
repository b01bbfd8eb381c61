//! Request text as a log field, cut to a bounded length: a client chooses its URI, user agent
//! and host, and without a cut a 380 KB URI writes a 390 KB log line per request.

use std::fmt;

/// Bytes of a field kept in a log line: longer than any real URI or user agent worth reading,
/// short enough that a line stays one screen.
pub(crate) const MAX_LOG_FIELD: usize = 512;

/// `text` as a log field: at most [`MAX_LOG_FIELD`] bytes, cut on a character boundary, with
/// `…(+N bytes)` saying how much was left out. Formats without allocating.
pub(crate) fn clipped(text: &str) -> Clipped<'_> {
    Clipped(text)
}

/// The longest prefix of `text` of at most `bytes` bytes that ends on a character boundary.
pub(crate) fn head(text: &str, bytes: usize) -> &str {
    if text.len() <= bytes {
        return text;
    }
    // `str::floor_char_boundary` is newer than the crate's minimum Rust.
    let end = (0..=bytes).rev().find(|&end| text.is_char_boundary(end)).unwrap_or(0);
    &text[..end]
}

/// A log field cut to [`MAX_LOG_FIELD`] bytes when displayed; see [`clipped`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clipped<'a>(&'a str);

impl fmt::Display for Clipped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.0;
        let kept = head(text, MAX_LOG_FIELD);
        if kept.len() == text.len() {
            return f.write_str(text);
        }
        write!(f, "{kept}…(+{} bytes)", text.len() - kept.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_fields_are_kept_whole() {
        assert_eq!(clipped("").to_string(), "");
        assert_eq!(clipped("/docs/a?x=1").to_string(), "/docs/a?x=1");
        let exactly = "a".repeat(MAX_LOG_FIELD);
        assert_eq!(clipped(&exactly).to_string(), exactly);
    }

    #[test]
    fn a_long_field_is_cut_and_says_how_much_is_missing() {
        let uri = format!("/{}", "a".repeat(380 * 1024));
        let logged = clipped(&uri).to_string();
        assert_eq!(logged, format!("{}…(+{} bytes)", &uri[..MAX_LOG_FIELD], uri.len() - MAX_LOG_FIELD));
        assert!(logged.len() < MAX_LOG_FIELD + 32);
    }

    #[test]
    fn the_cut_falls_on_a_character_boundary() {
        // Two-byte characters after one ASCII byte: byte 512 is in the middle of one.
        let text = format!("x{}", "é".repeat(600));
        let logged = clipped(&text).to_string();
        let kept = logged.split('…').next().unwrap();
        assert_eq!(kept.len(), MAX_LOG_FIELD - 1);
        assert!(logged.ends_with(&format!("…(+{} bytes)", text.len() - kept.len())));
    }
}

/// Whether a terminal would act on `c` rather than show it: control characters (C0 and C1) and
/// the bidirectional marks and overrides that reorder what follows them.
pub(crate) fn acts_on_terminal(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// A `serde_json` formatter that also writes the characters a terminal acts on (C1 controls,
/// bidirectional marks) as `\uXXXX` escapes, which JSON allows for any character: a report of
/// client-chosen text stays safe to `cat`, and reads back as the same strings.
pub(crate) struct TerminalSafe<F>(pub F);

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for TerminalSafe<F> {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut rest = fragment;
        while let Some((at, c)) = rest.char_indices().find(|(_, c)| acts_on_terminal(*c)) {
            self.0.write_string_fragment(writer, &rest[..at])?;
            write!(writer, "\\u{:04x}", u32::from(c))?;
            rest = &rest[at + c.len_utf8()..];
        }
        self.0.write_string_fragment(writer, rest)
    }

    // Everything else as the wrapped formatter writes it.
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.0.begin_array(writer)
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.0.end_array(writer)
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_array_value(writer, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(writer)
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.0.begin_object(writer)
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.0.end_object(writer)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_object_key(writer, first)
    }
    fn end_object_key<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.0.end_object_key(writer)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.0.begin_object_value(writer)
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(writer)
    }
}

/// `value` as JSON (pretty with `pretty`), with [`TerminalSafe`] escapes.
pub fn terminal_safe_json<W: std::io::Write, T: serde::Serialize + ?Sized>(
    writer: W,
    value: &T,
    pretty: bool,
) -> serde_json::Result<()> {
    if pretty {
        let formatter = TerminalSafe(serde_json::ser::PrettyFormatter::new());
        value.serialize(&mut serde_json::Serializer::with_formatter(writer, formatter))
    } else {
        value.serialize(&mut serde_json::Serializer::with_formatter(
            writer,
            TerminalSafe(serde_json::ser::CompactFormatter),
        ))
    }
}

#[cfg(test)]
mod terminal_safe_tests {
    use super::*;

    #[test]
    fn c1_controls_and_bidi_overrides_are_escaped_and_read_back_the_same() {
        let value = serde_json::json!({ "ua": "evil\u{9b}31m \u{202e}txt.exe\u{2066} \n ok é" });
        for pretty in [false, true] {
            let mut out = Vec::new();
            terminal_safe_json(&mut out, &value, pretty).unwrap();
            let text = String::from_utf8(out).unwrap();
            assert!(
                text.contains("\\u009b") && text.contains("\\u202e") && text.contains("\\u2066"),
                "{text}"
            );
            assert!(!text.chars().any(|c| acts_on_terminal(c) && c != '\n' && c != ' '), "{text:?}");
            assert!(text.contains('é'));
            assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), value);
        }
    }
}
