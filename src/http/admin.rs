//! Operators' endpoints on the verdict listener: `/metrics` (Prometheus text format) and
//! `/api/trapped` (the most active trapped clients as JSON). Both are bounded in size and cost.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use crate::app::App;

/// Most clients `/api/trapped` lists, whatever `limit` asks for.
const MAX_TRAPPED: usize = 1000;

/// The metrics, with the gauges that are computed at scrape time brought up to date.
pub(crate) async fn metrics(State(app): State<Arc<App>>) -> Response {
    let over_threshold = app.clients.count_over(app.rules.trap_threshold());
    let text = app.metrics.render(app.clients.len(), over_threshold);
    let content_type = HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8");
    ([(header::CONTENT_TYPE, content_type)], text).into_response()
}

/// `?limit=N` for `/api/trapped`.
#[derive(Deserialize)]
pub(crate) struct TrappedQuery {
    limit: Option<usize>,
}

/// One trapped client.
#[derive(Serialize)]
struct TrappedClient {
    client: String,
    asn: Option<u32>,
    asn_org: Option<String>,
    last_user_agent: String,
    trap_hits: u64,
    trap_score: f64,
    first_seen: u64,
    last_seen: u64,
}

/// The clients with the highest trap scores, most active first (default 50, at most 1000).
pub(crate) async fn trapped(State(app): State<Arc<App>>, Query(query): Query<TrappedQuery>) -> Response {
    let limit = query.limit.unwrap_or(50).min(MAX_TRAPPED);
    let clients: Vec<TrappedClient> = app
        .clients
        .most_trapped(limit)
        .into_iter()
        .map(|client| TrappedClient {
            client: client.key.to_string(),
            asn: client.asn,
            asn_org: client.asn_org,
            last_user_agent: client.last_user_agent,
            trap_hits: client.history.trap_hits,
            trap_score: (client.history.trap_score * 100.0).round() / 100.0,
            first_seen: unix_seconds(client.first_seen),
            last_seen: unix_seconds(client.last_seen),
        })
        .collect();
    Json(clients).into_response()
}

fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs())
}
