//! [`Coordinator`]: the groups, the inputs that drive them and the outputs they produce; loading
//! committed offsets at start, ticking deadlines, and the shared reply helpers.
//!
//! Must never: read a clock (time is the `now_ms` argument), or answer a request twice.

use std::collections::{BTreeMap, VecDeque};

use kafka_protocol::messages::{
    DeleteGroupsResponse, DescribeGroupsResponse, HeartbeatResponse, JoinGroupResponse,
    LeaveGroupResponse, ListGroupsResponse, OffsetCommitResponse, OffsetDeleteResponse,
    OffsetFetchResponse, SyncGroupResponse, TxnOffsetCommitResponse,
};
use skiff_protocol::error_code::ErrorCode;
use skiff_protocol::responses::consumer_group::{
    ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatResponse,
};

use super::config::GroupConfig;
use super::deletion::PendingDelete;
use super::offsets::PendingCommit;
use super::offsets_log::{OffsetKey, OffsetValue, Replayed, TxnProducer};
use super::state::{CommittedOffset, Group, GroupState};
use super::txn_offsets::PendingTxnCommit;

/// Chosen by the driver for every request it hands in; comes back on the outputs for it.
pub type RequestId = u64;

/// What the coordinator needs to know about a request besides its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestMeta {
    /// The driver's handle for the eventual reply.
    pub request_id: RequestId,
    /// The request's API version (the reply is filled for it).
    pub version: i16,
    /// The request header's client id (DescribeGroups reports it).
    pub client_id: String,
    /// The peer's address (DescribeGroups reports it).
    pub client_host: String,
}

/// A response, one variant per API the coordinator answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Response {
    /// JoinGroup.
    JoinGroup(JoinGroupResponse),
    /// SyncGroup.
    SyncGroup(SyncGroupResponse),
    /// Heartbeat.
    Heartbeat(HeartbeatResponse),
    /// LeaveGroup.
    LeaveGroup(LeaveGroupResponse),
    /// OffsetCommit.
    OffsetCommit(OffsetCommitResponse),
    /// OffsetFetch.
    OffsetFetch(OffsetFetchResponse),
    /// DescribeGroups.
    DescribeGroups(DescribeGroupsResponse),
    /// ListGroups.
    ListGroups(ListGroupsResponse),
    /// DeleteGroups.
    DeleteGroups(DeleteGroupsResponse),
    /// OffsetDelete.
    OffsetDelete(OffsetDeleteResponse),
    /// TxnOffsetCommit.
    TxnOffsetCommit(TxnOffsetCommitResponse),
    /// ConsumerGroupHeartbeat.
    ConsumerGroupHeartbeat(ConsumerGroupHeartbeatResponse),
    /// ConsumerGroupDescribe.
    ConsumerGroupDescribe(ConsumerGroupDescribeResponse),
}

/// What the coordinator asks the driver to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Send this response for that request (encode it with `version`).
    Reply {
        /// The request answered.
        request_id: RequestId,
        /// Its API version.
        version: i16,
        /// The response body.
        response: Response,
    },
    /// Append these commits durably to the offsets log, in order, then call
    /// [`Coordinator::offsets_persisted`] with `request_id`.
    PersistOffsets {
        /// The OffsetCommit waiting for it.
        request_id: RequestId,
        /// The commits, in request order.
        commits: Vec<(OffsetKey, OffsetValue)>,
    },
    /// Append these transactional commits durably to the offsets log, in order, as transactional
    /// batches of `producer` ([`crate::offsets_log::encode_txn_batches`]), then call
    /// [`Coordinator::offsets_persisted`] with `request_id` (TxnOffsetCommit). They take effect
    /// only at the producer's COMMIT marker ([`Coordinator::complete_transaction`]).
    PersistTxnOffsets {
        /// The TxnOffsetCommit waiting for it.
        request_id: RequestId,
        /// The transactional producer the batches belong to.
        producer: TxnProducer,
        /// The commits, in request order.
        commits: Vec<(OffsetKey, OffsetValue)>,
    },
    /// Append a tombstone for each key durably to the offsets log, in order, then call
    /// [`Coordinator::deletes_persisted`] with `request_id` (DeleteGroups, OffsetDelete).
    PersistOffsetDeletes {
        /// The request waiting for it.
        request_id: RequestId,
        /// The offsets deleted.
        keys: Vec<OffsetKey>,
    },
    /// Append these consumer group (KIP-848) records durably to `partition` of
    /// `__consumer_offsets`, in order ([`crate::offsets_log::encode_consumer_batch`]), then call
    /// [`Coordinator::consumer_records_persisted`] with `write`. They come from a
    /// ConsumerGroupHeartbeat (answered by that call) or from the tick's expiries (no reply).
    PersistConsumerRecords {
        /// The coordinator's handle for this write.
        write: crate::ConsumerWriteId,
        /// The group's `__consumer_offsets` partition.
        partition: i32,
        /// The records, in log order (already applied; rolled back if the write fails).
        records: Vec<crate::consumer::ConsumerRecord>,
    },
}

