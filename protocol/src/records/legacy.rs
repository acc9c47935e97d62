//! Legacy message sets (magic 0 and 1): the entry layout, CRC-32 (IEEE), shallow entries, deep
//! decoding of compressed wrappers with Kafka's offset rules (inner offsets absolute in v0, relative
//! in v1), and the builder that writes plain or wrapped sets. The one place these layouts live:
//! down-conversion writes through [`LegacySetBuilder`], up-conversion reads through [`deep_records`].
//!
//! Must never: trust a size field before comparing it with the bytes present, decompress without a
//! cap, or panic on any input.

use crate::codec::Reader;
use crate::records::compression::{decompress, Compressor};
use crate::records::{Compression, Magic, RecordError, LOG_OVERHEAD_BYTES};

/// Message bytes after the size field in v0, without key and value: crc 4, magic 1, attributes 1,
/// key length 4, value length 4.
pub const RECORD_OVERHEAD_V0_BYTES: usize = 14;
/// Same for v1, which adds an 8-byte timestamp.
pub const RECORD_OVERHEAD_V1_BYTES: usize = 22;
/// v1 attribute bit: the timestamp is the log-append time.
pub const ATTRIBUTE_LOG_APPEND_TIME: i8 = 0x08;
/// Codec bits of a legacy attributes byte.
const ATTRIBUTE_CODEC_MASK: i8 = 0x07;
/// Position of the CRC field in an entry; the CRC covers everything after it.
const CRC_POSITION: usize = LOG_OVERHEAD_BYTES;
/// First byte the CRC covers (the magic).
const CRC_COVERAGE_START: usize = LOG_OVERHEAD_BYTES + 4;

/// Message bytes after the entry's size field for `magic` (v0 or v1) and a key/value of these sizes.
pub fn message_bytes(magic: Magic, key_bytes: usize, value_bytes: usize) -> usize {
    let overhead = if magic == Magic::V0 {
        RECORD_OVERHEAD_V0_BYTES
    } else {
        RECORD_OVERHEAD_V1_BYTES
    };
    overhead + key_bytes + value_bytes
}

/// One legacy entry (a plain message or a compressed wrapper), borrowing the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LegacyMessage<'a> {
    /// Entry offset (for a wrapper: its last inner message's offset).
    pub offset: i64,
    /// 0 or 1.
    pub magic: Magic,
    /// Stored CRC.
    pub crc: u32,
    /// Attributes byte.
    pub attributes: i8,
    /// v1 timestamp; −1 for v0.
    pub timestamp: i64,
    /// Key, `None` for null.
    pub key: Option<&'a [u8]>,
    /// Value, `None` for null (for a wrapper: the compressed inner set).
    pub value: Option<&'a [u8]>,
    /// The whole entry, from the offset to the end of the value.
    pub entry: &'a [u8],
}

impl<'a> LegacyMessage<'a> {
    /// The codec of a wrapper, `None` for a plain message.
    pub fn compression(&self) -> Result<Compression, RecordError> {
        match Compression::from_attributes(i16::from(self.attributes & ATTRIBUTE_CODEC_MASK))? {
            Compression::Zstd => Err(RecordError::UnsupportedCompression {
                codec: Compression::Zstd,
            }),
            codec => Ok(codec),
        }
    }

    /// Whether the v1 timestamp is a log-append time.
    pub fn is_log_append_time(&self) -> bool {
        self.magic == Magic::V1 && self.attributes & ATTRIBUTE_LOG_APPEND_TIME != 0
    }

    /// CRC-32 of the covered bytes (magic to the end of the value).
    pub fn computed_crc(&self) -> u32 {
        crc32fast::hash(self.entry.get(CRC_COVERAGE_START..).unwrap_or_default())
    }

