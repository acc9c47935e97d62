//! One partition on this broker and everything done to it (Kafka's `Partition`): its log, its
//! idempotent producers, its replica machine, the signal that wakes the fetches parked on it and
//! its traffic counters, all private. Every write finishes here the way Kafka's
//! `appendRecordsToLeader` and `updateFollowerFetchState` do: the replica machine is locked and
//! driven, what it decided is settled (the high watermark published, acks=all produces
//! answered), the readable end advanced when the high watermark rose (waking the long polls
//! parked here) and the ISR changes it proposed queued for the replication driver. Callers never
//! see the machine, the high-watermark comparison or the wake-up. The last stable offset
//! (read_committed consumers read below it) joins the high watermark the same way: recomputed
//! from the producers' open transactions whenever the high watermark rises or the producers are
//! rebuilt, published without a lock ([`Partition::last_stable_offset`]); end-transaction markers
//! are appended through [`Partition::append_marker`] (the `txn` submodule).
//!
//! The writes: [`Partition::append_as_leader`] (a client's produce or a coordinator's entries),
//! [`Partition::answer_follower_fetch`] (the leader side of a follower's Fetch),
//! [`Partition::poll_as_leader`] (the leader's timers: ISR shrink, acks=all deadlines), the
//! follower side the fetcher drives ([`Partition::poll_as_follower`],
//! [`Partition::apply_fetch_result`], [`Partition::fetch_lost`]), a partition state from the
//! store ([`Partition::apply_state`]) and an ISR proposal's outcome
//! ([`crate::partition::replica::Proposal::refused`]). The reads (the high watermark, the role,
//! metrics' [`Partition::replication_status`], ListOffsets'
//! [`Partition::high_watermark_lags_epoch_start`]) take the machine's lock only where the
//! published high watermark does not answer.
//!
//! **The partition-writer seam** (Kafka's `PartitionWriter`): a coordinator that keeps its state
//! in a partition's log (the group coordinator today, the transaction coordinator next) writes
//! through the same two methods a Produce does, [`Partition::admit_produce`] then
//! [`Partition::append_as_leader`] with [`AppendOrigin::Coordinator`] (no producer checks; synced
//! before it counts), and waits on the [`ReplicationWait`] it returns; it reads back with
//! [`Partition::log`] and [`Partition::high_watermark`]. Nothing else of the partition is its
//! to touch.
//!
//! Must never: hand out its replica machine, let a consumer read past the published high
//! watermark, hold a lock across an await, or take the machine's lock while holding the
//! producers' (the order is the machine's, then the producers'; a leader's append holds only
//! the producers').

use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex, MutexGuard};

use skiff_cluster::records::PartitionState;
use skiff_cluster::replica::{
    Acks, Action, FetchAnswer, FetchResult, FollowerFetch, LeaderStatus, ReplicaConfig, RoleView,
};
use skiff_placement::NodeId;
use skiff_protocol::error_code::ErrorCode;
use skiff_protocol::records::v2;
use skiff_storage::{AppendInfo, Log, LogConfig};

use super::producer_state::{
    PartitionProducers, ProducerBatch, ProducerError, SequenceCheck, NO_PRODUCER_ID,
    PRODUCERS_PER_PARTITION_MAX_DEFAULT,
};
use super::readable_end::{ReadableEnd, Waiter};
use super::replica::{
    Deferred, LogView, PartitionReplica, Proposal, ProposalSink, ReplicationWait,
};
use crate::metrics::traffic::TrafficCounters;

/// Offsets at the end of a partition scanned at open to rebuild its idempotent-producer state.
/// A producer whose last batches lie further back is forgotten: its next batch gets
/// UNKNOWN_PRODUCER_ID and the client re-initialises (what Kafka does once producer state expires).
/// Bounds start-up time by this many records per partition instead of the whole log.
pub const PRODUCER_REPLAY_OFFSETS_MAX: i64 = 100_000;
/// Bytes read at a time when a log is scanned at open (a larger batch is still read whole; it is
/// bounded by the log's `batch_bytes_max`).
pub const LOG_SCAN_READ_BYTES: u64 = 1024 * 1024;

