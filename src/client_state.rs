//! What quagmire remembers about each client: trap hits with time decay and request rate.
//!
//! A bounded table ([`table`]) maps a [`ClientKey`] to a compact record, so memory stays small
//! and bounded however many clients there are: about a hundred bytes a client, all counted, and
//! a flood of one-page visitors evicts its own kind before any client with trap hits. Each
//! shard of the table has its own lock; nothing here takes a global lock. The trap score decays
//! exponentially with a configurable half-life, so a burst of trap hits counts far more than the
//! same hits spread over a week.
//!
//! What only the admin views show (a client's user agent and AS organisation) is kept for
//! clients with trap hits, the ones those views list; they are also kept in a second, smaller
//! index, so that the views (`/api/trapped`, the clients-over-threshold gauge) walk only them.
//!
//! With a shared store configured ([`store`]), these records are its near cache: each also
//! holds the store's last view of the client and what this replica saw since, and a client's
//! history is the two together.

mod near_cache;
pub(crate) mod store;
mod table;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use moka::sync::Cache;

use crate::client::{ClientKey, KeyHasher};
use crate::enrich::geo::GeoInfo;
use near_cache::SharedView;
#[cfg(test)]
use near_cache::View;
use store::{Store, StoreConfig};
use table::Table;

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
    /// The user agent of its last request since its first trap hit.
    pub last_user_agent: String,
    /// Its ASN, if known.
    pub asn: Option<u32>,
    /// Its AS organisation, if known.
    pub asn_org: Option<String>,
}

/// All client records.
pub(crate) struct ClientStates {
    table: Arc<Table>,
    /// The clients with trap hits, bounded by [`TRAPPED_CAPACITY`]: what the admin views walk.
    trapped: Cache<ClientKey, (), KeyHasher>,
    config: ClientStateConfig,
    quota: Quota,
    store: Option<Arc<Store>>,
}

/// A request quota as GCRA: one request may arrive every `interval`, with a burst of `burst`.
/// Checked at the request's own time (a log line's, in a replay), not the wall clock's, which is
/// why it is not one of governor's limiters: those read their own clock. Times are the table's
/// ticks (nanoseconds).
#[derive(Clone, Copy, Debug)]
struct Quota {
    interval: u64,
    /// How far the theoretical arrival time may run ahead of now: `interval × (burst − 1)`.
    tolerance: u64,
}

impl Quota {
    /// `requests` a minute, `burst` of them at once.
    fn new(requests: u32, burst: u32) -> Quota {
        let interval = 60_000_000_000 / u64::from(requests.max(1));
        Quota { interval, tolerance: interval * u64::from(burst.max(1) - 1) }
    }

    /// Whether a request at `now` is over the quota; a request within it moves `due` (the
    /// theoretical arrival time) on by one interval.
    fn over(&self, due: &mut u64, now: u64) -> bool {
        if self.ahead(*due, now) {
            return true;
        }
        *due = (*due).max(now) + self.interval;
        false
    }

    /// Whether `due` runs further ahead of `now` than the burst allows.
    fn ahead(&self, due: u64, now: u64) -> bool {
        due.saturating_sub(now) > self.tolerance
    }
}

/// One client's record: 64 bytes, beside its key in the table. Times are the table's ticks, or
/// whole seconds of the Unix epoch for the admin view's first and last seen.
pub(crate) struct Record {
    trap_hits: u32,
    /// 0 when not known (AS 0 is reserved, never announced).
    asn: u32,
    first_seen: u32,
    last_seen: u32,
    trap_score: f64,
    request_rate: f64,
    updated: u64,
    /// The quota's theoretical arrival time (see [`Quota`]).
    quota_due: u64,
    /// With trap hits only: what the admin views show.
    detail: Option<Box<Detail>>,
    /// With a store only (boxed: records without one stay small).
    shared: Option<Box<SharedView>>,
}

/// What the admin views show of a trapped client.
#[derive(Default)]
struct Detail {
    /// Cut to [`USER_AGENT_BYTES`].
    user_agent: Box<str>,
    asn_org: Option<Box<str>>,
}

/// A moment as the records need it: the instant, and the table's ticks for it.
#[derive(Clone, Copy)]
struct At {
    instant: Instant,
    ticks: u64,
}

