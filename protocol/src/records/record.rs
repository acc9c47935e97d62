//! Records inside a v2 batch: a lazy, zero-copy iterator (decompressing first, under a cap, when
//! the batch is compressed) and the batch builder that up-conversion, tests and benchmark clients
//! use. The header layout itself lives in [`crate::records::v2`]; this module owns the record
//! layout.
//!
//! Must never: allocate per record, trust `records_count` or a varint length before checking it
//! against the bytes present, or panic on any input.

use crate::codec::{put_varint, put_varlong, varint_len, varlong_len, Reader};
use crate::records::compression::{compress, decompress};
use crate::records::v2::{
    compute_crc, BatchHeader, ATTRIBUTE_CONTROL, ATTRIBUTE_DELETE_HORIZON,
    ATTRIBUTE_LOG_APPEND_TIME, ATTRIBUTE_TRANSACTIONAL, BATCH_HEADER_BYTES, CRC_OFFSET,
};
use crate::records::{Compression, Magic, RecordError, LOG_OVERHEAD_BYTES};

/// Fewest bytes one encoded record takes (length, attributes, timestamp delta, offset delta, key
/// length, value length, header count: one byte each). Bounds `records_count` by the bytes present.
pub const RECORD_BYTES_MIN: usize = 7;
/// Fewest bytes one header takes (key length and value length).
const HEADER_BYTES_MIN: usize = 2;

/// The headers of one record, still encoded; iterate to read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Headers<'a> {
    count: usize,
    bytes: &'a [u8],
}

impl<'a> Headers<'a> {
    /// Number of headers.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The `(key, value)` pairs (checked when the record was read, so this cannot fail).
    pub fn iter(&self) -> impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)> + 'a {
        let mut reader = Reader::new(self.bytes);
        let count = self.count;
        (0..count).map_while(move |_| {
            let key = reader.varint_bytes().ok()??;
            let value = reader.varint_bytes().ok()?;
            Some((key, value))
        })
    }
}

/// One record of a v2 batch, borrowing the batch (or its decompressed copy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Absolute offset (base offset + offset delta).
    pub offset: i64,
    /// Offset delta within the batch.
    pub offset_delta: i32,
    /// Absolute timestamp (base timestamp + delta), as the batch stores it.
    pub timestamp: i64,
    /// Key, `None` for null.
    pub key: Option<&'a [u8]>,
    /// Value, `None` for null.
    pub value: Option<&'a [u8]>,
    /// Headers (dropped by down-conversion).
    pub headers: Headers<'a>,
}

/// Lazy iterator over the encoded records of one batch; yields exactly `records_count` records and
/// then an error if bytes are left over.
#[derive(Debug, Clone)]
pub struct RecordIter<'a> {
    reader: Reader<'a>,
    base_offset: i64,
    base_timestamp: i64,
    left_count: usize,
    finished: bool,
}

impl<'a> RecordIter<'a> {
    /// Iterates `records` (uncompressed record bytes) of a batch with this header.
    pub fn new(records: &'a [u8], header: &BatchHeader) -> Result<Self, RecordError> {
        let count = usize::try_from(header.records_count).map_err(|_| RecordError::Corrupt {
            reason: "negative records count",
        })?;
        crate::codec::check_count(count, records.len(), RECORD_BYTES_MIN, usize::MAX)?;
        Ok(Self {
            reader: Reader::new(records),
            base_offset: header.base_offset,
            base_timestamp: header.base_timestamp,
            left_count: count,
            finished: false,
        })
    }

    /// Records not yet yielded.
    pub fn remaining_count(&self) -> usize {
        self.left_count
    }

    /// Encoded record bytes not yet read.
    pub fn records_bytes(&self) -> usize {
        self.reader.remaining()
    }

