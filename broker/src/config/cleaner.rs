//! The value types of the log cleaner's keys, as Kafka writes them: `cleanup.policy` (a list of
//! `delete` and `compact`), and the real numbers Kafka's cleaner keys take (a dirty ratio, a load
//! factor, a byte rate). Each is checked where it is parsed, so a bad value is named with its key.
//!
//! Must never: accept a policy word or a number Kafka would refuse (a topic that says `compact`
//! must be compacted, and one that says `delete` must not be).

use std::fmt;

use super::{invalid, ConfigError, FromConfigValue};

/// Kafka's `cleanup.policy`: delete old segments by time and size, compact by key, or both.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct CleanupPolicy {
    /// `compact`: the cleaner keeps the latest record per key.
    pub compact: bool,
    /// `delete`: retention by time and size removes old segments.
    pub delete: bool,
}

impl CleanupPolicy {
    /// Kafka's default, `delete`.
    pub const DELETE: Self = Self {
        compact: false,
        delete: true,
    };
    /// `compact` alone (the offsets topic's).
    pub const COMPACT: Self = Self {
        compact: true,
        delete: false,
    };

    /// Parses Kafka's list form (`delete`, `compact`, `compact,delete`, in any order, spaces
    /// allowed). A word twice is allowed, as Kafka's list validator does; an empty list or an
    /// unknown word is not.
    pub fn parse(text: &str) -> Result<Self, CleanupPolicyError> {
        let mut policy = Self {
            compact: false,
            delete: false,
        };
        for word in text.split(',').map(str::trim) {
            match word {
                "compact" => policy.compact = true,
                "delete" => policy.delete = true,
                "" => return Err(CleanupPolicyError::Empty),
                other => return Err(CleanupPolicyError::Unknown(other.to_owned())),
            }
        }
        Ok(policy)
    }
}

/// Why a `cleanup.policy` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CleanupPolicyError {
    /// An empty list or an empty word between commas.
    #[error("must list delete and/or compact, separated by commas")]
    Empty,
    /// A word that is neither.
    #[error("'{0}' is not a cleanup policy (delete or compact)")]
    Unknown(String),
}

/// Kafka's text: `delete`, `compact` or `compact,delete` (its order for both).
impl fmt::Display for CleanupPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match (self.compact, self.delete) {
            (true, true) => "compact,delete",
            (true, false) => "compact",
            _ => "delete",
        })
    }
}

/// Written as a config file writes it (see `config_text`).
impl fmt::Debug for CleanupPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{self}\"")
    }
}

impl FromConfigValue for CleanupPolicy {
    fn from_value(key: &str, value: &toml::Value) -> Result<Self, ConfigError> {
        Self::parse(&String::from_value(key, value)?)
            .map_err(|error| invalid(key, error.to_string()))
    }
}

/// A real number between 0 and 1, both included (a dirty ratio, a load factor).
#[derive(Clone, Copy)]
pub struct Fraction(f64);

impl Fraction {
    /// One half (Kafka's default dirty ratio).
    pub const HALF: Self = Self(0.5);
    /// Nine tenths (Kafka's default key-map load factor).
    pub const NINE_TENTHS: Self = Self(0.9);

    /// `value` if it is between 0 and 1.
    pub fn new(value: f64) -> Option<Self> {
        (0.0..=1.0).contains(&value).then_some(Self(value))
    }

    /// The number.
    pub fn get(self) -> f64 {
        self.0
    }
}

/// Equal when the numbers are (a fraction is never NaN, so this is an equivalence).
impl PartialEq for Fraction {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for Fraction {}

impl fmt::Debug for Fraction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl FromConfigValue for Fraction {
    fn from_value(key: &str, value: &toml::Value) -> Result<Self, ConfigError> {
        Self::new(real(key, value)?).ok_or_else(|| invalid(key, "must be between 0 and 1"))
    }
}

/// A positive rate in bytes per second, as Kafka's `log.cleaner.io.max.bytes.per.second` (a
/// double whose default, `f64::MAX`, means unthrottled).
#[derive(Clone, Copy, PartialEq)]
pub struct BytesPerSecond(f64);

impl BytesPerSecond {
    /// No limit (Kafka's default, `Double.MAX_VALUE`).
    pub const UNLIMITED: Self = Self(f64::MAX);

    /// The rate.
    pub fn get(self) -> f64 {
        self.0
    }

    /// Whether the rate is the unthrottled default.
    pub fn is_unlimited(self) -> bool {
        self.0 >= f64::MAX
    }
}

impl fmt::Debug for BytesPerSecond {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `{:?}` of f64::MAX is `1.7976931348623157e308`, which reads back as f64::MAX.
        write!(f, "{:?}", self.0)
    }
}

impl FromConfigValue for BytesPerSecond {
    fn from_value(key: &str, value: &toml::Value) -> Result<Self, ConfigError> {
        let rate = real(key, value)?;
        if rate > 0.0 {
            Ok(Self(rate))
        } else {
            Err(invalid(
                key,
                "must be a positive number of bytes per second",
            ))
        }
    }
}

/// A finite real number from an integer, a float or their text.
fn real(key: &str, value: &toml::Value) -> Result<f64, ConfigError> {
    let number = match value {
        toml::Value::Integer(number) => *number as f64,
        toml::Value::Float(number) => *number,
        toml::Value::String(text) => text
            .trim()
            .parse()
            .map_err(|_| invalid(key, format!("expected a number, got '{text}'")))?,
        _ => return Err(invalid(key, "expected a number")),
    };
    if number.is_finite() {
        Ok(number)
    } else {
        Err(invalid(key, "must be a finite number"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleanup_policy_reads_kafka_lists_and_refuses_the_rest() {
        assert_eq!(CleanupPolicy::parse("delete"), Ok(CleanupPolicy::DELETE));
        assert_eq!(CleanupPolicy::parse("compact"), Ok(CleanupPolicy::COMPACT));
        let both = CleanupPolicy::parse(" delete , compact").expect("both");
        assert!(both.compact && both.delete);
        assert_eq!(both.to_string(), "compact,delete");
        assert_eq!(CleanupPolicy::parse(""), Err(CleanupPolicyError::Empty));
        assert_eq!(
            CleanupPolicy::parse("compact,"),
            Err(CleanupPolicyError::Empty)
        );
        assert!(matches!(
            CleanupPolicy::parse("compact,shred"),
            Err(CleanupPolicyError::Unknown(word)) if word == "shred"
        ));
    }

    #[test]
    fn fractions_and_rates_keep_their_bounds_and_read_back() {
        let key = "log.cleaner.min.cleanable.ratio";
        let half = Fraction::from_value(key, &toml::Value::Float(0.5)).expect("0.5");
        assert_eq!(format!("{half:?}"), "0.5");
        assert!(Fraction::from_value(key, &toml::Value::Float(1.5)).is_err());
        assert!(Fraction::from_value(key, &toml::Value::Integer(1)).is_ok());
        let key = "log.cleaner.io.max.bytes.per.second";
        let text = format!("{:?}", BytesPerSecond::UNLIMITED);
        let back = BytesPerSecond::from_value(key, &toml::Value::String(text)).expect("reads");
        assert!(back.is_unlimited());
        assert!(BytesPerSecond::from_value(key, &toml::Value::Integer(0)).is_err());
        assert!(BytesPerSecond::from_value(key, &toml::Value::String("NaN".into())).is_err());
    }
}
