//! Append throughput: 16 KiB batches of 1 KiB records, into the page cache (no fsync) and with an
//! fsync after every batch. Per batch the engine does one CRC32C pass over 16 KiB (hardware CRC,
//! ~1.5 µs here), a few 61-byte header parses, one `pwrite`, no allocation: about 9,400
//! instructions, 8,100 of them the CRC. The rest is the kernel's, and it dominates: a profile on
//! tmpfs (see `storage/README.md`) puts ~2/3 of the time in the `pwrite` (allocating, charging
//! and filling fresh page-cache pages) and ~1/5 in freeing the pages of the segments retention
//! deletes, which this loop includes. The fsync case is bounded by the device's flush latency.

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
#[path = "../tests/support/temp.rs"]
mod temp;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use skiff_storage::{LogConfig, LogDir};

/// Records per batch and value bytes per record: 16 records of ~1 KiB make a ~16 KiB batch.
const RECORDS_PER_BATCH: i32 = 16;
const VALUE_BYTES: usize = 1000;

fn append(c: &mut Criterion) {
    let mut group = c.benchmark_group("append_16k_batches");
    let template = support::batch(0, RECORDS_PER_BATCH, VALUE_BYTES);
    group.throughput(Throughput::Bytes(template.len() as u64));
    // tmpfs is the page cache without writeback: the engine's own cost. On the disk, a shared
    // machine's writeback throttles the same appends to what the device sustains; the fsync
    // case measures the device's flush latency.
    let cases = [
        ("page_cache_tmpfs", true, None),
        ("page_cache_disk", false, None),
        ("fsync_every_batch_disk", false, Some(1)),
    ];
    for (name, on_tmpfs, flush_messages_interval) in cases {
        let dir = if on_tmpfs {
            temp::temp_dir()
        } else {
            tempfile::tempdir().expect("temp dir")
        };
        let config = LogConfig {
            segment_bytes: 64 << 20,
            retention_bytes: Some(256 << 20),
            flush_messages_interval,
            ..LogConfig::default()
        };
        let data = LogDir::open(dir.path(), config).expect("open");
        let log = data.create("bench", 0, None).expect("create");
        let mut batch = template.clone();
        let mut appended = 0u64;
        if flush_messages_interval.is_some() {
            group.sample_size(10);
        }
        group.bench_function(name, |b| {
            b.iter(|| {
                log.append(&mut batch, 0).expect("append");
                appended += 1;
                // Keep the disk footprint bounded (amortized: one check per 1024 appends).
                if appended % 1024 == 0 {
                    log.enforce_retention(0).expect("retention");
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, append);
criterion_main!(benches);
