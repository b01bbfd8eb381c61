//! The source formats and the list files written from them, without a network.

use super::file::{Current, FetchedSource, KEPT_MARKER, render, rfc3339};
use super::*;
use crate::lists::List;
use crate::vocabulary::AiKind;

fn source(list: &str, label: &str, format: Format) -> Source {
    Source {
        list: list.into(),
        label: label.into(),
        format,
        url: format!("https://example.org/{label}.json"),
    }
}

fn entries(format: Format, body: &str) -> Vec<String> {
    format.parse(body.as_bytes()).unwrap().entries
}

fn error(format: Format, body: &str) -> String {
    format.parse(body.as_bytes()).unwrap_err()
}

#[test]
fn prefixes_json_reads_both_families_and_the_creation_time() {
    let body = r#"{"creationTime": "2026-12-01T00:00:00.000000",
        "prefixes": [{"ipv4Prefix": "66.249.64.0/27"}, {"ipv6Prefix": "2001:4860:4801:10::/64"},
                     {"ipv4Prefix": "192.0.2.7", "service": "ignored"}]}"#;
    let parsed = Format::PrefixesJson.parse(body.as_bytes()).unwrap();
    assert_eq!(parsed.entries, ["66.249.64.0/27", "2001:4860:4801:10::/64", "192.0.2.7/32"]);
    assert_eq!(parsed.published.as_deref(), Some("2026-12-01T00:00:00.000000"));
}

