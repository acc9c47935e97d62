//! The [`Coordinator`]'s side of classic and consumer groups under one id, as Kafka 4.1.1's
//! `GroupMetadataManager` runs them with `group.consumer.migration.policy` allowing it: the
//! online upgrade (a consumer-protocol member's joining heartbeat turns a non-empty classic
//! group whose members all speak the consumer protocol into a consumer group, its members kept
//! with their assignments), and the classic requests (JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup) of classic members inside a consumer group, which go through the consumer
//! groups' write path (`consumer_coord.rs`): one write in flight per group, parked behind it,
//! answered once durable, rolled back when the write fails. The online downgrade
//! (`convertToClassicGroup`) happens when the last consumer-protocol member goes (its leave, a
//! LeaveGroup naming it, its session's end) or when a classic static member's JoinGroup takes
//! its place (`validateOnlineDowngradeWithReplacedMember`; the join continues in the classic
//! group, Stable unless its subscription changed).
//!
//! Classic membership stays in memory (no classic group record is written): an upgrade takes the
//! members out of the classic entry (which keeps the group's committed offsets) and keeps a copy
//! until its write has its result, to put them back if it fails; a downgrade fills the classic
//! entry at once and empties it again if its write fails.
//!
//! Must never: answer a classic request before the records it produced are durable, or leave a
//! group id with members in both kinds at once.

use std::collections::BTreeSet;

use bytes::Bytes;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{
    HeartbeatRequest as ClassicHeartbeatRequest, HeartbeatResponse, JoinGroupRequest,
    JoinGroupResponse, LeaveGroupResponse, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;
use skiff_protocol::error_code::ErrorCode;

use super::consumer::{
    epochs, ClassicGroupSnapshot, ClassicJoin, ClassicJoinOutcome, ClassicMemberSnapshot,
    ClassicTarget, ConsumerRecord, Downgraded, HeartbeatError, HeartbeatRequest,
    CONSUMER_PROTOCOL_TYPE,
};
use super::consumer_coord::{ParkedHeartbeat, ParkedRequest, PARKED_HEARTBEATS_MAX};
use super::coordinator::{Coordinator, RequestMeta, Response};
use super::state::{Group, GroupState};

/// A classic member's request to a consumer group, decoded.
#[derive(Debug, Clone)]
pub(crate) enum ClassicRequest {
    /// JoinGroup.
    Join(ClassicJoin),
    /// SyncGroup: the member, and the protocol type and name it names.
    Sync(ClassicCall, Option<String>, Option<String>),
    /// Heartbeat.
    Heartbeat(ClassicCall),
    /// LeaveGroup: (member id, instance id) each.
    Leave(String, Vec<(String, Option<String>)>),
}

/// The member a SyncGroup or Heartbeat names.
#[derive(Debug, Clone)]
pub(crate) struct ClassicCall {
    group_id: String,
    member_id: String,
    instance_id: Option<String>,
    generation_id: i32,
}

/// The fields SyncGroup and Heartbeat share.
trait NamesMember {
    fn parts(&self) -> (&str, &str, Option<&StrBytes>, i32);
}

/// SyncGroup and Heartbeat name their member with the same fields.
macro_rules! names_member {
    ($($request:ty),*) => {$(
        impl NamesMember for $request {
            fn parts(&self) -> (&str, &str, Option<&StrBytes>, i32) {
                let instance = self.group_instance_id.as_ref();
                (&self.group_id.0, &self.member_id, instance, self.generation_id)
            }
        }
    )*};
}
names_member!(SyncGroupRequest, ClassicHeartbeatRequest);

impl ClassicCall {
    /// The member a SyncGroup or Heartbeat names (the instance id from v3).
    fn from_request(version: i16, request: &impl NamesMember) -> Self {
        let (group_id, member_id, instance_id, generation_id) = request.parts();
        let instance_id = instance_id.filter(|_| version >= 3);
        Self::new(group_id, member_id, instance_id, generation_id)
    }

    fn new(
        group_id: &str,
        member_id: &str,
        instance_id: Option<&StrBytes>,
        generation_id: i32,
    ) -> Self {
        Self {
            group_id: group_id.to_owned(),
            member_id: member_id.to_owned(),
            instance_id: instance_id.map(|instance| instance.as_str().to_owned()),
            generation_id,
        }
    }

    fn target(&self) -> ClassicTarget<'_> {
        ClassicTarget {
            group_id: &self.group_id,
            member_id: &self.member_id,
            instance_id: self.instance_id.as_deref(),
            generation_id: Some(self.generation_id),
        }
    }
}

