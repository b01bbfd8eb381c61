//! What a replay found, tallied line by line in bounded memory; `render.rs` writes it for a
//! person (a terminal summary) or a machine (JSON).

use std::sync::Arc;
use std::time::Duration;

use foldhash::HashMap;

use serde_json::{Value, json};

use crate::client::ClientKey;
use crate::rules::{RuleFailure, Verdict};
use crate::support::log_field::head;
use crate::vocabulary::AiKind;

/// The rule name of requests the trap served without a verdict (in the log under the trap's
/// prefix, where the proxy sends them straight to the trap listener).
pub(crate) const SERVED_BY_TRAP: &str = "(served by the trap)";

/// Distinct entries kept per "top" table before the rarest are dropped.
const TOP_KEPT: usize = 2000;
/// Rows shown per "top" table.
const TOP_SHOWN: usize = 10;
/// Bytes kept of a user agent or path in the top tables.
const KEY_BYTES: usize = 200;
/// Bad lines described by number and reason.
const BAD_SHOWN: usize = 10;

/// Allowed, trapped and challenged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Allowed.
    pub allow: u64,
    /// Trapped.
    pub trap: u64,
    /// Challenged: counted on their own, as a replay cannot know whether the client would have
    /// answered (and gone on with a pass) or not (and been trapped).
    pub challenge: u64,
}

impl Counts {
    fn add(&mut self, verdict: Verdict) {
        match verdict {
            Verdict::Allow => self.allow += 1,
            Verdict::Trap => self.trap += 1,
            Verdict::Challenge => self.challenge += 1,
        }
    }

    fn json(self) -> Value {
        json!({ "allow": self.allow, "trap": self.trap, "challenge": self.challenge })
    }
}

/// Counts by text, keeping the most frequent when there are too many distinct ones: counts of
/// the rows shown are exact unless a row was once dropped and came back (then at least).
#[derive(Default)]
struct Top {
    counts: HashMap<Box<str>, u64>,
}

impl Top {
    fn add(&mut self, key: &str) {
        // A header or path can be a megabyte long: the tables keep a readable head of it, so
        // their memory stays bounded whatever the log holds.
        let key = head(key, KEY_BYTES);
        if let Some(count) = self.counts.get_mut(key) {
            *count += 1;
            return;
        }
        if self.counts.len() >= 2 * TOP_KEPT {
            let mut all: Vec<(Box<str>, u64)> = self.counts.drain().collect();
            all.sort_unstable_by_key(|entry| std::cmp::Reverse(entry.1));
            all.truncate(TOP_KEPT);
            self.counts.extend(all);
        }
        self.counts.insert(key.into(), 1);
    }

    fn top(&self, n: usize) -> Vec<(&str, u64)> {
        let mut all: Vec<(&str, u64)> = self.counts.iter().map(|(key, count)| (&**key, *count)).collect();
        all.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        all.truncate(n);
        all
    }
}

/// One client's tally.
#[derive(Default)]
struct ClientTally {
    requests: u64,
    trapped: u64,
    challenged: u64,
    /// With `--compare`: requests the other ruleset traps.
    trapped_other: u64,
    /// The highest request rate among its requests no rule decided, and its user agent then.
    unruled_rate: f64,
    unruled_agent: Box<str>,
}

/// A replayed line, shown as an example.
#[derive(Clone, Debug)]
pub(crate) struct Sample {
    /// `file:line`.
    pub place: String,
    /// Client, method, URI and user agent.
    pub summary: String,
}

/// One line's outcome, for the tally.
pub struct Outcome<'a> {
    /// Where it is, as `file:line`.
    pub place: &'a dyn Fn() -> String,
    /// A short description of the request.
    pub summary: &'a dyn Fn() -> String,
    /// The client.
    pub client: ClientKey,
    /// The verdict and deciding rule ("" for none).
    pub verdict: Verdict,
    /// The deciding rule.
    pub rule: &'a Arc<str>,
    /// Rules skipped on this line.
    pub unjudged: &'a [Arc<str>],
    /// Rules that failed on this line, with their error.
    pub failures: &'a [RuleFailure],
    /// The other ruleset's verdict and rule, with `--compare`.
    pub other: Option<(Verdict, &'a Arc<str>)>,
    /// The user agent, path and network (ASN or address block).
    pub user_agent: &'a str,
    /// The path.
    pub path: &'a str,
    /// `AS…` with its name, or the client's address block.
    pub network: &'a dyn Fn() -> String,
    /// The client's request rate with this request.
    pub request_rate: f64,
    /// The kind of AI crawler its User-Agent names.
    pub ai_kind: Option<AiKind>,
}

