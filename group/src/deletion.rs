//! DeleteGroups (v0–v2) and OffsetDelete (v0): which groups and committed offsets may go (Kafka's
//! rules: only an Empty group is deleted, NON_EMPTY_GROUP otherwise, and a KIP-848 consumer group
//! only without members; an offset goes unless an active member of a consumer group subscribes to
//! its topic), the tombstones that make the deletion durable (they also remove transactional
//! commits of the same keys still pending, as Kafka 4.x does; a consumer group's records get
//! theirs through the consumer groups' write, `consumer_coord.rs`), and the answers.
//!
//! Must never: answer a deletion before the driver reported its tombstones durable, or let a
//! tombstone remove a commit that was handed to the driver after it.

use std::collections::BTreeSet;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, OffsetDeleteRequest, OffsetDeleteResponse,
};
use skiff_protocol::codec::Reader;
use skiff_protocol::error_code::ErrorCode;

use super::consumer_coord::ConsumerWriteId;
use super::coordinator::{Coordinator, Output, PersistError, RequestId, RequestMeta, Response};
use super::offsets_log::OffsetKey;
use super::state::{Group, GroupState};

/// The protocol type of Kafka's consumers: only its member metadata is a subscription that
/// OffsetDelete can read.
const CONSUMER_PROTOCOL_TYPE: &str = "consumer";
/// Topics read from one member's subscription at most; a longer list is treated as unknown
/// (every topic counts as subscribed, the safe answer).
const SUBSCRIBED_TOPICS_PER_MEMBER_MAX: usize = 100_000;

/// A deletion waiting for its tombstones to become durable.
#[derive(Debug, Clone)]
pub(super) struct PendingDelete {
    version: i16,
    /// Only offsets handed to the driver before this sequence are removed.
    persist_sequence: u64,
    keys: Vec<OffsetKey>,
    kind: PendingKind,
    /// The offsets' tombstones' result (`None`: not back yet).
    offsets: Option<Result<(), PersistError>>,
    /// Consumer groups' tombstone writes not back yet (DeleteGroups of empty consumer groups).
    consumer_writes: BTreeSet<ConsumerWriteId>,
    /// Consumer groups whose tombstones could not be written, with the error they get.
    consumer_errors: Vec<(String, i16)>,
}

#[derive(Debug, Clone)]
enum PendingKind {
    /// The answer, with the refused groups' errors in; the groups to forget once durable.
    DeleteGroups {
        response: DeleteGroupsResponse,
        deleted: Vec<String>,
    },
    /// The answer, with every partition's error in (0 for the deleted ones); how long the group
    /// stays if it is left with nothing.
    OffsetDelete {
        response: OffsetDeleteResponse,
        kept_until_ms: i64,
    },
}

/// What DeleteGroups deletes of one group id beside its committed offsets.
struct DeletionTarget {
    /// A consumer group's records (tombstones written as the group's records).
    consumer: bool,
}

/// The offsets of `group` to tombstone: the committed ones and those pending in transactions (as
/// Kafka 4.x does: the tombstone removes them, and their marker then finds nothing).
fn tombstone_keys(group: &Group) -> Vec<OffsetKey> {
    let pending = group
        .pending_txn
        .values()
        .flat_map(|pending| pending.offsets.keys());
    let slots: BTreeSet<&(String, i32)> = group.offsets.keys().chain(pending).collect();
    slots
        .into_iter()
        .map(|(topic, partition)| OffsetKey {
            group: group.group_id.clone(),
            topic: topic.clone(),
            partition: *partition,
        })
        .collect()
}

impl Coordinator {
    /// DeleteGroups, every version: an Empty group (offsets only, or members all gone) is deleted
    /// with its committed offsets; a group with members gets NON_EMPTY_GROUP, an unknown one
    /// GROUP_ID_NOT_FOUND. An empty consumer group goes as Kafka 4.1.1 deletes it: the
    /// tombstones of its records (group metadata, target assignment, patterns) and of its
    /// offsets. The reply comes once every tombstone is durable ([`Coordinator::deletes_persisted`]
    /// and [`Coordinator::consumer_records_persisted`]), at once if none was needed.
    pub fn handle_delete_groups(&mut self, meta: RequestMeta, request: DeleteGroupsRequest) {
        let mut response = DeleteGroupsResponse::default();
        let mut deleted = Vec::new();
        let mut keys = Vec::new();
        let mut consumer_deleted = Vec::new();
        for group_id in &request.groups_names {
            let mut result = DeletableGroupResult::default();
            result.group_id = group_id.clone();
            match self.deletion_of(group_id.0.as_str()) {
                Err(error) => result.error_code = error.code(),
                Ok(target) => {
                    if target.consumer {
                        consumer_deleted.push(group_id.0.to_string());
                    }
                    if let Some(group) = self.groups.get(group_id.0.as_str()) {
                        keys.extend(tombstone_keys(group));
                        deleted.push(group.group_id.clone());
                    }
                }
            }
            response.results.push(result);
        }
        let writes = consumer_deleted
            .iter()
            .filter_map(|group_id| self.write_consumer_group_deletion(group_id, meta.request_id))
            .collect();
        let kind = PendingKind::DeleteGroups { response, deleted };
        self.start_delete(meta, keys, kind, writes);
    }

