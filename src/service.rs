//! The running service: [`serve`] binds the three listeners' routers to their sockets and
//! supervises the six background tasks a running service needs (the reload watcher, the store
//! syncer, the list refresher, the CrowdSec puller and alert sender, the robots.txt refresher),
//! restarting one that ends or panics, until the shutdown signal; then it lets open requests
//! finish for a short grace and sends the last updates to the client store. [`reload`] is what
//! the watcher and the refresher run.

pub(crate) mod reload;

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::app::App;
use crate::config::ConnectionConfig;
use crate::http::{admin_router, listener, trap_router, verdict_router};
use crate::support::fd_limit;

/// How long open connections (such as dripping pages) may take to finish after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Serves the listeners (and watches for reloads) until `shutdown` completes, then lets open
/// requests finish for a short grace period.
pub async fn serve(
    app: Arc<App>,
    verdict: TcpListener,
    trap: TcpListener,
    admin: Option<TcpListener>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let limits = limits(&app.config.connections);
    let admin_limits = listener::ConnectionLimits {
        max_connections: limits.max_connections.min(fd_limit::ADMIN_CONNECTIONS),
        ..limits
    };
    let (stop, stopped) = watch::channel(false);
    let lists_written = Arc::new(tokio::sync::Notify::new());
    // Background tasks, each stopped when its handle is dropped (at the end of this function),
    // and supervised meanwhile: one that ends or panics is logged and, where it can start again,
    // restarted.
    let watcher = {
        let (app, lists_written) = (app.clone(), lists_written.clone());
        supervise("reload watcher", move || {
            Some(crate::service::reload::watch(app.clone(), lists_written.clone()))
        })
    };
    // The syncer owns the store's queues, so it runs once; ending early is logged.
    let mut syncer = app.clients.run_store();
    let _store = syncer.is_some().then(|| supervise("store syncer", move || syncer.take()));
    let refresher = app.config.lists.refresh.map(|every| {
        let app = app.clone();
        supervise("list refresher", move || {
            Some(crate::service::reload::refresh_lists(app.clone(), every, lists_written.clone()))
        })
    });
    let crowdsec = app.crowdsec.interval().map(|_| {
        let crowdsec = app.crowdsec.clone();
        supervise("CrowdSec puller", move || Some(crate::verify::crowdsec::run(crowdsec.clone())))
    });
    let alerts = app.crowdsec.watching().then(|| {
        let crowdsec = app.crowdsec.clone();
        supervise("CrowdSec alert sender", move || {
            Some(crate::verify::crowdsec::send_alerts(crowdsec.clone()))
        })
    });
    let robots = app.robots.refresh().map(|_| {
        let robots = app.robots.clone();
        supervise("robots.txt refresher", move || Some(crate::verify::robots::refresh(robots.clone())))
    });
    let admin = admin.map(|admin| {
        listener::serve("admin", admin, admin_router(app.clone()), admin_limits, stopped.clone())
    });
    let verdict = listener::serve("verdict", verdict, verdict_router(app.clone()), limits, stopped.clone());
    let flush = app.clone();
    let trap = listener::serve("trap", trap, trap_router(app), limits, stopped);
    let admin = async {
        if let Some(admin) = admin {
            admin.await;
        }
    };
    let servers = async { tokio::join!(verdict, trap, admin) };
    tokio::pin!(servers);
    tokio::select! {
        _ = &mut servers => return Ok(()),
        () = shutdown => {}
    }
    drop((watcher, refresher, robots, crowdsec, alerts));
    let _ = stop.send(true);
    if tokio::time::timeout(SHUTDOWN_GRACE, servers).await.is_err() {
        tracing::warn!("connections still open after the shutdown grace period; closing them");
    }
    // What this replica saw since the last sync goes to the store, within its wait budget.
    let flushed = flush.clients.flush_store().await;
    if flushed > 0 {
        tracing::info!(clients = flushed, "sent the last updates to the client store");
    }
    Ok(())
}

/// Runs the task `start` makes until the returned handle is dropped. A task that ends or panics
/// is logged and started again a second later, as long as `start` makes another (`None` once
/// it cannot, for a task that owns something it used up).
fn supervise<F>(name: &'static str, mut start: impl FnMut() -> Option<F> + Send + 'static) -> AbortOnDrop
where
    F: Future<Output = ()> + Send + 'static,
{
    AbortOnDrop(tokio::spawn(async move {
        let mut runs = 0;
        while let Some(task) = start() {
            runs += 1;
            // Aborted with this loop's own task: the handle is dropped with it.
            let mut running = AbortOnDrop(tokio::spawn(task));
            match (&mut running.0).await {
                Ok(()) => tracing::error!(task = name, "a background task ended"),
                Err(error) if error.is_panic() => tracing::error!(task = name, "a background task panicked"),
                Err(_) => return,
            }
            tokio::time::sleep(RESTART_AFTER).await;
        }
        if runs > 0 {
            tracing::error!(task = name, "the background task cannot be started again");
        }
    }))
}

/// How long a background task that ended waits before it is started again.
const RESTART_AFTER: Duration = Duration::from_secs(1);

/// The listeners' limits: the configured ones, with the connection cap sized from the open-file
/// limit (raised to its hard limit first) unless configured.
fn limits(config: &ConnectionConfig) -> listener::ConnectionLimits {
    let open_files = fd_limit::raise_open_file_limit();
    let max_connections =
        config.max_connections.unwrap_or_else(|| fd_limit::default_max_connections(open_files));
    tracing::info!(
        open_files,
        max_connections,
        header_read_timeout_s = config.header_read_timeout.as_secs(),
        keep_alive_timeout_s = config.keep_alive_timeout.as_secs(),
        "connection limits per listener"
    );
    listener::ConnectionLimits {
        header_read_timeout: config.header_read_timeout,
        keep_alive_timeout: config.keep_alive_timeout,
        max_connections,
    }
}

/// A background task that stops when its owner is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
