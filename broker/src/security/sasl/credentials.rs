//! The SCRAM credentials store: users' salted keys, never their passwords, from the metadata
//! store or (the bootstrap) a text file; and the fake credential that stands in for an unknown
//! user.
//!
//! File format, one credential a line, fields separated by single spaces; blank lines and lines
//! starting with `#` are ignored:
//!
//! ```text
//! SCRAM-SHA-512 <user> <iterations> <salt base64> <StoredKey base64> <ServerKey base64>
//! SCRAM-SHA-256 <user> <iterations> <salt base64> <StoredKey base64> <ServerKey base64>
//! ```
//!
//! User names are the SCRAM `saslname` as clients send it, decoded (`=2C` is a comma, `=3D` an
//! equals sign); they may not contain spaces. PLAIN logins are checked against the user's
//! SCRAM-SHA-512 line, so no plain password exists anywhere on the broker.
//!
//! Must never: hold a plain password, or answer differently (in content or in work) for an unknown
//! user than for a known one with a wrong password — [`CredentialStore::lookup`] always returns a
//! credential, a fake one derived from the server secret when the user is unknown.

use std::collections::HashMap;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;

use super::crypto;
use super::{SaslError, ScramMechanism};

/// Fewest PBKDF2 iterations a stored credential may use (RFC 7677 asks for at least 4096).
pub const SCRAM_ITERATIONS_MIN: u32 = 4096;

/// Most PBKDF2 iterations a stored credential may use: bounds the work of one login attempt.
pub const SCRAM_ITERATIONS_MAX: u32 = 16384;

/// Iterations of the fake credential of an unknown user. Equal to what [`credential_from_password`]
/// callers are told to use by default, so unknown users look like typical ones.
pub const SCRAM_ITERATIONS_DEFAULT: u32 = 4096;

/// Salt bytes of a fake credential (and the recommended salt size for real ones).
pub const SCRAM_SALT_BYTES: usize = 16;

/// Longest salt accepted from the credentials file.
pub const SCRAM_SALT_BYTES_MAX: usize = 64;

/// One user's SCRAM credential for one mechanism.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    /// The salt the client derives its keys with.
    pub salt: Vec<u8>,
    /// PBKDF2 iterations.
    pub iterations: u32,
    /// H(ClientKey).
    pub stored_key: Vec<u8>,
    /// HMAC(SaltedPassword, "Server Key").
    pub server_key: Vec<u8>,
}

impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Keys stay out of logs: they are password equivalents for the server side.
        f.debug_struct("ScramCredential")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// Derives a credential from a password (for tooling that writes the credentials file, and tests).
pub fn credential_from_password(
    mechanism: ScramMechanism,
    password: &str,
    salt: &[u8],
    iterations: u32,
) -> ScramCredential {
    let salted = crypto::salted_password(mechanism, password.as_bytes(), salt, iterations);
    let (stored_key, server_key) = crypto::stored_and_server_keys(mechanism, &salted);
    ScramCredential {
        salt: salt.to_vec(),
        iterations,
        stored_key,
        server_key,
    }
}

/// The credential of a salted password (AlterUserScramCredentials sends the salted password,
/// never the password): StoredKey and ServerKey as RFC 5802 derives them.
pub fn credential_from_salted_password(
    mechanism: ScramMechanism,
    salted_password: &[u8],
    salt: &[u8],
    iterations: u32,
) -> ScramCredential {
    let (stored_key, server_key) = crypto::stored_and_server_keys(mechanism, salted_password);
    ScramCredential {
        salt: salt.to_vec(),
        iterations,
        stored_key,
        server_key,
    }
}

/// The line of the credentials file for one credential.
pub fn credential_line(
    mechanism: ScramMechanism,
    user: &str,
    credential: &ScramCredential,
) -> String {
    format!(
        "{} {user} {} {} {} {}",
        mechanism.name(),
        credential.iterations,
        BASE64.encode(&credential.salt),
        BASE64.encode(&credential.stored_key),
        BASE64.encode(&credential.server_key)
    )
}

/// Users' SCRAM credentials, and the secret that derives fake ones for unknown users.
pub struct CredentialStore {
    users: HashMap<(ScramMechanism, String), ScramCredential>,
    server_secret: Vec<u8>,
}

impl std::fmt::Debug for CredentialStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialStore")
            .field("credential_count", &self.users.len())
            .finish_non_exhaustive()
    }
}

