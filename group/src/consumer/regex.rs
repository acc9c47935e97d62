//! `SubscribedTopicRegex`: a consumer's topic pattern, matched against whole topic names as Kafka
//! 4.1.1 does with RE2/J's `Pattern.matcher(topic).matches()`. The `regex` crate speaks RE2's
//! syntax (linear time, no backreferences); the pattern is anchored at both ends here. RE2/J
//! extras the crate lacks (`\Q…\E` quoting, for one) are refused as invalid.
//!
//! [`TopicVisibility`]: which topics a resolution may include. Kafka 4.1.1 keeps of a pattern's
//! matches only the topics the member whose heartbeat refreshed the group's patterns may Describe
//! (`filterTopicDescribeAuthorizedTopics`); the broker hands that check in with the heartbeat, so
//! this crate stays free of the authorizer.
//!
//! Must never: compile a pattern longer than [`REGEX_PATTERN_BYTES_MAX`] or let a compiled
//! program grow past [`REGEX_COMPILED_BYTES_MAX`].

use std::sync::Arc;

/// Bytes of one `SubscribedTopicRegex`. Kafka has no bound; a topic name is at most 249 bytes, so
/// a pattern of 4 KiB covers any practical alternation of names.
pub const REGEX_PATTERN_BYTES_MAX: usize = 4096;

/// Heap one compiled pattern may take (the `regex` crate's size limit): bounds what a single
/// heartbeat can make the coordinator allocate.
pub const REGEX_COMPILED_BYTES_MAX: usize = 1024 * 1024;

/// Distinct patterns one group may use at once. Each is matched against every topic when the
/// topics change; Kafka has no bound. A heartbeat bringing one more gets INVALID_REGULAR_EXPRESSION.
pub const GROUP_REGEXES_MAX: usize = 64;

/// Kafka's least time between two refreshes of a group's patterns brought on by new topics
/// (`REGEX_BATCH_REFRESH_MIN_INTERVAL_MS`): topic creations in a burst cost each group one pass
/// over the topics per 10 s, not one per heartbeat. A pattern no resolution holds yet is resolved
/// at once.
pub const REGEX_BATCH_REFRESH_MIN_INTERVAL_MS: i64 = 10_000;

/// Kafka's `group.consumer.regex.refresh.interval.ms` default: patterns are resolved again at
/// least this often even when no topic changed, so a change of ACLs shows.
pub const REGEX_REFRESH_INTERVAL_MS_DEFAULT: i32 = 600_000;

/// Whether a principal may Describe a topic: the broker's authorizer, seen through the heartbeat
/// that brought it.
pub trait TopicDescribeCheck: Send + Sync {
    /// Whether `topic` may be described (and so appear in a pattern's resolution).
    fn may_describe(&self, topic: &str) -> bool;
}

/// The topics a heartbeat's member may see: every topic (no ACLs), or those a check allows.
#[derive(Clone, Default)]
pub struct TopicVisibility(Option<Arc<dyn TopicDescribeCheck>>);

impl TopicVisibility {
    /// Every topic (authorization off).
    pub fn all() -> Self {
        Self(None)
    }

    /// The topics `check` allows.
    pub fn checked(check: Arc<dyn TopicDescribeCheck>) -> Self {
        Self(Some(check))
    }

    /// Whether `topic` may appear in a resolution.
    pub fn allows(&self, topic: &str) -> bool {
        self.0
            .as_ref()
            .is_none_or(|check| check.may_describe(topic))
    }
}

impl std::fmt::Debug for TopicVisibility {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "TopicVisibility(checked)"
        } else {
            "TopicVisibility(all)"
        })
    }
}

/// Two visibilities are equal when both see everything or both use the same check (requests
/// compare equal in tests; the check itself cannot be compared).
impl PartialEq for TopicVisibility {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for TopicVisibility {}

/// A compiled topic pattern.
#[derive(Debug, Clone)]
pub struct TopicRegex {
    compiled: regex::Regex,
}

/// Why a pattern was refused (the text goes into Kafka's INVALID_REGULAR_EXPRESSION message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegexError {
    /// Longer than [`REGEX_PATTERN_BYTES_MAX`].
    #[error("the pattern of {bytes} bytes is longer than {bytes_max} bytes")]
    TooLong {
        /// Its length.
        bytes: usize,
        /// The bound.
        bytes_max: usize,
    },
    /// Not valid RE2 syntax, or too large once compiled.
    #[error("{0}")]
    Invalid(String),
}

impl TopicRegex {
    /// Compiles `pattern` for whole-name matching.
    pub fn compile(pattern: &str) -> Result<Self, RegexError> {
        if pattern.len() > REGEX_PATTERN_BYTES_MAX {
            return Err(RegexError::TooLong {
                bytes: pattern.len(),
                bytes_max: REGEX_PATTERN_BYTES_MAX,
            });
        }
        let compiled = regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
            .size_limit(REGEX_COMPILED_BYTES_MAX)
            .dfa_size_limit(REGEX_COMPILED_BYTES_MAX)
            .build()
            .map_err(|error| RegexError::Invalid(first_line(&error.to_string())))?;
        Ok(Self { compiled })
    }

    /// Whether the whole of `topic` matches.
    pub fn matches(&self, topic: &str) -> bool {
        self.compiled.is_match(topic)
    }
}

fn first_line(text: &str) -> String {
    text.lines().last().unwrap_or(text).trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_whole_names_only() {
        let regex = TopicRegex::compile("orders.*|events").unwrap();
        assert!(regex.matches("orders-1") && regex.matches("events"));
        assert!(!regex.matches("my-orders") && !regex.matches("events2"));
        // Alternation is anchored as a whole, not per branch.
        let regex = TopicRegex::compile("a|b").unwrap();
        assert!(!regex.matches("ab"));
    }

    #[test]
    fn invalid_and_oversized_patterns_are_errors() {
        assert!(matches!(
            TopicRegex::compile("("),
            Err(RegexError::Invalid(_))
        ));
        assert!(matches!(
            TopicRegex::compile("(a)\\1"),
            Err(RegexError::Invalid(_))
        ));
        let long = "a".repeat(REGEX_PATTERN_BYTES_MAX + 1);
        assert!(matches!(
            TopicRegex::compile(&long),
            Err(RegexError::TooLong { .. })
        ));
        assert!(matches!(
            TopicRegex::compile("(a{1000}){1000}"),
            Err(RegexError::Invalid(_))
        ));
    }
}
