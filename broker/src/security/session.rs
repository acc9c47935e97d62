//! Who is on the other end of a connection, as far as authorization is concerned: the principal
//! (Kafka's `User:name` form), the listener the connection came in on and its security protocol
//! ([`SecurityProtocol`], which the listener keys of the config name).
//! Built by the connection once it knows (at accept for PLAINTEXT and SSL, after a successful SASL
//! exchange for SASL listeners) and passed, read-only, to every handler.
//!
//! Must never: change after authentication, or be built from anything but what the connection
//! itself established (never from a field a client put in a request).

use std::fmt;

/// Kafka's security protocols, as named in `listener.security.protocol.map`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    /// Plain TCP, no authentication.
    Plaintext,
    /// TLS, no SASL (the principal comes from the client certificate if one is required).
    Ssl,
    /// SASL over plain TCP.
    SaslPlaintext,
    /// SASL over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's name for the protocol.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::SaslSsl => "SASL_SSL",
        }
    }

    /// Parses Kafka's name for a protocol.
    pub fn parse(name: &str) -> Option<Self> {
        [
            Self::Plaintext,
            Self::Ssl,
            Self::SaslPlaintext,
            Self::SaslSsl,
        ]
        .into_iter()
        .find(|protocol| protocol.name() == name)
    }

    /// Whether connections must complete a SASL exchange before anything else.
    pub fn uses_sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }

    /// Whether the bytes are encrypted with TLS (so zero-copy sends are impossible).
    pub fn uses_tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A principal in Kafka's `Type:name` form; Skiff only issues `User` principals.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    /// The name after `User:` (for example a SASL user name, or `ANONYMOUS`).
    pub user: String,
}

impl Principal {
    /// Kafka's principal for connections that did not authenticate.
    pub fn anonymous() -> Self {
        Self::user("ANONYMOUS")
    }

    /// The principal `User:<name>`.
    pub fn user(name: impl Into<String>) -> Self {
        Self { user: name.into() }
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "User:{}", self.user)
    }
}

/// What handlers know about the connection a request came on.
#[derive(Debug, Clone)]
pub struct Session {
    /// Who sent the request.
    pub principal: Principal,
    /// The listener's name (`PLAINTEXT`, `SASL_SSL`, or a custom name from the protocol map).
    pub listener_name: String,
    /// The listener's security protocol.
    pub security_protocol: SecurityProtocol,
    /// The host Metadata and FindCoordinator name for this listener (clients must reconnect
    /// through the listener they came in on).
    pub advertised_host: String,
    /// The port advertised with it.
    pub advertised_port: u16,
    /// The client's address as the socket reports it (host ACLs match it); `None` only for
    /// sessions not made from a socket (tests).
    pub peer_ip: Option<std::net::IpAddr>,
}

impl Session {
    /// An unauthenticated session on the embedded default listener (PLAINTEXT, 127.0.0.1:9092).
    pub fn plaintext_anonymous() -> Self {
        Self {
            principal: Principal::anonymous(),
            listener_name: "PLAINTEXT".to_owned(),
            security_protocol: SecurityProtocol::Plaintext,
            advertised_host: "127.0.0.1".to_owned(),
            advertised_port: 9092,
            peer_ip: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principal_is_shown_in_kafka_form() {
        assert_eq!(Principal::user("alice").to_string(), "User:alice");
        assert_eq!(Principal::anonymous().to_string(), "User:ANONYMOUS");
    }

    #[test]
    fn protocol_names_round_trip() {
        for name in ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] {
            let protocol = SecurityProtocol::parse(name).expect("known protocol");
            assert_eq!(protocol.name(), name);
        }
        assert_eq!(SecurityProtocol::parse("plaintext"), None);
        assert_eq!(SecurityProtocol::parse("SASL"), None);
    }
}
