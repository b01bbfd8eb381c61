//! Who is asking: the client's address, read through trusted proxies only, and the key its
//! behaviour is remembered under (the IPv4 address, or the IPv6 /64 by default).
//!
//! Forwarded headers are believed only when the TCP peer is a trusted proxy; then the client is
//! the rightmost address of the forwarding chain that is not itself a trusted proxy (each proxy
//! appends the address it saw, so entries further left are whatever the client claimed).
//!
//! The chain is every `X-Forwarded-For` line, in order, joined as one list (RFC 9110 field
//! combining: HAProxy's `option forwardfor` adds a line of its own rather than extending the
//! client's). Without `X-Forwarded-For`, it is the `for=` parameters of every `Forwarded` line
//! (RFC 7239); without either, `X-Real-IP`. `X-Forwarded-For` comes first because every
//! integration we ship sets it, and a proxy that sets it overwrites or extends what the client
//! sent, whereas a stray `Forwarded` from the client would pass through most of them untouched.

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

    /// The client's address for a request from `peer` carrying these headers.
    pub fn client_address<H: HeaderLines + ?Sized>(&self, peer: IpAddr, headers: &H) -> IpAddr {
        let peer = canonical(peer);
        if !self.is_trusted(peer) {
            return peer;
        }
        let mut forwarded_for =
            headers.lines("x-forwarded-for").filter(|line| !line.trim().is_empty()).peekable();
        if forwarded_for.peek().is_some() {
            let hops =
                forwarded_for.rev().flat_map(|line| line.rsplit(',')).map(|entry| {
                    match parse_address(entry) {
                        Some(address) => Hop::Address(address),
                        None => Hop::Unknown,
                    }
                });
            return self.walk(peer, hops);
        }
        let mut forwarded = headers.lines("forwarded").filter(|line| !line.trim().is_empty()).peekable();
        if forwarded.peek().is_some() {
            // Elements are read front to back (a quoted string may hold a comma), then walked
            // from the right like X-Forwarded-For.
            let mut hops: Vec<Hop> = forwarded.flat_map(forwarded_hops).collect();
            hops.reverse();
            return self.walk(peer, hops.into_iter());
        }
        headers.lines("x-real-ip").next().and_then(parse_address).unwrap_or(peer)
    }

    /// The rightmost hop that is not a trusted proxy, walking `hops` from the right.
    fn walk(&self, peer: IpAddr, hops: impl Iterator<Item = Hop>) -> IpAddr {
        let mut nearest = peer;
        for hop in hops {
            let Hop::Address(address) = hop else {
                // A malformed, unknown or obfuscated hop was written by whoever is to its left, or
                // hides them: stop at the last address a trusted hop vouched for.
                return nearest;
            };
            if !self.is_trusted(address) {
                return address;
            }
            nearest = address;
        }
        nearest
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

/// How maps keyed by [`ClientKey`] hash their keys: foldhash, seeded afresh in each process,
/// rather than SipHash, which was most of the cost of the two or three lookups a verdict makes.
/// A client chooses its address, but not knowing the seed it cannot aim keys at one bucket.
pub(crate) type KeyHasher = foldhash::fast::RandomState;

/// The identity behaviour is tracked under: an address masked to a prefix, or a challenge pass
/// (which follows its holder across addresses). Ordered by family (IPv4 first, passes last), then
/// address, then prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientKey {
    family: Family,
    bits: u128,
    prefix: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Family {
    V4,
    V6,
    /// A pass id (`bits`), prefix 128.
    Pass,
}

impl ClientKey {
    /// The key a pass's behaviour is remembered under (its id).
    pub(crate) fn pass(id: u128) -> ClientKey {
        ClientKey { family: Family::Pass, bits: id, prefix: 128 }
    }

    /// The key as two words and a tag (family and prefix), for tables that keep millions of keys:
    /// 18 bytes where the key itself takes 32.
    pub(crate) fn to_parts(self) -> ([u64; 2], u16) {
        let family = match self.family {
            Family::V4 => 0,
            Family::V6 => 1,
            Family::Pass => 2,
        };
        ([(self.bits >> 64) as u64, self.bits as u64], family << 8 | u16::from(self.prefix))
    }

    /// A key back from [`ClientKey::to_parts`].
    pub(crate) fn from_parts(bits: [u64; 2], tag: u16) -> ClientKey {
        let family = match tag >> 8 {
            0 => Family::V4,
            1 => Family::V6,
            _ => Family::Pass,
        };
        ClientKey { family, bits: u128::from(bits[0]) << 64 | u128::from(bits[1]), prefix: tag as u8 }
    }

    /// Whether this key is `address` itself (a full-length prefix), so its text is the address's.
    /// An IPv4-mapped IPv6 address is not: its text differs from its key's.
    pub fn is_address(&self, address: IpAddr) -> bool {
        match (self.family, address) {
            (Family::V4, IpAddr::V4(v4)) => self.prefix == 32 && self.bits == u128::from(u32::from(v4)),
            (Family::V6, IpAddr::V6(v6)) => self.prefix == 128 && self.bits == u128::from(v6),
            _ => false,
        }
    }

    /// The network this key stands for (an address, or an IPv6 /64); `None` for a pass.
    pub(crate) fn network(&self) -> Option<ipnet::IpNet> {
        Some(match self.family {
            Family::Pass => return None,
            Family::V4 => ipnet::IpNet::V4(
                ipnet::Ipv4Net::new(std::net::Ipv4Addr::from(self.bits as u32), self.prefix)
                    .unwrap_or_default(),
            ),
            Family::V6 => ipnet::IpNet::V6(
                ipnet::Ipv6Net::new(std::net::Ipv6Addr::from(self.bits), self.prefix).unwrap_or_default(),
            ),
        })
    }
}

impl fmt::Display for ClientKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.family {
            Family::Pass => write!(f, "pass:{:032x}", self.bits),
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

/// The text of a key ([`ClientKey`]'s `Display`) is not one: an address, or an address and a
/// prefix length.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a client key (an address, or an address/prefix)")]
pub struct ClientKeyError(String);

impl std::str::FromStr for ClientKey {
    type Err = ClientKeyError;

    /// Reads a key back from its text (for keys kept in the shared store). The address is
    /// masked to the prefix, so a tampered text can never name more than its prefix covers.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || ClientKeyError(text.chars().take(64).collect());
        if let Some(id) = text.strip_prefix("pass:") {
            let id = (id.len() == 32).then(|| u128::from_str_radix(id, 16).ok()).flatten();
            return id.map(ClientKey::pass).ok_or_else(invalid);
        }
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix.parse::<u8>().map_err(|_| invalid())?)),
            None => (text, None),
        };
        match address.parse::<IpAddr>().map_err(|_| invalid())? {
            IpAddr::V4(v4) => {
                let prefix = prefix.unwrap_or(32);
                if prefix > 32 {
                    return Err(invalid());
                }
                let bits = u128::from(u32::from(v4) & mask32(prefix));
                Ok(ClientKey { bits, family: Family::V4, prefix })
            }
            IpAddr::V6(v6) => {
                let prefix = prefix.unwrap_or(128);
                if prefix > 128 {
                    return Err(invalid());
                }
                Ok(ClientKey { bits: u128::from(v6) & mask128(prefix), family: Family::V6, prefix })
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

/// Where the forwarding headers come from: every line of a header, in arrival order.
pub trait HeaderLines {
    /// The values of every `name` (lowercase) line, in arrival order.
    fn lines<'h>(&'h self, name: &'h str) -> impl DoubleEndedIterator<Item = &'h str>;
}

/// One entry of a forwarding chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hop {
    Address(IpAddr),
    /// `for=unknown`, an obfuscated identifier (`for=_hidden`), no `for=` at all, or garbage.
    Unknown,
}

/// The hops of one `Forwarded` line (RFC 7239), left to right: one per comma-separated element,
/// from its `for=` parameter.
fn forwarded_hops(line: &str) -> Vec<Hop> {
    let mut hops = Vec::new();
    let mut node: Option<String> = None;
    let mut element = line;
    loop {
        let (pair, rest) = split_unquoted(element, |c| c == ',' || c == ';');
        if let Some((name, value)) = pair.split_once('=')
            && name.trim().eq_ignore_ascii_case("for")
        {
            node = Some(unquote(value.trim()));
        }
        match rest {
            Some((';', rest)) => element = rest,
            Some((_, rest)) => {
                hops.push(node.take().as_deref().map_or(Hop::Unknown, forwarded_node));
                element = rest;
            }
            None => {
                hops.push(node.take().as_deref().map_or(Hop::Unknown, forwarded_node));
                return hops;
            }
        }
    }
}

/// `text` up to the first `separator` outside a quoted string, and the separator with the rest.
fn split_unquoted(text: &str, separator: impl Fn(char) -> bool) -> (&str, Option<(char, &str)>) {
    let mut quoted = false;
    let mut escaped = false;
    for (index, c) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if quoted && c == '\\' {
            escaped = true;
        } else if c == '"' {
            quoted = !quoted;
        } else if !quoted && separator(c) {
            return (&text[..index], Some((c, &text[index + c.len_utf8()..])));
        }
    }
    (text, None)
}

