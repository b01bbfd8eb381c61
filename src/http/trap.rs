//! The trap handler: request → (host, path) → generated page, optionally dripped slowly; the
//! client it is served to gets a trap hit.
//!
//! Traefik's `errors` middleware calls the trap service with the original URL in a `url=` query
//! parameter; when present, the page is generated for that URL, so a bot sees the same page
//! whether it reached the trap directly or through Traefik.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::stream;

use crate::app::App;
use crate::challenge::PassCheck;

use super::forwarded::first_header;
use crate::client::ClientKey;
use crate::observe::metrics::HitSource;

const HTML: HeaderValue = HeaderValue::from_static("text/html; charset=utf-8");

/// Serves the page for the request's URL, and records a trap hit for the client.
pub(crate) async fn page(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let (host, target) = page_address(&uri, &headers);
    // Another site's images or links pointing here are that site's doing, not the reader's: the
    // page is served, but no hit is recorded (see `trap_url::is_evidence`).
    if crate::trap::urls::is_evidence(&headers, &host) {
        let client = app.identity.client_address(peer.ip(), &headers);
        let user_agent = headers.get(header::USER_AGENT).and_then(|value| value.to_str().ok()).unwrap_or("");
        app.clients.record_trap_hit(app.identity.key(client), user_agent);
        app.metrics.trap_hit(HitSource::TrapListener);
        // A pass's holder walking the trap: the hit counts against the pass too, wherever it goes.
        let cookies = headers.get_all(header::COOKIE).into_iter().filter_map(|value| value.to_str().ok());
        if let PassCheck::Valid(pass) = app.challenges.pass_in_fields(cookies, SystemTime::now()) {
            app.clients.record_trap_hit(ClientKey::pass(pass.id), user_agent);
        }
    }
    // The page's bytes as written: they are UTF-8 by construction (whole corpus words and ASCII
    // markup, which the generator's tests check), so checking each page again would be waste.
    let mut body = Vec::new();
    app.generator.write_page(&mut body, &host, &target);
    app.metrics.trap_page(body.len());
    let drip = &app.config.trap.drip;
    if drip.enabled
        && let Ok(permit) = app.drip_slots.clone().try_acquire_owned()
    {
        let pause = Duration::from_secs_f64(drip.chunk_bytes as f64 / f64::from(drip.bytes_per_second));
        let body = dripped(Bytes::from(body), drip.chunk_bytes, pause, permit, app.clone());
        return ([(header::CONTENT_TYPE, HTML)], body).into_response();
    }
    ([(header::CONTENT_TYPE, HTML)], body).into_response()
}

/// The (host, path-and-query) to generate for: the Traefik `url=` form, or the request itself.
/// Public for the fuzz targets (`fuzz/`).
pub fn page_address(uri: &Uri, headers: &HeaderMap) -> (String, String) {
    let request_host = first_header(headers, "x-forwarded-host")
        .or_else(|| first_header(headers, "host"))
        .or_else(|| uri.host())
        .unwrap_or("localhost");
    if let Some(query) = uri.query()
        && let Some((_, original)) = form_urlencoded::parse(query.as_bytes()).find(|(key, _)| key == "url")
        && let Some((host, target)) = split_url(&original)
    {
        return (host.unwrap_or(request_host).to_string(), target.to_string());
    }
    let target = uri.path_and_query().map_or("/", |target| target.as_str());
    (request_host.to_string(), target.to_string())
}

/// Splits `https://host/path?query` or `/path?query` into host and target.
fn split_url(url: &str) -> Option<(Option<&str>, &str)> {
    if url.starts_with('/') && !url.starts_with("//") {
        return Some((None, url));
    }
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"))?;
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, target) = rest.split_at(authority_end);
    let host = authority.rsplit('@').next().filter(|host| !host.is_empty());
    Some((host, if target.is_empty() { "/" } else { target }))
}

/// The page as a body that sends `chunk` bytes, waits `pause`, and so on; the drip slot is held
/// until the body is finished or the client goes away.
fn dripped(
    page: Bytes,
    chunk: usize,
    pause: Duration,
    permit: tokio::sync::OwnedSemaphorePermit,
    app: Arc<App>,
) -> Body {
    let started = Instant::now();
    let state = (page, 0usize, permit, app);
    Body::from_stream(stream::unfold(state, move |(page, sent, permit, app)| async move {
        if sent >= page.len() {
            app.metrics.dripped(started.elapsed());
            return None;
        }
        if sent > 0 {
            tokio::time::sleep(pause).await;
        }
        let end = (sent + chunk).min(page.len());
        let piece = page.slice(sent..end);
        Some((Ok::<_, std::convert::Infallible>(piece), (page, end, permit, app)))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(uri: &str, headers: &[(&str, &str)]) -> (String, String) {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.insert(axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
        }
        page_address(&uri.parse().unwrap(), &map)
    }

    #[test]
    fn plain_requests_use_host_and_target() {
        assert_eq!(
            address("/a/b?c=1", &[("host", "example.org")]),
            ("example.org".into(), "/a/b?c=1".into())
        );
        assert_eq!(
            address("/a", &[("host", "trap:8421"), ("x-forwarded-host", "site.example, proxy")]),
            ("site.example".into(), "/a".into())
        );
        assert_eq!(address("/", &[]), ("localhost".into(), "/".into()));
    }

    #[test]
    fn traefik_url_parameter_names_the_original_url() {
        let original = "/?url=https%3A%2F%2Fsite.example%2Fblog%2Fpost%3Fpage%3D2";
        assert_eq!(
            address(original, &[("host", "trap")]),
            ("site.example".into(), "/blog/post?page=2".into())
        );
        assert_eq!(address("/?url=%2Fdocs%2Fa", &[("host", "site")]), ("site".into(), "/docs/a".into()));
        assert_eq!(address("/?url=http%3A%2F%2Fsite.example", &[]), ("site.example".into(), "/".into()));
        // A value that is no URL leaves the request as it is.
        assert_eq!(address("/x?url=nonsense", &[("host", "h")]), ("h".into(), "/x?url=nonsense".into()));
    }
}
