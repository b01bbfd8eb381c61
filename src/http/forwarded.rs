//! The request as the proxy forwarded it, and the headers quagmire and the proxies speak in:
//! [`forwarded_request`] rebuilds the judged request from forward-auth headers (for the verdict
//! and for the challenge page the proxy asks for), [`first_value`] reads a forwarding header's
//! first hop, and the `X-Quagmire-*` names are the answers the shipped proxy configs copy.

use std::net::IpAddr;

use axum::http::{HeaderMap, HeaderName, Method};

use crate::facts::{Coverage, Headers};
use crate::verdict::ForwardedRequest;

// Built once: inserting by `&str` would parse and validate each name on every answer.
/// The verdict: `allow`, `trap` or `challenge`.
pub(crate) const VERDICT: HeaderName = HeaderName::from_static("x-quagmire-verdict");
/// The deciding rule.
pub(crate) const RULE: HeaderName = HeaderName::from_static("x-quagmire-rule");
/// Where a trapped request goes (redirect and nginx answers).
pub(crate) const LOCATION: HeaderName = HeaderName::from_static("x-quagmire-location");
/// `enforce` or `shadow`.
pub(crate) const MODE: HeaderName = HeaderName::from_static("x-quagmire-mode");

/// Rebuilds the judged request from the forward-auth headers.
pub fn forwarded_request(peer: IpAddr, method: &Method, headers: &HeaderMap) -> ForwardedRequest {
    // Copy the headers once, then read the forwarding ones from the copy: a `HeaderMap::get` by
    // name would parse and hash each name again.
    let copied = copy_headers(headers);
    let text = |name: &str| copied.get(name).map(str::trim);
    let first = |name: &str| text(name).map(first_value);
    ForwardedRequest {
        peer,
        method: first("x-forwarded-method").unwrap_or(method.as_str()).to_string(),
        proto: first("x-forwarded-proto").map_or_else(|| "http".into(), |proto| proto.to_ascii_lowercase()),
        host: first("x-forwarded-host").or_else(|| text("host")).unwrap_or_default().to_string(),
        uri: text("x-forwarded-uri")
            .or_else(|| text("x-original-uri"))
            .filter(|uri| !uri.is_empty())
            .unwrap_or("/")
            .to_string(),
        headers: copied,
        at: None,
        coverage: Coverage::All,
    }
}

/// The first of a header's comma-separated values, trimmed: the hop nearest the client in a
/// forwarding header that proxies appended to.
pub(crate) fn first_value(value: &str) -> &str {
    value.split(',').next().unwrap_or("").trim()
}

/// The first value of header `name` in a parsed request, if it is visible ASCII and not empty.
pub(crate) fn first_header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    let first = first_value(headers.get(name)?.to_str().ok()?);
    (!first.is_empty()).then_some(first)
}

/// The headers of an HTTP request as parsed, in order, as the rules see them. A value that is
/// not UTF-8 is decoded lossily.
fn copy_headers(map: &HeaderMap) -> Headers {
    let bytes = map.iter().map(|(name, value)| name.as_str().len() + value.len()).sum();
    let mut headers = Headers::with_capacity(map.len(), bytes);
    for (name, value) in map {
        match std::str::from_utf8(value.as_bytes()) {
            Ok(text) => headers.push_parsed(name.as_str(), text),
            Err(_) => headers.push_parsed(name.as_str(), &String::from_utf8_lossy(value.as_bytes())),
        }
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forwarding_headers_first_hop_is_the_clients() {
        assert_eq!(first_value(" https , http"), "https");
        assert_eq!(first_value(""), "");
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-host", " example.org, proxy.internal".parse().unwrap());
        headers.insert("x-empty", ",".parse().unwrap());
        assert_eq!(first_header(&headers, "x-forwarded-host"), Some("example.org"));
        assert_eq!(first_header(&headers, "x-empty"), None);
        assert_eq!(first_header(&headers, "host"), None);
        let request = forwarded_request("127.0.0.1".parse().unwrap(), &Method::GET, &{
            let mut headers = headers.clone();
            headers.insert("x-forwarded-proto", "HTTPS, http".parse().unwrap());
            headers.insert("x-forwarded-uri", "/docs?x=1".parse().unwrap());
            headers
        });
        assert_eq!((request.proto.as_str(), request.host.as_str()), ("https", "example.org"));
        assert_eq!(request.uri, "/docs?x=1");
    }
}
