//! CrowdSec, both ways. As a bouncer: the decisions of a CrowdSec Local API (bans, captchas, on
//! addresses and ranges), pulled from its decision stream in the background and kept in memory,
//! so that a verdict looks its client up with one longest-prefix match and never waits on the
//! API. As a watcher (with `machine-id`): a client that crosses the trap threshold or asks for a
//! trap URL is reported as an alert (`POST /v1/alerts`, scenarios under `quagmire/`), once per
//! client an hour, batched, from a bounded queue that never blocks a verdict.
//!
//! The stream (`GET /v1/decisions/stream`, `startup=true` the first time, then the changes since)
//! is pulled every `pull-seconds`. The puller keeps every decision by id (bounded by
//! `max-decisions`), drops the expired, and swaps in a freshly built map after each round, pulled
//! or not: with the API down, the decisions in force keep working until they expire.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use ipnet::IpNet;
use serde::Deserialize;

pub(crate) use crate::facts::claims::CrowdSecDecision;
use crate::observe::metrics::Metrics;
use crate::support::outbound::{Fetcher, Options};
use crate::support::prefix_map::PrefixMap;

/// Where the bouncer key comes from; it is never written to a log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeySource {
    /// An environment variable's value.
    Env(String),
    /// A file's first line.
    File(PathBuf),
}

impl KeySource {
    /// The secret: the variable's value, or the file's first line (at most 4 KiB read); what is
    /// missing, in words, otherwise.
    fn read(&self) -> Result<String, String> {
        match self {
            KeySource::Env(name) => {
                std::env::var(name).map_err(|_| format!("the environment variable {name} is not set"))
            }
            KeySource::File(path) => crate::support::bounded_file::read(path, 4096)
                .map(|bytes| String::from_utf8_lossy(&bytes).lines().next().unwrap_or("").trim().to_string())
                .map_err(|error| format!("cannot read {}: {error}", path.display())),
        }
    }
}

/// The CrowdSec Local API quagmire pulls decisions from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrowdSecConfig {
    /// The Local API's URL (`http://127.0.0.1:8080`); `None`: no CrowdSec.
    pub url: Option<String>,
    /// The bouncer key (`cscli bouncers add quagmire`).
    pub bouncer_key: Option<KeySource>,
    /// How often the decision stream is pulled.
    pub pull: Duration,
    /// Longest one pull may take.
    pub timeout: Duration,
    /// Decisions kept at most; past it new ones are dropped (and counted).
    pub max_decisions: usize,
    /// The watcher's machine id (`cscli machines add ID`); `None`: no alerts are sent.
    pub machine_id: Option<String>,
    /// The watcher's password.
    pub password: Option<KeySource>,
    /// The decision an alert asks for (`ban`, `captcha`); `None`: alerts only report.
    pub alert_decision: Option<String>,
    /// How long that decision lasts.
    pub alert_duration: Duration,
}

impl Default for CrowdSecConfig {
    fn default() -> Self {
        CrowdSecConfig {
            url: None,
            bouncer_key: None,
            pull: Duration::from_secs(10),
            timeout: Duration::from_secs(10),
            max_decisions: 500_000,
            machine_id: None,
            password: None,
            alert_decision: None,
            alert_duration: Duration::from_secs(4 * 3600),
        }
    }
}

/// CrowdSec settings that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CrowdSecError {
    /// No bouncer key configured.
    #[error("crowdsec {{ url }} needs bouncer-key-env or bouncer-key-file")]
    NoKey,
    /// The key's variable is not set, or its file cannot be read.
    #[error("the CrowdSec bouncer key: {0}")]
    Key(String),
    /// The HTTP client cannot be made.
    #[error("the CrowdSec client: {0}")]
    Client(String),
    /// A machine id without a password, or the password's variable or file missing.
    #[error("the CrowdSec watcher password: {0}")]
    Password(String),
}

