//! Up-conversion for Produce v0–v2 (docs/design/downconversion.md §8): a legacy message set (plain
//! or one compressed wrapper) becomes one v2 batch with fresh offset deltas 0..n, ready for the
//! log.
//!
//! The broker passes in the log-append time (this crate never reads a clock) and the topic's
//! timestamp type and codec; it assigns the base offset on append (`v2::set_base_offset`). Errors
//! carry the Kafka code through [`RecordError::error_code`]: a bad CRC, bad lengths or a corrupt
//! compressed stream → CORRUPT_MESSAGE (2); mixed magics (between entries, or between a wrapper
//! and its inner messages, as Kafka 3.9's LogValidator rules) or several compressed wrappers →
//! INVALID_RECORD (87); a producer-set LogAppendTime → INVALID_TIMESTAMP (32); zstd in a legacy
//! message → UNSUPPORTED_COMPRESSION_TYPE (76).
//!
//! Must never: accept a record whose CRC does not match, decompress without a cap, or read a clock.

use crate::records::legacy::{self, DeepOptions};
use crate::records::record::{BatchBuilder, NewRecord};
use crate::records::{Compression, Magic, RecordError};

/// How the topic wants the batch written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpConvertOptions {
    /// `Some(now)`: the topic uses LogAppendTime and this is the append time; `None`: CreateTime.
    pub log_append_time_ms: Option<i64>,
    /// Target codec; `None` keeps the producer's (`compression.type=producer`).
    pub compression: Option<Compression>,
    /// Cap on the decompressed size of the wrapper.
    pub decompressed_bytes_max: usize,
}

impl Default for UpConvertOptions {
    fn default() -> Self {
        Self {
            log_append_time_ms: None,
            compression: None,
            decompressed_bytes_max: crate::records::compression::DECOMPRESSED_BYTES_MAX,
        }
    }
}

/// One up-converted partition's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpConverted {
    /// One v2 batch, base offset 0 (the log assigns the real one).
    pub batch: Vec<u8>,
    /// Records in it.
    pub records_count: usize,
    /// Magic of the produced set.
    pub source_magic: Magic,
    /// Codec of the produced set.
    pub source_compression: Compression,
    /// Uncompressed bytes built (Kafka's `temporaryMemoryBytes` for produce conversions).
    pub temporary_bytes: usize,
}

