//! The shared copy of client state in Redis (or Valkey, or a Redis Cluster), for several
//! replicas: each replica's local records ([`super::ClientStates`]) act as a near cache in
//! front of it.
//!
//! What each replica sends: the requests and trap hits it saw since its last update of a client,
//! applied on the server by one script (`update.lua`), atomically, with Redis's clock. What it
//! gets back: the client's shared history, which its verdicts use until the next update.
//!
//! When updates happen:
//! - a background task (the syncer) sends every client with unsent requests or hits once per
//!   `store-sync-ms`, and at once when a trap hit is queued;
//! - a verdict whose view of the client is older than twice that (or that has none: a client
//!   new to this replica) asks for an update itself and waits for it at most `store-wait-ms`.
//!
//! So a replica's view of a client it is answering for is at most about two sync intervals old.
//! When the store is slow or down, nothing waits longer than the budget: verdicts use the last
//! shared view plus everything seen locally since, which stays unsent until the store answers
//! again. Failures are counted per operation, and logged once per change of state.

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, IntoConnectionInfo, Pipeline, RedisError, RedisFuture, Script, Value};
use tokio::sync::{Notify, Semaphore, mpsc};

use super::near_cache::View;
use super::table::Table;
use super::{ClientSnapshot, decayed};
use crate::client::ClientKey;
use crate::observe::metrics::Metrics;

/// Where the shared state lives.
#[derive(Clone, PartialEq)]
pub struct StoreConfig {
    /// `redis://` or `rediss://` URLs: one for a single server, several for the seed nodes of a
    /// Redis Cluster; none for no store (records in this process only).
    pub urls: Vec<String>,
    /// A Redis Cluster even with a single seed node.
    pub cluster: bool,
    /// The environment variable holding the password, when it is not in the URL.
    pub password_env: Option<String>,
    /// Longest a verdict waits for the store.
    pub wait: Duration,
    /// How often unsent requests and hits are sent.
    pub sync: Duration,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            urls: Vec::new(),
            cluster: false,
            password_env: None,
            wait: Duration::from_millis(5),
            sync: Duration::from_millis(250),
        }
    }
}

impl StoreConfig {
    /// Whether a store is configured.
    pub fn is_configured(&self) -> bool {
        !self.urls.is_empty()
    }

    /// The store as it may be logged: scheme, hosts and database, never a password.
    pub fn describe(&self) -> String {
        let nodes: Vec<String> = self.urls.iter().map(|url| redact(url)).collect();
        if self.is_cluster() { format!("redis cluster {}", nodes.join(" ")) } else { nodes.join(" ") }
    }

    /// Whether the URLs name the seed nodes of a cluster.
    pub fn is_cluster(&self) -> bool {
        self.cluster || self.urls.len() > 1
    }
}

impl fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreConfig")
            .field("store", &self.describe())
            .field("password_env", &self.password_env)
            .field("wait", &self.wait)
            .field("sync", &self.sync)
            .finish()
    }
}

/// Why a store URL cannot be used (for `quagmire check` and config errors).
pub(crate) fn check_url(url: &str) -> Result<(), String> {
    if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
        return Err("the URL must start with redis:// or rediss:// (TLS)".into());
    }
    url.into_connection_info().map(|_| ()).map_err(|error| error.to_string())
}

/// `scheme://host:port/db` of `url`, without user or password.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "(invalid URL)".into();
    };
    let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    format!("{scheme}://{rest}")
}

/// Key of the sorted set of trapped clients (its own slot in a cluster).
const TRAPPED_KEY: &str = "quagmire:trapped";
/// Clients queued for the syncer at most; beyond, a client is queued again on its next request.
const QUEUE: usize = 65_536;
/// Clients sent per round of the syncer (all in flight at once, pipelined on the connection).
const ROUND: usize = 4096;
/// Verdict-started updates in flight at most; beyond, verdicts use their current view.
const REFRESHES: usize = 1024;
/// Connecting and answering, per command: beyond this the store counts as failing.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(1);

/// Lines about the store's health changing, at most, per [`HEALTH_LOG_WINDOW`]: a store that
/// flaps (answering some commands, refusing others) must not flood the log.
const HEALTH_LINES: u32 = 4;
const HEALTH_LOG_WINDOW: Duration = Duration::from_secs(60);

