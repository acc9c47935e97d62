//! TxnOffsetCommit (v0–v5) and the transactional offsets it leaves pending: who may commit
//! (KIP-447's generation, member and group-instance checks from v3), the commits pending per
//! producer until the producer's end-transaction marker appears in the group's offsets log
//! ([`Coordinator::complete_transaction`], or the marker met on replay), and what a COMMIT makes
//! visible (each pending offset replaces the committed one only if its record is later in the
//! log, as Kafka compares the records' log positions) or an ABORT drops.
//!
//! Must never: show a pending offset to OffsetFetch, let an aborted offset become committed,
//! acknowledge a TxnOffsetCommit before the driver reported its records durable, or hold more
//! pending entries than `pending_txn_offsets_max` (entries replayed at load excepted).

use kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestPartition;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use kafka_protocol::protocol::StrBytes;
use skiff_protocol::error_code::ErrorCode;
use skiff_protocol::records::txn::MarkerType;

use super::coordinator::{Coordinator, Output, PersistError, RequestId, RequestMeta, Response};
use super::offsets_log::{OffsetKey, OffsetLogEntry, OffsetValue, Replayed, TxnProducer};
use super::state::{CommittedOffset, Group, GroupState, PendingTxn, PendingTxnOffset};

/// First TxnOffsetCommit version carrying the group's generation, member id and instance id
/// (KIP-447): the commit is fenced like an OffsetCommit's.
const GROUP_METADATA_VERSION_MIN: i16 = 3;
/// First TxnOffsetCommit version carrying a committed leader epoch.
const LEADER_EPOCH_VERSION_MIN: i16 = 2;

/// A TxnOffsetCommit waiting for its records to become durable.
#[derive(Debug, Clone)]
pub(super) struct PendingTxnCommit {
    version: i16,
    /// The answer, with the errors of refused partitions already in and the accepted ones at 0.
    response: TxnOffsetCommitResponse,
    producer: TxnProducer,
    commits: Vec<(OffsetKey, OffsetValue)>,
    /// The persist sequence of the records: their place in the log.
    persist_sequence: u64,
}

/// What every partition of one TxnOffsetCommit shares.
struct TxnCommitContext {
    now_ms: i64,
    version: i16,
    producer: TxnProducer,
    /// The group-level refusal, answered for every partition.
    group_error: Option<ErrorCode>,
    /// Where the request's records go in the log.
    persist_sequence: u64,
}

/// What one end-transaction marker did to the pending transactional offsets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxnCompletion {
    /// Groups that had offsets pending for the producer.
    pub groups: usize,
    /// Offsets that became the committed ones (COMMIT, and later in the log than the committed).
    pub applied: usize,
    /// Offsets dropped: aborted, older in the log than the committed one, or not durable yet.
    pub dropped: usize,
    /// Groups whose pending offsets are of a newer producer epoch than the marker's: left
    /// pending (a log refuses such a marker; this one is ignored rather than trusted).
    pub stale: usize,
}

impl Coordinator {
    /// TxnOffsetCommit, every version. The group is created if unknown (generation < 0, as
    /// Kafka's "simple" groups), else must accept the commit (v3+: the member of the current
    /// generation, FENCED_INSTANCE_ID for a replaced static member). Per partition:
    /// OFFSET_METADATA_TOO_LARGE, UNKNOWN_TOPIC_OR_PARTITION (`partition_exists`), or
    /// COORDINATOR_NOT_AVAILABLE beyond the pending bound. Accepted partitions are pending for
    /// the producer at once (OffsetFetch with `require_stable` then answers
    /// UNSTABLE_OFFSET_COMMIT) and the reply comes after [`Coordinator::offsets_persisted`].
    pub fn handle_txn_offset_commit(
        &mut self,
        now_ms: i64,
        meta: RequestMeta,
        request: TxnOffsetCommitRequest,
        partition_exists: impl Fn(&str, i32) -> bool,
    ) {
        let version = meta.version;
        let group_id = request.group_id.0.as_str().to_owned();
        let context = TxnCommitContext {
            now_ms,
            version,
            producer: TxnProducer {
                producer_id: request.producer_id.0,
                producer_epoch: request.producer_epoch,
            },
            group_error: self.txn_commit_permission(version, &request).err(),
            persist_sequence: self.next_persist_sequence(),
        };
        let mut response = TxnOffsetCommitResponse::default();
        let mut commits: Vec<(OffsetKey, OffsetValue)> = Vec::new();
        for topic in &request.topics {
            let mut topic_response = TxnOffsetCommitResponseTopic::default();
            topic_response.name = topic.name.clone();
            for partition in &topic.partitions {
                let key = OffsetKey {
                    group: group_id.clone(),
                    topic: topic.name.0.as_str().to_owned(),
                    partition: partition.partition_index,
                };
                let mut partition_response = TxnOffsetCommitResponsePartition::default();
                partition_response.partition_index = partition.partition_index;
                match self.accept_txn_partition(&context, key, partition, &partition_exists) {
                    Ok(commit) => commits.push(commit),
                    Err(error) => partition_response.error_code = error.code(),
                }
                topic_response.partitions.push(partition_response);
            }
            response.topics.push(topic_response);
        }
        if commits.is_empty() {
            self.forget_if_unused(&group_id);
            self.reply(
                meta.request_id,
                version,
                Response::TxnOffsetCommit(response),
            );
            return;
        }
        let pending = PendingTxnCommit {
            version,
            response,
            producer: context.producer,
            commits,
            persist_sequence: context.persist_sequence,
        };
        self.start_txn_persist(meta.request_id, pending);
    }

