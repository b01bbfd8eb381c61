//! quagmire makes AI scraper bots pay for ignoring the rules.
//!
//! A reverse proxy asks quagmire, for every request, whether the client is a human or a bot
//! (forward auth). Bots are sent into the trap: endless, cheap, deterministic Markov-chain pages
//! that look like an ordinary site, each linking to more of them through URLs that only this
//! secret can mint and recognise.
//!
//! The verdict flow: [`http::verdict`] → [`verdict::decide`] ([`client`] identity, [`enrich`]
//! (ASN, country, the owner's tools), [`client_state`] history, [`verify`] (crawlers,
//! signatures, robots.txt, CrowdSec), [`facts`], [`rules`]) → response.
//!
//! The trap flow: [`http::trap`] → [`trap::generator`] (with [`trap::generator::markov`] and
//! [`trap::generator::html`]) → page, linking to URLs from [`trap::urls`]. [`lists::update`]
//! keeps the crawler lists fresh; [`service`] runs the listeners and the background tasks; the
//! leaf helpers are in [`support`]. Everything is built once by [`app::App::build`] from a
//! [`config::Config`] before any port is bound. See ARCHITECTURE.md.

#![warn(unreachable_pub)]

mod app;
mod challenge;
mod client;
mod client_state;
mod config;
mod enrich;
mod facts;
mod http;
mod lists;
mod observe;
mod rules;
mod service;
mod support;
mod tools;
mod trap;
mod verdict;
mod verify;
mod vocabulary;

// The crate's boundary, in one place: everything outside `src/` (the `quagmire` binary, the
// integration tests, the benches and bench tools, the fuzz targets) reaches the library only
// through these names. Every module is private and every item in it `pub(crate)` unless it is
// named here or appears in something named here (`unreachable_pub` keeps that true), so a module
// map in ARCHITECTURE.md is the whole story of who may call what.

// Assembling and running the service (the binary's `serve`, `check`, `generate`).
pub use app::{App, BuildError};
pub use config::{Config, ConfigError, LogFormat};
pub use http::{admin_router, trap_router, verdict_router};
pub use observe::log_sink::{flush as flush_logs, init as init_logging};
pub use service::serve;
pub use support::log_field::terminal_safe_json;
pub use support::secret::{SECRET_ENV, Secret, SecretOrigin};

// The binary's other subcommands.
pub use lists::update::update as update_lists;
pub use tools::explain::{ExplainError, explain, read_request as read_explain_request, request_from_flags};
pub use tools::replay::formats::{
    Defaults as ReplayDefaults, Format as ReplayFormat, parse as parse_log_line,
};
pub use tools::replay::input::Source as ReplaySource;
pub use tools::replay::{Options as ReplayOptions, ReplayError, compare_rules, replay};
pub use trap::snippets::Snippets;

// One decision, as the benches and bench tools drive it.
pub use verdict::{ForwardedRequest, How, Judgement, RunRules, Verify, decide_blocking};

// Challenges and passes, for the benches of their checks.
pub use challenge::{
    AnswerError, Answered, BurnLimits, ChallengeConfig, Challenger, Issued, Pass, PassCheck, meets_difficulty,
};
pub use facts::claims::Earned;

// The trap's parts, for the page benches and the fingerprint tool.
pub use trap::corpus::{embedded as embedded_corpus, load as load_corpus};
pub use trap::generator::markov::Chain;
pub use trap::generator::{Generator, PageSettings};
pub use trap::urls::TrapUrls;

// Parsers of hostile input, for the fuzz targets.
pub use client::{ClientIdentity, HeaderLines};
pub use facts::claims::RobotsCheck;
pub use http::forwarded::forwarded_request;
pub use http::trap::page_address;
pub use lists::update::formats::{Format as ListSourceFormat, Kind as ListKind};
pub use lists::update::sanity as list_sanity;
pub use lists::{DEFAULT_LISTS, List};
pub use support::request_path::{Normalised as NormalisedPath, normalise as normalise_path};
pub use support::user_agent::browser_claim;
pub use verify::robots::answer_text as robots_answer;

// Metrics rendering, for the dashboard and alert tests.
pub use observe::metrics::{HitSource, Metrics, Scope as MetricsScope};
pub use vocabulary::{AiKind, FailureKind, Preference, Preferences, Verdict};
