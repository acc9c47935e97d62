//! The four codecs in the framings Kafka writes and reads: gzip (RFC 1952), snappy (xerial
//! snappy-java stream framing on write; xerial or a raw block on read), lz4 (Kafka's subset of the
//! LZ4 frame, with the magic-0 header-checksum quirk), zstd (v2 only).
//!
//! Every decompression takes an output cap: compressed input is untrusted (a peer's produce, or a
//! segment file), and a few bytes can claim gigabytes. Must never: allocate past the cap, or panic.

use std::io::Read;

use crate::records::{Compression, Magic, RecordError};

pub use crate::limits::DECOMPRESSED_BYTES_MAX;

/// The 8-byte magic that opens a xerial snappy-java stream.
pub const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
/// Uncompressed block size of snappy-java's `SnappyOutputStream` (32 KiB).
const XERIAL_BLOCK_BYTES: usize = 32 * 1024;
/// The LZ4 frame magic, little-endian 0x184D2204.
pub const LZ4_MAGIC: [u8; 4] = [0x04, 0x22, 0x4d, 0x18];
/// FLG byte Kafka writes: version 01, independent blocks, no checksums, no content size.
const LZ4_FLG: u8 = 0x60;
/// BD byte Kafka writes: 64 KiB maximum block size.
const LZ4_BD: u8 = 0x40;
/// Uncompressed block size matching `LZ4_BD`.
const LZ4_BLOCK_BYTES: usize = 64 * 1024;
/// High bit of an lz4 block length: the block is stored uncompressed.
const LZ4_UNCOMPRESSED_BIT: u32 = 0x8000_0000;
/// Largest block size an lz4 frame may declare (BD 7 = 4 MiB).
const LZ4_BLOCK_BYTES_MAX: usize = 4 * 1024 * 1024;

/// Compresses `input` with `codec` in the framing Kafka writes for `magic` (only lz4 differs by
/// magic). Compressing our own bytes cannot fail except for zstd in a legacy magic. One-shot: a
/// caller compressing batch after batch keeps a [`Compressor`] instead.
pub fn compress(codec: Compression, magic: Magic, input: &[u8]) -> Result<Vec<u8>, RecordError> {
    let mut out = Vec::new();
    Compressor::default().compress_into(codec, magic, input, &mut out)?;
    Ok(out)
}

/// gzip level Kafka's producers and its down-conversion use (`Deflater.DEFAULT_COMPRESSION`).
const GZIP_LEVEL: u32 = 6;
/// The RFC 1952 member header we write: magic, deflate, no flags, no mtime, no extra flags (level
/// 6), OS 255 "unknown" — the bytes flate2's `GzEncoder` writes, so outputs did not change when
/// the encoder became reusable.
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

/// Compression state kept from batch to batch (the down-converter compresses one wrapper per
/// source batch): the deflate state (hundreds of KiB of tables, which building afresh per batch
/// costs an allocation and zeroing each time) is reset instead of rebuilt, and the snappy encoder's
/// hash table is kept. Everything is created on first use, so an unused one costs nothing.
///
/// Both boxed, so that an unused one is two pointers: snap's encoder holds a 2 KiB table inline
/// (and the deflate handle is not small either), and a response keeps one idle compressor per
/// partition in its converters.
#[derive(Default)]
pub struct Compressor {
    deflate: Option<Box<flate2::Compress>>,
    snappy: Option<Box<snap::raw::Encoder>>,
}

impl std::fmt::Debug for Compressor {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Compressor")
            .field("deflate", &self.deflate.is_some())
            .field("snappy", &self.snappy.is_some())
            .finish()
    }
}

impl Compressor {
    /// Appends `input` compressed with `codec` in the framing Kafka writes for `magic` to `out`.
    pub fn compress_into(
        &mut self,
        codec: Compression,
        magic: Magic,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), RecordError> {
        match codec {
            Compression::None => out.extend_from_slice(input),
            Compression::Gzip => self.gzip(input, out)?,
            Compression::Snappy => {
                let encoder = self
                    .snappy
                    .get_or_insert_with(|| Box::new(snap::raw::Encoder::new()));
                xerial_compress(encoder, input, out);
            }
            Compression::Lz4 => lz4_compress(magic, input, out),
            Compression::Zstd => {
                if magic != Magic::V2 {
                    return Err(RecordError::UnsupportedCompression { codec });
                }
                let compressed =
                    zstd::bulk::compress(input, 3).map_err(|_| RecordError::Compression {
                        reason: "zstd encoder failed",
                    })?;
                out.extend_from_slice(&compressed);
            }
        }
        Ok(())
    }

