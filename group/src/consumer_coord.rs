//! The [`Coordinator`]'s entry points for KIP-848 consumer groups: ConsumerGroupHeartbeat and
//! ConsumerGroupDescribe routed by group id between the classic groups and
//! [`crate::consumer::ConsumerGroups`], the heartbeat's records handed to the driver
//! ([`Output::PersistConsumerRecords`]) and its reply sent only once they are durable
//! ([`Coordinator::consumer_records_persisted`]), and the expiry records of the tick.
//!
//! A failed write rolls the group back to its state before the requests it carries. That is
//! correct only if nothing else was applied to the group meanwhile, so each consumer group has
//! at most one write in flight: a heartbeat for a group whose write is in flight waits (parked,
//! bounded) until the write's result, and the tick leaves that group alone until then. The
//! alternative, reloading the group from the durable log, would need the log or a durable copy
//! of every group here; the rollback needs one clone of the group per write, which the core's
//! heartbeat makes anyway. A heartbeat that writes nothing is answered at once unless a write of
//! its group is in flight (then it waits like the others, so no reply shows state that is not
//! durable yet, as Kafka's runtime completes such a read only after the last write is committed).
//!
//! When a group's write has its result, the heartbeats parked behind it all run, in arrival
//! order, and their records go out as ONE write (one batch: a replay sees all of them or none),
//! as Kafka's coordinator runtime batches the records of many requests into one append. Each of
//! them is answered by that write's result; a failure puts the group back as it was before the
//! first of them and answers each with the write's error. Those that run before any of them
//! wrote are answered at once, as a heartbeat with no write in flight is. A combined write stays
//! within [`CONSUMER_WRITE_BYTES_MAX`]: the heartbeat that would take it over is undone and
//! waits, first in line, for the next write.
//!
//! Routing, as Kafka 4.1.1's `GroupMetadataManager` (`getOrMaybeCreateConsumerGroup`,
//! `consumerGroup`): a heartbeat for a group id held by a classic group is refused with
//! GROUP_ID_NOT_FOUND ("Group <id> is not a consumer group."), except a joining heartbeat
//! (epoch 0): it takes over an Empty classic group (`maybeDeleteEmptyClassicGroup`; Skiff writes
//! no classic group record, so there is nothing to delete, and the group's committed offsets stay
//! with the group id, as Kafka keeps them), and it upgrades a non-empty one when
//! `validateOnlineUpgrade` allows (the policy, the consumer protocol type, the size; otherwise
//! Kafka's message why not), the conversion's records going out in the heartbeat's write
//! (`migration.rs`). A consumer-protocol member's leave that leaves only classic members, or a
//! classic static member's JoinGroup taking the last one's place, downgrades the group when the
//! policy allows. Classic requests on a consumer group are
//! `migration.rs`'s and ride the same writes: the parked requests are of either kind.

//! Must never: reply to a heartbeat before its records are durable, keep a change whose write
//! failed, or have two writes of one group in flight.

use std::collections::{BTreeMap, VecDeque};

use skiff_protocol::error_code::ErrorCode;
use skiff_protocol::responses::consumer_group::{
    member_type, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatResponse, DescribedGroup,
    DescribedMember, DescribedTopicPartitions, HeartbeatTopicPartitions,
    DESCRIBE_MEMBER_TYPE_VERSION_MIN,
};

use super::consumer::group::ConsumerGroup;
use super::consumer::{
    epochs, Assignment, ConsumerRecord, HeartbeatError, HeartbeatRequest, MemberDescription,
    TopicImage,
};
use super::coordinator::{Coordinator, Output, PersistError, RequestId, RequestMeta, Response};
use super::state::GroupState;

/// The coordinator's handle for one write of consumer group records; it comes back in
/// [`Coordinator::consumer_records_persisted`].
pub type ConsumerWriteId = u64;

