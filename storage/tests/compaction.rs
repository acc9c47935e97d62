//! The log cleaner end to end over real files: a clean pass keeps every key's latest record at
//! its own offset (timestamps, headers and all), drops superseded and keyless records, merges
//! small segments, survives reopening (clean or not), gives tombstones a delete horizon and drops
//! them after it, cleans in passes when its map is small, keeps idempotent producers' last
//! batches, and aborts when the log is truncated under it while appends and reads go on.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

#[path = "support/keyed.rs"]
mod keyed;
#[path = "support/temp.rs"]
mod temp;

use std::collections::BTreeMap;
use std::sync::Arc;

use keyed::{keyed_batch, keyed_batch_from, latest_per_key, read_all, KeyValue, Read};
use skiff_protocol::records::Compression;
use skiff_storage::{
    CleanError, CleanHooks, Cleaner, CleanupPolicy, Log, LogConfig, LogDir, NoHooks,
};
use temp::temp_dir;

fn compacted() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        batch_bytes_max: 2048,
        index_interval_bytes: 128,
        cleanup_policy: CleanupPolicy::Compact,
        delete_retention_ms: 1_000,
        ..LogConfig::default()
    }
}

fn cleaner() -> Cleaner {
    Cleaner::new(64 * 1024, 0.9, 4096).unwrap()
}

/// Appends `versions` rounds over `keys` keys (one batch of 3 records per append, values
/// `k<key>v<version>`), with one keyless record per round.
fn fill(log: &Log, keys: usize, versions: usize, compression: Compression) {
    for version in 0..versions {
        let values: Vec<(Vec<u8>, Vec<u8>)> = (0..keys)
            .map(|key| {
                (
                    format!("k{key}").into_bytes(),
                    format!("k{key}v{version}").into_bytes(),
                )
            })
            .collect();
        for chunk in values.chunks(3) {
            let records: Vec<KeyValue<'_>> = chunk
                .iter()
                .map(|(key, value)| (Some(&key[..]), Some(&value[..])))
                .collect();
            let mut batch = keyed_batch(&records, 1_000 + version as i64 * 100, compression);
            log.append(&mut batch, 1_000).unwrap();
        }
        log.append(
            &mut keyed_batch(&[(None, Some(b"keyless"))], 1_000, compression),
            1_000,
        )
        .unwrap();
    }
}

fn clean_once(log: &Log, cleaner: &mut Cleaner, now_ms: i64) -> skiff_storage::CleanStats {
    let plan = log.cleaning_plan(i64::MAX, now_ms).unwrap().unwrap();
    log.clean(&plan, cleaner, &BTreeMap::new(), &mut NoHooks, now_ms)
        .unwrap()
}

/// What a cleaning may change: records the cleaned range held that a later record of their key
/// supersedes, and keyless ones. Everything else is as it was, at its offset.
fn assert_compacted(before: &[Read], after: &[Read], cleaned_end: i64) {
    let mapped: Vec<Read> = before
        .iter()
        .filter(|r| r.offset < cleaned_end)
        .cloned()
        .collect();
    let latest = latest_per_key(&mapped);
    for record in before {
        let kept = after.iter().find(|r| r.offset == record.offset);
        let must_stay = record.offset >= cleaned_end
            || record
                .key
                .as_ref()
                .is_some_and(|key| latest[key].offset == record.offset);
        if must_stay {
            assert_eq!(
                kept,
                Some(record),
                "offset {} must stay as it was",
                record.offset
            );
        } else {
            assert!(kept.is_none(), "offset {} must go", record.offset);
        }
    }
    assert!(after.windows(2).all(|pair| pair[0].offset < pair[1].offset));
}