    /// One partition of a TxnOffsetCommit: its error, or the commit, staged as pending.
    fn accept_txn_partition(
        &mut self,
        context: &TxnCommitContext,
        key: OffsetKey,
        partition: &TxnOffsetCommitRequestPartition,
        partition_exists: impl Fn(&str, i32) -> bool,
    ) -> Result<(OffsetKey, OffsetValue), ErrorCode> {
        if let Some(error) = context.group_error {
            return Err(error);
        }
        let metadata = partition
            .committed_metadata
            .as_ref()
            .map_or("", StrBytes::as_str);
        let producer = context.producer;
        if let Some(error) =
            self.txn_partition_error(producer.producer_id, &key, metadata, partition_exists)
        {
            return Err(error);
        }
        let leader_epoch = if context.version >= LEADER_EPOCH_VERSION_MIN {
            partition.committed_leader_epoch
        } else {
            -1
        };
        let value = OffsetValue {
            offset: partition.committed_offset,
            leader_epoch,
            metadata: metadata.to_owned(),
            commit_timestamp_ms: context.now_ms,
        };
        self.stage_txn_offset(producer, &key, &value, context.persist_sequence, false);
        Ok((key, value))
    }

    /// Hands the accepted commits to the driver; the answer waits for them.
    fn start_txn_persist(&mut self, request_id: RequestId, pending: PendingTxnCommit) {
        self.outputs.push_back(Output::PersistTxnOffsets {
            request_id,
            producer: pending.producer,
            commits: pending.commits.clone(),
        });
        self.pending_txn_commits.insert(request_id, pending);
    }

