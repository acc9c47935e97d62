//! Every edge case of docs/design/downconversion.md §6.1 that concerns the converter (named
//! `case_NN_…`) and every hex vector of §6.2 (`vector_vN_…`; real Kafka 3.9 output), plus the
//! property tests.

use super::*;
use crate::records::compression::decompress;
use crate::records::legacy::{deep_records, entries, write_message, LegacyRecord};
use crate::records::record::{BatchBuilder, NewRecord};
use proptest::prelude::*;

fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).expect("ascii"), 16).expect("hex"))
        .collect()
}

/// A v2 batch with records at `offsets` (base = first), value = offset as text, key "k".
fn batch(codec: Compression, offsets: &[i64], timestamp: impl Fn(i64) -> i64) -> Vec<u8> {
    let base = offsets.first().copied().unwrap_or(0);
    let mut builder = BatchBuilder::new(base, codec);
    for offset in offsets {
        let value = offset.to_string();
        builder
            .push(&NewRecord {
                offset_delta: i32::try_from(offset - base).expect("delta"),
                timestamp: timestamp(*offset),
                key: Some(b"k"),
                value: Some(value.as_bytes()),
                headers: &[(b"h", Some(b"x"))],
            })
            .expect("push");
    }
    builder.build().expect("build")
}

fn plain(offsets: &[i64]) -> Vec<u8> {
    batch(Compression::None, offsets, |offset| 1000 + offset)
}

/// A one-record batch at `offset`, timestamp 1, key "k", value "v" (the data batch of V9, §6.1.26).
fn kv_batch(offset: i64, codec: Compression) -> Vec<u8> {
    let mut builder = BatchBuilder::new(offset, codec);
    builder
        .push(&NewRecord {
            offset_delta: 0,
            timestamp: 1,
            key: Some(b"k"),
            value: Some(b"v"),
            headers: &[],
        })
        .expect("push");
    builder.build().expect("build")
}

/// A transaction marker (control batch) at `offset`: COMMIT (1) or ABORT (0).
fn marker(offset: i64, commit: bool) -> Vec<u8> {
    let mut builder = BatchBuilder::new(offset, Compression::None);
    builder.control = true;
    builder.transactional = true;
    builder.producer_id = 7;
    builder.producer_epoch = 0;
    let key = [0, 0, 0, u8::from(commit)];
    builder
        .push(&NewRecord {
            offset_delta: 0,
            timestamp: 1,
            key: Some(&key),
            value: Some(&[0, 0, 0, 0, 0, 0]),
            headers: &[],
        })
        .expect("push");
    builder.build().expect("build")
}

fn eager(slice: &[u8], target: Magic, fetch_offset: i64) -> Vec<u8> {
    down_convert_eager(slice, target, fetch_offset, &DownConvertConfig::default())
        .expect("eager")
        .0
}

/// Converts lazily with the default config, checks it against eager, returns the output.
fn convert(slice: &[u8], target: Magic, fetch_offset: i64) -> Vec<u8> {
    let (declared, out, _) =
        down_convert_lazy(slice, target, fetch_offset, DownConvertConfig::default()).expect("lazy");
    assert_eq!(u64::try_from(out.len()).expect("len"), declared);
    assert_eq!(out, eager(slice, target, fetch_offset));
    out
}

/// `src` followed by a cut entry as long as itself (a log read that ended mid-batch), so the
/// declared size leaves room for conversion growth and every record arrives.
fn with_slack(src: &[u8]) -> Vec<u8> {
    let mut out = src.to_vec();
    let mut tail = vec![0u8; src.len().max(12) * 2];
    tail[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
    out.extend(tail);
    out
}

fn records(output: &[u8]) -> Vec<LegacyRecord> {
    deep_records(output, &DeepOptions::default()).expect("decodable output")
}

fn offsets(output: &[u8]) -> Vec<i64> {
    records(output).iter().map(|record| record.offset).collect()
}

fn magics(output: &[u8]) -> Vec<Magic> {
    entries(output)
        .map(|entry| entry.expect("entry").magic)
        .collect()
}

fn legacy_plain(magic: Magic, offsets: &[i64]) -> Vec<u8> {
    let mut out = Vec::new();
    for offset in offsets {
        write_message(
            &mut out,
            magic,
            *offset,
            0,
            1000 + offset,
            Some(b"k"),
            Some(offset.to_string().as_bytes()),
        )
        .expect("write");
    }
    out
}

#[test]
fn vector_v1_to_v0_and_v1_with_stats() {
    let src = hex("00000000000000050000003effffffff0285d4936f00000000000000000000000003e800000000000003e8ffffffffffffffffffffffffffff0000000118000000026b02760202680278");
    let v0 = convert(&src, Magic::V0, 0);
    assert_eq!(
        v0[..28],
        hex("0000000000000005 00000010 1fecd70a 00 00 00000001 6b 00000001 76")[..]
    );
    let (declared, v1, stats) =
        down_convert_lazy(&src, Magic::V1, 0, DownConvertConfig::default()).expect("v1");
    assert_eq!(declared, 74);
    assert_eq!(
        v1[..36],
        hex("0000000000000005 00000018 e4e321bc 01 00 00000000000003e8 00000001 6b 00000001 76")[..]
    );
    // The rest (38 bytes) is one overflow entry: remaining + 1 = 39 < 61.
    assert_eq!(v1[36..48], hex("ffffffffffffffff 0000003d")[..]);
    assert!(v1[48..].iter().all(|byte| *byte == 0));
    assert_eq!(stats.records_converted, 1);
    assert_eq!(stats.temporary_bytes, 110);
}

#[test]
fn case_01_02_03_magic_timestamps_and_headers() {
    let src = plain(&[0, 1, 2]);
    let v0 = records(&convert(&src, Magic::V0, 0));
    assert!(v0.iter().all(|r| r.magic == Magic::V0 && r.timestamp == -1));
    let v1 = records(&convert(&src, Magic::V1, 0));
    assert_eq!(
        v1.iter().map(|r| r.timestamp).collect::<Vec<_>>(),
        vec![1000, 1001, 1002]
    );
    assert_eq!(v1[2].key.as_deref(), Some(&b"k"[..]));
    assert_eq!(v1[2].value.as_deref(), Some(&b"2"[..]));
}

#[test]
fn case_04_codec_is_preserved() {
    for codec in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
    ] {
        let src = batch(codec, &[0, 1, 2], |offset| offset);
        for target in [Magic::V0, Magic::V1] {
            let out = convert(&src, target, 0);
            let first = entries(&out).next().expect("entry").expect("ok");
            assert_eq!(first.compression().expect("codec"), codec);
            assert!(records(&out).iter().all(|r| r.compression == codec));
        }
    }
}

#[test]
fn case_05_non_contiguous_offsets_survive() {
    let all = [0, 2, 3, 9, 11, 15, 16, 17, 22, 24];
    for codec in [Compression::None, Compression::Gzip] {
        let mut src = batch(codec, &all[..3], |o| o);
        src.extend(batch(codec, &all[3..6], |o| o));
        src.extend(batch(codec, &all[6..], |o| o));
        for target in [Magic::V0, Magic::V1] {
            assert_eq!(offsets(&convert(&with_slack(&src), target, 0)), all);
        }
    }
}

