//! The admin endpoints: on a listener of their own, behind a bearer token. Routing is tested in
//! process through the routers (`tower::ServiceExt::oneshot`); a started server only for what
//! needs one (the listener it binds, the token from its environment).

use axum::Router;
use axum::http::Request;
use quagmire::{admin_router, verdict_router};

use crate::support::{SECRET, Server, app, call, write_file};

const TOKEN: &str = "admin-token-0123456789abcdef";

/// Status of a GET of `path` from `router`, called in process, with an optional bearer token.
async fn status_of(router: &Router, path: &str, token: Option<&str>) -> u16 {
    let mut request = Request::get(path);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    call(router, request, "").await.0
}

/// Status of a GET over HTTP, with an optional bearer token.
async fn status(url: &str, token: Option<&str>) -> u16 {
    let mut request = reqwest::Client::new().get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap().status().as_u16()
}

#[tokio::test]
async fn an_admin_listener_takes_metrics_and_trapped_clients_off_the_verdict_listener() {
    let app = app("admin {\n  listen \"127.0.0.1:0\"\n}\n");
    let (verdict, admin) = (verdict_router(app.clone()), admin_router(app));
    for endpoint in ["/metrics", "/api/trapped"] {
        assert_eq!(status_of(&verdict, endpoint, None).await, 404, "{endpoint}");
        assert_eq!(status_of(&admin, endpoint, None).await, 200, "{endpoint}");
    }
    assert_eq!(status_of(&verdict, "/health", None).await, 200);
    assert_eq!(status_of(&admin, "/health", None).await, 200);
    assert_eq!(status_of(&admin, "/verdict", None).await, 404);
}

#[tokio::test]
async fn without_an_admin_listener_the_endpoints_stay_on_the_verdict_listener() {
    let verdict = verdict_router(app(""));
    assert_eq!(status_of(&verdict, "/metrics", None).await, 200);
    assert_eq!(status_of(&verdict, "/api/trapped", None).await, 200);
}

#[tokio::test]
async fn a_token_is_required_wherever_the_endpoints_are() {
    let verdict = verdict_router(app(&format!("admin {{\n  token \"{TOKEN}\"\n}}\n")));
    for endpoint in ["/metrics", "/api/trapped"] {
        assert_eq!(status_of(&verdict, endpoint, None).await, 401, "{endpoint}");
        assert_eq!(
            status_of(&verdict, endpoint, Some("admin-token-0123456789abcdeX")).await,
            401,
            "{endpoint}"
        );
        assert_eq!(status_of(&verdict, endpoint, Some("")).await, 401, "{endpoint}");
        assert_eq!(status_of(&verdict, endpoint, Some(TOKEN)).await, 200, "{endpoint}");
    }
    // Health checks and verdicts need no token.
    assert_eq!(status_of(&verdict, "/health", None).await, 200);
    assert_ne!(status_of(&verdict, "/verdict", None).await, 401);
}

#[tokio::test]
async fn a_started_server_reports_its_admin_listener() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(dir.path(), "admin.kdl", "admin {\n  listen \"127.0.0.1:0\"\n}\n");
    let server = Server::start(&["--config", &path]);
    let admin = server.admin.expect("the admin listener is reported");
    assert_eq!(status(&format!("http://{admin}/metrics"), None).await, 200);
    assert_eq!(status(&format!("http://{}/metrics", server.verdict), None).await, 404);
    assert_eq!(Server::start(&[]).admin, None);
}

#[tokio::test]
async fn the_token_may_come_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(dir.path(), "admin.kdl", "admin {\n  listen \"127.0.0.1:0\"\n}\n");
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
