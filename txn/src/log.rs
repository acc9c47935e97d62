//! The record layout of `__transaction_state` (Kafka's `TransactionLogKey` / `TransactionLogValue`)
//! and its wrapping into v2 batches. The log is compacted by key (the transactional id); a record
//! with a null value (a tombstone) removes the id.
//!
//! Key (big-endian):  `i16 key_version = 0 | i16-string transactional_id`
//! Value version 0:   `i16 0 | i64 producer_id | i16 epoch | i32 timeout_ms | i8 state |
//!                     i32-array (null when Empty) of (i16-string topic, i32-array of i32) |
//!                     i64 last_update_ms | i64 start_ms`
//! Value version 1:   the same fields in the flexible encoding (compact strings and arrays, an
//!                     empty tagged-field section per topic) followed by the tagged fields
//!                     0 = previous producer id (i64), 1 = next producer id (i64), 2 = client
//!                     transaction version (i16); each written only when not its default.
//!
//! Version 1 is what Kafka writes once `transaction.version` 2 is finalized; version 0 otherwise.
//! Tags this code does not know are skipped (Kafka adds fields only as tags).
//!
//! Must never: trust a length read from the file before checking it against the bytes that remain
//! (every read goes through the protocol crate's bounded `Reader`), or decompress without a cap.

use std::collections::BTreeSet;

use skiff_protocol::codec::{put_unsigned_varint, Reader};
use skiff_protocol::records::compression::DECOMPRESSED_BYTES_MAX;
use skiff_protocol::records::record::{batch_records, BatchBuilder, NewRecord};
use skiff_protocol::records::v2::{batch_positions, validate};
use skiff_protocol::records::{Compression, RecordError};
use skiff_protocol::DecodeError;

use crate::state::{TopicPartition, TxnMetadata, TxnState, NO_PRODUCER_EPOCH, NO_PRODUCER_ID};

/// Key version of a transaction-state record (Kafka's `CoordinatorRecordType.TRANSACTION_LOG`).
pub const KEY_VERSION: i16 = 0;
/// The newest value version (flexible, with tagged fields).
pub const VALUE_VERSION_MAX: i16 = 1;
/// Records one stored batch may carry: a batch claiming more is refused before it is read.
pub const RECORDS_PER_BATCH_MAX: usize = 100_000;
/// Topics, and partitions per topic, one stored value may list (a coordinator never writes more
/// than its partitions-per-transaction bound, which is far below).
pub const PARTITIONS_IN_RECORD_MAX: usize = 1_000_000;
/// Tagged fields one value may carry.
pub const TAGGED_FIELDS_MAX: usize = 64;

/// Why `__transaction_state` could not be read or written.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TxnLogError {
    /// A key or value is truncated or malformed.
    #[error("transaction log record: {0}")]
    Decode(#[from] DecodeError),
    /// The batch around the records is damaged.
    #[error("transaction log batch: {0}")]
    Batch(#[from] RecordError),
    /// A key version other than 0.
    #[error("transaction log key version {version} is unknown")]
    UnknownKeyVersion {
        /// The version found.
        version: i16,
    },
    /// A value version above [`VALUE_VERSION_MAX`] or negative.
    #[error("transaction log value version {version} is unknown")]
    UnknownValueVersion {
        /// The version found.
        version: i16,
    },
    /// A state id Kafka does not define.
    #[error("transaction log state id {id} is unknown")]
    UnknownState {
        /// The id found.
        id: i8,
    },
    /// A record without a key.
    #[error("transaction log record without a key")]
    MissingKey,
    /// More records in one batch than [`RECORDS_PER_BATCH_MAX`].
    #[error("transaction log batch of {count} records is above the maximum {count_max}")]
    TooManyRecords {
        /// Records in the batch.
        count: usize,
        /// The bound.
        count_max: usize,
    },
    /// A string or array longer than its length prefix can say.
    #[error("transaction log field of {len} elements is too long to encode")]
    TooLong {
        /// Its length.
        len: usize,
    },
}

/// One record of `__transaction_state`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnLogRecord {
    /// The key.
    pub transactional_id: String,
    /// The metadata, `None` for a tombstone. Decoded metadata has no last epoch
    /// ([`NO_PRODUCER_EPOCH`]), as Kafka's log does not store it.
    pub value: Option<TxnMetadata>,
}

