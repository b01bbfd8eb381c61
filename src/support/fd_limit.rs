//! The open-file limit, and the connection caps that fit in it: each connection is a file
//! descriptor, and a process out of descriptors cannot accept, open a database or reload rules.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// Highest soft limit asked for when the hard limit is unlimited: Linux refuses more than
/// `fs.nr_open`, which defaults to this.
const UNLIMITED_CEILING: u64 = 1 << 20;

/// Connections the admin listener keeps open at most by default: a few scrapers and people.
pub(crate) const ADMIN_CONNECTIONS: usize = 64;

/// Raises the soft open-file limit to the hard limit (a process may, unprivileged) and returns
/// the limit in force: the raised one, or the old one if raising failed.
pub(crate) fn raise_open_file_limit() -> u64 {
    let limit = getrlimit(Resource::Nofile);
    let soft = limit.current.unwrap_or(u64::MAX);
    let hard = limit.maximum.unwrap_or(UNLIMITED_CEILING);
    if soft >= hard {
        return soft;
    }
    match setrlimit(Resource::Nofile, Rlimit { current: Some(hard), maximum: limit.maximum }) {
        Ok(()) => hard,
        Err(_) => soft,
    }
}

/// The default cap of the verdict and of the trap listener for an open-file limit: 7/16 of it
/// each, leaving an eighth (at least 64) for the admin listener, databases, rule files, logs and
/// the runtime.
pub(crate) fn default_max_connections(open_file_limit: u64) -> usize {
    let spare = (open_file_limit / 8).max(64);
    let share = open_file_limit.saturating_sub(spare) / 2;
    usize::try_from(share).unwrap_or(usize::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_listeners_together_leave_an_eighth_of_the_descriptors_spare() {
        assert_eq!(default_max_connections(20_000), 8750);
        assert_eq!(default_max_connections(1024), 448);
        // A tiny limit still leaves 64 spare, and never caps a listener at zero.
        assert_eq!(default_max_connections(256), 96);
        assert_eq!(default_max_connections(10), 1);
        for limit in [100, 1024, 4096, 65_536, 1 << 20] {
            let both = 2 * default_max_connections(limit) as u64 + ADMIN_CONNECTIONS as u64;
            assert!(both <= limit.max(130), "{limit}: {both}");
        }
    }

    #[test]
    fn the_limit_in_force_is_at_least_the_soft_limit() {
        let before = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
        assert!(raise_open_file_limit() >= before);
    }
}
