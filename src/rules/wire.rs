//! The request as the Lua driver reads it: the arguments of driver.lua's `evaluate`. Text fields
//! go back to back in one string with their end offsets ([`FIELDS`] of them), so the driver
//! makes a Lua string of a field only when a rule reads it; flags, the ASN and small codes go
//! packed in one integer, and which optional fields the request has in another. driver.lua
//! unpacks them by the same positions; driver.rs's test checks that both sides agree on the
//! arguments and the field ends.

use std::fmt::Write as _;
use std::net::IpAddr;

use crate::enrich::owner_tools::OwnerProof;
use crate::facts::claims::{RobotsCheck, SignatureCheck};
use crate::facts::{Coverage, Facts};
use crate::support::numbers::Decimal;
use crate::vocabulary::AiKind;

/// Text fields in a request's blob: method, proto, host, path (within the URI), URI,
/// User-Agent, address, key, ASN name, country, claimed crawler, its check, signed agent, the
/// robots.txt group, the CrowdSec decision and the pass.
pub(super) const FIELDS: usize = 16;

/// A request as `evaluate` takes it.
pub(super) struct Request<'a> {
    /// Whether to record every rule's result (see `last_trace`).
    pub(super) tracing: bool,
    /// The request's text fields back to back, then its headers (see [`fill_blob`]).
    pub(super) text: &'a str,
    /// The end offset of each field in `text`.
    pub(super) ends: [usize; FIELDS],
    pub(super) trap_hits: u64,
    pub(super) trap_score: f64,
    pub(super) request_rate: f64,
    /// Flags and the ASN (see [`packed`]).
    pub(super) packed: i64,
    /// Which optional fields the request has, and its robots.txt and signature checks (see
    /// [`shown`]).
    pub(super) shown: i64,
}

