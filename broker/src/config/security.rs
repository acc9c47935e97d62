//! The security keys, typed: `ssl.client.auth`, `ssl.principal.mapping.rules`,
//! `sasl.enabled.mechanisms` and `super.users`, each parsed once when the key is set. The
//! vocabulary comes from the security modules' pure types (a SASL mechanism's name, an ACL
//! principal's syntax), so it is defined once.
//!
//! Must never: read a credentials, certificate or ACL file (the broker does, at start).

use std::fmt;

use super::{comma_items, invalid, ConfigError};
use crate::security::acl::model::AclPrincipal;
use crate::security::sasl::Mechanism;
use crate::security::sasl::ScramMechanism;
use crate::security::ssl_principal_mapper::SslPrincipalMapper;

/// Whether TLS clients must present a certificate (`ssl.client.auth`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificate is asked for.
    None,
    /// A certificate is asked for; one that is presented must verify.
    Requested,
    /// A verified certificate is needed to connect.
    Required,
}

impl ClientAuth {
    /// Kafka's name for the setting.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Requested => "requested",
            Self::Required => "required",
        }
    }

    /// Parses `none`, `requested` or `required`.
    pub fn parse(key: &str, text: &str) -> Result<Self, ConfigError> {
        [Self::None, Self::Requested, Self::Required]
            .into_iter()
            .find(|setting| setting.name() == text)
            .ok_or_else(|| invalid(key, format!("'{text}' is not none, requested or required")))
    }
}

impl fmt::Debug for ClientAuth {
    /// The value as written in a config file.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.name())
    }
}

/// `ssl.principal.mapping.rules`: Kafka's rules from a client certificate's subject to a user
/// name, parsed (a bad rule stops the start with the rule named).
#[derive(Clone)]
pub struct SslPrincipalMappingRules {
    /// The parsed rules.
    pub mapper: SslPrincipalMapper,
    /// The value as written.
    text: String,
}

/// Kafka's default: the subject's RFC 2253 name unchanged.
pub const SSL_PRINCIPAL_MAPPING_RULES_DEFAULT: &str = "DEFAULT";

impl SslPrincipalMappingRules {
    /// Parses the value as Kafka's `SslPrincipalMapper` does.
    pub fn parse(key: &str, text: &str) -> Result<Self, ConfigError> {
        let mapper =
            SslPrincipalMapper::parse(text).map_err(|error| invalid(key, error.to_string()))?;
        Ok(Self {
            mapper,
            text: text.to_owned(),
        })
    }
}

impl Default for SslPrincipalMappingRules {
    fn default() -> Self {
        Self {
            mapper: SslPrincipalMapper::default_rules(),
            text: SSL_PRINCIPAL_MAPPING_RULES_DEFAULT.to_owned(),
        }
    }
}

impl fmt::Debug for SslPrincipalMappingRules {
    /// The value as written in a config file.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.text)
    }
}

/// `sasl.enabled.mechanisms`: the mechanisms SASL listeners offer, at least one, each once.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslMechanisms {
    /// In the order written.
    pub enabled: Vec<Mechanism>,
}

impl SaslMechanisms {
    /// Parses a comma-separated list of IANA mechanism names Skiff implements.
    pub fn parse(key: &str, text: &str) -> Result<Self, ConfigError> {
        let mut enabled = Vec::new();
        for name in comma_items(text) {
            let mechanism = Mechanism::from_name(name).ok_or_else(|| {
                invalid(
                    key,
                    format!("{name} is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
                )
            })?;
            if !enabled.contains(&mechanism) {
                enabled.push(mechanism);
            }
        }
        if enabled.is_empty() {
            return Err(invalid(key, "at least one mechanism is needed"));
        }
        Ok(Self { enabled })
    }
}

impl Default for SaslMechanisms {
    /// Every mechanism Skiff implements.
    fn default() -> Self {
        Self {
            enabled: vec![
                Mechanism::Plain,
                Mechanism::Scram(ScramMechanism::Sha256),
                Mechanism::Scram(ScramMechanism::Sha512),
            ],
        }
    }
}

impl fmt::Debug for SaslMechanisms {
    /// The value as written in a config file.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self
            .enabled
            .iter()
            .map(|mechanism| mechanism.name())
            .collect();
        write!(f, "{:?}", names.join(","))
    }
}

/// `super.users`: principals allowed everything (Kafka's `User:a;User:b`), kept as user names.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SuperUsers {
    /// The names after `User:`, in the order written.
    pub names: Vec<String>,
}

impl SuperUsers {
    /// Parses semicolon-separated `User:name` principals; `User:*` is refused (list users by
    /// name, or use ACLs for everyone).
    pub fn parse(key: &str, text: &str) -> Result<Self, ConfigError> {
        let mut names = Vec::new();
        for item in text
            .split(';')
            .map(str::trim)
            .filter(|item| !item.is_empty())
        {
            match AclPrincipal::parse(item).map_err(|error| invalid(key, error.to_string()))? {
                AclPrincipal::User(name) => names.push(name),
                AclPrincipal::AnyUser => return Err(invalid(
                    key,
                    "User:* cannot be a super user (list users by name, or use ACLs for everyone)",
                )),
            }
        }
        Ok(Self { names })
    }
}

impl fmt::Debug for SuperUsers {
    /// The value as written in a config file.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text: Vec<String> = self
            .names
            .iter()
            .map(|name| format!("User:{name}"))
            .collect();
        write!(f, "{:?}", text.join(";"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_what_their_text_parses_to() {
        let mechanisms = SaslMechanisms::parse(
            "sasl.enabled.mechanisms",
            "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        )
        .expect("parses");
        assert!(mechanisms == SaslMechanisms::default());
        assert_eq!(
            format!("{:?}", SslPrincipalMappingRules::default()),
            format!("{SSL_PRINCIPAL_MAPPING_RULES_DEFAULT:?}")
        );
    }

    #[test]
    fn super_users_parse_as_kafka_lists_them() {
        let parse = |text| SuperUsers::parse("super.users", text).map(|users| users.names);
        assert_eq!(
            parse("User:admin; User:ops;").expect("parses"),
            ["admin", "ops"]
        );
        assert!(parse("").expect("empty").is_empty());
        for bad in ["admin", "User:*", "Group:x"] {
            let error = parse(bad).expect_err(bad).to_string();
            assert!(error.contains("'super.users'"), "{error}");
        }
        // A comma is part of a name in Kafka's syntax, not a separator.
        assert_eq!(parse("User:a,User:b").expect("one name"), ["a,User:b"]);
    }

    #[test]
    fn mechanisms_and_client_auth_parse_once_and_show_as_written() {
        let key = "sasl.enabled.mechanisms";
        let mechanisms = SaslMechanisms::parse(key, "SCRAM-SHA-512, PLAIN,PLAIN").expect("parses");
        assert_eq!(format!("{mechanisms:?}"), "\"SCRAM-SHA-512,PLAIN\"");
        assert!(SaslMechanisms::parse(key, "GSSAPI").is_err());
        assert!(SaslMechanisms::parse(key, " , ").is_err());
        assert_eq!(
            format!("{:?}", SaslMechanisms::default()),
            "\"PLAIN,SCRAM-SHA-256,SCRAM-SHA-512\""
        );
        assert_eq!(
            ClientAuth::parse("ssl.client.auth", "required").expect("known"),
            ClientAuth::Required
        );
        assert!(ClientAuth::parse("ssl.client.auth", "REQUIRED").is_err());
        assert_eq!(format!("{:?}", ClientAuth::None), "\"none\"");
    }
}
