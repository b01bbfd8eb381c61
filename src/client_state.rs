//! What quagmire remembers about each client: trap hits with time decay and request rate.
//!
//! A bounded moka cache maps a [`ClientKey`] to a small record, so memory stays bounded however
//! many clients there are (the least useful records are evicted). Each record has its own lock;
//! nothing here takes a global lock. The trap score decays exponentially with a configurable
//! half-life, so a burst of trap hits counts far more than the same hits spread over a week.
//!
//! Clients with trap hits are also kept in a second, smaller cache, so that the admin views
//! (`/api/trapped`, the clients-over-threshold gauge) walk only them, never every record.
//!
//! With a shared store configured ([`store`]), these records are its near cache: each also
//! holds the store's last view of the client and what this replica saw since, and a client's
//! history is the two together.

mod near_cache;
pub(crate) mod store;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use moka::sync::Cache;

use crate::client::{ClientKey, KeyHasher};
use crate::enrich::geo::GeoInfo;
use near_cache::SharedView;
#[cfg(test)]
use near_cache::View;
use store::{Store, StoreConfig};

/// Settings for the per-client records.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientStateConfig {
    /// Most clients remembered at once.
    pub capacity: u64,
    /// A client not seen for this long is forgotten.
    pub idle_timeout: Duration,
    /// Time for a trap hit's weight in the score to halve.
    pub trap_half_life: Duration,
    /// Sustained requests per minute before a client counts as rate-limited.
    pub requests_per_minute: u32,
    /// Requests a client may send at once, on top of the sustained rate, before it does.
    pub request_burst: u32,
    /// The shared store (without URLs, records live in this process only).
    pub store: StoreConfig,
}

/// A client's recent behaviour, as the rules see it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct History {
    /// Trap hits ever recorded (while remembered).
    pub trap_hits: u64,
    /// Trap hits with decay: about the number of recent hits.
    pub trap_score: f64,
    /// Recent requests, each weighted by a one-minute half-life: for a steady rate this settles
    /// at about 1.44 × requests per minute.
    pub request_rate: f64,
    /// Whether the client is over its request quota right now.
    pub rate_limited: bool,
}

/// A client's record, for the admin view.
#[derive(Clone, Debug)]
pub(crate) struct ClientSnapshot {
    /// The client.
    pub key: ClientKey,
    /// Its history now.
    pub history: History,
    /// When it was first seen.
    pub first_seen: SystemTime,
    /// When it was last seen.
    pub last_seen: SystemTime,
    /// The user agent of its last verdict request.
    pub last_user_agent: String,
    /// Its ASN, if known.
    pub asn: Option<u32>,
    /// Its AS organisation, if known.
    pub asn_org: Option<String>,
}

/// All client records.
pub(crate) struct ClientStates {
    cache: Cache<ClientKey, Arc<Record>, KeyHasher>,
    /// The records with trap hits (the same `Arc`s as in `cache`), bounded by [`TRAPPED_CAPACITY`].
    trapped: Cache<ClientKey, Arc<Record>, KeyHasher>,
    config: ClientStateConfig,
    quota: Quota,
    store: Option<Arc<Store>>,
}

/// A request quota as GCRA: one request may arrive every `interval`, with a burst of `burst`.
/// Checked at the request's own time (a log line's, in a replay), not the wall clock's, which is
/// why it is not one of governor's limiters: those read their own clock.
#[derive(Clone, Copy, Debug)]
struct Quota {
    interval: Duration,
    /// How far the theoretical arrival time may run ahead of now: `interval × (burst − 1)`.
    tolerance: Duration,
}

impl Quota {
    /// `requests` a minute, `burst` of them at once.
    fn new(requests: u32, burst: u32) -> Quota {
        let interval = Duration::from_secs(60) / requests.max(1);
        Quota { interval, tolerance: interval * (burst.max(1) - 1) }
    }

    /// Whether a request at `now` is over the quota; a request within it moves `due` (the
    /// theoretical arrival time) on by one interval.
    fn over(&self, due: &mut Instant, now: Instant) -> bool {
        if due.saturating_duration_since(now) > self.tolerance {
            return true;
        }
        *due = (*due).max(now) + self.interval;
        false
    }
}

/// One client's record (shared with the store's syncer).
pub(crate) struct Record {
    inner: Mutex<Inner>,
}