/// A quoted string's content (backslash escapes resolved), or the token itself.
fn unquote(value: &str) -> String {
    let Some(inner) = value.strip_prefix('"').and_then(|rest| rest.strip_suffix('"')) else {
        return value.to_string();
    };
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        out.push(if c == '\\' { chars.next().unwrap_or(c) } else { c });
    }
    out
}

/// A `for=` node: `192.0.2.1`, `192.0.2.1:80`, `"[2001:db8::1]"`, `"[2001:db8::1]:80"`; `unknown`
/// and obfuscated identifiers (`_hidden`) hide the client.
fn forwarded_node(node: &str) -> Hop {
    let address = match node.strip_prefix('[') {
        // Brackets are required around IPv6 here, so a bare `::1` is malformed.
        Some(rest) => rest
            .split_once(']')
            .filter(|(_, port)| port.is_empty() || port.starts_with(':'))
            .and_then(|(v6, _)| v6.parse::<std::net::Ipv6Addr>().ok())
            .map(IpAddr::V6),
        None => {
            let host = node.split_once(':').map_or(node, |(host, _)| host);
            host.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
        }
    };
    address.map_or(Hop::Unknown, |address| Hop::Address(canonical(address)))
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
    use crate::facts::Headers;

    fn identity() -> ClientIdentity {
        ClientIdentity::new(vec!["127.0.0.0/8".parse().unwrap(), "10.0.0.0/8".parse().unwrap()], 32, 64)
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    /// The client of a request from `peer` with these header lines.
    fn client(peer: &str, headers: &[(&str, &str)]) -> IpAddr {
        identity().client_address(ip(peer), &headers.iter().copied().collect::<Headers>())
    }

    const PROXY: &str = "127.0.0.1";

    #[test]
    fn a_key_reads_back_from_its_text() {
        let identity = ClientIdentity::new(vec![], 24, 64);
        for address in ["192.0.2.77", "2001:db8:1:2::99"] {
            let key = identity.key(address.parse().unwrap());
            assert_eq!(key.to_string().parse::<ClientKey>().unwrap(), key, "{key}");
        }
        let full = ClientIdentity::new(vec![], 32, 128).key("192.0.2.1".parse().unwrap());
        assert_eq!("192.0.2.1".parse::<ClientKey>().unwrap(), full);
        // A text naming bits beyond its prefix is masked to it, never trusted as written.
        assert_eq!("192.0.2.77/24".parse::<ClientKey>().unwrap().to_string(), "192.0.2.0/24");
        for bad in ["", "192.0.2.1/33", "2001:db8::/129", "example.com", "192.0.2.1/x", "1.2.3.4/24/1"] {
            assert!(bad.parse::<ClientKey>().is_err(), "{bad}");
        }
    }

    #[test]
    fn untrusted_peers_are_the_client_whatever_they_claim() {
        let claims = [("x-forwarded-for", "1.1.1.1"), ("forwarded", "for=3.3.3.3"), ("x-real-ip", "2.2.2.2")];
        assert_eq!(client("203.0.113.9", &claims), ip("203.0.113.9"));
    }

    #[test]
    fn the_rightmost_untrusted_forwarded_address_is_the_client() {
        let xff = |list| client(PROXY, &[("x-forwarded-for", list)]);
        assert_eq!(xff("198.51.100.7"), ip("198.51.100.7"));
        // The client forged the first entry; our proxies appended the rest.
        assert_eq!(xff("6.6.6.6, 198.51.100.7, 10.1.2.3"), ip("198.51.100.7"));
        assert_eq!(xff("[2001:db8::1]:4711"), ip("2001:db8::1"));
        assert_eq!(xff("198.51.100.7:8080"), ip("198.51.100.7"));
        // All hops trusted: the leftmost one is the best we know.
        assert_eq!(xff("10.9.9.9, 10.1.1.1"), ip("10.9.9.9"));
        // Garbage left of a trusted hop stops the walk there.
        assert_eq!(xff("nonsense, 10.1.1.1"), ip("10.1.1.1"));
    }

    #[test]
    fn every_forwarded_for_line_is_one_list_in_order() {
        // HAProxy's `option forwardfor` adds its own line after the one the client sent.
        let haproxy = [("x-forwarded-for", "6.6.6.6"), ("x-forwarded-for", "203.0.113.9")];
        assert_eq!(client(PROXY, &haproxy), ip("203.0.113.9"));
        let chain = [("x-forwarded-for", "6.6.6.6, 198.51.100.7"), ("x-forwarded-for", "10.1.2.3")];
        assert_eq!(client(PROXY, &chain), ip("198.51.100.7"));
        // An empty line adds nothing.
        assert_eq!(
            client(PROXY, &[("x-forwarded-for", "198.51.100.7"), ("x-forwarded-for", "")]),
            ip("198.51.100.7")
        );
    }

    #[test]
    fn forwarded_for_parameters_are_the_chain_without_x_forwarded_for() {
        let forwarded = |lines: &[&str]| {
            client(PROXY, &lines.iter().map(|line| ("forwarded", *line)).collect::<Vec<_>>())
        };
        assert_eq!(forwarded(&["for=198.51.100.7"]), ip("198.51.100.7"));
        assert_eq!(forwarded(&["For=\"198.51.100.7:4711\";proto=https;by=10.0.0.1"]), ip("198.51.100.7"));
        assert_eq!(forwarded(&["for=\"[2001:db8::1]:4711\""]), ip("2001:db8::1"));
        assert_eq!(forwarded(&["for=\"[2001:db8::2]\", for=10.1.2.3"]), ip("2001:db8::2"));
        // Forged on the left, appended by our proxies on the right, over several lines.
        assert_eq!(
            forwarded(&["for=6.6.6.6", "for=198.51.100.7;proto=https, for=10.1.2.3"]),
            ip("198.51.100.7")
        );
        // A comma inside a quoted string does not split elements.
        assert_eq!(forwarded(&["for=198.51.100.7;ext=\"a, for=6.6.6.6\""]), ip("198.51.100.7"));
        // Unknown and obfuscated nodes, elements without `for=`, and bare IPv6 hide the client:
        // the nearest trusted hop is the best we know.
        assert_eq!(forwarded(&["for=unknown, for=10.1.2.3"]), ip("10.1.2.3"));
        assert_eq!(forwarded(&["for=6.6.6.6, for=_hidden"]), ip(PROXY));
        assert_eq!(forwarded(&["proto=https"]), ip(PROXY));
        assert_eq!(forwarded(&["for=2001:db8::1"]), ip(PROXY));
        assert_eq!(forwarded(&["for=\"[2001:db8::1]junk\""]), ip(PROXY));
    }

    #[test]
    fn x_forwarded_for_comes_before_forwarded_and_both_before_real_ip() {
        let all =
            [("forwarded", "for=192.0.2.2"), ("x-real-ip", "192.0.2.3"), ("x-forwarded-for", "192.0.2.1")];
        assert_eq!(client(PROXY, &all), ip("192.0.2.1"));
        assert_eq!(client(PROXY, &all[..2]), ip("192.0.2.2"));
        assert_eq!(client(PROXY, &all[1..2]), ip("192.0.2.3"));
        assert_eq!(client(PROXY, &[("x-real-ip", "bogus")]), ip(PROXY));
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
