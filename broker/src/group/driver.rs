//! The tokio edge of the group coordinator: one task owns the sans-IO [`Coordinator`], takes
//! requests from a bounded channel, reads the clock, sleeps until the coordinator's next deadline,
//! makes committed offsets durable in the internal offsets logs, and hands each reply back through
//! a oneshot channel. (Producer ids are the transaction coordinator's: `crate::txn::driver`.)
//!
//! Offsets logs: a group's commits go to the log of its `__consumer_offsets` partition
//! ([`Coordinator::offsets_partition`]), a partition of the internal topic the materializer opens
//! on the brokers that replicate it. The task follows this broker's leaderships of that topic
//! (the image, read after every materializer pass): a newly led partition's log is replayed into
//! [`Coordinator::load_partition`] on a blocking thread; a partition led elsewhere now is
//! unloaded by [`Coordinator::set_coordinated`]. A single-node data directory kept every group in
//! partition 0's log; `migrate_single_node_offsets` copies each group's latest offsets into its
//! own partition once, at the first start of this layout.
//!
//! Durability: an OffsetCommit is answered only after its records are appended to its
//! partition's log as its leader (stamped with the leader epoch, refused with NOT_COORDINATOR
//! when the replica does not lead), that log is flushed, and the high watermark has passed them:
//! every in-sync replica holds them (Kafka's acks=-1 for commits, with `min.insync.replicas` and
//! `offsets.commit.timeout.ms`). The wait for the HW runs beside the task, so other groups are
//! served meanwhile; the coordinator orders late answers by their persist sequence. The logs are
//! compacted by the log cleaner like any `compact` topic (`crate::ops::cleaner`), so a replay stays
//! short and the disk bounded.
//!
//! Fencing: nothing is led while this broker's session is not provably alive (a broker cut off
//! from the metadata store may already have been replaced, and must not answer from what it
//! loaded), and a partition led again at another leader epoch than the one it was loaded at is
//! loaded again from its log.
//!
//! Transactions: a TxnOffsetCommit's records are appended the same way, as transactional batches
//! of its producer; a replay hands the coordinator transactional records and end-transaction
//! markers in log order; and [`GroupHandle::complete_transaction`] is how WriteTxnMarkers reports
//! a replicated marker in a `__consumer_offsets` partition.
//!
//! Must never: decide group semantics (that is the coordinator's), acknowledge a commit before
//! the flush returned and the HW passed it, write a group's commits to another partition's log
//! or to one it does not lead, or queue requests without a bound.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, HeartbeatRequest, JoinGroupRequest,
    LeaveGroupRequest, ListGroupsRequest, OffsetCommitRequest, OffsetDeleteRequest,
    OffsetFetchRequest, RequestHeader, SyncGroupRequest, TxnOffsetCommitRequest,
};
use skiff_storage::{DurableFiles, Log};
use tokio::sync::{mpsc, oneshot};

use crate::clock::now_ms;
use crate::partition::partition::{AppendError, AppendOrigin, LeaderAppend};
use crate::partition::replica::{ProposalSender, ReplicationWait};
use crate::partition::topics::{read_batches, Partition, Topics};
use skiff_cluster::replica::Acks;
use skiff_group::consumer::{
    AssignorKind, ConsumerGroupConfig, ConsumerRecord,
    HeartbeatRequest as ConsumerHeartbeatRequest, MigrationPolicy, TopicId, TopicImage,
};
use skiff_group::offsets_log::{self, OffsetKey, OffsetLogEntry, OffsetValue};
use skiff_group::{
    ConsumerWriteId, Coordinator, GroupConfig, GroupKeys, Output, PersistError, Replayed,
    RequestId, RequestMeta, Response, TxnCompletion, TxnProducer,
};
use skiff_protocol::error_code::ErrorCode;
use skiff_protocol::records::txn::MarkerType;

/// The internal topic name of the offsets log (Kafka's name, so operators recognise it).
pub const OFFSETS_TOPIC: &str = skiff_cluster::topics::OFFSETS_TOPIC;
/// The partition whose log held every group's offsets in a single-node data directory.
pub const SINGLE_NODE_OFFSETS_PARTITION: i32 = 0;
/// File under `log.dirs` recording that the offsets are kept per `__consumer_offsets` partition
/// (written once the single-node log was migrated, or at the first start without one).
pub const OFFSETS_LAYOUT_FILE: &str = "offsets-partitioned";
/// Pause before a partition whose log could not be replayed is tried again.
const LOAD_RETRY_MS: i64 = 5_000;
/// Group requests waiting for the coordinator task. Every connection has one
/// request in flight, so this only decides when a flood of connections starts to wait.
pub const GROUP_REQUESTS_QUEUED_MAX: usize = 1024;

/// Why the group task could not start.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum GroupDriverError {
    /// The offsets log could not be opened or read.
    #[error("offsets log: {0}")]
    OffsetsLog(String),
}

/// A request the coordinator task answers.
#[derive(Debug)]
pub(crate) enum GroupRequest {
    JoinGroup(JoinGroupRequest),
    SyncGroup(SyncGroupRequest),
    Heartbeat(HeartbeatRequest),
    LeaveGroup(LeaveGroupRequest),
    OffsetCommit(OffsetCommitRequest),
    OffsetFetch(OffsetFetchRequest),
    DescribeGroups(DescribeGroupsRequest),
    ListGroups(ListGroupsRequest),
    DeleteGroups(DeleteGroupsRequest),
    /// With the partitions the handler refused (authorization, unknown topic) and their error.
    OffsetDelete(OffsetDeleteRequest, BTreeMap<(String, i32), i16>),
    TxnOffsetCommit(TxnOffsetCommitRequest),
    /// KIP-848: decoded and authorized by its handler, with the client's id and address.
    ConsumerGroupHeartbeat(ConsumerHeartbeatRequest),
    /// KIP-848: the group ids the principal may describe.
    ConsumerGroupDescribe(Vec<String>),
    /// Not a client's: an end-transaction marker reached a `__consumer_offsets` partition
    /// ([`GroupHandle::complete_transaction`]).
    CompleteTransaction {
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        marker: MarkerType,
    },
}