impl<'a> Request<'a> {
    /// The request for `facts`, its text written into `blob` (a buffer reused across requests).
    pub(super) fn of(facts: &Facts, blob: &'a mut String, tracing: bool) -> Request<'a> {
        let ends = fill_blob(blob, facts);
        let blob: &'a String = blob;
        Request {
            shown: shown(facts),
            tracing,
            text: blob.as_str(),
            ends,
            trap_hits: facts.history.trap_hits,
            trap_score: facts.history.trap_score,
            request_rate: facts.history.request_rate,
            packed: packed(facts),
        }
    }
}

/// Flags (rate limited, trap URL, dot segments, partial, no User-Agent), the ASN (bits 7 to 38),
/// the unanswered challenges (40 to 55), why the pass is burned (56, 57), how an owner's tool
/// proved it (58, 59) and the kind of AI crawler (60 to 62), in one argument.
fn packed(facts: &Facts) -> i64 {
    let partial = facts.coverage != Coverage::All;
    i64::from(facts.history.rate_limited)
        | i64::from(facts.is_trap_url) << 1
        | i64::from(facts.dot_segments) << 2
        | i64::from(partial) << 5
        | i64::from(!facts.coverage.carries("user-agent")) << 6
        | facts.geo.asn.map_or(0, |asn| 1 << 4 | i64::from(asn) << 7)
        | i64::from(facts.challenges.min(0xffff)) << 40
        | burn_code(facts) << 56
        | facts.owner_tool.map_or(0, |proof| match proof {
            OwnerProof::Header => 1,
            OwnerProof::Address => 2,
        }) << 58
        | facts
            .ai_kind
            .map_or(0, |kind| 1 + AiKind::ALL.iter().position(|known| *known == kind).unwrap_or(0) as i64)
            << 60
}

/// Which of the fields a rule may find nil the request has, and the two checks every request
/// has, as numbers (see the driver's `OPTIONAL`, `ROBOTS` and `SIGNATURES`). A rule that reads
/// a field the request lacks is answered nil without a look at the text, and the checks are
/// strings Lua already holds.
fn shown(facts: &Facts) -> i64 {
    let robots = match facts.robots.check {
        RobotsCheck::None => 0,
        RobotsCheck::Allowed => 1,
        RobotsCheck::Disallowed => 2,
    };
    let signature = match facts.signature.as_ref().map(|signature| signature.check) {
        None => 0,
        Some(SignatureCheck::Verified) => 1,
        Some(SignatureCheck::Invalid) => 2,
        Some(SignatureCheck::Pending) => 3,
    };
    let signed =
        facts.signature.as_ref().is_some_and(|s| s.check == SignatureCheck::Verified && !s.agent.is_empty());
    i64::from(facts.crawler.as_ref().is_some_and(|claim| !claim.crawler.is_empty()))
        | i64::from(signed) << 1
        | i64::from(facts.robots.group.as_ref().is_some_and(|group| !group.is_empty())) << 2
        | i64::from(facts.crowdsec.is_some()) << 3
        | i64::from(facts.pass.is_some()) << 4
        | i64::from(facts.geo.asn_org.is_some()) << 5
        | i64::from(facts.geo.country.is_some()) << 6
        | i64::from(facts.crawler.is_some()) << 7
        | robots << 8
        | signature << 10
}

/// Why the request's pass is burned, as the driver's `BURNS` numbers it: 0 for no pass or a good
/// one. Passed as a number so that a rule can ask without the pass's table being built.
fn burn_code(facts: &Facts) -> i64 {
    match facts.pass.as_ref().and_then(|pass| pass.burned) {
        Some("trap_hits") => 1,
        Some("networks") => 2,
        Some("pages") => 3,
        _ => 0,
    }
}

/// Writes the request's text fields into `blob`: method, proto, host, URI, User-Agent, address,
/// key, ASN name, country, claimed crawler and its check, signed agent (verified only), the
/// robots.txt group, the CrowdSec decision and the pass back to back, then the headers as
/// `\nname: value\n...`. Returns the end offset of each field (and of the path within the URI),
/// which the driver cuts them at. The robots.txt and signature checks come as numbers (`shown`).
fn fill_blob(blob: &mut String, facts: &Facts) -> [usize; FIELDS] {
    blob.clear();
    let mut ends = [0; FIELDS];
    for (end, field) in ends.iter_mut().zip([&facts.method, &facts.proto, &facts.host]) {
        blob.push_str(field);
        *end = blob.len();
    }
    // The URI whole; the path ends where its `?` is.
    ends[3] = blob.len() + facts.path().len();
    blob.push_str(&facts.uri);
    ends[4] = blob.len();
    blob.push_str(facts.user_agent());
    ends[5] = blob.len();
    let address_start = blob.len();
    push_address(blob, facts.address);
    ends[6] = blob.len();
    if facts.key.is_address(facts.address) {
        blob.extend_from_within(address_start..ends[6]);
    } else {
        let _ = write!(blob, "{}", facts.key);
    }
    ends[7] = blob.len();
    blob.push_str(facts.geo.asn_org.as_deref().unwrap_or_default());
    ends[8] = blob.len();
    blob.push_str(facts.geo.country.as_deref().unwrap_or_default());
    ends[9] = blob.len();
    if let Some(claim) = &facts.crawler {
        blob.push_str(&claim.crawler);
        ends[10] = blob.len();
        blob.push_str(claim.check.as_str());
    } else {
        ends[10] = blob.len();
    }
    ends[11] = blob.len();
    if let Some(signature) = facts.signature.as_ref().filter(|s| s.check == SignatureCheck::Verified) {
        blob.push_str(&signature.agent);
    }
    ends[12] = blob.len();
    blob.push_str(facts.robots.group.as_deref().unwrap_or_default());
    ends[13] = blob.len();
    // Type, scenario and origin, each without control characters (the puller cleans them), so a
    // unit separator between them is unambiguous.
    if let Some(decision) = &facts.crowdsec {
        blob.push_str(&decision.kind);
        blob.push('\u{1f}');
        blob.push_str(&decision.scenario);
        blob.push('\u{1f}');
        blob.push_str(&decision.origin);
    }
    ends[14] = blob.len();
    // The pass's fields, separated by unit separators: numbers, a hex id and fixed words, none
    // with a separator inside.
    if let Some(pass) = &facts.pass {
        let history = &pass.history;
        let _ = write!(
            blob,
            "{:032x}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{}",
            pass.id,
            pass.earned.as_str(),
            pass.age,
            pass.networks,
            history.trap_hits,
            history.trap_score,
            history.request_rate,
            pass.rechallenge.unwrap_or(""),
            pass.burned.unwrap_or(""),
        );
    }
    ends[15] = blob.len();
    blob.push('\n');
    // Already `name: value\n` each, names lowercase, no newline or NUL inside a value.
    blob.push_str(facts.headers.as_text());
    // Which headers were carried, when not all were: `\0name\0...`, which no header search
    // (`\nname: `) can match.
    if let Coverage::Only(carried) = &facts.coverage {
        blob.push_str(carried.as_text());
    }
    ends
}

/// Appends an address as text; IPv4, the common case, without going through `fmt`.
fn push_address(out: &mut String, address: IpAddr) {
    match address {
        IpAddr::V4(v4) => {
            for (index, octet) in v4.octets().into_iter().enumerate() {
                if index > 0 {
                    out.push('.');
                }
                out.push_str(Decimal::new(usize::from(octet), 1).as_str());
            }
        }
        IpAddr::V6(v6) => {
            let _ = write!(out, "{v6}");
        }
    }
}
