//! Fetching a Web Bot Auth key directory: `GET <origin>/.well-known/http-message-signatures-directory`
//! with hyper's client (rustls on ring, the system's roots), bounded in time and size, and the
//! answer read as a JWKS of Ed25519 keys (keyed by their RFC 7638 thumbprints) with how long it
//! may be kept (`Cache-Control: max-age`, within bounds).
//!
//! Redirects are not followed: the keys must come from the origin the signature names.

use std::sync::Arc;
use std::time::Duration;

use hyper::header;
use web_bot_auth::keyring::{KeyRing, Thumbprintable};

use crate::support::outbound;

/// Where an agent publishes its keys, under its origin.
pub(crate) const WELL_KNOWN_PATH: &str = "/.well-known/http-message-signatures-directory";

/// The largest directory read; a handful of keys is a few hundred bytes.
pub(crate) const MAX_BYTES: usize = 64 * 1024;
/// Keys read from one directory, at most: more than [`MAX_BYTES`] can hold (an Ed25519 JWK takes
/// about 80 bytes), so every key a directory within the size cap publishes is read, and a
/// signature by any of them can verify.
const MAX_KEYS: usize = 1024;

/// How long a directory is kept at least, whatever its `max-age`: an agent that says
/// `no-cache` must not cost a fetch per request.
pub(crate) const MIN_KEEP: Duration = Duration::from_secs(5 * 60);
/// How long a directory is kept at most, so that a rotated or withdrawn key stops counting
/// within a day.
pub(crate) const MAX_KEEP: Duration = Duration::from_secs(24 * 3600);
/// How long a directory without `max-age` is kept.
const DEFAULT_KEEP: Duration = Duration::from_secs(3600);

/// The User-Agent of quagmire's own requests.
const USER_AGENT: &str = concat!("quagmire/", env!("CARGO_PKG_VERSION"), " (web bot auth)");

/// A fetched directory: its usable keys and how long to keep them.
#[derive(Clone, Debug)]
pub(crate) struct Directory {
    /// Ed25519 keys by thumbprint.
    pub keys: Arc<KeyRing>,
    /// How long the directory may be kept.
    pub keep: Duration,
}

/// The HTTP client for key directories.
#[derive(Clone)]
pub(crate) struct DirectoryFetcher {
    http: outbound::Fetcher,
}

impl DirectoryFetcher {
    /// A client whose fetches take at most `timeout` each, follow no redirect and reach public
    /// addresses only, unless `allow_private` (see [`crate::support::outbound::public_only`]): the origin
    /// comes from a client's header.
    pub(crate) fn new(timeout: Duration, allow_private: bool) -> Result<DirectoryFetcher, String> {
        let http = outbound::Fetcher::new(outbound::Options {
            timeout,
            max_bytes: MAX_BYTES,
            redirects: 0,
            public_only: !allow_private,
            user_agent: USER_AGENT,
        })?;
        Ok(DirectoryFetcher { http })
    }

    /// The directory of `origin` (`scheme://authority`), or why it could not be had.
    pub(crate) async fn fetch(&self, origin: &str) -> Result<Directory, String> {
        let accept = "application/http-message-signatures-directory+json, application/json";
        let fetched = self.http.fetch(&format!("{origin}{WELL_KNOWN_PATH}"), Some(accept)).await?;
        let keep =
            keep_for(fetched.headers.get_all(header::CACHE_CONTROL).iter().filter_map(|v| v.to_str().ok()));
        let keys = parse_keys(&fetched.body)?;
        Ok(Directory { keys: Arc::new(keys), keep })
    }
}

/// The Ed25519 keys of a JWKS (`{"keys": [...]}`), by thumbprint. Keys of other types, or that
/// do not parse, are skipped; a body that is not a JWKS is an error.
pub(crate) fn parse_keys(body: &[u8]) -> Result<KeyRing, String> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|error| format!("the directory is not JSON ({error})"))?;
    let Some(keys) = value.get("keys").and_then(|keys| keys.as_array()) else {
        return Err("the directory has no `keys` list".into());
    };
    let mut ring = KeyRing::default();
    for key in keys.iter().take(MAX_KEYS) {
        if let Ok(key) = serde_json::from_value::<Thumbprintable>(key.clone()) {
            let _ = ring.try_import_jwk(&key);
        }
    }
    Ok(ring)
}

/// How long to keep a directory given its `Cache-Control` lines: `max-age` (or `s-maxage`)
/// within [`MIN_KEEP`]..[`MAX_KEEP`], else an hour.
pub(crate) fn keep_for<'a>(cache_control: impl Iterator<Item = &'a str>) -> Duration {
    let mut max_age = None;
    for directive in cache_control.flat_map(|line| line.split(',')) {
        let directive = directive.trim();
        let Some((name, value)) = directive.split_once('=') else { continue };
        let name = name.trim();
        if (name.eq_ignore_ascii_case("max-age") || name.eq_ignore_ascii_case("s-maxage"))
            && let Ok(seconds) = value.trim().trim_matches('"').parse::<u64>()
        {
            max_age = Some(max_age.map_or(seconds, |known: u64| known.min(seconds)));
        }
    }
    max_age.map_or(DEFAULT_KEEP, |seconds| Duration::from_secs(seconds).clamp(MIN_KEEP, MAX_KEEP))
}