/// The coordinator task's answer.
#[derive(Debug)]
pub(crate) enum GroupReply {
    Group(Response),
    TxnCompleted(TxnCompletion),
}

struct Envelope {
    version: i16,
    client_id: String,
    client_host: String,
    request: GroupRequest,
    reply: oneshot::Sender<GroupReply>,
}

/// The handlers' side of the coordinator task.
#[derive(Clone)]
pub(crate) struct GroupHandle {
    requests: mpsc::Sender<Envelope>,
}

impl GroupHandle {
    /// Sends a request and waits for its reply; `None` if the task has stopped (the handler then
    /// answers COORDINATOR_NOT_AVAILABLE, which clients retry).
    pub(crate) async fn call(
        &self,
        header: &RequestHeader,
        request: GroupRequest,
    ) -> Option<GroupReply> {
        let (reply, answer) = oneshot::channel();
        let envelope = Envelope {
            version: header.request_api_version,
            client_id: header
                .client_id
                .as_ref()
                .map(|id| id.as_str().to_owned())
                .unwrap_or_default(),
            // The dispatch does not see the peer address; DescribeGroups reports it empty.
            client_host: String::new(),
            request,
            reply,
        };
        self.requests.send(envelope).await.ok()?;
        answer.await.ok()
    }

    /// Tells the coordinator that an end-transaction marker of `producer_id` at
    /// `producer_epoch` was appended to `__consumer_offsets` partition `partition` and
    /// replicated (the WriteTxnMarkers handler calls it, TXN-PLAN seam 2): a COMMIT makes that
    /// producer's pending transactional offsets of the partition's groups committed, an ABORT
    /// drops them. Returns once the coordinator applied it, with what it did; `None` if the task
    /// has stopped (shutdown: the next leader replays the marker from the log).
    pub(crate) async fn complete_transaction(
        &self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        marker: MarkerType,
    ) -> Option<TxnCompletion> {
        let (reply, answer) = oneshot::channel();
        let envelope = Envelope {
            version: 0,
            client_id: String::new(),
            client_host: String::new(),
            request: GroupRequest::CompleteTransaction {
                partition,
                producer_id,
                producer_epoch,
                marker,
            },
            reply,
        };
        self.requests.send(envelope).await.ok()?;
        match answer.await.ok()? {
            GroupReply::TxnCompleted(completion) => Some(completion),
            _ => None,
        }
    }
}

/// A persist appended to its partitions' logs whose answer waits for their HWs.
struct Replicated {
    request_id: RequestId,
    kind: PersistKind,
    result: Result<(), PersistError>,
}

/// Which coordinator call answers a persist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PersistKind {
    Commits,
    /// A TxnOffsetCommit's: written as transactional batches of the producer.
    TxnCommits(TxnProducer),
    Deletes,
    /// A consumer group's (KIP-848) records; the request id is the coordinator's write id.
    ConsumerRecords,
}

impl PersistKind {
    /// The producer whose transactional batches carry the records, if any.
    fn producer(self) -> Option<TxnProducer> {
        match self {
            Self::TxnCommits(producer) => Some(producer),
            Self::Commits | Self::Deletes | Self::ConsumerRecords => None,
        }
    }
}

/// Everything the coordinator task needs, opened before the broker serves.
pub(crate) struct GroupDriver {
    coordinator: Coordinator,
    /// The logs of the loaded `__consumer_offsets` partitions, by partition.
    logs: BTreeMap<i32, LoadedLog>,
    /// Partitions whose replay failed, and when to try again.
    load_retry_at_ms: BTreeMap<i32, i64>,
    /// `offsets.commit.timeout.ms`: how long a commit waits for the HW.
    commit_timeout_ms: u64,
    requests: mpsc::Receiver<Envelope>,
    waiting: BTreeMap<RequestId, oneshot::Sender<GroupReply>>,
    next_request_id: RequestId,
    /// Persists whose HW wait ended. Bounded like the requests: each is a parked request.
    replicated: (mpsc::Sender<Replicated>, mpsc::Receiver<Replicated>),
    /// Whether this broker's session was provably alive when leadership was last followed: a
    /// change either way is followed before the next request is served.
    session_alive: bool,
    /// The topics the coordinator was last given (KIP-848 subscriptions and assignments), kept to
    /// tell whether the topic table changed.
    topic_image: TopicImage,
}

/// One loaded partition's log. The log is compacted by key by the log cleaner (`ops::cleaner`),
/// like any topic whose `cleanup.policy` is `compact`, so the coordinator only appends to it.
struct LoadedLog {
    /// The `__consumer_offsets` partition (its log and its replica).
    partition: Arc<Partition>,
    /// The leader epoch this broker led it at when it was loaded: at any other epoch the
    /// partition was led elsewhere in between, and what was loaded is stale.
    leader_epoch: i32,
}

/// Replays the offsets log from its start, oldest first, with the bytes read: plain entries,
/// transactional entries and end-transaction markers in log order. A damaged record stops the
/// replay with an error rather than silently forgetting the offsets after it.
pub fn replay_offsets(log: &Log) -> Result<(Vec<Replayed>, u64), GroupDriverError> {
    let failed = |error: &dyn std::fmt::Display| GroupDriverError::OffsetsLog(error.to_string());
    let log_end = log.log_end_offset().map_err(|error| failed(&error))?;
    let mut offset = log.log_start_offset().map_err(|error| failed(&error))?;
    let mut entries = Vec::new();
    let mut bytes_read = 0u64;
    while offset < log_end {
        let (bytes, next) = read_batches(log, offset).map_err(|error| failed(&error))?;
        bytes_read += bytes.len() as u64;
        offsets_log::decode_replayed_batches(&bytes, &mut |item| entries.push(item))
            .map_err(|error| failed(&error))?;
        if next <= offset {
            return Err(failed(&format!("no complete batch at offset {offset}")));
        }
        offset = next;
    }
    Ok((entries, bytes_read))
}

/// What [`migrate_single_node_offsets`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MigratedOffsets {
    /// Committed offsets copied into their group's partition.
    pub copied: usize,
    /// Committed offsets whose partition has no replica on this broker: not copied (logged).
    pub elsewhere: usize,
}

