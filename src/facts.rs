//! The request being judged, rebuilt from forward-auth headers and enriched: everything the
//! rules may look at, read-only.

use std::net::IpAddr;

use crate::client::ClientKey;
use crate::client_state::History;
use crate::geo::GeoInfo;

/// One request as the rules see it.
#[derive(Clone, Debug)]
pub struct Facts {
    /// The original method (`X-Forwarded-Method`, else the verdict request's own).
    pub method: String,
    /// `http` or `https` (`X-Forwarded-Proto`).
    pub proto: String,
    /// The original host (`X-Forwarded-Host`, else `Host`).
    pub host: String,
    /// The original path and query (`X-Forwarded-Uri` or `X-Original-URI`).
    pub uri: String,
    /// The client's headers, names lowercased, in arrival order.
    pub headers: Headers,
    /// The client's address.
    pub address: IpAddr,
    /// The key its behaviour is remembered under.
    pub key: ClientKey,
    /// ASN and country.
    pub geo: GeoInfo,
    /// Trap hits and request rate, including this request.
    pub history: History,
    /// Whether the URI is a trap URL minted under this secret.
    pub is_trap_url: bool,
}

impl Facts {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name)
    }

    /// The path, without the query.
    pub fn path(&self) -> &str {
        self.uri.split_once('?').map_or(&self.uri, |(path, _)| path)
    }

    /// The query string, without `?` (empty when there is none).
    pub fn query(&self) -> &str {
        self.uri.split_once('?').map_or("", |(_, query)| query)
    }

    /// The User-Agent, or an empty string.
    pub fn user_agent(&self) -> &str {
        self.header("user-agent").unwrap_or("")
    }
}

/// A request's headers in arrival order, names lowercase, kept in one string: twenty headers are
/// two allocations rather than forty, on a path that runs for every request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Headers {
    text: String,
    /// Per header: where its name starts, where its value starts (the name's end), where it ends.
    spans: Vec<(usize, usize, usize)>,
}

impl Headers {
    /// Room for `count` headers of `bytes` bytes of names and values in all.
    pub fn with_capacity(count: usize, bytes: usize) -> Self {
        Headers { text: String::with_capacity(bytes), spans: Vec::with_capacity(count) }
    }

    /// Appends a header; the name is lowercased.
    pub fn push(&mut self, name: &str, value: &str) {
        let start = self.text.len();
        self.text.push_str(name);
        self.text[start..].make_ascii_lowercase();
        let value_start = self.text.len();
        self.text.push_str(value);
        self.spans.push((start, value_start, self.text.len()));
    }

    /// `(name, value)` pairs in arrival order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.spans
            .iter()
            .map(|&(start, value_start, end)| (&self.text[start..value_start], &self.text[value_start..end]))
    }

    /// The first value of header `name` (any case).
    pub fn get(&self, name: &str) -> Option<&str> {
        // Lengths first, from the spans alone: most names differ in length.
        let text = self.text.as_bytes();
        self.spans
            .iter()
            .find(|&&(start, value_start, _)| {
                value_start - start == name.len()
                    && text[start..value_start].eq_ignore_ascii_case(name.as_bytes())
            })
            .map(|&(_, value_start, end)| &self.text[value_start..end])
    }

    /// Number of headers.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
}

impl<N: AsRef<str>, V: AsRef<str>> FromIterator<(N, V)> for Headers {
    fn from_iter<I: IntoIterator<Item = (N, V)>>(pairs: I) -> Self {
        let mut headers = Headers::default();
        for (name, value) in pairs {
            headers.push(name.as_ref(), value.as_ref());
        }
        headers
    }
}

#[cfg(test)]
mod tests {
    use super::Headers;

    #[test]
    fn headers_keep_order_and_duplicates_and_match_names_in_any_case() {
        let headers: Headers =
            [("Accept", "text/html"), ("x-a", ""), ("X-A", "second")].into_iter().collect();
        assert_eq!(
            headers.iter().collect::<Vec<_>>(),
            [("accept", "text/html"), ("x-a", ""), ("x-a", "second")]
        );
        assert_eq!(headers.get("ACCEPT"), Some("text/html"));
        assert_eq!(headers.get("x-a"), Some(""));
        assert_eq!(headers.get("missing"), None);
        assert_eq!(headers.len(), 3);
    }
}