    /// Fails with [`RecordError::CrcMismatch`] when the stored CRC is wrong.
    pub fn check_crc(&self) -> Result<(), RecordError> {
        let computed = self.computed_crc();
        if computed == self.crc {
            Ok(())
        } else {
            Err(RecordError::CrcMismatch {
                stored: self.crc,
                computed,
            })
        }
    }
}

/// Size of the entry at the start of `bytes` (12 + its size field), if its 12-byte header is there.
pub fn entry_bytes(bytes: &[u8]) -> Result<Option<usize>, RecordError> {
    let mut reader = Reader::new(bytes);
    if reader.remaining() < LOG_OVERHEAD_BYTES {
        return Ok(None);
    }
    reader.skip(8)?;
    let size = reader.i32()?;
    let size = usize::try_from(size)
        .map_err(|_| RecordError::InvalidBatchLength { batch_length: size })?;
    Ok(Some(LOG_OVERHEAD_BYTES + size))
}

/// Parses the complete legacy entry at the start of `bytes`; `Ok(None)` when it is cut short (a
/// partial tail, which readers ignore).
pub fn parse_entry(bytes: &[u8]) -> Result<Option<LegacyMessage<'_>>, RecordError> {
    let Some(total) = entry_bytes(bytes)? else {
        return Ok(None);
    };
    let Some(entry) = bytes.get(..total) else {
        return Ok(None);
    };
    let mut reader = Reader::new(entry);
    let offset = reader.i64()?;
    let size = reader.i32()?;
    let crc = reader.u32()?;
    let magic = Magic::from_byte(reader.i8()?)?;
    let overhead = match magic {
        Magic::V0 => RECORD_OVERHEAD_V0_BYTES,
        Magic::V1 => RECORD_OVERHEAD_V1_BYTES,
        Magic::V2 => return Err(RecordError::UnknownMagic { magic: 2 }),
    };
    if usize::try_from(size).unwrap_or(0) < overhead {
        return Err(RecordError::InvalidBatchLength { batch_length: size });
    }
    let attributes = reader.i8()?;
    let timestamp = if magic == Magic::V1 {
        reader.i64()?
    } else {
        -1
    };
    let key = reader.nullable_bytes()?;
    let value = reader.nullable_bytes()?;
    if reader.remaining() != 0 {
        return Err(RecordError::Corrupt {
            reason: "message size does not match its fields",
        });
    }
    Ok(Some(LegacyMessage {
        offset,
        magic,
        crc,
        attributes,
        timestamp,
        key,
        value,
        entry,
    }))
}

/// The complete shallow entries at the start of `bytes`, stopping before a partial tail.
pub fn entries(bytes: &[u8]) -> impl Iterator<Item = Result<LegacyMessage<'_>, RecordError>> + '_ {
    let mut rest = bytes;
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed {
            return None;
        }
        match parse_entry(rest) {
            Ok(Some(message)) => {
                rest = rest.get(message.entry.len()..).unwrap_or_default();
                Some(Ok(message))
            }
            Ok(None) => None,
            Err(error) => {
                failed = true;
                Some(Err(error))
            }
        }
    })
}

/// A record recovered from a legacy set, with its absolute offset (owned: compressed inner sets are
/// decompressed into temporary buffers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyRecord {
    /// Absolute offset.
    pub offset: i64,
    /// Magic of the message that carried it.
    pub magic: Magic,
    /// Timestamp (−1 for v0); for a LogAppendTime wrapper, the wrapper's.
    pub timestamp: i64,
    /// Whether the timestamp is a log-append time.
    pub log_append_time: bool,
    /// Codec of the wrapper it came from (`None` for a plain message).
    pub compression: Compression,
    /// Key.
    pub key: Option<Vec<u8>>,
    /// Value.
    pub value: Option<Vec<u8>>,
}

/// Limits and checks for [`deep_records`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeepOptions {
    /// Check outer and inner CRCs (produce path: yes; tests of our own output: yes).
    pub verify_crc: bool,
    /// Cap on the decompressed size of one wrapper.
    pub decompressed_bytes_max: usize,
}

