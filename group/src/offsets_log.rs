//! The record layout of the internal offsets log (one record per committed partition) and its
//! wrapping into v2 batches with `skiff_protocol::records`. The log is compacted by key, so the key
//! is exactly (group, topic, partition); a record with a null value (a tombstone) deletes the
//! offset.
//!
//! Key (big-endian):   `i16 key_version = 1 | i16-string group | i16-string topic | i32 partition`
//! Value:              `i16 value_version = 3 | i64 offset | i32 leader_epoch |
//!                      i16-string metadata | i64 commit_timestamp_ms`
//!
//! The versions follow Kafka's own offsets-log numbering (key 1 = an offset commit, value 3 = the
//! layout with a leader epoch), so a reader that meets any other version stops with an error
//! rather than guessing.
//!
//! Transactional offset commits (TxnOffsetCommit) are the same records in a transactional batch
//! carrying the producer's id and epoch ([`encode_txn_batches`]); they take effect only at that
//! producer's COMMIT marker (a control batch) later in the same log. A replay therefore reads
//! [`Replayed`] items ([`decode_replayed_batches`]): plain entries, transactional entries and
//! markers, in log order.
//!
//! Must never: trust a length read from the file before checking it against the bytes that remain
//! (every read goes through the protocol crate's bounded `Reader`), or decompress without a cap.

use skiff_protocol::codec::Reader;
use skiff_protocol::records::compression::DECOMPRESSED_BYTES_MAX;
use skiff_protocol::records::record::{batch_records, BatchBuilder, NewRecord};
use skiff_protocol::records::txn::{EndTxnMarker, MarkerType, MARKER_SEQUENCE};
use skiff_protocol::records::v2::{batch_positions, validate};
use skiff_protocol::records::{Compression, RecordError};
use skiff_protocol::DecodeError;

use crate::consumer::records::{is_consumer_record_type, ConsumerRecordError};
use crate::consumer::ConsumerRecord;

/// Key version of an offset-commit record.
pub const KEY_VERSION: i16 = 1;
/// Value version written (offset, leader epoch, metadata, commit timestamp).
pub const VALUE_VERSION: i16 = 3;
/// Records one batch may carry: a stored batch claiming more is refused before its records are
/// read. A commit naming more partitions is written as several batches by [`encode_batches`].
pub const RECORDS_PER_BATCH_MAX: usize = 100_000;

/// Why the offsets log could not be read or written.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OffsetLogError {
    /// A key or value is truncated or malformed.
    #[error("offsets log record: {0}")]
    Decode(#[from] DecodeError),
    /// The batch around the records is damaged.
    #[error("offsets log batch: {0}")]
    Batch(#[from] RecordError),
    /// A key version this code does not write.
    #[error("offsets log key version {version} is unknown")]
    UnknownKeyVersion {
        /// The version found.
        version: i16,
    },
    /// A value version this code does not write.
    #[error("offsets log value version {version} is unknown")]
    UnknownValueVersion {
        /// The version found.
        version: i16,
    },
    /// A consumer group record is malformed.
    #[error("offsets log consumer group record: {0}")]
    Consumer(#[from] ConsumerRecordError),
    /// A record without a key (every offsets-log record has one).
    #[error("offsets log record without a key")]
    MissingKey,
    /// More records in one batch than [`RECORDS_PER_BATCH_MAX`].
    #[error("offsets log batch of {count} records is above the maximum {count_max}")]
    TooManyRecords {
        /// Records in the batch.
        count: usize,
        /// The bound.
        count_max: usize,
    },
    /// A string longer than the i16 length prefix can say.
    #[error("offsets log string of {bytes} bytes is too long")]
    StringTooLong {
        /// Its length.
        bytes: usize,
    },
}

/// Which offset a record is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OffsetKey {
    /// The group.
    pub group: String,
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
}

/// A committed offset as written to the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetValue {
    /// The next offset to consume.
    pub offset: i64,
    /// Leader epoch of the last consumed record, −1 if unknown.
    pub leader_epoch: i32,
    /// The client's metadata string.
    pub metadata: String,
    /// When it was committed (ms since the epoch).
    pub commit_timestamp_ms: i64,
}