fn len_i16(len: usize) -> Result<i16, TxnLogError> {
    i16::try_from(len).map_err(|_| TxnLogError::TooLong { len })
}

fn len_i32(len: usize) -> Result<i32, TxnLogError> {
    i32::try_from(len).map_err(|_| TxnLogError::TooLong { len })
}

fn len_compact(len: usize) -> Result<u32, TxnLogError> {
    u32::try_from(len)
        .ok()
        .and_then(|len| len.checked_add(1))
        .ok_or(TxnLogError::TooLong { len })
}

fn put_string(out: &mut Vec<u8>, text: &str) -> Result<(), TxnLogError> {
    out.extend_from_slice(&len_i16(text.len())?.to_be_bytes());
    out.extend_from_slice(text.as_bytes());
    Ok(())
}

fn put_compact_string(out: &mut Vec<u8>, text: &str) -> Result<(), TxnLogError> {
    put_unsigned_varint(out, len_compact(text.len())?);
    out.extend_from_slice(text.as_bytes());
    Ok(())
}

/// The key bytes of `transactional_id`.
pub fn encode_key(transactional_id: &str) -> Result<Vec<u8>, TxnLogError> {
    let mut out = Vec::with_capacity(4 + transactional_id.len());
    out.extend_from_slice(&KEY_VERSION.to_be_bytes());
    put_string(&mut out, transactional_id)?;
    Ok(out)
}

/// Decodes key bytes; nothing may follow the id.
pub fn decode_key(bytes: &[u8]) -> Result<String, TxnLogError> {
    let mut reader = Reader::new(bytes);
    let version = reader.i16()?;
    if version != KEY_VERSION {
        return Err(TxnLogError::UnknownKeyVersion { version });
    }
    let id = reader.string()?.to_owned();
    reader.expect_end()?;
    Ok(id)
}

/// The partitions grouped by topic, in order.
fn by_topic(partitions: &BTreeSet<TopicPartition>) -> Vec<(&str, Vec<i32>)> {
    let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
    for tp in partitions {
        match topics.last_mut() {
            Some((topic, ids)) if *topic == tp.topic => ids.push(tp.partition),
            _ => topics.push((&tp.topic, vec![tp.partition])),
        }
    }
    topics
}

/// The value bytes of `meta` in `version` (0 or 1). Empty metadata lists no partitions (null).
pub fn encode_value(meta: &TxnMetadata, version: i16) -> Result<Vec<u8>, TxnLogError> {
    if !(0..=VALUE_VERSION_MAX).contains(&version) {
        return Err(TxnLogError::UnknownValueVersion { version });
    }
    let flexible = version >= 1;
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&meta.producer_id.to_be_bytes());
    out.extend_from_slice(&meta.producer_epoch.to_be_bytes());
    out.extend_from_slice(&meta.timeout_ms.to_be_bytes());
    out.extend_from_slice(&meta.state.id().to_be_bytes());
    if meta.state == TxnState::Empty {
        if flexible {
            put_unsigned_varint(&mut out, 0);
        } else {
            out.extend_from_slice(&(-1i32).to_be_bytes());
        }
    } else {
        encode_partitions(&mut out, &meta.partitions, flexible)?;
    }
    out.extend_from_slice(&meta.last_update_ms.to_be_bytes());
    out.extend_from_slice(&meta.start_ms.to_be_bytes());
    if flexible {
        encode_tags(&mut out, meta);
    }
    Ok(out)
}

