//! Writing a [`Log`]: checking an append's batches, assigning their offsets (or, for a follower,
//! checking that its leader's offsets continue the log), stamping the leader epoch, rolling the
//! active segment, and the flush policy that makes appends durable and advances the recovery
//! point. Must never fsync while holding the state lock, nor report an offset as flushed before
//! its fsync returned.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use skiff_protocol::records::v2::{self, BatchHeader, BATCH_HEADER_BYTES};

use crate::config::PersistMode;
use crate::error::{Error, Result};
use crate::fs::{self};
use crate::leader_epoch::EpochCache;
use crate::limits;
use crate::segment::Segment;

use super::{AppendInfo, Log, LogState};

/// Counts of one validated append input.
struct InputSummary {
    records_count: u64,
    offsets_count: i64,
    /// Some batch is transactional (a transactional producer's, or a marker).
    transactional: bool,
}

/// Checks that `batches` is a sequence of whole, valid v2 producer batches no larger than
/// `batch_bytes_max` each; nothing is modified. With `compacted` (a follower's copy of its
/// leader's batches), a batch may hold fewer records than offsets, or none: a compacted leader's
/// batches keep their original last offset, and a producer's last batch may be kept empty.
fn check_input(batches: &[u8], batch_bytes_max: u32, compacted: bool) -> Result<InputSummary> {
    if batches.is_empty() {
        return Err(Error::InvalidBatchLayout("no batch"));
    }
    let mut summary = InputSummary {
        records_count: 0,
        offsets_count: 0,
        transactional: false,
    };
    let mut at = 0usize;
    while let Some(rest) = batches.get(at..).filter(|rest| !rest.is_empty()) {
        if rest.len() < BATCH_HEADER_BYTES {
            return Err(Error::InvalidBatchLayout(
                "trailing bytes shorter than a batch header",
            ));
        }
        let header = BatchHeader::parse(rest)?;
        let size_bytes = header.total_bytes();
        if size_bytes > batch_bytes_max as usize {
            return Err(Error::BatchTooLarge {
                size_bytes: size_bytes as u64,
                limit_bytes: u64::from(batch_bytes_max),
            });
        }
        let batch = rest
            .get(..size_bytes)
            .ok_or(Error::InvalidBatchLayout("batch extends past the input"))?;
        v2::validate(batch)?;
        if compacted {
            if header.records_count < 0
                || i64::from(header.last_offset_delta) < i64::from(header.records_count) - 1
            {
                return Err(Error::InvalidBatchLayout(
                    "last offset delta below the record count",
                ));
            }
        } else {
            if header.records_count < 1 {
                return Err(Error::InvalidBatchLayout("batch has no records"));
            }
            if i64::from(header.last_offset_delta) != i64::from(header.records_count) - 1 {
                return Err(Error::InvalidBatchLayout(
                    "last offset delta does not match the record count",
                ));
            }
        }
        summary.transactional |= header.is_transactional();
        summary.records_count += u64::from(header.records_count.unsigned_abs());
        summary.offsets_count += i64::from(header.last_offset_delta) + 1;
        at += size_bytes;
    }
    Ok(summary)
}

/// Offsets given to one append's batches.
struct Assigned {
    base_offset: i64,
    /// Offset after the last record.
    next_offset: i64,
    max_timestamp_ms: i64,
    offset_of_max_timestamp: i64,
}

/// An append's batches and how they get their offsets and leader epochs: the one difference
/// between a leader's (or a single node's) append and a follower's, which otherwise share every
/// step (checks, rolls, the write, the flush policy, poisoning).
#[derive(Debug)]
enum Input<'a> {
    /// Producer batches: the log assigns offsets from its end by rewriting each base offset;
    /// `leader_epoch`, if given, is stamped on every batch, otherwise each keeps its own.
    Assign {
        batches: &'a mut [u8],
        leader_epoch: Option<i32>,
    },
    /// A follower's copy of its leader's batches: offsets and epochs stay as the leader
    /// stamped them, and must continue this log ([`check_kept`], before anything changes).
    /// Never written to, so a follower appends straight from the fetched bytes, no copy.
    Keep(&'a [u8]),
}

impl Input<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Input::Assign { batches, .. } => batches,
            Input::Keep(batches) => batches,
        }
    }

    fn keeps_offsets(&self) -> bool {
        matches!(self, Input::Keep(_))
    }
}

