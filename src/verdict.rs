//! Deciding a verdict: a forwarded request → facts (identity, enrichment, history) → rules →
//! decision. No HTTP types here; `http/verdict.rs` turns the decision into a response.
//!
//! Deciding cannot fail: a rule that errors gets the fail mode, a missing database gives empty
//! enrichment, and the client cache never refuses a record.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::app::App;
use crate::challenge::economy::network_of;
use crate::challenge::{PassCheck, PassUse};
use crate::client::ClientKey;
use crate::client_state::History;
use crate::client_state::store::SharedPassUse;
use crate::facts::claims::{Claim, PassFacts, RobotsAnswer, RobotsCheck, Signature};
use crate::facts::{Coverage, Facts, Headers};
use crate::lists::List;
use crate::observe::metrics::HitSource;
use crate::rules::{Compiled, Decision, RuleOutcome};

/// The lists crawler claims are checked against: published ranges (`search-engines.txt`) and
/// the domains of forward-confirmed reverse DNS (`crawler-domains.txt`).
pub(crate) const CRAWLER_RANGES: &str = "search_engines";
pub(crate) const CRAWLER_DOMAINS: &str = "crawler_domains";
/// Datacenter and cloud networks, for the rate-limited requests metric.
const DATACENTER_ASNS: &str = "datacenter_asns";

/// The request as the proxy described it, before enrichment.
#[derive(Clone, Debug)]
pub struct ForwardedRequest {
    /// The TCP peer (the proxy, or the client itself). Always known: a made-up one would be
    /// loopback, a trusted proxy, whose forwarding headers would then be believed.
    pub peer: IpAddr,
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
    /// request rates follow the log, not the wall clock; for a live verdict, when it started.
    pub at: Option<Instant>,
    /// Which headers the request's source carried (all, for a live request).
    pub coverage: Coverage,
}

impl ForwardedRequest {
    /// A `GET /` over http from `peer`, with no headers: the start of a request built field by
    /// field (tools, tests, benchmarks).
    pub fn from_peer(peer: IpAddr) -> ForwardedRequest {
        ForwardedRequest {
            peer,
            method: "GET".into(),
            proto: "http".into(),
            host: String::new(),
            uri: "/".into(),
            headers: Headers::default(),
            at: None,
            coverage: Coverage::All,
        }
    }

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
    /// What every rule returned, when the decision was traced (else empty).
    pub trace: Vec<RuleOutcome>,
}

/// How a decision is made. Every caller makes the same decision (identity, enrichment, history,
/// trap URLs, the rules); these say only where the rules run and what is waited for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct How {
    /// Where the rules run.
    pub rules: RunRules,
    /// Whether crawler DNS, key directories and the shared store are waited for.
    pub verify: Verify,
    /// Whether to record what every rule returned ([`Judgement::trace`]); a traced evaluation
    /// runs on a rule worker.
    pub trace: bool,
}

pub use crate::rules::RunRules;

/// What a decision waits for before the rules run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verify {
    /// Crawler DNS, a key directory and the shared store, side by side, each within its
    /// configured verdict wait, or within this one (`explain` waits for the whole timeout).
    Wait(Option<Duration>),
    /// Nothing: claims and signatures as the caches have them (pending when not asked yet).
    AsCached,
}

impl How {
    /// The service's `/verdict`: rules inline (else on a worker), verifications within their
    /// budgets.
    pub const LIVE: How = How { rules: RunRules::Inline, verify: Verify::Wait(None), trace: false };
    /// A tool judging many requests in a row (`replay`): rules on its own thread, nothing waited.
    pub const HERE: How = How { rules: RunRules::Here, verify: Verify::AsCached, trace: false };
}

/// Judges one request and records what it learns (request rate, trap hits), as `how` says. The
/// rules run on the async runtime's threads only within the inline lane's limits
/// ([`RunRules::Inline`]), or without any ([`RunRules::Here`], for tools).
pub(crate) async fn decide(app: &App, request: ForwardedRequest, how: How) -> Judgement {
    let facts = match how.verify {
        Verify::Wait(wait) => verified_facts(app, request, wait).await,
        Verify::AsCached => facts(app, request),
    };
    let facts = Arc::new(facts);
    let (decision, trace) = app.rules.run(facts.clone(), how.rules, how.trace).await;
    Judgement { facts, decision, trace }
}

/// [`decide`] for callers outside the async runtime (tools, tests, benchmarks): blocks the
/// calling thread. Nothing is waited for but the rules ([`Verify::AsCached`], whatever
/// `how.verify` says: a wait needs the runtime).
pub fn decide_blocking(app: &App, request: ForwardedRequest, how: How) -> Judgement {
    let facts = Arc::new(facts(app, request));
    let (decision, trace) = app.rules.run_blocking(facts.clone(), how.rules, how.trace);
    Judgement { facts, decision, trace }
}