/// Why the driver could not make commits durable; each maps to the error code Kafka sends.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PersistError {
    /// The offsets log cannot take writes now (COORDINATOR_NOT_AVAILABLE: clients retry).
    #[error("offsets log unavailable")]
    Unavailable,
    /// The records were too large for the log (INVALID_COMMIT_OFFSET_SIZE).
    #[error("offset commit too large for the offsets log")]
    TooLarge,
    /// This broker's replica of the group's partition does not lead it (any more), or its log
    /// failed (NOT_COORDINATOR: the client finds the new coordinator).
    #[error("not the leader of the group's offsets partition")]
    NotLeader,
    /// Anything else, e.g. a poisoned log (UNKNOWN_SERVER_ERROR).
    #[error("offsets log write failed")]
    Failed,
}

impl PersistError {
    /// The failure of an offsets-log append that went through its partition's replica, as
    /// Kafka's coordinator maps the produce error of its own append: ISR too small or the HW
    /// not reached in time is retriable where the coordinator is; a lost leadership or a log
    /// error sends the client to find the coordinator again.
    pub fn from_append_error(code: ErrorCode) -> Self {
        match code {
            ErrorCode::NOT_ENOUGH_REPLICAS
            | ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND
            | ErrorCode::REQUEST_TIMED_OUT
            | ErrorCode::UNKNOWN_TOPIC_OR_PARTITION => Self::Unavailable,
            ErrorCode::NOT_LEADER_OR_FOLLOWER | ErrorCode::KAFKA_STORAGE_ERROR => Self::NotLeader,
            ErrorCode::MESSAGE_TOO_LARGE | ErrorCode::RECORD_LIST_TOO_LARGE => Self::TooLarge,
            _ => Self::Failed,
        }
    }
}

impl PersistError {
    /// The Kafka error code answered for the affected partitions.
    pub fn error_code(self) -> i16 {
        match self {
            Self::Unavailable => ErrorCode::COORDINATOR_NOT_AVAILABLE.code(),
            Self::TooLarge => ErrorCode::INVALID_COMMIT_OFFSET_SIZE.code(),
            Self::NotLeader => ErrorCode::NOT_COORDINATOR.code(),
            Self::Failed => ErrorCode::UNKNOWN_SERVER_ERROR.code(),
        }
    }
}

/// The classic group coordinator. See the crate doc for the driver contract.
#[derive(Debug)]
pub struct Coordinator {
    pub(super) config: GroupConfig,
    /// The groups coordinated here (`None`: all of them).
    pub(super) coordinated: Option<crate::Coordinated>,
    /// Whether [`Coordinator::load_offsets`] ran; before it, group requests are answered with
    /// COORDINATOR_LOAD_IN_PROGRESS so that no client sees offsets that are not loaded yet.
    /// (Used while `coordinated` is `None`; once it is set, `loaded_partitions` decides.)
    pub(super) loaded: bool,
    /// The led `__consumer_offsets` partitions whose logs were replayed (`loading.rs`).
    pub(super) loaded_partitions: std::collections::BTreeSet<i32>,
    pub(super) groups: BTreeMap<String, Group>,
    pub(super) outputs: VecDeque<Output>,
    /// OffsetCommits waiting for their records to be durable, by request id.
    pub(super) pending_commits: BTreeMap<RequestId, PendingCommit>,
    /// DeleteGroups and OffsetDeletes waiting for their tombstones to be durable, by request id.
    pub(super) pending_deletes: BTreeMap<RequestId, PendingDelete>,
    /// TxnOffsetCommits waiting for their records to be durable, by request id.
    pub(super) pending_txn_commits: BTreeMap<RequestId, PendingTxnCommit>,
    /// Pending transactional offsets across all groups and producers (bounded by
    /// `pending_txn_offsets_max`).
    pub(super) pending_txn_count: usize,
    /// Committed-offset entries across all groups (bounded by `committed_offsets_max`).
    pub(super) offsets_count: usize,
    /// Member ids handed out so far (made unique per start by the config's salt).
    pub(super) member_id_count: u64,
    /// PersistOffsets outputs emitted so far: the order of the offsets log.
    pub(super) persist_sequence: u64,
    /// The KIP-848 consumer groups of the same `__consumer_offsets` partitions: loaded and
    /// unloaded with them; the classic groups above and these share the group-id namespace.
    pub(super) consumer_groups: crate::consumer::ConsumerGroups,
    /// Their writes in flight, parked heartbeats and topic image (`consumer_coord.rs`).
    pub(super) consumer: crate::consumer_coord::ConsumerSide,
}