/// A compacted log's batches (KIP-534): a cleaner wrote a delete horizon into the base
/// timestamp (attribute bit 6) and re-based the deltas, kept a tombstone, left gaps, and kept an
/// idle producer's last batch empty. Down-conversion keeps each message's own offset and
/// timestamp (base + delta, never the horizon), skips the empty batch, and a legacy consumer
/// whose fetch offset falls in a gap gets the next record.
#[test]
fn a_compacted_log_with_a_delete_horizon_converts_with_each_records_own_offset_and_time() {
    for codec in [Compression::None, Compression::Gzip] {
        let mut builder = BatchBuilder::new(10, codec);
        builder.set_delete_horizon(9_999_999).expect("horizon");
        builder.override_last_offset_delta(9);
        for (delta, timestamp, value) in [
            (2, 1_002, Some(&b"a"[..])),
            (5, 1_005, None),
            (7, 900, Some(b"c")),
        ] {
            builder
                .push(&NewRecord {
                    offset_delta: delta,
                    timestamp,
                    key: Some(b"k"),
                    value,
                    headers: &[],
                })
                .expect("push");
        }
        let mut src = builder.build().expect("build");
        // An empty batch (offsets 20..=21), then a plain one at 30.
        let mut empty = BatchBuilder::new(20, Compression::None);
        empty.override_last_offset_delta(1);
        src.extend(empty.build().expect("empty"));
        src.extend(batch(codec, &[30], |offset| 2_000 + offset));
        for target in [Magic::V0, Magic::V1] {
            let out = convert(&with_slack(&src), target, 0);
            let got: Vec<(i64, i64, bool)> = records(&out)
                .iter()
                .map(|record| (record.offset, record.timestamp, record.value.is_none()))
                .collect();
            let time = |t: i64| if target == Magic::V1 { t } else { -1 };
            assert_eq!(
                got,
                vec![
                    (12, time(1_002), false),
                    (15, time(1_005), true),
                    (17, time(900), false),
                    (30, time(2_030), false),
                ],
                "{codec:?} to {target:?}"
            );
            if codec == Compression::None {
                // A fetch from inside a gap starts at the next record.
                assert_eq!(
                    offsets(&convert(&with_slack(&src), target, 13)),
                    [15, 17, 30]
                );
                assert_eq!(offsets(&convert(&with_slack(&src), target, 18)), [30]);
            }
        }
    }
}

/// [v0 entries 0,2,3][v1 entries 9,11,15][v2 batch 16,17,22,24], uncompressed.
fn mixed_formats() -> Vec<u8> {
    let mut src = legacy_plain(Magic::V0, &[0, 2, 3]);
    src.extend(legacy_plain(Magic::V1, &[9, 11, 15]));
    src.extend(plain(&[16, 17, 22, 24]));
    with_slack(&src)
}

#[test]
fn case_06_mixed_formats_copy_old_and_convert_new() {
    let src = mixed_formats();
    let to_v0 = convert(&src, Magic::V0, 0);
    assert!(magics(&to_v0).iter().all(|m| *m == Magic::V0));
    assert_eq!(to_v0[..60], src[..60], "v0 entries are copied verbatim");
    let to_v1 = convert(&src, Magic::V1, 0);
    assert_eq!(
        magics(&to_v1),
        [[Magic::V0; 3].as_slice(), &[Magic::V1; 7]].concat()
    );
    assert_eq!(offsets(&to_v1), vec![0, 2, 3, 9, 11, 15, 16, 17, 22, 24]);
}

#[test]
fn case_07_to_v0_first_offset_11_drops_only_converted_records_below_it() {
    assert_eq!(
        offsets(&convert(&mixed_formats(), Magic::V0, 11)),
        vec![0, 2, 3, 11, 15, 16, 17, 22, 24]
    );
}

#[test]
fn case_08_to_v1_first_offset_17_drops_only_record_16() {
    assert_eq!(
        offsets(&convert(&mixed_formats(), Magic::V1, 17)),
        vec![0, 2, 3, 9, 11, 15, 17, 22, 24]
    );
}

#[test]
fn case_09_compressed_sources_ignore_the_fetch_offset() {
    let src = batch(Compression::Gzip, &[0, 1, 2, 3], |o| o);
    assert_eq!(offsets(&convert(&src, Magic::V1, 10)), vec![0, 1, 2, 3]);
    assert_eq!(offsets(&convert(&src, Magic::V0, 2)), vec![0, 1, 2, 3]);
}

#[test]
fn case_10_every_chunk_size_gives_the_same_bytes() {
    let mut src = Vec::new();
    for base in 0..20 {
        src.extend(batch(
            if base % 3 == 0 {
                Compression::Gzip
            } else {
                Compression::None
            },
            &[base * 10, base * 10 + 4],
            |o| o,
        ));
    }
    let max_batch = 200;
    let reference = eager(&src, Magic::V1, 0);
    for chunk_bytes in [
        16 * 1024,
        src.len(),
        src.len() - 1,
        src.len() / 4,
        max_batch + 1,
        1,
    ] {
        let config = DownConvertConfig {
            chunk_bytes,
            ..DownConvertConfig::default()
        };
        let (_, out, _) = down_convert_lazy(&src, Magic::V1, 0, config).expect("lazy");
        assert_eq!(out, reference, "chunk {chunk_bytes}");
    }
}

#[test]
fn case_11_declared_larger_than_data_ends_in_padding() {
    let mut src = plain(&[0, 1]);
    let data = src.len();
    // A cut batch of the same size again as the tail of the slice.
    let mut tail = plain(&[2, 3]);
    tail.truncate(data - 1);
    src.extend(&tail);
    let out = convert(&src, Magic::V1, 0);
    assert_eq!(out.len(), src.len());
    assert_eq!(offsets(&out), vec![0, 1]);
    let pad_at = 2 * 36;
    assert_eq!(out[pad_at..pad_at + 8], [0xff; 8]);
}

#[test]
fn case_12_and_vector_v8_commit_marker_only_is_an_empty_set_d2() {
    // Kafka writes 12 bytes of padding (V8), which old Java clients turn into an exception. Skiff
    // answers with an empty set (D2, module doc); the padding layout itself is still Kafka's.
    let src = marker(0, true);
    let (declared, out, _) =
        down_convert_lazy(&src, Magic::V1, 0, DownConvertConfig::default()).expect("lazy");
    assert_eq!((declared, out.len()), (0, 0));
    assert!(eager(&src, Magic::V1, 0).is_empty());
    assert_eq!(overflow_piece(12), hex("ffffffffffffffff 0000003d"));
}

#[test]
fn case_13_empty_slice_declares_zero() {
    assert_eq!(
        down_convert_lazy(&[], Magic::V0, 0, DownConvertConfig::default())
            .expect("lazy")
            .0,
        0
    );
}

#[test]
fn case_14_slice_cut_inside_the_first_batch_and_no_more_source_is_empty() {
    let src = plain(&[0, 1]);
    for serve_oversized_first_batch in [true, false] {
        let config = DownConvertConfig {
            serve_oversized_first_batch,
            ..DownConvertConfig::default()
        };
        let (declared, out, _) =
            down_convert_lazy(&src[..src.len() - 1], Magic::V1, 0, config).expect("lazy");
        assert_eq!((declared, out.len()), (0, 0));
    }
}

#[test]
fn case_15_interleaved_formats_after_a_downgrade_grow_the_buffer() {
    let big = vec![b'x'; 3000];
    let mut builder = BatchBuilder::new(0, Compression::Gzip);
    builder
        .push(&NewRecord {
            offset_delta: 0,
            timestamp: 5,
            key: None,
            value: Some(&big),
            headers: &[],
        })
        .expect("push");
    let mut src = builder.build().expect("v2");
    let mut v1 = LegacySetBuilder::new(Magic::V1, Compression::Gzip, None).expect("v1");
    v1.append(1, 6, None, Some(&big)).expect("append");
    v1.finish().expect("finish");
    src.extend(v1.into_buffer());
    let out = convert(&src, Magic::V1, 0);
    let got = records(&out);
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|r| r.value.as_deref() == Some(&big[..])));
}

