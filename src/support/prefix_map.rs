//! A map from IP networks to values, looked up by address with the longest prefix winning: one
//! hash map per prefix length, tried from the longest length present down, so a lookup costs at
//! most one hash probe per distinct length (a handful in practice), whatever the number of
//! networks. IPv4-mapped IPv6 addresses and networks are their IPv4 selves.

use std::collections::HashMap;
use std::net::IpAddr;

use ipnet::IpNet;

/// Networks and their values.
#[derive(Clone, Debug)]
pub(crate) struct PrefixMap<V> {
    /// Per prefix length, longest first: network bits to value.
    v4: Vec<(u8, HashMap<u32, V>)>,
    v6: Vec<(u8, HashMap<u128, V>)>,
    len: usize,
}

impl<V> Default for PrefixMap<V> {
    fn default() -> Self {
        PrefixMap { v4: Vec::new(), v6: Vec::new(), len: 0 }
    }
}

impl<V> PrefixMap<V> {
    /// Keeps `value` for `network` (host bits ignored); the value it replaces, if any.
    pub(crate) fn insert(&mut self, network: IpNet, value: V) -> Option<V> {
        let replaced = match canonical(network).trunc() {
            IpNet::V4(net) => slot(&mut self.v4, net.prefix_len()).insert(u32::from(net.network()), value),
            IpNet::V6(net) => slot(&mut self.v6, net.prefix_len()).insert(u128::from(net.network()), value),
        };
        if replaced.is_none() {
            self.len += 1;
        }
        replaced
    }

    /// The value of the longest network containing `address`.
    pub(crate) fn get(&self, address: IpAddr) -> Option<&V> {
        match address {
            IpAddr::V4(v4) => {
                longest(&self.v4, u32::from(v4), |len| if len == 0 { 0 } else { u32::MAX << (32 - len) })
            }
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => self.get(IpAddr::V4(v4)),
                None => {
                    longest(
                        &self.v6,
                        u128::from(v6),
                        |len| if len == 0 { 0 } else { u128::MAX << (128 - len) },
                    )
                }
            },
        }
    }

    /// How many networks it holds.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// The map for prefix length `len`, made (in its place, longest first) if there is none.
fn slot<K, V>(lengths: &mut Vec<(u8, HashMap<K, V>)>, len: u8) -> &mut HashMap<K, V> {
    let index = match lengths.binary_search_by(|(known, _)| len.cmp(known)) {
        Ok(index) => index,
        Err(index) => {
            lengths.insert(index, (len, HashMap::new()));
            index
        }
    };
    &mut lengths[index].1
}

fn longest<K: Copy + Eq + std::hash::Hash + std::ops::BitAnd<Output = K>, V>(
    lengths: &[(u8, HashMap<K, V>)],
    bits: K,
    mask: impl Fn(u32) -> K,
) -> Option<&V> {
    lengths.iter().find_map(|(len, map)| map.get(&(bits & mask(u32::from(*len)))))
}

/// An IPv4-mapped IPv6 network (`::ffff:192.0.2.0/120`) is the IPv4 network it maps, since
/// lookups map such addresses to IPv4 first; an entry kept as IPv6 would never match.
/// The widest IPv4 prefix a list source or a CrowdSec decision may name: a /12 is a million
/// addresses, more than any crawler operator publishes for one crawler (the widest shipped
/// today is a /16) or a ban can mean.
pub const MIN_PREFIX_V4: u8 = 12;
/// The widest IPv6 prefix: a /28 is larger than most providers' whole allocation.
pub const MIN_PREFIX_V6: u8 = 28;

/// Whether `network` (as [`canonical`] makes it) is wider than [`MIN_PREFIX_V4`] or
/// [`MIN_PREFIX_V6`]: too wide to be a crawler's range or a decision about anyone in particular.
pub(crate) fn too_wide(network: IpNet) -> bool {
    match canonical(network) {
        IpNet::V4(v4) => v4.prefix_len() < MIN_PREFIX_V4,
        IpNet::V6(v6) => v6.prefix_len() < MIN_PREFIX_V6,
    }
}

pub(crate) fn canonical(network: IpNet) -> IpNet {
    match network {
        IpNet::V6(v6) if v6.prefix_len() >= 96 => match v6.addr().to_ipv4_mapped() {
            Some(v4) => ipnet::Ipv4Net::new(v4, v6.prefix_len() - 96).map_or(network, IpNet::V4),
            None => network,
        },
        _ => network,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(text: &str) -> IpNet {
        text.parse().unwrap()
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn the_longest_network_containing_the_address_wins() {
        let mut map = PrefixMap::default();
        map.insert(net("198.51.100.0/24"), "range");
        map.insert(net("198.51.100.7/32"), "address");
        map.insert(net("0.0.0.0/0"), "everything");
        map.insert(net("2001:db8::/32"), "v6 range");
        map.insert(net("2001:db8:1::/48"), "v6 narrower");
        assert_eq!(map.get(ip("198.51.100.7")), Some(&"address"));
        assert_eq!(map.get(ip("198.51.100.8")), Some(&"range"));
        assert_eq!(map.get(ip("192.0.2.1")), Some(&"everything"));
        assert_eq!(map.get(ip("2001:db8:1::5")), Some(&"v6 narrower"));
        assert_eq!(map.get(ip("2001:db8:2::5")), Some(&"v6 range"));
        assert_eq!(map.get(ip("2001:db9::1")), None);
        // Host bits are ignored; mapped addresses and networks are IPv4.
        assert_eq!(map.insert(net("198.51.100.99/24"), "range again"), Some("range"));
        assert_eq!(map.get(ip("::ffff:198.51.100.8")), Some(&"range again"));
        map.insert(net("::ffff:203.0.113.0/120"), "mapped");
        assert_eq!(map.get(ip("203.0.113.4")), Some(&"mapped"));
        assert_eq!(map.len(), 6);
    }
}
