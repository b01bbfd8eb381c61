//! The request being judged, rebuilt from forward-auth headers and enriched: everything the
//! rules may look at, read-only.

use std::net::IpAddr;

use crate::client::ClientKey;
use crate::client_state::History;
use crate::geo::GeoInfo;

/// One request as the rules see it.
#[derive(Clone, Debug)]
pub struct Facts {
    /// The original method (`X-Forwarded-Method`, else the verdict request's own).
    pub method: String,
    /// `http` or `https` (`X-Forwarded-Proto`).
    pub proto: String,
    /// The original host (`X-Forwarded-Host`, else `Host`).
    pub host: String,
    /// The original path and query (`X-Forwarded-Uri` or `X-Original-URI`).
    pub uri: String,
    /// The client's headers, names lowercased, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The client's address.
    pub address: IpAddr,
    /// The key its behaviour is remembered under.
    pub key: ClientKey,
    /// ASN and country.
    pub geo: GeoInfo,
    /// Trap hits and request rate, including this request.
    pub history: History,
    /// Whether the URI is a trap URL minted under this secret.
    pub is_trap_url: bool,
}

impl Facts {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }

    /// The path, without the query.
    pub fn path(&self) -> &str {
        self.uri.split_once('?').map_or(&self.uri, |(path, _)| path)
    }

    /// The query string, without `?` (empty when there is none).
    pub fn query(&self) -> &str {
        self.uri.split_once('?').map_or("", |(_, query)| query)
    }

    /// The User-Agent, or an empty string.
    pub fn user_agent(&self) -> &str {
        self.header("user-agent").unwrap_or("")
    }
}
