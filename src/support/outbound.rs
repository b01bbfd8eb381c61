//! The outgoing HTTP client, the one place quagmire makes requests of its own: fetching a
//! published list (a crawler's IP ranges, ai.robots.txt's robots.json) for `lists_update`, and a
//! Web Bot Auth key directory for `signature`. Every fetch is bounded in time and size.
//!
//! TLS is rustls on ring with the system's root certificates. Redirects are followed as the
//! caller says (a few hops for lists; none for key directories, whose keys must come from the
//! origin a signature names). Destinations a client's header chose reach public addresses only
//! (see [`public_only`]). Proxies are not used: a site that must go through one
//! points the sources at a mirror.

use std::error::Error as _;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{HeaderMap, Request, StatusCode, Uri, header};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

pub(crate) mod public_only;

use public_only::PublicOnly;

/// Redirects followed per list fetch; publishers move files now and then, but a chain longer
/// than this is a loop or a mistake.
pub(crate) const LIST_REDIRECTS: usize = 5;

/// How a [`Fetcher`] fetches.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    /// Longest one fetch may take: connecting, redirects and the whole body.
    pub timeout: Duration,
    /// Most bytes of a body.
    pub max_bytes: usize,
    /// Redirects followed; 0 makes a redirect an error.
    pub redirects: usize,
    /// Whether only public addresses may be reached (a destination a client chose).
    pub public_only: bool,
    /// The User-Agent sent.
    pub user_agent: &'static str,
}

/// A client that fetches with its [`Options`].
#[derive(Clone)]
pub(crate) struct Fetcher {
    client: Client<HttpsConnector<HttpConnector<PublicOnly>>, Full<Bytes>>,
    options: Options,
}

/// A 2xx answer: its headers and body.
pub(crate) struct Fetched {
    /// The answer's headers.
    pub headers: HeaderMap,
    /// The whole body.
    pub body: Bytes,
}

