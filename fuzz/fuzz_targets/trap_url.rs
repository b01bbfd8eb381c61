//! Trap URL recognition (`TrapUrls::is_trap`) and the trap listener's page address, including
//! Traefik's `url=` form (`http::trap::page_address`), for arbitrary text.
//!
//! Input: the whole text is checked as a URI; its first line is also the trap request's target
//! (as is, and wrapped as Traefik's `/?url=…`), the second line its `Host` and the third its
//! `X-Forwarded-Host`; the first 16 bytes seed the RNG that mints a trap URL.
//!
//! Beyond not panicking: a minted URL is always recognised, also with any query or fragment
//! after it and after a round trip through Traefik's `url=` form; a relative `url=` target comes
//! back unchanged.

#![no_main]

use std::sync::LazyLock;

use http::{HeaderMap, HeaderValue, Uri, header};
use libfuzzer_sys::fuzz_target;
use quagmire::TrapUrls;
use quagmire::page_address;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

static TRAP_URLS: LazyLock<TrapUrls> = LazyLock::new(|| TrapUrls::new(b"fuzz"));

fuzz_target!(|data: &[u8]| {
    let urls = &*TRAP_URLS;
    let text = String::from_utf8_lossy(data);
    let _ = urls.is_trap(&text);

    let mut seed = [0; 16];
    let seeded = data.len().min(seed.len());
    seed[..seeded].copy_from_slice(&data[..seeded]);
    let mut minted = Vec::new();
    urls.mint(&mut Pcg64Mcg::from_seed(seed), &mut minted);
    let minted = String::from_utf8(minted).expect("minted URLs are ASCII");
    assert!(urls.is_trap(&minted), "{minted}");
    assert!(urls.is_trap(&format!("{minted}?{text}")), "{minted}?{text}");
    assert!(urls.is_trap(&format!("{minted}#{text}")), "{minted}#{text}");

    let mut lines = text.split('\n');
    let target = lines.next().unwrap_or("");
    let mut headers = HeaderMap::new();
    for name in [header::HOST, http::HeaderName::from_static("x-forwarded-host")] {
        if let Some(Ok(value)) = lines.next().map(HeaderValue::from_str) {
            headers.insert(name, value);
        }
    }

    if let Ok(uri) = Uri::try_from(target) {
        let _ = page_address(&uri, &headers);
    }
    let (_, relative) = page_address(&traefik_uri(target), &headers);
    if target.starts_with('/') && !target.starts_with("//") {
        assert_eq!(relative, target);
    }
    let (host, path) = page_address(&traefik_uri(&format!("https://site.example{minted}")), &headers);
    assert_eq!((host.as_str(), path.as_str()), ("site.example", minted.as_str()));
    assert!(urls.is_trap(&path));
});

/// The request Traefik's `errors` middleware makes for `original`: `/?url=<original, encoded>`.
fn traefik_uri(original: &str) -> Uri {
    let encoded: String = form_urlencoded::byte_serialize(original.as_bytes()).collect();
    Uri::try_from(format!("/?url={encoded}")).expect("an encoded query is a valid URI")
}
