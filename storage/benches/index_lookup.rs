//! Offset lookups through `Log::read`: the index binary search plus the read of the batch header it
//! names (16 KiB batches, so every batch has an index entry); in the active segment, as here, that
//! header comes through the segment's memory-mapped view of its `.log`, elsewhere by `pread`.
//! "Warm" targets the last few MiB of the log, whose index entries sit in the warm tail searched
//! first; "cold" targets offsets spread over the whole segment, so the search runs over the whole
//! index. Both run with the pages resident: evicting them would need dropping the page cache, which
//! a shared machine does not allow; what "cold" adds on a real cold start is one page fault per
//! touched index page.

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

use criterion::{criterion_group, criterion_main, Criterion};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use skiff_storage::{LogConfig, LogDir};

/// Batches in the benchmark log: 16,384 × 16 KiB = 256 MiB in one segment.
const BATCHES: usize = 16_384;

fn lookup(c: &mut Criterion) {
    let dir = temp::temp_dir();
    let config = LogConfig {
        segment_bytes: 1 << 30,
        ..LogConfig::default()
    };
    let data = LogDir::open(dir.path(), config).expect("open");
    let log = data.create("bench", 0, None).expect("create");
    let template = support::batch(0, 16, 1000);
    for _ in 0..BATCHES {
        log.append(&mut template.clone(), 0).expect("append");
    }
    let log_end = log.log_end_offset().expect("log end");
    // 256 batches ≈ 4 MiB of log, well inside the 8 KiB warm tail of the index (1024 entries).
    let warm_start = log_end - 256 * 16;
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut group = c.benchmark_group("index_lookup");
    group.bench_function("warm_tail", |b| {
        b.iter(|| {
            let offset = rng.gen_range(warm_start..log_end);
            log.read(offset, 0, false).expect("read").position()
        })
    });
    group.bench_function("cold_whole_index", |b| {
        b.iter(|| {
            let offset = rng.gen_range(0..log_end);
            log.read(offset, 0, false).expect("read").position()
        })
    });
    group.finish();
}

criterion_group!(benches, lookup);
criterion_main!(benches);
