//! Lists the rules consult (and crawler verification and `lists update` read), compiled once at
//! load: user-agent tokens (matched as whole tokens,
//! case-insensitively, with Aho-Corasick), networks (prefix sets, optionally labelled), ASNs and
//! URL paths.
//!
//! A list file has one entry per line; `#` starts a comment. Its kind follows from its entries:
//! `<number> [name]` is an ASN list, `[label] <cidr>` a network list, `<label> .<domain>` a domain
//! list (the DNS domains a crawler's hosts are named under), `<path pattern> [label]` (a pattern
//! starts with `/` or `*`) a path list, anything else a list of user-agent tokens (one per line,
//! spaces allowed).

use std::collections::{HashMap, HashSet};
use std::ffi::CStr;
use std::net::IpAddr;

use aho_corasick::automaton::{Automaton, StateID};
use aho_corasick::dfa::{self, DFA};
use aho_corasick::{Anchored, MatchKind, StartKind};
use ipnet::IpNet;

use crate::support::prefix_map::PrefixMap;
use crate::vocabulary::AiKind;

mod recent;
pub(crate) mod update;

/// The embedded default lists (file name, text): the rules' lists when no folder is configured,
/// and the stand-in for any of them a folder lacks.
pub const DEFAULT_LISTS: &[(&str, &str)] = &[
    ("always-allowed-paths.txt", include_str!("../rules/lists/always-allowed-paths.txt")),
    ("program-paths.txt", include_str!("../rules/lists/program-paths.txt")),
    ("ai-crawlers.txt", include_str!("../rules/lists/ai-crawlers.txt")),
    ("http-libraries.txt", include_str!("../rules/lists/http-libraries.txt")),
    ("search-engines.txt", include_str!("../rules/lists/search-engines.txt")),
    ("ai-crawler-ranges.txt", include_str!("../rules/lists/ai-crawler-ranges.txt")),
    ("datacenter-asns.txt", include_str!("../rules/lists/datacenter-asns.txt")),
    ("crawler-domains.txt", include_str!("../rules/lists/crawler-domains.txt")),
    ("link-previews.txt", include_str!("../rules/lists/link-previews.txt")),
    ("monitors.txt", include_str!("../rules/lists/monitors.txt")),
    ("web-archives.txt", include_str!("../rules/lists/web-archives.txt")),
    ("web-archive-asns.txt", include_str!("../rules/lists/web-archive-asns.txt")),
];

