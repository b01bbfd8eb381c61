//! The fingerprint check (issue 16): pages from DEPLOYMENTS deployments (random secrets, the
//! default config, the same hosts and paths), and the longest byte string of their markup that
//! appears in the pages of more than two deployments. A crawler vendor could match such a string
//! to skip every quagmire trap; the target is at most 32 bytes.
//!
//! What counts as markup: everything but corpus text (text between tags, and attribute values, of
//! four words or more) and what every HTML page has (the doctype, the charset and viewport metas).
//! Those are cut out, and a string never spans a cut.
//!
//! usage: cargo run --release --example fingerprint [DEPLOYMENTS] [PAGES_PER_DEPLOYMENT] [SET]
//! (SET names another set of secrets: the measure depends on which sites happen to draw alike.)

use std::collections::{HashMap, HashSet};

use quagmire::Chain;
use quagmire::Config;
use quagmire::Generator;
use quagmire::TrapUrls;

/// Strings every HTML page has, allowed to be shared.
const COMMON: &[&str] = &[
    "<!DOCTYPE html>",
    "<!doctype html>",
    "<meta charset=\"utf-8\">",
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
];

fn main() {
    let mut args = std::env::args().skip(1);
    let deployments: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(20);
    let pages: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(5);
    let set = args.next().unwrap_or_default();
    let config = Config::embedded();
    let text = quagmire::load_corpus(config.corpus.embedded, &config.corpus.paths).expect("the corpus loads");
    let mut markup: Vec<Vec<Vec<u8>>> = Vec::new();
    for deployment in 0..deployments {
        let name = if set.is_empty() { format!("{deployment}") } else { format!("{set}-{deployment}") };
        let secret = blake3::hash(format!("fingerprint deployment {name}").as_bytes()).to_hex().to_string();
        let chain = Chain::train(&text, config.corpus.order).expect("the corpus trains");
        let generator = Generator::new(
            chain,
            TrapUrls::new(secret.as_bytes()),
            config.trap.page.clone(),
            secret.as_bytes(),
        );
        let mut segments = Vec::new();
        for page in 0..pages {
            let host = ["blog.example.org", "www.example.com"][page % 2];
            let html = generator.page(host, &format!("/articles/page-{page}"));
            segments.extend(markup_segments(&html));
        }
        markup.push(segments);
    }
    let (length, example) = longest_shared(&markup, 3);
    let total: usize = markup.iter().flatten().map(Vec::len).sum();
    println!(
        "{deployments} deployments x {pages} pages ({total} bytes of markup): the longest string in more than \
         two deployments' pages is {length} bytes{}",
        if length > 0 { format!(": {:?}", String::from_utf8_lossy(&example)) } else { String::new() }
    );
}

/// The page's markup as segments: cut at corpus text and at the strings every page has.
fn markup_segments(html: &str) -> Vec<Vec<u8>> {
    let mut html = html.to_string();
    for common in COMMON {
        html = html.replace(common, "\u{1}");
    }
    let mut segments = vec![Vec::new()];
    let mut rest = html.as_str();
    let mut in_style = false;
    while !rest.is_empty() {
        // Text up to the next tag, then the tag (with its attribute values checked). A
        // stylesheet is markup, whatever it looks like.
        let text_end = rest.find('<').unwrap_or(rest.len());
        let text = &rest[..text_end];
        if !in_style && is_corpus_text(text) {
            segments.push(Vec::new());
        } else {
            push_cutting(&mut segments, text);
        }
        rest = &rest[text_end..];
        if rest.is_empty() {
            break;
        }
        let tag_end = rest.find('>').map_or(rest.len(), |i| i + 1);
        let tag = &rest[..tag_end];
        in_style = tag.starts_with("<style");
        let mut pieces = tag.split('"');
        let mut inside = false;
        let mut first = true;
        for piece in pieces.by_ref() {
            if !first {
                push_cutting(&mut segments, "\"");
            }
            first = false;
            if inside && is_corpus_text(piece) {
                segments.push(Vec::new());
            } else {
                push_cutting(&mut segments, piece);
            }
            inside = !inside;
        }
        rest = &rest[tag_end..];
    }
    segments.retain(|segment| !segment.is_empty());
    segments
}

/// Appends `text` to the last segment, starting a new one at each cut mark.
fn push_cutting(segments: &mut Vec<Vec<u8>>, text: &str) {
    for (i, part) in text.split('\u{1}').enumerate() {
        if i > 0 {
            segments.push(Vec::new());
        }
        segments.last_mut().expect("at least one segment").extend_from_slice(part.as_bytes());
    }
}

/// Four words or more: a sentence or heading from the corpus.
fn is_corpus_text(text: &str) -> bool {
    text.split_whitespace().filter(|word| word.chars().any(char::is_alphabetic)).count() >= 4
}

/// The longest byte string found in the segments of at least `min_deployments` deployments.
fn longest_shared(markup: &[Vec<Vec<u8>>], min_deployments: usize) -> (usize, Vec<u8>) {
    let longest = markup.iter().flatten().map(Vec::len).max().unwrap_or(0);
    let (mut low, mut high) = (0, longest);
    let mut example = Vec::new();
    // Shared at length n implies shared at every shorter length: binary search.
    while low < high {
        let length = (low + high).div_ceil(2);
        match shared_at(markup, length, min_deployments) {
            Some(found) => {
                low = length;
                example = found;
            }
            None => high = length - 1,
        }
    }
    (low, example)
}

fn shared_at(markup: &[Vec<Vec<u8>>], length: usize, min_deployments: usize) -> Option<Vec<u8>> {
    let mut counts: HashMap<&[u8], usize> = HashMap::new();
    for segments in markup {
        let mut seen: HashSet<&[u8]> = HashSet::new();
        for segment in segments {
            for window in segment.windows(length) {
                if seen.insert(window) {
                    let count = counts.entry(window).or_default();
                    *count += 1;
                    if *count >= min_deployments {
                        return Some(window.to_vec());
                    }
                }
            }
        }
    }
    None
}
