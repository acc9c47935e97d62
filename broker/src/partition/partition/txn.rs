//! The partition's side of transactions: end-transaction markers appended as leader (checked
//! and recorded under the producers' lock, acks=all), the last stable offset published beside
//! the high watermark, and the producers as DescribeProducers and KIP-890's shortcut read them.
//!
//! Must never: publish a last stable offset above the published high watermark or past an open
//! transaction's first offset, or take the machine's lock while holding the producers'.

use std::sync::atomic::Ordering;

use skiff_protocol::records::txn::{AbortedTxn, EndTxnMarker};

use super::{AppendError, Partition};
use skiff_storage::AppendInfo;

use crate::partition::producer_state::{CompletedTxn, DescribedProducer, PartitionProducers};
use crate::partition::replica::{ProposalSink, ReplicationWait};

/// One end-transaction marker to append as leader (from a WriteTxnMarkers request).
#[derive(Debug, Clone, Copy)]
pub struct MarkerAppend {
    /// The marker.
    pub marker: EndTxnMarker,
    /// The epoch [`Partition::admit_produce`] returned.
    pub leader_epoch: i32,
    /// Wall-clock milliseconds (the marker's timestamp).
    pub now_ms: i64,
    /// How long the wait for the high watermark may last before it answers REQUEST_TIMED_OUT.
    pub timeout_ms: u64,
}

/// What [`Partition::append_marker`] did.
pub struct MarkerAppended {
    /// The transaction the marker ended here.
    pub completed: CompletedTxn,
    /// Resolves with the append's error (None: replicated) once the high watermark passes the
    /// marker or the wait times out.
    pub replication: ReplicationWait,
}

impl Partition {
    /// The last stable offset read_committed consumers read below (published; no lock taken):
    /// the high watermark, or the first offset of the oldest transaction not yet stable if that
    /// is smaller. Advanced with the high watermark, waking the long polls parked here.
    pub fn last_stable_offset(&self) -> i64 {
        self.last_stable.load(Ordering::Acquire)
    }

    /// Recomputes the last stable offset against the published high watermark and publishes it.
    /// Takes the producers' lock (never called holding it).
    pub(super) fn refresh_last_stable(&self) {
        let mut producers = self.producers_recovered();
        let high_watermark = self.replica.high_watermark();
        let last_stable = producers.last_stable_offset(high_watermark);
        debug_assert!(last_stable <= high_watermark);
        self.last_stable.store(last_stable, Ordering::Release);
    }

    /// Appends an end-transaction marker as leader (Kafka's WriteTxnMarkers append): checked
    /// against the producer's state (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED),
    /// appended stamped with `leader_epoch`, the transaction ended; an ABORT writes its
    /// aborted-transaction index entry. Always acks=all: the returned wait resolves once the high
    /// watermark passes the marker (the transaction's records become stable then). Blocking.
    pub fn append_marker(
        &self,
        append: MarkerAppend,
        mut proposals: impl ProposalSink,
    ) -> Result<MarkerAppended, AppendError> {
        let mut batch = append.marker.encode_batch(append.now_ms)?;
        let mut producers = self
            .producers
            .lock()
            .map_err(|_| AppendError::ProducersPoisoned)?;
        producers.check_marker(&append.marker)?;
        let info = self
            .log
            .append_with_epoch(&mut batch, append.leader_epoch, append.now_ms)?;
        let completed = producers.record_marker(&append.marker, info.base_offset, append.now_ms);
        self.snapshot_at_roll(&producers, &info);
        if completed.aborted {
            // Storage holds a marker without its entry back from the recovery point, so a crash
            // between the two never leaves an ABORT a read_committed fetch cannot see.
            self.log
                .append_aborted_txn(aborted_entry(&producers, &completed))?;
        }
        drop(producers);
        self.readable_end.advance();
        let now = self.settle_after_append(&mut proposals);
        let replication =
            self.wait_for_replication(now, info.last_offset, append.timeout_ms, &mut proposals);
        Ok(MarkerAppended {
            completed,
            replication,
        })
    }

    /// A follower's fetched batches (appended, in order): each replayed into `producers`, and
    /// each ABORT marker's index entry written as the leader wrote it, so a new leader answers
    /// read_committed fetches with the same aborted transactions (storage also cuts a log back
    /// to a marker left without its entry at recovery).
    pub(super) fn replay_fetched(
        &self,
        producers: &mut PartitionProducers,
        batches: &[u8],
    ) -> Result<(), skiff_storage::Error> {
        for (position, header) in skiff_protocol::records::v2::batch_positions(batches).flatten() {
            let bytes = batches
                .get(position..position + header.total_bytes())
                .unwrap_or_default();
            match producers.replay(&header, bytes) {
                Some(completed) if completed.aborted => self
                    .log
                    .append_aborted_txn(aborted_entry(producers, &completed))?,
                _ => {}
            }
        }
        Ok(())
    }

    /// When `info`'s append opened a new segment, writes the producers (`producers`, which
    /// include that append) as a snapshot at the offset after it, so a restart replays only
    /// what follows and still knows every open transaction. A failed write is logged: the
    /// previous snapshot and a longer replay still rebuild the same state.
    ///
    /// Not for a new log's first append when the log was created with its empty snapshot at
    /// offset 0 (`create_log` writes it): a restart replays from there already,
    /// and writing one here (a file, its fsync and its directory's) made the first append to
    /// each new partition cost about a millisecond of system time under the partition's lock
    /// (1,000 fresh partitions: 5 s of broker CPU per GB produced instead of 1).
    pub(super) fn snapshot_at_roll(&self, producers: &PartitionProducers, info: &AppendInfo) {
        if info.segment_base_offset != info.base_offset {
            return;
        }
        if info.base_offset == 0 && self.log.has_producer_snapshot(0).unwrap_or(false) {
            return;
        }
        let bytes = producers.encode_snapshot();
        if let Err(error) = self
            .log
            .write_producer_snapshot(info.last_offset + 1, &bytes)
        {
            tracing::warn!(topic = %self.log.topic(), partition = self.index, %error, "producer snapshot not written");
        }
    }

    /// Every producer this partition tracks, as DescribeProducers reports them.
    pub fn describe_producers(&self) -> Vec<DescribedProducer> {
        self.producers_recovered().describe()
    }

    /// The epoch and open transaction's first offset of a producer here, if it has one open
    /// (KIP-890: such a producer's batches at that epoch need no verification).
    pub fn open_transaction(&self, producer_id: i64) -> Option<(i16, i64)> {
        self.producers_recovered().open_transaction(producer_id)
    }
}

/// The aborted-transaction index entry of `completed`, with the last stable offset right after
/// its marker (Kafka's `lastStableOffset(completedTxn)`), from `producers` as they stand once the
/// marker is recorded.
fn aborted_entry(producers: &PartitionProducers, completed: &CompletedTxn) -> AbortedTxn {
    AbortedTxn {
        producer_id: completed.producer_id,
        first_offset: completed.first_offset,
        last_offset: completed.last_offset,
        last_stable_offset: producers.stable_offset_after(completed),
    }
}