/// A list file entry that is malformed, or a list past its bounds.
#[derive(Debug, thiserror::Error)]
#[error("rules list {file}, line {line}: {message}")]
pub struct ListFileError {
    /// The list file.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Most entries of a user-agent token list.
pub(crate) const MAX_TOKENS: usize = 5_000;
/// Most bytes of a user-agent token list's entries together (the shipped list has about 2 KB):
/// the automaton they compile into takes at most 32 MiB at this size (about 30 MiB for tokens
/// that share no prefixes, measured in the tests below).
pub(crate) const MAX_TOKEN_BYTES: usize = 64 * 1024;

/// A compiled list.
pub enum List {
    /// User-agent product tokens.
    Tokens(TokenList),
    /// Network prefixes, each with a label (such as the crawler that publishes it).
    Networks(NetworkList),
    /// Autonomous system numbers with names.
    Asns(AsnList),
    /// URL paths: exact, by prefix or by suffix, each with a label.
    Paths(PathList),
    /// DNS domains, each with a label (the crawler whose hosts are named under it).
    Domains(DomainList),
}

impl List {
    /// Parses the list file `name` (for errors) from `text`.
    pub fn parse(name: &str, text: &str) -> Result<List, ListFileError> {
        let entries: Vec<(usize, &str)> = text
            .lines()
            .enumerate()
            .map(|(index, line)| (index + 1, line.split('#').next().unwrap_or("").trim()))
            .filter(|(_, line)| !line.is_empty())
            .collect();
        let first = entries.first().map_or("", |(_, line)| line);
        let first_field = first.split_whitespace().next().unwrap_or("");
        let bad = |line: usize, message: String| ListFileError { file: name.to_string(), line, message };
        if first_field.bytes().all(|b| b.is_ascii_digit()) && !first_field.is_empty() {
            let mut asns = HashMap::new();
            for (line, entry) in entries {
                let (number, label) = entry.split_once(char::is_whitespace).unwrap_or((entry, ""));
                let number =
                    number.parse::<u32>().map_err(|_| bad(line, format!("`{number}` is not an ASN")))?;
                asns.insert(number, label.trim().to_string());
            }
            return Ok(List::Asns(AsnList { asns }));
        }
        if first_field.starts_with(['/', '*']) {
            let mut paths = PathList::default();
            for (line, entry) in entries {
                let (pattern, label) = entry.split_once(char::is_whitespace).unwrap_or((entry, ""));
                paths.insert(pattern, label.trim()).map_err(|message| bad(line, message))?;
            }
            return Ok(List::Paths(paths));
        }
        if first.split_whitespace().nth(1).is_some_and(|field| field.starts_with('.')) {
            let mut domains = DomainList::default();
            for (line, entry) in entries {
                let fields: Vec<&str> = entry.split_whitespace().collect();
                let [label, domain] = fields.as_slice() else {
                    return Err(bad(line, "expected `<label> .<domain>`".into()));
                };
                domains.insert(label, domain).map_err(|message| bad(line, message))?;
            }
            domains.label_tokens = TokenList::new(domains.by_label.keys().cloned().collect())
                .map_err(|error| bad(1, format!("cannot compile its labels: {error}")))?;
            return Ok(List::Domains(domains));
        }
        if first
            .split_whitespace()
            .any(|field| field.parse::<IpNet>().is_ok() || field.parse::<IpAddr>().is_ok())
        {
            let mut networks = NetworkList::default();
            for (line, entry) in entries {
                let fields: Vec<&str> = entry.split_whitespace().collect();
                let (label, network) = match fields.as_slice() {
                    [network] => ("", *network),
                    [label, network] => (*label, *network),
                    _ => return Err(bad(line, "expected `[label] <cidr>`".into())),
                };
                let network = network
                    .parse::<IpNet>()
                    .or_else(|_| network.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| bad(line, format!("`{network}` is not a network")))?;
                networks.insert(network, label);
            }
            networks.label_tokens =
                TokenList::new(networks.labels().into_iter().map(str::to_string).collect())
                    .map_err(|error| bad(1, format!("cannot compile its labels: {error}")))?;
            return Ok(List::Networks(networks));
        }
        // A token entry is the whole line, spaces included ("ChatGPT Agent" is one entry).
        // The automaton grows with the tokens' bytes: bounded, so that no list file (a source's
        // or an operator's) can make a load, which holds two rulesets during a reload, take
        // gigabytes.
        if entries.len() > MAX_TOKENS {
            return Err(bad(entries[MAX_TOKENS].0, format!("more than {MAX_TOKENS} user-agent tokens")));
        }
        let mut bytes = 0;
        for (line, entry) in &entries {
            bytes += entry.len();
            if bytes > MAX_TOKEN_BYTES {
                return Err(bad(*line, format!("more than {MAX_TOKEN_BYTES} bytes of user-agent tokens")));
            }
        }
        // `[name]` starts a section: the tokens after it, up to the next, carry its label
        // (ai-crawlers.txt's kinds); tokens before any section carry none.
        let kinded = std::path::Path::new(name).file_name().is_some_and(|file| file == AI_CRAWLERS_FILE);
        let (mut tokens, mut labels, mut names) = (Vec::new(), Vec::new(), Vec::<String>::new());
        let mut label = NO_LABEL;
        for (line, entry) in entries {
            let Some(section) = section(entry) else {
                tokens.push(entry.to_string());
                labels.push(label);
                continue;
            };
            if kinded && AiKind::named(section).is_none() {
                return Err(bad(
                    line,
                    format!("`[{section}]` is no kind of AI crawler; kinds are {}", AiKind::names()),
                ));
            }
            label = match names.iter().position(|known| known == section) {
                Some(index) => index as u16,
                None if names.len() < usize::from(NO_LABEL) => {
                    names.push(section.to_string());
                    (names.len() - 1) as u16
                }
                None => return Err(bad(line, format!("more than {NO_LABEL} sections"))),
            };
        }
        let tokens = TokenList::with_labels(tokens, labels, names)
            .map_err(|error| bad(1, format!("cannot compile the list: {error}")))?;
        Ok(List::Tokens(tokens))
    }

