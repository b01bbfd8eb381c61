//! AI crawlers judged by kind: each kind by the site preference that speaks for it, the site's
//! robots.txt over its kind, impostors and scrapers trapped whatever the site says. Real tokens
//! from lists/ai-crawlers.txt, from their operators' published ranges where they have them.

use super::*;
use crate::facts::claims::RobotsCheck::{Allowed, Disallowed};
use crate::vocabulary::{AiKind, Preferences};

const GPTBOT: &str =
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)";
/// From GPTBot's published ranges (lists/ai-crawler-ranges.txt).
const GPTBOT_ADDRESS: &str = "132.196.86.10";
const CHATGPT_USER: &str = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; ChatGPT-User/1.0; +https://openai.com/bot";
/// In ChatGPT-User's published 104.208.184.192/28.
const CHATGPT_USER_ADDRESS: &str = "104.208.184.200";
const OAI_SEARCHBOT: &str = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; OAI-SearchBot/1.0; +https://openai.com/searchbot";
const OAI_SEARCHBOT_ADDRESS: &str = "104.210.140.130";
const CLAUDE_USER: &str = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Claude-User/1.0; +Claude-User@anthropic.com)";
const CLAUDEBOT: &str =
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; +claudebot@anthropic.com)";
const CHATGPT_AGENT: &str = "Mozilla/5.0 (compatible; ChatGPT Agent/1.0; +https://openai.com/bot)";
const CLAUDE_CODE: &str = "claude-code/1.0.60 (external, cli)";
const BYTESPIDER: &str = "Mozilla/5.0 (Linux; Android 5.0) AppleWebKit/537.36 (KHTML, like Gecko) Mobile Safari/537.36 (compatible; Bytespider; spider-feedback@bytedance.com)";
const DIFFBOT: &str = "Mozilla/5.0 (X11; U; Linux i686; en-US; rv:1.9.1.2) Gecko/20090729 Firefox/3.5.2 (.NET CLR 3.5.30729; Diffbot/0.1; +http://www.diffbot.com)";
const CRAWL4AI: &str = "Mozilla/5.0 (compatible; Crawl4AI/0.4; +https://crawl4ai.com)";

fn with_preferences(preferences: Preferences) -> Rules {
    Rules::load(RulesConfig { preferences, ..rules_config() }).unwrap()
}

/// `search=yes, ai-input=yes, ai-train=no`: the issue's site.
fn search_and_answers_but_no_training() -> Rules {
    with_preferences(Preferences { search: Some(true), ai_input: Some(true), ai_train: Some(false) })
}

fn yes_to_everything() -> Rules {
    with_preferences(Preferences { search: Some(true), ai_input: Some(true), ai_train: Some(true) })
}

fn from(ip: &'static str, user_agent: &'static str) -> Request {
    Request { ip, ..Request::agent(user_agent) }
}

/// The decision, with the kind the verdict finds for the request.
fn judged(rules: &Rules, request: Request) -> Decision {
    let mut facts = request.facts();
    facts.ai_kind = rules.compiled().ai_kind(facts.user_agent());
    rules.evaluate_traced(&facts).0
}

#[test]
fn the_list_gives_each_real_token_its_kind() {
    let rules = default_rules();
    let kind = |ua| rules.compiled().ai_kind(ua).map(AiKind::as_str);
    assert_eq!(kind(GPTBOT), Some("training"));
    assert_eq!(kind(CLAUDEBOT), Some("training"));
    assert_eq!(kind(BYTESPIDER), Some("training"));
    assert_eq!(kind(OAI_SEARCHBOT), Some("ai-search"));
    assert_eq!(kind(CHATGPT_USER), Some("assistant"));
    assert_eq!(kind(CLAUDE_USER), Some("assistant"));
    assert_eq!(kind(CHATGPT_AGENT), Some("agent"));
    assert_eq!(kind(CLAUDE_CODE), Some("agent"));
    assert_eq!(kind(DIFFBOT), Some("scraper"));
    assert_eq!(kind(CRAWL4AI), Some("scraper"));
    // The hand-kept section: tools anyone can run.
    assert_eq!(
        kind("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 HeadlessChrome/120.0.0.0"),
        Some("scraper")
    );
    assert_eq!(kind(super::CHROME), None);
}

