//! The judged request's path as the origin will read it: dot segments resolved, escapes of
//! unreserved characters decoded, path parameters dropped.
//!
//! Rules match paths (`always-allowed-paths`, `program-paths`, robots.txt, trap URLs), and an
//! origin that resolves `/.well-known/../blog/post` serves the article: a rule reading the raw
//! path would allow a crawler there for the `/.well-known/` in front. So every rule sees the path
//! after what servers do to it, taking the most resolving reading of each step: RFC 3986 §6.2.2
//! (percent-encoded unreserved characters decoded, other escapes in uppercase) and §5.2.4 (dot
//! segments removed), `%2F`, `%5C` and `\` read as `/` (servers that decode slashes before
//! routing, and IIS), `;parameters` dropped from each segment (Tomcat and Jetty), and empty
//! segments merged (nginx's `merge_slashes`).
//!
//! Browsers and HTTP libraries resolve dot segments, `%2e` ones included, before they send a
//! request (the URL Standard's parser does), so a raw path that had one was made by hand:
//! [`Normalised::dot_segments`] says so, and the rules may take it as evidence.

use std::borrow::Cow;

/// A path (or path and query) after normalisation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Normalised<'a> {
    /// The normalised text: always starts with `/`; the query, if any, follows unchanged.
    pub text: Cow<'a, str>,
    /// Whether the raw path had a `.` or `..` segment (literal or percent-encoded).
    pub dot_segments: bool,
}

/// Normalises the path of `uri` (a path, optionally followed by `?query`); the query is kept as
/// it is. Borrows `uri` when it needs no change, which is the case for every browser's request.
pub fn normalise(uri: &str) -> Normalised<'_> {
    let (path, query) = match uri.find('?') {
        Some(at) => uri.split_at(at),
        None => (uri, ""),
    };
    if is_normal(path) {
        return Normalised { text: Cow::Borrowed(uri), dot_segments: false };
    }
    let (mut text, dot_segments) = normalise_path(path);
    text.push_str(query);
    Normalised { text: Cow::Owned(text), dot_segments }
}

/// Whether `path` is normal already: starts with `/`, and has no escape, backslash, path
/// parameter, empty segment (but a trailing `/`) or dot segment.
fn is_normal(path: &str) -> bool {
    let bytes = path.as_bytes();
    if bytes.first() != Some(&b'/') {
        return false;
    }
    if memchr::memchr3(b'%', b'\\', b';', bytes).is_some() {
        return false;
    }
    // Every segment after each `/`: none empty (a `//`), none `.` or `..`.
    let mut segments = path[1..].split('/').peekable();
    while let Some(segment) = segments.next() {
        let last = segments.peek().is_none();
        if (segment.is_empty() && !last) || segment == "." || segment == ".." {
            return false;
        }
    }
    true
}

/// The slow path: decode, split, drop parameters, resolve dot segments, join.
fn normalise_path(path: &str) -> (String, bool) {
    let decoded = decode(path);
    let mut out: Vec<&str> = Vec::new();
    let mut dot_segments = false;
    // Whether the path ends in a directory (`/`, or a dot segment, which names one).
    let mut trailing_slash = false;
    for (index, raw) in decoded.split('/').enumerate() {
        let segment = raw.split(';').next().unwrap_or("");
        trailing_slash = false;
        match segment {
            "." => {
                dot_segments = true;
                trailing_slash = true;
            }
            ".." => {
                dot_segments = true;
                out.pop();
                trailing_slash = true;
            }
            "" => {
                // Empty segments merge; one at the end (a trailing `/`) is kept. The first
                // piece of an absolute path is empty by construction.
                trailing_slash = index > 0;
            }
            segment => out.push(segment),
        }
    }
    let mut text = String::with_capacity(decoded.len() + 1);
    for segment in &out {
        text.push('/');
        text.push_str(segment);
    }
    if text.is_empty() || trailing_slash {
        text.push('/');
    }
    (text, dot_segments)
}