/// The store's health, as last seen.
const UNKNOWN: u8 = 0;
const UP: u8 = 1;
const DOWN: u8 = 2;

/// The connection to the shared store and the queue of clients to send.
pub(crate) struct Store {
    config: StoreConfig,
    client: super::ClientStateConfig,
    /// How long a trapped client's shared record outlives its last request (at least the idle
    /// timeout): a burned pass stays burned while it is valid.
    kept_idle: Duration,
    connection: OnceLock<Connection>,
    update: Script,
    trapped: Script,
    pass_use: Script,
    mint: Script,
    challenged: Script,
    crowd: Script,
    queue: mpsc::Sender<ClientKey>,
    /// Clients with trap hits to send at once (a client may be in both queues).
    hits: mpsc::Sender<ClientKey>,
    /// The receivers, taken by the syncer: changed clients, and clients with trap hits.
    queued: Mutex<Option<(mpsc::Receiver<ClientKey>, mpsc::Receiver<ClientKey>)>>,
    wake: Notify,
    health: AtomicU8,
    health_log: Mutex<HealthLog>,
    refreshes: Arc<Semaphore>,
    metrics: Arc<Metrics>,
}

/// The lines logged about the store's health in the current window, and those left out.
#[derive(Default)]
struct HealthLog {
    window_start: Option<Instant>,
    lines: u32,
    left_out: u64,
}

impl HealthLog {
    /// Whether a line may be logged now; if so, how many were left out before it.
    fn admit(&mut self, now: Instant) -> Option<u64> {
        if self.window_start.is_none_or(|start| now.duration_since(start) >= HEALTH_LOG_WINDOW) {
            self.window_start = Some(now);
            self.lines = 0;
        }
        if self.lines >= HEALTH_LINES {
            self.left_out += 1;
            return None;
        }
        self.lines += 1;
        Some(std::mem::take(&mut self.left_out))
    }
}

/// A single server (reconnecting by itself) or a cluster (following its slots).
#[derive(Clone)]
enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(connection) => connection.req_packed_command(cmd),
            Connection::Cluster(connection) => connection.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(connection) => connection.req_packed_commands(pipeline, offset, count),
            Connection::Cluster(connection) => connection.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(connection) => connection.get_db(),
            Connection::Cluster(connection) => connection.get_db(),
        }
    }
}

impl Store {
    /// Trapped clients' shared records kept for at least `at_least` after their last request.
    pub(crate) fn keep_trapped_for(mut self, at_least: Duration) -> Store {
        self.kept_idle = at_least;
        self
    }

    /// A store not yet connected; [`Store::run`] connects and sends.
    pub(crate) fn new(config: StoreConfig, client: super::ClientStateConfig, metrics: Arc<Metrics>) -> Store {
        let (queue, queued) = mpsc::channel(QUEUE);
        let (hits, urgent) = mpsc::channel(QUEUE);
        Store {
            config,
            kept_idle: client.idle_timeout,
            client,
            connection: OnceLock::new(),
            update: Script::new(include_str!("update.lua")),
            trapped: Script::new(include_str!("trapped.lua")),
            pass_use: Script::new(include_str!("pass_use.lua")),
            mint: Script::new(include_str!("mint.lua")),
            challenged: Script::new(include_str!("challenged.lua")),
            crowd: Script::new(include_str!("crowd.lua")),
            queue,
            hits,
            queued: Mutex::new(Some((queued, urgent))),
            wake: Notify::new(),
            health: AtomicU8::new(UNKNOWN),
            health_log: Mutex::new(HealthLog::default()),
            refreshes: Arc::new(Semaphore::new(REFRESHES)),
            metrics,
        }
    }

    /// The store's settings.
    pub(crate) fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// Queues `key` for the syncer; false when the queue is full (it is queued again later).
    pub(super) fn enqueue(&self, key: ClientKey) -> bool {
        self.queue.try_send(key).is_ok()
    }

    /// Sends `key` now rather than at the next interval (after a trap hit).
    pub(super) fn urgent(&self, key: ClientKey) {
        // A full queue is thousands of hits not yet sent: this one goes with the next interval.
        let _ = self.hits.try_send(key);
        self.wake.notify_one();
    }

    /// Whether the store is connected and not known to be failing: verdicts wait for it only then.
    pub(crate) fn usable(&self) -> bool {
        self.connection.get().is_some() && self.health.load(Ordering::Relaxed) != DOWN
    }

