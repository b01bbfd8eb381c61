//! Trap pages: through a started server where processes or timing matter, through the routers
//! in process otherwise.

use std::time::Instant;

use axum::http::Request;
use quagmire::TrapUrls;
use quagmire::{trap_router, verdict_router};

use crate::support::{SECRET, Server, app, call, get, hrefs, write_file};

#[tokio::test]
async fn same_url_same_page_across_processes_and_other_urls_differ() {
    let first = Server::start(&[]);
    let (status, _, page) = get(&first.trap_url("/blog/2019/quiet-harbor"), "example.org").await;
    assert_eq!(status, 200);
    let (_, _, again) = get(&first.trap_url("/blog/2019/quiet-harbor"), "example.org").await;
    let (_, _, other_path) = get(&first.trap_url("/blog/2019/other"), "example.org").await;
    let (_, _, other_host) = get(&first.trap_url("/blog/2019/quiet-harbor"), "example.com").await;
    drop(first);

    let second = Server::start(&[]);
    let (_, _, restarted) = get(&second.trap_url("/blog/2019/quiet-harbor"), "example.org").await;
    assert_eq!(page, again);
    assert_eq!(page, restarted, "a restart with the same secret serves the same bytes");
    assert_ne!(page, other_path);
    assert_ne!(page, other_host);

    let third = Server::start_with_secret(&[], "a-different-secret-for-this-test");
    let (_, _, other_secret) = get(&third.trap_url("/blog/2019/quiet-harbor"), "example.org").await;
    assert_ne!(page, other_secret);
}

#[tokio::test]
async fn pages_look_like_an_ordinary_sites_pages() {
    let server = Server::start(&[]);
    for target in ["/", "/about", "/wp-login.php?x=1", "/a/b/c/d.html"] {
        let (status, headers, page) = get(&server.trap_url(target), "example.org").await;
        assert_eq!(status, 200);
        assert_eq!(headers["content-type"], "text/html; charset=utf-8");
        for (name, value) in &headers {
            let text = format!("{name}: {}", value.to_str().unwrap()).to_lowercase();
            assert!(!text.contains("quagmire"), "{text}");
        }
        assert!(!page.to_lowercase().contains("quagmire"));
        assert!(page.starts_with("<!DOCTYPE html>"));
        // The rest of the skeleton (header, navigation, footer) is the site's look: its tags vary.
        for part in ["<title>", "<h1>", "<p>", "<style", "href=\"/"] {
            assert!(page.contains(part), "{part} missing in {target}");
        }
        assert!((3_500..=14_000).contains(&page.len()), "{} bytes", page.len());
    }
}

#[tokio::test]
async fn every_link_is_a_trap_url_and_random_urls_are_not() {
    let server = Server::start(&[]);
    let urls = TrapUrls::new(SECRET.as_bytes());
    let mut target = "/start".to_string();
    // Walk the maze as a crawler would: every link must be recognisable by the keyed check.
    for _ in 0..20 {
        let (_, _, page) = get(&server.trap_url(&target), "example.org").await;
        let links = hrefs(&page);
        assert!((8..=15).contains(&links.len()), "{} links", links.len());
        for link in &links {
            assert!(link.starts_with('/') && urls.is_trap(link), "{link}");
        }
        target = links[links.len() / 2].clone();
    }
    let other = TrapUrls::new(b"not the server's secret at all");
    let (_, _, page) = get(&server.trap_url("/"), "example.org").await;
    assert!(hrefs(&page).iter().all(|link| !other.is_trap(link)));
    for random in ["/blog/2019/05/quiet-harbor-letters-winter", "/index.html", "/archive/a-b-c-d"] {
        assert!(!urls.is_trap(random), "{random}");
    }
}