fn mixed_time_types(codec: Compression) -> Vec<u8> {
    let mut lat = BatchBuilder::new(0, codec);
    lat.log_append_time_ms = Some(5555);
    lat.push(&NewRecord {
        offset_delta: 0,
        timestamp: 1,
        key: None,
        value: Some(b"a"),
        headers: &[],
    })
    .expect("push");
    let mut src = lat.build().expect("lat");
    src.extend(marker(1, false));
    src.extend(batch(codec, &[2, 3], |o| 100 + o));
    src.extend(marker(4, true));
    src
}

#[test]
fn case_16_mixed_create_and_log_append_time_with_markers() {
    let uncompressed = convert(&mixed_time_types(Compression::None), Magic::V1, 0);
    let got = records(&uncompressed);
    assert_eq!(
        got.iter()
            .map(|r| (r.offset, r.timestamp, r.log_append_time))
            .collect::<Vec<_>>(),
        vec![(0, 5555, true), (2, 102, false), (3, 103, false)]
    );
    let compressed = convert(&mixed_time_types(Compression::Gzip), Magic::V1, 0);
    assert_eq!(entries(&compressed).count(), 2);
    assert_eq!(offsets(&compressed), vec![0, 2, 3]);
}

#[test]
fn case_17_zstd_first_batch_is_76() {
    let src = mixed_time_types(Compression::Zstd);
    let error =
        down_convert_lazy(&src, Magic::V1, 0, DownConvertConfig::default()).expect_err("zstd");
    assert_eq!(error.error_code(), 76);
    assert_eq!(
        down_convert_eager(&src, Magic::V1, 0, &DownConvertConfig::default())
            .map_err(|e| e.error_code())
            .err(),
        Some(76)
    );
}

#[test]
fn case_18_v0_message_then_v2_batch_to_v1() {
    let mut src = legacy_plain(Magic::V0, &[0]);
    src.extend(plain(&[1, 2]));
    let out = convert(&src, Magic::V1, 2);
    assert_eq!(offsets(&out), vec![0, 2]);
    assert_eq!(magics(&out), vec![Magic::V0, Magic::V1]);
    let mut v0_wrapper = LegacySetBuilder::new(Magic::V0, Compression::Gzip, None).expect("v0");
    v0_wrapper.append(0, -1, None, Some(b"a")).expect("append");
    v0_wrapper.finish().expect("finish");
    let mut src = v0_wrapper.into_buffer();
    src.extend(batch(Compression::Gzip, &[1, 2], |o| o));
    let out = convert(&src, Magic::V1, 2);
    assert_eq!(magics(&out), vec![Magic::V0, Magic::V1]);
    assert_eq!(offsets(&out), vec![0, 1, 2]);
}

#[test]
fn case_19_stats_count_only_re_encoded_records() {
    let mut src = legacy_plain(Magic::V1, &[0, 1]);
    src.extend(plain(&[2, 3, 4]));
    let (_, _, stats) =
        down_convert_lazy(&src, Magic::V1, 0, DownConvertConfig::default()).expect("lazy");
    assert_eq!(stats.records_converted, 3);
    assert!(stats.temporary_bytes >= u64::try_from(src.len()).expect("len"));
}

#[test]
fn case_22_and_27_zstd_after_data_pads_then_refuses() {
    let mut src = kv_batch(0, Compression::Gzip);
    src.extend(kv_batch(1, Compression::Zstd));
    src.extend(kv_batch(2, Compression::Zstd));
    let out = convert(&src, Magic::V1, 0);
    assert_eq!(offsets(&out), vec![0]);
    let at_one = src.len() - 2 * kv_batch(1, Compression::Zstd).len();
    let error = down_convert_lazy(&src[at_one..], Magic::V1, 1, DownConvertConfig::default())
        .expect_err("76");
    assert_eq!(error.error_code(), 76);
}

#[test]
fn case_23_fetch_inside_an_uncompressed_batch_starts_exactly_there() {
    let offsets_10: Vec<i64> = (0..10).collect();
    let offsets_15: Vec<i64> = (10..25).collect();
    let mut src = plain(&offsets_10);
    src.extend(plain(&offsets_15));
    for (fetch, target) in [
        (3, Magic::V0),
        (15, Magic::V0),
        (3, Magic::V1),
        (15, Magic::V1),
    ] {
        assert_eq!(offsets(&convert(&src, target, fetch)).first(), Some(&fetch));
    }
}

#[test]
fn case_25_and_vector_v10_marker_then_data_is_delivered_once_d1() {
    let mut src = marker(0, true);
    src.extend(plain(&[1, 2, 3]));
    src.extend(plain(&[4, 5]));
    for target in [Magic::V0, Magic::V1] {
        assert_eq!(
            offsets(&convert(&with_slack(&src), target, 0)),
            vec![1, 2, 3, 4, 5]
        );
    }
}

#[test]
fn case_26_data_then_marker_pads_with_remaining_plus_one() {
    let mut src = kv_batch(0, Compression::None);
    src.extend(marker(1, true));
    assert_eq!(src.len(), 148);
    let out = convert(&src, Magic::V1, 0);
    assert_eq!(
        out[..36],
        hex("000000000000000000000018cf056e6e01000000000000000001000000016b0000000176")[..]
    );
    assert_eq!(out[36..48], hex("ffffffffffffffff 00000071")[..]);
    assert!(out[48..].iter().all(|b| *b == 0));
}

#[test]
fn vector_v9_data_then_zstd() {
    let mut src = kv_batch(0, Compression::None);
    src.extend(kv_batch(1, Compression::Zstd));
    let out = convert(&src, Magic::V1, 0);
    let declared = src.len();
    assert_eq!(out.len(), declared);
    assert_eq!(
        out[..36],
        hex("000000000000000000000018cf056e6e01000000000000000001000000016b0000000176")[..]
    );
    let length = i32::try_from(declared - 36 + 1).expect("len");
    assert_eq!(out[36..44], [0xff; 8]);
    assert_eq!(out[44..48], length.to_be_bytes());
    assert!(out[48..].iter().all(|b| *b == 0));
}

