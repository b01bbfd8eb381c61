//! The third hardening round's attacks, each replayed against the real routers in process (the
//! verdict, the answer path, the trap), with the request headers the attack used: one client
//! locking everyone at its address out of the challenge, one network using up the memory of
//! answers, another site's images trapping their readers, a pass in a second `Cookie` field.

use axum::http::Request;
use quagmire::{trap_router, verdict_router};

use crate::support::{app, attribute, call, hrefs, solve};

const CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36";
const SAFARI: &str = "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15";

/// A browser's page view of `uri` from `client`, as Caddy's forward_auth asks for it, with
/// `extra` headers.
fn view(client: &str, user_agent: &str, uri: &str, extra: &[(&str, &str)]) -> axum::http::request::Builder {
    let mut request = Request::get("/verdict")
        .header("x-forwarded-for", client)
        .header("x-forwarded-proto", "https")
        .header("x-forwarded-host", "site.example")
        .header("x-forwarded-uri", uri)
        .header("user-agent", user_agent)
        .header("accept", "text/html,application/xhtml+xml,*/*;q=0.8");
    let mut has_fetch_metadata = false;
    for (name, value) in extra {
        has_fetch_metadata |= name.starts_with("sec-fetch-");
        request = request.header(*name, *value);
    }
    if !has_fetch_metadata {
        request = request
            .header("sec-fetch-site", "none")
            .header("sec-fetch-mode", "navigate")
            .header("sec-fetch-dest", "document");
    }
    request
}

/// The verdict (`allow`, `trap`, `challenge`) and its rule.
async fn judged(router: &axum::Router, request: axum::http::request::Builder) -> (String, String) {
    let (_, headers, _) = call(router, request, "").await;
    let text = |name: &str| headers.get(name).map_or("", |value| value.to_str().unwrap()).to_string();
    (text("x-quagmire-verdict"), text("x-quagmire-rule"))
}