#[tokio::test]
async fn hostile_corpus_text_is_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let mut hostile = String::new();
    for i in 0..400 {
        hostile.push_str(match i % 4 {
            0 => "The <script>alert('x')</script> harbor was quiet that morning. ",
            1 => "Ships came \"home\" & left <img src=x onerror=alert(1)> again at night. ",
            2 => "She wrote </p><a href=\"https://evil.example/\">letters</a> to the keeper. ",
            _ => "Would the winter end before the ships returned? ",
        });
    }
    let corpus = write_file(dir.path(), "hostile.txt", &hostile);
    let config = write_file(
        dir.path(),
        "hostile.kdl",
        &format!("corpus {{\n embedded #false\n path \"{corpus}\"\n}}\n"),
    );
    let server = Server::start(&["--config", &config]);
    for i in 0..20 {
        let (_, _, page) = get(&server.trap_url(&format!("/page/{i}")), "example.org").await;
        for forbidden in ["<script", "<img", "evil.example/\"", "onerror=alert(1)>", "</p><a"] {
            assert!(!page.contains(forbidden), "{forbidden} in page {i}");
        }
        assert!(page.contains("&lt;"), "markup shows as text");
        for link in hrefs(&page) {
            assert!(link.starts_with('/'), "{link}");
        }
    }
}

#[tokio::test]
async fn traefik_url_parameter_serves_the_original_urls_page() {
    let trap = trap_router(app(""));
    let direct = Request::get("/docs/getting-started?lang=en").header("host", "site.example");
    let (_, _, direct) = call(&trap, direct, "").await;
    let via_errors = "/?url=https%3A%2F%2Fsite.example%2Fdocs%2Fgetting-started%3Flang%3Den";
    let (status, _, through_traefik) =
        call(&trap, Request::get(via_errors).header("host", "trap:8421"), "").await;
    assert_eq!(status, 200);
    assert_eq!(direct, through_traefik);
}

#[tokio::test]
async fn every_method_gets_a_page() {
    let trap = trap_router(app(""));
    let (_, _, get_page) = call(&trap, Request::get("/form").header("host", "example.org"), "").await;
    for method in ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"] {
        let request = Request::builder().method(method).uri("/form").header("host", "example.org");
        let (status, _, page) = call(&trap, request, "field=value").await;
        assert_eq!(status, 200, "{method}");
        assert_eq!(page, get_page, "{method}");
    }
}

#[tokio::test]
async fn drip_sends_the_same_page_slowly_and_only_up_to_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let dripping = write_file(
        dir.path(),
        "drip.kdl",
        "trap {\n drip {\n  enabled #true\n  bytes-per-second 16384\n  chunk-bytes 1024\n  max-connections 1\n }\n}\n",
    );
    let slow = Server::start(&["--config", &dripping]);
    let plain = Server::start(&[]);
    let (_, _, expected) = get(&plain.trap_url("/slow"), "example.org").await;

    let started = Instant::now();
    let (_, headers, page) = get(&slow.trap_url("/slow"), "example.org").await;
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(page, expected);
    assert!(headers.get("content-length").is_none(), "a dripped page is streamed");
    // At 16 KiB/s a page of 4 to 12 KB takes at least a fifth of a second.
    let minimum = (page.len() / 1024 - 1) as f64 * (1024.0 / 16384.0);
    assert!(elapsed >= minimum, "{elapsed:.3}s for {} bytes", page.len());

    // With the one drip slot taken (the held page has begun dripping: its headers are out and
    // its body is not read), a second page goes out whole.
    let held = reqwest::Client::new()
        .get(slow.trap_url("/held"))
        .header("host", "example.org")
        .send()
        .await
        .unwrap();
    assert!(held.headers().get("content-length").is_none(), "the first page drips");
    let (_, headers, _) = get(&slow.trap_url("/fast"), "example.org").await;
    assert!(headers.get("content-length").is_some(), "over the cap, pages are sent at once");
    held.text().await.unwrap();
}

#[tokio::test]
async fn health_answers_on_the_verdict_listener() {
    let (status, _, body) = call(&verdict_router(app("")), Request::get("/health"), "").await;
    assert_eq!((status, body.as_str()), (200, "ok\n"));
}
