//! A pass cookie and a challenge's answer, for arbitrary bytes: both come from clients, so a
//! `Cookie` header or an answer's query must never panic quagmire, and nothing made up is a pass.
//!
//! Input: the `Cookie` header, then a NUL, the challenge token, a NUL, the nonce. Beyond not
//! panicking: no input is a valid pass or an accepted answer (the MACs are 128 bits), while a
//! pass minted here still reads back.

#![no_main]

use std::sync::LazyLock;
use std::time::SystemTime;

use libfuzzer_sys::fuzz_target;
use quagmire::{ChallengeConfig, Challenger, Earned, PassCheck};

/// Built once: its caches are not what is fuzzed.
static CHALLENGER: LazyLock<Challenger> = LazyLock::new(|| {
    Challenger::new(ChallengeConfig::default(), b"fuzz secret", [String::new(), String::new()])
});

fuzz_target!(|data: &[u8]| {
    let challenger = &*CHALLENGER;
    let now = SystemTime::now();
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(3, '\0');
    let cookies = parts.next().unwrap_or("");
    let token = parts.next().unwrap_or("");
    let nonce = parts.next();
    assert!(!matches!(challenger.pass_in(cookies, now), PassCheck::Valid(_)), "{cookies:?} read as a pass");
    let client = [198, 51, 100, 7].into();
    assert!(
        challenger.answer(token, nonce, client, "Mozilla/5.0", false, now).is_err(),
        "{token:?} accepted"
    );
    let minted = challenger.mint(Earned::Work, now);
    assert!(matches!(challenger.read_pass(&minted, now), PassCheck::Valid(_)));
});
