//! KDL document → changes on a [`Config`], with every problem pointing at its file, line and
//! column. Unknown keys are errors, with a suggestion when a known key is close.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kdl::{KdlDocument, KdlEntry, KdlNode, KdlValue};
use miette::{NamedSource, SourceSpan};

use std::time::Duration;

use ipnet::IpNet;

use super::{Answer, Config, LogFormat, Mode};
use crate::lists::update::{Format, Source};
use crate::rules::FailMode;

/// A config file that cannot be used.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: Arc<io::Error>,
    },
    /// The file is not valid KDL.
    #[error("{name} is not valid KDL (quagmire reads KDL v2: strings in quotes, #true/#false)")]
    Syntax {
        /// The file's name.
        name: String,
        /// Each syntax problem found.
        #[related]
        problems: Vec<Problem>,
    },
    /// The file is KDL but a key or value is wrong.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Invalid(Box<Problem>),
}

/// One problem at one place in a config file.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("{message}")]
pub struct Problem {
    message: String,
    #[source_code]
    source_code: NamedSource<Arc<String>>,
    #[label("{label}")]
    span: SourceSpan,
    label: String,
    #[help]
    help: Option<String>,
}

impl Problem {
    /// What is wrong.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// 1-based line and column of the problem.
    pub fn line_column(&self) -> (usize, usize) {
        let text = self.source_code.inner();
        let offset = self.span.offset().min(text.len());
        let before = &text[..offset];
        let line = before.matches('\n').count() + 1;
        let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
        (line, column)
    }
}

/// Applies the KDL `text` (named `name` in errors) onto `config`.
pub(super) fn apply(config: Config, name: &str, text: &str, base: &Path) -> Result<Config, ConfigError> {
    let source = Arc::new(text.to_string());
    if let Some(offset) = too_deep(text) {
        return Err(ConfigError::Invalid(Box::new(Problem {
            message: format!("blocks are nested more than {MAX_OPEN_BLOCKS} deep"),
            source_code: NamedSource::new(name, source),
            span: (offset, 1).into(),
            label: "too deep".into(),
            help: Some(
                "quagmire's blocks nest two deep; every `{` counts, also in strings and comments".into(),
            ),
        })));
    }
    let document: KdlDocument = text.parse().map_err(|error: kdl::KdlError| ConfigError::Syntax {
        name: name.to_string(),
        problems: error
            .diagnostics
            .into_iter()
            .map(|diagnostic| Problem {
                message: diagnostic.message.unwrap_or_else(|| "invalid KDL".into()),
                source_code: NamedSource::new(name, source.clone()),
                span: diagnostic.span,
                label: diagnostic.label.unwrap_or_else(|| "here".into()),
                help: diagnostic.help,
            })
            .collect(),
    })?;
    let mut reader = Reader { name, source, base, config, sources_replaced: false, refresh_span: None };
    reader.top(&document).map_err(ConfigError::Invalid)?;
    if let Some(span) = reader.refresh_span
        && reader.config.rules.lists.is_none()
    {
        return Err(ConfigError::Invalid(reader.problem(
            span,
            "refreshing the lists needs a lists folder",
            "refresh is on, but the lists are the embedded ones",
            Some(
                "set `rules { lists \"DIR\" }` to a folder quagmire may write (`quagmire lists update --lists DIR` \
                 fills an empty one), or turn the refresh off with `refresh-hours 0`"
                    .into(),
            ),
        )));
    }
    Ok(reader.config)
}

/// Most `{` open at once; a file with more is refused before it is parsed. The KDL parser recurses
/// once per block with no limit of its own and, in a debug build, takes some 30 KiB of stack a
/// level: 400 nested blocks overflowed the main thread (found by the `config` fuzz target), 64 a
/// test thread's 2 MiB. quagmire's blocks nest two deep. Counting every brace, in strings and
/// comments too, keeps the check a byte scan; it only misjudges a file with a dozen unclosed
/// braces in its strings.
const MAX_OPEN_BLOCKS: usize = 16;

