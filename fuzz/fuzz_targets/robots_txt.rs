//! A site's robots.txt (`robots::RobotsTxt::parse`, the `robotstxt` crate's parser underneath)
//! and a request matched against it, for arbitrary bytes: a file quagmire fetches from an origin
//! it does not control must never panic it (the parser once sliced inside a character on long
//! lines).
//!
//! Input: the robots.txt, then a NUL, the User-Agent, a NUL, the path. Beyond not panicking:
//! `/robots.txt` itself is always allowed.

#![no_main]

use libfuzzer_sys::fuzz_target;
use quagmire::{RobotsCheck, robots_answer};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(3, '\0');
    let robots = parts.next().unwrap_or("");
    let user_agent = parts.next().unwrap_or("Mozilla/5.0 (compatible; GPTBot/1.2)");
    let path = parts.next().unwrap_or("/");
    let _ = robots_answer(robots, user_agent, path);
    assert_eq!(robots_answer(robots, user_agent, "/robots.txt"), RobotsCheck::Allowed);
});