#[test]
fn a_site_that_says_yes_to_search_and_answers_and_no_to_training_gets_what_it_said() {
    let rules = search_and_answers_but_no_training();
    // The issue's case: one person's question about this page, from ChatGPT-User's ranges.
    let answer = judged(&rules, from(CHATGPT_USER_ADDRESS, CHATGPT_USER));
    assert_eq!((answer.verdict, &*answer.rule), (Verdict::Allow, "ai-preferences"));
    assert_eq!(answer.reason, "assistant ChatGPT-User (the site says ai-input=yes)");
    // An assistant without published ranges, and agents.
    check(&rules, Request::agent(CLAUDE_USER), Verdict::Allow, "ai-preferences");
    check(&rules, Request::agent(CHATGPT_AGENT), Verdict::Allow, "ai-preferences");
    check(&rules, Request::agent(CLAUDE_CODE), Verdict::Allow, "ai-preferences");
    // AI search, from its ranges.
    let search = judged(&rules, from(OAI_SEARCHBOT_ADDRESS, OAI_SEARCHBOT));
    assert_eq!((search.verdict, &*search.rule), (Verdict::Allow, "ai-preferences"));
    assert_eq!(search.reason, "ai-search OAI-SearchBot (the site says search=yes)");
    // Training, even from GPTBot's own ranges: the site said no.
    let training = judged(&rules, from(GPTBOT_ADDRESS, GPTBOT));
    assert_eq!((training.verdict, &*training.rule), (Verdict::Trap, "ai-crawlers"));
    assert_eq!(training.reason, "user agent GPTBot (training; the site says ai-train=no)");
    check(&rules, Request::agent(CLAUDEBOT), Verdict::Trap, "ai-crawlers");
    check(&rules, Request::agent(BYTESPIDER), Verdict::Trap, "ai-crawlers");
}

#[test]
fn scrapers_are_trapped_whatever_the_site_says() {
    let rules = yes_to_everything();
    for scraper in [DIFFBOT, CRAWL4AI] {
        let decision = judged(&rules, Request::agent(scraper));
        assert_eq!((decision.verdict, &*decision.rule), (Verdict::Trap, "ai-crawlers"), "{scraper}");
        assert!(decision.reason.ends_with("(scraper)"), "{}", decision.reason);
    }
    // And training crawlers are let through where the site says yes to training.
    check(&rules, from(GPTBOT_ADDRESS, GPTBOT), Verdict::Allow, "ai-preferences");
    check(&rules, Request::agent(BYTESPIDER), Verdict::Allow, "ai-preferences");
}

#[test]
fn a_preference_the_site_did_not_state_keeps_every_ai_crawler_trapped() {
    let rules = default_rules();
    for (ip, ua) in [
        (GPTBOT_ADDRESS, GPTBOT),
        (CHATGPT_USER_ADDRESS, CHATGPT_USER),
        (OAI_SEARCHBOT_ADDRESS, OAI_SEARCHBOT),
        ("203.0.113.9", CHATGPT_AGENT),
        ("203.0.113.9", DIFFBOT),
    ] {
        check(&rules, from(ip, ua), Verdict::Trap, "ai-crawlers");
    }
    let decision = judged(&rules, from(CHATGPT_USER_ADDRESS, CHATGPT_USER));
    assert_eq!(decision.reason, "user agent ChatGPT-User (assistant; ai-input not stated)");
    // Saying yes to one thing says nothing of the others.
    let only_search = with_preferences(Preferences { search: Some(true), ..Preferences::default() });
    check(&only_search, from(CHATGPT_USER_ADDRESS, CHATGPT_USER), Verdict::Trap, "ai-crawlers");
    check(&only_search, from(OAI_SEARCHBOT_ADDRESS, OAI_SEARCHBOT), Verdict::Allow, "ai-preferences");
}

#[test]
fn a_claim_from_outside_the_crawlers_published_ranges_is_an_impostor_whatever_the_site_allows() {
    let rules = yes_to_everything();
    let impostor = judged(&rules, from("203.0.113.9", CHATGPT_USER));
    assert_eq!((impostor.verdict, &*impostor.rule), (Verdict::Trap, "ai-preferences"));
    assert_eq!(impostor.reason, "impostor claiming ChatGPT-User (outside its published ranges)");
    check(&rules, from("203.0.113.9", GPTBOT), Verdict::Trap, "ai-preferences");
    check(&rules, from("203.0.113.9", OAI_SEARCHBOT), Verdict::Trap, "ai-preferences");
}

