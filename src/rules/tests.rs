//! The default ruleset as a specification: request facts in, verdict and rule out.

use std::net::IpAddr;
use std::time::Duration;

use super::*;
use crate::client::ClientIdentity;
use crate::client_state::History;
use crate::enrich::geo::GeoInfo;
use crate::verify::crawler::{Claim, CrawlerCheck as Check};
use crate::verify::signature::{self, Signature};

const CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36";
const OLD_CHROME: &str =
    "Mozilla/5.0 (Windows NT 6.1) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/70.0.3538.77 Safari/537.36";
const FIREFOX: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0";
const SAFARI_16_3: &str = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.3 Safari/605.1.15";
const SAFARI_17: &str = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15";
const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";

/// The ways the tests run the rules, each one [`Rules::run_blocking`] (or [`Rules::run`]) with
/// where and whether traced spelled out: the specifications below read as what is judged, not
/// how.
trait RunForTests {
    /// On a rule worker, blocking.
    fn evaluate(&self, facts: &Facts) -> Decision;
    /// On a rule worker, with what each rule returned.
    fn evaluate_traced(&self, facts: &Facts) -> (Decision, Vec<RuleOutcome>);
    /// Where the service runs them: inline, else on a worker.
    fn judge_blocking(&self, facts: Arc<Facts>) -> Decision;
}

impl RunForTests for Rules {
    fn evaluate(&self, facts: &Facts) -> Decision {
        self.run_blocking(Arc::new(facts.clone()), RunRules::Worker, false).0
    }
    fn evaluate_traced(&self, facts: &Facts) -> (Decision, Vec<RuleOutcome>) {
        self.run_blocking(Arc::new(facts.clone()), RunRules::Worker, true)
    }
    fn judge_blocking(&self, facts: Arc<Facts>) -> Decision {
        self.run_blocking(facts, RunRules::Inline, false).0
    }
}

fn limits() -> Limits {
    Limits { time: Duration::from_millis(50), memory: 16 << 20 }
}

fn default_rules() -> Rules {
    Rules::load(rules_config()).unwrap()
}

/// The default rules' settings as `default.kdl` has them.
fn rules_config() -> RulesConfig {
    RulesConfig {
        script: None,
        lists: None,
        fail: FailMode::Open,
        limits: limits(),
        workers: 1,
        trap_threshold: 5.0,
        challenge_everyone: false,
        challenge_unanswered: 5,
        preferences: Default::default(),
    }
}

/// A request built from a few facts; everything else as a plain HTTPS browser navigation.
struct Request {
    proto: &'static str,
    uri: &'static str,
    ip: &'static str,
    asn: Option<u32>,
    headers: Vec<(&'static str, &'static str)>,
    trap_score: f64,
    is_trap_url: bool,
    crawler: Option<Claim>,
    signature: Option<Signature>,
    robots: crate::facts::claims::RobotsAnswer,
    crowdsec: Option<Arc<crate::facts::claims::CrowdSecDecision>>,
    rate_limited: bool,
    coverage: crate::facts::Coverage,
    pass: Option<crate::facts::claims::PassFacts>,
    challenges: u32,
    request_rate: f64,
    owner_tool: Option<crate::enrich::owner_tools::OwnerProof>,
}

impl Request {
    fn browser(user_agent: &'static str) -> Request {
        Request {
            proto: "https",
            uri: "/articles/hello",
            ip: "198.51.100.20",
            asn: None,
            headers: vec![
                ("user-agent", user_agent),
                ("accept", "text/html"),
                ("sec-fetch-mode", "navigate"),
                ("sec-fetch-site", "none"),
                ("sec-fetch-dest", "document"),
            ],
            trap_score: 0.0,
            is_trap_url: false,
            crawler: None,
            signature: None,
            robots: crate::facts::claims::RobotsAnswer::default(),
            crowdsec: None,
            rate_limited: false,
            coverage: crate::facts::Coverage::All,
            pass: None,
            challenges: 0,
            request_rate: 0.0,
            owner_tool: None,
        }
    }

    fn agent(user_agent: &'static str) -> Request {
        Request { headers: vec![("user-agent", user_agent), ("accept", "*/*")], ..Request::browser("") }
    }

    fn facts(&self) -> Facts {
        let address: IpAddr = self.ip.parse().unwrap();
        // The URI as the verdict hands it to the rules.
        let normalised = crate::support::request_path::normalise(self.uri);
        Facts {
            method: "GET".into(),
            proto: self.proto.into(),
            host: "example.org".into(),
            uri: normalised.text.into_owned(),
            raw_uri: None,
            dot_segments: normalised.dot_segments,
            headers: self.headers.iter().copied().collect(),
            address,
            key: ClientIdentity::new(vec![], 32, 64).key(address),
            geo: GeoInfo { asn: self.asn, asn_org: None, country: None },
            history: History {
                trap_hits: self.trap_score as u64,
                trap_score: self.trap_score,
                rate_limited: self.rate_limited,
                request_rate: self.request_rate,
            },
            is_trap_url: self.is_trap_url,
            crawler: self.crawler.clone(),
            signature: self.signature.clone(),
            robots: self.robots.clone(),
            crowdsec: self.crowdsec.clone(),
            coverage: self.coverage.clone(),
            pass: self.pass.clone(),
            challenges: self.challenges,
            owner_tool: self.owner_tool,
            ai_kind: None,
        }
    }
}

/// Checks that `request` gets `verdict` from rule `rule` ("" when no rule decides).
fn check(rules: &Rules, request: Request, verdict: Verdict, rule: &str) {
    let mut facts = request.facts();
    // As the verdict finds it, from the ruleset's list.
    facts.ai_kind = rules.compiled().ai_kind(facts.user_agent());
    let (decision, trace) = rules.evaluate_traced(&facts);
    assert_eq!((decision.verdict, &*decision.rule), (verdict, rule), "{facts:#?}\n{trace:#?}");
}

#[test]
fn default_rules_allow_people_and_their_browsers() {
    let rules = default_rules();
    for ua in [CHROME, FIREFOX, SAFARI_17, SAFARI_16_3, OLD_CHROME] {
        check(&rules, Request::browser(ua), Verdict::Allow, "");
    }
    // Old browsers send no Sec-Fetch-*; that is no evidence.
    check(&rules, Request::agent(OLD_CHROME), Verdict::Allow, "");
    check(&rules, Request::agent(SAFARI_16_3), Verdict::Allow, "");
    // Over plain HTTP browsers send no Sec-Fetch-* at all.
    check(&rules, Request { proto: "http", ..Request::agent(CHROME) }, Verdict::Allow, "");
    // Subresource and fetch() requests carry their own Sec-Fetch-* values.
    let fetch = Request {
        uri: "/api/items?page=2",
        headers: vec![("user-agent", CHROME), ("sec-fetch-mode", "cors"), ("sec-fetch-dest", "empty")],
        ..Request::browser(CHROME)
    };
    check(&rules, fetch, Verdict::Allow, "");
    // One stray trap hit does not trap a person's later requests: it asks them once (below).
    check(
        &rules,
        Request { trap_score: 1.0, ..Request::browser(CHROME) },
        Verdict::Challenge,
        "challenge-browsers",
    );
    check(
        &rules,
        Request { trap_score: 1.0, pass: Some(pass(None)), ..Request::browser(CHROME) },
        Verdict::Allow,
        "",
    );
    // People type curl, Wget and HTTPie by hand: from a home network they pass, on any path.
    for ua in ["curl/8.5.0", "Wget/1.21.4", "HTTPie/3.2.2"] {
        check(&rules, Request { asn: Some(3320), ..Request::agent(ua) }, Verdict::Allow, "");
    }
    // Whole-token matching: these contain short list entries ("Code") inside other words.
    check(&rules, Request::agent("BarcodeReader/2.0"), Verdict::Allow, "");
    check(&rules, Request::agent("Unicode-Feed-Reader/1.0"), Verdict::Allow, "");
}

