//! Passes and their prices across replicas. With a shared store, each page view of a pass and
//! each accepted answer is counted there too (`client_state/store.rs`, its `pass_use.lua` and
//! `mint.lua`), atomically, so that two replicas behind a load balancer give a crawler no more
//! than one: one page pace and one day's budget per pass, one set of networks, one used id per
//! challenge, one count and one turn queue per network.
//!
//! This replica's own records ([`super::Challenger::observe_pass`], [`super::economy`]) still
//! decide first, and alone when there is no store or it does not answer within its budget; the
//! store's view can only add to them (a later turn, a re-challenge, a burn), never take away.
//! The crowd's page views (per datacenter address and network) are counted there too, and each
//! replica's crowds raised to the shared counts: without it, N replicas gave a farm N times the
//! network's reading budget (measured: 1,317 real pages a minute through two replicas, where one
//! replica's share held it to none). The share itself still moves on each replica.
//!
//! Unanswered challenges are counted there too, per address and User-Agent: behind a balancer
//! that spreads requests, a person is shown the challenge by one replica and answers on another,
//! and an answer must start the count again on every replica, or the first replica's count
//! would grow with each person it challenges there and lock the next one out.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::economy::{self, FREE_PASSES, LONGEST_TURN, MINT_INTERVAL, PRESSURE_HALF_LIFE};
use super::{
    ANSWERS_PER_NETWORK, AnswerError, Answered, BURN_AHEAD, Challenger, DAY, PAGES_PER_DAY, PassUse,
    UNANSWERED_MEMORY, Unanswered,
};
use crate::client_state::store::{MintTerms, PaceTerms, SharedMint, SharedPassUse, Store};

/// Longest an answer waits for the store. The answer path is one request per pass, not the
/// verdict's hot path, so it may wait longer than a verdict does; past this, the replica's own
/// count decides, and the store's update still completes (it is spawned).
const ANSWER_WAIT: Duration = Duration::from_millis(250);

impl Challenger {
    /// The store's key for the challenges shown to the client at `address` sending
    /// `user_agent`: the same on every replica with the same secret (the User-Agent hashed with
    /// a key derived from it, so the key names no User-Agent).
    fn unanswered_key(&self, address: IpAddr, user_agent: &str) -> String {
        let agent = blake3::keyed_hash(&self.challenge_key, user_agent.as_bytes());
        let agent = u64::from_le_bytes(agent.as_bytes()[..8].try_into().expect("8 bytes"));
        format!("quagmire:{{chal:{}:{agent:016x}}}", address.to_canonical())
    }

    /// Counts a challenge shown at `at` here ([`Challenger::challenged`]) and, with a store, on
    /// it too; this replica's count is raised to every replica's when the store answers.
    pub(crate) fn challenged_everywhere(
        &self,
        store: Option<Arc<Store>>,
        address: IpAddr,
        user_agent: &str,
        at: Instant,
    ) {
        self.challenged(address, user_agent, at);
        let Some(store) = store.filter(|store| store.usable()) else { return };
        let key = self.unanswered_key(address, user_agent);
        let local = self.unanswered.get(&self.challenged_key(address, user_agent));
        tokio::spawn(async move {
            if let (Ok(count), Some(local)) = (store.challenged(&key, UNANSWERED_MEMORY).await, local) {
                local.count.fetch_max(count, Ordering::Relaxed);
            }
        });
    }

    /// The client answered ([`Challenger::answered`]): its count starts again here and, with a
    /// store, on every replica.
    pub(crate) fn answered_everywhere(&self, store: Option<Arc<Store>>, address: IpAddr, user_agent: &str) {
        self.answered(address, user_agent);
        let Some(store) = store.filter(|store| store.usable()) else { return };
        let key = self.unanswered_key(address, user_agent);
        tokio::spawn(async move {
            let _ = store.answered(&key).await;
        });
    }

    /// The challenges the client was shown since it last answered, as every replica counted
    /// them, waiting at most `wait`; `None` when the store did not answer in time. This
    /// replica's count follows it: an answer on another replica clears it here.
    pub(crate) async fn unanswered_everywhere(
        &self,
        store: Arc<Store>,
        address: IpAddr,
        user_agent: &str,
        wait: Duration,
    ) -> Option<u32> {
        let key = self.unanswered_key(address, user_agent);
        let reading = tokio::spawn(async move { store.unanswered(&key).await });
        let count = tokio::time::timeout(wait, reading).await.ok()?.ok()?.ok()?;
        let local = self.challenged_key(address, user_agent);
        if count == 0 {
            self.unanswered.invalidate(&local);
        } else {
            let fresh = || Arc::new(Unanswered { since: Instant::now(), count: AtomicU32::new(0) });
            self.unanswered.get_with(local, fresh).count.store(count, Ordering::Relaxed);
        }
        Some(count)
    }

