//! The embedded store's snapshot file: the whole state at one journal entry, written atomically
//! so a crash leaves either the old or the new one. Layout: magic, `u32` CRC32C of the rest,
//! `u64` index of the last journal entry it includes, the encoded [`Snapshot`]. Any damage is a
//! clear error: a snapshot is never guessed at.

use std::path::Path;

use skiff_storage::DurableFiles;

use super::files::{file_error, is_too_large};
use crate::codec;
use crate::core::Snapshot;
use crate::error::{Error, Result};
use crate::limits;

/// File name of the snapshot inside the store's directory.
pub(super) const SNAPSHOT_FILE: &str = "snapshot";
const MAGIC: &[u8; 8] = b"SKMSNAP1";

/// Writes `snapshot`, which includes every journal entry up to `last_index`.
pub(super) fn write(
    files: &DurableFiles,
    dir: &Path,
    snapshot: &Snapshot,
    last_index: u64,
) -> Result<()> {
    let mut body = last_index.to_le_bytes().to_vec();
    codec::encode_snapshot(snapshot, &mut body);
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    bytes.extend_from_slice(&body);
    let path = dir.join(SNAPSHOT_FILE);
    files
        .write_atomically(&path, &bytes)
        .map_err(|error| file_error("writing", error))
}

/// Reads the snapshot of `dir` and the index of the last journal entry it includes; `None`
/// when there is none yet.
pub(super) fn read(files: &DurableFiles, dir: &Path) -> Result<Option<(Snapshot, u64)>> {
    let path = dir.join(SNAPSHOT_FILE);
    let corrupt = |reason: String| Error::CorruptSnapshot {
        path: path.clone(),
        reason,
    };
    let bytes = match files.read_small(&path, limits::SNAPSHOT_BYTES_MAX) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(None),
        Err(error) if is_too_large(&error) => {
            return Err(corrupt(format!(
                "more than {} bytes",
                limits::SNAPSHOT_BYTES_MAX
            )));
        }
        Err(error) => return Err(file_error("reading", error)),
    };
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
    let snapshot = codec::decode_snapshot(body).map_err(|error| corrupt(error.to_string()))?;
    Ok(Some((snapshot, u64::from_le_bytes(*index))))
}
