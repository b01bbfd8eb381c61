//! Starting the real server and talking to it.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The secret the tests run the server with.
pub const SECRET: &str = "integration-test-secret-0123456789";

/// How long a debug build may take to train on the embedded corpus and bind.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// A running `quagmire serve`; killed on drop.
pub struct Server {
    child: Child,
    /// The server's log lines after `listening`, as they arrive.
    log: std::sync::Mutex<mpsc::Receiver<String>>,
    pub verdict: SocketAddr,
    pub trap: SocketAddr,
    /// The admin listener, when configured.
    pub admin: Option<SocketAddr>,
    /// The `listening` log line.
    pub listening: String,
}

impl Server {
    /// Starts the server with the test secret and `extra` arguments, on ephemeral ports.
    pub fn start(extra: &[&str]) -> Server {
        Server::start_with_secret(extra, SECRET)
    }

    pub fn start_with_secret(extra: &[&str], secret: &str) -> Server {
        Server::start_with_env(extra, &[("QUAGMIRE_SECRET", secret)])
    }

    /// Starts the server with `extra` arguments and these environment variables (which should
    /// include `QUAGMIRE_SECRET`).
    pub fn start_with_env(extra: &[&str], env: &[(&str, &str)]) -> Server {
        Server::spawn(extra, env, true)
    }

    /// Starts the server, then stops reading its log once it listens: a log sink that blocks
    /// (a full pipe), as a stalled journald or terminal would be.
    pub fn start_with_a_stalled_log(extra: &[&str]) -> Server {
        Server::spawn(extra, &[("QUAGMIRE_SECRET", SECRET)], false)
    }

    fn spawn(extra: &[&str], env: &[(&str, &str)], drain: bool) -> Server {
        let mut child = quagmire()
            .args(["serve", "--listen", "127.0.0.1:0", "--trap-listen", "127.0.0.1:0"])
            .args(extra)
            .envs(env.iter().copied())
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the quagmire binary starts");
        let stderr = child.stderr.take().unwrap();
        let (lines_tx, lines_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stderr).lines();
            for line in lines.by_ref().map_while(Result::ok) {
                let listening = line.contains("listening");
                // Keep draining after startup so the server never blocks on a full pipe.
                let _ = lines_tx.send(line);
                if listening && !drain {
                    // Hold the pipe open, unread, for as long as the server runs.
                    let held = lines;
                    std::thread::park();
                    drop(held);
                    return;
                }
            }
        });
        let mut log = Vec::new();
        loop {
            let line = match lines_rx.recv_timeout(STARTUP_TIMEOUT) {
                Ok(line) => line,
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("the server did not report listening; its log:\n{}", log.join("\n"));
                }
            };
            if line.contains("listening") {
                let verdict = field(&line, "verdict=").parse().unwrap();
                let trap = field(&line, "trap=").parse().unwrap();
                let admin = field(&line, "admin=").parse().ok();
                let log = std::sync::Mutex::new(lines_rx);
                return Server { child, log, verdict, trap, admin, listening: line };
            }
            log.push(line);
        }
    }

    /// The process id, for signals.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits up to `timeout` for the process to exit.
    pub fn terminate(mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        std::process::Command::new("kill").args(["-TERM", &self.pid().to_string()]).status().unwrap();
        self.wait_exit(timeout)
    }

    /// The log lines written since the last call (or since `listening`).
    pub fn new_log_lines(&self) -> Vec<String> {
        self.log.lock().unwrap().try_iter().collect()
    }

    /// The log lines written from now until one for which `until` holds (that one included),
    /// waiting for it up to [`EVENTUALLY`]: a line the service writes after the event a test
    /// saw is awaited, not read too early.
    pub fn log_lines_until(&self, what: &str, until: impl Fn(&str) -> bool) -> Vec<String> {
        let started = std::time::Instant::now();
        let log = self.log.lock().unwrap();
        let mut lines = Vec::new();
        loop {
            let left = EVENTUALLY.saturating_sub(started.elapsed());
            match log.recv_timeout(left) {
                Ok(line) => {
                    let done = until(&line);
                    lines.push(line);
                    if done {
                        return lines;
                    }
                }
                Err(_) => panic!("no log line {what} within {EVENTUALLY:?}: {lines:#?}"),
            }
        }
    }

    /// Waits up to `timeout` for the process to exit; its status, or `None` if still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if std::time::Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// `http://ADDR/verdict` of the verdict listener.
    pub fn verdict_url(&self) -> String {
        format!("http://{}/verdict", self.verdict)
    }

    /// `http://ADDR` of the trap listener.
    pub fn trap_url(&self, target: &str) -> String {
        format!("http://{}{target}", self.trap)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn field<'a>(line: &'a str, name: &str) -> &'a str {
    let start = line.find(name).unwrap_or_else(|| panic!("no {name} in {line}")) + name.len();
    line[start..].split_whitespace().next().unwrap()
}

