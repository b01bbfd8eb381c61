//! `quagmire replay` on logs the real proxies wrote: traffic goes through Caddy, Traefik and
//! nginx (transparent mode, access logs on), and the replay of each log must give every request
//! the verdict quagmire gave it live.

use std::path::Path;
use std::time::Duration;

use crate::proxies::{
    GPTBOT, browser, client, config, free_address, is_trap_page, start_caddy, start_nginx, start_origin,
    start_traefik,
};
use crate::support::{SECRET, Server, quagmire, require_program, write_file};

/// One request sent, and what it got live: the trap page, or the site.
struct Sent {
    what: &'static str,
    trapped: bool,
}

/// Sends the traffic: people, an unnamed script, an AI crawler, a visit to the trap's prefix, a
/// crawler walking trap pages, then a person from the same address (all clients are 127.0.0.1).
async fn drive(base: &str) -> Vec<Sent> {
    let http = client();
    let mut sent = Vec::new();
    let mut record =
        |what: &'static str, body: String| sent.push(Sent { what, trapped: is_trap_page(&body) });
    let text = |response: reqwest::Response| async move { response.text().await.unwrap() };
    record(
        "browser page",
        text(browser(http.get(format!("{base}/docs/page?x=1"))).send().await.unwrap()).await,
    );
    record(
        "browser form",
        text(browser(http.post(format!("{base}/form"))).body("a=1").send().await.unwrap()).await,
    );
    record("no user agent", text(http.get(format!("{base}/docs/plain")).send().await.unwrap()).await);
    record(
        "AI crawler",
        text(http.get(format!("{base}/docs/page")).header("user-agent", GPTBOT).send().await.unwrap()).await,
    );
    record(
        "trap prefix",
        text(browser(http.get(format!("{base}/trap/archive/"))).send().await.unwrap()).await,
    );
    for i in 0..6 {
        let response =
            http.get(format!("{base}/archive/{i}")).header("user-agent", GPTBOT).send().await.unwrap();
        record("crawler walking the trap", text(response).await);
    }
    record(
        "browser after the walk",
        text(browser(http.get(format!("{base}/docs/page"))).send().await.unwrap()).await,
    );
    sent
}