/// Crawlers named in the robots.txt tally, at most.
const ROBOTS_CRAWLERS: usize = 1000;

/// What a replay found.
pub struct Report {
    /// Inputs and the format each was read as.
    pub inputs: Vec<(String, String)>,
    /// Lines read (including blank and bad ones).
    pub lines: u64,
    /// Blank lines (not counted as bad).
    pub blank_lines: u64,
    /// Lines that are not requests.
    pub bad_lines: u64,
    /// Lines over a minute earlier than a line before them (inputs out of order).
    pub out_of_order: u64,
    bad_shown: Vec<(String, String)>,
    /// Replayed requests by verdict.
    pub requests: Counts,
    /// Requests by deciding rule.
    pub by_rule: HashMap<Arc<str>, u64>,
    by_rule_verdict: HashMap<Arc<str>, Verdict>,
    /// Lines each rule could not be judged on.
    pub unjudged: HashMap<Arc<str>, u64>,
    /// Lines each rule failed on (an error, or over a limit), with its first error.
    pub errors: HashMap<Arc<str>, (u64, String)>,
    samples: HashMap<Arc<str>, Vec<Sample>>,
    sample_count: usize,
    clients: HashMap<ClientKey, ClientTally>,
    client_capacity: usize,
    /// Clients not tallied because `client_capacity` was reached.
    pub clients_untallied: u64,
    agents: Top,
    networks: Top,
    paths: Top,
    /// With `--compare`.
    pub comparison: Option<Comparison>,
    /// How long the replay took.
    pub elapsed: Duration,
    /// Crawlers' requests under the site's robots.txt: per crawler, (obeyed, ignored).
    pub robots: HashMap<String, (u64, u64)>,
    /// AI crawlers' requests by kind, by verdict.
    pub by_ai_kind: HashMap<AiKind, Counts>,
    /// What was asked of DNS; `None` with `--no-dns`.
    pub dns: Option<super::dns::DnsCounts>,
}

/// The second ruleset's results and how they differ.
pub struct Comparison {
    /// Its script.
    pub script: String,
    /// Its requests by verdict.
    pub requests: Counts,
    /// Its requests by deciding rule.
    pub by_rule: HashMap<Arc<str>, u64>,
    /// Lines whose verdict differs.
    pub changed_lines: u64,
    /// (verdict, rule) before → after, with the number of lines.
    pub transitions: HashMap<(Verdict, Arc<str>, Verdict, Arc<str>), u64>,
    samples: Vec<Sample>,
}

impl Report {
    /// An empty report; `client_capacity` bounds the clients tallied, `samples` the lines kept
    /// per rule, `compare` names the second ruleset.
    pub fn new(client_capacity: usize, samples: usize, compare: Option<String>) -> Report {
        Report {
            inputs: Vec::new(),
            lines: 0,
            blank_lines: 0,
            bad_lines: 0,
            out_of_order: 0,
            bad_shown: Vec::new(),
            requests: Counts::default(),
            by_rule: HashMap::default(),
            by_rule_verdict: HashMap::default(),
            unjudged: HashMap::default(),
            errors: HashMap::default(),
            samples: HashMap::default(),
            sample_count: samples,
            clients: HashMap::default(),
            client_capacity,
            clients_untallied: 0,
            agents: Top::default(),
            networks: Top::default(),
            paths: Top::default(),
            comparison: compare.map(|script| Comparison {
                script,
                requests: Counts::default(),
                by_rule: HashMap::default(),
                changed_lines: 0,
                transitions: HashMap::default(),
                samples: Vec::new(),
            }),
            elapsed: Duration::ZERO,
            dns: None,
            robots: HashMap::default(),
            by_ai_kind: HashMap::default(),
        }
    }

    /// A crawler's request for a path the site's robots.txt allows it (`ignored`: disallows).
    /// At most [`ROBOTS_CRAWLERS`] crawlers are named; the rest count as `other`.
    pub(crate) fn robots_request(&mut self, crawler: &str, ignored: bool) {
        let crawler = if self.robots.contains_key(crawler) || self.robots.len() < ROBOTS_CRAWLERS {
            crawler
        } else {
            "other"
        };
        let counts = self.robots.entry(crawler.to_string()).or_default();
        if ignored {
            counts.1 += 1;
        } else {
            counts.0 += 1;
        }
    }