impl Fetcher {
    /// A client fetching with `options`. Without system root certificates HTTPS fetches fail
    /// (each saying so) and HTTP ones still work. Fails only if TLS cannot be set up.
    pub(crate) fn new(options: Options) -> Result<Fetcher, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = match hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(provider.clone())
        {
            Ok(builder) => builder,
            Err(error) => {
                tracing::warn!(%error, user_agent = options.user_agent, "no system root certificates: HTTPS fetches will fail");
                let config = rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|error| format!("cannot set up TLS ({error})"))?
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth();
                hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(config)
            }
        };
        let mut http = HttpConnector::new_with_resolver(PublicOnly::new(!options.public_only));
        http.enforce_http(false);
        let connector = builder.https_or_http().enable_http1().wrap_connector(http);
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(Fetcher { client, options })
    }

    /// The body at `url` after a 2xx answer, or what went wrong, in words: the status, a
    /// timeout, a body over the limit, a connection or TLS error.
    pub(crate) async fn get(&self, url: &str) -> Result<Bytes, String> {
        self.fetch(url, None).await.map(|fetched| fetched.body)
    }

    /// [`Fetcher::get`] with an `Accept` header, keeping the answer's headers.
    pub(crate) async fn fetch(&self, url: &str, accept: Option<&str>) -> Result<Fetched, String> {
        self.fetch_with_headers(url, accept, &[]).await
    }

    /// [`Fetcher::fetch`] with more request headers (an API key, say).
    pub(crate) async fn fetch_with_headers(
        &self,
        url: &str,
        accept: Option<&str>,
        headers: &[(&'static str, &str)],
    ) -> Result<Fetched, String> {
        let timeout = self.options.timeout;
        match tokio::time::timeout(timeout, self.get_following(url, accept, headers)).await {
            Ok(result) => result,
            Err(_) if timeout < Duration::from_secs(1) => {
                Err(format!("no complete answer within {} ms", timeout.as_millis()))
            }
            Err(_) => Err(format!("no complete answer within {} s", timeout.as_secs_f64())),
        }
    }

    /// POSTs `body` as JSON to `url` with `headers`, without redirects: the answer's status and
    /// body (at most the body limit), whatever the status; an error only when there is no answer.
    pub(crate) async fn post_json(
        &self,
        url: &str,
        headers: &[(&'static str, &str)],
        body: Vec<u8>,
    ) -> Result<(StatusCode, Bytes), String> {
        let timeout = self.options.timeout;
        let post = async {
            let uri: Uri = url.parse().map_err(|error| format!("not a URL ({error})"))?;
            let mut request = Request::post(uri)
                .header(header::USER_AGENT, self.options.user_agent)
                .header(header::CONTENT_TYPE, "application/json");
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            let request = request
                .body(Full::new(Bytes::from(body)))
                .map_err(|error| format!("cannot make the request ({error})"))?;
            let response = self.client.request(request).await.map_err(|error| error.to_string())?;
            let status = response.status();
            let max_bytes = self.options.max_bytes;
            let body = Limited::new(response.into_body(), max_bytes)
                .collect()
                .await
                .map_err(|error| format!("the body broke off ({error})"))?;
            Ok((status, body.to_bytes()))
        };
        tokio::time::timeout(timeout, post)
            .await
            .unwrap_or_else(|_| Err(format!("no complete answer within {} ms", timeout.as_millis())))
    }

    /// The body at `url` asked for with `host` as its `Host` header (a site's origin serving
    /// several hosts), without redirects: `Ok(None)` on a 4xx (nothing there for that host).
    pub(crate) async fn fetch_for_host(&self, url: &str, host: &str) -> Result<Option<Bytes>, String> {
        let timeout = self.options.timeout;
        let fetch = async {
            let uri: Uri = url.parse().map_err(|error| format!("not a URL ({error})"))?;
            let request = Request::get(uri)
                .header(header::USER_AGENT, self.options.user_agent)
                .header(header::HOST, host)
                .body(Full::new(Bytes::new()))
                .map_err(|error| format!("cannot make the request ({error})"))?;
            let response = self.client.request(request).await.map_err(|error| error.to_string())?;
            let status = response.status();
            if status.is_client_error() {
                return Ok(None);
            }
            if !status.is_success() {
                return Err(format!("HTTP {status}"));
            }
            let max_bytes = self.options.max_bytes;
            let body = Limited::new(response.into_body(), max_bytes).collect().await.map_err(|error| {
                if error.is::<http_body_util::LengthLimitError>() {
                    format!("the body is larger than {max_bytes} bytes")
                } else {
                    format!("the body broke off ({error})")
                }
            })?;
            Ok(Some(body.to_bytes()))
        };
        tokio::time::timeout(timeout, fetch)
            .await
            .unwrap_or_else(|_| Err(format!("no complete answer within {} ms", timeout.as_millis())))
    }

    async fn get_following(
        &self,
        url: &str,
        accept: Option<&str>,
        headers: &[(&'static str, &str)],
    ) -> Result<Fetched, String> {
        let max_bytes = self.options.max_bytes;
        let mut uri: Uri = url.parse().map_err(|error| format!("not a URL ({error})"))?;
        for _ in 0..=self.options.redirects {
            // A host written as an address is not resolved, so the resolver never sees it.
            if self.options.public_only {
                public_only::check_literal(uri.host().unwrap_or_default())?;
            }
            let mut request = Request::get(uri.clone()).header(header::USER_AGENT, self.options.user_agent);
            if let Some(accept) = accept {
                request = request.header(header::ACCEPT, accept);
            }
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            let request = request
                .body(Full::new(Bytes::new()))
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
            if status.is_redirection() && status != StatusCode::NOT_MODIFIED && self.options.redirects > 0 {
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
            if length.is_some_and(|length| length > max_bytes as u64) {
                return Err(format!("the body is larger than {max_bytes} bytes"));
            }
            let (parts, body) = response.into_parts();
            let body = Limited::new(body, max_bytes).collect().await.map_err(|error| {
                if error.is::<http_body_util::LengthLimitError>() {
                    format!("the body is larger than {max_bytes} bytes")
                } else {
                    format!("the body broke off ({error})")
                }
            })?;
            return Ok(Fetched { headers: parts.headers, body: body.to_bytes() });
        }
        Err(format!("more than {} redirects", self.options.redirects))
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
pub(crate) fn check_url(url: &str) -> Result<(), String> {
    let uri: Uri = url.parse().map_err(|_| "not a URL".to_string())?;
    match uri.scheme_str() {
        Some("https" | "http") if uri.host().is_some_and(|host| !host.is_empty()) => Ok(()),
        Some("https" | "http") => Err("the URL has no host".into()),
        _ => Err("the URL must start with https:// or http://".into()),
    }
}
