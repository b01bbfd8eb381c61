//! Forward-auth headers → `ForwardedRequest` → client address, as the verdict handler and
//! `verdict::facts` do it, for arbitrary header names and values.
//!
//! Input: the first byte picks the TCP peer (trusted or not, IPv4, IPv6 or IPv4-mapped, or none);
//! the rest is lines, the first the verdict request's method, each further one a `name: value`
//! header (names or values the `http` crate refuses are skipped, as hyper would refuse them).
//!
//! Beyond not panicking: the client address is the peer itself, or (only when the peer is a
//! trusted proxy) an address written in `X-Forwarded-For`, `Forwarded` or `X-Real-IP`; the rules' copy of the
//! headers is the request's, pair by pair; the rebuilt URI is never empty.

#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::LazyLock;

use http::{HeaderMap, HeaderName, HeaderValue, Method};
use libfuzzer_sys::fuzz_target;
use quagmire::TrapUrls;
use quagmire::forwarded_request;
use quagmire::{ClientIdentity, HeaderLines};

/// Peers the first byte chooses from: trusted and untrusted, both families, a mapped address.
const PEERS: &[Option<&str>] = &[
    Some("127.0.0.1:40000"),
    Some("10.1.2.3:40000"),
    Some("[::1]:40000"),
    Some("[::ffff:127.0.0.1]:40000"),
    Some("[2001:db8:ffff::7]:40000"),
    Some("203.0.113.9:40000"),
    Some("[2001:db8::1]:40000"),
    Some("[::ffff:203.0.113.9]:40000"),
    None,
];

/// Trusted proxies of both families, so that forwarded entries of either can be trusted hops.
static IDENTITY: LazyLock<ClientIdentity> = LazyLock::new(|| {
    let trusted = ["127.0.0.0/8", "10.0.0.0/8", "::1/128", "2001:db8:ffff::/48"];
    ClientIdentity::new(trusted.iter().map(|net| net.parse().unwrap()).collect(), 32, 64)
});

static TRAP_URLS: LazyLock<TrapUrls> = LazyLock::new(|| TrapUrls::new(b"fuzz"));

fuzz_target!(|data: &[u8]| {
    let Some((&choice, rest)) = data.split_first() else { return };
    let peer: Option<SocketAddr> = PEERS[usize::from(choice) % PEERS.len()].map(|peer| peer.parse().unwrap());
    let mut lines = rest.split(|&byte| byte == b'\n');
    let method = lines.next().and_then(|line| Method::from_bytes(line).ok()).unwrap_or(Method::GET);
    let mut headers = HeaderMap::new();
    for line in lines {
        let Some(colon) = line.iter().position(|&byte| byte == b':') else { continue };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii_start());
        if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) {
            headers.append(name, value);
        }
    }

    // A listener always knows its peer; `None` stands for a peer on loopback.
    let peer = peer.map_or(IpAddr::from([127, 0, 0, 1]), |peer| peer.ip());
    let request = forwarded_request(peer, &method, &headers);
    assert!(!request.uri.is_empty());
    assert_eq!(request.headers.iter().count(), headers.len());
    for ((name, value), (copied_name, copied_value)) in headers.iter().zip(request.headers.iter()) {
        assert_eq!(name.as_str(), copied_name);
        assert_eq!(String::from_utf8_lossy(value.as_bytes()), copied_value);
    }

    // As `verdict::facts` does it.
    let peer = request.peer;
    let address = IDENTITY.client_address(peer, &request.headers);
    let key = IDENTITY.key(address);
    let _ = key.to_string();
    let _ = TRAP_URLS.is_trap(&request.uri);

    if address == canonical(peer) {
        return;
    }
    assert!(IDENTITY.is_trusted(peer), "{address} from untrusted peer {peer}");
    // Any other answer was written in a forwarding header: an X-Forwarded-For entry, a Forwarded
    // `for=` value (quoted or not; a quoted one may escape characters with `\`, RFC 7230's
    // quoted-pair) or X-Real-IP.
    let written = ["x-forwarded-for", "forwarded", "x-real-ip"].iter().any(|&name| {
        request.headers.lines(name).any(|line| {
            let unescaped = line.replace('\\', "");
            [line, unescaped.as_str()].iter().any(|line| {
                line.split([',', ';', '=', '"', ' ']).any(|token| parse_address(token) == Some(address))
            })
        })
    });
    assert!(written, "{address} is neither the peer {peer} nor written in a forwarding header");
});

/// An IPv4-mapped IPv6 address is the IPv4 address it maps.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        v4 => v4,
    }
}

/// The forms a forwarded address takes: `1.2.3.4`, `1.2.3.4:80`, `::1`, `[::1]`, `[::1]:80`, and a
/// `Forwarded` node whose port is malformed (`[::1]:x`, `1.2.3.4:x`), which names the address all
/// the same.
fn parse_address(entry: &str) -> Option<IpAddr> {
    let entry = entry.trim();
    let bare = entry.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')).unwrap_or(entry);
    let address = bare.parse::<IpAddr>().or_else(|_| entry.parse::<SocketAddr>().map(|socket| socket.ip()));
    let node = || match entry.strip_prefix('[') {
        Some(rest) => rest.split_once(']').and_then(|(v6, _)| v6.parse::<Ipv6Addr>().ok()).map(IpAddr::V6),
        None => entry.split_once(':').and_then(|(v4, _)| v4.parse::<Ipv4Addr>().ok()).map(IpAddr::V4),
    };
    address.ok().or_else(node).map(canonical)
}
