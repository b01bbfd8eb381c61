//! The site's own robots.txt, per host: read from files, or fetched from the site's origin on a
//! schedule, compiled once per copy, and matched against each request's user agent and path with
//! RFC 9309's semantics, so rules can tell a crawler that obeys the site from one that ignores it.
//!
//! Parsing is the `robotstxt` crate's (a port of Google's parser, with its tolerance of typos and
//! its escaping of patterns); this module groups the lines it reports and matches the patterns.
//! A request's group is the one whose product token its User-Agent names as a whole token (case
//! does not matter), else `*`; within it the longest matching pattern decides, `Allow` winning a
//! tie (RFC 9309, 2.2.2). Matching allocates nothing and runs in time linear in the pattern and
//! path for patterns without `*`.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use robotstxt::RobotsParseHandler;

pub(crate) use crate::facts::claims::{RobotsAnswer, RobotsCheck};
use crate::lists::TokenList;
use crate::observe::metrics::Metrics;
use crate::support::outbound::{Fetcher, Options};

/// Most bytes of a robots.txt read; RFC 9309 asks crawlers to read at least 500 KiB.
pub(crate) const MAX_BYTES: usize = 512 << 10;
/// Most hosts whose robots.txt is fetched from the origin: hosts come from requests, which a
/// client chooses, so they are bounded.
pub(crate) const MAX_HOSTS: usize = 256;
/// Longest line passed to the parser: the `robotstxt` crate cuts lines past 16,664 bytes itself,
/// and a long line with characters past ASCII makes it slice inside one (a panic, or the next
/// line misread), so lines are cut here first, at a character boundary.
const MAX_LINE_BYTES: usize = 16 << 10;
/// `Allow` and `Disallow` rules kept at most, over all groups (a rule in a block naming several
/// agents counts once per agent): 512 KiB of pathological file cannot become gigabytes.
const MAX_RULES: usize = 100_000;
/// Bytes of the URI a rule is matched against: crawlers cut URLs far shorter (the longest a
/// browser takes is about 2 KB, Google's crawlers 2 KB), and a longer one is for no page.
pub(crate) const MAX_MATCHED_URI: usize = 4096;
/// Bytes one answer may compare, over all the rules it tries: matching is linear (at most the
/// URI's and the pattern's lengths per rule), and this bounds the sum, so a file written to be
/// slow (100,000 `Disallow: /*…` lines) costs a verdict about a millisecond at most. An answer
/// past it is "none", as if the host had no robots.txt.
const MATCH_BUDGET: usize = 4 << 20;
/// The User-Agent quagmire fetches robots.txt with.
const USER_AGENT: &str = concat!("quagmire/", env!("CARGO_PKG_VERSION"), " (robots.txt)");

/// Where the site's robots.txt comes from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RobotsConfig {
    /// A file per host; the host `*` stands for every host without its own.
    pub files: Vec<(String, PathBuf)>,
    /// The site's origin (`http://127.0.0.1:8080`): `/robots.txt` is fetched from it with each
    /// host's `Host` header, for the hosts requests name.
    pub origin: Option<String>,
    /// With an origin: the only hosts whose robots.txt is fetched (lowercase); empty, the first
    /// [`MAX_HOSTS`] hosts requests name.
    pub hosts: Vec<String>,
    /// How often fetched copies are fetched again.
    pub refresh: Duration,
    /// Longest one fetch may take.
    pub timeout: Duration,
}

impl RobotsConfig {
    /// Whether any robots.txt is configured.
    pub fn is_set(&self) -> bool {
        !self.files.is_empty() || self.origin.is_some()
    }
}

