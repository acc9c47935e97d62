//! Retention of a [`Log`]: moving the log start offset (DeleteRecords) and deleting the oldest
//! segments by size and age. The deleted segments' files are closed only after both locks are
//! released (`close_after_unlock`).

use crate::error::{Error, Result};
use crate::fs::{self};
use crate::segment::Segment;

use super::{close_after_unlock, Log, LogState};

impl Log {
    /// Advances the log start offset to `offset` (Kafka's DeleteRecords) and deletes the segments
    /// wholly below it. Returns the new log start offset.
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

    /// Deletes the `count` oldest segments: the log start offset moves past them and is
    /// checkpointed first, then the files are unlinked (open slices keep their inodes). Returns
    /// the removed segments, still open, for [`close_after_unlock`].
    fn delete_oldest(&self, state: &mut LogState, count: usize) -> Result<Vec<Segment>> {
        let io = self.io.as_ref();
        let doomed: Vec<i64> = state.segments.keys().take(count).copied().collect();
        let mut removed = Vec::new();
        let result = (|| {
            if let Some(first_kept) = state.segments.values().nth(count) {
                state.log_start_offset = state.log_start_offset.max(first_kept.base_offset);
            }
            self.write_checkpoint(state)?;
            for base in &doomed {
                if let Some(segment) = state.segments.remove(base) {
                    segment.delete_files(io, &self.dir)?;
                    removed.push(segment);
                }
            }
            if let Some(first_base) = state.segments.keys().next().copied() {
                state.forget_below(io, &self.dir, first_base)?;
            }
            if !doomed.is_empty() {
                fs::sync_parent(io, &self.dir.join(fs::CHECKPOINT_FILE))?;
            }
            if state.epochs.truncate_from_start(state.log_start_offset) {
                state.epochs.write(io, &self.dir)?;
            }
            Ok(())
        })();
        result.map_err(|error| self.poison(error))?;
        Ok(removed)
    }
}
