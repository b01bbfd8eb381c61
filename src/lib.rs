//! quagmire makes AI scraper bots pay for ignoring the rules.
//!
//! A reverse proxy asks quagmire, for every request, whether the client is a human or a bot
//! (forward auth). Bots are sent into the trap: endless, cheap, deterministic Markov-chain pages
//! that look like an ordinary site, each linking to more of them through URLs that only this
//! secret can mint and recognise.
//!
//! The trap flow: [`http::trap`] → [`generator`] (with [`generator::markov`] and
//! [`generator::html`]) → page, linking to URLs from [`trap_url`]. Everything is built once by
//! [`app::App::build`] from a [`config::Config`] before any port is bound. See ARCHITECTURE.md.

pub mod app;
pub mod config;
pub mod corpus;
pub mod generator;
pub mod http;
pub mod secret;
pub mod trap_url;

pub use app::App;
pub use config::Config;
