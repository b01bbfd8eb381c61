//! Lookups that verdicts start but never wait for past a budget (reverse DNS of a claimed
//! crawler, a Web Bot Auth key directory): one lookup per key at a time, its answer cached, and
//! new lookups limited in rate and in number in flight.
//!
//! A lookup runs as a task of its own holding an owned permit, so a lookup that panics or is
//! aborted at shutdown gives its slot back when its task ends: the in-flight budget cannot leak.
//! Part of the budget can be kept for *favoured* keys (an agent whose directory was fetched
//! before), so that a spray of new keys, which any client can mint, never starves them.

use std::hash::Hash;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use moka::sync::Cache;
use tokio::sync::{Semaphore, watch};

/// A key's lookup: under way (its answer arrives on the channel), or done.
#[derive(Clone)]
pub(crate) enum Entry<V> {
    /// Under way.
    InFlight(watch::Receiver<Option<V>>),
    /// Its answer.
    Done(V),
}

/// How long entries are kept: an in-flight one for the lookup's timeout and a little more, an
/// answer for what `done_for` says.
struct Expiry<V> {
    in_flight_for: Duration,
    done_for: fn(&V) -> Duration,
}

impl<K, V> moka::Expiry<K, Entry<V>> for Expiry<V> {
    fn expire_after_create(&self, _: &K, entry: &Entry<V>, _: Instant) -> Option<Duration> {
        Some(match entry {
            Entry::InFlight(_) => self.in_flight_for,
            Entry::Done(answer) => (self.done_for)(answer),
        })
    }

    fn expire_after_update(
        &self,
        key: &K,
        entry: &Entry<V>,
        now: Instant,
        _: Option<Duration>,
    ) -> Option<Duration> {
        self.expire_after_create(key, entry, now)
    }
}

/// New lookups started per second and in flight at once.
struct Budget {
    limiter: DefaultDirectRateLimiter,
    permits: Arc<Semaphore>,
    #[cfg(test)]
    size: usize,
}

impl Budget {
    fn new(per_second: u32, in_flight: usize) -> Budget {
        let per_second = NonZeroU32::new(per_second).unwrap_or(NonZeroU32::MIN);
        let size = in_flight.max(1);
        Budget {
            limiter: RateLimiter::direct(Quota::per_second(per_second)),
            permits: Arc::new(Semaphore::new(size)),
            #[cfg(test)]
            size,
        }
    }

    #[cfg(test)]
    fn in_flight(&self) -> usize {
        self.size - self.permits.available_permits()
    }

    /// A slot for one lookup now, if the budget has one.
    fn take(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let permit = self.permits.clone().try_acquire_owned().ok()?;
        self.limiter.check().ok()?;
        Some(permit)
    }
}

/// The lookups of one kind, their answers and their budgets.
pub(crate) struct SingleFlight<K, V> {
    cache: Cache<K, Entry<V>>,
    general: Budget,
    /// Kept for favoured keys, which use it before the general budget.
    reserved: Budget,
}

/// The settings of a [`SingleFlight`].
pub(crate) struct Settings<V> {
    /// Entries kept, at most.
    pub capacity: u64,
    /// How long a lookup may take; its in-flight entry is kept a second longer.
    pub timeout: Duration,
    /// How long an answer is kept.
    pub done_for: fn(&V) -> Duration,
    /// New lookups per second, for any key.
    pub per_second: u32,
    /// Lookups in flight at once, for any key.
    pub in_flight: usize,
    /// New lookups per second kept for favoured keys (on top of the general budget).
    pub reserved_per_second: u32,
    /// Lookups in flight at once kept for favoured keys.
    pub reserved_in_flight: usize,
}

