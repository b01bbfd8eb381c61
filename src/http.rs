//! The HTTP surface, in one screen: the listeners' routes and handlers, and the connection
//! handling under them ([`listener`]). [`crate::service`] binds them to sockets.
//!
//! - verdict listener: `/verdict` (any method; see [`verdict`]), `/health`, `/challenge` (the
//!   challenge page for nginx), the reserved challenge path (`/.quagmire/answer`, its script and
//!   worker; see [`challenge`]), and, without an admin listener, `/metrics` (Prometheus) and
//!   `/api/trapped` (see [`admin`]);
//! - admin listener (`admin { listen }`): `/metrics`, `/api/trapped` and `/health`;
//! - trap listener: every method and path is a generated page (see [`trap`]).

pub(crate) mod admin;
mod challenge;
pub(crate) mod forwarded;
pub(crate) mod listener;
pub(crate) mod trap;
pub(crate) mod verdict;

use std::sync::Arc;

use axum::Router;
use axum::routing::{any, get};

use crate::app::App;

/// Routes of the verdict listener; the admin routes too when they have no listener of their own.
pub fn verdict_router(app: Arc<App>) -> Router {
    let path = &app.config.challenge.path;
    let router = Router::new()
        .route("/verdict", any(verdict::verdict))
        .route("/health", any(health))
        .route("/challenge", any(challenge::page_for_proxy))
        .route(&format!("{path}answer"), get(challenge::answer))
        .route(&format!("{path}challenge.js"), get(challenge::script))
        .route(&format!("{path}worker.js"), get(challenge::worker));
    let router = if app.config.admin.listen.is_none() { with_admin_routes(router, &app) } else { router };
    router.with_state(app)
}

/// Routes of the admin listener.
pub fn admin_router(app: Arc<App>) -> Router {
    with_admin_routes(Router::new().route("/health", any(health)), &app).with_state(app)
}

/// The admin routes, with the state they share (the token, the last snapshot) as an extension:
/// the endpoints' own state, not the application's.
fn with_admin_routes(router: Router<Arc<App>>, app: &App) -> Router<Arc<App>> {
    let admin = Arc::new(admin::Admin::new(app.config.admin.token.as_deref()));
    router
        .route("/metrics", get(admin::metrics))
        .route("/api/trapped", get(admin::trapped))
        .route("/api/blocklist", get(admin::blocklist))
        .layer(axum::Extension(admin))
}

/// Routes of the trap listener: everything is a trap page.
pub fn trap_router(app: Arc<App>) -> Router {
    Router::new().fallback(trap::page).with_state(app)
}

async fn health() -> &'static str {
    "ok\n"
}

impl crate::client::HeaderLines for axum::http::HeaderMap {
    fn lines<'h>(&'h self, name: &'h str) -> impl DoubleEndedIterator<Item = &'h str> {
        // A line that is not text was not written by a proxy: skipping it cannot hide one.
        self.get_all(name).iter().filter_map(|value| value.to_str().ok())
    }
}
