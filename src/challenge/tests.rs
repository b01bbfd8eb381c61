//! The challenge's tokens, answers, passes and burns, as specifications.

use std::net::IpAddr;
use std::time::{Duration, Instant, SystemTime};

use super::*;

const CHROME: &str =
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";

fn challenger() -> Challenger {
    challenger_with(b"a secret", ChallengeConfig { difficulty: 8, ..ChallengeConfig::default() })
}

fn challenger_with(secret: &[u8], config: ChallengeConfig) -> Challenger {
    Challenger::new(config, secret, ["<a href=\"/trap/a\">a</a>".into(), "<a href=\"/trap/b\">b</a>".into()])
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

/// The nonce a browser's worker would find.
fn solve(token: &str, bits: u8) -> String {
    (0u64..).map(|n| n.to_string()).find(|n| meets_difficulty(token, n, bits)).unwrap()
}

#[test]
fn a_solved_challenge_earns_a_pass_once() {
    let challenger = challenger();
    let now = SystemTime::now();
    let issued = challenger.issue(ip("198.51.100.7"), CHROME, now);
    let nonce = solve(&issued.token, issued.difficulty);
    let answered =
        challenger.answer(&issued.token, Some(&nonce), ip("198.51.100.7"), CHROME, false, now).unwrap();
    assert_eq!(answered.earned, Earned::Work);
    assert_eq!(
        challenger.answer(&issued.token, Some(&nonce), ip("198.51.100.7"), CHROME, false, now),
        Err(AnswerError::Replayed)
    );
}

#[test]
fn a_wrong_nonce_a_forged_token_or_an_old_one_earns_nothing() {
    let challenger = challenger();
    let now = SystemTime::now();
    let client = ip("198.51.100.7");
    let issued = challenger.issue(client, CHROME, now);
    let wrong = (0u64..).map(|n| n.to_string()).find(|n| !meets_difficulty(&issued.token, n, 8)).unwrap();
    assert_eq!(
        challenger.answer(&issued.token, Some(&wrong), client, CHROME, false, now),
        Err(AnswerError::WrongWork)
    );
    for nonce in ["", "12a", "-1", "123456789012345678901"] {
        assert_eq!(
            challenger.answer(&issued.token, Some(nonce), client, CHROME, false, now),
            Err(AnswerError::Malformed)
        );
    }
    // Another secret's challenge, and one with a byte changed.
    let foreign = challenger_with(b"another secret", ChallengeConfig::default()).issue(client, CHROME, now);
    assert_eq!(
        challenger.answer(&foreign.token, Some("1"), client, CHROME, false, now),
        Err(AnswerError::Forged)
    );
    let mut bytes = URL_SAFE_NO_PAD.decode(&issued.token).unwrap();
    bytes[25] = 0; // difficulty 0: a free pass, were the MAC not checked
    let tampered = URL_SAFE_NO_PAD.encode(&bytes);
    assert_eq!(challenger.answer(&tampered, Some("1"), client, CHROME, false, now), Err(AnswerError::Forged));
    assert_eq!(
        challenger.answer("not a token", Some("1"), client, CHROME, false, now),
        Err(AnswerError::Malformed)
    );
    // Expired.
    let later = now + CHALLENGE_LIFETIME + Duration::from_secs(1);
    let nonce = solve(&issued.token, 8);
    assert_eq!(
        challenger.answer(&issued.token, Some(&nonce), client, CHROME, false, later),
        Err(AnswerError::Expired)
    );
}

#[test]
fn a_challenge_is_bound_to_its_network_and_user_agent_but_not_to_an_address_family() {
    let challenger = challenger();
    let now = SystemTime::now();
    let issued = challenger.issue(ip("198.51.100.7"), CHROME, now);
    let nonce = solve(&issued.token, 8);
    let answer = |address: &str, agent: &str| {
        challenger.answer(&issued.token, Some(&nonce), ip(address), agent, false, now)
    };
    assert_eq!(answer("203.0.113.7", CHROME), Err(AnswerError::OtherClient));
    assert_eq!(answer("198.51.100.7", "python-requests/2.32"), Err(AnswerError::OtherClient));
    // The same /24, or the browser switching to IPv6 mid-challenge (anubis#564): accepted.
    assert!(answer("2001:db8::1", CHROME).is_ok());
    let issued = challenger.issue(ip("198.51.100.7"), CHROME, now);
    let nonce = solve(&issued.token, 8);
    assert!(challenger.answer(&issued.token, Some(&nonce), ip("198.51.100.200"), CHROME, false, now).is_ok());
}

#[test]
fn the_no_javascript_answer_is_accepted_only_after_the_wait() {
    let challenger = challenger();
    let now = SystemTime::now();
    let client = ip("198.51.100.7");
    let issued = challenger.issue(client, CHROME, now);
    assert_eq!(
        challenger.answer(&issued.token, None, client, CHROME, false, now),
        Err(AnswerError::TooEarly)
    );
    let after = now + issued.wait;
    let answered = challenger.answer(&issued.token, None, client, CHROME, false, after).unwrap();
    assert_eq!(answered.earned, Earned::Wait);
    assert!(answered.solved_in >= issued.wait);
}

#[test]
fn a_pass_verifies_on_any_replica_with_the_secret_and_nowhere_else() {
    let (a, b) = (challenger(), challenger());
    let now = SystemTime::now();
    let cookie = a.mint(Earned::Work, now);
    let PassCheck::Valid(pass) = b.read_pass(&cookie, now) else { panic!("replica b refused a's pass") };
    assert_eq!(pass.earned, Earned::Work);
    assert_eq!(pass.expires - pass.issued, ChallengeConfig::default().pass_lifetime.as_secs());
    let other = challenger_with(b"another secret", ChallengeConfig::default());
    assert_eq!(other.read_pass(&cookie, now), PassCheck::Invalid);
    // Every single-character change is caught.
    for index in 0..cookie.len() {
        let mut tampered = cookie.clone().into_bytes();
        tampered[index] = if tampered[index] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).unwrap();
        assert_ne!(a.read_pass(&tampered, now), PassCheck::Valid(pass), "{tampered}");
    }
    let expired = now + ChallengeConfig::default().pass_lifetime;
    assert_eq!(a.read_pass(&cookie, expired), PassCheck::Expired);
    assert_eq!(a.read_pass(&"A".repeat(5000), now), PassCheck::Invalid);
}