/// Whether this data directory still keeps its offsets the single-node way: no layout marker,
/// and a partition-0 offsets log with something in it. Blocking.
pub(crate) fn single_node_offsets_pending(
    topics: &Topics,
    files: &DurableFiles,
    data_dir: &Path,
) -> Result<bool, GroupDriverError> {
    let marker = files
        .read_small(&data_dir.join(OFFSETS_LAYOUT_FILE), 64)
        .map_err(|error| GroupDriverError::OffsetsLog(error.to_string()))?;
    if marker.is_some() {
        return Ok(false);
    }
    let failed = |error: &dyn std::fmt::Display| GroupDriverError::OffsetsLog(error.to_string());
    let Some(log) = topics
        .log_in_dir(OFFSETS_TOPIC, SINGLE_NODE_OFFSETS_PARTITION)
        .map_err(|error| failed(&error))?
    else {
        write_layout_marker(files, data_dir)?;
        return Ok(false);
    };
    log.recover_deferred().map_err(|error| failed(&error))?;
    let empty = log.log_end_offset().map_err(|error| failed(&error))?
        == log.log_start_offset().map_err(|error| failed(&error))?;
    if empty {
        write_layout_marker(files, data_dir)?;
    }
    Ok(!empty)
}

/// Copies the latest committed offsets of every group in the single-node offsets log (partition
/// 0, which held all of them) into the log of the group's own `__consumer_offsets` partition,
/// then writes the layout marker. The topic must exist and be materialized. Copies are appended
/// and flushed before the marker, so a crash in between only copies them again (a replay of the
/// same commits). Blocking.
pub(crate) fn migrate_single_node_offsets(
    topics: &Topics,
    files: &DurableFiles,
    data_dir: &Path,
) -> Result<MigratedOffsets, GroupDriverError> {
    let failed = |error: &dyn std::fmt::Display| GroupDriverError::OffsetsLog(error.to_string());
    let offsets_topic = topics
        .get(OFFSETS_TOPIC)
        .ok_or_else(|| failed(&format!("{OFFSETS_TOPIC} does not exist")))?;
    let partitions = offsets_topic.partition_count();
    let source = topics
        .log_in_dir(OFFSETS_TOPIC, SINGLE_NODE_OFFSETS_PARTITION)
        .map_err(|error| failed(&error))?;
    let mut migrated = MigratedOffsets::default();
    if let Some(source) = &source {
        source.recover_deferred().map_err(|error| failed(&error))?;
        let (entries, _) = replay_offsets(source)?;
        let latest = latest_single_node_offsets(entries)?;
        let mut by_partition: BTreeMap<i32, Vec<OffsetLogEntry>> = BTreeMap::new();
        for (key, value) in latest {
            let Some(value) = value else { continue };
            let partition = skiff_group::coordinator_partition(&key.group, partitions);
            by_partition
                .entry(partition)
                .or_default()
                .push(OffsetLogEntry::Commit(key, value));
        }
        let source_is_partition_zero = offsets_topic
            .partition(SINGLE_NODE_OFFSETS_PARTITION)
            .is_some_and(|zero| Arc::ptr_eq(zero.log(), source));
        for (partition, commits) in by_partition {
            if partition == SINGLE_NODE_OFFSETS_PARTITION && source_is_partition_zero {
                // Already in their own log: its replay skips the other groups' entries.
                continue;
            }
            let Some(target) = offsets_topic.partition(partition) else {
                tracing::warn!(
                    partition,
                    offsets = commits.len(),
                    "single-node offsets not migrated: their {OFFSETS_TOPIC} partition has no replica on this broker"
                );
                migrated.elsewhere += commits.len();
                continue;
            };
            // Stamped with the epoch it leads at (the single-node start leads all it has).
            let epoch = target.admit_produce(Acks::Leader).ok();
            append_durably(target.log(), &commits, now_ms(), epoch)
                .map_err(|error| failed(&error))?;
            migrated.copied += commits.len();
        }
    }
    write_layout_marker(files, data_dir)?;
    if source.is_some() {
        // A log that is not this broker's partition 0 replica is only the old single-node log:
        // every offset in it is now in its partition (or reported above).
        topics
            .remove_unserved_log(OFFSETS_TOPIC, SINGLE_NODE_OFFSETS_PARTITION)
            .map_err(|error| failed(&error))?;
    }
    Ok(migrated)
}

/// The latest commit or tombstone of each key of a single-node offsets log. Releases that kept
/// such a log had no transactions, and this layout is migrated at the first start, before any:
/// a transactional record here is an error, not a guess.
fn latest_single_node_offsets(
    entries: Vec<Replayed>,
) -> Result<BTreeMap<OffsetKey, Option<OffsetValue>>, GroupDriverError> {
    let mut latest = BTreeMap::new();
    for item in entries {
        let Replayed::Entry(entry) = item else {
            return Err(GroupDriverError::OffsetsLog(
                "transactional records in a single-node offsets log".to_owned(),
            ));
        };
        match entry {
            OffsetLogEntry::Commit(key, value) => latest.insert(key, Some(value)),
            OffsetLogEntry::Delete(key) => latest.insert(key, None),
        };
    }
    Ok(latest)
}

fn write_layout_marker(files: &DurableFiles, data_dir: &Path) -> Result<(), GroupDriverError> {
    files
        .write_atomically(&data_dir.join(OFFSETS_LAYOUT_FILE), b"1\n")
        .map_err(|error| GroupDriverError::OffsetsLog(error.to_string()))
}

impl GroupDriver {
    /// The task with the handle the handlers use; the offsets are loaded per partition once the
    /// task runs and follows its leaderships.
    pub(crate) fn open(group_config: GroupConfig, commit_timeout_ms: u64) -> (Self, GroupHandle) {
        let (sender, requests) = mpsc::channel(GROUP_REQUESTS_QUEUED_MAX);
        (
            Self {
                coordinator: Coordinator::new(group_config),
                logs: BTreeMap::new(),
                load_retry_at_ms: BTreeMap::new(),
                commit_timeout_ms,
                requests,
                waiting: BTreeMap::new(),
                next_request_id: 0,
                replicated: mpsc::channel(GROUP_REQUESTS_QUEUED_MAX),
                session_alive: false,
                topic_image: TopicImage::default(),
            },
            GroupHandle { requests: sender },
        )
    }

