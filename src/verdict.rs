//! Deciding a verdict: a forwarded request → facts (identity, enrichment, history) → rules →
//! decision. No HTTP types here; `http/verdict.rs` turns the decision into a response.
//!
//! Deciding cannot fail: a rule that errors gets the fail mode, a missing database gives empty
//! enrichment, and the client cache never refuses a record.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use crate::app::App;
use crate::facts::{Coverage, Facts, Headers};
use crate::lists::List;
use crate::metrics::HitSource;
use crate::rules::{Decision, RuleOutcome};

/// The lists crawler claims are checked against: published ranges (`search-engines.txt`) and
/// the domains of forward-confirmed reverse DNS (`crawler-domains.txt`).
const CRAWLER_RANGES: &str = "search_engines";
const CRAWLER_DOMAINS: &str = "crawler_domains";
/// Datacenter and cloud networks, for the rate-limited requests metric.
const DATACENTER_ASNS: &str = "datacenter_asns";

/// The request as the proxy described it, before enrichment.
#[derive(Clone, Debug, Default)]
pub struct ForwardedRequest {
    /// The TCP peer (the proxy, or the client itself).
    pub peer: Option<IpAddr>,
    /// The original method.
    pub method: String,
    /// `http` or `https`.
    pub proto: String,
    /// The original host.
    pub host: String,
    /// The original path and query.
    pub uri: String,
    /// The client's headers (names lowercase), including the forwarding headers.
    pub headers: Headers,
    /// When the request was made: `None` is now. A replayed log line's time, so that decay and
    /// request rates follow the log, not the wall clock.
    pub at: Option<Instant>,
    /// Which headers the request's source carried (all, for a live request).
    pub coverage: Coverage,
}

impl ForwardedRequest {
    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name)
    }
}

/// A decision with what it was based on.
pub struct Judgement {
    /// What the rules saw.
    pub facts: Arc<Facts>,
    /// The verdict and the deciding rule.
    pub decision: Decision,
}

/// Judges one request and records what it learns (request rate, trap hits). The rules run on
/// their own threads; this waits for them without blocking the async runtime.
pub async fn decide(app: &App, request: ForwardedRequest) -> Judgement {
    let facts = Arc::new(verified_facts(app, request, None).await);
    let decision = app.rules.judge(facts.clone()).await;
    Judgement { facts, decision }
}

/// [`decide_traced`] after waiting up to `wait` for the DNS verification of a crawler claim (for
/// `explain`, which runs outside the service's runtime).
pub async fn decide_traced_verified(
    app: &App,
    request: ForwardedRequest,
    wait: std::time::Duration,
) -> (Judgement, Vec<RuleOutcome>) {
    let facts = verified_facts(app, request, Some(wait)).await;
    let (decision, trace) = app.rules.evaluate_traced(&facts);
    (Judgement { facts: Arc::new(facts), decision }, trace)
}

/// [`decide`] for callers outside the async runtime (tools, benchmarks): blocks this thread. A
/// crawler claim that needs DNS stays as the cache has it (pending when not asked yet).
pub fn decide_blocking(app: &App, request: ForwardedRequest) -> Judgement {
    let facts = Arc::new(facts(app, request));
    let decision = app.rules.evaluate_shared(facts.clone());
    Judgement { facts, decision }
}

/// [`decide_blocking`] with the rules run on the calling thread ([`crate::rules::Rules::evaluate_here`]):
/// for a tool that judges many requests in a row, such as `replay`.
pub fn decide_here(app: &App, request: ForwardedRequest) -> Judgement {
    let facts = Arc::new(facts(app, request));
    let decision = app.rules.evaluate_here(&facts);
    Judgement { facts, decision }
}

/// Like [`decide_blocking`], with every rule's result (for `explain`).
pub fn decide_traced(app: &App, request: ForwardedRequest) -> (Judgement, Vec<RuleOutcome>) {
    let facts = facts(app, request);
    let (decision, trace) = app.rules.evaluate_traced(&facts);
    (Judgement { facts: Arc::new(facts), decision }, trace)
}

/// [`facts`], with a crawler claim's DNS verification and a signature's key directory fetch
/// completed side by side, each waiting at most its configured verdict wait (or `wait`).
async fn verified_facts(app: &App, request: ForwardedRequest, wait: Option<std::time::Duration>) -> Facts {
    let mut facts = facts(app, request);
    let (mut claim, mut signature) = (facts.crawler.take(), facts.signature.take());
    let compiled = app.rules.current();
    let crawler = async {
        if let Some(claim) = claim.as_mut() {
            let domains = compiled.list(CRAWLER_DOMAINS);
            match wait {
                Some(wait) => app.crawlers.verify_within(claim, domains, facts.address, wait).await,
                None => app.crawlers.verify(claim, domains, facts.address).await,
            }
        }
    };
    let signed = async {
        match wait {
            Some(wait) => app.signatures.verify_within(&mut signature, &facts, wait).await,
            None => app.signatures.verify(&mut signature, &facts).await,
        }
    };
    // A client this replica has no fresh shared view of: its history as every replica left it.
    let shared = app.clients.refresh(facts.key, facts.history);
    let ((), (), shared) = tokio::join!(crawler, signed, shared);
    facts.crawler = claim;
    facts.signature = signature;
    if let Some(history) = shared {
        facts.history = history;
    }
    facts
}

/// Identity, enrichment and history for `request`; a trap URL counts as a trap hit.
fn facts(app: &App, request: ForwardedRequest) -> Facts {
    let peer = request.peer.unwrap_or(IpAddr::from([127, 0, 0, 1]));
    let address = app.identity.client_address(peer, &request.headers);
    let key = app.identity.key(address);
    let is_trap_url = app.generator.trap_urls().is_trap(&request.uri);
    let at = request.at.unwrap_or_else(Instant::now);
    if is_trap_url {
        // No human is ever shown a trap URL: asking for one is a trap hit, from any address.
        app.clients.record_trap_hit_at(key, at);
        app.metrics.trap_hit(HitSource::TrapUrl);
    }
    let geo = app.geo.lookup(address);
    let user_agent = request.header("user-agent").unwrap_or("");
    let history = app.clients.observe_request_at(key, user_agent, &geo, at);
    let compiled = app.rules.current();
    if history.rate_limited {
        let datacenter = geo.asn.is_some_and(|asn| {
            matches!(compiled.list(DATACENTER_ASNS), Some(List::Asns(asns)) if asns.find(asn).is_some())
        });
        app.metrics.rate_limited(datacenter);
    }
    let crawler = app.crawlers.claim(
        compiled.list(CRAWLER_RANGES),
        compiled.list(CRAWLER_DOMAINS),
        user_agent,
        address,
    );
    let mut facts = Facts {
        method: request.method,
        proto: request.proto,
        host: request.host,
        uri: request.uri,
        headers: request.headers,
        address,
        key,
        geo,
        history,
        is_trap_url,
        crawler,
        signature: None,
        coverage: request.coverage,
    };
    facts.signature = app.signatures.check_now(&facts);
    facts
}
