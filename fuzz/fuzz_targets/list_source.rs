//! What a list source publishes, in every format (`Format::parse`), and the checks that refuse
//! what cannot be right (`lists_update::sanity`), for arbitrary bytes.
//!
//! Beyond not panicking: a parsed source has entries (an empty download never replaces a list),
//! every entry is one line without a comment sign, and the sanity checks accept or refuse without
//! failing, whatever the entries.

#![no_main]

use libfuzzer_sys::fuzz_target;
use quagmire::list_sanity as sanity;
use quagmire::{ListKind as Kind, ListSourceFormat as Format};

fuzz_target!(|data: &[u8]| {
    for (_, format) in Format::ALL {
        let Ok(parsed) = format.parse(data) else { continue };
        assert!(!parsed.entries.is_empty(), "{format:?} accepted a source with no entries");
        for entry in &parsed.entries {
            assert!(!entry.contains('\n') && !entry.contains('#'), "{format:?} entry {entry:?}");
        }
        let kind = format.kind();
        let _ = sanity::count(kind, parsed.entries.len());
        let _ = sanity::growth(parsed.entries.len(), data.len() % 1000);
        match kind {
            Kind::Networks => {
                let _ = sanity::networks(parsed.entries.iter().map(String::as_str));
            }
            Kind::Tokens if parsed.entries.len() <= sanity::MAX_TOKENS => {
                let _ = sanity::tokens(parsed.entries.iter().map(String::as_str));
            }
            Kind::Tokens | Kind::Asns => {}
        }
    }
});
