//! The leader-epoch cache of one partition's log (KIP-101): `(epoch, start offset)` entries in
//! growing order of both. The log keeps it (an entry per new epoch it appends, trimmed with every
//! truncation); the replica state machine only reads it, through [`super::LocalLog`].
//!
//! Must never: hold offsets out of order, or decide anything about roles.

/// A leader epoch (Kafka's `partitionLeaderEpoch`).
pub type Epoch = i32;
/// An offset in the partition's log.
pub type Offset = i64;

/// `(epoch, start offset)` entries, both strictly growing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EpochCache {
    entries: Vec<(Epoch, Offset)>,
}

impl EpochCache {
    /// An empty cache (an empty log).
    pub fn new() -> Self {
        Self::default()
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> &[(Epoch, Offset)] {
        &self.entries
    }

    /// The latest epoch, if any.
    pub fn latest_epoch(&self) -> Option<Epoch> {
        self.entries.last().map(|(epoch, _)| *epoch)
    }

    /// Where `epoch` starts, if the cache has it.
    pub fn start_of(&self, epoch: Epoch) -> Option<Offset> {
        self.entries
            .iter()
            .find(|(e, _)| *e == epoch)
            .map(|(_, start)| *start)
    }

    /// Records that `epoch` starts at `start` (a new leader at its LEO, or a follower appending
    /// the first batch of a new epoch). An epoch not above the latest is ignored; entries
    /// starting at or after `start` are replaced, as Kafka's `assign` does, so a leader that
    /// wrote nothing leaves no empty epoch behind.
    pub fn assign(&mut self, epoch: Epoch, start: Offset) {
        if self.latest_epoch().is_some_and(|latest| epoch <= latest) {
            return;
        }
        self.entries.retain(|(_, s)| *s < start);
        self.entries.push((epoch, start));
        debug_assert!(self.is_ordered());
    }

    /// Drops the entries that start at or after `offset` (the log was truncated to `offset`).
    pub fn truncate_to(&mut self, offset: Offset) {
        self.entries.retain(|(_, start)| *start < offset);
    }

    /// Kafka's `endOffsetFor`: the largest epoch ≤ `requested` and where it ends (the next
    /// epoch's start, or `log_end_offset` for the latest). A requested epoch below the first
    /// entry answers `(requested, first start)`; one above the latest answers `None`.
    pub fn end_offset_for(
        &self,
        requested: Epoch,
        log_end_offset: Offset,
    ) -> Option<(Epoch, Offset)> {
        let latest = self.latest_epoch()?;
        if requested == latest {
            return Some((latest, log_end_offset));
        }
        let higher = self.entries.iter().position(|(e, _)| *e > requested)?;
        let end = self.entries[higher].1;
        if higher == 0 {
            return Some((requested, end));
        }
        Some((self.entries[higher - 1].0, end))
    }

    fn is_ordered(&self) -> bool {
        self.entries
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_offset_for_follows_kafka() {
        let mut cache = EpochCache::new();
        cache.assign(1, 0);
        cache.assign(3, 10);
        cache.assign(4, 15);
        assert_eq!(cache.end_offset_for(4, 20), Some((4, 20)));
        assert_eq!(cache.end_offset_for(3, 20), Some((3, 15)));
        assert_eq!(cache.end_offset_for(2, 20), Some((1, 10)));
        assert_eq!(cache.end_offset_for(0, 20), Some((0, 0)));
        assert_eq!(cache.end_offset_for(5, 20), None);
        cache.assign(2, 30); // not above the latest: ignored
        assert_eq!(cache.latest_epoch(), Some(4));
        cache.assign(5, 15); // an empty epoch 4 is replaced
        assert_eq!(cache.entries(), &[(1, 0), (3, 10), (5, 15)]);
        cache.truncate_to(10);
        assert_eq!(cache.entries(), &[(1, 0)]);
    }
}
