//! The sparse offset index of one segment: entries of (offset − base offset as u32, position as
//! u32), big-endian, one per `index_interval_bytes` of log, each naming the first byte of a batch
//! and that batch's base offset. Owns the entry layout and its sanity rules; must never be the
//! only source of a position (readers verify the batch header found there).

use std::path::Path;

use crate::error::Result;
use crate::index_file::IndexFile;
use crate::io::FileIo;
use crate::limits::OFFSET_INDEX_ENTRY_BYTES;

/// Offset → position index of a segment.
#[derive(Debug)]
pub(crate) struct OffsetIndex {
    base_offset: i64,
    file: IndexFile,
}

/// Splits an entry into (relative offset, position).
fn decode(entry: &[u8]) -> (u32, u32) {
    let mut relative = [0u8; 4];
    let mut position = [0u8; 4];
    if let (Some(a), Some(b)) = (entry.get(0..4), entry.get(4..8)) {
        relative.copy_from_slice(a);
        position.copy_from_slice(b);
    }
    (u32::from_be_bytes(relative), u32::from_be_bytes(position))
}

impl OffsetIndex {
    /// Wraps an index file of the segment starting at `base_offset`.
    pub(crate) fn new(base_offset: i64, file: IndexFile) -> Self {
        Self { base_offset, file }
    }

    /// Creates an empty index at `path`.
    pub(crate) fn create(
        io: &dyn FileIo,
        path: &Path,
        base_offset: i64,
        capacity_bytes: u32,
    ) -> Result<Self> {
        let file = IndexFile::create(io, path, OFFSET_INDEX_ENTRY_BYTES, capacity_bytes)?;
        Ok(Self::new(base_offset, file))
    }

    /// The underlying file.
    pub(crate) fn file(&self) -> &IndexFile {
        &self.file
    }

    /// The underlying file, for sealing and resizing.
    pub(crate) fn file_mut(&mut self) -> &mut IndexFile {
        &mut self.file
    }

    /// Whether the index can take no more entries.
    pub(crate) fn is_full(&self) -> bool {
        self.file.is_full()
    }

    /// Entry `index` as (absolute offset, position).
    pub(crate) fn entry(&self, index: usize) -> Option<(i64, u32)> {
        let (relative, position) = decode(self.file.entry(index)?);
        Some((self.base_offset + i64::from(relative), position))
    }

    /// The last entry.
    pub(crate) fn last(&self) -> Option<(i64, u32)> {
        self.file.len().checked_sub(1).and_then(|i| self.entry(i))
    }

    /// Adds an entry; the caller guarantees offset and position grow and the offset fits u32
    /// relative to the base. `false` if the index is full.
    pub(crate) fn append(&mut self, offset: i64, position: u32) -> bool {
        let Ok(relative) = u32::try_from(offset - self.base_offset) else {
            return false;
        };
        debug_assert!(self.last().is_none_or(|(o, p)| o < offset && p < position));
        let mut entry = [0u8; OFFSET_INDEX_ENTRY_BYTES];
        entry[..4].copy_from_slice(&relative.to_be_bytes());
        entry[4..].copy_from_slice(&position.to_be_bytes());
        self.file.push(&entry)
    }

    /// The entry with the greatest offset ≤ `target`, or (base offset, 0).
    pub(crate) fn lookup(&self, target: i64) -> (i64, u32) {
        let base = self.base_offset;
        self.file
            .last_at_most(|entry| base + i64::from(decode(entry).0), target)
            .and_then(|index| self.entry(index))
            .unwrap_or((base, 0))
    }

    /// Whether offsets and positions strictly increase and every position is inside the log.
    pub(crate) fn is_sane(&self, log_bytes: u64) -> bool {
        let mut previous: Option<(i64, u32)> = None;
        for index in 0..self.file.len() {
            let Some((offset, position)) = self.entry(index) else {
                return false;
            };
            if u64::from(position) >= log_bytes {
                return false;
            }
            if let Some((last_offset, last_position)) = previous {
                if offset <= last_offset || position <= last_position {
                    return false;
                }
            }
            previous = Some((offset, position));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::StdIo;

    #[test]
    fn lookup_is_greatest_lower_bound() {
        let dir = tempfile::tempdir().unwrap();
        let mut index =
            OffsetIndex::create(&StdIo, &dir.path().join("0.index"), 100, 1024).unwrap();
        assert_eq!(index.lookup(150), (100, 0));
        assert!(index.append(110, 500));
        assert!(index.append(120, 1000));
        assert_eq!(index.lookup(100), (100, 0));
        assert_eq!(index.lookup(115), (110, 500));
        assert_eq!(index.lookup(120), (120, 1000));
        assert_eq!(index.lookup(10_000), (120, 1000));
        assert!(index.is_sane(1001));
        assert!(!index.is_sane(1000));
        assert!(!index.append(100 + i64::from(u32::MAX) + 1, 2000));
    }
}
