//! The value type of `skiff.legacy.isolation.level` (the topic key and its broker default): what
//! a legacy consumer (Fetch v0–v3, which carries no isolation level) reads of transactional
//! data. `read_uncommitted`, the default, is Kafka's behaviour (everything below the high
//! watermark, aborted records included); `read_committed` stops at the last stable offset and
//! leaves out aborted records (docs/design/downconversion.md §3.8).
//!
//! Must never: accept a value other than the two levels (a topic that says `read_committed` must
//! never show a legacy consumer an aborted record).

use std::fmt;

use super::{invalid, ConfigError, FromConfigValue};

/// What Fetch v0–v3 reads of a topic's transactional data.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub enum LegacyIsolationLevel {
    /// Kafka's behaviour: up to the high watermark, aborted records included.
    #[default]
    ReadUncommitted,
    /// Up to the last stable offset, aborted records left out.
    ReadCommitted,
}

impl LegacyIsolationLevel {
    /// The allowed values, as an error names them.
    pub const ALLOWED: &'static str = "read_uncommitted or read_committed";

    /// The level a config value names (exactly, as Kafka's `isolation.level` is written).
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "read_uncommitted" => Some(Self::ReadUncommitted),
            "read_committed" => Some(Self::ReadCommitted),
            _ => None,
        }
    }

    /// The value as a config file writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadUncommitted => "read_uncommitted",
            Self::ReadCommitted => "read_committed",
        }
    }
}

/// Written as a config file writes it, as every config type's `Debug` must be.
impl fmt::Debug for LegacyIsolationLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromConfigValue for LegacyIsolationLevel {
    fn from_value(key: &str, value: &toml::Value) -> Result<Self, ConfigError> {
        let text = String::from_value(key, value)?;
        Self::parse(&text)
            .ok_or_else(|| invalid(key, format!("expected {}, got '{text}'", Self::ALLOWED)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_levels_read_back_and_anything_else_names_the_key_and_the_values() {
        for level in [
            LegacyIsolationLevel::ReadUncommitted,
            LegacyIsolationLevel::ReadCommitted,
        ] {
            let value = toml::Value::String(format!("{level:?}"));
            assert_eq!(
                LegacyIsolationLevel::from_value("skiff.legacy.isolation.level", &value).unwrap(),
                level
            );
        }
        assert_eq!(
            LegacyIsolationLevel::default(),
            LegacyIsolationLevel::ReadUncommitted
        );
        let error = LegacyIsolationLevel::from_value(
            "skiff.legacy.isolation.level",
            &toml::Value::String("READ_COMMITTED".to_owned()),
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("skiff.legacy.isolation.level"), "{error}");
        assert!(
            error.contains("read_uncommitted or read_committed"),
            "{error}"
        );
    }
}
