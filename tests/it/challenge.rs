//! The challenge verdict end to end: a real Chromium (Debian's `chromium`, headless, driven over
//! WebDriver by `chromedriver`) through each shipped proxy config in both modes, in front of the
//! real quagmire and a small origin serving pages with subresources, all on loopback. Chromium's
//! address is 127.0.0.1, and the test ASN database puts 127.0.0.0/8 in AS16509 (a cloud network), so its
//! page views are challenged by the default rules. Also: curl, Wget and a Python client; forged,
//! tampered, expired and foreign passes; a pass shared across networks or walking the trap; open
//! redirects on the answer path; and the default config's pace targets.

use std::net::{IpAddr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::Path as UrlPath;
use axum::http::header;
use axum::response::IntoResponse;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use tokio::net::TcpListener;

use crate::proxies::{Proxy, config, free_address, start_proxy};
use crate::support::{SECRET, Server, attribute, require_program, solve, write_asn_db, write_file};

/// Chromium's own User-Agent, as a crawler driving it sends it (headless Chromium says
/// "HeadlessChrome", which the rules trap at once: not the case under test).
const CHROMIUM_UA: &str =
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36";
const FIREFOX_UA: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:140.0) Gecko/20100101 Firefox/140.0";

/// Paths the origin served, in order.
type Seen = Arc<Mutex<Vec<String>>>;

/// A small site: `/page/N` is an HTML page with a stylesheet, a script and an image, linking to
/// the next page; `/static/*` are those files.
async fn start_site() -> (SocketAddr, Seen) {
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let (pages, files) = (seen.clone(), seen.clone());
    let router = axum::Router::new()
        .route(
            "/page/{n}",
            axum::routing::get(move |UrlPath(n): UrlPath<String>| {
                let seen = pages.clone();
                async move {
                    seen.lock().unwrap().push(format!("/page/{n}"));
                    let next = n.parse::<u32>().map_or(1, |n| n + 1);
                    let html = format!(
                        "<!doctype html><html><head><title>origin page {n}</title>\
                         <link rel=\"stylesheet\" href=\"/static/site.css\"><script src=\"/static/site.js\"></script>\
                         </head><body><h1>origin page {n}</h1><img src=\"/static/pic.svg\" alt=\"\">\
                         <a href=\"/page/{next}\">next</a></body></html>"
                    );
                    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html)
                }
            }),
        )
        .route(
            "/static/{file}",
            axum::routing::get(move |UrlPath(file): UrlPath<String>| {
                let seen = files.clone();
                async move {
                    seen.lock().unwrap().push(format!("/static/{file}"));
                    let (kind, body) = match file.rsplit('.').next() {
                        Some("css") => ("text/css", "h1{color:#333}"),
                        Some("js") => ("text/javascript", "document.documentElement.dataset.site='1';"),
                        _ => ("image/svg+xml", "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1\" height=\"1\"/>"),
                    };
                    ([(header::CONTENT_TYPE, kind)], body).into_response()
                }
            }),
        )
        // A page whose script keeps asking the origin for JSON, as dashboards and feeds do, and
        // writes down what each answer was.
        .route(
            "/app",
            axum::routing::get(|| async {
                let html = "<!doctype html><html><head><title>origin app</title></head><body>\
                     <h1>origin app</h1><script>window.seen = [];\
                     setInterval(function () { fetch('/api/data.json').then(function (response) {\
                     return response.text().then(function (text) {\
                     window.seen.push(response.status + ' ' + text.slice(0, 40)); }); },\
                     function (error) { window.seen.push('failed ' + error); }); }, 250);</script>\
                     </body></html>";
                ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html)
            }),
        )
        .route(
            "/api/data.json",
            axum::routing::get(|| async { ([(header::CONTENT_TYPE, "application/json")], "{\"origin\":\"data\"}") }),
        )
        .fallback(|uri: axum::http::Uri| async move { format!("origin GET {}", uri.path()) });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    (address, seen)
}

fn origin_pages(seen: &Seen) -> Vec<String> {
    seen.lock().unwrap().iter().filter(|path| path.starts_with("/page/")).cloned().collect()
}

/// quagmire with an ASN database that puts 127.0.0.0/8 in AS16509 and `settings` added, behind
/// `proxy` in `mode` with the site: what a test drives.
struct Deployment {
    server: Server,
    _proxy: Proxy,
    base: String,
    seen: Seen,
    _dir: tempfile::TempDir,
}

async fn deploy(proxy_name: &str, file: &str, settings: &str) -> Option<Deployment> {
    let binary = require_program(proxy_name)?;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("asn.mmdb");
    write_asn_db(&db, &[("127.0.0.0/8", 16509, "Amazon.com, Inc.")]);
    let answer = if file.contains("redirect") {
        if proxy_name == "nginx" {
            "verdict { answer \"nginx\" }\n"
        } else {
            "verdict { answer \"redirect\" }\n"
        }
    } else if proxy_name == "traefik" {
        "verdict { trap-status 421 }\n"
    } else {
        ""
    };
    let text = format!("geo {{ asn \"{}\" }}\n{answer}{settings}", db.display());
    let config_path = write_file(dir.path(), "quagmire.kdl", &text);
    let server = Server::start(&["--config", &config_path]);
    let (site, seen) = start_site().await;
    let address = free_address();
    let text = config(file, address, server.verdict, server.trap, site);
    let proxy =
        start_proxy(proxy_name, &binary, file, &text, [address, server.verdict, server.trap, site]).await;
    Some(Deployment { server, _proxy: proxy, base: format!("http://{address}"), seen, _dir: dir })
}

