//! How long a real Chromium takes to answer a challenge at a difficulty: drives a headless
//! Chromium over WebDriver (chromedriver on the port given) to quagmire's `/challenge` page again
//! and again, timing each from the navigation to the answer's redirect, and prints the median and
//! the 95th percentile. Used by `bench/challenge-solve.sh`, which starts quagmire and chromedriver.
//!
//! usage: solve_time CHROMEDRIVER_PORT QUAGMIRE_VERDICT_URL ROUNDS

use std::time::{Duration, Instant};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let driver = format!("http://127.0.0.1:{}", args.next().expect("the chromedriver port"));
    let page = format!("{}/challenge", args.next().expect("the verdict listener's URL"));
    let rounds: usize = args.next().and_then(|rounds| rounds.parse().ok()).unwrap_or(20);
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
