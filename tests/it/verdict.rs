//! The forward-auth verdict over HTTP, asked the way Traefik, Caddy and nginx ask.

use std::time::Duration;

use crate::support::{Server, get, header, hrefs, verdict, write_asn_db, write_file};

const CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36";
const GPTBOT: &str =
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)";

/// A browser navigation's own headers.
fn browser(user_agent: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![
        ("user-agent", user_agent),
        ("accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
        ("accept-language", "de-DE,de;q=0.9,en;q=0.8"),
        ("sec-fetch-site", "none"),
        ("sec-fetch-mode", "navigate"),
        ("sec-fetch-dest", "document"),
        ("sec-fetch-user", "?1"),
        ("sec-ch-ua", "\"Chromium\";v=\"130\", \"Not?A_Brand\";v=\"99\""),
        ("upgrade-insecure-requests", "1"),
        ("cookie", "sid=abc123"),
    ]
}

/// What Traefik's forwardAuth adds (measured with Traefik 3.7).
fn traefik(client: &'static str, uri: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![
        ("x-forwarded-method", "GET"),
        ("x-forwarded-proto", "https"),
        ("x-forwarded-host", "site.example"),
        ("x-forwarded-uri", uri),
        ("x-forwarded-for", client),
        ("x-forwarded-port", "443"),
        ("x-real-ip", client),
    ]
}

/// What Caddy's forward_auth adds.
fn caddy(client: &'static str, uri: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![
        ("x-forwarded-method", "GET"),
        ("x-forwarded-proto", "https"),
        ("x-forwarded-host", "site.example"),
        ("x-forwarded-uri", uri),
        ("x-forwarded-for", client),
    ]
}

/// What our nginx config adds (auth_request with X-Original-URI).
fn nginx(client: &'static str, uri: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![
        ("x-original-uri", uri),
        ("x-forwarded-method", "GET"),
        ("x-forwarded-proto", "https"),
        ("x-forwarded-host", "site.example"),
        ("x-forwarded-for", client),
        ("x-real-ip", client),
    ]
}

fn join(
    a: Vec<(&'static str, &'static str)>,
    b: Vec<(&'static str, &'static str)>,
) -> Vec<(&'static str, &'static str)> {
    a.into_iter().chain(b).collect()
}

#[tokio::test]
async fn browsers_are_allowed_and_crawlers_trapped_through_every_proxy() {
    let server = Server::start(&[]);
    for proxy in [traefik, caddy, nginx] {
        let (status, headers) =
            verdict(&server, &join(proxy("198.51.100.10", "/docs/a?x=1"), browser(CHROME))).await;
        assert_eq!(status, 200);
        assert_eq!(header(&headers, "x-quagmire-verdict"), "allow");
        // Every header an integration copies is present, even when empty.
        assert!(headers.contains_key("x-quagmire-rule") && headers.contains_key("x-quagmire-location"));
        assert!(!headers.contains_key("www-authenticate"));

        let (status, headers) =
            verdict(&server, &join(proxy("198.51.100.11", "/docs/a"), browser(GPTBOT))).await;
        assert_eq!(status, 403);
        assert_eq!(header(&headers, "x-quagmire-verdict"), "trap");
        assert_eq!(header(&headers, "x-quagmire-rule"), "ai-crawlers");
        assert!(!headers.contains_key("www-authenticate"));
    }
}

#[tokio::test]
async fn verdict_tolerates_any_method_and_query() {
    let server = Server::start(&[]);
    let client = reqwest::Client::new();
    for method in ["GET", "POST", "HEAD", "PUT"] {
        let response = client
            .request(method.parse().unwrap(), format!("{}?q=1&x=%2F", server.verdict_url()))
            .header("x-forwarded-uri", "/page")
            .header("user-agent", "GPTBot/1.2")
            .body("ignored body")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 403, "{method}");
    }
}

