//! One connection's SASL exchange as Kafka runs it, independent of sockets: a SaslHandshake names
//! the mechanism; after a v0 handshake the client's next frames are bare SASL tokens (0.10-era
//! clients), after a v1 handshake they come wrapped in SaslAuthenticate requests. The caller feeds
//! the handshake and each token in and sends what comes out, framed as the handshake version says.
//!
//! Must never: authenticate without a completed exchange, accept a second exchange after success or
//! failure, or let more than [`SASL_ATTEMPTS_MAX`](super::SASL_ATTEMPTS_MAX) exchanges run on one
//! connection.

use std::sync::Arc;

use super::credentials::CredentialStore;
use super::scram::{ScramMechanism, ScramServer};
use super::{plain, AttemptBudget, SaslError, SaslStep};

/// A SASL mechanism this broker serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    /// RFC 4616 PLAIN (user and password in one message; use it only over TLS outside tests).
    Plain,
    /// SCRAM-SHA-256 or SCRAM-SHA-512.
    Scram(ScramMechanism),
}

impl Mechanism {
    /// The IANA name clients send in SaslHandshake.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::Scram(scram) => scram.name(),
        }
    }

    /// Parses an IANA mechanism name.
    pub fn from_name(name: &str) -> Option<Self> {
        if name == "PLAIN" {
            return Some(Self::Plain);
        }
        ScramMechanism::from_name(name).map(Self::Scram)
    }
}

/// How the tokens after the handshake travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenFraming {
    /// SaslHandshake v0: bare size-prefixed tokens, no request header, and a failure closes the
    /// connection without an answer (the client has no way to read one).
    Bare,
    /// SaslHandshake v1: tokens inside SaslAuthenticate requests and responses.
    SaslAuthenticate,
}

/// Why a handshake was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    /// The client asked for a mechanism this listener does not offer (UNSUPPORTED_SASL_MECHANISM).
    #[error("mechanism {0} is not enabled")]
    UnsupportedMechanism(String),
    /// A handshake while a token was expected, or after the exchange ended (ILLEGAL_SASL_STATE).
    #[error("unexpected SaslHandshake")]
    IllegalState,
    /// The connection has used up its attempts.
    #[error(transparent)]
    Sasl(#[from] SaslError),
}

/// What the exchange produced from a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenOutcome {
    /// Send this challenge; another token follows.
    Challenge(Vec<u8>),
    /// Authenticated as `user`; send `final_message` (empty for PLAIN).
    Authenticated {
        /// The authenticated user name (the principal is `User:<user>`).
        user: String,
        /// The last server message.
        final_message: Vec<u8>,
    },
}

enum Exchange {
    Plain,
    Scram(Box<ScramServer>),
}

enum Phase {
    AwaitHandshake,
    AwaitToken {
        framing: TokenFraming,
        exchange: Exchange,
    },
    Authenticated,
    Failed,
}

/// The SASL state of one connection on a SASL listener.
pub struct Authenticator {
    store: Arc<CredentialStore>,
    enabled: Vec<Mechanism>,
    attempts: AttemptBudget,
    phase: Phase,
}

impl Authenticator {
    /// A connection that has not authenticated yet.
    pub fn new(store: Arc<CredentialStore>, enabled: Vec<Mechanism>) -> Self {
        Self {
            store,
            enabled,
            attempts: AttemptBudget::default(),
            phase: Phase::AwaitHandshake,
        }
    }

