//! The admin endpoints: on a listener of their own, behind a bearer token.

use crate::support::{SECRET, Server, write_file};

const TOKEN: &str = "admin-token-0123456789abcdef";

fn config(text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(dir.path(), "admin.kdl", text);
    (dir, path)
}

/// Status of a GET, with an optional bearer token.
async fn status(url: &str, token: Option<&str>) -> u16 {
    let mut request = reqwest::Client::new().get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap().status().as_u16()
}

#[tokio::test]
async fn an_admin_listener_takes_metrics_and_trapped_clients_off_the_verdict_listener() {
    let (_dir, path) = config("admin {\n  listen \"127.0.0.1:0\"\n}\n");
    let server = Server::start(&["--config", &path]);
    let admin = server.admin.expect("the admin listener is reported");
    for endpoint in ["/metrics", "/api/trapped"] {
        assert_eq!(status(&format!("http://{}{endpoint}", server.verdict), None).await, 404, "{endpoint}");
        assert_eq!(status(&format!("http://{admin}{endpoint}"), None).await, 200, "{endpoint}");
    }
    assert_eq!(status(&format!("http://{}/health", server.verdict), None).await, 200);
    assert_eq!(status(&format!("http://{admin}/health"), None).await, 200);
    assert_eq!(status(&format!("http://{admin}/verdict"), None).await, 404);
}

#[tokio::test]
async fn without_an_admin_listener_the_endpoints_stay_on_the_verdict_listener() {
    let server = Server::start(&[]);
    assert_eq!(server.admin, None);
    assert_eq!(status(&format!("http://{}/metrics", server.verdict), None).await, 200);
    assert_eq!(status(&format!("http://{}/api/trapped", server.verdict), None).await, 200);
}

#[tokio::test]
async fn a_token_is_required_wherever_the_endpoints_are() {
    let (_dir, path) = config(&format!("admin {{\n  token \"{TOKEN}\"\n}}\n"));
    let server = Server::start(&["--config", &path]);
    for endpoint in ["/metrics", "/api/trapped"] {
        let url = format!("http://{}{endpoint}", server.verdict);
        assert_eq!(status(&url, None).await, 401, "{endpoint}");
        assert_eq!(status(&url, Some("admin-token-0123456789abcdeX")).await, 401, "{endpoint}");
        assert_eq!(status(&url, Some("")).await, 401, "{endpoint}");
        assert_eq!(status(&url, Some(TOKEN)).await, 200, "{endpoint}");
    }
    // Health checks and verdicts need no token.
    assert_eq!(status(&format!("http://{}/health", server.verdict), None).await, 200);
    assert_ne!(status(&server.verdict_url(), None).await, 401);
}

#[tokio::test]
async fn the_token_may_come_from_the_environment() {
    let (_dir, path) = config("admin {\n  listen \"127.0.0.1:0\"\n}\n");
    let server = Server::start_with_env(
        &["--config", &path],
        &[("QUAGMIRE_SECRET", SECRET), ("QUAGMIRE_ADMIN_TOKEN", TOKEN)],
    );
    let url = format!("http://{}/metrics", server.admin.unwrap());
    let response = reqwest::Client::new().get(&url).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 401);
    assert_eq!(response.headers()["www-authenticate"], "Bearer realm=\"quagmire\"");
    assert_eq!(status(&url, Some(TOKEN)).await, 200);
}