/// Where `text` opens a block past [`MAX_OPEN_BLOCKS`], if it does.
fn too_deep(text: &str) -> Option<usize> {
    let mut open = 0usize;
    for (offset, byte) in text.bytes().enumerate() {
        match byte {
            b'{' if open == MAX_OPEN_BLOCKS => return Some(offset),
            b'{' => open += 1,
            b'}' => open = open.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// The shortest list refresh interval: about a second (for tests; publishers ask for a day).
const MIN_REFRESH_HOURS: f64 = 0.0003;

/// A check's result; problems are boxed because they carry the whole source.
type Checked<T> = Result<T, Box<Problem>>;

/// Walks one document, knowing which keys each block accepts.
struct Reader<'a> {
    name: &'a str,
    source: Arc<String>,
    base: &'a Path,
    config: Config,
    /// Whether this file named a `source` yet: its first replaces the sources inherited from the
    /// defaults.
    sources_replaced: bool,
    /// Where this file turned the list refresh on, for the error if there is no lists folder.
    refresh_span: Option<SourceSpan>,
}

const TOP_KEYS: &[&str] = &[
    "listen",
    "secret",
    "log-format",
    "verdict",
    "clients",
    "geo",
    "rules",
    "trap",
    "corpus",
    "connections",
    "admin",
    "dns",
    "lists",
    "web-bot-auth",
    "robots",
    "preferences",
    "crowdsec",
    "challenge",
    "owner-tools",
];
const OWNER_TOOLS_KEYS: &[&str] = &["header", "secret-env", "addresses"];
const VERDICT_KEYS: &[&str] =
    &["mode", "answer", "trap-status", "redirect-prefix", "trusted-proxies", "ipv4-prefix", "ipv6-prefix"];
const CLIENTS_KEYS: &[&str] = &[
    "capacity",
    "idle-timeout-seconds",
    "trap-half-life-seconds",
    "requests-per-minute",
    "request-burst",
    "store",
    "store-cluster",
    "store-password-env",
    "store-wait-ms",
    "store-sync-ms",
];
const GEO_KEYS: &[&str] = &["asn", "country"];
const RULES_KEYS: &[&str] =
    &["script", "lists", "trap-threshold", "fail", "time-limit-ms", "memory-limit-bytes", "workers"];
const TRAP_KEYS: &[&str] = &["listen", "page-bytes", "links", "drip", "template"];
const DRIP_KEYS: &[&str] = &["enabled", "bytes-per-second", "chunk-bytes", "max-connections"];
const CORPUS_KEYS: &[&str] = &["order", "embedded", "path"];
const ADMIN_KEYS: &[&str] = &["listen", "token"];
const DNS_KEYS: &[&str] = &["servers", "timeout-ms", "verdict-wait-ms", "lookups-per-second", "max-pending"];
const LISTS_KEYS: &[&str] = &["refresh-hours", "timeout-seconds", "source"];
const ROBOTS_KEYS: &[&str] = &["file", "origin", "hosts", "refresh-minutes", "timeout-seconds"];
const CHALLENGE_KEYS: &[&str] = &[
    "difficulty",
    "pass-hours",
    "path",
    "wait-seconds",
    "unanswered",
    "everyone",
    "burn-trap-hits",
    "burn-networks",
    "burn-network-minutes",
    "burn-pages-per-minute",
    "burn-page-burst",
];
const PREFERENCES_KEYS: &[&str] = &["search", "ai-input", "ai-train"];
const CROWDSEC_KEYS: &[&str] = &[
    "url",
    "bouncer-key-env",
    "bouncer-key-file",
    "pull-seconds",
    "timeout-seconds",
    "max-decisions",
    "machine-id",
    "password-env",
    "password-file",
    "alert-decision",
    "alert-decision-minutes",
];
const SOURCE_PROPERTIES: &[&str] = &["label", "format", "url"];
const WEB_BOT_AUTH_KEYS: &[&str] = &[
    "enabled",
    "allow-http",
    "allow-private",
    "timeout-ms",
    "verdict-wait-ms",
    "fetches-per-second",
    "max-pending",
];
const CONNECTIONS_KEYS: &[&str] =
    &["header-read-timeout-seconds", "keep-alive-timeout-seconds", "max-connections"];

impl Reader<'_> {
    fn top(&mut self, document: &KdlDocument) -> Checked<()> {
        for node in document.nodes() {
            match node.name().value() {
                "listen" => self.config.listen = self.address(node)?,
                "secret" => {
                    let secret = self.string(node)?;
                    if secret.len() < 16 {
                        return Err(self.problem(
                            self.argument(node)?.span(),
                            "the secret is too short",
                            "fewer than 16 bytes",
                            Some(
                                "use a long random string, e.g. the output of `openssl rand -hex 32`".into(),
                            ),
                        ));
                    }
                    self.config.secret = Some(secret);
                }
                "log-format" => {
                    self.config.log_format = match self.string(node)?.as_str() {
                        "text" => LogFormat::Text,
                        "json" => LogFormat::Json,
                        _ => {
                            return Err(self.problem(
                                self.argument(node)?.span(),
                                "unknown log format",
                                "expected \"text\" or \"json\"",
                                None,
                            ));
                        }
                    }
                }
                "verdict" => {
                    for child in self.children(node)? {
                        self.verdict(child)?;
                    }
                }
                "clients" => {
                    for child in self.children(node)? {
                        self.clients(child)?;
                    }
                }
                "geo" => {
                    for child in self.children(node)? {
                        match child.name().value() {
                            "asn" => self.config.geo.asn = Some(self.path(child)?),
                            "country" => self.config.geo.country = Some(self.path(child)?),
                            _ => return Err(self.unknown(child, "geo", GEO_KEYS)),
                        }
                    }
                }
                "rules" => {
                    for child in self.children(node)? {
                        self.rules(child)?;
                    }
                }
                "trap" => {
                    for child in self.children(node)? {
                        self.trap(child)?;
                    }
                }
                "corpus" => {
                    for child in self.children(node)? {
                        self.corpus(child)?;
                    }
                }
                "connections" => {
                    for child in self.children(node)? {
                        self.connections(child)?;
                    }
                }
                "admin" => {
                    for child in self.children(node)? {
                        self.admin(child)?;
                    }
                }
                "dns" => {
                    for child in self.children(node)? {
                        self.dns(child)?;
                    }
                }
                "lists" => {
                    for child in self.children(node)? {
                        self.lists(child)?;
                    }
                }
                "web-bot-auth" => {
                    for child in self.children(node)? {
                        self.web_bot_auth(child)?;
                    }
                }
                "robots" => {
                    for child in self.children(node)? {
                        self.robots(child)?;
                    }
                }
                "preferences" => {
                    for child in self.children(node)? {
                        self.preferences(child)?;
                    }
                }
                "crowdsec" => {
                    for child in self.children(node)? {
                        self.crowdsec(child)?;
                    }
                }
                "owner-tools" => self.owner_tools(node)?,
                "challenge" => {
                    for child in self.children(node)? {
                        self.challenge(child)?;
                    }
                }
                _ => return Err(self.unknown(node, "", TOP_KEYS)),
            }
        }
        Ok(())
    }

    fn verdict(&mut self, node: &KdlNode) -> Checked<()> {
        match node.name().value() {
            "mode" => {
                self.config.verdict.mode = match self.choice(node, &["enforce", "shadow"])? {
                    "enforce" => Mode::Enforce,
                    _ => Mode::Shadow,
                }
            }
            "answer" => {
                self.config.verdict.answer = match self.choice(node, &["status", "redirect", "nginx"])? {
                    "status" => Answer::Status,
                    "redirect" => Answer::Redirect,
                    _ => Answer::Nginx,
                }
            }
            "trap-status" => {
                let status = self.integer(node, 300, 599)?;
                if status == 401 {
                    return Err(self.problem(
                        self.argument(node)?.span(),
                        "401 cannot be the trap status",
                        "not 401",
                        Some("nginx passes 401 on with WWW-Authenticate semantics; use 403".into()),
                    ));
                }
                self.config.verdict.trap_status = status as u16;
            }
            "redirect-prefix" => {
                let prefix = self.string(node)?;
                if !prefix.starts_with('/') || prefix.ends_with('/') {
                    return Err(self.problem(
                        self.argument(node)?.span(),
                        "the redirect prefix must start with / and not end with one",
                        "for example \"/trap\"",
                        None,
                    ));
                }
                self.config.verdict.redirect_prefix = prefix;
            }
            "trusted-proxies" => self.config.verdict.trusted_proxies = self.networks(node)?,
            "ipv4-prefix" => self.config.verdict.ipv4_prefix = self.integer(node, 8, 32)? as u8,
            "ipv6-prefix" => self.config.verdict.ipv6_prefix = self.integer(node, 16, 128)? as u8,
            _ => return Err(self.unknown(node, "verdict", VERDICT_KEYS)),
        }
        Ok(())
    }

    fn clients(&mut self, node: &KdlNode) -> Checked<()> {
        match node.name().value() {
            "capacity" => self.config.clients.capacity = self.integer(node, 1, 100_000_000)? as u64,
            "idle-timeout-seconds" => {
                self.config.clients.idle_timeout =
                    Duration::from_secs(self.integer(node, 1, 31_536_000)? as u64);
            }
            "trap-half-life-seconds" => {
                self.config.clients.trap_half_life =
                    Duration::from_secs(self.integer(node, 1, 31_536_000)? as u64);
            }
            "requests-per-minute" => {
                self.config.clients.requests_per_minute = self.integer(node, 1, 1_000_000)? as u32;
            }
            "request-burst" => {
                self.config.clients.request_burst = self.integer(node, 1, 1_000_000)? as u32;
            }
            "store" => {
                let mut urls = Vec::new();
                for entry in node.entries() {
                    let url = match entry.value() {
                        KdlValue::String(url) if entry.name().is_none() => url,
                        other => return Err(self.wrong_type(entry, "a redis:// URL in quotes", other)),
                    };
                    if let Err(why) = crate::client_state::store::check_url(url) {
                        return Err(self.problem(
                            entry.span(),
                            "not a usable Redis URL",
                            why,
                            Some(
                                "for example \"redis://127.0.0.1:6379/0\", \"rediss://:PASSWORD@host:6380/0\", \
                                 or several URLs: the seed nodes of a Redis Cluster"
                                    .into(),
                            ),
                        ));
                    }
                    urls.push(url.clone());
                }
                if urls.is_empty() {
                    return Err(self.problem(
                        node.name().span(),
                        "`store` needs a URL",
                        "no URL given",
                        Some("for example `store \"redis://127.0.0.1:6379/0\"`".into()),
                    ));
                }
                self.config.clients.store.urls = urls;
            }
            "store-cluster" => self.config.clients.store.cluster = self.boolean(node)?,
            "store-password-env" => self.config.clients.store.password_env = Some(self.string(node)?),
            "store-wait-ms" => {
                self.config.clients.store.wait = Duration::from_millis(self.integer(node, 1, 1000)? as u64);
            }
            "store-sync-ms" => {
                self.config.clients.store.sync =
                    Duration::from_millis(self.integer(node, 10, 60_000)? as u64);
            }
            _ => return Err(self.unknown(node, "clients", CLIENTS_KEYS)),
        }
        Ok(())
    }

    fn rules(&mut self, node: &KdlNode) -> Checked<()> {
        match node.name().value() {
            "script" => self.config.rules.script = Some(self.path(node)?),
            "lists" => self.config.rules.lists = Some(self.path(node)?),
            "trap-threshold" => {
                let entry = self.argument(node)?;
                self.config.rules.trap_threshold = match entry.value() {
                    KdlValue::Integer(value) if (1..=1_000_000).contains(value) => *value as f64,
                    KdlValue::Float(value) if (0.1..=1e6).contains(value) => *value,
                    other => return Err(self.wrong_type(entry, "a number from 0.1 to 1000000", other)),
                };
            }
            "fail" => {
                self.config.rules.fail = match self.choice(node, &["open", "closed"])? {
                    "open" => FailMode::Open,
                    _ => FailMode::Closed,
                }
            }
            "time-limit-ms" => {
                self.config.rules.limits.time = Duration::from_millis(self.integer(node, 1, 60_000)? as u64);
            }
            "memory-limit-bytes" => {
                self.config.rules.limits.memory = self.integer(node, 1 << 20, 1 << 32)?;
            }
            "workers" => self.config.rules.workers = self.integer(node, 0, 256)?,
            _ => return Err(self.unknown(node, "rules", RULES_KEYS)),
        }
        Ok(())
    }

    /// A string value that must be one of `choices`.
    fn choice(&self, node: &KdlNode, choices: &[&'static str]) -> Checked<&'static str> {
        let value = self.string(node)?;
        choices.iter().find(|choice| **choice == value).copied().ok_or_else(|| {
            let expected =
                choices.iter().map(|choice| format!("\"{choice}\"")).collect::<Vec<_>>().join(" or ");
            self.problem(
                self.argument(node).map(KdlEntry::span).unwrap_or(node.span()),
                format!("unknown value \"{value}\" for `{}`", node.name().value()),
                format!("expected {expected}"),
                None,
            )
        })
    }

    /// A path, resolved against the config file's folder.
    fn path(&self, node: &KdlNode) -> Checked<PathBuf> {
        Ok(self.base.join(self.string(node)?))
    }

    fn trap(&mut self, node: &KdlNode) -> Checked<()> {
        match node.name().value() {
            "listen" => self.config.trap.listen = self.address(node)?,
            "page-bytes" => {
                let (min, max) = self.range(node, 1024, 1 << 20)?;
                self.config.trap.page.min_bytes = min;
                self.config.trap.page.max_bytes = max;
            }
            "links" => {
                let (min, max) = self.range(node, 0, 200)?;
                self.config.trap.page.min_links = min;
                self.config.trap.page.max_links = max;
            }
            "drip" => {
                for child in self.children(node)? {
                    match child.name().value() {
                        "enabled" => self.config.trap.drip.enabled = self.boolean(child)?,
                        "bytes-per-second" => {
                            self.config.trap.drip.bytes_per_second = self.integer(child, 1, 1 << 30)? as u32;
                        }
                        "chunk-bytes" => {
                            self.config.trap.drip.chunk_bytes = self.integer(child, 1, 1 << 20)?
                        }
                        "max-connections" => {
                            self.config.trap.drip.max_connections = self.integer(child, 0, 1_000_000)?;
                        }
                        _ => return Err(self.unknown(child, "trap.drip", DRIP_KEYS)),
                    }
                }
            }
            "template" => self.config.trap.template = Some(self.path(node)?),
            _ => return Err(self.unknown(node, "trap", TRAP_KEYS)),
        }
        Ok(())
    }

    fn corpus(&mut self, node: &KdlNode) -> Checked<()> {
        match node.name().value() {
            "order" => self.config.corpus.order = self.integer(node, 2, 6)?,
            "embedded" => self.config.corpus.embedded = self.boolean(node)?,
            "path" => {
                let path = self.path(node)?;
                self.config.corpus.paths.push(path);
            }
            _ => return Err(self.unknown(node, "corpus", CORPUS_KEYS)),
        }
        Ok(())
    }

    fn admin(&mut self, node: &KdlNode) -> Checked<()> {
        match node.name().value() {
            "listen" => self.config.admin.listen = Some(self.address(node)?),
            "token" => {
                let token = self.string(node)?;
                if token.len() < 16 {
                    return Err(self.problem(
                        self.argument(node)?.span(),
                        "the admin token is too short",
                        "fewer than 16 bytes",
                        Some("use a long random string, e.g. the output of `openssl rand -hex 32`".into()),
                    ));
                }
                self.config.admin.token = Some(token);
            }
            _ => return Err(self.unknown(node, "admin", ADMIN_KEYS)),
        }
        Ok(())
    }

    fn dns(&mut self, node: &KdlNode) -> Checked<()> {
        match node.name().value() {
            "servers" => {
                let mut servers = Vec::new();
                for entry in node.entries() {
                    let text = match entry.value() {
                        KdlValue::String(text) if entry.name().is_none() => text,
                        other => return Err(self.wrong_type(entry, "an address in quotes", other)),
                    };
                    match text.parse::<SocketAddr>() {
                        Ok(server) => servers.push(server),
                        Err(_) => {
                            return Err(self.problem(
                                entry.span(),
                                format!("`{text}` is not a socket address"),
                                "expected IP:port",
                                Some("for example \"127.0.0.1:53\" or \"[::1]:53\"".into()),
                            ));
                        }
                    }
                }
                self.config.dns.servers = servers;
            }
            "timeout-ms" => {
                self.config.dns.timeout = Duration::from_millis(self.integer(node, 1, 60_000)? as u64)
            }
            "verdict-wait-ms" => {
                self.config.dns.verdict_wait = Duration::from_millis(self.integer(node, 0, 10_000)? as u64)
            }
            "lookups-per-second" => {
                self.config.dns.lookups_per_second = self.integer(node, 1, 100_000)? as u32
            }
            "max-pending" => self.config.dns.max_pending = self.integer(node, 1, 100_000)?,
            _ => return Err(self.unknown(node, "dns", DNS_KEYS)),
        }
        Ok(())
    }

    fn lists(&mut self, node: &KdlNode) -> Checked<()> {
        match node.name().value() {
            "refresh-hours" => {
                let entry = self.argument(node)?;
                let hours = self.decimal(entry, "a number of hours")?;
                if !(hours == 0.0 || (MIN_REFRESH_HOURS..=8760.0).contains(&hours)) {
                    return Err(self.problem(
                        entry.span(),
                        format!("{hours} hours is out of range"),
                        format!("expected 0 (off) or {MIN_REFRESH_HOURS} to 8760"),
                        Some("publishers ask for a daily refresh: `refresh-hours 24`".into()),
                    ));
                }
                self.config.lists.refresh = (hours > 0.0).then(|| Duration::from_secs_f64(hours * 3600.0));
                self.refresh_span = (hours > 0.0).then(|| entry.span());
            }
            "timeout-seconds" => {
                self.config.lists.timeout = Duration::from_secs(self.integer(node, 1, 3600)? as u64);
            }
            "source" => self.source(node)?,
            _ => return Err(self.unknown(node, "lists", LISTS_KEYS)),
        }
        Ok(())
    }

    fn web_bot_auth(&mut self, node: &KdlNode) -> Checked<()> {
        match node.name().value() {
            "enabled" => self.config.web_bot_auth.enabled = self.boolean(node)?,
            "allow-http" => self.config.web_bot_auth.allow_http = self.boolean(node)?,
            "allow-private" => self.config.web_bot_auth.allow_private = self.boolean(node)?,
            "timeout-ms" => {
                self.config.web_bot_auth.timeout =
                    Duration::from_millis(self.integer(node, 1, 60_000)? as u64)
            }
            "verdict-wait-ms" => {
                self.config.web_bot_auth.verdict_wait =
                    Duration::from_millis(self.integer(node, 0, 10_000)? as u64)
            }
            "fetches-per-second" => {
                self.config.web_bot_auth.fetches_per_second = self.integer(node, 1, 10_000)? as u32
            }
            "max-pending" => self.config.web_bot_auth.max_pending = self.integer(node, 1, 10_000)?,
            _ => return Err(self.unknown(node, "web-bot-auth", WEB_BOT_AUTH_KEYS)),
        }
        Ok(())
    }

    fn robots(&mut self, node: &KdlNode) -> Checked<()> {
        match node.name().value() {
            "file" => {
                let example = "for example `file \"example.org\" \"/srv/example.org/robots.txt\"`, or `file \"*\" ...` \
                               for every host without its own";
                let values: Vec<(&String, &KdlEntry)> = node
                    .entries()
                    .iter()
                    .map(|entry| match (entry.name(), entry.value()) {
                        (None, KdlValue::String(text)) => Ok((text, entry)),
                        (None, other) => Err(self.wrong_type(entry, "a string in quotes", other)),
                        (Some(_), _) => Err(self.problem(
                            entry.span(),
                            "`file` takes a host and a path, not properties",
                            "unexpected property",
                            Some(example.into()),
                        )),
                    })
                    .collect::<Checked<_>>()?;
                let [(host, host_entry), (path, _)] = values.as_slice() else {
                    return Err(self.problem(
                        node.span(),
                        "`file` needs a host and a path",
                        format!("{} values", values.len()),
                        Some(example.into()),
                    ));
                };
                let host = host.trim().to_ascii_lowercase();
                if host.is_empty() || host.contains(['/', ' ']) {
                    return Err(self.problem(
                        host_entry.span(),
                        "not a host name",
                        "here",
                        Some(example.into()),
                    ));
                }
                if self.config.robots.files.iter().any(|(known, _)| *known == host) {
                    return Err(self.problem(
                        host_entry.span(),
                        format!("`{host}` has a file already"),
                        "again",
                        None,
                    ));
                }
                self.config.robots.files.push((host, self.base.join(path)));
            }
            "origin" => {
                let url = self.http_url(
                    node,
                    "the origin",
                    "the site's own server, such as `origin \"http://127.0.0.1:8080\"`",
                )?;
                self.config.robots.origin = Some(url.trim_end_matches('/').to_string());
            }
            "hosts" => {
                for entry in node.entries() {
                    match (entry.name(), entry.value()) {
                        (None, KdlValue::String(host))
                            if !host.trim().is_empty() && !host.contains(['/', ' ']) =>
                        {
                            self.config.robots.hosts.push(host.trim().to_ascii_lowercase())
                        }
                        (None, KdlValue::String(_)) => {
                            return Err(self.problem(entry.span(), "not a host name", "here", None));
                        }
                        (_, other) => return Err(self.wrong_type(entry, "host names in quotes", other)),
                    }
                }
            }
            "refresh-minutes" => {
                let entry = self.argument(node)?;
                let minutes = self.decimal(entry, "a number of minutes")?;
                if !(0.05..=10_080.0).contains(&minutes) {
                    return Err(self.problem(
                        entry.span(),
                        format!("{minutes} minutes is out of range"),
                        "expected 0.05 (3 s) to 10080 (a week)",
                        None,
                    ));
                }
                self.config.robots.refresh = Duration::from_secs_f64(minutes * 60.0);
            }
            "timeout-seconds" => {
                self.config.robots.timeout = Duration::from_secs(self.integer(node, 1, 300)? as u64)
            }
            _ => return Err(self.unknown(node, "robots", ROBOTS_KEYS)),
        }
        Ok(())
    }

    fn challenge(&mut self, node: &KdlNode) -> Checked<()> {
        match node.name().value() {
            // 8 bits is 256 hashes (nothing); 28 is minutes on a phone.
            "difficulty" => self.config.challenge.difficulty = self.integer(node, 1, 28)? as u8,
            "pass-hours" => {
                self.config.challenge.pass_lifetime =
                    Duration::from_secs(self.integer(node, 1, 24 * 365)? as u64 * 3600)
            }
            "path" => {
                let path = self.string(node)?;
                let valid = path.len() >= 3
                    && path.starts_with('/')
                    && path.ends_with('/')
                    && !path.starts_with("//")
                    && path.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-~".contains(&b));
                if !valid {
                    return Err(self.problem(
                        self.argument(node)?.span(),
                        "the challenge path must start and end with / and hold only letters, digits and . _ - ~",
                        "for example \"/.quagmire/\"",
                        None,
                    ));
                }
                self.config.challenge.path = path;
            }
            "wait-seconds" => {
                self.config.challenge.wait = Duration::from_secs(self.integer(node, 1, 600)? as u64)
            }
            "unanswered" => {
                self.config.challenge.unanswered = self.integer(node, 1, 1000)? as u32;
                self.config.rules.challenge_unanswered = self.config.challenge.unanswered;
            }
            "everyone" => {
                self.config.challenge.everyone = self.boolean(node)?;
                self.config.rules.challenge_everyone = self.config.challenge.everyone;
            }
            // A burn for networks or pace writes this many trap hits at once: kept small.
            "burn-trap-hits" => self.config.challenge.burn.trap_hits = self.integer(node, 1, 100)? as u32,
            "burn-networks" => self.config.challenge.burn.networks = self.integer(node, 1, 1000)? as u32,
            "burn-network-minutes" => {
                self.config.challenge.burn.window =
                    Duration::from_secs(self.integer(node, 1, 10_080)? as u64 * 60)
            }
            "burn-pages-per-minute" => {
                self.config.challenge.burn.pages_per_minute = self.integer(node, 1, 100_000)? as u32
            }
            "burn-page-burst" => {
                self.config.challenge.burn.page_burst = self.integer(node, 1, 100_000)? as u32
            }
            _ => return Err(self.unknown(node, "challenge", CHALLENGE_KEYS)),
        }
        Ok(())
    }

    /// A node's values as networks: addresses or CIDRs, in quotes.
    fn networks(&self, node: &KdlNode) -> Checked<Vec<IpNet>> {
        let mut networks = Vec::new();
        for entry in node.entries() {
            let text = match entry.value() {
                KdlValue::String(text) if entry.name().is_none() => text,
                other => return Err(self.wrong_type(entry, "a network in quotes", other)),
            };
            let network =
                text.parse::<IpNet>().or_else(|_| text.parse::<std::net::IpAddr>().map(IpNet::from));
            match network {
                Ok(network) => networks.push(network),
                Err(_) => {
                    return Err(self.problem(
                        entry.span(),
                        format!("`{text}` is not a network"),
                        "expected an address or CIDR",
                        Some("for example \"10.0.0.0/8\" or \"::1\"".into()),
                    ));
                }
            }
        }
        Ok(networks)
    }

    /// `owner-tools { header "NAME"; secret-env "VARIABLE"; addresses "CIDR"... }`: the secret is
    /// read here, so a missing or weak one is an error that points at its line.
    fn owner_tools(&mut self, node: &KdlNode) -> Checked<()> {
        use crate::enrich::owner_tools::OwnerSecret;
        let (mut header, mut secret) = (None, None);
        for child in self.children(node)? {
            match child.name().value() {
                "header" => {
                    let name = self.string(child)?;
                    let token = !name.is_empty()
                        && name
                            .bytes()
                            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_');
                    let ordinary = ["cookie", "user-agent", "host", "authorization", "accept", "referer"]
                        .iter()
                        .any(|known| name.eq_ignore_ascii_case(known))
                        || name.to_ascii_lowercase().starts_with("x-forwarded-")
                        || name.to_ascii_lowercase().starts_with("x-quagmire-");
                    if !token || ordinary {
                        return Err(self.problem(
                            self.argument(child)?.span(),
                            format!("`{name}` cannot be the owner's tools' header"),
                            "here",
                            Some("a header of its own that browsers and proxies never send, such as \"X-Monitor-Key\"".into()),
                        ));
                    }
                    header = Some(name.to_ascii_lowercase());
                }
                "secret-env" => {
                    let variable = self.string(child)?;
                    let span = self.argument(child)?.span();
                    let value = std::env::var(&variable).map_err(|_| {
                        self.problem(
                            span,
                            format!("the environment variable {variable} is not set"),
                            "here",
                            None,
                        )
                    })?;
                    let value = value.trim();
                    if value.len() < OwnerSecret::MIN_BYTES {
                        return Err(self.problem(
                            span,
                            format!(
                                "the secret in {variable} is {} bytes; it needs at least {}",
                                value.len(),
                                OwnerSecret::MIN_BYTES
                            ),
                            "here",
                            Some("for example `openssl rand -hex 16`".into()),
                        ));
                    }
                    secret = Some(OwnerSecret::new(value));
                }
                "addresses" => self.config.owner_tools.addresses = self.networks(child)?,
                _ => return Err(self.unknown(child, "owner-tools", OWNER_TOOLS_KEYS)),
            }
        }
        self.config.owner_tools.header = match (header, secret) {
            (Some(header), Some(secret)) => Some((header, secret)),
            (None, None) => None,
            _ => {
                return Err(self.problem(
                    node.name().span(),
                    "`owner-tools` needs both `header` and `secret-env`, or neither",
                    "here",
                    Some(
                        "for example `header \"X-Monitor-Key\"` and `secret-env \"QUAGMIRE_MONITOR_KEY\"`"
                            .into(),
                    ),
                ));
            }
        };
        Ok(())
    }

    fn crowdsec(&mut self, node: &KdlNode) -> Checked<()> {
        use crate::verify::crowdsec::KeySource;
        match node.name().value() {
            "url" => {
                let url = self.http_url(node, "the Local API", "such as `url \"http://127.0.0.1:8080\"`")?;
                self.config.crowdsec.url = Some(url);
            }
            "bouncer-key-env" => self.config.crowdsec.bouncer_key = Some(KeySource::Env(self.string(node)?)),
            "bouncer-key-file" => self.config.crowdsec.bouncer_key = Some(KeySource::File(self.path(node)?)),
            "pull-seconds" => {
                self.config.crowdsec.pull = Duration::from_secs(self.integer(node, 1, 3600)? as u64)
            }
            "timeout-seconds" => {
                self.config.crowdsec.timeout = Duration::from_secs(self.integer(node, 1, 300)? as u64)
            }
            "max-decisions" => self.config.crowdsec.max_decisions = self.integer(node, 1, 10_000_000)?,
            "machine-id" => self.config.crowdsec.machine_id = Some(self.string(node)?),
            "password-env" => self.config.crowdsec.password = Some(KeySource::Env(self.string(node)?)),
            "password-file" => self.config.crowdsec.password = Some(KeySource::File(self.path(node)?)),
            "alert-decision" => {
                let kind = self.choice(node, &["none", "ban", "captcha"])?;
                self.config.crowdsec.alert_decision = (kind != "none").then(|| kind.to_string());
            }
            "alert-decision-minutes" => {
                self.config.crowdsec.alert_duration =
                    Duration::from_secs(self.integer(node, 1, 525_600)? as u64 * 60)
            }
            _ => return Err(self.unknown(node, "crowdsec", CROWDSEC_KEYS)),
        }
        Ok(())
    }

    fn preferences(&mut self, node: &KdlNode) -> Checked<()> {
        let value = match node.name().value() {
            "search" | "ai-input" | "ai-train" => self.boolean(node)?,
            _ => return Err(self.unknown(node, "preferences", PREFERENCES_KEYS)),
        };
        let preferences = &mut self.config.preferences;
        match node.name().value() {
            "search" => preferences.search = Some(value),
            "ai-input" => preferences.ai_input = Some(value),
            _ => preferences.ai_train = Some(value),
        }
        // The default rules judge each kind of AI crawler by the preference that speaks for it.
        self.config.rules.preferences = *preferences;
        Ok(())
    }

    /// `source "LIST" label="LABEL" format="FORMAT" url="URL"`.
    fn source(&mut self, node: &KdlNode) -> Checked<()> {
        let example = "for example `source \"search-engines\" label=\"Googlebot\" format=\"prefixes-json\" \
                       url=\"https://...\"`";
        if let Some(children) = node.children() {
            return Err(self.problem(
                children.span(),
                "`source` takes values, not a block",
                "unexpected block",
                None,
            ));
        }
        let (mut list, mut label, mut format, mut url) = (None, None, None, None);
        for entry in node.entries() {
            let text = match entry.value() {
                KdlValue::String(text) => text.clone(),
                other => return Err(self.wrong_type(entry, "a string in quotes", other)),
            };
            let slot = match entry.name().map(|name| name.value()) {
                None => &mut list,
                Some("label") => &mut label,
                Some("format") => &mut format,
                Some("url") => &mut url,
                Some(other) => {
                    let closest = SOURCE_PROPERTIES
                        .iter()
                        .map(|known| (strsim::damerau_levenshtein(other, known), *known))
                        .min()
                        .filter(|(distance, _)| *distance <= 2);
                    let help = match closest {
                        Some((_, known)) => format!("did you mean `{known}=`?"),
                        None => "a source takes label=, format= and url=".into(),
                    };
                    return Err(self.problem(
                        entry.span(),
                        format!("unknown property `{other}` of `source`"),
                        "not a known property",
                        Some(help),
                    ));
                }
            };
            if slot.is_some() {
                return Err(self.problem(entry.span(), "given twice", "repeated", Some(example.into())));
            }
            *slot = Some((text, entry.span()));
        }
        let Some((list, list_span)) = list else {
            return Err(self.problem(
                node.name().span(),
                "`source` needs the name of the list it fills",
                "no list named",
                Some(example.into()),
            ));
        };
        if list.is_empty()
            || list.ends_with(".txt")
            || !list.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(self.problem(
                list_span,
                format!("`{list}` is not a list name"),
                "letters, digits, - and _ only",
                Some("name the list file without its folder and `.txt`, e.g. \"search-engines\"".into()),
            ));
        }
        let names = Format::ALL.iter().map(|(name, _)| format!("\"{name}\"")).collect::<Vec<_>>().join(", ");
        let Some((format_name, format_span)) = format else {
            return Err(self.problem(
                node.name().span(),
                "`source` needs format=",
                "no format",
                Some(format!("one of {names}")),
            ));
        };
        let Some(format) = Format::named(&format_name) else {
            return Err(self.problem(
                format_span,
                format!("unknown format \"{format_name}\""),
                format!("expected {names}"),
                None,
            ));
        };
        let Some((url, url_span)) = url else {
            return Err(self.problem(
                node.name().span(),
                "`source` needs url=",
                "no URL",
                Some(example.into()),
            ));
        };
        if let Err(message) = crate::support::outbound::check_url(&url) {
            return Err(self.problem(
                url_span,
                format!("`{url}` cannot be a source: {message}"),
                "here",
                None,
            ));
        }
        let networks = format.kind() == crate::lists::update::Kind::Networks;
        let label = match (label, networks) {
            (Some((label, span)), true) => {
                if label.is_empty() || label.contains(|c: char| c.is_whitespace() || c == '#') {
                    return Err(self.problem(
                        span,
                        format!("`{label}` is not a label"),
                        "one word, without #",
                        Some(
                            "the label is the user-agent token the prefixes verify, e.g. \"Googlebot\""
                                .into(),
                        ),
                    ));
                }
                label
            }
            (None, true) => {
                return Err(self.problem(
                    node.name().span(),
                    format!("a `{format_name}` source needs label="),
                    "no label",
                    Some("the label is the user-agent token the prefixes verify, e.g. \"Googlebot\"".into()),
                ));
            }
            (Some((_, span)), false) => {
                return Err(self.problem(
                    span,
                    format!("a `{format_name}` source takes no label"),
                    "not used",
                    Some("labels name the prefixes of network lists (prefixes-json, cidr-list)".into()),
                ));
            }
            (None, false) => String::new(),
        };
        if !self.sources_replaced {
            self.config.lists.sources.clear();
            self.sources_replaced = true;
        }
        if let Some(other) = self
            .config
            .lists
            .sources
            .iter()
            .find(|other| other.list == list && other.format.kind() != format.kind())
        {
            return Err(self.problem(
                format_span,
                format!(
                    "list `{list}` already gets entries from a `{}` source, which this format cannot join",
                    other.format.name()
                ),
                "another kind of entry",
                Some("every source of one list must give the same kind: networks, tokens or ASNs".into()),
            ));
        }
        self.config.lists.sources.push(Source { list, label, format, url });
        Ok(())
    }

    fn connections(&mut self, node: &KdlNode) -> Checked<()> {
        match node.name().value() {
            "header-read-timeout-seconds" => {
                let seconds = self.integer(node, 1, 3600)? as u64;
                self.config.connections.header_read_timeout = Duration::from_secs(seconds);
            }
            "keep-alive-timeout-seconds" => {
                let seconds = self.integer(node, 1, 86_400)? as u64;
                self.config.connections.keep_alive_timeout = Duration::from_secs(seconds);
            }
            "max-connections" => {
                self.config.connections.max_connections = Some(self.integer(node, 1, 10_000_000)?);
            }
            _ => return Err(self.unknown(node, "connections", CONNECTIONS_KEYS)),
        }
        Ok(())
    }

    fn children<'n>(&self, node: &'n KdlNode) -> Checked<&'n [KdlNode]> {
        if let Some(entry) = node.entries().first() {
            return Err(self.problem(
                entry.span(),
                format!("`{}` is a block and takes no values", node.name().value()),
                "unexpected value",
                Some(format!("write `{} {{ ... }}` with settings inside the braces", node.name().value())),
            ));
        }
        Ok(node.children().map_or(&[], |children| children.nodes()))
    }

    /// The node's single positional value.
    fn argument<'n>(&self, node: &'n KdlNode) -> Checked<&'n KdlEntry> {
        let key = node.name().value();
        if let Some(children) = node.children() {
            return Err(self.problem(
                children.span(),
                format!("`{key}` takes a value, not a block"),
                "unexpected block",
                None,
            ));
        }
        match node.entries() {
            [entry] if entry.name().is_none() => Ok(entry),
            [] => Err(self.problem(
                node.name().span(),
                format!("`{key}` needs a value"),
                "no value given",
                None,
            )),
            [first, second, ..] if first.name().is_none() => {
                Err(self.problem(second.span(), format!("`{key}` takes one value"), "extra value", None))
            }
            [entry, ..] => Err(self.problem(
                entry.span(),
                format!("`{key}` takes a plain value, not a property"),
                "unexpected property",
                None,
            )),
        }
    }

    fn string(&self, node: &KdlNode) -> Checked<String> {
        let entry = self.argument(node)?;
        match entry.value() {
            KdlValue::String(text) => Ok(text.clone()),
            other => Err(self.wrong_type(entry, "a string in quotes", other)),
        }
    }

    /// An absolute `http` or `https` URL with a host, for a service quagmire asks (`what`), or an
    /// error that points at it with `example`.
    fn http_url(&self, node: &KdlNode, what: &str, example: &str) -> Checked<String> {
        let url = self.string(node)?;
        if let Err(message) = crate::support::outbound::check_url(&url) {
            let entry = self.argument(node)?;
            return Err(self.problem(
                entry.span(),
                format!("`{url}` cannot be {what}: {message}"),
                "here",
                Some(example.into()),
            ));
        }
        Ok(url)
    }

    /// A whole or decimal number (`24`, `0.5`), or an error saying `expected`.
    fn decimal(&self, entry: &KdlEntry, expected: &str) -> Checked<f64> {
        match entry.value() {
            KdlValue::Integer(value) => Ok(*value as f64),
            KdlValue::Float(value) => Ok(*value),
            other => Err(self.wrong_type(entry, expected, other)),
        }
    }

    fn boolean(&self, node: &KdlNode) -> Checked<bool> {
        let entry = self.argument(node)?;
        match entry.value() {
            KdlValue::Bool(value) => Ok(*value),
            other => Err(self.wrong_type(entry, "#true or #false", other)),
        }
    }

    fn integer(&self, node: &KdlNode, min: usize, max: usize) -> Checked<usize> {
        self.integer_entry(self.argument(node)?, min, max)
    }

    fn integer_entry(&self, entry: &KdlEntry, min: usize, max: usize) -> Checked<usize> {
        match entry.value() {
            KdlValue::Integer(value) if (min as i128..=max as i128).contains(value) => Ok(*value as usize),
            KdlValue::Integer(value) => Err(self.problem(
                entry.span(),
                format!("{value} is out of range"),
                format!("expected {min} to {max}"),
                None,
            )),
            other => Err(self.wrong_type(entry, "a whole number", other)),
        }
    }

    fn address(&self, node: &KdlNode) -> Checked<SocketAddr> {
        let text = self.string(node)?;
        text.parse().map_err(|_| {
            self.problem(
                self.argument(node).map(KdlEntry::span).unwrap_or(node.span()),
                format!("`{text}` is not a socket address"),
                "expected IP:port",
                Some("for example \"127.0.0.1:8420\" or \"[::1]:8420\"".into()),
            )
        })
    }

    /// A `min=N max=M` pair, both required, with `min <= max`.
    fn range(&self, node: &KdlNode, low: usize, high: usize) -> Checked<(usize, usize)> {
        let key = node.name().value();
        let (mut min, mut max) = (None, None);
        for entry in node.entries() {
            match entry.name().map(|name| name.value()) {
                Some("min") => min = Some((self.integer_entry(entry, low, high)?, entry)),
                Some("max") => max = Some((self.integer_entry(entry, low, high)?, entry)),
                _ => {
                    return Err(self.problem(
                        entry.span(),
                        format!("`{key}` takes min= and max="),
                        "unexpected value",
                        Some(format!("for example `{key} min={low} max={high}`")),
                    ));
                }
            }
        }
        match (min, max) {
            (Some((min, _)), Some((max, max_entry))) if min > max => Err(self.problem(
                max_entry.span(),
                format!("`{key}` has max below min"),
                format!("must be at least {min}"),
                None,
            )),
            (Some((min, _)), Some((max, _))) => Ok((min, max)),
            _ => Err(self.problem(
                node.name().span(),
                format!("`{key}` needs both min= and max="),
                "incomplete range",
                Some(format!("for example `{key} min={low} max={high}`")),
            )),
        }
    }

    fn wrong_type(&self, entry: &KdlEntry, expected: &str, found: &KdlValue) -> Box<Problem> {
        let found = match found {
            KdlValue::String(_) => "a string",
            KdlValue::Integer(_) => "a whole number",
            KdlValue::Float(_) => "a decimal number",
            KdlValue::Bool(_) => "a boolean",
            KdlValue::Null => "#null",
        };
        self.problem(
            entry.span(),
            format!("expected {expected}, found {found}"),
            format!("expected {expected}"),
            None,
        )
    }

    fn unknown(&self, node: &KdlNode, block: &str, known: &[&str]) -> Box<Problem> {
        let key = node.name().value();
        let place = if block.is_empty() { "at the top level".to_string() } else { format!("in `{block}`") };
        let closest = known
            .iter()
            .map(|candidate| (strsim::damerau_levenshtein(key, candidate), *candidate))
            .min()
            .filter(|(distance, candidate)| *distance <= 2.max(candidate.len() / 3));
        let help = match closest {
            Some((_, candidate)) => format!("did you mean `{candidate}`?"),
            None => format!("known keys {place}: {}", known.join(", ")),
        };
        self.problem(
            node.name().span(),
            format!("unknown key `{key}` {place}"),
            "not a known key",
            Some(help),
        )
    }

    fn problem(
        &self,
        span: SourceSpan,
        message: impl Into<String>,
        label: impl Into<String>,
        help: Option<String>,
    ) -> Box<Problem> {
        Box::new(Problem {
            message: message.into(),
            source_code: NamedSource::new(self.name, self.source.clone()),
            span,
            label: label.into(),
            help,
        })
    }
}
