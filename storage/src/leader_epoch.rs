//! The leader-epoch cache of one partition, as Kafka's `LeaderEpochFileCache` keeps it: the
//! ordered list of `(epoch, start offset)` pairs, one per leader epoch that wrote to the log, and
//! its checkpoint file `leader-epoch-checkpoint` (Kafka's format: a version line `0`, a count
//! line, then one `epoch start_offset` line per entry). Owns the cache's rules (assignment,
//! the end offset of an epoch, truncation from either end) and the file's text; the log decides
//! when to call them. Must never touch the file system except through [`FileIo`] (the
//! power-loss simulation sees every write), or hold an entry whose epoch or start offset is not
//! strictly greater than the one before.

use std::path::Path;

use crate::error::{Error, Result};
use crate::fs;
use crate::io::FileIo;
use crate::limits;

/// Name of the checkpoint file in a partition directory (Kafka's).
pub(crate) const LEADER_EPOCH_CHECKPOINT_FILE: &str = "leader-epoch-checkpoint";
/// Version line of the checkpoint format (Kafka's).
const CHECKPOINT_VERSION: &str = "0";
/// The epoch of an answer with no known epoch (Kafka's `UNDEFINED_EPOCH`).
pub const UNDEFINED_EPOCH: i32 = -1;
/// The end offset of an answer with no known epoch (Kafka's `UNDEFINED_EPOCH_OFFSET`).
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

/// One leader epoch and the first offset it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    /// The leader epoch (≥ 0).
    pub epoch: i32,
    /// Offset of the first batch appended at that epoch.
    pub start_offset: i64,
}

/// Answer of [`crate::Log::end_offset_for_epoch`] (OffsetsForLeaderEpoch's `leader_epoch` and
/// `end_offset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEndOffset {
    /// The greatest known epoch ≤ the requested one (the requested one if it is below every
    /// known epoch), or [`UNDEFINED_EPOCH`].
    pub epoch: i32,
    /// The start offset of the first epoch above the requested one, the log end offset if the
    /// latest epoch was asked, or [`UNDEFINED_EPOCH_OFFSET`].
    pub end_offset: i64,
}

impl EpochEndOffset {
    /// The answer for an epoch nobody knows.
    pub const UNDEFINED: Self = Self {
        epoch: UNDEFINED_EPOCH,
        end_offset: UNDEFINED_EPOCH_OFFSET,
    };
}

/// The entries, strictly increasing in both epoch and start offset. Public as the one home of
/// the epoch rules: the replica state machine (skiff-cluster) reads a log's cache through the
/// broker, and its simulation uses this type as its logs' cache, so no second copy of the rules
/// exists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EpochCache {
    entries: Vec<EpochEntry>,
}

