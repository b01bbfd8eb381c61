//! Enrichment: ASN, AS organisation and country of an address, from MaxMind-format databases
//! (GeoLite2-ASN, DB-IP ASN Lite, GeoLite2-Country...).
//!
//! Databases are read whole into memory at start; a missing or corrupt file is an error that
//! names it. [`Geo::reload_if_changed`] swaps in a new copy when the file's modification time
//! changes, and keeps the old one if the new file is broken. Lookups never fail: an unknown
//! address has empty fields.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use arc_swap::ArcSwapOption;
use maxminddb::{Reader, geoip2};

/// What the databases know about one address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GeoInfo {
    /// Autonomous system number.
    pub asn: Option<u32>,
    /// Autonomous system organisation.
    pub asn_org: Option<String>,
    /// ISO 3166 country code.
    pub country: Option<String>,
}

/// A database file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("cannot open MaxMind database {path}: {reason}")]
pub struct GeoError {
    path: PathBuf,
    reason: String,
}

/// The configured databases.
pub struct Geo {
    asn: Option<Database>,
    country: Option<Database>,
}

struct Database {
    path: PathBuf,
    reader: ArcSwapOption<Reader<Vec<u8>>>,
    modified: Mutex<Option<SystemTime>>,
}

impl Geo {
    /// Opens the databases that are configured; `None` means not used.
    pub fn open(asn: Option<&Path>, country: Option<&Path>) -> Result<Geo, GeoError> {
        Ok(Geo {
            asn: asn.map(Database::open).transpose()?,
            country: country.map(Database::open).transpose()?,
        })
    }

    /// No databases: every lookup is empty.
    pub fn none() -> Geo {
        Geo { asn: None, country: None }
    }

    /// What is known about `address`.
    pub fn lookup(&self, address: IpAddr) -> GeoInfo {
        let mut info = GeoInfo::default();
        if let Some(reader) = self.asn.as_ref().and_then(|db| db.reader.load_full())
            && let Ok(Some(asn)) = reader.lookup(address).and_then(|found| found.decode::<geoip2::Asn>())
        {
            info.asn = asn.autonomous_system_number;
            info.asn_org = asn.autonomous_system_organization.map(str::to_string);
        }
        if let Some(reader) = self.country.as_ref().and_then(|db| db.reader.load_full())
            && let Ok(Some(country)) =
                reader.lookup(address).and_then(|found| found.decode::<geoip2::Country>())
        {
            info.country = country.country.iso_code.map(str::to_string);
        }
        info
    }

    /// Re-reads any database whose file changed. Returns the databases reloaded; a broken new
    /// file is an error and the old copy stays in use.
    pub fn reload_if_changed(&self) -> Result<Vec<PathBuf>, GeoError> {
        let mut reloaded = Vec::new();
        for database in self.asn.iter().chain(self.country.iter()) {
            if database.reload_if_changed()? {
                reloaded.push(database.path.clone());
            }
        }
        Ok(reloaded)
    }
}

impl Database {
    fn open(path: &Path) -> Result<Database, GeoError> {
        let (reader, modified) = read(path)?;
        Ok(Database {
            path: path.to_path_buf(),
            reader: ArcSwapOption::from(Some(Arc::new(reader))),
            modified: Mutex::new(modified),
        })
    }

    fn reload_if_changed(&self) -> Result<bool, GeoError> {
        let modified = std::fs::metadata(&self.path).and_then(|meta| meta.modified()).ok();
        let mut known = self.modified.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if modified == *known {
            return Ok(false);
        }
        // Remember the new time even on failure, so a broken file is reported once, not every poll.
        *known = modified;
        let (reader, _) = read(&self.path)?;
        self.reader.store(Some(Arc::new(reader)));
        Ok(true)
    }
}

fn read(path: &Path) -> Result<(Reader<Vec<u8>>, Option<SystemTime>), GeoError> {
    let error = |reason: String| GeoError { path: path.to_path_buf(), reason };
    let bytes = std::fs::read(path).map_err(|e| error(e.to_string()))?;
    let modified = std::fs::metadata(path).and_then(|meta| meta.modified()).ok();
    let reader = Reader::from_source(bytes).map_err(|e| error(e.to_string()))?;
    Ok((reader, modified))
}
