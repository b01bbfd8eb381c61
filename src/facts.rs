//! The request being judged, rebuilt from forward-auth headers and enriched: everything the
//! rules may look at, read-only, and the verifiers' findings among them ([`claims`]).

pub(crate) mod claims;

use std::net::IpAddr;
use std::sync::Arc;

use crate::client::{ClientKey, HeaderLines};
use crate::client_state::History;
use crate::enrich::geo::GeoInfo;
use crate::facts::claims::{Claim, CrowdSecDecision, RobotsAnswer, Signature};

/// One request as the rules see it.
#[derive(Clone, Debug)]
pub struct Facts {
    /// The original method (`X-Forwarded-Method`, else the verdict request's own).
    pub method: String,
    /// `http` or `https` (`X-Forwarded-Proto`).
    pub proto: String,
    /// The original host (`X-Forwarded-Host`, else `Host`).
    pub host: String,
    /// The original path and query (`X-Forwarded-Uri` or `X-Original-URI`), its path normalised
    /// as the origin reads it (`request_path`): what every rule and check matches.
    pub uri: String,
    /// The URI as the client sent it, when normalising changed it (what a signature covers).
    pub raw_uri: Option<String>,
    /// Whether the raw path had dot segments (`/../`, `%2e%2e`) that normalising resolved: no
    /// browser or HTTP library sends one.
    pub dot_segments: bool,
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
    /// The known crawler the User-Agent names, and whether the address proves it.
    pub crawler: Option<Claim>,
    /// The request's Web Bot Auth signature and what checking it found; `None` when unsigned.
    pub signature: Option<Signature>,
    /// What the host's robots.txt says of this path for this user agent.
    pub robots: RobotsAnswer,
    /// The CrowdSec decision in force for the client's address, if any.
    pub crowdsec: Option<Arc<CrowdSecDecision>>,
    /// Which headers the request's source carried: all, live; some, for a replayed log line.
    pub coverage: Coverage,
    /// The valid pass the request carried, and what its holders did with it.
    pub pass: Option<crate::facts::claims::PassFacts>,
    /// Challenges the client was shown since it last answered one.
    pub challenges: u32,
    /// How the request proved it is one of the site owner's own tools, if it did.
    pub owner_tool: Option<crate::enrich::owner_tools::OwnerProof>,
    /// The kind of AI crawler the User-Agent names (lists/ai-crawlers.txt's section for its
    /// token), if it names one that is in a section.
    pub ai_kind: Option<crate::vocabulary::AiKind>,
}

/// Which of a request's headers its source carried. A live request carries every header the
/// client sent, so a header that is not there was not sent. A line of an access log carries
/// what its format keeps (a combined log: User-Agent and Referer), and of any other header
/// nothing is known: a rule that reads one cannot be judged on that line (see `rules`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Coverage {
    /// Every header.
    #[default]
    All,
    /// Only these.
    Only(Carried),
}

impl Coverage {
    /// Whether header `name` (any case) was carried: if it is missing, it was not sent.
    pub fn carries(&self, name: &str) -> bool {
        match self {
            Coverage::All => true,
            Coverage::Only(carried) => carried.contains(name),
        }
    }
}

/// The names of the headers a source carried, lowercase, kept as `\0name\0name\0`: the form
/// the rule driver searches (`\0` cannot occur in a header name or value), shared between
/// requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Carried(Arc<str>);

impl Carried {
    /// The set of `names`; those that are not header names (empty, or with characters outside
    /// `!#$%&'*+-.^_`|~` and alphanumerics) are left out.
    pub fn new<'n>(names: impl IntoIterator<Item = &'n str>) -> Carried {
        let mut text = String::from("\0");
        for name in names {
            let valid = !name.is_empty()
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if valid {
                text.push_str(&name.to_ascii_lowercase());
                text.push('\0');
            }
        }
        Carried(Arc::from(text))
    }

    /// Whether `name` (any case) is in the set.
    pub fn contains(&self, name: &str) -> bool {
        let bytes = self.0.as_bytes();
        bytes.split(|&b| b == 0).any(|entry| !entry.is_empty() && entry.eq_ignore_ascii_case(name.as_bytes()))
    }

    /// The set as the rule driver reads it: `\0name\0...`.
    pub fn as_text(&self) -> &str {
        &self.0
    }
}

