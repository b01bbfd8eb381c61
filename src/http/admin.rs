//! Operators' endpoints: `/metrics` (Prometheus text format) and `/api/trapped` (the most active
//! trapped clients as JSON), on the verdict listener or on an admin listener of their own, behind
//! an optional bearer token. Both are bounded in size and cost.
//!
//! What a scrape reads from the client records (the trapped clients, the gauges) is one snapshot,
//! taken in the background (the shared store's list within [`STORE_READ`], or a walk of this
//! replica's records on the blocking pool) at most once per [`SNAPSHOT_AGE`]. A scrape serves the
//! last snapshot and, when it is old, starts the next one without waiting for it: no lock is held
//! across a store's reads, and only the very first scrape waits for a snapshot to exist.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwapOption;
use axum::extract::{Extension, Query, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::watch;

use crate::app::App;
use crate::client_state::ClientSnapshot;
use crate::observe::metrics::Scope;

/// Most clients `/api/trapped` lists, whatever `limit` asks for.
const MAX_TRAPPED: usize = 1000;

/// Every trapped record a snapshot takes: all the trapped clients there are (this replica's
/// index and the store's are both bounded to this), so that the blocklist chooses from every one
/// and only `/api/trapped`'s own limit cuts.
const SNAPSHOT_TRAPPED: usize = crate::client_state::TRAPPED_CAPACITY as usize;

/// Header naming how many entries an answer left out (absent when none).
const LEFT_OUT: &str = "x-quagmire-left-out";

/// How long a snapshot of the client records serves scrapes: Prometheus scrapes every 15 s or
/// so, so a second-old gauge is as good as a fresh one.
const SNAPSHOT_AGE: Duration = Duration::from_secs(1);

/// Longest a scrape waits for a new snapshot before it serves the last one.
const FRESH_WAIT: Duration = Duration::from_millis(250);

/// Longest a snapshot waits for the shared store's list of trapped clients before it falls back
/// to this replica's own records.
const STORE_READ: Duration = Duration::from_secs(2);

/// The admin endpoints' shared state: the token and the last snapshot.
pub(crate) struct Admin {
    /// BLAKE3 of the required bearer token: comparing hashes is constant-time (`blake3::Hash`'s
    /// equality is), so the comparison leaks nothing about the token.
    token: Option<blake3::Hash>,
    /// The last snapshot taken.
    snapshot: ArcSwapOption<Snapshot>,
    /// Set while a snapshot is being taken, so that one is taken at a time.
    refreshing: Arc<AtomicBool>,
    /// Counts snapshots taken, for the first scrape to wait on.
    taken: watch::Sender<u64>,
}

impl Admin {
    /// Requiring `token` as a bearer token, if given.
    pub(crate) fn new(token: Option<&str>) -> Self {
        Admin {
            token: token.map(|token| blake3::hash(token.as_bytes())),
            snapshot: ArcSwapOption::empty(),
            refreshing: Arc::new(AtomicBool::new(false)),
            taken: watch::Sender::new(0),
        }
    }
}

/// Clears `refreshing` however the refresh ends (a panic in the walk included), so that a later
/// scrape starts the next one.
struct Refreshing(Arc<AtomicBool>);

impl Drop for Refreshing {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// What scrapes read from the client records, taken at once.
struct Snapshot {
    taken: Instant,
    /// Every trapped client, one per network first ([`spread_over_networks`]).
    trapped: Vec<ClientSnapshot>,
    over_threshold: u64,
    /// Whether `trapped` and `over_threshold` come from the shared store or this replica.
    scope: Scope,
    entries: u64,
    /// `/api/trapped` bodies rendered from this snapshot, by limit, so that scrapers looping on
    /// a large list render it once per snapshot, not once per scrape.
    rendered: std::sync::Mutex<Vec<(usize, bytes::Bytes)>>,
}

/// Limits whose rendered bodies a snapshot keeps; past this it keeps none more.
const RENDERED_LIMITS: usize = 8;

/// The metrics, with the gauges that come from the client records brought up to date.
pub(crate) async fn metrics(
    State(app): State<Arc<App>>,
    Extension(admin): Extension<Arc<Admin>>,
    headers: HeaderMap,
) -> Response {
    if let Some(refusal) = refusal(&admin, &headers) {
        return refusal;
    }
    let snapshot = snapshot(&app, &admin).await;
    let workers = app.rules.pool_stats();
    app.metrics.rule_workers(workers.active, workers.abandoned, workers.queued);
    let lanes = app.rules.inline_stats();
    app.metrics.rule_lanes(lanes.answered, lanes.escalated, lanes.passed);
    app.metrics.network_pressure(&app.challenges.most_pressed(PRESSED_NETWORKS));
    let text = app.metrics.render(snapshot.entries, snapshot.over_threshold, snapshot.scope);
    let content_type = HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8");
    ([(header::CONTENT_TYPE, content_type)], text).into_response()
}

/// Networks the pressure gauge names: a bounded label set.
const PRESSED_NETWORKS: usize = 10;

/// `?limit=N` for `/api/trapped`.
#[derive(Deserialize)]
pub(crate) struct TrappedQuery {
    limit: Option<usize>,
}

/// One trapped client.
#[derive(Serialize)]
struct TrappedClient<'a> {
    client: String,
    asn: Option<u32>,
    asn_org: Option<&'a str>,
    last_user_agent: &'a str,
    trap_hits: u64,
    trap_score: f64,
    first_seen: u64,
    last_seen: u64,
}

/// The clients with the highest trap scores (default 50, at most 1000): the most trapped of each
/// network (IPv4 /24, IPv6 /48) first, then the second of each, so that one network's many
/// decoys cannot push another network's attacker off the list. How many were left out is in the
/// `X-Quagmire-Left-Out` header.
pub(crate) async fn trapped(
    State(app): State<Arc<App>>,
    Extension(admin): Extension<Arc<Admin>>,
    headers: HeaderMap,
    Query(query): Query<TrappedQuery>,
) -> Response {
    if let Some(refusal) = refusal(&admin, &headers) {
        return refusal;
    }
    let limit = query.limit.unwrap_or(50).min(MAX_TRAPPED);
    let snapshot = snapshot(&app, &admin).await;
    let json = HeaderValue::from_static("application/json");
    let left_out = HeaderValue::from(snapshot.trapped.len().saturating_sub(limit));
    let rendered = snapshot.rendered.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, body)) = rendered.iter().find(|(kept, _)| *kept == limit) {
        return ([(header::CONTENT_TYPE, json), (HeaderName::from_static(LEFT_OUT), left_out)], body.clone())
            .into_response();
    }
    drop(rendered);
    let body = bytes::Bytes::from(render_trapped(&snapshot, limit));
    let mut rendered = snapshot.rendered.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if rendered.len() < RENDERED_LIMITS {
        rendered.push((limit, body.clone()));
    }
    drop(rendered);
    ([(header::CONTENT_TYPE, json), (HeaderName::from_static(LEFT_OUT), left_out)], body).into_response()
}