/// Checks that `batches` (checked by [`check_input`]) continue a log ending at `log_end` whose
/// latest leader epoch is `latest_epoch`, as a follower's append must: the first batch starts at
/// or after `log_end` and each next one at or after the offset following the one before (a
/// compacted leader's log has gaps where whole batches were cleaned away; Kafka's follower
/// accepts them too), and no epoch ≥ 0 is below the latest before it.
/// Batches without an epoch (negative: written before epochs were stamped) are accepted and
/// left out of the epoch order, as the cache leaves them out.
///
/// Why refuse a lower epoch instead of doing what Kafka's cache does (drop the higher entries
/// with a warning): a leader never sends one to a follower that truncated as the protocol says
/// (to the leader's end of its latest epoch), so a lower epoch means the logs diverged, and
/// truncation ([`Log::truncate_to`]), not an append, must resolve that.
fn check_kept(batches: &[u8], log_end: i64, latest_epoch: Option<i32>) -> Result<()> {
    let mut expected = log_end;
    let mut latest = latest_epoch;
    let mut at = 0usize;
    while let Some(rest) = batches.get(at..).filter(|rest| !rest.is_empty()) {
        let header = BatchHeader::parse(rest)?;
        if header.base_offset < expected {
            return Err(Error::UnexpectedAppendOffset {
                expected,
                found: header.base_offset,
            });
        }
        let epoch = header.partition_leader_epoch;
        if epoch >= 0 {
            if let Some(latest) = latest.filter(|latest| epoch < *latest) {
                return Err(Error::EpochBelowLatest { epoch, latest });
            }
            latest = Some(epoch);
        }
        expected = header
            .base_offset
            .checked_add(i64::from(header.last_offset_delta) + 1)
            .ok_or(Error::InvalidBatchLayout("offsets pass i64::MAX"))?;
        at += header.total_bytes();
    }
    Ok(())
}

/// Gives the batches of `input` (checked by [`check_input`], and by [`check_kept`] for
/// [`Input::Keep`]) their offsets from `base_offset` on, in one pass: a producer's batches get
/// their base offsets rewritten (and `leader_epoch` stamped, if given; both fields lie outside
/// the CRC, so nothing is re-encoded), a follower's keep theirs. Records each epoch's first
/// offset in `epochs`. Returns the offsets and whether the epoch cache changed.
fn assign_offsets(
    input: &mut Input<'_>,
    base_offset: i64,
    epochs: &mut EpochCache,
) -> Result<(Assigned, bool)> {
    let mut tally = Tally::new(base_offset);
    let mut at = 0usize;
    match input {
        Input::Assign {
            batches,
            leader_epoch,
        } => {
            while let Some(rest) = batches.get_mut(at..).filter(|rest| !rest.is_empty()) {
                let header = BatchHeader::parse(rest)?;
                let offset = tally.assigned.next_offset;
                v2::set_base_offset(rest, offset)?;
                if let Some(epoch) = *leader_epoch {
                    v2::set_partition_leader_epoch(rest, epoch)?;
                }
                let epoch = leader_epoch.unwrap_or(header.partition_leader_epoch);
                tally.add(&header, offset, epoch, epochs);
                at += header.total_bytes();
            }
        }
        Input::Keep(batches) => {
            while let Some(rest) = batches.get(at..).filter(|rest| !rest.is_empty()) {
                let header = BatchHeader::parse(rest)?;
                debug_assert!(
                    header.base_offset >= tally.assigned.next_offset,
                    "check_kept ran"
                );
                // A compacted leader's gap: the batch keeps its offsets.
                tally.add(
                    &header,
                    header.base_offset,
                    header.partition_leader_epoch,
                    epochs,
                );
                at += header.total_bytes();
            }
        }
    }
    Ok((tally.assigned, tally.epochs_changed))
}

/// What [`assign_offsets`] has seen so far.
struct Tally {
    assigned: Assigned,
    epochs_changed: bool,
    batches: usize,
}

impl Tally {
    fn new(base_offset: i64) -> Self {
        Self {
            assigned: Assigned {
                base_offset,
                next_offset: base_offset,
                max_timestamp_ms: -1,
                offset_of_max_timestamp: base_offset,
            },
            epochs_changed: false,
            batches: 0,
        }
    }

