//! Every Prometheus metric quagmire exports, defined and documented in one place, and the text
//! rendering served at `/metrics`.
//!
//! Labels are bounded: verdicts by rule name (the ruleset's own names), by user-agent family (a
//! fixed set), and by ASN only for up to `ASN_LABELS` ASNs, admitted while they are among the most
//! frequent (everything else is `asn="other"`). No label ever carries an address or a path.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use std::fmt::Write as _;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry, Unit};

use crate::support::user_agent::remembered_family;
use crate::vocabulary::{AiKind, FailureKind, Verdict};

/// ASNs that get a label of their own; the rest are counted as `other`.
pub(crate) const ASN_LABELS: usize = 20;
/// ASNs whose recent frequency is tracked to choose them. When the table is full, every count is
/// halved (and ASNs at zero forgotten) once per [`ASN_CANDIDATES`]` / 4` new ASNs turned away:
/// the counts decay, so an ASN that becomes busy late still rises to a label.
const ASN_CANDIDATES: usize = 4096;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerdictLabels {
    verdict: &'static str,
    // The decision's own name, shared: no copy of the rule name per request.
    rule: Arc<str>,
    mode: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AsnLabels {
    asn: AsnLabel,
    verdict: &'static str,
}

/// An ASN label value, written out only when scraped: a verdict builds no string for it.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum AsnLabel {
    /// The client's ASN is unknown.
    None,
    /// An ASN without a label of its own.
    Other,
    Number(u32),
}

