//! The site's own robots.txt, served by a real origin (a local HTTP server) and read by quagmire
//! through its origin setting, with the real Caddy in front: crawlers that obey it reach the site,
//! one that ignores it is trapped, a person is unaffected; a changed robots.txt is picked up on
//! the next refresh, and an origin that is down leaves the last copy in use. And `replay`
//! counts, per crawler, the requests that obeyed and ignored it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::http::{StatusCode, Uri};

use crate::proxies::{browser, client, config, free_address, is_trap_page, start_caddy};
use crate::support::{Server, eventually, quagmire, require_program, write_file};

const CLAUDEBOT: &str =
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; +claudebot@anthropic.com)";
const AMAZONBOT: &str =
    "Mozilla/5.0 (compatible; Amazonbot/0.1; +https://developer.amazon.com/support/amazonbot)";
const ROBOTS: &str = "User-agent: ClaudeBot\nAllow: /\n\nUser-agent: Amazonbot\nDisallow: /private/\n\nUser-agent: *\nDisallow: /private/\n";

/// An origin serving `robots` at /robots.txt (503 while it is `None`) and `origin GET <path>`
/// for everything else, until the handle is aborted.
async fn start_origin(robots: Arc<Mutex<Option<String>>>) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let router = axum::Router::new().fallback(move |uri: Uri| {
        let robots = robots.clone();
        async move {
            if uri.path() == "/robots.txt" {
                return match robots.lock().unwrap().clone() {
                    Some(text) => (StatusCode::OK, text),
                    None => (StatusCode::SERVICE_UNAVAILABLE, "down".to_string()),
                };
            }
            (StatusCode::OK, format!("origin GET {}", uri.path()))
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (address, task)
}

/// Whether `user_agent` asking for `path` through the proxy at `base` reached the origin.
async fn reaches_origin(base: &str, user_agent: &str, path: &str) -> bool {
    reaches_origin_with(&client(), base, user_agent, path).await
}

/// [`reaches_origin`] through `client`.
async fn reaches_origin_with(client: &reqwest::Client, base: &str, user_agent: &str, path: &str) -> bool {
    let response = client.get(format!("{base}{path}")).header("user-agent", user_agent).send().await.unwrap();
    let body = response.text().await.unwrap();
    if is_trap_page(&body) {
        return false;
    }
    assert_eq!(body, format!("origin GET {path}"));
    true
}

#[tokio::test]
async fn through_caddy_the_sites_robots_txt_decides_for_crawlers_and_never_for_people() {
    let Some(binary) = require_program("caddy") else { return };
    let robots = Arc::new(Mutex::new(Some(ROBOTS.to_string())));
    let (origin, origin_task) = start_origin(robots.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    // 0.05 minutes: a refresh every 3 s.
    let settings = format!("robots {{\n    origin \"http://{origin}\"\n    refresh-minutes 0.05\n}}\n");
    let server = Server::start(&["--config", &write_file(dir.path(), "quagmire.kdl", &settings)]);
    let address = free_address();
    let proxy = start_caddy(
        &binary,
        &config("caddy/transparent.Caddyfile", address, server.verdict, server.trap, origin),
        address,
    )
    .await;
    let base = format!("http://{}", proxy.address);

    // The first request names the host; its robots.txt is fetched at once, in the background.
    eventually("the robots.txt fetched", || reaches_origin(&base, CLAUDEBOT, "/blog/post")).await;
    // The crawler the site allows reads everything, the AI-crawler list notwithstanding.
    assert!(reaches_origin(&base, CLAUDEBOT, "/private/notes").await);
    // The one it names with a disallow reads what is allowed, and is trapped on what is not.
    assert!(reaches_origin(&base, AMAZONBOT, "/blog/post").await);
    assert!(!reaches_origin(&base, AMAZONBOT, "/private/notes").await);
    // A person's browser is never judged by robots.txt. (From an address of its own: the
    // crawlers' address has trap hits now, for which a browser there would be asked for a pass.)
    let from_home = reqwest::Client::builder().local_address("127.0.0.2".parse().ok()).build().unwrap();
    let person = browser(from_home.get(format!("{base}/private/notes"))).send().await.unwrap();
    assert_eq!(person.text().await.unwrap(), "origin GET /private/notes");

    // The site changes its mind about ClaudeBot: picked up on the next refresh.
    *robots.lock().unwrap() = Some("User-agent: ClaudeBot\nDisallow: /drafts/\n".into());
    eventually("the changed robots.txt picked up", || async {
        !reaches_origin(&base, CLAUDEBOT, "/drafts/one").await
    })
    .await;

    // The origin down: the last copy stays in use, through several refreshes.
    origin_task.abort();
    let failures = || async {
        let metrics = client().get(format!("http://{}/metrics", server.verdict)).send().await.unwrap();
        let text = metrics.text().await.unwrap();
        text.lines()
            .find_map(|line| line.strip_prefix("quagmire_robots_fetch_failures_total "))
            .and_then(|value| value.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    eventually("two failed refreshes", || async { failures().await >= 2.0 }).await;
    let response =
        client().get(format!("{base}/drafts/two")).header("user-agent", CLAUDEBOT).send().await.unwrap();
    assert!(is_trap_page(&response.text().await.unwrap()), "the last copy's disallow still holds");
}

#[test]
fn replay_counts_per_crawler_the_requests_that_obeyed_and_ignored_the_sites_robots_txt() {
    let dir = tempfile::tempdir().unwrap();
    let robots = write_file(dir.path(), "robots.txt", ROBOTS);
    let config =
        write_file(dir.path(), "quagmire.kdl", &format!("robots {{\n    file \"*\" \"{robots}\"\n}}\n"));
    let line = |second: u32, agent: &str, uri: &str| {
        format!(
            r#"{{"time":"2026-12-05T10:00:{second:02}Z","client":"203.0.113.{second}","uri":"{uri}","host":"site.example","headers":{{"user-agent":"{agent}"}}}}"#
        )
    };
    let lines = [
        line(1, CLAUDEBOT, "/blog/post"),
        line(2, CLAUDEBOT, "/private/notes"),
        line(3, AMAZONBOT, "/blog/post"),
        line(4, AMAZONBOT, "/private/notes"),
        line(5, AMAZONBOT, "/private/more"),
        line(6, "GPTBot/1.2", "/private/notes"),
    ];
    let log = write_file(dir.path(), "access.jsonl", &(lines.join("\n") + "\n"));
    let json = dir.path().join("report.json");
    let output = quagmire()
        .args(["replay", "--quiet", "--no-dns", "--config", &config, "--json"])
        .arg(&json)
        .arg(&log)
        .env("QUAGMIRE_SECRET", crate::support::SECRET)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("Crawlers and the site's robots.txt (requests):"), "{stdout}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    let counts = &report["robots_txt"];
    // ClaudeBot's own group allows everything; Amazonbot's disallows /private/; GPTBot falls
    // under `*`, which disallows it too.
    assert_eq!(counts["ClaudeBot"], serde_json::json!({ "obeyed": 2, "ignored": 0 }), "{counts}");
    assert_eq!(counts["Amazonbot"], serde_json::json!({ "obeyed": 1, "ignored": 2 }), "{counts}");
    assert_eq!(counts["GPTBot"], serde_json::json!({ "obeyed": 0, "ignored": 1 }), "{counts}");
    assert_eq!(report["by_rule"]["ignored-robots-txt"], 3, "{report}");
}

#[test]
fn check_says_what_it_read_and_explain_shows_the_match() {
    let dir = tempfile::tempdir().unwrap();
    let robots = write_file(dir.path(), "robots.txt", ROBOTS);
    let config =
        write_file(dir.path(), "quagmire.kdl", &format!("robots {{\n    file \"*\" \"{robots}\"\n}}\n"));
    let check = quagmire().args(["check", "--config", &config]).output().unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{said}");
    assert!(
        said.contains(&format!(
            "robots.txt:\n  every other host: {robots} (3 groups: ClaudeBot (1 rules), Amazonbot (1 rules), * (1 rules))"
        )),
        "{said}"
    );
    // ClaudeBot's and Amazonbot's own groups do not keep them out of the trap.
    assert!(said.contains("the groups ClaudeBot, Amazonbot do not disallow /trap/"), "{said}");
    let explain = quagmire()
        .args(["explain", "--config", &config, "--ip", "203.0.113.5", "--host", "site.example"])
        .args(["--uri", "/private/notes", "-H", &format!("User-Agent: {AMAZONBOT}")])
        .env("QUAGMIRE_SECRET", crate::support::SECRET)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&explain.stdout);
    assert!(
        said.contains(&format!(
            "robots.txt  disallowed for site.example: group Amazonbot, line 5: Disallow: /private/ ({robots})"
        )),
        "{said}"
    );
    assert!(
        said.contains("verdict     trap by ignored-robots-txt: ignored robots.txt (Amazonbot)"),
        "{said}"
    );
    // A file that cannot be read is an error that names it.
    std::fs::remove_file(&robots).unwrap();
    let check = quagmire().args(["check", "--config", &config]).output().unwrap();
    let said = String::from_utf8_lossy(&check.stderr);
    assert!(!check.status.success() && said.contains("robots.txt") && said.contains(&robots), "{said}");
}

/// Whether `user_agent` asking for `path` from local address `from` reached the origin.
async fn reaches_origin_from(base: &str, from: &str, user_agent: &str, path: &str) -> bool {
    let client = reqwest::Client::builder().local_address(from.parse().ok()).build().unwrap();
    reaches_origin_with(&client, base, user_agent, path).await
}

#[tokio::test]
async fn through_caddy_each_kind_of_ai_crawler_gets_what_the_sites_preferences_say_and_robots_txt_still_wins()
{
    let Some(binary) = require_program("caddy") else { return };
    const CLAUDE_USER: &str = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Claude-User/1.0; +Claude-User@anthropic.com)";
    const GPTBOT: &str = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)";
    const DIFFBOT: &str = "Mozilla/5.0 (compatible; Diffbot/0.1; +http://www.diffbot.com)";
    // The site keeps one assistant out of /private/ and lets one training crawler in.
    let text = "User-agent: Claude-User\nDisallow: /private/\n\nUser-agent: ClaudeBot\nAllow: /\n";
    let (origin, _origin_task) = start_origin(Arc::new(Mutex::new(Some(text.to_string())))).await;
    let dir = tempfile::tempdir().unwrap();
    let settings = format!(
        "robots {{\n    origin \"http://{origin}\"\n}}\n\
         preferences {{\n    search #true\n    ai-input #true\n    ai-train #false\n}}\n"
    );
    let server = Server::start(&["--config", &write_file(dir.path(), "quagmire.kdl", &settings)]);
    let address = free_address();
    let proxy = start_caddy(
        &binary,
        &config("caddy/transparent.Caddyfile", address, server.verdict, server.trap, origin),
        address,
    )
    .await;
    let base = format!("http://{}", proxy.address);

    let metrics = || async {
        let response = client().get(format!("http://{}/metrics", server.verdict)).send().await.unwrap();
        response.text().await.unwrap()
    };
    // ai-input=yes: an assistant reads the page one person asked about, before the robots.txt is
    // fetched and after (its group obeyed on the metrics).
    eventually("the robots.txt fetched, and an assistant let through under it", || async {
        assert!(reaches_origin_from(&base, "127.0.0.11", CLAUDE_USER, "/blog/post").await);
        metrics().await.contains("quagmire_robots_obeyed_total{crawler=\"Claude-User\"}")
    })
    .await;
    // The site's robots.txt group for it still wins over its kind.
    assert!(!reaches_origin_from(&base, "127.0.0.11", CLAUDE_USER, "/private/notes").await);
    // ai-train=no: a training crawler is trapped, unless the robots.txt names it and lets it in.
    assert!(!reaches_origin_from(&base, "127.0.0.12", GPTBOT, "/blog/post").await);
    assert!(reaches_origin_from(&base, "127.0.0.13", CLAUDEBOT, "/blog/post").await);
    // A scraper is trapped whatever the site says.
    assert!(!reaches_origin_from(&base, "127.0.0.14", DIFFBOT, "/blog/post").await);

    // The verdicts, by kind, on the metrics.
    let text = metrics().await;
    for sample in [
        "quagmire_ai_crawler_verdicts_total{kind=\"assistant\",verdict=\"allow\"}",
        "quagmire_ai_crawler_verdicts_total{kind=\"assistant\",verdict=\"trap\"} 1",
        "quagmire_ai_crawler_verdicts_total{kind=\"training\",verdict=\"trap\"} 1",
        "quagmire_ai_crawler_verdicts_total{kind=\"training\",verdict=\"allow\"} 1",
        "quagmire_ai_crawler_verdicts_total{kind=\"scraper\",verdict=\"trap\"} 1",
    ] {
        assert!(text.contains(sample), "{sample} in\n{text}");
    }
}