    /// One batch, whose first offset is `offset` and whose epoch is `epoch`.
    fn add(&mut self, header: &BatchHeader, offset: i64, epoch: i32, epochs: &mut EpochCache) {
        let assigned = &mut self.assigned;
        if self.batches == 0 {
            assigned.base_offset = offset;
        }
        self.batches += 1;
        assigned.next_offset = offset;
        self.epochs_changed |= epochs.assign(epoch, offset);
        if header.max_timestamp > assigned.max_timestamp_ms {
            assigned.max_timestamp_ms = header.max_timestamp;
            assigned.offset_of_max_timestamp = offset;
        }
        assigned.next_offset += i64::from(header.last_offset_delta) + 1;
    }
}

impl Log {
    /// Appends one or more v2 batches as a produce request carries them.
    ///
    /// Each batch is checked (layout, magic, CRC32C, record count against the last offset delta,
    /// size against `batch_bytes_max`) before anything is written; then offsets are assigned by
    /// rewriting each base offset in `batches` (outside the CRC, so nothing is re-encoded), the
    /// bytes are written with one positioned write, and the indexes updated. `now_ms` is the
    /// caller's clock: the log-append time, the base of `segment_ms` rolls and of `flush_ms`.
    /// If the flush policy says so, the append is fsynced before this returns
    /// (`AppendInfo::flushed`). A write or fsync failure poisons the log.
    ///
    /// The batches keep the partition leader epoch they carry; each epoch ≥ 0 not seen before
    /// enters the leader-epoch cache. A leader appends with [`Log::append_with_epoch`] instead,
    /// and a follower with [`Log::append_replicated`] (which keeps the offsets as well).
    pub fn append(&self, batches: &mut [u8], now_ms: i64) -> Result<AppendInfo> {
        let input = Input::Assign {
            batches,
            leader_epoch: None,
        };
        self.append_with(input, now_ms)
    }

    /// A follower's append of batches copied from its leader (Kafka's `appendAsFollower`): the
    /// checks of [`Log::append`] (layout, magic, CRC32C, `batch_bytes_max`; a batch may hold
    /// fewer records than offsets, as a compacted leader's do), but the offsets are not
    /// assigned. The first batch must start at or after the log end offset and each next one at
    /// or after the offset following the one before (a compacted leader's gaps), or the append
    /// is refused with [`Error::UnexpectedAppendOffset`]. Leader epochs stay as stamped; each epoch ≥ 0 not seen
    /// before enters the leader-epoch cache (its checkpoint durable before the batches are
    /// written), and an epoch below the latest the log holds is refused with
    /// [`Error::EpochBelowLatest`] (the logs diverged: truncate first). A refused append writes
    /// nothing, not even a roll. Rolls, the flush policy and poisoning are those of `append`.
    ///
    /// `batches` is only read, so the follower's segments hold exactly the leader's bytes, and
    /// a follower appends from the bytes it fetched, without a copy.
    pub fn append_replicated(&self, batches: &[u8], now_ms: i64) -> Result<AppendInfo> {
        self.append_with(Input::Keep(batches), now_ms)
    }