/// A robots.txt that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RobotsError {
    /// A configured file cannot be read.
    #[error("cannot read the robots.txt for {host} at {path}: {source}")]
    Read {
        /// The host it is for.
        host: String,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// One compiled robots.txt.
pub(crate) struct RobotsTxt {
    /// Where it came from (a file, or the URL fetched), for `check` and `explain`.
    pub(crate) source: String,
    groups: Vec<Group>,
    /// Every named group's product tokens (lowercase), to find which one a User-Agent names.
    agents: Option<TokenList>,
    /// Product token (lowercase) to its group.
    by_token: HashMap<String, usize>,
    /// The `*` group.
    star: Option<usize>,
}

/// The rules for one or more product tokens (groups naming the same token are merged).
struct Group {
    /// The first product token as written, or `*`.
    name: Arc<str>,
    /// Longest pattern first, `Allow` before `Disallow` of the same length: the first match
    /// decides.
    rules: Vec<Rule>,
}

/// One `Allow` or `Disallow` line.
struct Rule {
    pattern: Box<str>,
    allow: bool,
    line: u32,
    /// The pattern's bytes before its first `*` (all of it, `$` aside, without one): a path that
    /// does not start with them cannot match, which settles most rules with one comparison.
    literal_prefix: usize,
    /// For a pattern anchored by `$`, the bytes between its last `*` and the `$`: a path that
    /// does not end with them cannot match.
    literal_suffix: usize,
}

impl Rule {
    fn new(pattern: &str, allow: bool, line: u32) -> Rule {
        let bytes = pattern.as_bytes();
        let body = bytes.strip_suffix(b"$").unwrap_or(bytes);
        let literal_prefix = body.iter().position(|&b| b == b'*').unwrap_or(body.len());
        let anchored = body.len() < bytes.len();
        let literal_suffix = match body.iter().rposition(|&b| b == b'*') {
            Some(star) if anchored => body.len() - star - 1,
            _ => 0,
        };
        Rule { pattern: Box::from(pattern), allow, line, literal_prefix, literal_suffix }
    }

    /// Whether the rule matches `path`, spending from `budget` what it compares (`None`: the
    /// budget ran out before it could say).
    fn matches(&self, path: &[u8], budget: &mut usize) -> Option<bool> {
        let pattern = self.pattern.as_bytes();
        // The cheap checks first: most rules are settled by their literal prefix.
        *budget = budget.checked_sub(self.literal_prefix.min(path.len()) + 1)?;
        if !path.starts_with(&pattern[..self.literal_prefix]) {
            return Some(false);
        }
        if self.literal_suffix > 0 {
            let body = &pattern[..pattern.len() - 1];
            if !path.ends_with(&body[body.len() - self.literal_suffix..]) {
                return Some(false);
            }
        }
        *budget = budget.checked_sub(path.len() + pattern.len())?;
        Some(matches(path, pattern))
    }
}

impl RobotsTxt {
    /// Compiles `text` (read from `source`). Never fails: what is not a directive is skipped, as
    /// crawlers do.
    pub(crate) fn parse(source: impl Into<String>, text: &str) -> RobotsTxt {
        let source = source.into();
        // The parser compares a byte order mark's bytes with characters, so it never skips one.
        let text = cut_lines(text.strip_prefix('\u{feff}').unwrap_or(text));
        let parsed = std::panic::catch_unwind(|| {
            let mut collect = Collect::default();
            robotstxt::parse_robotstxt(&text, &mut collect);
            collect
        });
        let collect = parsed.unwrap_or_else(|_| {
            tracing::warn!(%source, "the robots.txt parser failed on this file; it is read as allowing everything");
            Collect::default()
        });
        if collect.dropped > 0 {
            tracing::warn!(%source, dropped = collect.dropped, "robots.txt has more rules than quagmire keeps ({MAX_RULES}); the rest are ignored");
        }
        let Collect { mut groups, by_token, .. } = collect;
        for group in &mut groups {
            group.rules.sort_by(|a, b| b.pattern.len().cmp(&a.pattern.len()).then(b.allow.cmp(&a.allow)));
        }
        let star = by_token.get("*").copied();
        let named: Vec<String> = by_token.keys().filter(|token| *token != "*").cloned().collect();
        // Tokens are `[a-zA-Z_-]+` (see `product_token`): they always compile.
        let agents = (!named.is_empty()).then(|| TokenList::new(named).ok()).flatten();
        RobotsTxt { source, groups, agents, by_token, star }
    }

    /// What this robots.txt says of `uri` (path and query) for `user_agent`.
    pub(crate) fn answer(&self, user_agent: &str, uri: &str) -> RobotsAnswer {
        let named = self.agents.as_ref().and_then(|agents| agents.find(user_agent));
        let Some(index) = named.and_then(|token| self.by_token.get(token).copied()).or(self.star) else {
            // No group for this agent, and no `*` group: nothing is disallowed.
            return RobotsAnswer { check: RobotsCheck::Allowed, group: None, line: 0 };
        };
        let group = &self.groups[index];
        let answer = |check, line| RobotsAnswer { check, group: Some(group.name.clone()), line };
        // RFC 9309, 2.2.2: /robots.txt is always allowed.
        if uri == "/robots.txt" {
            return answer(RobotsCheck::Allowed, 0);
        }
        let path = &uri.as_bytes()[..uri.len().min(MAX_MATCHED_URI)];
        let mut budget = MATCH_BUDGET;
        for rule in &group.rules {
            match rule.matches(path, &mut budget) {
                Some(false) => {}
                Some(true) if !rule.allow => return answer(RobotsCheck::Disallowed, rule.line),
                Some(true) => return answer(RobotsCheck::Allowed, rule.line),
                None => {
                    tracing::debug!(source = %self.source, "robots.txt matching ran out of its budget");
                    return RobotsAnswer { check: RobotsCheck::None, group: None, line: 0 };
                }
            }
        }
        answer(RobotsCheck::Allowed, 0)
    }

    /// The rule at `line`, as a robots.txt line (`Disallow: /private/`), for `explain`.
    pub(crate) fn rule_at(&self, line: u32) -> Option<String> {
        let rule = self.groups.iter().flat_map(|group| &group.rules).find(|rule| rule.line == line)?;
        Some(format!("{}: {}", if rule.allow { "Allow" } else { "Disallow" }, rule.pattern))
    }

    /// The named groups (not `*`) under which `path` is allowed: crawlers that read only their
    /// own group and would not be kept out of the trap by the `*` group's Disallow.
    pub(crate) fn groups_allowing(&self, path: &str) -> Vec<Arc<str>> {
        self.groups
            .iter()
            .filter(|group| &*group.name != "*")
            .filter(|group| {
                // Off the request path (trap-path warnings): no budget.
                let mut unbounded = usize::MAX;
                group
                    .rules
                    .iter()
                    .find(|rule| rule.matches(path.as_bytes(), &mut unbounded) == Some(true))
                    .is_none_or(|rule| rule.allow)
            })
            .map(|group| group.name.clone())
            .collect()
    }

    /// Its groups' names and rule counts, for `check`.
    pub(crate) fn summary(&self) -> String {
        let groups: Vec<String> =
            self.groups.iter().map(|group| format!("{} ({} rules)", group.name, group.rules.len())).collect();
        if groups.is_empty() {
            return "no groups: everything allowed".into();
        }
        format!("{} groups: {}", groups.len(), groups.join(", "))
    }
}

impl fmt::Debug for RobotsTxt {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(out, "RobotsTxt({}: {})", self.source, self.summary())
    }
}