impl CredentialStore {
    /// Parses a credentials file. `server_secret` (random, kept for the broker's lifetime or
    /// longer) derives the fake credentials of unknown users; it must not be empty.
    pub fn parse(text: &str, server_secret: &[u8]) -> Result<Self, SaslError> {
        let mut users = HashMap::new();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let bad = |reason| SaslError::BadCredentials { line, reason };
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = trimmed.split(' ').collect();
            let [mechanism, user, iterations, salt, stored_key, server_key] = fields[..] else {
                return Err(bad("expected 6 space-separated fields"));
            };
            let mechanism = ScramMechanism::from_name(mechanism).ok_or(bad("unknown mechanism"))?;
            if user.is_empty() {
                return Err(bad("empty user name"));
            }
            let iterations: u32 = iterations.parse().map_err(|_| bad("bad iteration count"))?;
            if !(SCRAM_ITERATIONS_MIN..=SCRAM_ITERATIONS_MAX).contains(&iterations) {
                return Err(bad("iteration count outside the allowed range"));
            }
            let decode = |field: &str, what| BASE64.decode(field).map_err(|_| bad(what));
            let salt = decode(salt, "bad salt base64")?;
            if salt.is_empty() || salt.len() > SCRAM_SALT_BYTES_MAX {
                return Err(bad("salt length outside the allowed range"));
            }
            let stored_key = decode(stored_key, "bad StoredKey base64")?;
            let server_key = decode(server_key, "bad ServerKey base64")?;
            if stored_key.len() != mechanism.key_bytes()
                || server_key.len() != mechanism.key_bytes()
            {
                return Err(bad("key length does not match the mechanism"));
            }
            let credential = ScramCredential {
                salt,
                iterations,
                stored_key,
                server_key,
            };
            if users
                .insert((mechanism, user.to_owned()), credential)
                .is_some()
            {
                return Err(bad("duplicate user for this mechanism"));
            }
        }
        Self::with_users(users, server_secret)
    }

    /// A store of `users` (the metadata store's, as the security store's mirror holds them).
    pub fn from_users(
        users: HashMap<(ScramMechanism, String), ScramCredential>,
        server_secret: &[u8],
    ) -> Result<Self, SaslError> {
        Self::with_users(users, server_secret)
    }

    /// Every credential: the bootstrap import writes them to the metadata store.
    pub fn credentials(&self) -> impl Iterator<Item = (ScramMechanism, &str, &ScramCredential)> {
        self.users
            .iter()
            .map(|((mechanism, user), credential)| (*mechanism, user.as_str(), credential))
    }

    fn with_users(
        users: HashMap<(ScramMechanism, String), ScramCredential>,
        server_secret: &[u8],
    ) -> Result<Self, SaslError> {
        if server_secret.is_empty() {
            return Err(SaslError::BadCredentials {
                line: 0,
                reason: "empty server secret",
            });
        }
        Ok(Self {
            users,
            server_secret: server_secret.to_vec(),
        })
    }

    /// The credential to check `user` against, and whether the user exists. An unknown user gets a
    /// fake credential, the same on every call (so a probing client sees a stable salt), derived
    /// from the server secret; callers must do the same work with it and fail only at the end.
    pub fn lookup(&self, mechanism: ScramMechanism, user: &str) -> (ScramCredential, bool) {
        match self.users.get(&(mechanism, user.to_owned())) {
            Some(credential) => (credential.clone(), true),
            None => (self.fake_credential(mechanism, user), false),
        }
    }

    fn fake_credential(&self, mechanism: ScramMechanism, user: &str) -> ScramCredential {
        let derive = |label: &str| {
            let mut data = Vec::with_capacity(label.len() + user.len() + 16);
            data.extend_from_slice(label.as_bytes());
            data.push(0);
            data.extend_from_slice(mechanism.name().as_bytes());
            data.push(0);
            data.extend_from_slice(user.as_bytes());
            crypto::hmac(mechanism, &self.server_secret, &data)
        };
        let mut salt = derive("salt");
        salt.truncate(SCRAM_SALT_BYTES);
        ScramCredential {
            salt,
            iterations: SCRAM_ITERATIONS_DEFAULT,
            stored_key: derive("stored-key"),
            server_key: derive("server-key"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"test server secret";

    #[test]
    fn file_round_trip_and_no_password_in_it() {
        let credential = credential_from_password(
            ScramMechanism::Sha512,
            "hunter22",
            b"0123456789abcdef",
            4096,
        );
        let line = credential_line(ScramMechanism::Sha512, "alice", &credential);
        assert!(!line.contains("hunter22"));
        let store = CredentialStore::parse(&format!("# users\n\n{line}\n"), SECRET).unwrap();
        assert_eq!(
            store.lookup(ScramMechanism::Sha512, "alice"),
            (credential, true)
        );
        assert!(!store.lookup(ScramMechanism::Sha256, "alice").1);
    }

    #[test]
    fn fake_credentials_are_stable_per_user_and_look_real() {
        let store = CredentialStore::parse("", SECRET).unwrap();
        let (first, known) = store.lookup(ScramMechanism::Sha256, "mallory");
        assert!(!known);
        assert_eq!(first, store.lookup(ScramMechanism::Sha256, "mallory").0);
        assert_ne!(
            first.salt,
            store.lookup(ScramMechanism::Sha256, "eve").0.salt
        );
        assert_eq!(first.salt.len(), SCRAM_SALT_BYTES);
        assert_eq!(first.iterations, SCRAM_ITERATIONS_DEFAULT);
        assert_eq!(first.stored_key.len(), ScramMechanism::Sha256.key_bytes());
        let other = CredentialStore::parse("", b"another secret").unwrap();
        assert_ne!(first, other.lookup(ScramMechanism::Sha256, "mallory").0);
    }

    #[test]
    fn bad_lines_are_refused_with_their_number() {
        let good = credential_line(
            ScramMechanism::Sha256,
            "bob",
            &credential_from_password(ScramMechanism::Sha256, "pw", b"salt", 4096),
        );
        let cases = [
            "SCRAM-SHA-256 bob".to_owned(),
            good.replace("SCRAM-SHA-256", "SCRAM-MD5"),
            good.replace(" 4096 ", " 12 "),
            good.replace(" 4096 ", " 99999999 "),
            good.replace(" 4096 ", " four "),
            good.replacen("c2FsdA==", "!!!", 1),
            format!("{good}\n{good}"),
        ];
        for case in cases {
            let text = format!("# header\n{case}");
            match CredentialStore::parse(&text, SECRET) {
                Err(SaslError::BadCredentials { line, .. }) => assert!(line >= 2, "{case}"),
                other => panic!("{case}: {other:?}"),
            }
        }
        assert!(CredentialStore::parse("", b"").is_err());
    }
}
