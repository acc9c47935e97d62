//! Legacy read_committed ÷ read_uncommitted down-conversion (issue 38's target: ≥ 0.9): a 1 MiB
//! slice of transactions of 4 batches of 16 × 1 KiB records from 4 producers in turn, each
//! transaction ended by its marker, one in ten aborted (10 % of the transactions, interleaved
//! as producers write them), converted to v1 lazily as the broker drives it (128 KiB chunks,
//! parked between prepare and write). read_uncommitted converts every data batch (aborted ones
//! too) and drops the markers; read_committed builds the filter from the range's aborted
//! transactions (as the broker does per response) and leaves the aborted batches out.
//! Throughput is in source (stored) bytes, the same slice for both.
//!
//! Run: `cargo bench -p skiff-protocol --bench convert_txn`.

// Benchmark code: a failed unwrap, expect or index is the report.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use skiff_protocol::down_convert::{
    AbortedFilter, DownConvertConfig, DownConverter, Prepare, SourceRange, Write,
};
use skiff_protocol::records::record::{BatchBuilder, NewRecord};
use skiff_protocol::records::txn::{AbortedTxn, EndTxnMarker, MarkerType};
use skiff_protocol::records::v2::set_base_offset;
use skiff_protocol::records::{Compression, Magic};

mod support;
use support::{value, with_cut_tail, RECORDS_PER_BATCH, SLICE_BYTES};

/// Batches per transaction.
const TXN_BATCHES: usize = 4;
/// Producers writing in turn.
const PRODUCERS: i64 = 4;
/// One transaction in this many aborts.
const ABORT_EVERY: usize = 10;

/// The slice and the aborted transactions its index holds.
fn txn_slice(codec: Compression) -> (Vec<u8>, Vec<AbortedTxn>) {
    let (mut out, mut aborted) = (Vec::new(), Vec::new());
    let mut offset = 0i64;
    let mut txn = 0usize;
    while out.len() < SLICE_BYTES {
        let producer_id = 1_000 + txn as i64 % PRODUCERS;
        let first_offset = offset;
        for _ in 0..TXN_BATCHES {
            let mut builder = BatchBuilder::new(offset, codec);
            builder.producer_id = producer_id;
            builder.producer_epoch = 0;
            builder.base_sequence = 0;
            builder.transactional = true;
            for delta in 0..RECORDS_PER_BATCH {
                let value = value(offset as usize + delta);
                builder
                    .push(&NewRecord {
                        offset_delta: delta as i32,
                        timestamp: 1_700_000_000_000 + delta as i64,
                        key: Some(b"key-0001"),
                        value: Some(&value),
                        headers: &[],
                    })
                    .expect("push");
            }
            out.extend(builder.build().expect("build"));
            offset += RECORDS_PER_BATCH as i64;
        }
        let abort = txn % ABORT_EVERY == ABORT_EVERY / 2;
        let mut marker = EndTxnMarker {
            producer_id,
            producer_epoch: 0,
            coordinator_epoch: 0,
            marker_type: if abort {
                MarkerType::Abort
            } else {
                MarkerType::Commit
            },
        }
        .encode_batch(1_700_000_000_000)
        .expect("marker");
        set_base_offset(&mut marker, offset).expect("offset");
        out.extend(marker);
        if abort {
            aborted.push(AbortedTxn {
                producer_id,
                first_offset,
                last_offset: offset,
                last_stable_offset: offset + 1,
            });
        }
        offset += 1;
        txn += 1;
    }
    (with_cut_tail(out), aborted)
}

/// One legacy response's conversion as the broker drives it; returns the bytes written.
fn convert(slice: &[u8], aborted: Option<&[AbortedTxn]>) -> u64 {
    let config = DownConvertConfig::default();
    let mut converter = DownConverter::new(slice.len() as u64, Magic::V1, 0, config).expect("new");
    if let Some(aborted) = aborted {
        converter = converter.read_committed(AbortedFilter::new(aborted.to_vec()));
    }
    let read = |range: SourceRange| {
        let start = range.start as usize;
        &slice[start..(start + range.len).min(slice.len())]
    };
    while let Prepare::Read(range) = converter.prepare_step().expect("prepare") {
        converter.feed(read(range)).expect("feed");
    }
    let mut converter = DownConverter::resume(converter.park().expect("park"), config);
    let mut written = 0u64;
    loop {
        match converter.write_step().expect("write") {
            Write::Read(range) => converter.feed(read(range)).expect("feed"),
            Write::Output(piece) => {
                written += black_box(&piece).len() as u64;
                converter.reuse_buffer(piece);
            }
            Write::Done => return written,
        }
    }
}

fn legacy_isolation(c: &mut Criterion) {
    for codec in [Compression::None, Compression::Lz4] {
        let (slice, aborted) = txn_slice(codec);
        let mut group = c.benchmark_group(format!("legacy_isolation/{codec:?}/to_V1"));
        group.throughput(Throughput::Bytes(slice.len() as u64));
        group.sample_size(20);
        group.bench_function("read_uncommitted", |b| b.iter(|| convert(&slice, None)));
        group.bench_function("read_committed_10pct_aborted", |b| {
            b.iter(|| convert(&slice, Some(&aborted)))
        });
        group.finish();
    }
}

criterion_group!(benches, legacy_isolation);
criterion_main!(benches);