/// Groups the parser's lines: consecutive `User-agent` lines open a group, the rules after them
/// belong to every agent named, a rule before any `User-agent` line belongs to none.
#[derive(Default)]
struct Collect {
    groups: Vec<Group>,
    by_token: HashMap<String, usize>,
    /// The groups the lines being read belong to.
    current: Vec<usize>,
    /// The last directive was a `User-agent` line (the next one adds to the same group).
    in_agents: bool,
    /// Rules kept, over all groups, and those dropped past [`MAX_RULES`].
    rules: usize,
    dropped: usize,
}

impl RobotsParseHandler for Collect {
    fn handle_robots_start(&mut self) {}
    fn handle_robots_end(&mut self) {}

    fn handle_user_agent(&mut self, _line: u32, user_agent: &str) {
        if !self.in_agents {
            self.current.clear();
            self.in_agents = true;
        }
        let token = if user_agent.starts_with('*') { "*" } else { product_token(user_agent) };
        // A group for `Mozilla` or `Chrome` would name every person's browser, not a crawler.
        if token.is_empty() || crate::support::user_agent::is_browser_token(token) {
            return;
        }
        let key = token.to_ascii_lowercase();
        let index = match self.by_token.get(&key) {
            Some(&index) => index,
            None => {
                self.groups.push(Group { name: Arc::from(token), rules: Vec::new() });
                self.by_token.insert(key, self.groups.len() - 1);
                self.groups.len() - 1
            }
        };
        if !self.current.contains(&index) {
            self.current.push(index);
        }
    }

