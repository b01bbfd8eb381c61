//! The words every layer shares, defined at the bottom so that metrics, rules, the verdict and the
//! commands can all use them without importing each other.

/// What a request gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Let it through to the site.
    Allow,
    /// Send it to the trap.
    Trap,
    /// Show the challenge page: a client that answers it gets a pass and goes on; one that does
    /// not is trapped on a later request.
    Challenge,
}

impl Verdict {
    /// `allow`, `trap` or `challenge`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Trap => "trap",
            Verdict::Challenge => "challenge",
        }
    }
}

/// Why a rule, or the rules as a whole, gave no answer: decided where the failure happens, not
/// read back from an error's text (a rule that raises "time limit exceeded" is an `Error`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// The rule raised an error, or returned something that is not a verdict.
    Error,
    /// The watchdog stopped the evaluation at the request's CPU-time limit.
    TimeLimit,
    /// The Lua state ran out of its memory limit.
    MemoryLimit,
    /// No rule worker answered in time (all busy, or stuck in a call the limit cannot stop).
    Unanswered,
    /// The evaluation panicked (a bug in quagmire, not in the rules).
    Panic,
}

impl FailureKind {
    /// The metric label: `error`, `time_limit`, `memory_limit`, `unanswered` or `panic`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Error => "error",
            FailureKind::TimeLimit => "time_limit",
            FailureKind::MemoryLimit => "memory_limit",
            FailureKind::Unanswered => "unanswered",
            FailureKind::Panic => "panic",
        }
    }
}