/// Heartbeats waiting for their group's write, over all groups. A member has one heartbeat in
/// flight at a time, so this holds a few groups' worth of members (`group.consumer.max.size` is
/// bounded likewise); beyond it a heartbeat is answered COORDINATOR_NOT_AVAILABLE and retried.
pub const PARKED_HEARTBEATS_MAX: usize =
    4 * crate::consumer::group::CONSUMER_GROUP_MAX_SIZE_DEFAULT;

/// The encoded size (keys, values and the records' framing) one combined write of parked
/// heartbeats' records stays within: a quarter of the offsets log's default batch bound
/// (`message.max.bytes`, 1 MiB + 12), leaving room for a topic configured below it. A single
/// heartbeat's records go out alone whatever their size, as before batching.
pub const CONSUMER_WRITE_BYTES_MAX: usize = 256 * 1024;

/// Framing a v2 record adds to its key and value, at most (length, attributes, timestamp and
/// offset deltas, key and value lengths, header count, as varints).
const RECORD_FRAMING_BYTES_MAX: usize = 32;

/// How long after a failed write of expiry records the expiry is tried again (Kafka's
/// coordinator timer retries a failed timeout operation after 500 ms).
pub const EXPIRY_RETRY_BACKOFF_MS: i64 = 500;

/// A write of one group's records whose result has not come back.
#[derive(Debug)]
pub(super) struct ConsumerWrite {
    group_id: String,
    /// The group before the write (`None`: it did not exist), put back if the write fails.
    before: Option<ConsumerGroup>,
    /// The heartbeats answered by the write's result, in arrival order (none for the tick's
    /// expiries and a deletion).
    replies: Vec<HeartbeatReply>,
    /// The DeleteGroups waiting for this write (the group's tombstones), if any.
    delete: Option<RequestId>,
    /// The group's partition was unloaded while writing: the result touches no group.
    orphaned: bool,
}

/// A heartbeat's reply waiting for a write's result: request, version, the answer if it succeeds.
type HeartbeatReply = (RequestId, i16, Response);

/// What one heartbeat did, before anything is answered or written.
pub(super) enum HeartbeatRun {
    /// Refused; the group is unchanged.
    Refused(Response),
    /// Applied to the group (`before` it, boxed: a group is large); `records` may be empty.
    Applied {
        before: Box<Option<ConsumerGroup>>,
        records: Vec<ConsumerRecord>,
        response: Response,
    },
}

/// Parked heartbeats run together for one write: the group before the first that wrote, the
/// replies waiting for the write, the records and their encoded size.
#[derive(Default)]
struct HeartbeatBatch {
    before: Option<Option<ConsumerGroup>>,
    replies: Vec<HeartbeatReply>,
    records: Vec<ConsumerRecord>,
    bytes: usize,
}

/// A request waiting for its group's write.
#[derive(Debug)]
pub(super) struct ParkedHeartbeat {
    pub(super) meta: RequestMeta,
    pub(super) request: ParkedRequest,
}

/// What a parked request asks.
#[derive(Debug)]
pub(super) enum ParkedRequest {
    /// ConsumerGroupHeartbeat.
    Consumer(HeartbeatRequest),
    /// A classic member's request to the consumer group (`migration.rs`).
    Classic(crate::migration::ClassicRequest),
}

/// The consumer groups' side of the coordinator: the topic image, writes in flight, parked
/// heartbeats.
#[derive(Debug, Default)]
pub(super) struct ConsumerSide {
    pub(super) topics: TopicImage,
    /// Classic groups upgraded by a write in flight, as they were: put back if it fails.
    pub(super) upgraded: BTreeMap<String, crate::state::Group>,
    /// Consumer groups downgraded by a write in flight: their classic membership goes if it fails.
    pub(super) downgraded: std::collections::BTreeSet<String>,
    writes: BTreeMap<ConsumerWriteId, ConsumerWrite>,
    /// Group → its write in flight.
    busy: BTreeMap<String, ConsumerWriteId>,
    parked: BTreeMap<String, VecDeque<ParkedHeartbeat>>,
    pub(super) parked_count: usize,
    next_write: ConsumerWriteId,
    /// The latest time seen (parked heartbeats run at it when their group's write is done).
    pub(super) now_ms: i64,
    /// A partition was loaded: its members get sessions at the next tick.
    activation_pending: bool,
}

