//! Test-only v2 batch encoder shared by the unit tests, integration tests, benches, the example
//! and the storage fuzz targets (each includes this file with `#[path]`), so there is one copy.
//! Storage itself never encodes records: it stores what producers send.

#![allow(dead_code, unreachable_pub)]

use skiff_protocol::records::v2;

/// A batch of `records_count` records with `value_bytes`-byte values of 0xAB, timestamps from
/// 1000 ms.
pub fn batch(base_offset: i64, records_count: i32, value_bytes: usize) -> Vec<u8> {
    batch_with(base_offset, records_count, value_bytes, 1_000, 0xAB)
}

/// A batch of `records_count` records whose values are `value_bytes` bytes of `value_fill` and
/// whose timestamps run from `first_timestamp_ms` up by one per record.
pub fn batch_with(
    base_offset: i64,
    records_count: i32,
    value_bytes: usize,
    first_timestamp_ms: i64,
    value_fill: u8,
) -> Vec<u8> {
    let mut records = Vec::new();
    for index in 0..records_count {
        let mut body = vec![0u8]; // attributes
        put_varint(&mut body, i64::from(index)); // timestamp delta
        put_varint(&mut body, i64::from(index)); // offset delta
        put_varint(&mut body, -1); // null key
        put_varint(&mut body, value_bytes as i64);
        body.extend(std::iter::repeat_n(value_fill, value_bytes));
        put_varint(&mut body, 0); // no headers
        put_varint(&mut records, body.len() as i64);
        records.extend(body);
    }
    let total = v2::BATCH_HEADER_BYTES + records.len();
    let mut batch = Vec::new();
    batch.extend_from_slice(&base_offset.to_be_bytes());
    batch.extend_from_slice(&((total - 12) as i32).to_be_bytes());
    batch.extend_from_slice(&0i32.to_be_bytes()); // partition leader epoch
    batch.push(2); // magic
    batch.extend_from_slice(&0u32.to_be_bytes()); // crc, filled below
    batch.extend_from_slice(&0i16.to_be_bytes()); // attributes
    batch.extend_from_slice(&(records_count - 1).to_be_bytes());
    batch.extend_from_slice(&first_timestamp_ms.to_be_bytes());
    let last_timestamp_ms = first_timestamp_ms + i64::from(records_count - 1);
    batch.extend_from_slice(&last_timestamp_ms.to_be_bytes());
    batch.extend_from_slice(&(-1i64).to_be_bytes()); // producer id
    batch.extend_from_slice(&(-1i16).to_be_bytes()); // producer epoch
    batch.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
    batch.extend_from_slice(&records_count.to_be_bytes());
    batch.extend(records);
    let crc = v2::compute_crc(&batch);
    batch[v2::CRC_OFFSET..v2::CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    batch
}

/// Zigzag varint, as v2 records encode lengths and deltas.
fn put_varint(out: &mut Vec<u8>, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    loop {
        let byte = (zigzag & 0x7f) as u8;
        zigzag >>= 7;
        if zigzag == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}
