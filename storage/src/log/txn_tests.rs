//! Tests of the aborted-transaction index and the producer snapshots through a log's life:
//! appends and ranged reads, the recovery point held below an unindexed ABORT marker, recovery
//! after a crash (torn, garbled and missing entries), truncation, retention and clean closes.

use skiff_protocol::records::record::{BatchBuilder, NewRecord};
use skiff_protocol::records::txn::{AbortedTxn, EndTxnMarker, MarkerType};
use skiff_protocol::records::Compression;

use std::sync::Arc;

use super::*;
use crate::config::LogConfig;
use crate::error::Error;
use crate::log_dir::LogDir;
use crate::testing_temp::temp_dir;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        batch_bytes_max: 1024,
        index_interval_bytes: 128,
        ..LogConfig::default()
    }
}

/// A transactional batch of one record from `producer_id`.
fn txn_batch(producer_id: i64) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, Compression::None);
    builder.producer_id = producer_id;
    builder.producer_epoch = 0;
    builder.base_sequence = 0;
    builder.transactional = true;
    builder
        .push(&NewRecord {
            offset_delta: 0,
            timestamp: 1_000,
            key: None,
            value: Some(&[7; 40]),
            headers: &[],
        })
        .unwrap();
    builder.build().unwrap()
}

fn marker(producer_id: i64, marker_type: MarkerType) -> Vec<u8> {
    EndTxnMarker {
        producer_id,
        producer_epoch: 0,
        coordinator_epoch: 1,
        marker_type,
    }
    .encode_batch(1_000)
    .unwrap()
}

/// Appends a transaction of `records` batches from `producer_id` and its ABORT marker; returns
/// the entry (not yet written).
fn aborted(log: &Log, producer_id: i64, records: usize) -> AbortedTxn {
    let first = log
        .append(&mut txn_batch(producer_id), 0)
        .unwrap()
        .base_offset;
    for _ in 1..records {
        log.append(&mut txn_batch(producer_id), 0).unwrap();
    }
    let last = log
        .append(&mut marker(producer_id, MarkerType::Abort), 0)
        .unwrap()
        .base_offset;
    AbortedTxn {
        producer_id,
        first_offset: first,
        last_offset: last,
        last_stable_offset: first,
    }
}

fn txn_files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".txnindex") || name.ends_with(".snapshot"))
        .collect();
    names.sort();
    names
}

#[test]
fn entries_are_read_by_range_across_segments_and_checked_on_append() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), config()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    let mut entries = Vec::new();
    for producer in 0..12 {
        let entry = aborted(&log, producer, 3);
        log.append_aborted_txn(entry).unwrap();
        entries.push(entry);
        // A committed transaction in between leaves no entry.
        log.append(&mut txn_batch(100), 0).unwrap();
        log.append(&mut marker(100, MarkerType::Commit), 0).unwrap();
    }
    assert!(log.segment_count().unwrap() > 3, "entries span segments");
    let end = log.log_end_offset().unwrap();
    assert_eq!(log.aborted_transactions(0, end).unwrap(), entries);
    // Kafka's filter: marker at or after the start, first offset below the bound.
    let (from, upper) = (entries[3].last_offset, entries[6].first_offset + 1);
    let expected: Vec<AbortedTxn> = entries
        .iter()
        .copied()
        .filter(|entry| entry.last_offset >= from && entry.first_offset < upper)
        .collect();
    assert_eq!(expected.len(), 4);
    assert_eq!(log.aborted_transactions(from, upper).unwrap(), expected);
    assert!(log.aborted_transactions(5, 5).unwrap().is_empty());
    // Refused, writing nothing: out of order, outside the log, first past the marker.
    let last = *entries.last().unwrap();
    for bad in [
        last,
        AbortedTxn {
            last_offset: end,
            ..last
        },
        AbortedTxn {
            first_offset: last.last_offset + 1,
            ..last
        },
    ] {
        assert!(
            matches!(log.append_aborted_txn(bad), Err(Error::InvalidTxnEntry(_))),
            "{bad:?}"
        );
    }
    assert_eq!(log.txn_index_bytes().unwrap(), 12 * 34);
    assert!(!log.is_poisoned());
    // A clean close and open keep them.
    data.close().unwrap();
    let data = LogDir::open(dir.path(), config()).unwrap();
    let log = data.log("t", 0).unwrap().unwrap();
    assert_eq!(log.aborted_transactions(0, end).unwrap(), entries);
}