#[test]
fn assistants_and_agents_are_allowed_at_a_readers_pace_and_no_crawler_over_the_quota() {
    let rules = search_and_answers_but_no_training();
    // Thirty pages a minute is a person's questions; a hundred is a crawl under an assistant's name.
    let reading = Request { request_rate: 40.0, ..from(CHATGPT_USER_ADDRESS, CHATGPT_USER) };
    check(&rules, reading, Verdict::Allow, "ai-preferences");
    let crawling = Request { request_rate: 100.0, ..from(CHATGPT_USER_ADDRESS, CHATGPT_USER) };
    let decision = judged(&rules, crawling);
    assert_eq!((decision.verdict, &*decision.rule), (Verdict::Trap, "ai-crawlers"));
    assert_eq!(decision.reason, "user agent ChatGPT-User (assistant, over a reader's pace)");
    // A page's image at that rate is not a page.
    let image = Request { uri: "/logo.png", request_rate: 100.0, ..from(CHATGPT_USER_ADDRESS, CHATGPT_USER) };
    check(&rules, image, Verdict::Allow, "ai-preferences");
    // A search crawler crawls at the quota's pace, and over it gets nothing.
    let crawl = Request { request_rate: 100.0, ..from(OAI_SEARCHBOT_ADDRESS, OAI_SEARCHBOT) };
    check(&rules, crawl, Verdict::Allow, "ai-preferences");
    let over = Request { rate_limited: true, ..from(OAI_SEARCHBOT_ADDRESS, OAI_SEARCHBOT) };
    check(&rules, over, Verdict::Trap, "ai-crawlers");
}

#[test]
fn the_sites_robots_txt_group_for_a_crawler_wins_over_its_kind() {
    // The site says yes to answers, but its robots.txt keeps ChatGPT-User off this path.
    let rules = search_and_answers_but_no_training();
    let kept_out = Request {
        robots: robots(Disallowed, Some("ChatGPT-User")),
        ..from(CHATGPT_USER_ADDRESS, CHATGPT_USER)
    };
    check(&rules, kept_out, Verdict::Trap, "ignored-robots-txt");
    // And `*` disallowing the path keeps every crawler out of it, AI assistants included.
    let everyone_out =
        Request { robots: robots(Disallowed, Some("*")), ..from(CHATGPT_USER_ADDRESS, CHATGPT_USER) };
    check(&rules, everyone_out, Verdict::Trap, "ignored-robots-txt");
    // The site says no to training, but its robots.txt names GPTBot and lets it in.
    let let_in = Request { robots: robots(Allowed, Some("GPTBot")), ..from(GPTBOT_ADDRESS, GPTBOT) };
    check(&rules, let_in, Verdict::Allow, "robots-txt-allows");
    // Without a group of its own, the kind decides.
    let no_group = Request { robots: robots(Allowed, Some("*")), ..from(GPTBOT_ADDRESS, GPTBOT) };
    check(&rules, no_group, Verdict::Trap, "ai-crawlers");
}

#[test]
fn rules_see_the_kind_and_the_preferences() {
    let script = r#"return { { name = "show", check = function(r)
        return "allow", string.format("%s %s %s %s", tostring(r.ai_kind), tostring(preferences.search),
            tostring(preferences.ai_input), tostring(preferences.ai_train))
    end } }"#;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("show.lua");
    std::fs::write(&path, script).unwrap();
    let rules = Rules::load(RulesConfig {
        script: Some(path.clone()),
        preferences: Preferences { search: Some(true), ai_input: Some(false), ai_train: None },
        ..rules_config()
    })
    .unwrap();
    assert_eq!(judged(&rules, Request::agent(CLAUDE_USER)).reason, "assistant true false nil");
    assert_eq!(judged(&rules, Request::agent(super::CHROME)).reason, "nil true false nil");
    // The preferences are read-only, like every table the rules can reach.
    let script = r#"return { { name = "write", check = function(r) preferences.ai_train = true end } }"#;
    std::fs::write(&path, script).unwrap();
    let rules = Rules::load(RulesConfig { script: Some(path), ..rules_config() }).unwrap();
    let decision = judged(&rules, Request::agent(CLAUDE_USER));
    assert_eq!(decision.failures.len(), 1, "{:?}", decision.failures);
}

#[test]
fn a_list_section_that_is_no_kind_is_an_error_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ai-crawlers.txt"), "# kinds\n[training]\nGPTBot\n[trainig]\nCCBot\n")
        .unwrap();
    let error = Rules::load(RulesConfig { lists: Some(dir.path().to_path_buf()), ..rules_config() })
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("ai-crawlers.txt, line 4") && error.contains("`[trainig]` is no kind"), "{error}");
}
