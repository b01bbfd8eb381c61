//! The trap page generator: (host, path) → a deterministic page of believable nonsense.
//!
//! A page's RNG (PCG) is seeded from a keyed hash of the host and the path, so the same URL under
//! the same secret gives a byte-identical page across requests and restarts, and nobody without
//! the secret can predict or correlate pages. [`markov`] holds the word model, [`html`] the layout.
//! Generating a page allocates nothing beyond the output buffer.

pub(crate) mod escape;
pub(crate) mod html;
mod look;
pub(crate) mod markov;
mod page_buffer;
mod prefetch;
pub(crate) mod template;
mod walks;

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

use crate::support::numbers::below;
use crate::trap::urls::{TrapUrls, WORD_COUNT};
use markov::Chain;

/// Shape of a generated page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageSettings {
    /// Smallest page size in bytes (the page is at least roughly this large).
    pub min_bytes: usize,
    /// Largest page size in bytes; each page picks its size uniformly in between.
    pub max_bytes: usize,
    /// Fewest links to other trap URLs on a page.
    pub min_links: usize,
    /// Most links to other trap URLs on a page.
    pub max_links: usize,
}

/// Generates trap pages from a trained chain.
pub struct Generator {
    chain: Chain,
    urls: TrapUrls,
    settings: PageSettings,
    page_key: [u8; 32],
    /// The site's own page to write into, instead of the site's look.
    template: Option<template::Template>,
}

impl Generator {
    /// Builds a generator whose pages are keyed by `secret`.
    pub fn new(chain: Chain, urls: TrapUrls, settings: PageSettings, secret: &[u8]) -> Self {
        let page_key = blake3::derive_key("quagmire 2026-12 trap page seed", secret);
        Generator { chain, urls, settings, page_key, template: None }
    }

    /// Pages written into the site's own `template` rather than in a look of their own.
    pub fn with_template(mut self, template: template::Template) -> Self {
        self.template = Some(template);
        self
    }

    /// The page for `host` and `path` (path may carry a query string, which takes part).
    pub fn page(&self, host: &str, path: &str) -> String {
        // The page sizes the buffer itself, once.
        let mut out = Vec::new();
        self.write_page(&mut out, host, path);
        // The page is built from whole corpus words and ASCII markup, so this never copies.
        String::from_utf8(out).unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned())
    }

    /// Appends the page for `host` and `path` to `out` as UTF-8.
    pub fn write_page(&self, out: &mut Vec<u8>, host: &str, path: &str) {
        let host = site_host(host);
        let mut site_rng = Pcg64Mcg::from_seed(self.seed(host, None));
        let words = self.urls.words();
        let site = [&*words[below(&mut site_rng, WORD_COUNT)], &*words[below(&mut site_rng, WORD_COUNT)]];
        let look = look::Look::new(rand::Rng::next_u64(&mut site_rng));
        let writer = html::PageWriter {
            chain: &self.chain,
            urls: &self.urls,
            settings: &self.settings,
            rng: Pcg64Mcg::from_seed(self.seed(host, Some(path))),
            out: page_buffer::Page::new(out, self.settings.max_bytes),
            walks: walks::Walks::new(),
            look,
        };
        match &self.template {
            Some(template) => writer.write_templated(template),
            None => writer.write(site),
        }
    }

    /// The trap-URL minter and checker that pages link with.
    pub fn trap_urls(&self) -> &TrapUrls {
        &self.urls
    }

    /// The word model.
    pub fn chain(&self) -> &Chain {
        &self.chain
    }

    /// The page shape.
    pub fn settings(&self) -> &PageSettings {
        &self.settings
    }

    /// 16 bytes of keyed hash over the lowercased host and, for a page, the path.
    fn seed(&self, host: &str, path: Option<&str>) -> [u8; 16] {
        let mut hasher = blake3::Hasher::new_keyed(&self.page_key);
        // Lowercase through a small stack buffer: hosts differ in case, pages must not.
        for chunk in host.as_bytes().chunks(64) {
            let mut lower = [0u8; 64];
            for (dst, src) in lower.iter_mut().zip(chunk) {
                *dst = src.to_ascii_lowercase();
            }
            hasher.update(&lower[..chunk.len()]);
        }
        if let Some(path) = path {
            hasher.update(&[0]);
            hasher.update(path.as_bytes());
        }
        let mut seed = [0u8; 16];
        seed.copy_from_slice(&hasher.finalize().as_bytes()[..16]);
        seed
    }
}

/// The host without a port: `example.org:8080` and `example.org` are one site.
fn site_host(host: &str) -> &str {
    if host.starts_with('[') {
        // An IPv6 literal such as `[::1]:8421`.
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    host.rsplit_once(':').map_or(host, |(name, _port)| name)
}

#[cfg(test)]
mod tests;
