//! Replaying logs: verdicts in the log's time, trap URLs and the trap's prefix as live, hostile
//! input counted and reported, and a second ruleset compared on the same requests.

use std::io::Write as _;

use super::*;
use crate::config::Config;
use crate::support::secret::Secret;
use crate::tools::replay::report::Counts;
use crate::vocabulary::AiKind;

const CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36";

fn app() -> App {
    let (secret, _) = Secret::resolve(Some("replay-test-secret-0123456789".into()), None);
    App::build(Config::embedded(), &secret).unwrap()
}

fn options(files: &[&std::path::Path]) -> Options {
    Options {
        sources: files.iter().map(|file| Source::File(file.to_path_buf())).collect(),
        format: None,
        defaults: Defaults::default(),
        samples: 2,
        judge_missing: false,
        progress: false,
        dns: false,
    }
}

/// A JSON Lines request by a browser (all its headers) at `time`.
fn browser(time: &str, client: &str, uri: &str) -> String {
    format!(
        r#"{{"time":"{time}","client":"{client}","method":"GET","uri":"{uri}","host":"site.example","proto":"https","headers":{{"user-agent":"{CHROME}","sec-fetch-mode":"navigate","sec-fetch-site":"none"}}}}"#
    )
}

/// Replays `lines` (one file) and returns the report and each request's verdict line.
fn run(app: &App, lines: &[String], compare: Option<(&Rules, String)>) -> (Report, Vec<serde_json::Value>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let mut verdicts = Vec::new();
    let report = replay(app, compare, &options(&[&path]), Some(&mut verdicts)).unwrap();
    let verdicts = String::from_utf8(verdicts).unwrap();
    (report, verdicts.lines().map(|line| serde_json::from_str(line).unwrap()).collect())
}

fn verdict_of(verdicts: &[serde_json::Value], line: u64) -> (String, String) {
    let record = verdicts.iter().find(|record| record["line"] == line).unwrap();
    (record["verdict"].as_str().unwrap().into(), record["rule"].as_str().unwrap().into())
}

#[test]
fn verdicts_follow_the_logs_time_not_the_wall_clock() {
    let app = app();
    let mut minted = Vec::new();
    app.generator
        .trap_urls()
        .mint(&mut <rand_pcg::Pcg64Mcg as rand::SeedableRng>::seed_from_u64(7), &mut minted);
    let trap_url = String::from_utf8(minted).unwrap();
    let mut lines = Vec::new();
    // Two clients walk the trap at 10:00: ten trap pages each, a second apart.
    for client in ["203.0.113.1", "203.0.113.2"] {
        for second in 0..10 {
            lines.push(browser(&format!("2026-12-05T10:00:0{second}Z"), client, "/trap/page"));
        }
    }
    // One asks for a trap URL minted under this secret: a trap hit from any address.
    lines.push(browser("2026-12-05T10:00:07Z", "203.0.113.3", &trap_url));
    // The first comes back at 10:05, the second at 18:00, with a browser's request for a page.
    lines.push(browser("2026-12-05T10:05:00Z", "203.0.113.1", "/docs/a"));
    lines.push(browser("2026-12-05T18:00:00Z", "203.0.113.2", "/docs/a"));
    let (report, verdicts) = run(&app, &lines, None);
    assert_eq!(verdict_of(&verdicts, 1), ("trap".into(), SERVED_BY_TRAP.into()));
    assert_eq!(verdict_of(&verdicts, 21), ("trap".into(), "trap-url".into()));
    // Ten hits with a ten-minute half-life: about 7 left five minutes later, against a threshold of 5.
    assert_eq!(verdict_of(&verdicts, 22), ("trap".into(), "trap-score".into()), "five minutes later");
    assert_eq!(verdict_of(&verdicts, 23), ("allow".into(), "".into()), "eight hours later");
    assert_eq!(report.requests, report::Counts { allow: 1, trap: 22, challenge: 0 });
    assert_eq!(report.clients(), report::Counts { allow: 0, trap: 3, challenge: 0 });
    assert_eq!(report.lines, 23);
}

