//! The third verdict's machinery: challenges, their answers, and the pass a right answer earns.
//!
//! - A **challenge** is a token MAC'd with a key derived from the secret. It carries a random id,
//!   its issue time, the difficulty and the no-JavaScript wait, and it is bound to the client: to
//!   its network (IPv4 /24 or IPv6 /48; an answer from the other address family is accepted, as a
//!   dual-stack browser may switch) and to its User-Agent. It expires after
//!   [`CHALLENGE_LIFETIME`] and is accepted once per replica, so it can be neither precomputed
//!   nor replayed.
//! - An **answer** is a proof of work (a nonce such that SHA-256 of the token and the nonce starts
//!   with `difficulty` zero bits: one hash to check) or, without JavaScript, the token alone once
//!   the wait has passed since its issue.
//! - A **pass** is a cookie holding its id, issue and expiry times and how it was earned, MAC'd
//!   with a second derived key: any replica with the same secret verifies it without a store. A
//!   pass minted at its network's turn ([`economy`]) is issued for that time, and good from then.
//! - The pass is an **identity**: the verdict keeps its behaviour under its own client key
//!   ([`crate::client::ClientKey::pass`]), and this module keeps, per replica, the networks it was used from and
//!   its page-view pace. A pass whose holders walk the trap, use it from more networks in a
//!   window than one person's devices would, or read on far ahead of any reader's pace, is
//!   **burned**. One read faster than its pace's burst, past its day's pages, or faster than its
//!   share of a crowded network's reading is **asked again**: a question, not a sentence.
//! - What a pass costs depends on its network, and how fast a crowd of pass holders may read
//!   depends on the crowd: [`economy`].
//!
//! The page itself is in [`page`]; the HTTP handlers are in `http/challenge.rs`.

pub(crate) mod economy;
pub(crate) mod page;
mod shared;
#[cfg(test)]
mod tests;

use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use moka::sync::Cache;
use rand::RngExt;
use sha2::{Digest, Sha256};

use crate::client::KeyHasher;
use crate::facts::claims::Earned;
use economy::{Decaying, Economy, RATE_WINDOW, Turn, network_of};

/// How long a challenge may be answered after it is issued.
pub(crate) const CHALLENGE_LIFETIME: Duration = Duration::from_secs(10 * 60);
/// The pass cookie's name. Its settings never change its meaning, so a changed setting cannot
/// cause a challenge loop (Anubis's versioned names solve a problem this format does not have).
pub(crate) const PASS_COOKIE: &str = "quagmire_pass";
/// Networks (IPv4 /24, IPv6 /48) whose answered challenge ids are remembered per replica, to
/// refuse a second answer.
const ANSWERING_NETWORKS: u64 = 50_000;
/// Answers one network may have accepted within a challenge's lifetime, per replica: the answer
/// path's own quota (an office behind one address needs a few a day; a network minting passes
/// by the hundred is refused, and only it), and what bounds each network's memory of used ids
/// (16 bytes an id: 2 KiB a network at most). Above what a datacenter network's turns allow in
/// a lifetime (its burst, and one turn per 20 s), so there the turn decides.
pub(crate) const ANSWERS_PER_NETWORK: usize = 128;
/// Page views one pass may make in [`DAY`] before it is asked again: a person reads a few hundred
/// pages on a long day; at the burn pace a pass could read 43,000. Spent, the pass is
/// re-challenged (a new pass starts a new budget), never burned.
pub(crate) const PAGES_PER_DAY: u32 = 2000;
/// The window [`PAGES_PER_DAY`] is counted in.
const DAY: Duration = Duration::from_secs(24 * 3600);
/// How far ahead of the reading pace a pass may run before it is burned: the page pace's burst
/// (`burn-page-burst`) earns a re-challenge, a person's burst of tabs included; reading on past
/// it, without answering, for this long at the pace (5 minutes: 150 page views over the pace at
/// the default 30 a minute) is a pace no person keeps.
pub(crate) const BURN_AHEAD: Duration = Duration::from_secs(5 * 60);
/// Passes whose networks and page pace are tracked per replica.
const PASS_RECORDS: u64 = 100_000;
/// Clients (address and User-Agent) whose unanswered challenges are counted.
const CHALLENGED_CLIENTS: u64 = 100_000;
/// Unanswered challenges are counted for this long from the first, then start again from zero,
/// however many more there were: a count that every new challenge kept alive would never end
/// while a program kept reading challenge pages at a shared address.
pub(crate) const UNANSWERED_MEMORY: Duration = CHALLENGE_LIFETIME;
/// Bytes of a MAC tag: 128 bits.
const TAG: usize = 16;
const CHALLENGE_VERSION: u8 = 1;
const PASS_VERSION: u8 = 1;
const CHALLENGE_BYTES: usize = 1 + 16 + 8 + 1 + 2 + 1 + 16 + 8;
const PASS_BYTES: usize = 1 + 16 + 8 + 8 + 1;
/// Longest nonce accepted: a u64 in decimal.
const NONCE_DIGITS: usize = 20;

