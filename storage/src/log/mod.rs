//! [`Log`]: one partition — an ordered set of segments with the log start offset and the recovery
//! point. Owns offset assignment (and leader-epoch stamping), or for a follower's append the check
//! that its leader's offsets continue the log, rolling, the flush policy and poisoning, reads, time
//! lookups, truncation (of a tail, or of everything to start afresh at a follower's new start),
//! retention, when the leader-epoch cache (`leader_epoch`) changes and is checkpointed, and
//! deferred recovery (a log listed at open but recovered later, answering `Error::Recovering`
//! meanwhile). Two locks: a writer `Mutex` serializes appends and every other change to segments or
//! offsets; the state `RwLock` is shared by reads and taken exclusively only for short steps, so an
//! append's CRC pass and page-cache copy run while readers go on. Lock order: writer, then state,
//! then the directory's offset checkpoint (`offset_checkpoint`, where the log publishes its start
//! and recovery point: in memory on a flush, a retention or a DeleteRecords, written at once only
//! when a truncation or a recovery lowers one of them). Must never read a clock (every time is an argument),
//! fsync while holding either lock (except in the recovery of a deferred log, which serves nothing
//! until it is done), or report an offset as flushed before its fsync returned.
//!
//! The `impl Log` is split by what each part does, as Kafka's `UnifiedLog` is read: this file holds
//! the types, the locks and the accessors; `load` opens and recovers a log's segments; `append`
//! assigns offsets, rolls, flushes and stamps leader epochs; `read` serves reads, time lookups and
//! the leader-epoch queries; `truncate` cuts a diverged tail or starts afresh; `retention` moves
//! the log start and deletes old segments (by time and size only under a deleting policy);
//! `clean` plans and runs the log cleaner's pass (`crate::cleaner`); `txn` keeps the
//! aborted-transaction index and the producer-state snapshots; `tests` covers them together.

mod append;
mod clean;
mod load;
mod read;
mod retention;
#[cfg(test)]
mod tests;
mod truncate;
mod txn;

pub use txn::ABORTED_TXNS_PER_READ_MAX;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::cleaner::CleanerCheckpoints;
use crate::config::LogConfig;
use crate::error::{Error, Result};
use crate::fs::Checkpoint;
use crate::io::FileIo;
use crate::leader_epoch::EpochCache;
use crate::log_files::LogFiles;
use crate::offset_checkpoint::{LogKey, OffsetCheckpoints};
use crate::segment::Segment;

/// What an append did, for the produce response and the flush decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AppendInfo {
    /// Offset assigned to the first record.
    pub base_offset: i64,
    /// Offset of the last record.
    pub last_offset: i64,
    /// Greatest batch max timestamp among the appended batches (−1 if none had one).
    pub max_timestamp_ms: i64,
    /// Base offset of the batch carrying `max_timestamp_ms`.
    pub offset_of_max_timestamp: i64,
    /// The caller's time passed to `append` (the log-append time, should the topic use it).
    pub log_append_time_ms: i64,
    /// Base offset of the segment written.
    pub segment_base_offset: i64,
    /// Byte position of the first batch in that segment's `.log`.
    pub position: u64,
    /// Bytes appended.
    pub size_bytes: u64,
    /// Records appended.
    pub records_count: u64,
    /// Log start offset after the append.
    pub log_start_offset: i64,
    /// Whether the flush policy fsynced this append before returning.
    pub flushed: bool,
}

/// Answer of [`Log::offset_for_timestamp`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    /// Base offset of the first batch whose max timestamp is ≥ the target (at least the log start
    /// offset). Storage reads batch headers only, so this is the batch holding the first record
    /// at or after the target, not that record's own offset.
    pub offset: i64,
    /// That batch's max timestamp.
    pub timestamp_ms: i64,
}

/// One partition log. `Send + Sync`; every method takes `&self`.
#[derive(Debug)]
pub struct Log {
    dir: PathBuf,
    topic: String,
    partition: i32,
    io: Arc<dyn FileIo>,
    /// The data directory's open descriptors of sealed segments.
    log_files: Arc<LogFiles>,
    /// Held by every change to segments or offsets (appends, rolls, truncation, retention,
    /// configuration, close) for its whole length, before `state`: appends write their bytes
    /// holding only this, so it is what keeps a second writer from the end of the log.
    writer: Mutex<()>,
    state: RwLock<LogState>,
    /// Set by a failed write or fsync; checked before every append and flush.
    poisoned: AtomicBool,
    /// While set, the log is not recovered yet ([`LogDir::open_deferred`]): `state` is a
    /// placeholder holding only the configuration, and every call but [`Log::set_config`] and
    /// [`Log::recover_deferred`] answers [`Error::Recovering`].
    ///
    /// [`LogDir::open_deferred`]: crate::LogDir::open_deferred
    recovering: AtomicBool,
    /// Whether the pending recovery may trust the data (the directory was shut down cleanly).
    clean: bool,
    /// The data directory's offset checkpoint, where this log's log start offset and recovery
    /// point are published (see `offset_checkpoint`).
    checkpoints: Arc<OffsetCheckpoints>,
    /// The data directory's cleaner checkpoint, where this log's first dirty offset lives.
    cleaner_offsets: Arc<CleanerCheckpoints>,
    /// The data directory's guard, run before this log's first transactional batch is written.
    downgrade_guard: Arc<crate::downgrade_guard::DowngradeGuard>,
    /// Topic and partition: the log's name in `checkpoints`.
    key: LogKey,
}

