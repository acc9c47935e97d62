//! Watchers of the pure store: each has a range, a start revision and a bounded queue of the
//! revisions (numbers only) that touched its range and are not yet delivered; the events themselves
//! are read from the history when delivered. A watcher whose start revision was compacted, whose
//! queue overflows, or whose next revision was compacted away while queued, is canceled with
//! [`Error::Compacted`]: its owner re-GETs and watches again (docs/design/cluster.md §2, §7).

use std::collections::VecDeque;

use super::MetaCore;
use crate::error::{Error, Result};
use crate::limits;
use crate::types::{validate_watch, Event, KeyRange, WatchBatch};

/// Identifies a watcher of one [`MetaCore`].
pub type WatchId = u64;

#[derive(Debug)]
pub(super) struct Watcher {
    range: KeyRange,
    start_revision: i64,
    pending: VecDeque<i64>,
    /// Set when canceled: (the revision it needed, the compact revision to report).
    canceled: Option<(i64, i64)>,
}

impl Watcher {
    fn matches(&self, events: &[Event]) -> bool {
        events
            .iter()
            .any(|event| self.range.contains(&event.kv.key))
    }

    fn queue(&mut self, revision: i64, current_revision: i64) {
        if self.canceled.is_some() || revision < self.start_revision {
            return;
        }
        if self.pending.len() >= limits::WATCH_QUEUE_REVISIONS_MAX {
            let needed = self.pending.front().copied().unwrap_or(revision);
            self.pending.clear();
            self.canceled = Some((needed, current_revision));
            return;
        }
        self.pending.push_back(revision);
    }
}

impl MetaCore {
    /// Starts watching `range` from `start_revision` (`0`: from the next revision). Events
    /// already in the history from that revision on are delivered first. A start below the
    /// compact revision is accepted, and the first poll reports [`Error::Compacted`], as etcd's
    /// watch is created and then canceled.
    pub fn watch(&mut self, range: KeyRange, start_revision: i64) -> Result<WatchId> {
        validate_watch(&range, start_revision)?;
        if self.watchers.len() >= limits::WATCHERS_MAX {
            return Err(Error::QuotaExceeded {
                what: "watchers",
                max: limits::WATCHERS_MAX,
            });
        }
        let start_revision = if start_revision == 0 {
            self.revision + 1
        } else {
            start_revision
        };
        let mut watcher = Watcher {
            range,
            start_revision,
            pending: VecDeque::new(),
            canceled: None,
        };
        if start_revision < self.compact_revision {
            watcher.canceled = Some((start_revision, self.compact_revision));
        } else {
            for record in self
                .history
                .iter()
                .filter(|record| record.revision >= start_revision)
            {
                if watcher.matches(&record.events) {
                    watcher.queue(record.revision, self.revision);
                }
            }
        }
        let id = self.next_watch_id;
        self.next_watch_id += 1;
        self.watchers.insert(id, watcher);
        Ok(id)
    }

    /// The next batch of a watcher: `Ok(Some)` with the events of its next revision,
    /// `Ok(None)` when it is up to date, [`Error::Compacted`] once (then the watcher is gone),
    /// [`Error::Closed`] for an unknown watcher.
    pub fn watch_poll(&mut self, id: WatchId) -> Result<Option<WatchBatch>> {
        let compact_revision = self.compact_revision;
        let watcher = self.watchers.get_mut(&id).ok_or(Error::Closed)?;
        if let Some(&next) = watcher.pending.front() {
            if next < compact_revision {
                watcher.canceled = Some((next, compact_revision));
            }
        }
        if let Some((requested_revision, compact_revision)) = watcher.canceled {
            self.watchers.remove(&id);
            return Err(Error::Compacted {
                requested_revision,
                compact_revision: Some(compact_revision),
            });
        }
        let Some(revision) = watcher.pending.pop_front() else {
            return Ok(None);
        };
        let first = self
            .history
            .front()
            .map_or(revision, |record| record.revision);
        let record = usize::try_from(revision - first)
            .ok()
            .and_then(|at| self.history.get(at));
        debug_assert!(record.is_some_and(|record| record.revision == revision));
        let record = record.ok_or(Error::Compacted {
            requested_revision: revision,
            compact_revision: Some(compact_revision),
        })?;
        let events: Vec<Event> = record
            .events
            .iter()
            .filter(|event| watcher.range.contains(&event.kv.key))
            .cloned()
            .collect();
        debug_assert!(!events.is_empty(), "only matching revisions are queued");
        Ok(Some(WatchBatch { revision, events }))
    }

    /// Stops a watcher (nothing happens for an unknown id).
    pub fn watch_cancel(&mut self, id: WatchId) {
        self.watchers.remove(&id);
    }

    /// Open watchers.
    pub fn watcher_count(&self) -> usize {
        self.watchers.len()
    }

    pub(super) fn notify_watchers(&mut self, revision: i64, events: &[Event]) {
        for watcher in self.watchers.values_mut() {
            if watcher.matches(events) {
                watcher.queue(revision, revision);
            }
        }
    }
}