/// A pass earned at `client` as the page's script earns it: the cookie (`quagmire_pass=...`).
async fn earn_pass(router: &axum::Router, client: &str, user_agent: &str) -> Result<String, String> {
    let page = Request::get("/challenge").header("x-forwarded-for", client).header("user-agent", user_agent);
    let (_, _, page) = call(router, page, "").await;
    let (challenge, bits) = (attribute(&page, "data-challenge"), attribute(&page, "data-difficulty"));
    let nonce = solve(&challenge, bits.parse().unwrap());
    let answer = Request::get(format!("/.quagmire/answer?c={challenge}&n={nonce}&to=%2F"))
        .header("x-forwarded-for", client)
        .header("user-agent", user_agent);
    let (status, headers, body) = call(router, answer, "").await;
    if status != 303 {
        return Err(format!(
            "{status}: {}",
            body.lines().find(|line| line.contains("not accepted") || line.contains("queue")).unwrap_or("")
        ));
    }
    Ok(headers["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string())
}

#[tokio::test]
async fn one_clients_unanswered_challenges_never_lock_the_next_person_at_its_address_out() {
    let verdicts = verdict_router(app("challenge {\n  everyone #true\n}\n"));
    let (scraper, neighbour) = ("2001:db8:1:2::7", "2001:db8:1:2::8");
    // A program reading challenge pages and never answering: trapped once it has left five.
    for n in 0..5 {
        assert_eq!(judged(&verdicts, view(scraper, CHROME, "/docs", &[])).await.0, "challenge", "view {n}");
    }
    assert_eq!(
        judged(&verdicts, view(scraper, CHROME, "/docs", &[])).await,
        ("trap".to_string(), "unanswered-challenges".to_string())
    );
    // A person with another browser behind the same address, and the next address in the /64:
    // shown a challenge, every time, never the trap.
    for _ in 0..3 {
        assert_eq!(judged(&verdicts, view(scraper, SAFARI, "/docs", &[])).await.0, "challenge");
    }
    assert_eq!(judged(&verdicts, view(neighbour, CHROME, "/docs", &[])).await.0, "challenge");
}

#[tokio::test]
async fn a_challenge_page_fetched_from_the_answer_path_is_a_challenge_shown() {
    let verdicts = verdict_router(app("challenge {\n  everyone #true\n}\n"));
    let client = "198.51.100.9";
    for _ in 0..5 {
        let bare =
            Request::get("/.quagmire/answer").header("x-forwarded-for", client).header("user-agent", CHROME);
        let (status, _, page) = call(&verdicts, bare, "").await;
        assert_eq!(status, 403);
        assert!(page.contains("data-challenge"), "the answer path shows a fresh challenge");
    }
    assert_eq!(judged(&verdicts, view(client, CHROME, "/docs", &[])).await.1, "unanswered-challenges");
}

#[tokio::test]
async fn one_network_minting_passes_cannot_stop_anyone_else_from_earning_one() {
    let verdicts = verdict_router(app("challenge {\n  difficulty 1\n}\n"));
    // A farm on one /24 earning passes as fast as it can: its quota, then refusals, for it only.
    let mut earned = 0;
    let refused = loop {
        match earn_pass(&verdicts, &format!("203.0.113.{}", earned % 200 + 1), CHROME).await {
            Ok(_) => earned += 1,
            Err(refusal) => break refusal,
        }
        assert!(earned <= 1000, "the farm's network was never refused");
    };
    // 128: the answer path's own quota per network, above what a datacenter network's turns
    // allow in a lifetime (this test's networks have no ASN: no turns, only this quota).
    assert_eq!(earned, 128, "answers accepted from one /24 within a challenge's lifetime");
    // Refused as busy: a page that waits and tries again by itself, not a new challenge.
    assert!(refused.starts_with("429") && refused.contains("queue"), "{refused}");
    // People on other networks, IPv4 and IPv6, earn theirs as ever.
    for person in ["198.51.100.7", "192.0.2.44", "2001:db8:9::1"] {
        earn_pass(&verdicts, person, SAFARI).await.unwrap();
    }
}

#[tokio::test]
async fn a_pass_sent_in_a_cookie_field_of_its_own_is_read() {
    let verdicts = verdict_router(app("challenge {\n  everyone #true\n}\n"));
    let client = "198.51.100.30";
    let pass = earn_pass(&verdicts, client, CHROME).await.unwrap();
    // HTTP/2 and HTTP/3 send each cookie as a field of its own; a proxy may forward them so.
    let split = view(client, CHROME, "/docs", &[("cookie", "theme=dark"), ("cookie", &pass)]);
    assert_eq!(judged(&verdicts, split).await.0, "allow");
    let joined = view(client, CHROME, "/docs", &[("cookie", &format!("theme=dark; {pass}"))]);
    assert_eq!(judged(&verdicts, joined).await.0, "allow");
}

#[tokio::test]
async fn another_sites_trap_images_trap_none_of_its_readers() {
    let app = app("");
    let (verdicts, trap) = (verdict_router(app.clone()), trap_router(app));
    // Trap URLs are public: anyone can collect them from a trap page.
    let (_, _, page) = call(&trap, Request::get("/").header("host", "site.example"), "").await;
    let links: Vec<String> = hrefs(&page).into_iter().filter(|href| href.starts_with('/')).take(6).collect();
    assert_eq!(links.len(), 6, "{page}");
    let (reader, person) = ("198.51.100.40", "198.51.100.40");
    let pass = earn_pass(&verdicts, reader, CHROME).await.unwrap();
    // Six <img src="https://site.example/trap-url"> on another site: cross-site image requests,
    // through the verdict (the trap-url rule answers each, as it should) and the trap listener.
    let image = [
        ("sec-fetch-site", "cross-site"),
        ("sec-fetch-mode", "no-cors"),
        ("sec-fetch-dest", "image"),
        ("referer", "https://elsewhere.example/"),
        ("accept", "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"),
    ];
    for link in &links {
        assert_eq!(judged(&verdicts, view(reader, CHROME, link, &image)).await.1, "trap-url");
        let mut fetched =
            Request::get(link.as_str()).header("host", "site.example").header("x-forwarded-for", reader);
        for (name, value) in image {
            fetched = fetched.header(name, value);
        }
        call(&trap, fetched, "").await;
    }
    // The reader's next page, with its pass, and someone else's at that address: the site.
    let next = view(reader, CHROME, "/docs", &[("cookie", &pass)]);
    assert_eq!(judged(&verdicts, next).await, ("allow".to_string(), String::new()));
    assert_eq!(judged(&verdicts, view(person, SAFARI, "/docs", &[])).await.0, "allow");

    // A crawler asking for the same URLs itself is evidence as ever.
    let crawler = "198.51.100.41";
    for link in &links {
        let asked =
            view(crawler, CHROME, link, &[("sec-fetch-site", "same-origin"), ("sec-fetch-dest", "document")]);
        assert_eq!(judged(&verdicts, asked).await.1, "trap-url");
    }
    assert_eq!(judged(&verdicts, view(crawler, CHROME, "/docs", &[])).await.1, "trap-score");
}

#[tokio::test]
async fn decoys_from_one_network_push_no_attacker_off_the_blocklist() {
    let app = app("");
    let (verdicts, trap) = (verdict_router(app.clone()), trap_router(app));
    let (_, _, page) = call(&trap, Request::get("/").header("host", "site.example"), "").await;
    let link = hrefs(&page).into_iter().find(|href| href.starts_with('/')).unwrap();
    let walk = |client: String, hits: usize| {
        let (verdicts, link) = (verdicts.clone(), link.clone());
        async move {
            for _ in 0..hits {
                let asked = Request::get("/verdict")
                    .header("x-forwarded-for", client.as_str())
                    .header("x-forwarded-uri", link.as_str())
                    .header("user-agent", "python-requests/2.31");
                call(&verdicts, asked, "").await;
            }
        }
    };
    // 1,040 IPv6 /64s of one /48 with 8 trap hits each, and one real attacker with 6.
    for n in 0..1040u32 {
        walk(format!("2001:db8:77:{n:x}::1"), 8).await;
    }
    walk("203.0.113.50".to_string(), 6).await;

    let (status, headers, list) = call(&verdicts, Request::get("/api/blocklist"), "").await;
    assert_eq!(status, 200);
    assert!(list.lines().any(|line| line == "203.0.113.50"), "{list}");
    assert!(list.lines().any(|line| line.starts_with("2001:db8:77:")), "{list}");
    assert_eq!(headers["x-quagmire-left-out"], "0");
    // /api/trapped's thousand: the attacker's network among them, and the cut said.
    let (_, headers, trapped) = call(&verdicts, Request::get("/api/trapped?limit=1000"), "").await;
    assert!(trapped.contains("\"203.0.113.50\""), "the attacker is on /api/trapped");
    // 1,040 decoys, the attacker, and the loopback peer that fetched the first trap page.
    assert_eq!(headers["x-quagmire-left-out"], "42");
}