    fn read_record(&mut self) -> Result<Record<'a>, RecordError> {
        let length = usize::try_from(self.reader.varint()?).map_err(|_| RecordError::Corrupt {
            reason: "negative record length",
        })?;
        let mut body = Reader::new(self.reader.take(length)?);
        let _attributes = body.i8()?;
        let timestamp_delta = body.varlong()?;
        let offset_delta = body.varint()?;
        let key = body.varint_bytes()?;
        let value = body.varint_bytes()?;
        let header_count = usize::try_from(body.varint()?).map_err(|_| RecordError::Corrupt {
            reason: "negative header count",
        })?;
        crate::codec::check_count(header_count, body.remaining(), HEADER_BYTES_MIN, usize::MAX)?;
        let headers_bytes = body.rest();
        for _ in 0..header_count {
            body.varint_bytes()?.ok_or(RecordError::Corrupt {
                reason: "null header key",
            })?;
            body.varint_bytes()?;
        }
        if body.remaining() != 0 {
            return Err(RecordError::Corrupt {
                reason: "record length does not match its fields",
            });
        }
        Ok(Record {
            offset: self.base_offset.wrapping_add(i64::from(offset_delta)),
            offset_delta,
            timestamp: self.base_timestamp.wrapping_add(timestamp_delta),
            key,
            value,
            headers: Headers {
                count: header_count,
                bytes: headers_bytes,
            },
        })
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<Record<'a>, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        if self.left_count == 0 {
            self.finished = true;
            return (self.reader.remaining() != 0).then_some(Err(RecordError::Corrupt {
                reason: "bytes after the last record",
            }));
        }
        self.left_count -= 1;
        let record = self.read_record();
        if record.is_err() {
            self.finished = true;
        }
        Some(record)
    }
}

/// Iterates the records of a complete v2 `batch`. A compressed batch is decompressed into `scratch`
/// (its old contents are replaced) with at most `decompressed_bytes_max` bytes of output.
pub fn batch_records<'s>(
    batch: &'s [u8],
    header: &BatchHeader,
    scratch: &'s mut Vec<u8>,
    decompressed_bytes_max: usize,
) -> Result<RecordIter<'s>, RecordError> {
    let body = batch.get(BATCH_HEADER_BYTES..header.total_bytes()).ok_or(
        RecordError::InvalidBatchLength {
            batch_length: header.batch_length,
        },
    )?;
    match header.compression()? {
        Compression::None => RecordIter::new(body, header),
        codec => {
            *scratch = decompress(codec, Magic::V2, body, decompressed_bytes_max)?;
            RecordIter::new(scratch, header)
        }
    }
}

/// One record to append to a [`BatchBuilder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewRecord<'a> {
    /// Offset relative to the batch's base offset; must increase.
    pub offset_delta: i32,
    /// Timestamp in ms (−1 = none).
    pub timestamp: i64,
    /// Key, `None` for null.
    pub key: Option<&'a [u8]>,
    /// Value, `None` for null.
    pub value: Option<&'a [u8]>,
    /// Headers as `(key, value)`.
    pub headers: &'a [(&'a [u8], Option<&'a [u8]>)],
}

/// Builds one v2 batch: records are encoded as they are appended, then compressed and framed by
/// [`BatchBuilder::build`].
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    /// Base offset written into the header (the broker rewrites it on append).
    pub base_offset: i64,
    /// Codec of the records section.
    pub compression: Compression,
    /// `Some(t)`: LogAppendTime batch whose max timestamp is `t`; `None`: CreateTime.
    pub log_append_time_ms: Option<i64>,
    /// Producer id (−1 = none).
    pub producer_id: i64,
    /// Producer epoch (−1 = none).
    pub producer_epoch: i16,
    /// First sequence (−1 = none).
    pub base_sequence: i32,
    /// Transactional bit.
    pub transactional: bool,
    /// Control bit.
    pub control: bool,
    /// Partition leader epoch (−1 = none).
    pub partition_leader_epoch: i32,
    records: Vec<u8>,
    count: i32,
    base_timestamp: Option<i64>,
    max_timestamp: i64,
    last_offset_delta: i32,
    /// Set by [`BatchBuilder::set_delete_horizon`]: the base timestamp holds the horizon.
    delete_horizon: bool,
    /// Set by [`BatchBuilder::override_last_offset_delta`].
    last_offset_delta_override: Option<i32>,
}

impl BatchBuilder {
    /// A builder with no producer fields and CreateTime timestamps.
    pub fn new(base_offset: i64, compression: Compression) -> Self {
        Self {
            base_offset,
            compression,
            log_append_time_ms: None,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            records: Vec::new(),
            count: 0,
            base_timestamp: None,
            max_timestamp: -1,
            last_offset_delta: 0,
            delete_horizon: false,
            last_offset_delta_override: None,
        }
    }

