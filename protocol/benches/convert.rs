//! v2 → v1 and v2 → v0 down-conversion of 1 KiB records, uncompressed and gzip/snappy/lz4, lazy
//! with chunk sizes 16 KiB … 1 MiB and eager. Throughput is in source (stored) bytes.
//!
//! The slice is followed by a cut batch of 10 % of its size, as a log read cut at the partition
//! limit, so the declared size leaves room for the few percent v1 adds and every batch is
//! converted.

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
use skiff_protocol::down_convert::{down_convert_eager, DownConvertConfig};
use skiff_protocol::records::{Compression, Magic};

mod support;
use support::{lazy, with_cut_tail, SLICE_BYTES};

fn convert(c: &mut Criterion) {
    for codec in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
    ] {
        let slice = with_cut_tail(support::slice(SLICE_BYTES, codec));
        for target in [Magic::V1, Magic::V0] {
            let mut group = c.benchmark_group(format!("convert/{codec:?}/to_{target:?}"));
            group.throughput(Throughput::Bytes(slice.len() as u64));
            group.sample_size(10);
            for chunk_kib in [16usize, 32, 64, 128, 256, 512, 1024] {
                group.bench_with_input(
                    BenchmarkId::new("lazy_chunk_kib", chunk_kib),
                    &chunk_kib,
                    |b, chunk_kib| b.iter(|| lazy(&slice, target, chunk_kib * 1024)),
                );
            }
            group.bench_function("eager", |b| {
                b.iter(|| {
                    down_convert_eager(&slice, target, 0, &DownConvertConfig::default())
                        .expect("eager")
                        .0
                        .len()
                })
            });
            group.finish();
        }
    }
}

criterion_group!(benches, convert);
criterion_main!(benches);
