//! Signature bases and verification with a key made here, signed here: the request as a proxy
//! forwards it, and what makes a signature count.

use std::net::IpAddr;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ed25519_dalek::{Signer, SigningKey};
use web_bot_auth::keyring::{KeyRing, Thumbprintable};

use super::*;
use crate::client::ClientIdentity;
use crate::client_state::History;
use crate::config::Config;
use crate::enrich::geo::GeoInfo;

/// A test agent's key and its JWK thumbprint.
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

    fn directory(&self) -> Keys {
        let mut keys = KeyRing::default();
        keys.try_import_jwk(&Agent::jwk(&self.key)).unwrap();
        Keys::Found(Directory { keys: Arc::new(keys), keep: Duration::from_secs(300) })
    }

    /// `Signature-Input` and `Signature` for `components` (serialized identifier, value) with
    /// these parameters after the list, written out as RFC 9421 section 2.5 builds the base.
    fn sign(&self, components: &[(&str, &str)], parameters: &str) -> (String, String) {
        let list: Vec<&str> = components.iter().map(|(name, _)| *name).collect();
        let params = format!("({}){parameters}", list.join(" "));
        let mut base = String::new();
        for (name, value) in components {
            base.push_str(&format!("{name}: {value}\n"));
        }
        base.push_str(&format!("\"@signature-params\": {params}"));
        let signature = self.key.sign(base.as_bytes());
        (format!("sig1={params}"), format!("sig1=:{}:", STANDARD.encode(signature.to_bytes())))
    }

    fn parameters(&self, created: i64, expires: i64) -> String {
        format!(
            ";created={created};expires={expires};keyid=\"{}\";alg=\"ed25519\";tag=\"web-bot-auth\"",
            self.keyid
        )
    }
}

fn signatures(allow_http: bool) -> Signatures {
    let mut config = Config::parse("test.kdl", "", std::path::Path::new(".")).unwrap().web_bot_auth;
    config.allow_http = allow_http;
    Signatures::new(&config, Arc::new(Metrics::new()))
}

fn facts(method: &str, host: &str, uri: &str, headers: &[(&str, &str)]) -> Facts {
    let address: IpAddr = "198.51.100.7".parse().unwrap();
    Facts {
        method: method.into(),
        proto: "https".into(),
        host: host.into(),
        uri: uri.into(),
        raw_uri: None,
        dot_segments: false,
        headers: headers.iter().copied().collect(),
        address,
        key: ClientIdentity::new(vec![], 32, 64).key(address),
        geo: GeoInfo::default(),
        history: History::default(),
        is_trap_url: false,
        crawler: None,
        signature: None,
        robots: Default::default(),
        crowdsec: None,
        coverage: Default::default(),
        pass: None,
        challenges: 0,
        owner_tool: None,
        ai_kind: None,
    }
}

const AGENT: &str = "\"https://signer.example\"";

/// A request signed over the components the drafts use, as the agent sent it.
fn signed_request(agent: &Agent, path: &str, created: i64, expires: i64) -> Vec<(String, String)> {
    let (input, signature) = agent.sign(
        &[
            ("\"@authority\"", "example.org"),
            ("\"@method\"", "GET"),
            ("\"@path\"", path),
            ("\"@target-uri\"", &format!("https://example.org{path}?q=1")),
            ("\"signature-agent\"", AGENT),
            ("\"accept\"", "text/html"),
        ],
        &agent.parameters(created, expires),
    );
    vec![
        ("accept".into(), "text/html".into()),
        ("signature-agent".into(), AGENT.into()),
        ("signature-input".into(), input),
        ("signature".into(), signature),
    ]
}

fn check_with(signatures: &Signatures, agent: &Agent, facts: &Facts) -> Option<Signature> {
    signatures.flights.insert(Arc::from("https://signer.example"), agent.directory());
    signatures.check_now(facts)
}

