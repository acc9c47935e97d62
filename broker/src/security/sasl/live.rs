//! The credentials in force: one [`CredentialStore`], replaced whole when the cluster's users
//! change (AlterUserScramCredentials on any broker, seen through the metadata store's watch).
//! Each new SASL exchange takes the set in force when it starts, so a deleted user's next login
//! fails while an exchange already under way finishes against the set it began with.
//!
//! Must never: hold a plain password, or change the server secret (fake credentials of unknown
//! users must stay stable for the process's life).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use super::{CredentialStore, SaslError, ScramCredential, ScramMechanism};

/// The credentials in force and the secret every set is built with.
#[derive(Debug)]
pub struct LiveCredentials {
    current: RwLock<Arc<CredentialStore>>,
    server_secret: Vec<u8>,
}

impl LiveCredentials {
    /// Starts with `initial` (the file's users, or none); `server_secret` must not be empty.
    pub fn new(
        initial: HashMap<(ScramMechanism, String), ScramCredential>,
        server_secret: Vec<u8>,
    ) -> Result<Self, SaslError> {
        let store = CredentialStore::from_users(initial, &server_secret)?;
        Ok(Self {
            current: RwLock::new(Arc::new(store)),
            server_secret,
        })
    }

    /// The set in force.
    pub fn current(&self) -> Arc<CredentialStore> {
        match self.current.read() {
            Ok(current) => current.clone(),
            // Writers only swap an Arc; a poisoned lock still holds a whole set.
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Replaces the set in force with `users`, whole.
    pub fn replace(
        &self,
        users: HashMap<(ScramMechanism, String), ScramCredential>,
    ) -> Result<(), SaslError> {
        let store = Arc::new(CredentialStore::from_users(users, &self.server_secret)?);
        match self.current.write() {
            Ok(mut current) => *current = store,
            Err(poisoned) => *poisoned.into_inner() = store,
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::sasl::credentials::credential_from_password;

    #[test]
    fn a_replaced_set_answers_new_lookups() {
        let credential =
            credential_from_password(ScramMechanism::Sha256, "pw", b"0123456789abcdef", 4096);
        let key = (ScramMechanism::Sha256, "alice".to_owned());
        let live = LiveCredentials::new(
            HashMap::from([(key.clone(), credential.clone())]),
            b"secret".to_vec(),
        )
        .expect("live");
        let before = live.current();
        assert!(before.lookup(ScramMechanism::Sha256, "alice").1);
        live.replace(HashMap::new()).expect("replace");
        assert!(!live.current().lookup(ScramMechanism::Sha256, "alice").1);
        // A set taken before the change keeps answering as it did.
        assert!(before.lookup(ScramMechanism::Sha256, "alice").1);
        assert!(LiveCredentials::new(HashMap::new(), Vec::new()).is_err());
    }
}
