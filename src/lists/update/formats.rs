//! The formats list sources are published in, each turned into list entries: pure functions from
//! a downloaded body to entries, or an error that says what is wrong and where.
//!
//! - `prefixes-json`: `{"creationTime": "...", "prefixes": [{"ipv4Prefix": "192.0.2.0/24"},
//!   {"ipv6Prefix": "2001:db8::/32"}, ...]}`, the shape Google, Bing, Apple, DuckDuckGo, OpenAI,
//!   Perplexity and Common Crawl publish (other keys in a prefix object are ignored);
//! - `cidr-list`: plain text, one CIDR (or address) per line, `#` comments;
//! - `robots-json`: ai.robots.txt's `robots.json`, an object whose keys are user-agent tokens,
//!   each given its kind of AI crawler from its `function` by the reviewed table
//!   (rules/ai-kinds.txt, see `kinds.rs`);
//! - `asn-list`: plain text, `[AS]<number> [# ]<name>` per line, `#` comments (the layout of
//!   X4BNet's `lists_vpn` ASN lists).

use std::net::IpAddr;

use ipnet::IpNet;
use serde::Deserialize;

use super::kinds::KindTable;
use crate::vocabulary::AiKind;

/// The published format of a source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `{"prefixes": [{"ipv4Prefix": ...}, {"ipv6Prefix": ...}]}`.
    PrefixesJson,
    /// One CIDR per line.
    CidrList,
    /// An object whose keys are user-agent tokens.
    RobotsJson,
    /// `[AS]<number> [# ]<name>` per line.
    AsnList,
}

/// What a format yields, and so which kind of list its entries make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `<label> <cidr>` lines.
    Networks,
    /// One user-agent token per line.
    Tokens,
    /// `<asn> <name>` lines.
    Asns,
}

impl Format {
    /// Every format with its name in the config.
    pub const ALL: [(&'static str, Format); 4] = [
        ("prefixes-json", Format::PrefixesJson),
        ("cidr-list", Format::CidrList),
        ("robots-json", Format::RobotsJson),
        ("asn-list", Format::AsnList),
    ];

    /// The format called `name` in the config.
    pub fn named(name: &str) -> Option<Format> {
        Format::ALL.iter().find(|(known, _)| *known == name).map(|(_, format)| *format)
    }

    /// Its name in the config.
    pub fn name(self) -> &'static str {
        Format::ALL.iter().find(|(_, format)| *format == self).map_or("", |(name, _)| name)
    }

    /// The kind of list its entries make.
    pub fn kind(self) -> Kind {
        match self {
            Format::PrefixesJson | Format::CidrList => Kind::Networks,
            Format::RobotsJson => Kind::Tokens,
            Format::AsnList => Kind::Asns,
        }
    }

    /// The entries in `body`: canonical CIDRs, tokens, or `<asn> <name>` lines. An empty result
    /// is an error, so that an empty download never replaces a list.
    pub fn parse(self, body: &[u8]) -> Result<Parsed, String> {
        let parsed = match self {
            Format::PrefixesJson => prefixes_json(body)?,
            Format::CidrList => Parsed::plain(cidr_list(text(body)?)?),
            Format::RobotsJson => robots_json(body, &KindTable::shipped())?,
            Format::AsnList => Parsed::plain(asn_list(text(body)?)?),
        };
        if parsed.entries.is_empty() {
            return Err("no entries".into());
        }
        Ok(parsed)
    }
}

/// Entries read from one source.
#[derive(Debug, PartialEq, Eq)]
pub struct Parsed {
    /// The entries, in the source's order.
    pub entries: Vec<String>,
    /// When the publisher says it made the file (`creationTime`), if it says.
    pub published: Option<String>,
    /// Per entry, its kind of AI crawler, for a source that gives kinds (`robots-json`; empty
    /// for the others).
    pub kinds: Vec<Option<AiKind>>,
    /// Entries the kind table could not map, each with the function it gave: written without a
    /// kind, and reported.
    pub unmapped: Vec<String>,
}

impl Parsed {
    /// Entries without kinds or a publication time.
    pub(crate) fn plain(entries: Vec<String>) -> Parsed {
        Parsed { entries, published: None, kinds: Vec::new(), unmapped: Vec::new() }
    }
}

fn text(body: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(body).map_err(|error| format!("not UTF-8 text ({error})"))
}

