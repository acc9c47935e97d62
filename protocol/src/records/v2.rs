//! The v2 record batch (magic 2): a zero-copy view of the 61-byte header, its CRC32C check, and the
//! in-place base-offset rewrite that assigns offsets on append. The one definition of this layout:
//! storage and the broker use it instead of their own offsets into the header.
//!
//! Must never: copy the batch, or trust `batch_length` before comparing it with the bytes present.

use crate::codec::Reader;
use crate::records::{Compression, RecordError, LOG_OVERHEAD_BYTES, MAGIC_OFFSET};

/// Size of the v2 batch header, from the base offset to the first record.
pub const BATCH_HEADER_BYTES: usize = 61;
/// Offset of the batch length field.
pub const BATCH_LENGTH_OFFSET: usize = 8;
/// Offset of the partition leader epoch field (outside the CRC's coverage).
pub const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;
/// Offset of the CRC32C field.
pub const CRC_OFFSET: usize = 17;
/// First byte the CRC32C covers (attributes); the base offset, length, leader epoch and magic are
/// outside it, which is why the base offset can be rewritten without re-encoding.
pub const CRC_COVERAGE_START: usize = 21;
/// Offset of the attributes field.
pub const ATTRIBUTES_OFFSET: usize = 21;
/// Offset of the max timestamp field.
pub const MAX_TIMESTAMP_OFFSET: usize = 35;
/// Smallest legal `batch_length` (header after the length field, no records).
// INVARIANT: 61 − 12 = 49 fits any integer type.
#[allow(clippy::cast_possible_truncation)]
pub const BATCH_LENGTH_MIN: i32 = (BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES) as i32;

/// Attribute bit: timestamps are the broker's log-append time.
pub const ATTRIBUTE_LOG_APPEND_TIME: i16 = 0x08;
/// Attribute bit: the batch is part of a transaction.
pub const ATTRIBUTE_TRANSACTIONAL: i16 = 0x10;
/// Attribute bit: the batch holds a control record (transaction marker).
pub const ATTRIBUTE_CONTROL: i16 = 0x20;
/// Attribute bit: `base_timestamp` holds the delete horizon (KIP-534).
pub const ATTRIBUTE_DELETE_HORIZON: i16 = 0x40;

/// The decoded fixed header of a v2 record batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// Offset of the first record.
    pub base_offset: i64,
    /// Bytes after the length field.
    pub batch_length: i32,
    /// Leader epoch of the appending leader.
    pub partition_leader_epoch: i32,
    /// Always 2 for a parsed header.
    pub magic: i8,
    /// CRC32C of bytes [21, end).
    pub crc: u32,
    /// Codec, timestamp type, transactional, control, delete horizon bits.
    pub attributes: i16,
    /// Last offset − base offset.
    pub last_offset_delta: i32,
    /// First record's timestamp (or the delete horizon).
    pub base_timestamp: i64,
    /// Greatest record timestamp, or the log-append time.
    pub max_timestamp: i64,
    /// Idempotent producer id, −1 for none.
    pub producer_id: i64,
    /// Producer epoch, −1 for none.
    pub producer_epoch: i16,
    /// Sequence of the first record, −1 for none.
    pub base_sequence: i32,
    /// Number of records.
    pub records_count: i32,
}

impl BatchHeader {
    /// Parses the header at the start of `bytes`. Checks the magic and that `batch_length` is at least
    /// the header's; it does not require the whole batch to be present (see [`BatchHeader::total_bytes`]).
    pub fn parse(bytes: &[u8]) -> Result<Self, RecordError> {
        let mut reader = Reader::new(bytes);
        let base_offset = reader.i64()?;
        let batch_length = reader.i32()?;
        let partition_leader_epoch = reader.i32()?;
        let magic = reader.i8()?;
        if magic != 2 {
            return Err(RecordError::UnknownMagic { magic });
        }
        if batch_length < BATCH_LENGTH_MIN {
            return Err(RecordError::InvalidBatchLength { batch_length });
        }
        Ok(Self {
            base_offset,
            batch_length,
            partition_leader_epoch,
            magic,
            crc: reader.u32()?,
            attributes: reader.i16()?,
            last_offset_delta: reader.i32()?,
            base_timestamp: reader.i64()?,
            max_timestamp: reader.i64()?,
            producer_id: reader.i64()?,
            producer_epoch: reader.i16()?,
            base_sequence: reader.i32()?,
            records_count: reader.i32()?,
        })
    }