/// Bytes of a client's last user agent kept for the admin view.
const USER_AGENT_BYTES: usize = 256;

/// Most trapped clients kept for the admin views. Walking them costs about a millisecond; when a
/// spray of addresses traps more, the least recently trapped are dropped from the views (never
/// from the table, so verdicts still see their history).
pub(crate) const TRAPPED_CAPACITY: u64 = 10_000;

/// Half-life of a request's weight in `request_rate`.
const RATE_HALF_LIFE: Duration = Duration::from_secs(60);

impl ClientStates {
    /// An empty set of records; `on_evict` runs for each record dropped for capacity or idleness.
    pub(crate) fn new(config: ClientStateConfig, on_evict: impl Fn() + Send + Sync + 'static) -> Self {
        let table = Arc::new(Table::new(config.capacity, config.idle_timeout, on_evict));
        let trapped = Cache::builder()
            .max_capacity(TRAPPED_CAPACITY.min(config.capacity))
            .time_to_idle(config.idle_timeout)
            .build_with_hasher(KeyHasher::default());
        let quota = Quota::new(config.requests_per_minute, config.request_burst);
        ClientStates { table, trapped, config, quota, store: None }
    }

    /// Records with trap hits kept for at least `at_least` without a request (a pass's
    /// lifetime: a burned pass left idle must not be forgotten, and so work again, while valid).
    pub(crate) fn keep_trapped_for(mut self, at_least: Duration) -> Self {
        Arc::get_mut(&mut self.table).expect("called as the records are made").keep_trapped_for(at_least);
        self
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
        Some(store.run(self.table.clone()))
    }

    /// With a store: sends every client's unsent requests and trap hits now, waiting at most
    /// the store's `store-wait-ms` (at shutdown, so a stopping replica's last hits are shared).
    /// Returns how many clients were sent.
    pub(crate) async fn flush_store(&self) -> usize {
        let Some(store) = self.store.as_ref() else { return 0 };
        if !store.usable() {
            return 0;
        }
        let unsent = self.table.keys_where(Record::has_unsent);
        let count = unsent.len();
        let sends = unsent.iter().map(|key| store.sync(*key, &self.table, false));
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
        // The verdict's own request has been counted: these looks are not the client's.
        if !self.table.peek(key, |record| record.needs_refresh(config.sync * 2))? {
            return None;
        }
        let permit = store.refresh_permit()?;
        let wait = config.wait;
        let updating = {
            let (store, table) = (store.clone(), self.table.clone());
            // Spawned, so an update the verdict stops waiting for still completes and is kept.
            tokio::spawn(async move {
                store.sync(key, &table, true).await;
                drop(permit);
            })
        };
        let _ = tokio::time::timeout(wait, updating).await;
        let now = self.at(Instant::now());
        let history = self.table.peek(key, |record| {
            record.decay(now.ticks, &self.config);
            record.current(now, &self.config)
        })?;
        Some(History { rate_limited: history.rate_limited || observed.rate_limited, ..history })
    }

    fn at(&self, instant: Instant) -> At {
        At { instant, ticks: self.table.clock().ticks(instant) }
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
        let now = self.at(now);
        let seconds = unix_seconds();
        self.table.get_or_insert(
            key,
            || Record::new(now.ticks, seconds),
            |record| {
                let rate_limited = self.quota.over(&mut record.quota_due, now.ticks);
                record.decay(now.ticks, &self.config);
                record.request_rate += 1.0;
                record.last_seen = seconds;
                record.asn = geo.asn.unwrap_or(0);
                if record.trap_hits > 0 {
                    record.note(user_agent, geo);
                }
                if let Some(store) = &self.store {
                    record.count_unsent(1, 0, || store.enqueue(key));
                }
                let history = record.current(now, &self.config);
                History { rate_limited: rate_limited || history.rate_limited, ..history }
            },
        )
    }

    /// Trapped clients whose decayed trap score is at least `threshold` (walks the trapped
    /// clients, at most [`TRAPPED_CAPACITY`]: for scrapes).
    pub(crate) fn count_over(&self, threshold: f64) -> u64 {
        let now = self.at(Instant::now());
        let mut count = 0;
        for (key, ()) in self.trapped.iter() {
            let over = self.table.peek(*key, |record| {
                record.decay(now.ticks, &self.config);
                record.trap_score >= threshold
            });
            count += u64::from(over == Some(true));
        }
        count
    }