/// The `challenge { }` settings.
#[derive(Clone, Debug, PartialEq)]
pub struct ChallengeConfig {
    /// Leading zero bits the proof of work must find.
    pub difficulty: u8,
    /// How long a pass is good for.
    pub pass_lifetime: Duration,
    /// The reserved path under the site's host the proxy routes to quagmire (the answer, the
    /// scripts), with its slashes: `/.quagmire/`.
    pub path: String,
    /// How long a client without JavaScript waits before its answer is accepted.
    pub wait: Duration,
    /// Challenges a client may leave unanswered before the rules trap it.
    pub unanswered: u32,
    /// Challenge every browser page view without a pass (for sites under attack).
    pub everyone: bool,
    /// When a pass is burned.
    pub burn: BurnLimits,
}

/// When a pass is burned.
#[derive(Clone, Debug, PartialEq)]
pub struct BurnLimits {
    /// Trap hits of the pass's holders.
    pub trap_hits: u32,
    /// Networks (/24, /48) the pass is used from within `window`.
    pub networks: u32,
    /// The window networks are counted in.
    pub window: Duration,
    /// Page views a minute, sustained, of the pass's holders.
    pub pages_per_minute: u32,
    /// Page views at once on top of the sustained pace.
    pub page_burst: u32,
}

impl Default for ChallengeConfig {
    fn default() -> Self {
        ChallengeConfig {
            difficulty: 16,
            pass_lifetime: Duration::from_secs(7 * 24 * 3600),
            path: "/.quagmire/".into(),
            wait: Duration::from_secs(5),
            unanswered: 5,
            everyone: false,
            burn: BurnLimits {
                trap_hits: 2,
                networks: 8,
                window: Duration::from_secs(3600),
                pages_per_minute: 30,
                page_burst: 8,
            },
        }
    }
}

/// What a challenge is bound to: the client's network and User-Agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Binding {
    /// 4 or 6.
    family: u8,
    /// The network's bits (/24 or /48).
    network: u128,
    /// The first 8 bytes of the User-Agent's BLAKE3 hash.
    agent: u64,
}

impl Binding {
    fn of(address: IpAddr, user_agent: &str) -> Binding {
        let (family, network) = network_of(address);
        let hash = blake3::hash(user_agent.as_bytes());
        let agent = u64::from_le_bytes(hash.as_bytes()[..8].try_into().expect("8 bytes"));
        Binding { family, network, agent }
    }
}

/// A challenge as issued: its token and what the page tells the client.
#[derive(Clone, Debug)]
pub struct Issued {
    /// The signed token, URL-safe.
    pub token: String,
    /// Leading zero bits the proof of work must find.
    pub difficulty: u8,
    /// The no-JavaScript wait.
    pub wait: Duration,
}

