//! Outbound connections that a client's header chooses (a `Signature-Agent`'s key directory) go
//! to public addresses only: never loopback, private, link-local, CGNAT, unique-local or other
//! special-use ranges, so that a forged header cannot make quagmire reach its own admin
//! listener, a cloud metadata service or anything else behind the firewall, nor time its ports.
//!
//! The check runs where the connection is made: [`PublicOnly`] is the connector's resolver, so
//! the addresses it checks are the ones connected to (a DNS answer that changes in between
//! cannot slip past it), and [`check_literal`] covers hosts written as addresses, which the
//! connector does not resolve. Names that only resolve elsewhere fail before any connection.

use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::dns::{GaiResolver, Name};
use tower_service::Service;

/// Whether `address` is one a client-chosen URL may reach: a global unicast address.
pub(crate) fn is_public(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(address: Ipv4Addr) -> bool {
    let [a, b, c, _] = address.octets();
    !(a == 0                                     // "this network"
        || a == 10                               // private
        || a == 127                              // loopback
        || (a == 100 && (64..128).contains(&b))  // CGNAT, 100.64.0.0/10
        || (a == 169 && b == 254)                // link-local (cloud metadata)
        || (a == 172 && (16..32).contains(&b))   // private
        || (a == 192 && b == 0 && c == 0)        // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2)        // documentation
        || (a == 192 && b == 88 && c == 99)      // 6to4 relay anycast
        || (a == 192 && b == 31 && c == 196)     // AS112-v4
        || (a == 192 && b == 52 && c == 193)     // AMT
        || (a == 192 && b == 175 && c == 48)     // direct delegation AS112
        || (a == 192 && b == 168)                // private
        || (a == 198 && (18..20).contains(&b))   // benchmarking
        || (a == 198 && b == 51 && c == 100)     // documentation
        || (a == 203 && b == 0 && c == 113)      // documentation
        || a >= 224) // multicast, reserved, broadcast
}

fn is_public_v6(address: Ipv6Addr) -> bool {
    // An IPv4 address inside IPv6 (mapped, compatible, NAT64, 6to4) is judged as that address.
    if let Some(v4) = address.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let segments = address.segments();
    let embedded = |high: u16, low: u16| Ipv4Addr::from((u32::from(high) << 16) | u32::from(low));
    if segments[..6] == [0, 0, 0, 0, 0, 0] {
        // ::, ::1 and the deprecated IPv4-compatible form.
        return !address.is_unspecified()
            && !address.is_loopback()
            && is_public_v4(embedded(segments[6], segments[7]));
    }
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return is_public_v4(embedded(segments[6], segments[7]));
    }
    // Local-use NAT64 (64:ff9b:1::/48) and IPv4-translated addresses (::ffff:0:a.b.c.d):
    // translations on someone's own network.
    if segments[..3] == [0x64, 0xff9b, 1] || segments[..6] == [0, 0, 0, 0, 0xffff, 0] {
        return false;
    }
    if segments[0] == 0x2002 {
        return is_public_v4(embedded(segments[1], segments[2]));
    }
    let first = segments[0];
    !((first & 0xfe00) == 0xfc00                 // unique local, fc00::/7
        || (first & 0xffc0) == 0xfe80            // link-local, fe80::/10
        || (first & 0xffc0) == 0xfec0            // site-local (deprecated), fec0::/10
        || (first & 0xff00) == 0xff00            // multicast
        || (first == 0x2001 && segments[1] == 0x0db8) // documentation
        || (first == 0x0100 && segments[1..4] == [0, 0, 0]) // discard, 100::/64
        || (first == 0x2001 && segments[1] < 0x0200)) // IETF protocol assignments (Teredo, ...)
}

/// Refuses a URL host written as an address that is not public (`[::1]`, `127.0.0.1`,
/// `[::ffff:127.0.0.1]`); other hosts are names, checked after resolution by [`PublicOnly`].
pub(crate) fn check_literal(host: &str) -> Result<(), String> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(address) if !is_public(address) => Err(format!("{host} is not a public address")),
        _ => Ok(()),
    }
}

/// The system resolver (`getaddrinfo`, as hyper's default), keeping public addresses only; a
/// name with none left fails to resolve, saying why. With `allow_private`, every address is kept
/// (tests and local mirrors).
#[derive(Clone, Debug)]
pub(crate) struct PublicOnly {
    inner: GaiResolver,
    allow_private: bool,
}

impl PublicOnly {
    /// A resolver that keeps only public addresses unless `allow_private`.
    pub(crate) fn new(allow_private: bool) -> PublicOnly {
        PublicOnly { inner: GaiResolver::new(), allow_private }
    }
}

impl Service<Name> for PublicOnly {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let host = name.as_str().to_string();
        let resolving = self.inner.call(name);
        let allow_private = self.allow_private;
        Box::pin(async move {
            let addresses: Vec<SocketAddr> = resolving.await?.collect();
            let kept: Vec<SocketAddr> =
                addresses.into_iter().filter(|address| allow_private || is_public(address.ip())).collect();
            if kept.is_empty() {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("{} resolves to no public address", crate::support::log_field::head(&host, 253)),
                ));
            }
            Ok(kept.into_iter())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn public(text: &str) -> bool {
        is_public(text.parse().unwrap())
    }

    #[test]
    fn private_link_local_cgnat_loopback_and_unique_local_ranges_are_not_public() {
        for address in [
            "127.0.0.1",
            "127.255.0.9",
            "0.0.0.0",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.254",
            "192.0.0.8",
            "198.18.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::10.0.0.1",
            "2002:7f00:1::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "2001:db8::1",
            "64:ff9b:1::8.8.8.8",
            "::ffff:0:8.8.8.8",
            "192.31.196.1",
            "192.175.48.1",
        ] {
            assert!(!public(address), "{address} counted as public");
        }
        for address in [
            "8.8.8.8",
            "1.1.1.1",
            "100.63.255.255",
            "100.128.0.1",
            "172.32.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(public(address), "{address} counted as not public");
        }
    }

    #[test]
    fn literal_hosts_are_checked_in_every_spelling_the_parser_reads() {
        assert!(check_literal("[::1]").is_err());
        assert!(check_literal("[::ffff:127.0.0.1]").is_err());
        assert!(check_literal("127.0.0.1").is_err());
        assert!(check_literal("169.254.169.254").is_err());
        // Names (including numeric spellings the system resolver reads as addresses) are left
        // to the resolver, which checks what they resolve to.
        assert!(check_literal("signer.example").is_ok());
        assert!(check_literal("2130706433").is_ok());
    }
}
