//! Test-only helpers for compacted logs: keyed batches and a record-by-record read of a whole log
//! (tests and the cleaner bench include this file with `#[path]`).

#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use skiff_protocol::limits::DECOMPRESSED_BYTES_MAX;
use skiff_protocol::records::record::{batch_records, BatchBuilder, NewRecord};
use skiff_protocol::records::v2::BatchHeader;
use skiff_protocol::records::Compression;
use skiff_storage::Log;

/// A record to write: key and value, `None` for null.
pub type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// One record of a log as read back: offset, timestamp, key, value, header count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: usize,
}

/// A batch of `(key, value)` records, timestamps from `first_timestamp_ms` up by one, one
/// header each.
pub fn keyed_batch(
    records: &[KeyValue<'_>],
    first_timestamp_ms: i64,
    compression: Compression,
) -> Vec<u8> {
    keyed_batch_from(records, first_timestamp_ms, compression, -1, -1)
}

/// [`keyed_batch`] of an idempotent producer with id `producer_id` and base sequence
/// `base_sequence`.
pub fn keyed_batch_from(
    records: &[KeyValue<'_>],
    first_timestamp_ms: i64,
    compression: Compression,
    producer_id: i64,
    base_sequence: i32,
) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, compression);
    builder.producer_id = producer_id;
    builder.producer_epoch = if producer_id >= 0 { 0 } else { -1 };
    builder.base_sequence = base_sequence;
    let headers: &[(&[u8], Option<&[u8]>)] = &[(b"h", Some(b"v"))];
    for (index, (key, value)) in records.iter().enumerate() {
        builder
            .push(&NewRecord {
                offset_delta: index as i32,
                timestamp: first_timestamp_ms + index as i64,
                key: *key,
                value: *value,
                headers,
            })
            .expect("record fits");
    }
    builder.build().expect("batch builds")
}

/// Every record of `log` from its start to its end, and every batch header, in order.
pub fn read_all(log: &Log) -> (Vec<Read>, Vec<BatchHeader>) {
    let mut records = Vec::new();
    let mut headers = Vec::new();
    let mut offset = log.log_start_offset().unwrap();
    let end = log.log_end_offset().unwrap();
    let mut scratch = Vec::new();
    while offset < end {
        let slice = log.read(offset, 1 << 20, true).unwrap();
        let bytes = slice.bytes().unwrap();
        if bytes.is_empty() {
            break;
        }
        let mut at = 0;
        while at + 61 <= bytes.len() {
            let header = BatchHeader::parse(&bytes[at..]).unwrap();
            if at + header.total_bytes() > bytes.len() {
                break;
            }
            let batch = &bytes[at..at + header.total_bytes()];
            skiff_protocol::records::v2::validate(batch).unwrap();
            for record in
                batch_records(batch, &header, &mut scratch, DECOMPRESSED_BYTES_MAX).unwrap()
            {
                let record = record.unwrap();
                if record.offset >= offset {
                    records.push(Read {
                        offset: record.offset,
                        timestamp: record.timestamp,
                        key: record.key.map(<[u8]>::to_vec),
                        value: record.value.map(<[u8]>::to_vec),
                        headers: record.headers.len(),
                    });
                }
            }
            offset = offset.max(header.next_offset());
            headers.push(header);
            at += header.total_bytes();
        }
    }
    (records, headers)
}

/// The latest record of each key among `records`.
pub fn latest_per_key(records: &[Read]) -> BTreeMap<Vec<u8>, Read> {
    let mut latest = BTreeMap::new();
    for record in records {
        if let Some(key) = &record.key {
            latest.insert(key.clone(), record.clone());
        }
    }
    latest
}

/// Appends `versions` rounds over `keys` keys (`key-<8 digits>`), `records_per_batch` records of
/// `value_bytes`-byte values per batch, then rolls: the cleaner bench's log. Returns the records.
pub fn append_versions(
    log: &Log,
    keys: usize,
    versions: usize,
    records_per_batch: usize,
    value_bytes: usize,
) -> u64 {
    let value = vec![b'v'; value_bytes];
    let keys: Vec<Vec<u8>> = (0..keys)
        .map(|key| format!("key-{key:08}").into_bytes())
        .collect();
    let mut records = 0u64;
    for version in 0..versions {
        for chunk in keys.chunks(records_per_batch) {
            let batch: Vec<KeyValue<'_>> = chunk
                .iter()
                .map(|key| (Some(&key[..]), Some(&value[..])))
                .collect();
            let mut bytes = keyed_batch(&batch, 1_000 + version as i64, Compression::None);
            log.append(&mut bytes, 1_000).unwrap();
            records += chunk.len() as u64;
        }
    }
    log.roll_if_needed(i64::MAX / 2).unwrap();
    records
}
