//! Test-only batch helpers shared by the unit tests, integration tests, benches and
//! the storage fuzz targets (each includes this file with `#[path]`). They wrap the protocol
//! crate's `BatchBuilder`: storage itself never encodes records, it stores what producers send.

#![allow(dead_code, unreachable_pub)]

use skiff_protocol::limits::DECOMPRESSED_BYTES_MAX;
use skiff_protocol::records::record::{batch_records, BatchBuilder, NewRecord};
use skiff_protocol::records::v2::BatchHeader;
use skiff_protocol::records::Compression;

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
    let value = vec![value_fill; value_bytes];
    let mut builder = BatchBuilder::new(base_offset, Compression::None);
    for index in 0..records_count {
        builder
            .push(&NewRecord {
                offset_delta: index,
                timestamp: first_timestamp_ms + i64::from(index),
                key: None,
                value: Some(&value),
                headers: &[],
            })
            .expect("record fits");
    }
    builder.build().expect("batch builds")
}

/// (offset, timestamp) of every record of one whole stored v2 batch, compressed or not, read
/// record by record: the reference a time lookup is checked against (LogAppendTime records carry
/// the batch's time, as Kafka reads them).
pub fn record_times(batch: &[u8]) -> Vec<(i64, i64)> {
    let header = BatchHeader::parse(batch).expect("batch header");
    let mut scratch = Vec::new();
    batch_records(batch, &header, &mut scratch, DECOMPRESSED_BYTES_MAX)
        .expect("batch records")
        .map(|record| {
            let record = record.expect("record");
            let timestamp = if header.is_log_append_time() {
                header.max_timestamp
            } else {
                record.timestamp
            };
            (record.offset, timestamp)
        })
        .collect()
}
