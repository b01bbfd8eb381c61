//! Access-log lines → the requests a proxy would have asked about: Caddy's and Traefik's JSON
//! access logs, the combined format of nginx and Apache, and quagmire's own JSON Lines.
//!
//! Each format carries what it carries, and the request says so (its [`Coverage`]): Caddy logs
//! every request header, Traefik the ones its `fields.headers` keeps, a combined log only the
//! User-Agent and Referer, and a JSON Lines record whatever it lists.

use std::borrow::Cow;
use std::collections::HashMap;
use std::net::IpAddr;

use serde::Deserialize;
use serde_json::Value;

use crate::facts::{Carried, Coverage, Headers};

/// A log format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Caddy's JSON access log (`log { format json }`).
    Caddy,
    /// Traefik's JSON access log (`accessLog: { format: json }`).
    Traefik,
    /// nginx's and Apache's combined format (or common, without the last two fields).
    Combined,
    /// quagmire's own JSON Lines: `{"time", "client", "method", "uri", "host", "proto",
    /// "headers"}`.
    Jsonl,
}

impl Format {
    /// The name `--format` takes.
    pub fn name(self) -> &'static str {
        match self {
            Format::Caddy => "caddy",
            Format::Traefik => "traefik",
            Format::Combined => "nginx-combined",
            Format::Jsonl => "jsonl",
        }
    }

    /// The format of a log whose line is `line`, if it looks like one of them.
    pub fn detect(line: &str) -> Option<Format> {
        let line = line.trim_start();
        if line.starts_with('{') {
            let value: Value = serde_json::from_str(line).ok()?;
            let object = value.as_object()?;
            if object.get("request").and_then(|request| request.get("uri")).is_some() {
                Some(Format::Caddy)
            } else if object.contains_key("RequestMethod") || object.contains_key("ClientHost") {
                Some(Format::Traefik)
            } else if object.contains_key("uri") && object.contains_key("client") {
                Some(Format::Jsonl)
            } else {
                None
            }
        } else {
            parse_combined(line, &Defaults::default()).ok().map(|_| Format::Combined)
        }
    }
}

/// What a format does not say, from the command line.
#[derive(Clone, Debug)]
pub struct Defaults {
    /// The scheme of requests in a combined log (`https`).
    pub scheme: String,
    /// The host of requests in a combined log (empty).
    pub host: String,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults { scheme: "https".into(), host: String::new() }
    }
}

/// One line's request.
#[derive(Debug)]
pub struct LogRequest {
    /// When it was made: Unix time in nanoseconds.
    pub time: i128,
    /// The client's address as the log records it.
    pub client: IpAddr,
    /// The method.
    pub method: String,
    /// `http` or `https`.
    pub proto: String,
    /// The host.
    pub host: String,
    /// Path and query.
    pub uri: String,
    /// The headers the line carries.
    pub headers: Headers,
    /// Which headers the line carries.
    pub coverage: Coverage,
}