/// `/api/blocklist`'s filters and format.
#[derive(Deserialize)]
pub(crate) struct BlocklistQuery {
    /// Lowest trap score listed (default: the rules' trap threshold).
    #[serde(rename = "min-score")]
    min_score: Option<f64>,
    /// Only clients seen within this many seconds (default: all the snapshot holds).
    #[serde(rename = "max-age-seconds")]
    max_age_seconds: Option<u64>,
    /// `plain` (one address or range per line, the default) or `nftables` (a table with two
    /// interval sets, for `nft -f`).
    format: Option<String>,
}

/// Every trapped client over the score as a blocklist for a firewall or fail2ban: addresses and
/// IPv6 /64s, aggregated into ranges where that is exact. Chosen from every trapped record, not
/// from `/api/trapped`'s first thousand; only the trapped index's own bound
/// ([`SNAPSHOT_TRAPPED`]) can leave a client out, and then the answer says so (a comment line
/// and the `X-Quagmire-Left-Out` header).
pub(crate) async fn blocklist(
    State(app): State<Arc<App>>,
    Extension(admin): Extension<Arc<Admin>>,
    headers: HeaderMap,
    Query(query): Query<BlocklistQuery>,
) -> Response {
    if let Some(refusal) = refusal(&admin, &headers) {
        return refusal;
    }
    let nftables = match query.format.as_deref() {
        None | Some("plain") => false,
        Some("nftables") => true,
        Some(other) => {
            let message = format!("unknown format `{other}`: plain or nftables\n");
            return (StatusCode::BAD_REQUEST, message).into_response();
        }
    };
    let snapshot = snapshot(&app, &admin).await;
    let min_score = query.min_score.unwrap_or(app.config.rules.trap_threshold);
    let now = SystemTime::now();
    let networks: Vec<ipnet::IpNet> = snapshot
        .trapped
        .iter()
        .filter(|client| client.history.trap_score >= min_score)
        .filter(|client| {
            query.max_age_seconds.is_none_or(|age| {
                now.duration_since(client.last_seen).is_ok_and(|since| since.as_secs() <= age)
                    || client.last_seen > now
            })
        })
        .filter_map(|client| client.key.network())
        .collect();
    let networks = ipnet::IpNet::aggregate(&networks);
    // A full index may have dropped the oldest trapped clients: said, not hidden.
    let full = snapshot.trapped.len() >= SNAPSHOT_TRAPPED;
    let mut text = String::new();
    if full {
        text = format!(
            "# the trapped index is full ({SNAPSHOT_TRAPPED} clients): clients trapped longest ago may be left out\n"
        );
    }
    text.push_str(&if nftables { nftables_sets(&networks) } else { plain_list(&networks) });
    let plain = HeaderValue::from_static("text/plain; charset=utf-8");
    let left_out = HeaderValue::from_static(if full { "unknown" } else { "0" });
    ([(header::CONTENT_TYPE, plain), (HeaderName::from_static(LEFT_OUT), left_out)], text).into_response()
}