#[test]
fn a_clean_pass_keeps_the_latest_record_per_key_at_its_offset_and_survives_reopening() {
    for compression in [Compression::None, Compression::Snappy] {
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), compacted()).unwrap();
        let log = data.create("t", 0, None).unwrap();
        fill(&log, 12, 8, compression);
        log.roll_if_needed(i64::MAX / 2).unwrap();
        let (before, _) = read_all(&log);
        let segments_before = log.segment_count().unwrap();
        let size_before = log.size_bytes().unwrap();
        let mut cleaner = cleaner();
        let stats = clean_once(&log, &mut cleaner, 10_000);
        assert!(stats.complete);
        assert_eq!(stats.end_offset, log.log_end_offset().unwrap());
        assert_eq!(stats.invalid_records, 8, "one keyless record per round");
        assert!(stats.records_written < stats.records_read);
        assert!(stats.map_utilization > 0.0);
        assert!(log.size_bytes().unwrap() < size_before / 4);
        assert!(log.segment_count().unwrap() <= segments_before);
        let (after, _) = read_all(&log);
        assert_compacted(&before, &after, stats.end_offset);
        assert_eq!(after.len(), 12);
        // A read from inside a gap returns the next kept batch.
        let first_kept = after[0].offset;
        assert!(first_kept > 0);
        let slice = log.read(0, 1 << 20, true).unwrap();
        let header =
            skiff_protocol::records::v2::BatchHeader::parse(&slice.bytes().unwrap()).unwrap();
        assert!(header.last_offset() >= first_kept);
        // A second plan finds nothing dirty.
        let plan = log.cleaning_plan(i64::MAX, 10_000).unwrap().unwrap();
        assert_eq!(plan.first_dirty_offset, stats.end_offset);
        assert!(!plan.is_due());
        // Groups are sized by the segments before cleaning (Kafka's `groupSegmentsBySize`), so
        // the small cleaned segments merge at the next cleaning.
        let cleaned_segments = log.segment_count().unwrap();
        fill(&log, 12, 1, compression);
        log.roll_if_needed(i64::MAX / 2).unwrap();
        let (before, _) = read_all(&log);
        let stats = clean_once(&log, &mut cleaner, 10_000);
        assert!(
            log.segment_count().unwrap() < cleaned_segments,
            "small cleaned segments merge"
        );
        let (after, _) = read_all(&log);
        assert_compacted(&before, &after, stats.end_offset);
        // A crash (no close) and a clean close both keep the compacted log and its offsets.
        let end = log.log_end_offset().unwrap();
        drop(log);
        drop(data);
        let data = LogDir::open(dir.path(), compacted()).unwrap();
        let log = data.log("t", 0).unwrap().unwrap();
        assert_eq!(read_all(&log).0, after);
        assert_eq!(log.log_end_offset().unwrap(), end);
        log.verify_indexes().unwrap();
        let plan = log.cleaning_plan(i64::MAX, 10_000).unwrap().unwrap();
        assert_eq!(
            plan.first_dirty_offset, stats.end_offset,
            "the checkpoint survives"
        );
        data.close().unwrap();
        let data = LogDir::open(dir.path(), compacted()).unwrap();
        let log = data.log("t", 0).unwrap().unwrap();
        assert_eq!(read_all(&log).0, after);
        // Appends go on after the cleaned segments.
        log.append(
            &mut keyed_batch(&[(Some(b"k0"), Some(b"new"))], 5_000, compression),
            5_000,
        )
        .unwrap();
        assert_eq!(log.log_end_offset().unwrap(), end + 1);
    }
}

#[test]
fn a_group_emptied_by_a_cleaning_keeps_the_log_start_through_retention() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), compacted()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    fill(&log, 12, 8, Compression::None);
    log.roll_if_needed(i64::MAX / 2).unwrap();
    let stats = clean_once(&log, &mut cleaner(), 10_000);
    assert!(stats.complete);
    let (after, _) = read_all(&log);
    assert!(after[0].offset > 0, "the first records all went");
    // Retention of a compact-only log still drops segments below the log start: an empty
    // cleaned segment ends where it begins, yet it holds the log start, which must not move
    // (a consumer at offset 0 would be told its offset is out of range).
    log.enforce_retention(i64::MAX / 2).unwrap();
    assert_eq!(log.log_start_offset().unwrap(), 0);
    assert_eq!(read_all(&log).0, after);
    let slice = log.read(0, 1 << 20, true).unwrap();
    assert!(
        !slice.bytes().unwrap().is_empty(),
        "a read at 0 finds the next record"
    );
}