/// One partition of a topic on this node.
pub struct Partition {
    index: i32,
    log: Arc<Log>,
    /// The idempotent producers appending here. Its lock is held across check, append and record
    /// so a retried batch is never appended twice.
    producers: Mutex<PartitionProducers>,
    /// Advanced after every append, every high-watermark rise and at deletion: wakes the fetches
    /// long-polling here.
    readable_end: ReadableEnd,
    /// This broker's replica of the partition: its role, the high watermark consumers read
    /// below, acks=all produces waiting for it. Shared with the ISR proposals in flight.
    replica: Arc<PartitionReplica>,
    /// Bytes and records in and out since this partition was opened here, for the load report.
    traffic: TrafficCounters,
    /// The last stable offset read_committed consumers read below (published like the high
    /// watermark, recomputed under the producers' lock whenever the high watermark rises or the
    /// producer state is rebuilt; see [`Partition::last_stable_offset`]).
    last_stable: AtomicI64,
}

/// Who appends as leader, which decides the checks and the durability (Kafka's `AppendOrigin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOrigin {
    /// A client's Produce: idempotent batches pass the sequence checks under the producers' lock,
    /// and a retry of a batch already in the log is answered with its first append's offsets
    /// instead of being appended again.
    Client,
    /// A coordinator's own entries (its state log): no producer checks, and the log is synced
    /// (an fsync whatever the topic's flush settings) before the append counts.
    Coordinator,
}

/// One append as leader.
pub struct LeaderAppend<'a> {
    /// The v2 batches, one log write per buffer (a Produce sends one buffer per partition; a
    /// coordinator's entries may take several). Stamped in place with the leader epoch.
    pub batches: &'a mut [Vec<u8>],
    /// Who appends.
    pub origin: AppendOrigin,
    /// The epoch [`Partition::admit_produce`] returned.
    pub leader_epoch: i32,
    /// Wall-clock milliseconds (log-append time, segment roll).
    pub now_ms: i64,
    /// acks=all: the append comes with a wait for the high watermark to pass it.
    pub acks: Acks,
    /// How long that wait may last before it answers REQUEST_TIMED_OUT.
    pub timeout_ms: u64,
}

/// What [`Partition::append_as_leader`] did.
pub struct LeaderAppended {
    /// The first offset of the append (of the original append, for a retry).
    pub base_offset: i64,
    /// Its last offset; an acks=all wait completes once the high watermark passes it.
    pub last_offset: i64,
    /// The log start offset after the append (-1 when a retry could not read it).
    pub log_start_offset: i64,
    /// False for a retried batch answered with its first append's offsets: nothing was stored.
    pub stored: bool,
    /// Bytes appended (0 for a retry).
    pub bytes: u64,
    /// acks=all: resolves with the append's error (None: replicated) when the high watermark
    /// passes `last_offset` or the wait times out.
    pub replication: Option<ReplicationWait>,
}

