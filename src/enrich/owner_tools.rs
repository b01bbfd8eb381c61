//! The site owner's own tools: uptime monitors, synthetic checks, validators and audits the
//! owner points at their own site, which must never be trapped (a trapped monitor reports the
//! site as down). They are let through for certain when they prove whose they are, by a secret
//! header the owner configures in the tool (`owner-tools { header; secret-env }`) or by the
//! addresses they come from (`owner-tools { addresses }`). Tools that only name themselves are
//! `lists/monitors.txt`'s, judged by the rules at a low rate: a name is forgeable, a secret is not.
//!
//! The secret is compared in constant time (as BLAKE3 digests, so not even its length shows) and
//! never logged, shown or kept in the clear past startup.

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;

use crate::client::HeaderLines;
use crate::support::prefix_map::PrefixMap;

/// The owner's tools, as configured.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct OwnerToolsConfig {
    /// The header the owner's tools send (its name, lowercase) and its secret value.
    pub header: Option<(String, OwnerSecret)>,
    /// Networks the owner's tools come from.
    pub addresses: Vec<IpNet>,
}

impl fmt::Debug for OwnerToolsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnerToolsConfig")
            .field("header", &self.header.as_ref().map(|(name, _)| name))
            .field("addresses", &self.addresses)
            .finish()
    }
}

/// A secret header value: a digest of it only, never the value.
#[derive(Clone, PartialEq, Eq)]
pub struct OwnerSecret([u8; 32]);

impl OwnerSecret {
    /// Shortest secret accepted: a guessable value would let anyone through.
    pub const MIN_BYTES: usize = 16;

    /// The secret `value` (at least [`OwnerSecret::MIN_BYTES`] bytes, checked by the config).
    pub fn new(value: &str) -> OwnerSecret {
        OwnerSecret(digest(value))
    }
}

fn digest(value: &str) -> [u8; 32] {
    blake3::derive_key("quagmire 2026-12 owner tool header", value.as_bytes())
}

/// How a request proved it is one of the owner's tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnerProof {
    /// It carried the secret header.
    Header,
    /// It came from one of the owner's addresses.
    Address,
}

impl OwnerProof {
    /// Its name for the rules (`r.owner_tool`).
    pub fn as_str(self) -> &'static str {
        match self {
            OwnerProof::Header => "header",
            OwnerProof::Address => "address",
        }
    }
}

/// The compiled settings.
#[derive(Default)]
pub(crate) struct OwnerTools {
    header: Option<(String, [u8; 32])>,
    addresses: PrefixMap<()>,
    any_address: bool,
}

impl OwnerTools {
    pub(crate) fn new(config: &OwnerToolsConfig) -> OwnerTools {
        let mut addresses = PrefixMap::default();
        for network in &config.addresses {
            addresses.insert(*network, ());
        }
        OwnerTools {
            header: config.header.as_ref().map(|(name, secret)| (name.to_ascii_lowercase(), secret.0)),
            any_address: !config.addresses.is_empty(),
            addresses,
        }
    }

    /// Whether a request with `headers` from `address` is one of the owner's tools, and how it
    /// proved it. Every value of the header is checked (a proxy may add its own); a wrong one
    /// proves nothing and costs nothing else.
    pub(crate) fn prove<H: HeaderLines + ?Sized>(&self, headers: &H, address: IpAddr) -> Option<OwnerProof> {
        if let Some((name, secret)) = &self.header {
            for value in headers.lines(name) {
                if constant_time_eq(&digest(value.trim()), secret) {
                    return Some(OwnerProof::Header);
                }
            }
        }
        (self.any_address && self.addresses.get(address.to_canonical()).is_some())
            .then_some(OwnerProof::Address)
    }
}

fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::Headers;

    fn tools() -> OwnerTools {
        OwnerTools::new(&OwnerToolsConfig {
            header: Some(("X-Monitor-Key".into(), OwnerSecret::new("correct horse battery staple"))),
            addresses: vec!["192.0.2.0/28".parse().unwrap(), "2001:db8::/64".parse().unwrap()],
        })
    }

    fn headers(pairs: &[(&str, &str)]) -> Headers {
        let mut headers = Headers::default();
        for (name, value) in pairs {
            headers.push(name, value);
        }
        headers
    }

    #[test]
    fn the_secret_header_proves_a_tool_from_anywhere_and_a_near_miss_proves_nothing() {
        let tools = tools();
        let elsewhere: IpAddr = "203.0.113.9".parse().unwrap();
        let right = headers(&[("x-monitor-key", "correct horse battery staple")]);
        assert_eq!(tools.prove(&right, elsewhere), Some(OwnerProof::Header));
        for wrong in [
            "",
            "correct horse battery stapl",
            "correct horse battery staple!",
            "CORRECT HORSE BATTERY STAPLE",
        ] {
            assert_eq!(tools.prove(&headers(&[("x-monitor-key", wrong)]), elsewhere), None, "{wrong:?}");
        }
        assert_eq!(tools.prove(&headers(&[("x-other", "correct horse battery staple")]), elsewhere), None);
        // A proxy's own value before the tool's does not hide it.
        let both = headers(&[("x-monitor-key", "proxy"), ("x-monitor-key", "correct horse battery staple")]);
        assert_eq!(tools.prove(&both, elsewhere), Some(OwnerProof::Header));
    }

    #[test]
    fn the_owners_addresses_prove_a_tool_and_others_do_not() {
        let tools = tools();
        let none = headers(&[]);
        assert_eq!(tools.prove(&none, "192.0.2.15".parse().unwrap()), Some(OwnerProof::Address));
        assert_eq!(tools.prove(&none, "::ffff:192.0.2.1".parse().unwrap()), Some(OwnerProof::Address));
        assert_eq!(tools.prove(&none, "2001:db8::99".parse().unwrap()), Some(OwnerProof::Address));
        assert_eq!(tools.prove(&none, "192.0.2.16".parse().unwrap()), None);
        assert_eq!(OwnerTools::default().prove(&none, "192.0.2.1".parse().unwrap()), None);
    }

    #[test]
    fn the_config_never_shows_the_secret() {
        let config = OwnerToolsConfig {
            header: Some(("x-monitor-key".into(), OwnerSecret::new("correct horse battery staple"))),
            addresses: Vec::new(),
        };
        assert!(!format!("{config:?}").contains("horse"));
    }
}