    /// Runs until every handle is dropped (the broker's shared state holds one, so: until the
    /// broker is gone). `topics` holds the offsets logs and answers OffsetCommit's question
    /// whether a partition exists.
    pub(crate) async fn run(
        mut self,
        topics: Arc<Topics>,
        cluster: crate::cluster::ClusterHandle,
        proposals: ProposalSender,
    ) {
        let mut image_changes = Some(cluster.materialized_changes());
        self.follow_leadership(&topics, &cluster).await;
        self.drain(&proposals).await;
        loop {
            let now = now_ms();
            let deadline = self
                .coordinator
                .next_deadline_ms()
                .into_iter()
                .chain(self.load_retry_at_ms.values().copied())
                .min();
            let sleep_ms = deadline.map(|at| u64::try_from(at.saturating_sub(now)).unwrap_or(0));
            let sleep = async {
                match sleep_ms {
                    Some(ms) => tokio::time::sleep(std::time::Duration::from_millis(ms)).await,
                    None => std::future::pending().await,
                }
            };
            let image_changed = async {
                match image_changes.as_mut() {
                    Some(changes) => changes.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                Some(replicated) = self.replicated.1.recv() => self.answer_replicated(replicated),
                envelope = self.requests.recv() => match envelope {
                    Some(envelope) => {
                        // A handler that just created __consumer_offsets waited for the image
                        // to show it: follow that image before the request, not after it.
                        let image_moved = image_changes.as_mut().is_some_and(|changes| {
                            let moved = changes.has_changed().unwrap_or(false);
                            changes.borrow_and_update();
                            moved
                        });
                        // A session that lapsed (or came back) since leadership was last followed:
                        // unload (or load) before answering from what was loaded.
                        if image_moved || cluster.may_lead() != self.session_alive {
                            self.follow_leadership(&topics, &cluster).await;
                        }
                        self.accept(envelope, &topics);
                    }
                    None => break,
                },
                still_watching = image_changed => {
                    if !still_watching {
                        // The cluster is gone (shutdown): nothing changes any more.
                        image_changes = None;
                    }
                    self.follow_leadership(&topics, &cluster).await;
                }
                () = sleep => {
                    self.coordinator.tick(now_ms());
                    if !self.load_retry_at_ms.is_empty() {
                        self.follow_leadership(&topics, &cluster).await;
                    }
                }
            }
            self.drain(&proposals).await;
        }
        tracing::debug!("group coordinator stopped");
    }

    /// Tells the coordinator which `__consumer_offsets` partitions this broker leads now, and
    /// loads the logs of those it gained (one at a time, on a blocking thread: the requests of
    /// groups already loaded wait meanwhile, those of the loading partition get
    /// COORDINATOR_LOAD_IN_PROGRESS until it is done). While the session is not provably alive
    /// nothing is led (a broker cut off from the metadata store may have been replaced already);
    /// a partition led now at another leader epoch than the one it was loaded at is unloaded and
    /// loaded again, since others led it in between.
    async fn follow_leadership(&mut self, topics: &Arc<Topics>, cluster: &crate::cluster::Cluster) {
        let materialized = *cluster.materialized_changes().borrow();
        self.follow_topics(topics, materialized);
        self.session_alive = cluster.may_lead();
        let (coordinated, epochs) = cluster.coordinated();
        let stale: Vec<i32> = self
            .logs
            .iter()
            .filter(|(partition, loaded)| epochs.get(partition) != Some(&loaded.leader_epoch))
            .map(|(partition, _)| *partition)
            .collect();
        if !stale.is_empty() {
            let mut current = coordinated.clone();
            current.led.retain(|partition| !stale.contains(partition));
            self.coordinator.set_coordinated(current);
            if !self.session_alive {
                tracing::warn!(
                    partitions = ?stale,
                    "session not provably alive: offsets partitions unloaded until it is"
                );
            }
        }
        self.coordinator.set_coordinated(coordinated);
        let coordinator = &self.coordinator;
        self.logs.retain(|partition, loaded| {
            coordinator.is_partition_loaded(*partition)
                && epochs.get(partition) == Some(&loaded.leader_epoch)
        });
        let now = now_ms();
        for partition in self.coordinator.partitions_to_load() {
            if self
                .load_retry_at_ms
                .get(&partition)
                .is_some_and(|at| *at > now)
            {
                continue;
            }
            let Some(led) = topics
                .get(OFFSETS_TOPIC)
                .and_then(|topic| topic.partition(partition).cloned())
            else {
                // Led but not materialized yet: the materializer's next pass wakes this task.
                continue;
            };
            let replaying = led.log().clone();
            let replayed = tokio::task::spawn_blocking(move || {
                // Opened with recovery deferred after a crash: the coordinator needs it now.
                replaying
                    .recover_deferred()
                    .map_err(|error| GroupDriverError::OffsetsLog(error.to_string()))?;
                replay_offsets(&replaying)
            })
            .await
            .unwrap_or_else(|join| Err(GroupDriverError::OffsetsLog(join.to_string())));
            let leader_epoch = epochs.get(&partition).copied().unwrap_or(-1);
            match replayed {
                Ok((entries, bytes)) => {
                    self.load_retry_at_ms.remove(&partition);
                    self.install(partition, led, leader_epoch, entries, bytes);
                }
                Err(error) => {
                    tracing::error!(partition, %error, "offsets partition cannot be loaded; retrying");
                    self.load_retry_at_ms
                        .insert(partition, now.saturating_add(LOAD_RETRY_MS));
                }
            }
        }
    }

    /// Gives the coordinator the cluster's topics (name, id, partition count) when they changed
    /// since it was last given them: a topic created or deleted, or partitions added. Consumer
    /// groups see the change at their members' next heartbeats (patterns are resolved again, and
    /// a group whose subscribed topics changed gets a new target assignment), as Kafka's groups
    /// follow its metadata image. The image's version is the materialized revision the change
    /// was seen at (the metadata store's revisions only grow, also across restarts, so a pattern
    /// resolved before a restart is resolved again unless nothing changed since), and at least one
    /// more than the previous version.
    fn follow_topics(&mut self, topics: &Topics, revision: i64) {
        let by_name: BTreeMap<String, (TopicId, i32)> = topics
            .all()
            .iter()
            .map(|topic| {
                let entry = (TopicId(topic.topic_id), topic.partition_count());
                (topic.name.clone(), entry)
            })
            .collect();
        if by_name == self.topic_image.by_name && self.topic_image.version != 0 {
            return;
        }
        self.topic_image = TopicImage {
            version: revision.max(self.topic_image.version.saturating_add(1)),
            by_name,
        };
        self.coordinator.set_topic_image(self.topic_image.clone());
    }

    /// Hands a replayed partition log to the coordinator and keeps it for the partition's
    /// commits (unless leadership went while it was read).
    fn install(
        &mut self,
        partition: i32,
        led: Arc<Partition>,
        leader_epoch: i32,
        entries: Vec<Replayed>,
        bytes: u64,
    ) {
        let loaded = self.coordinator.load_partition(partition, entries);
        if self.coordinator.is_partition_loaded(partition) {
            tracing::info!(
                partition,
                applied = loaded.applied,
                foreign = loaded.foreign,
                bytes_replayed = bytes,
                leader_epoch,
                "offsets partition loaded"
            );
            self.logs.insert(
                partition,
                LoadedLog {
                    partition: led,
                    leader_epoch,
                },
            );
        }
    }

    /// Applies a replicated end-transaction marker ([`GroupHandle::complete_transaction`]) and
    /// answers with what it did.
    fn complete_transaction(
        &mut self,
        partition: i32,
        producer: TxnProducer,
        marker: MarkerType,
        reply: oneshot::Sender<GroupReply>,
    ) {
        let TxnProducer {
            producer_id,
            producer_epoch,
        } = producer;
        let completion =
            self.coordinator
                .complete_transaction(partition, producer_id, producer_epoch, marker);
        tracing::debug!(
            partition,
            producer_id,
            ?marker,
            ?completion,
            "transaction completed"
        );
        // The caller may have gone (its connection closed); the marker took effect anyway.
        let _ = reply.send(GroupReply::TxnCompleted(completion));
    }

    fn accept(&mut self, envelope: Envelope, topics: &Topics) {
        if let GroupRequest::CompleteTransaction {
            partition,
            producer_id,
            producer_epoch,
            marker,
        } = envelope.request
        {
            let producer = TxnProducer {
                producer_id,
                producer_epoch,
            };
            return self.complete_transaction(partition, producer, marker, envelope.reply);
        }
        self.next_request_id += 1;
        let request_id = self.next_request_id;
        let meta = RequestMeta {
            request_id,
            version: envelope.version,
            client_id: envelope.client_id,
            client_host: envelope.client_host,
        };
        self.waiting.insert(request_id, envelope.reply);
        let now = now_ms();
        let coordinator = &mut self.coordinator;
        match envelope.request {
            GroupRequest::JoinGroup(request) => coordinator.handle_join_group(now, meta, request),
            GroupRequest::SyncGroup(request) => coordinator.handle_sync_group(now, meta, request),
            GroupRequest::Heartbeat(request) => coordinator.handle_heartbeat(now, meta, request),
            GroupRequest::LeaveGroup(request) => coordinator.handle_leave_group(now, meta, request),
            GroupRequest::OffsetCommit(request) => {
                coordinator.handle_offset_commit(now, meta, request, partition_exists(topics))
            }
            GroupRequest::OffsetFetch(request) => coordinator.handle_offset_fetch(meta, request),
            GroupRequest::DescribeGroups(request) => {
                coordinator.handle_describe_groups(meta, request)
            }
            GroupRequest::ListGroups(request) => coordinator.handle_list_groups(meta, request),
            GroupRequest::DeleteGroups(request) => coordinator.handle_delete_groups(meta, request),
            GroupRequest::TxnOffsetCommit(request) => {
                coordinator.handle_txn_offset_commit(now, meta, request, partition_exists(topics))
            }
            GroupRequest::ConsumerGroupHeartbeat(request) => {
                coordinator.handle_consumer_group_heartbeat(meta, request, now)
            }
            GroupRequest::ConsumerGroupDescribe(group_ids) => {
                coordinator.handle_consumer_group_describe(meta, group_ids)
            }
            GroupRequest::CompleteTransaction { .. } => {
                unreachable!("answered above, before a request id is taken")
            }
            GroupRequest::OffsetDelete(request, refused) => {
                coordinator.handle_offset_delete(now, meta, request, |topic, partition| {
                    refused.get(&(topic.to_owned(), partition)).copied()
                })
            }
        }
        // Time passed in; expire whatever is due before answering, so a request never sees a
        // member whose session ended.
        self.coordinator.tick(now);
    }

    /// Acts on every output of the coordinator until it is quiet. Disk work
    /// (offsets-log appends and flushes) runs on a blocking thread; this task waits for it, so
    /// outputs are still acted on one at a time, in order.
    async fn drain(&mut self, proposals: &ProposalSender) {
        loop {
            let mut progressed = false;
            while let Some(output) = self.coordinator.poll_output() {
                progressed = true;
                match output {
                    Output::Reply {
                        request_id,
                        response,
                        ..
                    } => self.send(request_id, GroupReply::Group(response)),
                    Output::PersistOffsets {
                        request_id,
                        commits,
                    } => {
                        let entries = commits
                            .into_iter()
                            .map(|(key, value)| OffsetLogEntry::Commit(key, value))
                            .collect();
                        self.persist(request_id, PersistKind::Commits, entries, proposals)
                            .await;
                    }
                    Output::PersistTxnOffsets {
                        request_id,
                        producer,
                        commits,
                    } => {
                        let entries = commits
                            .into_iter()
                            .map(|(key, value)| OffsetLogEntry::Commit(key, value))
                            .collect();
                        let kind = PersistKind::TxnCommits(producer);
                        self.persist(request_id, kind, entries, proposals).await;
                    }
                    Output::PersistOffsetDeletes { request_id, keys } => {
                        let entries = keys.into_iter().map(OffsetLogEntry::Delete).collect();
                        self.persist(request_id, PersistKind::Deletes, entries, proposals)
                            .await;
                    }
                    Output::PersistConsumerRecords {
                        write,
                        partition,
                        records,
                    } => {
                        self.persist_consumer(write, partition, records, proposals)
                            .await
                    }
                }
            }
            if !progressed {
                break;
            }
        }
    }

    fn send(&mut self, request_id: RequestId, reply: GroupReply) {
        if let Some(sender) = self.waiting.remove(&request_id) {
            // The connection may have gone meanwhile; its reply is then dropped.
            let _ = sender.send(reply);
        }
    }

    /// Appends commits or tombstones, each to the log of its group's partition as its leader,
    /// and flushes those logs, on a blocking thread; the request is answered once the HW of each
    /// has passed them: at once when nothing has to wait (no follower in the ISR), else by
    /// [`GroupDriver::answer_replicated`] when a task beside this one saw the waits end.
    async fn persist(
        &mut self,
        request_id: RequestId,
        kind: PersistKind,
        entries: Vec<OffsetLogEntry>,
        proposals: &ProposalSender,
    ) {
        let appended = self.append_led(entries, kind.producer(), proposals).await;
        self.await_replication(request_id, kind, appended);
    }

    /// Appends a consumer group's records (KIP-848) as one batch, so a replay sees all of a
    /// heartbeat's records or none, to its partition's log as leader, through the same seam as
    /// the offsets; answered like [`GroupDriver::persist`].
    async fn persist_consumer(
        &mut self,
        write: ConsumerWriteId,
        partition: i32,
        records: Vec<ConsumerRecord>,
        proposals: &ProposalSender,
    ) {
        let kind = PersistKind::ConsumerRecords;
        let Some(loaded) = self.logs.get(&partition) else {
            return self.answer(write, kind, Err(PersistError::Unavailable));
        };
        let led = loaded.partition.clone();
        let (proposals, timeout_ms) = (proposals.clone(), self.commit_timeout_ms);
        let written = tokio::task::spawn_blocking(move || {
            let now = now_ms();
            let batch = offsets_log::encode_consumer_batch(&records, now)
                .map_err(|_| PersistError::TooLarge)?;
            append_batches_as_leader(&led, vec![batch], (now, timeout_ms), &proposals)
                .map(|wait| vec![(partition, wait)])
        });
        let appended = written.await.unwrap_or(Err(PersistError::Failed));
        self.await_replication(write, kind, appended);
    }

    /// Answers a persist once the HW of each partition it appended to has passed it: at once
    /// when nothing has to wait, else from a task beside this one.
    fn await_replication(
        &mut self,
        request_id: RequestId,
        kind: PersistKind,
        appended: Result<Vec<(i32, ReplicationWait)>, PersistError>,
    ) {
        let waits = match appended {
            Ok(waits) => waits,
            Err(error) => {
                tracing::warn!(%error, ?kind, "offsets log write refused or failed");
                return self.answer(request_id, kind, Err(error));
            }
        };
        let mut pending = Vec::new();
        let mut result = Ok(());
        for (partition, mut wait) in waits {
            match wait.try_recv() {
                Ok(outcome) => result = result.and(replication_outcome(outcome)),
                Err(oneshot::error::TryRecvError::Closed) => {
                    result = Err(PersistError::Unavailable)
                }
                Err(oneshot::error::TryRecvError::Empty) => pending.push((partition, wait)),
            }
        }
        if pending.is_empty() {
            return self.answer(request_id, kind, result);
        }
        let sender = self.replicated.0.clone();
        tokio::spawn(async move {
            for (_, wait) in pending {
                // A dropped sender: the partition went away (step-down answers first).
                let outcome = wait
                    .await
                    .unwrap_or(Some(ErrorCode::NOT_LEADER_OR_FOLLOWER));
                result = result.and(replication_outcome(outcome));
            }
            // The task gone (shutdown): nobody is left to answer.
            let _ = sender
                .send(Replicated {
                    request_id,
                    kind,
                    result,
                })
                .await;
        });
    }

    /// A persist whose HW waits ended.
    fn answer_replicated(&mut self, replicated: Replicated) {
        if let Err(error) = &replicated.result {
            tracing::warn!(%error, kind = ?replicated.kind, "offsets not replicated in time");
        }
        self.answer(replicated.request_id, replicated.kind, replicated.result);
    }

    fn answer(
        &mut self,
        request_id: RequestId,
        kind: PersistKind,
        result: Result<(), PersistError>,
    ) {
        match kind {
            PersistKind::Commits | PersistKind::TxnCommits(_) => {
                self.coordinator.offsets_persisted(request_id, result)
            }
            PersistKind::Deletes => self.coordinator.deletes_persisted(request_id, result),
            PersistKind::ConsumerRecords => self
                .coordinator
                .consumer_records_persisted(request_id, result),
        }
    }

    /// Appends each group's entries to the log of its partition as leader (see
    /// [`append_as_leader`]) on a blocking thread, and returns each partition's HW wait.
    /// COORDINATOR_NOT_AVAILABLE (retriable) when a partition is not loaded here (its leadership
    /// just went).
    async fn append_led(
        &mut self,
        entries: Vec<OffsetLogEntry>,
        producer: Option<TxnProducer>,
        proposals: &ProposalSender,
    ) -> Result<Vec<(i32, ReplicationWait)>, PersistError> {
        let mut by_partition: BTreeMap<i32, Vec<OffsetLogEntry>> = BTreeMap::new();
        for entry in entries {
            let group = match &entry {
                OffsetLogEntry::Commit(key, _) | OffsetLogEntry::Delete(key) => &key.group,
            };
            by_partition
                .entry(self.coordinator.offsets_partition(group))
                .or_default()
                .push(entry);
        }
        let mut writes = Vec::with_capacity(by_partition.len());
        for (index, entries) in by_partition {
            let loaded = self.logs.get(&index).ok_or(PersistError::Unavailable)?;
            writes.push((index, loaded.partition.clone(), entries));
        }
        let (proposals, timeout_ms) = (proposals.clone(), self.commit_timeout_ms);
        let written = tokio::task::spawn_blocking(move || {
            writes
                .into_iter()
                .map(|(index, partition, entries)| {
                    let records = (&entries[..], producer);
                    append_as_leader(&partition, records, (now_ms(), timeout_ms), &proposals)
                        .map(|wait| (index, wait))
                })
                .collect::<Result<Vec<_>, PersistError>>()
        });
        written.await.unwrap_or(Err(PersistError::Failed))
    }
}

/// Whether a topic partition exists, for the commits' UNKNOWN_TOPIC_OR_PARTITION.
fn partition_exists(topics: &Topics) -> impl Fn(&str, i32) -> bool + '_ {
    |topic, partition| {
        topics
            .get(topic)
            .is_some_and(|topic| topic.has_partition(partition))
    }
}