/// A headless Chromium under chromedriver, with its own profile (and so its own cookies).
struct Browser {
    driver: Child,
    port: u16,
    session: String,
    http: reqwest::Client,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// `None` (not run) when Chromium or chromedriver is missing outside CI.
    async fn start(javascript: bool) -> Option<Browser> {
        let chromium = require_program("chromium")?;
        let chromedriver = require_program("chromedriver")?;
        let port = free_address().port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let http = reqwest::Client::new();
        let profile = tempfile::tempdir().unwrap();
        let mut args = vec![
            "--headless=new".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-features=Translate,OptimizationHints,MediaRouter,InterestFeedContentSuggestions"
                .into(),
            format!("--user-agent={CHROMIUM_UA}"),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        if !javascript {
            args.push("--blink-settings=scriptEnabled=false".into());
        }
        let capabilities = serde_json::json!({
            "capabilities": { "alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": { "binary": chromium, "args": args },
            } }
        });
        let mut browser = Browser { driver, port, session: String::new(), http, _profile: profile };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let response =
                browser.http.post(browser.url("/session")).body(capabilities.to_string()).send().await;
            if let Ok(response) = response {
                let body: serde_json::Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
                browser.session = body["value"]["sessionId"]
                    .as_str()
                    .unwrap_or_else(|| panic!("no WebDriver session: {body}"))
                    .to_string();
                return Some(browser);
            }
            assert!(Instant::now() < deadline, "chromedriver did not answer on port {port}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Navigates to `url` and waits for the page to load (not for what its scripts do after).
    async fn go(&self, url: &str) {
        let path = format!("/session/{}/url", self.session);
        let body = serde_json::json!({ "url": url }).to_string();
        let response = self.http.post(self.url(&path)).body(body).send().await.unwrap();
        assert!(response.status().is_success(), "navigating to {url}: {}", response.text().await.unwrap());
    }

    /// The current page's HTML.
    async fn source(&self) -> String {
        let path = format!("/session/{}/source", self.session);
        let text = self.http.get(self.url(&path)).send().await.unwrap().text().await.unwrap();
        let body: serde_json::Value = serde_json::from_str(&text).unwrap();
        body["value"].as_str().unwrap_or_default().to_string()
    }

    /// Runs `script` in the current page and returns what it returns.
    async fn run(&self, script: &str) -> serde_json::Value {
        let path = format!("/session/{}/execute/sync", self.session);
        let body = serde_json::json!({ "script": script, "args": [] }).to_string();
        let text = self.http.post(self.url(&path)).body(body).send().await.unwrap().text().await.unwrap();
        let mut reply: serde_json::Value = serde_json::from_str(&text).unwrap();
        reply["value"].take()
    }

    /// The browser's tabs (WebDriver window handles), oldest first.
    async fn tabs(&self) -> Vec<String> {
        let path = format!("/session/{}/window/handles", self.session);
        let text = self.http.get(self.url(&path)).send().await.unwrap().text().await.unwrap();
        let reply: serde_json::Value = serde_json::from_str(&text).unwrap();
        let handles = reply["value"].as_array().cloned().unwrap_or_default();
        handles.iter().filter_map(|handle| handle.as_str().map(str::to_string)).collect()
    }

    async fn switch_to(&self, tab: &str) {
        let path = format!("/session/{}/window", self.session);
        let body = serde_json::json!({ "handle": tab }).to_string();
        let response = self.http.post(self.url(&path)).body(body).send().await.unwrap();
        assert!(response.status().is_success(), "switching to {tab}: {}", response.text().await.unwrap());
    }

    /// Forgets every cookie: a pass that has expired, as far as the site can tell.
    async fn forget_cookies(&self) {
        let path = format!("/session/{}/cookie", self.session);
        let response = self.http.delete(self.url(&path)).send().await.unwrap();
        assert!(response.status().is_success(), "deleting cookies: {}", response.text().await.unwrap());
    }

    /// Waits until the page is no longer the challenge, and returns it.
    async fn past_the_challenge(&self, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let source = self.source().await;
            // Between the challenge and the page (the answer's reload, the no-script wait's
            // refresh) the document is briefly empty: that is not past it yet.
            let between = source.trim().is_empty() || source.replace(char::is_whitespace, "") == BLANK;
            if !is_challenge(&source) && !between {
                return source;
            }
            assert!(Instant::now() < deadline, "still on the challenge page after {within:?}:\n{source}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ending the session closes Chromium; killing chromedriver alone would leave it running.
        if !self.session.is_empty()
            && let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", self.port))
        {
            use std::io::{Read, Write};
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let request = format!(
                "DELETE /session/{} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                self.session
            );
            let _ = stream.write_all(request.as_bytes());
            let _ = stream.read_to_end(&mut Vec::new());
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn is_challenge(source: &str) -> bool {
    source.contains("quagmire-challenge")
}

/// What a browser shows of a document that has not loaded anything yet.
const BLANK: &str = "<html><head></head><body></body></html>";

fn is_origin(source: &str, page: u32) -> bool {
    source.contains(&format!("<h1>origin page {page}</h1>"))
}

/// The per-proxy settings: a quick proof of work and wait, and a pace allowance wide enough for
/// 20 quick page views (the pace limits have a test of their own, on the default config).
const WIRING: &str = "challenge {\n    difficulty 12\n    wait-seconds 2\n    burn-pages-per-minute 6000\n    burn-page-burst 1000\n}\n";

/// Everything the issue asks of one proxy in one mode.
async fn through(proxy_name: &str, file: &str) {
    let Some(site) = deploy(proxy_name, file, WIRING).await else { return };
    let Some(browser) = Browser::start(true).await else { return };
    // From a challenged network: the challenge first, then the page once answered.
    browser.go(&format!("{}/page/1", site.base)).await;
    let page = browser.past_the_challenge(Duration::from_secs(30)).await;
    assert!(is_origin(&page, 1), "{proxy_name} {file}: not the origin's page after the challenge:\n{page}");
    // The next 20 page views and their subresources reach the origin, with no challenge.
    let subresources_before =
        site.seen.lock().unwrap().iter().filter(|path| path.starts_with("/static/")).count();
    for n in 2..=21 {
        browser.go(&format!("{}/page/{n}", site.base)).await;
        let source = browser.source().await;
        assert!(is_origin(&source, n), "{proxy_name} {file}: page {n} is not the origin's:\n{source}");
    }
    let statics = site.seen.lock().unwrap().iter().filter(|path| path.starts_with("/static/")).count();
    assert!(statics >= subresources_before + 20, "subresources did not reach the origin: {statics}");
    assert_eq!(origin_pages(&site.seen).len(), 21);
    drop(browser);

    // With JavaScript off: the no-script path, after the wait.
    let Some(browser) = Browser::start(false).await else { return };
    browser.go(&format!("{}/page/50", site.base)).await;
    let started = Instant::now();
    let page = browser.past_the_challenge(Duration::from_secs(30)).await;
    assert!(is_origin(&page, 50), "{proxy_name} {file}: no page after the no-script wait:\n{page}");
    assert!(started.elapsed() >= Duration::from_millis(500), "the wait was not waited");
    browser.go(&format!("{}/page/51", site.base)).await;
    assert!(is_origin(&browser.source().await, 51));
    drop(browser);

    // curl, Wget and a Python client never reach the origin: they end in the trap.
    let before = origin_pages(&site.seen).len();
    let commands: [(&str, Vec<String>); 3] = [
        ("curl", vec!["-s".into(), "-L".into(), format!("{}/page/100", site.base)]),
        ("wget", vec!["-q".into(), "-O".into(), "-".into(), format!("{}/page/101", site.base)]),
        (
            "python3",
            vec![
                "-c".into(),
                "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())"
                    .into(),
                format!("{}/page/102", site.base),
            ],
        ),
    ];
    for (program, args) in commands {
        let Some(path) = require_program(program) else { continue };
        let output = Command::new(path).args(&args).output().unwrap();
        let body = String::from_utf8_lossy(&output.stdout);
        assert!(
            body.starts_with("<!DOCTYPE html>") && !is_challenge(&body),
            "{program} did not get a trap page:\n{body}"
        );
    }
    assert_eq!(origin_pages(&site.seen).len(), before, "a program reached the origin");
}

#[tokio::test]
async fn caddy_transparent_challenges_a_real_browser() {
    through("caddy", "caddy/transparent.Caddyfile").await;
}

#[tokio::test]
async fn caddy_redirect_challenges_a_real_browser() {
    through("caddy", "caddy/redirect.Caddyfile").await;
}

#[tokio::test]
async fn nginx_transparent_challenges_a_real_browser() {
    through("nginx", "nginx/transparent.conf").await;
}

#[tokio::test]
async fn nginx_redirect_challenges_a_real_browser() {
    through("nginx", "nginx/redirect.conf").await;
}

#[tokio::test]
async fn traefik_transparent_challenges_a_real_browser() {
    through("traefik", "traefik/transparent.yml").await;
}

#[tokio::test]
async fn traefik_redirect_challenges_a_real_browser() {
    through("traefik", "traefik/redirect.yml").await;
}

#[tokio::test]
async fn haproxy_transparent_challenges_a_real_browser() {
    through("haproxy", "haproxy/transparent.cfg").await;
}

#[tokio::test]
async fn haproxy_redirect_challenges_a_real_browser() {
    through("haproxy", "haproxy/redirect.cfg").await;
}

/// A pass cookie as quagmire makes one (see `src/challenge.rs`): version, id, issue and expiry
/// times, how it was earned, and a BLAKE3 MAC under a key derived from `secret`.
fn pass_cookie(secret: &str, id: u128, issued: u64, expires: u64) -> String {
    let mut payload = vec![1u8];
    payload.extend_from_slice(&id.to_le_bytes());
    payload.extend_from_slice(&issued.to_le_bytes());
    payload.extend_from_slice(&expires.to_le_bytes());
    payload.push(1);
    let key = blake3::derive_key("quagmire 2026-12 pass MAC", secret.as_bytes());
    let tag = blake3::keyed_hash(&key, &payload);
    payload.extend_from_slice(&tag.as_bytes()[..16]);
    format!("quagmire_pass={}", URL_SAFE_NO_PAD.encode(payload))
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// A page view through the deployment, from `from` (a loopback address), with `cookie`.
async fn view(site: &Deployment, from: IpAddr, path: &str, cookie: &str) -> (u16, String) {
    let http = reqwest::Client::builder()
        .local_address(from)
        .redirect(reqwest::redirect::Policy::limited(3))
        .build()
        .unwrap();
    let mut request = http
        .get(format!("{}{path}", site.base))
        .header("user-agent", FIREFOX_UA)
        .header("accept", "text/html")
        .header("sec-fetch-mode", "navigate")
        .header("sec-fetch-dest", "document");
    if !cookie.is_empty() {
        request = request.header("cookie", cookie);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// What a page view got: the origin's page, the challenge, or the trap.
async fn outcome(site: &Deployment, from: &str, path: &str, cookie: &str) -> &'static str {
    let (status, body) = view(site, from.parse().unwrap(), path, cookie).await;
    if body.contains("<h1>origin page") {
        "origin"
    } else if is_challenge(&body) {
        assert_eq!(status, 401, "a challenge page is a 401");
        "challenge"
    } else {
        "trap"
    }
}

#[tokio::test]
async fn a_forged_tampered_expired_or_foreign_pass_is_no_pass() {
    let Some(site) = deploy("caddy", "caddy/transparent.Caddyfile", "").await else { return };
    let good = pass_cookie(SECRET, 11, now(), now() + 3600);
    assert_eq!(outcome(&site, "127.0.0.1", "/page/1", &good).await, "origin");
    let mut tampered = good.clone().into_bytes();
    let last = tampered.len() - 3;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let cookies = [
        (
            "forged",
            "quagmire_pass=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA".to_string(),
        ),
        ("tampered", String::from_utf8(tampered).unwrap()),
        ("expired", pass_cookie(SECRET, 12, now() - 7200, now() - 3600)),
        ("another secret's", pass_cookie("another secret", 13, now(), now() + 3600)),
    ];
    for (what, cookie) in cookies {
        assert_eq!(outcome(&site, "127.0.0.1", "/page/2", &cookie).await, "challenge", "a {what} pass");
    }
    let metrics =
        reqwest::get(format!("http://{}/metrics", site.server.verdict)).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("quagmire_passes_total{result=\"invalid\"} 3"), "{metrics}");
    assert!(metrics.contains("quagmire_passes_total{result=\"expired\"} 1"), "{metrics}");
}

#[tokio::test]
async fn a_pass_used_from_many_networks_or_walking_the_trap_is_burned() {
    let Some(site) = deploy("caddy", "caddy/transparent.Caddyfile", "").await else { return };
    // A solved cookie shared across a proxy pool: a new /24 for every view.
    let shared = pass_cookie(SECRET, 21, now(), now() + 3600);
    let mut outcomes = Vec::new();
    for n in 1..=12 {
        outcomes.push(outcome(&site, &format!("127.{n}.0.1"), &format!("/page/{n}"), &shared).await);
    }
    assert_eq!(&outcomes[..8], ["origin"; 8], "{outcomes:?}");
    assert!(outcomes[8..].iter().all(|outcome| *outcome == "trap"), "{outcomes:?}");
    // Burned: trapped wherever it goes next.
    assert_eq!(outcome(&site, "127.0.0.1", "/page/40", &shared).await, "trap");

    // A holder walking the trap: its pass is burned, and follows it to a new address.
    let walker = pass_cookie(SECRET, 22, now(), now() + 3600);
    assert_eq!(outcome(&site, "127.50.0.1", "/page/41", &walker).await, "origin");
    for n in 0..2 {
        view(&site, "127.50.0.1".parse().unwrap(), &format!("/trap/walk-{n}"), &walker).await;
    }
    assert_eq!(outcome(&site, "127.60.0.1", "/page/42", &walker).await, "trap");
    // A new pass from a fresh address is its own: nothing of the burned ones sticks to it.
    let person = pass_cookie(SECRET, 23, now(), now() + 3600);
    assert_eq!(outcome(&site, "127.70.0.1", "/page/43", &person).await, "origin");
}

#[tokio::test]
async fn the_answer_path_redirects_only_within_the_site_and_sets_a_pass_once() {
    let Some(site) =
        deploy("caddy", "caddy/transparent.Caddyfile", "challenge {\n    difficulty 10\n}\n").await
    else {
        return;
    };
    // A challenge as a browser gets it, solved as its worker would.
    let (status, page) = view(&site, "127.0.0.1".parse().unwrap(), "/page/1", "").await;
    assert_eq!(status, 401);
    let token = attribute(&page, "data-challenge");
    let nonce = solve(&token, attribute(&page, "data-difficulty").parse().unwrap());
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let answer = |target: &str| {
        let target: String = form_urlencoded::byte_serialize(target.as_bytes()).collect();
        http.get(format!("{}/.quagmire/answer?c={token}&n={nonce}&to={target}", site.base))
            .header("user-agent", FIREFOX_UA)
            .send()
    };
    for evil in ["//evil.example/", "https://evil.example/", "/\\evil.example", "javascript:alert(1)"] {
        let response = answer(evil).await.unwrap();
        assert_eq!(response.status(), 400, "{evil}");
        assert!(response.headers().get("location").is_none());
    }
    let response = answer("/page/1?x=1").await.unwrap();
    assert_eq!(response.status(), 303);
    assert_eq!(response.headers()["location"], "/page/1?x=1");
    let cookie = response.headers()["set-cookie"].to_str().unwrap().to_string();
    for part in ["quagmire_pass=", "HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(cookie.contains(part), "{cookie}");
    }
    let pass = cookie.split(';').next().unwrap().to_string();
    assert_eq!(outcome(&site, "127.0.0.1", "/page/2", &pass).await, "origin");
    // The same answer again: refused, with a fresh challenge.
    let response = answer("/page/1").await.unwrap();
    assert_eq!(response.status(), 403);
    assert!(response.text().await.unwrap().contains("answered already"));
}

/// Chromium driven as a crawler from a datacenter address with the default config, answering
/// challenges and fetching pages as fast as it can: it reads nothing before it pays, and pays
/// again for every burst of page views (8): a pass read faster than its pace is asked again,
/// never trapped for it (what it pays by the hundred is the pass economy's, in
/// `passes_past_a_datacenter_networks_burst_wait_their_turn`).
#[tokio::test]
async fn a_real_browser_crawling_from_a_datacenter_pays_again_for_every_burst() {
    let Some(site) = deploy("caddy", "caddy/transparent.Caddyfile", "").await else { return };
    let Some(browser) = Browser::start(true).await else { return };
    for n in 1..=40 {
        browser.go(&format!("{}/page/{n}", site.base)).await;
        let source = browser.past_the_challenge(Duration::from_secs(60)).await;
        assert!(is_origin(&source, n), "page {n} is not the origin's:\n{source}");
    }
    let metrics =
        reqwest::get(format!("http://{}/metrics", site.server.verdict)).await.unwrap().text().await.unwrap();
    let answers = sample(&metrics, "quagmire_challenge_answers_total{result=\"work\"}");
    assert!(answers >= 40 / 8, "40 pages on {answers} passes:\n{metrics}");
    assert!(sample(&metrics, "quagmire_passes_rechallenged_total{reason=\"pace\"}") >= 4, "{metrics}");
    assert!(!metrics.contains("quagmire_passes_burned_total{"), "{metrics}");
}

/// A metric's value in Prometheus text, 0 when absent.
fn sample(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(name)?.trim().parse::<f64>().ok())
        .map_or(0, |value| value as u64)
}

/// A person who opens a dozen tabs at once with a pass (a middle-click on each result): the
/// burst reads, the rest are asked again; none is trapped, and the pass reads on afterwards.
#[tokio::test]
async fn a_burst_of_tabs_with_a_pass_is_asked_again_never_trapped() {
    let Some(site) =
        deploy("caddy", "caddy/transparent.Caddyfile", "challenge {\n    difficulty 10\n}\n").await
    else {
        return;
    };
    let from: IpAddr = "127.0.0.1".parse().unwrap();
    let pass = earn_pass(&site, from, "/page/0").await.expect("a pass at once");
    let tabs = (1..=12).map(|n| {
        let (site, pass) = (&site, pass.clone());
        async move { outcome(site, "127.0.0.1", &format!("/page/{n}"), &pass).await }
    });
    let outcomes = futures_util::future::join_all(tabs).await;
    assert!(!outcomes.contains(&"trap"), "{outcomes:?}");
    // The burst (8) reads; the tabs past it are asked again.
    assert!(outcomes.iter().filter(|o| **o == "origin").count() >= 7, "{outcomes:?}");
    assert!(outcomes.contains(&"challenge"), "twelve tabs at once and none asked again: {outcomes:?}");
    // Answered again (as each tab's script does), the holder reads on.
    let pass = earn_pass(&site, from, "/page/13").await.expect("a second pass at once");
    assert_eq!(outcome(&site, "127.0.0.1", "/page/14", &pass).await, "origin");
}

/// Asks for `path` from `from`, solves the challenge as the page's worker would and answers it:
/// the pass cookie (`name=value`) when it starts at once, `Err` with the answer's status and page
/// otherwise.
async fn earn_pass(
    site: &Deployment,
    from: IpAddr,
    path: &str,
) -> Result<String, (u16, String, Option<String>)> {
    let (status, page) = view(site, from, path, "").await;
    assert_eq!(status, 401, "{page}");
    let token = attribute(&page, "data-challenge");
    let nonce = solve(&token, attribute(&page, "data-difficulty").parse().unwrap());
    let http = reqwest::Client::builder()
        .local_address(from)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let target: String = form_urlencoded::byte_serialize(path.as_bytes()).collect();
    let response = http
        .get(format!("{}/.quagmire/answer?c={token}&n={nonce}&to={target}", site.base))
        .header("user-agent", FIREFOX_UA)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let cookie = response
        .headers()
        .get("set-cookie")
        .map(|value| value.to_str().unwrap().split(';').next().unwrap().to_string());
    let body = response.text().await.unwrap();
    match (status, cookie) {
        (303, Some(cookie)) => Ok(cookie),
        (status, cookie) => Err((status, body, cookie)),
    }
}

/// A crawler that knows quagmire, minting passes natively from one datacenter address: the first
/// 48 start at once, as an office's would; past them each starts at the network's turn (the page
/// says when, and waits without a new challenge), and once turns are booked ten minutes ahead an
/// answer is refused as busy. Nothing of it is a trap. Challenge pages and trap answers ask for a
/// Web Bot Auth signature instead.
#[tokio::test]
async fn passes_past_a_datacenter_networks_burst_wait_their_turn() {
    let Some(site) =
        deploy("caddy", "caddy/transparent.Caddyfile", "challenge {\n    difficulty 8\n}\n").await
    else {
        return;
    };
    let from: IpAddr = "127.0.0.3".parse().unwrap();
    for n in 0..48 {
        assert!(earn_pass(&site, from, &format!("/page/{n}")).await.is_ok(), "pass {n} was not at once");
    }
    // The 49th: minted, but for its turn.
    let Err((status, page, Some(early))) = earn_pass(&site, from, "/page/49").await else {
        panic!("pass 49 started at once");
    };
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Your turn is in") && page.contains("http-equiv=\"refresh\""), "{page}");
    // Before its turn it waits on, with no new challenge (which would book another turn).
    let (status, page) = view(&site, from, "/page/50", &early).await;
    assert_eq!(status, 401);
    assert!(page.contains("Your turn is coming") && !is_challenge(&page), "{page}");
    // More answers book later turns, up to ten minutes ahead (30 turns of 20 s), then are busy.
    let mut busy = None;
    for n in 51..=90 {
        match earn_pass(&site, from, &format!("/page/{n}")).await {
            Err((200, _, Some(_))) => {}
            Err((429, page, None)) => {
                busy = Some(page);
                break;
            }
            other => panic!("answer {n}: {other:?}"),
        }
    }
    let busy = busy.expect("never busy");
    assert!(busy.contains("queue") && !is_challenge(&busy), "{busy}");
    // Another datacenter network is not affected; nothing was trapped.
    assert!(earn_pass(&site, "127.0.4.1".parse().unwrap(), "/page/1").await.is_ok());
    let metrics =
        reqwest::get(format!("http://{}/metrics", site.server.verdict)).await.unwrap().text().await.unwrap();
    assert!(!metrics.contains("verdict=\"trap\""), "{metrics}");
    assert!(sample(&metrics, "quagmire_pass_turn_seconds_count") >= 25, "{metrics}");
    assert!(metrics.contains("quagmire_network_pressure{network=\"127.0.0.0/24\"}"), "{metrics}");
    // Asked to sign: a trap answer (the verdict's; a trap page served in transparent mode reads
    // like any page, without it), and the challenge page.
    let response = reqwest::Client::new()
        .get(site.server.verdict_url())
        .header("x-forwarded-method", "GET")
        .header("x-forwarded-uri", "/page/1")
        .header("x-forwarded-host", "localhost")
        .header("user-agent", "GPTBot/1.2")
        .send()
        .await
        .unwrap();
    let accept = response.headers().get("accept-signature").map(|v| v.to_str().unwrap().to_string());
    assert!(accept.is_some_and(|v| v.contains("tag=\"web-bot-auth\"")), "{:?}", response.headers());
    let response = reqwest::Client::builder()
        .local_address("127.0.5.1".parse::<IpAddr>().unwrap())
        .build()
        .unwrap()
        .get(format!("{}/page/1", site.base))
        .header("user-agent", FIREFOX_UA)
        .header("accept", "text/html")
        .header("sec-fetch-mode", "navigate")
        .header("sec-fetch-dest", "document")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    assert!(response.headers().contains_key("accept-signature"), "{:?}", response.headers());
}

/// A person who opens two of the site's links in new tabs at once, with no pass yet: both tabs
/// are challenged, both answer, and both show their page. Neither answer undoes the other's.
#[tokio::test]
async fn two_tabs_challenged_at_once_both_answer() {
    let Some(site) = deploy("caddy", "caddy/transparent.Caddyfile", WIRING).await else { return };
    let Some(browser) = Browser::start(true).await else { return };
    browser.go("about:blank").await;
    let script = format!("window.open('{0}/page/1'); window.open('{0}/page/2'); return true;", site.base);
    assert_eq!(browser.run(&script).await, serde_json::Value::Bool(true));
    let deadline = Instant::now() + Duration::from_secs(30);
    let tabs = loop {
        let tabs = browser.tabs().await;
        if tabs.len() == 3 {
            break tabs;
        }
        assert!(Instant::now() < deadline, "the tabs did not open: {tabs:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut shown = Vec::new();
    for tab in &tabs[1..] {
        browser.switch_to(tab).await;
        let page = browser.past_the_challenge(Duration::from_secs(60)).await;
        shown.extend((1..=2).filter(|&n| is_origin(&page, n)));
    }
    shown.sort();
    assert_eq!(shown, [1, 2], "both tabs show their page");
    let metrics =
        reqwest::get(format!("http://{}/metrics", site.server.verdict)).await.unwrap().text().await.unwrap();
    // Both tabs asked before either had a pass: two challenges shown, and two answers taken.
    assert!(metrics.contains("quagmire_challenges_issued_total 2\n"), "{metrics}");
    assert_eq!(sample(&metrics, "quagmire_challenge_answers_total{result=\"work\"}"), 2, "{metrics}");
    // And the browser reads on with whichever pass it kept.
    browser.go(&format!("{}/page/3", site.base)).await;
    assert!(is_origin(&browser.source().await, 3), "{}", browser.source().await);
}

/// A page whose script keeps fetching JSON while the browser has no pass and another tab shows
/// the challenge: every fetch gets the origin's JSON, never the challenge page (which a script
/// cannot answer, and which would break the page).
#[tokio::test]
async fn fetches_while_a_challenge_is_shown_get_the_origins_answers() {
    let Some(site) = deploy("caddy", "caddy/transparent.Caddyfile", WIRING).await else { return };
    let Some(browser) = Browser::start(true).await else { return };
    browser.go(&format!("{}/app", site.base)).await;
    let page = browser.past_the_challenge(Duration::from_secs(60)).await;
    assert!(page.contains("<h1>origin app</h1>"), "{page}");
    let app = browser.tabs().await.remove(0);
    // The pass is gone (expired, cleared); the page's script goes on, and a second tab asks for a
    // page, which is challenged.
    browser.forget_cookies().await;
    let from = browser.run("return window.seen.length;").await.as_u64().unwrap() as usize;
    let script = format!("window.open('{}/page/7'); return true;", site.base);
    browser.run(&script).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let seen = loop {
        let seen = browser.run("return window.seen;").await;
        let seen: Vec<String> = serde_json::from_value(seen).unwrap();
        let issued = reqwest::get(format!("http://{}/metrics", site.server.verdict))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if seen.len() >= from + 12 && issued.contains("quagmire_challenges_issued_total 2\n") {
            break seen;
        }
        assert!(Instant::now() < deadline, "{} fetches since the pass went:\n{issued}", seen.len() - from);
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for answer in &seen[from..] {
        assert_eq!(answer, "200 {\"origin\":\"data\"}", "a fetch without a pass: {seen:?}");
    }
    // The other tab answered its challenge; the app's tab is still the app.
    for tab in browser.tabs().await {
        browser.switch_to(&tab).await;
        let page = browser.past_the_challenge(Duration::from_secs(60)).await;
        let expected = if tab == app { "<h1>origin app</h1>" } else { "<h1>origin page 7</h1>" };
        assert!(page.contains(expected), "{page}");
    }
}

/// An answer that comes back after the browser already holds a good pass (another tab answered
/// first, or the same answer twice) goes to the page with that pass, never to a new check; the
/// same answer without a pass is refused with a fresh challenge.
#[tokio::test]
async fn an_overtaken_answer_keeps_the_pass() {
    let Some(site) =
        deploy("caddy", "caddy/transparent.Caddyfile", "challenge {\n    difficulty 8\n}\n").await
    else {
        return;
    };
    let from: IpAddr = "127.0.0.1".parse().unwrap();
    let (status, page) = view(&site, from, "/page/1", "").await;
    assert_eq!(status, 401, "{page}");
    let token = attribute(&page, "data-challenge");
    let nonce = solve(&token, attribute(&page, "data-difficulty").parse().unwrap());
    let url = format!("{}/.quagmire/answer?c={token}&n={nonce}&to=%2Fpage%2F1", site.base);
    let http = reqwest::Client::builder()
        .local_address(from)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let answer = |cookie: Option<String>| {
        let mut request = http.get(&url).header("user-agent", FIREFOX_UA);
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        request.send()
    };
    let first = answer(None).await.unwrap();
    assert_eq!(first.status(), 303);
    let pass = first.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string();
    let again = answer(Some(pass.clone())).await.unwrap();
    assert_eq!(again.status(), 303, "{:?}", again.headers());
    assert_eq!(again.headers()["location"], "/page/1");
    assert!(again.headers().get("set-cookie").is_none(), "the pass is kept as it is");
    assert_eq!(outcome(&site, "127.0.0.1", "/page/2", &pass).await, "origin");
    let without = answer(None).await.unwrap();
    assert_eq!(without.status(), 403);
    assert!(is_challenge(&without.text().await.unwrap()));
}

/// The same Chromium as a person, a page every few seconds from the same network: never
/// trapped, and challenged only once.
#[tokio::test]
async fn a_real_browser_reading_like_a_person_is_never_trapped() {
    let Some(site) = deploy("caddy", "caddy/transparent.Caddyfile", "").await else { return };
    let Some(browser) = Browser::start(true).await else { return };
    for n in 1..=12 {
        browser.go(&format!("{}/page/{n}", site.base)).await;
        let source = browser.past_the_challenge(Duration::from_secs(60)).await;
        assert!(is_origin(&source, n), "page {n} is not the origin's:\n{source}");
        tokio::time::sleep(Duration::from_millis(2500)).await;
    }
    let metrics =
        reqwest::get(format!("http://{}/metrics", site.server.verdict)).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("quagmire_challenges_issued_total 1\n"), "{metrics}");
    assert!(!metrics.contains("quagmire_passes_burned_total{"), "{metrics}");
}

/// A program that fetches pages with a browser's headers but never runs the challenge: shown the
/// page five times, then trapped; one that follows the page's links walks into the trap.
#[tokio::test]
async fn a_client_that_never_answers_is_trapped_and_the_pages_links_lead_into_the_trap() {
    let Some(site) = deploy("caddy", "caddy/transparent.Caddyfile", "").await else { return };
    let mut outcomes = Vec::new();
    for n in 1..=7 {
        outcomes.push(outcome(&site, "127.0.0.1", &format!("/page/{n}"), "").await);
    }
    assert_eq!(outcomes, ["challenge", "challenge", "challenge", "challenge", "challenge", "trap", "trap"]);

    // A crawler that parses the challenge page for links, from another address.
    let (_, page) = view(&site, "127.0.0.2".parse().unwrap(), "/page/20", "").await;
    assert!(is_challenge(&page));
    let links = crate::support::hrefs(&page);
    assert!(!links.is_empty(), "the challenge page has no links:\n{page}");
    for link in &links {
        assert!(link.starts_with("/trap/"), "a link that is not the trap's: {link}");
        let (status, body) = view(&site, "127.0.0.2".parse().unwrap(), link, "").await;
        assert_eq!(status, 200);
        assert!(body.starts_with("<!DOCTYPE html>") && !is_challenge(&body), "{link} is not a trap page");
    }
    assert!(origin_pages(&site.seen).is_empty(), "a client without a pass reached the origin");
}

/// Another site (served as `http://localhost:PORT/`, so another site than the deployment's
/// 127.0.0.1) whose page embeds `images`; the page's title becomes "loaded" once every image has
/// loaded or failed.
async fn start_foreign_site(images: Vec<String>) -> String {
    let tags: String = images.iter().map(|src| format!("<img src=\"{src}\" alt=\"\">")).collect();
    let html = format!(
        "<!doctype html><html><head><title>elsewhere</title></head><body><h1>elsewhere</h1>{tags}\
         <script>let left = document.images.length; for (const image of document.images) {{ \
         const done = () => {{ if (--left === 0) document.title = 'loaded'; }}; \
         if (image.complete) done(); else {{ image.onload = done; image.onerror = done; }} }}</script></body></html>"
    );
    let router = axum::Router::new().route(
        "/",
        axum::routing::get(move || {
            let html = html.clone();
            async move { ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html) }
        }),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://localhost:{port}/")
}

#[tokio::test]
async fn a_foreign_page_full_of_trap_images_traps_none_of_its_readers() {
    let Some(site) = deploy("caddy", "caddy/transparent.Caddyfile", WIRING).await else { return };
    let Some(browser) = Browser::start(true).await else { return };
    // A reader earns a pass on the site.
    browser.go(&format!("{}/page/1", site.base)).await;
    assert!(is_origin(&browser.past_the_challenge(Duration::from_secs(30)).await, 1));
    // Someone collects trap URLs from the public trap (from another address) and puts six of
    // them as images on another site.
    let (_, trap_page) = view(&site, "127.0.0.9".parse().unwrap(), "/trap/archive/", "").await;
    let images: Vec<String> = crate::support::hrefs(&trap_page)
        .into_iter()
        .filter(|href| href.starts_with('/') && !href.starts_with("//"))
        .take(6)
        .map(|href| format!("{}{href}", site.base))
        .collect();
    assert_eq!(images.len(), 6, "{trap_page}");
    let foreign = start_foreign_site(images).await;
    // The reader opens that page: Chromium fetches the six images, cross-site.
    browser.go(&foreign).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !browser.source().await.contains("<title>loaded</title>") {
        assert!(Instant::now() < deadline, "the foreign page's images did not finish loading");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The reader's next page is the site's, and so is everyone else's at that address: nobody
    // there has a trap hit on record.
    browser.go(&format!("{}/page/2", site.base)).await;
    let source = browser.source().await;
    assert!(is_origin(&source, 2), "the reader was trapped after another site's images:\n{source}");
    assert_eq!(outcome(&site, "127.0.0.1", "/page/3", "").await, "challenge");
    let (_, _, metrics) =
        crate::support::get(&format!("http://{}/metrics", site.server.verdict), "quagmire").await;
    let hits =
        metrics.lines().filter(|line| line.starts_with("quagmire_trap_hits_total")).collect::<Vec<_>>();
    // The collector's own walk of the trap is the only hit on record.
    assert!(hits.iter().all(|line| line.ends_with(" 1") || line.ends_with(" 0")), "{hits:?}");
}

/// The verdict's status for a page view from `client` (through a trusted proxy) with `cookie`.
async fn status_of(http: &reqwest::Client, server: &Server, client: &str, cookie: &str) -> u16 {
    http.get(server.verdict_url())
        .header("x-forwarded-for", client)
        .header("x-forwarded-method", "GET")
        .header("x-forwarded-proto", "https")
        .header("x-forwarded-host", "site.example")
        .header("x-forwarded-uri", "/docs")
        .header("user-agent", FIREFOX_UA)
        .header("accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
        .header("accept-language", "en-US,en;q=0.5")
        .header("sec-fetch-site", "none")
        .header("sec-fetch-mode", "navigate")
        .header("sec-fetch-dest", "document")
        .header("cookie", cookie)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn a_flood_of_fresh_networks_neither_untraps_a_crawler_nor_revives_a_burned_pass() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_file(dir.path(), "small.kdl", "clients {\n    capacity 1000\n}\n");
    let server = Server::start(&["--config", &config]);
    let http = reqwest::Client::new();
    let walk = |client: &'static str, cookie: String, page: u32| {
        let request = http
            .get(server.trap_url(&format!("/walk/{page}")))
            .header("host", "site.example")
            .header("x-forwarded-for", client)
            .header("cookie", cookie);
        async move { assert_eq!(request.send().await.unwrap().status(), 200) }
    };
    // A crawler with seven trap hits, and a pass burned by walking the trap from another address.
    let crawler = "2001:db8:1:ffff::7";
    for page in 0..7 {
        walk(crawler, String::new(), page).await;
    }
    let burned = pass_cookie(SECRET, 31, now(), now() + 3600);
    assert_eq!(status_of(&http, &server, "198.51.100.9", &burned).await, 200, "a good pass first");
    for page in 0..2 {
        walk("198.51.100.10", burned.clone(), 100 + page).await;
    }
    assert_eq!(status_of(&http, &server, crawler, "").await, 403);
    assert_eq!(status_of(&http, &server, "198.51.100.11", &burned).await, 403);

    // 5,000 /64s of one /48, three page views each, while the crawler walks on.
    use futures_util::StreamExt;
    let visitors = (0..5_000u32).flat_map(|n| {
        let visitor = format!("2001:db8:1:{n:x}::1");
        [visitor.clone(), visitor.clone(), visitor]
    });
    let views = futures_util::stream::iter(visitors)
        .map(|visitor| {
            let http = &http;
            let server = &server;
            async move { status_of(http, server, &visitor, "").await }
        })
        .buffer_unordered(16);
    let allowed = views.filter(|status| std::future::ready(*status == 200)).count().await;
    assert!(allowed > 14_000, "the visitors are people: {allowed} of 15,000 allowed");
    walk(crawler, String::new(), 7).await;

    assert_eq!(status_of(&http, &server, crawler, "").await, 403, "the crawler is still trapped");
    assert_eq!(status_of(&http, &server, "198.51.100.12", &burned).await, 403, "the pass is still burned");
    let metrics =
        reqwest::get(format!("http://{}/metrics", server.verdict)).await.unwrap().text().await.unwrap();
    let evicted = metrics
        .lines()
        .find_map(|line| line.strip_prefix("quagmire_client_cache_evictions_total "))
        .and_then(|count| count.parse::<u64>().ok());
    assert!(evicted.is_some_and(|count| count >= 4_000), "the table stayed small: {evicted:?}");
}
