//! The snippets a site adds to lead rule-breaking crawlers into the trap (`quagmire snippets`): a
//! hidden link for its pages and the robots.txt lines that keep polite crawlers out, written for
//! this deployment. Like the trap pages' look, their markup is drawn from variants keyed by the
//! secret, so no two deployments' hidden links read alike and a crawler cannot skip them all by
//! one pattern. They point under the redirect prefix (`verdict { redirect-prefix }`), which the
//! proxy routes to the trap without a verdict.

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

use crate::numbers::below;
use crate::trap_url::TrapUrls;

/// A site's snippets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snippets {
    /// The hidden link, for the site's page template.
    pub hidden_link: String,
    /// Lines for the site's robots.txt.
    pub robots: String,
}

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
    /// the path the proxy sends to the trap.
    pub fn new(secret: &[u8], urls: &TrapUrls, prefix: &str) -> Snippets {
        let seed = blake3::derive_key("quagmire 2026-12 snippets", secret);
        let mut rng = Pcg64Mcg::from_seed(seed[..16].try_into().expect("16 bytes"));
        let prefix = prefix.trim_end_matches('/');
        let sections = urls.sections();
        let section = sections[below(&mut rng, sections.len())];
        let words = urls.words();
        let word = &words[below(&mut rng, words.len())];
        let target = format!("{prefix}/{section}/{word}/");
        let label = capitalised(section);
        let hiding = HIDING[below(&mut rng, HIDING.len())];
        let class =
            format!("{}-{}", words[below(&mut rng, words.len())], words[below(&mut rng, words.len())]);
        let hidden_link = match below(&mut rng, 4) {
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
                "<p hidden aria-hidden=\"true\"><a href=\"{target}\" rel=\"nofollow\" tabindex=\"-1\" class=\"{class}\">{label}</a></p>"
            ),
        };
        let robots = if below(&mut rng, 2) == 0 {
            format!("User-agent: *\nDisallow: {prefix}/\n")
        } else {
            format!("User-agent: *\nDisallow: {prefix}\n")
        };
        Snippets { hidden_link, robots }
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
        Snippets::new(secret.as_bytes(), &TrapUrls::new(secret.as_bytes()), "/trap")
    }

    #[test]
    fn snippets_are_the_deployments_own_and_stable() {
        assert_eq!(snippets("one"), snippets("one"));
        let links: std::collections::HashSet<String> =
            (0..20).map(|i| snippets(&format!("s{i}")).hidden_link).collect();
        assert_eq!(links.len(), 20);
    }

    #[test]
    fn the_hidden_link_leads_under_the_prefix_that_robots_txt_disallows() {
        for i in 0..50 {
            let snippets = Snippets::new(b"x", &TrapUrls::new(format!("s{i}").as_bytes()), "/woods/");
            let href = snippets.hidden_link.split("href=\"").nth(1).unwrap().split('"').next().unwrap();
            assert!(href.starts_with("/woods/") && href.ends_with('/'), "{href}");
            assert!(snippets.robots.starts_with("User-agent: *\nDisallow: /woods"), "{}", snippets.robots);
            assert!(
                snippets.hidden_link.contains("tabindex=\"-1\"") && snippets.hidden_link.contains("nofollow")
            );
        }
    }
}