impl EpochCache {
    /// The entries, oldest first.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// The latest epoch, if any.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|entry| entry.epoch)
    }

    /// The epoch that wrote `offset` (Kafka's `epochForOffset`): the latest entry starting at or
    /// before it; `None` for a negative offset or one before every entry.
    pub fn epoch_for(&self, offset: i64) -> Option<i32> {
        if offset < 0 {
            return None;
        }
        let after = self
            .entries
            .partition_point(|entry| entry.start_offset <= offset);
        after
            .checked_sub(1)
            .and_then(|index| self.entries.get(index))
            .map(|entry| entry.epoch)
    }

    /// Records that `epoch` wrote from `start_offset` on, as Kafka's `assign`: nothing if it is
    /// the latest epoch already (at that start or an earlier one) or negative (a batch with no
    /// epoch, from before epochs were stamped); otherwise entries that would break the ordering
    /// (an epoch ≥ `epoch` or a start ≥ `start_offset`) are dropped first. Returns whether the
    /// cache changed (the checkpoint must then be written).
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> bool {
        if epoch < 0 || start_offset < 0 {
            return false;
        }
        if let Some(latest) = self.entries.last() {
            if latest.epoch == epoch && latest.start_offset <= start_offset {
                return false;
            }
        }
        self.entries
            .retain(|entry| entry.epoch < epoch && entry.start_offset < start_offset);
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        self.debug_check();
        true
    }

    /// Kafka's `endOffsetFor`: for the latest epoch, `(epoch, log_end)`; for an older known one,
    /// the greatest epoch ≤ it and the start of the first epoch above it; for an epoch below every
    /// entry, that epoch and the first entry's start; for [`UNDEFINED_EPOCH`] or an epoch above
    /// every entry, [`EpochEndOffset::UNDEFINED`].
    pub fn end_offset_for(&self, requested: i32, log_end: i64) -> EpochEndOffset {
        if requested == UNDEFINED_EPOCH {
            return EpochEndOffset::UNDEFINED;
        }
        if self.latest_epoch() == Some(requested) {
            return EpochEndOffset {
                epoch: requested,
                end_offset: log_end,
            };
        }
        let Some(higher) = self.entries.iter().find(|entry| entry.epoch > requested) else {
            return EpochEndOffset::UNDEFINED;
        };
        let floor = self
            .entries
            .iter()
            .rev()
            .find(|entry| entry.epoch <= requested);
        EpochEndOffset {
            epoch: floor.map_or(requested, |entry| entry.epoch),
            end_offset: higher.start_offset,
        }
    }

    /// Drops the entries starting at or after `end_offset` (the log was cut there). Returns
    /// whether the cache changed.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> bool {
        let before = self.entries.len();
        self.entries.retain(|entry| entry.start_offset < end_offset);
        before != self.entries.len()
    }

    /// The log now starts at `start_offset` (retention, DeleteRecords): entries wholly before it
    /// go, and the one covering it now starts there, as Kafka's `truncateFromStart`. Returns
    /// whether the cache changed.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> bool {
        let covering = self
            .entries
            .iter()
            .rposition(|entry| entry.start_offset <= start_offset);
        let Some(covering) = covering else {
            return false;
        };
        let kept = EpochEntry {
            epoch: self.entries.get(covering).map_or(0, |entry| entry.epoch),
            start_offset,
        };
        let changed = covering > 0 || self.entries.first() != Some(&kept);
        self.entries.drain(..covering);
        if let Some(first) = self.entries.first_mut() {
            *first = kept;
        }
        self.debug_check();
        changed
    }

    fn debug_check(&self) {
        debug_assert!(
            self.entries.windows(2).all(|pair| matches!(pair,
                [a, b] if a.epoch < b.epoch && a.start_offset < b.start_offset)),
            "epoch entries out of order: {:?}",
            self.entries
        );
    }

    /// The checkpoint file's text.
    pub(crate) fn to_text(&self) -> String {
        let mut text = format!("{CHECKPOINT_VERSION}\n{}\n", self.entries.len());
        for entry in &self.entries {
            text.push_str(&format!("{} {}\n", entry.epoch, entry.start_offset));
        }
        text
    }

    /// Parses a checkpoint file's text; the reason it is not one otherwise. Entries must be
    /// strictly increasing and as many as the count line says.
    pub(crate) fn parse(text: &str) -> std::result::Result<Self, &'static str> {
        let mut lines = text.lines();
        if lines.next() != Some(CHECKPOINT_VERSION) {
            return Err("unknown leader-epoch checkpoint version");
        }
        let count: usize = lines
            .next()
            .and_then(|line| line.parse().ok())
            .ok_or("bad entry count")?;
        let mut entries: Vec<EpochEntry> = Vec::new();
        for line in lines.by_ref() {
            let mut fields = line.split(' ');
            let (Some(epoch), Some(start), None) = (fields.next(), fields.next(), fields.next())
            else {
                return Err("bad entry line");
            };
            let epoch: i32 = epoch.parse().map_err(|_| "bad epoch")?;
            let start_offset: i64 = start.parse().map_err(|_| "bad start offset")?;
            if epoch < 0 || start_offset < 0 {
                return Err("negative epoch or offset");
            }
            if entries
                .last()
                .is_some_and(|last| last.epoch >= epoch || last.start_offset >= start_offset)
            {
                return Err("entries out of order");
            }
            entries.push(EpochEntry {
                epoch,
                start_offset,
            });
        }
        if entries.len() != count {
            return Err("entry count does not match the entries");
        }
        Ok(Self { entries })
    }

    /// Writes the checkpoint of the log in `dir` atomically (temp file, fsync, rename, fsync of
    /// the directory).
    pub(crate) fn write(&self, io: &dyn FileIo, dir: &Path) -> Result<()> {
        fs::write_atomic(
            io,
            &dir.join(LEADER_EPOCH_CHECKPOINT_FILE),
            self.to_text().as_bytes(),
        )
    }

    /// Reads the checkpoint of the log in `dir`: `Ok(None)` if there is none, `Err(Corrupt)` if
    /// it is not one (too large, not UTF-8, or malformed).
    pub(crate) fn read(io: &dyn FileIo, dir: &Path) -> Result<Option<Self>> {
        let path = dir.join(LEADER_EPOCH_CHECKPOINT_FILE);
        let bytes = match io.read_small(&path, limits::LEADER_EPOCH_CHECKPOINT_BYTES_MAX) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) if error.kind() == std::io::ErrorKind::InvalidData => {
                return Err(Error::corrupt(
                    &path,
                    0,
                    "leader-epoch checkpoint too large",
                ))
            }
            Err(error) => return Err(Error::io(&path, error)),
        };
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| Error::corrupt(&path, 0, "leader-epoch checkpoint not UTF-8"))?;
        Self::parse(text)
            .map(Some)
            .map_err(|reason| Error::corrupt(&path, 0, reason))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn epoch_for_finds_the_epoch_that_wrote_an_offset() {
        let mut cache = EpochCache::default();
        assert_eq!(cache.epoch_for(0), None);
        cache.assign(0, 0);
        cache.assign(2, 5);
        cache.assign(3, 9);
        assert_eq!(cache.epoch_for(-1), None);
        assert_eq!(
            (0..12)
                .map(|offset| cache.epoch_for(offset))
                .collect::<Vec<_>>(),
            [0, 0, 0, 0, 0, 2, 2, 2, 2, 3, 3, 3].map(Some)
        );
        let mut late = EpochCache::default();
        late.assign(4, 10);
        assert_eq!(late.epoch_for(9), None, "before every entry");
    }

    use proptest::prelude::*;

    use super::*;
    use crate::io::StdIo;

    fn cache(entries: &[(i32, i64)]) -> EpochCache {
        let mut cache = EpochCache::default();
        for (epoch, start) in entries {
            assert!(cache.assign(*epoch, *start));
        }
        cache
    }

    fn pairs(cache: &EpochCache) -> Vec<(i32, i64)> {
        cache
            .entries()
            .iter()
            .map(|entry| (entry.epoch, entry.start_offset))
            .collect()
    }

    #[test]
    fn assign_keeps_the_first_start_of_each_epoch_and_drops_non_monotonic_entries() {
        let mut cache = cache(&[(1, 0), (3, 10)]);
        assert!(!cache.assign(3, 15), "same epoch, later offset: no change");
        assert!(
            !cache.assign(-1, 20),
            "batches without an epoch are ignored"
        );
        assert!(cache.assign(3, 8), "same epoch, earlier start replaces it");
        assert_eq!(pairs(&cache), [(1, 0), (3, 8)]);
        assert!(
            cache.assign(2, 12),
            "a lower epoch drops the higher ones (as Kafka)"
        );
        assert_eq!(pairs(&cache), [(1, 0), (2, 12)]);
        assert!(
            cache.assign(5, 12),
            "same start, higher epoch replaces the entry"
        );
        assert_eq!(pairs(&cache), [(1, 0), (5, 12)]);
        assert_eq!(cache.latest_epoch(), Some(5));
    }

    #[test]
    fn end_offset_for_follows_kafka() {
        let cache = cache(&[(2, 5), (4, 20), (7, 31)]);
        let answer = |epoch| {
            let EpochEndOffset { epoch, end_offset } = cache.end_offset_for(epoch, 40);
            (epoch, end_offset)
        };
        assert_eq!(answer(7), (7, 40), "latest epoch: the log end");
        assert_eq!(answer(4), (4, 31));
        assert_eq!(
            answer(5),
            (4, 31),
            "unknown middle epoch: floor epoch, next start"
        );
        assert_eq!(answer(2), (2, 20));
        assert_eq!(
            answer(1),
            (1, 5),
            "below the first: asked epoch, first start"
        );
        assert_eq!(answer(8), (-1, -1), "above the latest");
        assert_eq!(answer(UNDEFINED_EPOCH), (-1, -1));
        assert_eq!(
            EpochCache::default().end_offset_for(0, 9),
            EpochEndOffset::UNDEFINED
        );
    }

    #[test]
    fn truncation_from_either_end() {
        let mut cache = cache(&[(2, 5), (4, 20), (7, 31)]);
        assert!(!cache.truncate_from_end(32));
        assert!(
            cache.truncate_from_end(31),
            "an entry starting at the cut goes"
        );
        assert_eq!(pairs(&cache), [(2, 5), (4, 20)]);
        assert!(
            !cache.truncate_from_start(3),
            "below the first entry: nothing"
        );
        assert!(!cache.truncate_from_start(5));
        assert!(cache.truncate_from_start(22));
        assert_eq!(pairs(&cache), [(4, 22)]);
        assert!(cache.truncate_from_end(0));
        assert!(pairs(&cache).is_empty());
    }

    #[test]
    fn checkpoint_text_is_kafkas_and_round_trips() {
        let cache = cache(&[(0, 0), (3, 117)]);
        assert_eq!(cache.to_text(), "0\n2\n0 0\n3 117\n");
        assert_eq!(EpochCache::parse(&cache.to_text()), Ok(cache.clone()));
        let dir = crate::testing_temp::temp_dir();
        assert_eq!(EpochCache::read(&StdIo, dir.path()).unwrap(), None);
        cache.write(&StdIo, dir.path()).unwrap();
        assert_eq!(EpochCache::read(&StdIo, dir.path()).unwrap(), Some(cache));
    }

    #[test]
    fn malformed_checkpoints_are_corrupt_not_panics() {
        for text in [
            "",
            "1\n0\n",
            "0\n",
            "0\nx\n",
            "0\n1\n",
            "0\n2\n1 0\n",
            "0\n1\n1\n",
            "0\n1\n1 2 3\n",
            "0\n1\n-1 0\n",
            "0\n2\n3 5\n2 9\n",
            "0\n2\n3 5\n4 5\n",
            "0\n1\n99999999999 0\n",
        ] {
            assert!(EpochCache::parse(text).is_err(), "{text:?}");
        }
        let dir = crate::testing_temp::temp_dir();
        let path = dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE);
        std::fs::write(&path, [0xff, 0xfe]).unwrap();
        assert!(matches!(
            EpochCache::read(&StdIo, dir.path()),
            Err(Error::Corrupt { .. })
        ));
        std::fs::write(&path, vec![b'1'; 2 << 20]).unwrap();
        assert!(matches!(
            EpochCache::read(&StdIo, dir.path()),
            Err(Error::Corrupt { .. })
        ));
    }

    /// A reference model: the epoch of each offset below the log end, as the log's batches say.
    fn model_answer(epochs: &[i32], requested: i32) -> EpochEndOffset {
        let log_end = epochs.len() as i64;
        let latest = epochs.last().copied();
        if requested == UNDEFINED_EPOCH || epochs.is_empty() {
            return EpochEndOffset::UNDEFINED;
        }
        if latest == Some(requested) {
            return EpochEndOffset {
                epoch: requested,
                end_offset: log_end,
            };
        }
        match epochs.iter().position(|epoch| *epoch > requested) {
            None => EpochEndOffset::UNDEFINED,
            Some(end) => EpochEndOffset {
                epoch: epochs
                    .get(..end)
                    .and_then(|below| below.last().copied())
                    .unwrap_or(requested),
                end_offset: end as i64,
            },
        }
    }

    proptest! {
        /// Appending one offset per step with non-decreasing epochs, the cache answers every
        /// query as the per-offset model does, also after truncating the end, and its
        /// checkpoint round-trips.
        #[test]
        fn cache_matches_a_per_offset_model(
            steps in proptest::collection::vec(0i32..4, 1..60),
            cut in 0usize..60,
            requested in -1i32..12,
        ) {
            let mut epochs = Vec::new();
            let mut epoch = 0;
            let mut cache = EpochCache::default();
            for step in steps {
                epoch += step;
                cache.assign(epoch, epochs.len() as i64);
                epochs.push(epoch);
            }
            prop_assert_eq!(EpochCache::parse(&cache.to_text()), Ok(cache.clone()));
            prop_assert_eq!(
                cache.end_offset_for(requested, epochs.len() as i64),
                model_answer(&epochs, requested)
            );
            let cut = cut.min(epochs.len());
            epochs.truncate(cut);
            cache.truncate_from_end(cut as i64);
            prop_assert_eq!(
                cache.end_offset_for(requested, cut as i64),
                model_answer(&epochs, requested)
            );
            prop_assert_eq!(cache.latest_epoch(), epochs.last().copied());
        }
    }
}

