//! The bounded set of open descriptors for sealed segments' `.log` files, shared by every log of
//! a data directory. Owns which sealed files stay open (the most recently used, up to
//! `DirConfig::read_files_max`) and the ids that name segments in it; must never hold the active
//! segment's file (its log holds that one itself) nor decide what is read.
//!
//! Why: a descriptor per segment file made a partition cost three and stopped a broker at 6,660
//! partitions on a 20,000-file limit (issue 20). Only the active segment's `.log` needs one all
//! the time; reads of older segments, which are rarer (consumers catching up, time lookups),
//! reopen a file when it has left this set. A descriptor handed to a reader (a `FetchSlice`)
//! lives as long as the reader, whatever this set evicts, so eviction never breaks a read.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Recently used sealed-segment files, at most `capacity` of them.
#[derive(Debug)]
pub(crate) struct ReadFiles {
    capacity: usize,
    next_id: AtomicU64,
    inner: Mutex<Recent>,
}

#[derive(Debug, Default)]
struct Recent {
    tick: u64,
    /// Segment id to its file and the tick of its last use.
    files: HashMap<u64, (Arc<File>, u64)>,
    /// Tick of last use to segment id: the first entry is the least recently used.
    by_use: BTreeMap<u64, u64>,
}

impl ReadFiles {
    /// A set holding at most `capacity` files (0 keeps none: every read reopens).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            next_id: AtomicU64::new(0),
            inner: Mutex::new(Recent::default()),
        }
    }

    /// A fresh id naming one segment here.
    pub(crate) fn segment_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Marks `file` (of segment `id`) as just used, adding it if absent, and closes the least
    /// recently used files past the capacity (a file a reader still holds stays open for it).
    pub(crate) fn touch(&self, id: u64, file: &Arc<File>) {
        if self.capacity == 0 {
            return;
        }
        let evicted = {
            // A poisoned set only loses its memory of what is recent: start it afresh.
            let mut recent = self.inner.lock().unwrap_or_else(|poisoned| {
                let mut guard = poisoned.into_inner();
                *guard = Recent::default();
                guard
            });
            recent.tick += 1;
            let tick = recent.tick;
            if let Some((_, last_use)) = recent.files.insert(id, (Arc::clone(file), tick)) {
                recent.by_use.remove(&last_use);
            }
            recent.by_use.insert(tick, id);
            let mut evicted = Vec::new();
            while recent.files.len() > self.capacity {
                let Some((_, oldest)) = recent.by_use.pop_first() else {
                    break;
                };
                if let Some((file, _)) = recent.files.remove(&oldest) {
                    evicted.push(file);
                }
            }
            evicted
        };
        // Closed outside the lock: closing the last handle of an unlinked file frees its pages.
        drop(evicted);
    }

    /// Forgets segment `id` (it became active again, or was deleted).
    pub(crate) fn remove(&self, id: u64) -> Option<Arc<File>> {
        let mut recent = self.inner.lock().ok()?;
        let (file, last_use) = recent.files.remove(&id)?;
        recent.by_use.remove(&last_use);
        Some(file)
    }

    /// Files held open now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.inner
            .lock()
            .map(|recent| recent.files.len())
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_most_recently_used_and_readers_keep_theirs() {
        let dir = tempfile::tempdir().unwrap();
        let open = |name: &str| Arc::new(File::create(dir.path().join(name)).unwrap());
        let files = ReadFiles::new(2);
        let (a, b, c) = (open("a"), open("b"), open("c"));
        let ids: Vec<u64> = (0..3).map(|_| files.segment_id()).collect();
        files.touch(ids[0], &a);
        files.touch(ids[1], &b);
        files.touch(ids[0], &a); // a is now more recent than b
        files.touch(ids[2], &c); // b goes
        assert_eq!(files.len(), 2);
        assert_eq!(
            Arc::strong_count(&b),
            1,
            "evicted: only the reader holds it"
        );
        assert_eq!(Arc::strong_count(&a), 2);
        assert!(files.remove(ids[0]).is_some());
        assert!(files.remove(ids[1]).is_none());
        assert_eq!(files.len(), 1);
        let none = ReadFiles::new(0);
        none.touch(0, &a);
        assert_eq!(none.len(), 0);
    }
}