#[test]
fn the_read_stops_at_an_entry_whose_last_stable_offset_reaches_the_bound() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), config()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    let first = aborted(&log, 1, 1);
    log.append_aborted_txn(first).unwrap();
    let second = aborted(&log, 2, 1);
    log.append_aborted_txn(AbortedTxn {
        last_stable_offset: 100,
        ..second
    })
    .unwrap();
    let third = aborted(&log, 3, 1);
    // Inconsistent on purpose: were the read to go on, it would find this one.
    log.append_aborted_txn(AbortedTxn {
        first_offset: 0,
        ..third
    })
    .unwrap();
    let found = log.aborted_transactions(0, 50).unwrap();
    assert_eq!(found.len(), 2, "{found:?}");
}

#[test]
fn the_recovery_point_waits_for_the_entry_and_a_crash_between_cuts_the_marker() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), config()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    let entry = aborted(&log, 1, 2);
    log.flush().unwrap();
    assert_eq!(
        log.flushed_offset().unwrap(),
        entry.last_offset,
        "held below the marker"
    );
    let end = log.log_end_offset().unwrap();
    // A clean close with the marker still unindexed is not trusted at the next open.
    data.close().unwrap();
    assert!(!dir.path().join(crate::fs::CLEAN_SHUTDOWN_FILE).exists());
    let data = LogDir::open(dir.path(), config()).unwrap();
    let log = data.log("t", 0).unwrap().unwrap();
    assert_eq!(
        log.log_end_offset().unwrap(),
        entry.last_offset,
        "the marker is cut"
    );
    assert!(end > entry.last_offset);
    // Once written, the entry lets the recovery point pass.
    let entry = AbortedTxn {
        last_offset: log
            .append(&mut marker(1, MarkerType::Abort), 0)
            .unwrap()
            .base_offset,
        ..entry
    };
    log.append_aborted_txn(entry).unwrap();
    log.flush().unwrap();
    assert_eq!(log.flushed_offset().unwrap(), log.log_end_offset().unwrap());
    drop(log);
    drop(data); // a crash: no clean-shutdown marker
    let data = LogDir::open(dir.path(), config()).unwrap();
    let log = data.log("t", 0).unwrap().unwrap();
    assert_eq!(log.aborted_transactions(0, i64::MAX).unwrap(), vec![entry]);
}

#[test]
fn unsynced_entries_are_checked_against_the_markers_at_recovery() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), config()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    let kept = aborted(&log, 1, 1);
    log.append_aborted_txn(kept).unwrap();
    log.flush().unwrap();
    let unsynced = aborted(&log, 2, 1);
    log.append_aborted_txn(unsynced).unwrap();
    let path = crate::fs::segment_file(&log.dir, 0, crate::fs::TXN_INDEX_SUFFIX);
    drop(log);
    drop(data);
    // The crash garbled the unsynced entry (another producer) and tore a third.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[34 + 9] ^= 1;
    bytes.extend_from_slice(&[0; 20]);
    std::fs::write(&path, &bytes).unwrap();
    let data = LogDir::open(dir.path(), config()).unwrap();
    let log = data.log("t", 0).unwrap().unwrap();
    assert_eq!(log.aborted_transactions(0, i64::MAX).unwrap(), vec![kept]);
    assert_eq!(
        log.log_end_offset().unwrap(),
        unsynced.last_offset,
        "its marker is cut"
    );
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 34);
}

#[test]
fn a_damaged_entry_of_synced_data_is_an_error_naming_the_file() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), config()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    for producer in 1..3 {
        let entry = aborted(&log, producer, 1);
        log.append_aborted_txn(entry).unwrap();
    }
    let path = crate::fs::segment_file(&log.dir, 0, crate::fs::TXN_INDEX_SUFFIX);
    drop(log);
    data.close().unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[34] = 9; // the second entry's version
    std::fs::write(&path, &bytes).unwrap();
    let error = LogDir::open(dir.path(), config()).unwrap_err();
    assert!(
        matches!(&error, Error::Corrupt { path: p, position: 34, .. } if *p == path),
        "{error}"
    );
}

