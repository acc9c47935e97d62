//! The log cleaner's clean pass (`Log::clean`): a log of `KEYS` keys × `VERSIONS` versions
//! (the 1 M × 10 scaled down so criterion can repeat it), 16-record batches of ~100-byte
//! values, 8 MiB segments, cleaned whole in one pass on tmpfs. Each iteration cleans a fresh
//! copy of the same log (the copy is not timed). Throughput in log bytes cleaned (MB/s) and in
//! records read (the keys/s figure: each key appears `VERSIONS` times). Per record the pass
//! hashes the key twice (map build, then the filter: two SipHash-1-3 each), probes the map
//! and, for a batch that loses records, re-encodes the kept ones; unchanged batches are copied.
//! The key map's memory per key is printed: 20-byte slots at load factor 0.9 (Kafka: 24-byte
//! slots).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

#[path = "../tests/support/keyed.rs"]
mod keyed;
#[path = "../tests/support/temp.rs"]
mod temp;

use std::collections::BTreeMap;
use std::path::Path;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use skiff_storage::{Cleaner, CleanupPolicy, LogConfig, LogDir, NoHooks, OFFSET_MAP_SLOT_BYTES};

const KEYS: usize = 50_000;
const VERSIONS: usize = 10;
const RECORDS_PER_BATCH: usize = 16;
const VALUE_BYTES: usize = 100;
/// Kafka's default dedupe buffer (128 MiB) for one cleaner thread.
const MAP_BYTES: usize = 128 << 20;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 8 << 20,
        cleanup_policy: CleanupPolicy::Compact,
        ..LogConfig::default()
    }
}

/// Writes the template log into `dir`; returns its bytes and records.
fn build_template(dir: &Path) -> (u64, u64) {
    let data = LogDir::open(dir, config()).unwrap();
    let log = data.create("t", 0, None).unwrap();
    let records = keyed::append_versions(&log, KEYS, VERSIONS, RECORDS_PER_BATCH, VALUE_BYTES);
    let bytes = log.size_bytes().unwrap();
    data.close().unwrap();
    (bytes, records)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn clean_pass(c: &mut Criterion) {
    let template = temp::temp_dir();
    let (bytes, records) = build_template(template.path());
    let mut cleaner = Cleaner::new(MAP_BYTES, 0.9, 512 * 1024).unwrap();
    let map = cleaner.map();
    println!(
        "offset map: {} bytes, {} keys at most: {:.1} bytes per key ({OFFSET_MAP_SLOT_BYTES}-byte slots; Kafka 24); log {bytes} bytes, {records} records",
        map.memory_bytes(),
        map.capacity(),
        map.memory_bytes() as f64 / map.capacity() as f64,
    );
    let mut group = c.benchmark_group("clean_pass");
    group.sample_size(10);
    for (name, throughput) in [
        ("log_bytes", Throughput::Bytes(bytes)),
        ("records", Throughput::Elements(records)),
    ] {
        group.throughput(throughput);
        group.bench_function(name, |b| {
            b.iter_batched(
                || {
                    let work = temp::temp_dir();
                    copy_dir(template.path(), work.path());
                    let data = LogDir::open(work.path(), config()).unwrap();
                    (work, data)
                },
                |(work, data)| {
                    let log = data.log("t", 0).unwrap().unwrap();
                    let plan = log.cleaning_plan(i64::MAX, 10_000).unwrap().unwrap();
                    let stats = log
                        .clean(&plan, &mut cleaner, &BTreeMap::new(), &mut NoHooks, 10_000)
                        .unwrap();
                    assert!(stats.complete && stats.records_written == KEYS as u64);
                    (work, data)
                },
                BatchSize::PerIteration,
            );
        });
    }
    group.finish();
}

criterion_group!(benches, clean_pass);
criterion_main!(benches);
