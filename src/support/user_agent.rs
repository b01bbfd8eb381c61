//! What a user agent says about its sender: which mainstream browser it claims to be
//! (`browser_claim`, read by rules and metrics) and a bounded family for metric labels
//! (`user_agent_family`, remembered per thread because traffic repeats a few user agents).

use std::cell::RefCell;
use std::hash::BuildHasher;
use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, AhoCorasickKind};

/// A browser a user agent claims to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BrowserClaim {
    /// `chrome`, `edge`, `firefox` or `safari`.
    pub family: &'static str,
    /// Major version.
    pub major: u32,
    /// Minor version (Safari's matters: 16.4).
    pub minor: u32,
}

/// Parses which mainstream browser, and which version, a user agent claims.
pub fn browser_claim(user_agent: &str) -> Option<BrowserClaim> {
    if !user_agent.starts_with("Mozilla/5.0") {
        return None;
    }
    // One pass over the slashes: a marker such as "Chrome/" occurs exactly where a '/' follows
    // "Chrome". This runs for every verdict (rules and metrics), so no substring searches.
    const MARKERS: [&str; 6] = ["Edg", "Firefox", "Chrome", "CriOS", "Version", "Safari"];
    let mut found: [Option<usize>; 6] = [None; 6];
    for (slash, _) in user_agent.match_indices('/') {
        let before = &user_agent[..slash];
        for (marker, first) in MARKERS.iter().zip(found.iter_mut()) {
            if first.is_none() && before.ends_with(marker) {
                *first = Some(slash + 1);
            }
        }
    }
    let [edge, firefox, chrome, crios, version, safari] = found;
    let version_at = |start: Option<usize>| {
        let rest = &user_agent[start?..];
        let version = rest.split(|c: char| !(c.is_ascii_digit() || c == '.')).next()?;
        let mut parts = version.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next().and_then(|minor| minor.parse().ok()).unwrap_or(0);
        Some((major, minor))
    };
    let claim = |family, (major, minor)| BrowserClaim { family, major, minor };
    if let Some(version) = version_at(edge) {
        return Some(claim("edge", version));
    }
    if let Some(version) = version_at(firefox) {
        return Some(claim("firefox", version));
    }
    if let Some(version) = version_at(chrome).or_else(|| version_at(crios)) {
        return Some(claim("chrome", version));
    }
    if safari.is_some() {
        return version_at(version).map(|version| claim("safari", version));
    }
    None
}

/// `user_agent_family`, remembered per thread in a small table indexed by the user agent's hash.
/// Traffic repeats a few user agents, and classifying one costs about ten times looking it up
/// (3.8k of a verdict's 74k instructions). A user agent that misses is classified and replaces
/// the entry in its slot; the table stays bounded, whatever clients send.
pub(crate) fn remembered_family(user_agent: &str) -> &'static str {
    /// Slots per thread; user agents longer than `REMEMBERED_BYTES` are not kept.
    const SLOTS: usize = 256;
    const REMEMBERED_BYTES: usize = 512;
    type Slots = Vec<Option<(Box<str>, &'static str)>>;
    thread_local! {
        // Seeded per thread, so that no client can aim user agents at one slot.
        static REMEMBERED: (foldhash::fast::RandomState, RefCell<Slots>) =
            (foldhash::fast::RandomState::default(), RefCell::new(vec![None; SLOTS]));
    }
    if user_agent.len() > REMEMBERED_BYTES {
        return user_agent_family(user_agent);
    }
    REMEMBERED.with(|(hasher, slots)| {
        let slot = hasher.hash_one(user_agent) as usize % SLOTS;
        let mut slots = slots.borrow_mut();
        match &slots[slot] {
            Some((seen, family)) if **seen == *user_agent => family,
            _ => {
                let family = user_agent_family(user_agent);
                slots[slot] = Some((user_agent.into(), family));
                family
            }
        }
    })
}

/// A bounded classification of a user agent, for the family label.
pub(crate) fn user_agent_family(user_agent: &str) -> &'static str {
    if user_agent.is_empty() {
        return "none";
    }
    // A crawler that embeds a browser UA still says "bot" somewhere.
    if looks_like_bot(user_agent) {
        return "bot";
    }
    if let Some(claim) = browser_claim(user_agent) {
        return claim.family;
    }
    let product = user_agent.split(['/', ' ']).next().unwrap_or("").to_ascii_lowercase();
    const LIBRARIES: &[&str] = &[
        "curl",
        "wget",
        "python-requests",
        "python-urllib",
        "python-httpx",
        "aiohttp",
        "go-http-client",
        "java",
        "apache-httpclient",
        "okhttp",
        "node-fetch",
        "axios",
        "undici",
        "libwww-perl",
        "ruby",
        "faraday",
        "guzzlehttp",
        "dart",
        "scrapy",
    ];
    if LIBRARIES.contains(&product.as_str()) {
        return "library";
    }
    "other"
}