    /// Makes the batch carry a delete horizon (KIP-534, as Kafka's log cleaner writes it): the
    /// base timestamp is `horizon_ms` and attribute bit 6 (0x40) is set; each record's
    /// timestamp delta is then relative to the horizon, so base + delta is still the record's
    /// own timestamp. Refused once a record was pushed (their deltas are already encoded).
    pub fn set_delete_horizon(&mut self, horizon_ms: i64) -> Result<(), RecordError> {
        if self.count > 0 {
            return Err(RecordError::Corrupt {
                reason: "delete horizon set after records were pushed",
            });
        }
        self.base_timestamp = Some(horizon_ms);
        self.delete_horizon = true;
        Ok(())
    }

    /// Writes `delta` as the last offset delta instead of the last pushed record's (Kafka's
    /// `overrideLastOffset`): a compacted batch keeps its original last offset, so the
    /// producer's last sequence (base sequence + last offset delta) survives the records it lost.
    pub fn override_last_offset_delta(&mut self, delta: i32) {
        self.last_offset_delta_override = Some(delta);
    }

    /// Reserves room for `bytes` more bytes of encoded records.
    pub fn reserve(&mut self, bytes: usize) {
        self.records.reserve(bytes);
    }

    /// Records appended so far.
    pub fn len(&self) -> usize {
        usize::try_from(self.count).unwrap_or(0)
    }

    /// Whether no record was appended.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Appends one record.
    pub fn push(&mut self, record: &NewRecord<'_>) -> Result<(), RecordError> {
        let base_timestamp = *self.base_timestamp.get_or_insert(record.timestamp);
        let timestamp_delta = record.timestamp.wrapping_sub(base_timestamp);
        let field_len = |field: Option<&[u8]>| -> Result<(i32, usize), RecordError> {
            match field {
                None => Ok((-1, 1)),
                Some(bytes) => {
                    let len = i32::try_from(bytes.len()).map_err(|_| RecordError::Corrupt {
                        reason: "field longer than 2 GiB",
                    })?;
                    Ok((len, varint_len(len) + bytes.len()))
                }
            }
        };
        let (key_len, key_bytes) = field_len(record.key)?;
        let (value_len, value_bytes) = field_len(record.value)?;
        let header_count =
            i32::try_from(record.headers.len()).map_err(|_| RecordError::Corrupt {
                reason: "too many headers",
            })?;
        let mut headers_bytes = varint_len(header_count);
        for (key, value) in record.headers {
            headers_bytes += field_len(Some(key))?.1 + field_len(*value)?.1;
        }
        let body_bytes = 1
            + varlong_len(timestamp_delta)
            + varint_len(record.offset_delta)
            + key_bytes
            + value_bytes
            + headers_bytes;
        let body_len = i32::try_from(body_bytes).map_err(|_| RecordError::Corrupt {
            reason: "record longer than 2 GiB",
        })?;
        let out = &mut self.records;
        out.reserve(varint_len(body_len) + body_bytes);
        put_varint(out, body_len);
        out.push(0);
        put_varlong(out, timestamp_delta);
        put_varint(out, record.offset_delta);
        put_field(out, key_len, record.key);
        put_field(out, value_len, record.value);
        put_varint(out, header_count);
        for (key, value) in record.headers {
            put_field(out, field_len(Some(key))?.0, Some(key));
            put_field(out, field_len(*value)?.0, *value);
        }
        self.count = self.count.saturating_add(1);
        self.max_timestamp = self.max_timestamp.max(record.timestamp);
        self.last_offset_delta = record.offset_delta;
        Ok(())
    }

    /// Bytes of the header plus the uncompressed records written so far (Kafka's "uncompressed
    /// bytes written", which conversion stats count as temporary memory).
    pub fn uncompressed_bytes(&self) -> usize {
        BATCH_HEADER_BYTES + self.records.len()
    }