/// What a commit's HW wait ended with: nothing (replicated), or the replica's error mapped as
/// Kafka maps produce errors for the coordinator's own appends.
fn replication_outcome(outcome: Option<ErrorCode>) -> Result<(), PersistError> {
    match outcome {
        None => Ok(()),
        Some(code) => Err(PersistError::from_append_error(code)),
    }
}

/// Appends `entries` to a `__consumer_offsets` partition as its leader, through the partition's
/// writer seam ([`Partition::append_as_leader`], as a coordinator): admitted by its replica as an
/// acks=all produce (NOT_COORDINATOR when it does not lead, COORDINATOR_NOT_AVAILABLE below
/// `min.insync.replicas`), stamped with the leader epoch, synced, the HW moved (at once without
/// followers) and its ISR proposals queued. Returns the wait for the HW to pass them
/// (REQUEST_TIMED_OUT after `timeout_ms`). With a producer, the batches are that producer's
/// transactional batches (a TxnOffsetCommit's). Blocking.
fn append_as_leader(
    partition: &Partition,
    (entries, producer): (&[OffsetLogEntry], Option<TxnProducer>),
    (now_ms, timeout_ms): (i64, u64),
    proposals: &ProposalSender,
) -> Result<ReplicationWait, PersistError> {
    let encoded = match producer {
        Some(producer) => offsets_log::encode_txn_batches(entries, producer, now_ms),
        None => offsets_log::encode_batches(entries, now_ms),
    };
    let batches = encoded.map_err(|_| PersistError::TooLarge)?;
    append_batches_as_leader(partition, batches, (now_ms, timeout_ms), proposals)
}

