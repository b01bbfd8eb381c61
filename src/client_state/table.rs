//! The table the client records live in, and what it drops when it is full.
//!
//! A million remembered clients must fit in a small process, so a record costs its own bytes and
//! a few more: the table is a fixed number of shards, each a slab of slots (key and record
//! inline, no allocation per client) and a hash index of slot numbers (four bytes and a control
//! byte each). A general cache's queue nodes, per-entry allocation and frequency sketch cost
//! more than the record itself (moka: about 560 bytes per client in the process, all counted).
//!
//! A full shard evicts by CLOCK: a record read again since the hand last passed it gets another
//! round, a one-page visitor does not. Records with trap hits (a crawler, a burned pass) are
//! passed over while they hold at most half of the shard, so no flood of fresh addresses can
//! erase them: only more trapped clients can, and then the oldest go first.
//!
//! Each shard has its own lock, held for one record's arithmetic; nothing takes a global lock.

use std::hash::BuildHasher;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hashbrown::HashTable;

use super::Record;
use crate::client::{ClientKey, KeyHasher};

/// Most shards: enough that two threads rarely meet on one lock.
const MAX_SHARDS: usize = 64;

/// Fewest slots a shard is made for, so a small table is one shard and holds its capacity exactly.
const MIN_SHARD_SLOTS: u64 = 256;

/// Rounds a record read often survives the hand: three reads since it last passed, three rounds.
const MAX_CLOCK: u8 = 3;

/// Instants as nanoseconds since the table was made: eight bytes instead of sixteen per time kept.
#[derive(Clone, Copy, Debug)]
pub(super) struct Clock {
    base: Instant,
}

impl Clock {
    fn new() -> Clock {
        Clock { base: Instant::now() }
    }

    /// `at` as ticks; an instant before the table's making is its making (it decays nothing).
    pub(super) fn ticks(self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.base).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Whole seconds since the making, for idleness.
    fn seconds(self, at: Instant) -> u32 {
        u32::try_from(at.saturating_duration_since(self.base).as_secs()).unwrap_or(u32::MAX)
    }
}

/// All the records, by client.
pub(super) struct Table {
    shards: Box<[Mutex<Shard>]>,
    shard_capacity: usize,
    hasher: KeyHasher,
    clock: Clock,
    /// Seconds without a read after which a record is forgotten.
    idle: u32,
    /// The same for a record with trap hits: at least `idle`.
    kept_idle: u32,
    on_evict: Box<dyn Fn() + Send + Sync>,
}

struct Shard {
    /// Slot numbers, by the hash of their key.
    index: HashTable<u32>,
    slots: Vec<Slot>,
    /// The CLOCK hand: the next slot an eviction looks at.
    hand: usize,
    /// Slots whose records have trap hits.
    kept: usize,
}

/// A key and its record. The key is held as its parts (18 bytes, not [`ClientKey`]'s 32, whose
/// `u128` is aligned to 16), beside the record so the padding is shared.
struct Slot {
    bits: [u64; 2],
    tag: u16,
    /// Rounds left before the hand may take it.
    clock: u8,
    /// When it was last read ([`Clock::seconds`]).
    touched: u32,
    record: Record,
}

impl Slot {
    fn key(&self) -> ClientKey {
        ClientKey::from_parts(self.bits, self.tag)
    }

    fn idle(&self, now: u32, idle: u32) -> bool {
        now.saturating_sub(self.touched) > idle
    }

    /// A request of the client's at `now`: it is not idle, and has another round.
    fn read(&mut self, now: u32) {
        self.touched = now;
        self.clock = (self.clock + 1).min(MAX_CLOCK);
    }
}

impl Table {
    /// A table for about `capacity` records (at most one more per shard), forgetting a record
    /// `idle` after its last read; `on_evict` runs for each record dropped for room or idleness.
    pub(super) fn new(capacity: u64, idle: Duration, on_evict: impl Fn() + Send + Sync + 'static) -> Table {
        let capacity = capacity.max(1);
        let shards = usize::try_from(capacity / MIN_SHARD_SLOTS)
            .unwrap_or(MAX_SHARDS)
            .clamp(1, MAX_SHARDS)
            .next_power_of_two()
            .min(MAX_SHARDS);
        let shard_capacity =
            usize::try_from(capacity.div_ceil(shards as u64)).unwrap_or(usize::MAX).min(u32::MAX as usize);
        let shards = (0..shards)
            .map(|_| Mutex::new(Shard { index: HashTable::new(), slots: Vec::new(), hand: 0, kept: 0 }))
            .collect();
        Table {
            shards,
            shard_capacity,
            hasher: KeyHasher::default(),
            clock: Clock::new(),
            idle: u32::try_from(idle.as_secs()).unwrap_or(u32::MAX),
            kept_idle: u32::try_from(idle.as_secs()).unwrap_or(u32::MAX),
            on_evict: Box::new(on_evict),
        }
    }