/// The bouncer: the decisions in force, and the puller's own bookkeeping.
pub(crate) struct CrowdSec {
    config: CrowdSecConfig,
    /// Read by every verdict, swapped whole by the puller.
    decisions: ArcSwap<PrefixMap<Arc<CrowdSecDecision>>>,
    client: Option<(Fetcher, String)>,
    puller: Mutex<Puller>,
    /// With `machine-id`: the reports' queue and the clients reported in the last hour.
    watcher: Option<Watcher>,
    metrics: Arc<Metrics>,
}

/// The watcher's side: a bounded queue from verdicts to the sender, and who was reported.
struct Watcher {
    password: String,
    sender: tokio::sync::mpsc::Sender<Report>,
    /// Held by the sender task for its life (a restarted task takes it over).
    receiver: tokio::sync::Mutex<tokio::sync::mpsc::Receiver<Report>>,
    reported: moka::sync::Cache<crate::client::ClientKey, ()>,
}

/// What one alert says of a client.
pub(crate) struct Report {
    /// The client: an address, or an IPv6 /64.
    network: IpNet,
    scenario: &'static str,
    rule: Arc<str>,
    trap_hits: u64,
    user_agent: String,
    asn: Option<u32>,
    at: u64,
}

/// Reports waiting for the Local API at most; past it the oldest are dropped and counted.
const QUEUED_REPORTS: usize = 1024;
/// Alerts sent in one request at most.
const ALERTS_PER_POST: usize = 100;
/// How long a client reported once is not reported again.
const REPORT_EVERY: Duration = Duration::from_secs(3600);

/// Every decision by id, with when it expires.
#[derive(Default)]
struct Puller {
    known: HashMap<u64, Known>,
    /// The next pull asks for every decision (the first, or after the API forgot us).
    startup: bool,
    /// The last pull failed: logged once until one succeeds.
    failing: bool,
}

struct Known {
    network: IpNet,
    decision: Arc<CrowdSecDecision>,
    expires: Instant,
}

/// The stream's answer.
#[derive(Deserialize)]
struct Stream {
    #[serde(default, rename = "new")]
    added: Option<Vec<WireDecision>>,
    #[serde(default)]
    deleted: Option<Vec<WireDecision>>,
}

#[derive(Deserialize)]
struct WireDecision {
    id: u64,
    #[serde(default)]
    duration: String,
    #[serde(default)]
    origin: String,
    #[serde(default)]
    scenario: String,
    #[serde(default)]
    scope: String,
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    value: String,
}

impl CrowdSec {
    /// The bouncer for `config`, its key read now; without a URL, one that knows no decision.
    pub(crate) fn new(config: CrowdSecConfig, metrics: Arc<Metrics>) -> Result<CrowdSec, CrowdSecError> {
        let client = match &config.url {
            None => None,
            Some(_) => {
                let key = config
                    .bouncer_key
                    .as_ref()
                    .ok_or(CrowdSecError::NoKey)?
                    .read()
                    .map_err(CrowdSecError::Key)?;
                let fetcher = Fetcher::new(Options {
                    timeout: config.timeout,
                    max_bytes: 256 << 20,
                    redirects: 0,
                    // The operator's own Local API, on the local network as often as not.
                    public_only: false,
                    user_agent: concat!("quagmire/", env!("CARGO_PKG_VERSION"), " (CrowdSec bouncer)"),
                })
                .map_err(CrowdSecError::Client)?;
                Some((fetcher, key))
            }
        };
        let watcher = match (&config.machine_id, &config.password, &client) {
            (None, _, _) => None,
            (Some(_), None, _) => {
                return Err(CrowdSecError::Password("machine-id needs password-env or password-file".into()));
            }
            (Some(_), _, None) => return Err(CrowdSecError::Password("machine-id needs url".into())),
            (Some(_), Some(source), Some(_)) => {
                let password = source.read().map_err(CrowdSecError::Password)?;
                let (sender, receiver) = tokio::sync::mpsc::channel(QUEUED_REPORTS);
                Some(Watcher {
                    password,
                    sender,
                    receiver: tokio::sync::Mutex::new(receiver),
                    reported: moka::sync::Cache::builder()
                        .max_capacity(100_000)
                        .time_to_live(REPORT_EVERY)
                        .build(),
                })
            }
        };
        Ok(CrowdSec {
            config,
            decisions: ArcSwap::from_pointee(PrefixMap::default()),
            client,
            puller: Mutex::new(Puller { startup: true, ..Puller::default() }),
            watcher,
            metrics,
        })
    }