#[test]
fn default_rules_trap_bots() {
    let rules = default_rules();
    check(
        &rules,
        Request::agent("Mozilla/5.0 (compatible; GPTBot/1.2; +https://openai.com/gptbot)"),
        Verdict::Trap,
        "ai-crawlers",
    );
    check(&rules, Request::agent("CCBot/2.0 (https://commoncrawl.org/faq/)"), Verdict::Trap, "ai-crawlers");
    check(
        &rules,
        Request::agent(
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/120.0.0.0 Safari/537.36",
        ),
        Verdict::Trap,
        "ai-crawlers",
    );
    check(&rules, Request::agent("Code/1.0"), Verdict::Trap, "ai-crawlers");
    check(
        &rules,
        Request { headers: vec![("accept", "*/*")], ..Request::browser("") },
        Verdict::Trap,
        "no-user-agent",
    );
    check(&rules, Request::agent(CHROME), Verdict::Trap, "lying-browser");
    check(&rules, Request::agent(FIREFOX), Verdict::Trap, "lying-browser");
    check(&rules, Request::agent(SAFARI_17), Verdict::Trap, "lying-browser");
    check(&rules, Request { trap_score: 12.0, ..Request::browser(CHROME) }, Verdict::Trap, "trap-score");
    check(&rules, Request { is_trap_url: true, ..Request::browser(CHROME) }, Verdict::Trap, "trap-url");
    check(
        &rules,
        Request { asn: Some(16509), ..Request::agent("python-requests/2.31.0") },
        Verdict::Trap,
        "http-library-from-datacenter",
    );
    check(
        &rules,
        Request { asn: Some(24940), ..Request::agent("Go-http-client/1.1") },
        Verdict::Trap,
        "http-library-from-datacenter",
    );
    // Colocation networks are datacenters too: okhttp from Flexential (AS13649), on any path.
    for uri in ["/articles/hello", "/images/cat.png"] {
        check(
            &rules,
            Request { uri, asn: Some(13649), ..Request::agent("okhttp/4.12.0") },
            Verdict::Trap,
            "http-library-from-datacenter",
        );
    }
}

/// Link-preview fetchers and web archives, as they send their User-Agent.
const PREVIEWS: &[&str] = &[
    "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
    "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)",
    "Twitterbot/1.0",
    "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
    "facebookexternalhit/1.1 Facebot Twitterbot/1.0",
    "http.rb/5.1.1 (Mastodon/4.2.0; +https://mastodon.social/)",
    "Mozilla/5.0 (compatible; Bluesky Cardyb/1.1; +mailto:support@bsky.app)",
    "LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)",
    "TelegramBot (like TwitterBot)",
    "WhatsApp/2.23.20.0",
];
const ARCHIVES: &[&str] = &[
    "Mozilla/5.0 (compatible; heritrix/3.4.0 +https://archive.org/details/archive.org_bot) Firefox/57",
    "Mozilla/5.0 (compatible; archive.org_bot; Wayback Machine Live Record; +http://archive.org/details/archive.org_bot)",
    "Mozilla/5.0 (compatible; bl.uk_lddc_bot/3.3; +http://www.bl.uk/aboutus/legaldeposit/websites/websites/faqscrawler/)",
];

#[test]
fn default_rules_never_trap_link_previews_and_archives() {
    let rules = default_rules();
    // From a datacenter (AWS), as fediverse servers and preview services run.
    for &ua in PREVIEWS {
        check(&rules, Request { asn: Some(16509), ..Request::agent(ua) }, Verdict::Allow, "link-previews");
    }
    for &ua in ARCHIVES {
        check(&rules, Request { asn: Some(16509), ..Request::agent(ua) }, Verdict::Allow, "link-previews");
        // From the Internet Archive's own network, even over the request quota.
        let own = Request { asn: Some(7941), rate_limited: true, ..Request::agent(ua) };
        check(&rules, own, Verdict::Allow, "web-archives");
    }
    // The name is no pass for a client that walks the trap or floods the site.
    let ua = PREVIEWS[0];
    check(&rules, Request { trap_score: 12.0, ..Request::agent(ua) }, Verdict::Trap, "trap-score");
    check(&rules, Request { is_trap_url: true, ..Request::agent(ua) }, Verdict::Trap, "trap-url");
    let flooding = Request { asn: Some(16509), rate_limited: true, ..Request::agent(ua) };
    check(&rules, flooding, Verdict::Trap, "datacenter-over-quota");
    let heritrix = Request { asn: Some(16509), rate_limited: true, ..Request::agent(ARCHIVES[0]) };
    check(&rules, heritrix, Verdict::Trap, "datacenter-over-quota");
}