impl Coordinator {
    /// The cluster's topics, for subscriptions and assignments (the driver sets it at start and
    /// whenever a topic is created, deleted or grows, bumping [`TopicImage::version`]).
    pub fn set_topic_image(&mut self, topics: TopicImage) {
        self.consumer.topics = topics;
    }

    /// ConsumerGroupHeartbeat (any version; `request` decoded from it). Answered at once when it
    /// is refused or writes nothing; otherwise an [`Output::PersistConsumerRecords`] comes out
    /// and the reply follows [`Coordinator::consumer_records_persisted`].
    pub fn handle_consumer_group_heartbeat(
        &mut self,
        meta: RequestMeta,
        request: HeartbeatRequest,
        now_ms: i64,
    ) {
        self.consumer.now_ms = self.consumer.now_ms.max(now_ms);
        if let Some(error) = self.unavailable_for(&request.group_id) {
            return self.reply_heartbeat_error(&meta, error.code(), None);
        }
        if self.consumer.busy.contains_key(&request.group_id) {
            if self.consumer.parked_count >= PARKED_HEARTBEATS_MAX {
                let code = ErrorCode::COORDINATOR_NOT_AVAILABLE.code();
                return self.reply_heartbeat_error(&meta, code, None);
            }
            let group_id = request.group_id.clone();
            let request = ParkedRequest::Consumer(request);
            return self.park(group_id, ParkedHeartbeat { meta, request });
        }
        self.run_heartbeat(meta, &ParkedRequest::Consumer(request), now_ms);
    }

    /// Queues a request behind its group's write in flight (the caller checked the bound).
    pub(super) fn park(&mut self, group_id: String, parked: ParkedHeartbeat) {
        self.consumer.parked_count += 1;
        let queue = self.consumer.parked.entry(group_id);
        queue.or_default().push_back(parked);
    }

    /// Runs a request with no write of its group in flight: answered at once unless it writes.
    pub(super) fn run_heartbeat(
        &mut self,
        meta: RequestMeta,
        request: &ParkedRequest,
        now_ms: i64,
    ) {
        let group_id = match request {
            ParkedRequest::Consumer(request) => request.group_id.clone(),
            ParkedRequest::Classic(request) => request.group_id().to_owned(),
        };
        match self.apply_parked(&meta, request, now_ms) {
            HeartbeatRun::Applied {
                before,
                records,
                response,
            } if !records.is_empty() => {
                let reply = (meta.request_id, meta.version, response);
                self.write_consumer_records(group_id, *before, vec![reply], records);
            }
            HeartbeatRun::Refused(response) | HeartbeatRun::Applied { response, .. } => {
                self.reply(meta.request_id, meta.version, response);
            }
        }
    }

    /// Applies a parked request of either kind.
    fn apply_parked(
        &mut self,
        meta: &RequestMeta,
        request: &ParkedRequest,
        now_ms: i64,
    ) -> HeartbeatRun {
        match request {
            ParkedRequest::Consumer(request) => self.apply_heartbeat(meta, request, now_ms),
            ParkedRequest::Classic(request) => self.apply_classic(meta, request, now_ms),
        }
    }