    /// A permit to start a verdict's update, while fewer than [`REFRESHES`] are in flight.
    pub(super) fn refresh_permit(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.refreshes.clone().try_acquire_owned().ok()
    }

    /// Connects (lazily: a store that is down at start is retried, never waited for) and runs
    /// the syncer until the task is dropped.
    pub(super) async fn run(self: Arc<Self>, records: Arc<Table>) {
        match self.connect() {
            Ok(connection) => {
                let _ = self.connection.set(connection);
            }
            Err(error) => {
                // The URL was checked with the config; only a bad TLS setup gets here.
                tracing::error!(store = %self.config.describe(), %error, "cannot use the client store; sharing is off");
                return;
            }
        }
        tracing::info!(store = %self.config.describe(), "sharing client state through the store");
        let receivers = self.queued.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        let Some((mut queued, mut urgent)) = receivers else {
            return;
        };
        let mut tick = tokio::time::interval(self.config.sync);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut keys = Vec::with_capacity(ROUND);
        loop {
            let interval = tokio::select! {
                _ = tick.tick() => true,
                () = self.wake.notified() => false,
            };
            if self.health.load(Ordering::Relaxed) != UP && !self.ping().await {
                // Down: keep the queue for when it answers again, rather than failing every client.
                if interval {
                    self.metrics.store_sync_round(false);
                }
                continue;
            }
            // Trap hits at once, everything else once an interval; and only what is queued now,
            // so a client queued again during this pass waits for the next (its requests are
            // sent in batches, not one update per request).
            let (mut hits, mut requests) = (urgent.len(), if interval { queued.len() } else { 0 });
            while hits + requests > 0 {
                while keys.len() < ROUND && hits > 0 {
                    hits -= 1;
                    keys.extend(urgent.try_recv().ok());
                }
                while keys.len() < ROUND && requests > 0 {
                    requests -= 1;
                    keys.extend(queued.try_recv().ok());
                }
                let store = &*self;
                let records = &records;
                let round = keys.drain(..).map(|key| store.sync(key, records, false));
                futures_util::future::join_all(round).await;
            }
            if interval {
                self.metrics.store_sync_round(true);
            }
        }
    }

    /// Sends `key`'s unsent requests and hits and takes the shared history back into its
    /// record in `records`; nothing when an update of it is already in flight, when nothing is
    /// unsent and `even_empty` is false, or when the record is gone.
    pub(super) async fn sync(&self, key: ClientKey, records: &Table, even_empty: bool) {
        let Some(connection) = self.connection.get() else {
            return;
        };
        let Some(batch) = records.peek(key, |record| record.take_unsent(even_empty)).flatten() else {
            return;
        };
        let client_key = format!("quagmire:{{{key}}}");
        let agent_key = format!("quagmire:{{{key}}}:ua");
        let mut invocation = self.update.key(&client_key);
        invocation
            .key(&agent_key)
            .arg(batch.delta.requests)
            .arg(batch.delta.hits)
            .arg(self.client.trap_half_life.as_secs_f64().max(0.001))
            .arg(super::RATE_HALF_LIFE.as_secs())
            .arg(self.client.requests_per_minute.max(1))
            .arg(idle_ms(&self.client))
            .arg(batch.user_agent.as_deref().unwrap_or(""))
            .arg(batch.asn.map(|asn| asn.to_string()).unwrap_or_default())
            .arg(batch.asn_org.as_deref().unwrap_or(""))
            .arg(self.client.request_burst.max(1))
            .arg(duration_ms(self.kept_idle.max(self.client.idle_timeout)));
        let mut connection = connection.clone();
        let result: Result<(u64, String, String, u8), RedisError> =
            invocation.invoke_async(&mut connection).await;
        let view = result.and_then(|(trap_hits, score, rate, limited)| {
            Ok(View {
                trap_hits,
                trap_score: parse_float(&score)?,
                request_rate: parse_float(&rate)?,
                rate_limited: limited == 1,
                at: Instant::now(),
            })
        });
        match view {
            Ok(view) => {
                self.succeeded();
                let hits = batch.delta.hits;
                if records.peek(key, |record| record.apply(view, &self.client)) == Some(true) {
                    self.enqueue_again(key, records);
                }
                if hits > 0 {
                    let result: Result<i64, RedisError> = self
                        .trapped
                        .key(TRAPPED_KEY)
                        .arg(key.to_string())
                        .arg(idle_ms(&self.client))
                        .arg(super::TRAPPED_CAPACITY)
                        .invoke_async(&mut connection)
                        .await;
                    match result {
                        Ok(_) => self.succeeded(),
                        Err(error) => self.failed("trapped_index", &error),
                    }
                }
            }
            Err(error) => {
                // A timed-out update may have been applied: sending it again could count a hit
                // twice, so it is dropped. Any other failure means it was not; it is sent again.
                let resend = !error.is_timeout();
                self.failed("update", &error);
                if records.peek(key, |record| record.restore(batch.delta, resend)) == Some(true) {
                    self.enqueue_again(key, records);
                }
            }
        }
    }

