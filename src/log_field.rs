//! Request text as a log field, cut to a bounded length: a client chooses its URI, user agent
//! and host, and without a cut a 380 KB URI writes a 390 KB log line per request.

use std::fmt;

/// Bytes of a field kept in a log line: longer than any real URI or user agent worth reading,
/// short enough that a line stays one screen.
pub const MAX_LOG_FIELD: usize = 512;

/// `text` as a log field: at most [`MAX_LOG_FIELD`] bytes, cut on a character boundary, with
/// `…(+N bytes)` saying how much was left out. Formats without allocating.
pub fn clipped(text: &str) -> Clipped<'_> {
    Clipped(text)
}

/// The longest prefix of `text` of at most `bytes` bytes that ends on a character boundary.
pub fn head(text: &str, bytes: usize) -> &str {
    if text.len() <= bytes {
        return text;
    }
    // `str::floor_char_boundary` is newer than the crate's minimum Rust.
    let end = (0..=bytes).rev().find(|&end| text.is_char_boundary(end)).unwrap_or(0);
    &text[..end]
}

/// A log field cut to [`MAX_LOG_FIELD`] bytes when displayed; see [`clipped`].
#[derive(Clone, Copy, Debug)]
pub struct Clipped<'a>(&'a str);

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
    fn issue_13_a_long_field_is_cut_and_says_how_much_is_missing() {
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
