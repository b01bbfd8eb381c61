//! `quagmire lists update` and `serve`'s scheduled refresh against a local HTTP server that
//! serves the fixtures in `tests/fixtures/lists/` (no test reaches the internet): lists written
//! with their headers, broken sources keeping the old file byte for byte, and a running service
//! whose verdict follows a newly published range.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use quagmire::List;

use crate::support::{Server, header, quagmire, verdict, write_file};

const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";

/// What the fixture server answers for a path.
#[derive(Clone)]
enum Answer {
    Body(Vec<u8>),
    Status(u16),
    /// Never answers (for timeouts).
    Hang,
}

/// An HTTP server on 127.0.0.1:0, on a thread and runtime of its own, answering each path as
/// told; the answers can change while it runs. Stops when dropped.
struct Fixtures {
    address: SocketAddr,
    answers: Arc<Mutex<HashMap<String, Answer>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Fixtures {
    /// Serves every file of `tests/fixtures/lists/` at `/<name>`.
    fn start() -> Fixtures {
        let mut answers = HashMap::new();
        for entry in std::fs::read_dir(fixtures_dir()).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            answers.insert(format!("/{name}"), Answer::Body(std::fs::read(&path).unwrap()));
        }
        let answers = Arc::new(Mutex::new(answers));
        let shared = answers.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready, address) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                ready.send(listener.local_addr().unwrap()).unwrap();
                let router = axum::Router::new().fallback(move |uri: Uri| {
                    let answer = shared.lock().unwrap().get(uri.path()).cloned();
                    async move {
                        match answer {
                            Some(Answer::Body(body)) => Response::new(Body::from(body)),
                            Some(Answer::Status(status)) => {
                                let mut response = Response::new(Body::from("fixture error\n"));
                                *response.status_mut() = StatusCode::from_u16(status).unwrap();
                                response
                            }
                            Some(Answer::Hang) => std::future::pending().await,
                            None => {
                                let mut response = Response::new(Body::empty());
                                *response.status_mut() = StatusCode::NOT_FOUND;
                                response
                            }
                        }
                    }
                });
                let server = axum::serve(listener, router).with_graceful_shutdown(async {
                    let _ = stopped.await;
                });
                // Hanging answers never finish; stopping the runtime drops them.
                let _ = tokio::time::timeout(Duration::from_secs(3600), server).await;
            });
            runtime.shutdown_background();
        });
        let address = address.recv().unwrap();
        Fixtures { address, answers, stop: Some(stop) }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    fn set(&self, path: &str, answer: Answer) {
        self.answers.lock().unwrap().insert(path.to_string(), answer);
    }
}

impl Drop for Fixtures {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lists")
}

/// A folder with a copy of the shipped lists.
fn lists_folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("rules/lists")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "txt") {
            std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    dir
}

/// A config naming the lists folder, `lists` settings and one `source` line per
/// `(list, label, format, path on the fixture server)`.
fn config(
    dir: &Path,
    lists: &Path,
    settings: &str,
    fixtures: &Fixtures,
    sources: &[(&str, &str, &str, &str)],
) -> String {
    let mut text = format!("rules {{\n    lists \"{}\"\n}}\nlists {{\n    {settings}\n", lists.display());
    for (list, label, format, path) in sources {
        let label = if label.is_empty() { String::new() } else { format!(" label=\"{label}\"") };
        text.push_str(&format!(
            "    source \"{list}\"{label} format=\"{format}\" url=\"{}\"\n",
            fixtures.url(path)
        ));
    }
    text.push_str("}\n");
    write_file(dir, "lists.kdl", &text)
}

fn read(folder: &Path, file: &str) -> String {
    std::fs::read_to_string(folder.join(file)).unwrap()
}

fn parse(folder: &Path, file: &str) -> List {
    List::parse(file, &read(folder, file)).unwrap_or_else(|error| panic!("{file} does not parse: {error}"))
}

