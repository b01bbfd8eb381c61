//! The shipped proxy configurations (integrations/), run with the real proxy binaries in front of
//! the real quagmire and a small origin, on loopback. Each config file is used as shipped, with
//! only its four addresses replaced by ephemeral ones.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::support::{Server, require_program, write_file};

const CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36";
pub(crate) const GPTBOT: &str =
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)";
const BODY_MARKER: &str = "client-body-marker-7c1f";

/// What the origin received.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    path: String,
    headers: HeaderMap,
    body: Bytes,
}

/// A small origin: `/status/N` answers N, everything else 200 `origin <method> <path>`.
pub(crate) async fn start_origin() -> (SocketAddr, Arc<Mutex<Vec<Seen>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let router =
        axum::Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let record = record.clone();
            async move {
                let path = uri.path().to_string();
                record.lock().unwrap().push(Seen { path: path.clone(), headers, body });
                let status = path.strip_prefix("/status/").and_then(|code| code.parse().ok()).unwrap_or(200);
                (StatusCode::from_u16(status).unwrap(), format!("origin {method} {path}"))
            }
        });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    (address, seen)
}

/// A TCP relay in front of quagmire's verdict listener that keeps every byte the proxy sends,
/// to show that the verdict request never carries the client's body.
async fn start_relay(upstream: SocketAddr) -> (SocketAddr, Arc<Mutex<Vec<u8>>>) {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let record = sent.clone();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let record = record.clone();
            tokio::spawn(async move {
                let Ok(mut outbound) = TcpStream::connect(upstream).await else { return };
                let (mut in_read, mut in_write) = inbound.split();
                let (mut out_read, mut out_write) = outbound.split();
                let to_upstream = async {
                    let mut buffer = [0u8; 8192];
                    loop {
                        let n = match in_read.read(&mut buffer).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        record.lock().unwrap().extend_from_slice(&buffer[..n]);
                        if out_write.write_all(&buffer[..n]).await.is_err() {
                            break;
                        }
                    }
                    let _ = out_write.shutdown().await;
                };
                let to_client = async {
                    let _ = tokio::io::copy(&mut out_read, &mut in_write).await;
                    let _ = in_write.shutdown().await;
                };
                tokio::join!(to_upstream, to_client);
            });
        }
    });
    (address, sent)
}

/// A running proxy; stopped on drop.
pub(crate) struct Proxy {
    child: Child,
    pub(crate) address: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // SIGTERM first: a master process (nginx, HAProxy) stops its workers on it, while SIGKILL
        // would leave them running, holding ports and the test process's inherited descriptors.
        let _ = std::process::Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The shipped config with its addresses replaced.
pub(crate) fn config(
    file: &str,
    proxy: SocketAddr,
    verdict: SocketAddr,
    trap: SocketAddr,
    origin: SocketAddr,
) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("integrations").join(file);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
        .replace("127.0.0.1:8000", &proxy.to_string())
        .replace("127.0.0.1:8420", &verdict.to_string())
        .replace("127.0.0.1:8421", &trap.to_string())
        .replace("127.0.0.1:8080", &origin.to_string())
}

pub(crate) fn free_address() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