#[test]
fn the_pass_is_found_among_other_cookies_and_a_valid_one_wins() {
    let challenger = challenger();
    let now = SystemTime::now();
    let value = challenger.mint(Earned::Wait, now);
    let header = format!("theme=dark; {PASS_COOKIE}=garbage; {PASS_COOKIE}={value}; session=1");
    assert!(matches!(challenger.pass_in(&header, now), PassCheck::Valid(_)));
    assert_eq!(challenger.pass_in("theme=dark", now), PassCheck::None);
    // Cookies sent as fields of their own (HTTP/2, HTTP/3), the pass in any of them.
    let fields = ["theme=dark", "lang=en; x=1", header.as_str()];
    assert!(matches!(challenger.pass_in_fields(fields, now), PassCheck::Valid(_)));
    assert_eq!(challenger.pass_in(&format!("{PASS_COOKIE}=garbage"), now), PassCheck::Invalid);
    let cookie = challenger.set_cookie(&value, true);
    for part in ["Path=/", "HttpOnly", "SameSite=Lax", "Secure", "Max-Age=604800"] {
        assert!(cookie.contains(part), "{cookie}");
    }
    assert!(!challenger.set_cookie(&value, false).contains("Secure"));
}

#[test]
fn a_pass_used_from_too_many_networks_or_read_too_fast_is_burned() {
    let challenger = challenger();
    let start = Instant::now();
    // One person: home, phone, office, each a few times, reading at a person's pace.
    for (minute, address) in ["198.51.100.7", "203.0.113.9", "192.0.2.4", "198.51.100.8"].iter().enumerate() {
        let at = start + Duration::from_secs(minute as u64 * 60);
        assert_eq!(challenger.observe_pass(1, ip(address), true, 0, false, at).burned, None);
    }
    // A proxy pool: a new /24 for each request.
    let mut reason = None;
    for n in 0..20u8 {
        let used = challenger.observe_pass(2, ip(&format!("10.{n}.0.1")), false, 0, false, start);
        reason = reason.or(used.burned);
    }
    assert_eq!(reason, Some("networks"));
    // Pages as fast as a program asks for them: asked again past the burst, and burned once it
    // has read on without answering for five minutes' worth of the pace (2 s a page, 0.1 s
    // apart: about 158 pages).
    let burst = ChallengeConfig::default().burn.page_burst;
    let (mut first_asked, mut burned_at) = (None, None);
    for page in 1..=400u32 {
        let at = start + Duration::from_millis(u64::from(page) * 100);
        let used = challenger.observe_pass(3, ip("198.51.100.7"), true, 0, false, at);
        if used.rechallenge.is_some() && first_asked.is_none() {
            first_asked = Some(page);
        }
        if used.burned.is_some() {
            burned_at = Some((page, used.burned));
            break;
        }
    }
    assert_eq!(first_asked, Some(burst + 1));
    let (page, reason) = burned_at.unwrap();
    assert!((150..=170).contains(&page), "burned at page {page}");
    assert_eq!(reason, Some("pages"));
    // Trap hits, and a burn stays.
    let used = challenger.observe_pass(4, ip("198.51.100.7"), true, 2, false, start);
    assert_eq!((used.burned, used.newly_burned), (Some("trap_hits"), true));
    let used =
        challenger.observe_pass(4, ip("198.51.100.7"), true, 0, false, start + Duration::from_secs(600));
    assert_eq!((used.burned, used.newly_burned), (Some("trap_hits"), false), "a burn stays");
}