fn as_pairs(headers: &[(String, String)]) -> Vec<(&str, &str)> {
    headers.iter().map(|(name, value)| (name.as_str(), value.as_str())).collect()
}

#[test]
fn a_signature_over_the_forwarded_request_verifies_and_names_its_agent() {
    let agent = Agent::new();
    let signatures = signatures(false);
    let now = unix_now();
    let headers = signed_request(&agent, "/articles/1", now, now + 300);
    let request = facts("GET", "example.org", "/articles/1?q=1", &as_pairs(&headers));
    let signature = check_with(&signatures, &agent, &request).unwrap();
    assert_eq!(
        (signature.check, signature.agent.as_str()),
        (SignatureCheck::Verified, "signer.example"),
        "{signature:?}"
    );

    // The proxy may forward the host with the default port, or in capitals: the same authority.
    let request = facts("GET", "Example.org:443", "/articles/1?q=1", &as_pairs(&headers));
    assert_eq!(check_with(&signatures, &agent, &request).unwrap().check, SignatureCheck::Verified);

    // Another path, method, host or accepted type: the signature no longer matches.
    for (method, host, uri) in [
        ("GET", "example.org", "/articles/2?q=1"),
        ("POST", "example.org", "/articles/1?q=1"),
        ("GET", "other.example", "/articles/1?q=1"),
        ("GET", "example.org", "/articles/1?q=2"),
    ] {
        let request = facts(method, host, uri, &as_pairs(&headers));
        let signature = check_with(&signatures, &agent, &request).unwrap();
        assert_eq!(signature.check, SignatureCheck::Invalid, "{method} {host}{uri}: {signature:?}");
    }
    let mut changed = headers.clone();
    changed[0].1 = "*/*".into();
    let request = facts("GET", "example.org", "/articles/1?q=1", &as_pairs(&changed));
    assert_eq!(check_with(&signatures, &agent, &request).unwrap().check, SignatureCheck::Invalid);
}

#[test]
fn expired_future_untagged_or_agentless_signatures_are_invalid_before_any_fetch() {
    let agent = Agent::new();
    let signatures = signatures(false);
    let now = unix_now();
    let invalid = |headers: Vec<(String, String)>, expected: &str| {
        // No directory cached: an invalid signature is refused without one.
        let request = facts("GET", "example.org", "/articles/1?q=1", &as_pairs(&headers));
        let signature = signatures.check_now(&request).unwrap();
        assert_eq!(signature.check, SignatureCheck::Invalid, "{expected}: {signature:?}");
        assert!(signature.detail.contains(expected), "{expected}: {signature:?}");
    };
    invalid(signed_request(&agent, "/articles/1", now - 3600, now - 600), "expired");
    invalid(signed_request(&agent, "/articles/1", now + 600, now + 900), "in the future");
    // Within the allowed skew, it still counts (pending: its directory is not fetched yet).
    let headers = signed_request(&agent, "/articles/1", now + 30, now + 300);
    let request = facts("GET", "example.org", "/articles/1?q=1", &as_pairs(&headers));
    assert_eq!(signatures.check_now(&request).unwrap().check, SignatureCheck::Pending);

    // Not covering signature-agent.
    let (input, signature) =
        agent.sign(&[("\"@authority\"", "example.org")], &agent.parameters(now, now + 300));
    let headers = vec![
        ("signature-agent".into(), AGENT.into()),
        ("signature-input".into(), input.clone()),
        ("signature".into(), signature.clone()),
    ];
    invalid(headers, "no web-bot-auth signature");
    // No Signature-Agent at all.
    let headers = vec![("signature-input".into(), input), ("signature".into(), signature)];
    invalid(headers, "no Signature-Agent");
    // Another tag.
    let parameters = agent.parameters(now, now + 300).replace("web-bot-auth", "other");
    let (input, signature) =
        agent.sign(&[("\"@authority\"", "example.org"), ("\"signature-agent\"", AGENT)], &parameters);
    let headers = vec![
        ("signature-agent".into(), AGENT.into()),
        ("signature-input".into(), input),
        ("signature".into(), signature),
    ];
    invalid(headers, "no web-bot-auth signature");
    // A Signature without its input.
    invalid(vec![("signature".into(), "sig1=:AAAA:".into())], "Signature-Input");
}