    fn handle_allow(&mut self, line: u32, value: &str) {
        self.rule(line, value, true);
    }

    fn handle_disallow(&mut self, line: u32, value: &str) {
        self.rule(line, value, false);
    }

    fn handle_sitemap(&mut self, _line: u32, _value: &str) {}

    fn handle_unknown_action(&mut self, _line: u32, _action: &str, _value: &str) {}
}

impl Collect {
    fn rule(&mut self, line: u32, pattern: &str, allow: bool) {
        self.in_agents = false;
        // An empty `Disallow:` disallows nothing; an empty `Allow:` adds nothing to allowing.
        if pattern.is_empty() {
            return;
        }
        for &index in &self.current {
            if self.rules >= MAX_RULES {
                self.dropped += 1;
                continue;
            }
            self.rules += 1;
            self.groups[index].rules.push(Rule::new(pattern, allow, line));
        }
    }
}

/// The product token a `User-agent` line names: its leading letters, `_` and `-` (RFC 9309,
/// 2.2.1), and digits, which real tokens have (`MJ12bot`, `AI2Bot`) and the User-Agent matching
/// treats as part of a token; so `Googlebot/2.1` is `Googlebot`.
fn product_token(value: &str) -> &str {
    let end =
        value.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')).unwrap_or(value.len());
    &value[..end]
}

/// `text` with every line over [`MAX_LINE_BYTES`] cut at a character boundary.
fn cut_lines(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.split(['\n', '\r']).any(|line| line.len() > MAX_LINE_BYTES) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len().min(MAX_BYTES));
    for (index, line) in text.split('\n').enumerate() {
        if index > 0 {
            out.push('\n');
        }
        out.push_str(crate::support::log_field::head(line, MAX_LINE_BYTES));
    }
    std::borrow::Cow::Owned(out)
}

/// Whether `path` matches `pattern` from its start: `*` matches any run of bytes, a `$` at the
/// end anchors the pattern to the path's end (elsewhere it is a byte like any other).
///
/// In time linear in the two lengths: the pattern is literal pieces between `*`s; the first must
/// start the path, the last (when anchored) end it, and each one between is taken at its
/// leftmost place after the one before, which is never worse than any later place (whatever the
/// later pieces match after a later place, they match after the leftmost too). Each search is
/// `memmem`'s, linear in what it scans, and the scans do not overlap.
fn matches(path: &[u8], pattern: &[u8]) -> bool {
    let (pattern, anchored) = match pattern.split_last() {
        Some((b'$', rest)) => (rest, true),
        _ => (pattern, false),
    };
    let mut pieces = pattern.split(|&b| b == b'*');
    let first = pieces.next().unwrap_or_default();
    let Some(rest) = path.strip_prefix(first) else { return false };
    let middle: Vec<&[u8]> = pieces.collect();
    let Some((&last, middle)) = middle.split_last() else {
        // No `*`: the pattern is its literal prefix.
        return !anchored || rest.is_empty();
    };
    // When anchored, the last piece must end the path, after everything before it.
    let end = if anchored {
        if rest.len() < last.len() || !rest.ends_with(last) {
            return false;
        }
        rest.len() - last.len()
    } else {
        rest.len()
    };
    let mut searched = &rest[..end];
    for piece in middle.iter().chain((!anchored).then_some(&last)) {
        match memchr::memmem::find(searched, piece) {
            Some(at) => searched = &searched[at + piece.len()..],
            None => return false,
        }
    }
    true
}

