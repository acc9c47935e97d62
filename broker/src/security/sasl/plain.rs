//! SASL/PLAIN (RFC 4616) on the server: one client message, `authzid NUL authcid NUL password`,
//! checked against the user's SCRAM-SHA-512 credential (the password is salted and hashed with
//! that credential's salt and iterations and compared with its StoredKey), so no plain password is
//! stored anywhere.
//!
//! Must never: keep the password after the check, or skip the key derivation for an unknown user.

use super::credentials::CredentialStore;
use super::{check_size, crypto, SaslError, SaslStep, ScramMechanism};

/// The mechanism PLAIN's passwords are checked against.
pub const PLAIN_CREDENTIAL_MECHANISM: ScramMechanism = ScramMechanism::Sha512;

/// Checks one PLAIN message. An authorization id, if present, must equal the user (acting as
/// someone else is not offered).
pub fn authenticate(store: &CredentialStore, message: &[u8]) -> Result<SaslStep, SaslError> {
    check_size(message)?;
    let mut parts = message.split(|&byte| byte == 0);
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(SaslError::Malformed(
            "PLAIN needs authzid NUL user NUL password",
        ));
    };
    let user = std::str::from_utf8(user).map_err(|_| SaslError::Malformed("user is not UTF-8"))?;
    if user.is_empty() || password.is_empty() {
        return Err(SaslError::Malformed("empty user or password"));
    }
    if !authzid.is_empty() && authzid != user.as_bytes() {
        return Err(SaslError::AuthenticationFailed);
    }
    let (credential, known) = store.lookup(PLAIN_CREDENTIAL_MECHANISM, user);
    let salted = crypto::salted_password(
        PLAIN_CREDENTIAL_MECHANISM,
        password,
        &credential.salt,
        credential.iterations,
    );
    let (stored_key, _) = crypto::stored_and_server_keys(PLAIN_CREDENTIAL_MECHANISM, &salted);
    // Both checks computed before either decides: the answer is the same work either way.
    let matches = crypto::equal_constant_time(&stored_key, &credential.stored_key);
    if matches & known {
        Ok(SaslStep::Success {
            principal: user.to_owned(),
            final_message: Vec::new(),
        })
    } else {
        Err(SaslError::AuthenticationFailed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::sasl::credentials::{credential_from_password, credential_line};
    use crate::security::sasl::SASL_MESSAGE_BYTES_MAX;

    fn store() -> CredentialStore {
        let credential =
            credential_from_password(ScramMechanism::Sha512, "s3cret", b"plain-salt", 4096);
        CredentialStore::parse(
            &credential_line(ScramMechanism::Sha512, "alice", &credential),
            b"secret",
        )
        .unwrap()
    }

    #[test]
    fn right_password_wrong_password_unknown_user() {
        let store = store();
        assert_eq!(
            authenticate(&store, b"\0alice\0s3cret"),
            Ok(SaslStep::Success {
                principal: "alice".into(),
                final_message: Vec::new()
            })
        );
        assert!(authenticate(&store, b"alice\0alice\0s3cret").is_ok());
        assert_eq!(
            authenticate(&store, b"\0alice\0wrong"),
            Err(SaslError::AuthenticationFailed)
        );
        assert_eq!(
            authenticate(&store, b"\0nobody\0s3cret"),
            Err(SaslError::AuthenticationFailed)
        );
        assert_eq!(
            authenticate(&store, b"bob\0alice\0s3cret"),
            Err(SaslError::AuthenticationFailed)
        );
    }

    #[test]
    fn hostile_messages() {
        let store = store();
        for message in [
            &b""[..],
            b"alice",
            b"\0alice",
            b"\0alice\0s3cret\0extra",
            b"\0\0s3cret",
            b"\0alice\0",
            b"\0\xff\xfe\0s3cret",
        ] {
            assert!(
                matches!(authenticate(&store, message), Err(SaslError::Malformed(_))),
                "{message:?}"
            );
        }
        let huge = vec![b'a'; SASL_MESSAGE_BYTES_MAX + 1];
        assert!(matches!(
            authenticate(&store, &huge),
            Err(SaslError::TooLarge { .. })
        ));
    }
}