    /// A short name of the list's kind, for messages (a C string: Lua's error formatting takes
    /// it).
    pub fn kind(&self) -> &'static CStr {
        match self {
            List::Tokens(_) => c"user-agent tokens",
            List::Networks(_) => c"networks",
            List::Asns(_) => c"ASNs",
            List::Paths(_) => c"paths",
            List::Domains(_) => c"domains",
        }
    }

    /// Entries in the list.
    pub fn len(&self) -> usize {
        match self {
            List::Tokens(list) => list.tokens.len(),
            List::Networks(list) => list.len,
            List::Asns(list) => list.asns.len(),
            List::Paths(list) => list.len(),
            List::Domains(list) => list.len,
        }
    }

    /// Whether the list has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The list whose sections are kinds of AI crawler ([`AiKind`]), checked as it is read.
pub(crate) const AI_CRAWLERS_FILE: &str = "ai-crawlers.txt";

/// A token's label index when it is in no section.
const NO_LABEL: u16 = u16::MAX;

/// The name of a section header line of a token list, `[name]`: a letter, then letters, digits,
/// `-` and `_` (a user-agent token never starts with `[`).
pub(crate) fn section(entry: &str) -> Option<&str> {
    let name = entry.strip_prefix('[')?.strip_suffix(']')?;
    let mut bytes = name.bytes();
    let valid = bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    valid.then_some(name)
}

/// User-agent tokens matched as whole tokens: `Code` matches `Code/1.0` or `foo Code` but not
/// `BarcodeReader/2.0` or `Unicode-Feed-Reader/1.0`.
///
/// A whole token can only start where a token starts, so instead of scanning the text for every
/// occurrence and then checking its edges, `find` walks an anchored automaton from each token
/// start; most walks die within a byte or two.
pub struct TokenList {
    /// Tells this list's answers from another's in the memo (`recent.rs`).
    id: u64,
    automaton: DFA,
    tokens: Vec<String>,
    /// Per token, its section's index in `label_names` (`NO_LABEL` for none).
    labels: Vec<u16>,
    label_names: Vec<String>,
    /// `TOKEN_CHAR` for bytes that continue a token; `ENTRY_START` for the bytes (either case)
    /// some entry starts with: a walk from any other byte would die at once, and skipping it is
    /// cheaper than a step of the automaton.
    classes: [u8; 256],
}

/// Byte classes for `TokenList::find`.
const TOKEN_CHAR: u8 = 1;
const ENTRY_START: u8 = TOKEN_CHAR << 1;

impl TokenList {
    /// Compiles `tokens`; fails only for a list too large for the automaton.
    pub fn new(tokens: Vec<String>) -> Result<TokenList, aho_corasick::BuildError> {
        let labels = vec![NO_LABEL; tokens.len()];
        TokenList::with_labels(tokens, labels, Vec::new())
    }

    /// Compiles `tokens`, each with the label `labels` gives it: an index into `names`, or
    /// `NO_LABEL`.
    fn with_labels(
        tokens: Vec<String>,
        labels: Vec<u16>,
        label_names: Vec<String>,
    ) -> Result<TokenList, aho_corasick::BuildError> {
        let automaton = dfa::Builder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .start_kind(StartKind::Anchored)
            .build(&tokens)?;
        let mut classes = TOKEN_CHARS.map(|continues| if continues { TOKEN_CHAR } else { 0 });
        for first in tokens.iter().filter_map(|token| token.bytes().next()) {
            classes[usize::from(first.to_ascii_lowercase())] |= ENTRY_START;
            classes[usize::from(first.to_ascii_uppercase())] |= ENTRY_START;
        }
        Ok(TokenList { id: recent::next_list_id(), automaton, tokens, labels, label_names, classes })
    }

    /// Bytes of heap the compiled automaton and the tokens take.
    pub fn heap_bytes(&self) -> usize {
        self.automaton.memory_usage() + self.tokens.iter().map(|token| token.capacity()).sum::<usize>()
    }

    /// The first token (by position) found in `text` as a whole token; answers for texts seen
    /// recently on this thread come from a memo (see `recent.rs`).
    pub fn find<T: AsRef<[u8]> + ?Sized>(&self, text: &T) -> Option<&str> {
        self.find_labelled(text).map(|(token, _)| token)
    }