/// `clients` (highest trap score first) reordered so that each network's (IPv4 /24, IPv6 /48)
/// most trapped client comes before any network's second, and so on: the order `/api/trapped`
/// cuts in.
fn spread_over_networks(mut clients: Vec<ClientSnapshot>) -> Vec<ClientSnapshot> {
    clients.sort_by(|a, b| b.history.trap_score.total_cmp(&a.history.trap_score));
    let mut seen: std::collections::HashMap<Option<ipnet::IpNet>, usize> = std::collections::HashMap::new();
    let mut ranked: Vec<(usize, ClientSnapshot)> = clients
        .into_iter()
        .map(|client| {
            let network = client.key.network().map(|network| {
                let wide = if matches!(network, ipnet::IpNet::V4(_)) { 24 } else { 48 };
                ipnet::IpNet::new(network.addr(), wide.min(network.prefix_len()))
                    .map_or(network, |n| n.trunc())
            });
            let count = seen.entry(network).or_default();
            *count += 1;
            (*count, client)
        })
        .collect();
    // Stable: within a rank, the higher score first, as sorted above.
    ranked.sort_by_key(|(rank, _)| *rank);
    ranked.into_iter().map(|(_, client)| client).collect()
}

fn plain_list(networks: &[ipnet::IpNet]) -> String {
    networks.iter().map(|network| format!("{}\n", shortest(network))).collect()
}

/// An address as itself, a range as a CIDR.
fn shortest(network: &ipnet::IpNet) -> String {
    if network.prefix_len() == network.max_prefix_len() {
        network.addr().to_string()
    } else {
        network.to_string()
    }
}

/// `table inet quagmire` with the sets `trapped_v4` and `trapped_v6`, replaced whole when loaded.
fn nftables_sets(networks: &[ipnet::IpNet]) -> String {
    let mut text =
        String::from("# quagmire's trapped clients: nft -f FILE, then match on @trapped_v4 / @trapped_v6\n");
    text.push_str("table inet quagmire {}\ndelete table inet quagmire\ntable inet quagmire {\n");
    for (name, kind, v4) in [("trapped_v4", "ipv4_addr", true), ("trapped_v6", "ipv6_addr", false)] {
        let elements: Vec<String> = networks
            .iter()
            .filter(|network| matches!(network, ipnet::IpNet::V4(_)) == v4)
            .map(shortest)
            .collect();
        text.push_str(&format!("    set {name} {{\n        type {kind}\n        flags interval\n"));
        if !elements.is_empty() {
            text.push_str(&format!("        elements = {{ {} }}\n", elements.join(", ")));
        }
        text.push_str("    }\n");
    }
    text.push_str("}\n");
    text
}