#[test]
fn lists_update_writes_each_list_with_a_header_and_keeps_the_hand_sections() {
    let fixtures = Fixtures::start();
    let dir = tempfile::tempdir().unwrap();
    let lists = lists_folder();
    let folder = lists.path();
    let config = config(
        dir.path(),
        folder,
        "timeout-seconds 10",
        &fixtures,
        &[
            ("search-engines", "Googlebot", "prefixes-json", "/googlebot.json"),
            ("search-engines", "bingbot", "prefixes-json", "/bingbot.json"),
            ("ai-crawler-ranges", "GPTBot", "prefixes-json", "/gptbot.json"),
            // Two labels from one file: fetched once, written under both.
            ("ai-crawler-ranges", "GoogleOther", "prefixes-json", "/special-crawlers.json"),
            ("ai-crawler-ranges", "Google-CloudVertexBot", "prefixes-json", "/special-crawlers.json"),
            ("ai-crawlers", "", "robots-json", "/robots.json"),
            ("datacenter-asns", "", "asn-list", "/datacenter-asn.txt"),
            ("datacenter-asns", "", "asn-list", "/datacenter-asn-hosting.txt"),
        ],
    );
    let output = quagmire().args(["lists", "update", "--config", &config]).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    // Applebot and DuckDuckBot have no source here: their 519 entries are kept as by hand.
    assert!(stdout.contains(
        "search-engines.txt: written, 345 entries (Googlebot 317, bingbot 28), 519 kept by hand (519 in no source)\n"
    ));
    assert!(stdout.contains(
        "ai-crawler-ranges.txt: written, 565 entries (GPTBot 21, GoogleOther 272, Google-CloudVertexBot 272)"
    ));
    // Three robots.json keys differ from others only by case, and tokens match in any case.
    // Each in the section of its kind, and every function mapped by the reviewed table.
    assert!(
        stdout.contains(
            "ai-crawlers.txt: written, 163 entries, 15 kept by hand (15 in no source)\n  \
             by kind: training 47, ai-search 18, assistant 32, agent 15, scraper 51\n"
        ),
        "{stdout}"
    );
    assert!(!stdout.contains("without a kind"), "{stdout}");
    // Five of the first source's six ASNs are in the hand-compiled section already, which wins;
    // the second source adds one of its three (one is kept by hand, one in the first source).
    // What each source contributed, and what the hand-kept section alone has, are reported.
    let expected = format!(
        "datacenter-asns.txt: written, 2 entries, 144 kept by hand (138 in no source)\n  {}: 6 entries, 1 added\n  {}: 3 entries, 1 added\n",
        fixtures.url("/datacenter-asn.txt"),
        fixtures.url("/datacenter-asn-hosting.txt"),
    );
    assert!(stdout.contains(&expected), "{stdout}");

    let search_engines = read(folder, "search-engines.txt");
    assert!(search_engines.starts_with("# search-engines.txt -- written by `quagmire lists update` at 20"));
    assert!(search_engines.contains(&format!(
        "#   Googlebot <- {} (prefixes-json, published 2026-12-01T00:00:00.000000, 317 entries)\n",
        fixtures.url("/googlebot.json")
    )));
    let List::Networks(networks) = parse(folder, "search-engines.txt") else { panic!("not networks") };
    assert_eq!(networks.find("66.249.64.5".parse().unwrap()), Some("Googlebot"));
    assert_eq!(networks.find("157.55.39.1".parse().unwrap()), Some("bingbot"));
    assert_eq!(networks.find("17.241.75.1".parse().unwrap()), Some("Applebot"), "kept by hand");
    let List::Networks(ranges) = parse(folder, "ai-crawler-ranges.txt") else { panic!("not networks") };
    assert!(ranges.labels().contains("Google-CloudVertexBot") && ranges.labels().contains("CCBot"));

    let List::Tokens(tokens) = parse(folder, "ai-crawlers.txt") else { panic!("not tokens") };
    assert_eq!(tokens.find("Mozilla/5.0 (compatible; GPTBot/1.2)"), Some("GPTBot"));
    assert_eq!(tokens.find("Mozilla/5.0 HeadlessChrome/120.0"), Some("HeadlessChrome"));
    assert_eq!(
        tokens.ai_kind("Mozilla/5.0 (compatible; ChatGPT-User/1.0)"),
        Some(quagmire::AiKind::Assistant)
    );
    assert_eq!(tokens.ai_kind("Mozilla/5.0 (compatible; GPTBot/1.2)"), Some(quagmire::AiKind::Training));
    assert_eq!(tokens.ai_kind("Mozilla/5.0 HeadlessChrome/120.0"), Some(quagmire::AiKind::Scraper));
    assert!(
        read(folder, "ai-crawlers.txt")
            .contains("# Section 2 (scrapers and headless browsers, quagmire additions)")
    );
    let List::Asns(asns) = parse(folder, "datacenter-asns.txt") else { panic!("not ASNs") };
    assert_eq!(asns.find(64496), Some("FIXTURE-ONLY documentation ASN (RFC 5398), US"));
    assert_eq!(asns.find(16509), Some("Amazon.com (AWS)"));
    // The lists load as a ruleset, and no temporary file is left behind.
    let check = quagmire().args(["check", "--config", &config]).output().unwrap();
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
    let names: Vec<String> = std::fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|name| name.ends_with(".txt")), "{names:?}");
}

