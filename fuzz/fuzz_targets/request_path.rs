//! Path normalisation (`normalise_path`, what every rule and path check reads), for arbitrary
//! text.
//!
//! Beyond not panicking: the result starts with `/`, keeps the query as it was, has no dot
//! segment, no empty segment but a trailing one, no backslash and no `;`, is its own
//! normalisation (a second reading finds nothing the first did not: no origin decoding once can
//! reach a path the rules did not see), and borrows the input only when it changed nothing.

#![no_main]

use std::borrow::Cow;

use libfuzzer_sys::fuzz_target;
use quagmire::normalise_path;

fuzz_target!(|data: &[u8]| {
    let uri = String::from_utf8_lossy(data);
    let normalised = normalise_path(&uri);
    let text = normalised.text.as_ref();
    let (path, query) = text.split_once('?').map_or((text, None), |(path, query)| (path, Some(query)));
    assert!(path.starts_with('/'), "{uri:?} -> {text:?}");
    assert_eq!(query, uri.split_once('?').map(|(_, query)| query), "{uri:?} -> {text:?}");
    let segments: Vec<&str> = path[1..].split('/').collect();
    for (index, segment) in segments.iter().enumerate() {
        assert!(*segment != "." && *segment != "..", "{uri:?} -> {text:?}");
        assert!(!segment.is_empty() || index + 1 == segments.len(), "{uri:?} -> {text:?}");
        assert!(!segment.contains(['\\', ';']), "{uri:?} -> {text:?}");
    }
    let again = normalise_path(text);
    assert_eq!(again.text.as_ref(), text, "{uri:?} -> {text:?}");
    assert!(!again.dot_segments, "{uri:?} -> {text:?}");
    if matches!(normalised.text, Cow::Borrowed(_)) {
        assert_eq!(text, uri, "{uri:?}");
        assert!(!normalised.dot_segments, "{uri:?}");
    }
});
