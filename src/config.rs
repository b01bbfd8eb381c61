//! Configuration: the validated, typed settings and the one place their defaults live.
//!
//! Loading has two phases. [`kdl`] turns a KDL document into changes on a [`Config`], reporting
//! any problem with the file, line and column; the defaults are themselves the embedded
//! `default.kdl` applied to nothing. Nothing reads KDL after startup.

mod kdl;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

pub use self::kdl::ConfigError;
use std::time::Duration;

use ipnet::IpNet;

use crate::client_state::ClientStateConfig;
use crate::lists::update::ListsConfig;
use crate::rules::{FailMode, Limits, RulesConfig};
use crate::trap::generator::PageSettings;

/// The embedded default configuration, which documents every key.
pub(crate) const DEFAULT_KDL: &str = include_str!("config/default.kdl");

/// Every setting, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Verdict listener address.
    pub listen: SocketAddr,
    /// Secret for trap pages and URLs, if configured (the environment may still supply one).
    pub secret: Option<String>,
    /// Log line format.
    pub log_format: LogFormat,
    /// How verdicts are answered and clients identified.
    pub verdict: VerdictConfig,
    /// Per-client records.
    pub clients: ClientStateConfig,
    /// Enrichment databases.
    pub geo: GeoConfig,
    /// The ruleset.
    pub rules: RulesConfig,
    /// The trap listener and its pages.
    pub trap: TrapConfig,
    /// What the Markov model learns from.
    pub corpus: CorpusConfig,
    /// Timeouts and caps of every listener's connections.
    pub connections: ConnectionConfig,
    /// Where `/metrics` and `/api/trapped` are served, and who may read them.
    pub admin: AdminConfig,
    /// The resolver crawler verification asks, and its budgets.
    pub dns: DnsConfig,
    /// Where the crawler lists are fetched from, and how often `serve` refreshes them.
    pub lists: ListsConfig,
    /// Web Bot Auth: verifying signed requests against their agents' key directories.
    pub web_bot_auth: WebBotAuthConfig,
    /// The site's own robots.txt, per host.
    pub robots: RobotsConfig,
    /// The AI preferences `quagmire snippets` states in robots.txt lines.
    pub preferences: Preferences,
    /// The CrowdSec Local API whose decisions the rules see.
    pub crowdsec: CrowdSecConfig,
    /// The site owner's own tools (monitors, checks), let through when they prove it.
    pub owner_tools: crate::enrich::owner_tools::OwnerToolsConfig,
    /// The challenge verdict: its difficulty, the pass, the reserved path, the burn limits.
    pub challenge: ChallengeConfig,
}

pub(crate) use crate::challenge::ChallengeConfig;
pub(crate) use crate::verify::crawler::DnsConfig;
pub(crate) use crate::verify::crowdsec::CrowdSecConfig;
pub(crate) use crate::verify::robots::RobotsConfig;
pub(crate) use crate::verify::signature::WebBotAuthConfig;
pub(crate) use crate::vocabulary::Preferences;

/// Where `/metrics` and `/api/trapped` are served, and who may read them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdminConfig {
    /// Their own listener; without one they are on the verdict listener.
    pub listen: Option<SocketAddr>,
    /// Bearer token they require, if any (`QUAGMIRE_ADMIN_TOKEN` overrides it).
    pub token: Option<String>,
}

/// Timeouts and caps of every listener's connections.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionConfig {
    /// Longest a request head (request line and headers) may take to arrive, from the accept or
    /// from the first byte of a later request on the connection.
    pub header_read_timeout: Duration,
    /// Longest a connection may wait for its next request; at least the header-read timeout.
    pub keep_alive_timeout: Duration,
    /// Most open connections per listener; `None` sizes it from the file-descriptor limit.
    pub max_connections: Option<usize>,
}

/// How verdicts are answered and clients identified.
#[derive(Clone, Debug, PartialEq)]
pub struct VerdictConfig {
    /// Enforce or only watch.
    pub mode: Mode,
    /// How a trap verdict is answered.
    pub answer: Answer,
    /// Status of a trap answer in `Answer::Status` mode.
    pub trap_status: u16,
    /// Prefix of redirect targets.
    pub redirect_prefix: String,
    /// Peers whose forwarded headers are believed.
    pub trusted_proxies: Vec<IpNet>,
    /// IPv4 prefix length of a client key.
    pub ipv4_prefix: u8,
    /// IPv6 prefix length of a client key.
    pub ipv6_prefix: u8,
}

/// Enforce verdicts, or only report them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Answer with the verdict.
    Enforce,
    /// Always allow; report the would-be verdict.
    Shadow,
}

/// How a trap verdict is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The configured status and a short body.
    Status,
    /// 302 to the trap.
    Redirect,
    /// 403 with `X-Quagmire-Location` for nginx.
    Nginx,
}

/// Enrichment databases.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GeoConfig {
    /// ASN database.
    pub asn: Option<PathBuf>,
    /// Country database.
    pub country: Option<PathBuf>,
}

pub use crate::observe::log_sink::LogFormat;