    /// The first token found in `text` (as [`TokenList::find`]), with the label of the section it
    /// is in, if it is in one.
    pub fn find_labelled<T: AsRef<[u8]> + ?Sized>(&self, text: &T) -> Option<(&str, Option<&str>)> {
        let bytes = text.as_ref();
        let index = recent::answer(self.id, bytes, || self.walk(bytes).and_then(|i| u32::try_from(i).ok()))?;
        let index = index as usize;
        let token = self.tokens.get(index)?;
        let label = self.labels.get(index).and_then(|&label| self.label_names.get(usize::from(label)));
        Some((token.as_str(), label.map(String::as_str)))
    }

    /// The kind of AI crawler `text` names, when the list's section for its token is one.
    pub fn ai_kind<T: AsRef<[u8]> + ?Sized>(&self, text: &T) -> Option<AiKind> {
        self.find_labelled(text).and_then(|(_, label)| AiKind::named(label?))
    }

    /// `find` without the memo: walks the automaton from each token start; the token's index.
    fn walk(&self, bytes: &[u8]) -> Option<usize> {
        let start = self.automaton.start_state(Anchored::Yes).ok()?;
        // A walk starts where an entry's first byte follows a non-token byte (or the start).
        let mut previous = 0;
        for (at, &byte) in bytes.iter().enumerate() {
            let class = self.classes[usize::from(byte)];
            // ENTRY_START is TOKEN_CHAR shifted by one: one test for "starts an entry, after a
            // byte that does not continue a token".
            if class & !(previous << 1) & ENTRY_START != 0
                && let Some(found) = self.whole_token_at(bytes, at, start)
            {
                return Some(found);
            }
            previous = class;
        }
        None
    }

    /// The entry that matches `bytes` from `from` up to a token end, if any. Not inlined: it
    /// runs for few bytes, and inlined it costs the scan in `find` its registers.
    #[inline(never)]
    fn whole_token_at(&self, bytes: &[u8], from: usize, start: StateID) -> Option<usize> {
        let automaton = &self.automaton;
        let mut state = start;
        for (len, &byte) in bytes[from..].iter().enumerate().map(|(i, b)| (i + 1, b)) {
            state = automaton.next_state(Anchored::Yes, state, byte);
            if !automaton.is_special(state) {
                continue;
            }
            if automaton.is_dead(state) {
                return None;
            }
            let ends_token = bytes.get(from + len).is_none_or(|&b| !is_token_char(b));
            if automaton.is_match(state) && ends_token {
                // A state's matches also include entries that are suffixes of the walked text
                // (they serve unanchored searches); only an entry as long as the walk starts here.
                let found = (0..automaton.match_len(state))
                    .map(|index| automaton.match_pattern(state, index))
                    .find(|&pattern| automaton.pattern_len(pattern) == len);
                if let Some(pattern) = found {
                    return Some(pattern.as_usize());
                }
            }
        }
        None
    }
}

/// Characters that continue a user-agent token: letters, digits, `-` and `_`. Anything else
/// (`/version`, `;`, space, brackets, `,`) ends it.
fn is_token_char(byte: u8) -> bool {
    TOKEN_CHARS[usize::from(byte)]
}

const TOKEN_CHARS: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 256 {
        let b = byte as u8;
        table[byte] = b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
        byte += 1;
    }
    table
};

/// Network prefixes grouped by length, so a lookup is one hash probe per distinct length.
pub struct NetworkList {
    /// Each network's label, by its index in `labels`.
    networks: PrefixMap<u32>,
    labels: Vec<String>,
    label_ids: HashMap<String, u32>,
    /// The labels as user-agent tokens, for `claimed`.
    label_tokens: TokenList,
    len: usize,
}

impl Default for NetworkList {
    fn default() -> Self {
        NetworkList {
            networks: PrefixMap::default(),
            labels: Vec::new(),
            label_ids: HashMap::new(),
            label_tokens: TokenList::new(Vec::new()).expect("an empty list compiles"),
            len: 0,
        }
    }
}

impl NetworkList {
    /// The label a user agent names as a whole token: which of the list's crawlers it claims.
    pub fn claimed<T: AsRef<[u8]> + ?Sized>(&self, user_agent: &T) -> Option<&str> {
        self.label_tokens.find(user_agent)
    }

    fn insert(&mut self, network: IpNet, label: &str) {
        let label = match self.label_ids.get(label) {
            Some(&id) => id,
            None => {
                let id = self.labels.len() as u32;
                self.labels.push(label.to_string());
                self.label_ids.insert(label.to_string(), id);
                id
            }
        };
        self.networks.insert(network, label);
        self.len += 1;
    }