#[tokio::test]
async fn lying_browsers_are_trapped_over_https_but_not_over_http() {
    let server = Server::start(&[]);
    let bare = vec![("user-agent", CHROME), ("accept", "*/*")];
    let (status, headers) = verdict(&server, &join(caddy("198.51.100.12", "/"), bare.clone())).await;
    assert_eq!((status, header(&headers, "x-quagmire-rule")), (403, "lying-browser"));
    let plain =
        vec![("x-forwarded-proto", "http"), ("x-forwarded-uri", "/"), ("x-forwarded-for", "198.51.100.13")];
    let (status, _) = verdict(&server, &join(plain, bare)).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn asn_enrichment_traps_http_libraries_from_datacenters_only() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("asn.mmdb");
    write_asn_db(
        &db,
        &[("203.0.113.0/24", 16509, "Amazon.com, Inc."), ("192.0.2.0/24", 3320, "Deutsche Telekom AG")],
    );
    let server = Server::start(&["--asn-db", db.to_str().unwrap()]);
    let script = vec![("user-agent", "python-requests/2.31.0"), ("accept", "*/*")];
    // A file that is not a page: from a datacenter only the library is reason enough.
    let file = "/downloads/data.csv";
    let (status, headers) = verdict(&server, &join(caddy("203.0.113.5", file), script.clone())).await;
    assert_eq!((status, header(&headers, "x-quagmire-rule")), (403, "http-library-from-datacenter"));
    let (status, _) = verdict(&server, &join(caddy("192.0.2.5", file), script.clone())).await;
    assert_eq!(status, 200);
    // A page, from a home network too.
    let (status, headers) = verdict(&server, &join(caddy("192.0.2.5", "/"), script)).await;
    assert_eq!((status, header(&headers, "x-quagmire-rule")), (403, "http-library-page"));
}

#[tokio::test]
async fn forwarded_headers_from_untrusted_peers_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("asn.mmdb");
    write_asn_db(&db, &[("203.0.113.0/24", 16509, "Amazon.com, Inc.")]);
    let script = vec![("user-agent", "python-requests/2.31.0"), ("accept", "*/*")];
    // Trusting only another proxy, the test client (127.0.0.1) is the client itself: its forged
    // X-Forwarded-For and X-Real-IP must not make it look like the datacenter address.
    let config = write_file(dir.path(), "untrusted.kdl", "verdict {\n  trusted-proxies \"10.9.9.9\"\n}\n");
    let untrusting = Server::start(&["--config", &config, "--asn-db", db.to_str().unwrap()]);
    // A file, not a page: only a datacenter address traps the library.
    let file = "/downloads/data.csv";
    let (status, _) = verdict(&untrusting, &join(caddy("203.0.113.5", file), script.clone())).await;
    assert_eq!(status, 200);
    let trusting = Server::start(&["--asn-db", db.to_str().unwrap()]);
    let (status, _) = verdict(&trusting, &join(caddy("203.0.113.5", file), script.clone())).await;
    assert_eq!(status, 403);
    // Several addresses: the rightmost untrusted one counts (iocaine skips its IP checks then).
    let chain =
        vec![("x-forwarded-for", "192.0.2.99, 203.0.113.5, 127.0.0.1"), ("x-forwarded-proto", "https")];
    let (status, headers) = verdict(&trusting, &join(chain, script)).await;
    assert_eq!((status, header(&headers, "x-quagmire-rule")), (403, "http-library-from-datacenter"));
}

#[tokio::test]
async fn a_proxy_that_appends_its_own_forwarded_for_line_names_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("asn.mmdb");
    write_asn_db(&db, &[("203.0.113.0/24", 16509, "Amazon.com, Inc.")]);
    let server = Server::start(&["--asn-db", db.to_str().unwrap()]);
    let script = vec![("user-agent", "python-requests/2.31.0"), ("accept", "*/*")];
    // HAProxy's `option forwardfor` adds a second line after the one the client forged: the
    // client is the datacenter address the proxy saw, not the one it claimed.
    let haproxy = vec![("x-forwarded-for", "6.6.6.6"), ("x-forwarded-for", "203.0.113.9")];
    let (status, headers) = verdict(&server, &join(haproxy, script.clone())).await;
    assert_eq!((status, header(&headers, "x-quagmire-rule")), (403, "http-library-from-datacenter"));
    // The standard Forwarded header, when there is no X-Forwarded-For.
    let forwarded = vec![("forwarded", "for=6.6.6.6"), ("forwarded", "for=\"203.0.113.9:4711\";proto=https")];
    let (status, headers) = verdict(&server, &join(forwarded, script.clone())).await;
    assert_eq!((status, header(&headers, "x-quagmire-rule")), (403, "http-library-from-datacenter"));
    // The client it names is not in a datacenter, and asks for a file, not a page.
    let file = vec![("forwarded", "for=6.6.6.6"), ("x-forwarded-uri", "/downloads/data.csv")];
    let (status, _) = verdict(&server, &join(file, script)).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_burst_of_trap_hits_traps_later_requests_but_one_stray_hit_does_not() {
    let server = Server::start(&[]);
    // One stray hit (a person clicked a hidden link once).
    let (status, _, _) = get_as(&server, "/hidden", "198.51.100.30").await;
    assert_eq!(status, 200);
    let (status, _) = verdict(&server, &join(caddy("198.51.100.30", "/docs"), browser(CHROME))).await;
    assert_eq!(status, 200, "one stray hit must not trap a person");

    // A crawler walks twenty trap pages.
    for i in 0..20 {
        get_as(&server, &format!("/walk/{i}"), "198.51.100.31").await;
    }
    let (status, headers) = verdict(&server, &join(caddy("198.51.100.31", "/docs"), browser(CHROME))).await;
    assert_eq!((status, header(&headers, "x-quagmire-rule")), (403, "trap-score"));
}