    /// One gzip member: header, raw deflate of `input`, CRC-32 and length (RFC 1952).
    fn gzip(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), RecordError> {
        let failed = RecordError::Compression {
            reason: "gzip encoder failed",
        };
        let deflate = self.deflate.get_or_insert_with(|| {
            Box::new(flate2::Compress::new(
                flate2::Compression::new(GZIP_LEVEL),
                false,
            ))
        });
        deflate.reset();
        out.extend_from_slice(&GZIP_HEADER);
        out.reserve(input.len() / 2 + 64);
        loop {
            let consumed = usize::try_from(deflate.total_in()).map_err(|_| failed.clone())?;
            let rest = input.get(consumed..).unwrap_or_default();
            if out.len() == out.capacity() {
                out.reserve(input.len() / 4 + 64);
            }
            let status = deflate
                .compress_vec(rest, out, flate2::FlushCompress::Finish)
                .map_err(|_| failed.clone())?;
            if status == flate2::Status::StreamEnd {
                break;
            }
        }
        out.extend_from_slice(&crc32fast::hash(input).to_le_bytes());
        // ISIZE is the input length modulo 2^32 (RFC 1952 §2.3.1).
        #[allow(clippy::cast_possible_truncation)]
        let input_size = input.len() as u32;
        out.extend_from_slice(&input_size.to_le_bytes());
        Ok(())
    }
}

/// Decompresses `input` written by `codec` for `magic`, refusing output above `output_bytes_max`.
pub fn decompress(
    codec: Compression,
    magic: Magic,
    input: &[u8],
    output_bytes_max: usize,
) -> Result<Vec<u8>, RecordError> {
    match codec {
        Compression::None => {
            if input.len() > output_bytes_max {
                return Err(RecordError::DecompressedTooLarge { output_bytes_max });
            }
            Ok(input.to_vec())
        }
        Compression::Gzip => {
            read_capped(flate2::read::MultiGzDecoder::new(input), output_bytes_max)
        }
        Compression::Snappy => snappy_decompress(input, output_bytes_max),
        Compression::Lz4 => lz4_decompress(magic, input, output_bytes_max),
        Compression::Zstd => {
            if magic != Magic::V2 {
                return Err(RecordError::UnsupportedCompression { codec });
            }
            let decoder =
                zstd::stream::read::Decoder::new(input).map_err(|_| RecordError::Compression {
                    reason: "zstd decoder failed",
                })?;
            read_capped(decoder, output_bytes_max)
        }
    }
}

/// Reads a decoder to its end, failing once it yields more than `output_bytes_max` bytes. Growth is
/// driven by bytes actually produced, never by a size the input claims.
fn read_capped(reader: impl Read, output_bytes_max: usize) -> Result<Vec<u8>, RecordError> {
    let mut out = Vec::new();
    let limit = u64::try_from(output_bytes_max)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    reader
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|_| RecordError::Compression {
            reason: "corrupt compressed stream",
        })?;
    if out.len() > output_bytes_max {
        return Err(RecordError::DecompressedTooLarge { output_bytes_max });
    }
    Ok(out)
}

fn xerial_compress(encoder: &mut snap::raw::Encoder, input: &[u8], out: &mut Vec<u8>) {
    out.reserve(16 + snap::raw::max_compress_len(input.len()) + 4);
    out.extend_from_slice(&XERIAL_MAGIC);
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    for block in input.chunks(XERIAL_BLOCK_BYTES) {
        let length_at = out.len();
        out.extend_from_slice(&[0; 4]);
        let start = out.len();
        out.resize(start + snap::raw::max_compress_len(block.len()), 0);
        let written = out
            .get_mut(start..)
            .map(|dst| encoder.compress(block, dst).unwrap_or(0))
            .unwrap_or(0);
        out.truncate(start + written);
        let length = u32::try_from(written).unwrap_or(u32::MAX);
        if let Some(field) = out.get_mut(length_at..length_at + 4) {
            field.copy_from_slice(&length.to_be_bytes());
        }
    }
}

