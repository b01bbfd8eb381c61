//! The pace of a person against a crawler's, from a datacenter address, through the default
//! rules: logs of both replayed in their own time (`quagmire replay`, with an ASN database that
//! puts them in a cloud network), so ten minutes of reading take a moment and the verdicts are
//! the ones live would give.

use crate::support::{quagmire, write_asn_db, write_file};

const CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36";
/// 203.0.113.0/24 is in AS16509 (Amazon) in the test database: a datacenter network.
const CLOUD_NETWORK: &str = "203.0.113.0/24";

/// One request as a JSON Lines log line, `millis` after the start, from `client`.
fn line(millis: u64, client: &str, uri: &str, dest: &str) -> String {
    let mode = if dest == "document" { "navigate" } else { "no-cors" };
    let time = 1_764_928_800.0 + millis as f64 / 1000.0;
    format!(
        r#"{{"time":{time},"client":"{client}","uri":"{uri}","host":"site.example","headers":{{"user-agent":"{CHROME}","accept":"*/*","sec-fetch-site":"same-origin","sec-fetch-mode":"{mode}","sec-fetch-dest":"{dest}"}}}}"#
    )
}

/// Replays `lines` with the default rules and returns each line's (verdict, rule).
fn replay(lines: &[String]) -> Vec<(String, String)> {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("asn.mmdb");
    write_asn_db(&db, &[(CLOUD_NETWORK, 16509, "Amazon.com, Inc.")]);
    let log = write_file(dir.path(), "access.jsonl", &(lines.join("\n") + "\n"));
    let verdicts = dir.path().join("verdicts.jsonl");
    let output = quagmire()
        .args(["replay", "--quiet", "--no-dns", "--asn-db"])
        .arg(&db)
        .arg("--verdicts")
        .arg(&verdicts)
        .arg(&log)
        .env("QUAGMIRE_SECRET", crate::support::SECRET)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    std::fs::read_to_string(verdicts)
        .unwrap()
        .lines()
        .map(|line| {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            (record["verdict"].as_str().unwrap().into(), record["rule"].as_str().unwrap().into())
        })
        .collect()
}

/// A browser crawling a site from the cloud at 20 page views a second is over the request quota
/// (a bucket of 120 refilled at 10 a second, which it drains by 10 a second) within 240 requests,
/// where the old burst of 600 let it read 1,200 pages first.
#[test]
fn a_browser_from_a_datacenter_at_twenty_pages_a_second_is_trapped_within_240_requests() {
    let lines: Vec<String> =
        (0..600).map(|i| line(i * 50, "203.0.113.50", &format!("/articles/{i}"), "document")).collect();
    let verdicts = replay(&lines);
    let first = verdicts.iter().position(|(verdict, _)| verdict == "trap").expect("never trapped");
    assert_eq!(verdicts[first].1, "datacenter-over-quota");
    assert!((120..=240).contains(&first), "first trapped at request {}", first + 1);
    // Before that, each page view was a challenge (a cloud browser without a pass). Over the quota
    // it gets through the rules (to a challenge) at the refill rate, but each trap page served in
    // place is a trap hit: within a few more requests its trap score traps every request.
    assert!(
        verdicts[..first]
            .iter()
            .all(|(verdict, rule)| verdict == "challenge" && rule == "challenge-browsers")
    );
    let untrapped_after: Vec<usize> =
        (first..verdicts.len()).filter(|&i| verdicts[i].0 != "trap").map(|i| i + 1).collect();
    assert!(untrapped_after.len() <= 5, "not trapped after the first trap: requests {untrapped_after:?}");
    assert_eq!(verdicts.last().unwrap(), &("trap".to_string(), "trap-score".to_string()));
}

/// A person reading from a cloud address (a VPN, a cloud desktop) at a busy pace is never
/// trapped: a first page with 60 subresources at once (a cold cache), then for ten minutes a page
/// and 20 subresources (images and the like) every 3 seconds, 7 requests a second.
#[test]
fn a_person_reading_from_a_datacenter_for_ten_minutes_is_never_trapped() {
    let mut lines = vec![line(0, "203.0.113.60", "/", "document")];
    lines.extend((0..60).map(|i| line(200 + i, "203.0.113.60", &format!("/assets/first-{i}.js"), "script")));
    for page in 1..200u64 {
        let at = page * 3_000;
        lines.push(line(at, "203.0.113.60", &format!("/articles/{page}"), "document"));
        lines.extend(
            (0..20).map(|i| {
                line(at + 150 + i * 10, "203.0.113.60", &format!("/images/{page}-{i}.jpg"), "image")
            }),
        );
    }
    let verdicts = replay(&lines);
    assert_eq!(verdicts.len(), 61 + 199 * 21);
    let trapped: Vec<_> = verdicts.iter().enumerate().filter(|(_, (verdict, _))| verdict == "trap").collect();
    assert!(trapped.is_empty(), "trapped at {} requests, first {:?}", trapped.len(), trapped.first());
    // Without a pass, each of its 200 page views is a challenge in a replay (a log cannot say
    // that the person answered the first and read on with a pass); its subresources never are.
    let challenged: Vec<&(String, String)> =
        verdicts.iter().filter(|(verdict, _)| verdict == "challenge").collect();
    assert_eq!(challenged.len(), 200);
    assert!(challenged.iter().all(|(_, rule)| rule == "challenge-browsers"));
}
