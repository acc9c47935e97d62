//! A follower's append of what one fetch brought for a partition (issue 41): 1 MiB of 16 KiB
//! batches appended with `Log::append_replicated` straight from the fetched bytes (`in_place`),
//! against the same append after copying the bytes into a new `Vec` first (`copied`), which is
//! what the broker's follower did while the append took `&mut [u8]`. On tmpfs, so the engine's
//! and the copy's costs are what is measured, not the disk's.

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

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use skiff_protocol::records::v2;
use skiff_storage::{Log, LogConfig, LogDir};

/// Batches per fetched partition, and records per batch (of ~1 KiB values): 64 × 16 KiB, the
/// 1 MiB `replica.fetch.max.bytes` a partition brings at most.
const BATCHES: usize = 64;
const RECORDS_PER_BATCH: i32 = 16;

/// The fetched bytes: `BATCHES` batches, back to back.
fn fetched() -> Vec<u8> {
    let mut bytes = Vec::new();
    for _ in 0..BATCHES {
        bytes.extend(support::batch(0, RECORDS_PER_BATCH, 1000));
    }
    bytes
}

/// Gives the batches of `bytes` the offsets that continue a log ending at `log_end` (the base
/// offset lies outside the CRC).
fn continue_at(bytes: &mut [u8], log_end: i64) {
    let mut at = 0;
    let mut offset = log_end;
    while at < bytes.len() {
        let header = v2::BatchHeader::parse(&bytes[at..]).unwrap();
        v2::set_base_offset(&mut bytes[at..], offset).unwrap();
        offset += i64::from(header.last_offset_delta) + 1;
        at += header.total_bytes();
    }
}

/// Times `iters` appends of the fetched bytes, each after its untimed renumbering; with
/// `copy`, each append first copies the bytes into a new `Vec`, as the follower did.
/// The crate's clock rule is for the engine; a benchmark timing part of each iteration reads it.
#[allow(clippy::disallowed_methods)]
fn appends(log: &Log, fetched: &mut [u8], copy: bool, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        continue_at(fetched, log.log_end_offset().unwrap());
        let start = Instant::now();
        if copy {
            let batches = fetched.to_vec();
            log.append_replicated(&batches, 1_000).unwrap();
        } else {
            log.append_replicated(fetched, 1_000).unwrap();
        }
        total += start.elapsed();
    }
    total
}

fn replicated_append(c: &mut Criterion) {
    let mut group = c.benchmark_group("replicated_append_1mib");
    let mut fetched = fetched();
    group.throughput(Throughput::Bytes(fetched.len() as u64));
    let dir = temp::temp_dir();
    let config = LogConfig {
        segment_bytes: 64 << 20,
        retention_bytes: Some(256 << 20),
        batch_bytes_max: 1 << 20,
        ..LogConfig::default()
    };
    let data = LogDir::open(dir.path(), config).expect("open");
    let log = data.create("bench", 0, None).expect("create");
    for (name, copy) in [("copied", true), ("in_place", false)] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let elapsed = appends(&log, &mut fetched, copy, iters);
                log.roll_if_needed(i64::MAX).unwrap();
                log.enforce_retention(1_000).unwrap();
                elapsed
            });
        });
    }
    group.finish();
}

criterion_group!(benches, replicated_append);
criterion_main!(benches);