#[test]
fn broken_sources_say_what_and_where() {
    let truncated = r#"{"creationTime": "x", "prefixes": [{"ipv4Prefix": "66.249.64.0/27"}, {"ipv4Pr"#;
    let message = error(Format::PrefixesJson, truncated);
    assert!(
        message.starts_with("invalid JSON: EOF while parsing") && message.contains("line 1"),
        "{message}"
    );
    assert_eq!(error(Format::PrefixesJson, r#"{"prefixes": []}"#), "no entries");
    assert_eq!(
        error(
            Format::PrefixesJson,
            r#"{"prefixes": [{"ipv4Prefix": "1.2.3.0/24"}, {"ipv4Prefix": "1.2.3/24"}]}"#
        ),
        "prefix 1: `1.2.3/24` is not a network"
    );
    assert_eq!(
        error(Format::PrefixesJson, r#"{"prefixes": [{"ipv4Prefix": "1.2.3.0/24", "ipv6Prefix": "::/0"}]}"#),
        "prefix 0 has not exactly one of ipv4Prefix and ipv6Prefix"
    );
    assert!(error(Format::PrefixesJson, "<html>Service Unavailable</html>").starts_with("invalid JSON"));
    assert_eq!(error(Format::CidrList, "# none yet\n\n"), "no entries");
    assert_eq!(
        error(Format::CidrList, "10.0.0.0/8\n10.0.0.0/33\n"),
        "line 2: `10.0.0.0/33` is not a network"
    );
    assert_eq!(error(Format::AsnList, "AS16509 # AMAZON-02\nASX # oops\n"), "line 2: `ASX` is not an ASN");
    assert_eq!(
        error(Format::RobotsJson, r#"{"GPTBot": {}, "bad#key": {}}"#),
        r#"key "bad#key" cannot be a list entry"#
    );
    assert!(error(Format::RobotsJson, r#"["GPTBot"]"#).starts_with("invalid JSON"));
    assert!(Format::CidrList.parse(&[0xff, 0xfe]).unwrap_err().starts_with("not UTF-8"));
}

#[test]
fn text_formats_read_comments_names_and_bare_entries() {
    assert_eq!(
        entries(Format::CidrList, "# ranges\n192.0.2.0/24\n\n 2001:db8::/32 \n"),
        ["192.0.2.0/24", "2001:db8::/32"]
    );
    // X4BNet's layout, with a second `#` inside a name (a list line would end there).
    let asns = "AS45090 # Tencent cloud computing\nAS42473 # ANEXIA-AS A-9020 # Klagenfurt, AT\n24940 Hetzner\nAS7 #\n";
    assert_eq!(
        entries(Format::AsnList, asns),
        ["45090 Tencent cloud computing", "42473 ANEXIA-AS A-9020", "24940 Hetzner", "7"]
    );
    assert_eq!(
        entries(Format::RobotsJson, r#"{"GPTBot": {"operator": "OpenAI"}, " ChatGPT Agent ": {}}"#),
        ["ChatGPT Agent", "GPTBot"]
    );
}

#[test]
fn formats_have_names_and_kinds() {
    for (name, format) in Format::ALL {
        assert_eq!(Format::named(name), Some(format));
        assert_eq!(format.name(), name);
    }
    assert_eq!(Format::named("google-json"), None);
    assert_eq!(Format::AsnList.kind(), Kind::Asns);
}

fn fetched<'a>(source: &'a Source, list: &[&str]) -> FetchedSource<'a> {
    FetchedSource {
        source,
        parsed: formats::Parsed::plain(list.iter().map(|entry| entry.to_string()).collect()),
    }
}

#[test]
fn a_network_list_gets_a_header_its_entries_and_keeps_labels_no_source_fetches() {
    let googlebot = source("search-engines", "Googlebot", Format::PrefixesJson);
    let current_text =
        "# old header\nGooglebot 66.249.64.0/27\nGooglebot 66.249.64.32/27\nYandexBot 5.255.253.0/24\n";
    let labels = HashSet::from(["Googlebot"]);
    let current = Current::read(current_text, Kind::Networks, &labels);
    assert_eq!(current.counts.get("Googlebot"), Some(&2));
    assert_eq!(current.kept, ["YandexBot 5.255.253.0/24"]);

    let new = [fetched(&googlebot, &["66.249.64.0/27", "66.249.64.0/27", "192.0.2.0/24"])];
    let rendered =
        render("search-engines.txt", Kind::Networks, &current, &new, "2026-12-04T10:00:00Z").unwrap();
    assert!(rendered.text.starts_with(
        "# search-engines.txt -- written by `quagmire lists update` at 2026-12-04T10:00:00Z.\n"
    ));
    assert!(
        rendered
            .text
            .contains("#   Googlebot <- https://example.org/Googlebot.json (prefixes-json, 3 entries)\n")
    );
    assert!(rendered.text.ends_with(&format!(
        "# Googlebot\nGooglebot 66.249.64.0/27\nGooglebot 192.0.2.0/24\n{KEPT_MARKER}\nYandexBot 5.255.253.0/24\n"
    )));
    assert_eq!(rendered.labels, [("Googlebot".to_string(), 2)]);
    assert_eq!(rendered.kept, 1);
    let List::Networks(list) = List::parse("search-engines.txt", &rendered.text).unwrap() else { panic!() };
    assert_eq!(list.find("192.0.2.9".parse().unwrap()), Some("Googlebot"));
    assert_eq!(list.find("5.255.253.1".parse().unwrap()), Some("YandexBot"));

    // Written again, the marker keeps the hand section verbatim, comments included.
    let edited = format!("{}# mine\nYandexBot 5.45.192.0/18\n", rendered.text);
    let current = Current::read(&edited, Kind::Networks, &labels);
    assert_eq!(current.counts.get("Googlebot"), Some(&2));
    assert_eq!(current.kept, ["YandexBot 5.255.253.0/24", "# mine", "YandexBot 5.45.192.0/18"]);
}

#[test]
fn a_label_that_loses_more_than_half_its_entries_keeps_the_list() {
    let googlebot = source("search-engines", "Googlebot", Format::PrefixesJson);
    let current_text: String = (0..10).map(|i| format!("Googlebot 192.0.2.{i}/32\n")).collect();
    let current = Current::read(&current_text, Kind::Networks, &HashSet::from(["Googlebot"]));
    let four = [fetched(&googlebot, &["198.51.100.1", "198.51.100.2", "198.51.100.3", "198.51.100.4"])];
    let error = render("se.txt", Kind::Networks, &current, &four, "now").unwrap_err();
    assert_eq!(error.to_string(), "Googlebot: 4 entries, fewer than half of the 10 in the current list");
    let five = [fetched(
        &googlebot,
        &["198.51.100.1", "198.51.100.2", "198.51.100.3", "198.51.100.4", "198.51.100.5"],
    )];
    assert!(render("se.txt", Kind::Networks, &current, &five, "now").is_ok());
}

#[test]
fn token_and_asn_lists_keep_their_hand_section_and_drop_its_duplicates() {
    let robots = source("ai-crawlers", "", Format::RobotsJson);
    let current_text = format!("# header\nGPTBot\nClaudeBot\n{KEPT_MARKER}\n# mine\nHeadlessChrome\n");
    let current = Current::read(&current_text, Kind::Tokens, &HashSet::from([""]));
    assert_eq!(current.counts.get(""), Some(&2));
    let new = [fetched(&robots, &["GPTBot", "ClaudeBot", "headlesschrome", "CCBot"])];
    let rendered = render("ai-crawlers.txt", Kind::Tokens, &current, &new, "now").unwrap();
    assert!(
        rendered
            .text
            .ends_with(&format!("\nGPTBot\nClaudeBot\nCCBot\n{KEPT_MARKER}\n# mine\nHeadlessChrome\n"))
    );
    assert_eq!(rendered.labels, [(String::new(), 3)]);

    let asns = source("datacenter-asns", "", Format::AsnList);
    let current =
        Current::read(&format!("{KEPT_MARKER}\n16509 Amazon (mine)\n"), Kind::Asns, &HashSet::from([""]));
    let new = [fetched(&asns, &["16509 AMAZON-02", "24940 HETZNER-AS"])];
    let rendered = render("datacenter-asns.txt", Kind::Asns, &current, &new, "now").unwrap();
    assert!(rendered.text.ends_with(&format!("\n24940 HETZNER-AS\n{KEPT_MARKER}\n16509 Amazon (mine)\n")));
    let List::Asns(list) = List::parse("datacenter-asns.txt", &rendered.text).unwrap() else { panic!() };
    assert_eq!(list.find(16509), Some("Amazon (mine)"));
}

#[test]
fn a_list_that_would_read_back_as_another_kind_is_not_written() {
    // A token list whose first entry is a number is read as ASNs, or fails to read.
    let robots = source("ai-crawlers", "", Format::RobotsJson);
    let new = [fetched(&robots, &["1234", "5678"])];
    let error = render("ai-crawlers.txt", Kind::Tokens, &Current::default(), &new, "now").unwrap_err();
    assert_eq!(error.to_string(), "the new list would read back as ASNs");
    let new = [fetched(&robots, &["1234", "GPTBot"])];
    let error = render("ai-crawlers.txt", Kind::Tokens, &Current::default(), &new, "now").unwrap_err();
    assert!(
        error.to_string().starts_with("the new list does not read back: rules list ai-crawlers.txt, line"),
        "{error}"
    );
}

#[test]
fn shipped_lists_read_as_their_sources_expect() {
    let config = crate::config::Config::embedded();
    for (file, text) in crate::lists::DEFAULT_LISTS {
        let sources: Vec<&Source> =
            config.lists.sources.iter().filter(|source| format!("{}.txt", source.list) == *file).collect();
        let Some(first) = sources.first() else { continue };
        let labels: HashSet<&str> = sources.iter().map(|source| source.label.as_str()).collect();
        let current = Current::read(text, first.format.kind(), &labels);
        let generated: usize = current.counts.values().sum();
        match *file {
            // 166 robots.json keys, three of which differ from another only by case; the hand-kept
            // section is one kind's (its `[scraper]` line is no entry).
            "ai-crawlers.txt" => assert_eq!(
                (generated, current.kept.iter().filter(|l| !l.starts_with(['#', '['])).count()),
                (163, 15)
            ),
            "datacenter-asns.txt" => {
                assert_eq!((generated, current.kept.iter().filter(|l| !l.starts_with('#')).count()), (0, 144))
            }
            "search-engines.txt" => assert_eq!((current.counts["Googlebot"], current.kept.len()), (317, 0)),
            "ai-crawler-ranges.txt" => assert_eq!((current.counts["GPTBot"], current.kept.len()), (21, 0)),
            other => panic!("no expectation for {other}"),
        }
    }
}

#[test]
fn times_are_rfc3339_utc() {
    assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
    assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    assert_eq!(rfc3339(1_796_380_245), "2026-12-04T10:30:45Z");
}

#[test]
fn robots_json_entries_are_written_in_sections_by_kind_and_the_unmapped_are_named() {
    let body = r#"{
        "GPTBot": {"operator": "OpenAI", "function": "Scrapes data to train OpenAI's products."},
        "ChatGPT-User": {"function": "AI Assistants", "respect": "Yes"},
        "OAI-SearchBot": {"function": "Search result generation."},
        "Operator": {"function": "AI Agents"},
        "Diffbot": {"function": "AI Data Providers"},
        "Lightpanda": {"function": "AI Data Scrapers"},
        "NewBot": {"function": "Something nobody has reviewed."},
        "OddBot": {"function": 7},
        "BareBot": {}
    }"#;
    let parsed = Format::RobotsJson.parse(body.as_bytes()).unwrap();
    assert_eq!(parsed.entries.len(), 9);
    assert_eq!(
        parsed.unmapped,
        ["BareBot (no function)", "NewBot (\"Something nobody has reviewed.\")", "OddBot (no function)"]
    );
    let robots = source("ai-crawlers", "", Format::RobotsJson);
    let current_text = format!("# header\nGPTBot\n{KEPT_MARKER}\n[scraper]\nHeadlessChrome\n");
    let current = Current::read(&current_text, Kind::Tokens, &HashSet::from([""]));
    assert_eq!((current.counts.get(""), current.kept.len()), (Some(&1), 2));
    let new = [FetchedSource { source: &robots, parsed }];
    let rendered = render("ai-crawlers.txt", Kind::Tokens, &current, &new, "now").unwrap();
    // Unmapped first, so they carry no kind; then each kind; the hand-kept section as it was.
    let body = rendered.text.split("#\n").last().unwrap();
    assert_eq!(
        body,
        format!(
            "# Without a kind: rules/ai-kinds.txt does not map their function yet.\nBareBot\nNewBot\nOddBot\n\
             [training]\nGPTBot\n[ai-search]\nOAI-SearchBot\n[assistant]\nChatGPT-User\n[agent]\nOperator\n\
             [scraper]\nDiffbot\nLightpanda\n{KEPT_MARKER}\n[scraper]\nHeadlessChrome\n"
        )
    );
    assert_eq!(
        rendered.kinds,
        [
            (AiKind::Training, 1),
            (AiKind::AiSearch, 1),
            (AiKind::Assistant, 1),
            (AiKind::Agent, 1),
            (AiKind::Scraper, 2)
        ]
    );
    assert_eq!(rendered.unmapped.len(), 3);
    // The file reads back with every token's kind.
    let List::Tokens(list) = List::parse("ai-crawlers.txt", &rendered.text).unwrap() else { panic!() };
    assert_eq!(list.ai_kind("Mozilla/5.0 (compatible; ChatGPT-User/1.0)"), Some(AiKind::Assistant));
    assert_eq!(list.ai_kind("Lightpanda/1.0"), Some(AiKind::Scraper));
    assert_eq!(list.ai_kind("HeadlessChrome/120"), Some(AiKind::Scraper));
    assert_eq!(list.find("NewBot/2"), Some("NewBot"));
    assert_eq!(list.ai_kind("NewBot/2"), None);
}

#[test]
fn the_report_names_the_kinds_and_every_entry_without_one() {
    let report = ListReport {
        file: "ai-crawlers.txt".into(),
        result: Ok(Written {
            labels: vec![(String::new(), 3)],
            kept: 0,
            kept_only: 0,
            sources: Vec::new(),
            embedded: false,
            kinds: vec![(AiKind::Training, 2)],
            unmapped: vec!["NewBot (\"Something new.\")".into()],
        }),
        embedded_in_use: false,
    };
    let text = report.to_string();
    assert!(text.contains("\n  by kind: training 2"), "{text}");
    assert!(
        text.contains("1 without a kind (add their function to rules/ai-kinds.txt; until then they are trapped whatever the preferences say): NewBot (\"Something new.\")"),
        "{text}"
    );
}
