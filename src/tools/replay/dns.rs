//! Forward-confirmed reverse DNS for `replay`: what live verdicts wait for, so that a client
//! claiming Googlebot from outside Google's ranges is judged on what DNS says of it, as live,
//! rather than left "pending".
//!
//! Lookups start as lines are read, a window ahead of the line being judged, within the
//! configured budgets (`dns { lookups-per-second max-pending }`), and each line waits for its
//! answer (at most the lookup timeout) before it is judged. Answers are the crawler checker's own,
//! cached per address and crawler, so an address asked about once is never asked again.

use std::net::IpAddr;
use std::time::Duration;

use crate::app::App;
use crate::facts::claims::{Claim, CrawlerCheck};
use crate::verdict::{CRAWLER_DOMAINS, CRAWLER_RANGES};

/// Lines read ahead of the one being judged, so that their lookups run side by side.
pub(super) const WINDOW: usize = 256;

/// What the replay asked DNS, for the report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DnsCounts {
    /// Lines whose crawler claim needed DNS (the address is outside the published ranges).
    pub lines: u64,
    /// Lookups made (one per address and crawler).
    pub lookups: u64,
    /// Lookups that confirmed the claim.
    pub confirmed: u64,
    /// Lookups that refuted it (no PTR, a name outside the crawler's domains, no way back).
    pub refuted: u64,
    /// Lookups without an answer in time (timeouts, server failures): the claim stays pending.
    pub unanswered: u64,
}

/// The lookups of one replay, on a runtime of their own.
pub(super) struct ReplayDns {
    runtime: tokio::runtime::Runtime,
    wait: Duration,
    pub(super) counts: DnsCounts,
}

/// A line's claim that DNS must settle before the line is judged.
pub(super) struct Needed {
    claim: Claim,
    address: IpAddr,
    /// This replay started its lookup when the line was read.
    started: bool,
}

impl ReplayDns {
    /// Lookups with `app`'s resolver, each line waiting at most the lookup timeout (and a
    /// little, so an answer that arrives on the deadline is kept).
    pub(super) fn new(app: &App) -> std::io::Result<ReplayDns> {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
        let wait = app.config.dns.timeout + Duration::from_millis(500);
        Ok(ReplayDns { runtime, wait, counts: DnsCounts::default() })
    }

    /// For a line just read from `address` with `user_agent`: the claim DNS must settle, its
    /// lookup started now if the budgets allow. `None` when there is nothing to ask.
    pub(super) fn read_ahead(&mut self, app: &App, address: IpAddr, user_agent: &str) -> Option<Needed> {
        let compiled = app.rules.current();
        let (ranges, domains) = (compiled.list(CRAWLER_RANGES), compiled.list(CRAWLER_DOMAINS));
        let claim = app.crawlers.claim(ranges, domains, user_agent, address)?;
        if claim.check != CrawlerCheck::Pending {
            return None;
        }
        self.counts.lines += 1;
        let _runtime = self.runtime.enter();
        let started = app.crawlers.start_verification(&claim, domains, address);
        Some(Needed { claim, address, started })
    }

    /// Waits until `needed` has its answer (in the crawler checker's cache, where the verdict
    /// finds it), and counts the lookup.
    pub(super) fn settle(&mut self, app: &App, needed: Needed) {
        let compiled = app.rules.current();
        let domains = compiled.list(CRAWLER_DOMAINS);
        let (check, started_now) =
            self.runtime.block_on(app.crawlers.settle(&needed.claim, domains, needed.address, self.wait));
        if needed.started || started_now {
            self.counts.lookups += 1;
            match check {
                CrawlerCheck::ReverseDns | CrawlerCheck::Ranges => self.counts.confirmed += 1,
                CrawlerCheck::Failed => self.counts.refuted += 1,
                CrawlerCheck::Pending => self.counts.unanswered += 1,
            }
        }
    }
}
