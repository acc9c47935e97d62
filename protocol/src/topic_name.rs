//! What a topic name may be: Kafka's rule (`Topic.validate`), in one place for the broker (which
//! refuses a bad name with INVALID_TOPIC_EXCEPTION) and the storage engine (which names partition
//! directories after topics and must never be handed a path).
//!
//! Must never: allow a name that is not a single, safe path component.

/// Longest topic name Kafka allows, in bytes.
pub const TOPIC_NAME_BYTES_MAX: usize = 249;

/// Why a topic name is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum InvalidTopicName {
    /// The empty string.
    #[error("a topic name may not be empty")]
    Empty,
    /// Longer than [`TOPIC_NAME_BYTES_MAX`].
    #[error("a topic name may be at most 249 bytes")]
    TooLong,
    /// `.` or `..`.
    #[error("'.' and '..' are not topic names")]
    Dots,
    /// A byte outside `[a-zA-Z0-9._-]`.
    #[error("a topic name may hold only ASCII letters, digits, '.', '_' and '-'")]
    BadCharacter,
}

/// Checks a topic name as Kafka does: 1–249 bytes of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), InvalidTopicName> {
    if name.is_empty() {
        return Err(InvalidTopicName::Empty);
    }
    if name.len() > TOPIC_NAME_BYTES_MAX {
        return Err(InvalidTopicName::TooLong);
    }
    if name == "." || name == ".." {
        return Err(InvalidTopicName::Dots);
    }
    if !name
        .bytes()
        .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'))
    {
        return Err(InvalidTopicName::BadCharacter);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_names_pass_and_paths_do_not() {
        for good in ["orders.v1_eu-2", "a", &"x".repeat(249)] {
            assert_eq!(validate_topic_name(good), Ok(()), "{good}");
        }
        let cases = [
            ("", InvalidTopicName::Empty),
            (".", InvalidTopicName::Dots),
            ("..", InvalidTopicName::Dots),
            ("a/b", InvalidTopicName::BadCharacter),
            ("spa ce", InvalidTopicName::BadCharacter),
            ("é", InvalidTopicName::BadCharacter),
        ];
        for (bad, why) in cases {
            assert_eq!(validate_topic_name(bad), Err(why), "{bad:?}");
        }
        assert_eq!(
            validate_topic_name(&"x".repeat(250)),
            Err(InvalidTopicName::TooLong)
        );
    }
}
