//! The secret that keys trap pages and trap URLs, and where it came from.
//!
//! The environment (`QUAGMIRE_SECRET`) wins over the config file, so a secret can be kept out of
//! files. Without either, a random secret is made, and pages change on every restart.

use rand::Rng;

/// Name of the environment variable that supplies the secret.
pub const SECRET_ENV: &str = "QUAGMIRE_SECRET";

/// Key material for the generator and the trap-URL check.
#[derive(Clone)]
pub struct Secret(Vec<u8>);

/// Where the secret came from, for the startup log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretOrigin {
    /// `QUAGMIRE_SECRET`.
    Environment,
    /// The config file's `secret`.
    Config,
    /// Made at start: pages and trap URLs change on restart.
    Random,
}

impl Secret {
    /// The secret from `environment` (the variable's value), else `config`, else a random one.
    pub fn resolve(environment: Option<String>, config: Option<&str>) -> (Secret, SecretOrigin) {
        if let Some(value) = environment.filter(|value| !value.is_empty()) {
            return (Secret(value.into_bytes()), SecretOrigin::Environment);
        }
        if let Some(value) = config {
            return (Secret(value.as_bytes().to_vec()), SecretOrigin::Config);
        }
        let mut bytes = vec![0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        (Secret(bytes), SecretOrigin::Random)
    }

    /// The key bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_wins_over_config_and_random_is_the_fallback() {
        let (secret, origin) = Secret::resolve(Some("from-env".into()), Some("from-config"));
        assert_eq!((secret.as_bytes(), origin), (&b"from-env"[..], SecretOrigin::Environment));
        let (secret, origin) = Secret::resolve(Some(String::new()), Some("from-config"));
        assert_eq!((secret.as_bytes(), origin), (&b"from-config"[..], SecretOrigin::Config));
        let (first, origin) = Secret::resolve(None, None);
        let (second, _) = Secret::resolve(None, None);
        assert_eq!(origin, SecretOrigin::Random);
        assert_ne!(first.as_bytes(), second.as_bytes());
    }
}