#[test]
fn a_broken_source_keeps_the_old_list_byte_for_byte_and_fails_the_command() {
    let fixtures = Fixtures::start();
    fixtures.set("/status/500", Answer::Status(500));
    fixtures.set("/hang", Answer::Hang);
    let dir = tempfile::tempdir().unwrap();
    let lists = lists_folder();
    let folder = lists.path();
    let config = config(
        dir.path(),
        folder,
        "timeout-seconds 1",
        &fixtures,
        &[
            ("search-engines", "Googlebot", "prefixes-json", "/googlebot-truncated.json"),
            ("search-engines", "bingbot", "prefixes-json", "/status/500"),
            ("ai-crawler-ranges", "GPTBot", "prefixes-json", "/empty-prefixes.json"),
            ("ai-crawler-ranges", "GoogleOther", "prefixes-json", "/hang"),
            ("ai-crawlers", "", "robots-json", "/robots-few.json"),
            ("datacenter-asns", "", "asn-list", "/datacenter-asn.txt"),
        ],
    );
    let before: Vec<String> = ["search-engines.txt", "ai-crawler-ranges.txt", "ai-crawlers.txt"]
        .map(|file| read(folder, file))
        .into();
    let started = Instant::now();
    let output = quagmire().args(["lists", "update", "--config", &config]).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(started.elapsed() < Duration::from_secs(10), "the timeout bounds the hanging source");
    assert!(stderr.contains(
        "error: kept the current search-engines.txt, ai-crawler-ranges.txt, ai-crawlers.txt: a source failed"
    ));
    for expected in [
        format!("search-engines.txt: kept the current file: {}: invalid JSON: EOF while parsing", fixtures.url("/googlebot-truncated.json")),
        format!("; {}: HTTP 500 Internal Server Error\n", fixtures.url("/status/500")),
        format!("ai-crawler-ranges.txt: kept the current file: {}: no entries; ", fixtures.url("/empty-prefixes.json")),
        format!("{}: no complete answer within 1 s\n", fixtures.url("/hang")),
        "ai-crawlers.txt: kept the current file: entries: 3 entries, fewer than half of the 163 in the current list\n"
            .to_string(),
        "datacenter-asns.txt: written, 1 entries, 144 kept by hand (139 in no source)\n".to_string(),
    ] {
        assert!(stdout.contains(&expected), "missing {expected:?} in\n{stdout}");
    }
    let after: Vec<String> = ["search-engines.txt", "ai-crawler-ranges.txt", "ai-crawlers.txt"]
        .map(|file| read(folder, file))
        .into();
    assert!(before == after, "a list with a broken source changed");
    assert!(read(folder, "datacenter-asns.txt").contains("\n64496 FIXTURE-ONLY"));
}

