//! The challenge's HTTP side: the page a challenge verdict answers with; the same page for
//! nginx, whose `auth_request` drops the verdict's body (`/challenge`, called from its
//! `error_page`); and the reserved path under the site's own host (`challenge { path }`, which
//! the proxy routes here unjudged): the answer, which sets the pass and sends the browser back
//! with a 303, and the page's script and worker.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::app::App;
use crate::challenge::{
    AnswerError, PassCheck, is_local_target, page::CONTENT_SECURITY_POLICY, page::SCRIPT, page::WORKER,
};
use crate::client::HeaderLines;
use crate::verify::signature::ACCEPT_SIGNATURE;

/// The status of a challenge page. nginx's `auth_request` passes on only 401 and 403 (403 is the
/// trap's there), so 401 it is, for every proxy alike: Caddy and Traefik copy any non-2xx
/// verdict to the client, HAProxy's configs return it. Browsers show a 401's page as any other.
pub(crate) const CHALLENGE_STATUS: StatusCode = StatusCode::UNAUTHORIZED;

/// A challenge page for the client at `address`, which sends it back to `target` once answered;
/// or, for a client holding a pass that starts in `early` seconds, the page that waits for it
/// (not a new challenge, which would book another turn).
pub(crate) fn page(
    app: &App,
    address: std::net::IpAddr,
    user_agent: &str,
    target: &str,
    note: Option<&str>,
    early: Option<u64>,
) -> Response {
    if let Some(seconds) = early {
        return html_page(CHALLENGE_STATUS, app.challenges.waiting_page(seconds, target, TURN));
    }
    let html = app.challenges.page(address, user_agent, target, note, SystemTime::now());
    html_page(CHALLENGE_STATUS, html)
}

/// When the pass in `cookies` starts, if it is one waiting for its turn.
pub(crate) fn early_pass<'c>(app: &App, cookies: impl IntoIterator<Item = &'c str>) -> Option<u64> {
    match app.challenges.pass_in_fields(cookies, SystemTime::now()) {
        PassCheck::Early(seconds) => Some(seconds),
        _ => None,
    }
}

/// Why a pass waits for its turn, as the waiting page says it.
const TURN: &str = "Many visitors from your network asked for this site's check lately, so new passes \
     for it are handed out in turn. Yours is ready, and starts soon.";

/// Why an answer waits for the network's queue to shorten.
const BUSY: &str = "Many visitors from your network asked for this site's check lately, and the queue \
     for new passes is full. This page tries again by itself.";

fn html_page(status: StatusCode, html: String) -> Response {
    let mut response = Response::new(Body::from(html));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    // Each page holds a fresh challenge: never from a cache.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    // An agent that can sign is asked to, instead of solving.
    headers.insert("accept-signature", HeaderValue::from_static(ACCEPT_SIGNATURE));
    response
}

/// `/challenge` on the verdict listener: the page for the request the proxy describes with the
/// same headers as a verdict request (nginx's `error_page 401`).
pub(crate) async fn page_for_proxy(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
) -> Response {
    let forwarded = super::forwarded::forwarded_request(peer.ip(), request.method(), request.headers());
    let address = app.identity.client_address(peer.ip(), &forwarded.headers);
    let user_agent = forwarded.header("user-agent").unwrap_or("");
    let early = early_pass(&app, forwarded.headers.lines("cookie"));
    let mut response = page(&app, address, user_agent, &forwarded.uri, None, early);
    response.headers_mut().insert(super::forwarded::VERDICT, HeaderValue::from_static("challenge"));
    response
}

