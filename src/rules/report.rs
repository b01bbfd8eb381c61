//! Logging rule failures without flooding the log: a rule that fails on every request is logged
//! once, then summarised once per interval with the number of failures in between.
//!
//! Each rule worker keeps its own log (no lock shared between workers), so a rule failing
//! everywhere writes at most one line per worker per interval. Metrics count every failure.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::RuleFailure;

/// How often a failing rule is logged at most, per worker.
pub(super) const INTERVAL: Duration = Duration::from_secs(60);
/// Rules remembered; past this, the log forgets them all and starts again (a script has few
/// rules, so this bounds only the pathological case).
const MAX_RULES: usize = 1024;

/// One worker's record of which rules failed when.
pub(super) struct ErrorLog {
    rules: HashMap<Arc<str>, Logged>,
}

struct Logged {
    at: Instant,
    /// Failures since `at` that were not logged.
    suppressed: u64,
}

impl ErrorLog {
    pub(super) fn new() -> ErrorLog {
        ErrorLog { rules: HashMap::new() }
    }

    /// Logs `failures` of `script`'s rules, or counts them for the next summary.
    pub(super) fn record(&mut self, script: &str, failures: &[RuleFailure]) {
        // Called for every evaluation: most have nothing to record, and need no clock.
        if failures.is_empty() {
            return;
        }
        self.record_at(script, failures, Instant::now());
    }

    /// Returns how many lines it wrote (for tests).
    fn record_at(&mut self, script: &str, failures: &[RuleFailure], now: Instant) -> usize {
        let mut written = 0;
        for RuleFailure { rule, message, .. } in failures {
            if let Some(logged) = self.rules.get_mut(rule) {
                if now.saturating_duration_since(logged.at) < INTERVAL {
                    logged.suppressed += 1;
                    continue;
                }
                let repeated = std::mem::take(&mut logged.suppressed);
                logged.at = now;
                tracing::warn!(
                    rule = &**rule,
                    error = %message,
                    script,
                    failures_not_logged = repeated,
                    interval_seconds = INTERVAL.as_secs(),
                    "rule failed"
                );
                written += 1;
                continue;
            }
            if self.rules.len() >= MAX_RULES {
                self.rules.clear();
            }
            self.rules.insert(rule.clone(), Logged { at: now, suppressed: 0 });
            tracing::warn!(rule = &**rule, error = %message, script, "rule failed");
            written += 1;
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocabulary::FailureKind;

    #[test]
    fn a_rule_failing_on_every_request_is_logged_once_per_interval() {
        let mut log = ErrorLog::new();
        let failures = vec![RuleFailure {
            rule: Arc::from("broken"),
            kind: FailureKind::Error,
            message: "boom".to_string(),
        }];
        let start = Instant::now();
        let mut lines = 0;
        for request in 0..10_000u32 {
            let now = start + Duration::from_millis(u64::from(request) * 20);
            lines += log.record_at("rules.lua", &failures, now);
        }
        // 200 seconds of failures, one every 20 ms: the first line, then one per interval.
        assert_eq!(lines, 4);
        let other = vec![RuleFailure {
            rule: Arc::from("other"),
            kind: FailureKind::Error,
            message: "bang".to_string(),
        }];
        assert_eq!(log.record_at("rules.lua", &other, start), 1, "each rule is logged on its own");
    }
}
