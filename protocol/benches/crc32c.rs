//! CRC32C (v2 batches) and, for comparison, CRC-32 IEEE (v0/v1 messages) over 1 KiB … 1 MiB.

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

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;

fn checksums(c: &mut Criterion) {
    let mut group = c.benchmark_group("crc32c");
    for bytes in [1024usize, 64 * 1024, 1024 * 1024] {
        let data: Vec<u8> = (0..bytes).map(|i| (i * 31 % 251) as u8).collect();
        group.throughput(Throughput::Bytes(bytes as u64));
        group.bench_with_input(BenchmarkId::new("crc32c", bytes), &data, |b, data| {
            b.iter(|| crc32c::crc32c(black_box(data)))
        });
        group.bench_with_input(BenchmarkId::new("crc32_ieee", bytes), &data, |b, data| {
            b.iter(|| crc32fast::hash(black_box(data)))
        });
    }
    group.finish();
}

criterion_group!(benches, checksums);
criterion_main!(benches);
