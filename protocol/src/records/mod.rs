//! Kafka's three message formats: the v2 record batch (what Skiff stores) and the legacy v0/v1
//! message sets (what old clients speak), with the framing they share.
//!
//! Must never: read files or sockets, or allocate by a length read from the input before checking it.

pub mod compression;
pub mod error;
pub mod legacy;
pub mod record;
pub mod txn;
pub mod v2;

pub use error::RecordError;

/// Bytes before every log entry's payload in all formats: offset (8) and size (4).
pub const LOG_OVERHEAD_BYTES: usize = 12;

/// Position of the magic byte in every format (v0/v1 after the CRC, v2 after the leader epoch).
pub const MAGIC_OFFSET: usize = 16;

/// The three message format versions ("magic").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Magic {
    /// Kafka 0.8–0.9 messages: no timestamps.
    V0 = 0,
    /// Kafka 0.10 messages: with a timestamp.
    V1 = 1,
    /// Kafka 0.11+ record batches.
    V2 = 2,
}

impl Magic {
    /// The magic for a raw byte, or an error for an unknown one.
    pub fn from_byte(byte: i8) -> Result<Self, RecordError> {
        match byte {
            0 => Ok(Self::V0),
            1 => Ok(Self::V1),
            2 => Ok(Self::V2),
            magic => Err(RecordError::UnknownMagic { magic }),
        }
    }
}

/// Compression codec, as bits 0–2 of the attributes in every format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    /// Uncompressed.
    None = 0,
    /// gzip (RFC 1952).
    Gzip = 1,
    /// Snappy (xerial framing in v0/v1, raw-block framing as Kafka writes it in v2).
    Snappy = 2,
    /// LZ4 in Kafka's frame.
    Lz4 = 3,
    /// Zstandard (v2 only).
    Zstd = 4,
}

impl Compression {
    /// Mask of the codec bits in the attributes.
    pub const ATTRIBUTE_MASK: i16 = 0x07;

    /// The codec named by attribute bits 0–2.
    pub fn from_attributes(attributes: i16) -> Result<Self, RecordError> {
        match attributes & Self::ATTRIBUTE_MASK {
            0 => Ok(Self::None),
            1 => Ok(Self::Gzip),
            2 => Ok(Self::Snappy),
            3 => Ok(Self::Lz4),
            4 => Ok(Self::Zstd),
            codec => Err(RecordError::UnknownCompression { codec }),
        }
    }
}