/// Why a line is not a request.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LineError {
    /// Not JSON, or JSON of the wrong shape.
    #[error("not a {format} line: {reason}")]
    Json {
        /// The format expected.
        format: &'static str,
        /// serde_json's description (with the column).
        reason: String,
    },
    /// A field is missing or unusable.
    #[error("{field}: {reason}")]
    Field {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// Not in the combined format.
    #[error("not a combined log line: {0}")]
    Combined(&'static str),
}

fn field(field: &'static str, reason: impl Into<String>) -> LineError {
    LineError::Field { field, reason: reason.into() }
}

/// Headers a replayed request must not carry: the identity is the address the log records
/// (the proxy already judged forwarding headers when it wrote it), and a client's own
/// forwarding headers, which a log keeps as sent, would otherwise be read as the proxy's.
const FORWARDING: [&str; 4] = ["x-forwarded-for", "x-real-ip", "forwarded", "true-client-ip"];

fn is_forwarding(name: &str) -> bool {
    FORWARDING.iter().any(|forwarding| forwarding.eq_ignore_ascii_case(name))
}

/// A JSON log's headers, in the line's order, without the client's forwarding headers.
fn client_headers(pairs: &[(Cow<'_, str>, Values<'_>)]) -> Headers {
    let mut headers = Headers::with_capacity(pairs.len(), 512);
    for (name, values) in pairs.iter().filter(|(name, _)| !is_forwarding(name)) {
        match values {
            Values::One(value) => headers.push(name, value),
            Values::Many(values) => values.iter().for_each(|value| headers.push(name, value)),
        }
    }
    headers
}

/// Parses `line` as `format`.
pub fn parse(format: Format, line: &str, defaults: &Defaults) -> Result<LogRequest, LineError> {
    match format {
        Format::Caddy => parse_caddy(line),
        Format::Traefik => parse_traefik(line, defaults),
        Format::Combined => parse_combined(line, defaults),
        Format::Jsonl => parse_jsonl(line),
    }
}

fn json_error(format: Format, error: serde_json::Error) -> LineError {
    LineError::Json { format: format.name(), reason: error.to_string() }
}

/// A time as a number of seconds since the epoch or an RFC 3339 text. (Read by a visitor of its
/// own: serde's untagged enums buffer every value first, which costs an allocation per line.)
enum Time<'a> {
    Seconds(f64),
    Text(Cow<'a, str>),
}

impl<'de: 'a, 'a> Deserialize<'de> for Time<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visitor<'a> {
            type Value = Time<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("seconds since the epoch or an RFC 3339 time")
            }
            fn visit_f64<E>(self, value: f64) -> Result<Time<'a>, E> {
                Ok(Time::Seconds(value))
            }
            fn visit_u64<E>(self, value: u64) -> Result<Time<'a>, E> {
                Ok(Time::Seconds(value as f64))
            }
            fn visit_i64<E>(self, value: i64) -> Result<Time<'a>, E> {
                Ok(Time::Seconds(value as f64))
            }
            fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Time<'a>, E> {
                Ok(Time::Text(Cow::Borrowed(value)))
            }
            fn visit_str<E>(self, value: &str) -> Result<Time<'a>, E> {
                Ok(Time::Text(Cow::Owned(value.to_string())))
            }
        }
        deserializer.deserialize_any(Visitor(std::marker::PhantomData))
    }
}

impl Time<'_> {
    fn nanos(&self, name: &'static str) -> Result<i128, LineError> {
        match self {
            Time::Seconds(seconds) if seconds.is_finite() && seconds.abs() < 1e11 => {
                // Whole seconds and the fraction apart: their product would lose the nanoseconds.
                Ok(seconds.trunc() as i128 * 1_000_000_000 + (seconds.fract() * 1e9).round() as i128)
            }
            Time::Seconds(seconds) => Err(field(name, format!("{seconds} is not a time"))),
            Time::Text(text) => {
                rfc3339(text).ok_or_else(|| field(name, format!("`{text}` is not an RFC 3339 time")))
            }
        }
    }
}

fn rfc3339(text: &str) -> Option<i128> {
    let time = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
    Some(time.unix_timestamp_nanos())
}

fn address(name: &'static str, text: &str) -> Result<IpAddr, LineError> {
    let text = text.trim();
    // `[::1]:8080`, `1.2.3.4:5678` and bare addresses.
    let bare = text.strip_prefix('[').and_then(|rest| rest.split_once(']')).map(|(inside, _)| inside);
    let bare = bare.unwrap_or(text);
    bare.parse()
        .or_else(|_| match bare.rsplit_once(':') {
            Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host.parse(),
            _ => bare.parse(),
        })
        .map_err(|_| field(name, format!("`{text}` is not an address")))
}