    /// Counts a page view of the pass `id` from `network` across every replica (`pass_use.lua`):
    /// its pace, its day's pages and its networks, as every replica's views left them.
    pub(crate) async fn pass_use(
        &self,
        id: u128,
        network: &str,
        terms: &PaceTerms,
    ) -> Result<SharedPassUse, RedisError> {
        let mut connection = self.connection.get().ok_or_else(not_connected)?.clone();
        let result: Result<(u64, u32, u32), RedisError> = self
            .pass_use
            .key(format!("quagmire:{{{}}}:use", ClientKey::pass(id)))
            .arg(network)
            .arg(terms.interval.as_secs_f64())
            .arg(terms.networks_kept)
            .arg(terms.window.as_secs_f64())
            .arg(terms.day.as_secs_f64())
            .arg(idle_ms(&self.client).max(duration_ms(terms.window)))
            .invoke_async(&mut connection)
            .await;
        match result {
            Ok((ahead, day_pages, networks)) => {
                self.succeeded();
                Ok(SharedPassUse { ahead: Duration::from_millis(ahead), day_pages, networks })
            }
            Err(error) => {
                self.failed("pass_use", &error);
                Err(error)
            }
        }
    }

    /// Counts an accepted answer to the challenge `id` (expiring at `expires`, Unix seconds) from
    /// `network` across every replica (`mint.lua`): the id once, whichever replica it reaches; the
    /// network's passes minted lately; on a `datacenter` network, the pass's turn, `cost` turns.
    pub(crate) async fn mint(
        &self,
        network: &str,
        id: u64,
        expires: u64,
        datacenter: bool,
        cost: u32,
        terms: &MintTerms,
    ) -> Result<SharedMint, RedisError> {
        let mut connection = self.connection.get().ok_or_else(not_connected)?.clone();
        let result: Result<(u8, String, u64), RedisError> = self
            .mint
            .key(format!("quagmire:{{net:{network}}}:mint"))
            .key(format!("quagmire:{{net:{network}}}:used"))
            .arg(format!("{id:016x}"))
            .arg(expires)
            .arg(terms.half_life.as_secs_f64())
            .arg(u8::from(datacenter))
            .arg(terms.interval.as_secs_f64())
            .arg(cost)
            .arg(terms.burst)
            .arg(terms.longest.as_secs_f64())
            .arg(terms.kept)
            .arg(duration_ms(terms.idle))
            .invoke_async(&mut connection)
            .await;
        let answer = result.and_then(|(outcome, minted, delay)| {
            let (minted, delay) = (parse_float(&minted)?, Duration::from_millis(delay));
            Ok(match outcome {
                0 => SharedMint::Minted { minted, delay },
                1 => SharedMint::Replayed { minted },
                _ => SharedMint::Busy { minted, retry: delay },
            })
        });
        match &answer {
            Ok(_) => self.succeeded(),
            Err(error) => self.failed("mint", error),
        }
        answer
    }

    /// Counts a challenge shown to the client `key` names (`quagmire:{chal:...}`) across every
    /// replica, remembered for `memory` from the first: the count since its last answer.
    pub(crate) async fn challenged(&self, key: &str, memory: Duration) -> Result<u32, RedisError> {
        let mut connection = self.connection.get().ok_or_else(not_connected)?.clone();
        let result = self.challenged.key(key).arg(duration_ms(memory)).invoke_async(&mut connection).await;
        self.outcome("challenged", result)
    }