#[test]
fn only_https_agents_count_unless_http_is_allowed_and_keys_must_be_in_the_directory() {
    let agent = Agent::new();
    let now = unix_now();
    let http_agent = "\"http://127.0.0.1:8080/some/path\"";
    let (input, signature) = agent.sign(
        &[("\"@authority\"", "example.org"), ("\"signature-agent\"", http_agent)],
        &agent.parameters(now, now + 300),
    );
    let headers = [("signature-agent", http_agent), ("signature-input", &input), ("signature", &signature)];
    let request = facts("GET", "example.org", "/", &headers);
    let refused = signatures(false).check_now(&request).unwrap();
    assert_eq!(refused.check, SignatureCheck::Invalid);
    assert!(refused.detail.contains("https://"), "{refused:?}");
    let allowed = signatures(true);
    // The origin, not the path, keys the directory.
    allowed.flights.insert(Arc::from("http://127.0.0.1:8080"), agent.directory());
    let signature = allowed.check_now(&request).unwrap();
    assert_eq!(
        (signature.check, signature.agent.as_str()),
        (SignatureCheck::Verified, "127.0.0.1"),
        "{signature:?}"
    );

    // Signed by a key its agent does not publish.
    let stranger = Agent::new();
    let headers = signed_request(&stranger, "/", now, now + 300);
    let request = facts("GET", "example.org", "/?q=1", &as_pairs(&headers));
    let signature = check_with(&signatures(false), &agent, &request).unwrap();
    assert_eq!(signature.check, SignatureCheck::Invalid);
    assert!(signature.detail.contains("is not in"), "{signature:?}");

    // A failed fetch proves nothing: pending.
    let signatures = signatures(false);
    signatures.flights.insert(Arc::from("https://signer.example"), Keys::Failed(Arc::from("down")));
    let headers = signed_request(&agent, "/", now, now + 300);
    let request = facts("GET", "example.org", "/?q=1", &as_pairs(&headers));
    assert_eq!(signatures.check_now(&request).unwrap().check, SignatureCheck::Pending);
}

#[test]
fn a_dictionary_signature_agent_is_read_by_the_member_the_signature_covers() {
    let agent = Agent::new();
    let now = unix_now();
    let header = "agent1=\"https://signer.example\", agent2=\"https://elsewhere.example\"";
    let (input, signature) = agent.sign(
        &[("\"@authority\"", "example.org"), ("\"signature-agent\";key=\"agent1\"", AGENT)],
        &agent.parameters(now, now + 300),
    );
    let headers = [("signature-agent", header), ("signature-input", &input), ("signature", &signature)];
    let request = facts("GET", "example.org", "/", &headers);
    let signature = check_with(&signatures(false), &agent, &request).unwrap();
    assert_eq!(
        (signature.check, signature.agent.as_str()),
        (SignatureCheck::Verified, "signer.example"),
        "{signature:?}"
    );
}

#[test]
fn unsigned_requests_and_a_switched_off_check_have_no_signature() {
    let request = facts("GET", "example.org", "/", &[("accept", "*/*")]);
    assert_eq!(signatures(false).check_now(&request), None);
    let agent = Agent::new();
    let now = unix_now();
    let headers = signed_request(&agent, "/", now, now + 300);
    let request = facts("GET", "example.org", "/?q=1", &as_pairs(&headers));
    let mut config = Config::parse("test.kdl", "web-bot-auth { enabled #false; }", std::path::Path::new("."))
        .unwrap()
        .web_bot_auth;
    assert!(!config.enabled);
    config.allow_http = true;
    assert_eq!(Signatures::new(&config, Arc::new(Metrics::new())).check_now(&request), None);
}

