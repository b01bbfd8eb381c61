//! Which known crawler a request claims to be, and whether it is: the operator's published
//! ranges first (`search-engines.txt`), then forward-confirmed reverse DNS (FCrDNS) for crawlers
//! whose owners document it (`crawler-domains.txt`): the address's PTR name must be under the
//! crawler's domain and resolve back to the address.
//!
//! DNS never holds a verdict past a stated budget. A verification runs as a task of its own; a
//! verdict waits for it at most `dns { verdict-wait-ms }` and otherwise goes on with the claim
//! *pending*, which rules treat as unproven either way: a claimed crawler is never trapped as an
//! impostor because DNS was slow. Answers are cached per (address, crawler), so one crawler costs
//! one verification per address per cache lifetime, and new verifications are limited in rate
//! and number in flight, so a spray of fake "Googlebot" clients from many addresses costs at
//! most `lookups-per-second` verifications a second; the rest stay pending.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hickory_resolver::TokioResolver;
use hickory_resolver::config::{
    ConnectionConfig, LookupIpStrategy, NameServerConfig, ResolveHosts, ResolverConfig,
};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::RData;
use tokio::sync::watch;

use crate::lists::{DomainList, List, NetworkList, is_under};
use crate::observe::metrics::Metrics;
use crate::support::single_flight::{Entry, Settings, SingleFlight};

pub(crate) use crate::facts::claims::{Claim, CrawlerCheck};

/// The resolver that forward-confirmed reverse DNS asks, and the budgets that keep a spray of fake
/// crawlers from stalling verdicts or turning quagmire into a DNS amplifier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsConfig {
    /// Name servers (`IP:port`); empty uses the system's (`/etc/resolv.conf`).
    pub servers: Vec<SocketAddr>,
    /// Longest one verification (PTR, then A/AAAA) may take before it counts as unanswered.
    pub timeout: Duration,
    /// Longest a verdict waits for a verification it started; past it the verdict goes on with
    /// the claim unconfirmed ("pending") and the answer is kept for the next request.
    pub verdict_wait: Duration,
    /// Verifications started per second, at most (a burst of as many is allowed).
    pub lookups_per_second: u32,
    /// Verifications in flight at once, at most.
    pub max_pending: usize,
}

/// What one DNS verification of (address, crawler) found.
#[derive(Clone, Debug, PartialEq, Eq)]
enum DnsAnswer {
    /// Forward-confirmed: this PTR name is under the crawler's domain and resolves back.
    Verified(Arc<str>),
    /// DNS answered, and not for the crawler (no PTR, a name elsewhere, no way back).
    Refused(Arc<str>),
    /// No answer (timeout, server failure, no resolver): cached briefly, then asked again.
    Unknown(Arc<str>),
}

impl DnsAnswer {
    fn check(&self) -> CrawlerCheck {
        match self {
            DnsAnswer::Verified(_) => CrawlerCheck::ReverseDns,
            DnsAnswer::Refused(_) => CrawlerCheck::Failed,
            DnsAnswer::Unknown(_) => CrawlerCheck::Pending,
        }
    }

    fn detail(&self) -> Arc<str> {
        match self {
            DnsAnswer::Verified(detail) | DnsAnswer::Refused(detail) | DnsAnswer::Unknown(detail) => {
                detail.clone()
            }
        }
    }

    /// How long the answer is kept: a verified crawler keeps its address for hours; a refusal
    /// long enough that an impostor costs one verification an hour; no answer is retried soon.
    fn keep_for(&self) -> Duration {
        match self {
            DnsAnswer::Verified(_) => VERIFIED_FOR,
            DnsAnswer::Refused(_) => REFUSED_FOR,
            DnsAnswer::Unknown(_) => UNKNOWN_FOR,
        }
    }

    fn metric(&self) -> &'static str {
        match self {
            DnsAnswer::Verified(_) => "verified",
            DnsAnswer::Refused(_) => "refused",
            DnsAnswer::Unknown(_) => "unknown",
        }
    }
}