    /// Applies a heartbeat to its group; nothing is answered or written yet.
    fn apply_heartbeat(
        &mut self,
        meta: &RequestMeta,
        request: &HeartbeatRequest,
        now_ms: i64,
    ) -> HeartbeatRun {
        let refused = |code: i16, message: Option<String>| {
            HeartbeatRun::Refused(Response::ConsumerGroupHeartbeat(heartbeat_error(
                code, message,
            )))
        };
        if let Some(error) = self.unavailable_for(&request.group_id) {
            return refused(error.code(), None);
        }
        if let Err(error) = self.route_heartbeat(request, meta.version) {
            return refused(error.code(), Some(error.message().to_owned()));
        }
        let before = Box::new(self.consumer_groups.group(&request.group_id).cloned());
        let upgraded = match self.maybe_upgrade(request, now_ms) {
            Ok(records) => records,
            Err(error) => return refused(error.code(), Some(error.message().to_owned())),
        };
        if let Some(run) = self.leave_downgrading(request, &before, now_ms) {
            return run;
        }
        let fresh_member_id = if request.member_id.is_empty() {
            self.new_member_id(&meta.client_id)
        } else {
            String::new()
        };
        let topics = std::mem::take(&mut self.consumer.topics);
        let result = self.consumer_groups.heartbeat(
            request,
            meta.version,
            now_ms,
            &topics,
            &fresh_member_id,
        );
        self.consumer.topics = topics;
        match result {
            Ok(outcome) => HeartbeatRun::Applied {
                before,
                records: upgraded.into_iter().chain(outcome.records).collect(),
                response: Response::ConsumerGroupHeartbeat(heartbeat_response(outcome.response)),
            },
            Err(error) => {
                // An upgrade made for this heartbeat is undone with it (Kafka discards both).
                self.undo_upgrade(&request.group_id);
                refused(error.code(), Some(error.message().to_owned()))
            }
        }
    }

    /// A consumer-protocol member's leave (epoch -1) after which only classic members remain: the
    /// group is downgraded instead of the member fenced (Kafka's `consumerGroupFenceMember`).
    fn leave_downgrading(
        &mut self,
        request: &HeartbeatRequest,
        before: &Option<ConsumerGroup>,
        now_ms: i64,
    ) -> Option<HeartbeatRun> {
        if request.member_epoch != epochs::LEAVE {
            return None;
        }
        let group = before.as_ref()?;
        let member = match &request.instance_id {
            Some(instance) => group.static_member(instance)?,
            None => group.members().get(&request.member_id)?,
        };
        if member.member_id != request.member_id {
            return None;
        }
        let leaving = std::collections::BTreeSet::from([member.member_id.clone()]);
        let records = self.maybe_downgrade(&request.group_id, &leaving, now_ms)?;
        let response = ConsumerGroupHeartbeatResponse {
            member_id: Some(request.member_id.clone()),
            member_epoch: epochs::LEAVE,
            ..ConsumerGroupHeartbeatResponse::default()
        };
        Some(HeartbeatRun::Applied {
            before: Box::new(before.clone()),
            records,
            response: Response::ConsumerGroupHeartbeat(response),
        })
    }

    /// Kafka's refusals of a heartbeat by the kind of group that holds its id (module doc).
    fn route_heartbeat(
        &self,
        request: &HeartbeatRequest,
        version: i16,
    ) -> Result<(), HeartbeatError> {
        self.consumer_groups.check_heartbeat(request, version)?;
        let group_id = &request.group_id;
        if self.consumer_groups.group(group_id).is_some() {
            return Ok(());
        }
        let leaving =
            request.member_epoch == epochs::LEAVE || request.member_epoch == epochs::LEAVE_STATIC;
        let not_found = |message: String| Err(HeartbeatError::GroupIdNotFound(message));
        match self.groups.get(group_id) {
            // `consumerGroupLeave` looks the group up with `consumerGroup`, whose message this is.
            None if leaving => not_found(format!("Group {group_id} not found.")),
            None => Ok(()),
            Some(classic) if request.member_epoch == epochs::JOIN => {
                if classic.state == GroupState::Empty {
                    Ok(())
                } else {
                    // Kafka's `validateOnlineUpgrade`; the upgrade itself is `maybe_upgrade`.
                    self.consumer_groups.check_upgrade(
                        group_id,
                        classic.protocol_type.as_deref(),
                        classic.members.len(),
                    )
                }
            }
            Some(_) => not_found(format!("Group {group_id} is not a consumer group.")),
        }
    }