/// [`facts`], with a crawler claim's DNS verification and a signature's key directory fetch
/// completed side by side, each waiting at most its configured verdict wait (or `wait`).
async fn verified_facts(app: &App, request: ForwardedRequest, wait: Option<Duration>) -> Facts {
    let facts = facts(app, request);
    let Verified { crawler, signature, history, pass, pass_use, challenges } =
        verify(app, &facts, wait).await;
    let pass = match (facts.pass, pass) {
        (Some(facts), Some(shared)) => Some(with_shared_history(app, facts, shared)),
        (facts, _) => facts,
    };
    let pass = match (pass, pass_use) {
        (Some(facts), Some(shared)) => Some(with_shared_use(app, facts, shared)),
        (facts, _) => facts,
    };
    let challenges = challenges.unwrap_or(facts.challenges);
    Facts { crawler, signature, history: history.unwrap_or(facts.history), pass, challenges, ..facts }
}

/// What waiting for the verifications found: the claim and signature checked, and the shared
/// history when the store brought one.
struct Verified {
    crawler: Option<Claim>,
    signature: Option<Signature>,
    history: Option<History>,
    /// The pass's shared history, when the store brought one.
    pass: Option<History>,
    /// The pass's page view as every replica counted it, when the store answered in time.
    pass_use: Option<SharedPassUse>,
    /// The client's unanswered challenges as every replica counted them, when asked and answered.
    challenges: Option<u32>,
}

/// Completes `facts`' crawler claim, signature and shared history side by side, each within its
/// verdict wait (or `wait`).
async fn verify(app: &App, facts: &Facts, wait: Option<Duration>) -> Verified {
    let (mut crawler, mut signature) = (facts.crawler.clone(), facts.signature.clone());
    let claimed = async {
        if let Some(claim) = crawler.as_mut() {
            // Only for a claim: the ruleset's reference count is shared by every thread.
            let compiled = app.rules.current();
            let domains = compiled.list(CRAWLER_DOMAINS);
            match wait {
                Some(wait) => app.crawlers.verify_within(claim, domains, facts.address, wait).await,
                None => app.crawlers.verify(claim, domains, facts.address).await,
            }
        }
    };
    let signed = async {
        match wait {
            Some(wait) => app.signatures.verify_within(&mut signature, facts, wait).await,
            None => app.signatures.verify(&mut signature, facts).await,
        }
    };
    // A client this replica has no fresh shared view of: its history as every replica left it.
    let shared = app.clients.refresh(facts.key, facts.history);
    // The same for its pass: burned on another replica is burned here.
    let pass = async {
        match &facts.pass {
            Some(pass) => app.clients.refresh(ClientKey::pass(pass.id), pass.history).await,
            None => None,
        }
    };
    // And its page view, on every replica's count of its pace, day and networks.
    let pass_use = async {
        let (Some(pass), Some(store)) = (&facts.pass, app.clients.shared_store()) else { return None };
        if !pass.page_view || !store.usable() {
            return None;
        }
        let (id, terms, wait) = (pass.id, app.challenges.pace_terms(), store.config().wait);
        let network = crate::challenge::economy::network_text(network_of(facts.address));
        // A page view read on a datacenter network counts on its crowd's budget everywhere.
        let crowd_store = store.clone();
        let reading = async {
            if pass.rechallenge.is_none() && is_datacenter(&app.rules.compiled(), &facts.geo) {
                app.challenges.read_everywhere(crowd_store, facts.address, wait).await;
            }
        };
        // Spawned, so a count the verdict stops waiting for still completes.
        let counting = tokio::spawn(async move { store.pass_use(id, &network, &terms).await });
        let (used, ()) = tokio::join!(tokio::time::timeout(wait, counting), reading);
        used.ok()?.ok()?.ok()
    };
    // And a pass-less client's unanswered challenges, when it has any here: an answer on another
    // replica starts them again.
    let challenges = async {
        let store = app.clients.shared_store().filter(|store| store.usable())?;
        if facts.challenges == 0 || facts.pass.is_some() {
            return None;
        }
        let wait = store.config().wait;
        app.challenges.unanswered_everywhere(store, facts.address, facts.user_agent(), wait).await
    };
    let ((), (), history, pass, pass_use, challenges) =
        tokio::join!(claimed, signed, shared, pass, pass_use, challenges);
    Verified { crawler, signature, history, pass, pass_use, challenges }
}

