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

/// Why a request frame could not become a [`crate::requests::Request`]. Every variant carries
/// what the broker needs to answer (or to decide to close the connection).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The request header itself could not be read: there is no correlation id to answer with,
    /// so the broker must close the connection.
    #[error("malformed request header: {source}")]
    Header {
        /// What was wrong.
        #[source]
        source: DecodeError,
    },
    /// An API key Skiff does not know. Kafka closes the connection for these.
    #[error("unknown api key {api_key} (correlation id {correlation_id})")]
    UnknownApiKey {
        /// The key sent.
        api_key: i16,
        /// Version sent.
        api_version: i16,
        /// Correlation id to answer with.
        correlation_id: i32,
    },
    /// A known API at a version outside [`crate::api::SUPPORTED_APIS`]. For ApiVersions the
    /// broker answers UNSUPPORTED_VERSION (35) with its version list in a v0 response.
    #[error("api key {api_key} version {api_version} is not supported (correlation id {correlation_id})")]
    UnsupportedVersion {
        /// The key sent.
        api_key: i16,
        /// Version sent.
        api_version: i16,
        /// Correlation id to answer with.
        correlation_id: i32,
    },
    /// The header was fine but the body is not a valid request of that API and version.
    #[error("malformed body of api key {api_key} version {api_version}: {source}")]
    Body {
        /// The key sent.
        api_key: i16,
        /// Version sent.
        api_version: i16,
        /// Correlation id to answer with.
        correlation_id: i32,
        /// What was wrong.
        #[source]
        source: DecodeError,
    },
}

impl RequestError {
    /// The correlation id the broker can answer with, when the header was readable.
    pub fn correlation_id(&self) -> Option<i32> {
        match self {
            Self::Header { .. } => None,
            Self::UnknownApiKey { correlation_id, .. }
            | Self::UnsupportedVersion { correlation_id, .. }
            | Self::Body { correlation_id, .. } => Some(*correlation_id),
        }
    }
}

/// Why a response could not be encoded. Only Skiff's own values can cause it, never a peer.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// kafka-protocol refused the struct for this version (a field set that the version lacks).
    #[error("cannot encode api key {api_key} version {api_version}: {reason}")]
    Message {
        /// The API.
        api_key: i16,
        /// The version.
        api_version: i16,
        /// kafka-protocol's explanation.
        reason: String,
    },
    /// A length does not fit its wire field (a record set above `i32::MAX`, too many topics).
    #[error("{what} of {value} does not fit its wire field")]
    TooLarge {
        /// Which length.
        what: &'static str,
        /// The value.
        value: u64,
    },
    /// The Fetch response shape names a version this encoder does not lay out.
    #[error("fetch response version {api_version} is not supported by the layout encoder")]
    UnsupportedVersion {
        /// The version asked for.
        api_version: i16,
    },
}
