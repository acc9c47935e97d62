//! A TLS listener's acceptor, replaced live when its keystore changes: Kafka's dynamic keystore
//! update. An operator points `listener.name.<listener>.ssl.keystore.location` (per broker, as in
//! Kafka) at a new file, or sets it again to the same path after rewriting the file; the broker
//! checks the new keystore before storing the change ([`LiveAcceptor::check`]) and every listener
//! then serves new connections with it ([`follow`]); connections already open keep theirs.
//!
//! As Kafka does by default (`ssl.allow.dn.changes` and `ssl.allow.san.changes` false), the new
//! certificate must name the same subject and subject alternative names as the one it replaces:
//! clients that pinned the broker's identity keep trusting it.
//!
//! Must never: replace a working acceptor with one it could not build, or with a certificate of
//! another identity.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::config::Config;

/// Which file a keystore was loaded from, and its state then: a change of any part (a new path,
/// or the same path rewritten) loads it again.
#[derive(Clone, Debug, PartialEq, Eq)]
struct KeystoreStamp {
    path: PathBuf,
    modified: Option<SystemTime>,
    len: u64,
}

impl KeystoreStamp {
    fn of(path: &Path) -> Self {
        let metadata = std::fs::metadata(path).ok();
        Self {
            path: path.to_owned(),
            modified: metadata.as_ref().and_then(|m| m.modified().ok()),
            len: metadata.map_or(0, |m| m.len()),
        }
    }
}

/// The identity a keystore's first certificate states: its subject and its subject alternative
/// names, as DER (Kafka compares the two).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Identity {
    subject: Vec<u8>,
    alt_names: Option<Vec<u8>>,
}

impl Identity {
    fn of(keystore: &Path) -> Result<Self, String> {
        let first = CertificateDer::pem_file_iter(keystore)
            .map_err(|error| error.to_string())?
            .next()
            .ok_or("no CERTIFICATE block")?
            .map_err(|error| error.to_string())?;
        let (_, parsed) = x509_parser::parse_x509_certificate(first.as_ref())
            .map_err(|error| format!("unreadable certificate: {error}"))?;
        let alt_names = parsed
            .extensions()
            .iter()
            .find(|extension| {
                extension.oid == x509_parser::oid_registry::OID_X509_EXT_SUBJECT_ALT_NAME
            })
            .map(|extension| extension.value.to_vec());
        Ok(Self {
            subject: parsed.subject().as_raw().to_vec(),
            alt_names,
        })
    }
}

struct Loaded {
    acceptor: TlsAcceptor,
    stamp: KeystoreStamp,
    identity: Identity,
}

/// One TLS listener's acceptor and the keystore it came from.
pub(crate) struct LiveAcceptor {
    listener: String,
    loaded: RwLock<Loaded>,
}

impl LiveAcceptor {
    /// Loads listener `listener`'s keystore (a clear error stops the start).
    pub(crate) fn load(
        config: &Config,
        listener: &str,
    ) -> Result<Self, crate::config::ConfigError> {
        let loaded =
            build(config, listener).map_err(|reason| crate::config::ConfigError::InvalidValue {
                key: keystore_key(config, listener),
                reason,
            })?;
        Ok(Self {
            listener: listener.to_owned(),
            loaded: RwLock::new(loaded),
        })
    }

    /// The listener's name.
    pub(crate) fn listener(&self) -> &str {
        &self.listener
    }

    /// The acceptor new connections use.
    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        match self.loaded.read() {
            Ok(loaded) => loaded.acceptor.clone(),
            Err(poisoned) => poisoned.into_inner().acceptor.clone(),
        }
    }

    /// Whether `next` (a config a dynamic change would make) gives this listener a keystore it
    /// can serve: one that loads, with the current identity. Unchanged keystores pass.
    pub(crate) fn check(&self, next: &Config) -> Result<(), String> {
        let Some(path) = next.keystore_of(&self.listener) else {
            return Err(format!("listener {} has no keystore", self.listener));
        };
        if KeystoreStamp::of(path) == self.stamp() {
            return Ok(());
        }
        let candidate = build(next, &self.listener)?;
        self.same_identity(&candidate.identity)
    }

    fn stamp(&self) -> KeystoreStamp {
        match self.loaded.read() {
            Ok(loaded) => loaded.stamp.clone(),
            Err(poisoned) => poisoned.into_inner().stamp.clone(),
        }
    }

    fn same_identity(&self, candidate: &Identity) -> Result<(), String> {
        let current = match self.loaded.read() {
            Ok(loaded) => loaded.identity.clone(),
            Err(poisoned) => poisoned.into_inner().identity.clone(),
        };
        if current.subject != candidate.subject {
            return Err(
                "Keystore DistinguishedName does not match the current certificate's".into(),
            );
        }
        if current.alt_names != candidate.alt_names {
            return Err("Keystore SubjectAltNames do not match the current certificate's".into());
        }
        Ok(())
    }

    /// Loads the keystore `config` names for this listener again if its path or file changed;
    /// one that cannot be served is logged and the current one kept.
    pub(crate) fn reload_if_changed(&self, config: &Config) {
        let Some(path) = config.keystore_of(&self.listener) else {
            return;
        };
        if KeystoreStamp::of(path) == self.stamp() {
            return;
        }
        let outcome = build(config, &self.listener).and_then(|candidate| {
            self.same_identity(&candidate.identity)?;
            Ok(candidate)
        });
        match outcome {
            Ok(candidate) => {
                tracing::info!(listener = %self.listener, keystore = %candidate.stamp.path.display(), "TLS keystore reloaded; new connections use it");
                if let Ok(mut loaded) = self.loaded.write() {
                    *loaded = candidate;
                }
            }
            Err(error) => {
                tracing::error!(listener = %self.listener, %error, "TLS keystore not reloaded; the listener keeps the current one")
            }
        }
    }
}