#[test]
fn a_burst_of_tabs_is_asked_again_never_burned_and_a_day_has_a_budget() {
    let challenger = challenger();
    let start = Instant::now();
    let burst = ChallengeConfig::default().burn.page_burst;
    // Twelve tabs opened within a second: the burst reads, the rest are asked again.
    let asked: Vec<Option<&str>> = (0..12u64)
        .map(|tab| {
            let used = challenger.observe_pass(
                9,
                ip("198.51.100.7"),
                true,
                0,
                false,
                start + Duration::from_millis(tab * 80),
            );
            assert_eq!(used.burned, None, "tab {tab}");
            used.rechallenge
        })
        .collect();
    assert!(asked[..burst as usize].iter().all(Option::is_none), "{asked:?}");
    assert!(asked[burst as usize..].iter().all(|why| *why == Some("pace")), "{asked:?}");
    // Reading at a steady page every three seconds, under the pace: the day's budget, then a
    // question (a new pass starts a new day).
    let reader = 10;
    for page in 0..u64::from(PAGES_PER_DAY) {
        let used = challenger.observe_pass(
            reader,
            ip("198.51.100.7"),
            true,
            0,
            false,
            start + Duration::from_secs(page * 3),
        );
        assert_eq!((used.burned, used.rechallenge), (None, None), "page {page}");
    }
    let over = start + Duration::from_secs(u64::from(PAGES_PER_DAY) * 3);
    assert_eq!(
        challenger.observe_pass(reader, ip("198.51.100.7"), true, 0, false, over).rechallenge,
        Some("budget")
    );
}

#[test]
fn a_person_reading_a_page_every_few_seconds_never_burns_a_pass() {
    let challenger = challenger();
    let start = Instant::now();
    for page in 0..600u64 {
        let at = start + Duration::from_secs(page * 3);
        assert_eq!(
            challenger.observe_pass(5, ip("198.51.100.7"), true, 0, false, at).burned,
            None,
            "page {page}"
        );
    }
}

#[test]
fn unanswered_challenges_are_counted_until_an_answer() {
    let challenger = challenger();
    let (client, chrome, now) = (ip("198.51.100.7"), "Chrome/130", Instant::now());
    assert_eq!(challenger.unanswered(client, chrome, now), 0);
    challenger.challenged(client, chrome, now);
    assert_eq!(challenger.challenged(client, chrome, now), 2);
    assert_eq!(challenger.unanswered(client, chrome, now), 2);
    challenger.answered(client, chrome);
    assert_eq!(challenger.unanswered(client, chrome, now), 0);
}

#[test]
fn unanswered_challenges_belong_to_the_challenged_client_and_end_on_time() {
    let challenger = challenger();
    let (client, chrome, start) = (ip("2001:db8:1:2::7"), "Chrome/130", Instant::now());
    for _ in 0..6 {
        challenger.challenged(client, chrome, start);
    }
    assert_eq!(challenger.unanswered(client, chrome, start), 6);
    // Someone else at the same address, or next to it in the /64, has been shown nothing.
    assert_eq!(challenger.unanswered(client, "Safari/17", start), 0);
    assert_eq!(challenger.unanswered(ip("2001:db8:1:2::8"), chrome, start), 0);
    // More challenges do not make the count last longer: it ends a fixed time after the first.
    let later = start + UNANSWERED_MEMORY - Duration::from_secs(1);
    assert_eq!(challenger.challenged(client, chrome, later), 7);
    let after = start + UNANSWERED_MEMORY + Duration::from_secs(1);
    assert_eq!(challenger.unanswered(client, chrome, after), 0);
    // And a new one starts from one.
    assert_eq!(challenger.challenged(client, chrome, after), 1);
}

#[test]
fn only_paths_on_the_same_host_are_return_targets() {
    for good in ["/", "/blog/post?page=2", "/a/b#c"] {
        assert!(is_local_target(good), "{good}");
    }
    for bad in [
        "https://evil.example/",
        "//evil.example/",
        "/\\evil.example",
        "\\\\evil.example",
        "evil.example",
        "javascript:alert(1)",
        "/\u{0}x",
        "/\tx",
        "",
    ] {
        assert!(!is_local_target(bad), "{bad:?}");
    }
}

