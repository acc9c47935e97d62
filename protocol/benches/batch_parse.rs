//! v2 batch parsing: header view, CRC32C validation, and the lazy record iterator (uncompressed,
//! and with lz4 decompression) over a 16-record batch of 1 KiB values.

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

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use skiff_protocol::records::record::batch_records;
use skiff_protocol::records::v2::{validate, BatchHeader};
use skiff_protocol::records::Compression;
use std::hint::black_box;

mod support;

fn batch_parse(c: &mut Criterion) {
    for codec in [Compression::None, Compression::Lz4] {
        let batch = support::batch(0, codec);
        let mut group = c.benchmark_group(format!("batch_parse/{codec:?}"));
        group.throughput(Throughput::Bytes(batch.len() as u64));
        group.bench_function("header", |b| {
            b.iter(|| BatchHeader::parse(black_box(&batch)).expect("header"))
        });
        group.bench_function("validate_crc32c", |b| {
            b.iter(|| validate(black_box(&batch)).expect("valid"))
        });
        group.bench_function("validate_and_iterate", |b| {
            let mut scratch = Vec::new();
            b.iter(|| {
                let header = validate(black_box(&batch)).expect("valid");
                let mut bytes = 0usize;
                for record in batch_records(&batch, &header, &mut scratch, 1 << 24).expect("iter") {
                    bytes += record.expect("record").value.map_or(0, <[u8]>::len);
                }
                bytes
            })
        });
        group.finish();
    }
}

criterion_group!(benches, batch_parse);
criterion_main!(benches);