#[tokio::test]
async fn ipv6_neighbours_in_the_same_64_share_the_record() {
    let server = Server::start(&[]);
    for i in 0..20 {
        get_as(&server, &format!("/walk/{i}"), "2001:db8:1:2::1").await;
    }
    let (status, _) = verdict(&server, &join(caddy("2001:db8:1:2::99", "/"), browser(CHROME))).await;
    assert_eq!(status, 403, "same /64");
    let (status, _) = verdict(&server, &join(caddy("2001:db8:1:3::1", "/"), browser(CHROME))).await;
    assert_eq!(status, 200, "another /64");
}

#[tokio::test]
async fn a_trap_url_is_trapped_from_a_fresh_address() {
    let server = Server::start(&[]);
    let (_, _, page) = get(&server.trap_url("/start"), "site.example").await;
    let link: &'static str = Box::leak(hrefs(&page)[0].clone().into_boxed_str());
    let (status, headers) = verdict(&server, &join(caddy("192.0.2.200", link), browser(CHROME))).await;
    assert_eq!((status, header(&headers, "x-quagmire-rule")), (403, "trap-url"));
}

#[tokio::test]
async fn shadow_mode_allows_but_reports_the_would_be_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_file(dir.path(), "shadow.kdl", "verdict {\n  mode \"shadow\"\n}\n");
    let server = Server::start(&["--config", &config]);
    let (status, headers) = verdict(&server, &join(caddy("198.51.100.40", "/"), browser(GPTBOT))).await;
    assert_eq!(status, 200);
    assert_eq!(header(&headers, "x-quagmire-verdict"), "trap");
    assert_eq!(header(&headers, "x-quagmire-rule"), "ai-crawlers");
    assert_eq!(header(&headers, "x-quagmire-mode"), "shadow");
}