    /// The decision in force for `address` (the longest network holding it), if any.
    pub(crate) fn decision(&self, address: IpAddr) -> Option<Arc<CrowdSecDecision>> {
        let decisions = self.decisions.load();
        if decisions.len() == 0 {
            return None;
        }
        let decision = decisions.get(address).cloned();
        if decision.is_some() {
            self.metrics.crowdsec_matched();
        }
        decision
    }

    /// Reports `facts`' client as an alert when it crossed the trap threshold or asked for a trap
    /// URL (the trap verdict `rule` gave), unless it was reported within the hour. Never waits: a
    /// full queue drops the report and counts it.
    pub(crate) fn report(&self, facts: &crate::facts::Facts, rule: &Arc<str>, threshold: f64) {
        let Some(watcher) = &self.watcher else { return };
        let scenario = if facts.is_trap_url {
            "quagmire/trap-url"
        } else if facts.history.trap_score >= threshold {
            "quagmire/trap-walker"
        } else {
            return;
        };
        let Some(network) = facts.key.network() else { return };
        if watcher.reported.contains_key(&facts.key) {
            return;
        }
        watcher.reported.insert(facts.key, ());
        let report = Report {
            network,
            scenario,
            rule: rule.clone(),
            trap_hits: facts.history.trap_hits,
            user_agent: clean(facts.user_agent()),
            asn: facts.geo.asn,
            at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_secs()),
        };
        if watcher.sender.try_send(report).is_err() {
            self.metrics.crowdsec_alerts("dropped", 1);
        }
    }

    /// Whether alerts are sent.
    pub(crate) fn watching(&self) -> bool {
        self.watcher.is_some()
    }

    /// How often the stream is pulled; `None` without CrowdSec.
    pub(crate) fn interval(&self) -> Option<Duration> {
        self.client.as_ref().map(|_| self.config.pull)
    }

    /// One round: pulls the stream (the changes since the last pull, or everything the first
    /// time), drops what expired, and swaps the decisions in force. A failed pull is logged when
    /// it starts failing and when it recovers, and counted; the decisions stay.
    pub(crate) async fn pull(&self) {
        let Some((fetcher, key)) = &self.client else { return };
        let startup = self.puller.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).startup;
        let base = self.config.url.as_deref().unwrap_or_default().trim_end_matches('/');
        let url = format!("{base}/v1/decisions/stream?startup={startup}");
        let answer = fetcher.fetch_with_headers(&url, Some("application/json"), &[("x-api-key", key)]).await;
        let stream = answer.and_then(|fetched| {
            serde_json::from_slice::<Stream>(&fetched.body)
                .map_err(|error| format!("not a decision stream: {error}"))
        });
        let mut puller = self.puller.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = Instant::now();
        match stream {
            Ok(stream) => {
                if puller.failing {
                    tracing::info!(url = %base, "the CrowdSec Local API answers again");
                }
                puller.failing = false;
                puller.startup = false;
                self.metrics.crowdsec_pull(true);
                for gone in stream.deleted.unwrap_or_default() {
                    puller.known.remove(&gone.id);
                }
                let mut refused: Option<(String, usize)> = None;
                for wire in stream.added.unwrap_or_default() {
                    let Some(network) = network(&wire.scope, &wire.value) else {
                        // Countries, AS numbers and other scopes: not for a per-address lookup.
                        self.metrics.crowdsec_decisions_skipped(1);
                        continue;
                    };
                    // One bad decision is skipped and counted; the rest of the stream applies.
                    let expires = match decision_expiry(now, &wire.duration, network) {
                        Ok(expires) => expires,
                        Err(why) => {
                            self.metrics.crowdsec_decisions_skipped(1);
                            let entry = refused
                                .get_or_insert_with(|| (format!("{} {}: {why}", wire.scope, wire.value), 0));
                            entry.1 += 1;
                            continue;
                        }
                    };
                    if puller.known.len() >= self.config.max_decisions && !puller.known.contains_key(&wire.id)
                    {
                        self.metrics.crowdsec_decisions_skipped(1);
                        continue;
                    }
                    let decision = Arc::new(CrowdSecDecision {
                        kind: Arc::from(clean(&wire.kind)),
                        scenario: Arc::from(clean(&wire.scenario)),
                        origin: Arc::from(clean(&wire.origin)),
                    });
                    puller.known.insert(wire.id, Known { network, decision, expires });
                }
                if let Some((first, count)) = refused {
                    tracing::warn!(url = %base, count, first = %first, "CrowdSec decisions skipped");
                }
            }
            Err(error) => {
                self.metrics.crowdsec_pull(false);
                if !puller.failing {
                    tracing::warn!(url = %base, %error, "cannot pull CrowdSec decisions; those in force stay until they expire");
                }
                puller.failing = true;
            }
        }
        puller.known.retain(|_, known| known.expires > now);
        let mut decisions = PrefixMap::default();
        // A ban outranks any other decision on the same network.
        for known in puller.known.values() {
            let replaced = decisions.insert(known.network, known.decision.clone());
            if let Some(replaced) = replaced
                && &*replaced.kind == "ban"
            {
                decisions.insert(known.network, replaced);
            }
        }
        self.metrics.crowdsec_decisions(decisions.len());
        self.decisions.store(Arc::new(decisions));
    }
}

