//! The log cleaner over transactional logs, end to end over real files (issue 38, part 4): seeded
//! logs of committed, aborted, open and non-transactional keyed batches, cleaned three times
//! across the markers' delete horizon with the last stable offset as the bound. After every
//! pass: no aborted record below the cleaned end survives, a marker stays while its transaction
//! has data in the log, every aborted-transaction entry keeps its marker, and a read_committed
//! reader sees the same latest value per key as the writer wrote (and as before cleaning). Over
//! the passes, markers left without data get a delete horizon and go after it, except each live
//! producer's last batch.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]

#[path = "support/temp.rs"]
mod temp;
#[path = "support/txn_log.rs"]
mod txn_log;

use skiff_storage::{Cleaner, CleanupPolicy, Log, LogConfig, LogDir, NoHooks};
use temp::temp_dir;
use txn_log::{check_cleaned, marker_offsets, read_committed_latest, Writer};

/// Markers get this long past the cleaning that first finds them without data.
const DELETE_RETENTION_MS: i64 = 1_000;

fn compacted() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        batch_bytes_max: 1024,
        index_interval_bytes: 128,
        cleanup_policy: CleanupPolicy::Compact,
        delete_retention_ms: DELETE_RETENTION_MS,
        ..LogConfig::default()
    }
}

/// Cleans `log` at `now_ms` up to its last stable offset and checks the result.
fn clean_and_check(log: &Log, writer: &Writer, now_ms: i64) -> skiff_storage::CleanStats {
    log.roll_if_needed(i64::MAX / 2).unwrap();
    let bound = writer
        .truth
        .last_stable_offset(log.log_end_offset().unwrap());
    let before = read_committed_latest(log, bound);
    let plan = log.cleaning_plan(bound, now_ms).unwrap().unwrap();
    assert!(plan.first_uncleanable_offset <= bound);
    let mut cleaner = Cleaner::new(64 * 1024, 0.9, 4096).unwrap();
    let stats = log
        .clean(
            &plan,
            &mut cleaner,
            &writer.truth.last_batches,
            &mut NoHooks,
            now_ms,
        )
        .unwrap();
    check_cleaned(log, &writer.truth, stats.end_offset, bound);
    assert_eq!(read_committed_latest(log, bound), before);
    stats
}

#[test]
fn cleaning_twice_across_the_horizon_keeps_what_read_committed_readers_see() {
    let mut aborted_dropped = 0;
    let mut markers_dropped = 0;
    for seed in 0..12u64 {
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), compacted()).unwrap();
        let log = data.create("t", 0, None).unwrap();
        let mut writer = Writer::new(seed);
        writer.write(&log, 120);
        let first = clean_and_check(&log, &writer, 10_000);
        aborted_dropped += first.aborted_records_dropped;
        // More dirty data, then a pass before the horizon of the markers the first pass left
        // without data: they stay, now with a horizon.
        writer.write(&log, 40);
        let markers = marker_offsets(&log);
        clean_and_check(&log, &writer, 10_500);
        let kept = marker_offsets(&log);
        assert!(
            markers
                .iter()
                .filter(|m| **m < first.end_offset)
                .all(|m| kept.contains(m)),
            "seed {seed}: a marker went before its horizon"
        );
        // After the horizon they go (each live producer's last batch stays).
        writer.write(&log, 40);
        let third = clean_and_check(&log, &writer, 20_000);
        markers_dropped += third.markers_dropped;
        let last_batches: Vec<i64> = writer.truth.last_batches.values().copied().collect();
        for ended in &writer.truth.ended {
            if last_batches.contains(&ended.marker_offset) {
                assert!(
                    marker_offsets(&log).contains(&ended.marker_offset),
                    "seed {seed}: a live producer's last marker went"
                );
            }
        }
        // Reopened, the log reads the same.
        let bound = writer
            .truth
            .last_stable_offset(log.log_end_offset().unwrap());
        let view = read_committed_latest(&log, bound);
        drop(log);
        drop(data);
        let data = LogDir::open(dir.path(), compacted()).unwrap();
        let log = data.log("t", 0).unwrap().expect("reopened");
        assert_eq!(read_committed_latest(&log, bound), view);
    }
    assert!(aborted_dropped > 0, "the seeds abort something");
    assert!(
        markers_dropped > 0,
        "the seeds drop some marker after its horizon"
    );
}
