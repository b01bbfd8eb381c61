//! The pass economy: what a pass costs on the network it is minted from, and how fast the pass
//! holders behind one address or one network may read together.
//!
//! A pass is a person; an address is not (dozens of people share a VPN or Zero Trust egress),
//! and neither is a network (a crawler farm rents a whole cloud /24). So nothing here traps
//! anyone: a network's pressure only raises the price of its next pass, and its readers' pace
//! only asks them again.
//!
//! - **Price.** Every accepted answer counts on its network (IPv4 /24, IPv6 /48), decaying with a
//!   half-life of [`PRESSURE_HALF_LIFE`]. Past [`FREE_PASSES`], each doubling of the count adds a
//!   bit of difficulty to the network's next challenges and doubles their no-JavaScript wait, up
//!   to [`MAX_EXTRA_BITS`] and [`LONGEST_WAIT`]: bounded, and gone within the hour once the
//!   minting stops, so no one can raise the price for a network for long.
//! - **Turn.** Work alone cannot price a farm (its native hashes are hundreds of times cheaper
//!   than a browser's) and a wait alone costs it nothing it cannot run in parallel; what it cannot
//!   parallelise is its network's turn. On datacenter networks, past a burst of [`FREE_PASSES`],
//!   passes are issued one per [`MINT_INTERVAL`], a no-JavaScript answer costing [`WAIT_COST`]
//!   turns: the pass is minted at once but starts at its turn, and the page says how long that
//!   is. Turns are never booked more than [`LONGEST_TURN`] ahead; past that an answer is refused
//!   as busy without booking, so no one can make a network's queue longer than that.
//! - **Share.** On datacenter networks, the page views of pass holders are counted per address
//!   and per network. While either is over its budget ([`ADDRESS_PAGES_PER_MINUTE`],
//!   [`NETWORK_PAGES_PER_MINUTE`]), a pass reading faster than its share is asked again. The
//!   share follows the pressure (it shrinks while the budget is exceeded and grows back when it
//!   is not), between [`SHARE_FLOOR`] and the pass's own pace. A crowd of people reading at a
//!   person's pace stays under the budget and never meets the share; a crawler's many passes
//!   together get the budget, however many it mints.

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use moka::sync::Cache;

use crate::client::KeyHasher;

/// A network: its family (4 or 6) and its /24 or /48 bits.
pub(crate) type Network = (u8, u128);

/// A client's network, for binding challenges and counting: its IPv4 /24 or IPv6 /48.
pub(crate) fn network_of(address: IpAddr) -> Network {
    match address.to_canonical() {
        IpAddr::V4(v4) => (4, u128::from(u32::from(v4) & 0xffff_ff00)),
        IpAddr::V6(v6) => (6, u128::from(v6) & !((1u128 << 80) - 1)),
    }
}

/// A network as text: `198.51.100.0/24`, `2001:db8::/48`.
pub(crate) fn network_text((family, bits): Network) -> String {
    if family == 4 {
        format!("{}/24", std::net::Ipv4Addr::from(bits as u32))
    } else {
        format!("{}/48", std::net::Ipv6Addr::from(bits))
    }
}

