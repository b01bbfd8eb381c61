//! The outgoing HTTP client: fetching a published list (a crawler's IP ranges, ai.robots.txt's
//! robots.json) over HTTPS or HTTP, bounded in time and size. `lists_update` uses it; it is the
//! one place quagmire makes requests of its own.
//!
//! TLS is rustls on ring with the system's root certificates. Redirects are followed (a few
//! hops). Proxies are not used: a site that must go through one points the sources at a mirror.

use std::error::Error as _;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::{Request, StatusCode, Uri, header};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// Redirects followed per fetch; publishers move files now and then, but a chain longer than
/// this is a loop or a mistake.
const MAX_REDIRECTS: usize = 5;

/// The User-Agent of quagmire's own requests.
const USER_AGENT: &str = concat!("quagmire/", env!("CARGO_PKG_VERSION"), " (lists update)");

/// A client for fetching list sources.
#[derive(Clone)]
pub struct Fetcher {
    client: Client<HttpsConnector<HttpConnector>, Empty<Bytes>>,
    timeout: Duration,
    max_bytes: usize,
}

impl Fetcher {
    /// A client whose fetches each take at most `timeout` (connecting, redirects and the whole
    /// body) and return at most `max_bytes`. Without system root certificates HTTPS fetches
    /// fail (each saying so) and HTTP ones still work. Fails only if TLS cannot be set up.
    pub fn new(timeout: Duration, max_bytes: usize) -> Result<Fetcher, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = match hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(provider.clone())
        {
            Ok(builder) => builder,
            Err(error) => {
                tracing::warn!(%error, "no system root certificates: HTTPS list sources will fail");
                let config = rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|error| format!("cannot set up TLS ({error})"))?
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth();
                hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(config)
            }
        };
        let connector = builder.https_or_http().enable_http1().build();
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(Fetcher { client, timeout, max_bytes })
    }

    /// The body at `url` after a 2xx answer, or what went wrong, in words: the status, a
    /// timeout, a body over the limit, a connection or TLS error.
    pub async fn get(&self, url: &str) -> Result<Bytes, String> {
        match tokio::time::timeout(self.timeout, self.get_following(url)).await {
            Ok(result) => result,
            Err(_) => Err(format!("no complete answer within {} s", self.timeout.as_secs_f64())),
        }
    }

    async fn get_following(&self, url: &str) -> Result<Bytes, String> {
        let mut uri: Uri = url.parse().map_err(|error| format!("not a URL ({error})"))?;
        for _ in 0..=MAX_REDIRECTS {
            let request = Request::get(uri.clone())
                .header(header::USER_AGENT, USER_AGENT)
                .body(Empty::new())
                .map_err(|error| format!("cannot make the request ({error})"))?;
            let response = self.client.request(request).await.map_err(|error| {
                let mut message = error.to_string();
                let mut cause = error.source();
                while let Some(inner) = cause {
                    message.push_str(&format!(": {inner}"));
                    cause = inner.source();
                }
                message
            })?;
            let status = response.status();
            if status.is_redirection() && status != StatusCode::NOT_MODIFIED {
                let location = response
                    .headers()
                    .get(header::LOCATION)
                    .and_then(|value| value.to_str().ok())
                    .ok_or_else(|| format!("HTTP {status} without a Location"))?;
                uri = redirect_target(&uri, location)?;
                continue;
            }
            if !status.is_success() {
                return Err(format!("HTTP {status}"));
            }
            let length = response
                .headers()
                .get(header::CONTENT_LENGTH)
                .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
            if length.is_some_and(|length| length > self.max_bytes as u64) {
                return Err(format!("the body is larger than {} bytes", self.max_bytes));
            }
            let body =
                Limited::new(response.into_body(), self.max_bytes).collect().await.map_err(|error| {
                    if error.is::<http_body_util::LengthLimitError>() {
                        format!("the body is larger than {} bytes", self.max_bytes)
                    } else {
                        format!("the body broke off ({error})")
                    }
                })?;
            return Ok(body.to_bytes());
        }
        Err(format!("more than {MAX_REDIRECTS} redirects"))
    }
}

/// Where a redirect from `from` to `location` (absolute, or an absolute path) leads.
fn redirect_target(from: &Uri, location: &str) -> Result<Uri, String> {
    if location.starts_with("http://") || location.starts_with("https://") {
        return location.parse().map_err(|_| format!("a redirect to `{location}`, not a URL"));
    }
    if location.starts_with('/') && !location.starts_with("//") {
        let mut parts = from.clone().into_parts();
        parts.path_and_query =
            Some(location.parse().map_err(|_| format!("a redirect to `{location}`, not a path"))?);
        return Uri::from_parts(parts).map_err(|_| format!("a redirect to `{location}`"));
    }
    Err(format!("a redirect to `{location}`, which is not absolute"))
}

/// Why `url` cannot be a list source: only absolute `http` and `https` URLs with a host are.
pub fn check_url(url: &str) -> Result<(), String> {
    let uri: Uri = url.parse().map_err(|_| "not a URL".to_string())?;
    match uri.scheme_str() {
        Some("https" | "http") if uri.host().is_some_and(|host| !host.is_empty()) => Ok(()),
        Some("https" | "http") => Err("the URL has no host".into()),
        _ => Err("the URL must start with https:// or http://".into()),
    }
}