fn snappy_decompress(input: &[u8], output_bytes_max: usize) -> Result<Vec<u8>, RecordError> {
    let corrupt = RecordError::Compression {
        reason: "corrupt snappy data",
    };
    let Some(body) = input.strip_prefix(&XERIAL_MAGIC[..]) else {
        // librdkafka writes a raw snappy block; its header states the length, checked before use.
        let length = snap::raw::decompress_len(input).map_err(|_| corrupt.clone())?;
        if length > output_bytes_max {
            return Err(RecordError::DecompressedTooLarge { output_bytes_max });
        }
        return snap::raw::Decoder::new()
            .decompress_vec(input)
            .map_err(|_| corrupt);
    };
    let mut reader = crate::codec::Reader::new(body);
    reader.skip(8)?; // version, compatible version
    let mut out = Vec::new();
    let mut decoder = snap::raw::Decoder::new();
    while reader.remaining() > 0 {
        let block_len = usize::try_from(reader.i32()?).map_err(|_| corrupt.clone())?;
        let block = reader.take(block_len)?;
        let length = snap::raw::decompress_len(block).map_err(|_| corrupt.clone())?;
        if length > output_bytes_max.saturating_sub(out.len()) {
            return Err(RecordError::DecompressedTooLarge { output_bytes_max });
        }
        let start = out.len();
        out.resize(start + length, 0);
        let dst = out.get_mut(start..).ok_or_else(|| corrupt.clone())?;
        decoder
            .decompress(block, dst)
            .map_err(|_| corrupt.clone())?;
    }
    Ok(out)
}

/// Kafka's LZ4 frame header checksum. For magic 0 Kafka hashes the 4 magic bytes as well (the
/// KAFKA-3160 bug kept for old clients, which compute it that way); magic ≥ 1 hashes FLG‖BD only.
fn lz4_header_checksum(magic: Magic, descriptor: &[u8]) -> u8 {
    let hash = if magic == Magic::V0 {
        let mut bytes = [0u8; 4 + 14];
        let len = (4 + descriptor.len()).min(bytes.len());
        if let Some(head) = bytes.get_mut(..4) {
            head.copy_from_slice(&LZ4_MAGIC);
        }
        if let Some(tail) = bytes.get_mut(4..len) {
            tail.copy_from_slice(descriptor.get(..len - 4).unwrap_or_default());
        }
        xxh32(bytes.get(..len).unwrap_or_default(), 0)
    } else {
        xxh32(descriptor, 0)
    };
    (hash >> 8).to_le_bytes()[0]
}

fn lz4_compress(magic: Magic, input: &[u8], out: &mut Vec<u8>) {
    let blocks = input.len() / LZ4_BLOCK_BYTES + 1;
    out.reserve(7 + input.len() + blocks * 4 + 4 + input.len() / 255 + 16);
    out.extend_from_slice(&LZ4_MAGIC);
    out.push(LZ4_FLG);
    out.push(LZ4_BD);
    out.push(lz4_header_checksum(magic, &[LZ4_FLG, LZ4_BD]));
    for block in input.chunks(LZ4_BLOCK_BYTES) {
        // Compressed straight into `out` after a length placeholder; a block that does not shrink
        // is stored raw instead, as Kafka does.
        let length_at = out.len();
        out.extend_from_slice(&[0; 4]);
        let start = out.len();
        out.resize(
            start + lz4_flex::block::get_maximum_output_size(block.len()),
            0,
        );
        let written = out
            .get_mut(start..)
            .and_then(|dst| lz4_flex::block::compress_into(block, dst).ok())
            .filter(|&written| written < block.len());
        let length = match written {
            Some(written) => {
                out.truncate(start + written);
                u32::try_from(written).unwrap_or(0)
            }
            None => {
                out.truncate(start);
                out.extend_from_slice(block);
                u32::try_from(block.len()).unwrap_or(0) | LZ4_UNCOMPRESSED_BIT
            }
        };
        if let Some(field) = out.get_mut(length_at..length_at + 4) {
            field.copy_from_slice(&length.to_le_bytes());
        }
    }
    out.extend_from_slice(&0u32.to_le_bytes());
}

