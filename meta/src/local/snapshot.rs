//! The embedded store's snapshot file: the whole state at one journal entry, written atomically
//! so a crash leaves either the old or the new one. Layout: magic, `u32` CRC32C of the rest,
//! `u64` index of the last journal entry it includes, the encoded [`Snapshot`]. Any damage is a
//! clear error: a snapshot is never guessed at.

use std::path::Path;

use super::files::replace_atomically;
use crate::codec;
use crate::core::Snapshot;
use crate::error::{Error, Result};
use crate::limits;

/// File name of the snapshot inside the store's directory.
pub(super) const SNAPSHOT_FILE: &str = "snapshot";
const MAGIC: &[u8; 8] = b"SKMSNAP1";

/// Writes `snapshot`, which includes every journal entry up to `last_index`.
pub(super) fn write(dir: &Path, snapshot: &Snapshot, last_index: u64) -> Result<()> {
    let mut body = last_index.to_le_bytes().to_vec();
    codec::encode_snapshot(snapshot, &mut body);
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    bytes.extend_from_slice(&body);
    replace_atomically(&dir.join(SNAPSHOT_FILE), &bytes)
}

/// Reads the snapshot of `dir` and the index of the last journal entry it includes; `None`
/// when there is none yet.
pub(super) fn read(dir: &Path) -> Result<Option<(Snapshot, u64)>> {
    let path = dir.join(SNAPSHOT_FILE);
    let corrupt = |reason: String| Error::CorruptSnapshot {
        path: path.clone(),
        reason,
    };
    match std::fs::metadata(&path) {
        Ok(metadata) if metadata.len() > limits::SNAPSHOT_BYTES_MAX => {
            return Err(corrupt(format!(
                "{} bytes, at most {} expected",
                metadata.len(),
                limits::SNAPSHOT_BYTES_MAX
            )));
        }
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(Error::io(format!("reading {}", path.display()), error)),
    }
    let bytes =
        std::fs::read(&path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    let rest = bytes
        .strip_prefix(MAGIC)
        .ok_or_else(|| corrupt("bad magic".into()))?;
    let (crc, body) = rest
        .split_first_chunk::<4>()
        .ok_or_else(|| corrupt("truncated".into()))?;
    if crc32c::crc32c(body) != u32::from_le_bytes(*crc) {
        return Err(corrupt("checksum mismatch".into()));
    }
    let (index, body) = body
        .split_first_chunk::<8>()
        .ok_or_else(|| corrupt("truncated".into()))?;
    let snapshot = codec::decode_snapshot(body).map_err(corrupt)?;
    Ok(Some((snapshot, u64::from_le_bytes(*index))))
}
