//! What the address says about a client before its history is read: its ASN, AS organisation
//! and country ([`geo`]), and whether it is one of the site owner's own tools
//! ([`owner_tools`]).

pub(crate) mod geo;
pub(crate) mod owner_tools;