fn encode_partitions(
    out: &mut Vec<u8>,
    partitions: &BTreeSet<TopicPartition>,
    flexible: bool,
) -> Result<(), TxnLogError> {
    let topics = by_topic(partitions);
    if flexible {
        put_unsigned_varint(out, len_compact(topics.len())?);
    } else {
        out.extend_from_slice(&len_i32(topics.len())?.to_be_bytes());
    }
    for (topic, ids) in topics {
        if flexible {
            put_compact_string(out, topic)?;
            put_unsigned_varint(out, len_compact(ids.len())?);
        } else {
            put_string(out, topic)?;
            out.extend_from_slice(&len_i32(ids.len())?.to_be_bytes());
        }
        for id in ids {
            out.extend_from_slice(&id.to_be_bytes());
        }
        if flexible {
            put_unsigned_varint(out, 0);
        }
    }
    Ok(())
}

fn encode_tags(out: &mut Vec<u8>, meta: &TxnMetadata) {
    let mut tags: Vec<(u32, Vec<u8>)> = Vec::new();
    if meta.previous_producer_id != NO_PRODUCER_ID {
        tags.push((0, meta.previous_producer_id.to_be_bytes().to_vec()));
    }
    if meta.next_producer_id != NO_PRODUCER_ID {
        tags.push((1, meta.next_producer_id.to_be_bytes().to_vec()));
    }
    if meta.client_tv != 0 {
        tags.push((2, meta.client_tv.to_be_bytes().to_vec()));
    }
    // At most three tags of at most eight bytes: the casts cannot truncate.
    put_unsigned_varint(out, u32::try_from(tags.len()).unwrap_or(0));
    for (tag, data) in tags {
        put_unsigned_varint(out, tag);
        put_unsigned_varint(out, u32::try_from(data.len()).unwrap_or(0));
        out.extend_from_slice(&data);
    }
}

/// Decodes value bytes (version 0 or 1); every field must be present and nothing may follow.
pub fn decode_value(bytes: &[u8]) -> Result<TxnMetadata, TxnLogError> {
    let mut reader = Reader::new(bytes);
    let version = reader.i16()?;
    if !(0..=VALUE_VERSION_MAX).contains(&version) {
        return Err(TxnLogError::UnknownValueVersion { version });
    }
    let flexible = version >= 1;
    let producer_id = reader.i64()?;
    let producer_epoch = reader.i16()?;
    let timeout_ms = reader.i32()?;
    let state_id = reader.i8()?;
    let state = TxnState::from_id(state_id).ok_or(TxnLogError::UnknownState { id: state_id })?;
    let mut partitions = decode_partitions(&mut reader, flexible)?;
    if state == TxnState::Empty {
        partitions.clear();
    }
    let last_update_ms = reader.i64()?;
    let start_ms = reader.i64()?;
    let mut meta = TxnMetadata {
        producer_id,
        previous_producer_id: NO_PRODUCER_ID,
        next_producer_id: NO_PRODUCER_ID,
        producer_epoch,
        last_producer_epoch: NO_PRODUCER_EPOCH,
        timeout_ms,
        state,
        partitions,
        start_ms,
        last_update_ms,
        client_tv: 0,
    };
    if flexible {
        decode_tags(&mut reader, &mut meta)?;
    }
    reader.expect_end()?;
    Ok(meta)
}

fn decode_partitions(
    reader: &mut Reader<'_>,
    flexible: bool,
) -> Result<BTreeSet<TopicPartition>, TxnLogError> {
    let mut partitions = BTreeSet::new();
    // A topic takes at least its length prefix and the partition count.
    let topics = if flexible {
        reader.compact_array_len(2, PARTITIONS_IN_RECORD_MAX)?
    } else {
        reader.array_len(6, PARTITIONS_IN_RECORD_MAX)?
    };
    for _ in 0..topics.unwrap_or(0) {
        let topic = if flexible {
            reader.compact_string()?
        } else {
            reader.string()?
        };
        let ids = if flexible {
            reader.compact_array_len(4, PARTITIONS_IN_RECORD_MAX)?
        } else {
            reader.array_len(4, PARTITIONS_IN_RECORD_MAX)?
        }
        .ok_or(DecodeError::UnexpectedNull)?;
        for _ in 0..ids {
            partitions.insert(TopicPartition::new(topic, reader.i32()?));
        }
        if flexible {
            reader.tagged_fields(TAGGED_FIELDS_MAX, |_, _| Ok(()))?;
        }
    }
    Ok(partitions)
}