/// Site owners' own tools, each as it sends its requests (lists/monitors.txt names the sources):
/// (User-Agent, sends fetch metadata as a browser does).
const MONITORS: &[(&str, bool)] = &[
    ("Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)", false),
    ("Pingdom.com_bot_version_1.4_(http://www.pingdom.com/)", false),
    (
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/59.0.3071.109 Chrome/59.0.3071.109 Safari/537.36 PingdomPageSpeed/1.0 (pingbot/2.0; +http://www.pingdom.com/)",
        false,
    ),
    (
        "Better Uptime Bot Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/74.0.3729.169 Safari/537.36",
        false,
    ),
    ("Uptime-Kuma/2.0.2", false),
    ("Mozilla/5.0 (compatible; Site24x7/1.0; +https://www.site24x7.com/)", false),
    // StatusCake's check: a Chrome User-Agent with its name, and no fetch metadata.
    (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 StatusCake_Uptime_Checker/1.0",
        false,
    ),
    ("FreshpingBot/1.0 (+https://freshping.io/)", false),
    ("HetrixTools Uptime Monitoring Bot. https://hetrix.tools/uptime-monitoring-bot.html", false),
    ("updown.io daemon 2.11", false),
    ("Mozilla/5.0 (compatible; OhDear/1.1; +https://ohdear.app/checker)", false),
    ("Gatus/1.0", false),
    (
        "Mozilla/5.0 (compatible; Cloudflare-Healthchecks/1.0; +https://www.cloudflare.com/; healthcheck-id: 2d0f4d1e)",
        false,
    ),
    // Checkly's browser check: Playwright's headless Chromium, which sends fetch metadata.
    (
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/134.0.6998.35 Safari/537.36 (Checkly, https://www.checklyhq.com)",
        true,
    ),
    ("Datadog/Synthetics", false),
    (
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/138.0.0.0 Safari/537.36 DatadogSynthetics",
        true,
    ),
    (
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/100.0.4896.60 Safari/537.36 NewRelicSynthetics/1.0",
        true,
    ),
    (
        "synthetic-monitoring-agent/v0.20.1-0-g66af84ad (linux amd64; 66af84ad; 2024-01-01; +https://github.com/grafana/synthetic-monitoring-agent)",
        false,
    ),
    // PageSpeed Insights: Lighthouse in headless Chrome, without fetch metadata.
    (
        "Mozilla/5.0 (Linux; Android 11; moto g power (2022)) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/114.0.0.0 Mobile Safari/537.36 Chrome-Lighthouse",
        false,
    ),
    (
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/117.0.0.0 Safari/537.36 GTmetrix",
        true,
    ),
    (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/96.0.4664.45 Safari/537.36 PTST/211202.211915",
        true,
    ),
    ("W3C_Validator/1.3 http://validator.w3.org/services", false),
    ("W3C-checklink/5.0.0 libwww-perl/6.68", false),
    ("Jigsaw/2.3.0 W3C_CSS_Validator_JFouffa/2.0 (See <http://validator.w3.org/services>)", false),
    ("Validator.nu/LV http://validator.w3.org/services", false),
    ("Mozilla/5.0 (compatible; LinkChecker/10.2.1; +https://linkchecker.github.io/linkchecker/)", false),
    ("lychee/0.15.1", false),
    ("Mozilla/5.0 (compatible; AhrefsSiteAudit/6.1; +http://ahrefs.com/robot/)", false),
    ("Screaming Frog SEO Spider/20.2", false),
];

/// Each of those tools as it asks for the home page, from a cloud network as they run.
fn monitor_request(user_agent: &'static str, metadata: bool) -> Request {
    let request = if metadata { Request::browser(user_agent) } else { Request::agent(user_agent) };
    Request { asn: Some(16509), uri: "/", ..request }
}

#[test]
fn default_rules_let_the_site_owners_monitors_and_checks_through() {
    let rules = default_rules();
    for &(ua, metadata) in MONITORS {
        check(&rules, monitor_request(ua, metadata), Verdict::Allow, "monitors");
        // An audit loads the page's files right after it: those are not page views.
        let file = Request { uri: "/static/site.css", request_rate: 60.0, ..monitor_request(ua, metadata) };
        check(&rules, file, Verdict::Allow, "monitors");
    }
    // Forgeable: a crawler under a monitor's name gets its rate and no more. Past a monitor's page
    // views from one address, the rest of the rules judge it (here: a headless browser's name, a
    // Chrome User-Agent without fetch metadata, an HTTP library from a datacenter).
    let fast = |ua, metadata| Request { request_rate: 40.0, ..monitor_request(ua, metadata) };
    check(&rules, fast(MONITORS[13].0, true), Verdict::Trap, "ai-crawlers");
    check(&rules, fast(MONITORS[6].0, false), Verdict::Trap, "lying-browser");
    check(&rules, fast(MONITORS[4].0, false), Verdict::Allow, "");
    // Never on a trap URL, never over the quota, never once it walked the trap.
    let ua = MONITORS[0].0;
    check(&rules, Request { is_trap_url: true, ..monitor_request(ua, false) }, Verdict::Trap, "trap-url");
    check(&rules, Request { trap_score: 12.0, ..monitor_request(ua, false) }, Verdict::Trap, "trap-score");
    let flooding = Request { rate_limited: true, ..monitor_request(ua, false) };
    check(&rules, flooding, Verdict::Trap, "datacenter-over-quota");
}

#[test]
fn default_rules_let_the_owners_proven_tools_through_on_any_path() {
    use crate::enrich::owner_tools::OwnerProof;
    let rules = default_rules();
    // A monitor the owner configured with the secret header, or from the owner's addresses:
    // whatever it looks like, wherever it goes, even past the quota or with dot segments.
    for proof in [OwnerProof::Header, OwnerProof::Address] {
        let tool = |request: Request| Request { owner_tool: Some(proof), ..request };
        let reason = "owner-tools";
        check(&rules, tool(Request::agent("curl/8.5.0")), Verdict::Allow, reason);
        check(
            &rules,
            tool(Request { asn: Some(16509), rate_limited: true, ..Request::agent("") }),
            Verdict::Allow,
            reason,
        );
        check(&rules, tool(Request { uri: "/a/../b", ..Request::browser(CHROME) }), Verdict::Allow, reason);
        check(
            &rules,
            tool(Request { is_trap_url: true, ..Request::agent("GPTBot/1.2") }),
            Verdict::Allow,
            reason,
        );
    }
    // Without the proof, the same requests are judged as anyone's.
    check(
        &rules,
        Request { asn: Some(16509), ..Request::agent("curl/8.5.0") },
        Verdict::Trap,
        "http-library-from-datacenter",
    );
}

#[test]
fn default_rules_trap_datacenter_clients_over_quota_and_only_mark_others() {
    let rules = default_rules();
    // A perfect browser navigation, hundreds a minute, from a cloud network.
    let headless = Request { asn: Some(16509), rate_limited: true, ..Request::browser(CHROME) };
    check(&rules, headless, Verdict::Trap, "datacenter-over-quota");
    // The same from a home ISP (Deutsche Telekom), or with no ASN known: many people may share
    // the address, so it is not trapped, only asked for a pass (each person answers for
    // themselves).
    check(
        &rules,
        Request { asn: Some(3320), rate_limited: true, ..Request::browser(CHROME) },
        Verdict::Challenge,
        "challenge-browsers",
    );
    // Browser page views over the quota, from anywhere, are asked for a pass; with one they pass.
    check(
        &rules,
        Request { rate_limited: true, ..Request::browser(CHROME) },
        Verdict::Challenge,
        "challenge-browsers",
    );
    let holder = Request { rate_limited: true, pass: Some(pass(None)), ..Request::browser(CHROME) };
    check(&rules, holder, Verdict::Allow, "");
    // Under the quota, the cloud network alone is no evidence to trap: it is reason to ask.
    check(
        &rules,
        Request { asn: Some(16509), ..Request::browser(CHROME) },
        Verdict::Challenge,
        "challenge-browsers",
    );
}

/// A good pass, or one burned for `burned`.
fn pass(burned: Option<&'static str>) -> crate::facts::claims::PassFacts {
    crate::facts::claims::PassFacts {
        page_view: true,
        id: 7,
        age: 30,
        earned: crate::facts::claims::Earned::Work,
        networks: 1,
        history: History::default(),
        burned,
        rechallenge: None,
    }
}

#[test]
fn a_page_asked_for_as_anything_but_a_view_is_challenged_like_a_view() {
    let rules = default_rules();
    let with = |extra: &[(&'static str, &'static str)], proto: &'static str| {
        let mut request = Request { proto, ..Request::browser(CHROME) };
        request.headers.retain(|(name, _)| extra.iter().all(|(other, _)| other != name));
        request.headers.extend_from_slice(extra);
        request
    };
    // challenge { everyone #true }: every pass-less browser asking for a page, however it asks.
    let everyone = Rules::load(RulesConfig { challenge_everyone: true, ..rules_config() }).unwrap();
    for (extra, proto) in [
        (&[("sec-purpose", "prefetch")][..], "https"),
        (&[("purpose", "prefetch")][..], "https"),
        (&[("sec-fetch-mode", "cors"), ("sec-fetch-dest", "empty"), ("accept", "text/html")][..], "https"),
        (&[("sec-fetch-mode", "navigate"), ("sec-fetch-dest", "iframe")][..], "https"),
        (&[("accept", "*/*")][..], "http"),
    ] {
        let mut request = with(extra, proto);
        if proto == "http" {
            request.headers.retain(|(name, _)| !name.starts_with("sec-fetch-"));
        }
        check(&everyone, request, Verdict::Challenge, "challenge-browsers");
    }
    // The default rules, from a cloud network: the same.
    let prefetch = Request { asn: Some(16509), ..with(&[("sec-purpose", "prefetch")], "https") };
    check(&rules, prefetch, Verdict::Challenge, "challenge-browsers");
    // Subresources, a page's fetch() for data, and a pass holder's fetch for HTML stay as they were.
    let image =
        with(&[("sec-fetch-mode", "no-cors"), ("sec-fetch-dest", "image"), ("accept", "image/*")], "https");
    check(&everyone, Request { uri: "/avatar/7", ..image }, Verdict::Allow, "");
    let data = with(&[("sec-fetch-mode", "cors"), ("sec-fetch-dest", "empty"), ("accept", "*/*")], "https");
    check(&everyone, Request { uri: "/api/items", ..data }, Verdict::Allow, "");
    let html =
        with(&[("sec-fetch-mode", "cors"), ("sec-fetch-dest", "empty"), ("accept", "text/html")], "https");
    check(&everyone, Request { pass: Some(pass(None)), ..html }, Verdict::Allow, "");
}

#[test]
fn a_good_pass_outranks_its_addresses_trap_score_and_a_burned_one_does_not() {
    let rules = default_rules();
    let shared = || Request { trap_score: 9.0, ..Request::browser(CHROME) };
    check(&rules, shared(), Verdict::Trap, "trap-score");
    check(&rules, Request { pass: Some(pass(None)), ..shared() }, Verdict::Allow, "");
    check(&rules, Request { pass: Some(pass(Some("trap_hits"))), ..shared() }, Verdict::Trap, "burned-pass");
}

#[test]
fn default_rules_challenge_uncertain_browser_page_views_and_never_what_cannot_answer() {
    let rules = default_rules();
    let cloud = |request: Request| Request { asn: Some(16509), ..request };
    // A browser's page view from a cloud network without a pass: challenged; with one: allowed.
    for ua in [CHROME, FIREFOX, SAFARI_17] {
        check(&rules, cloud(Request::browser(ua)), Verdict::Challenge, "challenge-browsers");
        check(&rules, cloud(Request { pass: Some(pass(None)), ..Request::browser(ua) }), Verdict::Allow, "");
    }
    // From a home network (Deutsche Telekom), without doubt: not challenged.
    check(&rules, Request { asn: Some(3320), ..Request::browser(CHROME) }, Verdict::Allow, "");
    // Never what cannot answer or must not be stopped, from a cloud network: subresources and
    // fetch() calls, images, feeds, robots.txt, /.well-known/, ACME, prefetches, link previews.
    let subresource = Request {
        uri: "/static/app.css",
        headers: vec![("user-agent", CHROME), ("sec-fetch-mode", "no-cors"), ("sec-fetch-dest", "style")],
        ..Request::browser(CHROME)
    };
    check(&rules, cloud(subresource), Verdict::Allow, "");
    let fetch = Request {
        uri: "/api/items?page=2",
        headers: vec![("user-agent", CHROME), ("sec-fetch-mode", "cors"), ("sec-fetch-dest", "empty")],
        ..Request::browser(CHROME)
    };
    check(&rules, cloud(fetch), Verdict::Allow, "");
    check(&rules, cloud(Request { uri: "/images/cat.jpg", ..Request::browser(CHROME) }), Verdict::Allow, "");
    check(
        &rules,
        cloud(Request { uri: "/feed.xml", ..Request::browser(CHROME) }),
        Verdict::Allow,
        "always-allowed-paths",
    );
    check(&rules, cloud(Request { uri: "/?feed=rss2", ..Request::browser(CHROME) }), Verdict::Allow, "");
    for uri in ["/robots.txt", "/.well-known/acme-challenge/x", "/.well-known/security.txt"] {
        check(
            &rules,
            cloud(Request { uri, ..Request::browser(CHROME) }),
            Verdict::Allow,
            "always-allowed-paths",
        );
    }
    // A page's own fetch() for data, from a reader without a pass, and with one any fetch.
    let data = Request {
        uri: "/api/items",
        headers: vec![
            ("user-agent", CHROME),
            ("accept", "application/json"),
            ("sec-fetch-mode", "cors"),
            ("sec-fetch-dest", "empty"),
        ],
        ..Request::browser(CHROME)
    };
    check(&rules, cloud(data), Verdict::Allow, "");
    let preview = Request {
        asn: Some(16509),
        ..Request::agent("Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)")
    };
    check(&rules, preview, Verdict::Allow, "link-previews");
    let reader = Request { asn: Some(16509), ..Request::agent("Miniflux/2.1.0 (+https://miniflux.app)") };
    check(&rules, Request { uri: "/feed.xml", ..reader }, Verdict::Allow, "always-allowed-paths");
}

#[test]
fn a_burned_pass_is_trapped_and_a_client_that_never_answers_is_too() {
    let rules = default_rules();
    for reason in ["trap_hits", "networks", "pages"] {
        let request = Request { pass: Some(pass(Some(reason))), ..Request::browser(CHROME) };
        check(&rules, request, Verdict::Trap, "burned-pass");
    }
    let cloud = Request { asn: Some(16509), challenges: 4, ..Request::browser(CHROME) };
    check(&rules, cloud, Verdict::Challenge, "challenge-browsers");
    let cloud = Request { asn: Some(16509), challenges: 5, ..Request::browser(CHROME) };
    check(&rules, cloud, Verdict::Trap, "unanswered-challenges");
    // A pass holder's old count does not matter: it answered.
    let holder =
        Request { asn: Some(16509), challenges: 9, pass: Some(pass(None)), ..Request::browser(CHROME) };
    check(&rules, holder, Verdict::Allow, "");
}

#[test]
fn challenge_everyone_asks_every_browser_page_view_without_a_pass() {
    let config = RulesConfig { challenge_everyone: true, ..rules_config() };
    let rules = Rules::load(config).unwrap();
    check(
        &rules,
        Request { asn: Some(3320), ..Request::browser(CHROME) },
        Verdict::Challenge,
        "challenge-browsers",
    );
    check(&rules, Request { pass: Some(pass(None)), ..Request::browser(CHROME) }, Verdict::Allow, "");
    check(
        &rules,
        Request { uri: "/robots.txt", ..Request::browser(CHROME) },
        Verdict::Allow,
        "always-allowed-paths",
    );
}

/// HTTP libraries as they send their User-Agent by default.
const LIBRARIES: &[&str] = &[
    "python-requests/2.31.0",
    "Python/3.11 aiohttp/3.9.1",
    "python-httpx/0.27.0",
    "Python-urllib/3.12",
    "Go-http-client/1.1",
    "Go-http-client/2.0",
    "node-fetch/1.0 (+https://github.com/bitinn/node-fetch)",
    "node",
    "undici",
    "axios/1.6.2",
    "Java/17.0.9",
    "Java-http-client/21.0.1",
    "okhttp/4.12.0",
    "Apache-HttpClient/4.5.14 (Java/17.0.9)",
];

#[test]
fn a_library_asking_for_a_page_is_trapped_from_any_network() {
    let rules = default_rules();
    for ua in LIBRARIES {
        for uri in ["/articles/hello", "/", "/docs/", "/index.html", "/page.php?id=2"] {
            // 3320: Deutsche Telekom, a home ISP; None: no ASN database.
            for asn in [Some(3320), None] {
                check(&rules, Request { uri, asn, ..Request::agent(ua) }, Verdict::Trap, "http-library-page");
            }
        }
    }
}

#[test]
fn a_library_from_a_home_network_may_fetch_what_programs_fetch() {
    let rules = default_rules();
    let from_home = |ua, uri| Request { uri, asn: Some(3320), ..Request::agent(ua) };
    for ua in LIBRARIES {
        // Feeds, robots.txt and /.well-known/ are for programs, from anywhere.
        for uri in
            ["/feed.xml", "/blog/rss", "/robots.txt", "/.well-known/webfinger?resource=acct:a@example.org"]
        {
            check(&rules, from_home(ua, uri), Verdict::Allow, "always-allowed-paths");
        }
        // Files that are not pages.
        for uri in ["/images/cat.png", "/downloads/data.csv", "/releases/v1.2.tar.gz", "/assets/site.css"] {
            check(&rules, from_home(ua, uri), Verdict::Allow, "");
        }
    }
}

#[test]
fn the_sites_program_paths_let_libraries_through_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("program-paths.txt"), "/api/*  API\n/graphql  GraphQL\n").unwrap();
    let rules = Rules::load(RulesConfig {
        script: None,
        lists: Some(dir.path().to_path_buf()),
        fail: FailMode::Open,
        limits: limits(),
        workers: 1,
        trap_threshold: 5.0,
        challenge_everyone: false,
        challenge_unanswered: 4,
        preferences: Default::default(),
    })
    .unwrap();
    for uri in ["/api/items?page=2", "/graphql"] {
        for asn in [Some(3320), Some(16509)] {
            check(
                &rules,
                Request { uri, asn, ..Request::agent("python-requests/2.31.0") },
                Verdict::Allow,
                "",
            );
        }
        // An AI crawler is still an AI crawler there.
        check(&rules, Request { uri, ..Request::agent("GPTBot/1.2") }, Verdict::Trap, "ai-crawlers");
    }
    check(
        &rules,
        Request { uri: "/articles/hello", asn: Some(3320), ..Request::agent("python-requests/2.31.0") },
        Verdict::Trap,
        "http-library-page",
    );
}