impl ClassicRequest {
    /// Its group.
    pub(crate) fn group_id(&self) -> &str {
        match self {
            Self::Join(join) => &join.group_id,
            Self::Sync(call, ..) | Self::Heartbeat(call) => &call.group_id,
            Self::Leave(group_id, _) => group_id,
        }
    }

    /// Its answer carrying only `code`.
    pub(crate) fn error_response(&self, version: i16, code: i16) -> Response {
        match self {
            Self::Join(join) => {
                let member_id = &join.member_id;
                Response::JoinGroup(super::membership::join_error(version, code, member_id))
            }
            Self::Sync(..) => Response::SyncGroup(sync_error(code)),
            Self::Heartbeat(_) => Response::Heartbeat(heartbeat_error(code)),
            Self::Leave(..) => Response::LeaveGroup(leave_error(code)),
        }
    }
}

fn sync_error(code: i16) -> SyncGroupResponse {
    let mut response = SyncGroupResponse::default();
    response.error_code = code;
    response
}

fn heartbeat_error(code: i16) -> HeartbeatResponse {
    let mut response = HeartbeatResponse::default();
    response.error_code = code;
    response
}

fn leave_error(code: i16) -> LeaveGroupResponse {
    let mut response = LeaveGroupResponse::default();
    response.error_code = code;
    response
}

/// The answer of a request whose write failed: its kind's error with `code`.
pub(crate) fn failed_response(response: &Response, version: i16, code: i16) -> Response {
    match response {
        Response::JoinGroup(join) => Response::JoinGroup(super::membership::join_error(
            version,
            code,
            join.member_id.as_str(),
        )),
        Response::SyncGroup(_) => Response::SyncGroup(sync_error(code)),
        Response::Heartbeat(_) => Response::Heartbeat(heartbeat_error(code)),
        Response::LeaveGroup(_) => Response::LeaveGroup(leave_error(code)),
        _ => Response::ConsumerGroupHeartbeat(
            skiff_protocol::responses::consumer_group::ConsumerGroupHeartbeatResponse {
                error_code: code,
                ..Default::default()
            },
        ),
    }
}

