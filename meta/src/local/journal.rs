//! The embedded store's journal: every [`Change`] as a framed record, appended and fsynced
//! before the operation that made it is answered. Frame: `u32` payload length, `u32` CRC32C of
//! the payload, payload = `u64` entry index + the encoded change. The file starts with a magic
//! header. On recovery a torn last record (a crash mid-append) is cut off; a bad record followed
//! by a good one is damage, not a torn write, and is refused.

use std::path::Path;

use skiff_storage::{AppendFile, DurableFiles};

use super::files::{file_error, is_too_large};
use crate::codec::{self, DecodeError};
use crate::core::{Change, ReplayError};
use crate::error::{Error, Result};
use crate::limits;

/// File name of the journal inside the store's directory.
pub(super) const JOURNAL_FILE: &str = "journal";
/// First bytes of a journal file: format and version.
const MAGIC: &[u8; 8] = b"SKMJRNL1";
const FRAME_BYTES: usize = 8;
const INDEX_BYTES: usize = 8;

/// A journal open for appending.
#[derive(Debug)]
pub(super) struct Journal {
    file: AppendFile,
    last_index: u64,
}

/// What a scan of journal bytes found.
#[derive(Debug, PartialEq)]
pub struct Scan {
    /// Valid records: (entry index, change), in file order.
    pub records: Vec<(u64, Change)>,
    /// Length of the valid prefix (header included); anything after it is a torn tail.
    pub valid_bytes: usize,
}

/// Damage in a journal that is not a torn tail (recovery refuses to open it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JournalDamage {
    /// The file does not start with the journal's magic.
    #[error("not a skiff metadata journal (bad magic)")]
    BadMagic,
    /// A complete record whose checksum does not match its bytes.
    #[error("checksum mismatch")]
    ChecksumMismatch,
    /// A complete record whose change does not decode.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// Reads journal bytes. `Err((offset, damage))` for damage that is not a torn tail.
pub fn scan(bytes: &[u8]) -> Result<Scan, (u64, JournalDamage)> {
    if bytes.len() < MAGIC.len() {
        // A crash while the header itself was written: an empty journal.
        return Ok(Scan {
            records: Vec::new(),
            valid_bytes: 0,
        });
    }
    if !bytes.starts_with(MAGIC) {
        return Err((0, JournalDamage::BadMagic));
    }
    let mut records = Vec::new();
    let mut offset = MAGIC.len();
    while let Some(rest) = bytes.get(offset..).filter(|rest| !rest.is_empty()) {
        match read_record(rest) {
            Ok((index, change, length)) => {
                records.push((index, change));
                offset += length;
            }
            Err(RecordError::Torn) => break,
            Err(RecordError::Bad { length, reason }) => {
                let next = offset + length;
                let after = bytes.get(next..).filter(|after| !after.is_empty());
                if after.is_some_and(|after| read_record(after).is_ok()) {
                    return Err((offset as u64, reason));
                }
                break;
            }
        }
    }
    Ok(Scan {
        records,
        valid_bytes: offset,
    })
}

enum RecordError {
    /// The record does not fit in the bytes left: an append cut short.
    Torn,
    /// The record is complete but wrong; `length` is its framed length, to look past it.
    Bad {
        length: usize,
        reason: JournalDamage,
    },
}

fn read_record(bytes: &[u8]) -> Result<(u64, Change, usize), RecordError> {
    let Some((frame, rest)) = bytes.split_first_chunk::<FRAME_BYTES>() else {
        return Err(RecordError::Torn);
    };
    let length = u32::from_le_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
    let crc = u32::from_le_bytes([frame[4], frame[5], frame[6], frame[7]]);
    if !(INDEX_BYTES..=limits::JOURNAL_RECORD_BYTES_MAX + INDEX_BYTES).contains(&length) {
        // A length no writer produces: garbage where the tail was being written.
        return Err(RecordError::Torn);
    }
    let Some(payload) = rest.get(..length) else {
        return Err(RecordError::Torn);
    };
    let framed = FRAME_BYTES + length;
    if crc32c::crc32c(payload) != crc {
        return Err(RecordError::Bad {
            length: framed,
            reason: JournalDamage::ChecksumMismatch,
        });
    }
    let (index, change) = payload.split_at(INDEX_BYTES);
    let index = u64::from_le_bytes(index.try_into().map_err(|_| RecordError::Torn)?);
    let change = codec::decode_change(change).map_err(|error| RecordError::Bad {
        length: framed,
        reason: error.into(),
    })?;
    Ok((index, change, framed))
}

