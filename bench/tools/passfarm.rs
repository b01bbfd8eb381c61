//! The pass economy under attack and in use (issue 39): plays, against a quagmire of its own on
//! loopback, a crawler farm that knows quagmire, or an office of people behind one address, for
//! a number of seconds, and reports what each got.
//!
//! - `farm-work-N` / `farm-wait-N`: N addresses of one AWS /24 (AS16509), 40 crawler threads on
//!   each. Every thread sends a real browser's page-view headers, never follows a link (so never a
//!   trap link), reads with its pass at just under the pass's pace (a page every 2.1 s), and mints
//!   a new pass whenever its pass is asked again or refused: by native proof of work in Rust
//!   (`work`, real SHA-256) or by the no-JavaScript wait (`wait`, the waits run in parallel).
//!   Passes that start at their network's turn are kept until then; a busy answer is retried
//!   when the page says.
//! - `office-40`: 40 people behind one Cloudflare WARP-like address (AS13335, a datacenter's),
//!   arriving within 150 s, each reading a page every 15 to 45 s with five subresources, and
//!   answering each challenge as the page's script does.
//!
//! The client addresses are header values only (`X-Forwarded-For` from a loopback peer, which
//! quagmire trusts by default): every packet goes to 127.0.0.1.
//!
//! With REPLICAS 2, two quagmire replicas share one Redis (`redis-server` on PORT + 5, started
//! here) behind a round-robin balancer: each request goes to the next replica, as a load
//! balancer spreads a crawler's requests.
//!
//! usage: passfarm QUAGMIRE_BINARY SCENARIO SECONDS PORT [REPLICAS]

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::RngExt;
use sha2::{Digest, Sha256};

const CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/142.0.0.0 Safari/537.36";
/// A thread's pause between pages: just under the pass's pace of 30 a minute.
const PACE: Duration = Duration::from_millis(2100);
const THREADS_PER_ADDRESS: usize = 40;

/// What a run saw, per minute of the run.
struct Tally {
    started: Instant,
    pages: Vec<AtomicU64>,
    traps: AtomicU64,
    challenges: AtomicU64,
    minted: AtomicU64,
    turns: AtomicU64,
    busy: AtomicU64,
    solve_nanos: AtomicU64,
    extra_bits: Mutex<Vec<u8>>,
}

impl Tally {
    fn new(seconds: u64) -> Tally {
        Tally {
            started: Instant::now(),
            pages: (0..seconds.div_ceil(60) + 1).map(|_| AtomicU64::new(0)).collect(),
            traps: AtomicU64::new(0),
            challenges: AtomicU64::new(0),
            minted: AtomicU64::new(0),
            turns: AtomicU64::new(0),
            busy: AtomicU64::new(0),
            solve_nanos: AtomicU64::new(0),
            extra_bits: Mutex::new(Vec::new()),
        }
    }