/// Identity, enrichment and history for `request`; a trap URL counts as a trap hit.
fn facts(app: &App, mut request: ForwardedRequest) -> Facts {
    // The path as the origin will read it, for every check below and every rule.
    let normalised = crate::support::request_path::normalise(&request.uri);
    let dot_segments = normalised.dot_segments;
    let raw_uri = match normalised.text {
        std::borrow::Cow::Owned(uri) => Some(std::mem::replace(&mut request.uri, uri)),
        std::borrow::Cow::Borrowed(_) => None,
    };
    let address = app.identity.client_address(request.peer, &request.headers);
    let key = app.identity.key(address);
    let is_trap_url = app.generator.trap_urls().is_trap(&request.uri);
    let at = request.at.unwrap_or_else(Instant::now);
    // No human is ever shown a trap URL: asking for one is a trap hit, from any address, unless
    // another site's page made the browser ask (the request is still the trap's).
    let trap_hit = is_trap_url && crate::trap::urls::is_evidence(&request.headers, &request.host);
    if trap_hit {
        app.clients.record_trap_hit_at(key, at);
        app.metrics.trap_hit(HitSource::TrapUrl);
    }
    let geo = app.geo.lookup(address);
    let user_agent = request.header("user-agent").unwrap_or("");
    // A guard, not a clone of the `Arc`: no write to the count every thread shares.
    let compiled = app.rules.compiled();
    let datacenter = || is_datacenter(&compiled, &geo);
    let pass = pass_facts(app, &request, address, trap_hit, &geo, datacenter, at);
    // A good pass is the client: its record counted this request. The address's quota counts
    // pass-less traffic, so that dozens of people behind one VPN address, each holding a pass,
    // never put it over (and are never judged by it).
    let history = match &pass {
        Some(pass) if pass.burned.is_none() => app.clients.history_at(key, at),
        _ => app.clients.observe_request_at(key, user_agent, &geo, at),
    };
    let challenges = app.challenges.unanswered(address, user_agent, at);
    if history.rate_limited {
        app.metrics.rate_limited(datacenter());
    }
    let crawler = app.crawlers.claim(
        compiled.list(CRAWLER_RANGES),
        compiled.list(CRAWLER_DOMAINS),
        user_agent,
        address,
    );
    let robots = app.robots.answer(&request.host, user_agent, &request.uri);
    if robots.check != RobotsCheck::None
        && let Some(crawler) = robots_crawler(&compiled, &robots, user_agent, crawler.as_ref())
    {
        app.metrics.robots(crawler, robots.check == RobotsCheck::Disallowed);
    }
    let owner_tool = app.owner_tools.prove(&request.headers, address);
    let ai_kind = compiled.ai_kind(user_agent);
    let unsigned = Facts {
        method: request.method,
        proto: request.proto,
        host: request.host,
        uri: request.uri,
        raw_uri,
        dot_segments,
        headers: request.headers,
        address,
        key,
        geo,
        history,
        is_trap_url,
        crawler,
        signature: None,
        robots,
        crowdsec: app.crowdsec.decision(address),
        coverage: request.coverage,
        pass,
        challenges,
        owner_tool,
        ai_kind,
    };
    // A signature covers the request as built: checked on it, then part of the facts.
    let signature = app.signatures.check_now(&unsigned);
    Facts { signature, ..unsigned }
}

/// The pass `request` carries, if a valid one, with what its holders did: its own request rate
/// and trap hits (kept under its own client key, shared through the store like an address's),
/// the networks it was used from and its page pace; and whether that burns it. A burn for
/// networks or pace is recorded as trap hits on the pass, so every replica sharing the store
/// sees it burned.
fn pass_facts(
    app: &App,
    request: &ForwardedRequest,
    address: IpAddr,
    trap_hit: bool,
    geo: &crate::enrich::geo::GeoInfo,
    datacenter: impl FnOnce() -> bool,
    at: Instant,
) -> Option<PassFacts> {
    use crate::client::HeaderLines;
    let mut cookies = request.headers.lines("cookie").peekable();
    cookies.peek()?;
    let now = SystemTime::now();
    let check = app.challenges.pass_in_fields(cookies, now);
    if let Some(label) = check.label() {
        app.metrics.pass(label);
    }
    let PassCheck::Valid(pass) = check else { return None };
    let key = ClientKey::pass(pass.id);
    if trap_hit {
        app.clients.record_trap_hit_at(key, at);
    }
    let mut history =
        app.clients.observe_request_at(key, request.header("user-agent").unwrap_or(""), geo, at);
    let page_view = is_page_view(request);
    // Only a page view asks whether the network is a datacenter's: its share of the crowd.
    let datacenter = page_view && datacenter();
    let used = app.challenges.observe_pass(pass.id, address, page_view, history.trap_hits, datacenter, at);
    if let Some(reason) = used.rechallenge {
        app.metrics.pass_rechallenged(reason);
    }
    if let (Some(reason), true) = (used.burned, used.newly_burned) {
        history = record_burn(app, key, reason, history, at);
    }
    let issued = UNIX_EPOCH + Duration::from_secs(pass.issued);
    Some(PassFacts {
        page_view,
        id: pass.id,
        age: now.duration_since(issued).map_or(0, |age| age.as_secs()),
        earned: pass.earned,
        networks: used.networks,
        history,
        burned: used.burned,
        rechallenge: used.rechallenge,
    })
}

