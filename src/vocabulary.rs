//! The words every layer shares, defined at the bottom so that metrics, rules, the verdict and the
//! commands can all use them without importing each other.

/// What a request gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Let it through to the site.
    Allow,
    /// Send it to the trap.
    Trap,
}

impl Verdict {
    /// `allow` or `trap`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Trap => "trap",
        }
    }
}