#[test]
fn well_known_paths_are_allowed_for_every_client_from_any_network() {
    let rules = default_rules();
    let clients = [
        "http.rb/5.1.1 (Mastodon/4.2.0; +https://mastodon.social/)",
        "Go-http-client/2.0",
        "Java-http-client/21.0.1",
        "okhttp/4.12.0",
        "curl/8.5.0",
        "python-requests/2.31.0",
        "Mozilla/5.0 (compatible; SecurityScanner/1.0)",
    ];
    let paths = [
        "/.well-known/security.txt",
        "/.well-known/webfinger?resource=acct:alice@example.org",
        "/.well-known/nodeinfo",
        "/.well-known/host-meta",
        "/.well-known/openid-configuration",
        "/.well-known/jwks.json",
        "/.well-known/change-password",
        "/.well-known/apple-app-site-association",
        "/.well-known/assetlinks.json",
        "/.well-known/mta-sts.txt",
        "/.well-known/acme-challenge/token-1",
    ];
    for ua in clients {
        for uri in paths {
            // 16509: Amazon, a datacenter network.
            let request = Request { uri, asn: Some(16509), ..Request::agent(ua) };
            check(&rules, request, Verdict::Allow, "always-allowed-paths");
        }
    }
    // Only under /.well-known/ itself.
    check(
        &rules,
        Request { uri: "/.well-known-ish/page", asn: Some(16509), ..Request::agent("Go-http-client/2.0") },
        Verdict::Trap,
        "http-library-from-datacenter",
    );
}

