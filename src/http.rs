//! The HTTP surface, in one screen: two listeners and their routes. The only module that knows
//! axum or HTTP types.
//!
//! - verdict listener: `/verdict` (any method; see [`verdict`]), `/health`, `/metrics`
//!   (Prometheus) and `/api/trapped` (see [`admin`]);
//! - trap listener: every method and path is a generated page (see [`trap`]).

pub mod admin;
pub mod trap;
pub mod verdict;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{any, get};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::app::App;

/// How long open connections (such as dripping pages) may take to finish after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Routes of the verdict listener.
pub fn verdict_router(app: Arc<App>) -> Router {
    Router::new()
        .route("/verdict", any(verdict::verdict))
        .route("/health", any(health))
        .route("/metrics", get(admin::metrics))
        .route("/api/trapped", get(admin::trapped))
        .with_state(app)
}

/// Routes of the trap listener: everything is a trap page.
pub fn trap_router(app: Arc<App>) -> Router {
    Router::new().fallback(trap::page).with_state(app)
}

/// Serves both listeners (and watches for reloads) until `shutdown` completes, then lets open
/// requests finish for a short grace period.
pub async fn serve(
    app: Arc<App>,
    verdict: TcpListener,
    trap: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let app_for_watch = app.clone();
    let (stop, stopped) = watch::channel(false);
    let wait = |mut stopped: watch::Receiver<bool>| async move {
        let _ = stopped.wait_for(|stop| *stop).await;
    };
    // Both listeners need the TCP peer: the client, or the proxy whose headers may be believed.
    let verdict =
        axum::serve(verdict, verdict_router(app.clone()).into_make_service_with_connect_info::<SocketAddr>())
            .with_graceful_shutdown(wait(stopped.clone()));
    let trap = axum::serve(trap, trap_router(app).into_make_service_with_connect_info::<SocketAddr>())
        .with_graceful_shutdown(wait(stopped));
    let watcher = tokio::spawn(crate::reload::watch(app_for_watch));
    let servers = async { tokio::try_join!(verdict.into_future(), trap.into_future()).map(|_| ()) };
    tokio::pin!(servers);
    tokio::select! {
        result = &mut servers => {
            watcher.abort();
            return result;
        }
        () = shutdown => {}
    }
    watcher.abort();
    let _ = stop.send(true);
    match tokio::time::timeout(SHUTDOWN_GRACE, servers).await {
        Ok(result) => result,
        Err(_) => {
            tracing::warn!("connections still open after the shutdown grace period; closing them");
            Ok(())
        }
    }
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
