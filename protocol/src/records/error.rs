//! Typed errors for record formats and conversion.

use crate::error_code::{
    CORRUPT_MESSAGE, INVALID_RECORD, INVALID_TIMESTAMP, MESSAGE_TOO_LARGE,
    UNSUPPORTED_COMPRESSION_TYPE,
};

use crate::error::DecodeError;
use crate::records::Compression;

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
    /// A compressed stream could not be decoded.
    #[error("compression: {reason}")]
    Compression {
        /// What was wrong.
        reason: &'static str,
    },
    /// Decompression would produce more than the cap allows.
    #[error("decompressed data exceeds {output_bytes_max} bytes")]
    DecompressedTooLarge {
        /// The cap that was hit.
        output_bytes_max: usize,
    },
    /// A codec the target format cannot carry (zstd in v0/v1, or a down-conversion of zstd).
    #[error("compression {codec:?} is not supported here")]
    UnsupportedCompression {
        /// The codec found.
        codec: Compression,
    },
    /// A message or record is malformed (bad lengths, bad nesting) in a way Kafka calls corrupt.
    #[error("corrupt record: {reason}")]
    Corrupt {
        /// What was wrong.
        reason: &'static str,
    },
    /// A well-formed record set that breaks a rule (mixed magics, several compressed wrappers).
    #[error("invalid record: {reason}")]
    InvalidRecord {
        /// What was wrong.
        reason: &'static str,
    },
    /// A producer set a timestamp type it may not set (LogAppendTime on produce).
    #[error("invalid timestamp: {reason}")]
    InvalidTimestamp {
        /// What was wrong.
        reason: &'static str,
    },
    /// A batch is larger than the named bound the caller allows for one batch.
    #[error("batch of {batch_bytes} bytes is above the maximum {batch_bytes_max}")]
    BatchTooLarge {
        /// The batch's size.
        batch_bytes: u64,
        /// The bound.
        batch_bytes_max: u64,
    },
}

impl RecordError {
    /// The Kafka error code a broker answers with for this error (produce or fetch partition).
    pub fn error_code(&self) -> i16 {
        match self {
            Self::UnsupportedCompression { .. } => UNSUPPORTED_COMPRESSION_TYPE,
            Self::InvalidRecord { .. } => INVALID_RECORD,
            Self::InvalidTimestamp { .. } => INVALID_TIMESTAMP,
            Self::BatchTooLarge { .. } | Self::DecompressedTooLarge { .. } => MESSAGE_TOO_LARGE,
            Self::Decode(_)
            | Self::UnknownMagic { .. }
            | Self::UnknownCompression { .. }
            | Self::CrcMismatch { .. }
            | Self::InvalidBatchLength { .. }
            | Self::Compression { .. }
            | Self::Corrupt { .. } => CORRUPT_MESSAGE,
        }
    }
}
