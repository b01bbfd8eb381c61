//! Where log lines go, and how many: a non-blocking, lossy writer to stderr, and a sampler for
//! lines a flood would repeat.
//!
//! In a scraper flood most verdicts are traps, and each trap is a log line. Written synchronously,
//! a slow log sink (a full pipe, a stalled journald) would stall the async workers that answer
//! verdicts and `/health`. So lines go to a bounded queue that a thread of its own writes out; when
//! the queue is full a line is dropped and counted (`quagmire_log_lines_dropped_total`), never
//! waited for. And a trap line is written once per rule and client per [`TRAP_LINE_EVERY`]: the
//! verdict metrics count every trap, the log shows which clients and why.

use std::io::IsTerminal as _;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use moka::sync::Cache;
use tracing_appender::non_blocking::{ErrorCounter, NonBlockingBuilder, WorkerGuard};

use crate::client::ClientKey;

/// Log lines queued for the writer thread, at most; past it, lines are dropped and counted.
const QUEUED_LINES: usize = 4096;

/// How often one rule's trap line is written for one client, at most.
pub(crate) const TRAP_LINE_EVERY: Duration = Duration::from_secs(60);

/// (rule, client) pairs whose trap lines are remembered, at most.
const TRAP_LINE_KEYS: u64 = 100_000;

static DROPPED: OnceLock<ErrorCounter> = OnceLock::new();

/// The writer thread's guard, kept until [`flush`].
static GUARD: Mutex<Option<WorkerGuard>> = Mutex::new(None);

/// The log lines' layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines (coloured on a terminal).
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global subscriber (level from `RUST_LOG`, default `info`) writing through the
/// non-blocking writer; call [`flush`] before the process exits. A second call leaves the first
/// subscriber in place.
pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let (writer, guard) = NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(QUEUED_LINES)
        .finish(std::io::stderr());
    let counter = writer.error_counter();
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer);
    let installed = match format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    if installed.is_ok() {
        let _ = DROPPED.set(counter);
        *GUARD.lock().unwrap_or_else(PoisonError::into_inner) = Some(guard);
    }
}

/// Writes out the lines still queued and stops the writer thread; later lines are lost.
pub fn flush() {
    drop(GUARD.lock().unwrap_or_else(PoisonError::into_inner).take());
}

/// Log lines dropped so far because the writer could not keep up.
pub(crate) fn dropped() -> u64 {
    DROPPED.get().map_or(0, |counter| counter.dropped_lines() as u64)
}

/// Which trap lines to write: one per rule and client per [`TRAP_LINE_EVERY`].
#[derive(Clone)]
pub(crate) struct TrapLines {
    written: Cache<(Arc<str>, ClientKey), ()>,
}

impl TrapLines {
    /// A sampler remembering up to [`TRAP_LINE_KEYS`] pairs.
    pub(crate) fn new() -> TrapLines {
        TrapLines {
            written: Cache::builder().max_capacity(TRAP_LINE_KEYS).time_to_live(TRAP_LINE_EVERY).build(),
        }
    }

    /// Whether to write a trap line for `rule` and `client` now.
    pub(crate) fn admit(&self, rule: &Arc<str>, client: ClientKey) -> bool {
        self.written.entry((rule.clone(), client)).or_insert(()).is_fresh()
    }
}

impl Default for TrapLines {
    fn default() -> Self {
        TrapLines::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ClientIdentity;

    #[test]
    fn one_trap_line_per_rule_and_client() {
        let lines = TrapLines::new();
        let identity = ClientIdentity::new(vec![], 32, 64);
        let (a, b) = (identity.key("192.0.2.1".parse().unwrap()), identity.key("192.0.2.2".parse().unwrap()));
        let (crawlers, score): (Arc<str>, Arc<str>) = (Arc::from("ai-crawlers"), Arc::from("trap-score"));
        assert!(lines.admit(&crawlers, a));
        assert!(!lines.admit(&crawlers, a), "the same rule and client again");
        assert!(lines.admit(&score, a), "another rule");
        assert!(lines.admit(&crawlers, b), "another client");
    }
}