#[tokio::test]
async fn shadow_mode_reports_a_would_be_challenge_and_lets_it_through() {
    let dir = tempfile::tempdir().unwrap();
    let text = "verdict {\n  mode \"shadow\"\n}\nchallenge {\n  everyone #true\n}\n";
    let config = write_file(dir.path(), "shadow.kdl", text);
    let server = Server::start(&["--config", &config]);
    let (status, headers) = verdict(&server, &join(caddy("198.51.100.41", "/"), browser(CHROME))).await;
    assert_eq!(status, 200);
    assert_eq!(header(&headers, "x-quagmire-verdict"), "challenge");
    assert_eq!(header(&headers, "x-quagmire-rule"), "challenge-browsers");
    assert_eq!(header(&headers, "x-quagmire-mode"), "shadow");
    let metrics =
        reqwest::get(format!("http://{}/metrics", server.verdict)).await.unwrap().text().await.unwrap();
    assert!(
        metrics.contains("verdict=\"challenge\",rule=\"challenge-browsers\",mode=\"shadow\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("quagmire_challenges_issued_total 0"), "{metrics}");
}

#[tokio::test]
async fn a_challenge_answers_401_with_a_self_contained_page() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_file(dir.path(), "everyone.kdl", "challenge {\n  everyone #true\n}\n");
    let server = Server::start(&["--config", &config]);
    let mut request = reqwest::Client::new().get(server.verdict_url());
    for (name, value) in join(caddy("198.51.100.42", "/docs/a"), browser(CHROME)) {
        request = request.header(name, value);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 401);
    let headers = response.headers().clone();
    assert_eq!(header(&headers, "x-quagmire-verdict"), "challenge");
    assert!(header(&headers, "content-type").starts_with("text/html"));
    assert!(header(&headers, "content-security-policy").contains("default-src 'none'"));
    assert_eq!(header(&headers, "cache-control"), "no-store");
    let page = response.text().await.unwrap();
    assert!(page.contains("to=%2Fdocs%2Fa"), "{page}");
    // The page's script and worker are served under the reserved path.
    for path in ["/.quagmire/challenge.js", "/.quagmire/worker.js"] {
        let response = reqwest::get(format!("http://{}{path}", server.verdict)).await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert!(header(response.headers(), "content-type").starts_with("text/javascript"));
    }
}

#[tokio::test]
async fn redirect_and_nginx_answers_point_at_the_trap() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_file(dir.path(), "redirect.kdl", "verdict {\n  answer \"redirect\"\n}\n");
    let server = Server::start(&["--config", &config]);
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let mut request = client.get(server.verdict_url());
    for (name, value) in join(traefik("198.51.100.50", "/docs/a?x=1"), browser(GPTBOT)) {
        request = request.header(name, value);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 302);
    assert_eq!(response.headers()["location"], "https://site.example/trap/docs/a?x=1");

    let config = write_file(dir.path(), "nginx.kdl", "verdict {\n  answer \"nginx\"\n  trap-status 421\n}\n");
    let server = Server::start(&["--config", &config]);
    let (status, headers) = verdict(&server, &join(nginx("198.51.100.51", "/docs/b"), browser(GPTBOT))).await;
    assert_eq!(status, 403, "nginx accepts only 401 and 403 from auth_request");
    assert_eq!(header(&headers, "x-quagmire-location"), "https://site.example/trap/docs/b");
}

#[tokio::test]
async fn a_runaway_rule_is_contained_and_the_fail_mode_applies() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_file(
        dir.path(),
        "rules.lua",
        "return {\n  { name = 'spin', check = function(r) while true do end end },\n  { name = 'bomb', check = function(r) local t = {} for i = 1, 1e9 do t[i] = string.rep('x', 4096) end end },\n}\n",
    );
    let open = write_file(dir.path(), "open.kdl", &format!("rules {{\n  script \"{script}\"\n}}\n"));
    let server = Server::start(&["--config", &open]);
    let started = std::time::Instant::now();
    let (status, _) = verdict(&server, &join(caddy("198.51.100.60", "/"), browser(GPTBOT))).await;
    assert_eq!(status, 200, "fail open: the broken rules are skipped");
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    // The service keeps answering.
    let (status, _) = verdict(&server, &join(caddy("198.51.100.61", "/"), browser(CHROME))).await;
    assert_eq!(status, 200);

    let closed = write_file(
        dir.path(),
        "closed.kdl",
        &format!("rules {{\n  script \"{script}\"\n  fail \"closed\"\n}}\n"),
    );
    let server = Server::start(&["--config", &closed]);
    let (status, headers) = verdict(&server, &join(caddy("198.51.100.62", "/"), browser(CHROME))).await;
    assert_eq!((status, header(&headers, "x-quagmire-rule")), (403, "spin"));
}

