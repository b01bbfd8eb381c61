//! Who is asking: the client's address, read through trusted proxies only, and the key its
//! behaviour is remembered under (the IPv4 address, or the IPv6 /64 by default).
//!
//! Forwarded headers are believed only when the TCP peer is a trusted proxy; then the client is
//! the rightmost `X-Forwarded-For` address that is not itself a trusted proxy (each proxy appends
//! the address it saw, so entries further left are whatever the client claimed).

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;

/// Resolves client addresses and keys.
#[derive(Clone, Debug)]
pub struct ClientIdentity {
    trusted_proxies: Vec<IpNet>,
    ipv4_prefix: u8,
    ipv6_prefix: u8,
}

impl ClientIdentity {
    /// Trusts forwarded headers from `trusted_proxies`; keys clients by the given prefix lengths.
    pub fn new(trusted_proxies: Vec<IpNet>, ipv4_prefix: u8, ipv6_prefix: u8) -> Self {
        ClientIdentity {
            trusted_proxies,
            ipv4_prefix: ipv4_prefix.min(32),
            ipv6_prefix: ipv6_prefix.min(128),
        }
    }

    /// Whether `address` is a trusted proxy.
    pub fn is_trusted(&self, address: IpAddr) -> bool {
        let address = canonical(address);
        self.trusted_proxies.iter().any(|net| net.contains(&address))
    }

    /// The client's address for a request from `peer` with these header values.
    pub fn client_address(&self, peer: IpAddr, forwarded_for: Option<&str>, real_ip: Option<&str>) -> IpAddr {
        let peer = canonical(peer);
        if !self.is_trusted(peer) {
            return peer;
        }
        if let Some(list) = forwarded_for.filter(|list| !list.trim().is_empty()) {
            let mut nearest = peer;
            for entry in list.rsplit(',') {
                let Some(address) = parse_address(entry) else {
                    // A malformed entry was written by whoever is to its left: stop at the last
                    // address a trusted hop vouched for.
                    return nearest;
                };
                if !self.is_trusted(address) {
                    return address;
                }
                nearest = address;
            }
            return nearest;
        }
        real_ip.and_then(parse_address).unwrap_or(peer)
    }

    /// The key a client's behaviour is remembered under.
    pub fn key(&self, address: IpAddr) -> ClientKey {
        match canonical(address) {
            IpAddr::V4(v4) => {
                let bits = u32::from(v4) & mask32(self.ipv4_prefix);
                ClientKey { bits: u128::from(bits), family: Family::V4, prefix: self.ipv4_prefix }
            }
            IpAddr::V6(v6) => {
                let bits = u128::from(v6) & mask128(self.ipv6_prefix);
                ClientKey { bits, family: Family::V6, prefix: self.ipv6_prefix }
            }
        }
    }
}

/// The identity behaviour is tracked under: an address masked to a prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClientKey {
    bits: u128,
    family: Family,
    prefix: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Family {
    V4,
    V6,
}

impl ClientKey {
    /// Whether this key is `address` itself (a full-length prefix), so its text is the address's.
    /// An IPv4-mapped IPv6 address is not: its text differs from its key's.
    pub fn is_address(&self, address: IpAddr) -> bool {
        match (self.family, address) {
            (Family::V4, IpAddr::V4(v4)) => self.prefix == 32 && self.bits == u128::from(u32::from(v4)),
            (Family::V6, IpAddr::V6(v6)) => self.prefix == 128 && self.bits == u128::from(v6),
            _ => false,
        }
    }
}

impl fmt::Display for ClientKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.family {
            Family::V4 => {
                let address = std::net::Ipv4Addr::from(self.bits as u32);
                if self.prefix == 32 {
                    write!(f, "{address}")
                } else {
                    write!(f, "{address}/{}", self.prefix)
                }
            }
            Family::V6 => {
                let address = std::net::Ipv6Addr::from(self.bits);
                if self.prefix == 128 {
                    write!(f, "{address}")
                } else {
                    write!(f, "{address}/{}", self.prefix)
                }
            }
        }
    }
}

