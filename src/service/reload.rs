//! Hot reload: on SIGHUP, when a watched file changes, and when the scheduled list refresh wrote
//! lists, the rules, lists and enrichment databases are loaded again. A broken new version is
//! logged and the old one keeps running. The scheduled list refresh (`lists { refresh-hours }`)
//! lives here too: it is what keeps a running service's lists fresh.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::Notify;

use crate::app::App;
use crate::lists::update::ListsConfig;

/// How often watched files are checked for changes.
const POLL_INTERVAL: Duration = Duration::from_secs(2);

/// Reloads the rules now; returns whether the new ruleset is in use.
pub(crate) fn reload_rules(app: &App, why: &str) -> bool {
    match app.rules.reload() {
        Ok(compiled) => {
            tracing::info!(why, rules = compiled.rule_names().len(), "reloaded the rules");
            compiled.warn_missing_lists();
            app.metrics.reload("rules", true);
            true
        }
        Err(error) => {
            tracing::error!(why, %error, "the new rules do not load; the previous rules stay in use");
            app.metrics.reload("rules", false);
            false
        }
    }
}

/// Reads the site's robots.txt files again; logs the outcome. On an error the old copies stay.
pub(crate) fn reload_robots(app: &App, why: &str) {
    if app.config.robots.files.is_empty() {
        return;
    }
    match app.robots.reload_files() {
        Ok(()) => {
            tracing::info!(why, "reloaded the site's robots.txt files");
            app.metrics.reload("robots", true);
        }
        Err(error) => {
            tracing::error!(why, %error, "a robots.txt file does not read; the previous copies stay in use");
            app.metrics.reload("robots", false);
        }
    }
}

/// The files whose change reloads something: the rules' and the robots.txt files.
fn watched_files(app: &App) -> Vec<PathBuf> {
    let mut files = app.rules.watched_files();
    files.extend(app.config.robots.files.iter().map(|(_, path)| path.clone()));
    files
}

/// Reloads changed databases; logs each.
pub(crate) fn reload_geo(app: &App) {
    match app.geo.reload_if_changed() {
        Ok(paths) => {
            for path in paths {
                tracing::info!(path = %path.display(), "reloaded a MaxMind database");
            }
        }
        Err(error) => {
            tracing::error!(%error, "the changed database does not load; the previous copy stays in use")
        }
    }
}

/// Watches for SIGHUP, file changes and `lists_written` (the scheduled refresh wrote lists) until
/// the task is dropped.
pub(crate) async fn watch(app: Arc<App>, lists_written: Arc<Notify>) {
    let mut known = modification_times(&watched_files(&app));
    let mut ticks = tokio::time::interval(POLL_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    #[cfg(unix)]
    let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    loop {
        #[cfg(unix)]
        let hangup = async {
            match hangups.as_mut() {
                Some(signal) => signal.recv().await,
                None => std::future::pending().await,
            }
        };
        #[cfg(not(unix))]
        let hangup = std::future::pending::<Option<()>>();
        // A reload asked for (rather than noticed by polling): the refresh's own reload, so the
        // changed files are not reloaded a second time by the next poll.
        let asked = tokio::select! {
            _ = ticks.tick() => None,
            _ = hangup => Some("SIGHUP"),
            () = lists_written.notified() => Some("lists refreshed"),
        };
        let known_before = known.clone();
        let checked = off_workers(&app, move |app| {
            // Read before the reload, whatever asked for it: a file written while it runs is
            // newer than what is kept here, so the next poll loads it (an edit saved during a
            // SIGHUP's reload was lost when the times were read after it).
            let now = modification_times(&watched_files(app));
            if let Some(why) = asked {
                reload_rules(app, why);
                reload_robots(app, why);
            } else if now != known_before {
                reload_rules(app, "a watched file changed");
                reload_robots(app, "a watched file changed");
            }
            reload_geo(app);
            now
        })
        .await;
        if let Some(now) = checked {
            known = now;
        }
    }
}

/// Runs `work` on the blocking pool rather than an async worker: loading rules runs the script's
/// load-time code (up to its time limit), and checking files and reading databases is file I/O.
/// `None` if the work panicked.
async fn off_workers<T: Send + 'static>(
    app: &Arc<App>,
    work: impl FnOnce(&App) -> T + Send + 'static,
) -> Option<T> {
    let app = app.clone();
    tokio::task::spawn_blocking(move || work(&app)).await.ok()
}

/// Each file's modification time and length: the length too, because two writes within one
/// tick of the file system's clock (a few milliseconds) leave the same time.
fn modification_times(files: &[PathBuf]) -> HashMap<PathBuf, Option<(SystemTime, u64)>> {
    files
        .iter()
        .map(|path| {
            let seen = std::fs::metadata(path).and_then(|meta| Ok((meta.modified()?, meta.len())));
            (path.clone(), seen.ok())
        })
        .collect()
}

/// Refreshes the lists in the configured folder every `every` until the task is dropped,
/// starting when the oldest of them is `every` old (at once for a missing one), and tells
/// `written` after a round that wrote a list, so the rules reload. A list whose source fails
/// keeps its file; that is logged once per list per round.
pub(crate) async fn refresh_lists(app: Arc<App>, every: Duration, written: Arc<Notify>) {
    let Some(folder) = app.config.rules.lists.clone() else {
        return;
    };
    let config = &app.config.lists;
    let mut wait = first_wait(&folder, config, every);
    tracing::info!(
        every_s = every.as_secs_f64(),
        next_in_s = wait.as_secs(),
        folder = %folder.display(),
        "refreshing the lists on a schedule"
    );
    loop {
        tokio::time::sleep(wait).await;
        wait = every;
        let reports = crate::lists::update::update(&folder, config).await;
        let mut any_written = false;
        for report in &reports {
            match &report.result {
                Ok(_) => {
                    any_written = true;
                    tracing::info!(list = %report.file, "{report}");
                }
                Err(error) => {
                    tracing::warn!(list = %report.file, %error, "a list source failed; the current list stays")
                }
            }
        }
        if any_written {
            written.notify_one();
        }
    }
}

/// How long until the oldest list with sources in `folder` is `every` old.
fn first_wait(folder: &Path, config: &ListsConfig, every: Duration) -> Duration {
    let now = SystemTime::now();
    config
        .sources
        .iter()
        .map(|source| {
            let modified = std::fs::metadata(folder.join(format!("{}.txt", source.list)))
                .and_then(|meta| meta.modified())
                .ok();
            let age = modified.and_then(|modified| now.duration_since(modified).ok());
            match (modified, age) {
                (None, _) => Duration::ZERO,
                (Some(_), Some(age)) => every.saturating_sub(age),
                // Modified in the future (a clock step): wait a whole interval.
                (Some(_), None) => every,
            }
        })
        .min()
        .unwrap_or(every)
}
