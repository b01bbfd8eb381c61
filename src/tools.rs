//! The owner's offline tools, built on the same `decide` as `/verdict`: [`explain`] judges one
//! request and shows why, rule by rule; [`replay`] runs a site's access logs through the rules.

pub(crate) mod explain;
pub(crate) mod replay;
