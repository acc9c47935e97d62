//! Truncating a [`Log`]: cutting the tail a diverged replica must drop (`truncate_to`) and
//! starting afresh at a follower's new start (`truncate_fully_and_start_at`). Lowers the recovery
//! point before the cut, so a crash mid-way never leaves one above the data; slices already handed
//! out stay valid.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::fs::{self};
use crate::leader_epoch::EpochCache;
use crate::segment::Segment;

use super::{close_after_unlock, Log};

impl Log {
    /// Removes every batch holding an offset ≥ `offset` (a batch straddling it goes whole, as in
    /// Kafka), for a replica that diverged. The new log end offset is returned. The recovery
    /// point is lowered first, so a crash mid-way never leaves one above the data; a log start
    /// the cut passes drops to the new end after the cut. Slices already handed out stay valid
    /// (see [`FetchSlice`]).
    pub fn truncate_to(&self, offset: i64) -> Result<i64> {
        let _writer = self.writer()?;
        let mut state = self.write_state()?;
        self.check_writable(&state)?;
        let log_end = state.log_end_offset();
        if offset >= log_end {
            return Ok(log_end);
        }
        let io = Arc::clone(&self.io);
        let io = io.as_ref();
        let cut_base = state
            .segments
            .range(..=offset)
            .next_back()
            .or_else(|| state.segments.iter().next())
            .map(|(base, _)| *base)
            .ok_or(Error::Closed)?;
        let cut_segment = state.segments.get(&cut_base).ok_or(Error::Closed)?;
        let (cut_position, new_end) = match cut_segment.find_batch(io, offset)? {
            Some((position, header)) => (position, header.base_offset),
            None => (cut_segment.size_bytes, cut_segment.next_offset),
        };
        let result = (|| {
            // The first dirty offset drops before the cut too (to where new appends will go).
            self.cleaner_offsets.lower_to(&self.key, new_end)?;
            // Only the recovery point drops before the cut. Why not the log start as well (when
            // the cut goes below it): a crash before the cut then left the whole log under a
            // start below the one the leader-epoch cache was moved to (`truncate_from_start`),
            // and recovery, which only trims the cache, kept an epoch-less start (found by
            // tests/power_loss.rs, seed 2509). Recovery lowers a start past the log end itself.
            state.recovery_point = state.recovery_point.min(new_end);
            state.truncations += 1;
            self.write_checkpoint(&state)?;
            let later: Vec<i64> = state
                .segments
                .range(cut_base + 1..)
                .map(|(b, _)| *b)
                .collect();
            for base in later {
                if let Some(segment) = state.segments.remove(&base) {
                    segment.delete_files(io, &self.dir)?;
                }
            }
            let config = state.config.clone();
            let segment = state.segments.get_mut(&cut_base).ok_or(Error::Closed)?;
            segment.truncate_at(io, &self.dir, cut_position, &config)?;
            segment.unseal(io, &config)?;
            let new_end = state.log_end_offset();
            state.forget_from(io, &self.dir, new_end)?;
            fs::sync_parent(io, &self.dir.join(fs::CHECKPOINT_FILE))?;
            if new_end < state.log_start_offset {
                // The log is now empty below its old start: it starts at its end.
                state.log_start_offset = new_end;
                self.write_checkpoint(&state)?;
            }
            // After the log: a crash in between leaves entries past the end, which recovery trims.
            if state.epochs.truncate_from_end(new_end) {
                state.epochs.write(io, &self.dir)?;
            }
            Ok(new_end)
        })();
        result.map_err(|error| self.poison(error))
    }

    /// Deletes every segment and starts the log empty at `offset` (Kafka's
    /// `truncateFullyAndStartAt`): log start, log end and recovery point all become `offset`, and
    /// the leader-epoch cache is cleared. For a follower whose leader's log starts past this
    /// log's end (the leader answered OFFSET_OUT_OF_RANGE): it then fetches from the leader's
    /// start. Slices already handed out stay valid (see [`FetchSlice`]); a failure poisons.
    ///
    /// Crash-safe by the order of its writes, so that a crash anywhere leaves the old log, a
    /// prefix of it (possibly empty), or the new empty log at `offset`:
    /// 1. the checkpoint's recovery point drops to the first segment's base (or `offset`, if
    ///    lower), so it never names data a later step removes and recovery trusts nothing;
    /// 2. the segments are deleted newest first, the directory fsynced after each (a cut keeps
    ///    a random subset of unsynced directory changes, which would leave holes);
    /// 3. only then is the empty segment at `offset` created (its name fsynced): with no other
    ///    segment left, recovery starts the log there whatever the checkpoint says;
    /// 4. the checkpoint names `offset` as log start and recovery point;
    /// 5. the empty leader-epoch checkpoint is written last: before it, recovery trims the old
    ///    entries itself (none survives on a log empty at its start), whereas clearing it first
    ///    would leave a whole old log with an empty, wrong, cache.
    ///
    /// Step 2 costs a directory fsync per segment, under the locks as truncation's fsyncs are;
    /// a follower reset this far is rare and serves no reads meanwhile.
    pub fn truncate_fully_and_start_at(&self, offset: i64) -> Result<()> {
        if offset < 0 {
            return Err(Error::NegativeOffset(offset));
        }
        let writer = self.writer()?;
        let mut state = self.write_state()?;
        self.check_writable(&state)?;
        let io = Arc::clone(&self.io);
        let io = io.as_ref();
        let mut removed = Vec::new();
        let result = (|| {
            self.cleaner_offsets.set_and_write(&self.key, None)?;
            let first_base = state.segments.keys().next().copied().unwrap_or(offset);
            state.recovery_point = state.recovery_point.min(first_base).min(offset);
            state.truncations += 1;
            self.write_checkpoint(&state)?;
            state.forget_from(io, &self.dir, -1)?;
            state.unindexed_aborts.clear();
            while let Some((_, segment)) = state.segments.pop_last() {
                segment.delete_files(io, &self.dir)?;
                removed.push(segment);
                fs::sync_parent(io, &self.dir.join(fs::CHECKPOINT_FILE))?;
            }
            let config = state.config.clone();
            let segment = Segment::create(io, &self.dir, offset, &config, &self.log_files)?;
            fs::sync_parent(io, &self.dir.join(fs::CHECKPOINT_FILE))?;
            state.segments.insert(offset, segment);
            state.log_start_offset = offset;
            state.recovery_point = offset;
            state.unflushed_records = 0;
            state.last_flush_ms = None;
            self.write_checkpoint(&state)?;
            state.epochs = EpochCache::default();
            state.epochs.write(io, &self.dir)
        })();
        if let Err(error) = result {
            return Err(self.poison(error));
        }
        close_after_unlock(state, writer, removed);
        Ok(())
    }
}
