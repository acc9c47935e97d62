//! A memory-mapped file of fixed-size, sorted index entries: the storage shared by the offset and
//! time indexes. Owns preallocation, appending, sealing (trimming to the used size) and the
//! warm-tail binary search; must never interpret an entry (the typed indexes do) nor be trusted
//! over the log (an index is a cache, rebuilt when it does not check out). Holds no file
//! descriptor between calls: a mapping keeps its file alive on its own, so the descriptor is
//! closed once the file is mapped and reopened only to change the length (create, seal, unseal),
//! which keeps a partition's open files to its active `.log` (issue 20: three descriptors per
//! partition ran a broker out of files at 6,660 partitions).

use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::MmapMut;

use crate::error::{Error, Result};
use crate::io::{FileIo, OpenMode};
use crate::{limits, mmap};

/// One index file and its mapping.
#[derive(Debug)]
pub(crate) struct IndexFile {
    path: PathBuf,
    /// Covers `capacity_entries * entry_bytes`; `None` when that is zero.
    map: Option<MmapMut>,
    entry_bytes: usize,
    entries_count: usize,
    capacity_entries: usize,
    /// Entries were pushed since the last flush (a sealed index is never written again, so its
    /// flush at close costs nothing).
    dirty: bool,
}

/// How many of the `capacity` entries of `bytes` come before its zero tail (all of them in a
/// trimmed index), taking the written entries to be a prefix.
///
/// Why a galloping search from the start rather than a binary search over the whole file: the
/// file is sparse (10 MiB preallocated, a few KiB written), and every probe into its unwritten
/// part faults a page of zeros into the page cache. A binary search over 10 MiB probes about a
/// dozen such pages per index (with readahead, far more: a clean open of 2,000 logs took 13 s
/// instead of 0.06 s); galloping probes entries 1, 2, 4, … (the first 512 offset entries share
/// one page) and then halves the last gap, so it touches about two pages past the entries, and
/// only the pages of entries it would read anyway before that.
fn entries_before_zero_tail(bytes: &[u8], entry_bytes: usize, capacity: usize) -> usize {
    let is_zero = |index: usize| {
        bytes
            .get(index * entry_bytes..(index + 1) * entry_bytes)
            .is_none_or(|entry| entry.iter().all(|byte| *byte == 0))
    };
    if capacity == 0 || is_zero(0) {
        return 0;
    }
    // Invariant: the entry at `low` is not zero, the one at `high` is (or `high` is past the
    // end). Not probing the last entry first keeps a trimmed index's search in its written pages
    // and an untrimmed one's away from the end of its hole.
    let (mut low, mut high) = (0, capacity);
    let mut step = 1;
    while low + step < high {
        if is_zero(low + step) {
            high = low + step;
            break;
        }
        low += step;
        step *= 2;
    }
    while low + 1 < high {
        let middle = low + (high - low) / 2;
        if is_zero(middle) {
            high = middle;
        } else {
            low = middle;
        }
    }
    high
}

impl IndexFile {
    /// Creates (or empties) the file at `path`, preallocated (sparse) to `capacity_bytes`.
    pub(crate) fn create(
        io: &dyn FileIo,
        path: &Path,
        entry_bytes: usize,
        capacity_bytes: u32,
    ) -> Result<Self> {
        let file = io
            .open(path, OpenMode::CreateTruncate)
            .map_err(|error| Error::io(path, error))?;
        let mut index = Self {
            path: path.to_owned(),
            map: None,
            entry_bytes,
            entries_count: 0,
            capacity_entries: 0,
            dirty: false,
        };
        index.resize_file(io, &file, capacity_bytes as usize / entry_bytes)?;
        Ok(index)
    }

