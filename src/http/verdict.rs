//! The forward-auth handler: the proxy's auth request → [`ForwardedRequest`] → decision →
//! status and headers the proxy acts on.
//!
//! Every response carries every header an integration copies (`X-Quagmire-Verdict`,
//! `X-Quagmire-Rule`, `X-Quagmire-Location`), empty when there is nothing to say, because Caddy
//! 2.6 writes a literal placeholder for a header that is missing.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;

use crate::app::App;
use crate::client::HeaderLines;
use crate::config::{Answer, Mode};
use crate::rules::Verdict;
use crate::support::log_field::clipped;
use crate::verdict::{ForwardedRequest, How, Judgement, decide};

use super::forwarded::{LOCATION, MODE, RULE, VERDICT, forwarded_request};

/// The body of a trap answer in status mode: bland, since stock proxies may show it.
const TRAP_BODY: &str = "Forbidden\n";

/// Judges the request the proxy forwarded.
pub(crate) async fn verdict(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    // The whole request rather than a `HeaderMap` extractor, which would clone the headers.
    request: Request,
) -> Response {
    let started = Instant::now();
    // The request's time is when the verdict started: one clock read for both.
    let request = ForwardedRequest {
        at: Some(started),
        ..forwarded_request(peer.ip(), request.method(), request.headers())
    };
    let judgement = decide(&app, request, How::LIVE).await;
    let elapsed = started.elapsed();
    let decision = &judgement.decision;
    let facts = &judgement.facts;
    let shadow = app.config.verdict.mode == Mode::Shadow;
    app.metrics.verdict(decision.verdict, &decision.rule, shadow, elapsed, facts.geo.asn, facts.user_agent());
    if let Some(kind) = facts.ai_kind {
        app.metrics.ai_verdict(kind, decision.verdict);
    }
    for failure in &decision.failures {
        app.metrics.rule_error(&failure.rule, failure.kind);
    }
    respond(&app, &judgement)
}

fn respond(app: &App, judgement: &Judgement) -> Response {
    let config = &app.config.verdict;
    let decision = &judgement.decision;
    let facts = &judgement.facts;
    let shadow = config.mode == Mode::Shadow;
    // In a flood most verdicts are traps or challenges: one line per rule and client a minute
    // (the metrics count every one).
    if decision.verdict == Verdict::Trap {
        app.crowdsec.report(facts, &decision.rule, app.config.rules.trap_threshold);
    }
    let noted = matches!(decision.verdict, Verdict::Trap | Verdict::Challenge);
    if noted && app.trap_lines.admit(&decision.rule, facts.key) {
        tracing::info!(
            rule = %decision.rule,
            reason = %clipped(&decision.reason),
            client = %facts.key,
            asn = facts.geo.asn.unwrap_or(0),
            user_agent = %clipped(facts.user_agent()),
            host = %clipped(&facts.host),
            uri = %clipped(&facts.uri),
            unanswered = facts.challenges,
            shadow,
            "{}",
            decision.verdict.as_str()
        );
    } else if decision.verdict == Verdict::Allow {
        tracing::debug!(rule = %decision.rule, client = %facts.key, uri = %clipped(&facts.uri), "allow");
    }
    let location = match (decision.verdict, config.answer) {
        (Verdict::Trap, Answer::Redirect | Answer::Nginx) => redirect_target(&config.redirect_prefix, facts),
        _ => String::new(),
    };
    let (status, body) = match (decision.verdict, shadow, config.answer) {
        (Verdict::Allow, ..) | (Verdict::Trap | Verdict::Challenge, true, _) => (StatusCode::OK, ""),
        (Verdict::Trap, false, Answer::Status) => {
            (StatusCode::from_u16(config.trap_status).unwrap_or(StatusCode::FORBIDDEN), TRAP_BODY)
        }
        (Verdict::Trap, false, Answer::Redirect) => (StatusCode::FOUND, ""),
        (Verdict::Trap, false, Answer::Nginx) => (StatusCode::FORBIDDEN, ""),
        (Verdict::Challenge, false, _) => {
            // The page is the answer, in every mode: Caddy, Traefik and HAProxy show it as it is,
            // nginx (whose auth_request drops bodies) fetches it again from `/challenge`.
            // A pass waiting for its turn waits on; anyone else is shown a challenge.
            let early = super::challenge::early_pass(app, facts.headers.lines("cookie"));
            if early.is_none() {
                let (store, now) = (app.clients.shared_store(), std::time::Instant::now());
                app.challenges.challenged_everywhere(store, facts.address, facts.user_agent(), now);
                app.metrics.challenge_issued();
            }
            let mut response =
                super::challenge::page(app, facts.address, facts.user_agent(), &facts.uri, None, early);
            verdict_headers(response.headers_mut(), decision, "", shadow);
            return response;
        }
    };
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    verdict_headers(headers, decision, if config.answer == Answer::Nginx { &location } else { "" }, shadow);
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if status == StatusCode::FOUND {
        headers.insert(header::LOCATION, header_value(&location));
    }
    if !body.is_empty() {
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    }
    if decision.verdict == Verdict::Trap && !shadow {
        // An agent that can sign is asked to, instead of walking the trap.
        headers
            .insert("accept-signature", HeaderValue::from_static(crate::verify::signature::ACCEPT_SIGNATURE));
    }
    response
}

/// The headers every verdict answer carries (see the module's documentation).
fn verdict_headers(headers: &mut HeaderMap, decision: &crate::rules::Decision, location: &str, shadow: bool) {
    headers.insert(VERDICT, HeaderValue::from_static(decision.verdict.as_str()));
    headers.insert(RULE, header_value(&decision.rule));
    headers.insert(LOCATION, header_value(location));
    headers.insert(MODE, HeaderValue::from_static(if shadow { "shadow" } else { "enforce" }));
}

/// `proto://host/prefix/uri`, from the forwarded proto and host, so that Traefik need not
/// resolve a relative Location against the verdict's own address.
fn redirect_target(prefix: &str, facts: &crate::facts::Facts) -> String {
    let proto = if facts.proto == "https" { "https" } else { "http" };
    if facts.host.is_empty() {
        format!("{prefix}{}", facts.uri)
    } else {
        format!("{proto}://{}{prefix}{}", facts.host, facts.uri)
    }
}

/// A header value from text that may hold anything: invalid characters become `?`.
fn header_value(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).unwrap_or_else(|_| {
        let cleaned: String =
            text.chars().map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' }).collect();
        HeaderValue::from_str(&cleaned).unwrap_or(HeaderValue::from_static(""))
    })
}