impl Coordinator {
    /// A coordinator holding no group yet; call [`Coordinator::load_offsets`] before serving.
    pub fn new(config: GroupConfig) -> Self {
        let consumer_groups = crate::consumer::ConsumerGroups::new(config.consumer.clone());
        Self {
            config,
            loaded: false,
            loaded_partitions: std::collections::BTreeSet::new(),
            coordinated: None,
            groups: BTreeMap::new(),
            outputs: VecDeque::new(),
            pending_commits: BTreeMap::new(),
            pending_deletes: BTreeMap::new(),
            pending_txn_commits: BTreeMap::new(),
            pending_txn_count: 0,
            offsets_count: 0,
            member_id_count: 0,
            persist_sequence: 0,
            consumer_groups,
            consumer: crate::consumer_coord::ConsumerSide::default(),
        }
    }

    /// The consumer groups (KIP-848) loaded with the led partitions.
    pub fn consumer_groups(&self) -> &crate::consumer::ConsumerGroups {
        &self.consumer_groups
    }

    /// The consumer groups, to serve ConsumerGroupHeartbeat and friends.
    pub fn consumer_groups_mut(&mut self) -> &mut crate::consumer::ConsumerGroups {
        &mut self.consumer_groups
    }

    /// The configuration in use.
    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// Replays the offsets log (oldest first): the last commit of a (group, topic, partition) wins
    /// and a tombstone deletes it; transactional commits wait for their producer's marker;
    /// consumer group records rebuild those groups (their sessions start at the next tick).
    /// Marks the coordinator loaded; call it once at start, before any request, even with an
    /// empty log.
    pub fn load_offsets(&mut self, entries: impl IntoIterator<Item = Replayed>) {
        for item in entries {
            self.apply_replayed(item);
        }
        self.loaded = true;
        self.consumer_groups_loaded();
    }

    /// The next output to act on, oldest first.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// Expires sessions, handed-out member ids, and rebalance and sync deadlines that are due at
    /// `now_ms`. Costs one pass over all groups and members.
    pub fn tick(&mut self, now_ms: i64) {
        let group_ids: Vec<String> = self.groups.keys().cloned().collect();
        for group_id in group_ids {
            self.expire_group(&group_id, now_ms);
            if let Some(group) = self.groups.get_mut(&group_id) {
                if group.kept_until_ms.is_some_and(|until| until <= now_ms) {
                    group.kept_until_ms = None;
                }
            }
            self.forget_if_unused(&group_id);
        }
        self.tick_consumer_groups(now_ms);
    }