impl EncodeLabelValue for AsnLabel {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        match self {
            AsnLabel::None => encoder.write_str("none"),
            AsnLabel::Other => encoder.write_str("other"),
            AsnLabel::Number(asn) => write!(encoder, "{asn}"),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FamilyLabels {
    family: &'static str,
    verdict: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
    verdict: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RuleErrorLabels {
    rule: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CrawlerLabels {
    check: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PriceLabels {
    extra_bits: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PressedLabels {
    network: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RobotsLabels {
    crawler: String,
}

/// Crawler labels of the robots.txt counts, at most: past them, `other`. The names come from the
/// site's robots.txt and the crawler lists, which may be long.
pub(crate) const ROBOTS_LABELS: usize = 64;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NetworkLabels {
    network: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ScopeLabels {
    scope: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorkerLabels {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LaneLabels {
    lane: &'static str,
}

/// Whose trapped clients a count covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// This replica's own records: replicas' counts add up.
    Replica,
    /// The shared store's, the same on every replica: replicas' counts do not add up.
    Shared,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    operation: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReloadLabels {
    what: &'static str,
    result: &'static str,
}

/// Where a trap hit was seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HitSource {
    /// The trap listener served the client a page.
    TrapListener,
    /// The client asked the verdict about a trap URL.
    TrapUrl,
}

/// The metrics and their registry.
pub struct Metrics {
    registry: Registry,
    verdicts: Family<VerdictLabels, Counter>,
    decision_seconds: Histogram,
    verdicts_by_asn: Family<AsnLabels, Counter>,
    verdicts_by_family: Family<FamilyLabels, Counter>,
    verdicts_by_ai_kind: Family<KindLabels, Counter>,
    trap_pages: Counter,
    trap_bytes: Counter,
    dripped_pages: Counter,
    drip_seconds: Counter<f64, AtomicU64>,
    trap_hits: Family<SourceLabels, Counter>,
    clients_over_threshold: Family<ScopeLabels, Gauge>,
    cache_entries: Gauge,
    cache_evictions: Counter,
    rule_errors: Family<RuleErrorLabels, Counter>,
    reloads: Family<ReloadLabels, Counter>,
    crawler_checks: Family<CrawlerLabels, Counter>,
    dns_verifications: Family<CrawlerLabels, Counter>,
    rate_limited: Family<NetworkLabels, Counter>,
    signature_checks: Family<CrawlerLabels, Counter>,
    key_directory_fetches: Family<CrawlerLabels, Counter>,
    store_errors: Family<OperationLabels, Counter>,
    store_up: Gauge,
    store_sync_rounds: Family<OutcomeLabels, Counter>,
    rule_workers: Family<WorkerLabels, Gauge>,
    rule_jobs_queued: Gauge,
    rule_evaluations: Family<LaneLabels, Counter>,
    log_lines_dropped: Counter,
    robots_obeyed: Family<RobotsLabels, Counter>,
    robots_ignored: Family<RobotsLabels, Counter>,
    robots_fetch_failures: Counter,
    crowdsec_pulls: Family<OutcomeLabels, Counter>,
    crowdsec_decisions: Gauge,
    crowdsec_skipped: Counter,
    crowdsec_matched: Counter,
    crowdsec_alerts: Family<OutcomeLabels, Counter>,
    crowdsec_alerts_queued: Gauge,
    challenges_issued: Counter,
    challenge_answers: Family<ResultLabels, Counter>,
    challenge_solve_seconds: Family<ResultLabels, Histogram, fn() -> Histogram>,
    passes: Family<ResultLabels, Counter>,
    passes_burned: Family<ReasonLabels, Counter>,
    passes_rechallenged: Family<ReasonLabels, Counter>,
    passes_minted: Family<PriceLabels, Counter>,
    pass_turn_seconds: Histogram,
    network_pressure: Family<PressedLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    /// The crawler labels the robots.txt counts use so far (read without a lock).
    /// Per crawler label, its (obeyed, ignored) counters, resolved once: a crawler's request
    /// neither builds a label nor takes the families' lock.
    robots_counters: ArcSwap<HashMap<String, (Counter, Counter)>>,
    robots_counters_added: Mutex<()>,
    /// ASNs with a label of their own, read without a lock on every verdict.
    asn_labelled: ArcSwap<HashSet<u32>>,
    /// How often each candidate ASN was seen.
    asn_seen: Mutex<AsnCounts>,
}

impl Metrics {
    /// Creates and registers every metric.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("quagmire");
        let r = &mut registry;
        // A gauge of 1 rather than an OpenMetrics info metric, which the Prometheus text format
        // (and `promtool check metrics`) does not know.
        let build_info = Family::<BuildLabels, Gauge>::default();
        build_info.get_or_create(&BuildLabels { version: env!("CARGO_PKG_VERSION") }).set(1);
        register(r, "build_info", "Build information: the version, always 1", build_info);
        Metrics {
            verdicts: register(
                r,
                "verdicts",
                "Verdicts by outcome, deciding rule and mode",
                Family::default(),
            ),
            // 5 µs to about 40 ms: decisions are microseconds; a slow rule shows in the upper buckets.
            decision_seconds: register_in(
                r,
                "decision_duration",
                "Time to decide a verdict (enrichment, state, rules)",
                Unit::Seconds,
                Histogram::new(exponential_buckets(5e-6, 2.0, 14)),
            ),
            verdicts_by_asn: register(
                r,
                "asn_verdicts",
                "Verdicts by client ASN, for the most frequent ASNs; others as asn=\"other\", unknown as asn=\"none\"",
                Family::default(),
            ),
            verdicts_by_family: register(
                r,
                "user_agent_verdicts",
                "Verdicts by user-agent family",
                Family::default(),
            ),
            verdicts_by_ai_kind: register(
                r,
                "ai_crawler_verdicts",
                "Verdicts for AI crawlers by kind (lists/ai-crawlers.txt's sections: training, ai-search, assistant, agent, scraper)",
                Family::default(),
            ),
            trap_pages: register(r, "trap_pages", "Trap pages served", Counter::default()),
            trap_bytes: register_in(
                r,
                "trap",
                "HTML bytes of trap pages served",
                Unit::Bytes,
                Counter::default(),
            ),
            dripped_pages: register(
                r,
                "trap_dripped_pages",
                "Trap pages sent slowly (drip)",
                Counter::default(),
            ),
            drip_seconds: register_in(
                r,
                "trap_drip",
                "Time scrapers spent receiving dripped trap pages",
                Unit::Seconds,
                Counter::default(),
            ),
            trap_hits: register(
                r,
                "trap_hits",
                "Trap hits recorded, by source (trap page served, or a trap URL asked of the verdict)",
                Family::default(),
            ),
            clients_over_threshold: register(
                r,
                "clients_over_threshold",
                "Clients whose decayed trap score is at or over the trap threshold, counted from this replica's \
                 records (scope=\"replica\") or from the shared store (scope=\"shared\", the same on every replica)",
                Family::default(),
            ),
            cache_entries: register(r, "client_cache_entries", "Clients remembered", Gauge::default()),
            cache_evictions: register(
                r,
                "client_cache_evictions",
                "Client records evicted for capacity or idleness",
                Counter::default(),
            ),
            rule_errors: register(
                r,
                "rule_errors",
                "Rule failures by rule and kind (error, time_limit, memory_limit, unanswered, panic)",
                Family::default(),
            ),
            reloads: register(r, "reloads", "Reloads of rules and databases, by result", Family::default()),
            crawler_checks: register(
                r,
                "crawler_checks",
                "Requests claiming a known crawler, by the check's outcome (ranges, reverse-dns, failed, pending)",
                Family::default(),
            ),
            dns_verifications: register(
                r,
                "dns_verifications",
                "Forward-confirmed reverse DNS verifications started, by answer (verified, refused, unknown), \
                 and claims left unchecked because a budget was spent (over_budget)",
                Family::default(),
            ),
            rate_limited: register(
                r,
                "rate_limited_requests",
                "Requests from clients over their request quota, by network (datacenter: an ASN in datacenter-asns.txt; other)",
                Family::default(),
            ),
            signature_checks: register(
                r,
                "signature_checks",
                "Requests with a Web Bot Auth signature, by the check's outcome (verified, invalid, pending)",
                Family::default(),
            ),
            key_directory_fetches: register(
                r,
                "key_directory_fetches",
                "Web Bot Auth key directory fetches, by result (ok, failed), and signatures left unchecked \
                 because a budget was spent (over_budget)",
                Family::default(),
            ),
            store_errors: register(
                r,
                "store_errors",
                "Failed operations on the shared client store, by operation (update, trapped_index, trapped_read, ping, pass_use, mint, challenged, unanswered, answered, crowd)",
                Family::default(),
            ),
            store_up: register(
                r,
                "store_up",
                "1 while the shared client store answers, 0 while it fails or before it first answered (0 without a store)",
                Gauge::default(),
            ),
            store_sync_rounds: register(
                r,
                "store_sync_rounds",
                "The store syncer's interval rounds, by outcome (sent: what was queued was sent, each failure counted in store_errors; down: the store did not answer, and what was queued waits)",
                Family::default(),
            ),
            rule_workers: register(
                r,
                "rule_workers",
                "Rule worker threads: active (taking jobs; the pool keeps them at its size) and abandoned (stuck in a call, ending when it returns)",
                Family::default(),
            ),
            rule_jobs_queued: register(
                r,
                "rule_jobs_queued",
                "Verdicts waiting for a free rule worker",
                Gauge::default(),
            ),
            rule_evaluations: register(
                r,
                "rule_evaluations",
                "Verdicts whose rules ran: inline (on the thread that served the verdict), escalated (over the inline limits, so run again on a rule worker), worker (sent to a rule worker while the inline lane was shut after an escalation, or for a script too slow to load inline)",
                Family::default(),
            ),
            log_lines_dropped: register(
                r,
                "log_lines_dropped",
                "Log lines dropped because the log sink could not keep up (the writer never blocks a verdict)",
                Counter::default(),
            ),
            robots_obeyed: register(
                r,
                "robots_obeyed",
                "Requests of a crawler for a path the site's robots.txt allows it, by crawler (the robots.txt group, \
                 else the crawler list's token)",
                Family::default(),
            ),
            robots_ignored: register(
                r,
                "robots_ignored",
                "Requests of a crawler for a path the site's robots.txt disallows it, by crawler",
                Family::default(),
            ),
            robots_fetch_failures: register(
                r,
                "robots_fetch_failures",
                "Fetches of a host's robots.txt from the origin that failed (the last copy stays in use)",
                Counter::default(),
            ),
            crowdsec_pulls: register(
                r,
                "crowdsec_pulls",
                "Pulls of the CrowdSec decision stream, by outcome (ok, failed)",
                Family::default(),
            ),
            crowdsec_decisions: register(
                r,
                "crowdsec_decisions",
                "CrowdSec decisions in force (addresses and ranges)",
                Gauge::default(),
            ),
            crowdsec_skipped: register(
                r,
                "crowdsec_decisions_skipped",
                "CrowdSec decisions not kept: a scope other than an address or range, a range wider than /12 or /28, a duration that is not one, or over max-decisions",
                Counter::default(),
            ),
            crowdsec_matched: register(
                r,
                "crowdsec_matched",
                "Verdicts whose client a CrowdSec decision covers",
                Counter::default(),
            ),
            crowdsec_alerts: register(
                r,
                "crowdsec_alerts",
                "Alerts for trapped clients sent to the CrowdSec Local API, and reports dropped (a full queue)",
                Family::default(),
            ),
            crowdsec_alerts_queued: register(
                r,
                "crowdsec_alerts_queued",
                "Reports waiting to be sent to the CrowdSec Local API as alerts",
                Gauge::default(),
            ),
            challenges_issued: register(
                r,
                "challenges_issued",
                "Challenge pages answered to verdicts (enforce mode; shadow mode counts only verdicts)",
                Counter::default(),
            ),
            challenge_answers: register(
                r,
                "challenge_answers",
                "Answers to challenges, by result: work or wait (a pass earned), or why one was refused",
                Family::default(),
            ),
            challenge_solve_seconds: register_in(
                r,
                "challenge_solve",
                "Time from a challenge's issue to its accepted answer, by how the pass was earned",
                Unit::Seconds,
                // 50 ms to about 51 s: a proof of work takes about a second, a wait five.
                Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.05, 2.0, 11))),
            ),
            passes: register(
                r,
                "passes",
                "Pass cookies on verdict requests, by result (valid, invalid: forged, tampered or another secret's; expired)",
                Family::default(),
            ),
            passes_burned: register(
                r,
                "passes_burned",
                "Passes burned, by reason (trap_hits, networks, pages)",
                Family::default(),
            ),
            passes_rechallenged: register(
                r,
                "passes_rechallenged",
                "Page views of a good pass asked to answer again, by reason (pace: a burst of tabs; budget: the day's pages; crowd: over its share of a crowded datacenter address or network)",
                Family::default(),
            ),
            passes_minted: register(
                r,
                "passes_minted",
                "Passes minted, by the extra difficulty bits their network's pressure put on the challenge answered",
                Family::default(),
            ),
            pass_turn_seconds: register_in(
                r,
                "pass_turn",
                "How long passes minted past their datacenter network's burst waited for their turn",
                Unit::Seconds,
                // 20 s (one turn) to about 17 minutes.
                Histogram::new(exponential_buckets(20.0, 2.0, 6)),
            ),
            network_pressure: register(
                r,
                "network_pressure",
                "Passes minted lately (decaying, half-life 10 minutes) by the ten networks (IPv4 /24, IPv6 /48) minting the most, at scrape time",
                Family::default(),
            ),
            robots_counters: ArcSwap::from_pointee(HashMap::new()),
            robots_counters_added: Mutex::new(()),
            asn_labelled: ArcSwap::from_pointee(HashSet::new()),
            asn_seen: Mutex::new(AsnCounts::default()),
            registry,
        }
    }

    /// Counts one verdict.
    pub fn verdict(
        &self,
        verdict: Verdict,
        rule: &Arc<str>,
        shadow: bool,
        elapsed: Duration,
        asn: Option<u32>,
        user_agent: &str,
    ) {
        let verdict = verdict.as_str();
        let mode = if shadow { "shadow" } else { "enforce" };
        self.verdicts.get_or_create(&VerdictLabels { verdict, rule: rule.clone(), mode }).inc();
        self.decision_seconds.observe(elapsed.as_secs_f64());
        let asn = self.asn_label(asn);
        self.verdicts_by_asn.get_or_create(&AsnLabels { asn, verdict }).inc();
        self.verdicts_by_family
            .get_or_create(&FamilyLabels { family: remembered_family(user_agent), verdict })
            .inc();
    }

    /// Counts one verdict for an AI crawler of `kind` (beside [`Metrics::verdict`]).
    pub fn ai_verdict(&self, kind: AiKind, verdict: Verdict) {
        self.verdicts_by_ai_kind
            .get_or_create(&KindLabels { kind: kind.as_str(), verdict: verdict.as_str() })
            .inc();
    }

    /// Counts a challenge page answered to a verdict.
    pub fn challenge_issued(&self) {
        self.challenges_issued.inc();
    }

    /// Counts an answer to a challenge: `result` is how the pass was earned (`work`, `wait`),
    /// with the time since the challenge was issued, or why the answer was refused.
    pub fn challenge_answer(&self, result: &'static str, solved_in: Option<Duration>) {
        self.challenge_answers.get_or_create(&ResultLabels { result }).inc();
        if let Some(solved_in) = solved_in {
            self.challenge_solve_seconds
                .get_or_create(&ResultLabels { result })
                .observe(solved_in.as_secs_f64());
        }
    }

    /// Counts a pass cookie a verdict request carried: `valid`, `invalid` or `expired`.
    pub fn pass(&self, result: &'static str) {
        self.passes.get_or_create(&ResultLabels { result }).inc();
    }

    /// Counts a pass burned, by reason.
    pub fn pass_burned(&self, reason: &'static str) {
        self.passes_burned.get_or_create(&ReasonLabels { reason }).inc();
    }

    /// Counts a good pass's page view asked again, by reason.
    pub fn pass_rechallenged(&self, reason: &'static str) {
        self.passes_rechallenged.get_or_create(&ReasonLabels { reason }).inc();
    }

    /// Counts a pass minted for a challenge with `extra_bits` over the base difficulty, starting
    /// `turn` from now (zero within its network's burst).
    pub fn pass_minted(&self, extra_bits: u8, turn: Duration) {
        const LABELS: [&str; 5] = ["0", "1", "2", "3", "4"];
        let extra_bits = LABELS[usize::from(extra_bits).min(LABELS.len() - 1)];
        self.passes_minted.get_or_create(&PriceLabels { extra_bits }).inc();
        if !turn.is_zero() {
            self.pass_turn_seconds.observe(turn.as_secs_f64());
        }
    }

    /// Sets the networks under the most pressure (network, passes minted lately), replacing the
    /// last scrape's: the label set stays as small as the list.
    pub fn network_pressure(&self, pressed: &[(String, f64)]) {
        self.network_pressure.clear();
        for (network, minted) in pressed {
            self.network_pressure.get_or_create(&PressedLabels { network: network.clone() }).set(*minted);
        }
    }

    /// Counts a trap page of `bytes`.
    pub fn trap_page(&self, bytes: usize) {
        self.trap_pages.inc();
        self.trap_bytes.inc_by(bytes as u64);
    }

    /// Counts a dripped page that took `elapsed` to send.
    pub fn dripped(&self, elapsed: Duration) {
        self.dripped_pages.inc();
        self.drip_seconds.inc_by(elapsed.as_secs_f64());
    }

    /// Counts a trap hit.
    pub fn trap_hit(&self, source: HitSource) {
        let source = match source {
            HitSource::TrapListener => "trap_listener",
            HitSource::TrapUrl => "trap_url",
        };
        self.trap_hits.get_or_create(&SourceLabels { source }).inc();
    }

    /// Counts a rule failure of `kind`.
    pub fn rule_error(&self, rule: &str, kind: FailureKind) {
        self.rule_errors
            .get_or_create(&RuleErrorLabels { rule: rule.to_string(), kind: kind.as_str() })
            .inc();
    }

    /// Counts a reload of `what` (`rules` or `geo`).
    pub fn reload(&self, what: &'static str, ok: bool) {
        self.reloads.get_or_create(&ReloadLabels { what, result: if ok { "ok" } else { "failed" } }).inc();
    }

    /// Counts a request that claimed a known crawler, by the check's outcome.
    pub fn crawler_check(&self, check: &'static str) {
        self.crawler_checks.get_or_create(&CrawlerLabels { check }).inc();
    }

    /// Counts a reverse-DNS verification's answer, or a claim a budget left unchecked.
    pub fn dns_verification(&self, answer: &'static str) {
        self.dns_verifications.get_or_create(&CrawlerLabels { check: answer }).inc();
    }

    /// Counts a request with a Web Bot Auth signature, by the check's outcome.
    pub fn signature_check(&self, check: &'static str) {
        self.signature_checks.get_or_create(&CrawlerLabels { check }).inc();
    }

    /// Counts a key directory fetch's result, or a signature a budget left unchecked.
    pub fn key_directory_fetch(&self, result: &'static str) {
        self.key_directory_fetches.get_or_create(&CrawlerLabels { check: result }).inc();
    }

    /// Counts a request from a client over its request quota.
    pub fn rate_limited(&self, datacenter: bool) {
        let network = if datacenter { "datacenter" } else { "other" };
        self.rate_limited.get_or_create(&NetworkLabels { network }).inc();
    }

    /// Counts a failed operation on the shared store.
    pub fn store_error(&self, operation: &'static str) {
        self.store_errors.get_or_create(&OperationLabels { operation }).inc();
    }

    /// Sets whether the shared store answers.
    pub fn store_up(&self, up: bool) {
        self.store_up.set(i64::from(up));
    }

    /// Counts one of the store syncer's interval rounds: `sent` when the store answered.
    pub fn store_sync_round(&self, sent: bool) {
        let outcome = if sent { "sent" } else { "down" };
        self.store_sync_rounds.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    /// Counts an evicted client record.
    pub fn evicted(&self) {
        self.cache_evictions.inc();
    }

    /// Sets the rule pool's gauges, read at scrape time.
    pub fn rule_workers(&self, active: usize, abandoned: usize, queued: usize) {
        let gauge = |value: usize| i64::try_from(value).unwrap_or(i64::MAX);
        self.rule_workers.get_or_create(&WorkerLabels { state: "active" }).set(gauge(active));
        self.rule_workers.get_or_create(&WorkerLabels { state: "abandoned" }).set(gauge(abandoned));
        self.rule_jobs_queued.set(gauge(queued));
    }

    /// The inline lane's counts so far (`Rules::inline_stats`), brought into the counters.
    pub fn rule_lanes(&self, answered: u64, escalated: u64, passed: u64) {
        for (lane, total) in [("inline", answered), ("escalated", escalated), ("worker", passed)] {
            let counter = self.rule_evaluations.get_or_create(&LaneLabels { lane });
            counter.inc_by(total.saturating_sub(counter.get()));
        }
    }

    /// A crawler's request for a path the site's robots.txt allows it (`ignored`: disallows).
    pub fn robots(&self, crawler: &str, ignored: bool) {
        let count = |(obeyed, ignored_counter): &(Counter, Counter)| {
            if ignored {
                ignored_counter.inc()
            } else {
                obeyed.inc()
            };
        };
        let counters = self.robots_counters.load();
        let label =
            if counters.contains_key(crawler) || counters.len() < ROBOTS_LABELS { crawler } else { "other" };
        if let Some(pair) = counters.get(label) {
            count(pair);
            return;
        }
        drop(counters);
        let _adding = self.robots_counters_added.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut counters = (**self.robots_counters.load()).clone();
        let labels = RobotsLabels { crawler: label.to_string() };
        let pair = counters.entry(label.to_string()).or_insert_with(|| {
            (
                self.robots_obeyed.get_or_create(&labels).clone(),
                self.robots_ignored.get_or_create(&labels).clone(),
            )
        });
        count(pair);
        self.robots_counters.store(Arc::new(counters));
    }

    /// A pull of the CrowdSec decision stream, and whether it succeeded.
    pub fn crowdsec_pull(&self, ok: bool) {
        self.crowdsec_pulls.get_or_create(&OutcomeLabels { outcome: if ok { "ok" } else { "failed" } }).inc();
    }

    /// The CrowdSec decisions now in force.
    pub fn crowdsec_decisions(&self, count: usize) {
        self.crowdsec_decisions.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// CrowdSec decisions not kept.
    pub fn crowdsec_decisions_skipped(&self, count: u64) {
        self.crowdsec_skipped.inc_by(count);
    }

    /// Alerts sent to CrowdSec (`sent`), or reports dropped (`dropped`).
    pub fn crowdsec_alerts(&self, outcome: &'static str, count: u64) {
        self.crowdsec_alerts.get_or_create(&OutcomeLabels { outcome }).inc_by(count);
    }

    /// Reports waiting for CrowdSec.
    pub fn crowdsec_alerts_queued(&self, count: usize) {
        self.crowdsec_alerts_queued.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// A verdict whose client a CrowdSec decision covers.
    pub fn crowdsec_matched(&self) {
        self.crowdsec_matched.inc();
    }

    /// A fetch of a robots.txt from the origin failed.
    pub fn robots_fetch_failed(&self) {
        self.robots_fetch_failures.inc();
    }

    /// The Prometheus text exposition (format 0.0.4), after setting the gauges computed at
    /// scrape time.
    pub fn render(&self, cache_entries: u64, clients_over_threshold: u64, scope: Scope) -> String {
        self.cache_entries.set(cache_entries as i64);
        let scope = match scope {
            Scope::Replica => "replica",
            Scope::Shared => "shared",
        };
        self.clients_over_threshold.get_or_create(&ScopeLabels { scope }).set(clients_over_threshold as i64);
        let dropped = crate::observe::log_sink::dropped();
        self.log_lines_dropped.inc_by(dropped.saturating_sub(self.log_lines_dropped.get()));
        let mut open_metrics = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut open_metrics, &self.registry);
        to_prometheus_text(&open_metrics)
    }

    /// The `asn` label for `asn`: its number while it is one of the most frequent, else `other`.
    fn asn_label(&self, asn: Option<u32>) -> AsnLabel {
        let Some(asn) = asn else {
            return AsnLabel::None;
        };
        if self.asn_labelled.load().contains(&asn) {
            return AsnLabel::Number(asn);
        }
        // Counting candidates needs the lock; a request never waits for it: when it is busy, this
        // request counts as `other` and is not tallied, which only makes admission approximate.
        let Ok(mut seen) = self.asn_seen.try_lock() else {
            return AsnLabel::Other;
        };
        let count = match seen.counts.get_mut(&asn) {
            Some(count) => {
                *count += 1;
                *count
            }
            None => {
                if seen.counts.len() >= ASN_CANDIDATES {
                    seen.turned_away += 1;
                    if seen.turned_away < ASN_CANDIDATES / 4 {
                        return AsnLabel::Other;
                    }
                    seen.turned_away = 0;
                    seen.counts.retain(|_, count| {
                        *count /= 2;
                        *count > 0
                    });
                    if seen.counts.len() >= ASN_CANDIDATES {
                        return AsnLabel::Other;
                    }
                }
                seen.counts.insert(asn, 1);
                1
            }
        };
        // Admit while there is room (up to twice ASN_LABELS, so that labels do not churn), or in
        // place of the least frequent admitted one once this ASN is clearly busier (twice its
        // recent count): its series is removed, and the labels stay bounded.
        let labelled = self.asn_labelled.load();
        let weakest =
            labelled.iter().map(|known| (seen.counts.get(known).copied().unwrap_or(0), *known)).min();
        let outnumbers = |factor: u64| weakest.is_some_and(|(weakest, _)| count > weakest.max(1) * factor);
        let admit = labelled.len() < ASN_LABELS || (labelled.len() < 2 * ASN_LABELS && outnumbers(1));
        let replace = !admit && outnumbers(2);
        if !admit && !replace {
            return AsnLabel::Other;
        }
        let mut grown = HashSet::clone(&labelled);
        if let (true, Some((_, evicted))) = (replace, weakest) {
            grown.remove(&evicted);
            for verdict in [Verdict::Allow, Verdict::Trap, Verdict::Challenge] {
                self.verdicts_by_asn
                    .remove(&AsnLabels { asn: AsnLabel::Number(evicted), verdict: verdict.as_str() });
            }
        }
        grown.insert(asn);
        self.asn_labelled.store(Arc::new(grown));
        AsnLabel::Number(asn)
    }
}

/// Recent verdicts per candidate ASN (see [`ASN_CANDIDATES`]).
#[derive(Default)]
struct AsnCounts {
    counts: HashMap<u32, u64>,
    /// New ASNs turned away since the counts were last halved.
    turned_away: usize,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// OpenMetrics text → Prometheus text format: a counter's HELP and TYPE name its `_total` samples,
/// and the `# UNIT` and `# EOF` lines go. Prometheus scrapes either, but `promtool check metrics`
/// and many other consumers read only the Prometheus format.
fn to_prometheus_text(open_metrics: &str) -> String {
    let counters: Vec<&str> = open_metrics
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(open_metrics.len() + 16 * counters.len());
    for line in open_metrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let header = line
            .strip_prefix("# HELP ")
            .map(|rest| ("# HELP ", rest))
            .or_else(|| line.strip_prefix("# TYPE ").map(|rest| ("# TYPE ", rest)));
        match header {
            Some((kind, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                out.push_str(kind);
                out.push_str(name);
                if counters.contains(&name) {
                    out.push_str("_total");
                }
                out.push(' ');
                out.push_str(tail);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// Registers `metric` as `name` and returns it (metrics are handles: the registry keeps a clone).
fn register<M: Metric + Clone>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M {
    registry.register(name, help, metric.clone());
    metric
}

/// [`register`] with a unit, which Prometheus appends to the name.
fn register_in<M: Metric + Clone>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    unit: Unit,
    metric: M,
) -> M {
    registry.register_with_unit(name, help, unit, metric.clone());
    metric
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asn_labels_stay_bounded() {
        let metrics = Metrics::new();
        for round in 0..50u32 {
            for asn in 0..1000u32 {
                if asn % 50 <= round % 50 {
                    metrics.verdict(
                        Verdict::Allow,
                        &Arc::from(""),
                        false,
                        Duration::from_micros(5),
                        Some(asn),
                        "curl/8",
                    );
                }
            }
        }
        let text = metrics.render(0, 0, Scope::Replica);
        let labels = text.lines().filter(|line| line.starts_with("quagmire_asn_verdicts_total{")).count();
        assert!(labels <= 2 * ASN_LABELS + 1, "{labels} ASN series");
        assert!(text.contains("asn=\"other\""));
    }

    #[test]
    fn a_late_heavy_hitter_gets_a_label_after_thousands_of_asns_were_seen() {
        let metrics = Metrics::new();
        let verdict = |asn: u32| {
            metrics.verdict(
                Verdict::Trap,
                &Arc::from(""),
                false,
                Duration::from_micros(5),
                Some(asn),
                "curl/8",
            )
        };
        // Forty busy ASNs take every label, and ten thousand others fill the candidates.
        for _ in 0..50 {
            for asn in 1..=40 {
                verdict(asn);
            }
        }
        for asn in 100_000..110_000 {
            verdict(asn);
        }
        // Then a scraper's ASN sends most of the traffic.
        for _ in 0..5_000 {
            verdict(64_500);
        }
        let text = metrics.render(0, 0, Scope::Replica);
        assert!(text.contains("quagmire_asn_verdicts_total{asn=\"64500\",verdict=\"trap\"}"), "{text}");
        let labels = text.lines().filter(|line| line.starts_with("quagmire_asn_verdicts_total{")).count();
        assert!(labels <= 2 * ASN_LABELS + 1, "{labels} ASN series");
    }

    #[test]
    fn rendering_names_every_metric_with_its_unit_and_suffix_and_a_sample_of_each_is_checked() {
        let metrics = Metrics::new();
        metrics.verdict(
            Verdict::Trap,
            &Arc::from("ai-crawlers"),
            false,
            Duration::from_micros(8),
            Some(16509),
            "GPTBot/1.2",
        );
        metrics.ai_verdict(AiKind::Training, Verdict::Trap);
        metrics.trap_page(8000);
        metrics.dripped(Duration::from_millis(1500));
        metrics.trap_hit(HitSource::TrapUrl);
        metrics.rule_error("spin", FailureKind::TimeLimit);
        metrics.reload("rules", false);
        metrics.evicted();
        metrics.rule_workers(2, 1, 7);
        metrics.rule_lanes(90, 2, 8);
        metrics.rule_lanes(95, 2, 9);
        metrics.crawler_check("ranges");
        metrics.dns_verification("verified");
        metrics.signature_check("verified");
        metrics.key_directory_fetch("ok");
        metrics.rate_limited(true);
        metrics.store_error("update");
        metrics.store_up(true);
        metrics.store_sync_round(true);
        metrics.robots("GPTBot", false);
        metrics.robots("CCBot", true);
        metrics.robots_fetch_failed();
        metrics.crowdsec_pull(true);
        metrics.crowdsec_decisions(2);
        metrics.crowdsec_decisions_skipped(1);
        metrics.crowdsec_matched();
        metrics.crowdsec_alerts("sent", 1);
        metrics.crowdsec_alerts_queued(4);
        metrics.challenge_issued();
        metrics.challenge_answer("work", Some(Duration::from_millis(1200)));
        metrics.challenge_answer("replayed", None);
        metrics.pass("invalid");
        metrics.pass_burned("networks");
        metrics.pass_rechallenged("crowd");
        metrics.pass_minted(2, Duration::from_secs(45));
        metrics.network_pressure(&[("203.0.113.0/24".into(), 120.5)]);
        let text = metrics.render(12, 3, Scope::Replica);
        let expected = [
            "quagmire_crawler_checks_total{check=\"ranges\"} 1",
            "quagmire_dns_verifications_total{check=\"verified\"} 1",
            "quagmire_signature_checks_total{check=\"verified\"} 1",
            "quagmire_key_directory_fetches_total{check=\"ok\"} 1",
            "quagmire_rate_limited_requests_total{network=\"datacenter\"} 1",
            "quagmire_store_errors_total{operation=\"update\"} 1",
            "quagmire_store_up 1",
            "quagmire_store_sync_rounds_total{outcome=\"sent\"} 1",
            "quagmire_verdicts_total{verdict=\"trap\",rule=\"ai-crawlers\",mode=\"enforce\"} 1",
            "quagmire_decision_duration_seconds_bucket",
            "quagmire_asn_verdicts_total{asn=\"16509\",verdict=\"trap\"} 1",
            "quagmire_user_agent_verdicts_total{family=\"bot\",verdict=\"trap\"} 1",
            "quagmire_ai_crawler_verdicts_total{kind=\"training\",verdict=\"trap\"} 1",
            "quagmire_trap_pages_total 1",
            "quagmire_trap_bytes_total 8000",
            "quagmire_trap_dripped_pages_total 1",
            "quagmire_trap_drip_seconds_total 1.5",
            "quagmire_trap_hits_total{source=\"trap_url\"} 1",
            "quagmire_clients_over_threshold{scope=\"replica\"} 3",
            "quagmire_client_cache_entries 12",
            "quagmire_client_cache_evictions_total 1",
            "quagmire_rule_errors_total{rule=\"spin\",kind=\"time_limit\"} 1",
            "quagmire_reloads_total{what=\"rules\",result=\"failed\"} 1",
            "quagmire_rule_workers{state=\"active\"} 2",
            "quagmire_rule_workers{state=\"abandoned\"} 1",
            "quagmire_rule_evaluations_total{lane=\"inline\"} 95",
            "quagmire_rule_evaluations_total{lane=\"escalated\"} 2",
            "quagmire_rule_evaluations_total{lane=\"worker\"} 9",
            "quagmire_rule_jobs_queued 7",
            "quagmire_log_lines_dropped_total 0",
            "quagmire_robots_obeyed_total{crawler=\"GPTBot\"} 1",
            "quagmire_robots_ignored_total{crawler=\"CCBot\"} 1",
            "quagmire_robots_fetch_failures_total 1",
            "quagmire_crowdsec_pulls_total{outcome=\"ok\"} 1",
            "quagmire_crowdsec_decisions 2",
            "quagmire_crowdsec_decisions_skipped_total 1",
            "quagmire_crowdsec_matched_total 1",
            "quagmire_crowdsec_alerts_total{outcome=\"sent\"} 1",
            "quagmire_crowdsec_alerts_queued 4",
            "quagmire_challenges_issued_total 1",
            "quagmire_challenge_answers_total{result=\"work\"} 1",
            "quagmire_challenge_answers_total{result=\"replayed\"} 1",
            "quagmire_challenge_solve_seconds_bucket{le=\"0.8\",result=\"work\"} 0",
            "quagmire_challenge_solve_seconds_count{result=\"work\"} 1",
            "quagmire_passes_total{result=\"invalid\"} 1",
            "quagmire_passes_burned_total{reason=\"networks\"} 1",
            "quagmire_passes_rechallenged_total{reason=\"crowd\"} 1",
            "quagmire_passes_minted_total{extra_bits=\"2\"} 1",
            "quagmire_pass_turn_seconds_count 1",
            "quagmire_network_pressure{network=\"203.0.113.0/24\"} 120.5",
            "quagmire_build_info{version=",
        ];
        for expected in expected {
            assert!(text.contains(expected), "missing {expected} in\n{text}");
        }
        // Every metric the registry renders has a sample above: none goes unchecked.
        let families: Vec<&str> =
            text.lines().filter_map(|line| line.strip_prefix("# TYPE ")?.split(' ').next()).collect();
        for family in &families {
            assert!(
                expected.iter().any(|sample| sample.starts_with(family)),
                "no sample of {family} is checked"
            );
        }
        assert_eq!(families.len(), 46, "{families:?}");
    }
}