fn looks_like_bot(user_agent: &str) -> bool {
    // Built once: this runs for every verdict.
    static BOT_WORDS: LazyLock<AhoCorasick> = LazyLock::new(|| {
        // A DFA: a few instructions per byte, where the default (an NFA) costs several times that.
        AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .kind(Some(AhoCorasickKind::DFA))
            .build(["bot", "crawler", "spider", "headless"])
            .expect("four short patterns compile")
    });
    BOT_WORDS.is_match(user_agent)
}

/// User agents of the browsers people use, current versions: what no crawler list token and no
/// robots.txt group may match.
/// They carry every engine, platform and browser token (Mozilla, AppleWebKit, KHTML, like,
/// Gecko, Chrome, Safari, Firefox, Edg, OPR, Version, Mobile, Windows, Linux, Android, ...).
pub(crate) const PEOPLES_BROWSERS: &[&str] = &[
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 OPR/115.0.0.0",
    "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14.7; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (iPad; CPU OS 17_7 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36",
    "Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S911B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/27.0 Chrome/125.0.0.0 Mobile Safari/537.36",
    "Mozilla/5.0 (Android 14; Mobile; rv:133.0) Gecko/133.0 Firefox/133.0",
    "Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:128.0) Gecko/20100101 Firefox/128.0",
];

/// Whether `token` (any case) is a whole token of some browser's User-Agent (`Mozilla`,
/// `AppleWebKit`, `Chrome`, `like`, ...): naming it names every person, not a crawler.
pub(crate) fn is_browser_token(token: &str) -> bool {
    PEOPLES_BROWSERS.iter().any(|browser| {
        browser
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .any(|part| part.eq_ignore_ascii_case(token))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn browser_claims_carry_family_and_version() {
        let chrome = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36";
        assert_eq!(browser_claim(chrome), Some(BrowserClaim { family: "chrome", major: 120, minor: 0 }));
        let edge = "Mozilla/5.0 (Windows NT 10.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 Edg/120.0.2210.91";
        assert_eq!(browser_claim(edge).unwrap().family, "edge");
        let firefox = "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0";
        assert_eq!(browser_claim(firefox), Some(BrowserClaim { family: "firefox", major: 121, minor: 0 }));
        let safari = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.4 Safari/605.1.15";
        assert_eq!(browser_claim(safari), Some(BrowserClaim { family: "safari", major: 16, minor: 4 }));
        assert_eq!(browser_claim("curl/8.5.0"), None);
        let ios_chrome = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/119.0.6045.169 Mobile/15E148 Safari/604.1";
        assert_eq!(browser_claim(ios_chrome), Some(BrowserClaim { family: "chrome", major: 119, minor: 0 }));
        // Safari without a Version/ claims no version; a marker inside a longer product still counts.
        assert_eq!(browser_claim("Mozilla/5.0 (Macintosh) AppleWebKit/605.1.15 Safari/605.1.15"), None);
        assert_eq!(
            browser_claim("Mozilla/5.0 HeadlessChrome/120.1").map(|c| (c.family, c.minor)),
            Some(("chrome", 1))
        );
    }

    #[test]
    fn families_are_a_fixed_set() {
        let chrome = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36";
        assert_eq!(user_agent_family(chrome), "chrome");
        assert_eq!(user_agent_family("Mozilla/5.0 (compatible; Googlebot/2.1)"), "bot");
        assert_eq!(
            user_agent_family(
                "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2) Chrome/119.0"
            ),
            "bot"
        );
        assert_eq!(user_agent_family("python-requests/2.31.0"), "library");
        assert_eq!(user_agent_family("curl/8.5.0"), "library");
        assert_eq!(user_agent_family(""), "none");
        assert_eq!(user_agent_family("SomethingElse/1.0"), "other");
    }

    #[test]
    fn remembered_families_are_the_families() {
        // More user agents than slots, each asked twice, so that entries are replaced.
        let agents: Vec<String> = (0..600)
            .map(|i| match i % 4 {
                0 => format!("Mozilla/5.0 (X11) AppleWebKit/537.36 Chrome/{i}.0 Safari/537.36"),
                1 => format!("Crawler{i}/1.0 (+https://example.org/bot)"),
                2 => format!("curl/{i}.0"),
                _ => format!("Thing{i}/1.0"),
            })
            .collect();
        for agent in agents.iter().chain(&agents).chain(std::iter::once(&"x".repeat(600))) {
            assert_eq!(remembered_family(agent), user_agent_family(agent), "{agent}");
        }
    }
}