#[test]
fn directories_are_kept_by_max_age_within_bounds_and_read_for_ed25519_keys_only() {
    use directory::{MAX_KEEP, MIN_KEEP, keep_for, parse_keys};
    assert_eq!(keep_for(["public, max-age=7200"].into_iter()), Duration::from_secs(7200));
    assert_eq!(keep_for(["no-cache, max-age=0"].into_iter()), MIN_KEEP);
    assert_eq!(keep_for(["max-age=99999999"].into_iter()), MAX_KEEP);
    assert_eq!(keep_for(["max-age=600", "s-maxage=900"].into_iter()), Duration::from_secs(600));
    assert_eq!(keep_for(std::iter::empty()), Duration::from_secs(3600));

    let agent = Agent::new();
    let x = URL_SAFE_NO_PAD.encode(agent.key.verifying_key().as_bytes());
    let body = format!(
        r#"{{"keys":[{{"kty":"RSA","e":"AQAB","n":"abc"}},{{"kty":"weird"}},{{"kty":"OKP","crv":"Ed25519","x":"{x}","use":"sig"}}]}}"#
    );
    let keys = parse_keys(body.as_bytes()).unwrap();
    assert!(keys.get(&agent.keyid).is_some());
    assert!(parse_keys(b"<html>").is_err());
    assert!(parse_keys(b"{\"no\": 1}").is_err());
}

#[test]
fn signatures_with_bad_windows_are_invalid() {
    let agent = Agent::new();
    let signatures = signatures(false);
    let now = unix_now();
    for (created, expires, expected) in [
        // Made long ago to last a century: what a replay kit would carry.
        (1, 4_102_444_800, "longer than the 3600 s"),
        (now - 10, 4_102_444_800, "longer than the 3600 s"),
        (now, now + MAX_WINDOW + 1, "longer than the 3600 s"),
        (now + 30, now + 10, "expires is not after created"),
        (now, now, "expires is not after created"),
    ] {
        let headers = signed_request(&agent, "/articles/1", created, expires);
        let request = facts("GET", "example.org", "/articles/1?q=1", &as_pairs(&headers));
        let signature = check_with(&signatures, &agent, &request).unwrap();
        assert_eq!(signature.check, SignatureCheck::Invalid, "{created}..{expires}: {signature:?}");
        assert!(signature.detail.contains(expected), "{created}..{expires}: {signature:?}");
    }
    // The longest window allowed verifies.
    let headers = signed_request(&agent, "/articles/1", now, now + MAX_WINDOW);
    let request = facts("GET", "example.org", "/articles/1?q=1", &as_pairs(&headers));
    assert_eq!(check_with(&signatures, &agent, &request).unwrap().check, SignatureCheck::Verified);
}

#[test]
fn a_signature_with_a_nonce_verifies_once_and_its_replay_is_invalid() {
    let agent = Agent::new();
    let signatures = signatures(false);
    let now = unix_now();
    let signed = |nonce: &str| {
        let parameters = format!("{};nonce=\"{nonce}\"", agent.parameters(now, now + 300));
        let (input, signature) =
            agent.sign(&[("\"@authority\"", "example.org"), ("\"signature-agent\"", AGENT)], &parameters);
        vec![
            ("signature-agent".to_string(), AGENT.to_string()),
            ("signature-input".to_string(), input),
            ("signature".to_string(), signature),
        ]
    };
    let first = signed("n-1");
    let request = facts("GET", "example.org", "/", &as_pairs(&first));
    assert_eq!(check_with(&signatures, &agent, &request).unwrap().check, SignatureCheck::Verified);
    // The same signed request again, as a replay from anywhere: refused.
    let replay = check_with(&signatures, &agent, &request).unwrap();
    assert_eq!(replay.check, SignatureCheck::Invalid, "{replay:?}");
    assert!(replay.detail.contains("a replay"), "{replay:?}");
    // A fresh nonce verifies.
    let request = facts("GET", "example.org", "/", &as_pairs(&signed("n-2")));
    assert_eq!(check_with(&signatures, &agent, &request).unwrap().check, SignatureCheck::Verified);
}