#[test]
fn default_rules_always_allow_robots_acme_and_feeds() {
    let rules = default_rules();
    let datacenter_library =
        |uri| Request { uri, asn: Some(16509), ..Request::agent("python-requests/2.31.0") };
    for uri in [
        "/robots.txt",
        "/.well-known/acme-challenge/abc",
        "/feed.xml",
        "/blog/rss",
        "/index.atom",
        "/feeds/all",
        "/feeds/all.html",
        "/blog/feed/",
        "/comments/feed?page=2",
        "/site.v2.rdf",
    ] {
        check(&rules, datacenter_library(uri), Verdict::Allow, "always-allowed-paths");
    }
    // Near misses are not feeds: the library from a datacenter is trapped.
    for uri in ["/feedback", "/rss.html", "/blog/feeds", "/xml/index.html"] {
        check(&rules, datacenter_library(uri), Verdict::Trap, "http-library-from-datacenter");
    }
    check(
        &rules,
        Request { uri: "/robots.txt", ..Request::agent("GPTBot/1.2") },
        Verdict::Allow,
        "always-allowed-paths",
    );
}

fn claim(crawler: &str, check: Check) -> Option<Claim> {
    Some(Claim { crawler: crawler.into(), check, detail: "".into() })
}

#[test]
fn verified_crawlers_are_allowed_impostors_trapped_and_pending_claims_judged_as_anyone() {
    let rules = default_rules();
    for check in [Check::Ranges, Check::ReverseDns] {
        let request = Request { crawler: claim("Googlebot", check), ..Request::agent(GOOGLEBOT) };
        let (decision, _) = rules.evaluate_traced(&request.facts());
        assert_eq!((decision.verdict, &*decision.rule), (Verdict::Allow, "search-engines"));
        assert_eq!(decision.reason, format!("verified Googlebot ({})", check.as_str()));
    }
    check(
        &rules,
        Request { crawler: claim("Googlebot", Check::Failed), ..Request::agent(GOOGLEBOT) },
        Verdict::Trap,
        "search-engines",
    );
    // DNS has not answered: not an impostor, and not a pass either; the other rules judge it
    // (this one, a library-like agent without Sec-Fetch-*, is allowed by none of them).
    check(
        &rules,
        Request { crawler: claim("Googlebot", Check::Pending), ..Request::agent(GOOGLEBOT) },
        Verdict::Allow,
        "",
    );
}

#[test]
fn rules_see_the_crawler_claim_and_its_check() {
    let script = r#"return { { name = "show", check = function(r)
        return "allow", string.format("%s %s %s", tostring(r.claimed_crawler), tostring(r.crawler_check),
            tostring(r.verified_crawler))
    end } }"#;
    let rules = script_rules(script, FailMode::Closed).unwrap();
    for (crawler, reason) in [
        (claim("bingbot", Check::ReverseDns), "bingbot reverse-dns bingbot"),
        (claim("YandexBot", Check::Pending), "YandexBot pending nil"),
        (claim("Googlebot", Check::Failed), "Googlebot failed nil"),
        (None, "nil nil nil"),
    ] {
        let decision = rules.evaluate(&Request { crawler, ..Request::browser(CHROME) }.facts());
        assert_eq!(decision.reason, reason);
    }
}

#[test]
fn rules_see_the_signed_agent_and_the_signature_check() {
    let script = r#"return { { name = "show", check = function(r)
        return "allow", string.format("%s %s", tostring(r.signed_agent), r.signature_check)
    end } }"#;
    let rules = script_rules(script, FailMode::Closed).unwrap();
    let signed = |check, agent: &str| Some(Signature { check, agent: agent.into(), detail: "".into() });
    for (signature, reason) in [
        (signed(signature::SignatureCheck::Verified, "signer.example"), "signer.example verified"),
        (signed(signature::SignatureCheck::Pending, "signer.example"), "nil pending"),
        (signed(signature::SignatureCheck::Invalid, "signer.example"), "nil invalid"),
        (signed(signature::SignatureCheck::Verified, ""), "nil verified"),
        (None, "nil unsigned"),
    ] {
        let request =
            Request { signature, crawler: claim("bingbot", Check::ReverseDns), ..Request::browser(CHROME) };
        let decision = rules.evaluate(&request.facts());
        assert_eq!(decision.reason, reason);
    }
    // The fields before and after the new ones still read right.
    let script = r#"return { { name = "show", check = function(r)
        return "allow", string.format("%s %s %s", tostring(r.verified_crawler), r.signature_check,
            tostring(r:header("accept")))
    end } }"#;
    let rules = script_rules(script, FailMode::Closed).unwrap();
    let request = Request {
        signature: signed(signature::SignatureCheck::Verified, "signer.example"),
        crawler: claim("bingbot", Check::ReverseDns),
        ..Request::browser(CHROME)
    };
    assert_eq!(rules.evaluate(&request.facts()).reason, "bingbot verified text/html");
}

/// What a combined access log carries of a request: User-Agent and Referer.
fn combined_log() -> crate::facts::Coverage {
    crate::facts::Coverage::Only(crate::facts::Carried::new(["user-agent", "referer"]))
}

#[test]
fn rules_that_read_a_header_the_log_does_not_carry_are_skipped_not_guessed() {
    let rules = default_rules();
    // Chrome over HTTPS without Sec-Fetch-* is a lying browser live; in a combined log nothing
    // says whether it sent them.
    let chrome = || Request { headers: vec![("user-agent", CHROME)], ..Request::browser(CHROME) };
    let live = rules.evaluate(&chrome().facts());
    assert_eq!((live.verdict, &*live.rule), (Verdict::Trap, "lying-browser"));
    let logged = rules.evaluate(&Request { coverage: combined_log(), ..chrome() }.facts());
    assert_eq!((logged.verdict, &*logged.rule), (Verdict::Allow, ""), "{logged:?}");
    assert_eq!(logged.unjudged, [Arc::from("lying-browser")]);
    assert!(logged.failures.is_empty());
    // What the log does carry is judged as usual, including a carried header that is missing.
    let crawler =
        rules.evaluate(&Request { coverage: combined_log(), ..Request::agent("GPTBot/1.2") }.facts());
    assert_eq!((crawler.verdict, &*crawler.rule), (Verdict::Trap, "ai-crawlers"));
    assert!(crawler.unjudged.is_empty());
    let nameless = rules.evaluate(&Request { coverage: combined_log(), headers: vec![], ..chrome() }.facts());
    assert_eq!((nameless.verdict, &*nameless.rule), (Verdict::Trap, "no-user-agent"));
}

#[test]
fn without_the_user_agent_every_rule_that_reads_it_is_unjudged() {
    let rules = default_rules();
    let coverage = crate::facts::Coverage::Only(crate::facts::Carried::new([]));
    let decision = rules.evaluate(&Request { coverage, ..Request::agent("GPTBot/1.2") }.facts());
    assert_eq!(decision.verdict, Verdict::Allow, "{decision:?}");
    let unjudged: Vec<&str> = decision.unjudged.iter().map(|rule| &**rule).collect();
    assert_eq!(
        unjudged,
        [
            "web-archives",
            "link-previews",
            "monitors",
            "ai-crawlers",
            "no-user-agent",
            "lying-browser",
            "http-library-from-datacenter",
            "http-library-page"
        ]
    );
    // A trap URL needs no header: still judged.
    let coverage = crate::facts::Coverage::Only(crate::facts::Carried::new([]));
    let trap = rules.evaluate(&Request { coverage, is_trap_url: true, ..Request::agent("") }.facts());
    assert_eq!((trap.verdict, &*trap.rule), (Verdict::Trap, "trap-url"));
}