    /// Records a trap hit for `key`, made with `user_agent`.
    pub(crate) fn record_trap_hit(&self, key: ClientKey, user_agent: &str) -> History {
        self.trap_hit(key, Instant::now(), user_agent)
    }

    /// A trap hit for `key` at `now` (see `observe_request_at`); the user agent is the one its
    /// next request brings.
    pub(crate) fn record_trap_hit_at(&self, key: ClientKey, now: Instant) -> History {
        self.trap_hit(key, now, "")
    }

    fn trap_hit(&self, key: ClientKey, now: Instant, user_agent: &str) -> History {
        let now = self.at(now);
        let seconds = unix_seconds();
        // Inserted on every hit, so that the views' index keeps the most recently trapped.
        self.trapped.insert(key, ());
        let history = self.table.get_or_insert(
            key,
            || Record::new(now.ticks, seconds),
            |record| {
                record.decay(now.ticks, &self.config);
                record.trap_hits = record.trap_hits.saturating_add(1);
                record.trap_score += 1.0;
                record.last_seen = seconds;
                record.note(user_agent, &GeoInfo::default());
                if let Some(store) = &self.store {
                    record.count_unsent(0, 1, || store.enqueue(key));
                }
                record.current(now, &self.config)
            },
        );
        if let Some(store) = &self.store {
            // Other replicas should see a trap hit soon, not at the next interval.
            store.urgent(key);
        }
        history
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
        let now = self.at(now);
        self.table
            .get(key, |record| {
                record.decay(now.ticks, &self.config);
                let over = self.quota.ahead(record.quota_due, now.ticks);
                let history = record.current(now, &self.config);
                History { rate_limited: over || history.rate_limited, ..history }
            })
            .unwrap_or_default()
    }

    /// Up to `limit` clients with the highest trap scores (walks the trapped clients, at most
    /// [`TRAPPED_CAPACITY`]).
    pub(crate) fn most_trapped(&self, limit: usize) -> Vec<ClientSnapshot> {
        let now = self.at(Instant::now());
        let mut all: Vec<ClientSnapshot> = self
            .trapped
            .iter()
            .filter_map(|(key, ())| {
                self.table
                    .peek(*key, |record| {
                        record.decay(now.ticks, &self.config);
                        let detail = record.detail.as_deref();
                        (record.trap_hits > 0).then(|| ClientSnapshot {
                            key: *key,
                            history: record.history(),
                            first_seen: unix_time(record.first_seen),
                            last_seen: unix_time(record.last_seen),
                            last_user_agent: detail.map(|d| d.user_agent.to_string()).unwrap_or_default(),
                            asn: record.asn(),
                            asn_org: detail.and_then(|d| d.asn_org.as_deref()).map(str::to_string),
                        })
                    })
                    .flatten()
            })
            .collect();
        all.sort_by(|a, b| b.history.trap_score.total_cmp(&a.history.trap_score));
        all.truncate(limit);
        all
    }

    /// Records currently held.
    pub(crate) fn len(&self) -> u64 {
        self.table.len()
    }
}

impl Record {
    fn new(ticks: u64, seconds: u32) -> Record {
        Record {
            trap_hits: 0,
            asn: 0,
            first_seen: seconds,
            last_seen: seconds,
            trap_score: 0.0,
            request_rate: 0.0,
            updated: ticks,
            quota_due: ticks,
            detail: None,
            shared: None,
        }
    }

    /// Whether an eviction should keep this record over one-page visitors: it has trap hits
    /// (a crawler in the trap, a burned pass).
    fn kept(&self) -> bool {
        self.trap_hits > 0
    }

    fn asn(&self) -> Option<u32> {
        (self.asn != 0).then_some(self.asn)
    }

    /// Keeps `user_agent` (cut) and the AS organisation for the admin views.
    fn note(&mut self, user_agent: &str, geo: &GeoInfo) {
        let detail = self.detail.get_or_insert_with(Box::default);
        let user_agent = crate::support::log_field::head(user_agent, USER_AGENT_BYTES);
        if !user_agent.is_empty() && *detail.user_agent != *user_agent {
            detail.user_agent = user_agent.into();
        }
        if geo.asn.is_some() && detail.asn_org.as_deref() != geo.asn_org.as_deref() {
            detail.asn_org = geo.asn_org.as_deref().map(Box::from);
        }
    }