#[test]
fn the_bytes_read_count_each_batch_once_though_chunks_cut_batches() {
    let dir = temp_dir();
    let config = LogConfig {
        segment_bytes: 64 * 1024,
        ..compacted()
    };
    let data = LogDir::open(dir.path(), config).unwrap();
    let log = data.create("t", 0, None).unwrap();
    let value = vec![b'v'; 700];
    for round in 0..40 {
        let key = format!("k{}", round % 5).into_bytes();
        let records: Vec<KeyValue<'_>> = vec![(Some(&key[..]), Some(&value[..]))];
        log.append(&mut keyed_batch(&records, 1_000, Compression::None), 1_000)
            .unwrap();
    }
    log.roll_if_needed(i64::MAX / 2).unwrap();
    let size_before = log.size_bytes().unwrap();
    // The 4 KiB I/O buffer ends its chunks inside batches of ~760 bytes, which are read again
    // with the next chunk: Kafka's "MB of log processed" counts each batch once, and so do these.
    let stats = clean_once(&log, &mut cleaner(), 10_000);
    assert!(stats.complete);
    assert_eq!(stats.map_bytes_read, size_before);
    assert_eq!(stats.bytes_read, size_before);
}

#[test]
fn the_upper_bound_and_the_active_segment_are_left_alone() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), compacted()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    fill(&log, 6, 10, Compression::None);
    let (before, _) = read_all(&log);
    let bound = before[before.len() / 2].offset;
    let plan = log.cleaning_plan(bound, 0).unwrap().unwrap();
    assert!(plan.first_uncleanable_offset <= bound);
    let stats = log
        .clean(&plan, &mut cleaner(), &BTreeMap::new(), &mut NoHooks, 0)
        .unwrap();
    let (after, _) = read_all(&log);
    // Nothing at or past the bound changed; below it, only superseded records went.
    for record in before
        .iter()
        .filter(|r| r.offset >= plan.first_uncleanable_offset)
    {
        assert!(after.contains(record));
    }
    assert_compacted(&before, &after, stats.end_offset);
}

#[test]
fn tombstones_stay_until_their_delete_horizon_then_go() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), compacted()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    fill(&log, 6, 4, Compression::Lz4);
    log.append(
        &mut keyed_batch(
            &[(Some(b"k1"), None), (Some(b"k2"), None)],
            9_000,
            Compression::Lz4,
        ),
        0,
    )
    .unwrap();
    fill(&log, 1, 1, Compression::Lz4);
    log.roll_if_needed(i64::MAX / 2).unwrap();
    let mut cleaner = cleaner();
    clean_once(&log, &mut cleaner, 20_000);
    let (after, headers) = read_all(&log);
    let tombstones: Vec<&Read> = after.iter().filter(|r| r.value.is_none()).collect();
    assert_eq!(tombstones.len(), 2, "kept until the horizon");
    assert_eq!(
        tombstones[0].timestamp, 9_000,
        "record timestamps survive the horizon"
    );
    let horizon_batch = headers
        .iter()
        .find(|h| h.delete_horizon_ms().is_some())
        .unwrap();
    assert_eq!(horizon_batch.delete_horizon_ms(), Some(21_000));
    // The time lookup uses record timestamps, not the horizon in the base timestamp.
    let found = log.offset_for_timestamp(9_000).unwrap().unwrap();
    assert_eq!(found.offset, tombstones[0].offset);
    // Make the tombstones' segment clean-range: append and roll, then clean after the horizon.
    fill(&log, 1, 1, Compression::Lz4);
    log.roll_if_needed(i64::MAX / 2).unwrap();
    let plan = log.cleaning_plan(i64::MAX, 20_500).unwrap().unwrap();
    log.clean(&plan, &mut cleaner, &BTreeMap::new(), &mut NoHooks, 20_500)
        .unwrap();
    assert_eq!(
        read_all(&log)
            .0
            .iter()
            .filter(|r| r.value.is_none())
            .count(),
        2,
        "before the horizon"
    );
    fill(&log, 1, 1, Compression::Lz4);
    log.roll_if_needed(i64::MAX / 2).unwrap();
    let plan = log.cleaning_plan(i64::MAX, 21_000).unwrap().unwrap();
    let stats = log
        .clean(&plan, &mut cleaner, &BTreeMap::new(), &mut NoHooks, 21_000)
        .unwrap();
    assert_eq!(stats.tombstones_dropped, 2);
    let (after, _) = read_all(&log);
    assert!(after.iter().all(|r| r.value.is_some()));
    let keys: Vec<&[u8]> = after.iter().filter_map(|r| r.key.as_deref()).collect();
    assert!(
        !keys.contains(&&b"k1"[..]) && !keys.contains(&&b"k2"[..]),
        "no older value resurrects"
    );
}

