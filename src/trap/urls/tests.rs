//! Trap URLs as a specification: minted URLs are recognised, others (and tampered ones) are not.

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

use super::*;

fn urls(secret: &str) -> TrapUrls {
    TrapUrls::new(secret.as_bytes())
}

fn minted(urls: &TrapUrls, count: usize) -> Vec<String> {
    let mut rng = Pcg64Mcg::seed_from_u64(7);
    (0..count)
        .map(|_| {
            let mut out = Vec::new();
            urls.mint(&mut rng, &mut out);
            String::from_utf8(out).unwrap()
        })
        .collect()
}

#[test]
fn embedded_word_list_is_complete() {
    assert_eq!(urls("s").words().len(), WORD_COUNT);
}

#[test]
fn minted_urls_pass_the_check_with_query_or_fragment() {
    let urls = urls("secret");
    for url in minted(&urls, 2000) {
        assert!(urls.is_trap(&url), "{url}");
        assert!(urls.is_trap(&format!("{url}?utm_source=feed")), "{url}");
        assert!(urls.is_trap(&format!("{url}#comments")), "{url}");
    }
}

#[test]
fn minted_urls_look_like_an_ordinary_sites() {
    for url in minted(&urls("secret"), 500) {
        assert!(url.starts_with('/'));
        assert!(
            url.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"/-.".contains(&b)),
            "{url}"
        );
        let slug = url.trim_end_matches('/').trim_end_matches(".html").rsplit('/').next().unwrap();
        let words = slug.split('-').count();
        assert!((4..=6).contains(&words), "{url}");
    }
}

#[test]
fn another_secret_rejects_the_urls() {
    let minted = minted(&urls("secret"), 1000);
    let other = urls("other secret");
    let passed = minted.iter().filter(|url| other.is_trap(url)).count();
    assert_eq!(passed, 0);
}

#[test]
fn altered_urls_fail() {
    let urls = urls("secret");
    for url in minted(&urls, 300) {
        // Swap the first slug word for another dictionary word: the tag no longer matches.
        let slug_start = url.trim_end_matches('/').rfind('/').unwrap() + 1;
        let first_end = slug_start + url[slug_start..].find('-').unwrap();
        let replacement = if &url[slug_start..first_end] == "harbor" { "garden" } else { "harbor" };
        let altered = format!("{}{}{}", &url[..slug_start], replacement, &url[first_end..]);
        if altered != url {
            assert!(!urls.is_trap(&altered), "{altered}");
        }
        // A different section changes the tagged prefix too.
        let moved = url.replacen('/', "/x", 1);
        assert!(!urls.is_trap(&moved), "{moved}");
    }
}

#[test]
fn ordinary_and_random_paths_fail() {
    let urls = urls("secret");
    for path in [
        "",
        "/",
        "/index.html",
        "/robots.txt",
        "/blog/2019/05/",
        "/blog/2019/05/my-first-post",
        "/archive/quiet-harbor-letters",
        "/-a-b-c",
        "/?url=/blog/x-y-z-w",
        "/wp-login.php",
    ] {
        assert!(!urls.is_trap(path), "{path}");
    }
}

#[test]
fn guessed_urls_built_from_dictionary_words_fail() {
    // A guesser who knows the scheme and the word list still needs the secret.
    let urls = urls("secret");
    let words = urls.words();
    let mut rng = Pcg64Mcg::seed_from_u64(99);
    let mut passed = 0;
    for _ in 0..200_000 {
        let pick = |rng: &mut Pcg64Mcg| &*words[below(rng, WORD_COUNT)];
        let guess =
            format!("/blog/{}-{}-{}-{}", pick(&mut rng), pick(&mut rng), pick(&mut rng), pick(&mut rng));
        passed += urls.is_trap(&guess) as usize;
    }
    assert_eq!(passed, 0);
}

#[test]
fn short_word_lists_are_rejected() {
    let err = TrapUrls::with_words(b"s", "alpha\nbeta\nbeta\nGamma\n").err().unwrap();
    assert!(err.to_string().contains("found 2"), "{err}");
}

#[test]
fn numbers_are_zero_padded() {
    let mut out = Vec::new();
    push_number(&mut out, 7, 2);
    push_number(&mut out, 2019, 4);
    push_number(&mut out, 0, 1);
    assert_eq!(out, b"0720190");
}

#[test]
fn a_trap_url_another_site_made_the_browser_fetch_is_no_evidence() {
    let evidence = |headers: &[(&str, &str)]| {
        let headers: crate::facts::Headers = headers.iter().copied().collect();
        super::is_evidence(&headers, "site.example:443")
    };
    // Crawlers, and a person who navigates there on this site: evidence.
    assert!(evidence(&[("user-agent", "GPTBot/1.2"), ("accept", "*/*")]));
    assert!(evidence(&[("sec-fetch-site", "same-origin"), ("sec-fetch-dest", "document")]));
    assert!(evidence(&[("sec-fetch-site", "none"), ("sec-fetch-dest", "document")]));
    assert!(evidence(&[("referer", "https://site.example/blog/post")]));
    // Another site's <img>, link or fetch, and any subresource: none.
    assert!(!evidence(&[("sec-fetch-site", "cross-site"), ("sec-fetch-dest", "image")]));
    assert!(!evidence(&[("sec-fetch-site", "cross-site"), ("sec-fetch-dest", "document")]));
    assert!(!evidence(&[("sec-fetch-site", "same-site"), ("sec-fetch-dest", "image")]));
    assert!(!evidence(&[("sec-fetch-site", "same-origin"), ("sec-fetch-dest", "script")]));
    // Without fetch metadata: another site's Referer, or an image's Accept.
    assert!(!evidence(&[("referer", "https://elsewhere.example/page")]));
    assert!(!evidence(&[("accept", "image/avif,image/webp,*/*;q=0.8")]));
    assert!(evidence(&[("referer", "https://SITE.example:8443/x")]));
}