fn str_bytes(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// The classic group's members as the upgrade reads them.
fn snapshot(group: &Group) -> ClassicGroupSnapshot {
    let members = group
        .members
        .values()
        .map(|member| ClassicMemberSnapshot {
            member_id: member.member_id.clone(),
            instance_id: member.group_instance_id.clone(),
            client_id: member.client_id.clone(),
            client_host: member.client_host.clone(),
            session_timeout_ms: member.session_timeout_ms,
            rebalance_timeout_ms: member.rebalance_timeout_ms,
            protocols: member
                .protocols
                .iter()
                .map(|(name, metadata)| (name.clone(), metadata.to_vec()))
                .collect(),
            assignment: member.assignment.to_vec(),
        })
        .collect();
    ClassicGroupSnapshot {
        group_id: group.group_id.clone(),
        generation_id: group.generation_id,
        protocol_name: group.protocol_name.clone(),
        members,
    }
}

/// The classic entry with its membership taken out (its offsets stay).
fn emptied(group: &mut Group) {
    group.state = GroupState::Empty;
    group.protocol_type = None;
    group.protocol_name = None;
    group.leader = None;
    group.members.clear();
    group.pending_members.clear();
    group.static_members.clear();
    group.rebalance_deadline_ms = None;
    group.initial_wait = None;
}

/// A downgraded member as a classic group's member, synced, its session starting at `now_ms`.
fn classic_member(member: ClassicMemberSnapshot, now_ms: i64) -> crate::state::Member {
    let session_ms = i64::from(member.session_timeout_ms);
    crate::state::Member {
        member_id: member.member_id,
        group_instance_id: member.instance_id,
        client_id: member.client_id,
        client_host: member.client_host,
        session_timeout_ms: member.session_timeout_ms,
        rebalance_timeout_ms: member.rebalance_timeout_ms,
        protocols: member
            .protocols
            .into_iter()
            .map(|(name, metadata)| (name, Bytes::from(metadata)))
            .collect(),
        assignment: Bytes::from(member.assignment),
        pending_join: None,
        pending_sync: None,
        session_deadline_ms: now_ms.saturating_add(session_ms),
        synced: true,
    }
}

impl Coordinator {
    /// A joining heartbeat for a non-empty classic group that passed `validateOnlineUpgrade`
    /// (`route_heartbeat`): the group becomes a consumer group (Kafka's `convertToConsumerGroup`).
    /// Its parked JoinGroups and SyncGroups are answered REBALANCE_IN_PROGRESS at once, as Kafka
    /// does; the classic membership is kept aside until the write's result. Returns the
    /// conversion's records (none when there is nothing to convert).
    pub(super) fn maybe_upgrade(
        &mut self,
        request: &HeartbeatRequest,
        now_ms: i64,
    ) -> Result<Vec<ConsumerRecord>, HeartbeatError> {
        let group_id = request.group_id.as_str();
        let convert = request.member_epoch == epochs::JOIN
            && self.consumer_groups.group(group_id).is_none()
            && self
                .groups
                .get(group_id)
                .is_some_and(|group| group.state != GroupState::Empty);
        let Some(classic) = self.groups.get(group_id).filter(|_| convert) else {
            return Ok(Vec::new());
        };
        let saved = classic.clone();
        let topics = std::mem::take(&mut self.consumer.topics);
        let records = self
            .consumer_groups
            .upgrade(&snapshot(classic), &topics, now_ms);
        self.consumer.topics = topics;
        let records = records?;
        self.answer_parked_classic(group_id);
        if let Some(group) = self.groups.get_mut(group_id) {
            emptied(group);
        }
        self.consumer.upgraded.insert(group_id.to_owned(), saved);
        Ok(records)
    }

    /// Kafka's `completeAllJoinFutures` / `completeAllSyncFutures` with REBALANCE_IN_PROGRESS.
    fn answer_parked_classic(&mut self, group_id: &str) {
        let mut joins = Vec::new();
        let mut syncs = Vec::new();
        if let Some(group) = self.groups.get_mut(group_id) {
            for member in group.members.values_mut() {
                joins.extend(
                    member
                        .pending_join
                        .take()
                        .map(|p| (p, member.member_id.clone())),
                );
                syncs.extend(member.pending_sync.take());
            }
        }
        let code = ErrorCode::REBALANCE_IN_PROGRESS.code();
        for (parked, member_id) in joins {
            let response = super::membership::join_error(parked.version, code, &member_id);
            self.reply(
                parked.request_id,
                parked.version,
                Response::JoinGroup(response),
            );
        }
        for parked in syncs {
            self.reply_sync_error(parked, code);
        }
    }

    /// An upgrade whose write failed (or whose heartbeat was refused): the consumer group goes
    /// and the classic membership comes back (its offsets as they are now).
    pub(super) fn undo_upgrade(&mut self, group_id: &str) {
        let Some(saved) = self.consumer.upgraded.remove(group_id) else {
            return;
        };
        self.consumer_groups.restore(group_id, None);
        let group = self
            .groups
            .entry(group_id.to_owned())
            .or_insert_with(|| Group::new(group_id.to_owned()));
        group.state = saved.state;
        group.generation_id = saved.generation_id;
        group.protocol_type = saved.protocol_type;
        group.protocol_name = saved.protocol_name;
        group.leader = saved.leader;
        group.members = saved.members;
        group.static_members = saved.static_members;
        group.rebalance_deadline_ms = saved.rebalance_deadline_ms;
    }

    /// Kafka's `convertToClassicGroup` when `leaving` go (a consumer-protocol member's leave or
    /// the session expiry of members) and `validateOnlineDowngradeWithFencedMembers` allows it:
    /// the consumer group's tombstones (returned, to write), the remaining classic members in the
    /// classic entry at the group epoch, and a rebalance they all rejoin. Until the write's
    /// result the classic membership can be taken back (`undo_downgrade`).
    pub(super) fn maybe_downgrade(
        &mut self,
        group_id: &str,
        leaving: &BTreeSet<String>,
        now_ms: i64,
    ) -> Option<Vec<ConsumerRecord>> {
        let members_max = self.config.group_members_max;
        if !self
            .consumer_groups
            .downgrade_allowed(group_id, leaving, members_max)
        {
            return None;
        }
        let topics = std::mem::take(&mut self.consumer.topics);
        let downgraded = self.consumer_groups.downgrade(group_id, leaving, &topics);
        self.consumer.topics = topics;
        Some(self.install_classic(group_id, downgraded?, true, now_ms))
    }

    /// The classic entry of a downgraded consumer group (its offsets stay): its members at the
    /// group epoch, Stable, each session starting now; a rebalance if `rebalance`. Returns the
    /// downgrade's records, to write; until their result `undo_downgrade` can take it back.
    fn install_classic(
        &mut self,
        group_id: &str,
        downgraded: Downgraded,
        rebalance: bool,
        now_ms: i64,
    ) -> Vec<ConsumerRecord> {
        let group = self
            .groups
            .entry(group_id.to_owned())
            .or_insert_with(|| Group::new(group_id.to_owned()));
        emptied(group);
        group.state = GroupState::Stable;
        group.generation_id = downgraded.generation_id;
        group.protocol_type = Some(CONSUMER_PROTOCOL_TYPE.to_owned());
        for member in downgraded.members {
            if let Some(instance) = &member.instance_id {
                group
                    .static_members
                    .insert(instance.clone(), member.member_id.clone());
            }
            group
                .members
                .insert(member.member_id.clone(), classic_member(member, now_ms));
        }
        group.protocol_name = group.select_protocol();
        if rebalance {
            self.prepare_rebalance(group_id, now_ms);
        }
        self.consumer.downgraded.insert(group_id.to_owned());
        downgraded.records
    }

    /// A downgrade whose write failed: the classic membership goes again (the consumer group is
    /// put back by the write's rollback); requests parked in it are told to rejoin.
    pub(super) fn undo_downgrade(&mut self, group_id: &str) {
        if !self.consumer.downgraded.remove(group_id) {
            return;
        }
        self.answer_parked_classic(group_id);
        if let Some(group) = self.groups.get_mut(group_id) {
            emptied(group);
        }
    }

    /// A classic JoinGroup for an empty consumer group (Kafka's `maybeDeleteEmptyConsumerGroup`,
    /// whatever the policy): the consumer group's tombstones are written and the join goes on in
    /// a classic group at once; if the write fails, the consumer group comes back and the classic
    /// members are told to rejoin (as a failed downgrade). While a write of that empty group is
    /// still in flight (its last member's leave), COORDINATOR_NOT_AVAILABLE: the client retries.
    pub(super) fn replace_empty_consumer_group(&mut self, group_id: &str) -> Result<(), ErrorCode> {
        let empty = self.unavailable_for(group_id).is_none()
            && self
                .consumer_groups
                .group(group_id)
                .is_some_and(|group| group.members().is_empty());
        if !empty {
            return Ok(());
        }
        if self.consumer_group_busy(group_id) {
            return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE);
        }
        let before = self.consumer_groups.group(group_id).cloned();
        let records = self
            .consumer_groups
            .delete(group_id)
            .map_err(|_| ErrorCode::COORDINATOR_NOT_AVAILABLE)?;
        self.write_consumer_records(group_id.to_owned(), before, Vec::new(), records);
        self.consumer.downgraded.insert(group_id.to_owned());
        Ok(())
    }

    /// Whether a classic request for `group_id` is served by its consumer group (Kafka routes a
    /// JoinGroup there only for a non-empty one; SyncGroup, Heartbeat and LeaveGroup for any).
    pub(super) fn consumer_group_serves(&self, group_id: &str, join: bool) -> bool {
        self.unavailable_for(group_id).is_none()
            && self
                .consumer_groups
                .group(group_id)
                .is_some_and(|group| !join || !group.members().is_empty())
    }

    /// Runs a classic request against its consumer group, or parks it behind the group's write.
    fn run_classic(&mut self, meta: RequestMeta, request: ClassicRequest, now_ms: i64) {
        self.consumer.now_ms = self.consumer.now_ms.max(now_ms);
        let group_id = request.group_id().to_owned();
        if self.consumer_group_busy(&group_id) {
            if self.consumer.parked_count >= PARKED_HEARTBEATS_MAX {
                let code = ErrorCode::COORDINATOR_NOT_AVAILABLE.code();
                let response = request.error_response(meta.version, code);
                return self.reply(meta.request_id, meta.version, response);
            }
            let request = ParkedRequest::Classic(request);
            return self.park(group_id, ParkedHeartbeat { meta, request });
        }
        self.run_heartbeat(meta, &ParkedRequest::Classic(request), now_ms);
    }

    /// JoinGroup for a non-empty consumer group (the caller checked
    /// [`Coordinator::consumer_group_serves`]).
    pub(super) fn join_consumer_group(
        &mut self,
        now_ms: i64,
        meta: RequestMeta,
        request: JoinGroupRequest,
    ) {
        let session_timeout_ms = request.session_timeout_ms;
        let join = ClassicJoin {
            group_id: request.group_id.0.as_str().to_owned(),
            member_id: request.member_id.as_str().to_owned(),
            instance_id: (meta.version >= 5)
                .then(|| {
                    request
                        .group_instance_id
                        .as_ref()
                        .map(|i| i.as_str().to_owned())
                })
                .flatten(),
            protocol_type: request.protocol_type.as_str().to_owned(),
            protocols: request
                .protocols
                .iter()
                .map(|p| (p.name.as_str().to_owned(), p.metadata.to_vec()))
                .collect(),
            session_timeout_ms,
            rebalance_timeout_ms: if meta.version == 0 {
                session_timeout_ms
            } else {
                request.rebalance_timeout_ms
            },
            client_id: meta.client_id.clone(),
            client_host: meta.client_host.clone(),
            api_version: meta.version,
        };
        if session_timeout_ms < self.config.session_timeout_ms_min
            || session_timeout_ms > self.config.session_timeout_ms_max
        {
            let code = ErrorCode::INVALID_SESSION_TIMEOUT.code();
            let response = ClassicRequest::Join(join).error_response(meta.version, code);
            return self.reply(meta.request_id, meta.version, response);
        }
        self.run_classic(meta, ClassicRequest::Join(join), now_ms);
    }

    /// SyncGroup for a consumer group.
    pub(super) fn sync_consumer_group(
        &mut self,
        now_ms: i64,
        meta: RequestMeta,
        request: &SyncGroupRequest,
    ) {
        let call = ClassicCall::from_request(meta.version, request);
        let named = |field: &Option<StrBytes>| {
            field
                .as_ref()
                .filter(|_| meta.version >= 5)
                .map(|text| text.as_str().to_owned())
        };
        let (kind, name) = (named(&request.protocol_type), named(&request.protocol_name));
        self.run_classic(meta, ClassicRequest::Sync(call, kind, name), now_ms);
    }

    /// Heartbeat for a consumer group.
    pub(super) fn heartbeat_consumer_group(
        &mut self,
        now_ms: i64,
        meta: RequestMeta,
        request: &ClassicHeartbeatRequest,
    ) {
        let call = ClassicCall::from_request(meta.version, request);
        self.run_classic(meta, ClassicRequest::Heartbeat(call), now_ms);
    }

    /// LeaveGroup for a consumer group: (member id, instance id) of each leaving member.
    pub(super) fn leave_consumer_group(
        &mut self,
        now_ms: i64,
        meta: RequestMeta,
        group_id: String,
        leaving: Vec<(String, Option<String>)>,
    ) {
        self.run_classic(meta, ClassicRequest::Leave(group_id, leaving), now_ms);
    }

    /// Applies a classic request to its consumer group; nothing is answered or written yet.
    pub(super) fn apply_classic(
        &mut self,
        meta: &RequestMeta,
        request: &ClassicRequest,
        now_ms: i64,
    ) -> super::consumer_coord::HeartbeatRun {
        use super::consumer_coord::HeartbeatRun;
        let group_id = request.group_id();
        let refused = |code: i16| HeartbeatRun::Refused(request.error_response(meta.version, code));
        if let Some(error) = self.unavailable_for(group_id) {
            return refused(error.code());
        }
        let before = Box::new(self.consumer_groups.group(group_id).cloned());
        if before.is_none() {
            // The consumer group went while this waited: a classic member has nothing here.
            return refused(ErrorCode::UNKNOWN_MEMBER_ID.code());
        }
        let topics = std::mem::take(&mut self.consumer.topics);
        let result = self.classic_outcome(meta, request, &topics, now_ms);
        self.consumer.topics = topics;
        match result {
            Ok((records, response)) => HeartbeatRun::Applied {
                before,
                records,
                response,
            },
            Err(code) => refused(code),
        }
    }

    fn classic_outcome(
        &mut self,
        meta: &RequestMeta,
        request: &ClassicRequest,
        topics: &crate::consumer::TopicImage,
        now_ms: i64,
    ) -> Result<(Vec<ConsumerRecord>, Response), i16> {
        let groups = &mut self.consumer_groups;
        match request {
            ClassicRequest::Join(join) => {
                let fresh = if join.member_id.is_empty() {
                    self.new_member_id(&meta.client_id)
                } else {
                    String::new()
                };
                let members_max = self.config.group_members_max;
                let outcome =
                    self.consumer_groups
                        .classic_join(join, topics, now_ms, &fresh, members_max)?;
                Ok(self.join_outcome(meta.version, &join.group_id, outcome, now_ms))
            }
            ClassicRequest::Sync(call, kind, name) => {
                let protocol = (kind.as_deref(), name.as_deref());
                let assignment = groups.classic_sync(call.target(), protocol, topics, now_ms)?;
                let mut response = SyncGroupResponse::default();
                response.assignment = Bytes::from(assignment);
                if meta.version >= 5 {
                    response.protocol_type = kind.as_deref().map(str_bytes);
                    response.protocol_name = name.as_deref().map(str_bytes);
                }
                Ok((Vec::new(), Response::SyncGroup(response)))
            }
            ClassicRequest::Heartbeat(call) => {
                groups.classic_heartbeat(call.target(), now_ms)?;
                Ok((
                    Vec::new(),
                    Response::Heartbeat(HeartbeatResponse::default()),
                ))
            }
            ClassicRequest::Leave(group_id, leaving) => {
                let resolved = groups.leavers(group_id, leaving);
                let ids: BTreeSet<String> = resolved.iter().flatten().cloned().collect();
                // Kafka's `consumerGroupFenceMembers`: nothing to fence writes nothing.
                let downgraded = (!ids.is_empty())
                    .then(|| self.maybe_downgrade(group_id, &ids, now_ms))
                    .flatten();
                let records = downgraded
                    .unwrap_or_else(|| self.consumer_groups.fence_members(group_id, &ids, topics));
                let codes: Vec<i16> = resolved
                    .iter()
                    .map(|r| r.as_ref().err().copied().unwrap_or_default())
                    .collect();
                Ok((
                    records,
                    Response::LeaveGroup(leave_response(meta.version, leaving, &codes)),
                ))
            }
        }
    }
}

