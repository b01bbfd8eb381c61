//! In-process decision speed with the default ruleset: `verdict::decide` on browser-like and
//! crawler-like requests (identity, client record, enrichment, all Lua rules).

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use quagmire::App;
use quagmire::Config;
use quagmire::Secret;
use quagmire::{ForwardedRequest, How, RunRules, Verify, decide_blocking};

/// Rules on a worker, as the service runs them; nothing waited for.
const WORKER: How = How { rules: RunRules::Worker, verify: Verify::AsCached, trace: false };

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

fn decisions(c: &mut Criterion) {
    let (secret, _) = Secret::resolve(Some("bench-secret-0123456789abcdef".into()), None);
    let app = App::build(Config::embedded(), &secret).expect("the embedded config builds");
    let human = request(CHROME, "198.51.100.7");
    let crawler = request("Mozilla/5.0 (compatible; GPTBot/1.2; +https://openai.com/gptbot)", "198.51.100.8");
    let mut group = c.benchmark_group("decide");
    // `decide` takes the request by value; the copy made for each iteration is not timed.
    group.bench_function("browser_allowed", |b| {
        b.iter_batched(
            || human.clone(),
            |request| decide_blocking(&app, request, WORKER),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("crawler_trapped", |b| {
        b.iter_batched(
            || crawler.clone(),
            |request| decide_blocking(&app, request, WORKER),
            BatchSize::SmallInput,
        )
    });
    // The rules alone on prepared facts.
    let facts = decide_blocking(&app, human.clone(), WORKER).facts;
    group.bench_function("rules_only", |b| b.iter(|| black_box(app.rules().evaluate(black_box(&facts)))));
    group.finish();
}

criterion_group!(benches, decisions);
criterion_main!(benches);