/// Why an answer was refused (each a metric label).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// Not a token at all, or a nonce that is not a number.
    #[error("the answer is malformed")]
    Malformed,
    /// The MAC does not match: tampered, or another secret's.
    #[error("the challenge was not issued here")]
    Forged,
    /// Older than [`CHALLENGE_LIFETIME`].
    #[error("the challenge expired")]
    Expired,
    /// Answered before (on this replica).
    #[error("the challenge was answered already")]
    Replayed,
    /// From another network of the same family, or another User-Agent.
    #[error("the challenge was issued to another client")]
    OtherClient,
    /// The no-JavaScript answer before its wait had passed.
    #[error("the wait has not passed yet")]
    TooEarly,
    /// The proof of work does not have the leading zeros.
    #[error("the proof of work is wrong")]
    WrongWork,
    /// This network had [`ANSWERS_PER_NETWORK`] answers accepted within a challenge's lifetime,
    /// or its turns are booked [`economy::LONGEST_TURN`] ahead: try again in this long.
    #[error("too many answers from your network lately; try again in a few minutes")]
    Busy(Duration),
}

impl AnswerError {
    /// The metric label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            AnswerError::Malformed => "malformed",
            AnswerError::Forged => "forged",
            AnswerError::Expired => "expired",
            AnswerError::Replayed => "replayed",
            AnswerError::OtherClient => "other_client",
            AnswerError::TooEarly => "too_early",
            AnswerError::WrongWork => "wrong_work",
            AnswerError::Busy(_) => "busy",
        }
    }
}

/// An accepted answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answered {
    /// How the pass was earned.
    pub earned: Earned,
    /// The difficulty bits the network's pressure added to the challenge answered.
    pub extra_bits: u8,
    /// Time from issue to answer.
    pub solved_in: Duration,
    /// How long until the pass starts: its network's turn (zero within the network's burst).
    pub starts_in: Duration,
    /// What the answer was, for counting it on a shared store too.
    pub(crate) ticket: Ticket,
}

/// An accepted answer's challenge: its network, its id (the low 64 bits, as the used ids keep
/// it), when it expires (Unix seconds) and the turns its pass costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ticket {
    pub network: economy::Network,
    pub id: u64,
    pub expires: u64,
    pub cost: u32,
}

/// A pass read from a cookie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pass {
    /// Its random id.
    pub id: u128,
    /// When it was earned (Unix seconds).
    pub issued: u64,
    /// When it stops being good (Unix seconds).
    pub expires: u64,
    /// How it was earned.
    pub earned: Earned,
}

/// What a request's cookies hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PassCheck {
    /// No pass cookie.
    None,
    /// A good pass.
    Valid(Pass),
    /// A pass cookie this secret did not make, or altered: no pass.
    Invalid,
    /// A pass past its expiry: no pass.
    Expired,
    /// A pass whose turn has not come: it starts in this many seconds.
    Early(u64),
}

impl PassCheck {
    /// The metric label, `None` for no cookie.
    pub(crate) fn label(self) -> Option<&'static str> {
        match self {
            PassCheck::None => None,
            PassCheck::Valid(_) => Some("valid"),
            PassCheck::Invalid => Some("invalid"),
            PassCheck::Expired => Some("expired"),
            PassCheck::Early(_) => Some("early"),
        }
    }
}

/// What one use of a pass showed, from this replica's records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PassUse {
    /// Networks it was used from within the window, this one included.
    pub networks: u32,
    /// Why it is burned (`trap_hits`, `networks`, `pages`), or `None` while it is good.
    pub burned: Option<&'static str>,
    /// Whether this use burned it on this replica (so the burn is counted and recorded once).
    pub newly_burned: bool,
    /// Why its holder should answer a challenge again before reading on (`pace`: faster than
    /// the page pace's burst; `budget`: [`PAGES_PER_DAY`] spent; `crowd`: faster than its share
    /// of its address's or network's readers, see [`economy`]), or `None`.
    pub rechallenge: Option<&'static str>,
}

/// Issues and checks challenges, mints and reads passes, and keeps per-replica pass records.
pub struct Challenger {
    config: ChallengeConfig,
    challenge_key: [u8; 32],
    pass_key: [u8; 32],
    /// Per network: the challenge ids answered from it, each until it would have expired anyway.
    used: Cache<(u8, u128), Arc<Mutex<UsedIds>>, KeyHasher>,
    /// Per pass: the networks it was used from and its page pace.
    passes: Cache<u128, Arc<Mutex<PassRecord>>>,
    /// Per network and address: what passes cost there and how fast their holders read.
    economy: Economy,
    /// Per challenged client (its exact address and its User-Agent, as a challenge is bound):
    /// challenges issued since its last answer, and when the first was.
    unanswered: Cache<Challenged, Arc<Unanswered>, KeyHasher>,
    /// Hashes User-Agents for the key above (seeded per process, so collisions cannot be chosen).
    agent_hasher: KeyHasher,
    /// Two of the deployment's hidden trap links, for the page.
    links: [String; 2],
}