/// Why an append as leader stored nothing.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    /// An idempotent batch failed the sequence checks.
    #[error("idempotent batch refused: {0}")]
    Producer(#[from] ProducerError),
    /// A retried batch came with new ones: it cannot be half appended (clients send one batch
    /// per partition).
    #[error("a retried batch came with new batches")]
    RetryWithNewBatches,
    /// The producer state is unusable (a panic while its lock was held).
    #[error("producer state unavailable")]
    ProducersPoisoned,
    /// The log refused or failed the write (or its sync).
    #[error("storage: {0}")]
    Storage(#[from] skiff_storage::Error),
    /// An end-transaction marker could not be encoded.
    #[error("marker: {0}")]
    Marker(#[from] skiff_protocol::records::RecordError),
}

/// What the replica's metrics read of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicationStatus {
    /// Offline after a log error.
    Offline,
    /// Led here, with its figures.
    Led(LeaderStatus),
    /// Followed, not a replica, or its log unreadable.
    Other,
}

impl Partition {
    /// Partition `index` over `log`, with the producer state rebuilt from it and its replica.
    pub(crate) fn new(
        index: i32,
        log: Arc<Log>,
        producers: PartitionProducers,
        replica: PartitionReplica,
    ) -> Self {
        let mut producers = producers;
        let last_stable = producers.last_stable_offset(replica.high_watermark());
        Self {
            index,
            log,
            producers: Mutex::new(producers),
            readable_end: ReadableEnd::default(),
            replica: Arc::new(replica),
            traffic: TrafficCounters::default(),
            last_stable: AtomicI64::new(last_stable),
        }
    }

    /// The partition index.
    pub fn index(&self) -> i32 {
        self.index
    }

    /// The log, for reads and for the maintenance that is the log's own (roll, retention,
    /// flush, DeleteRecords). Appends go through this partition's methods.
    pub fn log(&self) -> &Arc<Log> {
        &self.log
    }

    /// Bytes and records in and out since the partition was opened here.
    pub fn traffic(&self) -> &TrafficCounters {
        &self.traffic
    }

    /// The high watermark consumers read below (published; no lock taken).
    pub fn high_watermark(&self) -> i64 {
        self.replica.high_watermark()
    }

    /// The role the replica machine is in.
    pub fn role(&self) -> RoleView {
        self.replica.role()
    }

    /// `mod_revision` of the partition state last fed in (0: none yet).
    pub fn fed_revision(&self) -> i64 {
        self.replica.fed_revision()
    }

    /// The leader epoch this replica's machine leads at (`None` while it does not lead): the
    /// state that made it leader has been applied, its epoch start and HW are the leader's.
    pub fn led_epoch(&self) -> Option<i32> {
        self.replica.led_epoch()
    }

    /// Registers a fetch parked on this partition, enabled on return (register, then read, then
    /// wait): completes at the next append, high-watermark rise or deletion.
    pub fn waiter(&self) -> Waiter<'_> {
        self.readable_end.waiter()
    }

    /// As leader, whether the HW still lags the start of this leader's epoch (KIP-207: ListOffsets
    /// answers a consumer's "latest" with a retriable error meanwhile). `false` when not leading.
    pub fn high_watermark_lags_epoch_start(&self) -> bool {
        self.replica.machine().high_watermark_lags_epoch_start()
    }

    /// The replica's state for metrics, read under its lock against the log as it stands.
    pub fn replication_status(&self) -> ReplicationStatus {
        let machine = self.replica.machine();
        if machine.role() == RoleView::Offline {
            return ReplicationStatus::Offline;
        }
        let Ok(view) = LogView::of(&self.log) else {
            return ReplicationStatus::Other;
        };
        let log_end = skiff_cluster::replica::LocalLog::log_end_offset(&view);
        machine
            .leader_status(log_end)
            .map_or(ReplicationStatus::Other, ReplicationStatus::Led)
    }

    /// Whether a produce may be appended, and the leader epoch to stamp: NOT_LEADER_OR_FOLLOWER
    /// when not the leader (yet, or any more), NOT_ENOUGH_REPLICAS for acks=all with too small
    /// an ISR.
    pub fn admit_produce(&self, acks: Acks) -> Result<i32, ErrorCode> {
        self.replica.admit_produce(acks)
    }

    /// Appends as leader (Kafka's `appendRecordsToLeader`), then raises the high watermark if it
    /// may (at once without followers), wakes the fetches parked here and queues the ISR
    /// proposals; for acks=all, returns the wait for the high watermark to pass the append.
    /// Blocking: a roll or an fsync may happen inside.
    pub fn append_as_leader(
        &self,
        append: LeaderAppend<'_>,
        mut proposals: impl ProposalSink,
    ) -> Result<LeaderAppended, AppendError> {
        let mut appended = match append.origin {
            AppendOrigin::Client => {
                self.append_client(append.batches, append.leader_epoch, append.now_ms)?
            }
            AppendOrigin::Coordinator => {
                self.append_coordinator(append.batches, append.leader_epoch, append.now_ms)?
            }
        };
        let now = self.settle_after_append(&mut proposals);
        if append.acks == Acks::All {
            appended.replication = Some(self.wait_for_replication(
                now,
                appended.last_offset,
                append.timeout_ms,
                &mut proposals,
            ));
        }
        Ok(appended)
    }

    /// After an append as leader: raises the high watermark if it may, wakes the fetches parked
    /// here and queues the ISR proposals. Returns the monotonic time it did so.
    fn settle_after_append(&self, proposals: &mut impl ProposalSink) -> u64 {
        let now = crate::clock::mono_ms();
        let hw_before = self.replica.high_watermark();
        let deferred = self.replica.after_append(now, &self.log);
        let rose = self.replica.high_watermark() > hw_before;
        self.publish(deferred, rose, proposals);
        now
    }

    /// The acks=all wait for the high watermark to pass `last_offset`, answered with
    /// REQUEST_TIMED_OUT `timeout_ms` after `now`.
    fn wait_for_replication(
        &self,
        now: u64,
        last_offset: i64,
        timeout_ms: u64,
        proposals: &mut impl ProposalSink,
    ) -> ReplicationWait {
        let deadline = now.saturating_add(timeout_ms);
        let (wait, deferred) =
            self.replica
                .await_replication(now, last_offset, deadline, &self.log);
        self.queue(deferred, proposals);
        wait
    }

    /// A client's batches: the idempotence checks, the append and the producers' new state, all
    /// under the producers' lock.
    fn append_client(
        &self,
        batches: &mut [Vec<u8>],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<LeaderAppended, AppendError> {
        let idempotent: Vec<ProducerBatch> = batches
            .iter()
            .flat_map(|buffer| v2::batch_positions(buffer).flatten())
            .map(|(_, header)| (ProducerBatch::from(&header), header))
            .filter(|(batch, header)| batch.producer_id != NO_PRODUCER_ID && !header.is_control())
            .map(|(batch, _)| batch)
            .collect();
        // Held across check, append and record; never across an await.
        let mut producers = self
            .producers
            .lock()
            .map_err(|_| AppendError::ProducersPoisoned)?;
        let mut duplicate_of = None;
        for batch in &idempotent {
            match producers.check(batch) {
                Ok(SequenceCheck::Append) => {}
                Ok(SequenceCheck::Duplicate { base_offset, .. }) => {
                    duplicate_of.get_or_insert(base_offset);
                }
                Err(error) => {
                    tracing::debug!(%error, "idempotent batch refused");
                    return Err(error.into());
                }
            }
        }
        if let Some(base_offset) = duplicate_of {
            if idempotent.len() != 1 {
                return Err(AppendError::RetryWithNewBatches);
            }
            // A retry waits (acks=all) for the batch it repeats: its last offset is the original's.
            let offsets: i64 = batches.iter().map(|buffer| batches_offsets(buffer)).sum();
            return Ok(LeaderAppended {
                base_offset,
                last_offset: base_offset + offsets - 1,
                log_start_offset: self.log.log_start_offset().unwrap_or(-1),
                stored: false,
                bytes: 0,
                replication: None,
            });
        }
        let appended = self.write_batches(batches, leader_epoch, now_ms, |buffer, info| {
            let mut base_offset = info.base_offset;
            for (_, header) in v2::batch_positions(buffer).flatten() {
                let batch = ProducerBatch::from(&header);
                if batch.producer_id != NO_PRODUCER_ID && !header.is_control() {
                    producers.record_append(&batch, base_offset);
                }
                base_offset += i64::from(header.last_offset_delta) + 1;
            }
            self.snapshot_at_roll(&producers, info);
        })?;
        drop(producers);
        self.readable_end.advance();
        Ok(appended)
    }

    /// A coordinator's entries: appended and synced; the append ends at the log end after the
    /// sync.
    fn append_coordinator(
        &self,
        batches: &mut [Vec<u8>],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<LeaderAppended, AppendError> {
        // No checks, but the producers are recorded as replay records them (a transactional
        // offset commit opens its producer's transaction here too), so a follower that becomes
        // leader has the same state.
        let mut producers = self
            .producers
            .lock()
            .map_err(|_| AppendError::ProducersPoisoned)?;
        let mut appended = self.write_batches(batches, leader_epoch, now_ms, |buffer, info| {
            replay_batches_at(&mut producers, buffer, info.base_offset);
            self.snapshot_at_roll(&producers, info);
        })?;
        drop(producers);
        self.log.sync()?;
        self.readable_end.advance();
        appended.last_offset = self.log.log_end_offset()? - 1;
        Ok(appended)
    }

    /// Appends each buffer stamped with `leader_epoch`, telling `appended` each one's bytes and
    /// where they went.
    fn write_batches(
        &self,
        batches: &mut [Vec<u8>],
        leader_epoch: i32,
        now_ms: i64,
        mut appended: impl FnMut(&[u8], &AppendInfo),
    ) -> Result<LeaderAppended, AppendError> {
        let mut written = LeaderAppended {
            base_offset: -1,
            last_offset: -1,
            log_start_offset: -1,
            stored: true,
            bytes: 0,
            replication: None,
        };
        for (position, buffer) in batches.iter_mut().enumerate() {
            let info = self.log.append_with_epoch(buffer, leader_epoch, now_ms)?;
            appended(buffer, &info);
            if position == 0 {
                written.base_offset = info.base_offset;
            }
            written.last_offset = info.last_offset;
            written.log_start_offset = info.log_start_offset;
            written.bytes += buffer.len() as u64;
        }
        Ok(written)
    }

    /// The leader side of a follower's Fetch (Kafka's `updateFollowerFetchState`): the machine
    /// records the follower's progress and answers (records up to the log end, or where the
    /// follower's log diverges); the high watermark rises if it may, the fetches parked here are
    /// woken, acks=all produces it passed are answered and ISR expansions queued.
    pub fn answer_follower_fetch(
        &self,
        now: u64,
        fetch: FollowerFetch,
        mut proposals: impl ProposalSink,
    ) -> Result<FetchAnswer, skiff_storage::Error> {
        let view = LogView::of(&self.log)?;
        let (answer, actions, rose) = {
            let mut machine = self.replica.machine();
            let before = machine.high_watermark();
            let (answer, actions) = machine.on_follower_fetch(now, fetch, &view);
            tracing::debug!(topic = %self.log.topic(), partition = self.index, ?fetch, ?answer, ?actions, isr = ?machine.isr(), "follower fetch answered");
            (answer, actions, machine.high_watermark() > before)
        };
        let deferred = self.replica.settle(actions);
        self.publish(deferred, rose, &mut proposals);
        Ok(answer)
    }

    /// The leader's timers (ISR shrink, acks=all deadlines, a high watermark that may move):
    /// polled by the replication driver; nothing when not leading.
    pub fn poll_as_leader(&self, now: u64, mut proposals: impl ProposalSink) {
        let mut machine = self.replica.machine();
        if machine.role() != RoleView::Leader {
            return;
        }
        let Ok(view) = LogView::of(&self.log) else {
            return;
        };
        let before = machine.high_watermark();
        let actions = machine.poll(now, &view);
        let rose = machine.high_watermark() > before;
        drop(machine);
        let deferred = self.replica.settle(actions);
        self.publish(deferred, rose, &mut proposals);
    }

    /// After a settle: wakes the fetches parked here if the high watermark `rose` (consumers may
    /// read further), and queues the ISR proposals.
    fn publish(&self, deferred: Deferred, rose: bool, proposals: &mut impl ProposalSink) {
        if rose {
            self.refresh_last_stable();
            self.readable_end.advance();
        }
        self.queue(deferred, proposals);
    }

    /// Hands the ISR proposals the machine made to `proposals`.
    fn queue(&self, deferred: Deferred, proposals: &mut impl ProposalSink) {
        for (expected_revision, state) in deferred.proposals {
            proposals.put(Proposal::new(
                self.log.topic(),
                self.index,
                &self.replica,
                expected_revision,
                state,
            ));
        }
    }

    /// As a follower of `leader`: polls the machine and hands `send` each fetch it wants sent to
    /// `leader`. A fetch it wants sent elsewhere (the partition moved since the fetcher was
    /// assigned it) is not sent, and the machine is told so.
    pub fn poll_as_follower(&self, now: u64, leader: NodeId, mut send: impl FnMut(FollowerFetch)) {
        let actions = {
            let mut machine = self.replica.machine();
            let Ok(view) = LogView::of(&self.log) else {
                return;
            };
            machine.poll(now, &view)
        };
        for action in actions {
            match action {
                Action::SendFetch { leader: to, fetch } if to == leader => send(fetch),
                Action::SendFetch { leader: to, fetch } => self.fetch_lost(now, to, &fetch),
                other => {
                    let _ = self.replica.settle(vec![other]);
                }
            }
        }
    }

    /// Tells the machine its fetch from `leader` got no answer.
    pub fn fetch_lost(&self, now: u64, leader: NodeId, fetch: &FollowerFetch) {
        let mut machine = self.replica.machine();
        let Ok(view) = LogView::of(&self.log) else {
            return;
        };
        let actions = machine.on_fetch_result(
            now,
            leader,
            fetch.current_leader_epoch,
            &FetchResult::Lost,
            &view,
        );
        drop(machine);
        let _ = self.replica.settle(actions);
    }

    /// As a follower: feeds the leader's answer to `fetch` to the machine and carries out the
    /// appends (of `records`, unchanged), truncations and resets it decides, under its lock. A
    /// log write that fails takes the replica offline. Blocking.
    pub fn apply_fetch_result(
        &self,
        (now, now_ms): (u64, i64),
        leader: NodeId,
        fetch: &FollowerFetch,
        result: &FetchResult,
        records: &[u8],
    ) {
        let mut machine = self.replica.machine();
        let Ok(view) = LogView::of(&self.log) else {
            let actions = machine.on_log_error();
            self.replica.publish_led_epoch(&machine);
            drop(machine);
            let _ = self.replica.settle(actions);
            return;
        };
        let actions =
            machine.on_fetch_result(now, leader, fetch.current_leader_epoch, result, &view);
        tracing::debug!(
            topic = %self.log.topic(),
            partition = self.index,
            leader,
            ?fetch,
            result = %summary(result),
            ?actions,
            "replica fetch answered"
        );
        let mut rest = Vec::with_capacity(actions.len());
        for action in actions {
            let outcome = match action {
                Action::AppendFetched { up_to } => self.append_fetched(records, up_to, now_ms),
                Action::TruncateTo { offset } => self.truncate(offset),
                Action::ResetTo { offset } => self.reset(offset),
                other => {
                    rest.push(other);
                    Ok(())
                }
            };
            if let Err(error) = outcome {
                tracing::error!(topic = %self.log.topic(), partition = self.index, %error, "replica log write failed; the replica goes offline");
                rest.extend(machine.on_log_error());
                // The only role change a fetch result can make (a follower never leads by it).
                self.replica.publish_led_epoch(&machine);
                break;
            }
        }
        drop(machine);
        let _ = self.replica.settle(rest);
        // A follower's high watermark and producers moved: its last stable offset is ready for
        // the day it leads.
        self.refresh_last_stable();
    }

    /// Appends the fetched batches below `up_to` unchanged (the leader's offsets and epochs) and
    /// records their producers, so a new leader still deduplicates idempotent retries and knows
    /// the open transactions; an ABORT marker gets its index entry here as on the leader.
    fn append_fetched(
        &self,
        records: &[u8],
        up_to: i64,
        now_ms: i64,
    ) -> Result<(), skiff_storage::Error> {
        let mut end = 0usize;
        for (position, header) in v2::batch_positions(records).map_while(Result::ok) {
            if header.last_offset() >= up_to || position + header.total_bytes() > records.len() {
                break;
            }
            end = position + header.total_bytes();
        }
        // `end` is a batch end the loop checked against `records.len()`. Appended from the
        // fetched bytes as they are: storage only reads a follower's batches (it was a copy of
        // up to a whole fetch response, per partition and fetch).
        let batches = records.get(..end).unwrap_or_default();
        if batches.is_empty() {
            return Ok(());
        }
        // The leader's offsets and epochs are kept; storage refuses a batch that does not continue
        // the log or whose epoch is below the latest (a divergence the machine missed).
        let info = self.log.append_replicated(batches, now_ms)?;
        self.traffic.count_replicated(batches.len() as u64);
        let mut producers = self.producers_recovered();
        self.replay_fetched(&mut producers, batches)?;
        self.snapshot_at_roll(&producers, &info);
        Ok(())
    }

    /// Truncates the log to `offset` and rebuilds its producers from what remains.
    fn truncate(&self, offset: i64) -> Result<(), skiff_storage::Error> {
        self.log.truncate_to(offset)?;
        let rebuilt = replay_producers(&self.log)?;
        *self.producers_recovered() = rebuilt;
        Ok(())
    }

    /// Empties the log and starts it at `offset` (the leader's log start passed ours); no producer
    /// state survives an empty log.
    fn reset(&self, offset: i64) -> Result<(), skiff_storage::Error> {
        tracing::warn!(
            partition = self.index,
            offset,
            "replica log reset to the leader's log start"
        );
        self.log.truncate_fully_and_start_at(offset)?;
        *self.producers_recovered() = Default::default();
        Ok(())
    }

    /// The producers, locked, recovering a poisoned lock: a follower's writes replace or replay
    /// the state whole.
    fn producers_recovered(&self) -> MutexGuard<'_, PartitionProducers> {
        self.producers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Feeds the replica a partition state from the store (at `revision`) and carries out its log
    /// actions under the machine's lock: the one place a state reaches a replica (the replication
    /// driver's feed, which the materializer runs too). A log that cannot record the new epoch
    /// takes the replica offline. Records `revision` as fed and queues the ISR proposals.
    pub(crate) fn apply_state(
        &self,
        state: &PartitionState,
        revision: i64,
        mut proposals: impl ProposalSink,
    ) {
        let now = crate::clock::mono_ms();
        let mut machine = self.replica.machine();
        let Ok(view) = LogView::of(&self.log) else {
            let actions = machine.on_log_error();
            self.replica.publish_led_epoch(&machine);
            drop(machine);
            let deferred = self.replica.settle(actions);
            self.replica.set_fed_revision(revision);
            self.queue(deferred, &mut proposals);
            return;
        };
        let actions = machine.on_partition_state(now, state, revision, &view);
        let mut rest = Vec::with_capacity(actions.len());
        for action in actions {
            match action {
                Action::AssignEpoch { epoch, .. } => {
                    if let Err(error) = self.log.assign_epoch(epoch) {
                        tracing::error!(partition = self.index, %error, "leader epoch not recorded; the replica goes offline");
                        rest.extend(machine.on_log_error());
                    }
                }
                other => rest.push(other),
            }
        }
        let became_other = !matches!(machine.role(), RoleView::Leader);
        self.replica.publish_led_epoch(&machine);
        drop(machine);
        let deferred = self.replica.settle(rest);
        if became_other {
            // Produces parked while it led are answered by the machine on step-down; this
            // catches any that raced in between.
            self.replica
                .abandon_waiting(ErrorCode::NOT_LEADER_OR_FOLLOWER);
        }
        self.refresh_last_stable();
        self.readable_end.advance();
        self.replica.set_fed_revision(revision);
        self.queue(deferred, &mut proposals);
    }

    /// Applies changed topic settings: the log's from its next write, the replica's from its
    /// next decision.
    pub(crate) fn reconfigure(
        &self,
        storage: LogConfig,
        replica: ReplicaConfig,
    ) -> Result<(), skiff_storage::Error> {
        self.log.set_config(storage)?;
        self.replica.set_config(replica);
        Ok(())
    }

    /// The partition stops being served here: fetches parked on it re-read now, find it gone and
    /// answer, instead of holding it until their `max_wait_ms`.
    pub(crate) fn wake_parked_fetches(&self) {
        self.readable_end.advance();
    }

    /// Recovers the log (opened with recovery deferred) with the replica machine, then the
    /// producers, locked (the fetcher's order), so no append or fetch sees the log recovered
    /// before its producers are replayed and its checkpointed high watermark (`high_watermark`,
    /// read once the log answers) restored.
    pub(crate) fn recover(
        &self,
        recover: impl FnOnce() -> Result<(), skiff_storage::Error>,
        high_watermark: impl FnOnce(&Log) -> Result<i64, skiff_storage::Error>,
    ) -> Result<(), skiff_storage::Error> {
        self.replica.recover_with(|| {
            let mut producers = self
                .producers
                .lock()
                .map_err(|_| skiff_storage::Error::Poisoned)?;
            recover()?;
            *producers = replay_producers(&self.log)?;
            drop(producers);
            high_watermark(&self.log)
        })?;
        self.refresh_last_stable();
        Ok(())
    }

    /// Each idempotent producer of this partition with the last offset of its last batch: the
    /// batches the log cleaner keeps so deduplication survives a cleaning.
    pub fn live_producer_batches(&self) -> std::collections::BTreeMap<i64, i64> {
        self.producers_recovered().last_batch_ends()
    }

    /// The replica, for tests that drive its machine directly.
    #[cfg(test)]
    pub(crate) fn replica(&self) -> &PartitionReplica {
        &self.replica
    }

    /// The producers' lock, for tests of the lock order.
    #[cfg(test)]
    pub(crate) fn producers(&self) -> &Mutex<PartitionProducers> {
        &self.producers
    }

    /// A partition over `log` whose replica on broker 1 leads it alone (ISR {1}, epoch 0), as the
    /// single-node store makes it: for tests of code that appends as a leader.
    #[cfg(test)]
    pub(crate) fn led_alone(index: i32, log: Arc<Log>) -> Arc<Self> {
        let high_watermark = log.log_end_offset().expect("recovered log");
        let producers = replay_producers(&log).expect("producers");
        let replica = PartitionReplica::new(
            1,
            ReplicaConfig {
                min_insync_replicas: 1,
                ..ReplicaConfig::default()
            },
            high_watermark,
        );
        let partition = Arc::new(Self::new(index, log, producers, replica));
        let state = PartitionState {
            leader: 1,
            leader_epoch: 0,
            isr: vec![1],
            replicas: vec![1],
            writer: skiff_cluster::records::Writer::Creator,
        };
        let mut proposals = Vec::new();
        partition.apply_state(&state, 1, &mut proposals);
        assert!(proposals.is_empty());
        partition
    }
}

/// Offsets the batches of `batches` span.
fn batches_offsets(batches: &[u8]) -> i64 {
    v2::batch_positions(batches)
        .flatten()
        .map(|(_, header)| i64::from(header.last_offset_delta) + 1)
        .sum()
}

/// A fetch result in one short line (the batches counted, not listed).
fn summary(result: &FetchResult) -> String {
    match result {
        FetchResult::Records {
            batches,
            high_watermark,
        } => format!(
            "{} batches {:?}..{:?} hw {high_watermark}",
            batches.len(),
            batches.first().map(|b| b.base),
            batches.last().map(|b| b.last)
        ),
        other => format!("{other:?}"),
    }
}

/// Reads the whole batches stored from the batch holding `offset` on, at most about
/// [`LOG_SCAN_READ_BYTES`] (at least one batch). Returns the bytes and the offset after the last
/// complete batch in them.
pub fn read_batches(log: &Log, offset: i64) -> Result<(Vec<u8>, i64), skiff_storage::Error> {
    let slice = log.read(offset, LOG_SCAN_READ_BYTES, true)?;
    // The slice length is at most LOG_SCAN_READ_BYTES or one batch, which the log bounded.
    let len = usize::try_from(slice.len()).unwrap_or(0);
    let mut bytes = vec![0u8; len];
    let mut filled = 0;
    while let Some(unfilled) = bytes.get_mut(filled..).filter(|rest| !rest.is_empty()) {
        let read = slice.read_at(filled as u64, unfilled)?;
        if read == 0 {
            bytes.truncate(filled);
            break;
        }
        filled += read;
    }
    let mut next = offset;
    let mut complete = 0;
    for item in skiff_protocol::records::v2::batch_positions(&bytes) {
        let Ok((position, header)) = item else { break };
        next = header.base_offset + i64::from(header.last_offset_delta) + 1;
        complete = position + header.total_bytes();
    }
    bytes.truncate(complete);
    Ok((bytes, next))
}

/// Creates the log of a new partition with its producer state, empty, as a snapshot at offset 0:
/// said once with the log's creation, so that its first append need not write one on the produce
/// path (`Partition::snapshot_at_roll`) and a restart still replays it from its start.
pub(crate) fn create_log(
    log_dir: &skiff_storage::LogDir,
    topic: &str,
    index: i32,
    config: Option<skiff_storage::LogConfig>,
) -> Result<Arc<Log>, skiff_storage::Error> {
    let log = log_dir.create(topic, index, config)?;
    log.write_producer_snapshot(0, &PartitionProducers::default().encode_snapshot())?;
    Ok(log)
}

/// Rebuilds a partition's producer state: from the newest producer snapshot that reads back
/// (written at each segment roll) and the batches after it; without one (a log of the previous
/// release, or none written yet), from the batches of its last [`PRODUCER_REPLAY_OFFSETS_MAX`]
/// offsets.
pub(crate) fn replay_producers(log: &Log) -> Result<PartitionProducers, skiff_storage::Error> {
    let log_end = log.log_end_offset()?;
    let log_start = log.log_start_offset()?;
    let snapshot = log
        .latest_producer_snapshot()?
        .filter(|snapshot| snapshot.offset <= log_end)
        .and_then(|snapshot| {
            let decoded = PartitionProducers::decode_snapshot(
                &snapshot.bytes,
                PRODUCERS_PER_PARTITION_MAX_DEFAULT,
            );
            match decoded {
                Ok(producers) => Some((producers, snapshot.offset)),
                Err(error) => {
                    tracing::warn!(topic = %log.topic(), %error, "producer snapshot ignored; replaying");
                    None
                }
            }
        });
    let (mut producers, mut offset) = match snapshot {
        Some((producers, offset)) => (producers, offset.max(log_start)),
        None => (
            PartitionProducers::default(),
            log_start.max(log_end.saturating_sub(PRODUCER_REPLAY_OFFSETS_MAX)),
        ),
    };
    while offset < log_end {
        let (bytes, next) = read_batches(log, offset)?;
        replay_batches(&mut producers, &bytes);
        if next <= offset {
            break;
        }
        offset = next;
    }
    Ok(producers)
}

/// Replays every whole batch of `batches` (data batches and end-transaction markers) into
/// `producers`, oldest first, at the offsets their headers carry.
fn replay_batches(producers: &mut PartitionProducers, batches: &[u8]) {
    for (position, header) in v2::batch_positions(batches).flatten() {
        let bytes = batches
            .get(position..position + header.total_bytes())
            .unwrap_or_default();
        producers.replay(&header, bytes);
    }
}

/// As [`replay_batches`] for batches just appended from `base_offset` on (their buffer's own
/// base offsets are not the log's).
fn replay_batches_at(producers: &mut PartitionProducers, batches: &[u8], base_offset: i64) {
    let mut offset = base_offset;
    for (position, mut header) in v2::batch_positions(batches).flatten() {
        let bytes = batches
            .get(position..position + header.total_bytes())
            .unwrap_or_default();
        header.base_offset = offset;
        offset += i64::from(header.last_offset_delta) + 1;
        producers.replay(&header, bytes);
    }
}

#[cfg(test)]
pub(crate) mod tests;
pub mod txn;
#[cfg(test)]
mod txn_tests;
