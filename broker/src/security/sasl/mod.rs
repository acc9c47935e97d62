//! Server-side SASL, as pure state machines: PLAIN and SCRAM-SHA-256/SHA-512 (RFC 5802, RFC 7677),
//! the credentials store they check against, and the per-connection attempt bound.
//!
//! It owns: the mechanism names, the message formats of PLAIN and SCRAM, the credential file format
//! ([`credentials`]), and the rule that an unknown user costs exactly the same work as a wrong
//! password (a fake credential derived from a server secret stands in for the missing one, and
//! every check runs to the end before the answer is decided).
//!
//! [`live`] holds the set in force, which the metadata store's mirror replaces whole when a user
//! changes; each connection takes the set in force when it starts its exchange.
//!
//! [`authenticator`] runs one connection's exchange (SaslHandshake v0 with bare tokens, v1 with
//! SaslAuthenticate); the broker's connection task feeds it frames and sends what comes out. Fresh
//! server nonces are passed in (see [`scram::fresh_nonce`]), so tests are deterministic.
//!
//! Must never: store or log a plain password, return early on an unknown user, allocate by a size
//! a peer chose before checking it against [`SASL_MESSAGE_BYTES_MAX`], or read a clock or socket.

pub mod authenticator;
pub mod credentials;
mod crypto;
pub mod live;
pub mod plain;
pub mod scram;

pub use authenticator::{Authenticator, HandshakeError, Mechanism, TokenFraming, TokenOutcome};
pub use credentials::{CredentialStore, ScramCredential};
pub use live::LiveCredentials;
pub use scram::ScramMechanism;

/// Largest SASL message accepted from a client. PLAIN and SCRAM messages are a few hundred bytes;
/// anything bigger is refused before it is parsed.
pub const SASL_MESSAGE_BYTES_MAX: usize = 4096;

/// Largest credentials file the broker reads (a line is about 200 bytes: some 20,000 users).
pub const CREDENTIALS_FILE_BYTES_MAX: u64 = 4 * 1024 * 1024;

/// Authentication attempts allowed on one connection before it must be closed (Kafka closes after
/// the first failure; one retry covers clients that re-handshake after a mechanism mismatch).
pub const SASL_ATTEMPTS_MAX: u32 = 2;

/// Why a SASL exchange failed. Every variant the peer can cause maps to
/// SASL_AUTHENTICATION_FAILED on the wire; the variants exist for logs and tests.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SaslError {
    /// Wrong password or unknown user (deliberately one variant: the two must look the same).
    #[error("authentication failed")]
    AuthenticationFailed,
    /// A client message that does not follow the mechanism's grammar.
    #[error("malformed SASL message: {0}")]
    Malformed(&'static str),
    /// A client message longer than [`SASL_MESSAGE_BYTES_MAX`].
    #[error("SASL message of {bytes} bytes exceeds {max}")]
    TooLarge {
        /// The message's length.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// The client's final message names a nonce other than the one this exchange issued.
    #[error("nonce mismatch")]
    NonceMismatch,
    /// A message after the exchange finished (or failed): replays are refused.
    #[error("SASL exchange already finished")]
    Finished,
    /// More than [`SASL_ATTEMPTS_MAX`] attempts on one connection.
    #[error("too many authentication attempts")]
    TooManyAttempts,
    /// A mechanism this broker does not serve.
    #[error("unsupported SASL mechanism {0}")]
    UnsupportedMechanism(String),
    /// A bad line in the credentials file.
    #[error("credentials line {line}: {reason}")]
    BadCredentials {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// What a step of an exchange produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaslStep {
    /// Send this challenge and wait for the client's next message.
    Challenge(Vec<u8>),
    /// Authenticated as `principal`; send `final_message` (empty for PLAIN).
    Success {
        /// The authenticated user name.
        principal: String,
        /// The last server message.
        final_message: Vec<u8>,
    },
}

/// Counts the authentication attempts of one connection.
#[derive(Debug, Default)]
pub struct AttemptBudget {
    used_count: u32,
}

impl AttemptBudget {
    /// Takes one attempt; refuses once [`SASL_ATTEMPTS_MAX`] have been taken.
    pub fn begin_attempt(&mut self) -> Result<(), SaslError> {
        if self.used_count >= SASL_ATTEMPTS_MAX {
            return Err(SaslError::TooManyAttempts);
        }
        self.used_count += 1;
        Ok(())
    }
}

/// Refuses a client message above [`SASL_MESSAGE_BYTES_MAX`].
fn check_size(message: &[u8]) -> Result<(), SaslError> {
    if message.len() > SASL_MESSAGE_BYTES_MAX {
        return Err(SaslError::TooLarge {
            bytes: message.len(),
            max: SASL_MESSAGE_BYTES_MAX,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_are_bounded() {
        let mut budget = AttemptBudget::default();
        for _ in 0..SASL_ATTEMPTS_MAX {
            budget.begin_attempt().unwrap();
        }
        assert_eq!(budget.begin_attempt(), Err(SaslError::TooManyAttempts));
    }
}