/// Whom unanswered challenges are counted for: the exact address (not its IPv6 /64: a
/// neighbour is someone else) and a hash of the User-Agent, so that another person behind the
/// same address, with another browser, is never counted with a program that reads challenge
/// pages there.
type Challenged = (IpAddr, u64);

/// One network's answered challenge ids, each with when its challenge expires (Unix seconds).
/// An id's low 64 bits: two of a network's few hundred random ids meeting there is a chance of
/// about one in 10^14, and would only refuse one answer.
type UsedIds = Vec<(u64, u64)>;

/// Unanswered challenges since `since`.
struct Unanswered {
    since: Instant,
    count: AtomicU32,
}

/// One pass's record on this replica.
struct PassRecord {
    /// (family, network bits, last seen), at most `networks + 1` entries.
    networks: Vec<(u8, u128, Instant)>,
    /// The page quota's theoretical arrival time (GCRA, as the client quota). Every page view
    /// moves it on, those over the pace too, so reading on without answering runs it ahead.
    page_due: Instant,
    /// When the current day's page budget started, and the page views in it.
    day_started: Instant,
    day_pages: u32,
    /// Page views read (not those asked again), a minute.
    pages: Decaying,
    burned: bool,
}

impl Challenger {
    /// A challenger for `config`, its keys derived from `secret`; its pages carry `links` (hidden
    /// trap links, see `snippets`).
    pub fn new(config: ChallengeConfig, secret: &[u8], links: [String; 2]) -> Challenger {
        Challenger {
            links,
            challenge_key: blake3::derive_key("quagmire 2026-12 challenge MAC", secret),
            pass_key: blake3::derive_key("quagmire 2026-12 pass MAC", secret),
            // Idle, not live: a network's list lives while it answers, and an id in it is dropped
            // once its challenge has expired, which is at most a lifetime after the last answer.
            used: Cache::builder()
                .max_capacity(ANSWERING_NETWORKS)
                .time_to_idle(CHALLENGE_LIFETIME)
                .build_with_hasher(KeyHasher::default()),
            passes: Cache::builder()
                .max_capacity(PASS_RECORDS)
                .time_to_idle(config.burn.window.max(Duration::from_secs(600)))
                .build(),
            // Time to live, not to idle: reads never extend a count (and `since` ends it on time
            // whatever the cache's own clock does).
            unanswered: Cache::builder()
                .max_capacity(CHALLENGED_CLIENTS)
                .time_to_live(UNANSWERED_MEMORY)
                .build_with_hasher(KeyHasher::default()),
            agent_hasher: KeyHasher::default(),
            economy: Economy::default(),
            config,
        }
    }

    /// The settings.
    pub(crate) fn config(&self) -> &ChallengeConfig {
        &self.config
    }

    /// The networks (as text, /24 or /48) whose passes cost the most lately, most first, with
    /// how many they minted (decayed): at most `count`.
    pub(crate) fn most_pressed(&self, count: usize) -> Vec<(String, f64)> {
        self.economy
            .most_pressed(count, Instant::now())
            .into_iter()
            .map(|(network, minted)| (economy::network_text(network), minted))
            .collect()
    }