    /// The label of the longest prefix containing `address` (empty for unlabelled lists), if any.
    pub fn find(&self, address: IpAddr) -> Option<&str> {
        self.networks.get(address).map(|&label| self.labels[label as usize].as_str())
    }

    /// Labels in the list (for example the crawlers whose ranges it holds).
    pub fn labels(&self) -> HashSet<&str> {
        self.labels.iter().map(String::as_str).filter(|label| !label.is_empty()).collect()
    }
}

pub(crate) use crate::support::prefix_map::canonical;

/// DNS domains by label: the domains under which a crawler's hosts are named, for
/// forward-confirmed reverse DNS.
pub struct DomainList {
    /// Per label, its domains, lowercase, each with its leading dot (`.googlebot.com`).
    by_label: HashMap<String, Vec<String>>,
    /// The labels as user-agent tokens, for `claimed`.
    label_tokens: TokenList,
    len: usize,
}

impl Default for DomainList {
    fn default() -> Self {
        DomainList {
            by_label: HashMap::new(),
            label_tokens: TokenList::new(Vec::new()).expect("an empty list compiles"),
            len: 0,
        }
    }
}

impl DomainList {
    fn insert(&mut self, label: &str, domain: &str) -> Result<(), String> {
        let name = domain.strip_prefix('.').unwrap_or(domain).trim_end_matches('.');
        let valid = !name.is_empty()
            && name.len() <= 253
            && name.split('.').all(|part| {
                !part.is_empty()
                    && part.len() <= 63
                    && part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            });
        if !valid || !name.contains('.') {
            return Err(format!("`{domain}` is not a domain such as `.googlebot.com`"));
        }
        self.by_label.entry(label.to_string()).or_default().push(format!(".{}", name.to_ascii_lowercase()));
        self.len += 1;
        Ok(())
    }

    /// The label a user agent names as a whole token: which of the list's crawlers it claims.
    pub fn claimed<T: AsRef<[u8]> + ?Sized>(&self, user_agent: &T) -> Option<&str> {
        self.label_tokens.find(user_agent)
    }

    /// The domains of `label` (empty for a label not in the list).
    pub fn domains(&self, label: &str) -> &[String] {
        self.by_label.get(label).map_or(&[], Vec::as_slice)
    }

    /// Whether host name `name` (any case, with or without the root's trailing dot) is under one
    /// of `label`'s domains: `crawl-66-249-66-1.googlebot.com` is under `.googlebot.com`, and
    /// `googlebot.com.evil.example` is not.
    pub fn names_host_of(&self, label: &str, name: &str) -> bool {
        self.domains(label).iter().any(|domain| is_under(name, domain))
    }

    /// The label of a domain that host name `name` is under, if any.
    pub fn find(&self, name: &str) -> Option<&str> {
        self.by_label.keys().find(|label| self.names_host_of(label, name)).map(String::as_str)
    }
}

/// Whether host name `name` (any case, with or without the root's trailing dot) is a host under
/// `domain` (written with its leading dot, `.googlebot.com`); the domain itself is not.
pub(crate) fn is_under(name: &str, domain: &str) -> bool {
    let name = name.trim_end_matches('.');
    name.len() > domain.len()
        && name.as_bytes()[name.len() - domain.len()..].eq_ignore_ascii_case(domain.as_bytes())
}

/// ASNs with their names.
pub struct AsnList {
    asns: HashMap<u32, String>,
}

impl AsnList {
    /// The name of `asn` if it is in the list (empty when the list gives none).
    pub fn find(&self, asn: u32) -> Option<&str> {
        self.asns.get(&asn).map(String::as_str)
    }
}

/// URL paths with labels: `/robots.txt` matches that path exactly, `/feeds/*` every path that
/// starts with `/feeds/`, `*.rss` every path that ends with `.rss`. Matching is case-sensitive,
/// as paths are. Lists are short (a path list runs on every request in the default rules), so
/// prefixes and suffixes are compared one by one.
#[derive(Default)]
pub struct PathList {
    exact: HashMap<Vec<u8>, String>,
    prefixes: Vec<(Vec<u8>, String)>,
    suffixes: Vec<(Vec<u8>, String)>,
}