/// How long answers are kept. A verified crawler keeps its address for hours; a refusal is
/// kept long enough that an impostor costs one verification an hour; no answer is retried soon.
const VERIFIED_FOR: Duration = Duration::from_secs(6 * 3600);
const REFUSED_FOR: Duration = Duration::from_secs(3600);
const UNKNOWN_FOR: Duration = Duration::from_secs(60);
/// PTR names of one address followed forward, at most (a PTR set can be long; each costs a query).
const MAX_NAMES: usize = 4;
/// How often [`Crawlers::settle`] asks again for a budget that was spent.
const BUDGET_RETRY: Duration = Duration::from_millis(10);
/// Cached (address, crawler) answers, at most.
const CACHE_CAPACITY: u64 = 100_000;

/// Checks crawler claims; shared by every verdict.
pub(crate) struct Crawlers {
    resolver: Option<TokioResolver>,
    /// Verifications per (address, crawler), one at a time, within the budgets.
    flights: SingleFlight<(IpAddr, Arc<str>), DnsAnswer>,
    timeout: Duration,
    verdict_wait: Duration,
    metrics: Arc<Metrics>,
}

impl Crawlers {
    /// A checker asking the configured name servers (or the system's). Without a usable
    /// resolver (no `/etc/resolv.conf`, say) it still checks ranges, and DNS claims stay pending;
    /// that is logged once here.
    pub(crate) fn new(config: &DnsConfig, metrics: Arc<Metrics>) -> Crawlers {
        let resolver = match resolver(config) {
            Ok(resolver) => Some(resolver),
            Err(error) => {
                tracing::warn!(
                    %error,
                    "no DNS resolver: crawlers outside their published ranges stay unverified (pending); \
                     set dns {{ servers }} to fix"
                );
                None
            }
        };
        Crawlers {
            resolver,
            flights: SingleFlight::new(Settings {
                capacity: CACHE_CAPACITY,
                timeout: config.timeout,
                done_for: DnsAnswer::keep_for,
                per_second: config.lookups_per_second,
                in_flight: config.max_pending,
                // No address is favoured: every claim costs the same.
                reserved_per_second: 1,
                reserved_in_flight: 1,
            }),
            timeout: config.timeout,
            verdict_wait: config.verdict_wait,
            metrics,
        }
    }

    /// The crawler `user_agent` claims and what is known of it now, without waiting: ranges, or
    /// a cached DNS answer. `None` when the User-Agent names no listed crawler. The claim's check
    /// is `Pending` when DNS must be asked (see [`Crawlers::verify`]).
    pub(crate) fn claim(
        &self,
        ranges: Option<&List>,
        domains: Option<&List>,
        user_agent: &str,
        address: IpAddr,
    ) -> Option<Claim> {
        let ranges = match ranges {
            Some(List::Networks(ranges)) => Some(ranges),
            _ => None,
        };
        let domains = match domains {
            Some(List::Domains(domains)) => Some(domains),
            _ => None,
        };
        let crawler = ranges
            .and_then(|ranges| ranges.claimed(user_agent))
            .or_else(|| domains.and_then(|domains| domains.claimed(user_agent)))?;
        Some(self.check_now(ranges, domains, crawler, address))
    }

    fn check_now(
        &self,
        ranges: Option<&NetworkList>,
        domains: Option<&DomainList>,
        crawler: &str,
        address: IpAddr,
    ) -> Claim {
        let claim =
            |check, detail: &str| Claim { crawler: crawler.to_string(), check, detail: Arc::from(detail) };
        if let Some(ranges) = ranges
            && ranges.find(address) == Some(crawler)
        {
            return claim(CrawlerCheck::Ranges, "in the published ranges");
        }
        let has_domains = domains.is_some_and(|domains| !domains.domains(crawler).is_empty());
        if !has_domains {
            return claim(
                CrawlerCheck::Failed,
                "outside the published ranges, and no DNS domain to verify by",
            );
        }
        match self.flights.get(&(address, Arc::from(crawler))) {
            Some(Entry::Done(answer)) => {
                Claim { crawler: crawler.to_string(), check: answer.check(), detail: answer.detail() }
            }
            Some(Entry::InFlight(_)) => claim(CrawlerCheck::Pending, "reverse DNS under way"),
            None => claim(CrawlerCheck::Pending, "reverse DNS not asked yet"),
        }
    }

    /// Completes a claim that needs DNS: starts a verification (within the budgets) or joins one
    /// under way, and waits for it at most `dns { verdict-wait-ms }`. Counts the outcome.
    pub(crate) async fn verify(&self, claim: &mut Claim, domains: Option<&List>, address: IpAddr) {
        self.verify_within(claim, domains, address, self.verdict_wait).await;
    }