fn decode_tags(reader: &mut Reader<'_>, meta: &mut TxnMetadata) -> Result<(), TxnLogError> {
    reader.tagged_fields(TAGGED_FIELDS_MAX, |tag, data| {
        let mut field = Reader::new(data);
        match tag {
            0 => meta.previous_producer_id = field.i64()?,
            1 => meta.next_producer_id = field.i64()?,
            2 => meta.client_tv = field.i16()?,
            // Tags added after this code (Kafka only adds fields as tags): skipped.
            _ => return Ok(()),
        }
        field.expect_end()
    })?;
    Ok(())
}

/// One uncompressed v2 batch holding `records` in order (base offset 0: the log assigns offsets
/// on append), each stamped with `timestamp_ms`, values in `value_version`.
pub fn encode_batch(
    records: &[TxnLogRecord],
    value_version: i16,
    timestamp_ms: i64,
) -> Result<Vec<u8>, TxnLogError> {
    if records.len() > RECORDS_PER_BATCH_MAX {
        return Err(TxnLogError::TooManyRecords {
            count: records.len(),
            count_max: RECORDS_PER_BATCH_MAX,
        });
    }
    let mut builder = BatchBuilder::new(0, Compression::None);
    for (index, record) in records.iter().enumerate() {
        let key = encode_key(&record.transactional_id)?;
        let value = match &record.value {
            Some(meta) => Some(encode_value(meta, value_version)?),
            None => None,
        };
        let offset_delta = i32::try_from(index).map_err(|_| TxnLogError::TooManyRecords {
            count: records.len(),
            count_max: RECORDS_PER_BATCH_MAX,
        })?;
        builder.push(&NewRecord {
            offset_delta,
            timestamp: timestamp_ms,
            key: Some(&key),
            value: value.as_deref(),
            headers: &[],
        })?;
    }
    Ok(builder.build()?)
}

/// Decodes one complete batch (CRC checked), calling `visit` for each record in order. Control
/// batches are skipped. Returns the records visited.
pub fn decode_batch(
    batch: &[u8],
    visit: &mut impl FnMut(TxnLogRecord),
) -> Result<usize, TxnLogError> {
    let header = validate(batch)?;
    if header.is_control() {
        return Ok(0);
    }
    let count = usize::try_from(header.records_count).unwrap_or(usize::MAX);
    if count > RECORDS_PER_BATCH_MAX {
        return Err(TxnLogError::TooManyRecords {
            count,
            count_max: RECORDS_PER_BATCH_MAX,
        });
    }
    let mut scratch = Vec::new();
    let records = batch_records(batch, &header, &mut scratch, DECOMPRESSED_BYTES_MAX)?;
    let mut visited = 0;
    for record in records {
        let record = record?;
        let transactional_id = decode_key(record.key.ok_or(TxnLogError::MissingKey)?)?;
        let value = record.value.map(decode_value).transpose()?;
        visit(TxnLogRecord {
            transactional_id,
            value,
        });
        visited += 1;
    }
    Ok(visited)
}

/// Decodes every complete batch at the start of `bytes` (a slice of the log), stopping before a
/// partial tail. Returns the bytes consumed.
pub fn decode_batches(
    bytes: &[u8],
    visit: &mut impl FnMut(TxnLogRecord),
) -> Result<usize, TxnLogError> {
    let mut consumed = 0;
    for item in batch_positions(bytes) {
        let (position, header) = item?;
        let end = position + header.total_bytes();
        let batch = bytes
            .get(position..end)
            .ok_or(RecordError::InvalidBatchLength {
                batch_length: header.batch_length,
            })?;
        decode_batch(batch, visit)?;
        consumed = end;
    }
    Ok(consumed)
}
