//! Web Bot Auth: whether a request carries an HTTP Message Signature (RFC 9421) from the agent
//! its `Signature-Agent` names, checked against the Ed25519 keys that agent publishes at
//! `<origin>/.well-known/http-message-signatures-directory`.
//!
//! The signature is checked against the request as the *client* sent it, rebuilt from the
//! forward-auth headers (`@authority` is the forwarded host, `@path` the forwarded path). The
//! signature base and the Ed25519 check are the `web-bot-auth` crate's; this module decides what
//! a signature must say to count (`tag="web-bot-auth"`, `created` and `expires` around now,
//! `signature-agent` covered, an `https://` agent) and where its keys come from.
//!
//! Like `crawler`, a directory fetch never holds a verdict past a stated budget: it runs as a
//! task of its own, a verdict waits for it at most `web-bot-auth { verdict-wait-ms }` and then
//! goes on with the signature *pending*. Directories are cached per origin (their `max-age`
//! within 5 min..24 h; failures for a minute), and new fetches are limited in rate and number in
//! flight, so a spray of forged `Signature-Agent` values costs at most `fetches-per-second`
//! fetches a second. A signature that is malformed, expired or does not cover its agent is
//! refused before any fetch.

pub(crate) mod directory;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use axum::http::Uri;
use moka::sync::Cache;
use sfv::SerializeValue;
use tokio::sync::watch;
use web_bot_auth::components::{CoveredComponent, DerivedComponent, HTTPField, HTTPFieldParameters};
use web_bot_auth::message_signatures::SignedMessage;
use web_bot_auth::{ImplementationError, SignatureAgentLink, WebBotAuthVerifier};

use self::directory::{Directory, DirectoryFetcher};
use crate::client::HeaderLines;
use crate::facts::Facts;
use crate::observe::metrics::Metrics;
use crate::support::single_flight::{Entry, Settings, SingleFlight};

/// The `Accept-Signature` (RFC 9421 §5.1) a challenge or a trap answers with: what a Web Bot
/// Auth signature must cover and say for this module to count it, so that an agent that can
/// sign identifies itself instead of solving the challenge or walking the trap.
pub(crate) const ACCEPT_SIGNATURE: &str =
    r#"sig1=("@authority" "signature-agent");created;expires;keyid;alg="ed25519";tag="web-bot-auth""#;

pub(crate) use crate::facts::claims::{Signature, SignatureCheck};

/// Web Bot Auth (HTTP Message Signatures from agents that sign their requests): whether it is on,
/// which key directories may be fetched, and the budgets that keep a spray of forged
/// `Signature-Agent` values from stalling verdicts or making quagmire fetch URLs at rate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebBotAuthConfig {
    /// Whether signatures are checked at all; off, every request is `unsigned` to the rules.
    pub enabled: bool,
    /// Whether `http://` key directories may be fetched (tests, local mirrors); only `https://`
    /// otherwise, since a directory read in the clear proves nothing.
    pub allow_http: bool,
    /// Whether key directories may be fetched from loopback, private, link-local and other
    /// non-public addresses (tests, local mirrors); otherwise such a `Signature-Agent` leads to
    /// no connection, whatever its spelling or what its name resolves to.
    pub allow_private: bool,
    /// Longest one directory fetch (connect, answer, body) may take before it counts as failed.
    pub timeout: Duration,
    /// Longest a verdict waits for a directory fetch; past it the verdict goes on with the
    /// signature pending and the directory is kept for the next request.
    pub verdict_wait: Duration,
    /// Directory fetches started per second, at most (a burst of as many is allowed).
    pub fetches_per_second: u32,
    /// Directory fetches in flight at once, at most.
    pub max_pending: usize,
}

/// How far a signature's `created` may lie in the future, and its `expires` in the past: clocks
/// differ by a few seconds, and a forwarded request may wait in a queue.
const CLOCK_SKEW: i64 = 60;
/// The longest a signature may be valid (`expires - created`), and the oldest its `created` may
/// be: agents sign each request, so a signature that lasts longer is one made to be replayed.
pub(crate) const MAX_WINDOW: i64 = 3600;
/// Nonces remembered (each until its signature expires), at most.
const NONCE_CAPACITY: u64 = 100_000;
/// How long a failed directory fetch is remembered before it is tried again.
const FAILED_FOR: Duration = Duration::from_secs(60);
/// The share of the fetch budgets (a quarter) kept, on top of them, for agents whose directory
/// was fetched before.
const RESERVED_SHARE: u32 = 4;
/// How long an agent whose directory was fetched counts as known.
const KNOWN_FOR: Duration = Duration::from_secs(7 * 24 * 3600);
/// Cached directories (one per agent origin), at most.
const CACHE_CAPACITY: u64 = 10_000;

