//! quagmire makes AI scraper bots pay for ignoring the rules.
//!
//! A reverse proxy asks quagmire, for every request, whether the client is a human or a bot
//! (forward auth). Bots are sent into the trap: endless, cheap, deterministic Markov-chain pages
//! that look like an ordinary site, each linking to more of them through URLs that only this
//! secret can mint and recognise.
//!
//! The verdict flow: [`http::verdict`] → [`verdict::decide`] ([`client`] identity, [`geo`]
//! enrichment, [`client_state`] history, [`rules`]) → response.
//!
//! The trap flow: [`http::trap`] → [`generator`] (with [`generator::markov`] and
//! [`generator::html`]) → page, linking to URLs from [`trap_url`]. [`lists_update`] keeps the
//! crawler lists fresh. Everything is built once by
//! [`app::App::build`] from a [`config::Config`] before any port is bound. See ARCHITECTURE.md.

pub mod app;
pub mod bounded_file;
pub mod claims;
pub mod client;
pub mod client_state;
pub mod config;
pub mod corpus;
pub mod crawler;
pub mod explain;
pub mod facts;
pub mod fd_limit;
pub mod generator;
pub mod geo;
pub mod http;
pub mod lists;
pub mod lists_update;
pub mod log_field;
pub mod log_sink;
pub mod metrics;
pub mod numbers;
pub mod outbound;
pub mod reload;
pub mod replay;
pub mod rules;
pub mod secret;
pub mod signature;
pub mod single_flight;
pub mod snippets;
pub mod trap_url;
pub mod user_agent;
pub mod verdict;
pub mod vocabulary;

pub use app::App;
pub use config::Config;
