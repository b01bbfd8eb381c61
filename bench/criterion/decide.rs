//! In-process decision speed with the default ruleset: `verdict::decide` on browser-like and
//! crawler-like requests (identity, client record, enrichment, all Lua rules).

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use quagmire::App;
use quagmire::Config;
use quagmire::Secret;
use quagmire::{ChallengeConfig, Challenger, Earned, PassCheck, meets_difficulty};
use quagmire::{ForwardedRequest, How, RunRules, Verify, decide_blocking};
use std::time::SystemTime;

/// The service's allocator (see `src/main.rs`), so that these figures are the service's.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Rules as the service runs them: on this thread within the inline lane's limits (else on a
/// worker); nothing waited for.
const SERVICE: How = How { rules: RunRules::Inline, verify: Verify::AsCached, trace: false };
/// Rules always on a worker, as the service ran them before the inline lane.
const WORKER: How = How { rules: RunRules::Worker, verify: Verify::AsCached, trace: false };
/// Rules on the calling thread, as `replay` runs them.
const HERE: How = How { rules: RunRules::Here, verify: Verify::AsCached, trace: false };

const CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36";

fn request(user_agent: &str, client: &str) -> ForwardedRequest {
    let headers = [
        ("user-agent", user_agent),
        ("accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
        ("accept-language", "en-US,en;q=0.9"),
        ("sec-fetch-site", "none"),
        ("sec-fetch-mode", "navigate"),
        ("sec-fetch-dest", "document"),
        ("x-forwarded-for", client),
        ("x-forwarded-proto", "https"),
        ("x-forwarded-host", "site.example"),
        ("x-forwarded-uri", "/articles/2024/some-post"),
    ];
    ForwardedRequest {
        method: "GET".into(),
        proto: "https".into(),
        host: "site.example".into(),
        uri: "/articles/2024/some-post".into(),
        headers: headers.into_iter().collect(),
        ..ForwardedRequest::from_peer([127, 0, 0, 1].into())
    }
}

/// Browser page views from 65,536 clients in turn (198.18.0.0/16, the benchmarking range): each
/// client's pace stays a person's (a few requests a second at most), so the page view is allowed
/// as it would be live; one client asking a million times would be over its quota and challenged.
fn people(human: &ForwardedRequest) -> impl FnMut() -> ForwardedRequest + '_ {
    let mut n = 0u32;
    move || {
        n = n.wrapping_add(1);
        let client = format!("198.18.{}.{}", (n >> 8) & 255, n & 255);
        let mut request = human.clone();
        request.headers = human
            .headers
            .iter()
            .map(|(name, value)| (name, if name == "x-forwarded-for" { client.as_str() } else { value }))
            .collect();
        request
    }
}