fn lz4_decompress(
    magic: Magic,
    input: &[u8],
    output_bytes_max: usize,
) -> Result<Vec<u8>, RecordError> {
    let corrupt = |reason: &'static str| RecordError::Compression { reason };
    let mut reader = crate::codec::Reader::new(input);
    if reader.take(4)? != LZ4_MAGIC {
        return Err(corrupt("lz4 frame magic missing"));
    }
    let flg = reader.u8()?;
    let bd = reader.u8()?;
    if flg >> 6 != 1 {
        return Err(corrupt("lz4 frame version is not 01"));
    }
    let linked_blocks = flg & 0x20 == 0;
    let block_checksum = flg & 0x10 != 0;
    let content_size = flg & 0x08 != 0;
    let content_checksum = flg & 0x04 != 0;
    let dict_id = flg & 0x01 != 0;
    let descriptor_len = 2 + if content_size { 8 } else { 0 } + if dict_id { 4 } else { 0 };
    let block_bytes_max = match (bd >> 4) & 0x07 {
        4 => 64 * 1024,
        5 => 256 * 1024,
        6 => 1024 * 1024,
        7 => LZ4_BLOCK_BYTES_MAX,
        _ => return Err(corrupt("lz4 frame block size invalid")),
    };
    reader.skip(descriptor_len - 2)?;
    let checksum = reader.u8()?;
    if magic != Magic::V0 {
        let descriptor = input
            .get(4..4 + descriptor_len)
            .ok_or(corrupt("lz4 frame truncated"))?;
        if lz4_header_checksum(magic, descriptor) != checksum {
            return Err(corrupt("lz4 frame header checksum mismatch"));
        }
    }
    let mut out: Vec<u8> = Vec::new();
    let mut block = Vec::new();
    loop {
        let raw_length = u32::from_le_bytes(
            reader
                .take(4)?
                .try_into()
                .map_err(|_| corrupt("lz4 truncated"))?,
        );
        if raw_length == 0 {
            break;
        }
        let stored = raw_length & LZ4_UNCOMPRESSED_BIT != 0;
        let length = usize::try_from(raw_length & !LZ4_UNCOMPRESSED_BIT)
            .map_err(|_| corrupt("lz4 block length"))?;
        let data = reader.take(length)?;
        if block_checksum {
            reader.skip(4)?;
        }
        let room = output_bytes_max.saturating_sub(out.len());
        if stored {
            if data.len() > room {
                return Err(RecordError::DecompressedTooLarge { output_bytes_max });
            }
            out.extend_from_slice(data);
            continue;
        }
        block.clear();
        block.resize(block_bytes_max.min(room.saturating_add(1)), 0);
        let written = if linked_blocks {
            let dict_start = out.len().saturating_sub(64 * 1024);
            let dict = out.get(dict_start..).unwrap_or_default();
            lz4_flex::block::decompress_into_with_dict(data, &mut block, dict)
        } else {
            lz4_flex::block::decompress_into(data, &mut block)
        }
        .map_err(|_| {
            if room < block_bytes_max {
                RecordError::DecompressedTooLarge { output_bytes_max }
            } else {
                corrupt("corrupt lz4 block")
            }
        })?;
        if written > room {
            return Err(RecordError::DecompressedTooLarge { output_bytes_max });
        }
        out.extend_from_slice(block.get(..written).unwrap_or_default());
    }
    if content_checksum {
        reader.skip(4)?;
    }
    Ok(out)
}