impl Facts {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name)
    }

    /// The URI as the client sent it: [`Facts::raw_uri`], else the URI, which needed no change.
    pub fn sent_uri(&self) -> &str {
        self.raw_uri.as_deref().unwrap_or(&self.uri)
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
///
/// The string is the headers as text, `name: value\n` each, which is how the rules engine hands
/// them to scripts, so it copies them whole. A carriage return or newline in a value (HTTP
/// forbids them; a hand-written request for `explain` or a log line may have one) is dropped,
/// since it would fake a header, and so is a NUL, which would fake a [`Carried`] name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Headers {
    text: String,
    /// Per header: where its name starts, where the name ends (`": "` and the value follow),
    /// and where the value ends (a newline follows).
    spans: Vec<(usize, usize, usize)>,
}

impl Headers {
    /// Room for `count` headers of `bytes` bytes of names and values in all.
    pub fn with_capacity(count: usize, bytes: usize) -> Self {
        Headers { text: String::with_capacity(bytes + 3 * count), spans: Vec::with_capacity(count) }
    }

    /// Appends a header; the name is lowercased. Newlines and NULs are dropped from the name and
    /// the value (see the type's documentation).
    pub fn push(&mut self, name: &str, value: &str) {
        let start = self.text.len();
        if memchr::memchr3(b'\n', b'\r', b'\0', name.as_bytes()).is_some() {
            self.text.extend(name.chars().filter(|c| !matches!(c, '\n' | '\r' | '\0' | ':')));
        } else {
            self.text.push_str(name);
        }
        self.text[start..].make_ascii_lowercase();
        if memchr::memchr3(b'\n', b'\r', b'\0', value.as_bytes()).is_some() {
            let clean: String = value.chars().filter(|c| !matches!(c, '\n' | '\r' | '\0')).collect();
            self.finish_header(start, &clean);
        } else {
            self.finish_header(start, value);
        }
    }

    /// Appends a header that is well-formed already: a lowercase name, and a value without a
    /// newline, carriage return or NUL, as the `http` crate guarantees for a parsed request (its
    /// names are lowercase and its values refuse control characters). Skips `push`'s checks on
    /// the path every request takes; checked in debug builds.
    pub fn push_parsed(&mut self, name: &str, value: &str) {
        debug_assert!(
            !name.bytes().any(|byte| byte.is_ascii_uppercase() || matches!(byte, b'\n' | b'\r' | b'\0'))
        );
        debug_assert!(memchr::memchr3(b'\n', b'\r', b'\0', value.as_bytes()).is_none());
        let start = self.text.len();
        self.text.push_str(name);
        self.finish_header(start, value);
    }

    /// Completes the header whose lowercase name was written from `start`: `": "`, the value
    /// (without newlines) and the newline.
    fn finish_header(&mut self, start: usize, value: &str) {
        let name_end = self.text.len();
        self.text.push_str(": ");
        self.text.push_str(value);
        self.spans.push((start, name_end, self.text.len()));
        self.text.push('\n');
    }

    /// `(name, value)` pairs in arrival order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.spans
            .iter()
            .map(|&(start, name_end, end)| (&self.text[start..name_end], &self.text[name_end + 2..end]))
    }

    /// The first value of header `name` (any case).
    pub fn get(&self, name: &str) -> Option<&str> {
        // Lengths first, from the spans alone: most names differ in length.
        let text = self.text.as_bytes();
        self.spans
            .iter()
            .find(|&&(start, name_end, _)| {
                name_end - start == name.len() && text[start..name_end].eq_ignore_ascii_case(name.as_bytes())
            })
            .map(|&(_, name_end, end)| &self.text[name_end + 2..end])
    }

    /// All headers as text, `name: value\n` each.
    pub fn as_text(&self) -> &str {
        &self.text
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

impl HeaderLines for Headers {
    fn lines<'h>(&'h self, name: &'h str) -> impl DoubleEndedIterator<Item = &'h str> {
        let text = self.text.as_bytes();
        self.spans
            .iter()
            .filter(move |&&(start, name_end, _)| {
                name_end - start == name.len() && text[start..name_end].eq_ignore_ascii_case(name.as_bytes())
            })
            .map(|&(_, name_end, end)| &self.text[name_end + 2..end])
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
        assert_eq!(headers.as_text(), "accept: text/html\nx-a: \nx-a: second\n");
    }

    #[test]
    fn a_newline_in_a_value_cannot_fake_a_header() {
        let headers: Headers =
            [("X-Note", "a\r\nx-forwarded-for: 1.2.3.4"), ("accept", "*/*")].into_iter().collect();
        assert_eq!(headers.get("x-note"), Some("ax-forwarded-for: 1.2.3.4"));
        assert_eq!(headers.get("x-forwarded-for"), None);
        assert_eq!(headers.as_text(), "x-note: ax-forwarded-for: 1.2.3.4\naccept: */*\n");
    }
}
