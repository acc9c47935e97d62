//! JoinGroup, SyncGroup, Heartbeat and LeaveGroup, and the rebalance they drive:
//! Empty/Stable → PreparingRebalance (wait for every member's JoinGroup, or the rebalance
//! deadline; leaving Empty, wait the initial rebalance delay instead, extended while newcomers
//! arrive) → CompletingRebalance (new generation; wait for the leader's SyncGroup, or the sync
//! deadline) → Stable.
//!
//! A group id held by a consumer group is not a classic group's: each handler first hands such
//! requests to `migration.rs` (a non-empty consumer group serves classic members; a JoinGroup for
//! an empty one replaces it by a classic group).
//!
//! Must never: answer a parked request twice or drop one (every path that removes a member or
//! leaves a state answers what was parked), or let two generations be handed out at once.

use bytes::Bytes;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;
use skiff_protocol::error_code::ErrorCode;

use super::coordinator::{Coordinator, RequestMeta, Response};
use super::state::{Group, GroupState, InitialWait, Member, Parked};

/// What a JoinGroup asks for, validated.
struct JoinParams {
    session_timeout_ms: i32,
    rebalance_timeout_ms: i32,
    protocol_type: String,
    protocols: Vec<(String, Bytes)>,
    group_instance_id: Option<String>,
}

fn code(error: ErrorCode) -> i16 {
    error.code()
}