    /// Counts a line that is not a request, keeping the first few reasons.
    pub fn bad_line(&mut self, place: impl FnOnce() -> String, reason: impl FnOnce() -> String) {
        self.bad_lines += 1;
        if self.bad_shown.len() < BAD_SHOWN {
            self.bad_shown.push((place(), reason()));
        }
    }

    /// Tallies one replayed request.
    pub fn add(&mut self, outcome: Outcome) {
        let Outcome {
            place,
            summary,
            client,
            verdict,
            rule,
            unjudged,
            failures,
            other,
            user_agent,
            path,
            network,
            request_rate,
            ai_kind,
        } = outcome;
        if let Some(kind) = ai_kind {
            self.by_ai_kind.entry(kind).or_default().add(verdict);
        }
        for RuleFailure { rule: failed, message, .. } in failures {
            self.errors.entry(failed.clone()).or_insert_with(|| (0, message.clone())).0 += 1;
        }
        self.requests.add(verdict);
        // Looked up before inserting: a rule's name is cloned once, not once per line.
        match self.by_rule.get_mut(rule) {
            Some(count) => *count += 1,
            None => {
                self.by_rule.insert(rule.clone(), 1);
                self.by_rule_verdict.insert(rule.clone(), verdict);
                self.samples.insert(rule.clone(), Vec::new());
            }
        }
        for skipped in unjudged {
            match self.unjudged.get_mut(skipped) {
                Some(count) => *count += 1,
                None => {
                    self.unjudged.insert(skipped.clone(), 1);
                }
            }
        }
        if let Some(samples) = self.samples.get_mut(rule)
            && samples.len() < self.sample_count
        {
            samples.push(Sample { place: place(), summary: summary() });
        }
        if verdict == Verdict::Trap {
            self.agents.add(if user_agent.is_empty() { "(none)" } else { user_agent });
            self.networks.add(&network());
            self.paths.add(path);
        }
        let room = self.clients.len() < self.client_capacity;
        let tally = match self.clients.entry(client) {
            std::collections::hash_map::Entry::Occupied(entry) => Some(entry.into_mut()),
            std::collections::hash_map::Entry::Vacant(entry) if room => {
                Some(entry.insert(ClientTally::default()))
            }
            std::collections::hash_map::Entry::Vacant(_) => {
                self.clients_untallied += 1;
                None
            }
        };
        if let Some(tally) = tally {
            tally.requests += 1;
            tally.trapped += u64::from(verdict == Verdict::Trap);
            tally.challenged += u64::from(verdict == Verdict::Challenge);
            tally.trapped_other += u64::from(other.is_some_and(|(verdict, _)| verdict == Verdict::Trap));
            if verdict == Verdict::Allow && rule.is_empty() && request_rate > tally.unruled_rate {
                tally.unruled_rate = request_rate;
                if *tally.unruled_agent != *user_agent {
                    tally.unruled_agent = head(user_agent, 120).into();
                }
            }
        }
        if let (Some(comparison), Some((other_verdict, other_rule))) = (self.comparison.as_mut(), other) {
            comparison.requests.add(other_verdict);
            *comparison.by_rule.entry(other_rule.clone()).or_default() += 1;
            if other_verdict != verdict {
                comparison.changed_lines += 1;
                *comparison
                    .transitions
                    .entry((verdict, rule.clone(), other_verdict, other_rule.clone()))
                    .or_default() += 1;
                if comparison.samples.len() < self.sample_count.max(1) * 4 {
                    comparison.samples.push(Sample {
                        place: place(),
                        summary: format!(
                            "{} → {}: {}",
                            describe(verdict, rule),
                            describe(other_verdict, other_rule),
                            summary()
                        ),
                    });
                }
            }
        }
    }

    /// Clients with at least one request trapped, and the others (of those tallied).
    pub fn clients(&self) -> Counts {
        let trap = self.clients.values().filter(|tally| tally.trapped > 0).count() as u64;
        // Challenged and never trapped: whether they would have answered is not in the log.
        let challenge =
            self.clients.values().filter(|tally| tally.trapped == 0 && tally.challenged > 0).count() as u64;
        Counts { allow: self.clients.len() as u64 - trap - challenge, trap, challenge }
    }
}

mod render;
pub(crate) use render::thousands;

/// A rule's name for people: "(no rule)" for none.
fn rule_name(rule: &str) -> &str {
    if rule.is_empty() { "(no rule)" } else { rule }
}

fn describe(verdict: Verdict, rule: &str) -> String {
    format!("{} ({})", verdict.as_str(), rule_name(rule))
}