/// What fetching one directory found.
#[derive(Clone, Debug)]
enum Keys {
    Found(Directory),
    Failed(Arc<str>),
}

impl Keys {
    /// How long the answer is kept: the directory's own `max-age` (within bounds), a failure
    /// for a minute.
    fn keep_for(&self) -> Duration {
        match self {
            Keys::Found(directory) => directory.keep,
            Keys::Failed(_) => FAILED_FOR,
        }
    }
}

/// Directory fetches with `config`'s budgets, a quarter more kept for agents fetched before.
fn directory_flights(config: &WebBotAuthConfig) -> SingleFlight<Arc<str>, Keys> {
    SingleFlight::new(Settings {
        capacity: CACHE_CAPACITY,
        timeout: config.timeout,
        done_for: Keys::keep_for,
        per_second: config.fetches_per_second,
        in_flight: config.max_pending,
        reserved_per_second: (config.fetches_per_second / RESERVED_SHARE).max(1),
        reserved_in_flight: (config.max_pending / RESERVED_SHARE as usize).max(1),
    })
}

/// A nonce's entry lives until its signature expires (plus the skew).
struct NonceExpiry;

impl moka::Expiry<Arc<str>, Duration> for NonceExpiry {
    fn expire_after_create(&self, _: &Arc<str>, lifetime: &Duration, _: Instant) -> Option<Duration> {
        Some(*lifetime)
    }
}

/// Checks Web Bot Auth signatures; shared by every verdict.
pub(crate) struct Signatures {
    config: WebBotAuthConfig,
    fetcher: Option<DirectoryFetcher>,
    /// Directory fetches per origin, one at a time, within the budgets; origins in `known` use
    /// a reserve first.
    flights: SingleFlight<Arc<str>, Keys>,
    /// Origins whose directory was fetched before: a spray of forged agents, which anyone can
    /// mint, cannot keep them from their next fetch.
    known: Cache<Arc<str>, ()>,
    /// `keyid` and `nonce` of the signatures verified, until they expire: a second request with
    /// the same pair is a replay.
    nonces: Cache<Arc<str>, Duration>,
    metrics: Arc<Metrics>,
}

impl Signatures {
    /// A checker with the configured budgets. Without TLS (which cannot happen with the built-in
    /// provider) signatures stay pending; that is logged once here.
    pub(crate) fn new(config: &WebBotAuthConfig, metrics: Arc<Metrics>) -> Signatures {
        let fetcher = match DirectoryFetcher::new(config.timeout, config.allow_private) {
            Ok(fetcher) => Some(fetcher),
            Err(error) => {
                tracing::warn!(%error, "no HTTP client: Web Bot Auth signatures stay pending");
                None
            }
        };
        Signatures {
            config: config.clone(),
            fetcher,
            flights: directory_flights(config),
            known: Cache::builder().max_capacity(CACHE_CAPACITY).time_to_live(KNOWN_FOR).build(),
            nonces: Cache::builder().max_capacity(NONCE_CAPACITY).expire_after(NonceExpiry).build(),
            metrics,
        }
    }

    /// What is known of the request's signature now, without waiting: `None` when it carries
    /// none (or checking is off), `Pending` when the agent's directory must be fetched (see
    /// [`Signatures::verify`]).
    pub(crate) fn check_now(&self, facts: &Facts) -> Option<Signature> {
        if !self.config.enabled {
            return None;
        }
        let parsed = match self.parse(facts, unix_now()) {
            Ok(parsed) => parsed?,
            Err(invalid) => return Some(invalid),
        };
        Some(match self.flights.get(&Arc::from(parsed.origin.as_str())) {
            Some(Entry::Done(keys)) => self.settle(&parsed, &keys),
            Some(Entry::InFlight(_)) => parsed.pending("key directory fetch under way"),
            None => parsed.pending("key directory not fetched yet"),
        })
    }

    /// Completes a pending signature: starts a directory fetch (within the budgets) or joins one
    /// under way, and waits for it at most `web-bot-auth { verdict-wait-ms }`. Counts the outcome.
    pub(crate) async fn verify(&self, signature: &mut Option<Signature>, facts: &Facts) {
        self.verify_within(signature, facts, self.config.verdict_wait).await;
    }

