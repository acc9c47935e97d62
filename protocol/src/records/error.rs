//! Typed errors for record formats and conversion.

use crate::error::DecodeError;

/// Why a record batch or message set is unusable.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The bytes themselves could not be read.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A magic byte other than 0, 1 or 2.
    #[error("unknown magic byte {magic}")]
    UnknownMagic {
        /// The byte found.
        magic: i8,
    },
    /// A codec id Kafka does not define.
    #[error("unknown compression codec {codec}")]
    UnknownCompression {
        /// The attribute bits found.
        codec: i16,
    },
    /// The stored checksum does not match the bytes.
    #[error("CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// Checksum in the batch.
        stored: u32,
        /// Checksum of the bytes.
        computed: u32,
    },
    /// The length field is impossible for the format.
    #[error("invalid batch length {batch_length}")]
    InvalidBatchLength {
        /// The length field read.
        batch_length: i32,
    },
}