#[test]
fn case_28_padding_over_128_kib_repeats_headers_at_128_kib_strides() {
    // 300 058 declared, 36 bytes of data (the [ran] example of §3.5).
    let mut src = kv_batch(0, Compression::None);
    let mut tail = vec![0u8; 300_058 - src.len()];
    tail[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
    src.extend(tail);
    let out = convert(&src, Magic::V1, 0);
    assert_eq!(out.len(), 300_058);
    for (at, length) in [(36usize, 300_023i32), (131_108, 168_951), (262_180, 37_879)] {
        assert_eq!(out[at..at + 8], [0xff; 8], "header at {at}");
        assert_eq!(out[at + 8..at + 12], length.to_be_bytes(), "length at {at}");
    }
    let (_, _, stats) =
        down_convert_lazy(&src, Magic::V1, 0, DownConvertConfig::default()).expect("lazy");
    assert!(stats.largest_source_piece_bytes <= DOWN_CONVERT_CHUNK_BYTES);
}

#[test]
fn case_29_remaining_below_12_writes_a_header_prefix() {
    assert_eq!(overflow_piece(5), vec![0xff; 5]);
    assert_eq!(overflow_piece(11), hex("ffffffffffffffff 000000"));
    assert_eq!(overflow_piece(0), Vec::<u8>::new());
}

#[test]
fn case_30_first_chunk_larger_than_the_slice_sets_the_declared_size() {
    let mut builder = BatchBuilder::new(0, Compression::None);
    for delta in 0..200 {
        builder
            .push(&NewRecord {
                offset_delta: delta,
                timestamp: 0,
                key: None,
                value: Some(b"x"),
                headers: &[],
            })
            .expect("push");
    }
    let src = builder.build().expect("build");
    let (declared, out, _) =
        down_convert_lazy(&src, Magic::V1, 0, DownConvertConfig::default()).expect("lazy");
    assert_eq!(declared, 7000);
    assert!(declared > u64::try_from(src.len()).expect("len"));
    assert_eq!(offsets(&out).len(), 200);
}

#[test]
fn case_31_later_chunk_is_cut_at_the_declared_size() {
    let mut src = kv_batch(0, Compression::None);
    let mut builder = BatchBuilder::new(1, Compression::None);
    for delta in 0..200 {
        builder
            .push(&NewRecord {
                offset_delta: delta,
                timestamp: 0,
                key: None,
                value: Some(b"x"),
                headers: &[],
            })
            .expect("push");
    }
    src.extend(builder.build().expect("build"));
    let out = convert(&src, Magic::V1, 0);
    assert_eq!(out.len(), src.len());
    let complete = (src.len() - 36) / 35;
    let got = offsets(&out);
    assert_eq!(got.len(), 1 + complete);
    // The client's next fetch is the last complete offset + 1; it resumes exactly there.
    let next = got.last().expect("some") + 1;
    let resumed = offsets(&convert(&src[70..], Magic::V1, next));
    assert_eq!(resumed.first(), Some(&next));
}

#[test]
fn case_32_and_vector_v3_log_append_time() {
    let mut builder = BatchBuilder::new(10, Compression::None);
    builder.log_append_time_ms = Some(5555);
    builder
        .push(&NewRecord {
            offset_delta: 0,
            timestamp: 1,
            key: Some(b"a"),
            value: Some(b"1"),
            headers: &[],
        })
        .expect("push");
    builder
        .push(&NewRecord {
            offset_delta: 1,
            timestamp: 2,
            key: Some(b"b"),
            value: Some(b"2"),
            headers: &[],
        })
        .expect("push");
    let src = builder.build().expect("build");
    let out = convert(&src, Magic::V1, 0);
    assert_eq!(out[..72], hex("000000000000000a 00000018 1cdbd910 01 08 00000000000015b3 00000001 61 00000001 31 000000000000000b 00000018 0346fa04 01 08 00000000000015b3 00000001 62 00000001 32")[..]);
}

#[test]
fn case_33_34_and_vector_v4_compacted_gzip_keeps_gaps() {
    let src = batch(Compression::Gzip, &[100, 103, 107], |o| match o {
        100 => 7,
        103 => 8,
        _ => 9,
    });
    let v1 = convert(&src, Magic::V1, 104);
    let wrapper = entries(&v1).next().expect("one").expect("ok");
    assert_eq!((wrapper.offset, wrapper.timestamp), (107, 9));
    let inner = decompress(
        Compression::Gzip,
        Magic::V1,
        wrapper.value.expect("value"),
        1 << 20,
    )
    .expect("gzip");
    assert_eq!(
        entries(&inner)
            .map(|m| m.expect("m").offset)
            .collect::<Vec<_>>(),
        vec![0, 3, 7]
    );
    assert_eq!(offsets(&v1), vec![100, 103, 107]);
    let v0 = convert(&src, Magic::V0, 104);
    let wrapper = entries(&v0).next().expect("one").expect("ok");
    assert_eq!(wrapper.offset, 107);
    let inner = decompress(
        Compression::Gzip,
        Magic::V0,
        wrapper.value.expect("value"),
        1 << 20,
    )
    .expect("gzip");
    assert_eq!(
        entries(&inner)
            .map(|m| m.expect("m").offset)
            .collect::<Vec<_>>(),
        vec![100, 103, 107]
    );
}

#[test]
fn vector_v5_fetch_offset_2_of_uncompressed_0_to_3() {
    assert_eq!(
        offsets(&convert(&plain(&[0, 1, 2, 3]), Magic::V0, 2)),
        vec![2, 3]
    );
}

#[test]
fn case_35_and_vectors_v6_v7_frame_headers() {
    let lz4 = kv_batch(0, Compression::Lz4);
    for (target, checksum, inner) in [
        (
            Magic::V0,
            0x1a,
            "0000000000000000 00000010 1fecd70a 00 00 00000001 6b 00000001 76",
        ),
        (
            Magic::V1,
            0x82,
            "0000000000000000 00000018 cf056e6e 01 00 0000000000000001 00000001 6b 00000001 76",
        ),
    ] {
        let out = convert(&lz4, target, 0);
        let wrapper = entries(&out).next().expect("one").expect("ok");
        let value = wrapper.value.expect("value");
        assert_eq!(value[..7], [0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, checksum]);
        assert!(value.ends_with(&[0, 0, 0, 0]));
        assert_eq!(
            decompress(Compression::Lz4, target, value, 1 << 20).expect("lz4"),
            hex(inner)
        );
    }
    let out = convert(&kv_batch(0, Compression::Snappy), Magic::V1, 0);
    let value = entries(&out)
        .next()
        .expect("one")
        .expect("ok")
        .value
        .expect("value");
    assert_eq!(value[..16], hex("82534e4150505900 00000001 00000001")[..]);
}

#[test]
fn case_37_d4_first_batch_past_the_slice_is_served_whole() {
    // The broker's log read was cut at partition_max_bytes inside the first batch; the converter
    // asks for the whole batch (past the slice) and serves it.
    let src = plain(&[0, 1, 2]);
    let slice_bytes = 40u64;
    let mut converter =
        DownConverter::new(slice_bytes, Magic::V1, 0, DownConvertConfig::default()).expect("new");
    let mut asked_past_the_slice = false;
    let declared = loop {
        match converter.prepare_step().expect("prepare") {
            Prepare::Read(range) => {
                let end = usize::try_from(range.start).expect("start") + range.len;
                asked_past_the_slice |= u64::try_from(end).expect("end") > slice_bytes;
                converter
                    .feed(&src[usize::try_from(range.start).expect("start")..end.min(src.len())])
                    .expect("feed");
            }
            Prepare::Ready(prepared) => break prepared.declared_bytes,
        }
    };
    assert!(asked_past_the_slice);
    let mut out = Vec::new();
    while let Write::Output(piece) = converter.write_step().expect("write") {
        out.extend(piece);
    }
    assert_eq!(u64::try_from(out.len()).expect("len"), declared);
    assert_eq!(offsets(&out), vec![0, 1, 2]);
    // Without the option (Kafka 3.x behaviour) the set is empty.
    let config = DownConvertConfig {
        serve_oversized_first_batch: false,
        ..DownConvertConfig::default()
    };
    let mut converter = DownConverter::new(slice_bytes, Magic::V1, 0, config).expect("new");
    let declared = loop {
        match converter.prepare_step().expect("prepare") {
            Prepare::Read(range) => converter.feed(&src[..range.len]).expect("feed"),
            Prepare::Ready(prepared) => break prepared.declared_bytes,
        }
    };
    assert_eq!(declared, 0);
}

#[test]
fn case_38_aborted_transactional_data_is_returned_markers_are_not() {
    let mut builder = BatchBuilder::new(0, Compression::None);
    builder.transactional = true;
    builder.producer_id = 7;
    builder
        .push(&NewRecord {
            offset_delta: 0,
            timestamp: 1,
            key: None,
            value: Some(b"aborted"),
            headers: &[],
        })
        .expect("push");
    let mut src = builder.build().expect("build");
    src.extend(marker(1, false));
    src.extend(plain(&[2]));
    assert_eq!(offsets(&convert(&src, Magic::V1, 0)), vec![0, 2]);
}

#[test]
fn case_40_timestamps_below_minus_one_do_not_fail_d7() {
    let src = batch(Compression::None, &[0], |_| -5);
    let got = records(&convert(&src, Magic::V1, 0));
    assert_eq!(got[0].timestamp, -1);
}

#[test]
fn d3_compacted_records_all_below_the_fetch_offset_then_data() {
    let mut src = plain(&[0, 2]);
    src.extend(plain(&[9, 10]));
    assert_eq!(offsets(&convert(&src, Magic::V1, 5)), vec![9, 10]);
    let only = plain(&[0, 2]);
    let (declared, _, _) =
        down_convert_lazy(&only, Magic::V1, 5, DownConvertConfig::default()).expect("lazy");
    assert_eq!(declared, 0);
}

#[test]
fn corrupt_first_batch_is_an_error_and_corrupt_later_batch_pads() {
    let mut bad = plain(&[0]);
    let last = bad.len() - 1;
    bad[last - 3] = 0x7f; // a varint that now overruns the record
    assert!(down_convert_lazy(&bad, Magic::V1, 0, DownConvertConfig::default()).is_err());
    let mut src = plain(&[0]);
    src.extend(&bad);
    let out = convert(&src, Magic::V1, 0);
    assert_eq!(offsets(&out), vec![0]);
}

#[test]
fn tiny_input_huge_count_is_an_error() {
    // A batch length of 2 GiB at the start of a slice: the converter asks for at most
    // batch_bytes_max and errors instead of allocating.
    let mut src = plain(&[0]);
    src[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
    let config = DownConvertConfig {
        batch_bytes_max: 1 << 20,
        ..DownConvertConfig::default()
    };
    let mut converter = DownConverter::new(1 << 40, Magic::V1, 0, config).expect("new");
    let Prepare::Read(range) = converter.prepare_step().expect("step") else {
        panic!("expected a read")
    };
    assert!(range.len <= DOWN_CONVERT_CHUNK_BYTES);
    assert!(converter.feed(&src).is_err());
    // A records count of 2^31 − 1 in a small batch.
    let mut src = plain(&[0]);
    src[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    assert!(down_convert_lazy(&src, Magic::V1, 0, DownConvertConfig::default()).is_err());
}

/// Batches of `records` 1 KiB records each, offsets from 0.
fn kib_batches(batch_count: i64, records: i32) -> Vec<u8> {
    let mut src = Vec::new();
    for index in 0..batch_count {
        let mut builder = BatchBuilder::new(index * i64::from(records), Compression::None);
        for delta in 0..records {
            builder
                .push(&NewRecord {
                    offset_delta: delta,
                    timestamp: 0,
                    key: None,
                    value: Some(&[7u8; 1024]),
                    headers: &[],
                })
                .expect("push");
        }
        src.extend(builder.build().expect("build"));
    }
    src
}

/// Runs the prepare phase alone over `src` and returns the ranges it read.
fn prepare_reads(src: &[u8]) -> Vec<SourceRange> {
    let mut converter = DownConverter::new(
        u64::try_from(src.len()).expect("len"),
        Magic::V1,
        0,
        DownConvertConfig::default(),
    )
    .expect("new");
    let mut reads = Vec::new();
    while let Prepare::Read(range) = converter.prepare_step().expect("step") {
        reads.push(range);
        let start = usize::try_from(range.start).expect("start");
        let end = (start + range.len).min(src.len());
        converter.feed(&src[start..end]).expect("feed");
    }
    reads
}

#[test]
fn prepare_reads_one_batch_not_a_chunk() {
    // Batches of 16 KiB: a small first read tells the first batch's length, then exactly that
    // batch is read; nothing of the second batch.
    let src = kib_batches(64, 16);
    let first_batch = legacy::entry_bytes(&src).expect("entry").expect("some");
    let reads = prepare_reads(&src);
    assert_eq!(reads.len(), 2, "{reads:?}");
    assert!(reads[0].len as u64 <= PREPARE_READ_BYTES_MAX);
    assert_eq!((reads[1].start, reads[1].len), (0, first_batch));
    // Batches smaller than the first read: one read takes the first batch whole.
    let src = kib_batches(64, 1);
    let reads = prepare_reads(&src);
    assert_eq!(reads.len(), 1, "{reads:?}");
    assert_eq!(reads[0].len as u64, PREPARE_READ_BYTES_MAX);
}

#[test]
fn memory_is_one_chunk_of_source_and_its_output() {
    let src = kib_batches(400, 4);
    for chunk_bytes in [16 * 1024, 128 * 1024] {
        let config = DownConvertConfig {
            chunk_bytes,
            ..DownConvertConfig::default()
        };
        let (_, out, stats) =
            down_convert_lazy(&with_slack(&src), Magic::V1, 0, config).expect("lazy");
        assert_eq!(offsets(&out).len(), 1600);
        assert!(stats.largest_source_piece_bytes <= chunk_bytes, "{stats:?}");
        // The converted copy of one chunk: each 1 KiB record grows by a few dozen bytes.
        assert!(
            stats.largest_output_piece_bytes <= chunk_bytes + chunk_bytes / 10,
            "{stats:?}"
        );
    }
}

/// (offset, timestamp, key, value) of a source record.
type Expected = (i64, i64, Option<Vec<u8>>, Option<Vec<u8>>);

fn arbitrary_slice() -> impl Strategy<Value = (Vec<u8>, Vec<Expected>)> {
    let record = (
        0i64..3,
        0i64..1 << 40,
        prop::option::of(prop::collection::vec(any::<u8>(), 0..8)),
        prop::option::of(prop::collection::vec(any::<u8>(), 0..64)),
    );
    let batch_strategy = (
        prop::sample::select(vec![
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
        ]),
        prop::collection::vec(record, 1..8),
        any::<bool>(),
    );
    prop::collection::vec(batch_strategy, 0..8).prop_map(|batches| {
        let mut src = Vec::new();
        let mut expected = Vec::new();
        let mut next = 0i64;
        for (codec, records, control) in batches {
            if control {
                src.extend(marker(next, true));
                next += 1;
                continue;
            }
            let mut builder = BatchBuilder::new(next, codec);
            let mut delta = 0i64;
            for (gap, timestamp, key, value) in &records {
                builder
                    .push(&NewRecord {
                        offset_delta: i32::try_from(delta).expect("delta"),
                        timestamp: *timestamp,
                        key: key.as_deref(),
                        value: value.as_deref(),
                        headers: &[(b"h", None)],
                    })
                    .expect("push");
                expected.push((next + delta, *timestamp, key.clone(), value.clone()));
                delta += gap + 1;
            }
            next += delta;
            src.extend(builder.build().expect("build"));
        }
        (src, expected)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn converted_output_decodes_to_the_source_records(
        (src, expected) in arbitrary_slice(),
        target in prop::sample::select(vec![Magic::V0, Magic::V1]),
    ) {
        // A fetch at offset 0 with the declared size at least the slice: every record fits unless
        // conversion grows data past the declared size, in which case a prefix arrives.
        let out = eager(&src, target, 0);
        let got = records(&out);
        prop_assert!(got.len() <= expected.len());
        for (record, (offset, timestamp, key, value)) in got.iter().zip(&expected) {
            prop_assert_eq!(record.offset, *offset);
            prop_assert_eq!(&record.key, key);
            prop_assert_eq!(&record.value, value);
            prop_assert_eq!(record.timestamp, if target == Magic::V0 { -1 } else { *timestamp });
        }
        if u64::try_from(out.len()).expect("len") >= 2 * u64::try_from(src.len()).expect("len") {
            prop_assert_eq!(got.len(), expected.len());
        }
    }

    #[test]
    fn any_chunk_size_equals_eager_and_writes_exactly_the_declared_size(
        (src, _) in arbitrary_slice(),
        chunk_bytes in 1usize..4096,
        cut in 0usize..64,
        fetch_offset in 0i64..20,
        target in prop::sample::select(vec![Magic::V0, Magic::V1]),
    ) {
        let src = &src[..src.len().saturating_sub(cut)];
        let config = DownConvertConfig { chunk_bytes, ..DownConvertConfig::default() };
        let (declared, lazy, stats) = down_convert_lazy(src, target, fetch_offset, config).expect("lazy");
        prop_assert_eq!(u64::try_from(lazy.len()).expect("len"), declared);
        let (reference, _) = down_convert_eager(src, target, fetch_offset, &config).expect("eager");
        prop_assert_eq!(&lazy, &reference);
        // One fed piece is at most a chunk, or one batch (whole, or the slice's cut tail).
        let (whole_bytes, largest) = entries_len(src);
        let bound = chunk_bytes.max(BATCH_HEADER_BYTES).max(largest).max(src.len() - whole_bytes);
        prop_assert!(stats.largest_source_piece_bytes <= bound, "{:?} > {}", stats, bound);
    }
}

/// The bytes of `src` a converter asks for (cut at its end, as a short read from disk would be).
fn source_range(src: &[u8], range: SourceRange) -> &[u8] {
    let start = usize::try_from(range.start).expect("start").min(src.len());
    &src[start..start.saturating_add(range.len).min(src.len())]
}

/// A lazy converter over `src` with its prepare phase done.
fn prepared(
    src: &[u8],
    target: Magic,
    fetch_offset: i64,
    config: DownConvertConfig,
) -> DownConverter {
    let mut converter = DownConverter::new(
        u64::try_from(src.len()).expect("len"),
        target,
        fetch_offset,
        config,
    )
    .expect("converter");
    while let Prepare::Read(range) = converter.prepare_step().expect("prepare") {
        converter.feed(source_range(src, range)).expect("feed");
    }
    converter
}

/// The lazy converter driven as the broker drives it: prepared, the kept first batch released,
/// then written.
fn lazy_released(
    src: &[u8],
    target: Magic,
    fetch_offset: i64,
    config: DownConvertConfig,
) -> Vec<u8> {
    let mut converter = prepared(src, target, fetch_offset, config);
    let read = |range| source_range(src, range);
    converter.release_prepared_output();
    let mut out = Vec::new();
    loop {
        match converter.write_step().expect("write") {
            Write::Read(range) => converter.feed(read(range)).expect("feed"),
            Write::Output(piece) => out.extend_from_slice(&piece),
            Write::Done => break,
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn releasing_the_prepared_batch_changes_no_byte(
        (src, _) in arbitrary_slice(),
        chunk_bytes in 1usize..4096,
        fetch_offset in 0i64..20,
        target in prop::sample::select(vec![Magic::V0, Magic::V1]),
    ) {
        let config = DownConvertConfig { chunk_bytes, ..DownConvertConfig::default() };
        if let Ok((reference, _)) = down_convert_eager(&src, target, fetch_offset, &config) {
            prop_assert_eq!(lazy_released(&src, target, fetch_offset, config), reference);
        }
    }
}

/// (bytes of whole entries, largest entry bytes) of a slice.
fn entries_len(src: &[u8]) -> (usize, usize) {
    let mut rest = src;
    let mut count = 0;
    let mut largest = 0;
    while let Ok(Some(total)) = legacy::entry_bytes(rest) {
        if total > rest.len() {
            break;
        }
        largest = largest.max(total);
        count += total;
        rest = &rest[total..];
    }
    (count, largest)
}

/// The lazy converter driven as the broker drives it since session 4: prepared, parked until its
/// turn, resumed, and every written chunk's buffer handed back for the next one. Returns the bytes,
/// the write phase's reads, the output pieces' lengths, and how many distinct buffers held them.
fn lazy_parked(
    src: &[u8],
    target: Magic,
    fetch_offset: i64,
    config: DownConvertConfig,
) -> (Vec<u8>, Vec<SourceRange>, Vec<usize>, usize) {
    let parked = prepared(src, target, fetch_offset, config)
        .park()
        .expect("park");
    let read = |range| source_range(src, range);
    let mut converter = DownConverter::resume(parked, config);
    let (mut out, mut reads, mut pieces, mut buffers) = (Vec::new(), Vec::new(), Vec::new(), 0);
    let mut last_buffer: Option<*const u8> = None;
    loop {
        match converter.write_step().expect("write") {
            Write::Read(range) => {
                reads.push(range);
                converter.feed(read(range)).expect("feed");
            }
            Write::Output(piece) => {
                out.extend_from_slice(&piece);
                pieces.push(piece.len());
                if last_buffer != Some(piece.as_ptr()) {
                    buffers += 1;
                    last_buffer = Some(piece.as_ptr());
                }
                converter.reuse_buffer(piece);
            }
            Write::Done => break,
        }
    }
    (out, reads, pieces, buffers)
}

/// The lazy converter driven as the broker drives it since issue 41: a first converter's prepare
/// phase gives the declared size and is dropped; at the partition's turn a second one, handed the
/// response's chunk buffer (holding the last partition's bytes), prepares again and writes,
/// every chunk's buffer handed back. Returns both declared sizes and the bytes.
fn lazy_prepared_twice(
    src: &[u8],
    target: Magic,
    fetch_offset: i64,
    config: DownConvertConfig,
) -> (u64, u64, Vec<u8>) {
    let read = |range| source_range(src, range);
    let planned = prepared(src, target, fetch_offset, config)
        .declared_bytes()
        .expect("prepared");
    let slice_bytes = u64::try_from(src.len()).expect("len");
    let mut converter =
        DownConverter::new(slice_bytes, target, fetch_offset, config).expect("converter");
    converter.reuse_buffer(vec![0xAB; 300]);
    let declared = loop {
        match converter.prepare_step().expect("prepare") {
            Prepare::Read(range) => converter.feed(read(range)).expect("feed"),
            Prepare::Ready(prepared) => break prepared.declared_bytes,
        }
    };
    let mut out = Vec::new();
    loop {
        match converter.write_step().expect("write") {
            Write::Read(range) => converter.feed(read(range)).expect("feed"),
            Write::Output(piece) => {
                out.extend_from_slice(&piece);
                converter.reuse_buffer(piece);
            }
            Write::Done => break,
        }
    }
    (planned, declared, out)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn parking_and_reusing_one_buffer_changes_no_byte(
        (src, _) in arbitrary_slice(),
        chunk_bytes in 1usize..4096,
        read_bytes in 1usize..4096,
        fetch_offset in 0i64..20,
        target in prop::sample::select(vec![Magic::V0, Magic::V1]),
    ) {
        let config = DownConvertConfig { chunk_bytes, read_bytes, ..DownConvertConfig::default() };
        if let Ok((reference, _)) = down_convert_eager(&src, target, fetch_offset, &config) {
            let (out, reads, _, _) = lazy_parked(&src, target, fetch_offset, config);
            prop_assert_eq!(&out, &reference);
            // Dropped after the prepare phase and prepared again at the turn (as the broker
            // does), with a used buffer handed in: the same size, the same bytes.
            let (planned, declared, again) = lazy_prepared_twice(&src, target, fetch_offset, config);
            prop_assert_eq!(planned, declared);
            prop_assert_eq!(declared, u64::try_from(reference.len()).expect("len"));
            prop_assert_eq!(again, reference);
            // One read is at most `read_bytes` (a batch header at least), or one whole batch.
            let (_, largest) = entries_len(&src);
            let bound = read_bytes.min(chunk_bytes).max(BATCH_HEADER_BYTES).max(largest);
            for range in reads {
                prop_assert!(range.len <= bound, "{:?} > {}", range, bound);
            }
        }
    }
}

#[test]
fn chunks_are_built_from_whole_batch_reads_in_one_reused_buffer() {
    // 64 batches of 16 × 1 KiB (16.6 KiB each, as the memory bench stores them), 128 KiB chunks,
    // 32 KiB reads.
    let src = kib_batches(64, 16);
    let batch = legacy::entry_bytes(&src).expect("entry").expect("some");
    let config = DownConvertConfig::default();
    assert_eq!(
        (config.chunk_bytes, config.read_bytes),
        (128 * 1024, 32 * 1024)
    );
    let (out, reads, pieces, buffers) = lazy_parked(&src, Magic::V1, 0, config);
    assert_eq!(out, eager(&src, Magic::V1, 0));
    // Each read is one whole batch plus the next batch's 12-byte header (which tells its
    // length), so no batch is read twice: the write phase reads the slice once, plus 12 bytes a
    // read.
    for range in &reads {
        assert!(range.len <= batch + LOG_OVERHEAD_BYTES, "{range:?}");
    }
    let read_bytes: usize = reads.iter().map(|range| range.len).sum();
    assert!(read_bytes <= src.len() + reads.len() * LOG_OVERHEAD_BYTES);
    // Chunks of whole batches up to 128 KiB of source: 7 batches, about 120 KiB converted.
    assert!(pieces.iter().all(|&len| len <= 128 * 1024), "{pieces:?}");
    assert!(pieces.len() <= 64 / 7 + 1, "{pieces:?}");
    // Every chunk was built in the same buffer.
    assert_eq!(buffers, 1);
}

#[test]
fn a_parked_converter_is_about_a_hundred_bytes() {
    // What a response keeps per partition waiting for its turn (the converter itself is a few
    // hundred bytes; 250 partitions × 100 slow responses multiply it).
    assert!(
        std::mem::size_of::<Parked>() <= 128,
        "{}",
        std::mem::size_of::<Parked>()
    );
    assert!(std::mem::size_of::<DownConverter>() > std::mem::size_of::<Parked>());
}

#[test]
fn parking_before_the_prepare_phase_or_while_writing_is_refused() {
    let src = kib_batches(4, 4);
    let config = DownConvertConfig::default();
    let converter = DownConverter::new(src.len() as u64, Magic::V1, 0, config).expect("new");
    assert!(converter.park().is_err());
    let mut converter = DownConverter::new(src.len() as u64, Magic::V1, 0, config).expect("new");
    loop {
        match converter.write_step().expect("write") {
            Write::Read(range) => {
                let start = range.start as usize;
                converter
                    .feed(&src[start..(start + range.len).min(src.len())])
                    .expect("feed");
            }
            Write::Output(_) => break,
            Write::Done => panic!("no output"),
        }
    }
    assert!(converter.park().is_err());
}

// Legacy read_committed (§3.8): the aborted-transaction filter.

use crate::records::txn::{AbortedTxn, EndTxnMarker, MarkerType};

/// One generated batch of a transactional log: producer, kind, records.
#[derive(Debug, Clone, Copy)]
enum TxnStep {
    /// A data batch of `records` records from producer `pid` (transactional or not).
    Data { pid: i64, txn: bool, records: i32 },
    /// Producer `pid` ends its open transaction (if any) with COMMIT or ABORT.
    End { pid: i64, commit: bool },
}

/// A log of `steps` (offsets from 0, 100-byte values) with: the aborted-transaction entries its
/// index would hold, and the reference slice: the same log without the data batches of aborted
/// transactions (decided from the generation, not by the consumer's algorithm).
fn txn_log(steps: &[TxnStep], codec: Compression) -> (Vec<u8>, Vec<AbortedTxn>, Vec<u8>) {
    let (mut src, mut reference, mut aborted) = (Vec::new(), Vec::new(), Vec::new());
    // Per producer: the open transaction's first offset and its batches' bytes.
    let mut open: std::collections::BTreeMap<i64, (i64, Vec<Vec<u8>>)> = Default::default();
    let mut pending: Vec<(i64, Vec<u8>)> = Vec::new();
    let mut next = 0i64;
    for step in steps {
        match *step {
            TxnStep::Data { pid, txn, records } => {
                let mut builder = BatchBuilder::new(next, codec);
                builder.producer_id = pid;
                builder.producer_epoch = 0;
                builder.base_sequence = 0;
                builder.transactional = txn;
                for delta in 0..records {
                    let value = format!("{pid}-{}", next + i64::from(delta)).repeat(10);
                    builder
                        .push(&NewRecord {
                            offset_delta: delta,
                            timestamp: 1_000 + next,
                            key: Some(b"k"),
                            value: Some(value.as_bytes()),
                            headers: &[],
                        })
                        .expect("push");
                }
                let bytes = builder.build().expect("build");
                src.extend_from_slice(&bytes);
                if txn {
                    open.entry(pid)
                        .or_insert((next, Vec::new()))
                        .1
                        .push(bytes.clone());
                }
                pending.push((if txn { pid } else { -1 }, bytes));
                next += i64::from(records);
            }
            TxnStep::End { pid, commit } => {
                let mut bytes = EndTxnMarker {
                    producer_id: pid,
                    producer_epoch: 0,
                    coordinator_epoch: 0,
                    marker_type: if commit {
                        MarkerType::Commit
                    } else {
                        MarkerType::Abort
                    },
                }
                .encode_batch(1)
                .expect("marker");
                crate::records::v2::set_base_offset(&mut bytes, next).expect("offset");
                src.extend_from_slice(&bytes);
                if let Some((first_offset, _)) = open.remove(&pid) {
                    if !commit {
                        aborted.push(AbortedTxn {
                            producer_id: pid,
                            first_offset,
                            last_offset: next,
                            last_stable_offset: next + 1,
                        });
                        // The reference drops this transaction's data batches.
                        pending.retain(|(owner, _)| *owner != pid);
                    }
                }
                // Batches of other producers' open transactions wait for their own marker.
                let (done, waiting): (Vec<_>, Vec<_>) = pending
                    .drain(..)
                    .partition(|(owner, _)| *owner < 0 || !open.contains_key(owner));
                pending = waiting;
                let mut done = done;
                done.push((-1, bytes));
                for (_, bytes) in done {
                    reference.push(bytes);
                }
                next += 1;
            }
        }
    }
    // Open transactions at the end are neither committed nor aborted: kept (read_committed stops
    // at the LSO before them; the converter itself keeps what it is given).
    reference.extend(pending.into_iter().map(|(_, bytes)| bytes));
    // The reference keeps source order.
    let reference = in_source_order(&src, reference);
    (src, aborted, reference)
}

/// `kept` (whole batches of `src`) concatenated in the order they appear in `src`.
fn in_source_order(src: &[u8], kept: Vec<Vec<u8>>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = src;
    while let Ok(Some(total)) = legacy::entry_bytes(rest) {
        let entry = &rest[..total];
        if kept.iter().any(|batch| batch.as_slice() == entry) {
            out.extend_from_slice(entry);
        }
        rest = &rest[total..];
    }
    out
}

fn txn_step() -> impl Strategy<Value = TxnStep> {
    prop_oneof![
        3 => (1i64..4, any::<bool>(), 1i32..5)
            .prop_map(|(pid, txn, records)| TxnStep::Data { pid, txn, records }),
        1 => (1i64..4, any::<bool>()).prop_map(|(pid, commit)| TxnStep::End { pid, commit }),
    ]
}

fn legacy_records(output: &[u8]) -> Vec<(i64, Option<Vec<u8>>)> {
    records(output)
        .into_iter()
        .map(|record| (record.offset, record.value))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn read_committed_equals_converting_the_reference_filtered_batches(
        steps in prop::collection::vec(txn_step(), 0..40),
        codec in prop::sample::select(vec![Compression::None, Compression::Gzip, Compression::Lz4]),
        chunk_bytes in 64usize..4096,
        read_bytes in 16usize..4096,
        start_batch in 0usize..6,
        target in prop::sample::select(vec![Magic::V0, Magic::V1]),
    ) {
        let (src, aborted, reference) = txn_log(&steps, codec);
        // A fetch from the start of a later batch: the slice starts there and the index answers
        // the entries whose marker is at or past it.
        let mut rest = &src[..];
        let mut fetch_offset = 0;
        for _ in 0..start_batch {
            match legacy::entry_bytes(rest) {
                Ok(Some(total)) if total < rest.len() => {
                    rest = &rest[total..];
                    fetch_offset = BatchHeader::parse(rest).expect("header").base_offset;
                }
                _ => break,
            }
        }
        let aborted: Vec<AbortedTxn> =
            aborted.into_iter().filter(|txn| txn.last_offset >= fetch_offset).collect();
        let reference_from: Vec<u8> = {
            let mut out = Vec::new();
            let mut tail = &reference[..];
            while let Ok(Some(total)) = legacy::entry_bytes(tail) {
                if BatchHeader::parse(tail).expect("header").base_offset >= fetch_offset {
                    out.extend_from_slice(&tail[..total]);
                }
                tail = &tail[total..];
            }
            out
        };
        let config = DownConvertConfig { chunk_bytes, read_bytes, ..DownConvertConfig::default() };
        let filter = AbortedFilter::new(aborted);
        let (declared, lazy, _) = down_convert_lazy_with(
            rest, target, fetch_offset, config, Some(filter.clone()),
        ).expect("lazy");
        prop_assert_eq!(u64::try_from(lazy.len()).expect("len"), declared);
        let (eager_filtered, _) = down_convert_eager_with(
            rest, target, fetch_offset, &config, Some(filter.clone()),
        ).expect("eager");
        prop_assert_eq!(&lazy, &eager_filtered);
        // The reference: the filtered batches converted whole (room past the slice), and cut at
        // the reference slice's own declared size.
        // (With nothing but markers the slack itself is the first entry, refused: no records.)
        let whole = down_convert_eager(&with_slack(&reference_from), target, fetch_offset, &config)
            .map_or_else(|_| Vec::new(), |(out, _)| legacy_records(&out));
        let cut = legacy_records(&eager(&reference_from, target, fetch_offset));
        let got = legacy_records(&lazy);
        prop_assert!(whole.starts_with(&got), "{:?} not a prefix of {:?}", got, whole);
        prop_assert!(got.len() >= cut.len());
        // Parked between prepare and write, the filter's state carries over.
        let mut converter = DownConverter::new(
            u64::try_from(rest.len()).expect("len"), target, fetch_offset, config,
        ).expect("new").read_committed(filter);
        while let Prepare::Read(range) = converter.prepare_step().expect("prepare") {
            converter.feed(source_range(rest, range)).expect("feed");
        }
        let mut converter = DownConverter::resume(converter.park().expect("park"), config);
        let mut parked = Vec::new();
        loop {
            match converter.write_step().expect("write") {
                Write::Read(range) => converter.feed(source_range(rest, range)).expect("feed"),
                Write::Output(piece) => parked.extend_from_slice(&piece),
                Write::Done => break,
            }
        }
        prop_assert_eq!(&parked, &lazy);
    }
}

#[test]
fn read_committed_leaves_out_aborted_records_and_keeps_the_rest() {
    use TxnStep::{Data, End};
    // Producer 1 aborts [0, 1], producer 2 commits [2, 4], producer 3 writes without a
    // transaction at 5, producer 1 commits [6, 7].
    let steps = [
        Data {
            pid: 1,
            txn: true,
            records: 1,
        },
        End {
            pid: 1,
            commit: false,
        },
        Data {
            pid: 2,
            txn: true,
            records: 2,
        },
        End {
            pid: 2,
            commit: true,
        },
        Data {
            pid: 3,
            txn: false,
            records: 1,
        },
        Data {
            pid: 1,
            txn: true,
            records: 1,
        },
        End {
            pid: 1,
            commit: true,
        },
    ];
    let (src, aborted, _) = txn_log(&steps, Compression::None);
    assert_eq!(aborted.len(), 1);
    let uncommitted = convert(&src, Magic::V1, 0);
    assert_eq!(
        offsets(&uncommitted),
        vec![0, 2, 3, 5, 6],
        "read_uncommitted: all data"
    );
    let (_, committed, stats) = down_convert_lazy_with(
        &src,
        Magic::V1,
        0,
        DownConvertConfig::default(),
        Some(AbortedFilter::new(aborted.clone())),
    )
    .expect("lazy");
    assert_eq!(offsets(&committed), vec![2, 3, 5, 6]);
    assert_eq!(stats.aborted_records_skipped, 1);
    // Only aborted data then a marker: an empty set, as with markers alone (D2).
    let (declared, _, _) = down_convert_lazy_with(
        &src[..legacy::entry_bytes(&src).unwrap().unwrap() * 2],
        Magic::V1,
        0,
        DownConvertConfig::default(),
        Some(AbortedFilter::new(aborted)),
    )
    .expect("lazy");
    assert_eq!(declared, 0);
}

#[test]
fn read_committed_memory_is_one_chunk_of_source_and_its_output() {
    use TxnStep::{Data, End};
    // 1,000 transactions of 4 batches of 20 records, every tenth aborted, from 4 producers.
    let steps: Vec<TxnStep> = (0..1_000)
        .flat_map(|index| {
            let pid = index % 4;
            let mut steps = vec![
                Data {
                    pid,
                    txn: true,
                    records: 20
                };
                4
            ];
            steps.push(End {
                pid,
                commit: index % 10 != 3,
            });
            steps
        })
        .collect();
    let (src, aborted, _) = txn_log(&steps, Compression::None);
    assert_eq!(aborted.len(), 100);
    for chunk_bytes in [16 * 1024, 128 * 1024] {
        let config = DownConvertConfig {
            chunk_bytes,
            ..DownConvertConfig::default()
        };
        let (_, out, stats) = down_convert_lazy_with(
            &with_slack(&src),
            Magic::V1,
            0,
            config,
            Some(AbortedFilter::new(aborted.clone())),
        )
        .expect("lazy");
        assert_eq!(offsets(&out).len(), 900 * 80);
        assert_eq!(stats.aborted_records_skipped, 100 * 80);
        // A 7 MB slice is held one piece of at most a chunk at a time, and one converted chunk:
        // these ~60-byte records grow by about a quarter in v1 (34 bytes of entry and message
        // header each, where v2 spends about 10).
        assert!(src.len() > 50 * chunk_bytes);
        assert!(stats.largest_source_piece_bytes <= chunk_bytes, "{stats:?}");
        assert!(
            stats.largest_output_piece_bytes <= chunk_bytes + chunk_bytes / 2,
            "{stats:?}"
        );
    }
    // The parked state: the filter's list (16 bytes an aborted transaction of the range) and
    // the producers inside one; no converted bytes.
    assert!(std::mem::size_of::<Parked>() <= 128);
}
