//! Web Bot Auth end to end: requests signed here with a key made here, forwarded as Traefik
//! would, verified against a key directory served by a local HTTP server; tampered, expired and
//! unknown-key signatures; a directory that is down or never answers; one fetch for many requests.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ed25519_dalek::{Signer, SigningKey};
use web_bot_auth::keyring::Thumbprintable;

use crate::support::{Server, header, verdict, write_file};

/// Rules that name what they saw: the deciding rule is the signature's state.
const RULES: &str = r#"return {
  { name = "verified", check = function(r)
      if r.signature_check == "verified" and r.signed_agent == "127.0.0.1" then return "allow", r.signed_agent end
    end },
  { name = "invalid", check = function(r) if r.signature_check == "invalid" then return "trap" end end },
  { name = "pending", check = function(r)
      if r.signature_check == "pending" and r.signed_agent == nil then return "allow" end
    end },
  { name = "unsigned", check = function(r) if r.signature_check == "unsigned" then return "allow" end end },
}"#;

struct Agent {
    key: SigningKey,
    keyid: String,
}

impl Agent {
    fn new() -> Agent {
        let key = SigningKey::from_bytes(&rand::random::<[u8; 32]>());
        let keyid = Agent::jwk(&key).b64_thumbprint();
        Agent { key, keyid }
    }

    fn jwk(key: &SigningKey) -> Thumbprintable {
        Thumbprintable::OKP {
            crv: "Ed25519".into(),
            x: URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes()),
        }
    }

    fn directory(&self) -> String {
        let x = URL_SAFE_NO_PAD.encode(self.key.verifying_key().as_bytes());
        format!(r#"{{"keys":[{{"kty":"OKP","crv":"Ed25519","x":"{x}"}}]}}"#)
    }

    /// The headers of a request for `path` on site.example, signed as the agent at `agent_url`
    /// signs it (RFC 9421: `@authority`, `@method`, `@path`, `signature-agent`), as created
    /// `age` seconds ago and valid `valid` seconds.
    fn sign(&self, agent_url: &str, path: &str, age: i64, valid: i64) -> Vec<(String, String)> {
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() as i64;
        let (created, expires) = (now - age, now - age + valid);
        let agent = format!("\"{agent_url}\"");
        // A fresh nonce per request, as agents sign: a nonce verifies once.
        let nonce = format!("{:016x}", rand::random::<u64>());
        let params = format!(
            "(\"@authority\" \"@method\" \"@path\" \"signature-agent\");created={created};expires={expires};\
             keyid=\"{}\";alg=\"ed25519\";nonce=\"{nonce}\";tag=\"web-bot-auth\"",
            self.keyid
        );
        let base = format!(
            "\"@authority\": site.example\n\"@method\": GET\n\"@path\": {path}\n\"signature-agent\": {agent}\n\
             \"@signature-params\": {params}"
        );
        let signature = STANDARD.encode(self.key.sign(base.as_bytes()).to_bytes());
        vec![
            ("signature-agent".into(), agent),
            ("signature-input".into(), format!("sig1={params}")),
            ("signature".into(), format!("sig1=:{signature}:")),
        ]
    }
}

