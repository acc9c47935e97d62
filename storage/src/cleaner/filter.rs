//! The clean pass's rule for one batch (Kafka's `Cleaner.shouldRetainRecord`,
//! `checkBatchRetention` and `MemoryRecords.filterTo`): which records stay, and the bytes the
//! batch becomes; with the transaction rules' verdict (`txn`), the records of aborted
//! transactions go and markers whose transaction left no data get a delete horizon, then go.
//! Pure over bytes, the offset map and the caller's time; must never change a kept record's
//! offset, key, value, headers or timestamp, nor drop a key's latest committed record (or its
//! tombstone, or a marker, before its delete horizon).

use skiff_protocol::limits::DECOMPRESSED_BYTES_MAX;
use skiff_protocol::records::record::{batch_records, BatchBuilder, NewRecord, Record};
use skiff_protocol::records::v2::{
    self, BatchHeader, ATTRIBUTE_CONTROL, ATTRIBUTE_LOG_APPEND_TIME, ATTRIBUTE_TRANSACTIONAL,
    BATCH_HEADER_BYTES,
};
use skiff_protocol::records::{Compression, RecordError, LOG_OVERHEAD_BYTES};

use super::offset_map::OffsetMap;

/// What the pass knows when it filters a batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FilterRules<'a> {
    pub(crate) map: &'a OffsetMap,
    /// Offset after the last mapped batch: records at or past it are kept as they are (the map
    /// knows nothing of their keys' later versions).
    pub(crate) mapped_end: i64,
    pub(crate) now_ms: i64,
    pub(crate) delete_retention_ms: i64,
}

/// What one batch becomes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Filtered {
    /// Every record stays and nothing in the header changes: copy the bytes.
    Original,
    /// Re-encoded with the kept records (or empty, kept for its producer).
    Rebuilt(Vec<u8>),
    /// Nothing stays.
    Dropped,
}

/// Counts of a filter, added up into the pass's statistics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FilterCounts {
    pub(crate) records_read: u64,
    pub(crate) records_kept: u64,
    /// Records without a key (Kafka counts them as invalid and drops them).
    pub(crate) keyless_dropped: u64,
    pub(crate) tombstones_dropped: u64,
    /// Records of aborted transactions dropped.
    pub(crate) aborted_dropped: u64,
    /// Markers dropped past their delete horizon.
    pub(crate) markers_dropped: u64,
}

/// Whether `record` of a batch with `header` stays, and whether it is a tombstone.
fn keeps(
    record: &Record<'_>,
    header: &BatchHeader,
    rules: &FilterRules<'_>,
    counts: &mut FilterCounts,
) -> bool {
    if record.offset >= rules.mapped_end {
        return true;
    }
    let Some(key) = record.key else {
        counts.keyless_dropped += 1;
        return false;
    };
    let latest = rules
        .map
        .get(key)
        .is_none_or(|mapped| record.offset >= mapped);
    if !latest {
        return false;
    }
    if record.value.is_some() {
        return true;
    }
    let before_horizon = header
        .delete_horizon_ms()
        .is_none_or(|horizon| rules.now_ms < horizon);
    if !before_horizon {
        counts.tombstones_dropped += 1;
    }
    before_horizon
}