#[test]
fn hostile_input_is_counted_and_described_and_the_rest_replayed() {
    let app = app();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let mut file = std::fs::File::create(&path).unwrap();
    writeln!(file, "{}", browser("2026-12-05T10:00:00Z", "203.0.113.1", "/a")).unwrap();
    writeln!(file, r#"{{"time":"2026-12-05T10:00:01Z","client":"203.0.113.1","uri":"/trunc"#).unwrap();
    file.write_all(b"\x00\xff\xfe binary \x1b[31m garbage\n").unwrap();
    file.write_all(&vec![b'x'; 10 << 20]).unwrap();
    file.write_all(b"\n").unwrap();
    writeln!(file, r#"203.0.113.9 - - [05/Dec/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "-""#).unwrap();
    writeln!(file, "{}", browser("2026-12-05T10:00:02Z", "203.0.113.1", "/b")).unwrap();
    drop(file);
    let report = replay(&app, None, &options(&[&path]), None).unwrap();
    assert_eq!((report.lines, report.bad_lines), (6, 4));
    assert_eq!(report.requests, report::Counts { allow: 2, trap: 0, challenge: 0 });
    let text = report.text();
    assert!(text.contains("access.log:2: not a jsonl line: EOF while parsing"), "{text}");
    assert!(text.contains("access.log:3: not a jsonl line"), "{text}");
    assert!(text.contains(&format!("access.log:4: longer than {} bytes", input::MAX_LINE)), "{text}");
    assert!(text.contains("access.log:5: not a jsonl line"), "a line of another format: {text}");
    let json = report.json();
    assert_eq!((json["lines"].as_u64(), json["bad_lines"].as_u64()), (Some(6), Some(4)));
}

#[test]
fn a_gzip_file_cut_short_is_a_bad_line_and_the_next_file_is_replayed() {
    let app = app();
    let dir = tempfile::tempdir().unwrap();
    let gzipped = dir.path().join("access.log.1.gz");
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    for second in 0..5 {
        writeln!(encoder, "{}", browser(&format!("2026-12-05T10:00:0{second}Z"), "203.0.113.1", "/a"))
            .unwrap();
    }
    let mut bytes = encoder.finish().unwrap();
    // Cut short, as a log rotated while it was being written.
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&gzipped, &bytes).unwrap();
    let plain = dir.path().join("access.log");
    std::fs::write(&plain, browser("2026-12-05T10:00:09Z", "203.0.113.1", "/b") + "\n").unwrap();
    let report = replay(&app, None, &options(&[&gzipped, &plain]), None).unwrap();
    let text = report.text();
    assert!(text.contains("access.log.1.gz:1: unreadable from here on"), "{text}");
    let json = report.json();
    assert_eq!(json["requests"]["allow"], 1, "the next file is replayed: {text}");
}

#[test]
fn logs_given_newest_first_are_reported_as_out_of_order() {
    let app = app();
    let lines = [
        browser("2026-12-05T10:00:00Z", "203.0.113.1", "/today"),
        browser("2026-12-04T10:00:00Z", "203.0.113.1", "/yesterday"),
        browser("2026-12-04T10:00:01Z", "203.0.113.1", "/yesterday"),
    ];
    let (report, _) = run(&app, &lines, None);
    assert_eq!(report.out_of_order, 2);
    assert!(report.text().contains("give the logs oldest first"), "{}", report.text());
    assert_eq!(report.json()["out_of_order_lines"], 2);
}

#[test]
fn what_a_log_line_holds_cannot_drive_the_terminal_or_the_memory() {
    let app = app();
    let agent = format!("GPTBot/1.2 \\u001b[2J\\u001b]0;owned\\u0007 {}", "x".repeat(100_000));
    let line = format!(
        r#"{{"time":"2026-12-05T10:00:00Z","client":"203.0.113.9","uri":"/","headers":{{"user-agent":"{agent}"}}}}"#
    );
    let (report, _) = run(&app, &[line], None);
    let text = report.text();
    assert!(!text.contains('\u{1b}') && !text.contains('\u{7}'), "{text}");
    assert!(text.contains("\\u{1b}[2J"), "{text}");
    // The top tables keep a head of each user agent, not all of it.
    let kept = report.json()["top_trapped"]["user_agents"][0]["value"].as_str().unwrap().len();
    assert!(kept <= 200, "{kept} bytes kept");
}

#[test]
fn gzip_and_several_files_read_in_order() {
    let app = app();
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("access.log.1");
    std::fs::write(&plain, browser("2026-12-05T10:00:00Z", "203.0.113.1", "/trap/a") + "\n").unwrap();
    let gzipped = dir.path().join("access.log.2.gz");
    let mut encoder = flate2::write::GzEncoder::new(
        std::fs::File::create(&gzipped).unwrap(),
        flate2::Compression::default(),
    );
    for second in 1..6 {
        writeln!(encoder, "{}", browser(&format!("2026-12-05T10:00:0{second}Z"), "203.0.113.1", "/trap/b"))
            .unwrap();
    }
    writeln!(encoder, "{}", browser("2026-12-05T10:00:09Z", "203.0.113.1", "/docs")).unwrap();
    encoder.finish().unwrap();
    let report = replay(&app, None, &options(&[&plain, &gzipped]), None).unwrap();
    assert_eq!(report.lines, 7);
    assert_eq!(*report.by_rule.get("trap-score").unwrap(), 1, "the hits of both files count");
    assert_eq!(report.inputs[1].1, "jsonl");
}

#[test]
fn rules_a_combined_log_cannot_judge_are_reported_not_guessed() {
    let app = app();
    // Chrome without Sec-Fetch-* would be a lying browser live; a combined log never has them.
    let line =
        format!(r#"203.0.113.9 - - [05/Dec/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 1 "-" "{CHROME}""#);
    let (report, verdicts) = run(&app, std::slice::from_ref(&line), None);
    assert_eq!(verdict_of(&verdicts, 1), ("allow".into(), "".into()));
    assert_eq!(verdicts[0]["unjudged"], serde_json::json!(["lying-browser"]));
    assert_eq!(report.unjudged.get("lying-browser"), Some(&1));
    assert!(report.text().contains("Rules not judged"));
    // Asked to, the replay judges them as if the headers were not sent.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    std::fs::write(&path, line + "\n").unwrap();
    let report = replay(&app, None, &Options { judge_missing: true, ..options(&[&path]) }, None).unwrap();
    assert_eq!(report.by_rule.get("lying-browser"), Some(&1));
}

#[test]
fn compare_shows_which_lines_and_clients_another_ruleset_changes() {
    let app = app();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("lenient.lua");
    std::fs::write(
        &script,
        r#"return {
            { name = "trap-url", check = function(r) if r.is_trap_url then return "trap", "trap URL" end end },
            { name = "let-gptbot-in", check = function(r)
                if r.user_agent:find("GPTBot", 1, true) then return "allow", "GPTBot is welcome" end
            end },
        }"#,
    )
    .unwrap();
    let lenient = compare_rules(&app, script).unwrap();
    let gptbot = |second: u32, client: &str| {
        format!(
            r#"{{"time":"2026-12-05T10:00:0{second}Z","client":"{client}","uri":"/x","headers":{{"user-agent":"GPTBot/1.2"}}}}"#
        )
    };
    let lines = [
        gptbot(0, "203.0.113.1"),
        gptbot(1, "203.0.113.1"),
        browser("2026-12-05T10:00:02Z", "203.0.113.2", "/"),
    ];
    let (report, verdicts) = run(&app, &lines, Some((&lenient, "lenient.lua".into())));
    let comparison = report.comparison.as_ref().unwrap();
    assert_eq!(comparison.changed_lines, 2);
    let key = (Verdict::Trap, Arc::from("ai-crawlers"), Verdict::Allow, Arc::from("let-gptbot-in"));
    assert_eq!(comparison.transitions.get(&key), Some(&2));
    assert_eq!(verdicts[0]["compare"], serde_json::json!({ "verdict": "allow", "rule": "let-gptbot-in" }));
    let text = report.text();
    assert!(text.contains("2 lines and 1 clients change verdict"), "{text}");
    assert!(text.contains("client 203.0.113.1: trapped → allowed (2 requests)"), "{text}");
    assert_eq!(report.json()["compare"]["changed_clients"], 1);
}

#[test]
fn the_report_breaks_ai_crawlers_down_by_kind() {
    // A site that says yes to AI answers and no to training.
    let mut config = crate::config::Config::embedded();
    config.preferences.ai_input = Some(true);
    config.preferences.ai_train = Some(false);
    config.rules.preferences = config.preferences;
    let (secret, _) = Secret::resolve(Some("replay-test-secret-0123456789".into()), None);
    let app = App::build(config, &secret).unwrap();
    let line = |client: &str, agent: &str| {
        format!(r#"{client} - - [05/Dec/2026:10:00:00 +0000] "GET /post HTTP/1.1" 200 1 "-" "{agent}""#)
    };
    let lines = [
        line("132.196.86.10", "Mozilla/5.0 (compatible; GPTBot/1.2; +https://openai.com/gptbot)"),
        line("104.208.184.200", "Mozilla/5.0 (compatible; ChatGPT-User/1.0; +https://openai.com/bot)"),
        line("203.0.113.7", "Mozilla/5.0 (compatible; ChatGPT-User/1.0; +https://openai.com/bot)"),
        line("203.0.113.8", "Mozilla/5.0 (compatible; Diffbot/0.1; +http://www.diffbot.com)"),
        line("203.0.113.9", CHROME),
    ];
    let (report, _) = run(&app, &lines, None);
    let counts = |kind| report.by_ai_kind.get(&kind).copied().unwrap_or_default();
    assert_eq!(counts(AiKind::Training), Counts { allow: 0, trap: 1, challenge: 0 });
    // The one from ChatGPT-User's ranges is allowed; the impostor is not.
    assert_eq!(counts(AiKind::Assistant), Counts { allow: 1, trap: 1, challenge: 0 });
    assert_eq!(counts(AiKind::Scraper), Counts { allow: 0, trap: 1, challenge: 0 });
    assert_eq!(report.by_ai_kind.len(), 3, "a browser is no AI crawler");
    let text = report.text();
    assert!(text.contains("AI crawlers by kind (requests):"), "{text}");
    assert!(text.contains("  assistant           1           1           0"), "{text}");
    let json = report.json();
    assert_eq!(json["by_ai_kind"]["training"], serde_json::json!({ "allow": 0, "trap": 1, "challenge": 0 }));
}