struct Inner {
    trap_hits: u64,
    trap_score: f64,
    request_rate: f64,
    updated: Instant,
    /// The quota's theoretical arrival time (see [`Quota`]).
    quota_due: Instant,
    first_seen: SystemTime,
    last_seen: SystemTime,
    /// Longer user agents are cut, so a record stays small.
    last_user_agent: String,
    asn: Option<u32>,
    asn_org: Option<Box<str>>,
    /// With a store only (boxed: records without one stay small).
    shared: Option<Box<SharedView>>,
}

/// Bytes of a client's last user agent kept for the admin view.
const USER_AGENT_BYTES: usize = 256;

/// Most trapped clients kept for the admin views. Walking them costs about a millisecond; when a
/// spray of addresses traps more, the least recently trapped are dropped from the views (never
/// from `cache`, so verdicts still see their history).
pub(crate) const TRAPPED_CAPACITY: u64 = 10_000;

/// Half-life of a request's weight in `request_rate`.
const RATE_HALF_LIFE: Duration = Duration::from_secs(60);

impl ClientStates {
    /// An empty set of records; `on_evict` runs for each record dropped for capacity or idleness.
    pub(crate) fn new(config: ClientStateConfig, on_evict: impl Fn() + Send + Sync + 'static) -> Self {
        let cache = Cache::builder()
            .max_capacity(config.capacity)
            .time_to_idle(config.idle_timeout)
            .eviction_listener(move |_key, _record, cause| {
                if cause.was_evicted() {
                    on_evict();
                }
            })
            .build_with_hasher(KeyHasher::default());
        let trapped = Cache::builder()
            .max_capacity(TRAPPED_CAPACITY.min(config.capacity))
            .time_to_idle(config.idle_timeout)
            .build_with_hasher(KeyHasher::default());
        let quota = Quota::new(config.requests_per_minute, config.request_burst);
        ClientStates { cache, trapped, config, quota, store: None }
    }

    /// These records as the near cache of `store` (which [`ClientStates::run_store`] connects).
    pub(crate) fn with_store(mut self, store: Store) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// The shared store, if one is configured.
    pub(crate) fn store(&self) -> Option<&Store> {
        self.store.as_deref()
    }

    /// The shared store, for work that outlives the request waiting for it.
    pub(crate) fn shared_store(&self) -> Option<Arc<Store>> {
        self.store.clone()
    }