/// Filters one whole v2 `batch`. `retain_empty`: the batch is the last of a live idempotent
/// producer, kept (empty if need be; a marker whole) so its sequence and epoch survive, as Kafka
/// does. `txn_discardable`: what the transaction rules (`txn`) said of the batch: a data batch of
/// an aborted transaction (its records all go), or a marker whose transaction has no batch left
/// (it gets a delete horizon, and goes once that has passed). Other markers stay as they are.
/// `scratch` holds a compressed batch's records.
pub(crate) fn filter_batch(
    batch: &[u8],
    header: &BatchHeader,
    rules: &FilterRules<'_>,
    (retain_empty, txn_discardable): (bool, bool),
    scratch: &mut Vec<u8>,
    counts: &mut FilterCounts,
) -> Result<Filtered, RecordError> {
    let records_count = u64::from(header.records_count.unsigned_abs());
    counts.records_read += records_count;
    if header.base_offset >= rules.mapped_end {
        counts.records_kept += records_count;
        return Ok(Filtered::Original);
    }
    if header.is_control() {
        return filter_marker(
            batch,
            header,
            rules,
            retain_empty,
            txn_discardable,
            scratch,
            counts,
        );
    }
    if txn_discardable {
        counts.aborted_dropped += records_count;
        if retain_empty {
            return Ok(Filtered::Rebuilt(empty_batch(header)));
        }
        return Ok(Filtered::Dropped);
    }
    let records = batch_records(batch, header, scratch, DECOMPRESSED_BYTES_MAX)?;
    let mut kept_count = 0u64;
    let mut kept_tombstone = false;
    for record in records.clone() {
        let record = record?;
        if keeps(&record, header, rules, counts) {
            kept_count += 1;
            kept_tombstone |= record.value.is_none();
        }
    }
    counts.records_kept += kept_count;
    let needs_horizon = kept_tombstone && header.delete_horizon_ms().is_none();
    if kept_count == records_count && !needs_horizon {
        return Ok(Filtered::Original);
    }
    if kept_count == 0 {
        if retain_empty {
            return Ok(Filtered::Rebuilt(empty_batch(header)));
        }
        return Ok(Filtered::Dropped);
    }
    let horizon = header
        .delete_horizon_ms()
        .or(needs_horizon.then(|| rules.now_ms.saturating_add(rules.delete_retention_ms)));
    let mut quiet = FilterCounts::default();
    rebuild(batch, header, horizon, scratch, |record| {
        keeps(record, header, rules, &mut quiet)
    })
}

/// A marker (control batch) below the mapped end: kept whole while its transaction still has
/// data in the log or while it is its producer's last batch; otherwise it first gets the delete
/// horizon `now + delete_retention_ms` (Kafka piggy-backs on the tombstone rule, KIP-534) and a
/// cleaning at or after the horizon drops it. Kafka empties such a marker when it is the
/// producer's last batch; Skiff keeps it whole, so recovery always reads which way it ended.
fn filter_marker(
    batch: &[u8],
    header: &BatchHeader,
    rules: &FilterRules<'_>,
    retain_empty: bool,
    discardable: bool,
    scratch: &mut Vec<u8>,
    counts: &mut FilterCounts,
) -> Result<Filtered, RecordError> {
    let records_count = u64::from(header.records_count.unsigned_abs());
    if !discardable || retain_empty {
        counts.records_kept += records_count;
        return Ok(Filtered::Original);
    }
    match header.delete_horizon_ms() {
        Some(horizon) if rules.now_ms >= horizon => {
            counts.markers_dropped += 1;
            Ok(Filtered::Dropped)
        }
        Some(_) => {
            counts.records_kept += records_count;
            Ok(Filtered::Original)
        }
        None => {
            counts.records_kept += records_count;
            let horizon = rules.now_ms.saturating_add(rules.delete_retention_ms);
            rebuild(batch, header, Some(horizon), scratch, |_| true)
        }
    }
}