    /// Records with trap hits are forgotten only after `at_least` without a read (or the
    /// table's idle time, if longer): a burned pass must stay burned for as long as it is valid.
    pub(super) fn keep_trapped_for(&mut self, at_least: Duration) {
        self.kept_idle = self.idle.max(u32::try_from(at_least.as_secs()).unwrap_or(u32::MAX));
    }

    /// The table's clock, which the records' times are kept in.
    pub(super) fn clock(&self) -> Clock {
        self.clock
    }

    /// Seconds of idleness after which `record` is forgotten.
    fn idle_of(&self, record: &Record) -> u32 {
        if record.kept() { self.kept_idle } else { self.idle }
    }

    fn hash(&self, key: &ClientKey) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The shard for `hash`: bits the index uses for neither its buckets (the low ones) nor its
    /// control bytes (the top seven), so the keys of one shard still spread over its index.
    fn shard(&self, hash: u64) -> MutexGuard<'_, Shard> {
        let shard = &self.shards[(hash >> 32) as usize & (self.shards.len() - 1)];
        shard.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `f` on `key`'s record, if it is remembered, for a request of the client's: the read
    /// counts for the record's idleness and its rounds against eviction.
    pub(super) fn get<R>(&self, key: ClientKey, f: impl FnOnce(&mut Record) -> R) -> Option<R> {
        self.find(key, true, f)
    }

    /// [`Table::get`] for work that is not the client's (the store's syncer, the admin views, a
    /// verdict's second look): the record is neither kept longer nor given another round, so a
    /// scrape every few seconds cannot keep every trapped client alive.
    pub(super) fn peek<R>(&self, key: ClientKey, f: impl FnOnce(&mut Record) -> R) -> Option<R> {
        self.find(key, false, f)
    }

    fn find<R>(&self, key: ClientKey, read: bool, f: impl FnOnce(&mut Record) -> R) -> Option<R> {
        let hash = self.hash(&key);
        let now = self.clock.seconds(Instant::now());
        let mut guard = self.shard(hash);
        let shard = &mut *guard;
        let at = *shard.index.find(hash, |&i| shard.slots[i as usize].key() == key)? as usize;
        let slot = &mut shard.slots[at];
        if slot.idle(now, self.idle_of(&slot.record)) {
            return None;
        }
        if read {
            slot.read(now);
        }
        Some(shard.run(at, f))
    }

    /// Runs `f` on `key`'s record, made by `make` if it is not remembered; a full shard makes
    /// room first.
    pub(super) fn get_or_insert<R>(
        &self,
        key: ClientKey,
        make: impl FnOnce() -> Record,
        f: impl FnOnce(&mut Record) -> R,
    ) -> R {
        let hash = self.hash(&key);
        let now = self.clock.seconds(Instant::now());
        let mut guard = self.shard(hash);
        let shard = &mut *guard;
        if let Some(&at) = shard.index.find(hash, |&i| shard.slots[i as usize].key() == key) {
            let at = at as usize;
            let slot = &mut shard.slots[at];
            if slot.idle(now, self.idle_of(&slot.record)) {
                // Forgotten: the client starts again, in the same slot, with no rounds.
                (self.on_evict)();
                (slot.clock, slot.touched) = (0, now);
                shard.replace(at, make());
            } else {
                slot.read(now);
            }
            return shard.run(at, f);
        }
        let (bits, tag) = key.to_parts();
        let slot = Slot { bits, tag, clock: 0, touched: now, record: make() };
        let at = if shard.slots.len() < self.shard_capacity {
            shard.slots.push(slot);
            shard.slots.len() - 1
        } else {
            let victim = shard.victim(now, self.idle, self.kept_idle);
            let old = self.hash(&shard.slots[victim].key());
            if let Ok(entry) = shard.index.find_entry(old, |&i| i as usize == victim) {
                entry.remove();
            }
            shard.kept -= usize::from(shard.slots[victim].record.kept());
            shard.slots[victim] = slot;
            (self.on_evict)();
            victim
        };
        shard.kept += usize::from(shard.slots[at].record.kept());
        let Shard { index, slots, .. } = shard;
        index.insert_unique(hash, at as u32, |&i| self.hash(&slots[i as usize].key()));
        // A new record has no rounds: a one-page visitor is the first the hand takes.
        shard.run(at, f)
    }

