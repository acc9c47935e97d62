//! The one shape of both segment indexes: a sparse, memory-mapped [`IndexFile`] of fixed-size
//! entries whose offsets are stored relative to the segment's base offset, typed by an [`Entry`]
//! (`offset_index::OffsetEntry`, `time_index::TimeEntry`). Owns wrapping and opening the file,
//! typed reads and appends, the greatest-lower-bound lookup and the ordering walk of the sanity
//! check; must never hold the rules of one kind of index (what an entry means, when one is added,
//! what bounds it must respect: those stay with the entry types).

use std::marker::PhantomData;
use std::path::Path;

use crate::error::Result;
use crate::index_file::IndexFile;
use crate::io::FileIo;

/// One kind of index entry: its byte layout and its ordering rule.
pub(crate) trait Entry: Copy {
    /// Bytes of one encoded entry.
    const BYTES: usize;
    /// The encoded form, `BYTES` long.
    type Encoded: AsRef<[u8]>;

    /// Decodes `bytes` (`BYTES` long) of an index of the segment at `base_offset`.
    fn decode(bytes: &[u8], base_offset: i64) -> Self;
    /// Encodes the entry; `None` if it cannot be represented (its offset is not within 4 bytes
    /// of `base_offset`).
    fn encode(&self, base_offset: i64) -> Option<Self::Encoded>;
    /// The key entries are sorted by, which lookups search.
    fn key(&self) -> i64;
    /// Whether `self` may directly follow `previous` in a sane index.
    fn follows(&self, previous: &Self) -> bool;
}

/// `offset` relative to `base_offset`, as entries store it; `None` outside `0..=u32::MAX`.
pub(crate) fn relative_offset(offset: i64, base_offset: i64) -> Option<u32> {
    u32::try_from(offset.checked_sub(base_offset)?).ok()
}

/// The `N` bytes of `bytes` from `at`, or zeros if they are not there (entries come from a
/// mapping of whole entries, so they always are; the zeros keep decoding free of panics).
pub(crate) fn field<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    let mut field = [0u8; N];
    if let Some(source) = bytes.get(at..at + N) {
        field.copy_from_slice(source);
    }
    field
}

/// A sparse index of one segment over entries of type `E`.
#[derive(Debug)]
pub(crate) struct SparseIndex<E> {
    base_offset: i64,
    file: IndexFile,
    entry: PhantomData<E>,
}

impl<E: Entry> SparseIndex<E> {
    /// Creates an empty index at `path`, preallocated to `capacity_bytes`.
    pub(crate) fn create(
        io: &dyn FileIo,
        path: &Path,
        base_offset: i64,
        capacity_bytes: u32,
    ) -> Result<Self> {
        let file = IndexFile::create(io, path, E::BYTES, capacity_bytes)?;
        Ok(Self::wrap(base_offset, file))
    }

    /// Opens an existing, sealed index; `Ok(None)` if it is missing or of an impossible length.
    pub(crate) fn open(io: &dyn FileIo, path: &Path, base_offset: i64) -> Result<Option<Self>> {
        Ok(IndexFile::open(io, path, E::BYTES)?.map(|file| Self::wrap(base_offset, file)))
    }

    fn wrap(base_offset: i64, file: IndexFile) -> Self {
        Self {
            base_offset,
            file,
            entry: PhantomData,
        }
    }

    /// The underlying file, for sealing and resizing.
    pub(crate) fn file_mut(&mut self) -> &mut IndexFile {
        &mut self.file
    }

    /// Base offset of the segment.
    pub(crate) fn base_offset(&self) -> i64 {
        self.base_offset
    }

    /// Whether the index can take no more entries.
    pub(crate) fn is_full(&self) -> bool {
        self.file.is_full()
    }

    /// Entry number `index`.
    pub(crate) fn entry(&self, index: usize) -> Option<E> {
        Some(E::decode(self.file.entry(index)?, self.base_offset))
    }

    /// The last entry.
    pub(crate) fn last(&self) -> Option<E> {
        self.file.len().checked_sub(1).and_then(|i| self.entry(i))
    }

    /// Appends `entry`; `false` if the index is full or the entry cannot be represented. The
    /// caller keeps the order ([`Entry::follows`]).
    pub(crate) fn push(&mut self, entry: &E) -> bool {
        debug_assert!(self.last().is_none_or(|last| entry.follows(&last)));
        match entry.encode(self.base_offset) {
            Some(encoded) => self.file.push(encoded.as_ref()),
            None => false,
        }
    }

    /// The last entry whose key is ≤ `target`.
    pub(crate) fn last_at_most(&self, target: i64) -> Option<E> {
        let base_offset = self.base_offset;
        self.file
            .last_at_most(|bytes| E::decode(bytes, base_offset).key(), target)
            .and_then(|index| self.entry(index))
    }

    /// Whether every entry is `in_bounds` and follows the one before it.
    pub(crate) fn is_sane(&self, in_bounds: impl Fn(&E) -> bool) -> bool {
        let mut previous: Option<E> = None;
        for index in 0..self.file.len() {
            let Some(entry) = self.entry(index) else {
                return false;
            };
            if !in_bounds(&entry) || previous.is_some_and(|previous| !entry.follows(&previous)) {
                return false;
            }
            previous = Some(entry);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_offsets_fit_four_bytes_or_are_refused() {
        assert_eq!(relative_offset(100, 100), Some(0));
        assert_eq!(
            relative_offset(100 + i64::from(u32::MAX), 100),
            Some(u32::MAX)
        );
        assert_eq!(relative_offset(101 + i64::from(u32::MAX), 100), None);
        assert_eq!(relative_offset(99, 100), None);
        assert_eq!(relative_offset(i64::MIN, 1), None);
    }

    #[test]
    fn fields_read_big_endian_bytes_or_zeros() {
        let bytes = [1u8, 2, 3, 4, 5];
        assert_eq!(field::<4>(&bytes, 1), [2, 3, 4, 5]);
        assert_eq!(field::<4>(&bytes, 2), [0; 4]);
    }
}