/// Waits until the log has `lines` lines (proxies write their access logs as they go, but not
/// always before the response reaches the client).
fn wait_for_lines(log: &Path, lines: usize) -> String {
    // Up to 30 s: only a proxy that never writes the line reaches it.
    for _ in 0..600 {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.lines().count() >= lines {
            return text;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "{} has fewer than {lines} lines:\n{}",
        log.display(),
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

/// Replays `log` with the same config and secret as the live service; returns each line's
/// verdict record.
fn replay(config_path: &str, log: &Path, extra: &[&str]) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    let verdicts = dir.path().join("verdicts.jsonl");
    let report = dir.path().join("report.json");
    let output = quagmire()
        .args(["replay", "--config", config_path, "--quiet", "--verdicts"])
        .arg(&verdicts)
        .arg("--json")
        .arg(&report)
        .args(extra)
        .arg(log)
        .env("QUAGMIRE_SECRET", SECRET)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "replay failed: {}\n{stdout}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
    assert_eq!(report["bad_lines"], 0, "{stdout}");
    std::fs::read_to_string(verdicts)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Asserts that each replayed line got the live verdict, except the requests `differ` names.
fn assert_same(sent: &[Sent], replayed: &[serde_json::Value], log: &str, differ: &[&str]) {
    assert_eq!(sent.len(), replayed.len(), "one replayed line per request:\n{log}");
    for (index, (live, replayed)) in sent.iter().zip(replayed).enumerate() {
        let trapped = live.trapped != differ.contains(&live.what);
        let verdict = if trapped { "trap" } else { "allow" };
        assert_eq!(
            replayed["verdict"], verdict,
            "request {index} ({}): replayed {replayed}\n{log}",
            live.what
        );
    }
    let rules: Vec<&str> = replayed.iter().map(|record| record["rule"].as_str().unwrap()).collect();
    assert_eq!(rules[2], "no-user-agent");
    assert_eq!(rules[3], "ai-crawlers");
    assert_eq!(rules[4], "(served by the trap)");
    assert_eq!(rules.last(), Some(&"trap-score"), "the walk's hits count as they did live");
}

/// quagmire with `quagmire_config`, an origin, the proxy's address and where its log goes.
struct Site {
    dir: tempfile::TempDir,
    config_path: String,
    server: Server,
    origin: std::net::SocketAddr,
    address: std::net::SocketAddr,
    log: std::path::PathBuf,
}

impl Site {
    async fn start(quagmire_config: &str) -> Site {
        let dir = tempfile::tempdir().unwrap();
        let config_path = write_file(dir.path(), "quagmire.kdl", quagmire_config);
        let server = Server::start(&["--config", &config_path]);
        let (origin, _) = start_origin().await;
        let log = dir.path().join("access.log");
        Site { dir, config_path, server, origin, address: free_address(), log }
    }

    /// The shipped proxy config `file`, with this site's addresses.
    fn proxy_config(&self, file: &str) -> String {
        config(file, self.address, self.server.verdict, self.server.trap, self.origin)
    }
}

#[tokio::test]
async fn replaying_caddys_json_log_gives_the_live_verdicts() {
    let Some(binary) = require_program("caddy") else { return };
    let site = Site::start("").await;
    let block = format!("http://{} {{", site.address);
    let text = site.proxy_config("caddy/transparent.Caddyfile").replace(
        &block,
        &format!("{block}\n\tlog {{\n\t\toutput file {}\n\t\tformat json\n\t}}", site.log.display()),
    );
    let proxy = start_caddy(&binary, &text, site.address).await;
    let sent = drive(&format!("http://{}", proxy.address)).await;
    let text = wait_for_lines(&site.log, sent.len());
    let replayed = replay(&site.config_path, &site.log, &[]);
    assert_same(&sent, &replayed, &text, &[]);
}

#[tokio::test]
async fn replaying_nginxs_combined_log_gives_the_live_verdicts() {
    let Some(binary) = require_program("nginx") else { return };
    let site = Site::start("").await;
    let text = site
        .proxy_config("nginx/transparent.conf")
        .replace("access_log off;", &format!("access_log {} combined;", site.log.display()));
    let proxy = start_nginx(&binary, &text, site.address).await;
    let sent = drive(&format!("http://{}", proxy.address)).await;
    let text = wait_for_lines(&site.log, sent.len());
    // The site is served over plain HTTP, which a combined log does not say.
    let replayed = replay(&site.config_path, &site.log, &["--format", "nginx-combined", "--scheme", "http"]);
    assert_same(&sent, &replayed, &text, &[]);
}

#[tokio::test]
async fn replaying_traefiks_json_log_gives_the_live_verdicts() {
    let Some(binary) = require_program("traefik") else { return };
    let site = Site::start("verdict {\n  trap-status 421\n}\n").await;
    let (log, dir, config_path) = (&site.log, site.dir.path(), &site.config_path);
    let dynamic = site.proxy_config("traefik/transparent.yml");
    // Every header kept, so a header missing from a line was not sent: --judge-missing says so.
    let access_log = format!(
        "accessLog:\n  filePath: {}\n  format: json\n  fields:\n    headers:\n      defaultMode: keep\n",
        log.display()
    );
    let addresses = [site.address, site.server.verdict, site.server.trap, site.origin];
    let proxy = start_traefik(&binary, "transparent.yml", &dynamic, addresses, &access_log).await;
    // start_traefik waits for the router with requests of its own, some answered by Traefik
    // alone (no router yet, no verdict asked), whose lines may still be on their way: the
    // replay takes the lines after a marker request's, once the marker's is written.
    let marker = "/replay-starts-after-this-line";
    client().get(format!("http://{}{marker}", proxy.address)).send().await.unwrap();
    let started = std::time::Instant::now();
    let before = loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(at) = text.lines().position(|line| line.contains(marker)) {
            break at + 1;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "the marker's line was never written");
        std::thread::sleep(Duration::from_millis(50));
    };
    let sent = drive(&format!("http://{}", proxy.address)).await;
    let text = wait_for_lines(log, before + sent.len());
    let ours: Vec<&str> = text.lines().skip(before).collect();
    let ours_path = dir.join("ours.log");
    std::fs::write(&ours_path, ours.join("\n") + "\n").unwrap();
    let replayed = replay(config_path, &ours_path, &["--judge-missing"]);
    // Traefik's forwardAuth asks with Go's HTTP client, which adds `User-Agent: Go-http-client/1.1`
    // to a request that has none: live, quagmire sees a library asking for a page and traps it
    // (`http-library-page`). The log has the client's own request, without one, which the
    // replay traps as such: the same verdict, for another reason.
    assert!(sent[2].trapped, "the request without a User-Agent passed through Traefik");
    assert_same(&sent, &replayed, &ours.join("\n"), &[]);
}

#[test]
fn replay_reports_unreadable_input_and_a_broken_compare_script_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let output = quagmire().args(["replay", "--quiet"]).arg(dir.path().join("missing.log")).output().unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot read") && stderr.contains("missing.log"), "{stderr}");

    let log = write_file(
        dir.path(),
        "access.log",
        "203.0.113.9 - - [05/Dec/2026:10:00:00 +0000] \"GET / HTTP/1.1\" 200 1 \"-\" \"-\"\n",
    );
    let script = write_file(dir.path(), "broken.lua", "return {");
    let output = quagmire().args(["replay", "--quiet", "--compare", &script, &log]).output().unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot load the rules to compare with") && stderr.contains("broken.lua"),
        "{stderr}"
    );
}