    /// What DeleteGroups may delete of `group_id`, Kafka's checks: a consumer group only without
    /// members (`ConsumerGroup.validateDeleteGroup`), a classic group only when Empty.
    fn deletion_of(&self, group_id: &str) -> Result<DeletionTarget, ErrorCode> {
        if let Some(error) = self.unavailable_for(group_id) {
            return Err(error);
        }
        if let Some(consumer) = self.consumer_groups.group(group_id) {
            if !consumer.members().is_empty() {
                return Err(ErrorCode::NON_EMPTY_GROUP);
            }
            // Its last member's removal is being written: the group is not settled yet (Kafka's
            // coordinator would run the deletion after that write; clients retry this error).
            if self.consumer_group_busy(group_id) {
                return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE);
            }
            return Ok(DeletionTarget { consumer: true });
        }
        match self.groups.get(group_id) {
            None => Err(ErrorCode::GROUP_ID_NOT_FOUND),
            Some(group) if group.state != GroupState::Empty => Err(ErrorCode::NON_EMPTY_GROUP),
            Some(_) => Ok(DeletionTarget { consumer: false }),
        }
    }

    /// OffsetDelete (at `now_ms`): the group-level checks (unknown group: GROUP_ID_NOT_FOUND; a
    /// non-empty group of another protocol type than "consumer": NON_EMPTY_GROUP), then per
    /// partition: GROUP_SUBSCRIBED_TO_TOPIC when an active member subscribes to the topic,
    /// otherwise the offset goes (0 also when none was committed, as Kafka). `refused` holds the
    /// partitions the handler already answered (authorization, unknown topics) with their error;
    /// they are reported as such and never deleted. A group left without offsets stays (Empty) for
    /// `emptied_group_retention_ms`, as in Kafka 4.x, so that DeleteGroups still finds it.
    pub fn handle_offset_delete(
        &mut self,
        now_ms: i64,
        meta: RequestMeta,
        request: OffsetDeleteRequest,
        refused: impl Fn(&str, i32) -> Option<i16>,
    ) {
        let mut response = OffsetDeleteResponse::default();
        let group_id = request.group_id.0.as_str();
        let group = match self.unavailable_for(group_id) {
            Some(error) => Err(error),
            None => self
                .groups
                .get(group_id)
                .ok_or(ErrorCode::GROUP_ID_NOT_FOUND),
        };
        // A consumer group's offsets sit in an Empty classic entry; its subscriptions are the
        // consumer group's (Kafka 4.1.1's `ConsumerGroup.isSubscribedToTopic`).
        let consumer = self.consumer_groups.group(group_id);
        let subscribed = match group {
            Err(error) => return self.reply_offset_delete_error(meta, response, error),
            Ok(_) if consumer.is_some() => consumer.map(|group| group.subscribed_topics()),
            Ok(group) if group.state == GroupState::Empty => Some(BTreeSet::new()),
            Ok(group) if group.protocol_type.as_deref() == Some(CONSUMER_PROTOCOL_TYPE) => {
                subscribed_topics(group)
            }
            Ok(_) => {
                let error = ErrorCode::NON_EMPTY_GROUP;
                return self.reply_offset_delete_error(meta, response, error);
            }
        };
        let is_subscribed = |topic: &str| {
            subscribed
                .as_ref()
                .is_none_or(|topics| topics.contains(topic))
        };
        let mut keys = Vec::new();
        for topic in &request.topics {
            let mut topic_response = OffsetDeleteResponseTopic::default();
            topic_response.name = topic.name.clone();
            let name = topic.name.0.as_str();
            for partition in &topic.partitions {
                let index = partition.partition_index;
                let mut partition_response = OffsetDeleteResponsePartition::default();
                partition_response.partition_index = index;
                if let Some(code) = refused(name, index) {
                    partition_response.error_code = code;
                } else if is_subscribed(name) {
                    partition_response.error_code = ErrorCode::GROUP_SUBSCRIBED_TO_TOPIC.code();
                } else if self.holds_offset(group_id, name, index) {
                    keys.push(OffsetKey {
                        group: group_id.to_owned(),
                        topic: name.to_owned(),
                        partition: index,
                    });
                }
                topic_response.partitions.push(partition_response);
            }
            response.topics.push(topic_response);
        }
        let kind = PendingKind::OffsetDelete {
            response,
            kept_until_ms: now_ms.saturating_add(self.config.emptied_group_retention_ms),
        };
        self.start_delete(meta, keys, kind, BTreeSet::new());
    }

    fn reply_offset_delete_error(
        &mut self,
        meta: RequestMeta,
        mut response: OffsetDeleteResponse,
        error: ErrorCode,
    ) {
        response.error_code = error.code();
        let reply = Response::OffsetDelete(response);
        self.reply(meta.request_id, meta.version, reply);
    }

    /// Whether the group has an offset of the partition to tombstone: committed, or pending in a
    /// transaction.
    fn holds_offset(&self, group_id: &str, topic: &str, partition: i32) -> bool {
        self.committed_offset(group_id, topic, partition).is_some()
            || self.has_pending_txn_offset(group_id, topic, partition)
    }

    /// Hands the offsets' tombstones to the driver (the consumer groups' `consumer_writes` were
    /// handed to it already), or, with nothing to wait for, finishes at once.
    fn start_delete(
        &mut self,
        meta: RequestMeta,
        keys: Vec<OffsetKey>,
        kind: PendingKind,
        consumer_writes: BTreeSet<ConsumerWriteId>,
    ) {
        let persist_sequence = self.next_persist_sequence();
        let offsets = keys.is_empty().then_some(Ok(()));
        let pending = PendingDelete {
            version: meta.version,
            persist_sequence,
            keys,
            kind,
            offsets,
            consumer_writes,
            consumer_errors: Vec::new(),
        };
        if pending.offsets.is_none() {
            self.outputs.push_back(Output::PersistOffsetDeletes {
                request_id: meta.request_id,
                keys: pending.keys.clone(),
            });
        }
        self.pending_deletes.insert(meta.request_id, pending);
        self.maybe_finish_delete(meta.request_id);
    }

    /// The driver's answer to [`Output::PersistOffsetDeletes`]: on success the offsets (and the
    /// deleted groups, if still empty) go and the request is answered (once its consumer groups'
    /// tombstones are durable too); on failure nothing changes and the affected groups or
    /// partitions get the failure's error. An unknown request id is ignored.
    pub fn deletes_persisted(&mut self, request_id: RequestId, result: Result<(), PersistError>) {
        if let Some(pending) = self.pending_deletes.get_mut(&request_id) {
            pending.offsets = Some(result);
            self.maybe_finish_delete(request_id);
        }
    }

    /// A consumer group's tombstones of DeleteGroups `request_id` were written (`error`: with
    /// that error, the group is back as it was).
    pub(super) fn consumer_deletion_written(
        &mut self,
        request_id: RequestId,
        write: ConsumerWriteId,
        group_id: &str,
        error: Option<i16>,
    ) {
        if let Some(pending) = self.pending_deletes.get_mut(&request_id) {
            pending.consumer_writes.remove(&write);
            if let Some(code) = error {
                pending.consumer_errors.push((group_id.to_owned(), code));
            }
            self.maybe_finish_delete(request_id);
        }
    }

    /// Answers a deletion once every write it waits for is back.
    fn maybe_finish_delete(&mut self, request_id: RequestId) {
        let done = self
            .pending_deletes
            .get(&request_id)
            .is_some_and(|pending| pending.offsets.is_some() && pending.consumer_writes.is_empty());
        if let Some(pending) = done
            .then(|| self.pending_deletes.remove(&request_id))
            .flatten()
        {
            let result = pending.offsets.unwrap_or(Ok(()));
            self.finish_delete(request_id, pending, result);
        }
    }

    fn finish_delete(
        &mut self,
        request_id: RequestId,
        pending: PendingDelete,
        result: Result<(), PersistError>,
    ) {
        let PendingDelete {
            version,
            persist_sequence,
            keys,
            kind,
            consumer_errors,
            ..
        } = pending;
        if result.is_ok() {
            for key in &keys {
                self.remove_offset_before(key, persist_sequence);
            }
        }
        let response = match kind {
            PendingKind::DeleteGroups { response, deleted } => Response::DeleteGroups(
                self.delete_groups_answer(response, &deleted, result, consumer_errors),
            ),
            PendingKind::OffsetDelete {
                mut response,
                kept_until_ms,
            } => {
                if let Err(error) = result {
                    let failed: BTreeSet<(&str, i32)> = keys
                        .iter()
                        .map(|key| (key.topic.as_str(), key.partition))
                        .collect();
                    for topic in &mut response.topics {
                        for partition in &mut topic.partitions {
                            if failed.contains(&(topic.name.0.as_str(), partition.partition_index))
                            {
                                partition.error_code = error.error_code();
                            }
                        }
                    }
                }
                if let Some(group) = keys.first().and_then(|key| self.groups.get_mut(&key.group)) {
                    if result.is_ok() && group.offsets.is_empty() {
                        group.kept_until_ms = Some(kept_until_ms);
                    }
                }
                Response::OffsetDelete(response)
            }
        };
        self.reply(request_id, version, response);
    }

    /// DeleteGroups' answer once its writes are back: the classic entries (offsets) deleted go
    /// unless their tombstones failed (then those groups get the failure's error), and consumer
    /// groups whose tombstones failed get that write's error.
    fn delete_groups_answer(
        &mut self,
        mut response: DeleteGroupsResponse,
        deleted: &[String],
        result: Result<(), PersistError>,
        consumer_errors: Vec<(String, i16)>,
    ) -> DeleteGroupsResponse {
        let mut failed: Vec<(String, i16)> = match result {
            Ok(()) => {
                for group_id in deleted {
                    self.forget_deleted_group(group_id);
                }
                Vec::new()
            }
            Err(error) => deleted
                .iter()
                .map(|group_id| (group_id.clone(), error.error_code()))
                .collect(),
        };
        failed.extend(consumer_errors);
        for (group_id, code) in failed {
            for group in &mut response.results {
                if group.group_id.0.as_str() == group_id && group.error_code == 0 {
                    group.error_code = code;
                }
            }
        }
        response
    }

    /// Removes one committed offset unless it was handed to the driver after the tombstone (a
    /// commit that landed meanwhile is newer than the deletion and stays, as on replay); the same
    /// for the transactional commits of the key pending for any producer.
    fn remove_offset_before(&mut self, key: &OffsetKey, persist_sequence: u64) {
        self.drop_pending_txn_before(key, persist_sequence);
        let Some(group) = self.groups.get_mut(&key.group) else {
            return;
        };
        let slot = (key.topic.clone(), key.partition);
        if group
            .offsets
            .get(&slot)
            .is_some_and(|committed| committed.persist_sequence < persist_sequence)
        {
            group.offsets.remove(&slot);
            self.offsets_count -= 1;
        }
    }

    /// Forgets a deleted group if it is still Empty without members (member ids handed out but
    /// not yet used go with it, as in Kafka, whose deleted group is dead; so does a retention
    /// after an OffsetDelete); a group that gained members or offsets meanwhile stays.
    fn forget_deleted_group(&mut self, group_id: &str) {
        let empty = self.groups.get(group_id).is_some_and(|group| {
            group.state == GroupState::Empty
                && group.members.is_empty()
                && group.offsets.is_empty()
                && group.pending_txn.is_empty()
        });
        if empty {
            self.groups.remove(group_id);
        }
    }
}

/// The topics the members of a consumer group subscribe to, read from each member's metadata for
/// the group's chosen protocol (Kafka's `ConsumerProtocolSubscription`: an int16 version, then the
/// topic array in every version). `None` when that cannot be known (no protocol chosen yet, no
/// members, or metadata that is not a subscription): callers then treat every topic as
/// subscribed, as Kafka does.
fn subscribed_topics(group: &Group) -> Option<BTreeSet<String>> {
    let protocol = group.protocol_name.as_deref()?;
    if group.members.is_empty() {
        return None;
    }
    let mut topics = BTreeSet::new();
    for member in group.members.values() {
        let metadata = member.metadata_for(protocol)?;
        let mut reader = Reader::new(metadata);
        let version = reader.i16().ok()?;
        if version < 0 {
            return None;
        }
        // Each topic name takes at least its 2-byte length.
        let count = reader
            .array_len(2, SUBSCRIBED_TOPICS_PER_MEMBER_MAX)
            .ok()??;
        for _ in 0..count {
            topics.insert(reader.string().ok()?.to_owned());
        }
    }
    Some(topics)
}
