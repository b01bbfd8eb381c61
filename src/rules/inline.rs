//! The inline lane: rules evaluated on the thread that serves the verdict, within limits far
//! below the ruleset's, so that a verdict costs no hand-over to a rule worker and back.
//!
//! The hand-over (a queued job, a worker woken, a task woken on the way back, a timer) cost
//! about as much CPU as everything else a verdict does together (bench/README.md, "CPU per verdict"), and
//! a ruleset that behaves needs a few microseconds. So the service first runs the rules here,
//! under [`Lane::TIME`] of CPU time and [`Lane::HEADROOM`] bytes of memory above twice what the loaded
//! script holds (the collector lets a heap reach twice its live size). An evaluation that runs
//! over either, or panics, is *escalated*: its answer is discarded and the same facts go to a
//! rule worker under the ruleset's own limits, where a slow rule holds no thread that serves
//! HTTP. Rules cannot tell the difference: each evaluation starts from the same sealed state and
//! forgets what it wrote.
//!
//! What a misbehaving rule can cost a thread that serves HTTP, and why it stays below the time
//! limit:
//! - Lua code: [`Lane::TIME`], stopped by the watchdog (which may grant two looks' intervals more);
//! - one call into C, which no time limit interrupts: bounded by what it is given, and a rule
//!   can give it at most twice what the script held at load plus [`Lane::HEADROOM`] (Lua patterns that
//!   backtrack are refused, so C work is linear in its input, or n log n for `table.sort`);
//! - loading the script into this thread's state: at most [`Lane::SETUP`]; a script that takes
//!   longer is never built here, and its verdicts go to the workers.
//!
//! After an escalation the lane stays shut for [`PAUSE`] from when the worker has answered the
//! escalated request (a slow evaluation there may take longer than the pause itself), so a
//! ruleset that keeps running over the inline limits pays them about once a second rather than
//! on every request.

use std::panic::AssertUnwindSafe;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::kept;
use super::lua::{Evaluator, Lane};
use super::{Compiled, Decision};
use crate::facts::Facts;
use crate::vocabulary::FailureKind;

/// How long the lane stays shut after an escalation.
pub(super) const PAUSE: Duration = Duration::from_secs(1);

static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// The lane's switch and counts, one per `Rules`.
pub(super) struct InlineLane {
    /// Until when (nanoseconds since `EPOCH`) the lane is shut; 0 when open.
    shut_until: AtomicU64,
    /// Evaluations answered here.
    answered: AtomicU64,
    /// Evaluations escalated to a worker.
    escalated: AtomicU64,
    /// Verdicts sent straight to a worker: the lane was shut, or the script is not built here.
    passed: AtomicU64,
}

/// How many verdicts the inline lane answered, escalated and passed to the workers, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InlineStats {
    /// Answered on the thread that served the verdict.
    pub answered: u64,
    /// Run over the inline limits (or panicked) and sent to a rule worker.
    pub escalated: u64,
    /// Sent straight to a rule worker: the lane was shut after an escalation, or the script
    /// takes too long to load to be built on a thread that serves HTTP.
    pub passed: u64,
}

impl InlineLane {
    pub(super) fn new() -> InlineLane {
        InlineLane {
            shut_until: AtomicU64::new(0),
            answered: AtomicU64::new(0),
            escalated: AtomicU64::new(0),
            passed: AtomicU64::new(0),
        }
    }

    pub(super) fn stats(&self) -> InlineStats {
        InlineStats {
            answered: self.answered.load(Ordering::Relaxed),
            escalated: self.escalated.load(Ordering::Relaxed),
            passed: self.passed.load(Ordering::Relaxed),
        }
    }

    /// Evaluates `facts` on this thread; [`Inline::Answered`] unless the lane is shut or the
    /// evaluation went over the inline limits, and a rule worker must decide. `owner` tells this
    /// `Rules`' states from another's.
    pub(super) fn evaluate(&self, owner: usize, compiled: &Compiled, facts: &Facts) -> Inline {
        let shut_until = self.shut_until.load(Ordering::Relaxed);
        if shut_until != 0 {
            if nanos_since_epoch() < shut_until {
                self.passed.fetch_add(1, Ordering::Relaxed);
                return Inline::Passed;
            }
            self.shut_until.store(0, Ordering::Relaxed);
        }
        let outcome = kept::on_this_thread(owner, Lane::Inline, |state| {
            if state.refused == compiled.generation {
                return Outcome::NotBuilt;
            }
            if let Some(error) = state.evaluator.prepare(compiled) {
                tracing::info!(
                    %error,
                    "the rules take too long or too much memory to load on a thread that serves HTTP; \
                     their verdicts go to the rule workers"
                );
                state.refused = compiled.generation;
                return Outcome::NotBuilt;
            }
            let evaluated = std::panic::catch_unwind(AssertUnwindSafe(|| {
                state.evaluator.evaluate(compiled, facts, false)
            }));
            match evaluated {
                Ok((decision, _)) if !over_limits(&decision) => {
                    state.errors.record(&compiled.name, &decision.failures);
                    Outcome::Answered(decision)
                }
                Ok(_) => Outcome::Escalated,
                Err(_) => {
                    // The state may be half-way through anything: never reuse it. The worker's
                    // evaluation of the same facts reports the panic, if it is one.
                    state.evaluator = Evaluator::in_lane(Lane::Inline);
                    Outcome::Escalated
                }
            }
        });
        match outcome {
            Outcome::Answered(decision) => {
                self.answered.fetch_add(1, Ordering::Relaxed);
                Inline::Answered(decision)
            }
            Outcome::Escalated => {
                self.escalated.fetch_add(1, Ordering::Relaxed);
                self.shut();
                Inline::Escalated
            }
            Outcome::NotBuilt => {
                self.passed.fetch_add(1, Ordering::Relaxed);
                Inline::Passed
            }
        }
    }

    /// Shuts the lane for [`PAUSE`] from now: at an escalation, and again once the worker has
    /// answered the escalated request.
    pub(super) fn shut(&self) {
        let until = nanos_since_epoch() + u64::try_from(PAUSE.as_nanos()).unwrap_or(u64::MAX);
        self.shut_until.store(until, Ordering::Relaxed);
    }
}

/// What the lane did with a verdict.
pub(super) enum Inline {
    /// Answered it.
    Answered(Decision),
    /// Ran over its limits: a worker decides, and the lane is shut.
    Escalated,
    /// Sent it on to a worker without trying (shut, or the script is not built here).
    Passed,
}

enum Outcome {
    Answered(Decision),
    Escalated,
    NotBuilt,
}

/// Whether an evaluation ran over the inline limits, which the ruleset's own may not have.
fn over_limits(decision: &Decision) -> bool {
    decision
        .failures
        .iter()
        .any(|failure| matches!(failure.kind, FailureKind::TimeLimit | FailureKind::MemoryLimit))
}

fn nanos_since_epoch() -> u64 {
    u64::try_from(EPOCH.elapsed().as_nanos()).unwrap_or(u64::MAX).max(1)
}
