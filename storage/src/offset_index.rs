//! The sparse offset index of one segment: entries of (offset − base offset as u32, position as
//! u32), big-endian, one per `index_interval_bytes` of log, each naming the first byte of a batch
//! and that batch's base offset. Owns the entry layout and its sanity rules; must never be the
//! only source of a position (readers verify the batch header found there).

use crate::limits::OFFSET_INDEX_ENTRY_BYTES;
use crate::sparse_index::{field, relative_offset, Entry, SparseIndex};

/// Offset → position index of a segment.
pub(crate) type OffsetIndex = SparseIndex<OffsetEntry>;

/// One entry: a batch's base offset and the position of its first byte in `.log`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OffsetEntry {
    /// Base offset of the batch (absolute).
    pub(crate) offset: i64,
    /// Byte position of the batch in the segment's `.log`.
    pub(crate) position: u32,
}

impl Entry for OffsetEntry {
    const BYTES: usize = OFFSET_INDEX_ENTRY_BYTES;
    type Encoded = [u8; OFFSET_INDEX_ENTRY_BYTES];

    fn decode(bytes: &[u8], base_offset: i64) -> Self {
        Self {
            offset: base_offset + i64::from(u32::from_be_bytes(field(bytes, 0))),
            position: u32::from_be_bytes(field(bytes, 4)),
        }
    }

    fn encode(&self, base_offset: i64) -> Option<Self::Encoded> {
        let relative = relative_offset(self.offset, base_offset)?;
        let mut encoded = [0u8; OFFSET_INDEX_ENTRY_BYTES];
        encoded[..4].copy_from_slice(&relative.to_be_bytes());
        encoded[4..].copy_from_slice(&self.position.to_be_bytes());
        Some(encoded)
    }

    fn key(&self) -> i64 {
        self.offset
    }

    fn follows(&self, previous: &Self) -> bool {
        self.offset > previous.offset && self.position > previous.position
    }
}

impl SparseIndex<OffsetEntry> {
    /// Adds an entry; the caller guarantees offset and position grow. `false` if the index is full
    /// or the offset does not fit 4 bytes relative to the base.
    pub(crate) fn append(&mut self, offset: i64, position: u32) -> bool {
        self.push(&OffsetEntry { offset, position })
    }

    /// The entry with the greatest offset ≤ `target`, or (base offset, 0).
    pub(crate) fn lookup(&self, target: i64) -> OffsetEntry {
        self.last_at_most(target).unwrap_or(OffsetEntry {
            offset: self.base_offset(),
            position: 0,
        })
    }

    /// Whether offsets and positions strictly increase and every position is inside the log.
    pub(crate) fn is_sane_for(&self, log_bytes: u64) -> bool {
        self.is_sane(|entry| u64::from(entry.position) < log_bytes)
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
        let entry = |offset, position| OffsetEntry { offset, position };
        assert_eq!(index.lookup(150), entry(100, 0));
        assert!(index.append(110, 500));
        assert!(index.append(120, 1000));
        assert_eq!(index.lookup(100), entry(100, 0));
        assert_eq!(index.lookup(115), entry(110, 500));
        assert_eq!(index.lookup(120), entry(120, 1000));
        assert_eq!(index.lookup(10_000), entry(120, 1000));
        assert!(index.is_sane_for(1001));
        assert!(!index.is_sane_for(1000));
        assert!(!index.append(100 + i64::from(u32::MAX) + 1, 2000));
    }
}