/// A key directory for `agent` on 127.0.0.1:0; its origin.
async fn directory_on_loopback(agent: &Agent) -> String {
    let x = URL_SAFE_NO_PAD.encode(agent.key.verifying_key().as_bytes());
    let body = format!(r#"{{"keys":[{{"kty":"OKP","crv":"Ed25519","x":"{x}"}}]}}"#);
    let app = axum::Router::new()
        .route(directory::WELL_KNOWN_PATH, axum::routing::get(move || async move { body }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}")
}

/// A listener on 127.0.0.1:0 that accepts and never answers; its origin.
async fn silent_origin() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    format!("http://{address}")
}

#[tokio::test]
async fn a_spray_of_forged_agents_does_not_keep_a_known_agent_from_its_next_fetch() {
    let agent = Agent::new();
    let known = directory_on_loopback(&agent).await;
    let mut config = Config::parse("test.kdl", "", std::path::Path::new(".")).unwrap().web_bot_auth;
    (config.allow_http, config.allow_private) = (true, true);
    (config.fetches_per_second, config.max_pending, config.timeout) = (100, 2, Duration::from_secs(5));
    let signatures = Signatures::new(&config, Arc::new(Metrics::new()));
    // The agent's directory was fetched before...
    let known_origin: Arc<str> = Arc::from(known.as_str());
    let mut first = signatures.start(known_origin.clone()).expect("a fetch");
    let keys = first.wait_for(Option::is_some).await.unwrap().clone();
    assert!(matches!(keys, Some(Keys::Found(_))), "{keys:?}");
    assert!(signatures.known.contains_key(&known_origin));
    // ...and its cached copy has since expired (an empty cache stands for that).
    let signatures = Signatures { flights: directory_flights(&config), ..signatures };

    // Forged agents, free to mint, take every general slot and hang.
    let mut spray = Vec::new();
    for _ in 0..4 {
        spray.push(signatures.start(Arc::from(silent_origin().await.as_str())));
    }
    assert_eq!(spray.iter().filter(|started| started.is_some()).count(), 2, "the general budget");
    // The known agent still gets its fetch, from the reserve, and it verifies.
    let mut receiver = signatures.start(known_origin).expect("the reserve is the known agent's");
    let keys = receiver.wait_for(Option::is_some).await.unwrap().clone();
    assert!(matches!(keys, Some(Keys::Found(_))), "{keys:?}");
}

#[test]
fn an_uppercase_scheme_is_https_and_every_key_within_the_size_cap_is_read() {
    assert_eq!(
        origin("HTTPS://Signer.Example/path", false),
        Ok(("https://signer.example".to_string(), "signer.example".to_string()))
    );
    assert!(origin("HTTP://signer.example", false).is_err());
    // A directory with 100 keys, the signer's near the end: read (it was dropped past the 64th).
    let signer = Agent::new();
    let mut keys: Vec<String> = (0..99)
        .map(|_| {
            let x = URL_SAFE_NO_PAD.encode(Agent::new().key.verifying_key().as_bytes());
            format!(r#"{{"kty":"OKP","crv":"Ed25519","x":"{x}"}}"#)
        })
        .collect();
    let x = URL_SAFE_NO_PAD.encode(signer.key.verifying_key().as_bytes());
    keys.insert(90, format!(r#"{{"kty":"OKP","crv":"Ed25519","x":"{x}"}}"#));
    let body = format!(r#"{{"keys":[{}]}}"#, keys.join(","));
    assert!(body.len() < directory::MAX_BYTES);
    assert!(directory::parse_keys(body.as_bytes()).unwrap().get(&signer.keyid).is_some());
}
