//! CPU time of one clean pass (`Log::clean`) over the cleaner bench's kind of log: `keys` keys ×
//! `versions` versions, 16-record batches of 100-byte values, 64 MiB segments, on tmpfs, cleaned
//! whole with Kafka's default dedupe buffer (128 MiB). Prints MB (2^20 bytes) of log cleaned per
//! CPU second (user + system) and per wall second, records per CPU second, and CPU seconds per
//! GB: figures a shared, loaded machine disturbs far less than criterion's wall-clock time.
//!
//! Run with `cargo run --release -p skiff-storage --example clean_cpu [keys] [versions]`
//! (default 100,000 × 10).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]
// The example measures wall time beside CPU time; the engine itself never reads a clock.
#![allow(clippy::disallowed_methods)]

#[path = "../tests/support/keyed.rs"]
mod keyed;
#[path = "../tests/support/temp.rs"]
mod temp;

use std::collections::BTreeMap;
use std::time::Instant;

use skiff_storage::{Cleaner, CleanupPolicy, LogConfig, LogDir, NoHooks};

/// User + system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes one `rusage` into the zeroed struct we own and reads nothing else.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let seconds = |time: libc::timeval| time.tv_sec as f64 + time.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let keys: usize = args.next().map_or(100_000, |arg| arg.parse().unwrap());
    let versions: usize = args.next().map_or(10, |arg| arg.parse().unwrap());
    let dir = temp::temp_dir();
    let config = LogConfig {
        segment_bytes: 64 << 20,
        cleanup_policy: CleanupPolicy::Compact,
        ..LogConfig::default()
    };
    let data = LogDir::open(dir.path(), config).unwrap();
    let log = data.create("t", 0, None).unwrap();
    let records = keyed::append_versions(&log, keys, versions, 16, 100);
    let bytes = log.size_bytes().unwrap();
    let map_mib: usize = args.next().map_or(128, |arg| arg.parse().unwrap());
    let mut cleaner = Cleaner::new(map_mib << 20, 0.9, 512 * 1024).unwrap();
    let plan = log.cleaning_plan(i64::MAX, 10_000).unwrap().unwrap();
    let (cpu, wall) = (cpu_seconds(), Instant::now());
    let stats = log
        .clean(&plan, &mut cleaner, &BTreeMap::new(), &mut NoHooks, 10_000)
        .unwrap();
    let (cpu, wall) = (cpu_seconds() - cpu, wall.elapsed().as_secs_f64());
    assert!(stats.complete && stats.records_written == keys as u64);
    let mib = bytes as f64 / f64::from(1 << 20);
    println!(
        "{keys} keys x {versions} versions: {mib:.1} MiB, {records} records -> {:.1} MiB; \
         cpu {cpu:.3} s, wall {wall:.3} s: {:.0} MiB/cpu-s, {:.0} MiB/wall-s, {:.2} M records/cpu-s, \
         {:.2} cpu-s per GiB; map {:.1}% used",
        stats.bytes_written as f64 / f64::from(1 << 20),
        mib / cpu,
        mib / wall,
        records as f64 / cpu / 1e6,
        cpu / (mib / 1024.0),
        stats.map_utilization * 100.0,
    );
}