/// The JSON list of the first `limit` trapped clients of `snapshot`.
fn render_trapped(snapshot: &Snapshot, limit: usize) -> Vec<u8> {
    let clients: Vec<TrappedClient> = snapshot
        .trapped
        .iter()
        .take(limit)
        .map(|client| TrappedClient {
            client: client.key.to_string(),
            asn: client.asn,
            asn_org: client.asn_org.as_deref(),
            last_user_agent: &client.last_user_agent,
            trap_hits: client.history.trap_hits,
            trap_score: (client.history.trap_score * 100.0).round() / 100.0,
            first_seen: unix_seconds(client.first_seen),
            last_seen: unix_seconds(client.last_seen),
        })
        .collect();
    // Serializing plain structs into a vector cannot fail.
    serde_json::to_vec(&clients).unwrap_or_default()
}

/// The last snapshot; when it is older than [`SNAPSHOT_AGE`], the next one is started in the
/// background. Only when none exists yet does this wait, for at most the store's read time.
async fn snapshot(app: &Arc<App>, admin: &Arc<Admin>) -> Arc<Snapshot> {
    let mut taken = admin.taken.subscribe();
    let current = admin.snapshot.load_full();
    let fresh = current.as_ref().is_some_and(|snapshot| snapshot.taken.elapsed() < SNAPSHOT_AGE);
    if !fresh && !admin.refreshing.swap(true, Ordering::SeqCst) {
        let refreshing = Refreshing(admin.refreshing.clone());
        let (app, owner) = (app.clone(), admin.clone());
        tokio::spawn(async move {
            let _refreshing = refreshing;
            let snapshot = take_snapshot(&app).await;
            owner.snapshot.store(Some(Arc::new(snapshot)));
            owner.taken.send_modify(|count| *count += 1);
        });
    }
    if fresh {
        return current.unwrap_or_else(|| Arc::new(Snapshot::empty()));
    }
    // A snapshot usually takes milliseconds: wait that long for the new one, so a scrape after a
    // quiet spell is not a spell old; past it, serve the last one (a store that hangs never holds
    // a scrape for long). Only the first scrape, with nothing to serve, waits for the store.
    let wait = if current.is_some() { FRESH_WAIT } else { STORE_READ + SNAPSHOT_AGE };
    let _ = tokio::time::timeout(wait, taken.changed()).await;
    admin.snapshot.load_full().or(current).unwrap_or_else(|| Arc::new(Snapshot::empty()))
}

/// A snapshot now: the shared store's trapped clients (within [`STORE_READ`]; on failure, counted
/// and logged by the store, this replica's own records answer), or a walk of this replica's
/// records on the blocking pool.
async fn take_snapshot(app: &Arc<App>) -> Snapshot {
    if let Some(store) = app.clients.store() {
        let threshold = app.rules.trap_threshold();
        if let Ok(Ok((trapped, over_threshold))) =
            tokio::time::timeout(STORE_READ, store.most_trapped(SNAPSHOT_TRAPPED, threshold)).await
        {
            return Snapshot {
                taken: Instant::now(),
                trapped: spread_over_networks(trapped),
                over_threshold,
                scope: Scope::Shared,
                entries: app.clients.len(),
                rendered: std::sync::Mutex::default(),
            };
        }
    }
    let walker = app.clone();
    let taken = tokio::task::spawn_blocking(move || Snapshot {
        taken: Instant::now(),
        trapped: spread_over_networks(walker.clients.most_trapped(SNAPSHOT_TRAPPED)),
        over_threshold: walker.clients.count_over(walker.rules.trap_threshold()),
        scope: Scope::Replica,
        entries: walker.clients.len(),
        rendered: std::sync::Mutex::default(),
    })
    .await;
    // The walk panicking would be a bug; the scrape still answers, from nothing.
    taken.unwrap_or_else(|_| Snapshot::empty())
}

impl Snapshot {
    fn empty() -> Snapshot {
        Snapshot {
            taken: Instant::now(),
            trapped: Vec::new(),
            over_threshold: 0,
            scope: Scope::Replica,
            entries: 0,
            rendered: std::sync::Mutex::default(),
        }
    }
}

/// The 401 to answer when the request lacks the configured bearer token; `None` when it has it
/// or no token is configured.
fn refusal(admin: &Admin, headers: &HeaderMap) -> Option<Response> {
    let expected = admin.token.as_ref()?;
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer ")))
        .map(str::trim);
    match given {
        Some(token) if blake3::hash(token.as_bytes()) == *expected => None,
        _ => Some(
            (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"quagmire\""))],
                "a bearer token is required\n",
            )
                .into_response(),
        ),
    }
}

fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs())
}