/// Appends encoded batches to a `__consumer_offsets` partition as its leader (see
/// [`append_as_leader`]). Blocking.
fn append_batches_as_leader(
    partition: &Partition,
    mut batches: Vec<Vec<u8>>,
    (now_ms, timeout_ms): (i64, u64),
    proposals: &ProposalSender,
) -> Result<ReplicationWait, PersistError> {
    let leader_epoch = partition
        .admit_produce(Acks::All)
        .map_err(PersistError::from_append_error)?;
    let append = LeaderAppend {
        batches: &mut batches,
        origin: AppendOrigin::Coordinator,
        leader_epoch,
        now_ms,
        acks: Acks::All,
        timeout_ms,
    };
    let appended = partition
        .append_as_leader(append, proposals)
        .map_err(|error| match error {
            AppendError::Storage(skiff_storage::Error::BatchTooLarge { .. }) => {
                PersistError::TooLarge
            }
            _ => PersistError::Failed,
        })?;
    appended.replication.ok_or(PersistError::Failed)
}

/// Appends `entries` to an offsets log and syncs it (`Log::sync`: an fsync whatever the topic's
/// flush settings), each batch stamped with `leader_epoch` (a leader's append; `None` only for
/// the one-time single-node migration and storage tests). `Ok` (with the bytes appended) only
/// once the flush returned. The one write path of the offsets logs; blocking.
fn append_durably(
    log: &Log,
    entries: &[OffsetLogEntry],
    now_ms: i64,
    leader_epoch: Option<i32>,
) -> Result<u64, PersistError> {
    let batches =
        offsets_log::encode_batches(entries, now_ms).map_err(|_| PersistError::TooLarge)?;
    let mut bytes = 0u64;
    for mut batch in batches {
        bytes += batch.len() as u64;
        match leader_epoch {
            Some(epoch) => log.append_with_epoch(&mut batch, epoch, now_ms),
            None => log.append(&mut batch, now_ms),
        }
        .map_err(|error| match error {
            skiff_storage::Error::BatchTooLarge { .. } => PersistError::TooLarge,
            _ => PersistError::Failed,
        })?;
    }
    log.sync().map_err(|_| PersistError::Failed)?;
    Ok(bytes)
}

