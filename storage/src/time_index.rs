//! The sparse time index of one segment: entries of (max timestamp so far as i64, offset − base
//! offset as u32) added alongside offset-index entries whenever the segment's greatest timestamp
//! has grown. The offset in an entry is the base offset of the batch that first reached that
//! timestamp, so every earlier batch has a smaller timestamp. Owns that layout and its lookup; must
//! never be trusted over the log (sanity-checked, rebuilt on doubt).

use std::path::Path;

use crate::error::Result;
use crate::index_file::IndexFile;
use crate::io::FileIo;
use crate::limits::TIME_INDEX_ENTRY_BYTES;

/// Timestamp → offset index of a segment.
#[derive(Debug)]
pub(crate) struct TimeIndex {
    base_offset: i64,
    file: IndexFile,
}

fn decode(entry: &[u8]) -> (i64, u32) {
    let mut timestamp = [0u8; 8];
    let mut relative = [0u8; 4];
    if let (Some(a), Some(b)) = (entry.get(0..8), entry.get(8..12)) {
        timestamp.copy_from_slice(a);
        relative.copy_from_slice(b);
    }
    (i64::from_be_bytes(timestamp), u32::from_be_bytes(relative))
}

impl TimeIndex {
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
        let file = IndexFile::create(io, path, TIME_INDEX_ENTRY_BYTES, capacity_bytes)?;
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

    /// Entry `index` as (timestamp, absolute offset).
    pub(crate) fn entry(&self, index: usize) -> Option<(i64, i64)> {
        let (timestamp, relative) = decode(self.file.entry(index)?);
        Some((timestamp, self.base_offset + i64::from(relative)))
    }

    /// The last entry.
    pub(crate) fn last(&self) -> Option<(i64, i64)> {
        self.file.len().checked_sub(1).and_then(|i| self.entry(i))
    }

    /// Adds (timestamp, offset) if the timestamp is greater than the last entry's; `false` only
    /// when the index is full.
    pub(crate) fn maybe_append(&mut self, timestamp: i64, offset: i64) -> bool {
        if self.last().is_some_and(|(last, _)| last >= timestamp) {
            return true;
        }
        let Ok(relative) = u32::try_from(offset - self.base_offset) else {
            return false;
        };
        let mut entry = [0u8; TIME_INDEX_ENTRY_BYTES];
        entry[..8].copy_from_slice(&timestamp.to_be_bytes());
        entry[8..].copy_from_slice(&relative.to_be_bytes());
        self.file.push(&entry)
    }

    /// The last entry whose timestamp is below `target`: scanning from its offset finds the
    /// first batch with max timestamp ≥ `target`, because every batch before it is below its
    /// timestamp. `None`: scan from the segment's start.
    pub(crate) fn lookup(&self, target: i64) -> Option<(i64, i64)> {
        self.file
            .last_at_most(|entry| decode(entry).0, target.saturating_sub(1))
            .and_then(|index| self.entry(index))
    }

    /// Whether timestamps strictly increase and offsets do not decrease nor pass `next_offset`.
    pub(crate) fn is_sane(&self, next_offset: i64) -> bool {
        let mut previous: Option<(i64, i64)> = None;
        for index in 0..self.file.len() {
            let Some((timestamp, offset)) = self.entry(index) else {
                return false;
            };
            if offset >= next_offset {
                return false;
            }
            if let Some((last_timestamp, last_offset)) = previous {
                if timestamp <= last_timestamp || offset < last_offset {
                    return false;
                }
            }
            previous = Some((timestamp, offset));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::StdIo;

    #[test]
    fn lookup_finds_last_entry_below_target() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = TimeIndex::create(&StdIo, &dir.path().join("0.ti"), 50, 1200).unwrap();
        assert_eq!(index.lookup(1000), None);
        assert!(index.maybe_append(1000, 55));
        assert!(index.maybe_append(900, 56)); // not greater: skipped
        assert!(index.maybe_append(2000, 60));
        assert_eq!(index.last(), Some((2000, 60)));
        assert_eq!(index.lookup(1000), None);
        assert_eq!(index.lookup(1001), Some((1000, 55)));
        assert_eq!(index.lookup(2001), Some((2000, 60)));
        assert!(index.is_sane(61));
        assert!(!index.is_sane(60));
    }
}