    /// The error of one partition of an accepted TxnOffsetCommit, if any.
    fn txn_partition_error(
        &self,
        producer_id: i64,
        key: &OffsetKey,
        metadata: &str,
        partition_exists: impl Fn(&str, i32) -> bool,
    ) -> Option<ErrorCode> {
        if metadata.len() > self.config.offset_metadata_bytes_max {
            Some(ErrorCode::OFFSET_METADATA_TOO_LARGE)
        } else if !partition_exists(&key.topic, key.partition) {
            Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)
        } else if !self.pending_txn_fits(producer_id, key) {
            Some(ErrorCode::COORDINATOR_NOT_AVAILABLE)
        } else {
            None
        }
    }

    /// Whether the request may commit for its group (Kafka 4.x's rules for transactional commits):
    /// INVALID_GROUP_ID for an empty id; an unknown group is created (Empty) for a negative
    /// generation and refused ILLEGAL_GENERATION otherwise; a request naming a generation, a
    /// member or an instance (v3+) must be that member of the current generation; without them
    /// (every v0–v2 request) it commits whatever the group's state. Unlike OffsetCommit, a
    /// CompletingRebalance group accepts it and no session is refreshed.
    fn txn_commit_permission(
        &mut self,
        version: i16,
        request: &TxnOffsetCommitRequest,
    ) -> Result<(), ErrorCode> {
        let group_id = request.group_id.0.as_str();
        if group_id.is_empty() {
            return Err(ErrorCode::INVALID_GROUP_ID);
        }
        if let Some(error) = self.unavailable_for(group_id) {
            return Err(error);
        }
        let (generation_id, member_id, instance_id) = if version >= GROUP_METADATA_VERSION_MIN {
            (
                request.generation_id,
                request.member_id.as_str(),
                request.group_instance_id.as_ref().map(StrBytes::as_str),
            )
        } else {
            (-1, "", None)
        };
        if !self.groups.contains_key(group_id) {
            if generation_id >= 0 {
                return Err(ErrorCode::ILLEGAL_GENERATION);
            }
            if self.groups.len() >= self.config.groups_max {
                return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE);
            }
            self.groups
                .insert(group_id.to_owned(), Group::new(group_id.to_owned()));
        }
        let group = self
            .groups
            .get(group_id)
            .ok_or(ErrorCode::UNKNOWN_SERVER_ERROR)?;
        if generation_id < 0 && group.state == GroupState::Empty {
            return Ok(());
        }
        if generation_id < 0 && member_id.is_empty() && instance_id.is_none() {
            return Ok(());
        }
        if let Some(instance) = instance_id {
            match group.static_member_id(instance) {
                None => return Err(ErrorCode::UNKNOWN_MEMBER_ID),
                Some(holder) if holder != member_id => return Err(ErrorCode::FENCED_INSTANCE_ID),
                Some(_) => {}
            }
        }
        if !group.members.contains_key(member_id) {
            return Err(ErrorCode::UNKNOWN_MEMBER_ID);
        }
        if generation_id != group.generation_id {
            return Err(ErrorCode::ILLEGAL_GENERATION);
        }
        Ok(())
    }

    /// Whether one more pending entry of `producer_id` for `key` stays within the bounds (an
    /// entry it already has pending is only updated).
    fn pending_txn_fits(&self, producer_id: i64, key: &OffsetKey) -> bool {
        let slot = (key.topic.clone(), key.partition);
        let group = self.groups.get(&key.group);
        let already = group
            .and_then(|group| group.pending_txn.get(&producer_id))
            .is_some_and(|pending| pending.offsets.contains_key(&slot));
        if already {
            return true;
        }
        let committed = group.is_some_and(|group| group.offsets.contains_key(&slot));
        self.pending_txn_count < self.config.pending_txn_offsets_max
            && (committed
                || self.offsets_count + self.pending_txn_count < self.config.committed_offsets_max)
    }

    /// Records one transactional commit as pending for `producer` (replacing one it had for the
    /// same partition), its record at `sequence` in the log, durable or not yet.
    pub(super) fn stage_txn_offset(
        &mut self,
        producer: TxnProducer,
        key: &OffsetKey,
        value: &OffsetValue,
        sequence: u64,
        durable: bool,
    ) {
        let group = self
            .groups
            .entry(key.group.clone())
            .or_insert_with(|| Group::new(key.group.clone()));
        let pending = group
            .pending_txn
            .entry(producer.producer_id)
            .or_insert_with(|| PendingTxn {
                producer_epoch: producer.producer_epoch,
                offsets: std::collections::BTreeMap::new(),
            });
        pending.producer_epoch = pending.producer_epoch.max(producer.producer_epoch);
        let committed = committed_at(value, sequence);
        let slot = (key.topic.clone(), key.partition);
        match pending.offsets.get_mut(&slot) {
            Some(entry) => {
                if entry.latest_durable {
                    entry.durable = Some(entry.latest.clone());
                }
                entry.latest = committed;
                entry.latest_durable = durable;
                if durable {
                    entry.durable = None;
                }
            }
            None => {
                let entry = PendingTxnOffset {
                    latest: committed,
                    latest_durable: durable,
                    durable: None,
                };
                pending.offsets.insert(slot, entry);
                self.pending_txn_count += 1;
            }
        }
    }

    /// The TxnOffsetCommit side of [`Coordinator::offsets_persisted`]; false when `request_id` is
    /// not a TxnOffsetCommit's. On success its records become durable pending offsets; on failure
    /// they stop being pending (unless a later commit of the producer replaced them) and the
    /// accepted partitions get the failure's error.
    pub(super) fn txn_offsets_persisted(
        &mut self,
        request_id: RequestId,
        result: Result<(), PersistError>,
    ) -> bool {
        let Some(pending) = self.pending_txn_commits.remove(&request_id) else {
            return false;
        };
        let PendingTxnCommit {
            version,
            mut response,
            producer,
            commits,
            persist_sequence,
        } = pending;
        let resigned = commits
            .first()
            .and_then(|(key, _)| self.unavailable_for(&key.group));
        let failure = match (result, resigned) {
            (Err(error), _) => Some(error.error_code()),
            (Ok(()), Some(error)) => Some(error.code()),
            (Ok(()), None) => None,
        };
        for (key, value) in &commits {
            let record = committed_at(value, persist_sequence);
            self.settle_txn_record(producer.producer_id, key, record, failure.is_none());
        }
        if let Some(error_code) = failure {
            for topic in &mut response.topics {
                for partition in &mut topic.partitions {
                    let failed = commits.iter().any(|(key, _)| {
                        key.topic == topic.name.0.as_str()
                            && key.partition == partition.partition_index
                    });
                    if failed {
                        partition.error_code = error_code;
                    }
                }
            }
        }
        if let Some((key, _)) = commits.first() {
            self.forget_if_unused(&key.group);
        }
        self.reply(request_id, version, Response::TxnOffsetCommit(response));
        true
    }

    /// Settles the pending `record` of `key`: durable, it becomes what a COMMIT makes visible
    /// (unless a later durable record of the producer already is); failed, it is forgotten and
    /// the latest earlier durable record (if any) is what stays pending. Records are compared by
    /// their place in the log, so the outcome is the log's whatever order writes finish in.
    fn settle_txn_record(
        &mut self,
        producer_id: i64,
        key: &OffsetKey,
        record: CommittedOffset,
        durable: bool,
    ) {
        let Some(group) = self.groups.get_mut(&key.group) else {
            return;
        };
        let Some(pending) = group.pending_txn.get_mut(&producer_id) else {
            return;
        };
        let slot = (key.topic.clone(), key.partition);
        let Some(entry) = pending.offsets.get_mut(&slot) else {
            return;
        };
        let sequence = record.persist_sequence;
        if entry.latest.persist_sequence == sequence {
            if durable {
                entry.latest_durable = true;
                entry.durable = None;
            } else if let Some(earlier) = entry.durable.take() {
                entry.latest = earlier;
                entry.latest_durable = true;
            } else {
                pending.offsets.remove(&slot);
                self.pending_txn_count -= 1;
                if pending.offsets.is_empty() {
                    group.pending_txn.remove(&producer_id);
                }
            }
        } else if durable
            && entry.latest.persist_sequence > sequence
            && entry
                .durable
                .as_ref()
                .is_none_or(|earlier| earlier.persist_sequence < sequence)
        {
            entry.durable = Some(record);
        }
    }

    /// An end-transaction marker of `producer_id` at `producer_epoch` was appended to
    /// `__consumer_offsets` partition `partition` and replicated (the partition's WriteTxnMarkers
    /// reports it): for every group of that partition with offsets pending for the producer, a
    /// COMMIT makes the durable ones committed (each only if its record is later in the log than
    /// the committed offset's) and an ABORT drops them. Pending offsets of a newer epoch than the
    /// marker's stay (see [`TxnCompletion::stale`]). A marker with nothing pending changes
    /// nothing (it may have been replayed at load already).
    pub fn complete_transaction(
        &mut self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        marker: MarkerType,
    ) -> TxnCompletion {
        let producer = TxnProducer {
            producer_id,
            producer_epoch,
        };
        self.resolve_txn(Some(partition), producer, marker)
    }

    /// The marker's effect on the groups of `partition` (all groups when `None`: a replay, whose
    /// log holds only its own partition's groups).
    fn resolve_txn(
        &mut self,
        partition: Option<i32>,
        producer: TxnProducer,
        marker: MarkerType,
    ) -> TxnCompletion {
        let mut completion = TxnCompletion::default();
        let group_ids: Vec<String> = self
            .groups
            .iter()
            .filter(|(_, group)| group.pending_txn.contains_key(&producer.producer_id))
            .map(|(group_id, _)| group_id.clone())
            .filter(|group_id| partition.is_none_or(|p| self.offsets_partition(group_id) == p))
            .collect();
        for group_id in group_ids {
            let Some(group) = self.groups.get_mut(&group_id) else {
                continue;
            };
            let Some(pending) = group.pending_txn.get(&producer.producer_id) else {
                continue;
            };
            if pending.producer_epoch > producer.producer_epoch {
                completion.stale += 1;
                continue;
            }
            let Some(pending) = group.pending_txn.remove(&producer.producer_id) else {
                continue;
            };
            completion.groups += 1;
            self.pending_txn_count -= pending.offsets.len();
            for ((topic, partition), entry) in pending.offsets {
                let committable = match marker {
                    MarkerType::Commit => entry.committable(),
                    MarkerType::Abort => None,
                };
                let Some(committed) = committable else {
                    completion.dropped += 1;
                    continue;
                };
                if self.commit_if_later(&group_id, topic, partition, committed) {
                    completion.applied += 1;
                } else {
                    completion.dropped += 1;
                }
            }
            self.forget_if_unused(&group_id);
        }
        completion
    }

    /// Makes `committed` the group's offset of (topic, partition) unless the committed one's
    /// record is later in the log. Whether it did.
    fn commit_if_later(
        &mut self,
        group_id: &str,
        topic: String,
        partition: i32,
        committed: CommittedOffset,
    ) -> bool {
        let Some(group) = self.groups.get_mut(group_id) else {
            return false;
        };
        match group.offsets.get_mut(&(topic.clone(), partition)) {
            Some(existing) if existing.persist_sequence > committed.persist_sequence => false,
            Some(existing) => {
                *existing = committed;
                true
            }
            None => {
                group.offsets.insert((topic, partition), committed);
                self.offsets_count += 1;
                true
            }
        }
    }

    /// Drops every producer's pending commit of `key` whose record is earlier in the log than
    /// `sequence` (a tombstone at `sequence` deletes them, as Kafka's replay of a tombstone does).
    pub(super) fn drop_pending_txn_before(&mut self, key: &OffsetKey, sequence: u64) {
        let Some(group) = self.groups.get_mut(&key.group) else {
            return;
        };
        let slot = (key.topic.clone(), key.partition);
        let mut dropped = 0;
        group.pending_txn.retain(|_, pending| {
            if pending
                .offsets
                .get(&slot)
                .is_some_and(|entry| entry.latest.persist_sequence < sequence)
            {
                pending.offsets.remove(&slot);
                dropped += 1;
            }
            !pending.offsets.is_empty()
        });
        self.pending_txn_count -= dropped;
    }

    /// One replayed log item, in log order: a plain entry takes effect, a transactional commit
    /// becomes pending (durable) for its producer, a transactional tombstone takes effect like
    /// any tombstone, a marker completes its producer's transaction, and a consumer group record
    /// goes to the consumer groups.
    pub(super) fn apply_replayed(&mut self, item: Replayed) {
        match item {
            Replayed::Entry(entry) | Replayed::Txn(_, entry @ OffsetLogEntry::Delete(_)) => {
                self.apply_entry(entry);
            }
            Replayed::Txn(producer, OffsetLogEntry::Commit(key, value)) => {
                let sequence = self.next_persist_sequence();
                self.stage_txn_offset(producer, &key, &value, sequence, true);
            }
            Replayed::Marker(producer, marker) => {
                self.resolve_txn(None, producer, marker);
            }
            Replayed::Consumer(record) => self.consumer_groups.replay(&record),
        }
    }

    /// Whether a transactional commit of (group, topic, partition) awaits its marker.
    pub fn has_pending_txn_offset(&self, group_id: &str, topic: &str, partition: i32) -> bool {
        self.groups
            .get(group_id)
            .is_some_and(|group| group.has_pending_txn(topic, partition))
    }

    /// Pending transactional offsets held, over all groups and producers.
    pub fn pending_txn_offsets(&self) -> usize {
        self.pending_txn_count
    }
}

/// A commit as the group holds it, its record at `sequence` in the log.
fn committed_at(value: &OffsetValue, sequence: u64) -> CommittedOffset {
    CommittedOffset {
        offset: value.offset,
        leader_epoch: value.leader_epoch,
        metadata: value.metadata.clone(),
        commit_timestamp_ms: value.commit_timestamp_ms,
        persist_sequence: sequence,
    }
}
