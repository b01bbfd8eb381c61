//! The trap, everything but its HTTP door ([`crate::http::trap`]): the page [`generator`], the
//! text its Markov model learns from ([`corpus`]), the trap URLs pages link to and verdicts
//! recognise ([`urls`]), and the [`snippets`] a site adds to lead crawlers in.

pub(crate) mod corpus;
pub(crate) mod generator;
pub(crate) mod snippets;
pub(crate) mod urls;
