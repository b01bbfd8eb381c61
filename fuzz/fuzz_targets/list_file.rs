//! The list file parser (`List::parse`) for arbitrary UTF-8 text, and lookups in what it
//! compiles: the text itself as a user agent, path and address.
//!
//! Beyond not panicking: every entry of an accepted list matches itself (a user-agent token is
//! found in a user agent that is that token, a network contains its own address, an ASN is
//! listed, a crawler's host is under its domain, a path pattern matches the path it names),
//! and a token list has one token per entry.

#![no_main]

use std::net::IpAddr;

use ipnet::IpNet;
use libfuzzer_sys::fuzz_target;
use quagmire::List;
use quagmire::browser_claim;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for line in text.lines() {
        let _ = browser_claim(line);
    }
    let Ok(list) = List::parse("fuzz.txt", text) else { return };
    let _ = (list.kind(), list.is_empty());
    // The entries as the file format defines them: `#` starts a comment, blank lines are skipped.
    let entries: Vec<&str> = text
        .lines()
        .map(|line| line.split('#').next().unwrap_or("").trim())
        .filter(|entry| !entry.is_empty())
        .collect();
    match &list {
        List::Tokens(tokens) => {
            assert_eq!(list.len(), entries.len());
            let _ = tokens.find(text);
            for entry in entries {
                assert!(tokens.find(entry).is_some(), "token {entry:?} does not find itself");
            }
        }
        List::Networks(networks) => {
            let _ = networks.claimed(text);
            for entry in entries {
                let written = entry.split_whitespace().last().unwrap();
                let address = written
                    .parse::<IpNet>()
                    .map(|network| network.addr())
                    .or_else(|_| written.parse::<IpAddr>())
                    .unwrap();
                assert!(networks.find(address).is_some(), "network {written} does not contain its address");
            }
        }
        List::Asns(asns) => {
            for entry in entries {
                let number = entry.split_whitespace().next().unwrap().parse::<u32>().unwrap();
                assert!(asns.find(number).is_some(), "AS {number} is not listed");
            }
        }
        List::Domains(domains) => {
            let _ = (domains.claimed(text), domains.find(text));
            for entry in entries {
                let mut fields = entry.split_whitespace();
                let (label, domain) = (fields.next().unwrap(), fields.next().unwrap());
                assert!(domains.claimed(label).is_some(), "label {label:?} is not claimed by itself");
                let domain = domain.trim_start_matches('.').trim_end_matches('.');
                let host = format!("crawl-1.{domain}");
                assert!(domains.names_host_of(label, &host), "{host:?} is not under {label:?}'s {domain:?}");
                assert!(!domains.names_host_of(label, domain), "the domain {domain:?} itself names a host");
            }
        }
        List::Paths(paths) => {
            let _ = paths.find(text.as_bytes());
            for entry in entries {
                let pattern = entry.split_whitespace().next().unwrap();
                let path = pattern.strip_prefix('*').or_else(|| pattern.strip_suffix('*')).unwrap_or(pattern);
                assert!(paths.find(path.as_bytes()).is_some(), "pattern {pattern:?} does not match {path:?}");
            }
        }
    }
});
