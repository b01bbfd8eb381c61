//! `/metrics` and `/api/trapped` after real traffic.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::support::{Server, get, require_program, verdict};

const CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36";

async fn traffic(server: &Server) {
    verdict(
        server,
        &[("x-forwarded-for", "198.51.100.1"), ("user-agent", CHROME), ("sec-fetch-mode", "navigate")],
    )
    .await;
    verdict(server, &[("x-forwarded-for", "198.51.100.2"), ("user-agent", "GPTBot/1.2")]).await;
    for i in 0..8 {
        let response = reqwest::Client::new()
            .get(server.trap_url(&format!("/walk/{i}")))
            .header("x-forwarded-for", "203.0.113.9")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    verdict(
        server,
        &[("x-forwarded-for", "203.0.113.9"), ("user-agent", "Scrapy/2.11 (+https://scrapy.org)")],
    )
    .await;
}

#[tokio::test]
async fn metrics_count_verdicts_pages_and_hits() {
    let server = Server::start(&[]);
    traffic(&server).await;
    let (status, headers, text) = get(&format!("http://{}/metrics", server.verdict), "localhost").await;
    assert_eq!(status, 200);
    assert!(headers["content-type"].to_str().unwrap().starts_with("text/plain"));
    for expected in [
        "quagmire_verdicts_total{verdict=\"allow\",rule=\"\",mode=\"enforce\"} 1",
        "quagmire_verdicts_total{verdict=\"trap\",rule=\"ai-crawlers\",mode=\"enforce\"} 1",
        "quagmire_verdicts_total{verdict=\"trap\",rule=\"trap-score\",mode=\"enforce\"} 1",
        "quagmire_trap_pages_total 8",
        "quagmire_trap_hits_total{source=\"trap_listener\"} 8",
        "quagmire_clients_over_threshold{scope=\"replica\"} 1",
        "quagmire_client_cache_entries 3",
        "quagmire_user_agent_verdicts_total{family=\"chrome\",verdict=\"allow\"} 1",
        "quagmire_decision_duration_seconds_count 3",
        "quagmire_build_info{version=",
    ] {
        assert!(text.contains(expected), "missing {expected} in\n{text}");
    }
    // No label carries an address or a path.
    assert!(!text.contains("198.51.100") && !text.contains("/walk/"));
}

#[tokio::test]
async fn promtool_accepts_the_metrics() {
    let Some(promtool) = require_program("promtool") else { return };
    let server = Server::start(&[]);
    traffic(&server).await;
    let (_, _, text) = get(&format!("http://{}/metrics", server.verdict), "localhost").await;
    let mut check = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    check.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let output = check.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "promtool check metrics:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
async fn trapped_clients_are_listed_most_active_first() {
    let server = Server::start(&[]);
    traffic(&server).await;
    let (status, _, body) = get(&format!("http://{}/api/trapped?limit=5", server.verdict), "localhost").await;
    assert_eq!(status, 200);
    let clients: serde_json::Value = serde_json::from_str(&body).unwrap();
    let first = &clients[0];
    assert_eq!(first["client"], "203.0.113.9");
    assert_eq!(first["trap_hits"], 8);
    assert_eq!(first["last_user_agent"], "Scrapy/2.11 (+https://scrapy.org)");
    assert!(first["trap_score"].as_f64().unwrap() > 7.0);
    assert!(first["first_seen"].as_u64().unwrap() <= first["last_seen"].as_u64().unwrap());
    // Clients with no trap hits are not listed.
    assert!(clients.as_array().unwrap().iter().all(|c| c["client"] != "198.51.100.1"));
}