/// The coordinator's configuration from the broker's.
pub(crate) fn group_config(config: &crate::config::Config) -> GroupConfig {
    // Differs per start, so member ids from before a restart are never handed out again.
    let salt = u64::try_from(now_ms()).unwrap_or(0);
    let mut group_config = GroupConfig::new(group_keys(config), salt);
    group_config.consumer = consumer_group_config(config);
    group_config
}

/// The consumer groups' (KIP-848) settings from the broker's `group.consumer.*` keys (the
/// config checks their order as Kafka does; the min/max bounds matter only for per-group
/// settings, which Skiff does not have yet). Every assignor name the config accepts is one the
/// coordinator has.
fn consumer_group_config(config: &crate::config::Config) -> ConsumerGroupConfig {
    ConsumerGroupConfig {
        heartbeat_interval_ms: config.group_consumer_heartbeat_interval_ms,
        session_timeout_ms: config.group_consumer_session_timeout_ms,
        max_size: config.group_consumer_max_size,
        assignors: config
            .group_consumer_assignors
            .names()
            .iter()
            .filter_map(|name| AssignorKind::from_name(name))
            .collect(),
        regex_refresh_interval_ms: config.group_consumer_regex_refresh_interval_ms,
        migration_policy: MigrationPolicy::parse(config.group_consumer_migration_policy.name())
            .unwrap_or_default(),
    }
}

/// The coordinator's settings that are broker keys, from the broker's config.
pub(crate) fn group_keys(config: &crate::config::Config) -> GroupKeys {
    GroupKeys {
        session_timeout_ms_min: config.group_min_session_timeout_ms,
        session_timeout_ms_max: config.group_max_session_timeout_ms,
        initial_rebalance_delay_ms: config.group_initial_rebalance_delay_ms,
    }
}

