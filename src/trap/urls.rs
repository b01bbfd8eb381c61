//! Trap URLs: minting links that look like an ordinary site's and recognising them later.
//!
//! Every link on a trap page points at another trap URL such as
//! `/archive/2019/05/quiet-harbor-letters-winter-garden`. The last three words of the slug are a
//! tag: 33 bits of SipHash-2-4 of everything before them, keyed from the secret, spelled with a
//! 2048-word list. (SipHash is a keyed function made for short inputs: a tag costs less than half
//! of a keyed BLAKE3 hash, and a trap page mints a dozen.)
//! So a trap URL is recognised by recomputing the tag, with no per-URL state and nothing in the URL
//! that looks like a token, and a guessed URL passes with probability 2^-33.
//!
//! The verdict side uses [`TrapUrls::is_trap`] to spot a client asking for a trap URL: a human never
//! sees one, so asking for it is evidence on its own, unless another site made the client ask
//! ([`is_evidence`]).

use std::collections::HashMap;
use std::hash::Hasher;

use rand::Rng;
use siphasher::sip::SipHasher24;

use crate::client::HeaderLines;
use crate::support::numbers::{below, push_number};

/// Number of words in the slug dictionary; each word carries `WORD_BITS` bits of the tag.
pub(crate) const WORD_COUNT: usize = 2048;
const WORD_BITS: u32 = 11;
/// Three tag words carry 33 bits, so a guess passes with probability 2^-33 (≤ 2^-32 required).
const TAG_WORDS: usize = 3;
/// The embedded slug dictionary (see `corpus/README.md` for how it was made).
const EMBEDDED_WORDS: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/corpus/url-words.txt"));

/// Top-level sections that ordinary sites use. Each secret takes a few of them (its site's
/// sections), so URL shapes differ between deployments; the first path segment is one of those.
const SECTIONS: &[&str] = &[
    "archive",
    "articles",
    "blog",
    "community",
    "essays",
    "events",
    "features",
    "guides",
    "journal",
    "letters",
    "library",
    "news",
    "notes",
    "posts",
    "reports",
    "resources",
    "reviews",
    "stories",
    "topics",
    "writing",
    "about",
    "docs",
    "learn",
    "insights",
    "updates",
    "press",
    "media",
    "projects",
    "research",
    "magazine",
    "columns",
    "opinion",
    "culture",
    "travel",
    "food",
    "science",
    "history",
    "tech",
    "books",
    "photos",
    "podcast",
    "talks",
    "tutorials",
    "recipes",
    "interviews",
    "weekly",
    "digest",
    "briefs",
    "analysis",
    "field-notes",
    "dispatches",
    "notebook",
    "almanac",
    "chronicle",
    "gazette",
    "bulletin",
    "review",
];

/// Sections a site has: this many from [`SECTIONS`].
const SITE_SECTIONS: usize = 6;

/// Mints and recognises trap URLs under one secret.
#[derive(Clone)]
pub struct TrapUrls {
    key: [u8; 16],
    /// This secret's sections (indexes into [`SECTIONS`]) and date style in paths.
    sections: [u8; SITE_SECTIONS],
    dates: u8,
    words: Vec<Box<str>>,
    index: HashMap<Box<str>, u16>,
}

/// Why a slug dictionary was rejected.
#[derive(Debug, thiserror::Error)]
#[error("the URL word list needs {WORD_COUNT} distinct lowercase a-z words, found {found}")]
pub struct WordListError {
    found: usize,
}

impl TrapUrls {
    /// Builds the minter/checker for `secret` with the embedded word list.
    pub fn new(secret: &[u8]) -> Self {
        Self::with_words(secret, EMBEDDED_WORDS).expect("the embedded word list is valid (tested)")
    }

    /// Builds the minter/checker with another word list: the first [`WORD_COUNT`] distinct
    /// lowercase a-z words of `text`, one per line.
    pub fn with_words(secret: &[u8], text: &str) -> Result<Self, WordListError> {
        let mut words = Vec::with_capacity(WORD_COUNT);
        let mut index = HashMap::with_capacity(WORD_COUNT);
        for word in text.lines().map(str::trim) {
            if words.len() == WORD_COUNT {
                break;
            }
            if word.is_empty() || !word.bytes().all(|b| b.is_ascii_lowercase()) {
                continue;
            }
            let word: Box<str> = word.into();
            if index.contains_key(&word) {
                continue;
            }
            index.insert(word.clone(), words.len() as u16);
            words.push(word);
        }
        if words.len() < WORD_COUNT {
            return Err(WordListError { found: words.len() });
        }
        let derived = blake3::derive_key("quagmire 2026-12 trap-url tag", secret);
        let mut key = [0; 16];
        key.copy_from_slice(&derived[..16]);
        let shape = blake3::derive_key("quagmire 2026-12 trap-url shape", secret);
        let mut sections = [0u8; SITE_SECTIONS];
        let mut taken = 0;
        for &byte in shape.iter().cycle().skip(1).take(256) {
            let section = (usize::from(byte) % SECTIONS.len()) as u8;
            if taken < SITE_SECTIONS && !sections[..taken].contains(&section) {
                sections[taken] = section;
                taken += 1;
            }
        }
        Ok(TrapUrls { key, sections, dates: shape[0] % 4, words, index })
    }