impl Default for DeepOptions {
    fn default() -> Self {
        Self {
            verify_crc: true,
            decompressed_bytes_max: crate::records::compression::DECOMPRESSED_BYTES_MAX,
        }
    }
}

/// Decodes every record of one shallow entry (a plain message yields itself; a wrapper yields its
/// inner messages with absolute offsets as Kafka's reader computes them), appending to `out`.
pub fn deep_entry(
    message: &LegacyMessage<'_>,
    options: &DeepOptions,
    out: &mut Vec<LegacyRecord>,
) -> Result<(), RecordError> {
    if options.verify_crc {
        message.check_crc()?;
    }
    let codec = message.compression()?;
    if codec == Compression::None {
        out.push(LegacyRecord {
            offset: message.offset,
            magic: message.magic,
            timestamp: message.timestamp,
            log_append_time: message.is_log_append_time(),
            compression: codec,
            key: message.key.map(<[u8]>::to_vec),
            value: message.value.map(<[u8]>::to_vec),
        });
        return Ok(());
    }
    let compressed = message.value.ok_or(RecordError::Corrupt {
        reason: "compressed wrapper without a value",
    })?;
    let inner = decompress(
        codec,
        message.magic,
        compressed,
        options.decompressed_bytes_max,
    )?;
    let first = out.len();
    let mut rest = &inner[..];
    while !rest.is_empty() {
        let inner_message = parse_entry(rest)?.ok_or(RecordError::Corrupt {
            reason: "partial message inside a compressed wrapper",
        })?;
        rest = rest.get(inner_message.entry.len()..).unwrap_or_default();
        if options.verify_crc {
            inner_message.check_crc()?;
        }
        if inner_message.compression()? != Compression::None {
            return Err(RecordError::Corrupt {
                reason: "nested compression",
            });
        }
        // Kafka's deep iterator reads such an inner message, but its LogValidator refuses it on
        // the produce path ("Record ... 's magic does not match outer magic", INVALID_RECORD;
        // LogValidatorTest.testMisMatchMagic): a well-formed message breaking a rule, not a
        // damaged one.
        if inner_message.magic != message.magic {
            return Err(RecordError::InvalidRecord {
                reason: "inner message magic differs from the wrapper's",
            });
        }
        let log_append_time = message.is_log_append_time();
        out.push(LegacyRecord {
            offset: inner_message.offset,
            magic: inner_message.magic,
            timestamp: if log_append_time {
                message.timestamp
            } else {
                inner_message.timestamp
            },
            log_append_time,
            compression: codec,
            key: inner_message.key.map(<[u8]>::to_vec),
            value: inner_message.value.map(<[u8]>::to_vec),
        });
    }
    // v1 inner offsets are relative: absolute = wrapper − last relative + relative. A wrapper offset
    // of 0 means "base 0" (old librdkafka producers wrote 0 there).
    if message.magic == Magic::V1 && message.offset != 0 {
        let last_relative = out.last().map_or(0, |record| record.offset);
        let base = message.offset.wrapping_sub(last_relative);
        for record in out.get_mut(first..).unwrap_or_default() {
            record.offset = base.wrapping_add(record.offset);
        }
    }
    Ok(())
}

/// Decodes a whole message set deeply (see [`deep_entry`]), ignoring a partial tail.
pub fn deep_records(bytes: &[u8], options: &DeepOptions) -> Result<Vec<LegacyRecord>, RecordError> {
    let mut out = Vec::new();
    for message in entries(bytes) {
        deep_entry(&message?, options, &mut out)?;
    }
    Ok(out)
}