/// A header's value or values (read by a visitor of its own, as [`Time`]).
enum Values<'a> {
    One(Cow<'a, str>),
    Many(Vec<Cow<'a, str>>),
}

impl<'de: 'a, 'a> Deserialize<'de> for Values<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visitor<'a> {
            type Value = Values<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a header value or a list of them")
            }
            fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Values<'a>, E> {
                Ok(Values::One(Cow::Borrowed(value)))
            }
            fn visit_str<E>(self, value: &str) -> Result<Values<'a>, E> {
                Ok(Values::One(Cow::Owned(value.to_string())))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Values<'a>, A::Error> {
                let mut values = Vec::with_capacity(seq.size_hint().unwrap_or(1));
                while let Some(value) = seq.next_element::<Cow<'a, str>>()? {
                    values.push(value);
                }
                Ok(Values::Many(values))
            }
        }
        deserializer.deserialize_any(Visitor(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct CaddyLine<'a> {
    #[serde(borrow)]
    ts: Option<Time<'a>>,
    #[serde(borrow)]
    request: Option<CaddyRequest<'a>>,
}

#[derive(Deserialize)]
struct CaddyRequest<'a> {
    #[serde(borrow)]
    remote_ip: Option<Cow<'a, str>>,
    #[serde(borrow)]
    client_ip: Option<Cow<'a, str>>,
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow)]
    host: Option<Cow<'a, str>>,
    #[serde(borrow)]
    uri: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "ordered")]
    headers: Vec<(Cow<'a, str>, Values<'a>)>,
    tls: Option<serde::de::IgnoredAny>,
}

fn parse_caddy(line: &str) -> Result<LogRequest, LineError> {
    let parsed: CaddyLine = serde_json::from_str(line).map_err(|error| json_error(Format::Caddy, error))?;
    let request = parsed.request.ok_or_else(|| field("request", "missing"))?;
    let time = parsed.ts.ok_or_else(|| field("ts", "missing"))?.nanos("ts")?;
    // Caddy's own judgement of the client (its trusted_proxies) when it logs one.
    let client = request.client_ip.as_deref().filter(|ip| !ip.is_empty()).or(request.remote_ip.as_deref());
    let client = address("request.client_ip", client.ok_or_else(|| field("request.remote_ip", "missing"))?)?;
    let headers = client_headers(&request.headers);
    Ok(LogRequest {
        time,
        client,
        method: request.method.ok_or_else(|| field("request.method", "missing"))?.into_owned(),
        proto: if request.tls.is_some() { "https" } else { "http" }.into(),
        host: request.host.unwrap_or_default().into_owned(),
        uri: request.uri.ok_or_else(|| field("request.uri", "missing"))?.into_owned(),
        headers,
        coverage: Coverage::All,
    })
}

fn parse_traefik(line: &str, defaults: &Defaults) -> Result<LogRequest, LineError> {
    let parsed: HashMap<Cow<str>, Value> =
        serde_json::from_str(line).map_err(|error| json_error(Format::Traefik, error))?;
    let text = |name: &'static str| parsed.get(name).and_then(Value::as_str);
    let required = |name: &'static str| text(name).ok_or_else(|| field(name, "missing"));
    let time = rfc3339(required("StartUTC")?).ok_or_else(|| {
        field("StartUTC", format!("`{}` is not an RFC 3339 time", text("StartUTC").unwrap_or("")))
    })?;
    // With `forwardedHeaders.trustedIPs`, Traefik logs the forwarded chain as `ClientHost`
    // ("client, hop"): the last entry is the one the trusted hop saw.
    let host = text("ClientHost").or(text("ClientAddr")).ok_or_else(|| field("ClientHost", "missing"))?;
    let client = address("ClientHost", host.rsplit(',').next().unwrap_or(host))?;
    let mut headers = Headers::default();
    let mut names = Vec::new();
    for (key, value) in &parsed {
        let (Some(name), Some(value)) = (key.strip_prefix("request_"), value.as_str()) else { continue };
        // A redacted header was sent, but its value is not known: not carried.
        if is_forwarding(name) || value == "REDACTED" {
            continue;
        }
        headers.push(name, value);
        names.push(name);
    }
    Ok(LogRequest {
        time,
        client,
        method: required("RequestMethod")?.into(),
        proto: text("RequestScheme").map_or_else(|| defaults.scheme.clone(), str::to_ascii_lowercase),
        host: text("RequestHost").unwrap_or_default().into(),
        uri: required("RequestPath")?.into(),
        headers,
        // Traefik drops a header its config does not keep, so a missing one may have been sent.
        coverage: Coverage::Only(Carried::new(names)),
    })
}