/// Answers a network may have accepted, at any rate, before its passes cost more: an office of a
/// few dozen people behind one address never notices.
pub(crate) const FREE_PASSES: u32 = 48;
/// How fast the count of a network's accepted answers decays.
pub(crate) const PRESSURE_HALF_LIFE: Duration = Duration::from_secs(10 * 60);
/// The most difficulty bits a network's pressure adds (16 times the work).
pub(crate) const MAX_EXTRA_BITS: u8 = 4;
/// The longest no-JavaScript wait a network's pressure makes.
pub(crate) const LONGEST_WAIT: Duration = Duration::from_secs(60);
/// Past its burst, a datacenter network's passes start one per this.
pub(crate) const MINT_INTERVAL: Duration = Duration::from_secs(20);
/// Turns a no-JavaScript answer takes: a wait costs a crawler only time, which it parallelises.
pub(crate) const WAIT_COST: u32 = 4;
/// Turns are booked at most this far ahead.
pub(crate) const LONGEST_TURN: Duration = Duration::from_secs(10 * 60);
/// Pass holders' page views a minute behind one datacenter address before passes reading faster
/// than their share are asked again: 40 people reading a page every 15 to 45 s make about 80.
pub(crate) const ADDRESS_PAGES_PER_MINUTE: f64 = 120.0;
/// The same for a datacenter network (/24, /48), whose addresses a farm rents together.
pub(crate) const NETWORK_PAGES_PER_MINUTE: f64 = 720.0;
/// The smallest share, in page views a minute: a person reading a page a minute is never asked
/// again, however many passes a crawler beside them holds.
pub(crate) const SHARE_FLOOR: f64 = 1.0;
/// The time constant of page rates: a rate is the page views of about the last minute.
pub(crate) const RATE_WINDOW: Duration = Duration::from_secs(60);
/// How quickly a share follows the pressure: by a factor of e in this long when the pages are e
/// times the budget.
const SHARE_RESPONSE: Duration = Duration::from_secs(30);
/// Networks and addresses with a record (minting or pass holders reading).
const NETWORKS: u64 = 50_000;
const ADDRESSES: u64 = 100_000;

/// A count that decays exponentially with time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Decaying {
    value: f64,
    at: Instant,
}

impl Decaying {
    pub(crate) fn new(at: Instant) -> Decaying {
        Decaying { value: 0.0, at }
    }

    /// The count at `at`, decayed with time constant `tau`. For a rate, with `tau` a minute, it
    /// is the events of about the last minute: at a steady rate, exactly the rate a minute.
    pub(crate) fn at(&self, at: Instant, tau: Duration) -> f64 {
        let elapsed = at.saturating_duration_since(self.at).as_secs_f64();
        self.value * (-elapsed / tau.as_secs_f64()).exp()
    }

    /// Adds `amount` at `at`; returns the new count. Events from other threads may arrive a
    /// little out of order: an earlier one is added undecayed.
    pub(crate) fn add(&mut self, amount: f64, at: Instant, tau: Duration) -> f64 {
        self.value = self.at(at, tau) + amount;
        self.at = self.at.max(at);
        self.value
    }
}

/// When an accepted answer's pass starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Turn {
    /// At once.
    Now,
    /// At its network's turn, this long from now.
    In(Duration),
    /// Not booked: the network's queue is [`LONGEST_TURN`] long; try again in this long.
    Busy(Duration),
}

/// The readers behind one address or network.
struct Crowd {
    /// Pass holders' page views read (not those asked again), a minute.
    pages: Decaying,
    /// The share, page views a minute, a pass may read while the crowd is over its budget.
    share: f64,
    /// When the share last moved.
    at: Instant,
}

impl Crowd {
    fn new(at: Instant) -> Crowd {
        Crowd { pages: Decaying::new(at), share: f64::MAX, at }
    }

    /// Moves the share towards what `budget` allows and says whether a pass that would read at
    /// `rate` with this page view is over it (only while the crowd is over its budget).
    fn over(&mut self, rate: f64, budget: f64, ceiling: f64, at: Instant) -> bool {
        let ceiling = ceiling.max(SHARE_FLOOR);
        let pages = self.pages.at(at, RATE_WINDOW);
        let elapsed = at.saturating_duration_since(self.at).as_secs_f64();
        self.at = self.at.max(at);
        let step = (budget / pages.max(1.0)).ln() * elapsed / SHARE_RESPONSE.as_secs_f64();
        self.share = (self.share.min(ceiling) * step.exp()).clamp(SHARE_FLOOR, ceiling);
        pages > budget && rate > self.share
    }

    fn read(&mut self, at: Instant) {
        self.pages.add(1.0, at, RATE_WINDOW);
    }
}

/// One network's record: its minting and its readers.
struct NetworkRecord {
    minted: Decaying,
    /// The turn queue's theoretical arrival time (GCRA: a burst of [`FREE_PASSES`] turns).
    turn_due: Instant,
    crowd: Crowd,
}