/// The cache as a [`crate::Log`] keeps it: stamping, truncation, and recovery.
#[cfg(test)]
mod log_tests {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    use skiff_protocol::records::v2;

    use super::*;
    use crate::io::faulty::FaultyIo;
    use crate::log_dir::LogDir;
    use crate::testing::batch;
    use crate::testing_temp::temp_dir;
    use crate::{Log, LogConfig};

    fn config() -> LogConfig {
        LogConfig {
            segment_bytes: 4096,
            batch_bytes_max: 4096,
            index_interval_bytes: 256,
            ..LogConfig::default()
        }
    }

    fn pairs(log: &Log) -> Vec<(i32, i64)> {
        log.epoch_entries()
            .unwrap()
            .iter()
            .map(|entry| (entry.epoch, entry.start_offset))
            .collect()
    }

    /// The leader epoch of every stored batch, by base offset, each CRC checked.
    fn stored_epochs(log: &Log) -> Vec<(i64, i32)> {
        let mut out = Vec::new();
        let mut offset = log.log_start_offset().unwrap();
        while offset < log.log_end_offset().unwrap() {
            let bytes = log.read(offset, 0, true).unwrap().bytes().unwrap();
            let header =
                v2::validate(&bytes[..v2::BatchHeader::parse(&bytes).unwrap().total_bytes()])
                    .expect("stamping keeps the CRC valid");
            out.push((header.base_offset, header.partition_leader_epoch));
            offset = header.last_offset() + 1;
        }
        out
    }

