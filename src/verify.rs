//! The verifiers: each checks one thing a request claims, and hands the rules a
//! [`crate::facts::claims`] value: a known crawler's name against its published ranges or
//! reverse DNS ([`crawler`]), a Web Bot Auth signature ([`signature`]), what the site's own
//! robots.txt says of the request ([`robots`]), and CrowdSec's decisions on the address, with the
//! alerts sent back ([`crowdsec`]). None of them waits on the network past a stated budget.

pub(crate) mod crawler;
pub(crate) mod crowdsec;
pub(crate) mod robots;
pub(crate) mod signature;
