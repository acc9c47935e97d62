//! Retention of a [`Log`]: moving the log start offset (DeleteRecords) and deleting the oldest
//! segments by size and age. The deleted segments' files are closed only after both locks are
//! released (`close_after_unlock`).
//!
//! A moved log start lives in memory and in the directory's table; the next periodic checkpoint
//! (`LogDir::checkpoint_recovery_points`) or the clean close writes it, as Kafka's
//! `log-start-offset-checkpoint` is written. Why not at once: the table is one file for the whole
//! directory, so writing it per move cost a rewrite of every log's line and two fsyncs (149 KB
//! at 10,000 logs, a median 22 ms on the shared bench machine: `storage/benches/log_start.rs`,
//! docs/benchmarks.md). What a crash can
//! then do, and why it is safe: the recovered start is the greater of the checkpointed start and
//! the first surviving segment's base, so it lies between the last checkpointed start and the
//! start before the crash. Segments are deleted oldest first, each deletion made durable before
//! the next (a cut keeps a prefix of them, never a hole that recovery would read as lost data),
//! and only segments wholly below the start go, so nothing at or above the pre-crash start is
//! lost; a DeleteRecords since the checkpoint may be undone (as in Kafka). Must never write the
//! offset checkpoint itself.

use crate::error::{Error, Result};
use crate::fs::{self};
use crate::segment::Segment;

use super::{close_after_unlock, Log, LogState};

impl Log {
    /// Advances the log start offset to `offset` (Kafka's DeleteRecords) and deletes the segments
    /// wholly below it. Returns the new log start offset. The new start is durable once the next
    /// [`crate::LogDir::checkpoint_recovery_points`] or [`crate::LogDir::close`] returns; a crash
    /// before then recovers a start between the last checkpointed one and this one (see the
    /// module docs). Moving the start inside the first segment costs no I/O.
    pub fn delete_records_before(&self, offset: i64) -> Result<i64> {
        let writer = self.writer()?;
        let mut state = self.write_state()?;
        self.check_writable(&state)?;
        let log_end = state.log_end_offset();
        if offset > log_end {
            return Err(Error::OffsetOutOfRange {
                requested: offset,
                log_start: state.log_start_offset,
                log_end,
            });
        }
        let mut removed = Vec::new();
        if offset > state.log_start_offset {
            state.log_start_offset = offset;
            let count = self.deletable_prefix(&state, None);
            removed = self.delete_oldest(&mut state, count)?;
        }
        let log_start_offset = state.log_start_offset;
        close_after_unlock(state, writer, removed);
        Ok(log_start_offset)
    }

    /// Deletes whole segments, oldest first, while they are past `retention_ms` (their newest
    /// timestamp older than `now_ms − retention_ms`), while the log is larger than
    /// `retention_bytes` without them (those two only when the cleanup policy deletes: a
    /// `compact` log keeps every key's latest record however old), or while they lie wholly
    /// below the log start offset. The
    /// active segment is never deleted (roll it first with [`Log::roll_if_needed`]). Returns how
    /// many segments were deleted.
    pub fn enforce_retention(&self, now_ms: i64) -> Result<usize> {
        let writer = self.writer()?;
        let mut state = self.write_state()?;
        self.check_writable(&state)?;
        let count = self.deletable_prefix(&state, Some(now_ms));
        if count == 0 {
            // Nothing moves: no checkpoint to write (it would fsync under the locks, and
            // retention runs often).
            return Ok(0);
        }
        let removed = self.delete_oldest(&mut state, count)?;
        close_after_unlock(state, writer, removed);
        Ok(count)
    }

    /// How many of the oldest non-active segments may go. Without `now_ms`, only those below the
    /// log start offset.
    fn deletable_prefix(&self, state: &LogState, now_ms: Option<i64>) -> usize {
        let config = &state.config;
        // Time and size retention belong to the `delete` policy; the log start always counts.
        let now_ms = now_ms.filter(|_| config.cleanup_policy.deletes());
        let mut remaining_bytes: u64 = state.segments.values().map(|s| s.size_bytes).sum();
        let mut count = 0usize;
        let candidates = state.segments.len().saturating_sub(1);
        let next_bases = state.segments.keys().skip(1);
        for (segment, next_base) in state.segments.values().take(candidates).zip(next_bases) {
            // Below the log start only when the next segment starts at or below it (Kafka's
            // rule): an empty segment, as a cleaning leaves when it dropped every record of its
            // group, ends where it begins and must not count as below a start it holds.
            let below_start = *next_base <= state.log_start_offset;
            let expired = now_ms.is_some_and(|now_ms| {
                config.retention_ms.is_some_and(|retention_ms| {
                    segment.max_timestamp_ms >= 0
                        && now_ms.saturating_sub(segment.max_timestamp_ms) > retention_ms
                })
            });
            let oversized = now_ms.is_some()
                && config.retention_bytes.is_some_and(|retention_bytes| {
                    remaining_bytes - segment.size_bytes >= retention_bytes
                });
            if !(below_start || expired || oversized) {
                break;
            }
            remaining_bytes -= segment.size_bytes;
            count += 1;
        }
        count
    }

    /// Deletes the `count` oldest segments: the log start offset moves past them (in memory and
    /// in the directory's table, no write: see the module docs), then their files are unlinked
    /// oldest first, the directory fsynced after each (open slices keep their inodes). Returns
    /// the removed segments, still open, for [`close_after_unlock`].
    ///
    /// The leader-epoch cache is cut at the new start in memory only, as Kafka's
    /// `truncateFromStart` no longer flushes: the file keeps older entries until its next write,
    /// which recovery trims to the recovered start. A file written later (a new epoch) may start
    /// above a start a crash brought back; recovery then rebuilds the entries between from the
    /// batch headers (`load::recover_epochs`).
    fn delete_oldest(&self, state: &mut LogState, count: usize) -> Result<Vec<Segment>> {
        let io = self.io.as_ref();
        let doomed: Vec<i64> = state.segments.keys().take(count).copied().collect();
        let mut removed = Vec::new();
        let result = (|| {
            if let Some(first_kept) = state.segments.values().nth(count) {
                state.log_start_offset = state.log_start_offset.max(first_kept.base_offset);
            }
            self.checkpoints.set(&self.key, state.checkpoint())?;
            // First, so the first deletion's directory fsync covers the snapshots' removal (a
            // snapshot lost early only costs a longer replay).
            if let Some(first_kept) = state.segments.keys().nth(count).copied() {
                state.forget_below(io, &self.dir, first_kept)?;
            }
            for base in &doomed {
                if let Some(segment) = state.segments.remove(base) {
                    segment.delete_files(io, &self.dir)?;
                    removed.push(segment);
                    // Before the next one goes: a cut then keeps a prefix of the deletions.
                    // Without the start written first, a hole among the kept segments would
                    // read at recovery as flushed data lost.
                    fs::sync_parent(io, &self.dir.join(fs::CHECKPOINT_FILE))?;
                }
            }
            state.epochs.truncate_from_start(state.log_start_offset);
            Ok(())
        })();
        result.map_err(|error| self.poison(error))?;
        Ok(removed)
    }
}
