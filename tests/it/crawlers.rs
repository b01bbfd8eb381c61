//! Crawler claims verified by forward-confirmed reverse DNS against a real DNS server (dnsmasq,
//! started here on a loopback port), and what a verdict does while DNS is slow or a spray of fake
//! crawlers spends the lookup budget.

use std::net::UdpSocket;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Server, get, header, quagmire, require_program, verdict, write_file};

const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
const YANDEX: &str = "Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)";

/// A dnsmasq answering only the records given, authoritative for their zones (NXDOMAIN for
/// anything else in them); killed on drop.
struct Dns {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Dns {
    fn start(records: &[&str]) -> Option<Dns> {
        // Debian installs it in /usr/sbin, which a user's PATH may leave out.
        let sbin = std::path::PathBuf::from("/usr/sbin/dnsmasq");
        let dnsmasq = if sbin.is_file() { sbin } else { require_program("dnsmasq")? };
        let dir = tempfile::tempdir().unwrap();
        for _ in 0..5 {
            // A port free for UDP now; dnsmasq binds UDP and TCP on it.
            let port = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let config = format!(
                "port={port}\nlisten-address=127.0.0.1\nbind-interfaces\nno-resolv\nno-hosts\n\
                 local=/in-addr.arpa/\nlocal=/ip6.arpa/\nlocal=/googlebot.com/\nlocal=/yandex.com/\n\
                 local=/evil.example/\n{}\n",
                records.join("\n")
            );
            let path = write_file(dir.path(), "dnsmasq.conf", &config);
            let mut child = Command::new(&dnsmasq)
                .args(["--keep-in-foreground", "--user=root", "--pid-file", "-C", &path])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("dnsmasq starts");
            std::thread::sleep(Duration::from_millis(300));
            if child.try_wait().unwrap().is_none() {
                return Some(Dns { child, port, _dir: dir });
            }
            // The port was taken in between: try another.
        }
        panic!("dnsmasq did not start on any of five ports");
    }