/// The `quagmire` binary under test.
pub fn quagmire() -> Command {
    Command::new(env!("CARGO_BIN_EXE_quagmire"))
}

/// Writes `text` to `name` in `dir` and returns the path as a string.
pub fn write_file(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A GET with a Host header; returns status, headers and body.
pub async fn get(url: &str, host: &str) -> (u16, reqwest::header::HeaderMap, String) {
    let response = reqwest::Client::new().get(url).header("host", host).send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.unwrap())
}

/// Every `href` on a page.
pub fn hrefs(page: &str) -> Vec<String> {
    page.split("href=\"").skip(1).map(|rest| rest[..rest.find('"').unwrap()].to_string()).collect()
}

/// Asks the verdict about a request described by `headers`; returns status and headers.
pub async fn verdict(server: &Server, headers: &[(&str, &str)]) -> (u16, reqwest::header::HeaderMap) {
    let mut request = reqwest::Client::new().get(server.verdict_url());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.headers().clone())
}

/// A header's value as text ("" when absent).
pub fn header<'h>(headers: &'h reqwest::header::HeaderMap, name: &str) -> &'h str {
    headers.get(name).map_or("", |value| value.to_str().unwrap())
}

/// Writes an ASN database mapping each network to (ASN, organisation).
pub fn write_asn_db(path: &Path, networks: &[(&str, u32, &str)]) {
    use mmdb_writer::{Value, Writer};
    let mut writer = Writer::new("GeoLite2-ASN");
    for (network, asn, org) in networks {
        let record = Value::map([
            ("autonomous_system_number", Value::U32(*asn)),
            ("autonomous_system_organization", Value::String(org.to_string())),
        ]);
        writer.insert_value(network.parse::<ipnet::IpNet>().unwrap(), record).unwrap();
    }
    std::fs::write(path, writer.to_bytes().unwrap()).unwrap();
}

/// The path of an external program the test needs. Missing, it fails the test under `CI=true`
/// and, elsewhere, marks the test as not run (see [`did_not_run`]).
pub fn require_program(name: &str) -> Option<std::path::PathBuf> {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|path| path.is_file());
    if found.is_none() {
        if std::env::var("CI").is_ok_and(|ci| ci == "true") {
            panic!("{name} is required (CI=true) but not on PATH; .ci/run installs it");
        }
        did_not_run(&format!("{name} is not installed"));
    }
    found
}

/// Tests that returned early because something they need is missing, with why.
static NOT_RUN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Records that the calling test returns without testing anything, because of `why`. libtest
/// counts such a test as passed, so the reason is written to stderr at once (past libtest's
/// capture, which only takes `print!`/`eprint!`), and once all tests are done a summary line
/// `N integration tests did not run` follows cargo's own `test result:` line (README, "Tests").
#[allow(unsafe_code)] // `atexit`, for the summary after libtest's own.
pub fn did_not_run(why: &str) {
    use std::io::Write;
    let test = std::thread::current().name().unwrap_or("?").to_string();
    let _ = writeln!(std::io::stderr(), "DID NOT RUN: {test}: {why}");
    let mut not_run = NOT_RUN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if not_run.is_empty() {
        // SAFETY: `atexit` only stores the function pointer; `summarise` is a plain `extern "C"`
        // function that neither panics nor unwinds (it ignores write errors and a held lock).
        unsafe { libc::atexit(summarise) };
    }
    not_run.push(format!("{test} ({why})"));
}

