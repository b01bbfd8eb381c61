//! A replay's report written out: the terminal summary and the JSON, from the tallies
//! `report.rs` keeps.

use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::{Value, json};

use super::*;

impl Report {
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
        (Counts { allow: self.clients.len() as u64 - trap, trap, challenge: 0 }, changed)
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
            "by_ai_kind": AiKind::ALL.iter().filter_map(|kind| {
                self.by_ai_kind.get(kind).map(|counts| (kind.as_str().to_string(), counts.json()))
            }).collect::<serde_json::Map<_, _>>(),
            "robots_txt": self.robots_rows().into_iter().map(|(crawler, (obeyed, ignored))| {
                (crawler.to_string(), json!({ "obeyed": obeyed, "ignored": ignored }))
            }).collect::<serde_json::Map<_, _>>(),
            "dns": match self.dns {
                Some(dns) => json!({
                    "lines": dns.lines,
                    "lookups": dns.lookups,
                    "confirmed": dns.confirmed,
                    "refuted": dns.refuted,
                    "unanswered": dns.unanswered,
                }),
                None => Value::Null,
            },
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
        if !self.by_ai_kind.is_empty() {
            let _ = writeln!(out, "\nAI crawlers by kind (requests):");
            let _ =
                writeln!(out, "  {:9}  {:>10}  {:>10}  {:>10}", "kind", "allowed", "trapped", "challenged");
            for kind in AiKind::ALL {
                if let Some(counts) = self.by_ai_kind.get(&kind) {
                    let _ = writeln!(
                        out,
                        "  {:9}  {:>10}  {:>10}  {:>10}",
                        kind.as_str(),
                        thousands(counts.allow),
                        thousands(counts.trap),
                        thousands(counts.challenge)
                    );
                }
            }
        }
        let robots = self.robots_rows();
        if !robots.is_empty() {
            let _ = writeln!(out, "\nCrawlers and the site's robots.txt (requests):");
            let width = robots.iter().map(|(crawler, _)| crawler.len()).max().unwrap_or(0).max(7);
            let _ = writeln!(out, "  {:width$}  {:>10}  {:>10}", "crawler", "obeyed", "ignored");
            for (crawler, (obeyed, ignored)) in robots.iter().take(TOP_SHOWN) {
                let _ = writeln!(
                    out,
                    "  {:width$}  {:>10}  {:>10}",
                    printable(crawler),
                    thousands(*obeyed),
                    thousands(*ignored)
                );
            }
            if robots.len() > TOP_SHOWN {
                let _ = writeln!(out, "  … and {} more (all in --json)", robots.len() - TOP_SHOWN);
            }
        }
        match self.dns {
            Some(dns) if dns.lines > 0 => {
                let _ = writeln!(
                    out,
                    "\nCrawler claims outside the published ranges: {} lines; {} reverse DNS lookups: {} confirmed, \
                     {} refuted, {} unanswered (pending, as live).",
                    thousands(dns.lines),
                    thousands(dns.lookups),
                    thousands(dns.confirmed),
                    thousands(dns.refuted),
                    thousands(dns.unanswered)
                );
            }
            Some(_) => {}
            None => {
                let _ = writeln!(
                    out,
                    "\nNo DNS (--no-dns): crawler claims outside the published ranges stay pending, where live \
                     verdicts would confirm or refute them by reverse DNS."
                );
            }
        }
        let total = self.requests.allow + self.requests.trap + self.requests.challenge;
        let clients = self.clients();
        let _ = writeln!(out, "\n             allowed            trapped         challenged");
        let _ = writeln!(
            out,
            "requests  {:>10} {:>6}  {:>10} {:>6}  {:>10} {:>6}",
            thousands(self.requests.allow),
            percent(self.requests.allow, total),
            thousands(self.requests.trap),
            percent(self.requests.trap, total),
            thousands(self.requests.challenge),
            percent(self.requests.challenge, total)
        );
        let client_total = clients.allow + clients.trap + clients.challenge;
        let _ = writeln!(
            out,
            "clients   {:>10} {:>6}  {:>10} {:>6}  {:>10} {:>6}",
            thousands(clients.allow),
            percent(clients.allow, client_total),
            thousands(clients.trap),
            percent(clients.trap, client_total),
            thousands(clients.challenge),
            percent(clients.challenge, client_total)
        );
        if self.requests.challenge > 0 {
            let _ = writeln!(
                out,
                "(a replay cannot know whether a challenged client would have answered: challenges are counted \
                 on their own; clients challenged and never trapped are counted as challenged)"
            );
        }
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
    let acts = crate::support::log_field::acts_on_terminal;
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

/// `request_rate` (a one-minute half-life sum) as requests per minute at a steady rate.
fn per_minute(rate: f64) -> f64 {
    rate / (1.0 / std::f64::consts::LN_2)
}

fn percent(part: u64, total: u64) -> String {
    if total == 0 { "-".into() } else { format!("{:.1}%", 100.0 * part as f64 / total as f64) }
}

/// 1234567 as `1,234,567`.
pub(crate) fn thousands(n: u64) -> String {
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

impl Report {
    /// The robots.txt tally, the crawlers that ignored it most first, then by name.
    fn robots_rows(&self) -> Vec<(&str, (u64, u64))> {
        let mut rows: Vec<(&str, (u64, u64))> =
            self.robots.iter().map(|(crawler, counts)| (crawler.as_str(), *counts)).collect();
        rows.sort_by(|a, b| b.1.1.cmp(&a.1.1).then(b.1.0.cmp(&a.1.0)).then(a.0.cmp(b.0)));
        rows
    }
}
