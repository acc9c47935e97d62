//! Shared data for the protocol benches: v2 slices of 1 KiB records as a producer writes them.

// Each bench uses a different subset of these helpers.
#![allow(dead_code)]

use skiff_protocol::records::record::{BatchBuilder, NewRecord};
use skiff_protocol::records::Compression;

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
