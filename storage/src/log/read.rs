//! Reading a [`Log`]: the slice of a fetch (`read`, `read_below`), the offset for a timestamp,
//! the largest timestamp, and the leader-epoch cache's answers (OffsetsForLeaderEpoch). Takes the
//! state lock shared; must never change the log.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::fetch::FetchSlice;
use crate::leader_epoch::{EpochCache, EpochEndOffset, EpochEntry};
use crate::segment::Segment;

use super::{Log, TimestampOffset};

impl Log {
    /// Reads from the batch holding `fetch_offset`: up to `max_bytes` of that segment (possibly
    /// ending inside a batch, as Kafka's fetch does), or the whole first batch if it is larger and
    /// `min_one_batch` is set. A fetch at the log end offset returns an empty slice; outside
    /// `[log_start, log_end]` is `Error::OffsetOutOfRange`. A slice never spans two segments.
    pub fn read(
        &self,
        fetch_offset: i64,
        max_bytes: u64,
        min_one_batch: bool,
    ) -> Result<FetchSlice> {
        self.read_below(fetch_offset, i64::MAX, max_bytes, min_one_batch)
    }

    /// [`Log::read`] that stops before the batch holding `max_offset`: a consumer's read, capped
    /// at the high watermark (Kafka's `maxOffset`, translated to the position of the batch that
    /// holds it). Only whole batches below `max_offset` are returned, `min_one_batch` included;
    /// a fetch at or past `max_offset` (but within the log) returns an empty slice. A replica's
    /// high watermark is always a batch boundary, so nothing below it is held back.
    pub fn read_below(
        &self,
        fetch_offset: i64,
        max_offset: i64,
        max_bytes: u64,
        min_one_batch: bool,
    ) -> Result<FetchSlice> {
        let state = self.read_state()?;
        let log_end = state.log_end_offset();
        if fetch_offset < state.log_start_offset || fetch_offset > log_end {
            return Err(Error::OffsetOutOfRange {
                requested: fetch_offset,
                log_start: state.log_start_offset,
                log_end,
            });
        }
        let floor = state
            .segments
            .range(..=fetch_offset)
            .next_back()
            .map_or(i64::MIN, |(base, _)| *base);
        for segment in state.segments.range(floor..).map(|(_, segment)| segment) {
            if fetch_offset >= segment.next_offset {
                continue;
            }
            if fetch_offset >= max_offset {
                break;
            }
            if let Some((position, header)) = segment.find_batch(self.io.as_ref(), fetch_offset)? {
                let end = if max_offset < segment.next_offset {
                    segment
                        .find_batch(self.io.as_ref(), max_offset)?
                        .map_or(segment.size_bytes, |(limit, _)| limit)
                } else {
                    segment.size_bytes
                };
                let available = end.saturating_sub(position);
                let mut len = available.min(max_bytes);
                if min_one_batch {
                    len = len.max((header.total_bytes() as u64).min(available));
                }
                return self.slice(segment, position, len);
            }
        }
        let active = state.active()?;
        self.slice(active, active.size_bytes, 0)
    }

    fn slice(&self, segment: &Segment, position: u64, len: u64) -> Result<FetchSlice> {
        Ok(FetchSlice::new(
            segment.log_file(self.io.as_ref())?,
            Arc::clone(segment.log_path()),
            Arc::clone(&self.io),
            (position, len),
            segment.next_offset,
        ))
    }

    /// The first record whose timestamp is ≥ `timestamp_ms` (its exact offset and timestamp, as
    /// Kafka answers ListOffsets), found through the time indexes and then the records of the
    /// batch; records below the log start offset do not count. `None` if every record is older.
    /// (Kafka's "earliest" and "latest" are [`Log::log_start_offset`] and
    /// [`Log::log_end_offset`].)
    pub fn offset_for_timestamp(&self, timestamp_ms: i64) -> Result<Option<TimestampOffset>> {
        let state = self.read_state()?;
        for segment in state.segments.values() {
            if segment.max_timestamp_ms < timestamp_ms
                || segment.next_offset <= state.log_start_offset
            {
                continue;
            }
            if let Some((offset, timestamp_ms)) = segment.find_record_by_timestamp(
                self.io.as_ref(),
                timestamp_ms,
                state.log_start_offset,
            )? {
                return Ok(Some(TimestampOffset {
                    offset,
                    timestamp_ms,
                }));
            }
        }
        Ok(None)
    }

    /// The record holding the greatest timestamp in the log (Kafka's ListOffsets "max
    /// timestamp", KIP-734): its offset and that timestamp; `None` for an empty log or one without
    /// timestamps. The earliest such record if several share the maximum.
    pub fn max_timestamp(&self) -> Result<Option<TimestampOffset>> {
        let max_timestamp_ms = {
            let state = self.read_state()?;
            state
                .segments
                .values()
                .filter(|segment| segment.next_offset > state.log_start_offset)
                .map(|segment| segment.max_timestamp_ms)
                .max()
        };
        match max_timestamp_ms {
            Some(timestamp_ms) if timestamp_ms >= 0 => self.offset_for_timestamp(timestamp_ms),
            _ => Ok(None),
        }
    }

    /// The greatest leader epoch that wrote to the log, `None` if no batch carried one.
    pub fn latest_epoch(&self) -> Result<Option<i32>> {
        Ok(self.read_state()?.epochs.latest_epoch())
    }

    /// The leader epoch that wrote `offset` (Kafka's `epochForOffset`, ListOffsets' answer):
    /// the latest epoch that started at or before it; `None` for −1 or an offset before every
    /// known epoch (batches written before epochs were stamped).
    pub fn epoch_for_offset(&self, offset: i64) -> Result<Option<i32>> {
        Ok(self.read_state()?.epochs.epoch_for(offset))
    }

    /// The leader-epoch cache, oldest epoch first.
    pub fn epoch_entries(&self) -> Result<Vec<EpochEntry>> {
        Ok(self.read_state()?.epochs.entries().to_vec())
    }

    /// A copy of the leader-epoch cache, for a caller that applies its rules to a snapshot of
    /// the log (the replica state machine's view of it).
    pub fn epoch_cache(&self) -> Result<EpochCache> {
        Ok(self.read_state()?.epochs.clone())
    }

    /// Where `epoch` ended, as Kafka's `endOffsetFor` answers OffsetsForLeaderEpoch: for the
    /// latest epoch the log end offset; for an older one the greatest known epoch ≤ it and the
    /// start offset of the first epoch above it; for an epoch below every known one, that epoch
    /// and the first one's start; [`EpochEndOffset::UNDEFINED`] for −1 or an epoch above every
    /// known one.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> Result<EpochEndOffset> {
        let state = self.read_state()?;
        Ok(state.epochs.end_offset_for(epoch, state.log_end_offset()))
    }
}