    /// Hands a group's records to the driver; the group is busy until their result.
    pub(super) fn write_consumer_records(
        &mut self,
        group_id: String,
        before: Option<ConsumerGroup>,
        replies: Vec<HeartbeatReply>,
        records: Vec<ConsumerRecord>,
    ) {
        self.consumer.next_write += 1;
        let write = self.consumer.next_write;
        let partition = self.offsets_partition(&group_id);
        self.consumer.busy.insert(group_id.clone(), write);
        let pending = ConsumerWrite {
            group_id,
            before,
            replies,
            delete: None,
            orphaned: false,
        };
        self.consumer.writes.insert(write, pending);
        self.outputs.push_back(Output::PersistConsumerRecords {
            write,
            partition,
            records,
        });
    }

    /// DeleteGroups of an empty consumer group (Kafka's `validateDeleteGroup` passed): its
    /// tombstones are applied and handed to the driver; the DeleteGroups `request_id` is answered
    /// once they are durable (and its offsets' tombstones too). Returns the write.
    pub(super) fn write_consumer_group_deletion(
        &mut self,
        group_id: &str,
        request_id: RequestId,
    ) -> Option<ConsumerWriteId> {
        let before = self.consumer_groups.group(group_id).cloned();
        let records = self.consumer_groups.delete(group_id).ok()?;
        self.write_consumer_records(group_id.to_owned(), before, Vec::new(), records);
        let write = self.consumer.next_write;
        if let Some(pending) = self.consumer.writes.get_mut(&write) {
            pending.delete = Some(request_id);
        }
        Some(write)
    }

    /// Whether a write of `group_id`'s records is in flight.
    pub(super) fn consumer_group_busy(&self, group_id: &str) -> bool {
        self.consumer.busy.contains_key(group_id)
    }

    /// The driver's result for an [`Output::PersistConsumerRecords`]: on success its heartbeats
    /// (if any) are answered; on failure the group goes back to its state before the write and
    /// each heartbeat gets Kafka's error for a failed coordinator write. The heartbeats parked
    /// behind the write then run, their records as one write.
    pub fn consumer_records_persisted(
        &mut self,
        write: ConsumerWriteId,
        result: Result<(), PersistError>,
    ) {
        let Some(pending) = self.consumer.writes.remove(&write) else {
            return;
        };
        let ConsumerWrite {
            group_id,
            before,
            replies,
            delete,
            orphaned,
        } = pending;
        let error_code = if orphaned {
            // The group went with its partition: its next leader loads whatever is durable.
            Some(
                self.unavailable_for(&group_id)
                    .unwrap_or(ErrorCode::NOT_COORDINATOR)
                    .code(),
            )
        } else {
            self.consumer.busy.remove(&group_id);
            if result.is_ok() {
                self.consumer.upgraded.remove(&group_id);
                self.consumer.downgraded.remove(&group_id);
            }
            result.err().map(|error| {
                self.undo_downgrade(&group_id);
                self.consumer_groups.restore(&group_id, before);
                self.undo_upgrade(&group_id);
                if replies.is_empty() {
                    let retry_ms = self.consumer.now_ms.saturating_add(EXPIRY_RETRY_BACKOFF_MS);
                    self.consumer_groups.postpone_deadlines(&group_id, retry_ms);
                }
                heartbeat_write_error(error)
            })
        };
        if let Some(request_id) = delete {
            self.consumer_deletion_written(request_id, write, &group_id, error_code);
        }
        for (request_id, version, response) in replies {
            let response = match error_code {
                Some(code) => crate::migration::failed_response(&response, version, code),
                None => response,
            };
            self.reply(request_id, version, response);
        }
        self.run_parked(&group_id);
    }