    /// Frames the batch: compresses the records if asked, writes the header and the CRC32C.
    pub fn build(&self) -> Result<Vec<u8>, RecordError> {
        let compressed;
        let body = if self.compression == Compression::None {
            &self.records[..]
        } else {
            compressed = compress(self.compression, Magic::V2, &self.records)?;
            &compressed[..]
        };
        let total_bytes = BATCH_HEADER_BYTES + body.len();
        let batch_length =
            i32::try_from(total_bytes - LOG_OVERHEAD_BYTES).map_err(|_| RecordError::Corrupt {
                reason: "batch longer than 2 GiB",
            })?;
        let mut attributes = self.compression as i16;
        let max_timestamp = match self.log_append_time_ms {
            Some(time) => {
                attributes |= ATTRIBUTE_LOG_APPEND_TIME;
                time
            }
            None => self.max_timestamp,
        };
        if self.transactional {
            attributes |= ATTRIBUTE_TRANSACTIONAL;
        }
        if self.control {
            attributes |= ATTRIBUTE_CONTROL;
        }
        if self.delete_horizon {
            attributes |= ATTRIBUTE_DELETE_HORIZON;
        }
        let last_offset_delta = self
            .last_offset_delta_override
            .unwrap_or(self.last_offset_delta);
        let mut out = Vec::with_capacity(total_bytes);
        out.extend_from_slice(&self.base_offset.to_be_bytes());
        out.extend_from_slice(&batch_length.to_be_bytes());
        out.extend_from_slice(&self.partition_leader_epoch.to_be_bytes());
        out.push(2);
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&attributes.to_be_bytes());
        out.extend_from_slice(&last_offset_delta.to_be_bytes());
        out.extend_from_slice(&self.base_timestamp.unwrap_or(-1).to_be_bytes());
        out.extend_from_slice(&max_timestamp.to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.extend_from_slice(&self.base_sequence.to_be_bytes());
        out.extend_from_slice(&self.count.to_be_bytes());
        out.extend_from_slice(body);
        let crc = compute_crc(&out);
        if let Some(field) = out.get_mut(CRC_OFFSET..CRC_OFFSET + 4) {
            field.copy_from_slice(&crc.to_be_bytes());
        }
        Ok(out)
    }
}

