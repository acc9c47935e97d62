//! Transactions as the log stores them (KIP-98): the end-transaction marker (a control batch with
//! one record whose key says COMMIT or ABORT and whose value carries the coordinator epoch), the
//! aborted-transaction entry that Fetch's `aborted_transactions` and the aborted-transaction index
//! carry, and the consumer's isolation level. The one definition of these layouts: storage, the
//! partition, the cleaner, the down-converter and the coordinators use it.
//!
//! Must never: read files or sockets, or accept a marker whose key or value is not exactly
//! Kafka's (a version other than 0, a type other than COMMIT or ABORT, a short or long field).

use crate::codec::Reader;
use crate::records::record::{batch_records, BatchBuilder, NewRecord};
use crate::records::v2::{validate, BatchHeader};
use crate::records::{Compression, RecordError};

/// Version of the control record key and of the end-transaction marker value Kafka writes.
pub const CONTROL_RECORD_VERSION: i16 = 0;
/// Bytes of a control record key: version (int16) and type (int16).
pub const CONTROL_KEY_BYTES: usize = 4;
/// Bytes of an end-transaction marker value: version (int16) and coordinator epoch (int32).
pub const MARKER_VALUE_BYTES: usize = 6;
/// Sequence a marker batch carries (Kafka's `RecordBatch.NO_SEQUENCE`): markers do not take part
/// in the idempotent sequence checks.
pub const MARKER_SEQUENCE: i32 = -1;

/// Which way a transaction ended (the control record key's type field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MarkerType {
    /// The transaction's records are discarded by read_committed consumers (type 0).
    Abort,
    /// The transaction's records become visible (type 1).
    Commit,
}

impl MarkerType {
    /// The type field as Kafka encodes it.
    pub fn code(self) -> i16 {
        match self {
            Self::Abort => 0,
            Self::Commit => 1,
        }
    }

    /// The marker type of a control record key's type field.
    pub fn from_code(code: i16) -> Result<Self, RecordError> {
        match code {
            0 => Ok(Self::Abort),
            1 => Ok(Self::Commit),
            _ => Err(RecordError::Corrupt {
                reason: "control record type is neither ABORT nor COMMIT",
            }),
        }
    }
}

/// An end-transaction marker: what one control batch of a transactional producer says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndTxnMarker {
    /// The producer whose transaction ended.
    pub producer_id: i64,
    /// Its epoch at the end (a marker fences every batch of an older epoch).
    pub producer_epoch: i16,
    /// The transaction coordinator's epoch (its partition's leader epoch) when it wrote the marker:
    /// a marker from an older coordinator than the last one seen is a zombie's.
    pub coordinator_epoch: i32,
    /// COMMIT or ABORT.
    pub marker_type: MarkerType,
}

impl EndTxnMarker {
    /// The marker as one control batch (base offset 0, no sequence), ready for a leader append
    /// (which assigns the offset and stamps the leader epoch).
    pub fn encode_batch(&self, timestamp_ms: i64) -> Result<Vec<u8>, RecordError> {
        let mut key = [0u8; CONTROL_KEY_BYTES];
        key[..2].copy_from_slice(&CONTROL_RECORD_VERSION.to_be_bytes());
        key[2..].copy_from_slice(&self.marker_type.code().to_be_bytes());
        let mut value = [0u8; MARKER_VALUE_BYTES];
        value[..2].copy_from_slice(&CONTROL_RECORD_VERSION.to_be_bytes());
        value[2..].copy_from_slice(&self.coordinator_epoch.to_be_bytes());
        let mut builder = BatchBuilder::new(0, Compression::None);
        builder.producer_id = self.producer_id;
        builder.producer_epoch = self.producer_epoch;
        builder.base_sequence = MARKER_SEQUENCE;
        builder.transactional = true;
        builder.control = true;
        builder.push(&NewRecord {
            offset_delta: 0,
            timestamp: timestamp_ms,
            key: Some(&key),
            value: Some(&value),
            headers: &[],
        })?;
        builder.build()
    }

    /// The marker a complete control batch holds (CRC checked). A control batch that is not an
    /// end-transaction marker of Kafka's layout is an error.
    pub fn decode_batch(batch: &[u8]) -> Result<Self, RecordError> {
        let header = validate(batch)?;
        Self::decode_with_header(batch, &header)
    }

    /// As [`EndTxnMarker::decode_batch`] for a batch whose header was already validated.
    pub fn decode_with_header(batch: &[u8], header: &BatchHeader) -> Result<Self, RecordError> {
        if !header.is_control() || !header.is_transactional() {
            return Err(RecordError::Corrupt {
                reason: "not a transactional control batch",
            });
        }
        let mut scratch = Vec::new();
        let mut records = batch_records(batch, header, &mut scratch, CONTROL_BATCH_BYTES_MAX)?;
        let record = records.next().ok_or(RecordError::Corrupt {
            reason: "control batch without a record",
        })??;
        let marker_type = decode_control_key(record.key)?;
        let coordinator_epoch = decode_marker_value(record.value)?;
        Ok(Self {
            producer_id: header.producer_id,
            producer_epoch: header.producer_epoch,
            coordinator_epoch,
            marker_type,
        })
    }
}

/// Decompressed bytes accepted from a control batch (one record of a few bytes; Kafka never
/// compresses them, so anything near this is corrupt).
pub const CONTROL_BATCH_BYTES_MAX: usize = 4096;