    /// [`Signatures::verify`], waiting at most `wait` (`explain` waits for the whole timeout).
    pub(crate) async fn verify_within(
        &self,
        signature: &mut Option<Signature>,
        facts: &Facts,
        wait: Duration,
    ) {
        let Some(current) = signature.as_mut() else { return };
        if current.check == SignatureCheck::Pending
            && let Ok(Some(parsed)) = self.parse(facts, unix_now())
        {
            let receiver = match self.flights.get(&Arc::from(parsed.origin.as_str())) {
                Some(Entry::Done(keys)) => {
                    *current = self.settle(&parsed, &keys);
                    None
                }
                Some(Entry::InFlight(receiver)) => Some(receiver),
                None => self.start(Arc::from(parsed.origin.as_str())),
            };
            if let Some(mut receiver) = receiver {
                match tokio::time::timeout(wait, receiver.wait_for(Option::is_some)).await {
                    Ok(Ok(keys)) => {
                        if let Some(keys) = keys.as_ref() {
                            *current = self.settle(&parsed, keys);
                        }
                    }
                    _ => current.detail = Arc::from("key directory fetch still under way"),
                }
            }
        }
        self.metrics.signature_check(current.check.as_str());
    }

    /// Checks `parsed` against `keys`; a verified signature whose nonce was seen before is a
    /// replay, and invalid.
    fn settle(&self, parsed: &Parsed, keys: &Keys) -> Signature {
        let mut signature = parsed.check(keys);
        let details = &parsed.verifier.get_parsed_label().base.parameters.details;
        if signature.check == SignatureCheck::Verified
            && let (Some(nonce), Some(expires)) = (&details.nonce, details.expires)
        {
            let keyid = details.keyid.as_deref().unwrap_or_default();
            let lifetime =
                expires.saturating_sub(unix_now()).saturating_add(CLOCK_SKEW).clamp(1, MAX_WINDOW * 2);
            // A full cache cannot promise to remember this nonce (a flood of fresh signatures
            // from an agent of someone's own could push entries out): proves nothing, so pending.
            if self.nonces.entry_count() >= NONCE_CAPACITY {
                signature.check = SignatureCheck::Pending;
                signature.detail = Arc::from("too many recent nonces to check this one for a replay");
                return signature;
            }
            let key: Arc<str> = Arc::from(format!("{keyid}\n{nonce}"));
            let entry = self.nonces.entry(key).or_insert(Duration::from_secs(lifetime.unsigned_abs()));
            if !entry.is_fresh() {
                signature.check = SignatureCheck::Invalid;
                signature.detail = Arc::from("a replay: this key's nonce was used by an earlier request");
            }
        }
        signature
    }

    /// Starts fetching `origin`'s directory, unless a budget is spent or another request just
    /// started it. An origin fetched before uses the reserved budget first.
    fn start(&self, origin: Arc<str>) -> Option<watch::Receiver<Option<Keys>>> {
        let fetcher = self.fetcher.clone()?;
        let favoured = self.known.contains_key(&origin);
        let (metrics, known) = (self.metrics.clone(), self.known.clone());
        let key = origin.clone();
        let receiver = self.flights.start(key, favoured, move || async move {
            let keys = match fetcher.fetch(&origin).await {
                Ok(directory) => {
                    known.insert(origin.clone(), ());
                    Keys::Found(directory)
                }
                Err(why) => {
                    // Both come from a client's header: cut, so a 60 KB origin is not a 60 KB line.
                    let (origin, why) = (
                        crate::support::log_field::head(&origin, 256),
                        crate::support::log_field::head(&why, 512),
                    );
                    tracing::debug!(%origin, %why, "key directory fetch failed");
                    Keys::Failed(Arc::from(format!("key directory: {why}")))
                }
            };
            metrics.key_directory_fetch(if matches!(keys, Keys::Found(_)) { "ok" } else { "failed" });
            keys
        });
        if receiver.is_none() {
            self.metrics.key_directory_fetch("over_budget");
        }
        receiver
    }