    /// The keys of the records for which `which` holds (a walk of every shard, one at a time).
    pub(super) fn keys_where(&self, which: impl Fn(&Record) -> bool) -> Vec<ClientKey> {
        let now = self.clock.seconds(Instant::now());
        let mut keys = Vec::new();
        for shard in &self.shards {
            let shard = shard.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            keys.extend(
                shard
                    .slots
                    .iter()
                    .filter(|slot| !slot.idle(now, self.idle_of(&slot.record)) && which(&slot.record))
                    .map(Slot::key),
            );
        }
        keys
    }

    /// Records remembered and not idle (a walk of every shard: for scrapes and tests).
    pub(super) fn len(&self) -> u64 {
        let now = self.clock.seconds(Instant::now());
        self.shards
            .iter()
            .map(|shard| {
                let shard = shard.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                shard.slots.iter().filter(|slot| !slot.idle(now, self.idle_of(&slot.record))).count() as u64
            })
            .sum()
    }
}

impl Shard {
    /// Runs `f` on the record in slot `at`, keeping the count of kept records.
    fn run<R>(&mut self, at: usize, f: impl FnOnce(&mut Record) -> R) -> R {
        let slot = &mut self.slots[at];
        let was = slot.record.kept();
        let result = f(&mut slot.record);
        let is = slot.record.kept();
        self.kept = self.kept + usize::from(is) - usize::from(was);
        result
    }

    /// Puts `record` in slot `at` in place of the one there.
    fn replace(&mut self, at: usize, record: Record) {
        let slot = &mut self.slots[at];
        self.kept -= usize::from(slot.record.kept());
        slot.record = record;
        self.kept += usize::from(slot.record.kept());
    }

    /// The slot to give a new record: the first idle one the hand reaches, or the first with no
    /// rounds left, passing over records with trap hits while they hold at most half the shard.
    fn victim(&mut self, now: u32, idle: u32, kept_idle: u32) -> usize {
        let len = self.slots.len();
        let pass_kept = self.kept * 2 <= len;
        // With at least half the slots not kept, every one of them has no rounds left after
        // MAX_CLOCK + 1 turns, so the walk ends well within its bound.
        for _ in 0..len * (usize::from(MAX_CLOCK) + 2) {
            let at = self.hand;
            self.hand = (self.hand + 1) % len;
            let slot = &mut self.slots[at];
            if slot.idle(now, if slot.record.kept() { kept_idle } else { idle }) {
                return at;
            }
            if pass_kept && slot.record.kept() {
                continue;
            }
            if slot.clock == 0 {
                return at;
            }
            slot.clock -= 1;
        }
        self.hand
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(text: &str) -> ClientKey {
        crate::client::ClientIdentity::new(vec![], 32, 64).key(text.parse().unwrap())
    }

    #[test]
    fn a_peek_neither_keeps_a_record_nor_gives_it_a_round() {
        // The admin views and the store's syncer peek: were that a read, a scrape every few
        // seconds would keep every trapped client remembered for ever.
        let table = Table::new(10, Duration::ZERO, || {});
        let client = key("192.0.2.1");
        table.get_or_insert(client, || Record::new(0, 0), |_| ());
        let deadline = Instant::now() + Duration::from_secs(5);
        // Idleness is counted in whole seconds: forgotten at the next one, at most five.
        while table.peek(client, |_| ()).is_some() {
            assert!(Instant::now() < deadline, "peeking keeps it");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn the_hand_takes_a_record_no_request_read_again_and_spares_one_read() {
        let table = Table::new(3, Duration::from_secs(3600), || {});
        let (peeked, read, fresh) = (key("192.0.2.1"), key("192.0.2.2"), key("192.0.2.3"));
        for client in [peeked, read, fresh] {
            table.get_or_insert(client, || Record::new(0, 0), |_| ());
        }
        for _ in 0..3 {
            table.peek(peeked, |_| ());
        }
        table.get(read, |_| ());
        // Full: the newcomer takes the first slot with no rounds left. The peeked record has none
        // (a peek is not the client's request), the read one has one.
        table.get_or_insert(key("192.0.2.4"), || Record::new(0, 0), |_| ());
        let remembered = |client| table.peek(client, |_| ()).is_some();
        assert_eq!([remembered(peeked), remembered(read), remembered(fresh)], [false, true, true]);
    }
}