    fn checkpoint_text(dir: &Path) -> String {
        std::fs::read_to_string(dir.join("t-0").join(LEADER_EPOCH_CHECKPOINT_FILE)).unwrap()
    }

    #[test]
    fn leader_appends_stamp_every_batch_and_record_each_epoch_start() {
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), config()).unwrap();
        let log = data.create("t", 0, None).unwrap();
        // A follower-style append keeps the producer's "no epoch" (−1): no entry.
        log.append(&mut batch(0, 2, 10), 0).unwrap();
        assert_eq!(log.latest_epoch().unwrap(), None);
        let mut two_batches = batch(0, 3, 10);
        two_batches.extend(batch(0, 1, 10));
        log.append_with_epoch(&mut two_batches, 4, 0).unwrap();
        log.append_with_epoch(&mut batch(0, 2, 10), 4, 0).unwrap();
        log.append_with_epoch(&mut batch(0, 1, 10), 6, 0).unwrap();
        assert_eq!(
            stored_epochs(&log),
            [(0, -1), (2, 4), (5, 4), (6, 4), (8, 6)]
        );
        assert_eq!(pairs(&log), [(4, 2), (6, 8)]);
        assert_eq!(checkpoint_text(dir.path()), "0\n2\n4 2\n6 8\n");
        assert_eq!(log.latest_epoch().unwrap(), Some(6));
        let answer = |epoch| log.end_offset_for_epoch(epoch).unwrap();
        assert_eq!(
            answer(6),
            EpochEndOffset {
                epoch: 6,
                end_offset: 9
            }
        );
        assert_eq!(
            answer(5),
            EpochEndOffset {
                epoch: 4,
                end_offset: 8
            }
        );
        assert_eq!(
            answer(3),
            EpochEndOffset {
                epoch: 3,
                end_offset: 2
            }
        );
        assert_eq!(answer(7), EpochEndOffset::UNDEFINED);
        assert!(log.append_with_epoch(&mut batch(0, 1, 10), -1, 0).is_err());
        // A follower's copy of a leader's batch keeps its epoch and teaches the cache.
        let mut copied = batch(0, 1, 10);
        v2::set_partition_leader_epoch(&mut copied, 9).unwrap();
        log.append(&mut copied, 0).unwrap();
        assert_eq!(pairs(&log), [(4, 2), (6, 8), (9, 9)]);
        // Becoming leader at a new epoch records it at the log end.
        assert!(log.assign_epoch(11).unwrap());
        assert!(!log.assign_epoch(11).unwrap());
        assert!(!log.assign_epoch(10).unwrap());
        assert_eq!(pairs(&log), [(4, 2), (6, 8), (9, 9), (11, 10)]);
        data.close().unwrap();

        let data = LogDir::open(dir.path(), config()).unwrap();
        let log = data.log("t", 0).unwrap().unwrap();
        // A clean reopen drops (11, 10): it starts at the log end, with nothing written (Kafka's
        // truncateFromEnd on load does the same; the leader assigns it again).
        assert_eq!(pairs(&log), [(4, 2), (6, 8), (9, 9)]);
    }

    /// A truncation writes the trimmed cache at once; a move of the log start trims it in memory
    /// (its file keeps the older entries until the next write, and recovery trims them).
    #[test]
    fn truncation_trims_the_cache_durably_and_deletion_in_memory() {
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), config()).unwrap();
        let log = data.create("t", 0, None).unwrap();
        for (epoch, count) in [(1, 3), (2, 3), (3, 3), (5, 3)] {
            log.append_with_epoch(&mut batch(0, count, 400), epoch, 0)
                .unwrap();
        }
        assert_eq!(pairs(&log), [(1, 0), (2, 3), (3, 6), (5, 9)]);
        assert_eq!(log.truncate_to(7).unwrap(), 6);
        assert_eq!(pairs(&log), [(1, 0), (2, 3)]);
        assert_eq!(checkpoint_text(dir.path()), "0\n2\n1 0\n2 3\n");
        log.append_with_epoch(&mut batch(0, 3, 400), 7, 0).unwrap();
        log.roll_if_needed(i64::MAX).unwrap();
        log.delete_records_before(4).unwrap();
        assert_eq!(pairs(&log), [(2, 4), (7, 6)]);
        assert_eq!(checkpoint_text(dir.path()), "0\n3\n1 0\n2 3\n7 6\n");
        assert_eq!(
            log.end_offset_for_epoch(1).unwrap(),
            EpochEndOffset {
                epoch: 1,
                end_offset: 4
            }
        );
        drop(log);
        data.close().unwrap();
        let data = LogDir::open(dir.path(), config()).unwrap();
        let log = data.log("t", 0).unwrap().unwrap();
        assert_eq!(log.log_start_offset().unwrap(), 4);
        assert_eq!(pairs(&log), [(2, 4), (7, 6)]);
        assert_eq!(checkpoint_text(dir.path()), "0\n2\n2 4\n7 6\n");
    }

    /// A start moved in memory (DeleteRecords) moved the first entry with it, a new epoch then
    /// wrote the cache, and a crash brought the checkpointed start back: recovery fills in the
    /// entries of the batches between from their headers.
    #[test]
    fn a_start_undone_by_a_crash_gets_its_entries_back() {
        let dir = temp_dir();
        {
            let data = LogDir::open(dir.path(), config()).unwrap();
            let log = data.create("t", 0, None).unwrap();
            for (epoch, count) in [(1, 3), (2, 3), (3, 3)] {
                log.append_with_epoch(&mut batch(0, count, 400), epoch, 0)
                    .unwrap();
            }
            data.checkpoint_recovery_points().unwrap();
            log.delete_records_before(7).unwrap();
            log.append_with_epoch(&mut batch(0, 1, 400), 4, 0).unwrap();
            log.flush().unwrap();
            assert_eq!(checkpoint_text(dir.path()), "0\n2\n3 7\n4 9\n");
            // Dropped without close or checkpoint: the start 7 was never written.
        }
        let data = LogDir::open(dir.path(), config()).unwrap();
        let log = data.log("t", 0).unwrap().unwrap();
        assert_eq!(log.log_start_offset().unwrap(), 0);
        assert_eq!(pairs(&log), [(1, 0), (2, 3), (3, 6), (4, 9)]);
        assert_eq!(checkpoint_text(dir.path()), "0\n4\n1 0\n2 3\n3 6\n4 9\n");
    }

    #[test]
    fn torn_tail_trims_the_entries_past_the_recovered_end() {
        let dir = temp_dir();
        let io = Arc::new(FaultyIo::default());
        let data = LogDir::open_with_io(
            dir.path(),
            config(),
            crate::DirConfig::default(),
            io.clone(),
        )
        .unwrap();
        let log = data.create("t", 0, None).unwrap();
        log.append_with_epoch(&mut batch(0, 3, 10), 1, 0).unwrap();
        // Becoming leader at 2 checkpoints (2, 3) before any batch of epoch 2 is written.
        assert!(log.assign_epoch(2).unwrap());
        io.torn_write_bytes.store(40, Ordering::SeqCst);
        assert!(log.append_with_epoch(&mut batch(0, 1, 10), 2, 0).is_err());
        assert_eq!(checkpoint_text(dir.path()), "0\n2\n1 0\n2 3\n");
        drop(log);
        drop(data); // no clean close: recovery scans and cuts the torn batch
        let data = LogDir::open(dir.path(), config()).unwrap();
        let log = data.log("t", 0).unwrap().unwrap();
        assert_eq!(log.log_end_offset().unwrap(), 3);
        assert_eq!(pairs(&log), [(1, 0)]);
        assert_eq!(checkpoint_text(dir.path()), "0\n1\n1 0\n");
    }

    #[test]
    fn a_missing_or_corrupt_checkpoint_is_rebuilt_from_the_batches() {
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), config()).unwrap();
        let log = data.create("t", 0, None).unwrap();
        log.append(&mut batch(0, 2, 400), 0).unwrap(); // no epoch
        for (epoch, count) in [(0, 2), (0, 3), (3, 2), (8, 4)] {
            log.append_with_epoch(&mut batch(0, count, 400), epoch, 0)
                .unwrap();
        }
        assert!(
            log.segment_count().unwrap() > 1,
            "the scan crosses segments"
        );
        let expected = pairs(&log);
        assert_eq!(expected, [(0, 2), (3, 7), (8, 9)]);
        data.close().unwrap();
        let path = dir.path().join("t-0").join(LEADER_EPOCH_CHECKPOINT_FILE);
        for damage in [None, Some(&b"0\n7\n1 2\n"[..]), Some(&[0xffu8; 3][..])] {
            match damage {
                None => std::fs::remove_file(&path).unwrap(),
                Some(bytes) => std::fs::write(&path, bytes).unwrap(),
            }
            let data = LogDir::open(dir.path(), config()).unwrap();
            let log = data.log("t", 0).unwrap().unwrap();
            assert_eq!(pairs(&log), expected, "{damage:?}");
            data.close().unwrap();
            assert_eq!(checkpoint_text(dir.path()), "0\n3\n0 2\n3 7\n8 9\n");
        }
    }
}