#[test]
fn truncation_retention_and_deletion_take_entries_and_snapshots_with_their_data() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), config()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    let mut entries = Vec::new();
    for producer in 0..10 {
        let entry = aborted(&log, producer, 3);
        log.append_aborted_txn(entry).unwrap();
        entries.push(entry);
        let end = log.log_end_offset().unwrap();
        log.write_producer_snapshot(end, format!("state {end}").as_bytes())
            .unwrap();
    }
    let snapshots = log.producer_snapshot_offsets().unwrap();
    assert_eq!(snapshots.len(), 10);
    // Truncation into the sixth transaction drops its entry and the later ones, and the
    // snapshots past the new end.
    let cut = entries[5].first_offset + 1;
    let new_end = log.truncate_to(cut).unwrap();
    assert_eq!(log.aborted_transactions(0, i64::MAX).unwrap(), entries[..5]);
    assert!(log
        .producer_snapshot_offsets()
        .unwrap()
        .iter()
        .all(|o| *o <= new_end));
    let latest = log.latest_producer_snapshot().unwrap().unwrap();
    assert_eq!(
        latest.bytes,
        format!("state {}", latest.offset).into_bytes()
    );
    // DeleteRecords past the third segment deletes segments with their .txnindex files.
    let before = txn_files(&log.dir).len();
    let start = entries[3].last_offset + 1;
    log.delete_records_before(start).unwrap();
    assert!(txn_files(&log.dir).len() < before);
    let first_base = log
        .read_state()
        .unwrap()
        .segments
        .keys()
        .next()
        .copied()
        .unwrap();
    for name in txn_files(&log.dir) {
        let offset: i64 = name[..20].parse().unwrap();
        let newest = log.producer_snapshot_offsets().unwrap().last().copied();
        assert!(
            offset >= first_base || Some(offset) == newest,
            "{name} below {first_base}"
        );
    }
    assert!(log
        .aborted_transactions(start, i64::MAX)
        .unwrap()
        .iter()
        .all(|e| e.last_offset >= start));
    // Starting afresh removes them all.
    log.truncate_fully_and_start_at(1_000).unwrap();
    assert!(txn_files(&log.dir).is_empty(), "{:?}", txn_files(&log.dir));
    assert!(log.latest_producer_snapshot().unwrap().is_none());
}

#[test]
fn snapshots_survive_a_crash_a_damaged_one_falls_back_and_bad_ones_are_refused() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), config()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    for value in 0..3 {
        log.append(&mut txn_batch(value), 0).unwrap();
        let end = log.log_end_offset().unwrap();
        log.write_producer_snapshot(end, &[value as u8; 10])
            .unwrap();
    }
    assert!(matches!(
        log.write_producer_snapshot(log.log_end_offset().unwrap() + 1, b"x"),
        Err(Error::InvalidSnapshot(_))
    ));
    log.flush().unwrap();
    let dir_path = log.dir.clone();
    drop(log);
    drop(data);
    let newest = crate::producer_snapshot::path(&dir_path, 3);
    let mut bytes = std::fs::read(&newest).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    std::fs::write(&newest, bytes).unwrap();
    let data = LogDir::open(dir.path(), config()).unwrap();
    let log = data.log("t", 0).unwrap().unwrap();
    let latest = log.latest_producer_snapshot().unwrap().unwrap();
    assert_eq!((latest.offset, latest.bytes), (2, vec![1u8; 10]));
    assert!(!newest.exists(), "the damaged snapshot is removed");
    // A snapshot past what a crash left is removed at recovery.
    std::fs::write(
        crate::producer_snapshot::path(&dir_path, 50),
        crate::producer_snapshot::encode(50, b"future"),
    )
    .unwrap();
    drop(log);
    drop(data);
    let data = LogDir::open(dir.path(), config()).unwrap();
    let log = data.log("t", 0).unwrap().unwrap();
    assert_eq!(log.producer_snapshot_offsets().unwrap(), vec![1, 2]);
}

#[test]
fn the_downgrade_guard_runs_before_the_first_transactional_batch_and_a_failure_writes_nothing() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), config()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let seen_end = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&seen_end);
    let watched = Arc::clone(&log);
    data.set_transactional_guard(
        Arc::new(move || {
            // The log has not taken the batch yet when the hook runs (the writer lock is held,
            // so only the files can say: the active segment is still empty).
            seen.lock().unwrap().push(
                std::fs::metadata(watched.dir.join(format!("{:020}.log", 0)))
                    .unwrap()
                    .len(),
            );
            if counted.fetch_add(1, Ordering::SeqCst) == 0 {
                return Err(Error::Closed);
            }
            Ok(())
        }),
        false,
    )
    .unwrap();
    // A plain batch does not run it.
    log.append(&mut crate::testing::batch(0, 1, 10), 0).unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    let end = log.log_end_offset().unwrap();
    assert!(log.append(&mut txn_batch(1), 0).is_err());
    assert_eq!(log.log_end_offset().unwrap(), end, "nothing written");
    log.append(&mut txn_batch(1), 0).unwrap();
    log.append(&mut marker(1, MarkerType::Commit), 0).unwrap();
    let other = data.create("t", 1, None).unwrap();
    other.append(&mut txn_batch(2), 0).unwrap();
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "once it succeeded, never again"
    );
    let sizes = seen_end.lock().unwrap().clone();
    assert_eq!(
        sizes[0], sizes[1],
        "the transactional batch was not on disk yet"
    );
}