/// What `text` says of `uri` for `user_agent`: the whole of parsing and matching, for the fuzz
/// target.
pub fn answer_text(text: &str, user_agent: &str, uri: &str) -> RobotsCheck {
    RobotsTxt::parse("fuzz input", text).answer(user_agent, uri).check
}

/// The robots.txt known for each host.
#[derive(Default)]
struct Sites {
    /// By host (lowercase, no port). `None`: the origin has none for it (a 4xx), or it was not
    /// fetched yet.
    by_host: HashMap<Box<str>, Option<Arc<RobotsTxt>>>,
    /// The file for every host without its own (`file "*" ...`).
    any: Option<Arc<RobotsTxt>>,
}

/// The site's robots.txt for every host, swapped whole when a copy is read or fetched.
pub(crate) struct Robots {
    config: RobotsConfig,
    sites: ArcSwap<Sites>,
    fetcher: Option<Fetcher>,
    /// Hosts requests named that the origin has not been asked about yet.
    wanted: Mutex<HashSet<Box<str>>>,
    /// Wakes the refresher for a wanted host.
    pub(crate) wake: tokio::sync::Notify,
    /// Hosts whose last fetch failed, so a failure streak is logged once.
    failing: Mutex<HashSet<Box<str>>>,
    metrics: Arc<Metrics>,
}

impl Robots {
    /// The configured files read, and a fetcher for the origin; a file that cannot be read is an
    /// error that names it.
    pub(crate) fn new(config: RobotsConfig, metrics: Arc<Metrics>) -> Result<Robots, RobotsError> {
        let sites = read_files(&config)?;
        let fetcher = config.origin.as_ref().and_then(|_| {
            Fetcher::new(Options {
                timeout: config.timeout,
                max_bytes: MAX_BYTES,
                redirects: 0,
                // The operator's own origin, on the local network as often as not.
                public_only: false,
                user_agent: USER_AGENT,
            })
            .map_err(|error| tracing::warn!(%error, "cannot fetch robots.txt from the origin"))
            .ok()
        });
        Ok(Robots {
            config,
            sites: ArcSwap::from_pointee(sites),
            fetcher,
            wanted: Mutex::default(),
            wake: tokio::sync::Notify::new(),
            failing: Mutex::default(),
            metrics,
        })
    }

    /// What the host's robots.txt says of `uri` for `user_agent`; `None` (the check) when the
    /// host has none. A host not asked about yet is queued for the origin.
    pub(crate) fn answer(&self, host: &str, user_agent: &str, uri: &str) -> RobotsAnswer {
        let sites = self.sites.load();
        if sites.by_host.is_empty() && sites.any.is_none() && self.fetcher.is_none() {
            return RobotsAnswer::default();
        }
        let host = host_key(host);
        match sites.by_host.get(host.as_ref()) {
            Some(Some(robots)) => return robots.answer(user_agent, uri),
            // Asked of the origin, which has none for it.
            Some(None) => {}
            None if self.fetcher.is_some() && !host.is_empty() => self.want(&host),
            None => {}
        }
        sites.any.as_ref().map_or_else(RobotsAnswer::default, |any| any.answer(user_agent, uri))
    }

    /// The robots.txt that answers for `host`, for `explain`.
    pub(crate) fn for_host(&self, host: &str) -> Option<Arc<RobotsTxt>> {
        let sites = self.sites.load();
        let host = host_key(host);
        match sites.by_host.get(host.as_ref()) {
            Some(Some(robots)) => Some(robots.clone()),
            _ => sites.any.clone(),
        }
    }

