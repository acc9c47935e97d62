//! One partition's replica on this broker (docs/design/replication.md §1): the pure
//! `skiff_cluster::replica::Replica` behind a lock, the high watermark readers see, and the
//! acks=all produces waiting for it, and the ISR [`Proposal`]s its machine makes. Only
//! [`crate::partition::partition::Partition`] drives it (for the replication driver and fetcher,
//! Produce, Fetch and ListOffsets); others read its published high watermark and role.
//!
//! Owns: the lock order (a partition's replica lock before its producer lock; a leader's append
//! never holds both), the published high watermark, and the acks=all produces waiting for it.
//!
//! Must never: decide a role, an ISR or a high watermark itself (the pure machine does), hold
//! its lock across an await, or let a consumer read past the published high watermark.

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use skiff_cluster::records::PartitionState;
use skiff_cluster::replica::{
    Acks, Action, Epoch, LocalLog, Offset, Replica, ReplicaConfig, RoleView,
};
use skiff_placement::NodeId;
use skiff_protocol::error_code::ErrorCode;
use skiff_storage::{EpochCache, EpochEndOffset, Log};
use tokio::sync::{mpsc, oneshot};

/// The log as the pure machine reads it: its offsets when the view was taken, and its
/// leader-epoch cache copied from storage only when a decision needs it (follower fetches and
/// truncation, not appends). Epoch questions are answered by storage's rules
/// ([`skiff_storage::EpochCache`]) against the view's own log end, so one decision sees one log.
pub struct LogView<'a> {
    log: &'a Log,
    log_start_offset: Offset,
    log_end_offset: Offset,
    epochs: OnceCell<EpochCache>,
}

impl<'a> LogView<'a> {
    /// The log as it stands now.
    pub fn of(log: &'a Log) -> Result<Self, skiff_storage::Error> {
        Ok(Self {
            log,
            log_start_offset: log.log_start_offset()?,
            log_end_offset: log.log_end_offset()?,
            epochs: OnceCell::new(),
        })
    }

    fn epochs(&self) -> &EpochCache {
        // A read fails only on a poisoned lock (a panic elsewhere): no epochs then makes the
        // leader answer "diverging at the HW", which loses nothing acknowledged.
        self.epochs
            .get_or_init(|| self.log.epoch_cache().unwrap_or_default())
    }
}

impl LocalLog for LogView<'_> {
    fn log_end_offset(&self) -> Offset {
        self.log_end_offset
    }

    fn log_start_offset(&self) -> Offset {
        self.log_start_offset
    }

    fn latest_epoch(&self) -> Option<Epoch> {
        self.epochs().latest_epoch()
    }

    fn latest_epoch_start(&self) -> Option<Offset> {
        self.epochs()
            .entries()
            .last()
            .map(|entry| entry.start_offset)
    }

    fn end_offset_for(&self, epoch: Epoch) -> Option<(Epoch, Offset)> {
        let answer = self.epochs().end_offset_for(epoch, self.log_end_offset);
        (answer != EpochEndOffset::UNDEFINED).then_some((answer.epoch, answer.end_offset))
    }
}

/// An acks=all produce waiting for the high watermark: resolves with its error (None: success).
pub type ReplicationWait = oneshot::Receiver<Option<ErrorCode>>;

/// What of an [`Action`] list is left for async code once the log actions are done: ISR
/// proposals for the driver (which owns the store calls).
#[derive(Debug, Default)]
pub(super) struct Deferred {
    /// `(expected_revision, state)` compare-and-sets to submit.
    pub(super) proposals: Vec<(i64, PartitionState)>,
}

/// An ISR change a partition's machine proposed, for the replication driver to submit.
pub struct Proposal {
    /// The topic.
    pub topic: String,
    /// The partition index.
    pub index: i32,
    /// The replica, told when the store refused.
    replica: Arc<PartitionReplica>,
    /// The `mod_revision` the state was read at.
    pub expected_revision: i64,
    /// The state to write.
    pub state: PartitionState,
}

impl Proposal {
    /// `state` proposed by `replica`, partition `index` of `topic`, read at `expected_revision`.
    pub(super) fn new(
        topic: &str,
        index: i32,
        replica: &Arc<PartitionReplica>,
        expected_revision: i64,
        state: PartitionState,
    ) -> Self {
        Self {
            topic: topic.to_owned(),
            index,
            replica: replica.clone(),
            expected_revision,
            state,
        }
    }

    /// The store did not take the change (a stale revision, an ambiguous error, an ineligible
    /// replica, or the driver stopped): the machine stops waiting for it and proposes again at
    /// its next poll if still needed.
    pub fn refused(&self) {
        lock(&self.replica.machine).on_isr_proposal_failed();
    }
}