    /// Whole batch size including the 12-byte log overhead.
    pub fn total_bytes(&self) -> usize {
        // batch_length ≥ BATCH_LENGTH_MIN > 0 was checked in parse.
        LOG_OVERHEAD_BYTES + self.batch_length.unsigned_abs() as usize
    }

    /// Offset of the last record.
    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    /// Offset after the last record.
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }

    /// The batch's codec.
    pub fn compression(&self) -> Result<Compression, RecordError> {
        Compression::from_attributes(self.attributes)
    }

    /// Whether the batch is a transaction marker.
    pub fn is_control(&self) -> bool {
        self.attributes & ATTRIBUTE_CONTROL != 0
    }

    /// Whether the batch is transactional.
    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTRIBUTE_TRANSACTIONAL != 0
    }

    /// Whether timestamps are log-append times.
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & ATTRIBUTE_LOG_APPEND_TIME != 0
    }

    /// The delete horizon a log cleaner wrote into the base timestamp (KIP-534: attribute bit 6
    /// set), if any. A record's own timestamp is still base timestamp + its delta; only code
    /// that took the base timestamp for the first record's time must look here.
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        (self.attributes & ATTRIBUTE_DELETE_HORIZON != 0).then_some(self.base_timestamp)
    }
}

/// The magic byte of the entry at the start of `bytes`, if present.
pub fn peek_magic(bytes: &[u8]) -> Option<i8> {
    bytes
        .get(MAGIC_OFFSET)
        .map(|byte| i8::from_ne_bytes([*byte]))
}

/// CRC32C of a whole batch's covered bytes.
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(batch.get(CRC_COVERAGE_START..).unwrap_or_default())
}

/// Checks that `batch` is exactly one complete v2 batch whose CRC32C matches; returns its header.
pub fn validate(batch: &[u8]) -> Result<BatchHeader, RecordError> {
    let header = BatchHeader::parse(batch)?;
    if header.total_bytes() != batch.len() {
        return Err(RecordError::InvalidBatchLength {
            batch_length: header.batch_length,
        });
    }
    let computed = compute_crc(batch);
    if computed != header.crc {
        return Err(RecordError::CrcMismatch {
            stored: header.crc,
            computed,
        });
    }
    Ok(header)
}

/// Rewrites the base offset in place (outside the CRC's coverage, so the CRC stays valid).
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) -> Result<(), RecordError> {
    let field = batch
        .get_mut(0..8)
        .ok_or(RecordError::InvalidBatchLength { batch_length: 0 })?;
    field.copy_from_slice(&base_offset.to_be_bytes());
    Ok(())
}

/// Stamps the partition leader epoch of the batch starting at `batch[0]` in place (outside the
/// CRC's coverage, so the CRC stays valid), as the leader does on append.
pub fn set_partition_leader_epoch(batch: &mut [u8], leader_epoch: i32) -> Result<(), RecordError> {
    let field = batch
        .get_mut(PARTITION_LEADER_EPOCH_OFFSET..PARTITION_LEADER_EPOCH_OFFSET + 4)
        .ok_or(RecordError::InvalidBatchLength { batch_length: 0 })?;
    field.copy_from_slice(&leader_epoch.to_be_bytes());
    Ok(())
}

/// Marks every batch in `batches` as LogAppendTime with `log_append_time_ms` as its max timestamp and
/// recomputes its CRC (a topic with `message.timestamp.type=LogAppendTime`, as Kafka's broker does).
/// The record timestamps inside are left alone: readers of LogAppendTime batches use the batch's.
pub fn set_log_append_time(batches: &mut [u8], log_append_time_ms: i64) -> Result<(), RecordError> {
    let mut position = 0usize;
    while position < batches.len() {
        let rest = batches.get(position..).unwrap_or_default();
        let total_bytes = BatchHeader::parse(rest)?.total_bytes();
        let batch = batches
            .get_mut(position..position.saturating_add(total_bytes))
            .ok_or(RecordError::InvalidBatchLength { batch_length: 0 })?;
        let attributes = i16::from_be_bytes([
            batch.get(ATTRIBUTES_OFFSET).copied().unwrap_or_default(),
            batch
                .get(ATTRIBUTES_OFFSET + 1)
                .copied()
                .unwrap_or_default(),
        ]) | ATTRIBUTE_LOG_APPEND_TIME;
        if let Some(field) = batch.get_mut(ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2) {
            field.copy_from_slice(&attributes.to_be_bytes());
        }
        if let Some(field) = batch.get_mut(MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8) {
            field.copy_from_slice(&log_append_time_ms.to_be_bytes());
        }
        let crc = compute_crc(batch);
        if let Some(field) = batch.get_mut(CRC_OFFSET..CRC_OFFSET + 4) {
            field.copy_from_slice(&crc.to_be_bytes());
        }
        position = position.saturating_add(total_bytes);
    }
    Ok(())
}

