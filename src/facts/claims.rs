//! What the verifiers found about a request, as facts for the rules: a claim to be a known
//! crawler and how the address bore it out (`crawler` checks it), a Web Bot Auth signature and
//! how it checked (`signature` checks it), and what the site's robots.txt says of the request
//! (`robots` matches it). Defined below both the verifiers and `facts`, which carries them to the
//! rules.

use std::sync::Arc;

/// How a claim was checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrawlerCheck {
    /// The address is in the crawler's published ranges.
    Ranges,
    /// The address's PTR name is under the crawler's domain and resolves back to it.
    ReverseDns,
    /// Neither: the address is outside the published ranges, and DNS (where the crawler has a
    /// documented domain) answered that it is not the crawler's.
    Failed,
    /// Not known yet: a DNS verification is under way, timed out, failed to get an answer, or a
    /// budget left it unchecked. Proves nothing either way.
    Pending,
}

impl CrawlerCheck {
    /// The name rules and metrics see: `ranges`, `reverse-dns`, `failed` or `pending`.
    pub fn as_str(self) -> &'static str {
        match self {
            CrawlerCheck::Ranges => "ranges",
            CrawlerCheck::ReverseDns => "reverse-dns",
            CrawlerCheck::Failed => "failed",
            CrawlerCheck::Pending => "pending",
        }
    }

    /// Whether the claim is proven.
    pub fn verified(self) -> bool {
        matches!(self, CrawlerCheck::Ranges | CrawlerCheck::ReverseDns)
    }
}

/// A request's claim to be a known crawler, and what checking it found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The crawler the User-Agent names (the list's label, such as `Googlebot`).
    pub crawler: String,
    /// How the claim was checked.
    pub check: CrawlerCheck,
    /// What the check found, for people (`explain`, logs): the PTR name, or why it failed.
    pub detail: Arc<str>,
}

/// What checking a signed request found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignatureCheck {
    /// The signature verifies with a key from the agent's directory.
    Verified,
    /// The signature is malformed, expired, covers too little, or does not verify.
    Invalid,
    /// Not known yet: the agent's directory is being fetched, could not be fetched, or a budget
    /// left it unfetched. Proves nothing either way.
    Pending,
}

impl SignatureCheck {
    /// The name rules and metrics see: `verified`, `invalid` or `pending` (`unsigned` is no
    /// signature at all).
    pub fn as_str(self) -> &'static str {
        match self {
            SignatureCheck::Verified => "verified",
            SignatureCheck::Invalid => "invalid",
            SignatureCheck::Pending => "pending",
        }
    }
}

/// A signed request's signature and what checking it found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// How the signature checked.
    pub check: SignatureCheck,
    /// The agent the signature claims: its `Signature-Agent`'s host (such as `chatgpt.com`),
    /// empty when it names none. Proven only when `check` is `Verified`.
    pub agent: String,
    /// What the check found, for people (`explain`, logs).
    pub detail: Arc<str>,
}

/// What the host's robots.txt says of a request's path for its user agent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RobotsAnswer {
    /// Allowed, disallowed, or no robots.txt for the host.
    pub check: RobotsCheck,
    /// The group that applied: its product token as the file writes it, or `*`; `None` when no
    /// group applies.
    pub group: Option<Arc<str>>,
    /// The line of the rule that decided (0: none did, so the path is allowed).
    pub line: u32,
}

/// The robots.txt verdict on a request's path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RobotsCheck {
    /// The host has no robots.txt (none configured, or the origin has none).
    #[default]
    None,
    /// The path is allowed for the request's group.
    Allowed,
    /// The path is disallowed for the request's group.
    Disallowed,
}

impl RobotsCheck {
    /// The name rules see: `none`, `allowed` or `disallowed`.
    pub fn as_str(self) -> &'static str {
        match self {
            RobotsCheck::None => "none",
            RobotsCheck::Allowed => "allowed",
            RobotsCheck::Disallowed => "disallowed",
        }
    }
}

/// A CrowdSec decision in force for the client's address (or a range holding it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrowdSecDecision {
    /// Its type: `ban`, `captcha`, or another the Local API's profiles give.
    pub kind: Arc<str>,
    /// The scenario that led to it (`crowdsecurity/http-probing`, `manual 'ban' from ...`).
    pub scenario: Arc<str>,
    /// Where it came from: `crowdsec`, `cscli`, `CAPI`, a list's name.
    pub origin: Arc<str>,
}

/// How a pass was earned: the answer its holder gave to a challenge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Earned {
    /// A proof of work, computed by the page's script.
    Work,
    /// The no-JavaScript path: the client waited out the refresh.
    Wait,
}

impl Earned {
    /// `work` or `wait`.
    pub fn as_str(self) -> &'static str {
        match self {
            Earned::Work => "work",
            Earned::Wait => "wait",
        }
    }
}

/// A valid pass the request carried, and what its holders have done with it: the pass is an
/// identity, so its request rate and trap hits are kept like a client's, beside the address's.
#[derive(Clone, Debug, PartialEq)]
pub struct PassFacts {
    /// The pass's random id (its client key is `pass:<id in hex>`).
    pub id: u128,
    /// Whether the request is a page view (what a pass's pace and day's budget count).
    pub page_view: bool,
    /// Seconds since it was earned.
    pub age: u64,
    /// How it was earned.
    pub earned: Earned,
    /// Networks (IPv4 /24, IPv6 /48) it was used from within the burn window, this one included.
    pub networks: u32,
    /// Its own trap hits and request rate, including this request.
    pub history: crate::client_state::History,
    /// Why it is burned (`trap_hits`, `networks`, `pages`), or `None` while it is good.
    pub burned: Option<&'static str>,
    /// Why its holder should answer a challenge again before reading on (`pace`, `budget`), or
    /// `None`.
    pub rechallenge: Option<&'static str>,
}