/// Where a partition hands the ISR changes its machine proposed: the replication driver's queue
/// (the request path: a produce, a follower's fetch), or a list the driver submits itself right
/// after its own pass (its timer, a state feed).
pub trait ProposalSink {
    /// Takes one proposal.
    fn put(&mut self, proposal: Proposal);
}

impl ProposalSink for &ProposalSender {
    fn put(&mut self, proposal: Proposal) {
        if let Err(unsent) = self.send(proposal) {
            // The driver stopped (shutdown): the machine must not wait for an answer.
            unsent.0.refused();
        }
    }
}

impl ProposalSink for &mut Vec<Proposal> {
    fn put(&mut self, proposal: Proposal) {
        self.push(proposal);
    }
}

/// Where the request path (a follower's Fetch at its leader, a produce) hands ISR proposals to
/// the replication driver. Unbounded in type, bounded in use: a machine keeps at most one ISR
/// change in flight, so the queue never holds more than one entry per led partition.
pub type ProposalSender = mpsc::UnboundedSender<Proposal>;

/// The receiving end, for the driver.
pub type ProposalReceiver = mpsc::UnboundedReceiver<Proposal>;

/// A channel for the driver.
pub fn proposal_channel() -> (ProposalSender, ProposalReceiver) {
    mpsc::unbounded_channel()
}

/// [`PartitionReplica::led_epoch`]'s stored value while the machine does not lead.
const NOT_LEADING: i64 = -1;

/// One partition's replica on this broker.
pub struct PartitionReplica {
    machine: Mutex<Replica>,
    /// The machine's HW, published for readers that must not take the lock (Fetch, ListOffsets).
    high_watermark: AtomicI64,
    /// `mod_revision` of the partition state last fed in (0: none yet).
    fed_revision: AtomicI64,
    /// The leader epoch the machine leads at, [`NOT_LEADING`] while it does not: published after
    /// every state fed in and every log error, for the handlers' leadership check (the image can
    /// name this broker leader before its machine has applied that state).
    led_epoch: AtomicI64,
    waiting: Mutex<BTreeMap<u64, oneshot::Sender<Option<ErrorCode>>>>,
    next_wait_id: AtomicU64,
}

