//! The snippets a site adds to lead rule-breaking crawlers into the trap (`quagmire snippets`): a
//! hidden link for its pages and the robots.txt lines that keep polite crawlers out, written for
//! this deployment. Like the trap pages' look, their markup is drawn from variants keyed by the
//! secret, so no two deployments' hidden links read alike and a crawler cannot skip them all by
//! one pattern. They point under the redirect prefix (`verdict { redirect-prefix }`), which the
//! proxy routes to the trap without a verdict.

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

use crate::support::numbers::below;
use crate::trap::urls::TrapUrls;
use crate::vocabulary::Preferences;

/// A site's snippets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snippets {
    /// Hidden links for the site's page template, each for a place in the page.
    pub links: Vec<Placement>,
    /// Lines for the site's robots.txt.
    pub robots: String,
}

/// The robots.txt lines that state `preferences` in both current vocabularies, for a
/// `User-agent: *` group; empty when none is set.
fn robots_lines(preferences: &Preferences) -> String {
    let Preferences { search, ai_input, ai_train } = *preferences;
    let signals: Vec<String> = [("search", search), ("ai-input", ai_input), ("ai-train", ai_train)]
        .into_iter()
        .filter_map(|(name, value)| value.map(|value| format!("{name}={}", if value { "yes" } else { "no" })))
        .collect();
    if signals.is_empty() {
        return String::new();
    }
    let mut lines = String::from(
        "# Content Signals (Cloudflare's Content Signals Policy, 2025-09-24): search, ai-input, ai-train.\n",
    );
    lines.push_str(&format!("Content-Signal: {}\n", signals.join(", ")));
    // aipref has no category for AI input; its values are y and n.
    let usage: Vec<String> = [("train-ai", ai_train), ("search", search)]
        .into_iter()
        .filter_map(|(name, value)| value.map(|value| format!("{name}={}", if value { "y" } else { "n" })))
        .collect();
    if !usage.is_empty() {
        lines.push_str(
            "# IETF AI Preferences (drafts aipref-attach-05, aipref-vocab-07; no category for AI input).\n",
        );
        lines.push_str(&format!("Content-Usage: {}\n", usage.join(", ")));
    }
    lines
}

/// A hidden link and where in a page it goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Where in the page.
    pub place: &'static str,
    /// Why there: which crawlers meet it, and what it costs.
    pub why: &'static str,
    /// The markup.
    pub html: String,
}

/// Where the links go, first to last in the page. A crawler reading a page queues its links in
/// document order, so a link at the top of the body is among the first it follows (breadth
/// first); one at the very end waits behind every real link of the page.
const PLACES: &[(&str, &str)] = &[
    (
        "right after <body>",
        "the first link of every page, so a breadth-first crawler follows it before any real one",
    ),
    (
        "inside your navigation or header menu",
        "among the links crawlers that favour navigation take first, hidden another way than the first",
    ),
    ("just before </body>", "a last one for crawlers that skip a page's top and navigation as boilerplate"),
];

/// Ways of keeping a link from people (and screen readers, and keyboard focus) while crawlers
/// still see it.
const HIDING: &[&str] = &[
    "position:absolute;left:-9999px;width:1px;height:1px;overflow:hidden",
    "position:absolute;width:1px;height:1px;margin:-1px;overflow:hidden;clip:rect(0 0 0 0)",
    "display:none",
    "position:fixed;top:-100px;opacity:0;pointer-events:none",
    "font-size:0;line-height:0;overflow:hidden;height:0",
    "visibility:hidden;position:absolute;width:0;height:0",
];

impl Snippets {
    /// This deployment's snippets: `urls` gives its sections, `secret` the variants, `prefix`
    /// the path the proxy sends to the trap. The links differ from each other in target, markup
    /// and hiding, so one pattern cannot skip them all.
    pub fn new(secret: &[u8], urls: &TrapUrls, prefix: &str, preferences: &Preferences) -> Snippets {
        let seed = blake3::derive_key("quagmire 2026-12 snippets", secret);
        let mut rng = Pcg64Mcg::from_seed(seed[..16].try_into().expect("16 bytes"));
        let prefix = prefix.trim_end_matches('/');
        let mut hidings: Vec<&str> = HIDING.to_vec();
        let mut markups: Vec<usize> = (0..4).collect();
        let links = PLACES
            .iter()
            .map(|&(place, why)| {
                let hiding = hidings.swap_remove(below(&mut rng, hidings.len()));
                let markup = markups.swap_remove(below(&mut rng, markups.len()));
                Placement { place, why, html: hidden_link(&mut rng, urls, prefix, hiding, markup) }
            })
            .collect();
        // With its slash: `Disallow: /trap` would also keep crawlers off a real `/trapeze`.
        let robots = format!("User-agent: *\n{}Disallow: {prefix}/\n", robots_lines(preferences));
        Snippets { links, robots }
    }
}