    /// A fresh challenge for the client at `address` sending `user_agent`.
    /// Its price is its network's: more work and a longer wait where passes are minted in bulk.
    pub fn issue(&self, address: IpAddr, user_agent: &str, now: SystemTime) -> Issued {
        let binding = Binding::of(address, user_agent);
        let extra = self.economy.extra_bits((binding.family, binding.network), Instant::now());
        let difficulty = self.config.difficulty.saturating_add(extra).min(64);
        let wait = economy::wait_for(self.config.wait, extra).as_secs().min(u64::from(u16::MAX)) as u16;
        let mut payload = Vec::with_capacity(CHALLENGE_BYTES + TAG);
        payload.push(CHALLENGE_VERSION);
        payload.extend_from_slice(&rand::rng().random::<u128>().to_le_bytes());
        payload.extend_from_slice(&unix_seconds(now).to_le_bytes());
        payload.push(difficulty);
        payload.extend_from_slice(&wait.to_le_bytes());
        payload.push(binding.family);
        payload.extend_from_slice(&binding.network.to_le_bytes());
        payload.extend_from_slice(&binding.agent.to_le_bytes());
        let tag = mac(&self.challenge_key, &payload);
        payload.extend_from_slice(&tag);
        Issued {
            token: URL_SAFE_NO_PAD.encode(&payload),
            difficulty,
            wait: Duration::from_secs(u64::from(wait)),
        }
    }

    /// A challenge page for the client at `address` sending `user_agent`, which sends it back to
    /// `target` once answered; `note` says why a last answer was refused.
    pub(crate) fn page(
        &self,
        address: IpAddr,
        user_agent: &str,
        target: &str,
        note: Option<&str>,
        now: SystemTime,
    ) -> String {
        let issued = self.issue(address, user_agent, now);
        let target = if is_local_target(target) { target } else { "/" };
        page::Page {
            token: &issued.token,
            difficulty: issued.difficulty,
            wait: issued.wait,
            pass_lifetime: self.config.pass_lifetime,
            path: &self.config.path,
            target,
            links: [&self.links[0], &self.links[1]],
            note,
        }
        .render()
    }

    /// The page a browser waits on for its turn: `seconds` from now it goes on to `target`.
    pub(crate) fn waiting_page(&self, seconds: u64, target: &str, why: &str) -> String {
        let target = if is_local_target(target) { target } else { "/" };
        page::Waiting { seconds, target, why, links: [&self.links[0], &self.links[1]] }.render()
    }