    /// Counts a pass holder's page view behind `address` on the datacenter `network` across every
    /// replica (`crowd.lua`): the network's and the address's page views, decaying with `tau`.
    pub(crate) async fn crowd(
        &self,
        network: &str,
        address: &str,
        tau: Duration,
        idle: Duration,
    ) -> Result<(f64, f64), RedisError> {
        let mut connection = self.connection.get().ok_or_else(not_connected)?.clone();
        let result: Result<(String, String), RedisError> = self
            .crowd
            .key(format!("quagmire:{{crowd:{network}}}"))
            .key(format!("quagmire:{{crowd:{network}}}:{address}"))
            .arg(tau.as_secs_f64())
            .arg(duration_ms(idle))
            .invoke_async(&mut connection)
            .await;
        let pages =
            result.and_then(|(network, address)| Ok((parse_float(&network)?, parse_float(&address)?)));
        self.outcome("crowd", pages)
    }

    /// The challenges the client `key` names was shown since its last answer, on every replica.
    pub(crate) async fn unanswered(&self, key: &str) -> Result<u32, RedisError> {
        let mut connection = self.connection.get().ok_or_else(not_connected)?.clone();
        let result: Result<Option<u32>, RedisError> =
            redis::cmd("GET").arg(key).query_async(&mut connection).await;
        self.outcome("unanswered", result.map(Option::unwrap_or_default))
    }

    /// The client `key` names answered a challenge: its count starts again on every replica.
    pub(crate) async fn answered(&self, key: &str) -> Result<(), RedisError> {
        let mut connection = self.connection.get().ok_or_else(not_connected)?.clone();
        let result: Result<(), RedisError> = redis::cmd("DEL").arg(key).query_async(&mut connection).await;
        self.outcome("answered", result)
    }

    /// `result`, counted as a success or a failure of `operation`.
    fn outcome<T>(&self, operation: &'static str, result: Result<T, RedisError>) -> Result<T, RedisError> {
        match &result {
            Ok(_) => self.succeeded(),
            Err(error) => self.failed(operation, error),
        }
        result
    }

    fn enqueue_again(&self, key: ClientKey, records: &Table) {
        let queued = self.enqueue(key);
        records.peek(key, |record| record.set_queued(queued));
    }

    /// Trapped clients across every replica, highest trap score first, and how many of them are
    /// at or over `threshold`.
    pub(crate) async fn most_trapped(
        &self,
        limit: usize,
        threshold: f64,
    ) -> Result<(Vec<ClientSnapshot>, u64), RedisError> {
        let Some(connection) = self.connection.get() else {
            return Err(RedisError::from((redis::ErrorKind::Client, "the store is not connected yet")));
        };
        let mut connection = connection.clone();
        let result = self.read_trapped(&mut connection, threshold).await;
        // A read that worked says nothing of writes: only updates mark the store up.
        if let Err(error) = &result {
            self.failed("trapped_read", error);
        }
        let (mut clients, over) = result?;
        clients.truncate(limit);
        Ok((clients, over))
    }

    async fn read_trapped(
        &self,
        connection: &mut Connection,
        threshold: f64,
    ) -> Result<(Vec<ClientSnapshot>, u64), RedisError> {
        let members: Vec<String> = redis::cmd("ZREVRANGE")
            .arg(TRAPPED_KEY)
            .arg(0)
            .arg(super::TRAPPED_CAPACITY as i64 - 1)
            .query_async(connection)
            .await?;
        let (seconds, micros): (u64, u64) = redis::cmd("TIME").query_async(connection).await?;
        let now = seconds as f64 + micros as f64 / 1e6;
        let half_life = self.client.trap_half_life;
        let mut clients = Vec::with_capacity(members.len());
        let mut over = 0;
        for chunk in members.chunks(ROUND) {
            let reads = chunk.iter().map(|member| {
                let mut connection = connection.clone();
                async move {
                    let client_key = format!("quagmire:{{{member}}}");
                    let fields: Vec<Option<String>> = redis::cmd("HMGET")
                        .arg(&client_key)
                        .arg(&["hits", "score", "rate", "updated", "first", "updated", "asn", "org"])
                        .query_async(&mut connection)
                        .await?;
                    let agent: Option<String> = redis::cmd("GET")
                        .arg(format!("{client_key}:ua"))
                        .query_async(&mut connection)
                        .await?;
                    Ok::<_, RedisError>((member, fields, agent))
                }
            });
            for read in futures_util::future::join_all(reads).await {
                let (member, fields, agent) = read?;
                // A member whose record expired, or that is not a key this version writes.
                let Some(snapshot) = snapshot(member, &fields, agent, now, half_life) else {
                    continue;
                };
                over += u64::from(snapshot.history.trap_score >= threshold);
                clients.push(snapshot);
            }
        }
        clients.sort_by(|a, b| b.history.trap_score.total_cmp(&a.history.trap_score));
        Ok((clients, over))
    }