    /// For `check`: each file's named groups that do not disallow `trap_path` (a path under the
    /// trap's prefix), as warnings.
    pub(crate) fn trap_warnings(&self, trap_path: &str) -> Vec<String> {
        let sites = self.sites.load();
        let files = sites.by_host.values().flatten().chain(sites.any.iter());
        let mut warnings: Vec<String> = files
            .filter_map(|robots| {
                let groups = robots.groups_allowing(trap_path);
                (!groups.is_empty()).then(|| {
                    let names: Vec<&str> = groups.iter().map(|name| &**name).collect();
                    format!(
                        "{}: the groups {} do not disallow {trap_path}: those crawlers read only their own group, \
                         so add the trap's Disallow line to each",
                        robots.source,
                        names.join(", ")
                    )
                })
            })
            .collect();
        warnings.sort();
        warnings
    }

    /// Every host's robots.txt and where it came from, for `check` and the start log.
    pub(crate) fn describe(&self) -> Vec<String> {
        let sites = self.sites.load();
        let mut lines: Vec<String> = sites
            .by_host
            .iter()
            .filter_map(|(host, robots)| {
                robots.as_ref().map(|robots| format!("{host}: {} ({})", robots.source, robots.summary()))
            })
            .collect();
        lines.sort();
        if let Some(any) = &sites.any {
            lines.push(format!("every other host: {} ({})", any.source, any.summary()));
        }
        if let Some(origin) = &self.config.origin {
            let hosts = if self.config.hosts.is_empty() {
                format!("each host requests name (at most {MAX_HOSTS})")
            } else {
                format!("the hosts {}", self.config.hosts.join(", "))
            };
            lines.push(format!(
                "fetched from {origin}/robots.txt for {hosts}, every {} s",
                self.config.refresh.as_secs()
            ));
        }
        lines
    }

    fn want(&self, host: &str) {
        // Hosts listed: no other is asked about, whatever requests name.
        if !self.config.hosts.is_empty() && !self.config.hosts.iter().any(|listed| listed == host) {
            return;
        }
        let known = self.sites.load().by_host.len();
        // Full: no lock taken, however many unknown hosts requests name.
        if known >= MAX_HOSTS {
            return;
        }
        let mut wanted = self.wanted.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if wanted.len() + known < MAX_HOSTS && !wanted.contains(host) {
            wanted.insert(Box::from(host));
            self.wake.notify_one();
        }
    }

    /// Reads the configured files again (a reload); on an error the old copies stay.
    pub(crate) fn reload_files(&self) -> Result<(), RobotsError> {
        let files = read_files(&self.config)?;
        self.sites.rcu(|sites| {
            let mut by_host = sites.by_host.clone();
            by_host.retain(|host, _| !files.by_host.contains_key(host));
            by_host.extend(files.by_host.iter().map(|(host, robots)| (host.clone(), robots.clone())));
            Sites { by_host, any: files.any.clone() }
        });
        Ok(())
    }