/// One record of the offsets log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffsetLogEntry {
    /// A commit: the latest one per key wins.
    Commit(OffsetKey, OffsetValue),
    /// A tombstone: the key's offset is deleted.
    Delete(OffsetKey),
}

impl OffsetLogEntry {
    /// The key of the record.
    pub fn key(&self) -> &OffsetKey {
        match self {
            Self::Commit(key, _) | Self::Delete(key) => key,
        }
    }
}

/// The transactional producer a batch of offset commits belongs to (TxnOffsetCommit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TxnProducer {
    /// The producer id.
    pub producer_id: i64,
    /// Its epoch when it committed the offsets.
    pub producer_epoch: i16,
}

/// One item of an offsets log replay, in log order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replayed {
    /// A record of a non-transactional batch: takes effect at once.
    Entry(OffsetLogEntry),
    /// A record of a transactional batch: a commit stays pending until the producer's marker.
    Txn(TxnProducer, OffsetLogEntry),
    /// An end-transaction marker: the producer's pending commits take effect (COMMIT) or are
    /// dropped (ABORT).
    Marker(TxnProducer, MarkerType),
    /// A consumer group (KIP-848) record: the classic coordinator skips it, the consumer groups
    /// replay it ([`crate::consumer::ConsumerGroups::replay`]).
    Consumer(ConsumerRecord),
}

impl From<OffsetLogEntry> for Replayed {
    fn from(entry: OffsetLogEntry) -> Self {
        Self::Entry(entry)
    }
}

fn put_string(out: &mut Vec<u8>, text: &str) -> Result<(), OffsetLogError> {
    let len = i16::try_from(text.len())
        .map_err(|_| OffsetLogError::StringTooLong { bytes: text.len() })?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(text.as_bytes());
    Ok(())
}

/// The key bytes of `key`.
pub fn encode_key(key: &OffsetKey) -> Result<Vec<u8>, OffsetLogError> {
    let mut out = Vec::with_capacity(2 + 2 + key.group.len() + 2 + key.topic.len() + 4);
    out.extend_from_slice(&KEY_VERSION.to_be_bytes());
    put_string(&mut out, &key.group)?;
    put_string(&mut out, &key.topic)?;
    out.extend_from_slice(&key.partition.to_be_bytes());
    Ok(out)
}

/// The value bytes of `value`.
pub fn encode_value(value: &OffsetValue) -> Result<Vec<u8>, OffsetLogError> {
    let mut out = Vec::with_capacity(2 + 8 + 4 + 2 + value.metadata.len() + 8);
    out.extend_from_slice(&VALUE_VERSION.to_be_bytes());
    out.extend_from_slice(&value.offset.to_be_bytes());
    out.extend_from_slice(&value.leader_epoch.to_be_bytes());
    put_string(&mut out, &value.metadata)?;
    out.extend_from_slice(&value.commit_timestamp_ms.to_be_bytes());
    Ok(out)
}

/// Decodes key bytes; every field must be present and nothing may follow.
pub fn decode_key(bytes: &[u8]) -> Result<OffsetKey, OffsetLogError> {
    let mut reader = Reader::new(bytes);
    let version = reader.i16()?;
    if version != KEY_VERSION {
        return Err(OffsetLogError::UnknownKeyVersion { version });
    }
    let group = reader.string()?.to_owned();
    let topic = reader.string()?.to_owned();
    let partition = reader.i32()?;
    reader.expect_end()?;
    Ok(OffsetKey {
        group,
        topic,
        partition,
    })
}