fn decisions(c: &mut Criterion) {
    let (secret, _) = Secret::resolve(Some("bench-secret-0123456789abcdef".into()), None);
    let app = App::build(Config::embedded(), &secret).expect("the embedded config builds");
    let human = request(CHROME, "198.51.100.7");
    let crawler = request("Mozilla/5.0 (compatible; GPTBot/1.2; +https://openai.com/gptbot)", "198.51.100.8");
    let mut group = c.benchmark_group("decide");
    // The path the service runs, whole: the proxy's request as hyper parsed it, served by the
    // verdict router on a runtime (headers copied, identity, history, enrichment, the rules in
    // the inline lane, metrics, the response); only the network is not there.
    served(&mut group, &secret, &human);
    // `decide` takes the request by value; the copy made for each iteration is not timed.
    group.bench_function("browser_allowed", |b| {
        b.iter_batched(
            people(&human),
            |request| decide_blocking(&app, request, SERVICE),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("browser_allowed_on_a_worker", |b| {
        b.iter_batched(
            people(&human),
            |request| decide_blocking(&app, request, WORKER),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("crawler_trapped", |b| {
        b.iter_batched(
            || crawler.clone(),
            |request| decide_blocking(&app, request, SERVICE),
            BatchSize::SmallInput,
        )
    });
    // The cost of the site's robots.txt: the same browser page view without one and with
    // bench/robots-200.sh's 200 lines for every host (the page view falls under `*` and is
    // matched against all of its rules), rules on this thread so that no hand-over to a worker
    // (a thread wake-up, which dominates a lone request) blurs the difference.
    let with_robots = robots_app(&secret);
    for (name, app) in [("browser_allowed_here", &app), ("browser_allowed_here_robots_200", &with_robots)] {
        group.bench_function(name, |b| {
            b.iter_batched(
                people(&human),
                |request| decide_blocking(app, request, HERE),
                BatchSize::SmallInput,
            )
        });
    }
    // The same page view carrying a valid pass: reading and checking the cookie, the pass's own
    // record, its networks and page pace. Each iteration is a new pass (minted outside the
    // timing), so its page pace never runs over.
    let challenger =
        Challenger::new(ChallengeConfig::default(), secret.as_bytes(), [String::new(), String::new()]);
    group.bench_function("browser_allowed_here_with_pass", |b| {
        let mut next = people(&human);
        b.iter_batched(
            || {
                let mut request = next();
                let cookie =
                    format!("sid=abc123; quagmire_pass={}", challenger.mint(Earned::Work, SystemTime::now()));
                request.headers = request.headers.iter().chain([("cookie", cookie.as_str())]).collect();
                request
            },
            |request| decide_blocking(&app, request, HERE),
            BatchSize::SmallInput,
        )
    });
    // The rules alone on prepared facts, where the service runs them and on a worker.
    let facts = decide_blocking(&app, human.clone(), SERVICE).facts;
    group.bench_function("rules_only", |b| {
        b.iter(|| black_box(app.rules().run_blocking(black_box(facts.clone()), RunRules::Inline, false)))
    });
    group.bench_function("rules_only_on_a_worker", |b| {
        b.iter(|| black_box(app.rules().run_blocking(black_box(facts.clone()), RunRules::Worker, false)))
    });
    group.finish();
}

/// `decide/served`: `human`'s page view, from 65,536 clients in turn, as forward-auth requests
/// to the verdict router on a multi-threaded runtime (the service's), each answered 200.
fn served(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    secret: &Secret,
    human: &ForwardedRequest,
) {
    use axum::body::Body;
    use axum::extract::ConnectInfo;
    use tower_service::Service;

    let app =
        std::sync::Arc::new(App::build(Config::embedded(), secret).expect("the embedded config builds"));
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    let router = quagmire::verdict_router(app);
    let mut next = people(human);
    let peer: std::net::SocketAddr = ([127, 0, 0, 1], 40000).into();
    group.bench_function("served", |b| {
        b.iter_batched(
            || {
                let request = next();
                let mut builder = axum::http::Request::get("/verdict");
                for (name, value) in request.headers.iter() {
                    builder = builder.header(name, value);
                }
                let mut request = builder.body(Body::empty()).expect("a request");
                request.extensions_mut().insert(ConnectInfo(peer));
                request
            },
            |request| {
                let response = runtime.block_on(router.clone().call(request)).expect("infallible");
                assert_eq!(response.status(), 200);
                response
            },
            BatchSize::SmallInput,
        )
    });
}

/// The embedded config with bench/robots-200.sh's robots.txt for every host.
fn robots_app(secret: &Secret) -> App {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let file = dir.path().join("robots.txt");
    let written = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!("source bench/robots-200.sh && write_robots_200 '{}'", file.display()))
        .status()
        .expect("bash runs");
    assert!(written.success(), "bench/robots-200.sh wrote no robots.txt");
    let text = format!("robots {{\n    file \"*\" \"{}\"\n}}\n", file.display());
    let config = Config::parse("bench.kdl", &text, dir.path()).expect("the robots config parses");
    App::build(config, secret).expect("the config builds")
}

/// The two checks a challenge costs the server: a pass cookie's MAC and expiry on every verdict
/// that carries one, and one answer's proof of work (a single SHA-256).
fn checks(c: &mut Criterion) {
    let challenger =
        Challenger::new(ChallengeConfig::default(), b"bench-secret", [String::new(), String::new()]);
    let now = SystemTime::now();
    let cookie = challenger.mint(Earned::Work, now);
    let issued = challenger.issue([198, 51, 100, 7].into(), "Mozilla/5.0", now);
    let nonce = (0u64..).map(|n| n.to_string()).find(|n| meets_difficulty(&issued.token, n, 16)).unwrap();
    let mut group = c.benchmark_group("challenge");
    group.bench_function("pass_check", |b| {
        b.iter(|| assert!(matches!(challenger.read_pass(black_box(&cookie), now), PassCheck::Valid(_))))
    });
    group.bench_function("work_check", |b| {
        b.iter(|| assert!(meets_difficulty(black_box(&issued.token), &nonce, 16)))
    });
    group.finish();
}

criterion_group!(benches, decisions, checks);
criterion_main!(benches);