/// One hidden link under `prefix`, in markup variant `markup` (0 to 3), hidden by `hiding`.
fn hidden_link(rng: &mut Pcg64Mcg, urls: &TrapUrls, prefix: &str, hiding: &str, markup: usize) -> String {
    let sections = urls.sections();
    let section = sections[below(rng, sections.len())];
    let words = urls.words();
    let word = &words[below(rng, words.len())];
    let target = format!("{prefix}/{section}/{word}/");
    let label = capitalised(section);
    let class = format!("{}-{}", words[below(rng, words.len())], words[below(rng, words.len())]);
    match markup {
        0 => format!(
            "<a href=\"{target}\" rel=\"nofollow\" aria-hidden=\"true\" tabindex=\"-1\" style=\"{hiding}\">{label}</a>"
        ),
        1 => format!(
            "<div class=\"{class}\" aria-hidden=\"true\" style=\"{hiding}\"><a href=\"{target}\" tabindex=\"-1\" rel=\"nofollow\">{label}</a></div>"
        ),
        2 => format!(
            "<span style=\"{hiding}\" aria-hidden=\"true\"><a tabindex=\"-1\" rel=\"nofollow\" href=\"{target}\">{label}</a></span>"
        ),
        _ => format!(
            "<p hidden aria-hidden=\"true\" style=\"{hiding}\"><a href=\"{target}\" rel=\"nofollow\" tabindex=\"-1\" class=\"{class}\">{label}</a></p>"
        ),
    }
}

fn capitalised(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map_or_else(String::new, |first| first.to_uppercase().chain(chars).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snippets(secret: &str) -> Snippets {
        Snippets::new(secret.as_bytes(), &TrapUrls::new(secret.as_bytes()), "/trap", &Preferences::default())
    }

    fn href(link: &Placement) -> &str {
        link.html.split("href=\"").nth(1).unwrap().split('"').next().unwrap()
    }

    #[test]
    fn snippets_are_the_deployments_own_and_stable() {
        assert_eq!(snippets("one"), snippets("one"));
        let links: std::collections::HashSet<String> =
            (0..20).map(|i| snippets(&format!("s{i}")).links[0].html.clone()).collect();
        assert_eq!(links.len(), 20);
    }

    #[test]
    fn every_link_leads_under_the_prefix_that_robots_txt_disallows() {
        for i in 0..50 {
            let snippets = Snippets::new(
                b"x",
                &TrapUrls::new(format!("s{i}").as_bytes()),
                "/woods/",
                &Preferences::default(),
            );
            assert!(snippets.robots.starts_with("User-agent: *\nDisallow: /woods/\n"), "{}", snippets.robots);
            for link in &snippets.links {
                assert!(href(link).starts_with("/woods/") && href(link).ends_with('/'), "{}", link.html);
                assert!(link.html.contains("tabindex=\"-1\"") && link.html.contains("nofollow"));
                assert!(link.html.contains("aria-hidden=\"true\""), "{}", link.html);
            }
        }
    }

    #[test]
    fn a_page_gets_links_at_its_top_in_its_navigation_and_at_its_end_each_hidden_its_own_way() {
        for i in 0..50 {
            let snippets = snippets(&format!("s{i}"));
            let places: Vec<&str> = snippets.links.iter().map(|link| link.place).collect();
            assert_eq!(
                places,
                ["right after <body>", "inside your navigation or header menu", "just before </body>"]
            );
            let style = |link: &Placement| {
                HIDING.iter().find(|hiding| link.html.contains(*hiding)).copied().expect("a known hiding")
            };
            let styles: std::collections::HashSet<&str> = snippets.links.iter().map(style).collect();
            assert_eq!(styles.len(), 3, "three ways of hiding: {:?}", snippets.links);
            let markups: std::collections::HashSet<&str> =
                snippets.links.iter().map(|link| &link.html[..link.html.find(' ').unwrap()]).collect();
            assert_eq!(markups.len(), 3, "three kinds of markup: {:?}", snippets.links);
        }
    }

    #[test]
    fn the_sites_preferences_are_stated_in_both_vocabularies_inside_the_star_group() {
        let preferences = Preferences { search: Some(true), ai_input: Some(false), ai_train: Some(false) };
        let robots = Snippets::new(b"x", &TrapUrls::new(b"x"), "/trap", &preferences).robots;
        let lines: Vec<&str> = robots.lines().filter(|line| !line.starts_with('#')).collect();
        assert_eq!(
            lines[..3],
            [
                "User-agent: *",
                "Content-Signal: search=yes, ai-input=no, ai-train=no",
                "Content-Usage: train-ai=n, search=y"
            ]
        );
        assert!(lines[3].starts_with("Disallow: /trap"), "{robots}");
        // What is not set is not stated; without any, no preference lines at all.
        let only_training = Preferences { ai_train: Some(true), ..Preferences::default() };
        let robots = Snippets::new(b"x", &TrapUrls::new(b"x"), "/trap", &only_training).robots;
        assert!(
            robots.contains("Content-Signal: ai-train=yes\n")
                && robots.contains("Content-Usage: train-ai=y\n")
        );
        let none = Snippets::new(b"x", &TrapUrls::new(b"x"), "/trap", &Preferences::default()).robots;
        assert!(!none.contains("Content-"), "{none}");
        // The lines are robots.txt a crawler reads: the trap stays disallowed for everyone.
        let robots = crate::verify::robots::RobotsTxt::parse(
            "snippet",
            &Snippets::new(b"x", &TrapUrls::new(b"x"), "/trap", &preferences).robots,
        );
        assert_eq!(
            robots.answer("GPTBot/1.0", "/trap/x/").check,
            crate::verify::robots::RobotsCheck::Disallowed
        );
    }
}