#[tokio::test]
async fn hot_reload_keeps_the_old_rules_when_the_new_file_is_broken() {
    let dir = tempfile::tempdir().unwrap();
    let rule = |name: &str| {
        format!("return {{ {{ name = '{name}', check = function(r) return 'trap', '{name}' end }} }}\n")
    };
    let script = write_file(dir.path(), "rules.lua", &rule("first"));
    let config = write_file(dir.path(), "reload.kdl", &format!("rules {{\n  script \"{script}\"\n}}\n"));
    let server = Server::start(&["--config", &config]);
    let ask = || verdict(&server, &[("x-forwarded-uri", "/"), ("user-agent", CHROME)]);
    assert_eq!(header(&ask().await.1, "x-quagmire-rule"), "first");

    std::fs::write(&script, "return { { name = 'broken' check = } }\n").unwrap();
    hangup(&server);
    // The reload must have been tried and refused before the old rules' answer means anything.
    // Waits for the event (the failed reload counted), not a clock: the ceiling is for a hang
    // only, as a busy machine running the whole suite may take seconds to get there.
    // The signal and the file watcher may both try the broken file: one failed reload or more.
    let failed_reloads = |metrics: &str| -> u64 {
        metrics
            .lines()
            .find_map(|line| line.strip_prefix("quagmire_reloads_total{what=\"rules\",result=\"failed\"} "))
            .and_then(|count| count.trim().parse().ok())
            .unwrap_or(0)
    };
    let mut metrics = String::new();
    let ceiling = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < ceiling {
        metrics =
            reqwest::get(format!("http://{}/metrics", server.verdict)).await.unwrap().text().await.unwrap();
        if failed_reloads(&metrics) >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(failed_reloads(&metrics) >= 1, "no failed reload counted:\n{metrics}");
    assert_eq!(header(&ask().await.1, "x-quagmire-rule"), "first", "a broken file keeps the old rules");

    std::fs::write(&script, rule("second")).unwrap();
    // The file watcher picks the change up by itself within its poll interval.
    let mut rule_now = String::new();
    let ceiling = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < ceiling {
        rule_now = header(&ask().await.1, "x-quagmire-rule").to_string();
        if rule_now == "second" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(rule_now, "second");
}

/// A trap page fetched through a trusted proxy for `client`.
async fn get_as(server: &Server, target: &str, client: &str) -> (u16, reqwest::header::HeaderMap, String) {
    let response = reqwest::Client::new()
        .get(server.trap_url(target))
        .header("host", "site.example")
        .header("x-forwarded-for", client)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.unwrap())
}

fn hangup(server: &Server) {
    let status =
        std::process::Command::new("kill").args(["-HUP", &server.pid().to_string()]).status().unwrap();
    assert!(status.success());
}

/// The site owner's monitor, told by the secret header its config names (from the environment)
/// or by its address: allowed whatever it looks like; the same requests without the proof, or
/// with a near miss, are judged as anyone's. The secret appears in no log line.
#[test]
fn the_owners_monitor_with_its_secret_header_or_address_is_let_through() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let secret = "monitor-secret-5f0c2a9e1b7d";
    let config = write_file(
        dir.path(),
        "owner.kdl",
        "owner-tools {\n    header \"X-Monitor-Key\"\n    secret-env \"TEST_MONITOR_KEY\"\n    addresses \"192.0.2.64/28\"\n}\n",
    );
    let server = Server::start_with_env(
        &["--config", &config],
        &[("QUAGMIRE_SECRET", crate::support::SECRET), ("TEST_MONITOR_KEY", secret)],
    );
    // curl from a client the trap has seen walk it: trapped without proof.
    let asking = |client: &'static str, key: Option<&'static str>| {
        let mut headers = vec![
            ("user-agent", "curl/8.5.0"),
            ("x-forwarded-for", client),
            ("x-forwarded-uri", "/status"),
            ("x-forwarded-host", "site.example"),
        ];
        if let Some(key) = key {
            headers.push(("x-monitor-key", key));
        }
        headers
    };
    runtime.block_on(async {
        let http = reqwest::Client::new();
        for n in 0..6 {
            let walked = http
                .get(server.trap_url(&format!("/walk/{n}")))
                .header("host", "site.example")
                .header("x-forwarded-for", "203.0.113.77")
                .send()
                .await
                .unwrap();
            assert_eq!(walked.status(), 200);
        }
        let (status, headers) = verdict(&server, &asking("203.0.113.77", None)).await;
        assert_eq!((status, header(&headers, "x-quagmire-rule")), (403, "trap-score"));
        let (status, headers) = verdict(&server, &asking("203.0.113.77", Some(secret))).await;
        assert_eq!((status, header(&headers, "x-quagmire-rule")), (200, "owner-tools"));
        let near = "monitor-secret-5f0c2a9e1b7";
        let (status, headers) = verdict(&server, &asking("203.0.113.77", Some(near))).await;
        assert_eq!((status, header(&headers, "x-quagmire-rule")), (403, "trap-score"));
        let (status, headers) = verdict(&server, &asking("192.0.2.70", None)).await;
        assert_eq!((status, header(&headers, "x-quagmire-rule")), (200, "owner-tools"));
    });
    let lines = server.new_log_lines().join("\n");
    assert!(!lines.contains(secret) && !lines.contains("5f0c2a9e"), "{lines}");
}