    /// The request's Web Bot Auth signature, ready to verify: `Ok(None)` when it has no
    /// signature headers, `Err` (an invalid [`Signature`]) when what it has cannot count.
    fn parse(&self, facts: &Facts, now: i64) -> Result<Option<Parsed>, Signature> {
        let message = Message { facts };
        let has_input = facts.header("signature-input").is_some();
        let has_signature = facts.header("signature").is_some();
        if !has_input && !has_signature {
            return Ok(None);
        }
        let invalid = |agent: &str, why: &str| Signature {
            check: SignatureCheck::Invalid,
            agent: agent.to_string(),
            detail: Arc::from(why),
        };
        let verifier = WebBotAuthVerifier::parse(&message).map_err(|error| {
            let why = match error {
                ImplementationError::ParsingError(why) if why.contains("No matching label") => {
                    "no web-bot-auth signature (Signature-Input needs tag=\"web-bot-auth\", keyid, \
                     created, expires, and @authority or @target-uri, and signature-agent when sent)"
                        .to_string()
                }
                other => other.to_string(),
            };
            invalid("", &why)
        })?;
        let agent = verifier.get_signature_agents().iter().find_map(|link| match link {
            SignatureAgentLink::External(url) => Some(url.as_str()),
            SignatureAgentLink::Inline(_) => None,
        });
        let Some(agent_url) = agent else {
            return Err(invalid("", "no Signature-Agent naming an https:// origin"));
        };
        let (origin, agent) = match origin(agent_url, self.config.allow_http) {
            Ok(found) => found,
            Err(why) => return Err(invalid("", &why)),
        };
        let label = verifier.get_parsed_label();
        let covers_agent = label.base.components.keys().any(|component| {
            matches!(component, CoveredComponent::HTTP(HTTPField { name, .. }) if name == "signature-agent")
        });
        if !covers_agent {
            return Err(invalid(&agent, "the signature does not cover signature-agent"));
        }
        let details = &label.base.parameters.details;
        let (Some(created), Some(expires)) = (details.created, details.expires) else {
            return Err(invalid(&agent, "the signature needs both created and expires"));
        };
        if created > now.saturating_add(CLOCK_SKEW) {
            return Err(invalid(&agent, &format!("created {} s in the future", created.saturating_sub(now))));
        }
        if expires < now.saturating_sub(CLOCK_SKEW) {
            return Err(invalid(&agent, &format!("expired {} s ago", now.saturating_sub(expires))));
        }
        if expires <= created {
            return Err(invalid(&agent, "expires is not after created"));
        }
        let window = expires.saturating_sub(created);
        if window > MAX_WINDOW {
            return Err(invalid(
                &agent,
                &format!("valid for {window} s, longer than the {MAX_WINDOW} s a signature may last"),
            ));
        }
        let age = now.saturating_sub(created);
        if age > MAX_WINDOW.saturating_add(CLOCK_SKEW) {
            return Err(invalid(&agent, &format!("created {age} s ago, more than {MAX_WINDOW} s")));
        }
        Ok(Some(Parsed { verifier, origin, agent }))
    }
}

/// A signature that may count, and the agent whose keys decide it.
struct Parsed {
    verifier: WebBotAuthVerifier,
    /// `scheme://authority` of the agent, the cache key of its directory.
    origin: String,
    /// The agent's host.
    agent: String,
}

impl Parsed {
    fn pending(&self, why: &str) -> Signature {
        Signature { check: SignatureCheck::Pending, agent: self.agent.clone(), detail: Arc::from(why) }
    }

    /// Verifies against a fetched directory; a failed fetch leaves the signature pending.
    fn check(&self, keys: &Keys) -> Signature {
        let directory = match keys {
            Keys::Found(directory) => directory,
            Keys::Failed(why) => {
                return Signature {
                    check: SignatureCheck::Pending,
                    agent: self.agent.clone(),
                    detail: why.clone(),
                };
            }
        };
        let keyid =
            self.verifier.get_parsed_label().base.parameters.details.keyid.clone().unwrap_or_default();
        // Verifying consumes the verifier; a clone is a few small strings.
        let (check, detail) = match self.verifier.clone().verify(&directory.keys, None) {
            Ok(_) => (SignatureCheck::Verified, format!("key {keyid} of {}", self.origin)),
            Err(ImplementationError::NoSuchKey) => {
                (SignatureCheck::Invalid, format!("key {keyid} is not in {}'s directory", self.origin))
            }
            Err(error) => (SignatureCheck::Invalid, error.to_string()),
        };
        Signature { check, agent: self.agent.clone(), detail: Arc::from(detail) }
    }
}

