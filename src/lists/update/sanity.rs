//! What a published list cannot be, whatever its source says: the checks that stop one bad
//! upstream change from switching protection off (a crawler "range" of `0.0.0.0/0` lets every
//! impostor through) or locking people out (a browser's own token such as `Mozilla` in a crawler
//! list traps every browser). A list that fails them is refused whole and the last good file stays,
//! with the reason in the update's report; nothing here guesses which entries to drop.

use ipnet::IpNet;

use super::formats::Kind;
use crate::lists::TokenList;

/// The widest prefixes a crawler's published range may be (the same floor holds CrowdSec's
/// decisions: see `crowdsec`).
pub use crate::support::prefix_map::{MIN_PREFIX_V4, MIN_PREFIX_V6};
/// A label may grow to this many times its current entries (plus [`GROWTH_SLACK`]) in one
/// update; a jump past it is more likely a broken or hostile source than new crawlers.
pub const MAX_GROWTH: usize = 4;
/// Entries a label may gain whatever its current size, so that small lists can grow.
pub const GROWTH_SLACK: usize = 256;
/// Most entries one list file may get from its sources, by kind. User-agent tokens compile into
/// an automaton whose size grows with them (see [`crate::lists::MAX_TOKENS`]).
pub const MAX_NETWORKS: usize = 100_000;
/// See [`MAX_NETWORKS`].
pub const MAX_ASNS: usize = 100_000;
/// See [`MAX_NETWORKS`]; a token list file is bounded in bytes too.
pub const MAX_TOKENS: usize = crate::lists::MAX_TOKENS;
/// The shortest crawler token: shorter ones are whole words of ordinary user agents.
pub const MIN_TOKEN_LEN: usize = 3;

/// User agents of the browsers people use: no token of a crawler list may match any of them.
use crate::support::user_agent::PEOPLES_BROWSERS as BROWSERS;

/// Why `found` entries for a label that has `current` cannot be right, if they cannot.
pub fn growth(found: usize, current: usize) -> Option<String> {
    let most = current.saturating_mul(MAX_GROWTH).saturating_add(GROWTH_SLACK);
    (current > 0 && found > most).then(|| {
        format!(
            "{found} entries, more than {MAX_GROWTH}x the {current} in the current list (+{GROWTH_SLACK})"
        )
    })
}

/// Why a list of `kind` with `total` entries from its sources cannot be right, if it cannot.
pub fn count(kind: Kind, total: usize) -> Option<String> {
    let most = match kind {
        Kind::Networks => MAX_NETWORKS,
        Kind::Tokens => MAX_TOKENS,
        Kind::Asns => MAX_ASNS,
    };
    (total > most).then(|| format!("{total} entries, more than the {most} a list of this kind may have"))
}

/// The first network of a crawler's published ranges that is too wide to be one, and why.
pub fn networks<'a>(entries: impl Iterator<Item = &'a str>) -> Option<String> {
    for entry in entries {
        let Ok(network) = entry.parse::<IpNet>() else { continue };
        // As the list will store and match it: `::ffff:0:0/96` is all of IPv4.
        let network = crate::lists::canonical(network);
        let (least, family) = match network {
            IpNet::V4(_) => (MIN_PREFIX_V4, "IPv4"),
            IpNet::V6(_) => (MIN_PREFIX_V6, "IPv6"),
        };
        if network.prefix_len() < least {
            return Some(format!(
                "{network} is wider than any crawler's range ({family} prefixes must be /{least} or longer)"
            ));
        }
    }
    None
}

/// The first token of a crawler list that would match people's browsers or is too short to
/// name a crawler, and why.
pub fn tokens<'a>(entries: impl Iterator<Item = &'a str> + Clone) -> Option<String> {
    if let Some(short) = entries.clone().find(|token| token.len() < MIN_TOKEN_LEN) {
        return Some(format!(
            "`{short}` is too short to name a crawler (at least {MIN_TOKEN_LEN} characters)"
        ));
    }
    let list = match TokenList::new(entries.map(str::to_string).collect()) {
        Ok(list) => list,
        Err(error) => return Some(format!("the tokens do not compile: {error}")),
    };
    BROWSERS.iter().find_map(|browser| {
        list.find(browser).map(|token| format!("`{token}` matches people's browsers ({browser})"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_wider_than_a_crawler_is_refused_in_either_family() {
        assert!(networks(["66.249.64.0/27", "0.0.0.0/0"].into_iter()).unwrap().contains("0.0.0.0/0"));
        assert!(networks(["10.0.0.0/8"].into_iter()).is_some());
        assert!(networks(["::/0"].into_iter()).is_some());
        assert!(networks(["2001:db8::/16"].into_iter()).is_some());
        // An IPv4-mapped range is judged as the IPv4 range it matches.
        assert!(networks(["::ffff:0:0/96"].into_iter()).unwrap().contains("0.0.0.0/0"));
        assert!(networks(["::ffff:10.0.0.0/104"].into_iter()).is_some());
        assert_eq!(networks(["66.249.64.0/27", "2001:4860:4801:10::/64", "8.8.0.0/12"].into_iter()), None);
    }

    #[test]
    fn a_browser_token_in_a_crawler_list_is_refused() {
        for token in
            ["Mozilla", "chrome", "Safari", "Firefox", "AppleWebKit", "Gecko", "KHTML", "like", "Edg"]
        {
            let reason = tokens(["GPTBot", token, "ClaudeBot"].into_iter())
                .unwrap_or_else(|| panic!("{token} was not refused"));
            assert!(reason.contains("matches people's browsers"), "{reason}");
        }
        assert!(tokens(["GPTBot", "Go"].into_iter()).unwrap().contains("too short"));
        // Crawler tokens that contain a browser's name but are not it stay.
        assert_eq!(
            tokens(["GPTBot", "HeadlessChrome", "ChatGPT Agent", "Google-Extended"].into_iter()),
            None
        );
    }

    #[test]
    fn growth_past_the_ratio_and_counts_past_the_cap_are_refused() {
        assert_eq!(growth(500, 0), None, "a new label has no current size to compare");
        assert_eq!(growth(4 * 100 + 256, 100), None);
        assert!(growth(4 * 100 + 257, 100).is_some());
        assert_eq!(count(Kind::Tokens, MAX_TOKENS), None);
        assert!(count(Kind::Tokens, MAX_TOKENS + 1).is_some());
        assert!(count(Kind::Networks, MAX_NETWORKS + 1).is_some());
    }
}