#[derive(Debug)]
struct LogState {
    config: LogConfig,
    /// By base offset; never empty (the last is the active segment).
    segments: BTreeMap<i64, Segment>,
    log_start_offset: i64,
    recovery_point: i64,
    /// Bumped by every truncation: a flush that began before one must not advance the
    /// recovery point over offsets the truncation freed (they may hold new, unsynced batches).
    truncations: u64,
    /// The log was deleted: its entry must not come back into the directory's checkpoint.
    deleted: bool,
    unflushed_records: u64,
    last_flush_ms: Option<i64>,
    closed: bool,
    /// The leader-epoch cache; its checkpoint is written whenever it changes, before the batches
    /// that changed it (so recovery only ever trims it).
    epochs: EpochCache,
    /// ABORT markers appended whose aborted-transaction entry is not written yet, by offset,
    /// with whether their append was flushed (see [`Log::append_aborted_txn`]): the recovery
    /// point stays below the first.
    unindexed_aborts: BTreeMap<i64, bool>,
    /// Offsets of the producer-state snapshots on disk (`<offset>.snapshot`).
    snapshots: BTreeSet<i64>,
}

impl LogState {
    fn active(&self) -> Result<&Segment> {
        self.segments.values().next_back().ok_or(Error::Closed)
    }

    fn active_mut(&mut self) -> Result<&mut Segment> {
        self.segments.values_mut().next_back().ok_or(Error::Closed)
    }

    fn log_end_offset(&self) -> i64 {
        self.segments
            .values()
            .next_back()
            .map_or(self.log_start_offset, |segment| segment.next_offset)
    }

    /// The offsets the directory's checkpoint should hold for this log.
    fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            log_start_offset: self.log_start_offset,
            recovery_point: self.recovery_point,
        }
    }

    /// The last step of recovery: the log must reach the recovery point, and its start offset is
    /// brought within what the segments hold (`first_base`: the first segment found on disk).
    fn check_recovered(
        &mut self,
        checkpoints: &OffsetCheckpoints,
        key: &LogKey,
        first_base: Option<i64>,
    ) -> Result<()> {
        let (log_start_offset, recovery_point) = (self.log_start_offset, self.recovery_point);
        let log_end = self.log_end_offset();
        if recovery_point > log_end {
            let active = self.active()?;
            return Err(Error::corrupt(
                &**active.log_path(),
                active.size_bytes,
                format!("log ends at offset {log_end}, below the recovery point {recovery_point}"),
            ));
        }
        let first = first_base.unwrap_or(log_start_offset);
        self.log_start_offset = log_start_offset.max(first).min(log_end);
        if self.log_start_offset < log_start_offset {
            // Recovery cut the log below the checkpointed start (unflushed batches lost): the
            // lower start must be durable before new appends reuse those offsets, or a later
            // crash would bring the old start back and hide them.
            checkpoints.set_and_write(key, self.checkpoint())?;
        }
        Ok(())
    }
}

/// Releases both locks, then closes `removed` (segments whose files are unlinked).
///
/// Why in this order: closing the last handle on an unlinked file makes the kernel free its page
/// cache there and then, milliseconds for a full segment (a fifth of the append benchmark's time
/// went to it), and neither readers nor appends need to wait for that.
fn close_after_unlock(
    state: RwLockWriteGuard<'_, LogState>,
    writer: MutexGuard<'_, ()>,
    removed: Vec<Segment>,
) {
    drop(state);
    drop(writer);
    drop(removed);
}

impl Log {
    /// Whether the log still waits for [`Log::recover_deferred`].
    pub fn is_recovering(&self) -> bool {
        self.recovering.load(Ordering::SeqCst)
    }

    fn recovering_error(&self) -> Error {
        Error::Recovering {
            topic: self.topic.clone(),
            partition: self.partition,
        }
    }