/// `<path>answer?c=<challenge>&n=<nonce>&to=<target>` (no `n`: the no-JavaScript wait). A right
/// answer sets the pass and redirects (303) to `target`, a path on the same host; a wrong one
/// shows a fresh challenge saying why; a target that is not a local path is refused.
pub(crate) async fn answer(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
) -> Response {
    let (mut token, mut nonce, mut target) = (None, None, None);
    for (name, value) in form_urlencoded::parse(request.uri().query().unwrap_or("").as_bytes()) {
        match &*name {
            "c" => token = Some(value.into_owned()),
            "n" => nonce = Some(value.into_owned()),
            "to" => target = Some(value.into_owned()),
            _ => {}
        }
    }
    let target = target.unwrap_or_else(|| "/".into());
    if !is_local_target(&target) {
        app.metrics.challenge_answer("bad_target", None);
        return (StatusCode::BAD_REQUEST, "The return address must be a path on this site.\n")
            .into_response();
    }
    let headers = request.headers();
    let address = app.identity.client_address(peer.ip(), headers);
    let user_agent = headers.get(header::USER_AGENT).and_then(|value| value.to_str().ok()).unwrap_or("");
    let now = SystemTime::now();
    let datacenter = crate::verdict::is_datacenter(&app.rules.compiled(), &app.geo.lookup(address));
    let mut checked = match &token {
        Some(token) => app.challenges.answer(token, nonce.as_deref(), address, user_agent, datacenter, now),
        None => Err(AnswerError::Malformed),
    };
    // With a shared store, the answer counts as every replica's answers from its network add up.
    if let (Ok(answered), Some(store)) = (&checked, app.clients.shared_store())
        && store.usable()
    {
        checked = app.challenges.answer_shared(store, *answered, datacenter).await;
    }
    match checked {
        Ok(answered) => {
            app.metrics.challenge_answer(answered.earned.as_str(), Some(answered.solved_in));
            app.metrics.pass_minted(answered.extra_bits, answered.starts_in);
            app.challenges.answered_everywhere(app.clients.shared_store(), address, user_agent);
            let secure =
                headers.get("x-forwarded-proto").and_then(|value| value.to_str().ok()).is_some_and(|proto| {
                    proto.split(',').next().unwrap_or("").trim().eq_ignore_ascii_case("https")
                });
            // A pass past the network's burst starts at its turn: whole seconds, rounded up, so
            // that it is never good before.
            let wait = answered.starts_in.as_secs() + u64::from(answered.starts_in.subsec_nanos() > 0);
            let starts = now + Duration::from_secs(wait);
            let cookie = app.challenges.set_cookie(&app.challenges.mint(answered.earned, starts), secure);
            let mut response = if wait == 0 {
                see_other(&target)
            } else {
                html_page(StatusCode::OK, app.challenges.waiting_page(wait, &target, TURN))
            };
            if let Ok(cookie) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(header::SET_COOKIE, cookie);
            }
            response
        }
        Err(AnswerError::Busy(retry)) => {
            app.metrics.challenge_answer(AnswerError::Busy(retry).as_str(), None);
            // A right answer, refused for its network's sake: the client answered, and a person
            // who comes back when the page says is never counted as one who does not.
            app.challenges.answered_everywhere(app.clients.shared_store(), address, user_agent);
            // Not a new challenge, whose script would answer again at once: a wait, then the
            // page again, which shows a challenge when there is room.
            let seconds = retry.as_secs().max(1);
            let mut response =
                html_page(StatusCode::TOO_MANY_REQUESTS, app.challenges.waiting_page(seconds, &target, BUSY));
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
            response
        }
        Err(error) => {
            app.metrics.challenge_answer(error.as_str(), None);
            // A tab whose challenge was overtaken (another tab answered first, or the answer came
            // back twice) while the browser holds a good pass: the page, not a new check. An
            // answer never takes a good pass away, nor makes a person with one work again.
            let cookies = headers.get_all(header::COOKIE).iter().filter_map(|value| value.to_str().ok());
            if matches!(app.challenges.pass_in_fields(cookies, now), PassCheck::Valid(_)) {
                return see_other(&target);
            }
            // The page below is a fresh challenge. Asked for without a real token (a bare
            // `answer`), it is one more challenge shown to whoever asked, or the answer path
            // would hand out challenges no count ever sees.
            if matches!(error, AnswerError::Malformed | AnswerError::Forged) {
                let (store, now) = (app.clients.shared_store(), std::time::Instant::now());
                app.challenges.challenged_everywhere(store, address, user_agent, now);
            }
            let note =
                format!("Your browser's last answer was not accepted ({error}), so here is a new check.");
            let mut response = page(&app, address, user_agent, &target, Some(&note), None);
            *response.status_mut() = StatusCode::FORBIDDEN;
            response
        }
    }
}

/// A 303 to `target`, which the caller has checked is a path on this host (so the browser stays
/// on the site).
fn see_other(target: &str) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SEE_OTHER;
    if let Ok(location) = HeaderValue::from_str(target) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `<path>challenge.js`.
pub(crate) async fn script() -> Response {
    javascript(SCRIPT)
}

/// `<path>worker.js`.
pub(crate) async fn worker() -> Response {
    javascript(WORKER)
}

fn javascript(source: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("text/javascript; charset=utf-8")),
            (header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=3600")),
            (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        ],
        source,
    )
        .into_response()
}
