//! Shared data for the protocol benches: v2 slices of 1 KiB records as a producer writes them.

// Each bench uses a different subset of these helpers.
#![allow(dead_code)]

use std::hint::black_box;

use skiff_protocol::down_convert::{DownConvertConfig, DownConverter, Prepare, SourceRange, Write};
use skiff_protocol::records::record::{BatchBuilder, NewRecord};
use skiff_protocol::records::{Compression, Magic};

/// Bytes of each record value.
pub const RECORD_VALUE_BYTES: usize = 1024;
/// Records per stored batch (a 16 KiB producer batch).
pub const RECORDS_PER_BATCH: usize = 16;

/// A value that compresses like text (about 2–3×), deterministic per index.
pub fn value(index: usize) -> Vec<u8> {
    let words: [&[u8]; 8] = [
        b"skiff ", b"kafka ", b"record ", b"legacy ", b"offset ", b"batch ", b"fetch ", b"zero ",
    ];
    let mut state = (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::with_capacity(RECORD_VALUE_BYTES);
    while out.len() < RECORD_VALUE_BYTES {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(words[(state % 8) as usize]);
        out.push(b'a' + (state >> 8) as u8 % 26);
    }
    out.truncate(RECORD_VALUE_BYTES);
    out
}

/// One v2 batch of `RECORDS_PER_BATCH` 1 KiB records at `base_offset`.
pub fn batch(base_offset: i64, codec: Compression) -> Vec<u8> {
    let mut builder = BatchBuilder::new(base_offset, codec);
    for delta in 0..RECORDS_PER_BATCH {
        let value = value(base_offset as usize + delta);
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
    builder.build().expect("build")
}

/// A slice of about `bytes` of stored batches.
pub fn slice(bytes: usize, codec: Compression) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + 32 * 1024);
    let mut offset = 0i64;
    while out.len() < bytes {
        out.extend(batch(offset, codec));
        offset += RECORDS_PER_BATCH as i64;
    }
    out
}

/// Source bytes of the conversion benches' slice (before the cut tail).
pub const SLICE_BYTES: usize = 1024 * 1024;

/// `slice` followed by a cut batch of 10 % of its size, as a log read cut at the partition limit,
/// so the declared size leaves room for the few percent v1 adds and every batch is converted.
pub fn with_cut_tail(mut slice: Vec<u8>) -> Vec<u8> {
    let mut tail = vec![0u8; slice.len() / 10];
    tail[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
    slice.extend(tail);
    slice
}

/// Drives the lazy converter as the broker would (prepare, park, resume, write, handing each
/// piece's buffer back as if written to a socket); returns the bytes written.
pub fn lazy(slice: &[u8], target: Magic, chunk_bytes: usize) -> u64 {
    let config = DownConvertConfig {
        chunk_bytes,
        ..DownConvertConfig::default()
    };
    let mut converter = DownConverter::new(slice.len() as u64, target, 0, config).expect("new");
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