/// A key directory on 127.0.0.1:0 serving `body`, counting its requests.
async fn directory_server(body: String) -> (SocketAddr, Arc<AtomicUsize>) {
    let fetches = Arc::new(AtomicUsize::new(0));
    let counted = fetches.clone();
    let app = Router::new().route(
        "/.well-known/http-message-signatures-directory",
        get(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            let body = body.clone();
            async move {
                (
                    [
                        ("content-type", "application/http-message-signatures-directory+json"),
                        ("cache-control", "max-age=600"),
                    ],
                    body,
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (address, fetches)
}

fn start(dir: &std::path::Path, extra: &str) -> Server {
    let rules = write_file(dir, "rules.lua", RULES);
    let config = format!(
        "rules {{ script \"{rules}\"; }}\nweb-bot-auth {{\n    allow-http #true\n    allow-private #true\n{extra}\n}}\n"
    );
    let path = write_file(dir, "quagmire.kdl", &config);
    Server::start(&["--config", &path])
}

/// A verdict for a GET of `path` on site.example with these extra headers, as Traefik forwards
/// it; returns the status, the deciding rule and how long it took.
async fn ask(server: &Server, path: &str, signed: &[(String, String)]) -> (u16, String, Duration) {
    let mut headers: Vec<(&str, &str)> = vec![
        ("user-agent", "ExampleAgent/1.0"),
        ("accept", "*/*"),
        ("x-forwarded-for", "198.51.100.40"),
        ("x-forwarded-method", "GET"),
        ("x-forwarded-proto", "https"),
        ("x-forwarded-host", "site.example"),
        ("x-forwarded-uri", path),
    ];
    headers.extend(signed.iter().map(|(name, value)| (name.as_str(), value.as_str())));
    let started = Instant::now();
    let (status, response) = verdict(server, &headers).await;
    (status, header(&response, "x-quagmire-rule").to_string(), started.elapsed())
}

#[tokio::test]
async fn signed_requests_name_their_agent_and_forgeries_are_invalid() {
    let agent = Agent::new();
    let (address, fetches) = directory_server(agent.directory()).await;
    let agent_url = format!("http://{address}");
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), "    verdict-wait-ms 2000");

    assert_eq!(ask(&server, "/", &[]).await.1, "unsigned");
    // Valid: the rule sees the agent; many requests, one directory fetch.
    for _ in 0..10 {
        let (status, rule, _) =
            ask(&server, "/articles/1", &agent.sign(&agent_url, "/articles/1", 5, 300)).await;
        assert_eq!((status, rule.as_str()), (200, "verified"));
    }
    assert_eq!(fetches.load(Ordering::SeqCst), 1, "the directory is cached");

    // Signed for one path, forwarded for another.
    let (status, rule, _) = ask(&server, "/admin", &agent.sign(&agent_url, "/articles/1", 5, 300)).await;
    assert_eq!((status, rule.as_str()), (403, "invalid"), "tampered path");
    // Expired an hour ago.
    let (status, rule, _) =
        ask(&server, "/articles/1", &agent.sign(&agent_url, "/articles/1", 7200, 3600)).await;
    assert_eq!((status, rule.as_str()), (403, "invalid"), "expired");
    // A key the agent does not publish.
    let stranger = Agent::new();
    let (status, rule, _) =
        ask(&server, "/articles/1", &stranger.sign(&agent_url, "/articles/1", 5, 300)).await;
    assert_eq!((status, rule.as_str()), (403, "invalid"), "unknown key");
    assert_eq!(fetches.load(Ordering::SeqCst), 1);

    let (_, _, metrics) =
        crate::support::get(&format!("http://{}/metrics", server.verdict), "localhost").await;
    assert!(metrics.contains("quagmire_signature_checks_total{check=\"verified\"} 10"), "{metrics}");
    assert!(metrics.contains("quagmire_signature_checks_total{check=\"invalid\"} 3"), "{metrics}");
    assert!(metrics.contains("quagmire_key_directory_fetches_total{check=\"ok\"} 1"), "{metrics}");
}

#[tokio::test]
async fn a_directory_that_is_down_or_silent_leaves_signatures_pending_and_verdicts_fast() {
    let agent = Agent::new();
    // Down: a port nothing listens on any more.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    // Silent: accepts connections and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_address = silent.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), "    verdict-wait-ms 100\n    timeout-ms 20000");
    // A verdict that waited for the silent directory would take its 20 s timeout: one answered
    // in half of that did not wait, however busy the machine.
    let mut slowest = Duration::ZERO;
    for address in [closed, silent_address, closed, silent_address] {
        let signed = agent.sign(&format!("http://{address}"), "/", 5, 300);
        let (status, rule, took) = ask(&server, "/", &signed).await;
        assert_eq!((status, rule.as_str()), (200, "pending"), "{address}");
        slowest = slowest.max(took);
    }
    assert!(slowest < Duration::from_secs(10), "a verdict took {slowest:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_shows_the_signature() {
    let agent = Agent::new();
    let (address, _) = directory_server(agent.directory()).await;
    let dir = tempfile::tempdir().unwrap();
    let config =
        write_file(dir.path(), "quagmire.kdl", "web-bot-auth { allow-http #true; allow-private #true; }\n");
    let mut args: Vec<String> =
        ["explain", "--config", &config, "--host", "site.example", "--uri", "/a"].map(String::from).to_vec();
    for (name, value) in agent.sign(&format!("http://{address}"), "/a", 5, 300) {
        args.extend(["-H".to_string(), format!("{name}: {value}")]);
    }
    let output = tokio::task::spawn_blocking(move || {
        crate::support::quagmire()
            .args(&args)
            .env("QUAGMIRE_SECRET", crate::support::SECRET)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("signature   verified by 127.0.0.1 (key "),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signature_agent_naming_loopback_in_any_spelling_causes_no_connection() {
    let agent = Agent::new();
    // A listener on loopback that counts every connection made to it, on IPv4 and (where the
    // machine has it) on IPv6 at the same port.
    let connections = Arc::new(AtomicUsize::new(0));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut listeners = vec![listener];
    if let Ok(v6) = tokio::net::TcpListener::bind(("::1", port)).await {
        listeners.push(v6);
    }
    for listener in listeners {
        let connections = connections.clone();
        tokio::spawn(async move {
            while let Ok((_socket, _)) = listener.accept().await {
                connections.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
    let dir = tempfile::tempdir().unwrap();
    let rules = write_file(dir.path(), "rules.lua", RULES);
    // http:// allowed (so only the address check stands in the way), private addresses not;
    // an admin listener, which a forged agent must not reach either.
    let config = write_file(
        dir.path(),
        "quagmire.kdl",
        &format!(
            "rules {{ script \"{rules}\"; }}\nadmin {{ listen \"127.0.0.1:0\"; }}\nweb-bot-auth {{\n    allow-http #true\n    verdict-wait-ms 500\n    fetches-per-second 100\n    max-pending 100\n}}\n"
        ),
    );
    let server = Server::start(&["--config", &config]);
    let admin_port = server.admin.expect("an admin listener").port();
    let mut agents: Vec<String> = [
        "localhost",
        "127.0.0.1",
        "2130706433",
        "0x7f.0.0.1",
        "127.1",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
    ]
    .iter()
    .flat_map(|host| [format!("http://{host}:{port}"), format!("https://{host}:{port}")])
    .collect();
    agents.push(format!("http://127.0.0.1:{admin_port}"));
    agents.push(format!("http://localhost:{admin_port}"));
    for agent_url in &agents {
        let (status, rule, _) = ask(&server, "/", &agent.sign(agent_url, "/", 5, 300)).await;
        assert_eq!((status, rule.as_str()), (200, "pending"), "{agent_url}");
    }
    // Every fetch was tried and ended (refused before it connected), so the count of
    // connections below is final, not early.
    let metrics = format!("http://127.0.0.1:{admin_port}/metrics");
    let failed = |text: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix("quagmire_key_directory_fetches_total{check=\"failed\"} "))
            .map_or(0, |n| n.parse::<usize>().unwrap())
    };
    crate::support::eventually("a failed fetch for every forged agent", || async {
        failed(&crate::support::get(&metrics, "localhost").await.2) >= agents.len()
    })
    .await;
    assert_eq!(connections.load(Ordering::SeqCst), 0, "a forged Signature-Agent reached loopback");
    let log = server.new_log_lines().join("\n");
    assert!(!log.contains("panicked"), "{log}");
}