/// Whether `geo`'s network is a datacenter's, by the ruleset's `datacenter_asns` list: where
/// people share addresses by the dozen behind VPNs and gateways, and crawlers rent them by the
/// hundred.
pub(crate) fn is_datacenter(compiled: &crate::rules::Compiled, geo: &crate::enrich::geo::GeoInfo) -> bool {
    geo.asn.is_some_and(
        |asn| matches!(compiled.list(DATACENTER_ASNS), Some(List::Asns(asns)) if asns.find(asn).is_some()),
    )
}

/// Counts a burn of the pass under `key` for `reason`, and records it as trap hits on the pass,
/// up to the burn's limit, so that every replica sharing the store sees it burned: the pass's
/// history after.
fn record_burn(
    app: &App,
    key: ClientKey,
    reason: &'static str,
    mut history: History,
    at: Instant,
) -> History {
    app.metrics.pass_burned(reason);
    let limit = u64::from(app.challenges.config().burn.trap_hits);
    while history.trap_hits < limit {
        history = app.clients.record_trap_hit_at(key, at);
    }
    history
}

/// A pass's facts with its page view as every replica counted it: a re-challenge or a burn the
/// shared count finds (and this replica's did not) is counted here, a burn recorded as a local
/// one is.
fn with_shared_use(app: &App, pass: PassFacts, shared: SharedPassUse) -> PassFacts {
    let local = PassUse {
        networks: pass.networks,
        burned: pass.burned,
        newly_burned: false,
        rechallenge: pass.rechallenge,
    };
    let used = app.challenges.with_shared_use(pass.id, local, shared);
    if let (Some(reason), None) = (used.rechallenge, pass.rechallenge) {
        app.metrics.pass_rechallenged(reason);
    }
    let history = match (used.burned, used.newly_burned) {
        (Some(reason), true) => {
            record_burn(app, ClientKey::pass(pass.id), reason, pass.history, Instant::now())
        }
        _ => pass.history,
    };
    PassFacts { networks: used.networks, burned: used.burned, rechallenge: used.rechallenge, history, ..pass }
}

/// A pass's facts with its history as every replica left it: trap hits recorded elsewhere (a
/// burn there) burn it here.
fn with_shared_history(app: &App, pass: PassFacts, shared: History) -> PassFacts {
    let limit = u64::from(app.challenges.config().burn.trap_hits);
    let burned = pass.burned.or_else(|| (shared.trap_hits >= limit).then_some("trap_hits"));
    PassFacts { history: shared, burned, ..pass }
}

/// Whether a request is a top-level page view, by what browsers say of their own requests
/// (`Sec-Fetch-Dest: document`); without fetch metadata, a GET that accepts HTML. Prefetches
/// are not views.
pub(crate) fn is_page_view(request: &ForwardedRequest) -> bool {
    if request.method != "GET"
        || request.header("sec-purpose").is_some()
        || request.header("purpose").is_some()
    {
        return false;
    }
    match request.header("sec-fetch-dest") {
        Some(dest) => dest.eq_ignore_ascii_case("document"),
        None => request.header("accept").is_some_and(|accept| accept.contains("text/html")),
    }
}

/// The crawler a robots.txt answer is about, for the obeyed and ignored counts (metrics and
/// `replay`): the group the file names it by, else the AI-crawler token its User-Agent names,
/// else the search engine it claims to be; `None` for anyone else (a browser under `*`).
pub(crate) fn robots_crawler<'a>(
    compiled: &'a Compiled,
    answer: &'a RobotsAnswer,
    user_agent: &str,
    claim: Option<&'a Claim>,
) -> Option<&'a str> {
    if let Some(group) = answer.group.as_deref().filter(|group| *group != "*") {
        return Some(group);
    }
    let listed = match compiled.list(crate::rules::AI_CRAWLERS_LIST) {
        Some(List::Tokens(tokens)) => tokens.find(user_agent),
        _ => None,
    };
    listed.or_else(|| claim.map(|claim| claim.crawler.as_str()))
}
