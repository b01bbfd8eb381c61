//! Several replicas sharing client state through a real Redis (started here on a loopback port,
//! persistence off) and a real three-node Redis Cluster: a client trapped through one replica is
//! trapped by the other, across restarts; the store stopped, hung and restarted under traffic;
//! concurrent trap hits on two replicas adding up exactly.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{
    Server, attribute, eventually, get, header, holds_within, quagmire, require_program, solve, verdict,
    write_file,
};

const CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36";

/// A `redis-server` on a loopback port, without persistence; killed on drop.
struct Redis {
    child: Option<Child>,
    port: u16,
    program: PathBuf,
    dir: PathBuf,
    cluster: bool,
}

impl Redis {
    /// A server on a free port; `None` (test not run) when redis-server is missing outside CI.
    fn start() -> Option<Redis> {
        let program = require_program("redis-server")?;
        let dir = tempfile::tempdir().unwrap().keep();
        let mut redis = Redis { child: None, port: 0, program, dir, cluster: false };
        for _ in 0..5 {
            redis.port = free_port();
            if redis.spawn() {
                return Some(redis);
            }
        }
        panic!("redis-server did not start on any of five ports");
    }

    /// Starts the server again on its port (after [`Redis::stop`]).
    fn restart(&mut self) {
        for _ in 0..50 {
            if self.spawn() {
                return;
            }
            // The port may linger for a moment after the old process died.
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("redis-server did not restart on port {}", self.port);
    }

    fn spawn(&mut self) -> bool {
        let port = self.port.to_string();
        let mut command = Command::new(&self.program);
        command
            .args(["--port", &port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--dir", &self.dir.display().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if self.cluster {
            let nodes = format!("nodes-{port}.conf");
            command.args(["--cluster-enabled", "yes", "--cluster-config-file", &nodes]);
        }
        let mut child = command.spawn().expect("redis-server starts");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if child.try_wait().unwrap().is_some() {
                return false;
            }
            if cli(self.port, &["PING"]) == "PONG" {
                self.child = Some(child);
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    /// Kills the server (its data is gone: persistence is off).
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGSTOP or SIGCONT: a server that accepts connections and never answers.
    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().unwrap().id().to_string();
        assert!(Command::new("kill").args([signal, &pid]).status().unwrap().success());
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A port free now, whose cluster bus port (+10000) is a valid port too.
fn free_port() -> u16 {
    loop {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

/// `redis-cli -p PORT ARGS...`, its output trimmed ("" when it fails).
fn cli(port: u16, args: &[&str]) -> String {
    let output = Command::new("redis-cli").args(["-p", &port.to_string()]).args(args).output();
    output.map(|output| String::from_utf8_lossy(&output.stdout).trim().to_string()).unwrap_or_default()
}

/// Starts a replica sharing state through `store` (one URL or several), with `extra` settings
/// in its `clients` block.
fn replica(dir: &Path, name: &str, store: &[String], extra: &str) -> Server {
    let urls: Vec<String> = store.iter().map(|url| format!("\"{url}\"")).collect();
    let config = format!("clients {{\n    store {}\n{extra}\n}}\n", urls.join(" "));
    let path = write_file(dir, &format!("{name}.kdl"), &config);
    Server::start(&["--config", &path])
}

/// The replicas below wait for the store longer than the default budget, so that a slow debug
/// build on a busy machine cannot make them miss an answer; the budget has a test of its own.
const PATIENT: &str = "    store-wait-ms 200";

/// Twenty trap pages for `client` through `server`'s trap listener (a trusted loopback proxy).
async fn walk_trap(server: &Server, client: &str, pages: usize) {
    let http = reqwest::Client::new();
    for i in 0..pages {
        let response = http
            .get(server.trap_url(&format!("/walk/{i}")))
            .header("host", "site.example")
            .header("x-forwarded-for", client)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
}

/// A browser's page view of `/docs` from `client`: the status and the deciding rule.
async fn page_view(server: &Server, client: &str) -> (u16, String) {
    let (status, headers) = verdict(
        server,
        &[
            ("user-agent", CHROME),
            ("accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
            ("accept-language", "en-GB,en;q=0.9"),
            ("sec-fetch-site", "none"),
            ("sec-fetch-mode", "navigate"),
            ("sec-fetch-dest", "document"),
            ("sec-ch-ua", "\"Chromium\";v=\"130\", \"Not?A_Brand\";v=\"99\""),
            ("upgrade-insecure-requests", "1"),
            ("x-forwarded-method", "GET"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "site.example"),
            ("x-forwarded-uri", "/docs"),
            ("x-forwarded-for", client),
        ],
    )
    .await;
    (status, header(&headers, "x-quagmire-rule").to_string())
}

/// Page views from new clients 203.0.113.N for each N in `hosts`, all allowed; the slowest one's
/// time.
async fn slowest_page_view(server: &Server, hosts: std::ops::Range<u8>) -> Duration {
    let mut slowest = Duration::ZERO;
    for host in hosts {
        let started = Instant::now();
        let (status, _) = page_view(server, &format!("203.0.113.{host}")).await;
        slowest = slowest.max(started.elapsed());
        assert_eq!(status, 200);
    }
    slowest
}

/// Clients listed by `server`'s `/api/trapped`.
async fn trapped(server: &Server) -> Vec<serde_json::Value> {
    let (status, _, body) = get(&format!("http://{}/api/trapped", server.verdict), "localhost").await;
    assert_eq!(status, 200);
    serde_json::from_str::<Vec<serde_json::Value>>(&body).unwrap()
}

async fn metrics(server: &Server) -> String {
    get(&format!("http://{}/metrics", server.verdict), "localhost").await.2
}

/// The store syncer's interval rounds on `server` so far, whatever their outcome.
async fn sync_rounds(server: &Server) -> u64 {
    metrics(server)
        .await
        .lines()
        .filter(|line| line.starts_with("quagmire_store_sync_rounds_total{"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Waits until each of `servers` has run `rounds` more interval rounds of its store syncer: what
/// they had queued when this was called has been sent (or found the store down).
async fn after_sync_rounds(servers: &[&Server], rounds: u64) {
    for server in servers {
        let target = sync_rounds(server).await + rounds;
        eventually("the store syncer's rounds", || async { sync_rounds(server).await >= target }).await;
    }
}

#[tokio::test]
async fn a_client_that_walked_the_trap_on_one_replica_is_trapped_by_the_other_and_after_restarts() {
    let Some(redis) = Redis::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let store = [redis.url()];
    let a = replica(dir.path(), "a", &store, PATIENT);
    let b = replica(dir.path(), "b", &store, PATIENT);

    assert_eq!(page_view(&b, "198.51.100.7").await, (200, "".into()), "unknown to both replicas");
    walk_trap(&a, "198.51.100.7", 20).await;
    // B saw the client a moment ago, so its view may be up to two sync intervals (0.5 s) old:
    // the target is that B's verdicts see A's hits within a second. The test waits for the event
    // and says how long it took; only a hang (10 s) fails it, as a busy machine may be slower.
    let walked = Instant::now();
    let seen =
        holds_within(Duration::from_secs(30), || async { page_view(&b, "198.51.100.7").await.0 == 403 })
            .await;
    assert!(seen, "B still allows the client {:?} after A's trap hits", walked.elapsed());
    eprintln!("B saw A's trap hits after {:?}", walked.elapsed());
    assert_eq!(page_view(&b, "198.51.100.7").await, (403, "trap-score".into()), "B traps what A saw");
    assert_eq!(page_view(&b, "198.51.100.8").await.0, 200, "a client nobody trapped");

    let listed = trapped(&b).await;
    let client = listed.iter().find(|client| client["client"] == "198.51.100.7").expect("B lists A's client");
    assert_eq!(client["trap_hits"], 20);
    assert!(client["trap_score"].as_f64().unwrap() > 19.0, "{client}");
    let text = metrics(&b).await;
    assert!(text.contains("quagmire_clients_over_threshold{scope=\"shared\"} 1"), "{text}");

    // Both replicas restart: the store remembers.
    drop((a, b));
    let a = replica(dir.path(), "a", &store, PATIENT);
    let b = replica(dir.path(), "b", &store, PATIENT);
    // A restarted replica's first verdict for the client waits for the store at most
    // `store-wait-ms`; on a busy machine the answer (a new connection, the script loaded) may
    // land just after, and the next verdicts see it: wait for that, not for a clock.
    for (replica, name) in [(&b, "B"), (&a, "A")] {
        let remembered = holds_within(Duration::from_secs(30), || async {
            page_view(replica, "198.51.100.7").await.0 == 403
        })
        .await;
        assert!(remembered, "{name} forgot the client across restarts");
    }
    assert!(trapped(&a).await.iter().any(|client| client["client"] == "198.51.100.7"));
    let log = b.new_log_lines().join("\n") + &a.new_log_lines().join("\n");
    assert!(!log.contains("not answering"), "{log}");
}

#[tokio::test]
async fn the_start_log_says_which_store_and_a_store_down_at_start_does_not_stop_the_service() {
    let Some(mut redis) = Redis::start() else { return };
    redis.stop();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("redis://:hunter2-secret@127.0.0.1:{}/0", redis.port);
    let server = replica(dir.path(), "down", &[url], "");
    let listening = &server.listening;
    assert!(listening.contains(&format!("shared through redis://127.0.0.1:{}/0", redis.port)), "{listening}");
    let mut log = Vec::new();
    let warned = holds_within(Duration::from_secs(30), || {
        log.extend(server.new_log_lines());
        let warned = log.iter().any(|line| line.contains("not answering"));
        async move { warned }
    })
    .await;
    assert!(warned, "no warning that the store is down: {log:?}");
    assert!(!log.iter().any(|line| line.contains("hunter2")), "the password is never logged: {log:?}");

    // And it answers verdicts meanwhile, from its own records.
    assert_eq!(page_view(&server, "198.51.100.9").await.0, 200);
    walk_trap(&server, "198.51.100.9", 20).await;
    assert_eq!(page_view(&server, "198.51.100.9").await.0, 403, "local records still trap");
}

#[tokio::test]
async fn with_the_store_stopped_or_hung_verdicts_answer_from_local_state_and_sharing_resumes_after() {
    let Some(mut redis) = Redis::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let store = [redis.url()];
    // The default budget (5 ms).
    let a = replica(dir.path(), "a", &store, "");
    let b = replica(dir.path(), "b", &store, "");
    assert_eq!(page_view(&a, "203.0.113.1").await.0, 200);

    redis.stop();
    let slowest = slowest_page_view(&a, 10..50).await;
    // The store's own timeouts are a second: a verdict that waited for it would show.
    assert!(slowest < Duration::from_millis(500), "slowest verdict with the store down: {slowest:?}");
    // A crawler walks the trap on A while the store is down: A traps it from its own records.
    walk_trap(&a, "203.0.113.99", 20).await;
    assert_eq!(page_view(&a, "203.0.113.99").await.0, 403);
    let text = metrics(&a).await;
    assert!(text.contains("quagmire_store_up 0"), "{text}");
    assert!(text.contains("quagmire_store_errors_total{operation="), "{text}");
    let warnings = a.new_log_lines().iter().filter(|line| line.contains("not answering")).count();
    assert_eq!(warnings, 1, "one warning per change of state, not one per request");

    // Back: A catches up by itself, and B sees what A learned while the store was down.
    redis.restart();
    assert!(
        holds_within(Duration::from_secs(30), || async { page_view(&b, "203.0.113.99").await.0 == 403 })
            .await,
        "B never saw the hits A recorded while the store was down"
    );
    a.log_lines_until("saying the store answers again", |line| line.contains("answers again"));
    assert!(metrics(&a).await.contains("quagmire_store_up 1"));

    // Hung (accepting, never answering): verdicts still keep to the budget.
    redis.signal("-STOP");
    let slowest = slowest_page_view(&b, 150..170).await;
    redis.signal("-CONT");
    assert!(slowest < Duration::from_millis(500), "slowest verdict with the store hung: {slowest:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_trap_hits_on_two_replicas_add_up_exactly() {
    let Some(redis) = Redis::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let store = [redis.url()];
    let a = std::sync::Arc::new(replica(dir.path(), "a", &store, PATIENT));
    let b = std::sync::Arc::new(replica(dir.path(), "b", &store, PATIENT));
    const PER_TASK: usize = 25;
    let mut tasks = Vec::new();
    for server in [a.clone(), b.clone()] {
        for _ in 0..4 {
            let server = server.clone();
            tasks.push(tokio::spawn(async move { walk_trap(&server, "192.0.2.77", PER_TASK).await }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    let expected = (2 * 4 * PER_TASK).to_string();
    let hits = || cli(redis.port, &["HGET", "quagmire:{192.0.2.77}", "hits"]);
    assert!(
        holds_within(Duration::from_secs(30), || async { hits() == expected }).await,
        "hits in the store: {} of {expected}",
        hits()
    );
    // And none counted twice once everything has settled: two more rounds on each replica send
    // whatever either still held.
    after_sync_rounds(&[&a, &b], 2).await;
    assert_eq!(hits(), expected);
    let listed = trapped(&a).await;
    assert_eq!(listed[0]["trap_hits"], 2 * 4 * PER_TASK as u64, "{listed:?}");
}

#[tokio::test]
async fn replicas_share_through_a_redis_cluster() {
    let Some(first) = Redis::start() else { return };
    drop(first);
    let mut nodes = Vec::new();
    for _ in 0..3 {
        let program = require_program("redis-server").unwrap();
        let dir = tempfile::tempdir().unwrap().keep();
        let mut node = Redis { child: None, port: free_port(), program, dir, cluster: true };
        node.restart();
        nodes.push(node);
    }
    let addresses: Vec<String> = nodes.iter().map(|node| format!("127.0.0.1:{}", node.port)).collect();
    let created = Command::new("redis-cli")
        .args(["--cluster", "create"])
        .args(&addresses)
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .output()
        .unwrap();
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stdout));
    let ready = || nodes.iter().all(|node| cli(node.port, &["CLUSTER", "INFO"]).contains("cluster_state:ok"));
    assert!(
        holds_within(Duration::from_secs(60), || async { ready() }).await,
        "the cluster never became ready"
    );

    let dir = tempfile::tempdir().unwrap();
    let store: Vec<String> = addresses.iter().map(|address| format!("redis://{address}")).collect();
    let a = replica(dir.path(), "a", &store, PATIENT);
    let b = replica(dir.path(), "b", &store, PATIENT);
    walk_trap(&a, "198.51.100.70", 20).await;
    // B's first verdict waits for the store at most `store-wait-ms`: wait for the event.
    let shared =
        holds_within(Duration::from_secs(30), || async { page_view(&b, "198.51.100.70").await.0 == 403 })
            .await;
    assert!(shared, "B never saw A's hits through the cluster");
    assert_eq!(page_view(&b, "198.51.100.70").await, (403, "trap-score".into()));
    assert_eq!(page_view(&b, "198.51.100.71").await.0, 200);
    // Thirty clients' records spread over the three nodes' slots.
    for i in 0..30 {
        walk_trap(&a, &format!("192.0.2.{i}"), 1).await;
    }
    let spread = || nodes.iter().all(|node| cli(node.port, &["DBSIZE"]).parse::<u64>().unwrap_or(0) > 0);
    assert!(holds_within(Duration::from_secs(30), || async { spread() }).await, "records on every node");
    assert!(trapped(&b).await.iter().any(|client| client["client"] == "198.51.100.70"));
}

#[tokio::test]
async fn the_password_can_come_from_the_environment() {
    let Some(redis) = Redis::start() else { return };
    assert_eq!(cli(redis.port, &["CONFIG", "SET", "requirepass", "s3cret-from-env"]), "OK");
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "clients {{\n    store \"{}\"\n    store-password-env \"TEST_STORE_PASSWORD\"\n{PATIENT}\n}}\n",
        redis.url()
    );
    let path = write_file(dir.path(), "q.kdl", &config);
    let env = [("QUAGMIRE_SECRET", crate::support::SECRET), ("TEST_STORE_PASSWORD", "s3cret-from-env")];
    let a = Server::start_with_env(&["--config", &path], &env);
    let b = Server::start_with_env(&["--config", &path], &env);
    walk_trap(&a, "198.51.100.50", 20).await;
    let shared =
        holds_within(Duration::from_secs(30), || async { page_view(&b, "198.51.100.50").await.0 == 403 })
            .await;
    assert!(shared, "not shared through the password-protected store");
    let text = metrics(&b).await;
    assert!(text.contains("quagmire_store_up 1"), "{text}");

    // Without the password, the store refuses: counted, and the replica answers on its own.
    let c = replica(dir.path(), "c", &[redis.url()], PATIENT);
    assert_eq!(page_view(&c, "198.51.100.50").await.0, 200, "C cannot read the store");
    let refused = holds_within(Duration::from_secs(30), || async {
        metrics(&c).await.contains("quagmire_store_errors_total{operation=")
    })
    .await;
    assert!(refused, "the refusals are counted");
}

#[test]
fn check_points_at_a_store_url_it_cannot_use() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(dir.path(), "bad.kdl", "clients {\n    store \"http://127.0.0.1:6379\"\n}\n");
    let output = quagmire().args(["check", "--config", &path]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("not a usable Redis URL"), "{stderr}");
    assert!(stderr.contains("bad.kdl:2:11]"), "{stderr}");
    let path =
        write_file(dir.path(), "good.kdl", "clients {\n    store \"rediss://:pw@redis.example:6380/2\"\n}\n");
    let output = quagmire().args(["check", "--config", &path]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

#[tokio::test]
async fn losing_the_stores_data_does_not_release_a_trapped_client() {
    let Some(redis) = Redis::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let store = [redis.url()];
    let a = replica(dir.path(), "a", &store, PATIENT);
    let b = replica(dir.path(), "b", &store, PATIENT);
    walk_trap(&a, "198.51.100.70", 20).await;
    assert!(
        holds_within(Duration::from_secs(30), || async { page_view(&b, "198.51.100.70").await.0 == 403 })
            .await,
        "B never saw A's hits"
    );
    // The store loses everything (FLUSHALL; a restart without persistence is the same).
    assert_eq!(cli(redis.port, &["FLUSHALL"]), "OK");
    // Both replicas keep syncing (each page view sends a request) for a few seconds: neither
    // replaces what it knew with the store's empty record.
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        assert_eq!(page_view(&a, "198.51.100.70").await.0, 403, "A released the client");
        assert_eq!(page_view(&b, "198.51.100.70").await.0, 403, "B released the client");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_store_that_answers_ping_but_refuses_writes_is_down_and_says_so_a_bounded_number_of_times() {
    let Some(redis) = Redis::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let a = replica(dir.path(), "a", &[redis.url()], PATIENT);
    assert_eq!(page_view(&a, "203.0.113.200").await.0, 200);
    assert!(
        holds_within(Duration::from_secs(30), || async { metrics(&a).await.contains("quagmire_store_up 1") })
            .await
    );
    // Out of memory with nothing to evict: PING answers, every update is refused.
    assert_eq!(cli(redis.port, &["CONFIG", "SET", "maxmemory-policy", "noeviction"]), "OK");
    assert_eq!(cli(redis.port, &["CONFIG", "SET", "maxmemory", "1"]), "OK");
    let _ = a.new_log_lines();
    for host in 201..221 {
        page_view(&a, &format!("203.0.113.{host}")).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Then idle for a few sync rounds.
    after_sync_rounds(&[&a], 3).await;
    let text = metrics(&a).await;
    assert!(text.contains("quagmire_store_up 0"), "{text}");
    let lines: Vec<String> =
        a.new_log_lines().into_iter().filter(|line| line.contains("client store")).collect();
    assert!(!lines.is_empty() && lines.len() <= 2, "{lines:#?}");
    assert!(lines.iter().all(|line| !line.contains("answers again")), "it flapped: {lines:#?}");

    // Writes allowed again: the next updates bring it back.
    assert_eq!(cli(redis.port, &["CONFIG", "SET", "maxmemory", "0"]), "OK");
    page_view(&a, "203.0.113.230").await;
    assert!(
        holds_within(Duration::from_secs(30), || async {
            page_view(&a, "203.0.113.231").await;
            metrics(&a).await.contains("quagmire_store_up 1")
        })
        .await
    );
}

#[tokio::test]
async fn a_record_with_absurd_times_in_the_store_does_not_break_a_scrape() {
    let Some(redis) = Redis::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let a = replica(dir.path(), "a", &[redis.url()], PATIENT);
    for (field, value) in [
        ("hits", "3"),
        ("score", "2.5"),
        ("rate", "1"),
        ("updated", "1e300"),
        ("first", "1e300"),
        ("last", "1.7e308"),
    ] {
        cli(redis.port, &["HSET", "quagmire:{192.0.2.77}", field, value]);
    }
    cli(redis.port, &["ZADD", "quagmire:trapped", "1", "192.0.2.77"]);
    for _ in 0..3 {
        let (status, _, body) = get(&format!("http://{}/api/trapped", a.verdict), "localhost").await;
        assert_eq!(status, 200, "{body}");
        let (status, _, _) = get(&format!("http://{}/metrics", a.verdict), "localhost").await;
        assert_eq!(status, 200);
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    let log = a.new_log_lines().join("\n");
    assert!(!log.contains("panicked"), "{log}");
}

#[tokio::test]
async fn a_stopping_replica_sends_what_it_has_not_sent_yet() {
    let Some(redis) = Redis::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    // Requests go to the store once a minute here: only the shutdown can send the later ones.
    let a = replica(dir.path(), "a", &[redis.url()], "    store-sync-ms 60000\n    store-wait-ms 500");
    for _ in 0..10 {
        assert_eq!(page_view(&a, "198.51.100.90").await.0, 200);
    }
    let rate =
        || cli(redis.port, &["HGET", "quagmire:{198.51.100.90}", "rate"]).parse::<f64>().unwrap_or(0.0);
    assert!(rate() < 2.0, "sent before the shutdown: {}", rate());
    let status = a.terminate(Duration::from_secs(10)).expect("exits after SIGTERM");
    assert!(status.success(), "{status:?}");
    assert!(rate() > 8.0, "the last requests were not sent: rate {}", rate());
}

/// The shared record's quota (the store's update script, run by the real server) is the local
/// one: `request-burst` requests at once, then `requests-per-minute`.
#[test]
fn the_shared_quota_allows_the_burst_at_once_and_no_more() {
    let Some(redis) = Redis::start() else { return };
    let script = include_str!("../../src/client_state/update.lua");
    // ARGV: requests, trap hits, trap half-life, rate half-life, requests per minute, idle ms,
    // user agent, ASN, AS organisation, burst. The reply's last line: 1 when over the quota.
    let limited = |client: &str, requests: u32| {
        let (record, agent) = (format!("quagmire:{{{client}}}"), format!("quagmire:{{{client}}}:ua"));
        let requests = requests.to_string();
        let args = [
            "EVAL", script, "2", &record, &agent, &requests, "0", "600", "60", "60", "86400000", "", "", "",
            "10",
        ];
        let reply = cli(redis.port, &args);
        match reply.lines().last() {
            Some("0") => false,
            Some("1") => true,
            _ => panic!("unexpected reply from the update script: {reply:?}"),
        }
    };
    assert!(!limited("192.0.2.1", 10), "the burst at once");
    assert!(limited("192.0.2.1", 1), "one more at once");
    assert!(limited("192.0.2.2", 11), "more than the burst at once");
}

/// A browser's page view of `/docs` from `client` carrying `cookie`: the status and the rule.
async fn page_view_with(server: &Server, client: &str, cookie: &str) -> (u16, String) {
    let (status, headers) = verdict(
        server,
        &[
            ("user-agent", CHROME),
            ("accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
            ("sec-fetch-mode", "navigate"),
            ("sec-fetch-dest", "document"),
            ("x-forwarded-method", "GET"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "site.example"),
            ("x-forwarded-uri", "/docs"),
            ("x-forwarded-for", client),
            ("cookie", cookie),
        ],
    )
    .await;
    (status, header(&headers, "x-quagmire-rule").to_string())
}

#[tokio::test]
async fn a_pass_earned_through_one_replica_is_honoured_by_the_other_and_a_burn_reaches_both() {
    let Some(redis) = Redis::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    // Every browser page view without a pass is challenged, so whether a pass counts shows.
    let config = |name: &str| {
        let text = format!(
            "clients {{\n    store \"{}\"\n{PATIENT}\n}}\nchallenge {{\n    everyone #true\n    difficulty 8\n}}\n",
            redis.url()
        );
        write_file(dir.path(), &format!("{name}.kdl"), &text)
    };
    let (a_config, b_config) = (config("a"), config("b"));
    let a = Server::start(&["--config", &a_config]);
    let b = Server::start(&["--config", &b_config]);
    assert_eq!(page_view_with(&b, "198.51.100.7", "").await, (401, "challenge-browsers".into()));

    // The browser answers A's challenge (its worker's proof of work, found here).
    let cookie = crate::support::earn_pass(&a, "198.51.100.7", CHROME).await;
    let http = reqwest::Client::new();

    // B honours it, with no store needed to verify it.
    assert_eq!(page_view_with(&b, "198.51.100.7", &cookie).await, (200, "".into()));
    // Its holder walks A's trap: burned there, and so on B, from any address.
    for n in 0..2 {
        let response = http
            .get(a.trap_url(&format!("/walk/{n}")))
            .header("x-forwarded-for", "198.51.100.9")
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    let burned = holds_within(Duration::from_secs(30), || async {
        page_view_with(&b, "203.0.113.50", &cookie).await == (403, "burned-pass".into())
    })
    .await;
    assert!(burned, "B still honours a pass burned on A");
    assert_eq!(page_view_with(&a, "203.0.113.51", &cookie).await, (403, "burned-pass".into()));
}

/// Two replicas on one store, each with a quick challenge (and `challenge`'s other settings):
/// what a crawler, or a balancer, would spread requests over.
fn two_replicas_with(redis: &Redis, dir: &Path, challenge: &str) -> (Server, Server) {
    let config = |name: &str| {
        let text = format!(
            "clients {{\n    store \"{}\"\n{PATIENT}\n}}\nchallenge {{\n    difficulty 8\n{challenge}}}\n",
            redis.url()
        );
        write_file(dir, &format!("{name}.kdl"), &text)
    };
    let (a, b) = (config("a"), config("b"));
    (Server::start(&["--config", &a]), Server::start(&["--config", &b]))
}

fn two_replicas(redis: &Redis, dir: &Path) -> (Server, Server) {
    two_replicas_with(redis, dir, "")
}

/// A challenge from `server`'s `/challenge` for `client`, solved: the answer's URL.
async fn solved_challenge(server: &Server, client: &str) -> (String, u32) {
    let http = reqwest::Client::new();
    let page = http
        .get(format!("http://{}/challenge", server.verdict))
        .header("user-agent", CHROME)
        .header("x-forwarded-for", client)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let (challenge, bits) = (attribute(&page, "data-challenge"), attribute(&page, "data-difficulty"));
    let bits: u32 = bits.parse().unwrap();
    let nonce = solve(&challenge, bits);
    (format!("/.quagmire/answer?c={challenge}&n={nonce}&to=%2F"), bits)
}

/// `answer` (a path from [`solved_challenge`]) sent to `server` from `client`: its status.
async fn send_answer(server: &Server, client: &str, answer: &str) -> u16 {
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let response = http
        .get(format!("http://{}{answer}", server.verdict))
        .header("user-agent", CHROME)
        .header("x-forwarded-for", client)
        .send()
        .await
        .unwrap();
    response.status().as_u16()
}

/// A pass read through two replicas behind a load balancer has one pace, not two: its burst of
/// page views, alternating between them, is asked again where one replica's share of it would
/// not be; and a challenge answered on one replica cannot be answered again on the other.
#[tokio::test]
async fn two_replicas_give_a_pass_one_pace_and_a_challenge_one_answer() {
    let Some(redis) = Redis::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_replicas(&redis, dir.path());
    let cookie = crate::support::earn_pass(&a, "198.51.100.7", CHROME).await;
    // Twelve page views at once, six on each: each replica alone sees fewer than the burst (8).
    let mut outcomes = Vec::new();
    for n in 0..12 {
        let server = if n % 2 == 0 { &a } else { &b };
        outcomes.push(page_view_with(server, "198.51.100.7", &cookie).await);
    }
    assert!(outcomes[..8].iter().all(|outcome| outcome.0 == 200), "{outcomes:?}");
    assert!(outcomes[8..].iter().all(|outcome| *outcome == (401, "pass-over-pace".into())), "{outcomes:?}");

    let (answer, _) = solved_challenge(&a, "198.51.100.8").await;
    assert_eq!(send_answer(&a, "198.51.100.8", &answer).await, 303);
    assert_eq!(send_answer(&b, "198.51.100.8", &answer).await, 403, "answered twice, once on each replica");
    assert!(metrics(&b).await.contains("quagmire_challenge_answers_total{result=\"replayed\"} 1\n"));
}

/// A network's passes are counted once across replicas: answers spread over two replicas raise
/// the price of the network's next challenge on both, as the same answers on one replica would.
#[tokio::test]
async fn a_networks_passes_minted_on_two_replicas_price_its_next_challenge_on_both() {
    let Some(redis) = Redis::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_replicas(&redis, dir.path());
    // 60 answers from one /24, 30 on each replica: past the 48 free ones together, not alone.
    for n in 0..60u8 {
        let server = if n % 2 == 0 { &a } else { &b };
        let client = format!("198.51.100.{}", n + 1);
        let (answer, bits) = solved_challenge(server, &client).await;
        if n < 48 {
            assert_eq!(bits, 8, "answer {n} was priced already");
        }
        assert_eq!(send_answer(server, &client, &answer).await, 303, "answer {n}");
    }
    for server in [&a, &b] {
        let (_, bits) = solved_challenge(server, "198.51.100.200").await;
        assert_eq!(bits, 9, "60 passes from one network, and its next challenge costs what it did");
    }
}

/// Behind a balancer that spreads requests, people behind one address are shown the challenge by
/// one replica and answer on the other: each answer starts the count again on both, so nobody
/// there is locked out; a program that answers none is counted once across both, and trapped.
#[tokio::test]
async fn unanswered_challenges_are_counted_across_replicas_and_an_answer_on_either_resets_them() {
    let Some(redis) = Redis::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_replicas_with(&redis, dir.path(), "    everyone #true\n");
    // Eight people with the same browser behind one address, one after another.
    for person in 0..8 {
        let shown = page_view_with(&a, "198.51.100.7", "").await;
        assert_eq!(shown, (401, "challenge-browsers".into()), "person {person} shown by A");
        let (answer, _) = solved_challenge(&b, "198.51.100.7").await;
        assert_eq!(send_answer(&b, "198.51.100.7", &answer).await, 303, "person {person} answered on B");
    }
    // A program reading challenge pages on both replicas, answering none.
    // Five challenges, three shown by A and two by B: the limit, counted once across both.
    for n in 0..5 {
        let server = if n % 2 == 0 { &a } else { &b };
        assert_eq!(page_view_with(server, "198.51.100.9", "").await.0, 401, "challenge {n}");
    }
    let trapped = holds_within(Duration::from_secs(10), || async {
        page_view_with(&b, "198.51.100.9", "").await == (403, "unanswered-challenges".into())
    })
    .await;
    assert!(
        trapped,
        "five challenges unanswered across two replicas, and B (which showed two) does not trap"
    );
}

#[tokio::test]
async fn a_trapped_clients_shared_record_lasts_as_long_as_a_pass_and_a_visitors_as_long_as_the_idle_time() {
    let Some(redis) = Redis::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    // A day is the default idle time and a week a pass's: an hour and two hours here.
    let extra = format!("{PATIENT}\n    idle-timeout-seconds 3600\n}}\nchallenge {{\n    pass-hours 2");
    let server = replica(dir.path(), "a", &[redis.url()], &extra);
    walk_trap(&server, "192.0.2.81", 3).await;
    page_view(&server, "192.0.2.82").await;
    let ttl = |key: &str| cli(redis.port, &["PTTL", key]).trim().parse::<i64>().unwrap_or(-2);
    eventually("both clients are in the store", || async {
        ttl("quagmire:{192.0.2.81}") > 0 && ttl("quagmire:{192.0.2.82}") > 0
    })
    .await;
    let (trapped, visitor) = (ttl("quagmire:{192.0.2.81}"), ttl("quagmire:{192.0.2.82}"));
    assert!(trapped > 3_600_000 && trapped <= 7_200_000, "the trapped client's: {trapped} ms");
    assert!(visitor > 0 && visitor <= 3_600_000, "the visitor's: {visitor} ms");
}