impl<K, V> SingleFlight<K, V>
where
    K: Hash + Eq + Clone + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    /// Lookups with these budgets.
    pub(crate) fn new(settings: Settings<V>) -> SingleFlight<K, V> {
        let expiry =
            Expiry { in_flight_for: settings.timeout + Duration::from_secs(1), done_for: settings.done_for };
        SingleFlight {
            cache: Cache::builder().max_capacity(settings.capacity).expire_after(expiry).build(),
            general: Budget::new(settings.per_second, settings.in_flight),
            reserved: Budget::new(settings.reserved_per_second, settings.reserved_in_flight),
        }
    }

    /// What is known of `key` now.
    pub(crate) fn get(&self, key: &K) -> Option<Entry<V>> {
        self.cache.get(key)
    }

    /// Keeps `answer` for `key` (tests, and answers known without a lookup).
    #[cfg(test)]
    pub(crate) fn insert(&self, key: K, answer: V) {
        self.cache.insert(key, Entry::Done(answer));
    }

    /// The answer for `key` when it arrives: joins the lookup under way, or starts `lookup` as a
    /// task of its own if a budget allows (a favoured key first uses the reserved one). `None`
    /// when over budget. Must be called within a Tokio runtime.
    pub(crate) fn start<F>(
        &self,
        key: K,
        favoured: bool,
        lookup: impl FnOnce() -> F,
    ) -> Option<watch::Receiver<Option<V>>>
    where
        F: Future<Output = V> + Send + 'static,
    {
        let mut started = None;
        let entry = self.cache.entry(key.clone()).or_optionally_insert_with(|| {
            let permit = favoured.then(|| self.reserved.take()).flatten().or_else(|| self.general.take())?;
            let (sender, receiver) = watch::channel(None);
            started = Some((sender, permit));
            Some(Entry::InFlight(receiver))
        });
        let entry = entry?;
        if let Some((sender, permit)) = started {
            let cache = self.cache.clone();
            let lookup = lookup();
            tokio::spawn(async move {
                // Held to the end of the task, however it ends.
                let _permit = permit;
                let answer = lookup.await;
                cache.insert(key, Entry::Done(answer.clone()));
                let _ = sender.send(Some(answer));
            });
        }
        match entry.into_value() {
            Entry::InFlight(receiver) => Some(receiver),
            Entry::Done(answer) => Some(watch::channel(Some(answer)).1),
        }
    }

    /// Lookups in flight now.
    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> usize {
        self.general.in_flight() + self.reserved.in_flight()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flights(in_flight: usize) -> SingleFlight<u32, u32> {
        SingleFlight::new(Settings {
            capacity: 100,
            timeout: Duration::from_secs(5),
            done_for: |_| Duration::from_secs(60),
            per_second: 1000,
            in_flight,
            reserved_per_second: 1000,
            reserved_in_flight: 1,
        })
    }

    #[tokio::test]
    async fn a_lookup_that_panics_gives_its_slot_back() {
        let flights = flights(1);
        let receiver = flights.start(1, false, || async { panic!("a lookup's bug") });
        assert!(receiver.is_some());
        // The task ends with the panic; its permit goes with it.
        for _ in 0..100 {
            if flights.in_flight() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(flights.in_flight(), 0, "the panicking lookup kept its slot");
        let mut answer = flights.start(2, false, || async { 7 }).expect("a slot is free again");
        assert_eq!(*answer.wait_for(Option::is_some).await.unwrap(), Some(7));
    }

    #[tokio::test]
    async fn one_lookup_per_key_and_favoured_keys_have_a_reserve() {
        let flights = flights(1);
        let (release, hold) = tokio::sync::oneshot::channel::<()>();
        let first = flights.start(1, false, || async move {
            let _ = hold.await;
            1
        });
        assert!(first.is_some());
        // The same key joins the lookup under way; a new one is over the general budget.
        assert!(flights.start(1, false, || async { unreachable!("a second lookup of one key") }).is_some());
        assert!(flights.start(2, false, || async { 2 }).is_none(), "over budget");
        // A favoured key still gets a lookup, from the reserve.
        let mut favoured = flights.start(3, true, || async { 3 }).expect("the reserve");
        assert_eq!(*favoured.wait_for(Option::is_some).await.unwrap(), Some(3));
        let _ = release.send(());
        let mut first = first.unwrap();
        assert_eq!(*first.wait_for(Option::is_some).await.unwrap(), Some(1));
    }
}
