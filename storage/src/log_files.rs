//! The bounded set of open descriptors for segments' `.log` files, active and sealed alike,
//! shared by every log of a data directory. Owns which files stay open (the most recently used,
//! up to `DirConfig::log_files_max`) and the ids that name segments in it; must never decide
//! what is read or written, nor close a descriptor someone still uses (it only drops its own
//! handle: a reader or an append holding the `Arc<File>` keeps the descriptor until it is done).
//!
//! Why: a descriptor per segment file made a partition cost three and stopped a broker at 6,660
//! partitions on a 20,000-file limit; one per partition (the active `.log`) still left no room
//! for 10,000 partitions and 10,000 connections (issue 20). Now an idle partition holds no
//! descriptor: its active segment keeps its `.log` view and indexes mapped (a mapping needs no
//! descriptor), and the next append, fetch slice or flush reopens the file when it has left this
//! set (one `open(2)`, a few µs). Correctness does not depend on a descriptor staying open: the
//! page cache and an fsync belong to the inode, so an fsync through a reopened descriptor makes
//! the bytes written through an evicted one durable (and Linux ≥ 4.16 reports an unseen
//! writeback error to a descriptor opened after it).
//!
//! A use that finds its file still in the set and touched within the last half capacity of uses
//! skips the set's lock (an approximate LRU): the append and fetch paths of a few busy
//! partitions then cost two atomic loads here, not a lock shared by every log.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Tick of a segment that is not in the set (never touched, or removed).
pub(crate) const NOT_IN_SET: u64 = u64::MAX;

/// Recently used segment files, at most `capacity` of them.
#[derive(Debug)]
pub(crate) struct LogFiles {
    capacity: usize,
    next_id: AtomicU64,
    /// Touches that took the lock so far (the `tick` of the last one).
    ticks: AtomicU64,
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

impl LogFiles {
    /// A set holding at most `capacity` files (0 keeps none: every use reopens).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            next_id: AtomicU64::new(0),
            ticks: AtomicU64::new(0),
            inner: Mutex::new(Recent::default()),
        }
    }

    /// Files the set keeps open at most.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// A fresh id naming one segment here.
    pub(crate) fn segment_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Whether a segment last touched at `last_tick` is surely still in the set and recent
    /// enough that touching it again would change nothing that matters: fewer than half the
    /// capacity of touches happened since (each touch makes at most one other file more recent,
    /// and a file leaves only when `capacity` are).
    pub(crate) fn is_fresh(&self, last_tick: u64) -> bool {
        last_tick != NOT_IN_SET
            && self.ticks.load(Ordering::Acquire).saturating_sub(last_tick)
                < (self.capacity as u64 / 2)
    }

    /// Marks `file` (of segment `id`) as just used, adding it if absent, and closes the least
    /// recently used files past the capacity (a file someone still holds stays open for them).
    /// Returns the tick of this use (for [`LogFiles::is_fresh`]), or [`NOT_IN_SET`] if the set
    /// keeps nothing.
    pub(crate) fn touch(&self, id: u64, file: &Arc<File>) -> u64 {
        if self.capacity == 0 {
            return NOT_IN_SET;
        }
        let (tick, evicted) = {
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
            self.ticks.store(tick, Ordering::Release);
            (tick, evicted)
        };
        // Closed outside the lock: closing the last handle of an unlinked file frees its pages.
        drop(evicted);
        tick
    }

    /// Forgets segment `id` (it is being truncated, or was deleted).
    pub(crate) fn remove(&self, id: u64) -> Option<Arc<File>> {
        let mut recent = self.inner.lock().ok()?;
        let (file, last_use) = recent.files.remove(&id)?;
        recent.by_use.remove(&last_use);
        Some(file)
    }

    /// Files held open now.
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
        let files = LogFiles::new(2);
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
        let none = LogFiles::new(0);
        assert_eq!(none.touch(0, &a), NOT_IN_SET);
        assert_eq!(none.len(), 0);
        assert!(!none.is_fresh(NOT_IN_SET));
    }

    #[test]
    fn a_use_is_fresh_only_while_surely_in_the_set() {
        let dir = tempfile::tempdir().unwrap();
        let files = LogFiles::new(8);
        let opened: Vec<_> = (0..8)
            .map(|n| Arc::new(File::create(dir.path().join(n.to_string())).unwrap()))
            .collect();
        let first = files.touch(100, &opened[0]);
        assert!(files.is_fresh(first));
        assert!(!files.is_fresh(NOT_IN_SET));
        for (id, file) in (0..3).zip(&opened[1..]) {
            files.touch(id, file);
        }
        assert!(files.is_fresh(first), "3 touches since, under half of 8");
        files.touch(3, &opened[4]);
        assert!(!files.is_fresh(first), "4 touches since: touch again");
        // Whatever `is_fresh` says, a file it calls fresh is still held.
        assert_eq!(Arc::strong_count(&opened[0]), 2);
    }
}