    fn page(&self) {
        let minute = (self.started.elapsed().as_secs() / 60) as usize;
        if let Some(count) = self.pages.get(minute) {
            count.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One client's view of the site through quagmire's verdict listener, as a proxy asks.
#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    replicas: Replicas,
    address: IpAddr,
    user_agent: String,
}

/// The replicas' verdict listeners, taken in turn (a round-robin load balancer).
#[derive(Clone)]
struct Replicas {
    bases: Arc<Vec<String>>,
    turn: Arc<AtomicU64>,
}

impl Replicas {
    fn next(&self) -> &str {
        let turn = self.turn.fetch_add(1, Ordering::Relaxed) as usize;
        &self.bases[turn % self.bases.len()]
    }
}

enum Outcome {
    Page,
    /// A challenge page (token, difficulty, wait) or a waiting page (no token).
    Asked(Option<(String, u8, u64)>),
    Trap,
}

enum Minted {
    /// The pass cookie, and how long until it starts.
    Pass(String, Duration),
    /// Try again in this long.
    Later(Duration),
}

fn attribute(page: &str, name: &str) -> Option<String> {
    let start = page.find(&format!("{name}=\""))? + name.len() + 2;
    Some(page[start..].split('"').next()?.to_string())
}

fn solve(token: &str, bits: u8) -> u64 {
    (0u64..)
        .find(|nonce| {
            let digest =
                Sha256::new().chain_update(token.as_bytes()).chain_update(nonce.to_string()).finalize();
            let mut zeros = 0;
            for byte in digest {
                if byte == 0 {
                    zeros += 8;
                } else {
                    zeros += byte.leading_zeros();
                    break;
                }
            }
            zeros >= u32::from(bits)
        })
        .expect("a nonce")
}

impl Client {
    async fn request(&self, path: &str, dest: &str, cookie: Option<&str>) -> Option<(u16, String)> {
        let mut request = self
            .http
            .get(format!("{}/verdict", self.replicas.next()))
            .header("x-forwarded-method", "GET")
            .header("x-forwarded-proto", "https")
            .header("x-forwarded-host", "docs.example")
            .header("x-forwarded-uri", path)
            .header("x-forwarded-for", self.address.to_string())
            .header("user-agent", &self.user_agent)
            .header("accept-language", "en-GB,en;q=0.9")
            .header("sec-fetch-dest", dest)
            .header("sec-fetch-site", "same-origin");
        request = if dest == "document" {
            request
                .header("accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
                .header("sec-fetch-mode", "navigate")
                .header("sec-fetch-user", "?1")
                .header("upgrade-insecure-requests", "1")
        } else {
            request.header("accept", "image/avif,image/webp,*/*;q=0.8").header("sec-fetch-mode", "no-cors")
        };
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        let response = request.send().await.ok()?;
        let status = response.status().as_u16();
        Some((status, response.text().await.ok()?))
    }

    async fn view(&self, path: &str, cookie: Option<&str>) -> Outcome {
        match self.request(path, "document", cookie).await {
            Some((200, _)) => Outcome::Page,
            Some((401, page)) => Outcome::Asked(attribute(&page, "data-challenge").map(|token| {
                let bits = attribute(&page, "data-difficulty").and_then(|b| b.parse().ok()).unwrap_or(16);
                let wait = attribute(&page, "data-wait").and_then(|w| w.parse().ok()).unwrap_or(5);
                (token, bits, wait)
            })),
            _ => Outcome::Trap,
        }
    }

    /// Answers a challenge by work or by the wait.
    async fn answer(
        &self,
        (token, bits, wait): (String, u8, u64),
        by_work: bool,
        base_bits: u8,
        tally: &Tally,
        path: &str,
    ) -> Minted {
        tally.extra_bits.lock().unwrap().push(bits.saturating_sub(base_bits));
        let nonce = if by_work {
            let (token, started) = (token.clone(), Instant::now());
            let nonce = tokio::task::spawn_blocking(move || solve(&token, bits)).await.unwrap();
            tally.solve_nanos.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
            format!("&n={nonce}")
        } else {
            tokio::time::sleep(Duration::from_secs(wait) + Duration::from_millis(200)).await;
            String::new()
        };
        let to: String = form_urlencoded::byte_serialize(path.as_bytes()).collect();
        let response = self
            .http
            .get(format!("{}/.quagmire/answer?c={token}{nonce}&to={to}", self.replicas.next()))
            .header("x-forwarded-for", self.address.to_string())
            .header("x-forwarded-proto", "https")
            .header("user-agent", &self.user_agent)
            .send()
            .await;
        let Ok(response) = response else { return Minted::Later(Duration::from_secs(1)) };
        let status = response.status().as_u16();
        let cookie = response
            .headers()
            .get("set-cookie")
            .and_then(|value| value.to_str().ok())
            .map(|value| value.split(';').next().unwrap_or("").to_string());
        let retry = response
            .headers()
            .get("retry-after")
            .and_then(|value| value.to_str().ok()?.parse().ok())
            .unwrap_or(5);
        let body = response.text().await.unwrap_or_default();
        match (status, cookie) {
            (303, Some(cookie)) => {
                tally.minted.fetch_add(1, Ordering::Relaxed);
                Minted::Pass(cookie, Duration::ZERO)
            }
            (200, Some(cookie)) => {
                tally.minted.fetch_add(1, Ordering::Relaxed);
                tally.turns.fetch_add(1, Ordering::Relaxed);
                let seconds = body
                    .split("content=\"")
                    .nth(1)
                    .and_then(|rest| rest.split(';').next()?.parse().ok())
                    .unwrap_or(20);
                Minted::Pass(cookie, Duration::from_secs(seconds))
            }
            (429, _) => {
                tally.busy.fetch_add(1, Ordering::Relaxed);
                Minted::Later(Duration::from_secs(retry))
            }
            _ => Minted::Later(Duration::from_secs(1)),
        }
    }
}

/// One crawler thread: reads with a pass under its pace, mints another whenever asked.
async fn crawler(client: Client, by_work: bool, deadline: Instant, tally: Arc<Tally>, thread: usize) {
    let mut pass: Option<String> = None;
    let mut page = thread * 1_000_000;
    while Instant::now() < deadline {
        page += 1;
        let path = format!("/docs/{page}");
        match client.view(&path, pass.as_deref()).await {
            Outcome::Page => {
                tally.page();
                tokio::time::sleep(PACE).await;
            }
            Outcome::Trap => {
                tally.traps.fetch_add(1, Ordering::Relaxed);
                pass = None;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Outcome::Asked(None) => tokio::time::sleep(Duration::from_secs(5)).await,
            Outcome::Asked(Some(challenge)) => {
                tally.challenges.fetch_add(1, Ordering::Relaxed);
                match client.answer(challenge, by_work, 16, &tally, &path).await {
                    Minted::Pass(cookie, starts_in) => {
                        tokio::time::sleep(starts_in.min(deadline.saturating_duration_since(Instant::now())))
                            .await;
                        pass = Some(cookie);
                    }
                    Minted::Later(retry) => {
                        pass = None;
                        tokio::time::sleep(retry.min(deadline.saturating_duration_since(Instant::now())))
                            .await;
                    }
                }
            }
        }
    }
}

/// One person in the office: arrives, reads at a person's pace, answers as the page's script.
async fn person(
    client: Client,
    deadline: Instant,
    tally: Arc<Tally>,
    asked: Arc<Mutex<Vec<u32>>>,
    arrive: Duration,
) {
    tokio::time::sleep(arrive).await;
    let (mut pass, mut challenged, mut page) = (None::<String>, 0u32, 0u32);
    while Instant::now() < deadline {
        page += 1;
        let path = format!("/guide/{page}");
        match client.view(&path, pass.as_deref()).await {
            Outcome::Page => {
                tally.page();
                for n in 0..5 {
                    let asset = format!("/static/{page}-{n}.png");
                    if let Some((403, _)) = client.request(&asset, "image", pass.as_deref()).await {
                        tally.traps.fetch_add(1, Ordering::Relaxed);
                    }
                }
                let pause = rand::rng().random_range(15_000..=45_000);
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
            Outcome::Trap => {
                tally.traps.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
            Outcome::Asked(None) => tokio::time::sleep(Duration::from_secs(5)).await,
            Outcome::Asked(Some(challenge)) => {
                challenged += 1;
                tally.challenges.fetch_add(1, Ordering::Relaxed);
                match client.answer(challenge, true, 16, &tally, &path).await {
                    Minted::Pass(cookie, starts_in) => {
                        tokio::time::sleep(starts_in).await;
                        pass = Some(cookie);
                    }
                    Minted::Later(retry) => tokio::time::sleep(retry).await,
                }
            }
        }
    }
    asked.lock().unwrap().push(challenged);
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let binary = args.next().expect("the quagmire binary");
    let scenario = args.next().expect("a scenario: farm-work-N, farm-wait-N or office-40");
    let seconds: u64 = args.next().and_then(|s| s.parse().ok()).expect("seconds");
    let port: u16 = args.next().and_then(|p| p.parse().ok()).expect("a port");

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("asn.mmdb");
    let mut writer = mmdb_writer::Writer::new("GeoLite2-ASN");
    for (network, asn, org) in
        [("203.0.113.0/24", 16509u32, "AMAZON-02"), ("198.51.100.0/24", 13335, "CLOUDFLARENET")]
    {
        let record = mmdb_writer::Value::map([
            ("autonomous_system_number", mmdb_writer::Value::U32(asn)),
            ("autonomous_system_organization", mmdb_writer::Value::String(org.into())),
        ]);
        writer.insert_value(network.parse::<ipnet::IpNet>().unwrap(), record).unwrap();
    }
    std::fs::write(&db, writer.to_bytes().unwrap()).unwrap();
    let replicas: u16 = args.next().and_then(|r| r.parse().ok()).unwrap_or(1);
    let mut children = Vec::new();
    let mut store = String::new();
    if replicas > 1 {
        let redis = port + 5;
        children.push(
            std::process::Command::new("redis-server")
                .args([
                    "--port",
                    &redis.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("redis-server starts"),
        );
        store = format!("clients {{\n    store \"redis://127.0.0.1:{redis}\"\n}}\n");
    }
    let config = dir.path().join("quagmire.kdl");
    std::fs::write(&config, format!("geo {{ asn \"{}\" }}\n{store}", db.display())).unwrap();
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let mut bases = Vec::new();
    for replica in 0..replicas {
        let port = port + 2 * replica;
        children.push(
            std::process::Command::new(&binary)
                .args(["serve", "--config", config.to_str().unwrap()])
                .args(["--listen", &format!("127.0.0.1:{port}")])
                .args(["--trap-listen", &format!("127.0.0.1:{}", port + 1)])
                .env("QUAGMIRE_SECRET", "bench-secret-0123456789abcdef")
                .env("RUST_LOG", "warn")
                .spawn()
                .expect("quagmire starts"),
        );
        let base = format!("http://127.0.0.1:{port}");
        let up = Instant::now();
        while http.get(format!("{base}/health")).send().await.is_err() {
            assert!(up.elapsed() < Duration::from_secs(10), "quagmire did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bases.push(base);
    }
    let replicas = Replicas { bases: Arc::new(bases), turn: Arc::new(AtomicU64::new(0)) };

    let tally = Arc::new(Tally::new(seconds));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    let asked = Arc::new(Mutex::new(Vec::new()));
    if let Some(how) = scenario.strip_prefix("farm-") {
        let (by, addresses) = how.split_once('-').expect("farm-work-N or farm-wait-N");
        let addresses: u8 = addresses.parse().expect("a number of addresses");
        for host in 1..=addresses {
            for thread in 0..THREADS_PER_ADDRESS {
                let client = Client {
                    http: http.clone(),
                    replicas: replicas.clone(),
                    address: format!("203.0.113.{host}").parse().unwrap(),
                    user_agent: CHROME.into(),
                };
                let tally = tally.clone();
                let index = usize::from(host) * THREADS_PER_ADDRESS + thread;
                tasks.push(tokio::spawn(crawler(client, by == "work", deadline, tally, index)));
            }
        }
    } else {
        for n in 0..40u32 {
            // Most offices run one browser build; a few others.
            let user_agent = match n % 4 {
                3 => format!(
                    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.{} Safari/605.1.15",
                    n % 3
                ),
                _ => CHROME.to_string(),
            };
            let client = Client {
                http: http.clone(),
                replicas: replicas.clone(),
                address: "198.51.100.7".parse().unwrap(),
                user_agent,
            };
            let arrive = Duration::from_millis(rand::rng().random_range(0..150_000));
            tasks.push(tokio::spawn(person(client, deadline, tally.clone(), asked.clone(), arrive)));
        }
    }
    for task in tasks {
        let _ = task.await;
    }
    let mut metrics = String::new();
    for base in replicas.bases.iter() {
        metrics += &http.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
    }
    for mut child in children {
        let _ = child.kill();
        let _ = child.wait();
    }

    let per_minute: Vec<u64> = tally.pages.iter().map(|count| count.load(Ordering::Relaxed)).collect();
    let late: Vec<u64> = per_minute.iter().copied().skip(5).take(5).collect();
    let late_rate = if late.is_empty() { 0.0 } else { late.iter().sum::<u64>() as f64 / late.len() as f64 };
    let mut bits = tally.extra_bits.lock().unwrap().clone();
    bits.sort_unstable();
    let median_bits = bits.get(bits.len() / 2).copied().unwrap_or(0);
    println!("scenario {scenario}, {seconds} s, {} replica(s)", replicas.bases.len());
    println!("real pages each minute: {per_minute:?}");
    println!("real pages a minute in minutes 5-10: {late_rate:.0}");
    println!(
        "traps {}, challenges {}, passes minted {} ({} at their network's turn), busy answers {}",
        tally.traps.load(Ordering::Relaxed),
        tally.challenges.load(Ordering::Relaxed),
        tally.minted.load(Ordering::Relaxed),
        tally.turns.load(Ordering::Relaxed),
        tally.busy.load(Ordering::Relaxed),
    );
    println!(
        "minting cost: {:.1} CPU s of proof of work; extra difficulty bits per challenge: median {median_bits}, max {}",
        tally.solve_nanos.load(Ordering::Relaxed) as f64 / 1e9,
        bits.last().copied().unwrap_or(0),
    );
    let asked = asked.lock().unwrap();
    if !asked.is_empty() {
        println!(
            "office: {} people, challenged at most {} times each, {} challenged more than twice",
            asked.len(),
            asked.iter().max().unwrap_or(&0),
            asked.iter().filter(|&&n| n > 2).count()
        );
    }
    for line in metrics.lines().filter(|line| {
        line.starts_with("quagmire_passes_rechallenged_total")
            || line.starts_with("quagmire_passes_burned_total")
            || line.starts_with("quagmire_verdicts_total{verdict=\"trap\"")
    }) {
        println!("  {line}");
    }
}