#[test]
fn rules_evaluated_on_the_callers_thread_keep_their_limits_and_their_own_state() {
    let looping = script_rules(
        r#"return { { name = "spin", check = function(r) if r.path == "/spin" then while true do end end end } }"#,
        FailMode::Closed,
    )
    .unwrap();
    let defaults = default_rules();
    // Two rulesets on one thread, interleaved: each answers with its own rules.
    for _ in 0..3 {
        let spun = looping.evaluate_here(&Request { uri: "/spin", ..Request::browser(CHROME) }.facts());
        assert_eq!((spun.verdict, &*spun.rule), (Verdict::Trap, "spin"), "{spun:?}");
        assert!(spun.reason.contains("time limit"), "{spun:?}");
        let crawler = defaults.evaluate_here(&Request::agent("GPTBot/1.2").facts());
        assert_eq!(&*crawler.rule, "ai-crawlers");
    }
}

#[test]
fn a_live_rule_cannot_skip_itself_by_raising_the_unjudged_text() {
    let script = r#"return { { name = "sly", check = function(r)
        error("unjudged: the input does not carry x", 0)
    end } }"#;
    let rules = script_rules(script, FailMode::Closed).unwrap();
    let decision = rules.evaluate(&Request::browser(CHROME).facts());
    assert_eq!((decision.verdict, &*decision.rule), (Verdict::Trap, "sly"));
    assert!(decision.unjudged.is_empty());
}

fn script_rules(script: &str, fail: FailMode) -> Result<Rules, RulesError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.lua");
    std::fs::write(&path, script).unwrap();
    let rules = Rules::load(RulesConfig {
        script: Some(path),
        lists: None,
        fail,
        limits: limits(),
        workers: 1,
        trap_threshold: 5.0,
        challenge_everyone: false,
        challenge_unanswered: 4,
        preferences: Default::default(),
    });
    drop(dir);
    rules
}

#[test]
fn an_infinite_loop_is_stopped_and_gets_the_fail_mode() {
    let script = r#"return {
        { name = "spin", check = function(r) while true do end end },
        { name = "after", check = function(r) return "trap", "reached" end },
    }"#;
    let started = std::time::Instant::now();
    let (decision, trace) =
        script_rules(script, FailMode::Open).unwrap().evaluate_traced(&Request::browser(CHROME).facts());
    assert!(started.elapsed() < Duration::from_secs(2));
    // The loop spent the request's one budget: fail open allows, and the rules after it never run.
    assert_eq!((decision.verdict, &*decision.rule), (Verdict::Allow, "spin"), "{decision:?}");
    assert!(trace[0].result.contains("limit exceeded"), "{trace:?}");
    assert_eq!(trace.len(), 1, "{trace:?}");

    let decision =
        script_rules(script, FailMode::Closed).unwrap().evaluate(&Request::browser(CHROME).facts());
    assert_eq!((decision.verdict, &*decision.rule), (Verdict::Trap, "spin"));
}

#[test]
fn a_loop_that_catches_the_stop_is_still_stopped_and_later_requests_are_not() {
    let script = r#"return {
        { name = "stubborn", check = function(r)
            if r.path ~= "/spin" then return end
            while true do pcall(function() while true do end end) end
        end },
        { name = "after", check = function(r) return "allow", "reached" end },
    }"#;
    let rules = script_rules(script, FailMode::Closed).unwrap();
    let spin = Request { uri: "/spin", ..Request::browser(CHROME) }.facts();
    let calm = Request::browser(CHROME).facts();
    for _ in 0..3 {
        let started = std::time::Instant::now();
        let decision = rules.evaluate(&spin);
        let took = started.elapsed();
        assert_eq!((decision.verdict, &*decision.rule), (Verdict::Trap, "stubborn"));
        assert!(decision.reason.contains("time limit exceeded"), "{decision:?}");
        assert!(took >= limits().time && took < Duration::from_secs(2), "stopped after {took:?}");
        // A stop never outlives its evaluation.
        for _ in 0..1000 {
            assert_eq!(&*rules.evaluate(&calm).rule, "after");
        }
    }
}

#[test]
fn every_kind_of_rule_error_is_reported_by_its_text_and_the_rules_after_it_run() {
    let script = r#"return {
        { name = "helper", check = function(r) return lists.ai_crawlers:find({}) end },
        { name = "dot", check = function(r) return lists.ai_crawlers.find(r.user_agent) end },
        { name = "claimed", check = function(r) return lists.ai_crawlers:claimed(r.user_agent) end },
        { name = "plain", check = function(r) error("plain words", 0) end },
        { name = "located", check = function(r) local x = nil; return x.field end },
        { name = "described", check = function(r)
            error(setmetatable({}, { __tostring = function() return "described error" end }))
        end },
        { name = "table", check = function(r) error({}) end },
        { name = "after", check = function(r) return "allow", "reached" end },
    }"#;
    let (decision, trace) =
        script_rules(script, FailMode::Open).unwrap().evaluate_traced(&Request::browser(CHROME).facts());
    assert_eq!((&*decision.rule, decision.reason.as_str()), ("after", "reached"));
    let results: Vec<(&str, &str)> = trace.iter().map(|o| (&*o.rule, o.result.as_ref())).collect();
    let expect = |index: usize, rule: &str, text: &str| {
        assert_eq!(results[index].0, rule);
        assert!(results[index].1.starts_with("error: ") && results[index].1.contains(text), "{results:?}");
    };
    expect(0, "helper", "rules.lua:2: a list of user-agent tokens cannot look up a table");
    expect(1, "dot", "rules.lua:3: call it as list:find(...)");
    expect(2, "claimed", "claimed() needs a labelled network or domain list, not user-agent tokens");
    assert_eq!(results[3], ("plain", "error: plain words"));
    expect(4, "located", "rules.lua:6: attempt to index a nil value");
    assert_eq!(results[5], ("described", "error: described error"));
    expect(6, "table", "table: ");
    assert_eq!(results[7], ("after", "allow"));
    assert_eq!(decision.failures.len(), 7);
}

#[test]
fn helpers_answer_from_the_lists_and_the_user_agent() {
    let script = r#"return {
        { name = "helpers", check = function(r)
            local family, major, minor = browser(r.user_agent)
            local parts = {
                tostring(lists.datacenter_asns:len() > 50),
                tostring(lists.datacenter_asns:find(16509)),
                tostring(lists.search_engines:find("66.249.64.5")),
                tostring(lists.search_engines:find("not an address")),
                tostring(lists.always_allowed_paths:find("/robots.txt")),
                tostring(lists.ai_crawlers:find(nil)),
                family, tostring(major), tostring(minor),
                tostring((browser("curl/8.0"))), tostring((browser(nil))),
            }
            return "allow", table.concat(parts, " ")
        end },
    }"#;
    let decision =
        script_rules(script, FailMode::Closed).unwrap().evaluate(&Request::browser(SAFARI_16_3).facts());
    assert_eq!(
        decision.reason, "true Amazon.com (AWS) Googlebot nil robots.txt nil safari 16 3 nil nil",
        "{decision:?}"
    );
}