/// Per-replica records of every network's minting and every address's and network's readers.
pub(crate) struct Economy {
    networks: Cache<Network, Arc<Mutex<NetworkRecord>>, KeyHasher>,
    addresses: Cache<IpAddr, Arc<Mutex<Crowd>>, KeyHasher>,
}

impl Default for Economy {
    fn default() -> Self {
        Economy {
            // Idle for longer than the pressure lasts and the queue is booked.
            networks: Cache::builder()
                .max_capacity(NETWORKS)
                .time_to_idle(PRESSURE_HALF_LIFE * 6)
                .build_with_hasher(KeyHasher::default()),
            addresses: Cache::builder()
                .max_capacity(ADDRESSES)
                .time_to_idle(RATE_WINDOW * 10)
                .build_with_hasher(KeyHasher::default()),
        }
    }
}

fn pressure_tau() -> Duration {
    PRESSURE_HALF_LIFE.div_f64(std::f64::consts::LN_2)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Extra difficulty bits for a network that minted `minted` passes lately: one for each doubling
/// past [`FREE_PASSES`].
pub(crate) fn extra_bits(minted: f64) -> u8 {
    let free = f64::from(FREE_PASSES);
    if minted <= free {
        return 0;
    }
    ((minted / free).log2().floor() as u8).saturating_add(1).min(MAX_EXTRA_BITS)
}

/// The no-JavaScript wait for `extra` bits: the base doubled for each, up to [`LONGEST_WAIT`]
/// (never below the base).
pub(crate) fn wait_for(base: Duration, extra: u8) -> Duration {
    base.max((base * (1u32 << extra.min(MAX_EXTRA_BITS))).min(LONGEST_WAIT))
}

impl Economy {
    fn network(&self, network: Network, at: Instant) -> Arc<Mutex<NetworkRecord>> {
        self.networks.get_with(network, || {
            Arc::new(Mutex::new(NetworkRecord {
                minted: Decaying::new(at),
                turn_due: at,
                crowd: Crowd::new(at),
            }))
        })
    }

    /// Passes `network` minted lately, decayed.
    pub(crate) fn pressure(&self, network: Network, at: Instant) -> f64 {
        self.networks.get(&network).map_or(0.0, |record| lock(&record).minted.at(at, pressure_tau()))
    }

    /// The extra difficulty bits for `network`'s next challenge.
    pub(crate) fn extra_bits(&self, network: Network, at: Instant) -> u8 {
        extra_bits(self.pressure(network, at))
    }

    /// An answer from `network` was accepted at `at` (`cost` turns: 1 for work, [`WAIT_COST`]
    /// for a wait): counts it, and on a datacenter network books its pass's turn.
    pub(crate) fn mint(&self, network: Network, datacenter: bool, cost: u32, at: Instant) -> Turn {
        let record = self.network(network, at);
        let mut record = lock(&record);
        let mut turn = Turn::Now;
        if datacenter {
            let burst = MINT_INTERVAL * FREE_PASSES;
            let due = record.turn_due.max(at) + MINT_INTERVAL * cost.max(1);
            let delay = due.saturating_duration_since(at).saturating_sub(burst);
            if delay > LONGEST_TURN {
                return Turn::Busy(delay - LONGEST_TURN);
            }
            record.turn_due = due;
            if !delay.is_zero() {
                turn = Turn::In(delay);
            }
        }
        record.minted.add(1.0, at, pressure_tau());
        turn
    }

    /// A shared store counted `minted` passes from `network` lately, every replica's together:
    /// this replica's count is raised to it, so that its next challenges there are priced by it.
    pub(crate) fn observe(&self, network: Network, minted: f64, at: Instant) {
        let record = self.network(network, at);
        let mut record = lock(&record);
        let local = record.minted.at(at, pressure_tau());
        if minted > local {
            record.minted.add(minted - local, at, pressure_tau());
        }
    }

    /// Whether a pass holder's page view at `address` (on a datacenter network), which would
    /// bring the pass's own rate to `rate` page views a minute, is over its share; `ceiling` is
    /// the pass's pace. Moves the address's and the network's shares.
    pub(crate) fn over_share(&self, address: IpAddr, rate: f64, ceiling: f64, at: Instant) -> bool {
        let address = address.to_canonical();
        let by_address = {
            let crowd = self.addresses.get_with(address, || Arc::new(Mutex::new(Crowd::new(at))));
            lock(&crowd).over(rate, ADDRESS_PAGES_PER_MINUTE, ceiling, at)
        };
        let record = self.network(network_of(address), at);
        let by_network = lock(&record).crowd.over(rate, NETWORK_PAGES_PER_MINUTE, ceiling, at);
        by_address || by_network
    }

    /// A shared store counted `network_pages` and `address_pages` page views of pass holders
    /// lately behind `address`'s network and the address, every replica's together: this
    /// replica's crowds are raised to them, so their budgets hold across replicas.
    pub(crate) fn observe_crowd(&self, address: IpAddr, network_pages: f64, address_pages: f64, at: Instant) {
        let address = address.to_canonical();
        let raise = |crowd: &mut Crowd, shared: f64| {
            let local = crowd.pages.at(at, RATE_WINDOW);
            if shared > local {
                crowd.pages.add(shared - local, at, RATE_WINDOW);
            }
        };
        let crowd = self.addresses.get_with(address, || Arc::new(Mutex::new(Crowd::new(at))));
        raise(&mut lock(&crowd), address_pages);
        let record = self.network(network_of(address), at);
        raise(&mut lock(&record).crowd, network_pages);
    }

    /// A pass holder at `address` (on a datacenter network) read a page.
    pub(crate) fn read(&self, address: IpAddr, at: Instant) {
        let address = address.to_canonical();
        if let Some(crowd) = self.addresses.get(&address) {
            lock(&crowd).read(at);
        }
        if let Some(record) = self.networks.get(&network_of(address)) {
            lock(&record).crowd.read(at);
        }
    }

    /// The networks under the most pressure, most first, at most `count`: (network, passes
    /// minted lately).
    pub(crate) fn most_pressed(&self, count: usize, at: Instant) -> Vec<(Network, f64)> {
        let mut pressed: Vec<(Network, f64)> = self
            .networks
            .iter()
            .map(|(network, record)| (*network, lock(&record).minted.at(at, pressure_tau())))
            .filter(|&(_, minted)| minted >= 1.0)
            .collect();
        pressed.sort_by(|a, b| b.1.total_cmp(&a.1));
        pressed.truncate(count);
        pressed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn network() -> Network {
        network_of("198.51.100.7".parse().unwrap())
    }

    #[test]
    fn a_crowd_counted_on_other_replicas_is_over_its_budget_here_too() {
        let (economy, at) = (Economy::default(), Instant::now());
        let address: IpAddr = "198.51.100.7".parse().unwrap();
        // This replica saw a few page views there; the store counted a crowd's.
        for _ in 0..10 {
            economy.read(address, at);
        }
        assert!(!economy.over_share(address, 31.0, 30.0, at), "ten page views are no crowd");
        economy.observe_crowd(address, 10.0, 1000.0, at);
        assert!(economy.over_share(address, 31.0, 30.0, at), "every replica's crowd together is");
        // A lower shared count never lowers what this replica counted.
        economy.observe_crowd(address, 0.0, 0.0, at);
        assert!(economy.over_share(address, 31.0, 30.0, at));
    }

    #[test]
    fn the_first_dozens_of_passes_cost_what_they_always_cost_and_then_each_doubling_a_bit_more() {
        assert_eq!(extra_bits(0.0), 0);
        assert_eq!(extra_bits(48.0), 0);
        assert_eq!(extra_bits(49.0), 1);
        assert_eq!(extra_bits(96.0), 2);
        assert_eq!(extra_bits(200.0), 3);
        assert_eq!(extra_bits(1e12), MAX_EXTRA_BITS, "the extra work is capped");
        let base = Duration::from_secs(5);
        assert_eq!(wait_for(base, 0), base);
        assert_eq!(wait_for(base, 2), Duration::from_secs(20));
        assert_eq!(wait_for(base, MAX_EXTRA_BITS), LONGEST_WAIT, "the wait is capped");
    }

    #[test]
    fn a_network_minting_in_bulk_waits_its_turn_and_its_queue_has_an_end() {
        let economy = Economy::default();
        let start = Instant::now();
        // An office: forty passes within a couple of minutes, all at once.
        for person in 0..40u64 {
            let at = start + Duration::from_secs(person * 3);
            assert_eq!(economy.mint(network(), true, 1, at), Turn::Now, "person {person}");
        }
        // A farm right after: the burst's rest, then one turn per interval.
        let at = start + Duration::from_secs(120);
        let turns: Vec<Turn> = (0..60).map(|_| economy.mint(network(), true, 1, at)).collect();
        let first_queued = turns.iter().position(|turn| *turn != Turn::Now).unwrap();
        assert!((8..=16).contains(&first_queued), "{turns:?}");
        let Turn::In(later) = turns[first_queued + 9] else { panic!("{turns:?}") };
        let Turn::In(first) = turns[first_queued] else { panic!("{turns:?}") };
        assert_eq!(later - first, MINT_INTERVAL * 9);
        // Booked up to the longest turn, then refused without booking.
        let mut busy = None;
        for _ in 0..100 {
            match economy.mint(network(), true, 1, at) {
                Turn::Busy(retry) => {
                    busy = Some(retry);
                    break;
                }
                Turn::In(delay) => assert!(delay <= LONGEST_TURN),
                Turn::Now => panic!("a free turn in a full queue"),
            }
        }
        assert!(busy.is_some(), "the queue never filled");
        // A wait answer costs four turns; another network is not affected.
        let other = network_of("203.0.113.9".parse().unwrap());
        assert_eq!(economy.mint(other, true, WAIT_COST, at), Turn::Now);
        // Not a datacenter: counted (the price rises), never queued.
        for _ in 0..200 {
            assert_eq!(economy.mint(other, false, 1, at), Turn::Now);
        }
        assert_eq!(economy.extra_bits(other, at), 3);
        // The pressure decays: an hour later the price is what it was.
        assert_eq!(economy.extra_bits(other, at + PRESSURE_HALF_LIFE * 6), 0);
    }

    #[test]
    fn a_crowd_reading_like_people_is_never_asked_and_a_crawlers_passes_share_the_budget() {
        let economy = Economy::default();
        let start = Instant::now();
        let office: IpAddr = "198.51.100.7".parse().unwrap();
        // 40 people, a page every 30 s each, interleaved: 80 pages a minute, for ten minutes.
        let mut rates = vec![Decaying::new(start); 40];
        for step in 0..(40 * 20u64) {
            let person = (step % 40) as usize;
            let at = start + Duration::from_millis(step * 750);
            let rate = rates[person].at(at, RATE_WINDOW) + 1.0;
            assert!(!economy.over_share(office, rate, 30.0, at), "person {person} asked at step {step}");
            rates[person].add(1.0, at, RATE_WINDOW);
            economy.read(office, at);
        }
        // A crawler at another address with 60 passes, each reading as fast as its pace allows
        // (30 a minute): in its steady state the address reads about its budget.
        let crawler: IpAddr = "203.0.113.9".parse().unwrap();
        let mut rates = vec![Decaying::new(start); 60];
        let (mut read_late, minutes_late) = (0u32, 5u64);
        for step in 0..(60 * 30 * 10u64) {
            let pass = (step % 60) as usize;
            let at = start + Duration::from_micros(step * 60_000_000 / 1800);
            let rate = rates[pass].at(at, RATE_WINDOW) + 1.0;
            if !economy.over_share(crawler, rate, 30.0, at) {
                rates[pass].add(1.0, at, RATE_WINDOW);
                economy.read(crawler, at);
                if at >= start + Duration::from_secs(60 * minutes_late) {
                    read_late += 1;
                }
            }
        }
        let per_minute = f64::from(read_late) / minutes_late as f64;
        assert!(per_minute <= ADDRESS_PAGES_PER_MINUTE * 1.1, "{per_minute} pages a minute");
        assert!(per_minute >= ADDRESS_PAGES_PER_MINUTE * 0.5, "{per_minute} pages a minute");
    }
}
