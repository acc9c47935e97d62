//! What moving a log start costs in a data directory of many logs (issue 41): a DeleteRecords
//! inside the first segment (`delete_records`: no file to delete, only the start moves) and a
//! retention pass of one log that deletes its oldest segment (`retention_one_segment`), with
//! 1,000 and 10,000 logs in the directory (`SKIFF_BENCH_LOGS=1000,10000` to choose). On the
//! disk, not tmpfs: the fsyncs are the cost. Besides the time, each case prints the bytes the
//! process wrote per call (`wchar` of `/proc/self/io`, every `write`/`pwrite` it made), which is
//! how the size of the directory's offset checkpoint shows.

// Benchmark code: a failed unwrap, expect or index is the report. The workspace's lint wall is for
// library code; clippy.toml's test exemptions do not reach benchmarks.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

#[path = "../tests/support/batch.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use skiff_storage::{DirConfig, Log, LogConfig, LogDir};

/// Retention by time of the log whose segments the retention case deletes.
const RETENTION_MS: i64 = 5_000;

/// Bytes this process has passed to `write`-family calls so far.
fn bytes_written() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").expect("/proc/self/io");
    io.lines()
        .find_map(|line| line.strip_prefix("wchar: "))
        .and_then(|value| value.trim().parse().ok())
        .expect("wchar in /proc/self/io")
}

/// A directory of `logs` logs with one batch each, checkpointed once (so the offset checkpoint
/// names them all). Log 0 takes the DeleteRecords; log 1 rolls at every append and keeps
/// `RETENTION_MS` of data.
fn directory(logs: i32) -> (tempfile::TempDir, LogDir) {
    let dir = tempfile::tempdir().expect("temp dir on the disk");
    let dir_config = DirConfig {
        logs_max: 20_000,
        ..DirConfig::default()
    };
    let data = LogDir::open_with(dir.path(), LogConfig::default(), dir_config).expect("open");
    let rolling = LogConfig {
        segment_ms: 1,
        retention_ms: Some(RETENTION_MS),
        ..LogConfig::default()
    };
    for partition in 0..logs {
        let config = (partition == 1).then(|| rolling.clone());
        let log = data.create("bench", partition, config).expect("create");
        log.append(&mut support::batch(0, 1, 100), 1_000_000)
            .expect("append");
    }
    data.checkpoint_recovery_points().expect("checkpoint");
    (dir, data)
}

/// Times `iters` calls of `op` (each after its untimed `setup`) and adds the bytes they wrote
/// to `written`. The crate's clock rule is for the engine (time is its argument); a benchmark
/// that times only part of each iteration has to read the clock itself.
#[allow(clippy::disallowed_methods)]
fn timed<S>(
    iters: u64,
    written: &mut (u64, u64),
    mut setup: impl FnMut() -> S,
    mut op: impl FnMut(S),
) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let input = setup();
        let before = bytes_written();
        let start = Instant::now();
        op(input);
        total += start.elapsed();
        written.0 += bytes_written() - before;
        written.1 += 1;
    }
    total
}

fn delete_records(log: &Arc<Log>, iters: u64, written: &mut (u64, u64)) -> Duration {
    timed(
        iters,
        written,
        || {
            let mut batch = support::batch(0, 1, 100);
            log.append(&mut batch, 1_000_000)
                .expect("append")
                .last_offset
                + 1
        },
        |offset| {
            log.delete_records_before(offset).expect("delete records");
        },
    )
}

fn retention(log: &Arc<Log>, now_ms: &mut i64, iters: u64, written: &mut (u64, u64)) -> Duration {
    timed(
        iters,
        written,
        || {
            *now_ms += 10_000;
            let mut batch = support::batch_with(0, 1, 100, *now_ms, 0xAB);
            log.append(&mut batch, *now_ms).expect("append");
            assert!(log.roll_if_needed(*now_ms + 10).expect("roll"));
            *now_ms + RETENTION_MS + 1
        },
        |now_ms| {
            // One segment a call (two the first time: the directory's first batch had its own).
            let deleted = log.enforce_retention(now_ms).expect("retention");
            assert!((1..=2).contains(&deleted), "{deleted} segments deleted");
        },
    )
}

fn log_start(c: &mut Criterion) {
    let counts = std::env::var("SKIFF_BENCH_LOGS").unwrap_or_else(|_| "1000,10000".to_owned());
    for logs in counts
        .split(',')
        .map(|count| count.parse::<i32>().expect("a count"))
    {
        let (_dir, data) = directory(logs);
        let mut group = c.benchmark_group(format!("log_start_{logs}_logs"));
        group.sample_size(10);
        group.warm_up_time(Duration::from_secs(1));
        group.measurement_time(Duration::from_secs(4));
        let log = data.log("bench", 0).unwrap().unwrap();
        let mut written = (0, 0);
        group.bench_function("delete_records", |b| {
            b.iter_custom(|iters| delete_records(&log, iters, &mut written));
        });
        println!(
            "  bytes written per delete_records: {}",
            written.0 / written.1.max(1)
        );
        let log = data.log("bench", 1).unwrap().unwrap();
        let mut now_ms = 1_000_000;
        let mut written = (0, 0);
        group.bench_function("retention_one_segment", |b| {
            b.iter_custom(|iters| retention(&log, &mut now_ms, iters, &mut written));
        });
        println!(
            "  bytes written per retention deleting a segment: {}",
            written.0 / written.1.max(1)
        );
        group.finish();
    }
}

criterion_group!(benches, log_start);
criterion_main!(benches);