fn put_field(out: &mut Vec<u8>, len: i32, field: Option<&[u8]>) {
    put_varint(out, len);
    if let Some(bytes) = field {
        out.extend_from_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::compression::DECOMPRESSED_BYTES_MAX;
    use crate::records::v2::validate;
    use proptest::prelude::*;

    fn hex(text: &str) -> Vec<u8> {
        let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|pair| {
                u8::from_str_radix(std::str::from_utf8(pair).expect("ascii"), 16).expect("hex")
            })
            .collect()
    }

    #[test]
    fn builder_reproduces_kafka_v1_source_batch_byte_for_byte() {
        // docs/design/downconversion.md §6.2 V1 source, written by Kafka 3.9.
        let kafka = hex("00000000000000050000003effffffff0285d4936f00000000000000000000000003e800000000000003e8ffffffffffffffffffffffffffff0000000118000000026b02760202680278");
        let mut builder = BatchBuilder::new(5, Compression::None);
        builder
            .push(&NewRecord {
                offset_delta: 0,
                timestamp: 1000,
                key: Some(b"k"),
                value: Some(b"v"),
                headers: &[(b"h", Some(b"x"))],
            })
            .expect("push");
        assert_eq!(builder.build().expect("build"), kafka);
        let header = validate(&kafka).expect("valid");
        let mut scratch = Vec::new();
        let records: Vec<_> = batch_records(&kafka, &header, &mut scratch, 1 << 20)
            .expect("iter")
            .collect::<Result<_, _>>()
            .expect("records");
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].offset, 5);
        assert_eq!(records[0].timestamp, 1000);
        assert_eq!(records[0].key, Some(&b"k"[..]));
        assert_eq!(
            records[0].headers.iter().collect::<Vec<_>>(),
            vec![(&b"h"[..], Some(&b"x"[..]))]
        );
    }

    #[test]
    fn a_delete_horizon_rebases_deltas_and_keeps_each_record_timestamp() {
        for compression in [Compression::None, Compression::Gzip] {
            let mut builder = BatchBuilder::new(100, compression);
            builder.set_delete_horizon(9_000_000).unwrap();
            builder.override_last_offset_delta(7);
            for (delta, timestamp) in [(2, 1_000i64), (5, 3_000)] {
                let record = NewRecord {
                    offset_delta: delta,
                    timestamp,
                    key: Some(b"k"),
                    value: None,
                    headers: &[(b"h", Some(b"v"))],
                };
                builder.push(&record).unwrap();
            }
            assert!(builder.set_delete_horizon(1).is_err(), "after a push");
            let batch = builder.build().unwrap();
            let header = validate(&batch).unwrap();
            assert_eq!(header.delete_horizon_ms(), Some(9_000_000));
            assert_eq!(header.base_timestamp, 9_000_000);
            assert_eq!(header.max_timestamp, 3_000);
            assert_eq!(header.last_offset(), 107);
            let mut scratch = Vec::new();
            let records: Vec<(i64, i64)> =
                batch_records(&batch, &header, &mut scratch, DECOMPRESSED_BYTES_MAX)
                    .unwrap()
                    .map(|record| {
                        let record = record.unwrap();
                        (record.offset, record.timestamp)
                    })
                    .collect();
            assert_eq!(records, vec![(102, 1_000), (105, 3_000)]);
        }
        let plain = BatchBuilder::new(0, Compression::None).build().unwrap();
        assert_eq!(
            BatchHeader::parse(&plain).unwrap().delete_horizon_ms(),
            None
        );
    }

    #[test]
    fn tiny_input_huge_count_is_an_error() {
        let mut builder = BatchBuilder::new(0, Compression::None);
        builder
            .push(&NewRecord {
                offset_delta: 0,
                timestamp: 0,
                key: None,
                value: None,
                headers: &[],
            })
            .expect("push");
        let mut batch = builder.build().expect("build");
        batch[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        let header = BatchHeader::parse(&batch).expect("header");
        let mut scratch = Vec::new();
        assert!(batch_records(&batch, &header, &mut scratch, 1 << 20).is_err());
        // A record claiming 2^30 headers in a few bytes.
        let mut records = Vec::new();
        put_varint(&mut records, 8);
        records.extend_from_slice(&[0, 0, 0, 1, 1]);
        put_varint(&mut records, 1 << 30);
        let mut header = header;
        header.records_count = 1;
        assert!(RecordIter::new(&records, &header)
            .expect("iter")
            .next()
            .expect("item")
            .is_err());
    }

    #[test]
    fn leftover_bytes_after_the_last_record_are_corrupt() {
        let mut builder = BatchBuilder::new(0, Compression::None);
        for delta in 0..3 {
            builder
                .push(&NewRecord {
                    offset_delta: delta,
                    timestamp: 9,
                    key: None,
                    value: Some(b"abc"),
                    headers: &[],
                })
                .expect("push");
        }
        let batch = builder.build().expect("build");
        let mut header = validate(&batch).expect("valid");
        header.records_count = 2;
        let mut scratch = Vec::new();
        let items: Vec<_> = batch_records(&batch, &header, &mut scratch, 1 << 20)
            .expect("iter")
            .collect();
        assert_eq!(items.len(), 3);
        assert!(items[2].is_err());
    }

    proptest! {
        #[test]
        fn build_then_iterate_round_trips(
            codec in prop::sample::select(vec![Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd]),
            base in 0i64..1 << 40,
            records in prop::collection::vec((0i32..5, -1i64..1 << 42, prop::option::of(prop::collection::vec(any::<u8>(), 0..20)), prop::option::of(prop::collection::vec(any::<u8>(), 0..300))), 0..20),
        ) {
            let mut builder = BatchBuilder::new(base, codec);
            let mut delta = 0i32;
            let mut expected = Vec::new();
            for (gap, timestamp, key, value) in &records {
                builder.push(&NewRecord { offset_delta: delta, timestamp: *timestamp, key: key.as_deref(), value: value.as_deref(), headers: &[(b"h", None)] }).expect("push");
                expected.push((base + i64::from(delta), *timestamp, key.clone(), value.clone()));
                delta += gap + 1;
            }
            let batch = builder.build().expect("build");
            let header = validate(&batch).expect("valid");
            let mut scratch = Vec::new();
            let got: Vec<_> = batch_records(&batch, &header, &mut scratch, DECOMPRESSED_BYTES_MAX)
                .expect("iter")
                .map(|record| record.map(|r| (r.offset, r.timestamp, r.key.map(<[u8]>::to_vec), r.value.map(<[u8]>::to_vec))))
                .collect::<Result<_, _>>()
                .expect("records");
            prop_assert_eq!(got, expected);
        }
    }
}
