//! Leaf helpers the rest of the crate stands on, none of which knows what a verdict or a trap
//! is: number formatting and draws, the path as the origin reads it, user agents, a prefix map,
//! bounded log fields and file reads, the secret, the open-file limit, single-flight lookups and
//! the one outgoing HTTP client. Nothing here imports a module outside this folder.

pub(crate) mod bounded_file;
pub(crate) mod fd_limit;
pub(crate) mod log_field;
pub(crate) mod numbers;
pub(crate) mod outbound;
pub(crate) mod prefix_map;
pub(crate) mod request_path;
pub(crate) mod secret;
pub(crate) mod single_flight;
pub(crate) mod user_agent;