    /// Checks an answer to `token`: a proof of work `nonce`, or (`None`) the wait. The client
    /// answering is the one at `address` sending `user_agent`, on a `datacenter` network or not
    /// (there, past a burst, passes start at the network's turn).
    pub fn answer(
        &self,
        token: &str,
        nonce: Option<&str>,
        address: IpAddr,
        user_agent: &str,
        datacenter: bool,
        now: SystemTime,
    ) -> Result<Answered, AnswerError> {
        let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| AnswerError::Malformed)?;
        if bytes.len() != CHALLENGE_BYTES + TAG || bytes[0] != CHALLENGE_VERSION {
            return Err(AnswerError::Malformed);
        }
        let (payload, tag) = bytes.split_at(CHALLENGE_BYTES);
        if !constant_time_eq(&mac(&self.challenge_key, payload), tag) {
            return Err(AnswerError::Forged);
        }
        let id = u128::from_le_bytes(payload[1..17].try_into().expect("16 bytes"));
        let issued = u64::from_le_bytes(payload[17..25].try_into().expect("8 bytes"));
        let difficulty = payload[25];
        let wait = u64::from(u16::from_le_bytes(payload[26..28].try_into().expect("2 bytes")));
        let binding = Binding {
            family: payload[28],
            network: u128::from_le_bytes(payload[29..45].try_into().expect("16 bytes")),
            agent: u64::from_le_bytes(payload[45..53].try_into().expect("8 bytes")),
        };
        let now_seconds = unix_seconds(now);
        let age = now_seconds.saturating_sub(issued);
        if age > CHALLENGE_LIFETIME.as_secs() || issued > now_seconds + 60 {
            return Err(AnswerError::Expired);
        }
        let answering = Binding::of(address, user_agent);
        let same_network = answering.family != binding.family || answering.network == binding.network;
        if !same_network || answering.agent != binding.agent {
            return Err(AnswerError::OtherClient);
        }
        let earned = match nonce {
            Some(nonce) => {
                if nonce.is_empty()
                    || nonce.len() > NONCE_DIGITS
                    || !nonce.bytes().all(|b| b.is_ascii_digit())
                {
                    return Err(AnswerError::Malformed);
                }
                if !meets_difficulty(token, nonce, difficulty) {
                    return Err(AnswerError::WrongWork);
                }
                Earned::Work
            }
            None => {
                if age < wait {
                    return Err(AnswerError::TooEarly);
                }
                Earned::Wait
            }
        };
        // Remembered under the network the challenge was bound to, which is the answering one's
        // (or the other family's: then the binding still names one network per token).
        let used = self.used.get_with((binding.family, binding.network), || Arc::new(Mutex::new(Vec::new())));
        let mut used = used.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if used.iter().any(|&(seen, _)| seen == id as u64) {
            return Err(AnswerError::Replayed);
        }
        used.retain(|&(_, expires)| expires > now_seconds);
        if used.len() >= ANSWERS_PER_NETWORK {
            let first_free = used.iter().map(|&(_, expires)| expires).min().unwrap_or(now_seconds);
            return Err(AnswerError::Busy(Duration::from_secs(first_free.saturating_sub(now_seconds))));
        }
        let cost = if earned == Earned::Wait { economy::WAIT_COST } else { 1 };
        let starts_in =
            match self.economy.mint((binding.family, binding.network), datacenter, cost, Instant::now()) {
                Turn::Now => Duration::ZERO,
                Turn::In(delay) => delay,
                Turn::Busy(retry) => return Err(AnswerError::Busy(retry)),
            };
        let expires = issued.saturating_add(CHALLENGE_LIFETIME.as_secs()).saturating_add(1);
        used.push((id as u64, expires));
        let issued_at = UNIX_EPOCH + Duration::from_secs(issued);
        Ok(Answered {
            earned,
            extra_bits: difficulty.saturating_sub(self.config.difficulty),
            solved_in: now.duration_since(issued_at).unwrap_or_default(),
            starts_in,
            ticket: Ticket { network: (binding.family, binding.network), id: id as u64, expires, cost },
        })
    }

    /// A new pass, earned as `earned`, good from `now` (its turn, for a network minting in
    /// bulk): the cookie's value.
    pub fn mint(&self, earned: Earned, now: SystemTime) -> String {
        let issued = unix_seconds(now);
        let expires = issued.saturating_add(self.config.pass_lifetime.as_secs());
        let mut payload = Vec::with_capacity(PASS_BYTES + TAG);
        payload.push(PASS_VERSION);
        payload.extend_from_slice(&rand::rng().random::<u128>().to_le_bytes());
        payload.extend_from_slice(&issued.to_le_bytes());
        payload.extend_from_slice(&expires.to_le_bytes());
        payload.push(match earned {
            Earned::Work => 1,
            Earned::Wait => 2,
        });
        let tag = mac(&self.pass_key, &payload);
        payload.extend_from_slice(&tag);
        URL_SAFE_NO_PAD.encode(&payload)
    }

    /// The `Set-Cookie` value for a pass: the whole site, not readable by scripts, sent on
    /// top-level navigations from other sites (a link to the site works), `Secure` over https.
    pub(crate) fn set_cookie(&self, value: &str, secure: bool) -> String {
        format!(
            "{PASS_COOKIE}={value}; Path=/; Max-Age={}; HttpOnly; SameSite=Lax{}",
            self.config.pass_lifetime.as_secs(),
            if secure { "; Secure" } else { "" }
        )
    }

    /// The pass a `Cookie` header holds, if any. With several pass cookies (a stale one from a
    /// parent domain, say), a valid one wins.
    pub fn pass_in(&self, cookies: &str, now: SystemTime) -> PassCheck {
        self.pass_in_fields([cookies], now)
    }

    /// The pass in a request's `Cookie` fields, read as one: HTTP/2 and HTTP/3 clients send each
    /// cookie as a field of its own, which a proxy may forward as they are (RFC 9113 §8.2.3
    /// joins them with `; `, which is what reading every field's pairs in order amounts to).
    pub fn pass_in_fields<'c>(
        &self,
        fields: impl IntoIterator<Item = &'c str>,
        now: SystemTime,
    ) -> PassCheck {
        let mut found = PassCheck::None;
        for pair in fields.into_iter().flat_map(|field| field.split(';')) {
            let Some((name, value)) = pair.split_once('=') else { continue };
            if name.trim() != PASS_COOKIE {
                continue;
            }
            match self.read_pass(value.trim().trim_matches('"'), now) {
                valid @ PassCheck::Valid(_) => return valid,
                other => found = other,
            }
        }
        found
    }

    /// Reads one pass cookie's value.
    pub fn read_pass(&self, value: &str, now: SystemTime) -> PassCheck {
        // A pass's text is 68 characters; anything much longer is not one, and is not decoded.
        if value.len() > 128 {
            return PassCheck::Invalid;
        }
        let Ok(bytes) = URL_SAFE_NO_PAD.decode(value) else { return PassCheck::Invalid };
        if bytes.len() != PASS_BYTES + TAG || bytes[0] != PASS_VERSION {
            return PassCheck::Invalid;
        }
        let (payload, tag) = bytes.split_at(PASS_BYTES);
        if !constant_time_eq(&mac(&self.pass_key, payload), tag) {
            return PassCheck::Invalid;
        }
        let earned = match payload[33] {
            1 => Earned::Work,
            2 => Earned::Wait,
            _ => return PassCheck::Invalid,
        };
        let pass = Pass {
            id: u128::from_le_bytes(payload[1..17].try_into().expect("16 bytes")),
            issued: u64::from_le_bytes(payload[17..25].try_into().expect("8 bytes")),
            expires: u64::from_le_bytes(payload[25..33].try_into().expect("8 bytes")),
            earned,
        };
        let now = unix_seconds(now);
        if now >= pass.expires {
            return PassCheck::Expired;
        }
        if now < pass.issued {
            return PassCheck::Early(pass.issued - now);
        }
        PassCheck::Valid(pass)
    }

    /// Records a use of pass `id` from `address` at `at` (a page view or not) on this replica,
    /// its holders having `trap_hits`: the networks it was used from in the window, and whether
    /// that, its page pace or its trap hits burn it. A burn stays for as long as the record does.
    /// On a `datacenter` network, a page view over the pass's share of its crowd is asked again.
    pub(crate) fn observe_pass(
        &self,
        id: u128,
        address: IpAddr,
        page_view: bool,
        trap_hits: u64,
        datacenter: bool,
        at: Instant,
    ) -> PassUse {
        let burn = &self.config.burn;
        let record = self.passes.get_with(id, || {
            Arc::new(Mutex::new(PassRecord {
                networks: Vec::new(),
                page_due: at,
                day_started: at,
                day_pages: 0,
                pages: Decaying::new(at),
                burned: false,
            }))
        });
        let mut record = record.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (family, network) = network_of(address);
        record.networks.retain(|&(_, _, seen)| at.saturating_duration_since(seen) <= burn.window);
        match record.networks.iter_mut().find(|(f, n, _)| *f == family && *n == network) {
            Some(entry) => entry.2 = entry.2.max(at),
            None => {
                if record.networks.len() > burn.networks as usize {
                    // Over the limit already: keep the list bounded, dropping the oldest.
                    let oldest =
                        (0..record.networks.len()).min_by_key(|&i| record.networks[i].2).unwrap_or(0);
                    record.networks.swap_remove(oldest);
                }
                record.networks.push((family, network, at));
            }
        }
        let (mut pages_over, mut rechallenge) = (false, None);
        if page_view {
            let interval = Duration::from_secs(60) / burn.pages_per_minute.max(1);
            let tolerance = interval * burn.page_burst.max(1).saturating_sub(1);
            let ahead = record.page_due.saturating_duration_since(at);
            if ahead > BURN_AHEAD.max(tolerance) {
                pages_over = true;
            } else if ahead > tolerance {
                rechallenge = Some("pace");
            }
            record.page_due = record.page_due.max(at) + interval;
            if at.saturating_duration_since(record.day_started) > DAY {
                (record.day_started, record.day_pages) = (at, 0);
            }
            record.day_pages = record.day_pages.saturating_add(1);
            if rechallenge.is_none() && record.day_pages > PAGES_PER_DAY {
                rechallenge = Some("budget");
            }
            if rechallenge.is_none() && datacenter {
                let rate = record.pages.at(at, RATE_WINDOW) + 1.0;
                let pace = f64::from(burn.pages_per_minute);
                if self.economy.over_share(address, rate, pace, at) {
                    rechallenge = Some("crowd");
                } else {
                    self.economy.read(address, at);
                }
            }
            if rechallenge.is_none() {
                record.pages.add(1.0, at, RATE_WINDOW);
            }
        }
        let networks = record.networks.len() as u32;
        let burned = if trap_hits >= u64::from(burn.trap_hits) {
            Some("trap_hits")
        } else if networks > burn.networks {
            Some("networks")
        } else if pages_over {
            Some("pages")
        } else if record.burned {
            // Burned here for its networks or pace, before the trap hits that record it arrived.
            Some("trap_hits")
        } else {
            None
        };
        let newly_burned = burned.is_some() && !record.burned;
        record.burned |= burned.is_some();
        PassUse { networks, burned, newly_burned, rechallenge: rechallenge.filter(|_| burned.is_none()) }
    }

    fn challenged_key(&self, address: IpAddr, user_agent: &str) -> Challenged {
        (address.to_canonical(), self.agent_hasher.hash_one(user_agent))
    }

    /// Counts a challenge issued at `at` to the client at `address` sending `user_agent`:
    /// returns how many are now unanswered.
    pub(crate) fn challenged(&self, address: IpAddr, user_agent: &str, at: Instant) -> u32 {
        let key = self.challenged_key(address, user_agent);
        let fresh = || Arc::new(Unanswered { since: at, count: AtomicU32::new(0) });
        let mut entry = self.unanswered.get_with(key, fresh);
        if at.saturating_duration_since(entry.since) > UNANSWERED_MEMORY {
            entry = fresh();
            self.unanswered.insert(key, entry.clone());
        }
        entry.count.fetch_add(1, Ordering::Relaxed).saturating_add(1)
    }

    /// Challenges issued to the client at `address` sending `user_agent` since its last answer,
    /// counted for [`UNANSWERED_MEMORY`] from the first of them, as of `at`.
    pub(crate) fn unanswered(&self, address: IpAddr, user_agent: &str, at: Instant) -> u32 {
        let key = self.challenged_key(address, user_agent);
        self.unanswered.get(&key).map_or(0, |entry| {
            if at.saturating_duration_since(entry.since) > UNANSWERED_MEMORY {
                0
            } else {
                entry.count.load(Ordering::Relaxed)
            }
        })
    }

    /// The client at `address` sending `user_agent` answered a challenge: its count starts again.
    pub(crate) fn answered(&self, address: IpAddr, user_agent: &str) {
        self.unanswered.invalidate(&self.challenged_key(address, user_agent));
    }
}