    /// [`Crawlers::verify`], waiting at most `wait` (`explain` waits for the whole timeout).
    pub(crate) async fn verify_within(
        &self,
        claim: &mut Claim,
        domains: Option<&List>,
        address: IpAddr,
        wait: Duration,
    ) {
        if claim.check == CrawlerCheck::Pending
            && let Some(List::Domains(domains)) = domains
        {
            let key = (address, Arc::<str>::from(claim.crawler.as_str()));
            let receiver = match self.flights.get(&key) {
                Some(Entry::Done(answer)) => {
                    set(claim, &answer);
                    None
                }
                Some(Entry::InFlight(receiver)) => Some(receiver),
                None => self.start(key, domains.domains(&claim.crawler).to_vec(), address),
            };
            if let Some(mut receiver) = receiver {
                let wait = tokio::time::timeout(wait, receiver.wait_for(Option::is_some)).await;
                match wait {
                    Ok(Ok(answer)) => {
                        if let Some(answer) = answer.as_ref() {
                            set(claim, answer);
                        }
                    }
                    _ => claim.detail = Arc::from("reverse DNS still under way"),
                }
            }
        }
        self.metrics.crawler_check(claim.check.as_str());
    }

    /// For a tool judging a log ahead (`replay`): starts the DNS verification `claim` needs, if
    /// nobody has asked and the budgets allow. Whether this call started one.
    pub(crate) fn start_verification(&self, claim: &Claim, domains: Option<&List>, address: IpAddr) -> bool {
        let (CrawlerCheck::Pending, Some(List::Domains(domains))) = (claim.check, domains) else {
            return false;
        };
        let key = (address, Arc::<str>::from(claim.crawler.as_str()));
        self.flights.get(&key).is_none()
            && self.start(key, domains.domains(&claim.crawler).to_vec(), address).is_some()
    }

    /// For a tool judging a log (`replay`): waits, at most `wait`, until the verification of
    /// `claim` for `address` has an answer, starting it when nobody has (as soon as a budget
    /// allows). The check it found (still `Pending` when DNS did not answer, or without a
    /// resolver), and whether this call started the lookup.
    pub(crate) async fn settle(
        &self,
        claim: &Claim,
        domains: Option<&List>,
        address: IpAddr,
        wait: Duration,
    ) -> (CrawlerCheck, bool) {
        let (CrawlerCheck::Pending, Some(List::Domains(domains))) = (claim.check, domains) else {
            return (claim.check, false);
        };
        if self.resolver.is_none() {
            return (CrawlerCheck::Pending, false);
        }
        let key = (address, Arc::<str>::from(claim.crawler.as_str()));
        let deadline = tokio::time::Instant::now() + wait;
        let mut started = false;
        loop {
            let receiver = match self.flights.get(&key) {
                Some(Entry::Done(answer)) => return (answer.check(), started),
                Some(Entry::InFlight(receiver)) => Some(receiver),
                None => {
                    let receiver = self.start(key.clone(), domains.domains(&claim.crawler).to_vec(), address);
                    started |= receiver.is_some();
                    receiver
                }
            };
            if tokio::time::Instant::now() >= deadline {
                return (CrawlerCheck::Pending, started);
            }
            match receiver {
                Some(mut receiver) => {
                    let waited = tokio::time::timeout_at(deadline, receiver.wait_for(Option::is_some)).await;
                    // The lookup ended without an answer (its task died): do not spin on it.
                    if matches!(waited, Ok(Err(_))) {
                        tokio::time::sleep_until(deadline.min(tokio::time::Instant::now() + BUDGET_RETRY))
                            .await;
                    }
                }
                // Over a budget: a slot frees when a lookup ends or the second turns.
                None => {
                    tokio::time::sleep_until(deadline.min(tokio::time::Instant::now() + BUDGET_RETRY)).await
                }
            }
        }
    }

    /// Starts verifying `key`, unless a budget is spent or another request just started it.
    fn start(
        &self,
        key: (IpAddr, Arc<str>),
        domains: Vec<String>,
        address: IpAddr,
    ) -> Option<watch::Receiver<Option<DnsAnswer>>> {
        let resolver = self.resolver.clone()?;
        let (metrics, timeout) = (self.metrics.clone(), self.timeout);
        let receiver = self.flights.start(key, false, move || async move {
            let answer = match tokio::time::timeout(timeout, verify(&resolver, address, &domains)).await {
                Ok(answer) => answer,
                Err(_) => {
                    DnsAnswer::Unknown(Arc::from(format!("no DNS answer within {} ms", timeout.as_millis())))
                }
            };
            metrics.dns_verification(answer.metric());
            answer
        });
        if receiver.is_none() {
            self.metrics.dns_verification("over_budget");
        }
        receiver
    }
}