/// The marker type of a control record key (version 0, then the type).
pub fn decode_control_key(key: Option<&[u8]>) -> Result<MarkerType, RecordError> {
    let key = key.ok_or(RecordError::Corrupt {
        reason: "control record without a key",
    })?;
    if key.len() != CONTROL_KEY_BYTES {
        return Err(RecordError::Corrupt {
            reason: "control record key is not 4 bytes",
        });
    }
    let mut reader = Reader::new(key);
    if reader.i16()? != CONTROL_RECORD_VERSION {
        return Err(RecordError::Corrupt {
            reason: "unknown control record key version",
        });
    }
    MarkerType::from_code(reader.i16()?)
}

/// The coordinator epoch of an end-transaction marker value (version 0, then the epoch).
pub fn decode_marker_value(value: Option<&[u8]>) -> Result<i32, RecordError> {
    let value = value.ok_or(RecordError::Corrupt {
        reason: "end-transaction marker without a value",
    })?;
    if value.len() < MARKER_VALUE_BYTES {
        return Err(RecordError::Corrupt {
            reason: "end-transaction marker value shorter than 6 bytes",
        });
    }
    let mut reader = Reader::new(value);
    if reader.i16()? != CONTROL_RECORD_VERSION {
        return Err(RecordError::Corrupt {
            reason: "unknown end-transaction marker version",
        });
    }
    Ok(reader.i32()?)
}

/// One aborted transaction of a partition: Fetch's `aborted_transactions` entry (producer id and
/// first offset) plus what the aborted-transaction index keeps (Kafka's `.txnindex` entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AbortedTxn {
    /// The producer whose transaction aborted.
    pub producer_id: i64,
    /// Offset of the transaction's first batch in this partition.
    pub first_offset: i64,
    /// Offset of its ABORT marker.
    pub last_offset: i64,
    /// The partition's last stable offset once the marker was appended (the entry matters to a
    /// fetch from below it).
    pub last_stable_offset: i64,
}

/// What a consumer may read (Fetch v4+ and ListOffsets v2+ `isolation_level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IsolationLevel {
    /// Everything below the high watermark, aborted records included (0).
    #[default]
    ReadUncommitted,
    /// Only below the last stable offset, aborted records flagged by `aborted_transactions` (1).
    ReadCommitted,
}

impl IsolationLevel {
    /// The isolation level of a request's byte; `None` for any byte but 0 and 1 (the caller
    /// answers INVALID_REQUEST).
    pub fn from_byte(byte: i8) -> Option<Self> {
        match byte {
            0 => Some(Self::ReadUncommitted),
            1 => Some(Self::ReadCommitted),
            _ => None,
        }
    }

    /// The byte Kafka encodes.
    pub fn byte(self) -> i8 {
        match self {
            Self::ReadUncommitted => 0,
            Self::ReadCommitted => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marker(marker_type: MarkerType) -> EndTxnMarker {
        EndTxnMarker {
            producer_id: 4_000_000_001,
            producer_epoch: 7,
            coordinator_epoch: 12,
            marker_type,
        }
    }

    #[test]
    fn a_marker_batch_decodes_to_the_same_marker() {
        for marker_type in [MarkerType::Abort, MarkerType::Commit] {
            let batch = marker(marker_type).encode_batch(1_700_000_000_000).unwrap();
            let header = validate(&batch).unwrap();
            assert!(header.is_control() && header.is_transactional());
            assert_eq!(header.base_sequence, MARKER_SEQUENCE);
            assert_eq!(header.records_count, 1);
            assert_eq!(
                EndTxnMarker::decode_batch(&batch).unwrap(),
                marker(marker_type)
            );
        }
    }

    #[test]
    fn kafkas_commit_marker_bytes_decode() {
        // The key and value a Kafka 4.1 broker writes for a COMMIT at coordinator epoch 3.
        assert_eq!(
            decode_control_key(Some(&[0, 0, 0, 1])).unwrap(),
            MarkerType::Commit
        );
        assert_eq!(decode_marker_value(Some(&[0, 0, 0, 0, 0, 3])).unwrap(), 3);
    }

    #[test]
    fn malformed_control_records_are_errors() {
        assert!(decode_control_key(None).is_err());
        assert!(decode_control_key(Some(&[0, 0, 0])).is_err());
        assert!(decode_control_key(Some(&[0, 1, 0, 1])).is_err());
        assert!(decode_control_key(Some(&[0, 0, 0, 2])).is_err());
        assert!(decode_marker_value(Some(&[0, 0, 0])).is_err());
        assert!(decode_marker_value(Some(&[0, 1, 0, 0, 0, 3])).is_err());
        let mut plain = BatchBuilder::new(0, Compression::None);
        plain
            .push(&NewRecord {
                offset_delta: 0,
                timestamp: 0,
                key: Some(&[0, 0, 0, 1]),
                value: Some(&[0, 0, 0, 0, 0, 3]),
                headers: &[],
            })
            .unwrap();
        assert!(EndTxnMarker::decode_batch(&plain.build().unwrap()).is_err());
    }

    #[test]
    fn isolation_levels_round_trip_and_refuse_others() {
        for level in [
            IsolationLevel::ReadUncommitted,
            IsolationLevel::ReadCommitted,
        ] {
            assert_eq!(IsolationLevel::from_byte(level.byte()), Some(level));
        }
        assert_eq!(IsolationLevel::from_byte(2), None);
        assert_eq!(IsolationLevel::from_byte(-1), None);
    }
}