    fn decay(&mut self, now: u64, config: &ClientStateConfig) {
        if now > self.updated {
            let elapsed = Duration::from_nanos(now - self.updated).as_secs_f64();
            self.trap_score = decayed(self.trap_score, elapsed, config.trap_half_life);
            self.request_rate = decayed(self.request_rate, elapsed, RATE_HALF_LIFE);
            self.updated = now;
        }
    }

    /// This replica's own history of the client (the local fields, decayed).
    fn history(&self) -> History {
        History {
            trap_hits: u64::from(self.trap_hits),
            trap_score: self.trap_score,
            request_rate: self.request_rate,
            rate_limited: false,
        }
    }
}

/// Now in whole seconds of the Unix epoch (what the admin views show).
fn unix_seconds() -> u32 {
    let seconds = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_secs();
    u32::try_from(seconds).unwrap_or(u32::MAX)
}

fn unix_time(seconds: u32) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(u64::from(seconds))
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
            states.record_trap_hit(key("192.0.2.1"), "test-agent");
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

    /// A client's record in `states`, for the near-cache calls the store's syncer makes.
    struct RecordOf<'a>(&'a ClientStates, ClientKey);

    impl RecordOf<'_> {
        fn with<R>(&self, f: impl FnOnce(&mut Record) -> R) -> R {
            self.0.table.peek(self.1, f).expect("the record is remembered")
        }

        fn take_unsent(&self, even_empty: bool) -> Option<near_cache::Batch> {
            self.with(|record| record.take_unsent(even_empty))
        }

        fn apply(&self, view: View, config: &ClientStateConfig) -> bool {
            self.with(|record| record.apply(view, config))
        }

        fn restore(&self, delta: near_cache::Delta, resend: bool) -> bool {
            self.with(|record| record.restore(delta, resend))
        }

        fn queued(&self) -> bool {
            self.with(|record| record.shared.as_ref().is_some_and(|shared| shared.queued))
        }
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
        states.record_trap_hit(client, "test-agent");
        // No answer from the store yet: this replica's own records.
        let local = states.history(client);
        assert_eq!((local.trap_hits, local.request_rate.round()), (1, 3.0));

        let record = RecordOf(&states, client);
        let batch = record.take_unsent(false).unwrap();
        assert_eq!((batch.delta.requests, batch.delta.hits), (3, 1));
        assert_eq!(batch.user_agent.as_deref(), Some("test-agent"));
        assert!(record.take_unsent(true).is_none(), "one update in flight at a time");
        // Sent, not answered: still counted.
        assert_eq!(states.history(client).trap_hits, 1);
        observe(&states, "192.0.2.1");
        states.record_trap_hit(client, "test-agent");

        // The store answers with what every replica sent: 40 hits, one of them this replica's.
        let view = View {
            trap_hits: 40,
            trap_score: 30.0,
            request_rate: 90.0,
            rate_limited: true,
            at: Instant::now(),
        };
        assert!(record.apply(view, &states.config) || record.queued());
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
        states.record_trap_hit(client, "test-agent");
        let record = RecordOf(&states, client);
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
        states.record_trap_hit(client, "test-agent");
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
        states.record_trap_hit(client, "test-agent");
        let record = RecordOf(&states, client);

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
                states.record_trap_hit(key(client), "test-agent");
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

    /// Room for `capacity` clients, a minute's quota of 60 and an hour's idle time.
    fn sized(capacity: u64) -> ClientStates {
        sized_idle(capacity, Duration::from_secs(3600))
    }

    fn sized_idle(capacity: u64, idle_timeout: Duration) -> ClientStates {
        ClientStates::new(
            ClientStateConfig {
                capacity,
                idle_timeout,
                trap_half_life: Duration::from_secs(600),
                requests_per_minute: 60,
                request_burst: 60,
                store: StoreConfig::default(),
            },
            || {},
        )
    }

    #[test]
    fn a_flood_of_one_page_visitors_never_erases_a_trapped_client_or_a_burned_pass() {
        let states = sized(1000);
        let crawler = key("2001:db8:1:2::7");
        let pass = ClientKey::pass(0x5eed);
        for _ in 0..7 {
            states.record_trap_hit(crawler, "crawler");
        }
        for _ in 0..10 {
            states.record_trap_hit(pass, "burned");
        }
        // 5,000 /64s of one /48, three verdicts each, while the crawler walks on now and then.
        for network in 0..5_000u32 {
            let visitor = format!("2001:db8:1:{:x}:{:x}::1", network >> 8 & 0xff, network & 0xff);
            for _ in 0..3 {
                observe(&states, &visitor);
            }
            if network % 1_000 == 999 {
                states.record_trap_hit(crawler, "crawler");
            }
        }
        assert!(states.len() <= 1_000, "{} records", states.len());
        assert_eq!(states.history(crawler).trap_hits, 12);
        assert_eq!(states.history(pass).trap_hits, 10, "the burned pass is still burned");
    }

    #[test]
    fn trapped_clients_cannot_grow_the_table_past_its_capacity() {
        // A spray of addresses each hitting the trap: the table stays bounded, and the most
        // recent of them are remembered.
        let states = sized(300);
        for i in 0..3_000u32 {
            states.record_trap_hit(key(&std::net::Ipv4Addr::from(i).to_string()), "spray");
        }
        assert!(states.len() <= 300, "{} records", states.len());
        assert_eq!(states.history(key(&std::net::Ipv4Addr::from(2_999).to_string())).trap_hits, 1);
    }

    #[test]
    fn a_client_read_again_outlives_one_page_visitors() {
        let states = sized(500);
        let regular = key("198.51.100.7");
        let start = Instant::now();
        for i in 0..20_000u32 {
            let at = start + Duration::from_millis(u64::from(i));
            if i % 100 == 0 {
                states.observe_request_at(regular, "reader", &GeoInfo::default(), at);
            }
            states.observe_request_at(
                key(&std::net::Ipv4Addr::from(i).to_string()),
                "a",
                &GeoInfo::default(),
                at,
            );
        }
        let seen = states.history_at(regular, start + Duration::from_secs(20));
        assert!(seen.request_rate > 1.0, "forgotten: {seen:?}");
    }

    #[test]
    fn an_idle_client_is_forgotten() {
        let states = sized_idle(100, Duration::ZERO);
        states.record_trap_hit(key("192.0.2.5"), "a");
        assert_eq!(states.history(key("192.0.2.5")).trap_hits, 1);
        // Idleness is counted in whole seconds: wait for the next one, at most five.
        let deadline = Instant::now() + Duration::from_secs(5);
        while states.history(key("192.0.2.5")).trap_hits > 0 {
            assert!(Instant::now() < deadline, "still remembered");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(states.len(), 0);
        assert_eq!(states.record_trap_hit(key("192.0.2.5"), "a").trap_hits, 1, "a new record");
    }

    #[test]
    fn a_trapped_client_outlives_the_idle_time_of_others() {
        // A burned pass is trap hits on its record: forgotten after a day idle, it would be a
        // good pass again for the rest of its week.
        let states = sized_idle(100, Duration::ZERO).keep_trapped_for(Duration::from_secs(3600));
        let burned = ClientKey::pass(7);
        states.record_trap_hit(burned, "a");
        observe(&states, "192.0.2.6");
        let deadline = Instant::now() + Duration::from_secs(5);
        while states.history(key("192.0.2.6")).request_rate > 0.0 {
            assert!(Instant::now() < deadline, "the visitor is still remembered");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(states.history(burned).trap_hits, 1, "the trapped record is kept");
    }

    #[test]
    fn a_key_survives_the_trip_through_its_parts() {
        for text in ["192.0.2.1", "2001:db8::1", "::ffff:192.0.2.1", "10.0.0.7"] {
            let key = key(text);
            let (bits, tag) = key.to_parts();
            assert_eq!(ClientKey::from_parts(bits, tag), key);
        }
        let pass = ClientKey::pass(u128::MAX - 1);
        let (bits, tag) = pass.to_parts();
        assert_eq!(ClientKey::from_parts(bits, tag), pass);
    }
}