    /// [`Log::append`] as a leader does it: every batch is stamped with `leader_epoch` (the
    /// partition leader epoch field, outside the CRC, rewritten in place like the base offset)
    /// and the leader-epoch cache records where that epoch starts if it is new. The cache's
    /// checkpoint is made durable before the batches are written.
    pub fn append_with_epoch(
        &self,
        batches: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo> {
        if leader_epoch < 0 {
            return Err(Error::InvalidBatchLayout("negative leader epoch"));
        }
        let input = Input::Assign {
            batches,
            leader_epoch: Some(leader_epoch),
        };
        self.append_with(input, now_ms)
    }

    fn append_with(&self, mut input: Input<'_>, now_ms: i64) -> Result<AppendInfo> {
        // Three steps, so that readers wait only for the short ones: check the input (the CRC
        // pass, ~1 µs per 16 KiB) holding only the writer lock; assign offsets and take the end
        // of the log under the state lock; write (the page-cache copy, most of an append's cost)
        // holding only the writer lock; then publish the batches under the state lock. Until
        // then the bytes lie past `size_bytes`, where no reader looks.
        let writer = self.writer()?;
        let batch_bytes_max = {
            let state = self.read_state()?;
            self.check_writable(&state)?;
            state.config.batch_bytes_max
        };
        let summary = check_input(input.bytes(), batch_bytes_max, input.keeps_offsets())?;
        let abort_positions = self.before_transactional(summary.transactional, input.bytes())?;
        let size_bytes = input.bytes().len() as u64;
        let (target, segment_base_offset, assigned, new_epochs) = {
            let mut state = self.write_state()?;
            self.check_writable(&state)?;
            let log_end = state.log_end_offset();
            if let Input::Keep(batches) = input {
                // Before the roll: a refused append writes nothing.
                check_kept(batches, log_end, state.epochs.latest_epoch())?;
            }
            self.maybe_roll(&mut state, now_ms, size_bytes, summary.offsets_count)?;
            let active = state.active()?;
            if active.size_bytes + size_bytes > limits::SEGMENT_BYTES_MAX {
                return Err(Error::BatchTooLarge {
                    size_bytes,
                    limit_bytes: limits::SEGMENT_BYTES_MAX - active.size_bytes,
                });
            }
            let (target, segment_base_offset) =
                (active.append_target(self.io.as_ref())?, active.base_offset);
            let (assigned, epochs_changed) =
                assign_offsets(&mut input, log_end, &mut state.epochs)?;
            let new_epochs = epochs_changed.then(|| state.epochs.clone());
            (target, segment_base_offset, assigned, new_epochs)
        };
        if let Some(epochs) = new_epochs {
            // Once per leader epoch, under the writer lock only: the checkpoint names the new
            // epoch before any batch of it is on disk, so recovery only ever trims it.
            epochs
                .write(self.io.as_ref(), &self.dir)
                .map_err(|error| self.poison(error))?;
        }
        let batches = input.bytes();
        target
            .write(self.io.as_ref(), batches)
            .map_err(|error| self.poison(error))?;
        let (info, flush_due, persist_mode) = {
            let mut state = self.write_state()?;
            let tracked = state
                .segments
                .get_mut(&segment_base_offset)
                .is_some_and(|segment| segment.track_appended(batches, target.position, now_ms));
            if !tracked {
                // Only a change behind the writer lock's back could move the end: the state no
                // longer says where the log ends.
                return Err(self.poison(Error::Poisoned));
            }
            let flush_due = state.count_unflushed(summary.records_count, now_ms);
            state.note_unindexed_aborts(batches, &abort_positions, flush_due);
            let info = AppendInfo {
                base_offset: assigned.base_offset,
                last_offset: assigned.next_offset - 1,
                max_timestamp_ms: assigned.max_timestamp_ms,
                offset_of_max_timestamp: assigned.offset_of_max_timestamp,
                log_append_time_ms: now_ms,
                segment_base_offset,
                position: target.position,
                size_bytes,
                records_count: summary.records_count,
                log_start_offset: state.log_start_offset,
                flushed: false,
            };
            (info, flush_due, state.config.persist_mode)
        };
        // The fsync runs without the writer lock, so other appends go on meanwhile.
        drop(target);
        drop(writer);
        if flush_due {
            self.flush()?;
            // Under `PersistMode::Buffer` the flush synced nothing, and an ABORT marker is durable
            // only once its entry is (`Log::append_aborted_txn` flushes again): not durable.
            return Ok(AppendInfo {
                flushed: persist_mode != PersistMode::Buffer && abort_positions.is_empty(),
                ..info
            });
        }
        Ok(info)
    }

    /// Rolls before an append of `size_bytes` bytes and `offsets_count` offsets if the active
    /// segment is non-empty and too full, too old, out of index room, or would overflow its
    /// 4-byte relative offsets.
    fn maybe_roll(
        &self,
        state: &mut LogState,
        now_ms: i64,
        size_bytes: u64,
        offsets_count: i64,
    ) -> Result<bool> {
        if roll_due(state, now_ms, size_bytes, offsets_count)? {
            self.roll(state)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Whether an append of `size_bytes` bytes holding `records_count` records at `now_ms` would,
    /// as the log stands, block on more than a page-cache copy: roll a segment (file creation and
    /// a directory fsync) or fsync under the flush policy. A hint for callers on an async runtime
    /// that run such appends on a blocking thread: a concurrent append can change the answer.
    pub fn append_may_block(
        &self,
        size_bytes: u64,
        records_count: u64,
        now_ms: i64,
    ) -> Result<bool> {
        let state = self.read_state()?;
        let offsets_count = i64::try_from(records_count).unwrap_or(i64::MAX);
        Ok(roll_due(&state, now_ms, size_bytes, offsets_count)?
            || flush_due(&state, records_count, now_ms))
    }

    /// Seals the active segment and starts a new one at the log end offset.
    fn roll(&self, state: &mut LogState) -> Result<()> {
        let io = self.io.as_ref();
        let base_offset = state.log_end_offset();
        let config = state.config.clone();
        let result = (|| {
            state.active_mut()?.seal(io)?;
            let segment = Segment::create(io, &self.dir, base_offset, &config, &self.log_files)?;
            // The new file's name must survive a crash before any of its data is acknowledged.
            fs::sync_parent(io, &self.dir.join(fs::CHECKPOINT_FILE))?;
            state.segments.insert(base_offset, segment);
            // No checkpoint here (there was one per roll, a write and three fsyncs): the
            // embedder's periodic `LogDir::checkpoint_recovery_points` bounds what recovery
            // scans after a crash, as Kafka's `log.flush.offset.checkpoint.interval.ms` does.
            Ok(())
        })();
        result.map_err(|error| self.poison(error))
    }

    /// Rolls the active segment if its first append is `segment_ms` older than `now_ms`. Returns
    /// whether it rolled.
    pub fn roll_if_needed(&self, now_ms: i64) -> Result<bool> {
        let _writer = self.writer()?;
        let mut state = self.write_state()?;
        self.check_writable(&state)?;
        let active = state.active()?;
        let due = !active.is_empty()
            && active
                .first_append_ms
                .is_some_and(|first_ms| now_ms.saturating_sub(first_ms) >= state.config.segment_ms);
        if due {
            self.roll(&mut state)?;
        }
        Ok(due)
    }

    /// Makes everything appended so far durable as `persist_mode` says, and advances the
    /// recovery point. The fsyncs run without the log's lock, so reads and appends continue.
    /// With `PersistMode::Buffer` nothing is synced and the recovery point stays.
    ///
    /// Without a flush policy (the default, as Kafka's), the recovery point moves only when this
    /// is called: an embedder should call [`crate::LogDir::checkpoint_recovery_points`]
    /// periodically (Kafka flushes and checkpoints every minute), which flushes the logs with
    /// unsynced data and publishes their recovery points, so that recovery after a crash scans
    /// little. A flush itself only updates the directory's table (no write: the next checkpoint
    /// publishes it).
    pub fn flush(&self) -> Result<()> {
        self.flush_with(None)
    }

    /// Like [`Log::flush`], but syncs data (`PersistMode::SyncData`) whatever the log's
    /// `persist_mode`: for an embedder whose own acknowledgement promises durability (the
    /// broker's offsets commits) on a log whose other writers need no fsync.
    pub fn sync(&self) -> Result<()> {
        self.flush_with(Some(PersistMode::SyncData))
    }

    fn flush_with(&self, mode_override: Option<PersistMode>) -> Result<()> {
        let (files, txn_indexes, end_offset, mode, truncations) = {
            let state = self.read_state()?;
            if self.poisoned.load(Ordering::SeqCst) {
                return Err(Error::Poisoned);
            }
            let mode = mode_override.unwrap_or(state.config.persist_mode);
            if mode == PersistMode::Buffer {
                return Ok(());
            }
            let recovery_point = state.recovery_point;
            let files = state
                .segments
                .values()
                .filter(|segment| segment.next_offset > recovery_point)
                .map(|segment| {
                    Ok((
                        segment.log_file(self.io.as_ref())?,
                        Arc::clone(segment.log_path()),
                    ))
                })
                .collect::<Result<Vec<_>>>()?;
            // The aborted-transaction entries of those segments are made durable with them: the
            // recovery point never passes a marker whose entry a crash could still lose.
            let txn_indexes: Vec<_> = state
                .segments
                .values()
                .filter(|segment| segment.next_offset > recovery_point && !segment.txn.is_empty())
                .map(|segment| segment.txn.path().to_path_buf())
                .collect();
            // Taken now: an entry written after this may be in a file not synced here.
            let end_offset = state.recovery_point_cap(state.log_end_offset());
            (files, txn_indexes, end_offset, mode, state.truncations)
        };
        for (file, path) in &files {
            self.io
                .sync(file, mode)
                .map_err(|error| self.poison(Error::io(&**path, error)))?;
        }
        for path in &txn_indexes {
            crate::txn_index::sync_file(self.io.as_ref(), path, mode)
                .map_err(|error| self.poison(error))?;
        }
        self.advance_recovery_point(end_offset, truncations)
    }

    /// Raises the recovery point to `end_offset` (capped at the log end), which the caller has
    /// made durable, unless a truncation came in between (`truncations` is the count the caller
    /// saw when it took `end_offset`): the freed offsets may hold new batches nobody synced.
    /// Published to the directory's table, not written: the next checkpoint writes it.
    fn advance_recovery_point(&self, end_offset: i64, truncations: u64) -> Result<()> {
        let mut state = self.write_state()?;
        if state.truncations != truncations {
            return Ok(());
        }
        let log_end = state.log_end_offset();
        let end_offset = state.recovery_point_cap(end_offset.min(log_end));
        state.recovery_point = state.recovery_point.max(end_offset);
        if !state.deleted {
            self.checkpoints.set(&self.key, state.checkpoint())?;
        }
        Ok(())
    }

    /// Where the log ends and its truncation count, if it holds data not yet made durable (its
    /// recovery point is below its end); `None` if not, or if it is not recovered yet (then it
    /// has written nothing). For [`crate::LogDir`]'s checkpoint, which syncs such logs.
    pub(crate) fn unflushed_end(&self) -> Result<Option<(i64, u64)>> {
        if self.is_recovering() {
            return Ok(None);
        }
        let state = self.read_state()?;
        if self.poisoned.load(Ordering::SeqCst) {
            return Err(Error::Poisoned);
        }
        // Capped now, as a flush caps it (the sync that follows may miss a later entry).
        let end = state.recovery_point_cap(state.log_end_offset());
        Ok((state.recovery_point < end).then_some((end, state.truncations)))
    }

    /// After a file-system sync that began after [`Log::unflushed_end`] returned `end_offset` and
    /// `truncations`: everything up to `end_offset` is durable.
    pub(crate) fn mark_synced(&self, end_offset: i64, truncations: u64) -> Result<()> {
        self.advance_recovery_point(end_offset, truncations)
    }

    /// Records that `epoch` starts at the log end offset, as a broker does on becoming leader
    /// at that epoch (Kafka's `assign(epoch, logEndOffset)`), and writes the checkpoint. Nothing
    /// if `epoch` is not above the latest epoch. Returns whether the cache changed.
    pub fn assign_epoch(&self, epoch: i32) -> Result<bool> {
        let _writer = self.writer()?;
        let epochs = {
            let mut state = self.write_state()?;
            self.check_writable(&state)?;
            if state
                .epochs
                .latest_epoch()
                .is_some_and(|latest| latest >= epoch)
            {
                return Ok(false);
            }
            let log_end = state.log_end_offset();
            if !state.epochs.assign(epoch, log_end) {
                return Ok(false);
            }
            state.epochs.clone()
        };
        epochs
            .write(self.io.as_ref(), &self.dir)
            .map_err(|error| self.poison(error))?;
        Ok(true)
    }
}

impl LogState {
    /// Counts `records_count` appended records at `now_ms` against the flush policy; returns
    /// whether they are due for a flush now (the counters then start afresh).
    fn count_unflushed(&mut self, records_count: u64, now_ms: i64) -> bool {
        let due = flush_due(self, records_count, now_ms);
        self.unflushed_records += records_count;
        self.last_flush_ms.get_or_insert(now_ms);
        if due {
            self.unflushed_records = 0;
            self.last_flush_ms = Some(now_ms);
        }
        due
    }
}

/// Whether an append of `size_bytes` bytes and `offsets_count` offsets must first roll: the
/// active segment is non-empty and too full, too old, out of index room, or its 4-byte relative
/// offsets would overflow.
fn roll_due(state: &LogState, now_ms: i64, size_bytes: u64, offsets_count: i64) -> Result<bool> {
    let config = &state.config;
    let log_end = state.log_end_offset();
    let active = state.active()?;
    if active.is_empty() {
        return Ok(false);
    }
    let too_big = active.size_bytes + size_bytes > config.segment_bytes;
    let too_old = active
        .first_append_ms
        .is_some_and(|first_ms| now_ms.saturating_sub(first_ms) >= config.segment_ms);
    let last_relative = log_end + offsets_count - 1 - active.base_offset;
    let offsets_overflow = last_relative > i64::from(u32::MAX);
    Ok(too_big || too_old || active.indexes_full() || offsets_overflow)
}

/// Whether the flush policy calls for an fsync once `records_count` more records are appended at
/// `now_ms` (`flush.messages` reached, or `flush.ms` since the last flush; the first append
/// starts the `flush.ms` clock).
fn flush_due(state: &LogState, records_count: u64, now_ms: i64) -> bool {
    let unflushed_records = state.unflushed_records + records_count;
    let last_flush_ms = state.last_flush_ms.unwrap_or(now_ms);
    state
        .config
        .flush_messages_interval
        .is_some_and(|interval| unflushed_records >= interval)
        || state
            .config
            .flush_ms
            .is_some_and(|flush_ms| now_ms.saturating_sub(last_flush_ms) >= flush_ms)
}
