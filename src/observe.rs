//! What the service tells its operator: the Prometheus metrics ([`metrics`]) and where log lines
//! go and how many a flood may write ([`log_sink`]).

pub(crate) mod log_sink;
pub(crate) mod metrics;