/// `path` with escapes of unreserved characters decoded, `%2F`, `%5C` and `\` as `/`, other
/// escapes in uppercase hex, a `%` that starts no escape as `%25`, and a leading `/` where there
/// was none.
fn decode(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = String::with_capacity(bytes.len() + 1);
    if bytes.first() != Some(&b'/') {
        out.push('/');
    }
    let mut at = 0;
    while at < bytes.len() {
        let byte = bytes[at];
        if byte == b'%'
            && let (Some(high), Some(low)) =
                (bytes.get(at + 1).and_then(hex_value), bytes.get(at + 2).and_then(hex_value))
        {
            let value = high << 4 | low;
            if value.is_ascii_alphanumeric() || matches!(value, b'-' | b'.' | b'_' | b'~') {
                out.push(char::from(value));
            } else if matches!(value, b'/' | b'\\') {
                out.push('/');
            } else {
                out.push('%');
                out.push(char::from(HEX[usize::from(high)]));
                out.push(char::from(HEX[usize::from(low)]));
            }
            at += 3;
            continue;
        }
        if byte == b'\\' {
            out.push('/');
            at += 1;
            continue;
        }
        if byte == b'%' {
            // Not an escape: a literal `%`, written as one, so that a second reading cannot
            // find an escape the first did not (`%%32e` is `%25` `2` `e`, not `%2e`).
            out.push_str("%25");
            at += 1;
            continue;
        }
        // Copy the run up to the next escape or backslash whole, keeping UTF-8 intact.
        let run = memchr::memchr2(b'%', b'\\', &bytes[at + 1..]).map_or(bytes.len(), |next| at + 1 + next);
        out.push_str(&path[at..run]);
        at = run;
    }
    out
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

fn hex_value(byte: &u8) -> Option<u8> {
    char::from(*byte).to_digit(16).map(|digit| digit as u8)
}

#[cfg(test)]
mod tests {
    use super::normalise;

    fn path(uri: &str) -> (String, bool) {
        let normalised = normalise(uri);
        (normalised.text.into_owned(), normalised.dot_segments)
    }

    #[test]
    fn a_browsers_path_is_borrowed_as_it_is() {
        for uri in ["/", "/blog/post", "/docs/", "/a/b.html?x=1&y=/../z", "/.well-known/acme-challenge/t"] {
            let normalised = normalise(uri);
            assert!(matches!(normalised.text, std::borrow::Cow::Borrowed(_)), "{uri}");
            assert_eq!((normalised.text.as_ref(), normalised.dot_segments), (uri, false));
        }
    }

    #[test]
    fn dot_segments_are_resolved_and_reported_in_every_spelling() {
        for uri in [
            "/.well-known/../blog/post",
            "/feed/../blog/post",
            "/.well-known/%2e%2e/blog/post",
            "/.well-known/%2E./blog/post",
            "/.well-known/..%2fblog/post",
            "/.well-known/..%5Cblog/post",
            "/.well-known\\..\\blog\\post",
            "/.well-known/..;/blog/post",
            "/x/./.well-known/../../blog/./post",
            "/../../../blog/post",
        ] {
            assert_eq!(path(uri), ("/blog/post".into(), true), "{uri}");
        }
        assert_eq!(path("/blog/post/.."), ("/blog/".into(), true));
        assert_eq!(path("/blog/."), ("/blog/".into(), true));
        assert_eq!(path("/.."), ("/".into(), true));
        // Names that only start with dots are names.
        assert_eq!(path("/.well-known/...x/a"), ("/.well-known/...x/a".into(), false));
    }

    #[test]
    fn escapes_parameters_and_empty_segments_are_normalised_without_being_evidence() {
        assert_eq!(path("/%7Euser/%41bc"), ("/~user/Abc".into(), false));
        assert_eq!(path("/a%2fb"), ("/a/b".into(), false));
        assert_eq!(path("/caf%c3%a9/%20x"), ("/caf%C3%A9/%20x".into(), false));
        assert_eq!(path("/blog/post;.xml"), ("/blog/post".into(), false));
        assert_eq!(path("/blog;jsessionid=1/post"), ("/blog/post".into(), false));
        assert_eq!(path("//blog///post//"), ("/blog/post/".into(), false));
        assert_eq!(path("/bad%zz%4"), ("/bad%25zz%254".into(), false));
        assert_eq!(path("/ü/ß%"), ("/ü/ß%25".into(), false));
        assert_eq!(path(""), ("/".into(), false));
        assert_eq!(path("*"), ("/*".into(), false));
    }

    #[test]
    fn the_query_is_kept_as_it_is() {
        assert_eq!(path("/a/../b?to=/../c;d"), ("/b?to=/../c;d".into(), true));
        assert_eq!(path("/a/./?"), ("/a/?".into(), true));
    }

    #[test]
    fn normalising_twice_changes_nothing() {
        for uri in [
            "/a/%2e%2e%2fb",
            "/%2e%2e%2f%2e%2e",
            "/x/%252e%252e/y",
            "/a;b/../c;d/",
            "\\\\a\\.\\b",
            "/%%32e%%32e/x",
        ] {
            let once = path(uri).0;
            assert_eq!(path(&once), (once.clone(), false), "{uri} -> {once}");
        }
    }
}