impl Coordinator {
    /// The JoinGroup answer of a classic member in a consumer group and its records; a join
    /// that downgraded the group installs its classic entry first (the answer is the same).
    fn join_outcome(
        &mut self,
        version: i16,
        group_id: &str,
        outcome: ClassicJoinOutcome,
        now_ms: i64,
    ) -> (Vec<ConsumerRecord>, Response) {
        match outcome {
            ClassicJoinOutcome::MemberIdRequired(member_id) => {
                let code = ErrorCode::MEMBER_ID_REQUIRED.code();
                let response = super::membership::join_error(version, code, &member_id);
                (Vec::new(), Response::JoinGroup(response))
            }
            ClassicJoinOutcome::Joined {
                member_id,
                generation_id,
                protocol_name,
                records,
            } => {
                let response = joined(version, &member_id, generation_id, &protocol_name);
                (records, response)
            }
            ClassicJoinOutcome::Downgraded {
                member_id,
                generation_id,
                protocol_name,
                rebalance,
                classic,
            } => {
                let records = self.install_classic(group_id, classic, rebalance, now_ms);
                let response = joined(version, &member_id, generation_id, &protocol_name);
                (records, response)
            }
        }
    }
}

/// The JoinGroup answer of a classic member in a consumer group (Kafka's
/// `classicGroupJoinToConsumerGroup`): no leader (every member syncs as a follower), its member
/// epoch as the generation, Kafka's protocol type and its first protocol.
fn joined(version: i16, member_id: &str, generation_id: i32, protocol_name: &str) -> Response {
    let mut response = JoinGroupResponse::default();
    response.member_id = str_bytes(member_id);
    response.generation_id = generation_id;
    response.protocol_name = Some(str_bytes(protocol_name));
    if version >= 7 {
        response.protocol_type = Some(str_bytes(CONSUMER_PROTOCOL_TYPE));
    }
    Response::JoinGroup(response)
}

/// LeaveGroup's answer: v3+ one entry per member, before that the one member's code on top.
fn leave_response(
    version: i16,
    leaving: &[(String, Option<String>)],
    codes: &[i16],
) -> LeaveGroupResponse {
    let mut response = LeaveGroupResponse::default();
    if version < 3 {
        response.error_code = codes.first().copied().unwrap_or_default();
        return response;
    }
    for ((member_id, instance_id), code) in leaving.iter().zip(codes) {
        let mut member = MemberResponse::default();
        member.member_id = str_bytes(member_id);
        member.group_instance_id = instance_id.as_deref().map(str_bytes);
        member.error_code = *code;
        response.members.push(member);
    }
    response
}

#[cfg(test)]
#[path = "tests/migration.rs"]
mod tests;