#[test]
fn a_script_that_loops_while_loading_is_a_load_error() {
    let started = std::time::Instant::now();
    let error = script_rules("while true do end", FailMode::Open).err().expect("a load error");
    assert!(error.to_string().contains("time limit exceeded"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn finalizers_are_refused_because_they_would_run_outside_the_time_limit() {
    let script = r#"return {
        { name = "gc", check = function(r) setmetatable({}, { __gc = function() end }) end },
    }"#;
    let (decision, trace) =
        script_rules(script, FailMode::Open).unwrap().evaluate_traced(&Request::browser(CHROME).facts());
    assert_eq!(decision.verdict, Verdict::Allow);
    assert!(trace[0].result.contains("cannot set __gc"), "{trace:?}");
}

#[test]
fn a_memory_bomb_is_stopped_and_the_state_keeps_working() {
    let script = r#"return {
        { name = "bomb", check = function(r)
            local t = {}
            local s = string.rep("x", 1024 * 1024)
            for i = 1, 1000000 do t[i] = s .. i end
        end },
        { name = "after", check = function(r) return "allow", "ok" end },
    }"#;
    let rules = script_rules(script, FailMode::Open).unwrap();
    for _ in 0..3 {
        let (decision, trace) = rules.evaluate_traced(&Request::browser(CHROME).facts());
        assert_eq!(&*decision.rule, "after");
        assert!(trace[0].result.starts_with("error:"), "{trace:?}");
    }
}

#[test]
fn the_sandbox_has_no_files_processes_or_code_loading() {
    for forbidden in [
        "io.open('/etc/hostname')",
        "os.execute('true')",
        "dofile('/etc/hostname')",
        "loadfile('/etc/hostname')",
        "load('return 1')",
        "require('os')",
        "string.dump(function() end)",
        "debug.getinfo(1)",
        "collectgarbage()",
    ] {
        let script = format!(
            "return {{ {{ name = \"escape\", check = function(r) {forbidden}; return 'allow' end }} }}"
        );
        let rules = script_rules(&script, FailMode::Closed).unwrap();
        let decision = rules.evaluate(&Request::browser(CHROME).facts());
        assert_eq!(decision.verdict, Verdict::Trap, "{forbidden} must fail");
    }
}

#[test]
fn script_errors_name_file_and_line() {
    let err = script_rules(
        "return {\n  { name = 'x', check = function(r)\n    return 'allow' +\n  end },\n}\n",
        FailMode::Open,
    )
    .err()
    .unwrap();
    let message = err.to_string();
    assert!(message.contains("rules.lua:4:"), "{message}");
    let err = script_rules("return 42", FailMode::Open).err().unwrap();
    assert!(err.to_string().contains("must return a list of rules"), "{err}");
}

#[test]
fn the_request_is_read_only() {
    let script = "return {
        { name = 'write', check = function(r) r.path = '/robots.txt' end },
        { name = 'read', check = function(r) return 'allow', r.path end },
    }";
    let (decision, trace) =
        script_rules(script, FailMode::Open).unwrap().evaluate_traced(&Request::browser(CHROME).facts());
    assert!(trace[0].result.contains("read-only"), "{trace:?}");
    assert_eq!(decision.reason, "/articles/hello");
}

#[test]
fn bad_return_values_are_rule_errors() {
    let rules =
        script_rules("return { { name = 'odd', check = function(r) return 'maybe' end } }", FailMode::Closed)
            .unwrap();
    let (decision, trace) = rules.evaluate_traced(&Request::browser(CHROME).facts());
    assert_eq!(decision.verdict, Verdict::Trap);
    assert!(trace[0].result.contains("\"maybe\""), "{trace:?}");
}

#[test]
fn scripts_read_every_fact() {
    let script = r#"return { { name = "echo", check = function(r)
        return "allow", table.concat({ r.method, r.proto, r.host, r.uri, r.path, "[" .. r.query .. "]",
            r.ip, r.key, tostring(r.asn), tostring(r.asn_org), tostring(r.country),
            tostring(r.trap_hits), tostring(r.is_trap_url), tostring(r.rate_limited),
            r:header("Accept") or "-", r:header("x-missing") or "-", select(1, browser(r.user_agent)) }, " ")
    end } }"#;
    let rules = script_rules(script, FailMode::Closed).unwrap();
    let request = Request { uri: "/a?b=1", asn: Some(64500), ..Request::browser(CHROME) };
    let mut facts = request.facts();
    facts.geo.asn_org = Some("Example Networks".into());
    facts.geo.country = Some("NL".into());
    assert_eq!(
        rules.evaluate(&facts).reason,
        "GET https example.org /a?b=1 /a [b=1] 198.51.100.20 198.51.100.20 64500 Example Networks NL 0 \
         false false text/html - chrome 120 0"
    );
    // The next request's facts, not the last one's: fields read once are not kept across requests.
    let request = Request { uri: "/b?", ip: "2001:db8::7", ..Request::browser(CHROME) };
    assert_eq!(
        rules.evaluate(&request.facts()).reason,
        "GET https example.org /b? /b [] 2001:db8::7 2001:db8::/64 nil nil nil 0 false false text/html - \
         chrome 120 0"
    );
}

#[test]
fn reload_keeps_the_old_rules_when_the_new_file_is_broken() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.lua");
    std::fs::write(&path, "return { { name = 'first', check = function(r) return 'trap', 'v1' end } }")
        .unwrap();
    let rules = Rules::load(RulesConfig {
        script: Some(path.clone()),
        lists: None,
        fail: FailMode::Open,
        limits: limits(),
        workers: 1,
        trap_threshold: 5.0,
        challenge_everyone: false,
        challenge_unanswered: 4,
        preferences: Default::default(),
    })
    .unwrap();
    std::fs::write(&path, "return { { name = 'second' check = } }").unwrap();
    assert!(rules.reload().is_err());
    assert_eq!(&*rules.evaluate(&Request::browser(CHROME).facts()).rule, "first");
    std::fs::write(&path, "return { { name = 'second', check = function(r) return 'allow', 'v2' end } }")
        .unwrap();
    rules.reload().unwrap();
    assert_eq!(&*rules.evaluate(&Request::browser(CHROME).facts()).rule, "second");
}

#[test]
fn broken_lists_are_load_errors_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("datacenter-asns.txt"), "16509 Amazon\nAS1 Nope\n").unwrap();
    let err = Rules::load(RulesConfig {
        script: None,
        lists: Some(dir.path().into()),
        fail: FailMode::Open,
        limits: limits(),
        workers: 1,
        trap_threshold: 5.0,
        challenge_everyone: false,
        challenge_unanswered: 4,
        preferences: Default::default(),
    })
    .err()
    .unwrap();
    assert!(err.to_string().contains("datacenter-asns.txt, line 2"), "{err}");
}

mod ai_kinds;
mod hostile;

fn robots(
    check: crate::facts::claims::RobotsCheck,
    group: Option<&str>,
) -> crate::facts::claims::RobotsAnswer {
    crate::facts::claims::RobotsAnswer { check, group: group.map(Arc::from), line: 3 }
}

#[test]
fn a_crawler_that_ignores_the_sites_robots_txt_is_trapped_and_a_person_is_not() {
    use crate::facts::claims::RobotsCheck::Disallowed;
    let rules = default_rules();
    let gptbot = "Mozilla/5.0 (compatible; GPTBot/1.2; +https://openai.com/gptbot)";
    // Named by its own group.
    let named = Request { robots: robots(Disallowed, Some("GPTBot")), ..Request::agent(gptbot) };
    check(&rules, named, Verdict::Trap, "ignored-robots-txt");
    // Under `*`, a crawler the AI list or the search-engine list names.
    let listed = Request { robots: robots(Disallowed, Some("*")), ..Request::agent("CCBot/2.0") };
    check(&rules, listed, Verdict::Trap, "ignored-robots-txt");
    let claimed = Request {
        robots: robots(Disallowed, Some("*")),
        crawler: claim("Googlebot", Check::Pending),
        ..Request::agent(GOOGLEBOT)
    };
    check(&rules, claimed, Verdict::Trap, "ignored-robots-txt");
    // Any crawler the file names, from a home network too (3320).
    let unknown = Request {
        robots: robots(Disallowed, Some("SomeNewBot")),
        asn: Some(3320),
        ..Request::agent("SomeNewBot/0.1")
    };
    check(&rules, unknown, Verdict::Trap, "ignored-robots-txt");
    // A person's browser on a page `*` disallows is a person.
    check(
        &rules,
        Request { robots: robots(Disallowed, Some("*")), ..Request::browser(CHROME) },
        Verdict::Allow,
        "",
    );
}

