//! The KDL config loader (`Config::parse`) for arbitrary UTF-8 text, and the rendering of its
//! errors as `quagmire check` prints them (miette's graphical report).
//!
//! Beyond not panicking: every problem points at a line of the text; an accepted config holds
//! the values the rest of the code divides by or ranges over in order (page sizes and link
//! counts with min ≤ max, non-zero drip rate and chunk, prefix lengths that fit their family,
//! a trap status other than 401 in 300..=599, a redirect prefix `/…` without a trailing `/`).

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use miette::{GraphicalReportHandler, GraphicalTheme};
use quagmire::{Config, ConfigError};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Config::parse("fuzz.kdl", text, Path::new("/nonexistent")) {
        Ok(config) => check_accepted(&config),
        Err(error) => {
            let lines = text.split('\n').count();
            let problems = match &error {
                ConfigError::Syntax { problems, .. } => problems.iter().collect(),
                ConfigError::Invalid(problem) => vec![&**problem],
                ConfigError::Read { .. } => unreachable!("parsing reads no file"),
            };
            for problem in problems {
                let (line, column) = problem.line_column();
                assert!((1..=lines).contains(&line) && column >= 1, "{line}:{column} of {lines} lines");
            }
            let mut out = String::new();
            let _ = GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor())
                .render_report(&mut out, &error);
        }
    }
});

fn check_accepted(config: &Config) {
    let page = &config.trap.page;
    assert!(1024 <= page.min_bytes && page.min_bytes <= page.max_bytes, "{page:?}");
    assert!(page.min_links <= page.max_links, "{page:?}");
    let drip = &config.trap.drip;
    assert!(drip.bytes_per_second > 0 && drip.chunk_bytes > 0, "{drip:?}");
    let verdict = &config.verdict;
    assert!((8..=32).contains(&verdict.ipv4_prefix) && (16..=128).contains(&verdict.ipv6_prefix));
    assert!((300..=599).contains(&verdict.trap_status) && verdict.trap_status != 401);
    let prefix = &verdict.redirect_prefix;
    assert!(prefix.starts_with('/') && !prefix.ends_with('/'), "{prefix:?}");
    assert!(!config.rules.limits.time.is_zero());
    assert!(config.corpus.order >= 2);
}