#[derive(Deserialize)]
struct JsonlLine<'a> {
    #[serde(borrow)]
    time: Option<Time<'a>>,
    #[serde(borrow)]
    client: Option<Cow<'a, str>>,
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow)]
    uri: Option<Cow<'a, str>>,
    #[serde(borrow)]
    host: Option<Cow<'a, str>>,
    #[serde(borrow)]
    proto: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "ordered")]
    headers: Vec<(Cow<'a, str>, Values<'a>)>,
}

fn parse_jsonl(line: &str) -> Result<LogRequest, LineError> {
    let parsed: JsonlLine = serde_json::from_str(line).map_err(|error| json_error(Format::Jsonl, error))?;
    let time = parsed.time.ok_or_else(|| field("time", "missing"))?.nanos("time")?;
    let client = address("client", &parsed.client.ok_or_else(|| field("client", "missing"))?)?;
    let headers = client_headers(&parsed.headers);
    Ok(LogRequest {
        time,
        client,
        method: parsed.method.map_or_else(|| "GET".into(), Cow::into_owned),
        proto: parsed.proto.map_or_else(|| "https".into(), |proto| proto.to_ascii_lowercase()),
        host: parsed.host.unwrap_or_default().into_owned(),
        uri: parsed.uri.ok_or_else(|| field("uri", "missing"))?.into_owned(),
        headers,
        coverage: Coverage::All,
    })
}

/// A headers object as (name, values) pairs in the line's order (a map would lose it).
fn ordered<'de: 'a, 'a, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<(Cow<'a, str>, Values<'a>)>, D::Error> {
    struct Pairs<'a>(std::marker::PhantomData<&'a ()>);
    impl<'de: 'a, 'a> serde::de::Visitor<'de> for Pairs<'a> {
        type Value = Vec<(Cow<'a, str>, Values<'a>)>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object of header names and values")
        }
        fn visit_map<M: serde::de::MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
            let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(8));
            while let Some(pair) = map.next_entry()? {
                pairs.push(pair);
            }
            Ok(pairs)
        }
    }
    deserializer.deserialize_map(Pairs(std::marker::PhantomData))
}

/// `remote ident user [time] "request" status bytes "referer" "user agent"`, the last two
/// optional (the common format). nginx escapes `"` and bytes outside ASCII as `\xHH`, Apache as
/// `\"` and `\xhh`.
fn parse_combined(line: &str, defaults: &Defaults) -> Result<LogRequest, LineError> {
    let mut rest = line.trim_end_matches(['\r', '\n']);
    let client = next_token(&mut rest).ok_or(LineError::Combined("no client address"))?;
    let client: IpAddr =
        client.parse().map_err(|_| LineError::Combined("the first field is not an address"))?;
    next_token(&mut rest).ok_or(LineError::Combined("no ident field"))?;
    next_token(&mut rest).ok_or(LineError::Combined("no user field"))?;
    let time = rest
        .trim_start()
        .strip_prefix('[')
        .and_then(|after| after.split_once(']'))
        .ok_or(LineError::Combined("no [time]"))?;
    rest = time.1;
    let time =
        combined_time(time.0).ok_or(LineError::Combined("the time is not `dd/Mon/yyyy:hh:mm:ss +zzzz`"))?;
    let request = quoted(&mut rest).ok_or(LineError::Combined("no quoted request line"))?;
    let mut parts = request.split(' ');
    let (Some(method), Some(uri)) = (parts.next(), parts.next()) else {
        return Err(LineError::Combined("the request line is not `METHOD URI PROTOCOL`"));
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) || uri.is_empty() {
        return Err(LineError::Combined("the request line is not `METHOD URI PROTOCOL`"));
    }
    next_token(&mut rest).ok_or(LineError::Combined("no status"))?;
    next_token(&mut rest).ok_or(LineError::Combined("no size"))?;
    let mut headers = Headers::with_capacity(2, 256);
    let carried = match (quoted(&mut rest), quoted(&mut rest)) {
        (Some(referer), Some(agent)) => {
            if referer != "-" {
                headers.push("referer", &referer);
            }
            if agent != "-" {
                headers.push("user-agent", &agent);
            }
            Carried::new(["user-agent", "referer"])
        }
        // The common format: no headers at all.
        _ => Carried::new([]),
    };
    Ok(LogRequest {
        time,
        client,
        method: method.into(),
        proto: defaults.scheme.clone(),
        host: defaults.host.clone(),
        uri: uri.into(),
        headers,
        coverage: Coverage::Only(carried),
    })
}

