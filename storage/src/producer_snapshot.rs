//! Producer-state snapshot files, `<20-digit offset>.snapshot` in a log's directory (Kafka's
//! name; Kafka writes one at each segment roll): opaque bytes the embedder encodes (the
//! partition's idempotent and transactional producer state as of an offset), kept durably so
//! that an open replays the log from the newest snapshot instead of from a fixed window. Owns
//! the file's framing both ways (pure code over bytes) and the names; `log::txn` decides when
//! files are written, read and removed.
//!
//! Layout (big-endian): magic `SKPS`, version (u16, 1), offset (i64), payload length (u32),
//! CRC32C (u32) of the payload, the payload. Why not Kafka's snapshot layout: the payload is the
//! embedder's, not Kafka's producer entries, and no Kafka tool reads these files.
//!
//! Must never: accept a file whose magic, version, length, offset or CRC does not match, read a
//! file larger than [`PRODUCER_SNAPSHOT_BYTES_MAX`] plus the header, or panic on any bytes.

use std::path::{Path, PathBuf};

use crate::fs::{self, SNAPSHOT_SUFFIX};

/// Largest payload of one snapshot: 64 MiB, room for a million producers at some 60 bytes each
/// (the partition bounds its producers far below that).
pub const PRODUCER_SNAPSHOT_BYTES_MAX: usize = 64 << 20;
/// First bytes of every snapshot file.
const MAGIC: &[u8; 4] = b"SKPS";
/// The framing's version.
const VERSION: u16 = 1;
/// Bytes before the payload: magic, version, offset, length, CRC32C.
pub(crate) const HEADER_BYTES: usize = 4 + 2 + 8 + 4 + 4;

/// A producer-state snapshot: the embedder's bytes describing the state after every batch below
/// `offset` was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerSnapshot {
    /// The log offset the state is as of (the next offset to replay from).
    pub offset: i64,
    /// The embedder's encoding of the state.
    pub bytes: Vec<u8>,
}

/// The file bytes of a snapshot of `payload` at `offset` (the caller checked the payload's size).
pub(crate) fn encode(offset: i64, payload: &[u8]) -> Vec<u8> {
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&VERSION.to_be_bytes());
    bytes.extend_from_slice(&offset.to_be_bytes());
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    bytes.extend_from_slice(&len.to_be_bytes());
    bytes.extend_from_slice(&crc32c::crc32c(payload).to_be_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

/// The snapshot in `bytes`, read from the file named for `offset`, or why it is not one.
pub(crate) fn decode(bytes: &[u8], offset: i64) -> Result<ProducerSnapshot, &'static str> {
    let header = bytes.get(..HEADER_BYTES).ok_or("shorter than its header")?;
    let (magic, rest) = header.split_at(4);
    if magic != MAGIC {
        return Err("not a producer snapshot (magic)");
    }
    let field = |at: usize, len: usize| rest.get(at..at + len).unwrap_or_default();
    let version = u16::from_be_bytes(field(0, 2).try_into().map_err(|_| "short version")?);
    if version != VERSION {
        return Err("unknown producer snapshot version");
    }
    let stored = i64::from_be_bytes(field(2, 8).try_into().map_err(|_| "short offset")?);
    if stored != offset {
        return Err("the offset inside differs from the file name");
    }
    let len = u32::from_be_bytes(field(10, 4).try_into().map_err(|_| "short length")?) as usize;
    let crc = u32::from_be_bytes(field(14, 4).try_into().map_err(|_| "short crc")?);
    let payload = bytes.get(HEADER_BYTES..).unwrap_or_default();
    if len > PRODUCER_SNAPSHOT_BYTES_MAX || payload.len() != len {
        return Err("the payload length does not match");
    }
    if crc32c::crc32c(payload) != crc {
        return Err("the payload fails its CRC32C");
    }
    Ok(ProducerSnapshot {
        offset,
        bytes: payload.to_vec(),
    })
}

/// `dir/<20-digit offset>.snapshot`.
pub(crate) fn path(dir: &Path, offset: i64) -> PathBuf {
    fs::segment_file(dir, offset, SNAPSHOT_SUFFIX)
}

/// The offset a snapshot file name encodes, if it is one.
pub(crate) fn parse_name(path: &Path) -> Option<i64> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(SNAPSHOT_SUFFIX)?.strip_suffix('.')?;
    if stem.len() != 20 || !stem.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_and_damage_is_refused() {
        let bytes = encode(42, b"producers");
        assert_eq!(
            decode(&bytes, 42),
            Ok(ProducerSnapshot {
                offset: 42,
                bytes: b"producers".to_vec()
            })
        );
        assert!(decode(&bytes, 43).is_err());
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x40;
            assert!(decode(&damaged, 42).is_err(), "byte {at}");
        }
        assert!(decode(&bytes[..bytes.len() - 1], 42).is_err());
        let path = path(Path::new("/x"), 42);
        assert_eq!(path, Path::new("/x/00000000000000000042.snapshot"));
        assert_eq!(parse_name(&path), Some(42));
        assert_eq!(parse_name(Path::new("/x/42.snapshot")), None);
    }

    proptest! {
        #[test]
        fn any_bytes_decode_or_refuse_without_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..64),
            offset in any::<i64>(),
        ) {
            let _ = decode(&bytes, offset);
        }

        #[test]
        fn any_payload_round_trips(
            payload in proptest::collection::vec(any::<u8>(), 0..256),
            offset in 0i64..i64::MAX,
        ) {
            let decoded = decode(&encode(offset, &payload), offset).unwrap();
            prop_assert_eq!(decoded.bytes, payload);
        }
    }
}