    fn read_state(&self) -> Result<RwLockReadGuard<'_, LogState>> {
        if self.is_recovering() {
            return Err(self.recovering_error());
        }
        // A panic while holding the lock leaves the state unknown: treat it like a failed write.
        self.state.read().map_err(|_| Error::Poisoned)
    }

    fn write_state(&self) -> Result<RwLockWriteGuard<'_, LogState>> {
        if self.is_recovering() {
            return Err(self.recovering_error());
        }
        self.state.write().map_err(|_| Error::Poisoned)
    }

    fn writer(&self) -> Result<MutexGuard<'_, ()>> {
        // As for the state lock: a panic mid-change leaves the log's files unknown.
        self.writer.lock().map_err(|_| Error::Poisoned)
    }

    fn check_writable(&self, state: &LogState) -> Result<()> {
        if self.poisoned.load(Ordering::SeqCst) {
            return Err(Error::Poisoned);
        }
        if state.closed {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// Writes the directory's offset checkpoint with this log's current offsets, durably, before
    /// returning: for a change the next steps rely on (see `OffsetCheckpoints::set_and_write`).
    fn write_checkpoint(&self, state: &LogState) -> Result<()> {
        self.checkpoints
            .set_and_write(&self.key, state.checkpoint())
    }

    /// Marks the log poisoned and passes the error on.
    fn poison(&self, error: Error) -> Error {
        self.poisoned.store(true, Ordering::SeqCst);
        error
    }

    /// Topic of this partition.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Partition number.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// The configuration in force.
    pub fn config(&self) -> Result<LogConfig> {
        Ok(self.read_state()?.config.clone())
    }

    /// Replaces the configuration (validated first). Takes effect from the next append or call.
    pub fn set_config(&self, config: LogConfig) -> Result<()> {
        config.validate()?;
        let _writer = self.writer()?;
        // Also while recovering: the placeholder keeps it for the recovery.
        let mut state = self.state.write().map_err(|_| Error::Poisoned)?;
        for segment in state.segments.values_mut() {
            segment.index_interval_bytes = config.index_interval_bytes;
        }
        state.config = config;
        Ok(())
    }

    /// Offset the next appended record will get.
    pub fn log_end_offset(&self) -> Result<i64> {
        Ok(self.read_state()?.log_end_offset())
    }

    /// First offset still in the log.
    pub fn log_start_offset(&self) -> Result<i64> {
        Ok(self.read_state()?.log_start_offset)
    }

    /// Every offset below this has been made durable by a flush (the recovery point).
    pub fn flushed_offset(&self) -> Result<i64> {
        Ok(self.read_state()?.recovery_point)
    }

    /// Bytes of all segments.
    pub fn size_bytes(&self) -> Result<u64> {
        Ok(self
            .read_state()?
            .segments
            .values()
            .map(|s| s.size_bytes)
            .sum())
    }

    /// Number of segments (at least one).
    pub fn segment_count(&self) -> Result<usize> {
        Ok(self.read_state()?.segments.len())
    }

    /// Whether an earlier write or fsync failed (every append now fails with `Error::Poisoned`).
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::SeqCst)
    }

    /// The first step of a clean close, without any I/O: recovers the log if it was not yet
    /// (the clean-shutdown marker promises every log is), then refuses further writes and lets
    /// go of the active segment's `.log` view. `LogDir::close` then syncs what is not durable
    /// yet (`Log::unflushed_end`) and writes the directory's checkpoint once. The active indexes
    /// stay at their preallocated length (no trim, which was two truncations per log): a clean
    /// open finds their entries by their zero tail (`IndexFile::open`).
    pub(crate) fn close_for_shutdown(&self) -> Result<()> {
        self.recover_deferred()?;
        let _writer = self.writer()?;
        let mut state = self.write_state()?;
        if state.closed {
            return Ok(());
        }
        if self.poisoned.load(Ordering::SeqCst) {
            return Err(Error::Poisoned);
        }
        state.active_mut()?.release_active();
        state.closed = true;
        Ok(())
    }

    /// Checks every segment's offset and time index against its log (feature `power-sim`, for
    /// tests): each entry must name the batch it claims. A description of the first mismatch.
    #[cfg(feature = "power-sim")]
    pub fn verify_indexes(&self) -> std::result::Result<(), crate::segment::IndexMismatch> {
        let state = self.read_state()?;
        for segment in state.segments.values() {
            segment.verify_indexes(self.io.as_ref())?;
        }
        Ok(())
    }

    /// Refuses further writes without flushing (the log is being deleted).
    pub(crate) fn mark_closed(&self) -> Result<()> {
        let _writer = self.writer()?;
        // Also while recovering: a deleted log is then never recovered.
        let mut state = self.state.write().map_err(|_| Error::Poisoned)?;
        state.closed = true;
        // Under the state lock, which a flush's `advance_recovery_point` takes too: no flush
        // puts the log's entry back into the directory's checkpoint after this.
        state.deleted = true;
        Ok(())
    }

    /// The partition's directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}
