//! Times the rules engine on one request for a given script (or the default), to see where the
//! cost of a decision lies. Usage: `rulecost [SCRIPT]`; with `DECIDE=1`, times the whole
//! `verdict::decide` (a request's copy included) instead of the rules alone. Under callgrind,
//! `--toggle-collect=rulecost::decide` counts the decisions alone.

use std::sync::Arc;
use std::time::{Duration, Instant};

use quagmire::App;
use quagmire::Config;
use quagmire::Secret;
use quagmire::{ForwardedRequest, How, RunRules, Verify, decide_blocking};

/// Rules as the service runs them (inline, on this thread, within the inline limits); nothing
/// waited for.
const SERVICE: How = How { rules: RunRules::Inline, verify: Verify::AsCached, trace: false };

/// One whole decision, by name, so that callgrind can count it alone
/// (`--toggle-collect=rulecost::decide`).
#[inline(never)]
fn decide(app: &App, request: ForwardedRequest) -> quagmire::Judgement {
    decide_blocking(app, request, SERVICE)
}

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
    let facts = Arc::new(decide_blocking(&app, request.clone(), SERVICE).facts.as_ref().clone());
    // Whole decisions come from 16,384 clients in turn (198.18.0.0/18), so that each keeps a
    // person's pace and is allowed, as live; one client asked 200,000 times would be over its
    // quota and challenged.
    let requests: Vec<ForwardedRequest> = if whole {
        (0..16_384u32)
            .map(|n| {
                let client = format!("198.18.{}.{}", n >> 8, n & 255);
                let headers = request
                    .headers
                    .iter()
                    .map(|(name, value)| {
                        (name, if name == "x-forwarded-for" { client.as_str() } else { value })
                    })
                    .collect();
                ForwardedRequest { headers, ..request.clone() }
            })
            .collect()
    } else {
        Vec::new()
    };
    // Every client's record made once before anything is timed or counted: a live verdict finds
    // its client known (each of these comes back every quarter second at 60,000 verdicts/s).
    for request in &requests {
        decide_blocking(&app, request.clone(), SERVICE);
    }
    let rounds: u32 = std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(200_000);
    let mut best = Duration::MAX;
    for _ in 0..if rounds < 100_000 { 1 } else { 5 } {
        let started = Instant::now();
        for round in 0..rounds {
            if whole {
                let request = requests[round as usize % requests.len()].clone();
                std::hint::black_box(decide(&app, std::hint::black_box(request)));
            } else {
                let facts = std::hint::black_box(facts.clone());
                std::hint::black_box(app.rules().run_blocking(facts, RunRules::Inline, false));
            }
        }
        best = best.min(started.elapsed());
    }
    println!("{:.2} µs per evaluation", best.as_secs_f64() * 1e6 / f64::from(rounds));
    eprintln!("where the rules ran: {:?}", app.rules().inline_stats());
}
