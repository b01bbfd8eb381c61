//! What a replay found, tallied line by line in bounded memory, and written for a person (a
//! terminal summary) or a machine (JSON).

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use foldhash::HashMap;

use serde_json::{Value, json};

use crate::client::ClientKey;
use crate::log_field::head;
use crate::rules::{RuleFailure, Verdict};

/// The rule name of requests the trap served without a verdict (in the log under the trap's
/// prefix, where the proxy sends them straight to the trap listener).
pub const SERVED_BY_TRAP: &str = "(served by the trap)";

/// Distinct entries kept per "top" table before the rarest are dropped.
const TOP_KEPT: usize = 2000;
/// Rows shown per "top" table.
const TOP_SHOWN: usize = 10;
/// Bytes kept of a user agent or path in the top tables.
const KEY_BYTES: usize = 200;
/// Bad lines described by number and reason.
const BAD_SHOWN: usize = 10;

/// Allowed and trapped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Allowed.
    pub allow: u64,
    /// Trapped.
    pub trap: u64,
}

impl Counts {
    fn add(&mut self, verdict: Verdict) {
        match verdict {
            Verdict::Allow => self.allow += 1,
            Verdict::Trap => self.trap += 1,
        }
    }

    fn json(self) -> Value {
        json!({ "allow": self.allow, "trap": self.trap })
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
    /// With `--compare`: requests the other ruleset traps.
    trapped_other: u64,
    /// The highest request rate among its requests no rule decided, and its user agent then.
    unruled_rate: f64,
    unruled_agent: Box<str>,
}

/// A replayed line, shown as an example.
#[derive(Clone, Debug)]
pub struct Sample {
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
}

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
        } = outcome;
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
        Counts { allow: self.clients.len() as u64 - trap, trap }
    }

    /// With `--compare`: the other ruleset's client counts, and the clients whose verdict
    /// differs (trapped at least once under one ruleset and never under the other).
    fn compared_clients(&self) -> (Counts, Vec<(&ClientKey, &ClientTally)>) {
        let trap = self.clients.values().filter(|tally| tally.trapped_other > 0).count() as u64;
        let mut changed: Vec<_> = self
            .clients
            .iter()
            .filter(|(_, tally)| (tally.trapped > 0) != (tally.trapped_other > 0))
            .collect();
        changed.sort_by(|a, b| b.1.requests.cmp(&a.1.requests).then(a.0.cmp(b.0)));
        (Counts { allow: self.clients.len() as u64 - trap, trap }, changed)
    }

    fn top_unruled(&self) -> Vec<(&ClientKey, &ClientTally)> {
        let mut all: Vec<_> =
            self.clients.iter().filter(|(_, tally)| tally.trapped == 0 && tally.unruled_rate > 0.0).collect();
        all.sort_by(|a, b| b.1.unruled_rate.total_cmp(&a.1.unruled_rate).then(a.0.cmp(b.0)));
        all.truncate(TOP_SHOWN);
        all
    }

    fn rules_by_count(map: &HashMap<Arc<str>, u64>) -> Vec<(&Arc<str>, u64)> {
        let mut rules: Vec<(&Arc<str>, u64)> = map.iter().map(|(rule, count)| (rule, *count)).collect();
        rules.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        rules
    }

    /// The report as JSON: `lines`, `bad_lines`, `requests`, `clients`, `by_rule`,
    /// `unjudged_rules`, and more.
    pub fn json(&self) -> Value {
        let by_rule: serde_json::Map<String, Value> =
            self.by_rule.iter().map(|(rule, count)| (rule_name(rule).to_string(), json!(count))).collect();
        let unjudged: serde_json::Map<String, Value> =
            self.unjudged.iter().map(|(rule, count)| (rule.to_string(), json!(count))).collect();
        let top = |top: &Top| -> Value {
            top.top(TOP_SHOWN)
                .into_iter()
                .map(|(key, count)| json!({ "value": key, "requests": count }))
                .collect()
        };
        let mut out = json!({
            "inputs": self.inputs.iter().map(|(name, format)| json!({ "file": name, "format": format })).collect::<Vec<_>>(),
            "lines": self.lines,
            "blank_lines": self.blank_lines,
            "bad_lines": self.bad_lines,
            "out_of_order_lines": self.out_of_order,
            "bad_line_examples": self.bad_shown.iter().map(|(place, reason)| json!({ "line": place, "reason": reason })).collect::<Vec<_>>(),
            "requests": self.requests.json(),
            "clients": self.clients().json(),
            "clients_untallied_requests": self.clients_untallied,
            "by_rule": by_rule,
            "unjudged_rules": unjudged,
            "rule_errors": self.errors.iter().map(|(rule, (count, first))| (rule.to_string(), json!({ "lines": count, "first": first }))).collect::<serde_json::Map<_, _>>(),
            "top_trapped": { "user_agents": top(&self.agents), "networks": top(&self.networks), "paths": top(&self.paths) },
            "top_unruled_clients": self.top_unruled().iter().map(|(key, tally)| json!({
                "client": key.to_string(),
                "requests": tally.requests,
                "requests_per_minute": per_minute(tally.unruled_rate),
                "user_agent": &*tally.unruled_agent,
            })).collect::<Vec<_>>(),
            "seconds": self.elapsed.as_secs_f64(),
        });
        if let Some(comparison) = &self.comparison {
            let (clients, changed) = self.compared_clients();
            let mut transitions: Vec<_> = comparison.transitions.iter().collect();
            transitions.sort_by(|a, b| b.1.cmp(a.1));
            out["compare"] = json!({
                "rules": comparison.script,
                "requests": comparison.requests.json(),
                "clients": clients.json(),
                "by_rule": comparison.by_rule.iter().map(|(rule, count)| (rule_name(rule).to_string(), json!(count))).collect::<serde_json::Map<_, _>>(),
                "changed_lines": comparison.changed_lines,
                "changed_clients": changed.len(),
                "transitions": transitions.iter().map(|((from, from_rule, to, to_rule), count)| json!({
                    "from": { "verdict": from.as_str(), "rule": rule_name(from_rule) },
                    "to": { "verdict": to.as_str(), "rule": rule_name(to_rule) },
                    "lines": count,
                })).collect::<Vec<_>>(),
            });
        }
        out
    }

    /// The summary a person reads.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let inputs: Vec<String> =
            self.inputs.iter().map(|(name, format)| format!("{name} ({format})")).collect();
        let seconds = self.elapsed.as_secs_f64();
        let _ = writeln!(
            out,
            "Replayed {} lines of {} in {:.1} s ({} lines/s).",
            thousands(self.lines),
            inputs.join(", "),
            seconds,
            thousands((self.lines as f64 / seconds.max(1e-9)) as u64)
        );
        if self.bad_lines > 0 {
            let _ = writeln!(out, "\n{} bad lines (not requests; skipped):", thousands(self.bad_lines));
            for (place, reason) in &self.bad_shown {
                let _ = writeln!(out, "  {}: {}", printable(place), printable(reason));
            }
            if self.bad_lines > self.bad_shown.len() as u64 {
                let _ = writeln!(out, "  …");
            }
        }
        if self.out_of_order > 0 {
            let _ = writeln!(
                out,
                "\n{} lines are over a minute earlier than a line before them: give the logs oldest first \
                 (access.log.2 access.log.1 access.log), or their verdicts are not the ones they had.",
                thousands(self.out_of_order)
            );
        }
        let total = self.requests.allow + self.requests.trap;
        let clients = self.clients();
        let _ = writeln!(out, "\n             allowed            trapped");
        let _ = writeln!(
            out,
            "requests  {:>10} {:>6}  {:>10} {:>6}",
            thousands(self.requests.allow),
            percent(self.requests.allow, total),
            thousands(self.requests.trap),
            percent(self.requests.trap, total)
        );
        let client_total = clients.allow + clients.trap;
        let _ = writeln!(
            out,
            "clients   {:>10} {:>6}  {:>10} {:>6}",
            thousands(clients.allow),
            percent(clients.allow, client_total),
            thousands(clients.trap),
            percent(clients.trap, client_total)
        );
        if self.clients_untallied > 0 {
            let _ = writeln!(
                out,
                "  ({} requests of clients beyond the first {} are not in the client counts)",
                thousands(self.clients_untallied),
                thousands(self.client_capacity as u64)
            );
        }
        let _ = writeln!(out, "\nBy rule (requests):");
        for (rule, count) in Self::rules_by_count(&self.by_rule) {
            let verdict = self.by_rule_verdict.get(rule).map_or("", |verdict| verdict.as_str());
            let _ = writeln!(out, "  {verdict:<5} {:<36} {:>10}", rule_name(rule), thousands(count));
        }
        if !self.unjudged.is_empty() {
            let _ = writeln!(
                out,
                "\nRules not judged (they read what this log does not carry; skipped on those lines):"
            );
            for (rule, count) in Self::rules_by_count(&self.unjudged) {
                let _ = writeln!(out, "  {:<42} {:>10} lines", rule, thousands(count));
            }
        }
        if !self.errors.is_empty() {
            let _ = writeln!(out, "\nRules that failed (the fail mode decided for them):");
            let mut errors: Vec<_> = self.errors.iter().collect();
            errors.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(b.0)));
            for (rule, (count, first)) in errors {
                let _ = writeln!(
                    out,
                    "  {:<42} {:>10} lines; first: {}",
                    rule,
                    thousands(*count),
                    printable(head(first, 200))
                );
            }
        }
        for (title, top) in [
            ("Top trapped user agents", &self.agents),
            ("Top trapped networks", &self.networks),
            ("Top trapped paths", &self.paths),
        ] {
            let rows = top.top(TOP_SHOWN);
            if rows.is_empty() {
                continue;
            }
            let _ = writeln!(out, "\n{title}:");
            for (key, count) in rows {
                let _ = writeln!(out, "  {:>10}  {}", thousands(count), printable(head(key, 100)));
            }
        }
        let unruled = self.top_unruled();
        if !unruled.is_empty() {
            let _ = writeln!(out, "\nBusiest allowed clients no rule decided (peak requests/min):");
            for (key, tally) in unruled {
                let _ = writeln!(
                    out,
                    "  {:<20} {:>7.0}/min {:>8} requests  {}",
                    key.to_string(),
                    per_minute(tally.unruled_rate),
                    thousands(tally.requests),
                    printable(&tally.unruled_agent)
                );
            }
        }
        if self.sample_count > 0 && !self.samples.is_empty() {
            let _ = writeln!(out, "\nExamples by rule:");
            for (rule, _) in Self::rules_by_count(&self.by_rule) {
                let Some(samples) = self.samples.get(rule) else { continue };
                let _ = writeln!(out, "  {}:", rule_name(rule));
                for sample in samples {
                    let _ = writeln!(out, "    {}  {}", printable(&sample.place), printable(&sample.summary));
                }
            }
        }
        if let Some(comparison) = &self.comparison {
            let (clients, changed) = self.compared_clients();
            let _ = writeln!(out, "\nCompared with {}:", comparison.script);
            let _ = writeln!(
                out,
                "  requests  allowed {}, trapped {}; clients allowed {}, trapped {}",
                thousands(comparison.requests.allow),
                thousands(comparison.requests.trap),
                thousands(clients.allow),
                thousands(clients.trap)
            );
            let _ = writeln!(
                out,
                "  {} lines and {} clients change verdict",
                thousands(comparison.changed_lines),
                thousands(changed.len() as u64)
            );
            let mut transitions: Vec<_> = comparison.transitions.iter().collect();
            transitions.sort_by(|a, b| b.1.cmp(a.1));
            for ((from, from_rule, to, to_rule), count) in transitions {
                let _ = writeln!(
                    out,
                    "  {:>10}  {} → {}",
                    thousands(*count),
                    describe(*from, from_rule),
                    describe(*to, to_rule)
                );
            }
            for (key, tally) in changed.iter().take(TOP_SHOWN) {
                let (before, after) =
                    if tally.trapped > 0 { ("trapped", "allowed") } else { ("allowed", "trapped") };
                let _ = writeln!(
                    out,
                    "  client {key}: {before} → {after} ({} requests)",
                    thousands(tally.requests)
                );
            }
            for sample in &comparison.samples {
                let _ = writeln!(out, "    {}  {}", printable(&sample.place), printable(&sample.summary));
            }
        }
        out
    }
}

/// `text` with what a terminal would act on (control characters, C1 controls, bidirectional
/// overrides) written as `\u{..}` escapes: a log line must not move the cursor or recolour the
/// report of the person reading it.
fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let acts = crate::log_field::acts_on_terminal;
    if !text.chars().any(acts) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if acts(c) {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A rule's name for people: "(no rule)" for none.
fn rule_name(rule: &str) -> &str {
    if rule.is_empty() { "(no rule)" } else { rule }
}

fn describe(verdict: Verdict, rule: &str) -> String {
    format!("{} ({})", verdict.as_str(), rule_name(rule))
}

/// `request_rate` (a one-minute half-life sum) as requests per minute at a steady rate.
fn per_minute(rate: f64) -> f64 {
    rate / (1.0 / std::f64::consts::LN_2)
}

fn percent(part: u64, total: u64) -> String {
    if total == 0 { "-".into() } else { format!("{:.1}%", 100.0 * part as f64 / total as f64) }
}

/// 1234567 as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}