/// Pulls every interval until the task is dropped.
pub(crate) async fn run(crowdsec: Arc<CrowdSec>) {
    let Some(every) = crowdsec.interval() else { return };
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        crowdsec.pull().await;
    }
}

/// Sends the queued reports as alerts until the task is dropped: every second, up to
/// [`ALERTS_PER_POST`] at a time, logging in (again) as needed. While the Local API fails, reports
/// wait, at most [`QUEUED_REPORTS`]; past that the oldest are dropped and counted.
pub(crate) async fn send_alerts(crowdsec: Arc<CrowdSec>) {
    let (Some(watcher), Some((fetcher, _))) = (&crowdsec.watcher, &crowdsec.client) else { return };
    let mut receiver = watcher.receiver.lock().await;
    let base = crowdsec.config.url.as_deref().unwrap_or_default().trim_end_matches('/').to_string();
    let machine = crowdsec.config.machine_id.clone().unwrap_or_default();
    let mut waiting: std::collections::VecDeque<Report> = std::collections::VecDeque::new();
    let mut token: Option<String> = None;
    let mut failing = false;
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        while let Ok(report) = receiver.try_recv() {
            if waiting.len() >= QUEUED_REPORTS {
                waiting.pop_front();
                crowdsec.metrics.crowdsec_alerts("dropped", 1);
            }
            waiting.push_back(report);
        }
        crowdsec.metrics.crowdsec_alerts_queued(waiting.len());
        if waiting.is_empty() {
            continue;
        }
        if token.is_none() {
            let login = serde_json::json!({ "machine_id": machine, "password": watcher.password, "scenarios": ["quagmire/trap-walker", "quagmire/trap-url"] });
            let answer = fetcher
                .post_json(&format!("{base}/v1/watchers/login"), &[], login.to_string().into_bytes())
                .await;
            token = match answer {
                Ok((status, body)) if status.is_success() => {
                    serde_json::from_slice::<serde_json::Value>(&body)
                        .ok()
                        .and_then(|value| value["token"].as_str().map(str::to_string))
                }
                Ok((status, _)) => {
                    if !failing {
                        tracing::warn!(url = %base, %status, "the CrowdSec Local API refused the watcher's login; alerts wait");
                    }
                    failing = true;
                    None
                }
                Err(error) => {
                    if !failing {
                        tracing::warn!(url = %base, %error, "cannot reach the CrowdSec Local API; alerts wait");
                    }
                    failing = true;
                    None
                }
            };
            if token.is_none() {
                continue;
            }
        }
        let batch: Vec<Report> = waiting.drain(..waiting.len().min(ALERTS_PER_POST)).collect();
        let alerts: Vec<serde_json::Value> =
            batch.iter().map(|report| alert(report, &crowdsec.config)).collect();
        let bearer = format!("Bearer {}", token.as_deref().unwrap_or_default());
        let answer = fetcher
            .post_json(
                &format!("{base}/v1/alerts"),
                &[("authorization", &bearer)],
                serde_json::to_vec(&alerts).unwrap_or_default(),
            )
            .await;
        match answer {
            Ok((status, _)) if status.is_success() => {
                if failing {
                    tracing::info!(url = %base, "the CrowdSec Local API takes alerts again");
                }
                failing = false;
                crowdsec.metrics.crowdsec_alerts("sent", batch.len() as u64);
            }
            other => {
                if let Ok((status, _)) = &other
                    && status.as_u16() == 401
                {
                    // The token expired: log in again on the next round.
                    token = None;
                } else if !failing {
                    tracing::warn!(url = %base, answer = ?other.map(|(status, _)| status), "the CrowdSec Local API did not take the alerts; they wait");
                    failing = true;
                }
                // Back to the front of the queue, within its bound.
                for report in batch.into_iter().rev() {
                    if waiting.len() >= QUEUED_REPORTS {
                        crowdsec.metrics.crowdsec_alerts("dropped", 1);
                        continue;
                    }
                    waiting.push_front(report);
                }
            }
        }
    }
}