    /// Runs the heartbeats parked for `group_id` (none while a write of it is in flight), in
    /// arrival order, their records as one write within [`CONSUMER_WRITE_BYTES_MAX`] (module doc).
    fn run_parked(&mut self, group_id: &str) {
        if self.consumer.busy.contains_key(group_id) {
            return;
        }
        let mut batch = HeartbeatBatch::default();
        while let Some(parked) = self.unpark(group_id) {
            let now_ms = self.consumer.now_ms;
            let run = self.apply_parked(&parked.meta, &parked.request, now_ms);
            let reply = |response| (parked.meta.request_id, parked.meta.version, response);
            match run {
                HeartbeatRun::Applied {
                    before,
                    records,
                    response,
                } if !records.is_empty() => {
                    let bytes = records_bytes(&records);
                    let count = batch.records.len() + records.len();
                    let full = batch.bytes.saturating_add(bytes) > CONSUMER_WRITE_BYTES_MAX
                        || count > crate::offsets_log::RECORDS_PER_BATCH_MAX;
                    if full && !batch.records.is_empty() {
                        // Undone; it runs first behind this write.
                        self.consumer_groups.restore(group_id, *before);
                        self.repark(group_id, parked);
                        break;
                    }
                    batch.before.get_or_insert(*before);
                    batch.replies.push(reply(response));
                    batch.records.extend(records);
                    batch.bytes = batch.bytes.saturating_add(bytes);
                }
                HeartbeatRun::Refused(response) | HeartbeatRun::Applied { response, .. } => {
                    if batch.records.is_empty() {
                        let (request_id, version, response) = reply(response);
                        self.reply(request_id, version, response);
                    } else {
                        // It may show what the batch changed: answered once that is durable.
                        batch.replies.push(reply(response));
                    }
                }
            }
        }
        if let Some(before) = batch.before {
            let group_id = group_id.to_owned();
            self.write_consumer_records(group_id, before, batch.replies, batch.records);
        }
    }

    /// The first heartbeat parked for `group_id`, taken off its queue.
    fn unpark(&mut self, group_id: &str) -> Option<ParkedHeartbeat> {
        let queue = self.consumer.parked.get_mut(group_id)?;
        let parked = queue.pop_front();
        if queue.is_empty() {
            self.consumer.parked.remove(group_id);
        }
        if parked.is_some() {
            self.consumer.parked_count -= 1;
        }
        parked
    }

    /// Puts a heartbeat taken by [`Coordinator::unpark`] back at the head of its queue.
    fn repark(&mut self, group_id: &str, parked: ParkedHeartbeat) {
        self.consumer.parked_count += 1;
        let queue = self.consumer.parked.entry(group_id.to_owned());
        queue.or_default().push_front(parked);
    }

    /// A consumer group's partition was unloaded: its write in flight no longer touches it and
    /// its parked heartbeats are answered NOT_COORDINATOR.
    pub(super) fn consumer_group_unloaded(&mut self, group_id: &str) {
        if let Some(write) = self.consumer.busy.remove(group_id) {
            if let Some(pending) = self.consumer.writes.get_mut(&write) {
                pending.orphaned = true;
            }
        }
        self.consumer.upgraded.remove(group_id);
        self.consumer.downgraded.remove(group_id);
        for parked in self.consumer.parked.remove(group_id).unwrap_or_default() {
            self.consumer.parked_count -= 1;
            let code = ErrorCode::NOT_COORDINATOR.code();
            let response = match &parked.request {
                ParkedRequest::Consumer(_) => {
                    Response::ConsumerGroupHeartbeat(heartbeat_error(code, None))
                }
                ParkedRequest::Classic(request) => {
                    request.error_response(parked.meta.version, code)
                }
            };
            self.reply(parked.meta.request_id, parked.meta.version, response);
        }
    }