fn str_bytes(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

impl Coordinator {
    /// JoinGroup, every version: validates, then joins (or rejoins) the member and parks the reply
    /// until the rebalance completes. v4+ members without an id first get MEMBER_ID_REQUIRED with
    /// one; v0 has no rebalance timeout and uses the session timeout, as Kafka does.
    pub fn handle_join_group(&mut self, now_ms: i64, meta: RequestMeta, request: JoinGroupRequest) {
        let member_id = request.member_id.as_str().to_owned();
        let group_id = request.group_id.0.as_str().to_owned();
        if self.consumer_group_serves(&group_id, true) {
            // A classic member of a consumer group (`migration.rs`).
            return self.join_consumer_group(now_ms, meta, request);
        }
        if let Err(error) = self.replace_empty_consumer_group(&group_id) {
            let response = join_error(meta.version, code(error), &member_id);
            return self.reply(meta.request_id, meta.version, Response::JoinGroup(response));
        }
        match self.join_group(now_ms, &meta, &group_id, &member_id, request) {
            Ok(()) => {}
            Err(error) => {
                let response = join_error(meta.version, code(error), &member_id);
                self.reply(meta.request_id, meta.version, Response::JoinGroup(response));
            }
        }
        self.forget_if_unused(&group_id);
    }

    /// Whether a JoinGroup for `group_id` may go on here: coordinated and loaded, a valid id,
    /// not a consumer group's. A non-empty consumer group serves classic members and an empty
    /// one is replaced by a classic group (`migration.rs`, both before this); what is left is a
    /// consumer group not yet deleted, answered as Kafka answers protocols a group does not
    /// support.
    fn check_join_target(&self, group_id: &str) -> Result<(), ErrorCode> {
        if let Some(error) = self.unavailable_for(group_id) {
            return Err(error);
        }
        if group_id.is_empty() {
            return Err(ErrorCode::INVALID_GROUP_ID);
        }
        if self.consumer_groups.group(group_id).is_some() {
            return Err(ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
        }
        Ok(())
    }

    fn join_group(
        &mut self,
        now_ms: i64,
        meta: &RequestMeta,
        group_id: &str,
        member_id: &str,
        request: JoinGroupRequest,
    ) -> Result<(), ErrorCode> {
        self.check_join_target(group_id)?;
        let params = self.join_params(meta.version, request)?;
        if !self.groups.contains_key(group_id) {
            if !member_id.is_empty() {
                return Err(ErrorCode::UNKNOWN_MEMBER_ID);
            }
            if self.groups.len() >= self.config.groups_max {
                return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE);
            }
            self.groups
                .insert(group_id.to_owned(), Group::new(group_id.to_owned()));
        }
        let members_max = self.config.group_members_max;
        let Some(group) = self.groups.get(group_id) else {
            return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE);
        };
        let known = (!member_id.is_empty()).then_some(member_id);
        if !group.accepts(known, &params.protocol_type, &params.protocols) {
            return Err(ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
        }
        let parked = Parked {
            request_id: meta.request_id,
            version: meta.version,
        };
        if member_id.is_empty() {
            let instance_holder = params
                .group_instance_id
                .as_deref()
                .and_then(|instance| group.static_member_id(instance))
                .map(str::to_owned);
            if let Some(old_member_id) = instance_holder {
                // A static member restarted: the old incarnation is fenced and replaced.
                self.remove_member(
                    group_id,
                    &old_member_id,
                    ErrorCode::FENCED_INSTANCE_ID,
                    now_ms,
                );
            } else if group.size() >= members_max {
                return Err(ErrorCode::GROUP_MAX_SIZE_REACHED);
            }
            let new_member_id = self.new_member_id(&meta.client_id);
            let Some(group) = self.groups.get_mut(group_id) else {
                return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE);
            };
            if meta.version >= 4 && params.group_instance_id.is_none() {
                // KIP-394: hand out the id first; the member is joined when it comes back with it.
                let deadline_ms = now_ms.saturating_add(i64::from(params.session_timeout_ms));
                group
                    .pending_members
                    .insert(new_member_id.clone(), deadline_ms);
                let mut response = join_error(
                    meta.version,
                    code(ErrorCode::MEMBER_ID_REQUIRED),
                    &new_member_id,
                );
                response.member_id = str_bytes(&new_member_id);
                self.reply(meta.request_id, meta.version, Response::JoinGroup(response));
                return Ok(());
            }
            self.add_member(now_ms, meta, group_id, new_member_id, params, parked);
            return Ok(());
        }
        if let Some(instance) = params.group_instance_id.as_deref() {
            if group
                .static_member_id(instance)
                .is_some_and(|id| id != member_id)
            {
                return Err(ErrorCode::FENCED_INSTANCE_ID);
            }
        }
        let Some(group) = self.groups.get_mut(group_id) else {
            return Err(ErrorCode::COORDINATOR_NOT_AVAILABLE);
        };
        if group.pending_members.remove(member_id).is_some() {
            self.add_member(now_ms, meta, group_id, member_id.to_owned(), params, parked);
            return Ok(());
        }
        if !group.members.contains_key(member_id) {
            return Err(ErrorCode::UNKNOWN_MEMBER_ID);
        }
        self.rejoin_member(now_ms, group_id, member_id, params, parked);
        Ok(())
    }

    fn join_params(
        &self,
        version: i16,
        request: JoinGroupRequest,
    ) -> Result<JoinParams, ErrorCode> {
        let session_timeout_ms = request.session_timeout_ms;
        if session_timeout_ms < self.config.session_timeout_ms_min
            || session_timeout_ms > self.config.session_timeout_ms_max
        {
            return Err(ErrorCode::INVALID_SESSION_TIMEOUT);
        }
        let rebalance_timeout_ms = if version == 0 {
            session_timeout_ms
        } else {
            request.rebalance_timeout_ms
        };
        if rebalance_timeout_ms < 0 {
            return Err(ErrorCode::INVALID_REQUEST);
        }
        let metadata_bytes: usize = request
            .protocols
            .iter()
            .map(|protocol| protocol.metadata.len())
            .sum();
        if metadata_bytes > self.config.member_metadata_bytes_max {
            return Err(ErrorCode::INVALID_REQUEST);
        }
        let protocols: Vec<(String, Bytes)> = request
            .protocols
            .into_iter()
            .map(|protocol| (protocol.name.as_str().to_owned(), protocol.metadata))
            .collect();
        let protocol_type = request.protocol_type.as_str().to_owned();
        if protocol_type.is_empty() || protocols.is_empty() {
            return Err(ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
        }
        let group_instance_id = if version >= 5 {
            request
                .group_instance_id
                .map(|instance| instance.as_str().to_owned())
        } else {
            None
        };
        Ok(JoinParams {
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type,
            protocols,
            group_instance_id,
        })
    }

    fn add_member(
        &mut self,
        now_ms: i64,
        meta: &RequestMeta,
        group_id: &str,
        member_id: String,
        params: JoinParams,
        parked: Parked,
    ) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        if group.members.is_empty() {
            group.protocol_type = Some(params.protocol_type.clone());
        }
        if let Some(instance) = &params.group_instance_id {
            group
                .static_members
                .insert(instance.clone(), member_id.clone());
        }
        let member = Member {
            member_id: member_id.clone(),
            group_instance_id: params.group_instance_id,
            client_id: meta.client_id.clone(),
            client_host: meta.client_host.clone(),
            session_timeout_ms: params.session_timeout_ms,
            rebalance_timeout_ms: params.rebalance_timeout_ms,
            protocols: params.protocols,
            assignment: Bytes::new(),
            pending_join: Some(parked),
            pending_sync: None,
            session_deadline_ms: now_ms.saturating_add(i64::from(params.session_timeout_ms)),
            synced: false,
        };
        group.members.insert(member_id, member);
        if group.state != GroupState::PreparingRebalance {
            self.prepare_rebalance(group_id, now_ms);
        } else if let Some(wait) = group.initial_wait.as_mut() {
            wait.member_added = true;
        }
        self.maybe_complete_join(group_id, now_ms);
    }

    fn rejoin_member(
        &mut self,
        now_ms: i64,
        group_id: &str,
        member_id: &str,
        params: JoinParams,
        parked: Parked,
    ) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        let state = group.state;
        let is_leader = group.leader.as_deref() == Some(member_id);
        let Some(member) = group.members.get_mut(member_id) else {
            return;
        };
        let unchanged = member.protocols == params.protocols;
        member.session_timeout_ms = params.session_timeout_ms;
        member.rebalance_timeout_ms = params.rebalance_timeout_ms;
        member.protocols = params.protocols;
        member.session_deadline_ms = now_ms.saturating_add(i64::from(params.session_timeout_ms));
        // A JoinGroup sent again while the first is parked: the old one gets an answer too.
        let superseded = member.pending_join.take();
        let answer_now = match state {
            GroupState::CompletingRebalance => unchanged,
            GroupState::Stable => unchanged && !is_leader,
            GroupState::PreparingRebalance | GroupState::Empty => false,
        };
        if let Some(old) = superseded {
            let response = join_error(
                old.version,
                code(ErrorCode::REBALANCE_IN_PROGRESS),
                member_id,
            );
            self.reply(old.request_id, old.version, Response::JoinGroup(response));
        }
        if answer_now {
            // Nothing changed: hand back the current generation without a rebalance.
            let Some(group) = self.groups.get(group_id) else {
                return;
            };
            let response = join_success(group, member_id, parked.version);
            self.reply(
                parked.request_id,
                parked.version,
                Response::JoinGroup(response),
            );
            return;
        }
        if let Some(member) = self
            .groups
            .get_mut(group_id)
            .and_then(|group| group.members.get_mut(member_id))
        {
            member.pending_join = Some(parked);
        }
        if state != GroupState::PreparingRebalance {
            self.prepare_rebalance(group_id, now_ms);
        }
        self.maybe_complete_join(group_id, now_ms);
    }

    /// Starts a rebalance: parked SyncGroups of the generation being abandoned are answered with
    /// REBALANCE_IN_PROGRESS, and the group waits for every member's JoinGroup. A group that was
    /// Empty instead waits `initial_rebalance_delay_ms` (at most its rebalance timeout) for more
    /// members, as Kafka does, so that members starting together form one generation.
    pub(super) fn prepare_rebalance(&mut self, group_id: &str, now_ms: i64) {
        let mut answers: Vec<(Parked, i16)> = Vec::new();
        let initial_delay_ms = self.config.initial_rebalance_delay_ms_applied();
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        let was_empty = group.state == GroupState::Empty;
        if group.state == GroupState::CompletingRebalance {
            for member in group.members.values_mut() {
                if let Some(parked) = member.pending_sync.take() {
                    answers.push((parked, code(ErrorCode::REBALANCE_IN_PROGRESS)));
                }
                member.assignment = Bytes::new();
            }
        }
        for member in group.members.values_mut() {
            member.synced = false;
        }
        group.state = GroupState::PreparingRebalance;
        let rebalance_timeout_ms = i64::from(group.rebalance_timeout_ms());
        let end_ms_max = now_ms.saturating_add(rebalance_timeout_ms);
        let wait_ms = initial_delay_ms.min(rebalance_timeout_ms);
        if was_empty && wait_ms > 0 {
            group.initial_wait = Some(InitialWait {
                end_ms_max,
                member_added: false,
            });
            group.rebalance_deadline_ms = Some(now_ms.saturating_add(wait_ms));
        } else {
            group.initial_wait = None;
            group.rebalance_deadline_ms = Some(end_ms_max);
        }
        for (parked, error_code) in answers {
            self.reply_sync_error(parked, error_code);
        }
    }

    pub(super) fn maybe_complete_join(&mut self, group_id: &str, now_ms: i64) {
        // An initial wait ends only at its deadline (everyone known having joined says nothing
        // about who else is starting), unless nobody is left to wait with.
        let ready = self.groups.get(group_id).is_some_and(|group| {
            group.state == GroupState::PreparingRebalance
                && group.all_joined()
                && (group.initial_wait.is_none() || group.members.is_empty())
        });
        if ready {
            self.complete_join(group_id, now_ms);
        }
    }

    /// Ends the join phase: members that did not rejoin are dropped, a new generation starts, and
    /// every parked JoinGroup is answered (the leader gets the members' metadata).
    fn complete_join(&mut self, group_id: &str, now_ms: i64) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        group.initial_wait = None;
        group.pending_members.clear();
        let missing: Vec<String> = group
            .members
            .values()
            .filter(|member| member.pending_join.is_none())
            .map(|member| member.member_id.clone())
            .collect();
        for member_id in missing {
            drop_member(group, &member_id);
        }
        group.generation_id = next_generation(group.generation_id);
        if group.members.is_empty() {
            group.state = GroupState::Empty;
            group.protocol_name = None;
            group.leader = None;
            group.rebalance_deadline_ms = None;
            return;
        }
        let Some(protocol) = group.select_protocol() else {
            // Unreachable while `accepts` guards every join; if it ever happens, no member can be
            // served a protocol, so all are told so and dropped rather than left waiting.
            let parked: Vec<Parked> = group
                .members
                .values_mut()
                .filter_map(|member| member.pending_join.take())
                .collect();
            group.members.clear();
            group.static_members.clear();
            group.state = GroupState::Empty;
            group.rebalance_deadline_ms = None;
            for parked in parked {
                let response = join_error(
                    parked.version,
                    code(ErrorCode::INCONSISTENT_GROUP_PROTOCOL),
                    "",
                );
                self.reply(
                    parked.request_id,
                    parked.version,
                    Response::JoinGroup(response),
                );
            }
            return;
        };
        group.protocol_name = Some(protocol);
        let leader_kept = group
            .leader
            .as_ref()
            .is_some_and(|leader| group.members.contains_key(leader));
        if !leader_kept {
            group.leader = group.members.keys().next().cloned();
        }
        group.state = GroupState::CompletingRebalance;
        group.rebalance_deadline_ms =
            Some(now_ms.saturating_add(i64::from(group.rebalance_timeout_ms())));
        let mut answers: Vec<(Parked, String)> = Vec::new();
        for member in group.members.values_mut() {
            member.assignment = Bytes::new();
            member.synced = false;
            member.session_deadline_ms =
                now_ms.saturating_add(i64::from(member.session_timeout_ms));
            if let Some(parked) = member.pending_join.take() {
                answers.push((parked, member.member_id.clone()));
            }
        }
        for (parked, member_id) in answers {
            let Some(group) = self.groups.get(group_id) else {
                return;
            };
            let response = join_success(group, &member_id, parked.version);
            self.reply(
                parked.request_id,
                parked.version,
                Response::JoinGroup(response),
            );
        }
    }

    /// Removes a member, answering whatever it had parked with `error`, and moves the group on
    /// (a rebalance if it was formed; the join may now be complete if one was running).
    pub(super) fn remove_member(
        &mut self,
        group_id: &str,
        member_id: &str,
        error: ErrorCode,
        now_ms: i64,
    ) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        if group.pending_members.remove(member_id).is_some() {
            self.maybe_complete_join(group_id, now_ms);
            return;
        }
        let Some(member) = drop_member(group, member_id) else {
            return;
        };
        let state = group.state;
        if let Some(parked) = member.pending_join {
            let response = join_error(parked.version, code(error), member_id);
            self.reply(
                parked.request_id,
                parked.version,
                Response::JoinGroup(response),
            );
        }
        if let Some(parked) = member.pending_sync {
            self.reply_sync_error(parked, code(error));
        }
        match state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(group_id, now_ms);
                self.maybe_complete_join(group_id, now_ms);
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(group_id, now_ms),
            GroupState::Empty => {}
        }
    }

    /// SyncGroup, every version. Followers are parked until the leader's assignment arrives; the
    /// leader's SyncGroup completes the rebalance.
    pub fn handle_sync_group(&mut self, now_ms: i64, meta: RequestMeta, request: SyncGroupRequest) {
        if self.consumer_group_serves(request.group_id.0.as_str(), false) {
            return self.sync_consumer_group(now_ms, meta, &request);
        }
        let parked = Parked {
            request_id: meta.request_id,
            version: meta.version,
        };
        if let Err(error) = self.sync_group(now_ms, parked, &request) {
            self.reply_sync_error(parked, code(error));
        }
    }

    fn sync_group(
        &mut self,
        now_ms: i64,
        parked: Parked,
        request: &SyncGroupRequest,
    ) -> Result<(), ErrorCode> {
        let group_id = request.group_id.0.as_str();
        let member_id = request.member_id.as_str();
        let instance = instance_id(parked.version, 3, request.group_instance_id.as_ref());
        let group = self.member_group(group_id, member_id, instance)?;
        if request.generation_id != group.generation_id {
            return Err(ErrorCode::ILLEGAL_GENERATION);
        }
        if parked.version >= 5 {
            let type_matches = request
                .protocol_type
                .as_ref()
                .is_none_or(|wanted| group.protocol_type.as_deref() == Some(wanted.as_str()));
            let name_matches = request
                .protocol_name
                .as_ref()
                .is_none_or(|wanted| group.protocol_name.as_deref() == Some(wanted.as_str()));
            if !type_matches || !name_matches {
                return Err(ErrorCode::INCONSISTENT_GROUP_PROTOCOL);
            }
        }
        match group.state {
            GroupState::Empty => Err(ErrorCode::UNKNOWN_MEMBER_ID),
            GroupState::PreparingRebalance => Err(ErrorCode::REBALANCE_IN_PROGRESS),
            GroupState::Stable => {
                let Some(member) = self.member_mut(group_id, member_id) else {
                    return Err(ErrorCode::UNKNOWN_MEMBER_ID);
                };
                member.session_deadline_ms =
                    now_ms.saturating_add(i64::from(member.session_timeout_ms));
                let assignment = member.assignment.clone();
                self.reply_sync(parked, 0, assignment, group_id);
                Ok(())
            }
            GroupState::CompletingRebalance => {
                let is_leader = group.leader.as_deref() == Some(member_id);
                if is_leader {
                    let too_large = request.assignments.iter().any(|assignment| {
                        assignment.assignment.len() > self.config.member_assignment_bytes_max
                    });
                    if too_large {
                        return Err(ErrorCode::INVALID_REQUEST);
                    }
                }
                let Some(member) = self.member_mut(group_id, member_id) else {
                    return Err(ErrorCode::UNKNOWN_MEMBER_ID);
                };
                member.synced = true;
                let superseded = member.pending_sync.replace(parked);
                if let Some(old) = superseded {
                    self.reply_sync_error(old, code(ErrorCode::REBALANCE_IN_PROGRESS));
                }
                if is_leader {
                    self.complete_sync(group_id, request, now_ms);
                }
                Ok(())
            }
        }
    }

    /// The leader's assignment arrived: hand it out and become Stable.
    fn complete_sync(&mut self, group_id: &str, request: &SyncGroupRequest, now_ms: i64) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        for assignment in &request.assignments {
            if let Some(member) = group.members.get_mut(assignment.member_id.as_str()) {
                member.assignment = assignment.assignment.clone();
            }
        }
        group.state = GroupState::Stable;
        group.rebalance_deadline_ms = None;
        let mut answers: Vec<(Parked, Bytes)> = Vec::new();
        for member in group.members.values_mut() {
            if let Some(parked) = member.pending_sync.take() {
                member.session_deadline_ms =
                    now_ms.saturating_add(i64::from(member.session_timeout_ms));
                answers.push((parked, member.assignment.clone()));
            }
        }
        for (parked, assignment) in answers {
            self.reply_sync(parked, 0, assignment, group_id);
        }
    }

    /// Heartbeat, every version: keeps the session alive and tells the member whether it must
    /// rejoin (REBALANCE_IN_PROGRESS).
    pub fn handle_heartbeat(&mut self, now_ms: i64, meta: RequestMeta, request: HeartbeatRequest) {
        if self.consumer_group_serves(request.group_id.0.as_str(), false) {
            return self.heartbeat_consumer_group(now_ms, meta, &request);
        }
        let error_code = match self.heartbeat(now_ms, meta.version, &request) {
            Ok(()) => 0,
            Err(error) => code(error),
        };
        let mut response = HeartbeatResponse::default();
        response.error_code = error_code;
        self.reply(meta.request_id, meta.version, Response::Heartbeat(response));
    }

    fn heartbeat(
        &mut self,
        now_ms: i64,
        version: i16,
        request: &HeartbeatRequest,
    ) -> Result<(), ErrorCode> {
        let group_id = request.group_id.0.as_str();
        let member_id = request.member_id.as_str();
        let instance = instance_id(version, 3, request.group_instance_id.as_ref());
        let group = self.member_group(group_id, member_id, instance)?;
        if group.state == GroupState::Empty {
            return Err(ErrorCode::UNKNOWN_MEMBER_ID);
        }
        if request.generation_id != group.generation_id {
            return Err(ErrorCode::ILLEGAL_GENERATION);
        }
        let state = group.state;
        if let Some(member) = self.member_mut(group_id, member_id) {
            member.session_deadline_ms =
                now_ms.saturating_add(i64::from(member.session_timeout_ms));
        }
        match state {
            GroupState::PreparingRebalance => Err(ErrorCode::REBALANCE_IN_PROGRESS),
            _ => Ok(()),
        }
    }

    /// LeaveGroup, every version: v0–v2 name one member and carry its error at the top level;
    /// v3+ name a batch and get one error per member.
    pub fn handle_leave_group(
        &mut self,
        now_ms: i64,
        meta: RequestMeta,
        request: LeaveGroupRequest,
    ) {
        let group_id = request.group_id.0.as_str().to_owned();
        let leaving: Vec<(String, Option<String>)> = if meta.version >= 3 {
            request
                .members
                .iter()
                .map(|member| {
                    (
                        member.member_id.as_str().to_owned(),
                        member
                            .group_instance_id
                            .as_ref()
                            .map(|instance| instance.as_str().to_owned()),
                    )
                })
                .collect()
        } else {
            vec![(request.member_id.as_str().to_owned(), None)]
        };
        if self.consumer_group_serves(&group_id, false) {
            return self.leave_consumer_group(now_ms, meta, group_id, leaving);
        }
        let mut response = LeaveGroupResponse::default();
        let group_error = if let Some(error) = self.unavailable_for(&group_id) {
            Some(error)
        } else if group_id.is_empty() {
            Some(ErrorCode::INVALID_GROUP_ID)
        } else {
            None
        };
        if let Some(error) = group_error {
            response.error_code = code(error);
        } else {
            for (member_id, instance) in leaving {
                let error_code =
                    match self.leave_one(now_ms, &group_id, &member_id, instance.as_deref()) {
                        Ok(()) => 0,
                        Err(error) => code(error),
                    };
                let mut member = MemberResponse::default();
                member.member_id = str_bytes(&member_id);
                member.group_instance_id = instance.map(StrBytes::from_string);
                member.error_code = error_code;
                response.members.push(member);
            }
            if meta.version < 3 {
                response.error_code = response.members.first().map_or(0, |m| m.error_code);
                response.members.clear();
            }
        }
        self.reply(
            meta.request_id,
            meta.version,
            Response::LeaveGroup(response),
        );
        self.forget_if_unused(&group_id);
    }

    fn leave_one(
        &mut self,
        now_ms: i64,
        group_id: &str,
        member_id: &str,
        instance: Option<&str>,
    ) -> Result<(), ErrorCode> {
        let Some(group) = self.groups.get(group_id) else {
            return Err(ErrorCode::UNKNOWN_MEMBER_ID);
        };
        let member_id = match (member_id.is_empty(), instance) {
            (true, Some(instance)) => group
                .static_member_id(instance)
                .ok_or(ErrorCode::UNKNOWN_MEMBER_ID)?
                .to_owned(),
            (_, Some(instance)) => {
                if group.static_member_id(instance) != Some(member_id) {
                    return Err(ErrorCode::FENCED_INSTANCE_ID);
                }
                member_id.to_owned()
            }
            (_, None) => member_id.to_owned(),
        };
        if !group.members.contains_key(&member_id)
            && !group.pending_members.contains_key(&member_id)
        {
            return Err(ErrorCode::UNKNOWN_MEMBER_ID);
        }
        self.remove_member(group_id, &member_id, ErrorCode::UNKNOWN_MEMBER_ID, now_ms);
        Ok(())
    }

    /// Expires what is due in one group at `now_ms` (see [`Coordinator::tick`]).
    pub(super) fn expire_group(&mut self, group_id: &str, now_ms: i64) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        let before = group.pending_members.len();
        group
            .pending_members
            .retain(|_, deadline_ms| *deadline_ms > now_ms);
        let pending_expired = group.pending_members.len() != before;
        let expired: Vec<String> = group
            .members
            .values()
            .filter(|member| member.session_counts() && member.session_deadline_ms <= now_ms)
            .map(|member| member.member_id.clone())
            .collect();
        for member_id in &expired {
            self.remove_member(group_id, member_id, ErrorCode::UNKNOWN_MEMBER_ID, now_ms);
        }
        if pending_expired {
            self.maybe_complete_join(group_id, now_ms);
        }
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        if group
            .rebalance_deadline_ms
            .is_none_or(|deadline| deadline > now_ms)
        {
            return;
        }
        match group.state {
            GroupState::PreparingRebalance => {
                // Kafka's initial delay: a wait during which a new member joined is followed by
                // one more, never past the rebalance timeout from the start; otherwise the join
                // completes with whoever has joined.
                if let Some(wait) = group.initial_wait.as_mut() {
                    if wait.member_added && now_ms < wait.end_ms_max {
                        wait.member_added = false;
                        let delay_ms = self.config.initial_rebalance_delay_ms_applied();
                        group.rebalance_deadline_ms =
                            Some(now_ms.saturating_add(delay_ms).min(wait.end_ms_max));
                        return;
                    }
                }
                self.complete_join(group_id, now_ms);
            }
            GroupState::CompletingRebalance => {
                // The leader's assignment never came (or some members never asked for theirs):
                // drop those who did not sync and start over with the rest.
                let unsynced: Vec<String> = group
                    .members
                    .values()
                    .filter(|member| !member.synced)
                    .map(|member| member.member_id.clone())
                    .collect();
                for member_id in &unsynced {
                    if let Some(group) = self.groups.get_mut(group_id) {
                        drop_member(group, member_id);
                    }
                }
                self.prepare_rebalance(group_id, now_ms);
                self.maybe_complete_join(group_id, now_ms);
            }
            GroupState::Empty | GroupState::Stable => group.rebalance_deadline_ms = None,
        }
    }

    /// The group of a member that names itself in a SyncGroup or Heartbeat, or the error Kafka
    /// answers (load in progress, invalid group id, unknown member, fenced static member).
    fn member_group(
        &self,
        group_id: &str,
        member_id: &str,
        instance: Option<&str>,
    ) -> Result<&Group, ErrorCode> {
        if let Some(error) = self.unavailable_for(group_id) {
            return Err(error);
        }
        if group_id.is_empty() {
            return Err(ErrorCode::INVALID_GROUP_ID);
        }
        let group = self
            .groups
            .get(group_id)
            .ok_or(ErrorCode::UNKNOWN_MEMBER_ID)?;
        if let Some(instance) = instance {
            if group
                .static_member_id(instance)
                .is_some_and(|holder| holder != member_id)
            {
                return Err(ErrorCode::FENCED_INSTANCE_ID);
            }
        }
        if !group.members.contains_key(member_id) {
            return Err(ErrorCode::UNKNOWN_MEMBER_ID);
        }
        Ok(group)
    }

    fn member_mut(&mut self, group_id: &str, member_id: &str) -> Option<&mut Member> {
        self.groups.get_mut(group_id)?.members.get_mut(member_id)
    }

    fn reply_sync(&mut self, parked: Parked, error_code: i16, assignment: Bytes, group_id: &str) {
        let mut response = SyncGroupResponse::default();
        response.error_code = error_code;
        response.assignment = assignment;
        if parked.version >= 5 {
            if let Some(group) = self.groups.get(group_id) {
                response.protocol_type = group.protocol_type.as_deref().map(str_bytes);
                response.protocol_name = group.protocol_name.as_deref().map(str_bytes);
            }
        }
        self.reply(
            parked.request_id,
            parked.version,
            Response::SyncGroup(response),
        );
    }

    pub(super) fn reply_sync_error(&mut self, parked: Parked, error_code: i16) {
        let mut response = SyncGroupResponse::default();
        response.error_code = error_code;
        self.reply(
            parked.request_id,
            parked.version,
            Response::SyncGroup(response),
        );
    }
}