/// One alert, in the Local API's shape.
fn alert(report: &Report, config: &CrowdSecConfig) -> serde_json::Value {
    let at = crate::support::numbers::rfc3339(report.at);
    let (scope, value) = match report.network {
        network if network.prefix_len() == network.max_prefix_len() => ("Ip", network.addr().to_string()),
        network => ("Range", network.to_string()),
    };
    let mut source = serde_json::json!({ "scope": scope, "value": value });
    if scope == "Ip" {
        source["ip"] = serde_json::json!(value);
    } else {
        source["range"] = serde_json::json!(value);
    }
    let meta = [
        ("rule", report.rule.to_string()),
        ("trap_hits", report.trap_hits.to_string()),
        ("user_agent", report.user_agent.clone()),
        ("asn", report.asn.map_or_else(String::new, |asn| asn.to_string())),
    ];
    let decisions: Vec<serde_json::Value> = config
        .alert_decision
        .as_ref()
        .map(|kind| {
            serde_json::json!({
                "duration": format!("{}s", config.alert_duration.as_secs()),
                // What a watcher's decisions carry: `cscli decisions list` shows only these (and
                // cscli's own) unless asked for all; the scenario says they are quagmire's.
                "origin": "crowdsec",
                "scenario": report.scenario,
                "scope": scope,
                "type": kind,
                "value": value,
            })
        })
        .into_iter()
        .collect();
    serde_json::json!({
        "scenario": report.scenario,
        "scenario_hash": "",
        "scenario_version": env!("CARGO_PKG_VERSION"),
        "message": format!("{value} {} (rule {}, {} trap hits)", if report.scenario == "quagmire/trap-url" { "asked for a trap URL" } else { "walked the trap" }, report.rule, report.trap_hits),
        "events_count": report.trap_hits.max(1),
        "start_at": at,
        "stop_at": at,
        "capacity": 0,
        "leakspeed": "0",
        "simulated": false,
        "events": [{
            "timestamp": at,
            "meta": meta.iter().filter(|(_, value)| !value.is_empty()).map(|(key, value)| serde_json::json!({ "key": key, "value": value })).collect::<Vec<_>>(),
        }],
        "source": source,
        "decisions": decisions,
    })
}

/// The network a decision covers: `Ip` (an address) or `Range` (a CIDR); other scopes none.
fn network(scope: &str, value: &str) -> Option<IpNet> {
    if scope.eq_ignore_ascii_case("ip") {
        value.parse::<IpAddr>().ok().map(IpNet::from)
    } else if scope.eq_ignore_ascii_case("range") {
        value.parse::<IpNet>().ok()
    } else {
        None
    }
}