fn next_token<'l>(rest: &mut &'l str) -> Option<&'l str> {
    let trimmed = rest.trim_start_matches(' ');
    if trimmed.is_empty() {
        return None;
    }
    let (token, after) = trimmed.split_once(' ').unwrap_or((trimmed, ""));
    *rest = after;
    Some(token)
}

/// The next `"..."` field, unescaped.
fn quoted<'l>(rest: &mut &'l str) -> Option<Cow<'l, str>> {
    let body = rest.trim_start_matches(' ').strip_prefix('"')?;
    let bytes = body.as_bytes();
    let mut end = 0;
    let mut escaped = false;
    while end < bytes.len() {
        match bytes[end] {
            b'\\' => {
                escaped = true;
                end += 2;
                continue;
            }
            b'"' => break,
            _ => end += 1,
        }
    }
    if end >= bytes.len() {
        return None;
    }
    *rest = &body[end + 1..];
    let inside = &body[..end];
    Some(if escaped { Cow::Owned(unescape(inside)) } else { Cow::Borrowed(inside) })
}

fn unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 1 < bytes.len() {
            let hex = bytes.get(i + 2..i + 4).and_then(|hex| std::str::from_utf8(hex).ok());
            match (bytes[i + 1], hex.and_then(|hex| u8::from_str_radix(hex, 16).ok())) {
                (b'x', Some(byte)) => {
                    out.push(byte);
                    i += 4;
                }
                (other, _) => {
                    out.push(other);
                    i += 2;
                }
            }
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `05/Dec/2026:11:10:07 +0000` as Unix nanoseconds.
fn combined_time(text: &str) -> Option<i128> {
    let b = text.as_bytes();
    if b.len() != 26 || b[2] != b'/' || b[6] != b'/' || b[11] != b':' || b[20] != b' ' {
        return None;
    }
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let digits = text.get(range)?;
        digits.bytes().all(|b| b.is_ascii_digit()).then(|| digits.parse().ok())?
    };
    let month = match &text[3..6] {
        "Jan" => time::Month::January,
        "Feb" => time::Month::February,
        "Mar" => time::Month::March,
        "Apr" => time::Month::April,
        "May" => time::Month::May,
        "Jun" => time::Month::June,
        "Jul" => time::Month::July,
        "Aug" => time::Month::August,
        "Sep" => time::Month::September,
        "Oct" => time::Month::October,
        "Nov" => time::Month::November,
        "Dec" => time::Month::December,
        _ => return None,
    };
    let date = time::Date::from_calendar_date(number(7..11)? as i32, month, number(0..2)? as u8).ok()?;
    let clock =
        time::Time::from_hms(number(12..14)? as u8, number(15..17)? as u8, number(18..20)? as u8).ok()?;
    let sign = match b[21] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let offset = sign * (number(22..24)? * 3600 + number(24..26)? * 60);
    let offset = time::UtcOffset::from_whole_seconds(offset as i32).ok()?;
    Some(time::PrimitiveDateTime::new(date, clock).assume_offset(offset).unix_timestamp_nanos())
}

#[cfg(test)]
mod tests;
