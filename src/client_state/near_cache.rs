//! The near cache: a record's side of sharing client state through the store. Each record keeps
//! the store's last view of its client and the requests and trap hits not sent yet; a verdict's
//! history is the view, decayed, plus those. `store.rs` sends the batches and brings the views.

use std::time::{Duration, Instant};

use super::{At, ClientStateConfig, History, RATE_HALF_LIFE, Record, decayed};

/// A record's side of the shared store.
#[derive(Default)]
pub(super) struct SharedView {
    /// The store's history of the client when it last answered.
    pub(super) view: Option<View>,
    /// Requests and hits not yet sent.
    pub(super) unsent: Delta,
    /// Requests and hits sent, not yet answered.
    pub(super) in_flight: Option<Delta>,
    /// Whether the client is in the syncer's queue.
    pub(super) queued: bool,
}

/// The store's history of a client, as of `at`.
#[derive(Clone, Copy, Debug)]
pub(super) struct View {
    pub(super) trap_hits: u64,
    pub(super) trap_score: f64,
    pub(super) request_rate: f64,
    pub(super) rate_limited: bool,
    pub(super) at: Instant,
}

/// Requests and trap hits one replica saw of a client.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Delta {
    pub(super) requests: u32,
    pub(super) hits: u32,
}

impl Delta {
    pub(super) fn add(self, other: Delta) -> Delta {
        Delta {
            requests: self.requests.saturating_add(other.requests),
            hits: self.hits.saturating_add(other.hits),
        }
    }
}

/// What one update sends: the delta, and the client's latest user agent and network when it
/// made requests.
pub(super) struct Batch {
    pub(super) delta: Delta,
    pub(super) user_agent: Option<String>,
    pub(super) asn: Option<u32>,
    pub(super) asn_org: Option<String>,
}

impl Record {
    /// The history a verdict uses at `now`: with a store's view, that view decayed plus what
    /// the store has not answered for yet; else this replica's own.
    pub(super) fn current(&self, now: At, config: &ClientStateConfig) -> History {
        let Some((shared, view)) = self.shared.as_ref().and_then(|shared| Some((shared, shared.view?)))
        else {
            return self.history();
        };
        let elapsed = now.instant.saturating_duration_since(view.at).as_secs_f64();
        let unsent = shared.unsent.add(shared.in_flight.unwrap_or_default());
        History {
            trap_hits: view.trap_hits + u64::from(unsent.hits),
            trap_score: decayed(view.trap_score, elapsed, config.trap_half_life) + f64::from(unsent.hits),
            request_rate: decayed(view.request_rate, elapsed, RATE_HALF_LIFE) + f64::from(unsent.requests),
            rate_limited: view.rate_limited,
        }
    }

    /// Counts `requests` and `hits` to send, and puts the client in the store's queue with
    /// `enqueue` (true when it went in) unless it is there.
    pub(super) fn count_unsent(&mut self, requests: u32, hits: u32, enqueue: impl FnOnce() -> bool) {
        let shared = self.shared.get_or_insert_with(Box::default);
        shared.unsent = shared.unsent.add(Delta { requests, hits });
        if !shared.queued {
            shared.queued = enqueue();
        }
    }

    /// Whether a verdict should update the shared view first: none yet, or older than
    /// `max_age`, and no update in flight.
    pub(super) fn needs_refresh(&self, max_age: Duration) -> bool {
        match self.shared.as_deref() {
            Some(shared) if shared.in_flight.is_some() => false,
            Some(SharedView { view: Some(view), .. }) => view.at.elapsed() > max_age,
            _ => true,
        }
    }

    /// Moves the unsent requests and hits in flight and returns them to send; `None` when an
    /// update is already in flight, or when nothing is unsent and `even_empty` is false (a
    /// verdict's refresh asks even then: it wants the view).
    pub(super) fn take_unsent(&mut self, even_empty: bool) -> Option<Batch> {
        let shared = self.shared.get_or_insert_with(Box::default);
        shared.queued = false;
        let empty = shared.unsent.requests == 0 && shared.unsent.hits == 0;
        if shared.in_flight.is_some() || (empty && !even_empty) {
            return None;
        }
        let delta = std::mem::take(&mut shared.unsent);
        shared.in_flight = Some(delta);
        // The store keeps a client's agent and network for its admin views, which list trapped
        // clients only; so does this record.
        let detail = self.detail.as_deref();
        Some(Batch {
            delta,
            user_agent: detail.filter(|d| !d.user_agent.is_empty()).map(|d| d.user_agent.to_string()),
            asn: detail.and(self.asn()),
            asn_org: detail.and_then(|d| d.asn_org.as_deref()).map(str::to_string),
        })
    }

    /// Keeps the store's answer to the update in flight, merged with what this replica already
    /// knew; true when more is unsent and the record is not queued.
    ///
    /// The store's answer includes every replica's hits, so it is never below this replica's
    /// last view (decayed) plus what it just sent, unless the store lost its data (FLUSHALL, a
    /// restart without persistence, eviction). Then the larger of the two is kept, so that a
    /// store's loss never releases a client a replica had trapped.
    pub(super) fn apply(&mut self, mut view: View, config: &ClientStateConfig) -> bool {
        let shared = self.shared.get_or_insert_with(Box::default);
        if let Some(previous) = shared.view {
            let sent = shared.in_flight.unwrap_or_default();
            let elapsed = view.at.saturating_duration_since(previous.at).as_secs_f64();
            let known_score =
                decayed(previous.trap_score, elapsed, config.trap_half_life) + f64::from(sent.hits);
            let known_rate =
                decayed(previous.request_rate, elapsed, RATE_HALF_LIFE) + f64::from(sent.requests);
            view.trap_score = view.trap_score.max(known_score);
            view.request_rate = view.request_rate.max(known_rate);
            view.trap_hits = view.trap_hits.max(previous.trap_hits + u64::from(sent.hits));
        }
        shared.view = Some(view);
        shared.in_flight = None;
        !shared.queued && (shared.unsent.requests > 0 || shared.unsent.hits > 0)
    }

    /// Ends a failed update: its delta is unsent again when `resend`; true when the record has
    /// something to send and is not queued.
    pub(super) fn restore(&mut self, delta: Delta, resend: bool) -> bool {
        let shared = self.shared.get_or_insert_with(Box::default);
        shared.in_flight = None;
        if resend {
            shared.unsent = shared.unsent.add(delta);
        }
        !shared.queued && (shared.unsent.requests > 0 || shared.unsent.hits > 0)
    }

    /// Whether requests or hits wait to be sent.
    pub(super) fn has_unsent(&self) -> bool {
        self.shared.as_ref().is_some_and(|shared| shared.unsent.requests > 0 || shared.unsent.hits > 0)
    }

    pub(super) fn set_queued(&mut self, queued: bool) {
        self.shared.get_or_insert_with(Box::default).queued = queued;
    }
}