    /// A partition's consumer group records were loaded: sessions start at the next tick.
    pub(super) fn consumer_groups_loaded(&mut self) {
        if self.consumer_groups.group_ids().next().is_some() {
            self.consumer.activation_pending = true;
        }
    }

    /// The tick's part for consumer groups: sessions for loaded members, then the expiries of
    /// groups with no write in flight, each group's records as one write.
    pub(super) fn tick_consumer_groups(&mut self, now_ms: i64) {
        self.consumer.now_ms = self.consumer.now_ms.max(now_ms);
        if std::mem::take(&mut self.consumer.activation_pending) {
            self.consumer_groups.activate(now_ms);
        }
        for group_id in self.consumer_groups.groups_due(now_ms) {
            if self.consumer.busy.contains_key(&group_id) {
                continue;
            }
            let before = self.consumer_groups.group(&group_id).cloned();
            let expired = self.consumer_groups.expired_members(&group_id, now_ms);
            if let Some(records) = self.maybe_downgrade(&group_id, &expired, now_ms) {
                self.write_consumer_records(group_id, before, Vec::new(), records);
                continue;
            }
            let records = self
                .consumer_groups
                .expire(&group_id, now_ms, &self.consumer.topics);
            if !records.is_empty() {
                self.write_consumer_records(group_id, before, Vec::new(), records);
            }
        }
    }

    /// The consumer groups' next deadline (groups with a write in flight wait for its result).
    pub(super) fn consumer_next_deadline_ms(&self) -> Option<i64> {
        if self.consumer.activation_pending {
            return Some(i64::MIN);
        }
        let busy = &self.consumer.busy;
        self.consumer_groups
            .next_deadline_ms_where(|group_id| !busy.contains_key(group_id))
    }

    fn reply_heartbeat_error(&mut self, meta: &RequestMeta, code: i16, message: Option<String>) {
        let response = Response::ConsumerGroupHeartbeat(heartbeat_error(code, message));
        self.reply(meta.request_id, meta.version, response);
    }

    /// ConsumerGroupDescribe (any version): each group as Kafka's `consumerGroupDescribe`
    /// answers it; a classic group's id gets GROUP_ID_NOT_FOUND.
    pub fn handle_consumer_group_describe(&mut self, meta: RequestMeta, group_ids: Vec<String>) {
        let groups = group_ids
            .into_iter()
            .map(|group_id| self.describe_consumer_group(group_id, meta.version))
            .collect();
        let response = ConsumerGroupDescribeResponse {
            throttle_time_ms: 0,
            groups,
        };
        let reply = Response::ConsumerGroupDescribe(response);
        self.reply(meta.request_id, meta.version, reply);
    }

    fn describe_consumer_group(&self, group_id: String, version: i16) -> DescribedGroup {
        let error = |code: ErrorCode, message: Option<String>, group_id: String| DescribedGroup {
            error_code: code.code(),
            error_message: message,
            group_id,
            ..DescribedGroup::default()
        };
        if group_id.is_empty() {
            return error(ErrorCode::INVALID_GROUP_ID, None, group_id);
        }
        if let Some(code) = self.unavailable_for(&group_id) {
            return error(code, None, group_id);
        }
        let Some(description) = self.consumer_groups.describe(&group_id) else {
            let message = if self.groups.contains_key(&group_id) {
                format!("Group {group_id} is not a consumer group.")
            } else {
                format!("Group {group_id} not found.")
            };
            return error(ErrorCode::GROUP_ID_NOT_FOUND, Some(message), group_id);
        };
        let members = description
            .members
            .into_iter()
            .map(|member| self.described_member(member, version))
            .collect();
        DescribedGroup {
            group_id,
            group_state: description.state.to_owned(),
            group_epoch: description.group_epoch,
            assignment_epoch: description.assignment_epoch,
            assignor_name: description.assignor_name.to_owned(),
            members,
            ..DescribedGroup::default()
        }
    }