/// The trap listener and its pages.
#[derive(Clone, Debug, PartialEq)]
pub struct TrapConfig {
    /// Trap listener address.
    pub listen: SocketAddr,
    /// Page size and link count.
    pub page: PageSettings,
    /// Slow drip of pages.
    pub drip: DripConfig,
    /// The site's own page to write trap pages into (`generator::template`).
    pub template: Option<PathBuf>,
}

/// Slow drip (tarpit) of trap pages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DripConfig {
    /// Whether pages drip at all.
    pub enabled: bool,
    /// Send rate per connection.
    pub bytes_per_second: u32,
    /// Bytes per chunk; chunks are spaced to keep the rate.
    pub chunk_bytes: usize,
    /// Pages dripping at once, at most; past this, pages are sent whole.
    pub max_connections: usize,
}

/// What the Markov model learns from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CorpusConfig {
    /// Markov order (words of context).
    pub order: usize,
    /// Include the embedded default corpus.
    pub embedded: bool,
    /// Further files or folders, resolved against the config file's folder.
    pub paths: Vec<PathBuf>,
}

impl Config {
    /// The embedded default configuration.
    pub fn embedded() -> Config {
        // Parsed once: every `parse` starts from it, and the KDL parser takes milliseconds over
        // the comments of `default.kdl` (most of a config fuzzer's time, before this).
        static EMBEDDED: LazyLock<Config> = LazyLock::new(|| {
            kdl::apply(Config::empty(), "<embedded default.kdl>", DEFAULT_KDL, Path::new("."))
                .expect("the embedded default config is valid (tested)")
        });
        EMBEDDED.clone()
    }

    /// The defaults with the file at `path` applied, or the defaults alone.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let Some(path) = path else {
            return Ok(Config::embedded());
        };
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.into(), source: Arc::new(source) })?;
        Config::parse(&path.display().to_string(), &text, path.parent().unwrap_or(Path::new(".")))
    }

    /// The defaults with the KDL `text` applied; `name` labels errors and relative paths resolve
    /// against `base`.
    pub fn parse(name: &str, text: &str, base: &Path) -> Result<Config, ConfigError> {
        kdl::apply(Config::embedded(), name, text, base)
    }

    /// The starting point before the embedded defaults are applied; every field is overwritten
    /// by `default.kdl`, which a test checks.
    fn empty() -> Config {
        let unspecified = SocketAddr::from(([0, 0, 0, 0], 0));
        Config {
            listen: unspecified,
            secret: None,
            log_format: LogFormat::Text,
            verdict: VerdictConfig {
                mode: Mode::Enforce,
                answer: Answer::Status,
                trap_status: 0,
                redirect_prefix: String::new(),
                trusted_proxies: Vec::new(),
                ipv4_prefix: 0,
                ipv6_prefix: 0,
            },
            clients: ClientStateConfig {
                capacity: 0,
                idle_timeout: Duration::ZERO,
                trap_half_life: Duration::ZERO,
                requests_per_minute: 0,
                request_burst: 0,
                store: crate::client_state::store::StoreConfig::default(),
            },
            geo: GeoConfig::default(),
            rules: RulesConfig {
                script: None,
                lists: None,
                fail: FailMode::Open,
                limits: Limits { time: Duration::ZERO, memory: 0 },
                workers: 0,
                trap_threshold: 0.0,
                challenge_everyone: false,
                challenge_unanswered: 0,
                preferences: Default::default(),
            },
            trap: TrapConfig {
                listen: unspecified,
                page: PageSettings { min_bytes: 0, max_bytes: 0, min_links: 0, max_links: 0 },
                drip: DripConfig { enabled: false, bytes_per_second: 0, chunk_bytes: 0, max_connections: 0 },
                template: None,
            },
            corpus: CorpusConfig { order: 0, embedded: false, paths: Vec::new() },
            connections: ConnectionConfig {
                header_read_timeout: Duration::ZERO,
                keep_alive_timeout: Duration::ZERO,
                max_connections: None,
            },
            admin: AdminConfig::default(),
            dns: DnsConfig {
                servers: Vec::new(),
                timeout: Duration::ZERO,
                verdict_wait: Duration::ZERO,
                lookups_per_second: 0,
                max_pending: 0,
            },
            lists: ListsConfig { refresh: None, timeout: Duration::ZERO, sources: Vec::new() },
            web_bot_auth: WebBotAuthConfig {
                enabled: false,
                allow_http: false,
                allow_private: false,
                timeout: Duration::ZERO,
                verdict_wait: Duration::ZERO,
                fetches_per_second: 0,
                max_pending: 0,
            },
            robots: RobotsConfig::default(),
            preferences: Preferences::default(),
            crowdsec: CrowdSecConfig::default(),
            owner_tools: Default::default(),
            challenge: ChallengeConfig {
                difficulty: 0,
                pass_lifetime: Duration::ZERO,
                path: String::new(),
                wait: Duration::ZERO,
                unanswered: 0,
                everyone: false,
                burn: crate::challenge::BurnLimits {
                    trap_hits: 0,
                    networks: 0,
                    window: Duration::ZERO,
                    pages_per_minute: 0,
                    page_burst: 0,
                },
            },
        }
    }
}

#[cfg(test)]
mod tests;