/// Iterates over the complete v2 batches at the start of `bytes`, stopping before a partial tail.
/// Yields `(position, header)` pairs; an invalid header ends iteration with an error item.
pub fn batch_positions(
    bytes: &[u8],
) -> impl Iterator<Item = Result<(usize, BatchHeader), RecordError>> + '_ {
    let mut position = 0usize;
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed {
            return None;
        }
        let rest = bytes.get(position..)?;
        if rest.len() < BATCH_HEADER_BYTES {
            return None;
        }
        match BatchHeader::parse(rest) {
            Ok(header) if header.total_bytes() <= rest.len() => {
                let at = position;
                position += header.total_bytes();
                Some(Ok((at, header)))
            }
            Ok(_) => None,
            Err(error) => {
                failed = true;
                Some(Err(error))
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty-records batch with a correct CRC, for header tests.
    fn empty_batch(base_offset: i64) -> Vec<u8> {
        let mut batch = Vec::new();
        batch.extend_from_slice(&base_offset.to_be_bytes());
        batch.extend_from_slice(&BATCH_LENGTH_MIN.to_be_bytes());
        batch.extend_from_slice(&0i32.to_be_bytes());
        batch.push(2);
        batch.extend_from_slice(&0u32.to_be_bytes());
        batch.extend_from_slice(&0i16.to_be_bytes());
        batch.extend_from_slice(&0i32.to_be_bytes());
        batch.extend_from_slice(&(-1i64).to_be_bytes());
        batch.extend_from_slice(&(-1i64).to_be_bytes());
        batch.extend_from_slice(&(-1i64).to_be_bytes());
        batch.extend_from_slice(&(-1i16).to_be_bytes());
        batch.extend_from_slice(&(-1i32).to_be_bytes());
        batch.extend_from_slice(&0i32.to_be_bytes());
        let crc = compute_crc(&batch);
        batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        batch
    }

    #[test]
    fn header_round_trip_and_base_offset_rewrite_keeps_crc() {
        let mut batch = empty_batch(0);
        assert_eq!(batch.len(), BATCH_HEADER_BYTES);
        let header = validate(&batch).expect("valid");
        assert_eq!(header.total_bytes(), BATCH_HEADER_BYTES);
        set_base_offset(&mut batch, 42).expect("room");
        let header = validate(&batch).expect("still valid");
        assert_eq!(header.base_offset, 42);
        assert_eq!(header.last_offset(), 42);
    }

    #[test]
    fn leader_epoch_stamp_keeps_crc() {
        let mut batch = empty_batch(7);
        set_partition_leader_epoch(&mut batch, 12).expect("room");
        let header = validate(&batch).expect("still valid");
        assert_eq!((header.partition_leader_epoch, header.base_offset), (12, 7));
        assert!(set_partition_leader_epoch(&mut batch[..15], 1).is_err());
    }

    #[test]
    fn flipped_byte_fails_crc() {
        let mut batch = empty_batch(0);
        batch[30] ^= 0x01;
        assert!(matches!(
            validate(&batch),
            Err(RecordError::CrcMismatch { .. })
        ));
    }

    #[test]
    fn batch_positions_stop_before_a_partial_tail() {
        let mut bytes = empty_batch(0);
        bytes.extend(empty_batch(1));
        bytes.extend_from_slice(&empty_batch(2)[..30]);
        let positions: Vec<_> = batch_positions(&bytes)
            .map(|item| item.expect("ok").0)
            .collect();
        assert_eq!(positions, vec![0, BATCH_HEADER_BYTES]);
    }

    #[test]
    fn tiny_input_huge_count_is_an_error() {
        let mut batch = empty_batch(0);
        batch[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(validate(&batch).is_err());
        batch[8..12].copy_from_slice(&(-5i32).to_be_bytes());
        assert!(BatchHeader::parse(&batch).is_err());
    }

    #[test]
    fn log_append_time_rewrite_keeps_the_batch_valid() {
        let mut batches = empty_batch(0);
        batches.extend(empty_batch(1));
        set_log_append_time(&mut batches, 1234).expect("rewrite");
        for item in batch_positions(&batches) {
            let (position, header) = item.expect("header");
            let batch = &batches[position..position + header.total_bytes()];
            let header = validate(batch).expect("crc still valid");
            assert!(header.is_log_append_time());
            assert_eq!(header.max_timestamp, 1234);
        }
    }
}