/// XXH32, used only for the LZ4 frame header checksum (a handful of bytes), so written plainly.
pub fn xxh32(input: &[u8], seed: u32) -> u32 {
    const P1: u32 = 2_654_435_761;
    const P2: u32 = 2_246_822_519;
    const P3: u32 = 3_266_489_917;
    const P4: u32 = 668_265_263;
    const P5: u32 = 374_761_393;
    let lane = |bytes: &[u8]| {
        let mut array = [0u8; 4];
        array.copy_from_slice(bytes.get(..4).unwrap_or(&[0; 4]));
        u32::from_le_bytes(array)
    };
    let round = |acc: u32, value: u32| {
        acc.wrapping_add(value.wrapping_mul(P2))
            .rotate_left(13)
            .wrapping_mul(P1)
    };
    let mut rest = input;
    let mut hash = if input.len() >= 16 {
        let mut v = [
            seed.wrapping_add(P1).wrapping_add(P2),
            seed.wrapping_add(P2),
            seed,
            seed.wrapping_sub(P1),
        ];
        while rest.len() >= 16 {
            for (index, acc) in v.iter_mut().enumerate() {
                *acc = round(*acc, lane(rest.get(index * 4..).unwrap_or_default()));
            }
            rest = rest.get(16..).unwrap_or_default();
        }
        v[0].rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18))
    } else {
        seed.wrapping_add(P5)
    };
    // INVARIANT: the checksum input length is taken modulo 2^32, as XXH32 specifies.
    #[allow(clippy::cast_possible_truncation)]
    let total = input.len() as u32;
    hash = hash.wrapping_add(total);
    while rest.len() >= 4 {
        hash = hash
            .wrapping_add(lane(rest).wrapping_mul(P3))
            .rotate_left(17)
            .wrapping_mul(P4);
        rest = rest.get(4..).unwrap_or_default();
    }
    for byte in rest {
        hash = hash
            .wrapping_add(u32::from(*byte).wrapping_mul(P5))
            .rotate_left(11)
            .wrapping_mul(P1);
    }
    hash ^= hash >> 15;
    hash = hash.wrapping_mul(P2);
    hash ^= hash >> 13;
    hash = hash.wrapping_mul(P3);
    hash ^ (hash >> 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CODECS: [Compression; 4] = [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::None,
    ];

    #[test]
    fn xxh32_known_values() {
        assert_eq!(xxh32(b"", 0), 0x02CC_5D05);
        assert_eq!(xxh32(b"a", 0), 0x550D_7456);
        assert_eq!(xxh32(b"abc", 0), 0x32D1_53FF);
        // The 16-byte-stripe path only runs for a magic-0 descriptor with content size and dict id
        // (18 bytes), which Kafka never writes; it has no reference vector here.
    }

    /// Inputs of different sizes and contents, so a reused state that kept anything from the
    /// previous input (dictionary, totals, tables) would show.
    fn varied_inputs() -> Vec<Vec<u8>> {
        let text: Vec<u8> = (0..70_000u32)
            .map(|index| b"skiff kafka legacy batch "[(index as usize * 7) % 25])
            .collect();
        let noise: Vec<u8> = (0..40_000u32)
            .map(|index| (index.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        vec![text.clone(), Vec::new(), noise, b"x".to_vec(), text]
    }

    #[test]
    fn a_reused_compressor_writes_what_a_fresh_one_writes() {
        for codec in [Compression::Gzip, Compression::Snappy, Compression::Lz4] {
            for magic in [Magic::V0, Magic::V1] {
                let mut reused = Compressor::default();
                for input in varied_inputs() {
                    let mut again = b"kept".to_vec();
                    reused
                        .compress_into(codec, magic, &input, &mut again)
                        .expect("reused");
                    let fresh = compress(codec, magic, &input).expect("fresh");
                    assert_eq!(again.get(..4), Some(&b"kept"[..]), "{codec:?}: prefix kept");
                    assert_eq!(again.get(4..), Some(&fresh[..]), "{codec:?} {magic:?}");
                    let back = decompress(codec, magic, &fresh, 1 << 20).expect("round trip");
                    assert_eq!(back, input, "{codec:?} {magic:?}");
                }
            }
        }
    }

    #[test]
    fn an_idle_compressor_is_small() {
        // A response holds one per partition (250 in KIP-283's memory test) until it is written.
        assert!(std::mem::size_of::<Compressor>() <= 2 * std::mem::size_of::<usize>());
    }

    #[test]
    fn gzip_member_is_the_one_flate2s_encoder_writes() {
        for input in varied_inputs() {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(GZIP_LEVEL));
            std::io::Write::write_all(&mut encoder, &input).expect("write");
            let expected = encoder.finish().expect("finish");
            let ours = compress(Compression::Gzip, Magic::V1, &input).expect("gzip");
            assert_eq!(ours, expected);
        }
    }

    #[test]
    fn lz4_header_checksum_matches_kafka_for_both_magics() {
        // docs/design/downconversion.md §1.6 / V6: v0 frame starts 04224d18 60 40 1a, v1 04224d18
        // 60 40 82.
        assert_eq!(
            compress(Compression::Lz4, Magic::V0, b"x").expect("lz4")[..7],
            [4, 0x22, 0x4d, 0x18, 0x60, 0x40, 0x1a]
        );
        assert_eq!(
            compress(Compression::Lz4, Magic::V1, b"x").expect("lz4")[..7],
            [4, 0x22, 0x4d, 0x18, 0x60, 0x40, 0x82]
        );
        assert!(compress(Compression::Lz4, Magic::V1, b"x")
            .expect("lz4")
            .ends_with(&[0, 0, 0, 0]));
    }

    #[test]
    fn v6_lz4_frames_from_kafka_decompress() {
        let v0 = hex("04224d1860401a14000000 1600010051101fecd70a0f0070016b0000000176 00000000");
        let inner = decompress(Compression::Lz4, Magic::V0, &v0, 1024).expect("v0 frame");
        assert_eq!(
            inner,
            hex("0000000000000000 00000010 1fecd70a 00 00 00000001 6b 00000001 76")
        );
        let v1 = hex(
            "04224d1860408219000000 160001006418cf056e6e011000b001000000016b0000000176 00000000",
        );
        let inner_v1 = decompress(Compression::Lz4, Magic::V1, &v1, 1024).expect("v1 frame");
        assert_eq!(
            inner_v1,
            hex(
                "0000000000000000 00000018 cf056e6e 01 00 0000000000000001 00000001 6b 00000001 76"
            )
        );
        // A v1 frame with a wrong header checksum is refused; magic 0 skips the check.
        let mut broken = v1.clone();
        broken[6] = 0x1a;
        assert!(decompress(Compression::Lz4, Magic::V1, &broken, 1024).is_err());
        assert!(decompress(Compression::Lz4, Magic::V0, &broken, 1024).is_ok());
    }

    #[test]
    fn every_codec_round_trips_for_every_magic() {
        let input: Vec<u8> = (0..200_000u32)
            .map(|i| (i % 251) as u8 ^ (i / 7) as u8)
            .collect();
        for codec in CODECS {
            for magic in [Magic::V0, Magic::V1, Magic::V2] {
                let packed = compress(codec, magic, &input).expect("compress");
                let unpacked =
                    decompress(codec, magic, &packed, DECOMPRESSED_BYTES_MAX).expect("decompress");
                assert_eq!(unpacked, input, "{codec:?} {magic:?}");
            }
        }
        let packed = compress(Compression::Zstd, Magic::V2, &input).expect("zstd");
        assert_eq!(
            decompress(
                Compression::Zstd,
                Magic::V2,
                &packed,
                DECOMPRESSED_BYTES_MAX
            )
            .expect("zstd"),
            input
        );
        assert!(compress(Compression::Zstd, Magic::V1, &input).is_err());
    }

    #[test]
    fn xerial_prefix_matches_v7() {
        let packed = compress(Compression::Snappy, Magic::V1, b"hello").expect("snappy");
        assert_eq!(packed[..16], hex("82534e4150505900 00000001 00000001")[..]);
    }

    #[test]
    fn raw_snappy_block_is_read_too() {
        let raw = snap::raw::Encoder::new()
            .compress_vec(b"raw block")
            .expect("snappy");
        assert_eq!(
            decompress(Compression::Snappy, Magic::V2, &raw, 100).expect("raw"),
            b"raw block"
        );
    }

    #[test]
    fn decompression_is_capped() {
        let input = vec![0u8; 1 << 20];
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::None,
        ] {
            let packed = compress(codec, Magic::V1, &input).expect("compress");
            assert_eq!(
                decompress(codec, Magic::V1, &packed, 1000),
                Err(RecordError::DecompressedTooLarge {
                    output_bytes_max: 1000
                }),
                "{codec:?}"
            );
        }
        let packed = compress(Compression::Zstd, Magic::V2, &input).expect("zstd");
        assert!(decompress(Compression::Zstd, Magic::V2, &packed, 1000).is_err());
    }

    #[test]
    fn tiny_input_huge_count_is_an_error() {
        // A xerial block claiming 2 GiB, a raw snappy header claiming 4 GiB, an lz4 block of 2 GiB.
        let mut xerial = hex("82534e4150505900 00000001 00000001 7fffffff");
        xerial.extend_from_slice(&[0; 4]);
        assert!(decompress(Compression::Snappy, Magic::V1, &xerial, 1 << 20).is_err());
        assert!(decompress(
            Compression::Snappy,
            Magic::V2,
            &[0xff, 0xff, 0xff, 0xff, 0x0f],
            1 << 20
        )
        .is_err());
        let lz4 = hex("04224d18 60 40 82 ffffff7f 00");
        assert!(decompress(Compression::Lz4, Magic::V1, &lz4, 1 << 20).is_err());
    }

    pub(crate) fn hex(text: &str) -> Vec<u8> {
        let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|pair| {
                u8::from_str_radix(std::str::from_utf8(pair).expect("ascii"), 16).expect("hex")
            })
            .collect()
    }
}