    /// The mechanisms offered, as SaslHandshake lists them.
    pub fn enabled_names(&self) -> Vec<&'static str> {
        self.enabled
            .iter()
            .map(|mechanism| mechanism.name())
            .collect()
    }

    /// How the next token arrives, if one is expected.
    pub fn expected_token(&self) -> Option<TokenFraming> {
        match &self.phase {
            Phase::AwaitToken { framing, .. } => Some(*framing),
            _ => None,
        }
    }

    /// Whether the exchange has succeeded.
    pub fn is_authenticated(&self) -> bool {
        matches!(self.phase, Phase::Authenticated)
    }

    /// Starts an exchange. `version` is the SaslHandshake version (0: bare tokens follow);
    /// `server_nonce` is used if the mechanism is SCRAM ([`super::scram::fresh_nonce`]).
    pub fn handshake(
        &mut self,
        version: i16,
        mechanism_name: &str,
        server_nonce: String,
    ) -> Result<TokenFraming, HandshakeError> {
        if !matches!(self.phase, Phase::AwaitHandshake) {
            self.phase = Phase::Failed;
            return Err(HandshakeError::IllegalState);
        }
        let mechanism = Mechanism::from_name(mechanism_name)
            .filter(|mechanism| self.enabled.contains(mechanism))
            .ok_or_else(|| HandshakeError::UnsupportedMechanism(mechanism_name.to_owned()))?;
        self.attempts.begin_attempt()?;
        let framing = if version == 0 {
            TokenFraming::Bare
        } else {
            TokenFraming::SaslAuthenticate
        };
        let exchange = match mechanism {
            Mechanism::Plain => Exchange::Plain,
            Mechanism::Scram(scram) => Exchange::Scram(Box::new(ScramServer::new(
                scram,
                self.store.clone(),
                server_nonce,
            ))),
        };
        self.phase = Phase::AwaitToken { framing, exchange };
        Ok(framing)
    }

    /// Feeds one client token. Any error ends the connection's exchange for good.
    pub fn token(&mut self, token: &[u8]) -> Result<TokenOutcome, SaslError> {
        let Phase::AwaitToken { exchange, framing } =
            std::mem::replace(&mut self.phase, Phase::Failed)
        else {
            return Err(SaslError::Finished);
        };
        let step = match exchange {
            Exchange::Plain => plain::authenticate(&self.store, token)?,
            Exchange::Scram(mut server) => {
                let step = server.step(token)?;
                if matches!(step, SaslStep::Challenge(_)) {
                    self.phase = Phase::AwaitToken {
                        framing,
                        exchange: Exchange::Scram(server),
                    };
                }
                step
            }
        };
        Ok(match step {
            SaslStep::Challenge(challenge) => TokenOutcome::Challenge(challenge),
            SaslStep::Success {
                principal,
                final_message,
            } => {
                self.phase = Phase::Authenticated;
                TokenOutcome::Authenticated {
                    user: principal,
                    final_message,
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::credentials::{credential_from_password, credential_line};
    use super::super::scram::fresh_nonce;
    use super::*;

    fn store() -> Arc<CredentialStore> {
        let mut text = String::new();
        for mechanism in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            let credential =
                credential_from_password(mechanism, "secret", b"salt-salt-salt-1", 4096);
            text.push_str(&credential_line(mechanism, "alice", &credential));
            text.push('\n');
        }
        Arc::new(CredentialStore::parse(&text, b"test secret").expect("store"))
    }

    fn all_mechanisms() -> Vec<Mechanism> {
        vec![
            Mechanism::Plain,
            Mechanism::Scram(ScramMechanism::Sha256),
            Mechanism::Scram(ScramMechanism::Sha512),
        ]
    }

    #[test]
    fn plain_after_a_v0_handshake_expects_a_bare_token() {
        let mut auth = Authenticator::new(store(), all_mechanisms());
        assert_eq!(auth.expected_token(), None);
        assert_eq!(
            auth.handshake(0, "PLAIN", fresh_nonce()),
            Ok(TokenFraming::Bare)
        );
        assert_eq!(auth.expected_token(), Some(TokenFraming::Bare));
        let outcome = auth.token(b"\0alice\0secret").expect("authenticated");
        assert_eq!(
            outcome,
            TokenOutcome::Authenticated {
                user: "alice".into(),
                final_message: Vec::new()
            }
        );
        assert!(auth.is_authenticated());
        assert_eq!(auth.expected_token(), None);
        assert_eq!(auth.token(b"\0alice\0secret"), Err(SaslError::Finished));
        assert_eq!(
            auth.handshake(1, "PLAIN", fresh_nonce()),
            Err(HandshakeError::IllegalState)
        );
    }

    #[test]
    fn wrong_password_and_unknown_user_fail_alike_and_end_the_exchange() {
        for token in [&b"\0alice\0wrong"[..], b"\0mallory\0secret"] {
            let mut auth = Authenticator::new(store(), all_mechanisms());
            auth.handshake(1, "PLAIN", fresh_nonce())
                .expect("handshake");
            assert_eq!(auth.token(token), Err(SaslError::AuthenticationFailed));
            assert!(!auth.is_authenticated());
            assert_eq!(auth.token(b"\0alice\0secret"), Err(SaslError::Finished));
        }
    }

    #[test]
    fn disabled_and_unknown_mechanisms_are_refused_by_name() {
        let mut auth = Authenticator::new(store(), vec![Mechanism::Scram(ScramMechanism::Sha512)]);
        assert_eq!(auth.enabled_names(), ["SCRAM-SHA-512"]);
        for name in ["PLAIN", "GSSAPI", "scram-sha-512"] {
            assert_eq!(
                auth.handshake(1, name, fresh_nonce()),
                Err(HandshakeError::UnsupportedMechanism(name.into()))
            );
        }
        // A refused mechanism does not use up the connection: the right one still works.
        assert_eq!(
            auth.handshake(1, "SCRAM-SHA-512", fresh_nonce()),
            Ok(TokenFraming::SaslAuthenticate)
        );
    }

    #[test]
    fn scram_takes_two_tokens_and_a_malformed_one_fails() {
        let mut auth = Authenticator::new(store(), all_mechanisms());
        auth.handshake(1, "SCRAM-SHA-256", fresh_nonce())
            .expect("handshake");
        let challenge = auth.token(b"n,,n=alice,r=abc").expect("first");
        assert!(matches!(challenge, TokenOutcome::Challenge(ref c) if c.starts_with(b"r=abc")));
        assert_eq!(auth.expected_token(), Some(TokenFraming::SaslAuthenticate));
        assert!(auth.token(b"c=biws,r=nonsense,p=AAAA").is_err());
        assert!(!auth.is_authenticated());
        assert_eq!(auth.expected_token(), None);
    }
}