/// Decodes value bytes; every field must be present and nothing may follow.
pub fn decode_value(bytes: &[u8]) -> Result<OffsetValue, OffsetLogError> {
    let mut reader = Reader::new(bytes);
    let version = reader.i16()?;
    if version != VALUE_VERSION {
        return Err(OffsetLogError::UnknownValueVersion { version });
    }
    let offset = reader.i64()?;
    let leader_epoch = reader.i32()?;
    let metadata = reader.string()?.to_owned();
    let commit_timestamp_ms = reader.i64()?;
    reader.expect_end()?;
    Ok(OffsetValue {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp_ms,
    })
}

/// One uncompressed v2 batch holding `entries` in order (base offset 0: the log assigns offsets on
/// append), each record stamped with `timestamp_ms`.
pub fn encode_batch(
    entries: &[OffsetLogEntry],
    timestamp_ms: i64,
) -> Result<Vec<u8>, OffsetLogError> {
    encode_batch_of(entries, None, timestamp_ms)
}

/// As [`encode_batch`], as a transactional batch of `producer` when given (Kafka's layout for a
/// TxnOffsetCommit: the producer's id and epoch, no sequence, the transactional bit).
fn encode_batch_of(
    entries: &[OffsetLogEntry],
    producer: Option<TxnProducer>,
    timestamp_ms: i64,
) -> Result<Vec<u8>, OffsetLogError> {
    if entries.len() > RECORDS_PER_BATCH_MAX {
        return Err(OffsetLogError::TooManyRecords {
            count: entries.len(),
            count_max: RECORDS_PER_BATCH_MAX,
        });
    }
    let mut builder = BatchBuilder::new(0, Compression::None);
    if let Some(producer) = producer {
        builder.producer_id = producer.producer_id;
        builder.producer_epoch = producer.producer_epoch;
        builder.base_sequence = MARKER_SEQUENCE;
        builder.transactional = true;
    }
    for (index, entry) in entries.iter().enumerate() {
        let key = encode_key(entry.key())?;
        let value = match entry {
            OffsetLogEntry::Commit(_, value) => Some(encode_value(value)?),
            OffsetLogEntry::Delete(_) => None,
        };
        // RECORDS_PER_BATCH_MAX < i32::MAX, checked above.
        let offset_delta = i32::try_from(index).map_err(|_| OffsetLogError::TooManyRecords {
            count: entries.len(),
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

/// One uncompressed v2 batch of consumer group records, in order (what a heartbeat, a deadline or
/// a group deletion wrote), each stamped with `timestamp_ms`.
pub fn encode_consumer_batch(
    records: &[ConsumerRecord],
    timestamp_ms: i64,
) -> Result<Vec<u8>, OffsetLogError> {
    if records.len() > RECORDS_PER_BATCH_MAX {
        return Err(OffsetLogError::TooManyRecords {
            count: records.len(),
            count_max: RECORDS_PER_BATCH_MAX,
        });
    }
    let mut builder = BatchBuilder::new(0, Compression::None);
    for (index, record) in records.iter().enumerate() {
        let (key, value) = record.encode()?;
        let offset_delta = i32::try_from(index).map_err(|_| OffsetLogError::TooManyRecords {
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

/// As many batches as `entries` need, in order, each within [`RECORDS_PER_BATCH_MAX`] records.
pub fn encode_batches(
    entries: &[OffsetLogEntry],
    timestamp_ms: i64,
) -> Result<Vec<Vec<u8>>, OffsetLogError> {
    entries
        .chunks(RECORDS_PER_BATCH_MAX)
        .map(|chunk| encode_batch(chunk, timestamp_ms))
        .collect()
}

/// As [`encode_batches`], each batch transactional for `producer` (a TxnOffsetCommit's records).
pub fn encode_txn_batches(
    entries: &[OffsetLogEntry],
    producer: TxnProducer,
    timestamp_ms: i64,
) -> Result<Vec<Vec<u8>>, OffsetLogError> {
    entries
        .chunks(RECORDS_PER_BATCH_MAX)
        .map(|chunk| encode_batch_of(chunk, Some(producer), timestamp_ms))
        .collect()
}

/// Decodes one complete batch (CRC checked), calling `visit` for each record in order, whether
/// its batch is transactional or not. Control batches are skipped. Returns the records visited.
/// For a log that may hold transactions, replay with [`decode_replayed_batch`] instead.
pub fn decode_batch(
    batch: &[u8],
    visit: &mut impl FnMut(OffsetLogEntry),
) -> Result<usize, OffsetLogError> {
    decode_replayed_batch(batch, &mut |item| match item {
        Replayed::Entry(entry) | Replayed::Txn(_, entry) => visit(entry),
        Replayed::Marker(..) | Replayed::Consumer(_) => {}
    })
    .map(|(records, _)| records)
}

/// Decodes one complete batch (CRC checked) into [`Replayed`] items, in order: the records of a
/// data batch (as [`Replayed::Txn`] when the batch is transactional), or the end-transaction
/// marker of a transactional control batch. A non-transactional control batch (none is written
/// to an offsets log) is skipped. Returns (records visited, markers visited).
pub fn decode_replayed_batch(
    batch: &[u8],
    visit: &mut impl FnMut(Replayed),
) -> Result<(usize, usize), OffsetLogError> {
    let header = validate(batch)?;
    let producer = TxnProducer {
        producer_id: header.producer_id,
        producer_epoch: header.producer_epoch,
    };
    if header.is_control() {
        if !header.is_transactional() {
            return Ok((0, 0));
        }
        let marker = EndTxnMarker::decode_with_header(batch, &header)?;
        visit(Replayed::Marker(producer, marker.marker_type));
        return Ok((0, 1));
    }
    let count = usize::try_from(header.records_count).unwrap_or(usize::MAX);
    if count > RECORDS_PER_BATCH_MAX {
        return Err(OffsetLogError::TooManyRecords {
            count,
            count_max: RECORDS_PER_BATCH_MAX,
        });
    }
    let transactional = header.is_transactional();
    let mut scratch = Vec::new();
    let records = batch_records(batch, &header, &mut scratch, DECOMPRESSED_BYTES_MAX)?;
    let mut visited = 0;
    for record in records {
        let record = record?;
        let key_bytes = record.key.ok_or(OffsetLogError::MissingKey)?;
        if key_bytes
            .first_chunk::<2>()
            .is_some_and(|version| is_consumer_record_type(i16::from_be_bytes(*version)))
        {
            visit(Replayed::Consumer(ConsumerRecord::decode(
                key_bytes,
                record.value,
            )?));
            visited += 1;
            continue;
        }
        let key = decode_key(key_bytes)?;
        let entry = match record.value {
            Some(value) => OffsetLogEntry::Commit(key, decode_value(value)?),
            None => OffsetLogEntry::Delete(key),
        };
        visit(if transactional {
            Replayed::Txn(producer, entry)
        } else {
            Replayed::Entry(entry)
        });
        visited += 1;
    }
    Ok((visited, 0))
}

/// Decodes every complete batch at the start of `bytes` (a slice of the offsets log), stopping
/// before a partial tail, visiting each record whether transactional or not (markers skipped).
/// Returns the bytes consumed, so the caller can continue from there.
pub fn decode_batches(
    bytes: &[u8],
    visit: &mut impl FnMut(OffsetLogEntry),
) -> Result<usize, OffsetLogError> {
    decode_replayed_batches(bytes, &mut |item| match item {
        Replayed::Entry(entry) | Replayed::Txn(_, entry) => visit(entry),
        Replayed::Marker(..) | Replayed::Consumer(_) => {}
    })
}

/// As [`decode_batches`], visiting [`Replayed`] items: what a coordinator loading a log that may
/// hold transactions replays.
pub fn decode_replayed_batches(
    bytes: &[u8],
    visit: &mut impl FnMut(Replayed),
) -> Result<usize, OffsetLogError> {
    let mut consumed = 0;
    for item in batch_positions(bytes) {
        let (position, header) = item?;
        let end = position + header.total_bytes();
        let batch = bytes
            .get(position..end)
            .ok_or(RecordError::InvalidBatchLength {
                batch_length: header.batch_length,
            })?;
        decode_replayed_batch(batch, visit)?;
        consumed = end;
    }
    Ok(consumed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn commit(group: &str, topic: &str, partition: i32, offset: i64) -> OffsetLogEntry {
        OffsetLogEntry::Commit(
            OffsetKey {
                group: group.into(),
                topic: topic.into(),
                partition,
            },
            OffsetValue {
                offset,
                leader_epoch: -1,
                metadata: "m".into(),
                commit_timestamp_ms: 1_700_000_000_000,
            },
        )
    }

    fn collect(bytes: &[u8]) -> Result<Vec<OffsetLogEntry>, OffsetLogError> {
        let mut out = Vec::new();
        decode_batches(bytes, &mut |entry| out.push(entry))?;
        Ok(out)
    }

    #[test]
    fn key_layout_is_exact() {
        let key = OffsetKey {
            group: "g".into(),
            topic: "t".into(),
            partition: 7,
        };
        let bytes = encode_key(&key).expect("encode");
        assert_eq!(bytes, [0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 7]);
        assert_eq!(decode_key(&bytes).expect("decode"), key);
    }

    #[test]
    fn batches_round_trip_with_tombstones() {
        let entries = vec![
            commit("g", "t", 0, 5),
            OffsetLogEntry::Delete(commit("g", "t", 1, 0).key().clone()),
            commit("other", "topic", 3, 99),
        ];
        let mut log = encode_batch(&entries, 1).expect("encode");
        log.extend(encode_batch(&entries[..1], 2).expect("encode"));
        let decoded = collect(&log).expect("decode");
        assert_eq!(decoded.len(), 4);
        assert_eq!(decoded[..3], entries[..]);
    }

    #[test]
    fn txn_batches_carry_the_producer_and_replay_with_their_markers() {
        let producer = TxnProducer {
            producer_id: 77,
            producer_epoch: 3,
        };
        let entries = [commit("g", "t", 0, 5), commit("g", "t", 1, 6)];
        let batches = encode_txn_batches(&entries, producer, 1).expect("encode");
        assert_eq!(batches.len(), 1);
        let header = validate(&batches[0]).expect("valid");
        assert!(header.is_transactional() && !header.is_control());
        assert_eq!((header.producer_id, header.producer_epoch), (77, 3));
        assert_eq!(header.base_sequence, MARKER_SEQUENCE);
        let mut log = batches.concat();
        let marker = EndTxnMarker {
            producer_id: 77,
            producer_epoch: 4,
            coordinator_epoch: 2,
            marker_type: MarkerType::Abort,
        };
        log.extend(marker.encode_batch(1).expect("marker"));
        log.extend(encode_batch(&entries[..1], 1).expect("plain"));
        let mut items = Vec::new();
        let consumed = decode_replayed_batches(&log, &mut |item| items.push(item)).expect("decode");
        assert_eq!(consumed, log.len());
        let marker_producer = TxnProducer {
            producer_epoch: 4,
            ..producer
        };
        assert_eq!(
            items,
            vec![
                Replayed::Txn(producer, entries[0].clone()),
                Replayed::Txn(producer, entries[1].clone()),
                Replayed::Marker(marker_producer, MarkerType::Abort),
                Replayed::Entry(entries[0].clone()),
            ]
        );
        // The plain decoder sees every record, transactional or not, and skips the marker.
        assert_eq!(collect(&log).expect("decode").len(), 3);
    }

    #[test]
    fn consumer_group_records_replay_beside_commits() {
        let record = ConsumerRecord::TargetAssignmentMetadata {
            group: "g".into(),
            value: Some(4),
        };
        let tombstone = ConsumerRecord::GroupMetadata {
            group: "g".into(),
            value: None,
        };
        let mut log = encode_batch(&[commit("g", "t", 0, 5)], 1).expect("encode");
        log.extend(encode_consumer_batch(&[record.clone(), tombstone.clone()], 1).expect("encode"));
        let mut items = Vec::new();
        decode_replayed_batches(&log, &mut |item| items.push(item)).expect("decode");
        assert_eq!(
            items,
            vec![
                Replayed::Entry(commit("g", "t", 0, 5)),
                Replayed::Consumer(record),
                Replayed::Consumer(tombstone),
            ]
        );
        // The plain decoder (the classic coordinator's) sees only the commit.
        assert_eq!(collect(&log).expect("decode").len(), 1);
    }

    #[test]
    fn partial_tail_is_left_for_later() {
        let batch = encode_batch(&[commit("g", "t", 0, 5)], 1).expect("encode");
        let mut log = batch.clone();
        log.extend_from_slice(&batch[..batch.len() - 3]);
        let mut count = 0;
        let consumed = decode_batches(&log, &mut |_| count += 1).expect("decode");
        assert_eq!(consumed, batch.len());
        assert_eq!(count, 1);
    }

    #[test]
    fn damaged_batch_is_an_error() {
        let mut batch = encode_batch(&[commit("g", "t", 0, 5)], 1).expect("encode");
        let last = batch.len() - 1;
        batch[last] ^= 0xff;
        assert!(matches!(
            collect(&batch),
            Err(OffsetLogError::Batch(RecordError::CrcMismatch { .. }))
        ));
    }

    #[test]
    fn tiny_input_huge_count_is_an_error() {
        // A string length far beyond the bytes present.
        assert!(decode_key(&[0, 1, 0x7f, 0xff, b'g']).is_err());
        assert!(decode_value(&[0, 3, 0, 0]).is_err());
        assert!(matches!(
            decode_key(&[0, 9, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(OffsetLogError::UnknownKeyVersion { version: 9 })
        ));
        // Trailing bytes after a complete key.
        let mut key = encode_key(commit("g", "t", 0, 0).key()).expect("encode");
        key.push(0);
        assert!(decode_key(&key).is_err());
    }

    proptest! {
        #[test]
        fn any_entry_round_trips(
            group in ".{0,40}", topic in ".{0,40}", partition in any::<i32>(),
            offset in any::<i64>(), epoch in any::<i32>(), metadata in ".{0,100}",
            timestamp in any::<i64>(), tombstone in any::<bool>(),
        ) {
            let key = OffsetKey { group, topic, partition };
            let entry = if tombstone {
                OffsetLogEntry::Delete(key)
            } else {
                OffsetLogEntry::Commit(key, OffsetValue {
                    offset, leader_epoch: epoch, metadata, commit_timestamp_ms: timestamp,
                })
            };
            let batch = encode_batch(std::slice::from_ref(&entry), 0).expect("encode");
            prop_assert_eq!(collect(&batch).expect("decode"), vec![entry]);
        }

        /// Records with a valid batch around them but arbitrary key and value bytes: decoding
        /// answers an error or an entry whose re-encoding gives the same bytes back.
        #[test]
        fn arbitrary_records_in_a_valid_batch(
            key in proptest::collection::vec(any::<u8>(), 0..40),
            value in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..60)),
        ) {
            let mut builder = BatchBuilder::new(0, Compression::None);
            builder.push(&NewRecord {
                offset_delta: 0,
                timestamp: 0,
                key: Some(&key),
                value: value.as_deref(),
                headers: &[],
            }).expect("push");
            let batch = builder.build().expect("build");
            // A key of a consumer group record type decodes as one (not an offset entry).
            let consumer = key.first_chunk::<2>().is_some_and(|version| {
                is_consumer_record_type(i16::from_be_bytes(*version))
            });
            if let (Ok(entries), false) = (collect(&batch), consumer) {
                prop_assert_eq!(entries.len(), 1);
                prop_assert_eq!(encode_key(entries[0].key()).expect("encode"), key);
                if let (OffsetLogEntry::Commit(_, decoded), Some(value)) = (&entries[0], &value) {
                    prop_assert_eq!(&encode_value(decoded).expect("encode"), value);
                }
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode_key(&bytes);
            let _ = decode_value(&bytes);
            let _ = collect(&bytes);
        }
    }
}