    fn server(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Dns {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts quagmire asking `dns_server`, with `extra` lines in the `dns { }` block.
fn start(dir: &std::path::Path, dns_server: &str, extra: &str) -> Server {
    let config = format!("dns {{\n    servers \"{dns_server}\"\n{extra}\n}}\n");
    let path = write_file(dir, "quagmire.kdl", &config);
    Server::start(&["--config", &path])
}

/// A verdict for a client (through the trusted loopback proxy) with this User-Agent; returns the
/// status, the deciding rule and how long it took.
async fn ask(server: &Server, client: &str, user_agent: &str) -> (u16, String, Duration) {
    let started = Instant::now();
    let (status, headers) = verdict(
        server,
        &[
            ("user-agent", user_agent),
            ("accept", "*/*"),
            ("x-forwarded-for", client),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "site.example"),
            ("x-forwarded-uri", "/"),
        ],
    )
    .await;
    (status, header(&headers, "x-quagmire-rule").to_string(), started.elapsed())
}

/// Records for: a real Googlebot (PTR under googlebot.com, which resolves back, IPv4 and IPv6),
/// a PTR that claims googlebot.com without resolving back, a PTR elsewhere, and a Yandex crawler.
const RECORDS: &[&str] = &[
    "ptr-record=10.100.51.198.in-addr.arpa,crawl-198-51-100-10.googlebot.com",
    "host-record=crawl-198-51-100-10.googlebot.com,198.51.100.10",
    "ptr-record=11.100.51.198.in-addr.arpa,crawl-198-51-100-11.googlebot.com",
    "ptr-record=12.100.51.198.in-addr.arpa,host.evil.example",
    "host-record=host.evil.example,198.51.100.12",
    "ptr-record=20.100.51.198.in-addr.arpa,spider-198-51-100-20.yandex.com",
    "host-record=spider-198-51-100-20.yandex.com,198.51.100.20",
    "ptr-record=1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa,crawl-v6.googlebot.com",
    "host-record=crawl-v6.googlebot.com,2001:db8::1",
];

#[tokio::test]
async fn claimed_crawlers_outside_their_ranges_are_verified_by_forward_confirmed_reverse_dns() {
    let Some(dns) = Dns::start(RECORDS) else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &dns.server(), "    verdict-wait-ms 2000");

    // PTR under googlebot.com and back again: verified (none of these addresses is in Google's
    // published ranges).
    let (status, rule, _) = ask(&server, "198.51.100.10", GOOGLEBOT).await;
    assert_eq!((status, rule.as_str()), (200, "search-engines"));
    let (status, rule, _) = ask(&server, "2001:db8::1", GOOGLEBOT).await;
    assert_eq!((status, rule.as_str()), (200, "search-engines"), "IPv6");
    let (status, rule, _) = ask(&server, "198.51.100.20", YANDEX).await;
    assert_eq!((status, rule.as_str()), (200, "search-engines"), "Yandex by its own domain");

    // A PTR naming googlebot.com that does not resolve back, a PTR elsewhere, no PTR at all, and
    // Yandex's name claimed for Google: impostors.
    for client in ["198.51.100.11", "198.51.100.12", "198.51.100.13"] {
        let (status, rule, _) = ask(&server, client, GOOGLEBOT).await;
        assert_eq!((status, rule.as_str()), (403, "search-engines"), "{client}");
    }
    let (status, rule, _) = ask(&server, "198.51.100.20", GOOGLEBOT).await;
    assert_eq!((status, rule.as_str()), (403, "search-engines"), "a Yandex host is no Googlebot");

    // Answers are cached: asked again, the same verdicts, and no new verification.
    let metrics = |text: &str, answer: &str| -> u64 {
        let prefix = format!("quagmire_dns_verifications_total{{check=\"{answer}\"}} ");
        text.lines().find_map(|line| line.strip_prefix(&prefix)).map_or(0, |n| n.parse().unwrap())
    };
    let (_, _, before) = get(&format!("http://{}/metrics", server.verdict), "localhost").await;
    assert_eq!((metrics(&before, "verified"), metrics(&before, "refused")), (3, 4), "{before}");
    for _ in 0..3 {
        assert_eq!(ask(&server, "198.51.100.10", GOOGLEBOT).await.0, 200);
        assert_eq!(ask(&server, "198.51.100.11", GOOGLEBOT).await.0, 403);
    }
    let (_, _, after) = get(&format!("http://{}/metrics", server.verdict), "localhost").await;
    assert_eq!((metrics(&after, "verified"), metrics(&after, "refused")), (3, 4), "{after}");
}

#[tokio::test]
async fn a_dns_server_that_never_answers_never_makes_an_impostor_or_a_slow_verdict() {
    // A "server" that reads queries and never answers.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = start(
        dir.path(),
        &silent.local_addr().unwrap().to_string(),
        "    verdict-wait-ms 100\n    timeout-ms 20000",
    );
    // A verdict that waited for the silent server would take its 20 s timeout: one answered in
    // half of that did not wait, however busy the machine.
    let mut slowest = Duration::ZERO;
    for client in ["198.51.100.30", "198.51.100.31", "198.51.100.30"] {
        let (status, rule, took) = ask(&server, client, GOOGLEBOT).await;
        // Pending: not an impostor; no rule decides for this plain agent.
        assert_eq!((status, rule.as_str()), (200, ""), "{client}");
        slowest = slowest.max(took);
    }
    assert!(slowest < Duration::from_secs(10), "a verdict took {slowest:?}");
    eprintln!("silent DNS: slowest pending verdict {slowest:?} (verdict-wait-ms 100)");
    // The published ranges still verify without DNS: 66.249.66.1 is Googlebot's.
    let (status, rule, _) = ask(&server, "66.249.66.1", GOOGLEBOT).await;
    assert_eq!((status, rule.as_str()), (200, "search-engines"));
}

#[tokio::test]
async fn a_spray_of_fake_googlebots_costs_at_most_the_lookup_budget() {
    let Some(dns) = Dns::start(RECORDS) else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &dns.server(), "    lookups-per-second 10\n    verdict-wait-ms 50");
    let started = Instant::now();
    let client = reqwest::Client::new();
    let mut tasks = Vec::new();
    let mut latencies = Vec::new();
    // bench/README.md reports a run with SPRAY_CLIENTS=10000.
    let clients: u32 = std::env::var("SPRAY_CLIENTS").ok().and_then(|n| n.parse().ok()).unwrap_or(2000);
    for i in 0..clients {
        let (client, url) = (client.clone(), server.verdict_url());
        tasks.push(tokio::spawn(async move {
            let address = format!("10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255);
            let asked = Instant::now();
            let response = client
                .get(url)
                .header("user-agent", GOOGLEBOT)
                .header("x-forwarded-for", address)
                .send()
                .await
                .unwrap();
            let rule = header(response.headers(), "x-quagmire-rule").to_string();
            (response.status().as_u16(), rule, asked.elapsed())
        }));
        if tasks.len() == 64 {
            for task in tasks.drain(..) {
                let (status, rule, took) = task.await.unwrap();
                latencies.push(took);
                // No PTR (an impostor) once asked; pending (judged like anyone) when over budget.
                assert!(
                    matches!((status, rule.as_str()), (403, "search-engines") | (200, "")),
                    "{status} {rule}"
                );
            }
        }
    }
    for task in tasks {
        latencies.push(task.await.unwrap().2);
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort();
    let p99 = latencies[latencies.len() * 99 / 100];
    let (_, _, text) = get(&format!("http://{}/metrics", server.verdict), "localhost").await;
    let count = |answer: &str| -> f64 {
        let prefix = format!("quagmire_dns_verifications_total{{check=\"{answer}\"}} ");
        text.lines().find_map(|line| line.strip_prefix(&prefix)).map_or(0.0, |n| n.parse().unwrap())
    };
    let started_lookups = count("verified") + count("refused") + count("unknown");
    // A burst of 10, then 10 a second (plus lookups still in flight when counted).
    assert!(
        started_lookups <= 10.0 + 10.0 * elapsed + 10.0,
        "{started_lookups} verifications in {elapsed:.1} s"
    );
    assert!(count("over_budget") > 0.0, "{text}");
    eprintln!(
        "spray: {clients} fake Googlebots in {elapsed:.1} s, {started_lookups} verifications \
         ({:.1}/s), {} over budget, verdict p99 {p99:?} (64 in flight)",
        started_lookups / elapsed,
        count("over_budget")
    );
    // The service still answers someone who claims no crawler, judged as anyone (how fast it
    // does under a spray is bench/README's figure, not a timed test's).
    let (status, rule, _) = ask(&server, "192.0.2.1", "Mozilla/5.0").await;
    assert_eq!((status, rule.as_str()), (200, ""));
}

#[test]
fn explain_shows_the_verification() {
    let Some(dns) = Dns::start(RECORDS) else { return };
    let dir = tempfile::tempdir().unwrap();
    let config =
        write_file(dir.path(), "quagmire.kdl", &format!("dns {{ servers \"{}\"; }}\n", dns.server()));
    let output = quagmire()
        .args([
            "explain",
            "--config",
            &config,
            "--ip",
            "198.51.100.10",
            "-H",
            &format!("User-Agent: {GOOGLEBOT}"),
        ])
        .env("QUAGMIRE_SECRET", crate::support::SECRET)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(
            "crawler     claims Googlebot: reverse-dns (PTR crawl-198-51-100-10.googlebot.com., which resolves back)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("verdict     allow by search-engines: verified Googlebot (reverse-dns)"),
        "{stdout}"
    );
}

/// `replay` asks DNS as live verdicts do: a Googlebot impostor outside Google's ranges (its PTR in
/// another domain) is trapped, the real one allowed, each address asked once; with `--no-dns` the
/// impostor stays pending and passes, and the report says so.
#[test]
fn replay_verifies_crawler_claims_by_reverse_dns_as_live_does() {
    let Some(dns) = Dns::start(RECORDS) else { return };
    let dir = tempfile::tempdir().unwrap();
    let config =
        write_file(dir.path(), "quagmire.kdl", &format!("dns {{ servers \"{}\"; }}\n", dns.server()));
    let line = |second: u32, client: &str| {
        format!(
            r#"{{"time":"2026-12-05T10:00:{second:02}Z","client":"{client}","uri":"/articles/hello","host":"site.example","headers":{{"user-agent":"{GOOGLEBOT}","accept":"*/*"}}}}"#
        )
    };
    let log = [line(1, "198.51.100.12"), line(2, "198.51.100.10"), line(3, "198.51.100.12")].join("\n");
    let log = write_file(dir.path(), "access.jsonl", &format!("{log}\n"));
    let replay = |extra: &[&str]| {
        let verdicts = dir.path().join("verdicts.jsonl");
        let output = quagmire()
            .args(["replay", "--config", &config, "--quiet", "--verdicts"])
            .arg(&verdicts)
            .args(extra)
            .arg(&log)
            .env("QUAGMIRE_SECRET", crate::support::SECRET)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
        let verdicts: Vec<(String, String)> = std::fs::read_to_string(verdicts)
            .unwrap()
            .lines()
            .map(|line| {
                let record: serde_json::Value = serde_json::from_str(line).unwrap();
                (record["verdict"].as_str().unwrap().into(), record["rule"].as_str().unwrap().into())
            })
            .collect();
        (stdout, verdicts)
    };
    let pair = |verdict: &str, rule: &str| (verdict.to_string(), rule.to_string());

    let (stdout, verdicts) = replay(&[]);
    assert_eq!(
        verdicts,
        [pair("trap", "search-engines"), pair("allow", "search-engines"), pair("trap", "search-engines")],
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "Crawler claims outside the published ranges: 3 lines; 2 reverse DNS lookups: 1 confirmed, 1 refuted, 0 unanswered"
        ),
        "{stdout}"
    );

    let (stdout, verdicts) = replay(&["--no-dns"]);
    assert_eq!(verdicts, [pair("allow", ""), pair("allow", ""), pair("allow", "")], "{stdout}");
    assert!(stdout.contains("No DNS (--no-dns)"), "{stdout}");
}