    /// When [`Coordinator::tick`] next has something to do, if ever.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        let mut next: Option<i64> = self.consumer_next_deadline_ms();
        let mut consider = |deadline: i64| {
            next = Some(next.map_or(deadline, |current| current.min(deadline)));
        };
        for group in self.groups.values() {
            if let Some(deadline) = group.rebalance_deadline_ms {
                consider(deadline);
            }
            if let Some(deadline) = group.kept_until_ms {
                consider(deadline);
            }
            for deadline in group.pending_members.values() {
                consider(*deadline);
            }
            for member in group.members.values() {
                if member.session_counts() {
                    consider(member.session_deadline_ms);
                }
            }
        }
        next
    }

    /// The state of a group, if the coordinator holds it.
    pub fn group_state(&self, group_id: &str) -> Option<GroupState> {
        self.groups.get(group_id).map(|group| group.state)
    }

    /// A classic group's generation (simulations check that it only grows).
    #[cfg(test)]
    pub(crate) fn group_generation(&self, group_id: &str) -> Option<i32> {
        self.groups.get(group_id).map(|group| group.generation_id)
    }

    /// The current generation of a group, if the coordinator holds it.
    pub fn generation_id(&self, group_id: &str) -> Option<i32> {
        self.groups.get(group_id).map(|group| group.generation_id)
    }

    /// The committed offset of one partition for a group.
    pub fn committed_offset(
        &self,
        group_id: &str,
        topic: &str,
        partition: i32,
    ) -> Option<&CommittedOffset> {
        self.groups
            .get(group_id)?
            .offsets
            .get(&(topic.to_owned(), partition))
    }

    /// Every committed offset, as (group, topic, partition) → offset (for tests and snapshots).
    pub fn committed_offsets(&self) -> BTreeMap<(String, String, i32), i64> {
        self.groups
            .values()
            .flat_map(|group| {
                group.offsets.iter().map(|((topic, partition), committed)| {
                    (
                        (group.group_id.clone(), topic.clone(), *partition),
                        committed.offset,
                    )
                })
            })
            .collect()
    }

    /// Groups held (including empty ones that keep offsets).
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// The error a request about every group here (ListGroups) gets while offsets are loading:
    /// before `load_offsets`, or while a led partition is not loaded yet.
    pub(super) fn not_ready(&self) -> Option<i16> {
        let loading = match &self.coordinated {
            None => !self.loaded,
            Some(_) => !self.partitions_to_load().is_empty(),
        };
        loading.then(|| ErrorCode::COORDINATOR_LOAD_IN_PROGRESS.code())
    }

    /// The error a request for `group_id` gets here: COORDINATOR_LOAD_IN_PROGRESS before offsets
    /// are loaded, NOT_COORDINATOR when another broker coordinates the group (the client finds the
    /// coordinator again).
    pub(super) fn unavailable_for(&self, group_id: &str) -> Option<ErrorCode> {
        match &self.coordinated {
            None if !self.loaded => Some(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS),
            None => None,
            Some(coordinated) if !coordinated.includes(group_id) => {
                Some(ErrorCode::NOT_COORDINATOR)
            }
            Some(_) if !self.is_partition_loaded(self.offsets_partition(group_id)) => {
                Some(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS)
            }
            Some(_) => None,
        }
    }

    pub(super) fn reply(&mut self, request_id: RequestId, version: i16, response: Response) {
        self.outputs.push_back(Output::Reply {
            request_id,
            version,
            response,
        });
    }

    pub(super) fn next_persist_sequence(&mut self) -> u64 {
        self.persist_sequence += 1;
        self.persist_sequence
    }

    /// A fresh member id: the client id (as Kafka does, so operators recognise it), the salt that
    /// differs per start, and a counter.
    pub(super) fn new_member_id(&mut self, client_id: &str) -> String {
        self.member_id_count += 1;
        // Client ids are at most a protocol string long; keep member ids readable and bounded.
        let prefix: String = client_id.chars().take(64).collect();
        format!(
            "{prefix}-{:016x}-{:08x}",
            self.config.member_id_salt, self.member_id_count
        )
    }

    /// Records a durable commit unless a later one for the same partition is already in. Within
    /// one persist (equal sequences) the later record wins, as a replay of the log applies it.
    pub(super) fn apply_commit(&mut self, key: OffsetKey, value: OffsetValue, sequence: u64) {
        let group = self
            .groups
            .entry(key.group.clone())
            .or_insert_with(|| Group::new(key.group.clone()));
        let committed = CommittedOffset {
            offset: value.offset,
            leader_epoch: value.leader_epoch,
            metadata: value.metadata,
            commit_timestamp_ms: value.commit_timestamp_ms,
            persist_sequence: sequence,
        };
        match group.offsets.get_mut(&(key.topic.clone(), key.partition)) {
            Some(existing) => {
                if existing.persist_sequence <= sequence {
                    *existing = committed;
                }
            }
            None => {
                group.offsets.insert((key.topic, key.partition), committed);
                self.offsets_count += 1;
            }
        }
    }

    /// Drops a group that holds nothing (no member, no handed-out id, no offset) and is not kept
    /// after an OffsetDelete: it would only count against `groups_max`. Called after every input
    /// that touched the group.
    pub(super) fn forget_if_unused(&mut self, group_id: &str) {
        let unused = self.groups.get(group_id).is_some_and(|group| {
            group.state == GroupState::Empty
                && group.size() == 0
                && group.offsets.is_empty()
                && group.pending_txn.is_empty()
                && group.kept_until_ms.is_none()
        });
        if unused {
            self.groups.remove(group_id);
        }
    }

    /// A replayed tombstone: the committed offset goes, and so does every transactional commit
    /// of the key still pending (it was written before the tombstone, as Kafka replays it).
    pub(super) fn apply_delete(&mut self, key: &OffsetKey) {
        if let Some(group) = self.groups.get_mut(&key.group) {
            if group
                .offsets
                .remove(&(key.topic.clone(), key.partition))
                .is_some()
            {
                self.offsets_count -= 1;
            }
        }
        self.drop_pending_txn_before(key, u64::MAX);
        self.forget_if_unused(&key.group);
    }
}