/// Whether SHA-256 of `token` then `nonce` starts with `bits` zero bits.
pub fn meets_difficulty(token: &str, nonce: &str, bits: u8) -> bool {
    let mut hasher = Sha256::new();
    hasher.update(token.as_bytes());
    hasher.update(nonce.as_bytes());
    leading_zero_bits(&hasher.finalize()) >= u32::from(bits)
}

fn leading_zero_bits(bytes: &[u8]) -> u32 {
    let mut zeros = 0;
    for &byte in bytes {
        if byte == 0 {
            zeros += 8;
        } else {
            return zeros + byte.leading_zeros();
        }
    }
    zeros
}

fn mac(key: &[u8; 32], data: &[u8]) -> [u8; TAG] {
    blake3::keyed_hash(key, data).as_bytes()[..TAG].try_into().expect("16 bytes")
}

/// Compares tags without stopping at the first difference, so timing tells nothing of a tag.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs())
}

/// Whether `target` may be redirected to after an answer: a path on this host only (`/...`,
/// never `//host` or `/\host`, which browsers read as another host), without control characters.
pub(crate) fn is_local_target(target: &str) -> bool {
    target.starts_with('/')
        && !target.starts_with("//")
        && !target.starts_with("/\\")
        && target.len() <= 4096
        && !target.chars().any(|c| c.is_control() || c == '\\')
}