#[tokio::test]
async fn serve_refreshes_on_its_schedule_and_the_verdict_follows_a_new_range() {
    let fixtures = Fixtures::start();
    let dir = tempfile::tempdir().unwrap();
    let lists = lists_folder();
    // A refresh every 1.8 s.
    let config = config(
        dir.path(),
        lists.path(),
        "refresh-hours 0.0005",
        &fixtures,
        &[("search-engines", "Googlebot", "prefixes-json", "/googlebot.json")],
    );
    let server = Server::start(&["--config", &config]);
    let request = [("x-forwarded-for", "192.0.2.10"), ("x-forwarded-uri", "/"), ("user-agent", GOOGLEBOT)];
    let ask = || verdict(&server, &request);
    let (status, headers) = ask().await;
    assert_eq!(
        (status, header(&headers, "x-quagmire-rule")),
        (403, "search-engines"),
        "an impostor at first"
    );

    // Google publishes a new range with the test address in it.
    let mut published: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixtures_dir().join("googlebot.json")).unwrap()).unwrap();
    published["prefixes"].as_array_mut().unwrap().push(serde_json::json!({"ipv4Prefix": "192.0.2.0/24"}));
    fixtures.set("/googlebot.json", Answer::Body(serde_json::to_vec(&published).unwrap()));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, headers) = ask().await;
        if status == 200 {
            assert_eq!(header(&headers, "x-quagmire-verdict"), "allow");
            break;
        }
        assert!(Instant::now() < deadline, "the new range was not picked up");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(read(lists.path(), "search-engines.txt").contains("\nGooglebot 192.0.2.0/24\n"));

    // The source breaks: the last good list stays, and each failing round is logged.
    fixtures.set("/googlebot.json", Answer::Status(503));
    let mut log = String::new();
    crate::support::eventually("a failing refresh round logged", || {
        log.push_str(&server.new_log_lines().join("\n"));
        log.push('\n');
        let failed = log.contains("a list source failed; the current list stays");
        async move { failed }
    })
    .await;
    let (status, _) = ask().await;
    assert_eq!(status, 200, "the last good list stays in use");
    assert!(log.contains("reloaded the rules") && log.contains("lists refreshed"), "{log}");
    assert!(
        log.contains("a list source failed; the current list stays") && log.contains("HTTP 503"),
        "{log}"
    );
}

#[tokio::test]
async fn an_empty_folder_with_failing_sources_serves_with_every_list_and_says_where_each_came_from() {
    let fixtures = Fixtures::start();
    fixtures.set("/status/500", Answer::Status(500));
    let dir = tempfile::tempdir().unwrap();
    // A container's first start: a fresh volume, and no source answers.
    let lists = tempfile::tempdir().unwrap();
    let folder = lists.path();
    let config = config(
        dir.path(),
        folder,
        "timeout-seconds 2",
        &fixtures,
        &[
            ("search-engines", "Googlebot", "prefixes-json", "/status/500"),
            ("ai-crawlers", "", "robots-json", "/status/500"),
        ],
    );
    let output = quagmire().args(["lists", "update", "--config", &config]).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "a failed source fails the command\n{stdout}");
    for file in ["search-engines.txt", "ai-crawlers.txt"] {
        assert!(
            stdout.contains(&format!("{file}: not written: "))
                && stdout.contains("the rules use the embedded copy"),
            "{stdout}"
        );
        assert!(!folder.join(file).exists());
    }
    assert!(stdout.contains("datacenter-asns.txt: written from the embedded copy"), "{stdout}");

    let check = quagmire().args(["check", "--config", &config]).output().unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{said}{}", String::from_utf8_lossy(&check.stderr));
    for (file, _) in quagmire::DEFAULT_LISTS {
        assert!(said.contains(&format!("  {file}: ")), "check does not name {file}:\n{said}");
    }
    assert!(
        said.contains(&format!(
            "  ai-crawlers.txt: 178 entries from the embedded copy ({} is missing)",
            folder.join("ai-crawlers.txt").display()
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "  datacenter-asns.txt: 144 entries from {}",
            folder.join("datacenter-asns.txt").display()
        )),
        "{said}"
    );

    // The service protects as with the lists: GPTBot is trapped, and a real Googlebot address
    // from the embedded ranges is let through, not trapped as an impostor.
    let server = Server::start(&["--config", &config]);
    let gptbot = [
        ("x-forwarded-for", "198.51.100.7"),
        ("x-forwarded-uri", "/"),
        (
            "user-agent",
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)",
        ),
    ];
    let (status, headers) = verdict(&server, &gptbot).await;
    assert_eq!((status, header(&headers, "x-quagmire-rule")), (403, "ai-crawlers"));
    let googlebot = [("x-forwarded-for", "66.249.66.1"), ("x-forwarded-uri", "/"), ("user-agent", GOOGLEBOT)];
    let (status, headers) = verdict(&server, &googlebot).await;
    assert_eq!((status, header(&headers, "x-quagmire-rule")), (200, "search-engines"));
}

