//! How long a real Chromium takes to answer a challenge at a difficulty: drives a headless
//! Chromium over WebDriver (chromedriver on the port given) to quagmire's `/challenge` page again
//! and again, timing each from the navigation to the answer's redirect, and prints the median and
//! the 95th percentile. Used by `bench/challenge-solve.sh`, which starts quagmire and chromedriver.
//!
//! With `--rate WORKER_JS...` it measures instead how many hashes a second one worker does: each
//! worker script given (today's, and an older one for comparison) runs in the same Chromium, on a
//! page of quagmire's origin (a secure context, as https pages are), ROUNDS searches at 20 bits
//! for challenges of the real token's length; the nonce found plus one is the hashes it tried.
//!
//! usage: solve_time CHROMEDRIVER_PORT QUAGMIRE_VERDICT_URL ROUNDS [--rate WORKER_JS...]

use std::time::{Duration, Instant};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let driver = format!("http://127.0.0.1:{}", args.next().expect("the chromedriver port"));
    let page = format!("{}/challenge", args.next().expect("the verdict listener's URL"));
    let rounds: usize = args.next().and_then(|rounds| rounds.parse().ok()).unwrap_or(20);
    let workers: Vec<String> = args.skip_while(|arg| arg != "--rate").skip(1).collect();
    let http = reqwest::Client::new();
    let capabilities = serde_json::json!({ "capabilities": { "alwaysMatch": {
        "browserName": "chrome",
        "goog:chromeOptions": { "binary": "/usr/bin/chromium", "args": [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--user-agent=Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36",
        ] },
    } } });
    let created = http.post(format!("{driver}/session")).body(capabilities.to_string()).send().await.unwrap();
    let created: serde_json::Value = serde_json::from_str(&created.text().await.unwrap()).unwrap();
    let session = format!("{driver}/session/{}", created["value"]["sessionId"].as_str().expect("a session"));
    if !workers.is_empty() {
        let timeouts = serde_json::json!({ "script": 600_000 }).to_string();
        http.post(format!("{session}/timeouts")).body(timeouts).send().await.unwrap();
        // A page of quagmire's origin that starts no work of its own.
        let body = serde_json::json!({ "url": page.replace("/challenge", "/.quagmire/worker.js") });
        http.post(format!("{session}/url")).body(body.to_string()).send().await.unwrap();
        for path in &workers {
            let source = std::fs::read_to_string(path).expect("a worker script");
            let body = serde_json::json!({ "script": RATE_SCRIPT, "args": [source, 20, rounds] });
            let sent = http.post(format!("{session}/execute/async")).body(body.to_string());
            let reply = sent.timeout(Duration::from_secs(600)).send().await.unwrap();
            let reply: serde_json::Value = serde_json::from_str(&reply.text().await.unwrap()).unwrap();
            let (hashes, seconds) = (reply["value"]["hashes"].as_f64(), reply["value"]["seconds"].as_f64());
            let (Some(hashes), Some(seconds)) = (hashes, seconds) else { panic!("no measurement: {reply}") };
            println!(
                "{path}: {:.0} hashes a second in one worker ({hashes:.0} hashes in {seconds:.2} s, {rounds} searches)",
                hashes / seconds
            );
        }
        let _ = http.delete(session).send().await;
        return;
    }
    let mut times = Vec::new();
    for _ in 0..rounds {
        let started = Instant::now();
        let body = serde_json::json!({ "url": page }).to_string();
        http.post(format!("{session}/url")).body(body).send().await.unwrap();
        loop {
            let current = http.get(format!("{session}/url")).send().await.unwrap().text().await.unwrap();
            if !current.contains("/challenge") {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(300), "no answer within 5 minutes");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        times.push(started.elapsed());
    }
    let _ = http.delete(session).send().await;
    times.sort();
    let at = |share: f64| times[((times.len() as f64 * share).ceil() as usize).clamp(1, times.len()) - 1];
    println!(
        "median {:.2} s, p95 {:.2} s, over {} answers",
        at(0.5).as_secs_f64(),
        at(0.95).as_secs_f64(),
        times.len()
    );
}

/// Runs `rounds` searches at `bits` in a fresh worker made from `source`, one after another, and
/// answers the hashes tried and the seconds they took (from each job's post to its answer).
const RATE_SCRIPT: &str = r#"
var source = arguments[0], bits = arguments[1], rounds = arguments[2];
var done = arguments[arguments.length - 1];
var url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
var alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
var hashes = 0, milliseconds = 0, round = 0;
function next() {
  if (round === rounds) { done({ hashes: hashes, seconds: milliseconds / 1000 }); return; }
  round++;
  var challenge = "";
  for (var i = 0; i < 92; i++) challenge += alphabet[Math.floor(Math.random() * 64)];
  var worker = new Worker(url);
  var started = performance.now();
  worker.onmessage = function (event) {
    milliseconds += performance.now() - started;
    hashes += Number(event.data) + 1;
    worker.terminate();
    next();
  };
  worker.postMessage({ challenge: challenge, bits: bits, start: 0, step: 1 });
}
next();
"#;