    /// Connects the store and sends updates until dropped; `None` without a store.
    pub(crate) fn run_store(&self) -> Option<impl Future<Output = ()> + Send + 'static> {
        let store = self.store.clone()?;
        Some(store.run(self.cache.clone()))
    }

    /// With a store: sends every client's unsent requests and trap hits now, waiting at most
    /// the store's `store-wait-ms` (at shutdown, so a stopping replica's last hits are shared).
    /// Returns how many clients were sent.
    pub(crate) async fn flush_store(&self) -> usize {
        let Some(store) = self.store.as_ref() else { return 0 };
        if !store.usable() {
            return 0;
        }
        let unsent: Vec<(ClientKey, Arc<Record>)> = self
            .cache
            .iter()
            .filter(|(_, record)| record.has_unsent())
            .map(|(key, record)| (*key, record))
            .collect();
        let count = unsent.len();
        let sends = unsent.iter().map(|(key, record)| store.sync(*key, record, false));
        let _ = tokio::time::timeout(store.config().wait, futures_util::future::join_all(sends)).await;
        count
    }

    /// With a store: brings `key`'s shared history up to date when this replica's view of it is
    /// too old (or missing), waiting at most the store's budget, and returns the history the
    /// verdict should use (`observed`'s local rate limit kept). `None` when nothing was asked.
    pub(crate) async fn refresh(&self, key: ClientKey, observed: History) -> Option<History> {
        let store = self.store.as_ref()?;
        let config = store.config();
        if !store.usable() {
            return None;
        }
        let record = self.cache.get(&key)?;
        if !record.needs_refresh(config.sync * 2) {
            return None;
        }
        let permit = store.refresh_permit()?;
        let wait = config.wait;
        let updating = {
            let (store, record) = (store.clone(), record.clone());
            // Spawned, so an update the verdict stops waiting for still completes and is kept.
            tokio::spawn(async move {
                store.sync(key, &record, true).await;
                drop(permit);
            })
        };
        let _ = tokio::time::timeout(wait, updating).await;
        let mut inner = record.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = Instant::now();
        inner.decay(now, &self.config);
        let history = inner.current(now, &self.config);
        Some(History { rate_limited: history.rate_limited || observed.rate_limited, ..history })
    }

    /// Records a request from `key` and returns its history including this request.
    #[cfg(test)]
    pub(crate) fn observe_request(&self, key: ClientKey, user_agent: &str, geo: &GeoInfo) -> History {
        self.observe_request_at(key, user_agent, geo, Instant::now())
    }

    /// [`ClientStates::observe_request`] for a request made at `now`: decay and the quota run
    /// on the request's own time (a replayed log line's). Times must not go back by much: a
    /// request earlier than the record's last one decays nothing.
    pub(crate) fn observe_request_at(
        &self,
        key: ClientKey,
        user_agent: &str,
        geo: &GeoInfo,
        now: Instant,
    ) -> History {
        let record = self.record(key, now);
        let mut inner = record.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let rate_limited = self.quota.over(&mut inner.quota_due, now);
        inner.decay(now, &self.config);
        inner.request_rate += 1.0;
        inner.last_seen = SystemTime::now();
        let user_agent = crate::support::log_field::head(user_agent, USER_AGENT_BYTES);
        if inner.last_user_agent != user_agent {
            inner.last_user_agent.clear();
            inner.last_user_agent.push_str(user_agent);
        }
        if inner.asn != geo.asn {
            inner.asn = geo.asn;
            inner.asn_org = geo.asn_org.as_deref().map(Box::from);
        }
        if let Some(store) = &self.store {
            let shared = inner.shared.get_or_insert_with(Box::default);
            shared.unsent.requests = shared.unsent.requests.saturating_add(1);
            if !shared.queued {
                shared.queued = store.enqueue(key);
            }
        }
        let history = inner.current(now, &self.config);
        History { rate_limited: rate_limited || history.rate_limited, ..history }
    }

    /// Trapped clients whose decayed trap score is at least `threshold` (walks the trapped
    /// clients, at most [`TRAPPED_CAPACITY`]: for scrapes).
    pub(crate) fn count_over(&self, threshold: f64) -> u64 {
        let now = Instant::now();
        let mut count = 0;
        for (_, record) in self.trapped.iter() {
            let mut inner = record.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            inner.decay(now, &self.config);
            count += u64::from(inner.trap_score >= threshold);
        }
        count
    }

    /// Records a trap hit for `key`.
    pub(crate) fn record_trap_hit(&self, key: ClientKey) -> History {
        self.record_trap_hit_at(key, Instant::now())
    }

    /// [`ClientStates::record_trap_hit`] for a hit at `now` (see `observe_request_at`).
    pub(crate) fn record_trap_hit_at(&self, key: ClientKey, now: Instant) -> History {
        let record = self.record(key, now);
        // Inserted on every hit, so that a record `cache` evicted and made anew replaces the old.
        self.trapped.insert(key, record.clone());
        let mut inner = record.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        inner.decay(now, &self.config);
        inner.trap_hits += 1;
        inner.trap_score += 1.0;
        inner.last_seen = SystemTime::now();
        if let Some(store) = &self.store {
            let shared = inner.shared.get_or_insert_with(Box::default);
            shared.unsent.hits = shared.unsent.hits.saturating_add(1);
            if !shared.queued {
                shared.queued = store.enqueue(key);
            }
            // Other replicas should see a trap hit soon, not at the next interval.
            store.urgent(key);
        }
        inner.current(now, &self.config)
    }

    /// The history of `key` without recording anything.
    #[cfg(test)]
    pub(crate) fn history(&self, key: ClientKey) -> History {
        self.history_at(key, Instant::now())
    }

    /// The history of `key` at `now` without counting a request or creating a record: for a
    /// request whose good pass is its client (its own record counts it), so that people holding
    /// passes behind one address do not use up the address's quota. `rate_limited` says whether
    /// the address's pass-less traffic is over its quota.
    pub(crate) fn history_at(&self, key: ClientKey, now: Instant) -> History {
        match self.cache.get(&key) {
            Some(record) => {
                let mut inner = record.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                inner.decay(now, &self.config);
                let over = inner.quota_due.saturating_duration_since(now) > self.quota.tolerance;
                let history = inner.current(now, &self.config);
                History { rate_limited: over || history.rate_limited, ..history }
            }
            None => History::default(),
        }
    }

    /// Up to `limit` clients with the highest trap scores (walks the trapped clients, at most
    /// [`TRAPPED_CAPACITY`]).
    pub(crate) fn most_trapped(&self, limit: usize) -> Vec<ClientSnapshot> {
        let now = Instant::now();
        let mut all: Vec<ClientSnapshot> = self
            .trapped
            .iter()
            .filter_map(|(key, record)| {
                let mut inner = record.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                inner.decay(now, &self.config);
                (inner.trap_hits > 0).then(|| ClientSnapshot {
                    key: *key,
                    history: inner.history(),
                    first_seen: inner.first_seen,
                    last_seen: inner.last_seen,
                    last_user_agent: inner.last_user_agent.clone(),
                    asn: inner.asn,
                    asn_org: inner.asn_org.as_deref().map(str::to_string),
                })
            })
            .collect();
        all.sort_by(|a, b| b.history.trap_score.total_cmp(&a.history.trap_score));
        all.truncate(limit);
        all
    }

    /// Records currently held.
    pub(crate) fn len(&self) -> u64 {
        self.cache.run_pending_tasks();
        self.cache.entry_count()
    }

    fn record(&self, key: ClientKey, at: Instant) -> Arc<Record> {
        self.cache.get_with(key, || {
            let now = SystemTime::now();
            Arc::new(Record {
                inner: Mutex::new(Inner {
                    trap_hits: 0,
                    trap_score: 0.0,
                    request_rate: 0.0,
                    updated: at,
                    quota_due: at,
                    first_seen: now,
                    last_seen: now,
                    last_user_agent: String::new(),
                    asn: None,
                    asn_org: None,
                    shared: None,
                }),
            })
        })
    }
}

