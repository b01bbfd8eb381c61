//! The Lua states a thread keeps for callers that evaluate on their own thread (the inline
//! lane, and `Rules::run` with `RunRules::Here`): one per ruleset and lane, made on first use,
//! with what the inline lane notes beside each. Workers own their state instead (see `pool`).

use super::lua::{Evaluator, Lane};
use super::report::ErrorLog;

/// A Lua state kept on a thread for one ruleset and lane, with what the inline lane notes beside
/// it.
pub(super) struct Kept {
    /// The ruleset's owner (the `Rules`' address).
    owner: usize,
    pub(super) evaluator: Evaluator,
    /// The generation that could not be built here, if any (0).
    pub(super) refused: u64,
    pub(super) errors: ErrorLog,
}

/// States a thread keeps; past this the oldest goes (rulesets of a tool or test that are gone).
const KEPT_PER_THREAD: usize = 8;

thread_local! {
    static KEPT: std::cell::RefCell<Vec<Kept>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` on this thread's state for `owner`'s ruleset in `lane`, made on first use.
pub(super) fn on_this_thread<R>(owner: usize, lane: Lane, f: impl FnOnce(&mut Kept) -> R) -> R {
    KEPT.with_borrow_mut(|kept| {
        let index = match kept.iter().position(|state| state.owner == owner && state.evaluator.lane() == lane)
        {
            Some(index) => index,
            None => {
                if kept.len() >= KEPT_PER_THREAD {
                    kept.remove(0);
                }
                kept.push(Kept {
                    owner,
                    evaluator: Evaluator::in_lane(lane),
                    refused: 0,
                    errors: ErrorLog::new(),
                });
                kept.len() - 1
            }
        };
        f(&mut kept[index])
    })
}