fn set(claim: &mut Claim, answer: &DnsAnswer) {
    claim.check = answer.check();
    claim.detail = answer.detail();
}

/// The resolver: the configured servers over UDP (then TCP for truncated answers), or the
/// system's. Each query gets the whole timeout once; the hosts file is never read, since a
/// verification must come from DNS.
fn resolver(config: &DnsConfig) -> Result<TokioResolver, String> {
    let mut builder = if config.servers.is_empty() {
        TokioResolver::builder_tokio()
            .map_err(|error| format!("cannot read the system's resolver configuration: {error}"))?
    } else {
        let servers = config
            .servers
            .iter()
            .map(|server| {
                let mut udp = ConnectionConfig::udp();
                udp.port = server.port();
                let mut tcp = ConnectionConfig::tcp();
                tcp.port = server.port();
                NameServerConfig::new(server.ip(), true, vec![udp, tcp])
            })
            .collect();
        TokioResolver::builder_with_config(
            ResolverConfig::from_parts(None, Vec::new(), servers),
            TokioRuntimeProvider::default(),
        )
    };
    let options = builder.options_mut();
    options.timeout = config.timeout;
    options.attempts = 1;
    options.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
    options.use_hosts_file = ResolveHosts::Never;
    options.ndots = 0;
    builder.build().map_err(|error| format!("cannot build the resolver: {error}"))
}

/// Forward-confirmed reverse DNS of `address` against `domains` (each with its leading dot).
/// Only PTR names under those domains are followed forward, so a hostile PTR record cannot make
/// quagmire query names of its choosing.
async fn verify(resolver: &TokioResolver, address: IpAddr, domains: &[String]) -> DnsAnswer {
    let reverse = match resolver.reverse_lookup(address).await {
        Ok(reverse) => reverse,
        Err(error) if error.is_no_records_found() || error.is_nx_domain() => {
            return DnsAnswer::Refused(Arc::from(format!("{address} has no PTR record")));
        }
        Err(error) => return DnsAnswer::Unknown(Arc::from(format!("PTR lookup failed: {error}"))),
    };
    let names: Vec<String> = reverse
        .answers()
        .iter()
        .filter_map(|record| match &record.data {
            RData::PTR(name) => Some(name.0.to_ascii()),
            _ => None,
        })
        .take(MAX_NAMES)
        .collect();
    let under = |name: &str| domains.iter().any(|domain| is_under(name, domain));
    let Some(first) = names.first() else {
        return DnsAnswer::Refused(Arc::from(format!("{address} has no PTR record")));
    };
    let mut unanswered = None;
    for name in names.iter().filter(|name| under(name)) {
        match resolver.lookup_ip(name.as_str()).await {
            Ok(addresses) if addresses.iter().any(|found| canonical(found) == canonical(address)) => {
                return DnsAnswer::Verified(Arc::from(format!("PTR {name}, which resolves back")));
            }
            Ok(_) => {}
            Err(error) if error.is_no_records_found() || error.is_nx_domain() => {}
            Err(error) => unanswered = Some(format!("lookup of {name} failed: {error}")),
        }
    }
    if let Some(why) = unanswered {
        return DnsAnswer::Unknown(Arc::from(why));
    }
    let wanted = domains.join(" or ");
    match names.iter().find(|name| under(name)) {
        Some(name) => DnsAnswer::Refused(Arc::from(format!("PTR {name} does not resolve back to {address}"))),
        None => DnsAnswer::Refused(Arc::from(format!("PTR {first} is not under {wanted}"))),
    }
}