    fn described_member(&self, member: MemberDescription, version: i16) -> DescribedMember {
        let member_type = if version < DESCRIBE_MEMBER_TYPE_VERSION_MIN {
            member_type::UNKNOWN
        } else if member.classic {
            member_type::CLASSIC
        } else {
            member_type::CONSUMER
        };
        DescribedMember {
            member_id: member.member_id,
            instance_id: member.instance_id,
            rack_id: member.rack_id,
            member_epoch: member.member_epoch,
            client_id: member.client_id,
            client_host: member.client_host,
            subscribed_topic_names: member.subscribed_topic_names,
            subscribed_topic_regex: member.subscribed_topic_regex,
            assignment: self.described_partitions(&member.assignment),
            target_assignment: self.described_partitions(&member.target_assignment),
            member_type,
        }
    }

    /// An assignment by topic name; topics gone from the image are left out, as Kafka's
    /// describe does.
    fn described_partitions(&self, assignment: &Assignment) -> Vec<DescribedTopicPartitions> {
        let names: BTreeMap<_, &String> = self
            .consumer
            .topics
            .by_name
            .iter()
            .map(|(name, (id, _))| (*id, name))
            .collect();
        assignment
            .iter()
            .filter_map(|(topic, partitions)| {
                Some(DescribedTopicPartitions {
                    topic_id: uuid::Uuid::from_bytes(topic.0),
                    topic_name: (*names.get(topic)?).clone(),
                    partitions: partitions.iter().copied().collect(),
                })
            })
            .collect()
    }
}

/// The encoded size of `records` in a batch, at most; a record that cannot be encoded counts as
/// the whole bound (its write fails alone, as it would unbatched).
fn records_bytes(records: &[ConsumerRecord]) -> usize {
    records
        .iter()
        .map(|record| match record.encode() {
            Ok((key, value)) => {
                key.len() + value.map_or(0, |value| value.len()) + RECORD_FRAMING_BYTES_MAX
            }
            Err(_) => CONSUMER_WRITE_BYTES_MAX,
        })
        .fold(0, usize::saturating_add)
}

/// The wire response of a successful heartbeat.
fn heartbeat_response(
    response: crate::consumer::HeartbeatResponse,
) -> ConsumerGroupHeartbeatResponse {
    let assignment = response.assignment.map(|assignment| {
        assignment
            .into_iter()
            .map(|(topic, partitions)| HeartbeatTopicPartitions {
                topic_id: uuid::Uuid::from_bytes(topic.0),
                partitions: partitions.into_iter().collect(),
            })
            .collect()
    });
    ConsumerGroupHeartbeatResponse {
        member_id: Some(response.member_id),
        member_epoch: response.member_epoch,
        heartbeat_interval_ms: response.heartbeat_interval_ms,
        assignment,
        ..ConsumerGroupHeartbeatResponse::default()
    }
}

/// A refused heartbeat, as Kafka's `ConsumerGroupHeartbeatResponseData` carries it: the error,
/// its message, and nothing else.
fn heartbeat_error(code: i16, message: Option<String>) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse {
        error_code: code,
        error_message: message,
        ..ConsumerGroupHeartbeatResponse::default()
    }
}

/// The error of a heartbeat whose records could not be written: Kafka 4.1.1's
/// `CoordinatorOperationExceptionHelper.handleOperationException` maps the append's failure
/// (NOT_ENOUGH_REPLICAS and timeouts to COORDINATOR_NOT_AVAILABLE, a lost leadership or a log
/// error to NOT_COORDINATOR, a too-large batch to UNKNOWN_SERVER_ERROR) and sends no message.
fn heartbeat_write_error(error: PersistError) -> i16 {
    match error {
        PersistError::TooLarge => ErrorCode::UNKNOWN_SERVER_ERROR.code(),
        other => other.error_code(),
    }
}

#[cfg(test)]
#[path = "tests/consumer_coord.rs"]
mod tests;