#[derive(Deserialize)]
struct PrefixFile {
    #[serde(rename = "creationTime")]
    creation_time: Option<String>,
    prefixes: Vec<Prefix>,
}

#[derive(Deserialize)]
struct Prefix {
    #[serde(rename = "ipv4Prefix")]
    ipv4: Option<String>,
    #[serde(rename = "ipv6Prefix")]
    ipv6: Option<String>,
}

fn prefixes_json(body: &[u8]) -> Result<Parsed, String> {
    let file: PrefixFile = serde_json::from_slice(body).map_err(|error| format!("invalid JSON: {error}"))?;
    let mut entries = Vec::with_capacity(file.prefixes.len());
    for (index, prefix) in file.prefixes.iter().enumerate() {
        let text = match (&prefix.ipv4, &prefix.ipv6) {
            (Some(text), None) | (None, Some(text)) => text,
            _ => return Err(format!("prefix {index} has not exactly one of ipv4Prefix and ipv6Prefix")),
        };
        entries.push(network(text).map_err(|error| format!("prefix {index}: {error}"))?);
    }
    let published = file.creation_time.map(|time| clean(&time, 64));
    Ok(Parsed { published, ..Parsed::plain(entries) })
}

fn cidr_list(text: &str) -> Result<Vec<String>, String> {
    entry_lines(text)
        .map(|(line, entry)| network(entry).map_err(|error| format!("line {line}: {error}")))
        .collect()
}

/// What `robots-json` reads of each key's object: its `function`; the other fields are skipped,
/// not built.
#[derive(Deserialize)]
struct Robot {
    #[serde(default, deserialize_with = "text_or_nothing")]
    function: Option<String>,
}

/// A string, or nothing for any other JSON value (an odd field costs the entry its kind, not
/// the whole list).
fn text_or_nothing<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    Ok(match serde_json::Value::deserialize(deserializer)? {
        serde_json::Value::String(text) => Some(text),
        _ => None,
    })
}

fn robots_json(body: &[u8], table: &KindTable) -> Result<Parsed, String> {
    // Keys come out in serde_json's map order (sorted, without its `preserve_order` feature):
    // the order of token lines does not change what they match.
    let object: std::collections::BTreeMap<String, Robot> =
        serde_json::from_slice(body).map_err(|error| format!("invalid JSON: {error}"))?;
    let mut parsed = Parsed::plain(Vec::with_capacity(object.len()));
    for (key, robot) in &object {
        let token = key.trim();
        if token.is_empty() || token.contains('#') || token.chars().any(char::is_control) {
            return Err(format!("key {key:?} cannot be a list entry"));
        }
        let function = robot.function.as_deref();
        let kind = table.kind(token, function);
        if kind.is_none() {
            let function =
                function.map_or_else(|| "no function".to_string(), |text| format!("{:?}", clean(text, 120)));
            parsed.unmapped.push(format!("{token} ({function})"));
        }
        parsed.entries.push(token.to_string());
        parsed.kinds.push(kind);
    }
    Ok(parsed)
}

fn asn_list(text: &str) -> Result<Vec<String>, String> {
    entry_lines(text)
        .map(|(line, entry)| {
            let (number, name) = entry.split_once(char::is_whitespace).unwrap_or((entry, ""));
            let digits = number.strip_prefix("AS").or_else(|| number.strip_prefix("as")).unwrap_or(number);
            let asn: u32 = digits.parse().map_err(|_| format!("line {line}: `{number}` is not an ASN"))?;
            // A list line ends at `#`, so a name keeps only what comes before a second one.
            let name = name.trim_start().trim_start_matches('#');
            let name = clean(name.split('#').next().unwrap_or(""), 120);
            Ok(if name.is_empty() { asn.to_string() } else { format!("{asn} {name}") })
        })
        .collect()
}

/// Non-empty lines that are not comments, with their 1-based number. A comment starts a line;
/// in `asn-list` a `#` after the number separates the name, so comments are not cut off here.
fn entry_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(index, line)| (index + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
}

/// A network in canonical text, or why `text` is not one.
fn network(text: &str) -> Result<String, String> {
    let text = text.trim();
    let network = text
        .parse::<IpNet>()
        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("`{}` is not a network", clean(text, 80)))?;
    Ok(network.to_string())
}

/// `text` on one line, without control characters, cut to `max` characters: remote text that is
/// written into a list file.
fn clean(text: &str, max: usize) -> String {
    text.chars().filter(|c| !c.is_control()).take(max).collect::<String>().trim().to_string()
}