/// A body the fixture server can publish: `googlebot.json` with `extra` prefixes added.
fn googlebot_with(extra: &[&str]) -> Vec<u8> {
    let mut published: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixtures_dir().join("googlebot.json")).unwrap()).unwrap();
    for prefix in extra {
        let key = if prefix.contains(':') { "ipv6Prefix" } else { "ipv4Prefix" };
        published["prefixes"].as_array_mut().unwrap().push(serde_json::json!({ key: prefix }));
    }
    serde_json::to_vec(&published).unwrap()
}

/// A `robots.json` with the fixture's tokens and `extra` ones.
fn robots_with(extra: &[&str]) -> Vec<u8> {
    let mut published: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixtures_dir().join("robots.json")).unwrap()).unwrap();
    for token in extra {
        published[*token] = serde_json::json!({ "operator": "fixture" });
    }
    serde_json::to_vec(&published).unwrap()
}

#[test]
fn a_crawler_whose_function_the_kind_table_does_not_know_is_written_without_a_kind_and_named() {
    let fixtures = Fixtures::start();
    let mut published: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixtures_dir().join("robots.json")).unwrap()).unwrap();
    published["BrandNewBot"] =
        serde_json::json!({ "function": "Reads pages for a purpose nobody has reviewed." });
    fixtures.set("/robots-new.json", Answer::Body(serde_json::to_vec(&published).unwrap()));
    let dir = tempfile::tempdir().unwrap();
    let lists = lists_folder();
    let folder = lists.path();
    let config = config(
        dir.path(),
        folder,
        "timeout-seconds 10",
        &fixtures,
        &[("ai-crawlers", "", "robots-json", "/robots-new.json")],
    );
    let output = quagmire().args(["lists", "update", "--config", &config]).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(
        stdout.contains(
            "1 without a kind (add their function to rules/ai-kinds.txt; until then they are trapped whatever the preferences say): BrandNewBot (\"Reads pages for a purpose nobody has reviewed.\")"
        ),
        "{stdout}"
    );
    // Listed, so still trapped as an AI crawler, but of no kind: no preference lets it through.
    let List::Tokens(tokens) = parse(folder, "ai-crawlers.txt") else { panic!("not tokens") };
    assert_eq!(tokens.find("BrandNewBot/1.0"), Some("BrandNewBot"));
    assert_eq!(tokens.ai_kind("BrandNewBot/1.0"), None);
    assert_eq!(tokens.ai_kind("GPTBot/1.2"), Some(quagmire::AiKind::Training));
}