/// The key naming `listener`'s keystore in `config`.
fn keystore_key(config: &Config, listener: &str) -> String {
    let own = listener.to_ascii_lowercase();
    if config.listener_keystores.contains_key(&own) {
        format!("listener.name.{own}.ssl.keystore.location")
    } else {
        "ssl.keystore.location".to_owned()
    }
}

fn build(config: &Config, listener: &str) -> Result<Loaded, String> {
    let path = config
        .keystore_of(listener)
        .ok_or("a TLS listener needs a keystore")?
        .to_owned();
    // Stamped before reading: a file rewritten meanwhile differs from the stamp and is read again.
    let stamp = KeystoreStamp::of(&path);
    let acceptor =
        super::acceptor_with_keystore(config, &path).map_err(|error| error.to_string())?;
    let identity = Identity::of(&path).map_err(|error| format!("{}: {error}", path.display()))?;
    Ok(Loaded {
        acceptor,
        stamp,
        identity,
    })
}

/// Follows the effective config until shutdown, reloading each listener's keystore when it
/// changes (a dynamic change, even to the same path, notifies every follower).
pub(crate) async fn follow(
    acceptors: Vec<Arc<LiveAcceptor>>,
    mut configs: watch::Receiver<Arc<Config>>,
    mut shutdown: watch::Receiver<bool>,
) {
    if acceptors.is_empty() {
        return;
    }
    loop {
        let config = configs.borrow_and_update().clone();
        for acceptor in &acceptors {
            acceptor.reload_if_changed(&config);
        }
        tokio::select! {
            changed = configs.changed() => if changed.is_err() { return },
            _ = shutdown.changed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A keystore (certificate and key, PEM) for `common_name` with `names` as its alternative
    /// names, each call with a new key.
    fn keystore(path: &Path, common_name: &str, names: &[&str]) {
        let mut params = rcgen::CertificateParams::new(
            names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>(),
        )
        .expect("params");
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, common_name);
        let key = rcgen::KeyPair::generate().expect("key");
        let certificate = params.self_signed(&key).expect("certificate");
        std::fs::write(
            path,
            format!("{}{}", certificate.pem(), key.serialize_pem()),
        )
        .expect("write");
    }

    fn with_listener_keystore(path: &Path) -> Config {
        let mut config = Config::default();
        config
            .apply_override(&format!(
                "listener.name.ssl.ssl.keystore.location={}",
                path.display()
            ))
            .expect("key");
        config
    }

    #[test]
    fn a_new_keystore_of_the_same_identity_is_taken_and_another_identity_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let (first, second, other, sans) = (
            dir.path().join("first.pem"),
            dir.path().join("second.pem"),
            dir.path().join("other.pem"),
            dir.path().join("sans.pem"),
        );
        keystore(&first, "broker-1", &["localhost"]);
        keystore(&second, "broker-1", &["localhost"]);
        keystore(&other, "broker-2", &["localhost"]);
        keystore(&sans, "broker-1", &["localhost", "elsewhere"]);
        let live = LiveAcceptor::load(&with_listener_keystore(&first), "SSL").expect("load");

        assert!(
            live.check(&with_listener_keystore(&first)).is_ok(),
            "unchanged"
        );
        assert!(live.check(&with_listener_keystore(&second)).is_ok());
        let refused = live.check(&with_listener_keystore(&other)).expect_err("dn");
        assert!(refused.contains("DistinguishedName"), "{refused}");
        let refused = live.check(&with_listener_keystore(&sans)).expect_err("san");
        assert!(refused.contains("SubjectAltNames"), "{refused}");
        let missing = live
            .check(&with_listener_keystore(&dir.path().join("gone.pem")))
            .expect_err("missing");
        assert!(missing.contains("gone.pem"), "{missing}");

        live.reload_if_changed(&with_listener_keystore(&other));
        assert_eq!(live.stamp().path, first, "another identity is not served");
        live.reload_if_changed(&with_listener_keystore(&second));
        assert_eq!(live.stamp().path, second);
    }

    #[test]
    fn the_same_path_rewritten_is_read_again() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("keystore.pem");
        keystore(&path, "broker-1", &["localhost"]);
        let config = with_listener_keystore(&path);
        let live = LiveAcceptor::load(&config, "ssl").expect("load");
        let before = live.stamp();
        keystore(&path, "broker-1", &["localhost"]);
        let later = SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|file| file.set_modified(later))
            .expect("touch");
        live.reload_if_changed(&config);
        assert_ne!(live.stamp(), before);
        assert_eq!(live.stamp(), KeystoreStamp::of(&path));
    }
}