/// Appends one framed record (entry `index`, `change`) to `out`.
// INVARIANT: `out` holds `start + FRAME_BYTES` bytes or more, pushed at the top; a change is
// bounded by `limits::JOURNAL_RECORD_BYTES_MAX`, far below 4 GiB (checked before it is applied).
#[allow(clippy::indexing_slicing, clippy::expect_used)]
pub fn encode_record(index: u64, change: &Change, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; FRAME_BYTES]);
    out.extend_from_slice(&index.to_le_bytes());
    codec::encode_change(change, out);
    let payload_bytes = out.len() - start - FRAME_BYTES;
    debug_assert!(payload_bytes <= limits::JOURNAL_RECORD_BYTES_MAX + INDEX_BYTES);
    let crc = crc32c::crc32c(&out[start + FRAME_BYTES..]);
    let length = u32::try_from(payload_bytes).expect("records are bounded far below 4 GiB");
    out[start..start + 4].copy_from_slice(&length.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// The magic header every journal starts with.
pub const JOURNAL_MAGIC: &[u8; 8] = MAGIC;

impl Journal {
    /// Starts an empty journal in `dir` (replacing any old one atomically), whose next entry
    /// gets index `last_index + 1`.
    pub(super) fn create(files: &DurableFiles, dir: &Path, last_index: u64) -> Result<Self> {
        let path = dir.join(JOURNAL_FILE);
        files
            .write_atomically(&path, MAGIC)
            .map_err(|error| file_error("writing", error))?;
        Self::open_append(files, &path, last_index)
    }

    /// Reads the journal of `dir`, hands every record to `apply` in order, cuts a torn tail,
    /// and opens the journal for appending. No journal: an empty one is created.
    pub(super) fn recover(
        files: &DurableFiles,
        dir: &Path,
        snapshot_index: u64,
        mut apply: impl FnMut(&Change) -> Result<(), ReplayError>,
    ) -> Result<Self> {
        let path = dir.join(JOURNAL_FILE);
        let corrupt = |offset: u64, reason: String| Error::CorruptJournal {
            path: path.clone(),
            offset,
            reason,
        };
        let bytes = match files.read_small(&path, limits::JOURNAL_BYTES_MAX) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Self::create(files, dir, snapshot_index),
            Err(error) if is_too_large(&error) => {
                return Err(corrupt(
                    limits::JOURNAL_BYTES_MAX,
                    format!("more than {} bytes", limits::JOURNAL_BYTES_MAX),
                ));
            }
            Err(error) => return Err(file_error("reading", error)),
        };
        let scan = scan(&bytes).map_err(|(offset, damage)| corrupt(offset, damage.to_string()))?;
        if scan.valid_bytes < MAGIC.len() {
            return Self::create(files, dir, snapshot_index);
        }
        let mut last_index = snapshot_index;
        for (index, change) in &scan.records {
            if *index <= snapshot_index {
                continue; // already in the snapshot (a crash between snapshot and new journal)
            }
            if *index != last_index + 1 {
                return Err(corrupt(
                    0,
                    format!("entry {index} follows entry {last_index}"),
                ));
            }
            apply(change).map_err(|reason| corrupt(0, format!("entry {index}: {reason}")))?;
            last_index = *index;
        }
        let mut journal = Self::open_append(files, &path, last_index)?;
        if scan.valid_bytes < bytes.len() {
            tracing::warn!(
                path = %path.display(),
                cut_bytes = bytes.len() - scan.valid_bytes,
                "cutting a torn tail off the metadata journal"
            );
            journal
                .file
                .truncate(scan.valid_bytes as u64)
                .map_err(|error| file_error("truncating", error))?;
        }
        Ok(journal)
    }

    fn open_append(files: &DurableFiles, path: &Path, last_index: u64) -> Result<Self> {
        let file = files
            .open_append(path)
            .map_err(|error| file_error("opening", error))?;
        Ok(Self { file, last_index })
    }

    /// Appends the changes and fsyncs. On error the caller must stop writing (poison).
    pub(super) fn append(&mut self, changes: &[Change]) -> Result<()> {
        let mut buffer = Vec::new();
        let mut index = self.last_index;
        for change in changes {
            index += 1;
            encode_record(index, change, &mut buffer);
        }
        self.file
            .append(&buffer)
            .map_err(|error| file_error("appending to", error))?;
        self.file
            .sync_data()
            .map_err(|error| file_error("syncing", error))?;
        self.last_index = index;
        Ok(())
    }

    /// Bytes in the file.
    pub(super) fn bytes(&self) -> u64 {
        self.file.len()
    }

    /// Index of the last entry written.
    pub(super) fn last_index(&self) -> u64 {
        self.last_index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal_bytes(changes: &[Change]) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let mut journal = Journal::create(&DurableFiles::real(), dir.path(), 0).unwrap();
        journal.append(changes).unwrap();
        std::fs::read(dir.path().join(JOURNAL_FILE)).unwrap()
    }

    fn changes() -> Vec<Change> {
        (2..6).map(Change::Compact).collect()
    }

    #[test]
    fn every_cut_of_the_tail_keeps_exactly_the_whole_records() {
        let bytes = journal_bytes(&changes());
        let record = (bytes.len() - MAGIC.len()) / 4;
        for cut in MAGIC.len()..=bytes.len() {
            let scan = scan(&bytes[..cut]).unwrap();
            let whole = (cut - MAGIC.len()) / record;
            assert_eq!(scan.records.len(), whole, "cut at {cut}");
            assert_eq!(scan.valid_bytes, MAGIC.len() + whole * record);
        }
    }

    #[test]
    fn a_damaged_last_record_is_a_torn_tail() {
        let mut bytes = journal_bytes(&changes());
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        assert_eq!(scan(&bytes).unwrap().records.len(), 3);
    }

    #[test]
    fn a_damaged_record_followed_by_a_good_one_is_corruption() {
        let mut bytes = journal_bytes(&changes());
        bytes[MAGIC.len() + FRAME_BYTES + 2] ^= 0xff;
        let (offset, reason) = scan(&bytes).unwrap_err();
        assert_eq!(offset, MAGIC.len() as u64);
        assert!(reason.to_string().contains("checksum"));
    }

    #[test]
    fn a_foreign_file_is_refused() {
        assert!(scan(b"something else entirely").is_err());
    }
}