#[cfg(test)]
mod power_loss;

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(partition: i32, offset: i64) -> OffsetLogEntry {
        OffsetLogEntry::Commit(
            OffsetKey {
                group: "g".into(),
                topic: "t".into(),
                partition,
            },
            OffsetValue {
                offset,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp_ms: 1,
            },
        )
    }

    /// A driver leading `__consumer_offsets` partition 0 of 1, from the log in `dir`.
    fn consumer_driver(dir: &std::path::Path) -> (skiff_storage::LogDir, GroupDriver) {
        use skiff_group::consumer::TopicImage;
        let log_dir =
            skiff_storage::LogDir::open(dir, skiff_storage::LogConfig::default()).expect("open");
        let log = match log_dir.log(OFFSETS_TOPIC, 0).expect("log") {
            Some(log) => log,
            None => log_dir.create(OFFSETS_TOPIC, 0, None).expect("create"),
        };
        let (entries, bytes) = replay_offsets(&log).expect("replay");
        let (mut driver, _handle) = GroupDriver::open(group_config(&Default::default()), 1_000);
        driver
            .coordinator
            .set_coordinated(skiff_group::Coordinated {
                partitions: 1,
                led: [0].into(),
            });
        let led = crate::partition::topics::Partition::led_alone(0, log);
        driver.install(0, led, 0, entries, bytes);
        let topic = skiff_group::consumer::TopicId([9; 16]);
        driver.coordinator.set_topic_image(TopicImage {
            version: 1,
            by_name: [("t".to_owned(), (topic, 3))].into(),
        });
        (log_dir, driver)
    }

    #[test]
    fn the_consumer_group_keys_reach_the_coordinator_with_kafkas_defaults() {
        // The config's defaults are the core's (both Kafka's, but for Skiff's bounded max size).
        let defaults = group_config(&Default::default());
        assert_eq!(defaults.consumer, ConsumerGroupConfig::default());
        let mut config = crate::config::Config::default();
        for setting in [
            "group.consumer.session.timeout.ms=50000",
            "group.consumer.heartbeat.interval.ms=6000",
            "group.consumer.max.size=7",
            "group.consumer.assignors=org.apache.kafka.coordinator.group.assignor.RangeAssignor, uniform",
            "group.consumer.migration.policy=UPGRADE",
        ] {
            config.apply_override(setting).expect(setting);
        }
        let (driver, _handle) = GroupDriver::open(group_config(&config), 1_000);
        let consumer = driver.coordinator.consumer_groups().config();
        assert_eq!(
            (
                consumer.session_timeout_ms,
                consumer.heartbeat_interval_ms,
                consumer.max_size
            ),
            (50_000, 6_000, 7)
        );
        assert_eq!(
            consumer.assignors,
            vec![AssignorKind::Range, AssignorKind::Uniform]
        );
        assert_eq!(consumer.migration_policy, MigrationPolicy::Upgrade);
        let refused = config
            .clone()
            .apply_override("group.consumer.migration.policy=sideways")
            .expect_err("not a policy");
        assert!(refused.to_string().contains("sideways"), "{refused}");
        for refused in [
            "group.consumer.assignors=sticky",
            "group.consumer.assignors= , ",
        ] {
            assert!(config.clone().apply_override(refused).is_err(), "{refused}");
        }
    }

    #[tokio::test]
    async fn a_heartbeats_records_are_appended_before_its_reply_and_replay_after_a_reopen() {
        use skiff_group::consumer::{Assignment, HeartbeatRequest};
        let dir = tempfile::tempdir().expect("tempdir");
        let (proposals, _queued) = crate::partition::replica::proposal_channel();
        let member = {
            let (_log_dir, mut driver) = consumer_driver(dir.path());
            let (sender, mut reply) = oneshot::channel();
            driver.waiting.insert(1, sender);
            let meta = RequestMeta {
                request_id: 1,
                version: 1,
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
            };
            let request = HeartbeatRequest {
                group_id: "g".into(),
                member_id: "m1".into(),
                rebalance_timeout_ms: 30_000,
                subscribed_topic_names: Some(vec!["t".into()]),
                topic_partitions: Some(Assignment::new()),
                ..HeartbeatRequest::default()
            };
            driver
                .coordinator
                .handle_consumer_group_heartbeat(meta, request, now_ms());
            driver.drain(&proposals).await;
            let Ok(GroupReply::Group(Response::ConsumerGroupHeartbeat(response))) =
                reply.try_recv()
            else {
                panic!("the heartbeat is answered once its records are written");
            };
            assert_eq!(response.error_code, 0, "{response:?}");
            assert_eq!(response.member_epoch, 1);
            let group = driver
                .coordinator
                .consumer_groups()
                .group("g")
                .expect("group");
            group.members().get("m1").cloned().expect("member")
        };
        // The log alone rebuilds the member: its id, epoch and partitions.
        let (_log_dir, driver) = consumer_driver(dir.path());
        let group = driver
            .coordinator
            .consumer_groups()
            .group("g")
            .expect("replayed group");
        assert_eq!(group.members().get("m1"), Some(&member));
        assert_eq!(
            member
                .assignment
                .assigned
                .values()
                .map(|p| p.len())
                .sum::<usize>(),
            3
        );
    }

    #[test]
    fn offsets_log_replays_what_was_appended_across_a_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let written: Vec<OffsetLogEntry> = (0..50)
            .map(|index| commit(index % 3, index.into()))
            .collect();
        {
            let log_dir =
                skiff_storage::LogDir::open(dir.path(), skiff_storage::LogConfig::default())
                    .expect("open");
            let log = log_dir.create(OFFSETS_TOPIC, 7, None).expect("create");
            for chunk in written.chunks(7) {
                append_durably(&log, chunk, 1, None).expect("append");
            }
            // No clean close: what was synced must come back after recovery.
        }
        let log_dir = skiff_storage::LogDir::open(dir.path(), skiff_storage::LogConfig::default())
            .expect("reopen");
        let log = log_dir
            .log(OFFSETS_TOPIC, 7)
            .expect("log")
            .expect("present");
        let (replayed, bytes) = replay_offsets(&log).expect("replay");
        let written: Vec<Replayed> = written.into_iter().map(Replayed::from).collect();
        assert_eq!(replayed, written);
        assert_eq!(bytes, log.size_bytes().expect("size"));
    }
}