    async fn ping(&self) -> bool {
        let Some(connection) = self.connection.get() else {
            return false;
        };
        let result: Result<String, RedisError> =
            redis::cmd("PING").query_async(&mut connection.clone()).await;
        // An answer to PING only says it is worth trying the updates: a store out of memory, a
        // read-only replica after a failover or one refusing writes (MISCONF) answers PING too.
        // Only a successful update marks the store up.
        match result {
            Ok(_) => true,
            Err(error) => {
                self.failed("ping", &error);
                false
            }
        }
    }

    /// An update went through: the store is up.
    fn succeeded(&self) {
        let before = self.health.swap(UP, Ordering::Relaxed);
        if before != UP {
            self.metrics.store_up(true);
            let Some(left_out) = self.admit_health_line() else { return };
            if before == DOWN {
                tracing::info!(store = %self.config.describe(), left_out, "the client store answers again; sharing resumed");
            } else {
                tracing::info!(store = %self.config.describe(), left_out, "connected to the client store");
            }
        }
    }

    fn failed(&self, operation: &'static str, error: &RedisError) {
        self.metrics.store_error(operation);
        let before = self.health.swap(DOWN, Ordering::Relaxed);
        if before != DOWN {
            self.metrics.store_up(false);
            let Some(left_out) = self.admit_health_line() else { return };
            tracing::warn!(
                store = %self.config.describe(),
                %error,
                left_out,
                "the client store is not answering; verdicts use this replica's own records until it does"
            );
        }
    }

    /// Whether a line about a change of health may be logged now (see [`HEALTH_LINES`]), and how
    /// many changes went unlogged before it.
    fn admit_health_line(&self) -> Option<u64> {
        self.health_log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).admit(Instant::now())
    }

    fn connect(&self) -> Result<Connection, RedisError> {
        let password = match &self.config.password_env {
            Some(name) => match std::env::var(name) {
                Ok(password) => Some(password),
                Err(_) => {
                    tracing::warn!(variable = %name, "the store's password variable is not set; connecting without it");
                    None
                }
            },
            None => None,
        };
        if self.config.is_cluster() {
            let mut builder = ClusterClientBuilder::new(self.config.urls.clone())
                .connection_timeout(COMMAND_TIMEOUT)
                .response_timeout(COMMAND_TIMEOUT)
                .retries(1);
            if let Some(password) = password {
                builder = builder.password(password);
            }
            let client = builder.build()?;
            let config = redis::cluster::ClusterConfig::new()
                .set_connection_timeout(COMMAND_TIMEOUT)
                .set_response_timeout(COMMAND_TIMEOUT);
            Ok(Connection::Cluster(client.get_pending_async_connection_with_config(config)))
        } else {
            let mut info = self.config.urls[0].as_str().into_connection_info()?;
            if let Some(password) = password {
                let settings = info.redis_settings().clone().set_password(password);
                info = info.set_redis_settings(settings);
            }
            let client = redis::Client::open(info)?;
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(COMMAND_TIMEOUT))
                .set_response_timeout(Some(COMMAND_TIMEOUT))
                .set_number_of_retries(1)
                .set_max_delay(COMMAND_TIMEOUT);
            Ok(Connection::Single(ConnectionManager::new_lazy_with_config(client, config)?))
        }
    }
}

/// A pass's pace terms, for [`Store::pass_use`] (the challenge's burn limits).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PaceTerms {
    /// The page pace: one page view per this.
    pub interval: Duration,
    /// Networks remembered per pass (its limit plus one: enough to see it crossed).
    pub networks_kept: u32,
    /// How long a network counts after the pass's last use from it.
    pub window: Duration,
    /// The page budget's window.
    pub day: Duration,
}

/// What every replica's page views of a pass add up to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SharedPassUse {
    /// How far the pass's page pace ran ahead of now before this view.
    pub ahead: Duration,
    /// Page views in the pass's day, this one included.
    pub day_pages: u32,
    /// Networks it was used from within the window, this one included.
    pub networks: u32,
}

