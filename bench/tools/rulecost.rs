//! Times the rules engine on one request for a given script (or the default), to see where the
//! cost of a decision lies. Usage: `rulecost [SCRIPT]`; with `DECIDE=1`, times the whole
//! `verdict::decide` (request copy included) instead of the rules alone.

use std::time::{Duration, Instant};

use quagmire::App;
use quagmire::Config;
use quagmire::Secret;
use quagmire::{ForwardedRequest, How, RunRules, Verify, decide_blocking};

/// Rules on a worker, as the service runs them; nothing waited for.
const WORKER: How = How { rules: RunRules::Worker, verify: Verify::AsCached, trace: false };

fn main() {
    let mut config = Config::embedded();
    config.rules.script = std::env::args().nth(1).map(Into::into);
    let (secret, _) = Secret::resolve(Some("bench-secret-0123456789abcdef".into()), None);
    let app = App::build(config, &secret).expect("builds");
    let ua = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36";
    let request = ForwardedRequest {
        method: "GET".into(),
        proto: "https".into(),
        host: "site.example".into(),
        uri: "/articles/2024/some-post".into(),
        // The same headers as the `decide` bench's browser.
        headers: [
            ("user-agent", ua),
            ("accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
            ("accept-language", "en-US,en;q=0.9"),
            ("sec-fetch-site", "none"),
            ("sec-fetch-mode", "navigate"),
            ("sec-fetch-dest", "document"),
            ("x-forwarded-for", "198.51.100.7"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "site.example"),
            ("x-forwarded-uri", "/articles/2024/some-post"),
        ]
        .into_iter()
        .collect(),
        ..ForwardedRequest::from_peer([127, 0, 0, 1].into())
    };
    let whole = std::env::var_os("DECIDE").is_some();
    let facts = decide_blocking(&app, request.clone(), WORKER).facts;
    let rounds: u32 = std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(200_000);
    let mut best = Duration::MAX;
    for _ in 0..if rounds < 100_000 { 1 } else { 5 } {
        let started = Instant::now();
        for _ in 0..rounds {
            if whole {
                std::hint::black_box(decide_blocking(&app, std::hint::black_box(&request).clone(), WORKER));
            } else {
                std::hint::black_box(app.rules().evaluate(std::hint::black_box(&facts)));
            }
        }
        best = best.min(started.elapsed());
    }
    println!("{:.2} µs per evaluation", best.as_secs_f64() * 1e6 / f64::from(rounds));
}
