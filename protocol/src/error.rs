//! The protocol crate's typed errors. Each variant that a peer can cause maps to a Kafka error code
//! the broker can answer with; none of them is ever a panic.

/// Why bytes could not be decoded.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Fewer bytes remain than a field or a count needs.
    #[error("truncated input: needed {needed_bytes} bytes, {remaining_bytes} remain")]
    Truncated {
        /// Bytes the field needed.
        needed_bytes: usize,
        /// Bytes that were left.
        remaining_bytes: usize,
    },
    /// A count is above the named maximum for its field.
    #[error("count {count} is above the maximum {count_max}")]
    CountTooLarge {
        /// The count read.
        count: usize,
        /// The limit it broke.
        count_max: usize,
    },
    /// A length below −1.
    #[error("invalid negative length {length}")]
    NegativeLength {
        /// The length read.
        length: i64,
    },
    /// A varint longer than its type allows.
    #[error("varint is too long")]
    VarintOverflow,
    /// A string is not UTF-8.
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
    /// A null where the schema forbids one.
    #[error("null where a value is required")]
    UnexpectedNull,
    /// Tagged fields must come in strictly increasing tag order.
    #[error("tagged field {tag} is out of order")]
    TagsOutOfOrder {
        /// The offending tag.
        tag: u32,
    },
    /// Bytes left over after a complete message.
    #[error("{trailing_bytes} unexpected bytes after the message")]
    TrailingBytes {
        /// How many bytes were left.
        trailing_bytes: usize,
    },
    /// A field holds a value the format does not allow.
    #[error("invalid value: {reason}")]
    Invalid {
        /// What was wrong.
        reason: &'static str,
    },
}