/// Appends one legacy message entry to `out` and fixes its CRC. `timestamp` is ignored for v0.
/// The caller reserves room: this is the down-converter's per-record hot path, so it writes the
/// fields straight into the output buffer with no intermediate copy.
pub fn write_message(
    out: &mut Vec<u8>,
    magic: Magic,
    offset: i64,
    attributes: i8,
    timestamp: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> Result<(), RecordError> {
    let key_bytes = key.map_or(0, <[u8]>::len);
    let value_bytes = value.map_or(0, <[u8]>::len);
    let size = i32::try_from(message_bytes(magic, key_bytes, value_bytes)).map_err(|_| {
        RecordError::Corrupt {
            reason: "message longer than 2 GiB",
        }
    })?;
    let start = out.len();
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&size.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    out.push(magic as u8);
    out.extend_from_slice(&attributes.to_be_bytes());
    if magic != Magic::V0 {
        out.extend_from_slice(&timestamp.to_be_bytes());
    }
    for field in [key, value] {
        match field {
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(bytes) => {
                // Length fits: the whole message size was checked against i32 above.
                out.extend_from_slice(&i32::try_from(bytes.len()).unwrap_or(-1).to_be_bytes());
                out.extend_from_slice(bytes);
            }
        }
    }
    let crc = crc32fast::hash(out.get(start + CRC_COVERAGE_START..).unwrap_or_default());
    if let Some(field) = out.get_mut(start + CRC_POSITION..start + CRC_POSITION + 4) {
        field.copy_from_slice(&crc.to_be_bytes());
    }
    Ok(())
}

/// Writes a legacy message set the way Kafka's builder does for one source batch: one entry per
/// record when uncompressed; otherwise one wrapper (offset = last record's, value = the compressed
/// inner set whose offsets are absolute in v0 and relative to the first record in v1).
#[derive(Debug)]
pub struct LegacySetBuilder {
    magic: Magic,
    codec: Compression,
    log_append_time_ms: Option<i64>,
    /// Destination: receives plain messages directly, or the wrapper in `finish`.
    out: Vec<u8>,
    /// Inner set of a compressed wrapper (unused when uncompressed).
    inner: Vec<u8>,
    uncompressed_bytes: usize,
    finished: bool,
    base_offset: Option<i64>,
    last_offset: i64,
    max_timestamp: i64,
    count: usize,
}

impl LegacySetBuilder {
    /// A builder for `magic` (0 or 1) and `codec` (not zstd); `log_append_time_ms` makes every v1
    /// message (and the wrapper) carry that time with the LogAppendTime bit.
    pub fn new(
        magic: Magic,
        codec: Compression,
        log_append_time_ms: Option<i64>,
    ) -> Result<Self, RecordError> {
        if magic == Magic::V2 {
            return Err(RecordError::UnknownMagic { magic: 2 });
        }
        if codec == Compression::Zstd {
            return Err(RecordError::UnsupportedCompression { codec });
        }
        Ok(Self {
            magic,
            codec,
            log_append_time_ms,
            out: Vec::new(),
            inner: Vec::new(),
            uncompressed_bytes: 0,
            finished: false,
            base_offset: None,
            last_offset: -1,
            max_timestamp: -1,
            count: 0,
        })
    }

    /// Appends to `out` (keeping its contents) instead of a fresh buffer, so a chunk of several
    /// converted batches is written into one allocation.
    pub fn appending_to(mut self, out: Vec<u8>) -> Self {
        self.out = out;
        self
    }

    /// Reserves room for `bytes` more bytes of uncompressed messages.
    pub fn reserve(&mut self, bytes: usize) {
        if self.codec == Compression::None {
            self.out.reserve(bytes);
        } else {
            self.inner.reserve(bytes);
        }
    }

    /// Exact bytes one appended message adds (uncompressed).
    pub fn entry_bytes(&self, key: Option<&[u8]>, value: Option<&[u8]>) -> usize {
        LOG_OVERHEAD_BYTES
            + message_bytes(
                self.magic,
                key.map_or(0, <[u8]>::len),
                value.map_or(0, <[u8]>::len),
            )
    }

    /// Messages appended.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether nothing was appended.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes of uncompressed messages written so far.
    pub fn uncompressed_bytes(&self) -> usize {
        self.uncompressed_bytes
    }

    fn attributes(&self, codec: Compression) -> i8 {
        // INVARIANT: codec ids are 0..=3 here (zstd refused in `new`).
        #[allow(clippy::cast_possible_truncation)]
        let mut attributes = codec as i8;
        if self.magic == Magic::V1 && self.log_append_time_ms.is_some() {
            attributes |= ATTRIBUTE_LOG_APPEND_TIME;
        }
        attributes
    }

    /// Appends a record with its absolute `offset`. A v1 timestamp below −1 (legal in v2, refused by
    /// the v1 format) is written as −1: Kafka throws there and fails the fetch (D7); we keep serving.
    pub fn append(
        &mut self,
        offset: i64,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Result<(), RecordError> {
        if self.finished {
            return Err(RecordError::InvalidRecord {
                reason: "append after finish",
            });
        }
        let base = *self.base_offset.get_or_insert(offset);
        let timestamp = self.log_append_time_ms.unwrap_or(timestamp.max(-1));
        let written_offset = if self.codec != Compression::None && self.magic == Magic::V1 {
            offset.wrapping_sub(base)
        } else {
            offset
        };
        let attributes = self.attributes(Compression::None);
        let buffer = if self.codec == Compression::None {
            &mut self.out
        } else {
            &mut self.inner
        };
        let before = buffer.len();
        write_message(
            buffer,
            self.magic,
            written_offset,
            attributes,
            timestamp,
            key,
            value,
        )?;
        self.uncompressed_bytes += buffer.len() - before;
        self.last_offset = offset;
        self.max_timestamp = self.max_timestamp.max(timestamp);
        self.count += 1;
        Ok(())
    }

    /// Completes the set: for a compressed set, compresses the inner messages and appends the
    /// wrapper to the destination buffer. On error the buffer is unchanged (see
    /// [`LegacySetBuilder::into_buffer`]). Nothing happens when no record was appended.
    pub fn finish(&mut self) -> Result<(), RecordError> {
        self.finish_with(&mut Compressor::default())
    }

    /// [`LegacySetBuilder::finish`] with a compressor kept by the caller from set to set.
    pub fn finish_with(&mut self, compressor: &mut Compressor) -> Result<(), RecordError> {
        if self.finished || self.count == 0 || self.codec == Compression::None {
            return Ok(());
        }
        let mut compressed = Vec::new();
        compressor.compress_into(self.codec, self.magic, &self.inner, &mut compressed)?;
        let attributes = self.attributes(self.codec);
        let timestamp = self.log_append_time_ms.unwrap_or(self.max_timestamp);
        self.out
            .reserve(LOG_OVERHEAD_BYTES + message_bytes(self.magic, 0, compressed.len()));
        write_message(
            &mut self.out,
            self.magic,
            self.last_offset,
            attributes,
            timestamp,
            None,
            Some(&compressed),
        )?;
        self.inner = Vec::new();
        self.finished = true;
        Ok(())
    }

    /// The destination buffer (with the set appended if [`LegacySetBuilder::finish`] succeeded).
    pub fn into_buffer(self) -> Vec<u8> {
        self.out
    }

    /// Whether the set is written as plain messages (no wrapper).
    pub fn is_uncompressed(&self) -> bool {
        self.codec == Compression::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::compression::compress;

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
    fn v2_vectors_null_key_and_value() {
        let mut out = Vec::new();
        write_message(&mut out, Magic::V0, 0, 0, 0, None, None).expect("v0");
        assert_eq!(
            out,
            hex("0000000000000000 0000000e a7ec6803 00 00 ffffffff ffffffff")
        );
        out.clear();
        write_message(&mut out, Magic::V1, 0, 0, 0, None, None).expect("v1");
        assert_eq!(
            out,
            hex("0000000000000000 00000016 cc2f79d9 01 00 0000000000000000 ffffffff ffffffff")
        );
        let message = parse_entry(&out).expect("parse").expect("complete");
        assert!(message.check_crc().is_ok());
        assert_eq!((message.key, message.value), (None, None));
    }

    #[test]
    fn v4_compressed_wrappers_use_kafka_offset_rules() {
        for codec in [Compression::Gzip, Compression::Snappy, Compression::Lz4] {
            for magic in [Magic::V0, Magic::V1] {
                let mut builder = LegacySetBuilder::new(magic, codec, None).expect("builder");
                for (offset, timestamp) in [(100, 7), (103, 8), (107, 9)] {
                    builder
                        .append(offset, timestamp, None, Some(b"x"))
                        .expect("append");
                }
                builder.finish().expect("finish");
                let out = builder.into_buffer();
                let wrapper = parse_entry(&out).expect("parse").expect("complete");
                assert_eq!(wrapper.offset, 107);
                assert!(wrapper.check_crc().is_ok());
                let inner = decompress(codec, magic, wrapper.value.expect("value"), 1 << 20)
                    .expect("inner");
                let inner_offsets: Vec<i64> =
                    entries(&inner).map(|m| m.expect("inner").offset).collect();
                if magic == Magic::V1 {
                    assert_eq!(wrapper.timestamp, 9);
                    assert_eq!(inner_offsets, vec![0, 3, 7]);
                } else {
                    assert_eq!(inner_offsets, vec![100, 103, 107]);
                }
                let deep = deep_records(&out, &DeepOptions::default()).expect("deep");
                assert_eq!(
                    deep.iter().map(|r| r.offset).collect::<Vec<_>>(),
                    vec![100, 103, 107]
                );
            }
        }
    }

    #[test]
    fn v1_wrapper_offset_zero_means_base_zero() {
        let mut inner = Vec::new();
        write_message(&mut inner, Magic::V1, 0, 0, 1, None, Some(b"a")).expect("a");
        write_message(&mut inner, Magic::V1, 1, 0, 1, None, Some(b"b")).expect("b");
        let compressed = compress(Compression::Gzip, Magic::V1, &inner).expect("gzip");
        let mut out = Vec::new();
        write_message(&mut out, Magic::V1, 0, 1, 1, None, Some(&compressed)).expect("wrapper");
        let deep = deep_records(&out, &DeepOptions::default()).expect("deep");
        assert_eq!(
            deep.iter().map(|r| r.offset).collect::<Vec<_>>(),
            vec![0, 1]
        );
    }

    #[test]
    fn bad_crc_and_partial_tail() {
        let mut out = Vec::new();
        write_message(&mut out, Magic::V1, 3, 0, 5, Some(b"k"), Some(b"v")).expect("write");
        let full = out.len();
        out.extend_from_slice(&out.clone()[..20]);
        assert_eq!(entries(&out).count(), 1);
        out[full - 1] ^= 1;
        assert!(matches!(
            deep_records(&out, &DeepOptions::default()),
            Err(RecordError::CrcMismatch { .. })
        ));
    }

    #[test]
    fn tiny_input_huge_count_is_an_error() {
        // A size field of 2 GiB on a 30-byte input is a partial tail, never an allocation; a key
        // length of 2 GiB inside a complete message is an error.
        let mut out = hex("0000000000000000 7fffffff");
        out.extend_from_slice(&[0; 18]);
        assert_eq!(parse_entry(&out).expect("partial"), None);
        let mut message = hex("0000000000000000 0000000e 00000000 00 00 7fffffff ffffffff");
        assert!(parse_entry(&message).is_err());
        message[8..12].copy_from_slice(&(-7i32).to_be_bytes());
        assert!(parse_entry(&message).is_err());
    }
}