async fn wait_for(address: SocketAddr, child: &mut Child) {
    // Up to a minute: a proxy starting on a busy machine; only a hang reaches it.
    for _ in 0..1200 {
        if TcpStream::connect(address).await.is_ok() {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the proxy exited with {status}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the proxy did not listen on {address}");
}

pub(crate) async fn start_nginx(binary: &Path, text: &str, address: SocketAddr) -> Proxy {
    let dir = tempfile::tempdir().unwrap();
    let file = write_file(dir.path(), "nginx.conf", text);
    let mut command = Command::new(binary);
    command.args(["-p", &dir.path().display().to_string(), "-c", &file, "-g", "daemon off;"]);
    spawn(command, dir, address).await
}

/// Starts `command` in `dir` and waits until it listens on `address`.
async fn spawn(mut command: Command, dir: tempfile::TempDir, address: SocketAddr) -> Proxy {
    let mut child =
        command.current_dir(dir.path()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    wait_for(address, &mut child).await;
    Proxy { child, address, _dir: dir }
}

pub(crate) async fn start_caddy(binary: &Path, text: &str, address: SocketAddr) -> Proxy {
    let dir = tempfile::tempdir().unwrap();
    let file = write_file(dir.path(), "Caddyfile", text);
    let mut command = Command::new(binary);
    command.args(["run", "--config", &file, "--adapter", "caddyfile"]);
    // Caddy keeps state under HOME; keep it in the test's folder.
    command.env("HOME", dir.path()).env("XDG_DATA_HOME", dir.path()).env("XDG_CONFIG_HOME", dir.path());
    spawn(command, dir, address).await
}

/// Traefik with `traefik.yml` (and `extra_static` after it) and the dynamic file `dynamic` (both
/// with addresses replaced).
pub(crate) async fn start_traefik(
    binary: &Path,
    dynamic_name: &str,
    dynamic: &str,
    addresses: [SocketAddr; 4],
    extra_static: &str,
) -> Proxy {
    let dir = tempfile::tempdir().unwrap();
    let [address, verdict, trap, origin] = addresses;
    let static_config = config("traefik/traefik.yml", address, verdict, trap, origin)
        .replace("filename: transparent.yml", &format!("filename: {dynamic_name}"))
        + extra_static;
    write_file(dir.path(), "traefik.yml", &static_config);
    write_file(dir.path(), dynamic_name, dynamic);
    let mut command = Command::new(binary);
    command.arg("--configFile=traefik.yml");
    let proxy = spawn(command, dir, address).await;
    // The file provider loads just after the entry point opens.
    let http = client();
    for _ in 0..1200 {
        let response = http.get(format!("http://{address}/status/204")).send().await;
        if response.is_ok_and(|response| response.status() != 404) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    proxy
}

/// HAProxy with the config and, beside it, the shipped `quagmire.lua`.
async fn start_haproxy(binary: &Path, text: &str, address: SocketAddr) -> Proxy {
    let dir = tempfile::tempdir().unwrap();
    let lua = Path::new(env!("CARGO_MANIFEST_DIR")).join("integrations/haproxy/quagmire.lua");
    std::fs::copy(&lua, dir.path().join("quagmire.lua")).unwrap();
    let file = write_file(dir.path(), "haproxy.cfg", text);
    let mut command = Command::new(binary);
    command.args(["-db", "-f", &file]);
    spawn(command, dir, address).await
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Transparent,
    Redirect,
}

pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

pub(crate) fn browser(request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    request
        .header("user-agent", CHROME)
        .header("accept", "text/html")
        .header("sec-fetch-mode", "navigate")
        .header("sec-fetch-dest", "document")
        .header("sec-fetch-site", "none")
}

/// Whether a response body is a trap page rather than the origin's, which is "origin METHOD
/// PATH". (Not "contains no `origin`": the word may well occur in a trap page's prose.)
pub(crate) fn is_trap_page(body: &str) -> bool {
    body.starts_with("<!DOCTYPE html>")
}

/// Runs every check of the issue against one proxy in one mode.
async fn check(
    proxy: &Proxy,
    mode: Mode,
    origin_seen: &Arc<Mutex<Vec<Seen>>>,
    verdict_bytes: &Arc<Mutex<Vec<u8>>>,
) {
    let base = format!("http://{}", proxy.address);
    let http = client();

    // A person reaches the site; what they forge never reaches it.
    let response = browser(http.get(format!("{base}/docs/page?x=1")))
        .header("x-quagmire-verdict", "forged")
        .header("x-quagmire-rule", "forged")
        .header("x-quagmire-location", "forged")
        .header("x-forwarded-for", "6.6.6.6")
        .header("x-real-ip", "6.6.6.6")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "origin GET /docs/page");
    let seen = origin_seen.lock().unwrap().last().cloned().unwrap();
    for (name, value) in seen.headers.iter() {
        let value = value.to_str().unwrap_or("");
        assert!(!value.contains("forged"), "the origin got a forged {name}: {value}");
        assert!(!value.contains("6.6.6.6"), "the origin got a forged address in {name}: {value}");
    }
    assert_eq!(seen.headers.get("x-quagmire-verdict").map(|v| v.to_str().unwrap()), Some("allow"));

    // POST bodies reach the site, and never the verdict.
    let body = format!("field={BODY_MARKER}");
    let response = browser(http.post(format!("{base}/form"))).body(body.clone()).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let seen = origin_seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!((seen.path.as_str(), seen.body.as_ref()), ("/form", body.as_bytes()));
    let verdict_requests = String::from_utf8_lossy(&verdict_bytes.lock().unwrap()).into_owned();
    assert!(verdict_requests.contains("/verdict"), "the relay saw no verdict request");
    assert!(!verdict_requests.contains(BODY_MARKER), "the verdict request carried the client's body");

    // The site's own errors reach people unchanged.
    for status in [404, 503] {
        let response = browser(http.get(format!("{base}/status/{status}"))).send().await.unwrap();
        assert_eq!(response.status().as_u16(), status);
        assert_eq!(response.text().await.unwrap(), format!("origin GET /status/{status}"));
    }

    // An AI crawler gets the trap.
    let crawler = || http.get(format!("{base}/docs/page")).header("user-agent", GPTBOT);
    trapped(&http, &base, crawler().send().await.unwrap(), mode).await;

    // However it spells the path, it never reaches the site: dot segments, encoded or not, walk
    // past no rule (`curl --path-as-is`; reqwest would resolve them, so these are sent raw).
    for target in [
        "/.well-known/../docs/page",
        "/feed/../docs/page",
        "/.well-known/%2e%2e/docs/page",
        "/.well-known/..%2fdocs/page",
        "/robots.txt/%2E%2E/docs/page",
        "/docs/page;.xml",
    ] {
        let (status, response) = raw_get(proxy.address, target, GPTBOT).await;
        assert!(
            !response.contains("origin GET"),
            "GPTBot reached the site at {target} ({status}): {}",
            &response[..response.len().min(300)]
        );
    }

    // /trap/ (the robots.txt and hidden-link snippets' target) is the trap, without a verdict.
    let response = browser(http.get(format!("{base}/trap/archive/"))).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(is_trap_page(&response.text().await.unwrap()));

    // The feedback loop: after this address walks trap pages, its browser-like requests for real
    // pages are trapped too.
    for i in 0..8 {
        let response =
            http.get(format!("{base}/archive/{i}")).header("user-agent", GPTBOT).send().await.unwrap();
        let _ = follow(&http, &base, response, mode).await;
    }
    let response = browser(http.get(format!("{base}/docs/page"))).send().await.unwrap();
    trapped(&http, &base, response, mode).await;
}

/// A GET for `target` exactly as written (no client-side normalisation), on a connection of its
/// own: the status and the whole response.
async fn raw_get(address: SocketAddr, target: &str, user_agent: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(address).await.unwrap();
    let request = format!(
        "GET {target} HTTP/1.1\r\nHost: {address}\r\nUser-Agent: {user_agent}\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut response))
        .await
        .expect("the proxy answered and closed within 30 s")
        .unwrap();
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response.split(' ').nth(1).and_then(|code| code.parse().ok()).unwrap_or(0);
    (status, response)
}

/// Asserts that `response` is the trap: a 200 trap page at the same URL, or a 302 to a trap page.
async fn trapped(http: &reqwest::Client, base: &str, response: reqwest::Response, mode: Mode) {
    match mode {
        Mode::Transparent => {
            assert_eq!(response.status(), 200);
            let body = response.text().await.unwrap();
            assert!(is_trap_page(&body), "expected a trap page, got: {}", &body[..body.len().min(200)]);
        }
        Mode::Redirect => {
            assert_eq!(response.status(), 302);
            let body = follow(http, base, response, mode).await;
            assert!(is_trap_page(&body), "expected a trap page after the redirect");
        }
    }
}

/// The body, after following one redirect to the trap in redirect mode.
async fn follow(http: &reqwest::Client, base: &str, response: reqwest::Response, mode: Mode) -> String {
    if mode == Mode::Redirect && response.status() == 302 {
        let location = response.headers()["location"].to_str().unwrap().to_string();
        let path = location
            .split_once("://")
            .map_or(location.as_str(), |(_, rest)| &rest[rest.find('/').unwrap()..]);
        let next = http.get(format!("{base}{path}")).header("user-agent", GPTBOT).send().await.unwrap();
        assert_eq!(next.status(), 200, "the trap behind the redirect answers 200");
        return next.text().await.unwrap();
    }
    response.text().await.unwrap()
}

async fn run(proxy_name: &str, file: &str, mode: Mode, quagmire_config: &str) {
    let Some(binary) = require_program(proxy_name) else { return };
    let dir = tempfile::tempdir().unwrap();
    let config_path = write_file(dir.path(), "quagmire.kdl", quagmire_config);
    let server = Server::start(&["--config", &config_path]);
    let (origin, origin_seen) = start_origin().await;
    let (relay, verdict_bytes) = start_relay(server.verdict).await;
    let address = free_address();
    let text = config(file, address, relay, server.trap, origin);
    let proxy = start_proxy(proxy_name, &binary, file, &text, [address, relay, server.trap, origin]).await;
    check(&proxy, mode, &origin_seen, &verdict_bytes).await;
}

/// Starts `proxy_name` with `text`, the shipped `file` with `addresses` (the proxy's, the
/// verdict's, the trap's, the origin's) in place.
pub(crate) async fn start_proxy(
    proxy_name: &str,
    binary: &Path,
    file: &str,
    text: &str,
    addresses: [SocketAddr; 4],
) -> Proxy {
    let address = addresses[0];
    match proxy_name {
        "nginx" => start_nginx(binary, text, address).await,
        "caddy" => start_caddy(binary, text, address).await,
        "haproxy" => start_haproxy(binary, text, address).await,
        "traefik" => {
            let name = Path::new(file).file_name().unwrap().to_str().unwrap();
            start_traefik(binary, name, text, addresses, "").await
        }
        other => panic!("no runner for {other}"),
    }
}

#[tokio::test]
async fn nginx_transparent() {
    run("nginx", "nginx/transparent.conf", Mode::Transparent, "").await;
}

#[tokio::test]
async fn nginx_redirect() {
    run("nginx", "nginx/redirect.conf", Mode::Redirect, "verdict {\n  answer \"nginx\"\n}\n").await;
}

#[tokio::test]
async fn caddy_transparent() {
    run("caddy", "caddy/transparent.Caddyfile", Mode::Transparent, "").await;
}

#[tokio::test]
async fn caddy_redirect() {
    run("caddy", "caddy/redirect.Caddyfile", Mode::Redirect, "verdict {\n  answer \"redirect\"\n}\n").await;
}

#[tokio::test]
async fn traefik_transparent() {
    run("traefik", "traefik/transparent.yml", Mode::Transparent, "verdict {\n  trap-status 421\n}\n").await;
}

#[tokio::test]
async fn traefik_redirect() {
    run("traefik", "traefik/redirect.yml", Mode::Redirect, "verdict {\n  answer \"redirect\"\n}\n").await;
}

#[tokio::test]
async fn haproxy_transparent() {
    run("haproxy", "haproxy/transparent.cfg", Mode::Transparent, "").await;
}

#[tokio::test]
async fn haproxy_redirect() {
    run("haproxy", "haproxy/redirect.cfg", Mode::Redirect, "verdict {\n  answer \"redirect\"\n}\n").await;
}

/// integrations/caddy/README.md's advice for Caddy behind a load balancer, applied as written to
/// the shipped transparent config, on the Caddy these tests run (Debian's 2.6): Caddy starts, and
/// each client the balancer names is judged by its own address. The test client plays the
/// balancer (127.0.0.1), so the README's example range is replaced by its address.
#[tokio::test]
async fn caddy_behind_a_load_balancer_judges_each_client_by_its_own_address() {
    let Some(binary) = require_program("caddy") else { return };
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("integrations/caddy/README.md"))
            .unwrap();
    let advice = readme
        .split("<!-- tested: tests/it/proxies.rs, caddy_behind_a_load_balancer")
        .nth(1)
        .and_then(|after| after.lines().find(|line| line.trim_start().starts_with("trusted_proxies")))
        .expect("the README's load-balancer advice has a trusted_proxies line")
        .trim()
        .replace("10.0.0.0/8", "127.0.0.1/32");
    let server = Server::start(&[]);
    let (origin, _) = start_origin().await;
    let address = free_address();
    let shipped = config("caddy/transparent.Caddyfile", address, server.verdict, server.trap, origin);
    // Into each forward_auth and reverse_proxy block: every one sets X-Real-IP.
    let real_ip = "header_up X-Real-IP {remote_host}";
    let blocks = shipped.matches(real_ip).count();
    assert_eq!(blocks, 5, "the shipped config changed: the README says five blocks");
    let text = shipped.replace(real_ip, &format!("{real_ip}\n{advice}"));
    let proxy = start_caddy(&binary, &text, address).await;

    let base = format!("http://{}", proxy.address);
    let http = client();
    let from = |client: &str, request: reqwest::RequestBuilder| request.header("x-forwarded-for", client);
    // One client behind the balancer walks the trap as GPTBot.
    for i in 0..8 {
        let response =
            from("203.0.113.9", http.get(format!("{base}/archive/{i}")).header("user-agent", GPTBOT))
                .send()
                .await
                .unwrap();
        assert!(is_trap_page(&response.text().await.unwrap()));
    }
    // Its browser-like requests are trapped now; another client behind the same balancer is not.
    let walker = from("203.0.113.9", browser(http.get(format!("{base}/docs/page")))).send().await.unwrap();
    assert!(is_trap_page(&walker.text().await.unwrap()), "the trap walker's own address was not judged");
    let other = from("203.0.113.10", browser(http.get(format!("{base}/docs/page")))).send().await.unwrap();
    assert_eq!(other.status(), 200);
    assert_eq!(other.text().await.unwrap(), "origin GET /docs/page", "another client paid for the walker");
}