#[test]
fn a_small_map_cleans_in_passes() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), compacted()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    fill(&log, 120, 3, Compression::None);
    log.roll_if_needed(i64::MAX / 2).unwrap();
    let (before, _) = read_all(&log);
    let mut small = Cleaner::new(1024, 0.9, 4096).unwrap(); // 46 keys
    let mut passes = 0;
    let mut first_end = None;
    loop {
        let plan = log.cleaning_plan(i64::MAX, 0).unwrap().unwrap();
        if plan.cleanable_bytes == 0 || plan.first_dirty_offset >= plan.first_uncleanable_offset {
            break;
        }
        let stats = log
            .clean(&plan, &mut small, &BTreeMap::new(), &mut NoHooks, 0)
            .unwrap();
        first_end.get_or_insert(stats.end_offset);
        passes += 1;
        assert!(
            stats.end_offset > plan.first_dirty_offset,
            "each pass makes progress"
        );
        if stats.complete {
            break;
        }
    }
    assert!(passes > 2, "{passes} passes");
    assert!(first_end.unwrap() < log.log_end_offset().unwrap());
    let (after, _) = read_all(&log);
    assert_compacted(&before, &after, log.log_end_offset().unwrap());
}

#[test]
fn a_live_producers_last_batch_stays_even_when_empty() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), compacted()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    let mut batch = keyed_batch_from(
        &[(Some(b"a"), Some(b"1")), (Some(b"b"), Some(b"1"))],
        1_000,
        Compression::None,
        42,
        7,
    );
    let info = log.append(&mut batch, 0).unwrap();
    fill(&log, 3, 3, Compression::None);
    log.append(
        &mut keyed_batch(
            &[(Some(b"a"), Some(b"2")), (Some(b"b"), Some(b"2"))],
            2_000,
            Compression::None,
        ),
        0,
    )
    .unwrap();
    log.roll_if_needed(i64::MAX / 2).unwrap();
    let producers = BTreeMap::from([(42i64, info.last_offset)]);
    let plan = log.cleaning_plan(i64::MAX, 0).unwrap().unwrap();
    log.clean(&plan, &mut cleaner(), &producers, &mut NoHooks, 0)
        .unwrap();
    let (records, headers) = read_all(&log);
    let kept = headers
        .iter()
        .find(|h| h.producer_id == 42)
        .expect("the producer's batch stays");
    assert_eq!(
        (kept.records_count, kept.base_sequence, kept.last_offset()),
        (0, 7, info.last_offset)
    );
    assert!(records.iter().all(|r| r.offset > info.last_offset));
}

/// Hooks that run `action` on the `at`-th check.
struct Interrupt<F: FnMut()> {
    at: usize,
    calls: usize,
    action: F,
}

impl<F: FnMut()> CleanHooks for Interrupt<F> {
    fn on_io(&mut self, _bytes: u64) {}

    fn keep_going(&mut self) -> bool {
        self.calls += 1;
        if self.calls == self.at {
            (self.action)();
        }
        true
    }
}