#[test]
fn what_cannot_be_right_is_refused_and_the_last_good_list_kept() {
    let fixtures = Fixtures::start();
    fixtures.set("/googlebot-everything.json", Answer::Body(googlebot_with(&["0.0.0.0/0"])));
    fixtures.set("/bingbot-everything.json", Answer::Body(googlebot_with(&["2000::/3"])));
    fixtures.set("/robots-mozilla.json", Answer::Body(robots_with(&["Mozilla"])));
    let dir = tempfile::tempdir().unwrap();
    let lists = lists_folder();
    let folder = lists.path();
    let config = config(
        dir.path(),
        folder,
        "timeout-seconds 10",
        &fixtures,
        &[
            ("search-engines", "Googlebot", "prefixes-json", "/googlebot-everything.json"),
            ("ai-crawler-ranges", "GPTBot", "prefixes-json", "/bingbot-everything.json"),
            ("ai-crawlers", "", "robots-json", "/robots-mozilla.json"),
        ],
    );
    let before: Vec<String> = ["search-engines.txt", "ai-crawler-ranges.txt", "ai-crawlers.txt"]
        .map(|file| read(folder, file))
        .into();
    let output = quagmire().args(["lists", "update", "--config", &config]).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    for expected in [
        "search-engines.txt: kept the current file: Googlebot: refused: 0.0.0.0/0 is wider than any crawler's range (IPv4 prefixes must be /12 or longer)\n",
        "ai-crawler-ranges.txt: kept the current file: GPTBot: refused: 2000::/3 is wider than any crawler's range (IPv6 prefixes must be /28 or longer)\n",
        "ai-crawlers.txt: kept the current file: entries: refused: `Mozilla` matches people's browsers",
    ] {
        assert!(stdout.contains(expected), "missing {expected:?} in\n{stdout}");
    }
    let after: Vec<String> = ["search-engines.txt", "ai-crawler-ranges.txt", "ai-crawlers.txt"]
        .map(|file| read(folder, file))
        .into();
    assert!(before == after, "a refused list changed");
}

/// Runs `command` to its end and returns its output and its peak resident memory in bytes: the
/// largest `VmHWM` (the kernel's high-water mark of the process's own memory, which starts
/// afresh at exec) read from `/proc` while it runs.
fn run_measured(command: &mut std::process::Command) -> (std::process::Output, u64) {
    use std::io::Read;
    let mut child =
        command.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            pipe.read_to_end(&mut text).unwrap();
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    let status = loop {
        if let Ok(text) = std::fs::read_to_string(&status_file)
            && let Some(kilobytes) = text
                .lines()
                .find_map(|line| line.strip_prefix("VmHWM:"))
                .and_then(|value| value.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak = peak.max(kilobytes * 1024);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let output =
        std::process::Output { status, stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap() };
    (output, peak)
}

#[test]
fn a_ten_megabyte_token_list_is_refused_within_a_stated_memory_bound() {
    let fixtures = Fixtures::start();
    // 400k tokens, 10.8 MB: what a hostile or broken ai.robots.txt could publish.
    let mut body = String::from("{");
    for index in 0..400_000 {
        body.push_str(&format!("\"HostileCrawler{index:07}\":{{\"operator\":\"x\"}},"));
    }
    body.pop();
    body.push('}');
    assert!(body.len() > 10_000_000);
    fixtures.set("/robots-huge.json", Answer::Body(body.into_bytes()));
    let dir = tempfile::tempdir().unwrap();
    let lists = lists_folder();
    let config = config(
        dir.path(),
        lists.path(),
        "timeout-seconds 30",
        &fixtures,
        &[("ai-crawlers", "", "robots-json", "/robots-huge.json")],
    );
    let before = read(lists.path(), "ai-crawlers.txt");
    let (output, peak) = run_measured(quagmire().args(["lists", "update", "--config", &config]));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("ai-crawlers.txt: kept the current file: entries: refused: "), "{stdout}");
    assert_eq!(read(lists.path(), "ai-crawlers.txt"), before);
    // The bound README states: the body (16 MiB at most), its keys, and the binary itself.
    eprintln!("lists update peaked at {} MiB", peak >> 20);
    assert!(peak < 160 << 20, "lists update peaked at {} MiB", peak >> 20);
}