/// A network's minting terms, for [`Store::mint`] (the challenge's economy).
#[derive(Clone, Copy, Debug)]
pub(crate) struct MintTerms {
    /// The half-life of a network's count of passes minted.
    pub half_life: Duration,
    /// A datacenter network's passes start one per this, past its burst.
    pub interval: Duration,
    /// That burst, in turns.
    pub burst: u32,
    /// Turns are booked at most this far ahead.
    pub longest: Duration,
    /// Answered ids kept per network: past them, answers are refused as busy.
    pub kept: u32,
    /// A network's record is forgotten after this long without answers.
    pub idle: Duration,
}

/// What the store said of an accepted answer, with the network's passes minted lately.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum SharedMint {
    /// Minted; its pass starts `delay` from now (its network's turn).
    Minted { minted: f64, delay: Duration },
    /// The challenge was answered already, on some replica.
    Replayed { minted: f64 },
    /// Not minted: the network's ids or turns are full; try again in `retry`.
    Busy { minted: f64, retry: Duration },
}

fn not_connected() -> RedisError {
    RedisError::from((redis::ErrorKind::Client, "the store is not connected yet"))
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX).max(1)
}

fn idle_ms(config: &super::ClientStateConfig) -> u64 {
    config.idle_timeout.as_millis().max(1) as u64
}

fn parse_float(text: &str) -> Result<f64, RedisError> {
    text.parse::<f64>()
        .ok()
        .filter(|value| value.is_finite())
        .ok_or_else(|| RedisError::from((redis::ErrorKind::Parse, "not a number", text.to_string())))
}

/// The admin view of a stored client, decayed to `now` (Redis time).
fn snapshot(
    member: &str,
    fields: &[Option<String>],
    agent: Option<String>,
    now: f64,
    half_life: Duration,
) -> Option<ClientSnapshot> {
    let key: ClientKey = member.parse().ok()?;
    let number = |index: usize| fields.get(index)?.as_deref()?.parse::<f64>().ok().filter(|v| v.is_finite());
    let trap_hits = fields.first()?.as_deref()?.parse::<u64>().ok()?;
    let updated = number(3)?;
    let elapsed = (now - updated).max(0.0);
    let history = super::History {
        trap_hits,
        trap_score: decayed(number(1)?, elapsed, half_life),
        request_rate: decayed(number(2)?, elapsed, super::RATE_HALF_LIFE),
        rate_limited: false,
    };
    // Any number can be in the store (another version, a hand edit, an attacker with access):
    // one past what a time can hold is the epoch, never a panic.
    let time = |seconds: f64| {
        Duration::try_from_secs_f64(seconds.max(0.0))
            .ok()
            .and_then(|since| UNIX_EPOCH.checked_add(since))
            .unwrap_or(UNIX_EPOCH)
    };
    Some(ClientSnapshot {
        key,
        history,
        first_seen: number(4).map_or(SystemTime::UNIX_EPOCH, time),
        last_seen: number(5).map_or(SystemTime::UNIX_EPOCH, time),
        last_user_agent: agent.unwrap_or_default(),
        asn: fields.get(6)?.as_deref().and_then(|asn| asn.parse().ok()),
        asn_org: fields.get(7)?.clone().filter(|org| !org.is_empty()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_with_absurd_times_reads_as_the_epoch_not_a_panic() {
        let fields = |first: &str, last: &str| -> Vec<Option<String>> {
            ["3", "2.5", "1.0", "100", first, last, "64500", "Example"]
                .iter()
                .map(|v| Some(v.to_string()))
                .collect()
        };
        for (first, last) in [("1e300", "1e300"), ("1.7976931348623157e308", "-1e300"), ("inf", "NaN")] {
            let snapshot = snapshot("192.0.2.1", &fields(first, last), None, 200.0, Duration::from_secs(600))
                .expect("a client");
            assert_eq!(snapshot.history.trap_hits, 3);
            assert!(snapshot.first_seen >= UNIX_EPOCH && snapshot.last_seen >= UNIX_EPOCH);
        }
        let sane =
            snapshot("192.0.2.1", &fields("1000", "2000"), None, 200.0, Duration::from_secs(600)).unwrap();
        assert_eq!(sane.last_seen, UNIX_EPOCH + Duration::from_secs(2000));
    }
}