/// Takes a member out of the group's tables without answering anything (callers do).
fn drop_member(group: &mut Group, member_id: &str) -> Option<Member> {
    let member = group.members.remove(member_id)?;
    if let Some(instance) = &member.group_instance_id {
        if group.static_member_id(instance) == Some(member_id) {
            group.static_members.remove(instance);
        }
    }
    if group.leader.as_deref() == Some(member_id) {
        group.leader = None;
    }
    Some(member)
}

/// Generations count up from 1 and never wrap to zero or below (0 is "no generation yet" and
/// negative values mean "not using group management" in OffsetCommit).
fn next_generation(generation_id: i32) -> i32 {
    generation_id
        .checked_add(1)
        .filter(|next| *next > 0)
        .unwrap_or(1)
}

/// The group instance id a request carries, if its version has the field.
fn instance_id(version: i16, first_version: i16, field: Option<&StrBytes>) -> Option<&str> {
    if version >= first_version {
        field.map(StrBytes::as_str)
    } else {
        None
    }
}

/// A JoinGroup error answer, filled so that it encodes at `version`.
pub(super) fn join_error(version: i16, error_code: i16, member_id: &str) -> JoinGroupResponse {
    let mut response = JoinGroupResponse::default();
    response.error_code = error_code;
    response.generation_id = -1;
    response.member_id = str_bytes(member_id);
    response.protocol_name = if version >= 7 {
        None
    } else {
        Some(StrBytes::default())
    };
    response
}

/// The JoinGroup answer for `member_id` in the group's current generation.
fn join_success(group: &Group, member_id: &str, version: i16) -> JoinGroupResponse {
    let mut response = JoinGroupResponse::default();
    response.generation_id = group.generation_id;
    let protocol = group.protocol_name.clone().unwrap_or_default();
    response.protocol_name = Some(str_bytes(&protocol));
    if version >= 7 {
        response.protocol_type = group.protocol_type.as_deref().map(str_bytes);
    }
    let leader = group.leader.clone().unwrap_or_default();
    response.leader = str_bytes(&leader);
    response.member_id = str_bytes(member_id);
    if leader == member_id {
        response.members = group
            .members
            .values()
            .map(|member| {
                let mut entry = JoinGroupResponseMember::default();
                entry.member_id = str_bytes(&member.member_id);
                if version >= 5 {
                    entry.group_instance_id = member.group_instance_id.as_deref().map(str_bytes);
                }
                entry.metadata = member.metadata_for(&protocol).cloned().unwrap_or_default();
                entry
            })
            .collect();
    }
    response
}