impl PathList {
    fn insert(&mut self, pattern: &str, label: &str) -> Result<(), String> {
        let suffix = pattern.strip_prefix('*');
        let prefix = pattern.strip_suffix('*');
        let fixed = suffix.or(prefix).unwrap_or(pattern);
        if suffix.is_some() && prefix.is_some() {
            return Err(format!("`{pattern}`: a `*` may start or end a pattern, not both"));
        }
        if fixed.contains('*') {
            return Err(format!("`{pattern}`: a `*` may only start or end a pattern"));
        }
        if suffix.is_none() && !pattern.starts_with('/') {
            return Err(format!("`{pattern}`: a path pattern starts with `/` or `*`"));
        }
        let entry = (fixed.as_bytes().to_vec(), label.to_string());
        match (suffix, prefix) {
            (Some(_), _) => self.suffixes.push(entry),
            (_, Some(_)) => self.prefixes.push(entry),
            _ => {
                self.exact.insert(entry.0, entry.1);
            }
        }
        Ok(())
    }

    /// The label of the first pattern that `path` matches: an exact path first, then prefixes,
    /// then suffixes, each in file order.
    pub fn find(&self, path: &[u8]) -> Option<&str> {
        let label = self.exact.get(path).or_else(|| {
            let prefix = self.prefixes.iter().find(|(prefix, _)| path.starts_with(prefix));
            let suffix = || self.suffixes.iter().find(|(suffix, _)| path.ends_with(suffix));
            prefix.or_else(suffix).map(|(_, label)| label)
        })?;
        Some(label.as_str())
    }