    /// Fetches robots.txt from the origin for the hosts wanted since the last time, and, when
    /// `all`, again for every host fetched before. A host whose fetch fails keeps its last copy;
    /// the failure is counted and logged once until a fetch succeeds.
    pub(crate) async fn fetch(&self, all: bool) {
        let (Some(fetcher), Some(origin)) = (&self.fetcher, &self.config.origin) else { return };
        let mut hosts: Vec<Box<str>> =
            std::mem::take(&mut *self.wanted.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
                .into_iter()
                .collect();
        if all {
            let sites = self.sites.load();
            let files = &self.config.files;
            hosts.extend(
                sites
                    .by_host
                    .keys()
                    .filter(|host| !files.iter().any(|(file_host, _)| file_host == &***host))
                    .cloned(),
            );
        }
        hosts.sort();
        hosts.dedup();
        let url = format!("{}/robots.txt", origin.trim_end_matches('/'));
        let fetches = hosts.into_iter().map(|host| {
            let (fetcher, url) = (fetcher.clone(), url.clone());
            async move {
                let result = match fetcher.fetch_for_host(&url, &host).await {
                    // Parsing up to 512 KiB is work for the blocking pool, not a runtime thread.
                    Ok(Some(body)) => {
                        let source = format!("{url} (Host: {host})");
                        tokio::task::spawn_blocking(move || compile_body(&source, &body))
                            .await
                            .map(|robots| Some(Arc::new(robots)))
                            .map_err(|_| "the robots.txt could not be compiled".to_string())
                    }
                    Ok(None) => Ok(None),
                    Err(error) => Err(error),
                };
                (host, result)
            }
        });
        let results = futures_util::future::join_all(fetches).await;
        let mut fetched: Vec<(Box<str>, Option<Arc<RobotsTxt>>)> = Vec::new();
        let mut failing = self.failing.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for (host, result) in results {
            match result {
                Ok(Some(robots)) => {
                    failing.remove(&host);
                    fetched.push((host, Some(robots)));
                }
                // A 4xx: the site has no robots.txt for this host (RFC 9309, 2.3.1.3).
                Ok(None) => {
                    failing.remove(&host);
                    fetched.push((host, None));
                }
                Err(error) => {
                    self.metrics.robots_fetch_failed();
                    if failing.insert(host.clone()) {
                        tracing::warn!(%host, %url, %error, "cannot fetch robots.txt; the last copy stays in use");
                    }
                    // Never fetched: remembered as none, asked again at the next refresh.
                    if !self.sites.load().by_host.contains_key(&host) {
                        fetched.push((host, None));
                    }
                }
            }
        }
        if fetched.is_empty() {
            return;
        }
        self.sites.rcu(|sites| {
            let mut by_host = sites.by_host.clone();
            for (host, robots) in &fetched {
                by_host.insert(host.clone(), robots.clone());
            }
            Sites { by_host, any: sites.any.clone() }
        });
    }

    /// How often the origin's copies are fetched again; `None` without an origin.
    pub(crate) fn refresh(&self) -> Option<Duration> {
        self.fetcher.as_ref().map(|_| self.config.refresh)
    }
}

/// Fetches from the origin on `robots.refresh()`, and at once for each new host requests name.
pub(crate) async fn refresh(robots: Arc<Robots>) {
    let Some(every) = robots.refresh() else { return };
    let mut next = tokio::time::Instant::now();
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(next) => {
                robots.fetch(true).await;
                next = tokio::time::Instant::now() + every;
            }
            () = robots.wake.notified() => robots.fetch(false).await,
        }
    }
}

fn read_files(config: &RobotsConfig) -> Result<Sites, RobotsError> {
    let mut sites = Sites::default();
    for (host, path) in &config.files {
        let read = crate::support::bounded_file::read(path, MAX_BYTES as u64)
            .map_err(|source| RobotsError::Read { host: host.clone(), path: path.clone(), source })?;
        let robots = Arc::new(compile_body(&path.display().to_string(), &read));
        if host == "*" {
            sites.any = Some(robots);
        } else {
            sites.by_host.insert(host_key(host).into(), Some(robots));
        }
    }
    Ok(sites)
}

fn compile_body(source: &str, body: &[u8]) -> RobotsTxt {
    RobotsTxt::parse(source, &String::from_utf8_lossy(body))
}

/// A host as the sites are keyed: lowercase, without a port.
fn host_key(host: &str) -> std::borrow::Cow<'_, str> {
    let host = if host.starts_with('[') {
        // A bracketed IPv6 address, perhaps with a port after the bracket.
        host.find(']').map_or(host, |end| &host[..=end])
    } else {
        match host.rsplit_once(':') {
            // Not a bare IPv6 address's colons: a port follows the last one.
            Some((name, port)) if !name.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => host,
        }
    };
    if host.bytes().any(|b| b.is_ascii_uppercase()) {
        std::borrow::Cow::Owned(host.to_ascii_lowercase())
    } else {
        std::borrow::Cow::Borrowed(host)
    }
}

#[cfg(test)]
mod tests;