    /// Opens an existing index whose length is a whole number of entries. `Ok(None)` if it is
    /// missing or of an impossible length: the caller rebuilds it from the log.
    ///
    /// A sealed index is trimmed to its entries; the active one of a cleanly closed log is not
    /// (a close no longer trims it: two truncations per log, journal work a close of 10,000
    /// logs paid for every one), so its entries are those before its zero tail. That is sound
    /// because no entry written is all zeros (an offset entry's position is past the first
    /// batch, a time entry follows one with a smaller timestamp), entries are only ever pushed
    /// at the end of a file that was zero there (a truncation creates fresh indexes), and the
    /// caller checks what it finds (`is_sane_for`, the tail scan) and rebuilds on any doubt.
    pub(crate) fn open(io: &dyn FileIo, path: &Path, entry_bytes: usize) -> Result<Option<Self>> {
        let file = match io.open(path, OpenMode::ReadWrite) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(Error::io(path, error)),
        };
        let len_bytes = io.len(&file).map_err(|error| Error::io(path, error))?;
        if len_bytes % entry_bytes as u64 != 0 || len_bytes > u64::from(u32::MAX) {
            return Ok(None);
        }
        let capacity_entries = usize::try_from(len_bytes).unwrap_or(0) / entry_bytes;
        let map = Self::map(&file, path, capacity_entries * entry_bytes)?;
        let entries_count = map.as_ref().map_or(0, |map| {
            entries_before_zero_tail(map, entry_bytes, capacity_entries)
        });
        Ok(Some(Self {
            path: path.to_owned(),
            map,
            entry_bytes,
            entries_count,
            capacity_entries,
            dirty: false,
        }))
    }

    /// Maps `len` bytes of `file` with readahead off. Why: an index is touched an entry at a
    /// time (appends at its end, lookups, the zero-tail search at open) in a file that is mostly
    /// an unwritten, sparse tail, and the kernel's readahead on a fault there allocates and zeroes
    /// whole runs of pages nobody reads. A produce to 1,000 new partitions spent 49 % of the
    /// broker's CPU in those faults (`perf`, `skiff-bench throughput --partitions 1000`). Only
    /// advice, so a refusal changes nothing but speed.
    fn map(file: &File, path: &Path, len: usize) -> Result<Option<MmapMut>> {
        if len == 0 {
            return Ok(None);
        }
        let map = mmap::map_mut(file, len).map_err(|error| Error::io(path, error))?;
        let _ = map.advise(memmap2::Advice::Random);
        Ok(Some(map))
    }

    /// Sets the capacity (never below the entries held) and remaps, through a descriptor open
    /// for this call only.
    pub(crate) fn resize(&mut self, io: &dyn FileIo, capacity_entries: usize) -> Result<()> {
        let file = io
            .open(&self.path, OpenMode::ReadWrite)
            .map_err(|error| Error::io(&self.path, error))?;
        self.resize_file(io, &file, capacity_entries)
    }

    fn resize_file(&mut self, io: &dyn FileIo, file: &File, capacity_entries: usize) -> Result<()> {
        let capacity_entries = capacity_entries.max(self.entries_count);
        // The old mapping goes before the file changes length, so no mapping ever outlives the
        // bytes it covers.
        self.map = None;
        let len = capacity_entries * self.entry_bytes;
        io.set_len(file, len as u64)
            .map_err(|error| Error::io(&self.path, error))?;
        self.map = Self::map(file, &self.path, len)?;
        self.capacity_entries = capacity_entries;
        Ok(())
    }

    /// Grows a sealed index back to `capacity_bytes` so it can take appends (the active segment).
    pub(crate) fn unseal(&mut self, io: &dyn FileIo, capacity_bytes: u32) -> Result<()> {
        self.resize(io, capacity_bytes as usize / self.entry_bytes)
    }

    /// Writes the mapping back and trims the file to the entries held.
    pub(crate) fn seal(&mut self, io: &dyn FileIo) -> Result<()> {
        self.flush(io)?;
        self.resize(io, self.entries_count)
    }

    /// Trims the file to the entries held, leaving the mapping's pages for a file-system sync to
    /// write (a clean close of many logs syncs once for all of them).
    pub(crate) fn trim(&mut self, io: &dyn FileIo) -> Result<()> {
        self.resize(io, self.entries_count)
    }

    /// Writes dirty pages of the mapping back to the file (msync), if anything was pushed since
    /// the last flush.
    pub(crate) fn flush(&mut self, io: &dyn FileIo) -> Result<()> {
        match &self.map {
            Some(map) if self.dirty => io
                .sync_map(&self.path, map)
                .map_err(|error| Error::io(&self.path, error))?,
            _ => {}
        }
        self.dirty = false;
        Ok(())
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.entries_count
    }

    /// Whether another entry would not fit.
    pub(crate) fn is_full(&self) -> bool {
        self.entries_count >= self.capacity_entries
    }

    /// The entry at `index`.
    pub(crate) fn entry(&self, index: usize) -> Option<&[u8]> {
        if index >= self.entries_count {
            return None;
        }
        let start = index * self.entry_bytes;
        self.map.as_ref()?.get(start..start + self.entry_bytes)
    }

    /// Appends one entry; `false` if full.
    pub(crate) fn push(&mut self, entry: &[u8]) -> bool {
        debug_assert_eq!(entry.len(), self.entry_bytes);
        let start = self.entries_count * self.entry_bytes;
        let Some(slot) = self
            .map
            .as_mut()
            .and_then(|map| map.get_mut(start..start + entry.len()))
        else {
            return false;
        };
        slot.copy_from_slice(entry);
        self.entries_count += 1;
        self.dirty = true;
        true
    }

    /// The last entry `i` with `key(i) <= target`, searching the warm tail first.
    ///
    /// Why the tail first: a plain binary search over a large index touches pages spread over the
    /// whole file, which fault in when cold; most lookups (consumers and replicas near the head)
    /// land in the last [`limits::INDEX_WARM_BYTES`], whose pages stay resident.
    pub(crate) fn last_at_most(&self, key: impl Fn(&[u8]) -> i64, target: i64) -> Option<usize> {
        let key_at = |index: usize| self.entry(index).map(&key);
        let warm_entries = limits::INDEX_WARM_BYTES / self.entry_bytes;
        let warm_start = self.entries_count.saturating_sub(warm_entries);
        let (low, high) = match key_at(warm_start) {
            Some(first_warm) if first_warm <= target => (warm_start, self.entries_count),
            _ => (0, warm_start),
        };
        // Invariant of the loop: entries before `low` are <= target, entries at or after `high`
        // are > target (or past the searched range).
        let (mut low, mut high) = (low, high);
        while low < high {
            let middle = low + (high - low) / 2;
            match key_at(middle) {
                Some(value) if value <= target => low = middle + 1,
                _ => high = middle,
            }
        }
        low.checked_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_end_at_the_zero_tail() {
        let entry = |value: u8| [value; 4];
        let file = |entries: &[[u8; 4]]| entries.concat();
        let cases: [(&[[u8; 4]], usize); 6] = [
            (&[], 0),
            (&[entry(0); 5], 0),
            (&[entry(1), entry(2), entry(0), entry(0)], 2),
            (&[entry(1), entry(2), entry(3)], 3),
            (&[entry(1), entry(0)], 1),
            (
                &[entry(1), entry(2), entry(3), entry(4), entry(5), entry(0)],
                5,
            ),
        ];
        for (entries, expected) in cases {
            let bytes = file(entries);
            assert_eq!(
                entries_before_zero_tail(&bytes, 4, entries.len()),
                expected,
                "{entries:?}"
            );
        }
    }
    use crate::io::StdIo;

    fn key(entry: &[u8]) -> i64 {
        i64::from(u32::from_be_bytes(entry.try_into().unwrap()))
    }

    #[test]
    fn push_search_seal_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.index");
        let mut index = IndexFile::create(&StdIo, &path, 4, 40_000).unwrap();
        assert_eq!(index.last_at_most(key, 5), None);
        let keys: Vec<u32> = (0..5000).map(|i| i * 3 + 10).collect();
        for value in &keys {
            assert!(index.push(&value.to_be_bytes()));
        }
        let check = |index: &IndexFile| {
            for target in [0i64, 9, 10, 11, 12, 13, 100, 14_000, 15_007, 15_008, 20_000] {
                let expected = keys.iter().rposition(|&k| i64::from(k) <= target);
                assert_eq!(index.last_at_most(key, target), expected, "target {target}");
            }
        };
        check(&index);
        index.seal(&StdIo).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 5000 * 4);
        drop(index);
        let index = IndexFile::open(&StdIo, &path, 4).unwrap().unwrap();
        assert_eq!(index.len(), 5000);
        check(&index);
    }

    #[test]
    fn full_index_refuses_and_bad_length_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.index");
        let mut index = IndexFile::create(&StdIo, &path, 4, 8).unwrap();
        assert!(index.push(&1u32.to_be_bytes()));
        assert!(index.push(&2u32.to_be_bytes()));
        assert!(index.is_full());
        assert!(!index.push(&3u32.to_be_bytes()));
        drop(index);
        std::fs::write(&path, [0u8; 7]).unwrap();
        assert!(IndexFile::open(&StdIo, &path, 4).unwrap().is_none());
        assert!(IndexFile::open(&StdIo, &dir.path().join("missing"), 4)
            .unwrap()
            .is_none());
    }
}
