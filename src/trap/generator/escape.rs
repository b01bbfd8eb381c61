//! HTML escaping of corpus and URL text: nothing in a corpus can inject markup.

/// Appends `text` with `&`, `<`, `>`, `"` and `'` escaped for HTML text and attribute values.
pub(crate) fn push_escaped(out: &mut Vec<u8>, text: &str) {
    escape(text, |piece| out.extend_from_slice(piece));
}

/// Hands `text` to `emit` in pieces, with `&`, `<`, `>`, `"` and `'` replaced by entities.
#[inline]
pub(super) fn escape(text: &str, mut emit: impl FnMut(&[u8])) {
    let text = text.as_bytes();
    let mut clean_from = 0;
    for (i, &byte) in text.iter().enumerate() {
        let entity: &[u8] = match byte {
            b'&' => b"&amp;",
            b'<' => b"&lt;",
            b'>' => b"&gt;",
            b'"' => b"&quot;",
            b'\'' => b"&#39;",
            _ => continue,
        };
        emit(&text[clean_from..i]);
        emit(entity);
        clean_from = i + 1;
    }
    emit(&text[clean_from..]);
}