/// Runs at process exit, after libtest has printed its result line.
extern "C" fn summarise() {
    use std::io::Write;
    let Ok(not_run) = NOT_RUN.try_lock() else { return };
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "\n{} integration tests did not run (counted as passed above):", not_run.len());
    for test in not_run.iter() {
        let _ = writeln!(stderr, "  {test}");
    }
}

/// The app a config text builds, with the test secret: for tests that call the routers in
/// process (`quagmire::http::verdict_router` and the others) rather than start a server.
pub fn app(config: &str) -> std::sync::Arc<quagmire::App> {
    let config = quagmire::Config::parse("test.kdl", config, Path::new(".")).unwrap();
    let (secret, _) = quagmire::Secret::resolve(Some(SECRET.into()), None);
    std::sync::Arc::new(quagmire::App::build(config, &secret).unwrap())
}

/// `request` through `router` in process, from a loopback peer as the listener would hand it
/// over: status, headers and body.
pub async fn call(
    router: &axum::Router,
    request: axum::http::request::Builder,
    body: &str,
) -> (u16, axum::http::HeaderMap, String) {
    use tower::ServiceExt;
    let peer = axum::extract::ConnectInfo(SocketAddr::from(([127, 0, 0, 1], 40000)));
    let request = request.extension(peer).body(axum::body::Body::from(body.to_string())).unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, 16 << 20).await.unwrap();
    (parts.status.as_u16(), parts.headers, String::from_utf8_lossy(&bytes).into_owned())
}

/// The nonce a challenge page's worker would find: SHA-256 of the challenge and the nonce starts
/// with `bits` zero bits.
pub fn solve(challenge: &str, bits: u32) -> u64 {
    use sha2::Digest;
    (0u64..)
        .find(|n| {
            let digest = sha2::Sha256::digest(format!("{challenge}{n}").as_bytes());
            let zeros = digest
                .iter()
                .position(|byte| *byte != 0)
                .map_or(256, |i| i as u32 * 8 + digest[i].leading_zeros());
            zeros >= bits
        })
        .unwrap()
}

/// An attribute's value in a page (the first occurrence).
pub fn attribute(page: &str, name: &str) -> String {
    let start =
        page.find(&format!("{name}=\"")).unwrap_or_else(|| panic!("no {name} in\n{page}")) + name.len() + 2;
    page[start..start + page[start..].find('"').unwrap()].to_string()
}

/// A pass earned from `server` as a browser at `client` earns it: the challenge page from
/// `/challenge`, its proof of work, the answer; the cookie (`quagmire_pass=...`).
pub async fn earn_pass(server: &Server, client: &str, user_agent: &str) -> String {
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let ask = |url: String| http.get(url).header("user-agent", user_agent).header("x-forwarded-for", client);
    let page =
        ask(format!("http://{}/challenge", server.verdict)).send().await.unwrap().text().await.unwrap();
    let (challenge, bits) = (attribute(&page, "data-challenge"), attribute(&page, "data-difficulty"));
    let nonce = solve(&challenge, bits.parse().unwrap());
    let answer = format!("http://{}/.quagmire/answer?c={challenge}&n={nonce}&to=%2F", server.verdict);
    let answered = ask(answer).send().await.unwrap();
    assert_eq!(answered.status(), 303, "the answer was refused");
    answered.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string()
}

/// The bound every polled condition gets: long enough for a busy two-core machine, and only a
/// real failure reaches it.
pub const EVENTUALLY: Duration = Duration::from_secs(60);

/// Polls `condition` every 50 ms until it holds; panics, saying `what` did not happen, past
/// [`EVENTUALLY`]. Tests wait for the event they check with this, never for a fixed time.
pub async fn eventually<F: std::future::Future<Output = bool>>(what: &str, mut condition: impl FnMut() -> F) {
    let started = std::time::Instant::now();
    while !condition().await {
        assert!(started.elapsed() < EVENTUALLY, "{what} did not happen within {EVENTUALLY:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls `check` every 50 ms until it holds or `within` passes; whether it held (for a test that
/// also checks what happens when it does not).
pub async fn holds_within<F: std::future::Future<Output = bool>>(
    within: Duration,
    mut check: impl FnMut() -> F,
) -> bool {
    let deadline = std::time::Instant::now() + within;
    loop {
        if check().await {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