/// An IPv4-mapped IPv6 address is the IPv4 address it maps.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn crawlers() -> Crawlers {
        let mut config = Config::parse("test.kdl", "", std::path::Path::new(".")).unwrap().dns;
        // Never asked: these tests check what is known without DNS.
        config.servers = vec!["127.0.0.1:9".parse().unwrap()];
        Crawlers::new(&config, Arc::new(Metrics::new()))
    }

    fn lists() -> (List, List) {
        let ranges =
            List::parse("ranges.txt", "Googlebot 66.249.64.0/19\nDuckDuckBot 20.191.45.212/32\n").unwrap();
        let domains = List::parse(
            "domains.txt",
            "Googlebot .googlebot.com\nGooglebot .google.com\nYandexBot .yandex.ru\n",
        )
        .unwrap();
        (ranges, domains)
    }

    const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";

    #[test]
    fn a_claim_is_checked_against_the_ranges_first_then_needs_dns_where_a_domain_is_listed() {
        let (ranges, domains) = lists();
        let crawlers = crawlers();
        let claim =
            |ua: &str, ip: &str| crawlers.claim(Some(&ranges), Some(&domains), ua, ip.parse().unwrap());
        let check = |ua: &str, ip: &str| claim(ua, ip).map(|claim| (claim.crawler, claim.check));
        assert_eq!(check(GOOGLEBOT, "66.249.66.1"), Some(("Googlebot".into(), CrawlerCheck::Ranges)));
        assert_eq!(check(GOOGLEBOT, "::ffff:66.249.66.1"), Some(("Googlebot".into(), CrawlerCheck::Ranges)));
        assert_eq!(check(GOOGLEBOT, "203.0.113.5"), Some(("Googlebot".into(), CrawlerCheck::Pending)));
        assert_eq!(check("YandexBot/3.0", "203.0.113.5"), Some(("YandexBot".into(), CrawlerCheck::Pending)));
        // No domain to verify by: outside the ranges is failed at once.
        assert_eq!(
            check("DuckDuckBot/1.1", "203.0.113.5"),
            Some(("DuckDuckBot".into(), CrawlerCheck::Failed))
        );
        assert_eq!(check("Mozilla/5.0 Chrome/120.0", "66.249.66.1"), None);
        // Another crawler's range proves nothing.
        assert_eq!(
            check("DuckDuckBot/1.1", "66.249.66.1"),
            Some(("DuckDuckBot".into(), CrawlerCheck::Failed))
        );
        // Without the lists (a site's own folder may lack them), nothing is claimed.
        assert_eq!(crawlers.claim(None, None, GOOGLEBOT, "66.249.66.1".parse().unwrap()), None);
    }

    #[tokio::test]
    async fn a_verification_without_an_answer_stays_pending_and_the_verdict_waits_no_longer_than_its_budget()
    {
        let (_, domains) = lists();
        // Nothing listens on the discard port: no answer.
        let mut config = Config::parse("test.kdl", "", std::path::Path::new(".")).unwrap().dns;
        config.servers = vec!["127.0.0.1:9".parse().unwrap()];
        config.verdict_wait = Duration::from_millis(50);
        // A lookup that waited for its answer would wait this long: a verdict done in half of
        // it did not wait, however busy the machine.
        config.timeout = Duration::from_secs(20);
        let crawlers = Crawlers::new(&config, Arc::new(Metrics::new()));
        let address: IpAddr = "203.0.113.5".parse().unwrap();
        let mut claim = crawlers.claim(None, Some(&domains), GOOGLEBOT, address).unwrap();
        let started = std::time::Instant::now();
        crawlers.verify(&mut claim, Some(&domains), address).await;
        assert!(started.elapsed() < config.timeout / 2, "{:?}", started.elapsed());
        assert_eq!(claim.check, CrawlerCheck::Pending);
    }

    #[test]
    fn domain_lists_match_hosts_under_a_domain_only() {
        let (_, List::Domains(domains)) = lists() else { panic!("a domain list") };
        assert!(domains.names_host_of("Googlebot", "crawl-66-249-66-1.googlebot.com."));
        assert!(domains.names_host_of("Googlebot", "RATE-LIMITED-PROXY-1.GOOGLE.COM"));
        assert!(!domains.names_host_of("Googlebot", "googlebot.com"));
        assert!(!domains.names_host_of("Googlebot", "crawl.googlebot.com.evil.example"));
        assert!(!domains.names_host_of("Googlebot", "evilgooglebot.com"));
        assert!(!domains.names_host_of("YandexBot", "crawl.googlebot.com"));
        assert_eq!(domains.find("spider.yandex.ru"), Some("YandexBot"));
        assert!(List::parse("bad.txt", "Googlebot .not a domain\n").is_err());
        assert!(List::parse("bad.txt", "Googlebot .com\n").is_err());
    }
}