    /// Counts a pass holder's page view behind `address` (on a datacenter network) on `store`,
    /// and raises this replica's crowds to every replica's count when it answers within `wait`,
    /// so that the address's and network's reading budgets hold across replicas (the count
    /// completes either way: it is spawned).
    pub(crate) async fn read_everywhere(&self, store: Arc<Store>, address: IpAddr, wait: Duration) {
        let network = economy::network_text(economy::network_of(address));
        let text = address.to_canonical().to_string();
        let counting = tokio::spawn(async move {
            store.crowd(&network, &text, economy::RATE_WINDOW, economy::RATE_WINDOW * 10).await
        });
        if let Ok(Ok(Ok((network_pages, address_pages)))) = tokio::time::timeout(wait, counting).await {
            self.economy.observe_crowd(address, network_pages, address_pages, Instant::now());
        }
    }

    /// The pace terms every replica counts a pass's page views by.
    pub(crate) fn pace_terms(&self) -> PaceTerms {
        let burn = &self.config.burn;
        PaceTerms {
            interval: Duration::from_secs(60) / burn.pages_per_minute.max(1),
            networks_kept: burn.networks.saturating_add(1),
            window: burn.window,
            day: DAY,
        }
    }

    /// `answered`, accepted by this replica, as every replica's answers from its network add
    /// up on `store`: refused as replayed when another replica took the same challenge, busy
    /// when the network's queue or ids are full there, else starting at the later of the two
    /// turns. The store's count of the network's passes prices its next challenges here too.
    pub(crate) async fn answer_shared(
        &self,
        store: Arc<Store>,
        answered: Answered,
        datacenter: bool,
    ) -> Result<Answered, AnswerError> {
        let ticket = answered.ticket;
        let terms = MintTerms {
            half_life: PRESSURE_HALF_LIFE,
            interval: MINT_INTERVAL,
            burst: FREE_PASSES,
            longest: LONGEST_TURN,
            kept: ANSWERS_PER_NETWORK as u32,
            idle: PRESSURE_HALF_LIFE * 6,
        };
        let network = economy::network_text(ticket.network);
        let minting = tokio::spawn(async move {
            store.mint(&network, ticket.id, ticket.expires, datacenter, ticket.cost, &terms).await
        });
        let Ok(Ok(Ok(shared))) = tokio::time::timeout(ANSWER_WAIT, minting).await else {
            return Ok(answered);
        };
        let (minted, outcome) = match shared {
            SharedMint::Minted { minted, delay } => {
                (minted, Ok(Answered { starts_in: answered.starts_in.max(delay), ..answered }))
            }
            SharedMint::Replayed { minted } => (minted, Err(AnswerError::Replayed)),
            SharedMint::Busy { minted, retry } => (minted, Err(AnswerError::Busy(retry))),
        };
        self.economy.observe(ticket.network, minted, Instant::now());
        outcome
    }

    /// A pass's use as every replica's page views of it add up (`shared`), with `local`, this
    /// replica's: the more networks of the two; burned when the shared networks or pace burn
    /// it; asked again when the shared pace or day's budget does. A burn found here is kept on
    /// this replica's record, so that it is counted once.
    pub(crate) fn with_shared_use(&self, id: u128, local: PassUse, shared: SharedPassUse) -> PassUse {
        let terms = self.pace_terms();
        let burn = &self.config.burn;
        let tolerance = terms.interval * burn.page_burst.max(1).saturating_sub(1);
        let networks = local.networks.max(shared.networks);
        let burned = local.burned.or_else(|| {
            if networks > burn.networks {
                Some("networks")
            } else if shared.ahead > BURN_AHEAD.max(tolerance) {
                Some("pages")
            } else {
                None
            }
        });
        let newly_burned = local.newly_burned || (local.burned.is_none() && burned.is_some());
        if burned.is_some()
            && local.burned.is_none()
            && let Some(record) = self.passes.get(&id)
        {
            record.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).burned = true;
        }
        let rechallenge = local.rechallenge.or_else(|| {
            if shared.ahead > tolerance {
                Some("pace")
            } else if shared.day_pages > PAGES_PER_DAY {
                Some("budget")
            } else {
                None
            }
        });
        PassUse { networks, burned, newly_burned, rechallenge: rechallenge.filter(|_| burned.is_none()) }
    }
}