/// An IPv4-mapped IPv6 address is the IPv4 client it maps.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        v4 => v4,
    }
}

/// An address from a forwarded header: `1.2.3.4`, `1.2.3.4:80`, `::1`, `[::1]:80`.
fn parse_address(entry: &str) -> Option<IpAddr> {
    let entry = entry.trim();
    if let Ok(address) = entry.parse::<IpAddr>() {
        return Some(canonical(address));
    }
    if let Ok(socket) = entry.parse::<std::net::SocketAddr>() {
        return Some(canonical(socket.ip()));
    }
    let bracketed = entry.strip_prefix('[')?.strip_suffix(']')?;
    bracketed.parse().ok().map(canonical)
}

fn mask32(prefix: u8) -> u32 {
    if prefix == 0 { 0 } else { u32::MAX << (32 - u32::from(prefix)) }
}

fn mask128(prefix: u8) -> u128 {
    if prefix == 0 { 0 } else { u128::MAX << (128 - u32::from(prefix)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> ClientIdentity {
        ClientIdentity::new(vec!["127.0.0.0/8".parse().unwrap(), "10.0.0.0/8".parse().unwrap()], 32, 64)
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn untrusted_peers_are_the_client_whatever_they_claim() {
        let identity = identity();
        assert_eq!(
            identity.client_address(ip("203.0.113.9"), Some("1.1.1.1"), Some("2.2.2.2")),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn the_rightmost_untrusted_forwarded_address_is_the_client() {
        let identity = identity();
        let peer = ip("127.0.0.1");
        assert_eq!(identity.client_address(peer, Some("198.51.100.7"), None), ip("198.51.100.7"));
        // The client forged the first entry; our proxies appended the rest.
        assert_eq!(
            identity.client_address(peer, Some("6.6.6.6, 198.51.100.7, 10.1.2.3"), None),
            ip("198.51.100.7")
        );
        assert_eq!(identity.client_address(peer, Some("[2001:db8::1]:4711"), None), ip("2001:db8::1"));
        assert_eq!(identity.client_address(peer, Some("198.51.100.7:8080"), None), ip("198.51.100.7"));
        // All hops trusted: the leftmost one is the best we know.
        assert_eq!(identity.client_address(peer, Some("10.9.9.9, 10.1.1.1"), None), ip("10.9.9.9"));
        // Garbage left of a trusted hop stops the walk there.
        assert_eq!(identity.client_address(peer, Some("nonsense, 10.1.1.1"), None), ip("10.1.1.1"));
    }

    #[test]
    fn real_ip_is_used_only_without_forwarded_for() {
        let identity = identity();
        let peer = ip("127.0.0.1");
        assert_eq!(identity.client_address(peer, None, Some("198.51.100.8")), ip("198.51.100.8"));
        assert_eq!(
            identity.client_address(peer, Some("198.51.100.7"), Some("198.51.100.8")),
            ip("198.51.100.7")
        );
        assert_eq!(identity.client_address(peer, None, Some("bogus")), peer);
    }

    #[test]
    fn ipv6_clients_share_a_key_per_64_and_mapped_ipv4_is_ipv4() {
        let identity = identity();
        let a = identity.key(ip("2001:db8:1:2::1"));
        let b = identity.key(ip("2001:db8:1:2:ffff::9"));
        let c = identity.key(ip("2001:db8:1:3::1"));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.to_string(), "2001:db8:1:2::/64");
        assert_eq!(identity.key(ip("::ffff:192.0.2.1")), identity.key(ip("192.0.2.1")));
        assert_eq!(identity.key(ip("192.0.2.1")).to_string(), "192.0.2.1");
        let wide = ClientIdentity::new(vec![], 24, 48);
        assert_eq!(wide.key(ip("192.0.2.77")).to_string(), "192.0.2.0/24");
    }
}