    /// This secret's site sections, the first path segment of its URLs.
    pub fn sections(&self) -> Vec<&'static str> {
        self.sections.iter().map(|&section| SECTIONS[usize::from(section)]).collect()
    }

    /// The slug dictionary, in tag order.
    pub fn words(&self) -> &[Box<str>] {
        &self.words
    }

    /// Writes a fresh trap URL path (starting with `/`) to `out`, chosen by `rng`.
    pub fn mint<R: Rng + ?Sized>(&self, rng: &mut R, out: &mut Vec<u8>) {
        let start = out.len();
        out.push(b'/');
        let section = self.sections[below(rng, SITE_SECTIONS)];
        out.extend_from_slice(SECTIONS[usize::from(section)].as_bytes());
        out.push(b'/');
        match below(rng, 4) {
            0 => {}
            1 => {
                out.extend_from_slice(self.words[below(rng, WORD_COUNT)].as_bytes());
                out.push(b'/');
            }
            // The site's date style: year and month, year alone, the full date, or none.
            _ => {
                let (year, month, day) = (2008 + below(rng, 18), 1 + below(rng, 12), 1 + below(rng, 28));
                match self.dates {
                    0 => {
                        push_number(out, year, 4);
                        out.push(b'/');
                        push_number(out, month, 2);
                        out.push(b'/');
                    }
                    1 => {
                        push_number(out, year, 4);
                        out.push(b'/');
                    }
                    2 => {
                        push_number(out, year, 4);
                        out.push(b'/');
                        push_number(out, month, 2);
                        out.push(b'/');
                        push_number(out, day, 2);
                        out.push(b'/');
                    }
                    _ => {}
                }
            }
        }
        // One to three free words make the slug read naturally and give each prefix many URLs.
        for _ in 0..1 + below(rng, 3) {
            out.extend_from_slice(self.words[below(rng, WORD_COUNT)].as_bytes());
            out.push(b'-');
        }
        let tag = self.tag(&out[start..]);
        for (i, word_index) in tag.iter().enumerate() {
            if i > 0 {
                out.push(b'-');
            }
            out.extend_from_slice(self.words[*word_index as usize].as_bytes());
        }
        // Some sites end pages with a slash or `.html`; the check accepts both.
        match below(rng, 6) {
            0 => out.push(b'/'),
            1 => out.extend_from_slice(b".html"),
            _ => {}
        }
    }

    /// Whether `uri` (a path, optionally with a query string or fragment) is a trap URL minted
    /// under this secret.
    pub fn is_trap(&self, uri: &str) -> bool {
        let end = uri.find(['?', '#']).unwrap_or(uri.len());
        let mut path = &uri[..end];
        path = path.strip_suffix('/').or_else(|| path.strip_suffix(".html")).unwrap_or(path);
        let Some(slug_start) = path.rfind('/').map(|i| i + 1) else {
            return false;
        };
        let mut tag = [0u16; TAG_WORDS];
        let mut cut = path.len();
        for slot in tag.iter_mut().rev() {
            let word_start = path[slug_start..cut].rfind('-').map_or(slug_start, |i| slug_start + i + 1);
            match self.index.get(&path[word_start..cut]) {
                Some(&index) => *slot = index,
                None => return false,
            }
            if word_start == slug_start {
                // The slug has no free word before the tag, so it was not minted here.
                return false;
            }
            cut = word_start - 1;
        }
        self.tag(&path.as_bytes()[..cut + 1]) == tag
    }

    /// The tag words for `prefix` (everything in the path before the tag, ending in `-`).
    fn tag(&self, prefix: &[u8]) -> [u16; TAG_WORDS] {
        let mut hasher = SipHasher24::new_with_key(&self.key);
        hasher.write(prefix);
        let bits = hasher.finish();
        let mask = (1u64 << WORD_BITS) - 1;
        std::array::from_fn(|i| ((bits >> (WORD_BITS * i as u32)) & mask) as u16)
    }
}

/// Whether a request for a trap URL, with these headers, for `host`, is evidence against the
/// client. Trap URLs are public (the trap links to them), so any page can make its readers'
/// browsers ask for them: an `<img src>` or a link on another site is the other site's doing,
/// not the reader's. So a request the browser marks cross-site, one for a subresource (an image,
/// a script, a style sheet: no page of this site embeds a trap URL), and, from clients that send
/// no fetch metadata, one with another site's `Referer` or asking for an image, is no trap hit.
/// A crawler that forges these to keep its record clean still gets the trap page for the URL;
/// it only loses nothing by asking.
pub(crate) fn is_evidence(headers: &impl HeaderLines, host: &str) -> bool {
    let first = |name: &'static str| headers.lines(name).next().map(str::trim);
    if first("sec-fetch-site").is_some_and(|site| site.eq_ignore_ascii_case("cross-site")) {
        return false;
    }
    if let Some(dest) = first("sec-fetch-dest") {
        return ["document", "iframe", "frame"].iter().any(|page| dest.eq_ignore_ascii_case(page));
    }
    if first("accept")
        .is_some_and(|accept| accept.get(..6).is_some_and(|kind| kind.eq_ignore_ascii_case("image/")))
    {
        return false;
    }
    match first("referer").and_then(referer_host) {
        Some(referer) => host.is_empty() || referer.eq_ignore_ascii_case(host_without_port(host)),
        None => true,
    }
}

/// The host of a `Referer` URL, without port or user information.
fn referer_host(referer: &str) -> Option<&str> {
    let rest = referer.split_once("://")?.1;
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    Some(host_without_port(authority.rsplit('@').next().unwrap_or(authority)))
}

fn host_without_port(host: &str) -> &str {
    if let Some(bracketed) = host.strip_prefix('[') {
        return bracketed.split(']').next().unwrap_or(bracketed);
    }
    host.rsplit_once(':')
        .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
        .map_or(host, |(name, _)| name)
}

#[cfg(test)]
mod tests;