/// The longest a decision is kept: a ban for longer is kept this long (the Local API's own
/// durations are hours; a manual one may be years).
const LONGEST_DECISION: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// When a decision on `network` for `duration` (the Local API's text) made at `now` expires, or
/// why it is not applied: a duration that is not one, or a range wider than the floor the list
/// sources have ([`crate::support::prefix_map::too_wide`]: a `0.0.0.0/0` "ban" would trap every client).
fn decision_expiry(now: Instant, duration: &str, network: IpNet) -> Result<Instant, String> {
    if crate::support::prefix_map::too_wide(network) {
        return Err(format!(
            "wider than /{} (IPv4) or /{} (IPv6)",
            crate::support::prefix_map::MIN_PREFIX_V4,
            crate::support::prefix_map::MIN_PREFIX_V6
        ));
    }
    let duration =
        go_duration(duration).ok_or_else(|| format!("duration `{}` is not one", clean(duration)))?;
    now.checked_add(duration.min(LONGEST_DECISION))
        .ok_or_else(|| "the clock cannot hold its expiry".to_string())
}

/// A Go duration (`59m59.607939566s`, `4h`, `1.5s`, `300ms`); `None` if it is not one or negative.
fn go_duration(text: &str) -> Option<Duration> {
    let mut rest = text.trim();
    if rest.starts_with('-') {
        return None;
    }
    let mut total = 0.0f64;
    while !rest.is_empty() {
        let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let seconds = match &rest[..unit_end] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        total += number * seconds;
        rest = &rest[unit_end..];
    }
    Duration::try_from_secs_f64(total).ok()
}

/// Text from the API as the rules see it: no control characters, at most 200 bytes.
fn clean(text: &str) -> String {
    crate::support::log_field::head(text, 200).chars().filter(|c| !c.is_control()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_read_as_the_local_api_writes_them() {
        assert_eq!(go_duration("59m59.5s"), Some(Duration::from_secs_f64(3599.5)));
        assert_eq!(go_duration("4h"), Some(Duration::from_secs(4 * 3600)));
        assert_eq!(go_duration("1h2m3s"), Some(Duration::from_secs(3723)));
        assert_eq!(go_duration("300ms"), Some(Duration::from_millis(300)));
        assert_eq!(go_duration("-1s"), None);
        assert_eq!(go_duration("soon"), None);
        assert_eq!(go_duration("5"), None);
    }

    #[test]
    fn an_absurd_duration_is_capped_and_a_range_wider_than_the_floor_refused() {
        let (now, address) = (Instant::now(), "203.0.113.7/32".parse().unwrap());
        let forever = decision_expiry(now, "10000000000000000000s", address).unwrap();
        assert_eq!(forever - now, LONGEST_DECISION);
        assert_eq!(decision_expiry(now, "4h", address).unwrap() - now, Duration::from_secs(4 * 3600));
        assert!(decision_expiry(now, "soon", address).unwrap_err().contains("is not one"));
        for wide in ["0.0.0.0/0", "10.0.0.0/8", "::/0", "2001::/16", "::ffff:0:0/96"] {
            let error = decision_expiry(now, "4h", wide.parse().unwrap()).unwrap_err();
            assert!(error.contains("wider than /12"), "{wide}: {error}");
        }
        assert!(decision_expiry(now, "4h", "100.64.0.0/12".parse().unwrap()).is_ok());
    }

    #[test]
    fn decisions_cover_addresses_and_ranges_only() {
        assert_eq!(network("Ip", "203.0.113.7"), Some("203.0.113.7/32".parse().unwrap()));
        assert_eq!(network("range", "198.51.100.0/24"), Some("198.51.100.0/24".parse().unwrap()));
        assert_eq!(network("Country", "FR"), None);
        assert_eq!(network("Ip", "not an address"), None);
        assert_eq!(clean("manual\n'ban'\u{7}"), "manual'ban'");
    }
}