impl Inner {
    fn decay(&mut self, now: Instant, config: &ClientStateConfig) {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        if elapsed > 0.0 {
            self.trap_score = decayed(self.trap_score, elapsed, config.trap_half_life);
            self.request_rate = decayed(self.request_rate, elapsed, RATE_HALF_LIFE);
            self.updated = now;
        }
    }

    /// This replica's own history of the client (the local fields, decayed).
    fn history(&self) -> History {
        History {
            trap_hits: self.trap_hits,
            trap_score: self.trap_score,
            request_rate: self.request_rate,
            rate_limited: false,
        }
    }
}

/// ln 2 / half-life: the decay constant per second.
fn ln2_over(half_life: Duration) -> f64 {
    std::f64::consts::LN_2 / half_life.as_secs_f64().max(0.001)
}

/// `value` after `elapsed` seconds of exponential decay with `half_life`: the one decay of trap
/// scores and request rates (update.lua does the same on the store's side).
fn decayed(value: f64, elapsed: f64, half_life: Duration) -> f64 {
    value * (-elapsed * ln2_over(half_life)).exp()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ClientIdentity;

    fn states(half_life: Duration) -> ClientStates {
        ClientStates::new(
            ClientStateConfig {
                capacity: 1000,
                idle_timeout: Duration::from_secs(3600),
                trap_half_life: half_life,
                requests_per_minute: 5,
                request_burst: 5,
                store: StoreConfig::default(),
            },
            || {},
        )
    }

    fn observe(states: &ClientStates, client: &str) -> History {
        states.observe_request(key(client), "test-agent", &GeoInfo::default())
    }

    fn key(text: &str) -> ClientKey {
        ClientIdentity::new(vec![], 32, 64).key(text.parse().unwrap())
    }

    #[test]
    fn hits_accumulate_per_client() {
        let states = states(Duration::from_secs(600));
        for _ in 0..20 {
            states.record_trap_hit(key("192.0.2.1"));
        }
        let history = states.history(key("192.0.2.1"));
        assert_eq!(history.trap_hits, 20);
        assert!(history.trap_score > 19.9 && history.trap_score <= 20.0, "{history:?}");
        assert_eq!(states.history(key("192.0.2.2")), History::default());
    }

    #[test]
    fn the_score_halves_every_half_life() {
        let states = states(Duration::from_secs(60));
        let start = Instant::now();
        for _ in 0..8 {
            states.record_trap_hit_at(key("192.0.2.1"), start);
        }
        let at = |seconds: u64| states.history_at(key("192.0.2.1"), start + Duration::from_secs(seconds));
        assert_eq!(at(0).trap_hits, 8);
        for (seconds, left) in [(60, 4.0), (120, 2.0), (180, 1.0)] {
            let history = at(seconds);
            assert!((history.trap_score - left).abs() < 1e-9, "after {seconds} s: {history:?}");
            // The hits themselves are a count, not a score: they never decay.
            assert_eq!(history.trap_hits, 8);
        }
    }

    #[test]
    fn requests_beyond_the_quota_are_rate_limited() {
        let states = states(Duration::from_secs(600));
        let limited: Vec<bool> = (0..8).map(|_| observe(&states, "192.0.2.1").rate_limited).collect();
        assert_eq!(limited, [false, false, false, false, false, true, true, true]);
        assert!(!observe(&states, "192.0.2.2").rate_limited);
        assert!(states.history(key("192.0.2.1")).request_rate > 7.0);
    }

    #[test]
    fn decay_and_quota_follow_the_requests_own_time() {
        // A day of requests replayed at once: what counts is the time each was made.
        let states = states(Duration::from_secs(600));
        let client = key("192.0.2.9");
        let start = Instant::now();
        for second in 0..8 {
            states.record_trap_hit_at(client, start + Duration::from_secs(second));
        }
        let at = |minutes: u64| start + Duration::from_secs(minutes * 60);
        let soon = states.observe_request_at(client, "agent", &GeoInfo::default(), at(5));
        assert!(soon.trap_score > 5.0 && soon.trap_score < 6.0, "half a half-life later: {soon:?}");
        let later = states.observe_request_at(client, "agent", &GeoInfo::default(), at(8 * 60));
        assert!(later.trap_score < 0.001, "48 half-lives later: {later:?}");
        // Five requests a minute: the sixth in one second is over, one a minute never is.
        let limited: Vec<bool> = (0..6)
            .map(|i| {
                states
                    .observe_request_at(
                        key("192.0.2.10"),
                        "a",
                        &GeoInfo::default(),
                        at(0) + Duration::from_millis(i),
                    )
                    .rate_limited
            })
            .collect();
        assert_eq!(limited, [false, false, false, false, false, true]);
        let spread = (0..20).any(|minute| {
            states.observe_request_at(key("192.0.2.11"), "a", &GeoInfo::default(), at(minute)).rate_limited
        });
        assert!(!spread);
    }

    #[test]
    fn the_burst_bounds_requests_at_once_and_the_rate_what_follows() {
        let states = ClientStates::new(
            ClientStateConfig {
                capacity: 1000,
                idle_timeout: Duration::from_secs(3600),
                trap_half_life: Duration::from_secs(600),
                requests_per_minute: 60,
                request_burst: 10,
                store: StoreConfig::default(),
            },
            || {},
        );
        let start = Instant::now();
        let at = |millis: u64| start + Duration::from_millis(millis);
        let observe =
            |millis| states.observe_request_at(key("192.0.2.12"), "a", &GeoInfo::default(), at(millis));
        let burst: Vec<bool> = (0..11).map(|i| observe(i).rate_limited).collect();
        assert_eq!(burst, [[false; 10].as_slice(), &[true]].concat(), "ten at once, not eleven");
        // One a second refills one: a request a second later passes, the next at once does not.
        assert!(!observe(1_010).rate_limited);
        assert!(observe(1_011).rate_limited);
        // At the sustained rate, never over.
        assert!((2..120).all(|second| !observe(second * 1_000 + 20).rate_limited));
    }

    #[test]
    fn capacity_bounds_the_records() {
        let evictions = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = evictions.clone();
        let states = ClientStates::new(
            ClientStateConfig {
                capacity: 100,
                idle_timeout: Duration::from_secs(3600),
                trap_half_life: Duration::from_secs(600),
                requests_per_minute: 60,
                request_burst: 60,
                store: StoreConfig::default(),
            },
            move || {
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            },
        );
        for i in 0..5000u32 {
            observe(&states, &std::net::Ipv4Addr::from(i).to_string());
        }
        assert!(states.len() <= 110, "{} records", states.len());
        assert!(evictions.load(std::sync::atomic::Ordering::Relaxed) >= 4800);
    }

    /// Records in front of a store that is never connected: the near-cache arithmetic alone.
    fn shared_states() -> ClientStates {
        let config = ClientStateConfig {
            capacity: 1000,
            idle_timeout: Duration::from_secs(3600),
            trap_half_life: Duration::from_secs(600),
            requests_per_minute: 600,
            request_burst: 600,
            store: StoreConfig { urls: vec!["redis://127.0.0.1:1/0".into()], ..StoreConfig::default() },
        };
        let store = Store::new(
            config.store.clone(),
            config.clone(),
            Arc::new(crate::observe::metrics::Metrics::new()),
        );
        ClientStates::new(config, || {}).with_store(store)
    }

    #[test]
    fn with_a_store_the_history_is_its_view_plus_what_was_not_sent() {
        let states = shared_states();
        let client = key("192.0.2.1");
        for _ in 0..3 {
            observe(&states, "192.0.2.1");
        }
        states.record_trap_hit(client);
        // No answer from the store yet: this replica's own records.
        let local = states.history(client);
        assert_eq!((local.trap_hits, local.request_rate.round()), (1, 3.0));

        let record = states.cache.get(&client).unwrap();
        let batch = record.take_unsent(false).unwrap();
        assert_eq!((batch.delta.requests, batch.delta.hits), (3, 1));
        assert_eq!(batch.user_agent.as_deref(), Some("test-agent"));
        assert!(record.take_unsent(true).is_none(), "one update in flight at a time");
        // Sent, not answered: still counted.
        assert_eq!(states.history(client).trap_hits, 1);
        observe(&states, "192.0.2.1");
        states.record_trap_hit(client);

        // The store answers with what every replica sent: 40 hits, one of them this replica's.
        let view = View {
            trap_hits: 40,
            trap_score: 30.0,
            request_rate: 90.0,
            rate_limited: true,
            at: Instant::now(),
        };
        assert!(
            record.apply(view, &states.config)
                || record.inner.lock().unwrap().shared.as_ref().unwrap().queued
        );
        let shared = states.history(client);
        assert_eq!(shared.trap_hits, 41, "the view and the hit sent since");
        assert!(shared.trap_score > 30.9 && shared.trap_score <= 31.0, "{shared:?}");
        assert!(shared.request_rate > 90.9 && shared.request_rate <= 91.0, "{shared:?}");
        assert!(observe(&states, "192.0.2.1").rate_limited, "over the quota across replicas");
    }

    #[test]
    fn a_store_that_lost_its_data_does_not_release_what_a_replica_knew() {
        let states = shared_states();
        let client = key("192.0.2.3");
        states.record_trap_hit(client);
        let record = states.cache.get(&client).unwrap();
        let batch = record.take_unsent(false).unwrap();
        let trapped = View {
            trap_hits: 20,
            trap_score: 19.5,
            request_rate: 30.0,
            rate_limited: false,
            at: Instant::now(),
        };
        record.apply(trapped, &states.config);
        record.restore(batch.delta, false);
        // The store is flushed; the next update's answer holds only what was just sent.
        states.record_trap_hit(client);
        let _ = record.take_unsent(false).unwrap();
        let flushed = View {
            trap_hits: 1,
            trap_score: 1.0,
            request_rate: 1.0,
            rate_limited: false,
            at: Instant::now(),
        };
        record.apply(flushed, &states.config);
        let history = states.history(client);
        assert_eq!(history.trap_hits, 21, "{history:?}");
        assert!(history.trap_score > 20.0, "released by the store's loss: {history:?}");
    }

    #[test]
    fn a_failed_update_is_sent_again_unless_it_may_have_landed() {
        let states = shared_states();
        let client = key("192.0.2.2");
        states.record_trap_hit(client);
        let record = states.cache.get(&client).unwrap();

        let batch = record.take_unsent(false).unwrap();
        record.restore(batch.delta, true);
        let again = record.take_unsent(false).unwrap();
        assert_eq!(again.delta.hits, 1, "refused: sent again");

        record.restore(again.delta, false);
        assert!(record.take_unsent(false).is_none(), "timed out: never counted twice");
        assert_eq!(record.take_unsent(true).unwrap().delta.hits, 0, "a refresh still asks");
    }

    #[test]
    fn most_trapped_lists_by_score() {
        let states = states(Duration::from_secs(600));
        for (client, hits) in [("192.0.2.1", 3), ("192.0.2.2", 9), ("192.0.2.3", 1)] {
            for _ in 0..hits {
                states.record_trap_hit(key(client));
            }
        }
        states.observe_request(
            key("192.0.2.2"),
            "GPTBot/1.2",
            &GeoInfo { asn: Some(16509), asn_org: Some("Amazon".into()), country: None },
        );
        observe(&states, "192.0.2.4");
        let top = states.most_trapped(2);
        let keys: Vec<String> = top.iter().map(|c| c.key.to_string()).collect();
        assert_eq!(keys, ["192.0.2.2", "192.0.2.1"]);
        assert_eq!((top[0].last_user_agent.as_str(), top[0].asn), ("GPTBot/1.2", Some(16509)));
        assert_eq!(states.count_over(2.5), 2, "a little decay has passed since the hits");
    }
}