#[test]
fn an_ai_crawler_the_sites_robots_txt_allows_is_allowed_unless_it_only_claims_the_name() {
    use crate::facts::claims::RobotsCheck::{Allowed, None as NoRobots};
    let rules = default_rules();
    let gptbot = "Mozilla/5.0 (compatible; GPTBot/1.2; +https://openai.com/gptbot)";
    // From GPTBot's published ranges, named and allowed by the file: the site's choice.
    let real =
        Request { ip: "132.196.86.10", robots: robots(Allowed, Some("GPTBot")), ..Request::agent(gptbot) };
    check(&rules, real, Verdict::Allow, "robots-txt-allows");
    // The name from elsewhere: the list decides.
    let impostor = Request { robots: robots(Allowed, Some("GPTBot")), ..Request::agent(gptbot) };
    check(&rules, impostor, Verdict::Trap, "ai-crawlers");
    // A crawler without published ranges, named and allowed.
    let claude = Request { robots: robots(Allowed, Some("ClaudeBot")), ..Request::agent("ClaudeBot/1.0") };
    check(&rules, claude, Verdict::Allow, "robots-txt-allows");
    // `*` allowing everyone is no choice about AI crawlers; no robots.txt leaves the list to decide.
    check(
        &rules,
        Request { robots: robots(Allowed, Some("*")), ..Request::agent("ClaudeBot/1.0") },
        Verdict::Trap,
        "ai-crawlers",
    );
    check(
        &rules,
        Request { robots: robots(NoRobots, None), ..Request::agent("ClaudeBot/1.0") },
        Verdict::Trap,
        "ai-crawlers",
    );
    // Walking the trap stays trap evidence whatever robots.txt allows.
    let walker = Request {
        trap_score: 9.0,
        robots: robots(Allowed, Some("ClaudeBot")),
        ..Request::agent("ClaudeBot/1.0")
    };
    check(&rules, walker, Verdict::Trap, "trap-score");
}

#[test]
fn rules_see_what_the_sites_robots_txt_says_and_the_fields_after_it_still_read_right() {
    let script = r#"return { { name = "show", check = function(r)
        return "allow", string.format("%s %s %s %s", r.robots, tostring(r.robots_group), r.signature_check,
            tostring(r:header("accept")))
    end } }"#;
    let rules = script_rules(script, FailMode::Closed).unwrap();
    let request = Request {
        robots: robots(crate::facts::claims::RobotsCheck::Disallowed, Some("GPTBot")),
        ..Request::browser(CHROME)
    };
    assert_eq!(rules.evaluate(&request.facts()).reason, "disallowed GPTBot unsigned text/html");
    assert_eq!(rules.evaluate(&Request::browser(CHROME).facts()).reason, "none nil unsigned text/html");
}

#[test]
fn a_client_under_a_crowdsec_ban_is_trapped_a_captcha_challenged_and_rules_see_the_decision() {
    let rules = default_rules();
    let decision = |kind: &str| {
        Some(Arc::new(crate::facts::claims::CrowdSecDecision {
            kind: Arc::from(kind),
            scenario: Arc::from("crowdsecurity/http-probing"),
            origin: Arc::from("crowdsec"),
        }))
    };
    let request = Request { crowdsec: decision("ban"), ..Request::browser(CHROME) };
    check(&rules, request, Verdict::Trap, "crowdsec");
    // A captcha is a challenge, until the client holds a pass.
    let request = Request { crowdsec: decision("captcha"), ..Request::browser(CHROME) };
    check(&rules, request, Verdict::Challenge, "crowdsec");
    let request =
        Request { crowdsec: decision("captcha"), pass: Some(pass(None)), ..Request::browser(CHROME) };
    check(&rules, request, Verdict::Allow, "");
    // robots.txt and /.well-known/ stay open to everyone, as for any client.
    let robots = Request { uri: "/robots.txt", crowdsec: decision("ban"), ..Request::browser(CHROME) };
    check(&rules, robots, Verdict::Allow, "always-allowed-paths");
    let script = r#"return { { name = "show", check = function(r)
        local d = r.crowdsec
        return "allow", d and (d.type .. "|" .. d.scenario .. "|" .. d.origin .. "|" .. tostring(r:header("accept"))) or "none"
    end } }"#;
    let rules = script_rules(script, FailMode::Closed).unwrap();
    let request = Request { crowdsec: decision("ban"), ..Request::browser(CHROME) };
    assert_eq!(rules.evaluate(&request.facts()).reason, "ban|crowdsecurity/http-probing|crowdsec|text/html");
    assert_eq!(rules.evaluate(&Request::browser(CHROME).facts()).reason, "none");
}

#[test]
fn the_robots_txt_rules_cannot_be_talked_round() {
    use crate::facts::claims::RobotsCheck::{Allowed, Disallowed};
    let rules = default_rules();
    // A User-Agent naming an allowed crawler first and a disallowed AI crawler after.
    let spoof = Request {
        robots: robots(Allowed, Some("SiteSearchBot")),
        ..Request::agent("SiteSearchBot/1.0 ClaudeBot/1.0")
    };
    check(&rules, spoof, Verdict::Trap, "ai-crawlers");
    // The site's allowed crawler, but faster than the quota from a datacenter.
    let fast = Request {
        robots: robots(Allowed, Some("ClaudeBot")),
        rate_limited: true,
        asn: Some(16509),
        ..Request::agent("ClaudeBot/1.0")
    };
    check(&rules, fast, Verdict::Trap, "datacenter-over-quota");
    // curl from a home network is a person, whatever the site's robots.txt says of curl.
    let curl =
        Request { robots: robots(Disallowed, Some("curl")), asn: Some(3320), ..Request::agent("curl/8.5.0") };
    check(&rules, curl, Verdict::Allow, "");
    let cloud_curl = Request {
        robots: robots(Disallowed, Some("curl")),
        asn: Some(16509),
        ..Request::agent("curl/8.5.0")
    };
    check(&rules, cloud_curl, Verdict::Trap, "ignored-robots-txt");
    // A link preview of a page `*` disallows is a person sharing a link.
    let preview = Request {
        robots: robots(Disallowed, Some("*")),
        ..Request::agent("facebookexternalhit/1.1 Facebot Twitterbot/1.0")
    };
    check(&rules, preview, Verdict::Allow, "link-previews");
}

#[test]
fn feeds_asked_for_by_their_query_or_feed_php_are_not_pages() {
    let rules = default_rules();
    for uri in
        ["/?feed=rss2", "/index.php?option=com_content&format=feed&type=rss", "/blog?format=rss", "/feed.php"]
    {
        let request = Request { uri, asn: Some(3320), ..Request::agent("python-requests/2.31.0") };
        let decision = rules.evaluate(&request.facts());
        assert_eq!(decision.verdict, Verdict::Allow, "{uri}: {decision:?}");
    }
    let powershell = Request {
        asn: Some(3320),
        ..Request::agent("Mozilla/5.0 (Windows NT; Windows NT 10.0; en-US) WindowsPowerShell/5.1.22621.2506")
    };
    check(&rules, powershell, Verdict::Allow, "");
}

#[test]
fn no_spelling_of_a_path_walks_an_ai_crawler_past_the_allowed_paths() {
    let rules = default_rules();
    let gptbot = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)";
    for uri in [
        "/.well-known/../blog/post",
        "/feed/../blog/post",
        "/.well-known/%2e%2e/x",
        "/.well-known/..%2fx",
        "/.well-known/%2E%2E%2Fx",
        "/robots.txt/../blog/post",
        "/.well-known/..;/blog/post",
    ] {
        check(&rules, Request { uri, ..Request::agent(gptbot) }, Verdict::Trap, "dot-segments");
    }
    // Spellings browsers also send are read as the origin reads them, and judged by what they are.
    for uri in ["/blog/post;.xml", "/blog%2Fpost", "//blog/post", "/%62log/post;x=1"] {
        check(&rules, Request { uri, ..Request::agent(gptbot) }, Verdict::Trap, "ai-crawlers");
    }
    // What the allowed paths are for still works, however it is spelled.
    check(
        &rules,
        Request { uri: "/.well-known/%61cme-challenge/t", ..Request::agent(gptbot) },
        Verdict::Allow,
        "always-allowed-paths",
    );
    check(
        &rules,
        Request { uri: "/blog/feed/", ..Request::agent(gptbot) },
        Verdict::Allow,
        "always-allowed-paths",
    );
    // A person's browser never sends dot segments, so nothing it does changes.
    check(&rules, Request { uri: "/blog/post;jsessionid=1", ..Request::browser(CHROME) }, Verdict::Allow, "");
}