/// Converts a Produce v0–v2 message set into one v2 batch.
pub fn up_convert(
    message_set: &[u8],
    options: &UpConvertOptions,
) -> Result<UpConverted, RecordError> {
    let mut entries = Vec::new();
    let mut consumed = 0usize;
    for message in legacy::entries(message_set) {
        let message = message?;
        consumed += message.entry.len();
        entries.push(message);
    }
    if consumed != message_set.len() {
        return Err(RecordError::Corrupt {
            reason: "trailing partial message in a produce request",
        });
    }
    let first = entries.first().ok_or(RecordError::InvalidRecord {
        reason: "produce request without messages",
    })?;
    let source_magic = first.magic;
    let mut source_compression = Compression::None;
    for message in &entries {
        if message.magic != source_magic {
            return Err(RecordError::InvalidRecord {
                reason: "messages of different magics in one set",
            });
        }
        if message.is_log_append_time() {
            return Err(RecordError::InvalidTimestamp {
                reason: "a producer may not set LogAppendTime",
            });
        }
        let codec = message.compression()?;
        if codec != Compression::None {
            if entries.len() != 1 {
                return Err(RecordError::InvalidRecord {
                    reason: "a compressed set must be exactly one wrapper",
                });
            }
            source_compression = codec;
        }
    }
    let deep_options = DeepOptions {
        verify_crc: true,
        decompressed_bytes_max: options.decompressed_bytes_max,
    };
    let mut records = Vec::new();
    for message in &entries {
        legacy::deep_entry(message, &deep_options, &mut records)?;
    }
    if records.is_empty() {
        return Err(RecordError::InvalidRecord {
            reason: "compressed wrapper without messages",
        });
    }
    let mut builder = BatchBuilder::new(0, options.compression.unwrap_or(source_compression));
    builder.log_append_time_ms = options.log_append_time_ms;
    for (delta, record) in records.iter().enumerate() {
        let offset_delta = i32::try_from(delta).map_err(|_| RecordError::InvalidRecord {
            reason: "more than 2^31 records in one set",
        })?;
        builder.push(&NewRecord {
            offset_delta,
            // v0 has no timestamp: −1 in v2.
            timestamp: if record.magic == Magic::V0 {
                -1
            } else {
                record.timestamp
            },
            key: record.key.as_deref(),
            value: record.value.as_deref(),
            headers: &[],
        })?;
    }
    Ok(UpConverted {
        batch: builder.build()?,
        records_count: records.len(),
        source_magic,
        source_compression,
        temporary_bytes: builder.uncompressed_bytes(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::legacy::{write_message, LegacySetBuilder};
    use crate::records::record::batch_records;
    use crate::records::v2::validate;

    fn records_of(batch: &[u8]) -> Vec<(i64, i64, Option<Vec<u8>>)> {
        let header = validate(batch).expect("valid v2");
        let mut scratch = Vec::new();
        batch_records(batch, &header, &mut scratch, 1 << 24)
            .expect("iter")
            .map(|r| r.map(|r| (r.offset, r.timestamp, r.value.map(<[u8]>::to_vec))))
            .collect::<Result<_, _>>()
            .expect("records")
    }

    fn legacy_set(magic: Magic, codec: Compression, offsets: &[i64]) -> Vec<u8> {
        let mut builder = LegacySetBuilder::new(magic, codec, None).expect("builder");
        for offset in offsets {
            builder
                .append(
                    *offset,
                    1000 + offset,
                    Some(b"k"),
                    Some(format!("v{offset}").as_bytes()),
                )
                .expect("append");
        }
        builder.finish().expect("finish");
        builder.into_buffer()
    }

    #[test]
    fn plain_and_compressed_sets_become_one_batch_with_fresh_offsets() {
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
        ] {
            for magic in [Magic::V0, Magic::V1] {
                // Producers write garbage offsets; the batch renumbers from 0.
                let set = legacy_set(magic, codec, &[7, 8, 20]);
                let converted = up_convert(&set, &UpConvertOptions::default()).expect("convert");
                assert_eq!(converted.records_count, 3);
                assert_eq!(converted.source_magic, magic);
                let got = records_of(&converted.batch);
                let expected_ts = |o: i64| if magic == Magic::V0 { -1 } else { 1000 + o };
                assert_eq!(
                    got,
                    vec![
                        (0, expected_ts(7), Some(b"v7".to_vec())),
                        (1, expected_ts(8), Some(b"v8".to_vec())),
                        (2, expected_ts(20), Some(b"v20".to_vec())),
                    ],
                    "{codec:?} {magic:?}"
                );
                let header = validate(&converted.batch).expect("valid");
                assert_eq!(header.compression().expect("codec"), codec);
            }
        }
    }

    #[test]
    fn log_append_time_and_target_codec() {
        let set = legacy_set(Magic::V1, Compression::None, &[0, 1]);
        let options = UpConvertOptions {
            log_append_time_ms: Some(5555),
            compression: Some(Compression::Zstd),
            ..UpConvertOptions::default()
        };
        let converted = up_convert(&set, &options).expect("convert");
        let header = validate(&converted.batch).expect("valid");
        assert!(header.is_log_append_time());
        assert_eq!(header.max_timestamp, 5555);
        assert_eq!(header.compression().expect("codec"), Compression::Zstd);
    }

    #[test]
    fn bad_crc_is_corrupt_message() {
        for codec in [Compression::None, Compression::Gzip] {
            let mut set = legacy_set(Magic::V1, codec, &[0, 1]);
            let last = set.len() - 1;
            set[last] ^= 0xff;
            let error = up_convert(&set, &UpConvertOptions::default()).expect_err("bad crc");
            assert_eq!(error.error_code(), 2, "{codec:?}");
        }
    }

    #[test]
    fn rule_breaks_map_to_kafka_codes() {
        let mut mixed = legacy_set(Magic::V0, Compression::None, &[0]);
        mixed.extend(legacy_set(Magic::V1, Compression::None, &[1]));
        assert_eq!(
            up_convert(&mixed, &UpConvertOptions::default()).map_err(|e| e.error_code()),
            Err(87)
        );
        let mut two_wrappers = legacy_set(Magic::V1, Compression::Gzip, &[0]);
        two_wrappers.extend(legacy_set(Magic::V1, Compression::Gzip, &[1]));
        assert_eq!(
            up_convert(&two_wrappers, &UpConvertOptions::default()).map_err(|e| e.error_code()),
            Err(87)
        );
        let mut lat = Vec::new();
        write_message(&mut lat, Magic::V1, 0, 0x08, 5, None, Some(b"x")).expect("write");
        assert_eq!(
            up_convert(&lat, &UpConvertOptions::default()).map_err(|e| e.error_code()),
            Err(32)
        );
        let mut zstd = Vec::new();
        write_message(&mut zstd, Magic::V1, 0, 0x04, 5, None, Some(b"x")).expect("write");
        assert_eq!(
            up_convert(&zstd, &UpConvertOptions::default()).map_err(|e| e.error_code()),
            Err(76)
        );
        let set = legacy_set(Magic::V1, Compression::None, &[0]);
        assert_eq!(
            up_convert(&set[..set.len() - 1], &UpConvertOptions::default())
                .map_err(|e| e.error_code()),
            Err(2)
        );
        assert_eq!(
            up_convert(&[], &UpConvertOptions::default()).map_err(|e| e.error_code()),
            Err(87)
        );
    }

    /// kafka-node 5.0.0 with its 0.9 table (Produce v1) and gzip: a magic 0 wrapper (offset 0,
    /// null key) around magic 1 messages whose offsets are all 0, byte for byte as its
    /// `encodeMessageSet`/`compress` write them.
    fn kafka_node_v1_gzip(wrapper_magic: Magic, inner_magic: Magic) -> Vec<u8> {
        let mut inner = Vec::new();
        for value in [&b"a"[..], b"bc"] {
            write_message(
                &mut inner,
                inner_magic,
                0,
                0,
                1_700_000_000_000,
                None,
                Some(value),
            )
            .expect("write");
        }
        let compressed =
            crate::records::compression::compress(Compression::Gzip, wrapper_magic, &inner)
                .expect("gzip");
        let mut wrapper = Vec::new();
        write_message(
            &mut wrapper,
            wrapper_magic,
            0,
            1,
            0,
            None,
            Some(&compressed),
        )
        .expect("write");
        wrapper
    }

    #[test]
    fn inner_magic_other_than_the_wrappers_is_invalid_record_as_in_kafka() {
        // Kafka 3.9 refuses both directions with INVALID_RECORD (LogValidatorTest.testMisMatchMagic
        // and testInvalidRecordExceptionHasBatchIndex: a gzip magic 0 wrapper of magic 1 records).
        for (wrapper, inner) in [(Magic::V0, Magic::V1), (Magic::V1, Magic::V0)] {
            let set = kafka_node_v1_gzip(wrapper, inner);
            assert_eq!(
                up_convert(&set, &UpConvertOptions::default()).map_err(|e| e.error_code()),
                Err(87),
                "{wrapper:?} wrapper, {inner:?} inner"
            );
        }
        // The same set with matching magics is accepted and renumbered.
        for magic in [Magic::V0, Magic::V1] {
            let set = kafka_node_v1_gzip(magic, magic);
            let converted = up_convert(&set, &UpConvertOptions::default()).expect("convert");
            let offsets: Vec<i64> = records_of(&converted.batch).iter().map(|r| r.0).collect();
            assert_eq!(offsets, [0, 1]);
        }
    }

    #[test]
    fn tiny_input_huge_count_is_an_error() {
        // A wrapper whose gzip stream expands past the cap, and a size field of 2 GiB.
        let zeros = vec![0u8; 1 << 20];
        let compressed =
            crate::records::compression::compress(Compression::Gzip, Magic::V1, &zeros)
                .expect("gzip");
        let mut wrapper = Vec::new();
        write_message(&mut wrapper, Magic::V1, 0, 1, 0, None, Some(&compressed)).expect("write");
        let options = UpConvertOptions {
            decompressed_bytes_max: 4096,
            ..UpConvertOptions::default()
        };
        assert!(up_convert(&wrapper, &options).is_err());
        let mut huge = vec![0u8; 8];
        huge.extend_from_slice(&i32::MAX.to_be_bytes());
        huge.extend_from_slice(&[0; 20]);
        assert_eq!(
            up_convert(&huge, &UpConvertOptions::default()).map_err(|e| e.error_code()),
            Err(2)
        );
    }
}