    fn len(&self) -> usize {
        self.exact.len() + self.prefixes.len() + self.suffixes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(list: &[&str]) -> TokenList {
        TokenList::new(list.iter().map(|t| t.to_string()).collect()).unwrap()
    }

    #[test]
    fn tokens_match_whole_tokens_only() {
        let list = tokens(&["Code", "GPTBot", "CCBot", "python-requests"]);
        assert_eq!(
            list.find("Mozilla/5.0 (compatible; GPTBot/1.2; +https://openai.com/gptbot)"),
            Some("GPTBot")
        );
        assert_eq!(list.find("ccbot/2.0 (https://commoncrawl.org/faq/)"), Some("CCBot"));
        assert_eq!(list.find("python-requests/2.31.0"), Some("python-requests"));
        assert_eq!(list.find("Code/1.0"), Some("Code"));
        // iocaine's substring matching traps these; token matching must not.
        assert_eq!(list.find("BarcodeReader/2.0"), None);
        assert_eq!(list.find("Unicode-Feed-Reader/1.0"), None);
        assert_eq!(list.find("Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0"), None);
        // A longer entry that does not end on a token boundary must not hide a shorter one that does.
        let list = tokens(&["Foo", "Foo/1", "Kangaroo Bot", "(crawler"]);
        assert_eq!(list.find("x Foo/12"), Some("Foo"));
        assert_eq!(list.find("x Foo/1 y"), Some("Foo"));
        assert_eq!(list.find("a kangaroo bot/1.0"), Some("Kangaroo Bot"));
        assert_eq!(list.find("a kangaroo bots"), None);
        assert_eq!(list.find("Mozilla/5.0 (crawler; +x)"), Some("(crawler"));
        assert_eq!(list.find("FooBar (crawlers)"), None);
        assert_eq!(tokens(&[]).find("anything"), None);
    }

    /// Distinct tokens of `len` bytes each that share as few prefixes as a trie allows (the
    /// most automaton states per byte), from a deterministic mix.
    fn hostile_tokens(count: usize, len: usize) -> String {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut text = String::new();
        for _ in 0..count {
            for _ in 0..len {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                text.push(ALPHABET[(state % ALPHABET.len() as u64) as usize] as char);
            }
            text.push('\n');
        }
        text
    }

    #[test]
    fn a_token_list_is_bounded_in_entries_bytes_and_so_memory() {
        // The largest list that loads: its automaton stays within the bound the docs state.
        let largest = hostile_tokens(MAX_TOKEN_BYTES / 32, 32);
        let List::Tokens(list) = List::parse("largest.txt", &largest).unwrap() else { panic!("not tokens") };
        let bytes = list.heap_bytes();
        assert!(bytes < 32 << 20, "{bytes} bytes for the largest token list");
        // A 10 MB list (400k tokens, as a hostile robots.json would make) is refused at once,
        // before anything is compiled, with the line where it went past the bound.
        let huge = hostile_tokens(400_000, 26);
        let error = List::parse("huge.txt", &huge).err().expect("refused").to_string();
        assert!(error.contains("huge.txt, line 5001: more than 5000 user-agent tokens"), "{error}");
        let long = hostile_tokens(MAX_TOKEN_BYTES / 1000 + 1, 1000);
        let error = List::parse("long.txt", &long).err().expect("refused").to_string();
        assert!(error.contains("more than 65536 bytes of user-agent tokens"), "{error}");
    }

    #[test]
    fn list_kinds_follow_from_entries() {
        let asns = List::parse("asns.txt", "# hosting\n16509 Amazon\n24940 Hetzner Online\n").unwrap();
        let List::Asns(asns) = asns else { panic!("expected ASNs") };
        assert_eq!(asns.find(24940), Some("Hetzner Online"));
        assert_eq!(asns.find(3320), None);

        let networks = List::parse(
            "se.txt",
            "Googlebot 66.249.64.0/27\nbingbot 157.55.39.0/24\nbingbot 2620:1ec:c11::/48\n",
        )
        .unwrap();
        let List::Networks(networks) = networks else { panic!("expected networks") };
        assert_eq!(networks.find("66.249.64.5".parse().unwrap()), Some("Googlebot"));
        assert_eq!(networks.find("66.249.64.99".parse().unwrap()), None);
        assert_eq!(networks.find("2620:1ec:c11::7".parse().unwrap()), Some("bingbot"));
        assert_eq!(networks.find("::ffff:157.55.39.1".parse().unwrap()), Some("bingbot"));
        // An entry written IPv4-mapped matches both spellings (it matched neither; list_file fuzz
        // target's property).
        let List::Networks(mapped) = List::parse("mapped.txt", "mapped ::ffff:192.0.2.0/120\n").unwrap()
        else {
            panic!("expected networks")
        };
        assert_eq!(mapped.find("192.0.2.9".parse().unwrap()), Some("mapped"));
        assert_eq!(mapped.find("::ffff:192.0.2.9".parse().unwrap()), Some("mapped"));
        assert_eq!(mapped.find("192.0.3.9".parse().unwrap()), None);
        let googlebot = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
        assert_eq!(networks.claimed(googlebot), Some("Googlebot"));
        assert_eq!(networks.claimed("Mozilla/5.0 (Windows NT 10.0) Chrome/120.0"), None);

        let List::Tokens(tokens) = List::parse("ua.txt", "GPTBot\nClaudeBot\n").unwrap() else { panic!() };
        assert_eq!(tokens.find("claudebot"), Some("ClaudeBot"));

        let paths = "/robots.txt robots.txt\n/feeds/* feed\n*.rss\n/.well-known/* well known\n";
        let List::Paths(paths) = List::parse("paths.txt", paths).unwrap() else { panic!("expected paths") };
        for (path, label) in [
            ("/robots.txt", Some("robots.txt")),
            ("/robots.txt.bak", None),
            ("/blog/robots.txt", None),
            ("/feeds/all", Some("feed")),
            ("/feeds", None),
            ("/blog/index.rss", Some("")),
            ("/blog/index.RSS", None),
            ("/.well-known/acme-challenge/x", Some("well known")),
            ("/", None),
        ] {
            assert_eq!(paths.find(path.as_bytes()), label, "{path}");
        }
    }

    #[test]
    fn broken_entries_name_file_and_line() {
        let err = List::parse("asns.txt", "16509 Amazon\nAS24940 Hetzner\n").err().unwrap();
        assert_eq!(err.to_string(), "rules list asns.txt, line 2: `AS24940` is not an ASN");
        let err = List::parse("nets.txt", "10.0.0.0/8\n10.0.0.0/99\n").err().unwrap();
        assert!(err.to_string().contains("line 2"), "{err}");
        let err = List::parse("paths.txt", "/a\n# note\n/b/*/c\n").err().unwrap();
        assert_eq!(
            err.to_string(),
            "rules list paths.txt, line 3: `/b/*/c`: a `*` may only start or end a pattern"
        );
        let err = List::parse("paths.txt", "/a\n*b*\n").err().unwrap();
        assert!(err.to_string().contains("line 2"), "{err}");
        let err = List::parse("paths.txt", "/a\nfeeds/*\n").err().unwrap();
        assert_eq!(
            err.to_string(),
            "rules list paths.txt, line 2: `feeds/*`: a path pattern starts with `/` or `*`"
        );
    }
}
