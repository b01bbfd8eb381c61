//! The Grafana dashboard and the alert rules, proven against a real Prometheus scraping a real
//! quagmire under every kind of traffic: every panel query, with its template variables
//! resolved, returns data; the alert rules pass `promtool`; the dashboard type-checks against
//! `@grafana/schema` with `tsc --strict`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Server, did_not_run, get, hrefs, require_program, verdict, write_file};

const CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36";

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn dashboard() -> Value {
    let text = std::fs::read_to_string(repository().join("dashboards/quagmire.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A Prometheus on loopback; killed on drop.
struct Prometheus {
    child: Child,
    url: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn start_prometheus(binary: &Path, dir: &Path, target: &str) -> Prometheus {
    let config = write_file(
        dir,
        "prometheus.yml",
        &format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: quagmire\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    );
    let port = free_port();
    let child = Command::new(binary)
        .arg(format!("--config.file={config}"))
        .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus starts");
    Prometheus { child, url: format!("http://127.0.0.1:{port}") }
}

async fn query(prometheus: &Prometheus, expr: &str) -> Value {
    let response = reqwest::Client::new()
        .get(format!("{}/api/v1/query?{}", prometheus.url, encode("query", expr)))
        .send()
        .await
        .unwrap();
    serde_json::from_str(&response.text().await.unwrap()).unwrap()
}

fn encode(key: &str, value: &str) -> String {
    form_urlencoded::Serializer::new(String::new()).append_pair(key, value).finish()
}

/// Every kind of traffic: people, AI crawlers, lying browsers, trap walks, trap URLs.
async fn load(server: &Server, round: usize) {
    let ip = |n: usize| format!("198.51.{}.{}", round % 200, n);
    for n in 1..5 {
        let ip = ip(n);
        verdict(
            server,
            &[
                ("x-forwarded-for", &ip),
                ("x-forwarded-proto", "https"),
                ("user-agent", CHROME),
                ("sec-fetch-mode", "navigate"),
            ],
        )
        .await;
    }
    verdict(server, &[("x-forwarded-for", &ip(10)), ("user-agent", "GPTBot/1.2")]).await;
    verdict(server, &[("x-forwarded-for", &ip(11)), ("x-forwarded-proto", "https"), ("user-agent", CHROME)])
        .await;
    verdict(server, &[("x-forwarded-for", &ip(12))]).await;
    let walker = ip(20);
    let (_, _, page) = get(&server.trap_url(&format!("/start/{round}")), "site.example").await;
    for link in hrefs(&page).iter().take(6) {
        reqwest::Client::new()
            .get(server.trap_url(link))
            .header("x-forwarded-for", &walker)
            .send()
            .await
            .unwrap();
    }
    let link = hrefs(&page)[0].clone();
    verdict(server, &[("x-forwarded-for", &ip(21)), ("x-forwarded-uri", &link), ("user-agent", CHROME)])
        .await;
    verdict(server, &[("x-forwarded-for", &walker), ("user-agent", CHROME), ("sec-fetch-mode", "navigate")])
        .await;
    // A browser answering a challenge (the test config's difficulty is 4 bits), then a page view
    // with its pass and one with a forged pass.
    let answerer = ip(30);
    let cookie = crate::support::earn_pass(server, &answerer, CHROME).await;
    for cookie in [cookie.as_str(), "quagmire_pass=forged"] {
        verdict(server, &[("x-forwarded-for", &answerer), ("user-agent", CHROME), ("cookie", cookie)]).await;
    }
}

/// A panel query with Grafana's variables resolved as a user selecting "All" would see it.
fn resolve(expr: &str) -> String {
    expr.replace("$__rate_interval", "10s")
        .replace("$__range", "2m")
        .replace("$job", "quagmire")
        .replace("$instance", ".*")
}

#[tokio::test]
async fn every_panel_query_returns_data_from_a_real_prometheus() {
    let Some(binary) = require_program("prometheus") else { return };
    let dir = tempfile::tempdir().unwrap();
    let drip = write_file(
        dir.path(),
        "drip.kdl",
        "trap {\n drip {\n  enabled #true\n  bytes-per-second 1000000\n }\n}\nchallenge {\n difficulty 4\n}\n",
    );
    let server = Server::start(&["--config", &drip]);
    let prometheus = start_prometheus(&binary, dir.path(), &server.verdict.to_string());

    // Send traffic until Prometheus has scraped enough of it for rates over 10 s windows.
    let started = Instant::now();
    let mut round = 0;
    loop {
        load(&server, round).await;
        round += 1;
        tokio::time::sleep(Duration::from_millis(250)).await;
        let scrapes = query(&prometheus, "count_over_time(up{job=\"quagmire\"}[1m])").await;
        let count = scrapes["data"]["result"][0]["value"][1]
            .as_str()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
        if count >= 8.0 && round >= 20 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(90), "Prometheus did not scrape quagmire: {scrapes}");
    }

    // The template variables resolve.
    let jobs: Value = serde_json::from_str(
        &reqwest::Client::new()
            .get(format!(
                "{}/api/v1/label/job/values?{}",
                prometheus.url,
                encode("match[]", "quagmire_build_info")
            ))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    )
    .unwrap();
    assert!(jobs["data"].as_array().unwrap().contains(&Value::from("quagmire")), "{jobs}");

    let mut failures = Vec::new();
    let mut checked = 0;
    for panel in dashboard()["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = resolve(target["expr"].as_str().unwrap());
            let answer = query(&prometheus, &expr).await;
            checked += 1;
            let series = answer["data"]["result"].as_array().map_or(0, Vec::len);
            if answer["status"] != "success" || series == 0 {
                failures.push(format!("{}: {expr}\n  -> {answer}", panel["title"]));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} panel queries failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(checked >= 14);
}

#[test]
fn alert_rules_pass_promtool() {
    let Some(promtool) = require_program("promtool") else { return };
    let dashboards = repository().join("dashboards");
    for args in [["check", "rules", "alerts.yml"], ["test", "rules", "alerts_test.yml"]] {
        let output = Command::new(&promtool).args(args).current_dir(&dashboards).output().unwrap();
        assert!(
            output.status.success(),
            "promtool {}:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn dashboard_type_checks_against_grafana_schema() {
    // .ci/run installs @grafana/schema and typescript there; elsewhere set QUAGMIRE_DASHBOARD_NODE.
    let node_dir = std::env::var_os("QUAGMIRE_DASHBOARD_NODE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repository().join("target/dashboard-check"));
    let tsc = node_dir.join("node_modules/.bin/tsc");
    if !tsc.is_file() || !node_dir.join("node_modules/@grafana/schema").is_dir() {
        if std::env::var("CI").is_ok_and(|ci| ci == "true") {
            panic!(
                "{} is missing @grafana/schema or typescript (CI=true); .ci/run installs them",
                node_dir.display()
            );
        }
        did_not_run(&format!(
            "npm install --prefix {} @grafana/schema typescript to run it",
            node_dir.display()
        ));
        return;
    }
    let dir = tempfile::tempdir_in(&node_dir).unwrap();
    let source = format!(
        "import type {{ Dashboard }} from '@grafana/schema';\nexport const dashboard: Dashboard = {};\n",
        serde_json::to_string_pretty(&dashboard()).unwrap()
    );
    let file = write_file(dir.path(), "dashboard.ts", &source);
    let output = Command::new(&tsc)
        .args([
            "--noEmit",
            "--strict",
            "--skipLibCheck",
            "--module",
            "esnext",
            "--moduleResolution",
            "bundler",
            "--target",
            "es2020",
            &file,
        ])
        .current_dir(&node_dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "tsc --strict against @grafana/schema:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn dashboard_and_alerts_use_only_metrics_quagmire_exports() {
    use quagmire::HitSource;
    use quagmire::Metrics;
    use quagmire::Verdict;
    // One of everything, so that every labelled family has a series.
    let metrics = Metrics::new();
    metrics.verdict(
        Verdict::Trap,
        &std::sync::Arc::from("r"),
        false,
        Duration::from_micros(5),
        Some(1),
        "curl/8",
    );
    metrics.ai_verdict(quagmire::AiKind::Assistant, Verdict::Allow);
    metrics.trap_page(1);
    metrics.dripped(Duration::from_millis(1));
    metrics.trap_hit(HitSource::TrapUrl);
    metrics.rule_error("r", quagmire::FailureKind::Error);
    metrics.reload("rules", true);
    metrics.robots("GPTBot", false);
    metrics.robots("GPTBot", true);
    metrics.crowdsec_pull(false);
    metrics.crowdsec_alerts("sent", 1);
    metrics.challenge_issued();
    metrics.challenge_answer("work", Some(Duration::from_secs(1)));
    metrics.pass("valid");
    metrics.pass_burned("networks");
    metrics.pass_rechallenged("crowd");
    metrics.pass_minted(1, std::time::Duration::from_secs(40));
    metrics.network_pressure(&[("203.0.113.0/24".into(), 60.0)]);
    let exported: Vec<String> = metrics
        .render(0, 0, quagmire::MetricsScope::Replica)
        .lines()
        .filter(|line| !line.starts_with('#'))
        .map(|line| line.split(['{', ' ']).next().unwrap().to_string())
        .collect();
    let dashboard = serde_json::to_string(&dashboard()).unwrap();
    let alerts = std::fs::read_to_string(repository().join("dashboards/alerts.yml")).unwrap();
    for text in [dashboard, alerts] {
        let mut rest = text.as_str();
        while let Some(start) = rest.find("quagmire_") {
            let name: String =
                rest[start..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            assert!(exported.contains(&name), "{name} is used but not exported");
            rest = &rest[start + name.len()..];
        }
    }
}