#[test]
fn the_page_is_small_self_contained_and_carries_the_trap_links() {
    let challenger = challenger();
    let html =
        challenger.page(ip("198.51.100.7"), CHROME, "/blog/\"><script>x</script>", None, SystemTime::now());
    assert!(html.len() < 6 * 1024, "{} bytes", html.len());
    assert!(html.contains("/trap/a") && html.contains("/trap/b"));
    assert!(html.contains("<script src=\"/.quagmire/challenge.js\"></script>"));
    assert!(html.contains("http-equiv=\"refresh\" content=\"5; url=/.quagmire/answer?c="));
    // No third-party resource, and the target is escaped, not markup.
    assert!(!html.contains("http://") && !html.contains("https://"));
    assert!(!html.contains("<script>x"));
    // A target that is not a path here is not carried at all.
    let html = challenger.page(ip("198.51.100.7"), CHROME, "//evil.example/", None, SystemTime::now());
    assert!(html.contains("&amp;to=%2F\"") && !html.contains("evil"));
}

#[test]
fn one_network_minting_passes_in_bulk_is_refused_and_no_other_network_is() {
    let challenger =
        challenger_with(b"a secret", ChallengeConfig { wait: Duration::ZERO, ..ChallengeConfig::default() });
    let start = SystemTime::now();
    let farm = |n: usize| ip(&format!("203.0.113.{}", n % 250 + 1));
    // The no-JavaScript answer, the cheapest there is, from one /24: a quota's worth is accepted.
    let mut tokens = Vec::new();
    for n in 0..ANSWERS_PER_NETWORK {
        let issued = challenger.issue(farm(n), CHROME, start);
        assert!(challenger.answer(&issued.token, None, farm(n), CHROME, false, start).is_ok(), "answer {n}");
        tokens.push(issued.token);
    }
    let issued = challenger.issue(farm(0), CHROME, start);
    assert_eq!(
        challenger.answer(&issued.token, None, farm(0), CHROME, false, start),
        Err(AnswerError::Busy(Duration::from_secs(CHALLENGE_LIFETIME.as_secs() + 1)))
    );
    // Someone on another network answers as ever, and nothing answered can be answered again.
    let person = ip("198.51.100.7");
    let theirs = challenger.issue(person, "Firefox/140", start);
    assert!(challenger.answer(&theirs.token, None, person, "Firefox/140", false, start).is_ok());
    assert_eq!(
        challenger.answer(&tokens[0], None, farm(0), CHROME, false, start),
        Err(AnswerError::Replayed)
    );
    // Once the answered challenges have expired, the network answers again; and what it answered
    // can never be answered again, since an expired challenge is refused as expired.
    let later = start + CHALLENGE_LIFETIME + Duration::from_secs(2);
    let fresh = challenger.issue(farm(1), CHROME, later);
    assert!(challenger.answer(&fresh.token, None, farm(1), CHROME, false, later).is_ok());
    assert_eq!(challenger.answer(&tokens[1], None, farm(1), CHROME, false, later), Err(AnswerError::Expired));
}

#[test]
fn past_a_datacenter_networks_burst_a_pass_is_minted_for_its_turn_and_good_only_from_then() {
    let challenger =
        challenger_with(b"a secret", ChallengeConfig { difficulty: 4, ..ChallengeConfig::default() });
    let now = SystemTime::now();
    let farm = ip("203.0.113.9");
    let answer = || {
        let issued = challenger.issue(farm, CHROME, now);
        let nonce = solve(&issued.token, issued.difficulty);
        challenger.answer(&issued.token, Some(&nonce), farm, CHROME, true, now)
    };
    for n in 0..economy::FREE_PASSES {
        assert_eq!(answer().unwrap().starts_in, Duration::ZERO, "answer {n}");
    }
    let late = answer().unwrap();
    assert!(late.starts_in > Duration::ZERO && late.starts_in <= economy::MINT_INTERVAL, "{late:?}");
    assert!(late.extra_bits <= 1, "the price rose at most a bit: {late:?}");
    let starts = now + Duration::from_secs(late.starts_in.as_secs() + 1);
    let cookie = challenger.mint(late.earned, starts);
    assert!(matches!(challenger.read_pass(&cookie, now), PassCheck::Early(seconds) if seconds >= 1));
    assert!(matches!(challenger.read_pass(&cookie, starts), PassCheck::Valid(_)));
    // The same answers from a network that is no datacenter's are never queued.
    let home = ip("192.0.2.9");
    for n in 0..60 {
        let issued = challenger.issue(home, CHROME, now);
        let nonce = solve(&issued.token, issued.difficulty);
        let answered = challenger.answer(&issued.token, Some(&nonce), home, CHROME, false, now).unwrap();
        assert_eq!(answered.starts_in, Duration::ZERO, "answer {n}");
    }
}