#[test]
fn a_truncation_during_a_pass_aborts_it_while_appends_and_reads_go_on() {
    for at in 1..8 {
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), compacted()).unwrap();
        let log: Arc<Log> = data.create("t", 0, None).unwrap();
        fill(&log, 12, 8, Compression::None);
        log.roll_if_needed(i64::MAX / 2).unwrap();
        let held = log.read(0, 1 << 20, true).unwrap();
        let held_bytes = held.bytes().unwrap().to_vec();
        // An append during the pass is fine; a truncation aborts it.
        let appender = Arc::clone(&log);
        let mut append = Interrupt {
            at,
            calls: 0,
            action: move || {
                appender
                    .append(
                        &mut keyed_batch(
                            &[(Some(b"k0"), Some(b"during"))],
                            7_000,
                            Compression::None,
                        ),
                        7_000,
                    )
                    .unwrap();
            },
        };
        let plan = log.cleaning_plan(i64::MAX, 0).unwrap().unwrap();
        log.clean(&plan, &mut cleaner(), &BTreeMap::new(), &mut append, 0)
            .unwrap();
        assert_eq!(
            held.bytes().unwrap().to_vec(),
            held_bytes,
            "a held slice keeps its bytes"
        );
        let (after_clean, _) = read_all(&log);
        fill(&log, 12, 2, Compression::None);
        log.roll_if_needed(i64::MAX / 2).unwrap();
        let cut = log.log_end_offset().unwrap() - 5;
        let truncator = Arc::clone(&log);
        let mut truncate = Interrupt {
            at,
            calls: 0,
            action: move || {
                truncator.truncate_to(cut).unwrap();
            },
        };
        let plan = log.cleaning_plan(i64::MAX, 0).unwrap().unwrap();
        let result = log.clean(&plan, &mut cleaner(), &BTreeMap::new(), &mut truncate, 0);
        if truncate.calls >= at {
            assert!(
                matches!(result, Err(CleanError::Aborted(_))),
                "at {at}: {result:?}"
            );
        }
        let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("t-0"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .filter(|name| name.ends_with(".cleaned") || name == "cleaner-swap")
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        let (now, _) = read_all(&log);
        let latest_before = latest_per_key(&after_clean);
        let latest_now = latest_per_key(&now);
        for key in latest_before.keys() {
            assert!(latest_now.contains_key(key), "at {at}: key {key:?} lost");
        }
        log.verify_indexes().unwrap();
    }
}

#[test]
fn the_first_dirty_offset_is_lowered_by_truncation_and_dropped_with_the_log() {
    let dir = temp_dir();
    let data = LogDir::open(dir.path(), compacted()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    fill(&log, 12, 8, Compression::None);
    log.roll_if_needed(i64::MAX / 2).unwrap();
    let stats = clean_once(&log, &mut cleaner(), 10_000);
    let plan = log.cleaning_plan(i64::MAX, 10_000).unwrap().unwrap();
    assert_eq!(plan.first_dirty_offset, stats.end_offset);
    // A truncation below it lowers it, durably (before the cut).
    let cut = stats.end_offset - 10;
    let new_end = log.truncate_to(cut).unwrap();
    let plan = log.cleaning_plan(i64::MAX, 10_000).unwrap().unwrap();
    assert_eq!(plan.first_dirty_offset, new_end);
    drop(log);
    drop(data);
    let data = LogDir::open(dir.path(), compacted()).unwrap();
    let log = data.log("t", 0).unwrap().unwrap();
    let plan = log.cleaning_plan(i64::MAX, 10_000).unwrap().unwrap();
    assert_eq!(plan.first_dirty_offset, new_end, "after a crash too");
    // A deleted log's entry goes: a new log of that name starts dirty from its start.
    drop(log);
    data.delete("t", 0).unwrap();
    let log = data.create("t", 0, None).unwrap();
    fill(&log, 3, 1, Compression::None);
    let plan = log.cleaning_plan(i64::MAX, 10_000).unwrap().unwrap();
    assert_eq!(plan.first_dirty_offset, 0);
    assert!(!plan.checkpoint_reset);
    // A delete-policy log has no plan.
    log.set_config(LogConfig::default()).unwrap();
    assert!(log.cleaning_plan(i64::MAX, 10_000).unwrap().is_none());
}