/// Locks `mutex`, recovering the data of a poisoned one: every critical section here leaves the
/// replica consistent between calls into the pure machine, which does not panic on input.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl PartitionReplica {
    /// A replica of broker `me` that has seen no partition state; `high_watermark` is the
    /// checkpointed one (or the log start without a checkpoint).
    pub fn new(me: NodeId, config: ReplicaConfig, high_watermark: Offset) -> Self {
        Self {
            machine: Mutex::new(Replica::new(me, config, high_watermark)),
            high_watermark: AtomicI64::new(high_watermark),
            fed_revision: AtomicI64::new(0),
            led_epoch: AtomicI64::new(NOT_LEADING),
            waiting: Mutex::new(BTreeMap::new()),
            next_wait_id: AtomicU64::new(1),
        }
    }

    /// The high watermark consumers read below.
    pub fn high_watermark(&self) -> Offset {
        self.high_watermark.load(Ordering::Acquire)
    }

    /// Recovers the partition's log with this replica's machine locked: `recover` recovers the
    /// log and what is rebuilt from it, and returns the checkpointed HW, which is restored
    /// (see [`Replica::restore_high_watermark`]) and published if it rose before anyone can
    /// feed the machine a state or apply a fetch to it.
    ///
    /// The machine's lock is taken first, as the fetcher takes it (machine, then the log and the
    /// producers): recovery once took the producers' lock first and the machine's last, and a
    /// follower's first fetch, applied as soon as the log itself was recovered, deadlocked with
    /// it (the fetcher holding the machine and waiting for the producers).
    pub(super) fn recover_with<E>(
        &self,
        recover: impl FnOnce() -> Result<Offset, E>,
    ) -> Result<(), E> {
        let mut machine = lock(&self.machine);
        let checkpointed = recover()?;
        if let Some(offset) = machine.restore_high_watermark(checkpointed) {
            self.high_watermark.store(offset, Ordering::Release);
        }
        Ok(())
    }

    /// Applies changed settings (an altered `min.insync.replicas`) from the next decision on.
    pub(super) fn set_config(&self, config: ReplicaConfig) {
        lock(&self.machine).set_config(config);
    }

    /// The role the machine is in.
    pub fn role(&self) -> RoleView {
        lock(&self.machine).role()
    }

    /// The machine, locked (for [`super::partition::Partition`], which applies log actions under
    /// it, as the machine requires before its next call; nothing outside `partition` drives it).
    pub(super) fn machine(&self) -> MutexGuard<'_, Replica> {
        lock(&self.machine)
    }

    /// `mod_revision` of the partition state last fed in.
    pub fn fed_revision(&self) -> i64 {
        self.fed_revision.load(Ordering::Acquire)
    }

    /// Records that the state at `revision` was fed in.
    pub(super) fn set_fed_revision(&self, revision: i64) {
        self.fed_revision.fetch_max(revision, Ordering::AcqRel);
    }

    /// The leader epoch the machine leads at, `None` while it does not lead.
    pub fn led_epoch(&self) -> Option<i32> {
        match self.led_epoch.load(Ordering::Acquire) {
            NOT_LEADING => None,
            epoch => i32::try_from(epoch).ok(),
        }
    }

    /// Publishes whether `machine` (this replica's, locked by the caller) leads, and at which
    /// epoch.
    pub(super) fn publish_led_epoch(&self, machine: &Replica) {
        let led = if machine.role() == RoleView::Leader {
            i64::from(machine.epoch())
        } else {
            NOT_LEADING
        };
        self.led_epoch.store(led, Ordering::Release);
    }

    /// Whether a produce may be appended, and the leader epoch to stamp: 6 when not the leader
    /// (yet, or any more), 19 for acks=all with too small an ISR.
    pub(super) fn admit_produce(&self, acks: Acks) -> Result<i32, ErrorCode> {
        lock(&self.machine).admit_produce(acks)
    }

    /// After a local append as leader: the HW may move (at once with no followers).
    pub(super) fn after_append(&self, now: u64, log: &Log) -> Deferred {
        let Ok(view) = LogView::of(log) else {
            return Deferred::default();
        };
        let actions = lock(&self.machine).poll_high_watermark(now, &view);
        self.settle(actions)
    }

    /// Parks an acks=all produce appended up to `last_offset` until the HW passes it, or until
    /// `deadline_ms` (REQUEST_TIMED_OUT).
    pub(super) fn await_replication(
        &self,
        now: u64,
        last_offset: Offset,
        deadline_ms: u64,
        log: &Log,
    ) -> (ReplicationWait, Deferred) {
        let (sender, receiver) = oneshot::channel();
        let id = self.next_wait_id.fetch_add(1, Ordering::Relaxed);
        lock(&self.waiting).insert(id, sender);
        let actions = match LogView::of(log) {
            Ok(view) => {
                lock(&self.machine).await_replication(now, id, last_offset, deadline_ms, &view)
            }
            Err(_) => vec![Action::CompleteProduce {
                id,
                error: Some(ErrorCode::KAFKA_STORAGE_ERROR),
            }],
        };
        (receiver, self.settle(actions))
    }

    /// Carries out the actions that need neither the log nor the store (HW publication, acks=all
    /// answers) and returns the ISR proposals. Log actions must have been applied by the caller
    /// under the machine lock; any left here are a driver bug, refused loudly in debug builds.
    pub(super) fn settle(&self, actions: Vec<Action>) -> Deferred {
        let mut deferred = Deferred::default();
        for action in actions {
            match action {
                Action::HighWatermark(offset) => {
                    self.high_watermark.store(offset, Ordering::Release);
                }
                Action::CompleteProduce { id, error } => {
                    if let Some(sender) = lock(&self.waiting).remove(&id) {
                        // The produce may have gone (its connection closed): nothing to answer.
                        let _ = sender.send(error);
                    }
                }
                Action::ProposeIsr {
                    expected_revision,
                    state,
                } => deferred.proposals.push((expected_revision, state)),
                other => {
                    debug_assert!(false, "log action {other:?} reached settle");
                    tracing::error!(action = ?other, "replica log action not carried out");
                }
            }
        }
        deferred
    }

    /// Answers every parked acks=all produce with `error` (the partition is going away).
    pub(super) fn abandon_waiting(&self, error: ErrorCode) {
        for (_, sender) in std::mem::take(&mut *lock(&self.waiting)) {
            let _ = sender.send(Some(error));
        }
    }

    /// Parked acks=all produces, for metrics and tests.
    pub fn waiting_count(&self) -> usize {
        lock(&self.waiting).len()
    }
}

/// The replica settings of a partition of a topic with `topic`'s configuration.
pub fn replica_config(
    config: &crate::config::Config,
    topic: &crate::partition::topic_config::TopicConfig,
) -> ReplicaConfig {
    ReplicaConfig {
        replica_lag_time_max_ms: config.replica_lag_time_max_ms,
        min_insync_replicas: usize::try_from(topic.min_insync_replicas).unwrap_or(1),
        replica_fetch_backoff_ms: config.replica_fetch_backoff_ms,
    }
}