/// `batch` re-encoded with the records `keep` answers true for, like its header (see
/// [`builder_like`]) with `horizon`.
fn rebuild(
    batch: &[u8],
    header: &BatchHeader,
    horizon: Option<i64>,
    scratch: &mut Vec<u8>,
    mut keep: impl FnMut(&Record<'_>) -> bool,
) -> Result<Filtered, RecordError> {
    let records = batch_records(batch, header, scratch, DECOMPRESSED_BYTES_MAX)?;
    let mut builder = builder_like(header, horizon)?;
    let mut pairs: Vec<(&[u8], Option<&[u8]>)> = Vec::new();
    for record in records {
        let record = record?;
        if !keep(&record) {
            continue;
        }
        pairs.clear();
        pairs.extend(record.headers.iter());
        let offset_delta = i32::try_from(record.offset - header.base_offset).map_err(|_| {
            RecordError::Corrupt {
                reason: "record offset delta out of range",
            }
        })?;
        builder.push(&NewRecord {
            offset_delta,
            timestamp: record.timestamp,
            key: record.key,
            value: record.value,
            headers: &pairs,
        })?;
    }
    Ok(Filtered::Rebuilt(builder.build()?))
}

/// A builder that writes a batch like `header`'s: same base offset, codec, producer fields,
/// leader epoch, timestamp type, transactional and control bits, the original last offset (Kafka's
/// `overrideLastOffset`, so the producer's last sequence survives), and the delete horizon.
fn builder_like(header: &BatchHeader, horizon: Option<i64>) -> Result<BatchBuilder, RecordError> {
    let mut builder = BatchBuilder::new(header.base_offset, header.compression()?);
    builder.producer_id = header.producer_id;
    builder.producer_epoch = header.producer_epoch;
    builder.base_sequence = header.base_sequence;
    builder.transactional = header.is_transactional();
    builder.control = header.is_control();
    builder.partition_leader_epoch = header.partition_leader_epoch;
    if header.is_log_append_time() {
        builder.log_append_time_ms = Some(header.max_timestamp);
    }
    if let Some(horizon) = horizon {
        builder.set_delete_horizon(horizon)?;
    }
    builder.override_last_offset_delta(header.last_offset_delta);
    Ok(builder)
}

/// The empty batch Kafka keeps for a producer whose last batch lost every record
/// (`DefaultRecordBatch.writeEmptyHeader`): the header alone, no compression, base timestamp
/// −1, the batch's max timestamp, its offsets, producer fields and flags, no records.
fn empty_batch(header: &BatchHeader) -> Vec<u8> {
    let flags = header.attributes
        & (ATTRIBUTE_LOG_APPEND_TIME | ATTRIBUTE_TRANSACTIONAL | ATTRIBUTE_CONTROL);
    let attributes = flags | Compression::None as i16;
    // INVARIANT: 61 − 12 fits an i32.
    #[allow(clippy::cast_possible_truncation, clippy::cast_possible_wrap)]
    let batch_length = (BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES) as i32;
    let mut out = vec![0u8; 0];
    out.extend_from_slice(&header.base_offset.to_be_bytes());
    out.extend_from_slice(&batch_length.to_be_bytes());
    out.extend_from_slice(&header.partition_leader_epoch.to_be_bytes());
    out.push(2);
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&attributes.to_be_bytes());
    out.extend_from_slice(&header.last_offset_delta.to_be_bytes());
    out.extend_from_slice(&(-1i64).to_be_bytes());
    out.extend_from_slice(&header.max_timestamp.to_be_bytes());
    out.extend_from_slice(&header.producer_id.to_be_bytes());
    out.extend_from_slice(&header.producer_epoch.to_be_bytes());
    out.extend_from_slice(&header.base_sequence.to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes());
    let crc = v2::compute_crc(&out);
    if let Some(field) = out.get_mut(v2::CRC_OFFSET..v2::CRC_OFFSET + 4) {
        field.copy_from_slice(&crc.to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Rec<'a>(i32, i64, Option<&'a [u8]>, Option<&'a [u8]>);

    fn build(base: i64, compression: Compression, records: &[Rec<'_>]) -> Vec<u8> {
        let mut builder = BatchBuilder::new(base, compression);
        builder.producer_id = 7;
        builder.producer_epoch = 1;
        builder.base_sequence = 40;
        let headers: &[(&[u8], Option<&[u8]>)] = &[(b"h", Some(b"x"))];
        for Rec(delta, timestamp, key, value) in records {
            builder
                .push(&NewRecord {
                    offset_delta: *delta,
                    timestamp: *timestamp,
                    key: *key,
                    value: *value,
                    headers,
                })
                .unwrap();
        }
        builder.build().unwrap()
    }

    /// Offset, timestamp, key, value, header count.
    type ReadRecord = (i64, i64, Option<Vec<u8>>, Option<Vec<u8>>, usize);

    fn read(batch: &[u8]) -> (BatchHeader, Vec<ReadRecord>) {
        let header = v2::validate(batch).unwrap();
        let mut scratch = Vec::new();
        let records = batch_records(batch, &header, &mut scratch, DECOMPRESSED_BYTES_MAX)
            .unwrap()
            .map(|record| {
                let record = record.unwrap();
                (
                    record.offset,
                    record.timestamp,
                    record.key.map(<[u8]>::to_vec),
                    record.value.map(<[u8]>::to_vec),
                    record.headers.len(),
                )
            })
            .collect();
        (header, records)
    }

    fn map_of(entries: &[(&[u8], i64)]) -> OffsetMap {
        let mut map = OffsetMap::with_memory(4096, 0.9).unwrap();
        map.clear(0, u64::MAX);
        for (key, offset) in entries {
            assert!(map.put(key, *offset));
        }
        map
    }

    fn filter(
        batch: &[u8],
        rules: &FilterRules<'_>,
        retain_empty: bool,
    ) -> (Filtered, FilterCounts) {
        let header = BatchHeader::parse(batch).unwrap();
        let mut counts = FilterCounts::default();
        let out = filter_batch(
            batch,
            &header,
            rules,
            (retain_empty, false),
            &mut Vec::new(),
            &mut counts,
        )
        .unwrap();
        (out, counts)
    }

    #[test]
    fn superseded_and_keyless_records_go_and_the_rest_keep_offsets_timestamps_and_headers() {
        for compression in [Compression::None, Compression::Lz4] {
            let batch = build(
                100,
                compression,
                &[
                    Rec(0, 1_000, Some(b"a"), Some(b"a1")),
                    Rec(1, 1_001, Some(b"b"), Some(b"b1")),
                    Rec(2, 1_002, None, Some(b"x")),
                    Rec(3, 990, Some(b"c"), Some(b"c1")),
                ],
            );
            let map = map_of(&[(b"a", 500), (b"b", 101), (b"c", 103)]);
            let rules = FilterRules {
                map: &map,
                mapped_end: 600,
                now_ms: 0,
                delete_retention_ms: 10,
            };
            let (out, counts) = filter(&batch, &rules, false);
            let Filtered::Rebuilt(bytes) = out else {
                panic!("{out:?}")
            };
            let (header, records) = read(&bytes);
            assert_eq!(header.compression().unwrap(), compression);
            assert_eq!(
                (
                    header.producer_id,
                    header.producer_epoch,
                    header.base_sequence
                ),
                (7, 1, 40)
            );
            assert_eq!(header.last_offset(), 103, "the original last offset stays");
            assert_eq!(header.delete_horizon_ms(), None);
            assert_eq!(header.max_timestamp, 1_001);
            assert_eq!(
                records,
                vec![
                    (101, 1_001, Some(b"b".to_vec()), Some(b"b1".to_vec()), 1),
                    (103, 990, Some(b"c".to_vec()), Some(b"c1".to_vec()), 1),
                ]
            );
            assert_eq!(
                (
                    counts.records_read,
                    counts.records_kept,
                    counts.keyless_dropped
                ),
                (4, 2, 1)
            );
        }
    }

    #[test]
    fn tombstones_get_a_horizon_once_and_go_after_it() {
        let batch = build(
            0,
            Compression::None,
            &[
                Rec(0, 5_000, Some(b"k"), None),
                Rec(1, 5_001, Some(b"v"), Some(b"1")),
            ],
        );
        let map = map_of(&[(b"k", 0), (b"v", 1)]);
        let first = FilterRules {
            map: &map,
            mapped_end: 2,
            now_ms: 10_000,
            delete_retention_ms: 1_000,
        };
        let Filtered::Rebuilt(marked) = filter(&batch, &first, false).0 else {
            panic!()
        };
        let (header, records) = read(&marked);
        assert_eq!(header.delete_horizon_ms(), Some(11_000));
        assert_eq!(
            records.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>(),
            vec![(0, 5_000), (1, 5_001)]
        );
        // Before the horizon it stays unchanged; at the horizon the tombstone goes.
        let before = FilterRules {
            now_ms: 10_999,
            ..first
        };
        assert_eq!(filter(&marked, &before, false).0, Filtered::Original);
        let after = FilterRules {
            now_ms: 11_000,
            ..first
        };
        let (out, counts) = filter(&marked, &after, false);
        let Filtered::Rebuilt(bytes) = out else {
            panic!()
        };
        let (header, records) = read(&bytes);
        assert_eq!(records.len(), 1);
        assert_eq!((records[0].0, records[0].1), (1, 5_001));
        assert_eq!(
            header.delete_horizon_ms(),
            Some(11_000),
            "an existing horizon stays"
        );
        assert_eq!(counts.tombstones_dropped, 1);
    }

    fn marker(base: i64, marker_type: skiff_protocol::records::txn::MarkerType) -> Vec<u8> {
        let mut batch = skiff_protocol::records::txn::EndTxnMarker {
            producer_id: 7,
            producer_epoch: 1,
            coordinator_epoch: 3,
            marker_type,
        }
        .encode_batch(2_000)
        .unwrap();
        v2::set_base_offset(&mut batch, base).unwrap();
        batch
    }

    fn filter_txn(
        batch: &[u8],
        rules: &FilterRules<'_>,
        retain_empty: bool,
        discardable: bool,
    ) -> Filtered {
        let header = BatchHeader::parse(batch).unwrap();
        let mut counts = FilterCounts::default();
        filter_batch(
            batch,
            &header,
            rules,
            (retain_empty, discardable),
            &mut Vec::new(),
            &mut counts,
        )
        .unwrap()
    }

    #[test]
    fn aborted_batches_go_whole_and_a_producers_last_stays_empty() {
        let batch = build(10, Compression::Gzip, &[Rec(0, 1, Some(b"k"), Some(b"1"))]);
        let map = map_of(&[(b"k", 10)]);
        let rules = FilterRules {
            map: &map,
            mapped_end: 11,
            now_ms: 0,
            delete_retention_ms: 0,
        };
        assert_eq!(filter_txn(&batch, &rules, false, false), Filtered::Original);
        assert_eq!(filter_txn(&batch, &rules, false, true), Filtered::Dropped);
        let Filtered::Rebuilt(empty) = filter_txn(&batch, &rules, true, true) else {
            panic!()
        };
        assert_eq!(v2::validate(&empty).unwrap().records_count, 0);
        let past = FilterRules {
            mapped_end: 10,
            ..rules
        };
        assert_eq!(filter_txn(&batch, &past, false, true), Filtered::Original);
    }

    #[test]
    fn a_marker_left_alone_gets_a_horizon_then_goes_after_it() {
        use skiff_protocol::records::txn::{EndTxnMarker, MarkerType};
        let batch = marker(20, MarkerType::Abort);
        let map = map_of(&[]);
        let rules = FilterRules {
            map: &map,
            mapped_end: 21,
            now_ms: 5_000,
            delete_retention_ms: 1_000,
        };
        assert_eq!(filter_txn(&batch, &rules, false, false), Filtered::Original);
        assert_eq!(filter_txn(&batch, &rules, true, true), Filtered::Original);
        let Filtered::Rebuilt(marked) = filter_txn(&batch, &rules, false, true) else {
            panic!()
        };
        let header = v2::validate(&marked).unwrap();
        assert!(header.is_control() && header.is_transactional());
        assert_eq!(header.delete_horizon_ms(), Some(6_000));
        assert_eq!(header.base_offset, 20);
        let decoded = EndTxnMarker::decode_batch(&marked).unwrap();
        assert_eq!(
            (
                decoded.marker_type,
                decoded.coordinator_epoch,
                decoded.producer_epoch
            ),
            (MarkerType::Abort, 3, 1)
        );
        let (_, records) = read(&marked);
        assert_eq!(records[0].1, 2_000, "the marker's timestamp is unchanged");
        let before = FilterRules {
            now_ms: 5_999,
            ..rules
        };
        assert_eq!(
            filter_txn(&marked, &before, false, true),
            Filtered::Original
        );
        let after = FilterRules {
            now_ms: 6_000,
            ..rules
        };
        assert_eq!(filter_txn(&marked, &after, false, true), Filtered::Dropped);
        assert_eq!(filter_txn(&marked, &after, true, true), Filtered::Original);
    }

    #[test]
    fn a_producers_last_batch_stays_empty_and_records_past_the_map_stay() {
        let batch = build(
            10,
            Compression::Gzip,
            &[
                Rec(0, 1, Some(b"k"), Some(b"1")),
                Rec(1, 2, Some(b"k"), Some(b"2")),
            ],
        );
        let map = map_of(&[(b"k", 50)]);
        let rules = FilterRules {
            map: &map,
            mapped_end: 51,
            now_ms: 0,
            delete_retention_ms: 0,
        };
        assert_eq!(filter(&batch, &rules, false).0, Filtered::Dropped);
        let Filtered::Rebuilt(empty) = filter(&batch, &rules, true).0 else {
            panic!()
        };
        let header = v2::validate(&empty).unwrap();
        assert_eq!(
            (
                header.base_offset,
                header.last_offset(),
                header.records_count
            ),
            (10, 11, 0)
        );
        assert_eq!(
            (
                header.producer_id,
                header.base_sequence,
                header.max_timestamp
            ),
            (7, 40, 2)
        );
        assert_eq!(header.compression().unwrap(), Compression::None);
        let past = FilterRules {
            mapped_end: 11,
            ..rules
        };
        let (out, _) = filter(&batch, &past, false);
        let Filtered::Rebuilt(bytes) = out else {
            panic!()
        };
        assert_eq!(
            read(&bytes).1.len(),
            1,
            "offset 11 lies past the mapped section"
        );
    }
}
