//! quagmire as a CrowdSec bouncer, against a real CrowdSec Local API (Debian's `crowdsec`, run
//! with its Local API only, `-no-cs`, on a loopback port, with its config and SQLite database in a
//! temporary folder and no Central API): decisions added with `cscli` are trapped, ranges cover
//! their addresses, deleted ones stop applying, the decisions in force outlive an API outage and
//! the stream resumes after it. And `/api/blocklist` for firewalls, checked by `nft -c`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Server, get, header, require_program, verdict, write_file};

const CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36";
const KEY: &str = "quagmire-test-bouncer-key-0123456789";
const WATCHER_PASSWORD: &str = "quagmire-test-watcher-password-0123456789";

/// A CrowdSec Local API in a temporary folder; stopped on drop.
struct CrowdSec {
    child: Option<Child>,
    crowdsec: PathBuf,
    cscli: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
}

impl CrowdSec {
    /// The Local API on a free port, with a bouncer (key [`KEY`]) and a machine for `cscli`.
    fn start() -> Option<CrowdSec> {
        let crowdsec = require_program("crowdsec")?;
        let cscli = require_program("cscli")?;
        let dir = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let root = dir.path().display().to_string();
        for folder in ["data", "hub", "notifications"] {
            std::fs::create_dir_all(dir.path().join(folder)).unwrap();
        }
        write_file(dir.path(), "hub/.index.json", "{}");
        write_file(dir.path(), "simulation.yaml", "simulation: off\n");
        write_file(
            dir.path(),
            "profiles.yaml",
            "name: default_ip_remediation\nfilters:\n - Alert.Remediation == true && Alert.GetScope() == \"Ip\"\n\
             decisions:\n - type: ban\n   duration: 4h\non_success: break\n",
        );
        write_file(
            dir.path(),
            "config.yaml",
            &format!(
                "common:\n  daemonize: false\n  log_media: stdout\n  log_level: warning\n  working_dir: .\n\
                 config_paths:\n  config_dir: {root}/\n  data_dir: {root}/data/\n  simulation_path: {root}/simulation.yaml\n  \
                 hub_dir: {root}/hub/\n  index_path: {root}/hub/.index.json\n  notification_dir: {root}/notifications/\n  \
                 plugin_dir: /usr/lib/crowdsec/plugins/\n\
                 cscli:\n  output: json\n\
                 db_config:\n  type: sqlite\n  db_path: {root}/data/crowdsec.db\n  use_wal: false\n\
                 api:\n  client:\n    credentials_path: {root}/local_api_credentials.yaml\n  server:\n    log_level: warning\n    \
                 listen_uri: 127.0.0.1:{port}\n    profiles_path: {root}/profiles.yaml\n    trusted_ips:\n      - 127.0.0.1\n\
                 prometheus:\n  enabled: false\n"
            ),
        );
        let mut api = CrowdSec { child: None, crowdsec, cscli, dir, port };
        api.spawn();
        let credentials = api.dir.path().join("local_api_credentials.yaml").display().to_string();
        let url = api.url();
        api.cscli(&[
            "machines",
            "add",
            "quagmire-tests",
            "--password",
            "quagmire-tests-password-0123",
            "-f",
            &credentials,
            "--url",
            &url,
        ]);
        api.cscli(&["bouncers", "add", "quagmire", "-k", KEY]);
        api.cscli(&[
            "machines",
            "add",
            "quagmire-watcher",
            "--password",
            WATCHER_PASSWORD,
            "-f",
            "/dev/null",
        ]);
        Some(api)
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn spawn(&mut self) {
        let config = self.dir.path().join("config.yaml");
        let child = Command::new(&self.crowdsec)
            .args(["-c", &config.display().to_string(), "-no-cs"])
            .current_dir(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("crowdsec starts");
        self.child = Some(child);
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(started.elapsed() < Duration::from_secs(30), "the Local API did not listen within 30 s");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// `cscli -c CONFIG ARGS...`; panics, with its output, if it fails.
    fn cscli(&self, args: &[&str]) -> String {
        let config = self.dir.path().join("config.yaml");
        let output = Command::new(&self.cscli).arg("-c").arg(&config).args(args).output().unwrap();
        let text =
            format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "cscli {args:?} failed: {text}");
        text
    }
}

impl Drop for CrowdSec {
    fn drop(&mut self) {
        self.stop();
    }
}

/// quagmire pulling `api`'s decisions every second.
fn bouncer(dir: &Path, api: &CrowdSec) -> Server {
    let config = format!(
        "crowdsec {{\n    url \"{}\"\n    bouncer-key-env \"QUAGMIRE_TEST_CROWDSEC_KEY\"\n    pull-seconds 1\n}}\n",
        api.url()
    );
    let path = write_file(dir, "quagmire.kdl", &config);
    Server::start_with_env(
        &["--config", &path],
        &[("QUAGMIRE_SECRET", crate::support::SECRET), ("QUAGMIRE_TEST_CROWDSEC_KEY", KEY)],
    )
}

/// The deciding rule for a browser page view from `client` ("" when allowed by no rule).
async fn rule_for(server: &Server, client: &str) -> String {
    let headers = [
        ("x-forwarded-for", client),
        ("x-forwarded-proto", "https"),
        ("x-forwarded-uri", "/articles/hello"),
        ("user-agent", CHROME),
        ("sec-fetch-mode", "navigate"),
    ];
    let (_, headers) = verdict(server, &headers).await;
    header(&headers, "x-quagmire-rule").to_string()
}

/// Polls until `client`'s verdict is decided by `rule` ("" for none).
async fn until_rule(server: &Server, client: &str, rule: &str) {
    let started = Instant::now();
    loop {
        let now = rule_for(server, client).await;
        if now == rule {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{client}: rule {now:?}, not {rule:?}, after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn decisions_from_a_real_crowdsec_are_trapped_follow_deletions_and_outlive_an_outage() {
    let Some(mut api) = CrowdSec::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = bouncer(dir.path(), &api);
    assert_eq!(rule_for(&server, "203.0.113.7").await, "");

    // An address ban and a range captcha, each trapped within a pull or so.
    api.cscli(&["decisions", "add", "--ip", "203.0.113.7", "--duration", "1h", "--reason", "test scraper"]);
    api.cscli(&["decisions", "add", "--range", "198.51.100.0/24", "--duration", "1h", "--type", "captcha"]);
    until_rule(&server, "203.0.113.7", "crowdsec").await;
    until_rule(&server, "198.51.100.42", "crowdsec").await;
    assert_eq!(rule_for(&server, "203.0.113.8").await, "", "a neighbour outside the decisions");
    // A deleted decision stops applying.
    api.cscli(&["decisions", "delete", "--ip", "203.0.113.7"]);
    until_rule(&server, "203.0.113.7", "").await;

    // The Local API down: the decisions in force keep working, and verdicts keep their speed.
    api.stop();
    crate::support::eventually("a pull failed against the stopped Local API", || async {
        let (_, _, metrics) = get(&format!("http://{}/metrics", server.verdict), "localhost").await;
        metrics.contains("quagmire_crowdsec_pulls_total{outcome=\"failed\"}")
    })
    .await;
    let started = Instant::now();
    assert_eq!(rule_for(&server, "198.51.100.42").await, "crowdsec");
    assert!(started.elapsed() < Duration::from_secs(1), "a verdict waited on the Local API");
    let (_, _, metrics) = get(&format!("http://{}/metrics", server.verdict), "localhost").await;
    assert!(metrics.contains("quagmire_crowdsec_pulls_total{outcome=\"failed\"}"), "{metrics}");
    assert!(metrics.contains("quagmire_crowdsec_decisions 1"), "{metrics}");

    // Back: the stream resumes, with what was decided meanwhile.
    api.spawn();
    api.cscli(&["decisions", "add", "--ip", "192.0.2.9", "--duration", "1h"]);
    until_rule(&server, "192.0.2.9", "crowdsec").await;
    assert_eq!(rule_for(&server, "198.51.100.42").await, "crowdsec");
}

#[test]
fn a_missing_bouncer_key_is_an_error_that_names_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_file(
        dir.path(),
        "quagmire.kdl",
        "crowdsec {\n    url \"http://127.0.0.1:9\"\n    bouncer-key-env \"QUAGMIRE_TEST_NO_SUCH_KEY\"\n}\n",
    );
    let output = crate::support::quagmire().args(["check", "--config", &config]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("QUAGMIRE_TEST_NO_SUCH_KEY is not set"), "{stderr}");
}

#[tokio::test]
async fn the_blocklist_lists_trapped_clients_aggregated_and_loads_into_nftables() {
    let server = Server::start(&[]);
    // Two neighbours that together make a /31, and a third on its own, walk the trap.
    for client in ["203.0.113.8", "203.0.113.9", "192.0.2.77"] {
        let (_, _, page) = get(&server.trap_url(&format!("/start/{client}")), "site.example").await;
        for link in crate::support::hrefs(&page).iter().take(8) {
            reqwest::Client::new()
                .get(server.trap_url(link))
                .header("x-forwarded-for", client)
                .send()
                .await
                .unwrap();
        }
    }
    let blocklist = |query: &'static str| {
        let url = format!("http://{}/api/blocklist{query}", server.verdict);
        async move { reqwest::get(url).await.unwrap().text().await.unwrap() }
    };
    let plain = blocklist("").await;
    let lines: Vec<&str> = plain.lines().collect();
    assert_eq!(lines, ["192.0.2.77", "203.0.113.8/31"], "{plain}");
    assert_eq!(blocklist("?min-score=100").await, "");
    let nft = blocklist("?format=nftables").await;
    assert!(nft.contains("elements = { 192.0.2.77, 203.0.113.8/31 }"), "{nft}");
    let status =
        reqwest::get(format!("http://{}/api/blocklist?format=csv", server.verdict)).await.unwrap().status();
    assert_eq!(status, 400);

    // nftables reads it (`-c`: checked, nothing changed).
    let Some(nft_binary) = require_program("nft") else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = write_file(dir.path(), "quagmire.nft", &nft);
    let output = Command::new(nft_binary).args(["-c", "-f", &file]).output().unwrap();
    assert!(output.status.success(), "nft -c: {}{}", String::from_utf8_lossy(&output.stderr), nft);
}

#[tokio::test]
async fn a_client_that_walks_the_trap_is_reported_to_crowdsec_once_with_a_decision() {
    let Some(api) = CrowdSec::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "crowdsec {{\n    url \"{}\"\n    bouncer-key-env \"QUAGMIRE_TEST_CROWDSEC_KEY\"\n    pull-seconds 1\n    \
         machine-id \"quagmire-watcher\"\n    password-env \"QUAGMIRE_TEST_CROWDSEC_PASSWORD\"\n    \
         alert-decision \"ban\"\n    alert-decision-minutes 30\n}}\n",
        api.url()
    );
    let path = write_file(dir.path(), "quagmire.kdl", &config);
    let server = Server::start_with_env(
        &["--config", &path],
        &[
            ("QUAGMIRE_SECRET", crate::support::SECRET),
            ("QUAGMIRE_TEST_CROWDSEC_KEY", KEY),
            ("QUAGMIRE_TEST_CROWDSEC_PASSWORD", WATCHER_PASSWORD),
        ],
    );
    // A client walks the trap, then its page views are trapped, several times.
    let walker = "203.0.113.66";
    let (_, _, page) = get(&server.trap_url("/start/walk"), "site.example").await;
    let links = crate::support::hrefs(&page);
    let walk = |client: &'static str| {
        let links = links.iter().take(8).map(|link| server.trap_url(link)).collect::<Vec<_>>();
        async move {
            for link in links {
                reqwest::Client::new().get(link).header("x-forwarded-for", client).send().await.unwrap();
            }
        }
    };
    walk(walker).await;
    for _ in 0..5 {
        assert_eq!(rule_for(&server, walker).await, "trap-score");
    }
    // One alert with quagmire's scenario and the ban it asked for, which the bouncer then pulls.
    let started = Instant::now();
    let alerts = loop {
        let ours = trap_walker_alerts(&api);
        if !ours.is_empty() {
            break ours;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "no quagmire alert in CrowdSec after 30 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert_eq!(alerts[0]["source"]["value"], walker, "{alerts:?}");
    let decisions = alerts[0]["decisions"].as_array().cloned().unwrap_or_default();
    assert_eq!(decisions.len(), 1, "{alerts:?}");
    assert_eq!(decisions[0]["type"], "ban");
    assert_eq!(decisions[0]["origin"], "crowdsec");
    until_rule(&server, walker, "trap-score").await;
    // More trapped verdicts within the hour add no alert. Alerts are sent in order: once a
    // second walker's alert, made after those verdicts, is in CrowdSec, any second one for the
    // first walker would be too.
    for _ in 0..5 {
        rule_for(&server, walker).await;
    }
    let second = "203.0.113.67";
    walk(second).await;
    assert_eq!(rule_for(&server, second).await, "trap-score");
    let started = Instant::now();
    let ours = loop {
        let ours = trap_walker_alerts(&api);
        if ours.iter().any(|alert| alert["source"]["value"] == second) {
            break ours;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "no alert for the second walker after 30 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let first: Vec<_> = ours.iter().filter(|alert| alert["source"]["value"] == walker).collect();
    assert_eq!(first.len(), 1, "{ours:?}");
}

/// The alerts with quagmire's trap-walker scenario that `cscli alerts list` shows (it prints
/// `null` for none).
fn trap_walker_alerts(api: &CrowdSec) -> Vec<serde_json::Value> {
    let listed: serde_json::Value = serde_json::from_str(&api.cscli(&["alerts", "list", "-o", "json"]))
        .unwrap_or(serde_json::Value::Null);
    listed
        .as_array()
        .map(|alerts| {
            alerts.iter().filter(|alert| alert["scenario"] == "quagmire/trap-walker").cloned().collect()
        })
        .unwrap_or_default()
}

/// A Local API that answers every stream pull with `stream` (a LAPI-compatible server on
/// loopback: the real one refuses to store durations like these, so it cannot send them).
async fn start_fixed_lapi(stream: &'static str) -> String {
    let router = axum::Router::new().route(
        "/v1/decisions/stream",
        axum::routing::get(move || async move { ([("content-type", "application/json")], stream) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{address}")
}

#[tokio::test]
async fn an_absurd_decision_is_skipped_or_capped_and_the_rest_of_the_stream_applies() {
    let url = start_fixed_lapi(
        r#"{"new": [
            {"id": 1, "duration": "10000000000000000000s", "origin": "cscli", "scenario": "manual", "scope": "Ip", "type": "ban", "value": "203.0.113.7"},
            {"id": 2, "duration": "3h59m", "origin": "crowdsec", "scenario": "http-probing", "scope": "Ip", "type": "ban", "value": "203.0.113.8"},
            {"id": 3, "duration": "4h", "origin": "cscli", "scenario": "oops", "scope": "Range", "type": "ban", "value": "0.0.0.0/0"},
            {"id": 4, "duration": "whenever", "origin": "cscli", "scenario": "odd", "scope": "Ip", "type": "ban", "value": "203.0.113.9"},
            {"id": 5, "duration": "4h", "origin": "lists", "scenario": "firehol", "scope": "Range", "type": "ban", "value": "192.0.2.0/24"}
        ], "deleted": []}"#,
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "crowdsec {{\n    url \"{url}\"\n    bouncer-key-env \"QUAGMIRE_TEST_CROWDSEC_KEY\"\n    pull-seconds 1\n}}\n"
    );
    let path = write_file(dir.path(), "quagmire.kdl", &config);
    let server = Server::start_with_env(
        &["--config", &path],
        &[("QUAGMIRE_SECRET", crate::support::SECRET), ("QUAGMIRE_TEST_CROWDSEC_KEY", KEY)],
    );
    // The valid decisions apply; a ban "for ever" is a ban (kept ten years).
    until_rule(&server, "203.0.113.8", "crowdsec").await;
    assert_eq!(rule_for(&server, "203.0.113.7").await, "crowdsec");
    assert_eq!(rule_for(&server, "192.0.2.77").await, "crowdsec");
    // A ban on every IPv4 address, and one whose duration is not one, are not applied.
    assert_eq!(rule_for(&server, "198.51.100.1").await, "");
    assert_eq!(rule_for(&server, "203.0.113.9").await, "");
    let (_, _, metrics) = get(&format!("http://{}/metrics", server.verdict), "quagmire").await;
    // Each pull skips the same two, and counts them.
    let skipped =
        metrics.lines().find(|line| line.starts_with("quagmire_crowdsec_decisions_skipped")).unwrap();
    let skipped: f64 = skipped.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(skipped >= 2.0 && skipped % 2.0 == 0.0, "{metrics}");
    assert!(metrics.contains("quagmire_crowdsec_decisions 3"), "{metrics}");
}
