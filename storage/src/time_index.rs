//! The sparse time index of one segment: entries of (max timestamp so far as i64, offset − base
//! offset as u32) added alongside offset-index entries whenever the segment's greatest timestamp
//! has grown. The offset in an entry is the base offset of the batch that first reached that
//! timestamp, so every earlier batch has a smaller timestamp. Owns that layout and its lookup; must
//! never be trusted over the log (sanity-checked, rebuilt on doubt).

use crate::limits::TIME_INDEX_ENTRY_BYTES;
use crate::sparse_index::{field, relative_offset, Entry, SparseIndex};

/// Timestamp → offset index of a segment.
pub(crate) type TimeIndex = SparseIndex<TimeEntry>;

/// One entry: the segment's greatest timestamp so far and the base offset of the batch that
/// first reached it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimeEntry {
    /// Greatest batch max timestamp up to and including that batch.
    pub(crate) timestamp_ms: i64,
    /// Base offset of the batch (absolute).
    pub(crate) offset: i64,
}

impl Entry for TimeEntry {
    const BYTES: usize = TIME_INDEX_ENTRY_BYTES;
    type Encoded = [u8; TIME_INDEX_ENTRY_BYTES];

    fn decode(bytes: &[u8], base_offset: i64) -> Self {
        Self {
            timestamp_ms: i64::from_be_bytes(field(bytes, 0)),
            offset: base_offset + i64::from(u32::from_be_bytes(field(bytes, 8))),
        }
    }

    fn encode(&self, base_offset: i64) -> Option<Self::Encoded> {
        let relative = relative_offset(self.offset, base_offset)?;
        let mut encoded = [0u8; TIME_INDEX_ENTRY_BYTES];
        encoded[..8].copy_from_slice(&self.timestamp_ms.to_be_bytes());
        encoded[8..].copy_from_slice(&relative.to_be_bytes());
        Some(encoded)
    }

    fn key(&self) -> i64 {
        self.timestamp_ms
    }

    fn follows(&self, previous: &Self) -> bool {
        self.timestamp_ms > previous.timestamp_ms && self.offset >= previous.offset
    }
}

impl SparseIndex<TimeEntry> {
    /// Adds (timestamp, offset) if the timestamp is greater than the last entry's; `false`
    /// when the index is full (or the offset does not fit 4 bytes relative to the base), or when
    /// the last entry names a later offset. That happens only with a damaged index read from
    /// disk, which the scan that resumes it appends to before checking it against the log
    /// (`Segment::resume_tail`): the entry is refused rather than break the order, and that check
    /// then rejects the index.
    pub(crate) fn maybe_append(&mut self, timestamp_ms: i64, offset: i64) -> bool {
        match self.last() {
            Some(last) if last.timestamp_ms >= timestamp_ms => return true,
            Some(last) if last.offset > offset => return false,
            _ => {}
        }
        self.push(&TimeEntry {
            timestamp_ms,
            offset,
        })
    }

    /// The last entry whose timestamp is below `target_ms`: scanning from its offset finds the
    /// first batch with max timestamp ≥ `target_ms`, because every batch before it is below its
    /// timestamp. `None`: scan from the segment's start.
    pub(crate) fn lookup(&self, target_ms: i64) -> Option<TimeEntry> {
        self.last_at_most(target_ms.saturating_sub(1))
    }

    /// Whether timestamps strictly increase and offsets do not decrease nor reach `next_offset`.
    pub(crate) fn is_sane_for(&self, next_offset: i64) -> bool {
        self.is_sane(|entry| entry.offset < next_offset)
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
        let entry = |timestamp_ms, offset| TimeEntry {
            timestamp_ms,
            offset,
        };
        assert_eq!(index.last(), Some(entry(2000, 60)));
        assert_eq!(index.lookup(1000), None);
        assert_eq!(index.lookup(1001), Some(entry(1000, 55)));
        assert_eq!(index.lookup(2001), Some(entry(2000, 60)));
        assert!(index.is_sane_for(61));
        assert!(!index.is_sane_for(60));
    }
}
