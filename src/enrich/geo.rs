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
pub(crate) struct Geo {
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
    pub(crate) fn open(asn: Option<&Path>, country: Option<&Path>) -> Result<Geo, GeoError> {
        Ok(Geo {
            asn: asn.map(Database::open).transpose()?,
            country: country.map(Database::open).transpose()?,
        })
    }

    /// No databases: every lookup is empty.
    #[cfg(test)]
    pub(crate) fn none() -> Geo {
        Geo { asn: None, country: None }
    }

    /// What is known about `address`.
    pub(crate) fn lookup(&self, address: IpAddr) -> GeoInfo {
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
    pub(crate) fn reload_if_changed(&self) -> Result<Vec<PathBuf>, GeoError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn write_asn_db(path: &Path, asn: u32, org: &str) {
        use mmdb_writer::{Value, Writer};
        let mut writer = Writer::new("GeoLite2-ASN");
        let record = Value::map([
            ("autonomous_system_number", Value::U32(asn)),
            ("autonomous_system_organization", Value::String(org.into())),
        ]);
        writer.insert_value("192.0.2.0/24".parse::<ipnet::IpNet>().unwrap(), record).unwrap();
        std::fs::write(path, writer.to_bytes().unwrap()).unwrap();
    }

    /// Moves the file's modification time on, as a later write would.
    fn touch_later(path: &Path, seconds: u64) {
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(SystemTime::now() + std::time::Duration::from_secs(seconds)).unwrap();
    }

    #[test]
    fn lookups_find_asn_and_org_and_unknown_addresses_are_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("asn.mmdb");
        write_asn_db(&path, 64500, "Example Net");
        let geo = Geo::open(Some(&path), None).unwrap();
        let info = geo.lookup("192.0.2.7".parse().unwrap());
        assert_eq!((info.asn, info.asn_org.as_deref()), (Some(64500), Some("Example Net")));
        assert_eq!(geo.lookup("198.51.100.1".parse().unwrap()), GeoInfo::default());
        assert_eq!(Geo::none().lookup("192.0.2.7".parse().unwrap()), GeoInfo::default());
    }

    #[test]
    fn a_changed_file_is_reloaded_and_a_broken_one_keeps_the_old_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("asn.mmdb");
        write_asn_db(&path, 64500, "Before");
        let geo = Geo::open(Some(&path), None).unwrap();
        assert!(geo.reload_if_changed().unwrap().is_empty(), "nothing changed yet");

        write_asn_db(&path, 64501, "After");
        touch_later(&path, 10);
        assert_eq!(geo.reload_if_changed().unwrap(), vec![path.clone()]);
        assert_eq!(geo.lookup("192.0.2.7".parse().unwrap()).asn, Some(64501));

        std::fs::write(&path, b"not a database").unwrap();
        touch_later(&path, 20);
        let error = geo.reload_if_changed().unwrap_err();
        assert!(error.to_string().contains("asn.mmdb"), "{error}");
        assert_eq!(geo.lookup("192.0.2.7".parse().unwrap()).asn, Some(64501), "the old data stays");
    }

    #[test]
    fn missing_and_corrupt_files_are_errors_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.mmdb");
        assert!(Geo::open(Some(&missing), None).err().unwrap().to_string().contains("missing.mmdb"));
        let corrupt = dir.path().join("corrupt.mmdb");
        std::fs::write(&corrupt, b"garbage").unwrap();
        assert!(Geo::open(None, Some(&corrupt)).err().unwrap().to_string().contains("corrupt.mmdb"));
    }
}
