//! Prints pass cookies minted under the bench secret, one per line, for `bench/wrk-pass.sh`:
//! `cargo run --release --example passes -- 1000`.

use std::time::SystemTime;

use quagmire::{ChallengeConfig, Challenger, Earned};

/// The secret `bench/serve.sh` starts quagmire with.
const BENCH_SECRET: &str = "bench-secret-0123456789abcdef";

fn main() {
    let count: usize = std::env::args().nth(1).and_then(|count| count.parse().ok()).unwrap_or(1000);
    let challenger =
        Challenger::new(ChallengeConfig::default(), BENCH_SECRET.as_bytes(), [String::new(), String::new()]);
    let now = SystemTime::now();
    for _ in 0..count {
        println!("{}", challenger.mint(Earned::Work, now));
    }
}
