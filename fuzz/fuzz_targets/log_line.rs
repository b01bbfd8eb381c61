//! `quagmire replay`'s log-line parsers (`replay::formats`) for arbitrary bytes read as a line,
//! as `replay` reads them (invalid UTF-8 replaced), in every format and through detection.
//!
//! Beyond not panicking: a parsed request's headers hold no newline or NUL (which would fake a
//! header, or a carried header's name, for the rules).

#![no_main]

use libfuzzer_sys::fuzz_target;
use quagmire::{ReplayDefaults as Defaults, ReplayFormat as Format, parse_log_line as parse};

fuzz_target!(|data: &[u8]| {
    let line = String::from_utf8_lossy(data);
    let defaults = Defaults::default();
    let _ = Format::detect(&line);
    for format in [Format::Caddy, Format::Traefik, Format::Combined, Format::Jsonl] {
        let Ok(request) = parse(format, &line, &defaults) else { continue };
        for (name, value) in request.headers.iter() {
            for text in [name, value] {
                assert!(!text.contains(['\n', '\r', '\0']), "{format:?}: {text:?}");
            }
        }
    }
});