/// The origin (`scheme://authority`) and host of a `Signature-Agent` URL, whose path is ignored:
/// keys live at the origin's well-known path.
fn origin(url: &str, allow_http: bool) -> Result<(String, String), String> {
    let uri: Uri = url.parse().map_err(|_| "the Signature-Agent is not a URL".to_string())?;
    // Schemes are case-insensitive (RFC 3986): `HTTPS://` is https.
    let scheme = uri.scheme_str().unwrap_or_default().to_ascii_lowercase();
    match scheme.as_str() {
        "https" => {}
        "http" if allow_http => {}
        _ => return Err("the Signature-Agent is not an https:// URL".into()),
    }
    let Some(authority) = uri.authority() else {
        return Err("the Signature-Agent has no host".into());
    };
    if authority.as_str().contains('@') || authority.host().is_empty() {
        return Err("the Signature-Agent has no plain host".into());
    }
    let host = authority.host().to_ascii_lowercase();
    let origin = match authority.port_u16() {
        Some(port) => format!("{scheme}://{host}:{port}"),
        None => format!("{scheme}://{host}"),
    };
    let agent = host.trim_start_matches('[').trim_end_matches(']').to_string();
    Ok((origin, agent))
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| i64::try_from(since.as_secs()).unwrap_or(i64::MAX))
}

/// The judged request as the signature covers it: the client's request, rebuilt from the
/// forward-auth headers.
struct Message<'a> {
    facts: &'a Facts,
}

impl Message<'_> {
    /// `@authority`: the host, lowercase, without the scheme's default port.
    fn authority(&self) -> String {
        let host = self.facts.host.to_ascii_lowercase();
        let default_port = if self.facts.proto == "https" { ":443" } else { ":80" };
        host.strip_suffix(default_port).map_or(host.clone(), str::to_string)
    }

    fn field(&self, name: &str, parameters: &[HTTPFieldParameters]) -> Vec<String> {
        let lines = || self.facts.headers.lines(name).map(str::trim);
        match parameters {
            [] => lines().map(str::to_string).collect(),
            [HTTPFieldParameters::Key(key)] => {
                let joined = lines().collect::<Vec<_>>().join(", ");
                let Ok(dictionary) = sfv::Parser::new(&joined).parse_dictionary() else { return Vec::new() };
                let member = dictionary.into_iter().find(|(name, _)| name.as_str() == key);
                let value = match member {
                    Some((_, sfv::ListEntry::Item(item))) => Some(item.serialize_value()),
                    Some((_, entry @ sfv::ListEntry::InnerList(_))) => vec![entry].serialize_value(),
                    None => None,
                };
                value.into_iter().collect()
            }
            [HTTPFieldParameters::Sf] => {
                let joined = lines().collect::<Vec<_>>().join(", ");
                let parser = || sfv::Parser::new(&joined);
                let value = parser()
                    .parse_dictionary()
                    .ok()
                    .and_then(|dictionary| dictionary.serialize_value())
                    .or_else(|| parser().parse_list().ok().and_then(|list| list.serialize_value()))
                    .or_else(|| parser().parse_item().ok().map(|item| item.serialize_value()));
                value.into_iter().collect()
            }
            // Binary-wrapped, trailer and response fields: not in a forwarded request.
            _ => Vec::new(),
        }
    }
}

impl SignedMessage for Message<'_> {
    fn lookup_component(&self, component: &CoveredComponent) -> Vec<String> {
        let facts = self.facts;
        let sent = facts.sent_uri();
        let value = match component {
            CoveredComponent::HTTP(HTTPField { name, parameters }) => return self.field(name, &parameters.0),
            CoveredComponent::Derived(derived) => match derived {
                DerivedComponent::Authority { req: false } => self.authority(),
                DerivedComponent::Method { req: false } => facts.method.clone(),
                // The request as the client sent and signed it, not as the rules read it.
                DerivedComponent::Path { req: false } => {
                    let path = sent.split_once('?').map_or(sent, |(path, _)| path);
                    if path.is_empty() { "/".into() } else { path.to_string() }
                }
                DerivedComponent::Query { req: false } => {
                    format!("?{}", sent.split_once('?').map_or("", |(_, query)| query))
                }
                DerivedComponent::Scheme { req: false } => facts.proto.clone(),
                DerivedComponent::RequestTarget { req: false } => sent.to_string(),
                DerivedComponent::TargetUri { req: false } => {
                    format!("{}://{}{}", facts.proto, self.authority(), sent)
                }
                _ => return Vec::new(),
            },
        };
        vec![value]
    }
}

#[cfg(test)]
mod tests;
