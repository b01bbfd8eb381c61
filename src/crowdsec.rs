//! CrowdSec, as a bouncer: the decisions of a CrowdSec Local API (bans, captchas, on addresses
//! and ranges), pulled from its decision stream in the background and kept in memory, so that a
//! verdict looks its client up with one longest-prefix match and never waits on the API.
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

pub(crate) use crate::claims::CrowdSecDecision;
use crate::metrics::Metrics;
use crate::outbound::{Fetcher, Options};
use crate::prefix_map::PrefixMap;

/// Where the bouncer key comes from; it is never written to a log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeySource {
    /// An environment variable's value.
    Env(String),
    /// A file's first line.
    File(PathBuf),
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
}

impl Default for CrowdSecConfig {
    fn default() -> Self {
        CrowdSecConfig {
            url: None,
            bouncer_key: None,
            pull: Duration::from_secs(10),
            timeout: Duration::from_secs(10),
            max_decisions: 500_000,
        }
    }
}

/// CrowdSec settings that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CrowdSecError {
    /// No bouncer key configured.
    #[error("crowdsec {{ url }} needs bouncer-key-env or bouncer-key-file")]
    NoKey,
    /// The key's environment variable is not set.
    #[error("the CrowdSec bouncer key: the environment variable {0} is not set")]
    KeyEnv(String),
    /// The key's file cannot be read.
    #[error("the CrowdSec bouncer key: cannot read {path}: {source}")]
    KeyFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The HTTP client cannot be made.
    #[error("the CrowdSec client: {0}")]
    Client(String),
}

/// The bouncer: the decisions in force, and the puller's own bookkeeping.
pub(crate) struct CrowdSec {
    config: CrowdSecConfig,
    /// Read by every verdict, swapped whole by the puller.
    decisions: ArcSwap<PrefixMap<Arc<CrowdSecDecision>>>,
    client: Option<(Fetcher, String)>,
    puller: Mutex<Puller>,
    metrics: Arc<Metrics>,
}

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
                let key = match config.bouncer_key.as_ref().ok_or(CrowdSecError::NoKey)? {
                    KeySource::Env(name) => {
                        std::env::var(name).map_err(|_| CrowdSecError::KeyEnv(name.clone()))?
                    }
                    KeySource::File(path) => crate::bounded_file::read(path, 4096)
                        .map(|bytes| {
                            String::from_utf8_lossy(&bytes).lines().next().unwrap_or("").trim().to_string()
                        })
                        .map_err(|source| CrowdSecError::KeyFile { path: path.clone(), source })?,
                };
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
        Ok(CrowdSec {
            config,
            decisions: ArcSwap::from_pointee(PrefixMap::default()),
            client,
            puller: Mutex::new(Puller { startup: true, ..Puller::default() }),
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
                for wire in stream.added.unwrap_or_default() {
                    let Some(network) = network(&wire.scope, &wire.value) else {
                        // Countries, AS numbers and other scopes: not for a per-address lookup.
                        self.metrics.crowdsec_decisions_skipped(1);
                        continue;
                    };
                    if puller.known.len() >= self.config.max_decisions && !puller.known.contains_key(&wire.id)
                    {
                        self.metrics.crowdsec_decisions_skipped(1);
                        continue;
                    }
                    let expires = now + go_duration(&wire.duration).unwrap_or(Duration::ZERO);
                    let decision = Arc::new(CrowdSecDecision {
                        kind: Arc::from(clean(&wire.kind)),
                        scenario: Arc::from(clean(&wire.scenario)),
                        origin: Arc::from(clean(&wire.origin)),
                    });
                    puller.known.insert(wire.id, Known { network, decision, expires });
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
    crate::log_field::head(text, 200).chars().filter(|c| !c.is_control()).collect()
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
    fn decisions_cover_addresses_and_ranges_only() {
        assert_eq!(network("Ip", "203.0.113.7"), Some("203.0.113.7/32".parse().unwrap()));
        assert_eq!(network("range", "198.51.100.0/24"), Some("198.51.100.0/24".parse().unwrap()));
        assert_eq!(network("Country", "FR"), None);
        assert_eq!(network("Ip", "not an address"), None);
        assert_eq!(clean("manual\n'ban'\u{7}"), "manual'ban'");
    }
}
