//! Unit tests of the coordinator: each API's answers per version, the bad-input error codes, the
//! timeouts driven by `tick`, durability of commits, and that every reply encodes at its version.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use skiff_protocol::error_code::ErrorCode;

use super::*;

mod deletion;
pub(crate) mod harness;
mod txn;

const SESSION_MS: i32 = 10_000;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

fn code(error: ErrorCode) -> i16 {
    error.code()
}

/// A coordinator plus a virtual clock and request ids.
struct Harness {
    coordinator: Coordinator,
    now_ms: i64,
    next_request_id: RequestId,
}

impl Harness {
    fn new() -> Self {
        let mut harness = Self::unloaded();
        harness.coordinator.load_offsets([]);
        harness
    }

    /// These tests are about what follows a join, so a new group's first join completes as soon
    /// as every member has joined; the initial delay has its own tests ([`Harness::delayed`]).
    fn unloaded() -> Self {
        Self::unloaded_with_delay(0)
    }

    /// A loaded coordinator whose new groups wait `initial_rebalance_delay_ms` for more members.
    fn delayed(initial_rebalance_delay_ms: i32) -> Self {
        let mut harness = Self::unloaded_with_delay(initial_rebalance_delay_ms);
        harness.coordinator.load_offsets([]);
        harness
    }

    fn unloaded_with_delay(initial_rebalance_delay_ms: i32) -> Self {
        let mut config = GroupConfig::new(GroupKeys::KAFKA_DEFAULTS, 7);
        config.group_members_max = 3;
        config.initial_rebalance_delay_ms = initial_rebalance_delay_ms;
        Self {
            coordinator: Coordinator::new(config),
            now_ms: 1_000_000,
            next_request_id: 0,
        }
    }

    fn meta(&mut self, version: i16) -> RequestMeta {
        self.next_request_id += 1;
        RequestMeta {
            request_id: self.next_request_id,
            version,
            client_id: "client".into(),
            client_host: "/127.0.0.1".into(),
        }
    }

    fn outputs(&mut self) -> Vec<Output> {
        std::iter::from_fn(|| self.coordinator.poll_output()).collect()
    }

    /// Replies in order, as (request id, response); fails on a PersistOffsets.
    fn replies(&mut self) -> Vec<(RequestId, Response)> {
        self.outputs()
            .into_iter()
            .map(|output| match output {
                Output::Reply {
                    request_id,
                    version,
                    response,
                } => {
                    encode(&response, version);
                    (request_id, response)
                }
                other => panic!("unexpected {other:?}"),
            })
            .collect()
    }

    fn join(&mut self, version: i16, group: &str, member: &str, protocols: &[&str]) -> RequestId {
        self.join_with(version, group, member, protocols, SESSION_MS, None)
    }

    fn join_with(
        &mut self,
        version: i16,
        group: &str,
        member: &str,
        protocols: &[&str],
        session_timeout_ms: i32,
        instance: Option<&str>,
    ) -> RequestId {
        let meta = self.meta(version);
        let id = meta.request_id;
        let mut request = JoinGroupRequest::default();
        request.group_id = GroupId(s(group));
        request.session_timeout_ms = session_timeout_ms;
        request.rebalance_timeout_ms = if version >= 1 { 20_000 } else { -1 };
        request.member_id = s(member);
        request.group_instance_id = instance.map(s);
        request.protocol_type = s("consumer");
        request.protocols = protocols
            .iter()
            .map(|name| {
                let mut protocol = JoinGroupRequestProtocol::default();
                protocol.name = s(name);
                protocol.metadata = Bytes::from(format!("meta-{member}-{name}"));
                protocol
            })
            .collect();
        self.coordinator
            .handle_join_group(self.now_ms, meta, request);
        id
    }

    fn sync(
        &mut self,
        version: i16,
        group: &str,
        member: &str,
        generation: i32,
        assignments: &[(&str, &str)],
    ) -> RequestId {
        let meta = self.meta(version);
        let id = meta.request_id;
        let mut request = SyncGroupRequest::default();
        request.group_id = GroupId(s(group));
        request.member_id = s(member);
        request.generation_id = generation;
        request.assignments = assignments
            .iter()
            .map(|(member, assignment)| {
                let mut entry = SyncGroupRequestAssignment::default();
                entry.member_id = s(member);
                entry.assignment = Bytes::from(assignment.to_string());
                entry
            })
            .collect();
        self.coordinator
            .handle_sync_group(self.now_ms, meta, request);
        id
    }

    fn heartbeat(&mut self, group: &str, member: &str, generation: i32) -> i16 {
        let meta = self.meta(0);
        let mut request = HeartbeatRequest::default();
        request.group_id = GroupId(s(group));
        request.member_id = s(member);
        request.generation_id = generation;
        self.coordinator
            .handle_heartbeat(self.now_ms, meta, request);
        match &self.replies()[..] {
            [(_, Response::Heartbeat(response))] => response.error_code,
            other => panic!("unexpected {other:?}"),
        }
    }

    fn commit(
        &mut self,
        version: i16,
        group: &str,
        member: &str,
        generation: i32,
        offsets: &[(&str, i32, i64)],
    ) -> RequestId {
        let meta = self.meta(version);
        let id = meta.request_id;
        let mut request = OffsetCommitRequest::default();
        request.group_id = GroupId(s(group));
        request.member_id = s(member);
        request.generation_id_or_member_epoch = generation;
        for (topic, partition, offset) in offsets {
            let mut entry = OffsetCommitRequestTopic::default();
            entry.name = TopicName(s(topic));
            let mut p = OffsetCommitRequestPartition::default();
            p.partition_index = *partition;
            p.committed_offset = *offset;
            p.committed_metadata = Some(s("meta"));
            entry.partitions.push(p);
            request.topics.push(entry);
        }
        self.coordinator
            .handle_offset_commit(self.now_ms, meta, request, |topic, _| topic != "missing");
        id
    }

    fn fetch(
        &mut self,
        version: i16,
        group: &str,
        partitions: &[(&str, i32)],
    ) -> OffsetFetchResponse {
        let meta = self.meta(version);
        let mut request = OffsetFetchRequest::default();
        request.group_id = GroupId(s(group));
        let mut topics = Vec::new();
        for (topic, partition) in partitions {
            let mut entry = OffsetFetchRequestTopic::default();
            entry.name = TopicName(s(topic));
            entry.partition_indexes = vec![*partition];
            topics.push(entry);
        }
        request.topics = Some(topics);
        self.coordinator.handle_offset_fetch(meta, request);
        match self.replies().pop() {
            Some((_, Response::OffsetFetch(response))) => response,
            other => panic!("unexpected {other:?}"),
        }
    }

    fn advance(&mut self, by_ms: i64) {
        self.now_ms += by_ms;
        self.coordinator.tick(self.now_ms);
    }
}

/// Encodes a response at its version (fails the test if kafka-protocol refuses the fields).
fn encode(response: &Response, version: i16) -> BytesMut {
    let mut buf = BytesMut::new();
    let result = match response {
        Response::JoinGroup(r) => r.encode(&mut buf, version),
        Response::SyncGroup(r) => r.encode(&mut buf, version),
        Response::Heartbeat(r) => r.encode(&mut buf, version),
        Response::LeaveGroup(r) => r.encode(&mut buf, version),
        Response::OffsetCommit(r) => r.encode(&mut buf, version),
        Response::OffsetFetch(r) => r.encode(&mut buf, version),
        Response::DescribeGroups(r) => r.encode(&mut buf, version),
        Response::ListGroups(r) => r.encode(&mut buf, version),
        Response::DeleteGroups(r) => r.encode(&mut buf, version),
        Response::OffsetDelete(r) => r.encode(&mut buf, version),
        Response::TxnOffsetCommit(r) => r.encode(&mut buf, version),
        Response::ConsumerGroupHeartbeat(r) => r.encode(&mut buf, version),
        Response::ConsumerGroupDescribe(r) => r.encode(&mut buf, version),
    };
    if let Err(error) = result {
        panic!("{response:?} does not encode at v{version}: {error}");
    }
    buf
}

fn join_response(replies: &[(RequestId, Response)], id: RequestId) -> JoinGroupResponse {
    replies
        .iter()
        .find_map(|(request_id, response)| match response {
            Response::JoinGroup(r) if *request_id == id => Some(r.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no JoinGroup reply for {id} in {replies:?}"))
}

fn sync_response(replies: &[(RequestId, Response)], id: RequestId) -> SyncGroupResponse {
    replies
        .iter()
        .find_map(|(request_id, response)| match response {
            Response::SyncGroup(r) if *request_id == id => Some(r.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no SyncGroup reply for {id} in {replies:?}"))
}

/// One member forms a group at `version`; returns (member id, generation).
fn form_single(h: &mut Harness, version: i16, group: &str) -> (String, i32) {
    let mut id = h.join(version, group, "", &["range"]);
    let mut replies = h.replies();
    let mut response = join_response(&replies, id);
    if version >= 4 {
        assert_eq!(response.error_code, code(ErrorCode::MEMBER_ID_REQUIRED));
        let member = response.member_id.as_str().to_owned();
        id = h.join(version, group, &member, &["range"]);
        replies = h.replies();
        response = join_response(&replies, id);
    }
    assert_eq!(response.error_code, 0, "{response:?}");
    let member = response.member_id.as_str().to_owned();
    assert_eq!(response.leader.as_str(), member);
    assert_eq!(response.members.len(), 1);
    let generation = response.generation_id;
    let sync = h.sync(
        version.min(5),
        group,
        &member,
        generation,
        &[(&member, "all")],
    );
    let replies = h.replies();
    let synced = sync_response(&replies, sync);
    assert_eq!(synced.error_code, 0);
    assert_eq!(synced.assignment, Bytes::from("all"));
    (member, generation)
}

#[test]
fn requests_before_loading_get_load_in_progress() {
    let mut h = Harness::unloaded();
    let id = h.join(0, "g", "", &["range"]);
    let replies = h.replies();
    assert_eq!(
        join_response(&replies, id).error_code,
        code(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS)
    );
    // OffsetFetch v1 has no top-level error: it goes into every partition.
    let response = h.fetch(1, "g", &[("t", 0), ("t", 1)]);
    let partitions: Vec<_> = response.topics.iter().flat_map(|t| &t.partitions).collect();
    assert_eq!(partitions.len(), 2);
    assert!(partitions
        .iter()
        .all(|p| p.error_code == 14 && p.committed_offset == -1));
    let response = h.fetch(2, "g", &[("t", 0)]);
    assert_eq!(response.error_code, 14);
    assert!(response.topics.is_empty());
}

#[test]
fn every_join_version_forms_a_group() {
    for version in 0..=9 {
        let mut h = Harness::new();
        let (member, generation) = form_single(&mut h, version, "g");
        assert_eq!(generation, 1);
        assert_eq!(h.heartbeat("g", &member, generation), 0);
        assert_eq!(h.coordinator.group_state("g"), Some(GroupState::Stable));
    }
}

#[test]
fn second_member_triggers_a_rebalance_and_gets_its_assignment() {
    let mut h = Harness::new();
    let (first, generation) = form_single(&mut h, 1, "g");
    let second_join = h.join(1, "g", "", &["range"]);
    assert!(
        h.replies().is_empty(),
        "the join waits for the first member"
    );
    assert_eq!(h.heartbeat("g", &first, generation), 27);
    let first_join = h.join(1, "g", &first, &["range"]);
    let replies = h.replies();
    let leader = join_response(&replies, first_join);
    let follower = join_response(&replies, second_join);
    assert_eq!(leader.generation_id, 2);
    assert_eq!(follower.generation_id, 2);
    assert_eq!(leader.leader.as_str(), first, "the leader is kept");
    assert_eq!(leader.members.len(), 2);
    assert!(
        follower.members.is_empty(),
        "only the leader gets the members"
    );
    let second = follower.member_id.as_str().to_owned();
    let follower_sync = h.sync(0, "g", &second, 2, &[]);
    assert!(h.replies().is_empty(), "the follower waits for the leader");
    assert_eq!(
        h.heartbeat("g", &second, 2),
        0,
        "heartbeats are fine while syncing"
    );
    let leader_sync = h.sync(0, "g", &first, 2, &[(&first, "p0"), (&second, "p1")]);
    let replies = h.replies();
    assert_eq!(
        sync_response(&replies, leader_sync).assignment,
        Bytes::from("p0")
    );
    assert_eq!(
        sync_response(&replies, follower_sync).assignment,
        Bytes::from("p1")
    );
    assert_eq!(h.heartbeat("g", &first, 1), 22, "old generation");
    assert_eq!(h.heartbeat("g", "nobody", 2), 25);
    assert_eq!(h.heartbeat("other", &first, 2), 25);
}

#[test]
fn bad_join_requests_get_kafkas_error_codes() {
    let mut h = Harness::new();
    let cases: Vec<(RequestId, i16)> = vec![
        (h.join_with(0, "g", "", &["range"], 0, None), 26),
        (h.join_with(0, "g", "", &["range"], i32::MAX, None), 26),
        (h.join_with(0, "g", "", &["range"], -5, None), 26),
        (h.join(0, "", "", &["range"]), 24),
        (h.join(0, "g", "ghost", &["range"]), 25),
        (h.join(0, "g", "", &[]), 23),
    ];
    let replies = h.replies();
    for (id, expected) in cases {
        let response = join_response(&replies, id);
        assert_eq!(response.error_code, expected, "{response:?}");
        assert_eq!(response.generation_id, -1);
    }
    // Oversized metadata and a negative rebalance timeout: INVALID_REQUEST.
    let meta = h.meta(1);
    let mut request = JoinGroupRequest::default();
    request.group_id = GroupId(s("g"));
    request.session_timeout_ms = SESSION_MS;
    request.rebalance_timeout_ms = -1;
    request.protocol_type = s("consumer");
    let mut protocol = JoinGroupRequestProtocol::default();
    protocol.name = s("range");
    request.protocols = vec![protocol.clone()];
    h.coordinator
        .handle_join_group(h.now_ms, meta.clone(), request.clone());
    request.rebalance_timeout_ms = 1000;
    protocol.metadata = Bytes::from(vec![
        0u8;
        h.coordinator.config().member_metadata_bytes_max + 1
    ]);
    request.protocols = vec![protocol];
    let meta = h.meta(1);
    h.coordinator.handle_join_group(h.now_ms, meta, request);
    for (_, response) in h.replies() {
        match response {
            Response::JoinGroup(r) => assert_eq!(r.error_code, 42),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        h.coordinator.group_count(),
        0,
        "failed joins leave no group behind"
    );
    // A different protocol than the group's.
    let (_member, _) = form_single(&mut h, 0, "g");
    let id = h.join(0, "g", "", &["roundrobin"]);
    assert_eq!(join_response(&h.replies(), id).error_code, 23);
}

#[test]
fn group_size_is_bounded() {
    let mut h = Harness::new();
    let (first, _) = form_single(&mut h, 0, "g");
    let a = h.join(0, "g", "", &["range"]);
    let b = h.join(0, "g", "", &["range"]);
    let c = h.join(0, "g", "", &["range"]);
    let replies = h.replies();
    assert_eq!(join_response(&replies, c).error_code, 81);
    let rejoin = h.join(0, "g", &first, &["range"]);
    let replies = h.replies();
    for id in [a, b, rejoin] {
        assert_eq!(join_response(&replies, id).error_code, 0);
    }
}

#[test]
fn member_id_required_handshake_and_pending_expiry() {
    let mut h = Harness::new();
    let id = h.join(4, "g", "", &["range"]);
    let response = join_response(&h.replies(), id);
    assert_eq!(response.error_code, 79);
    assert!(!response.member_id.is_empty());
    assert_eq!(
        h.coordinator.next_deadline_ms(),
        Some(h.now_ms + i64::from(SESSION_MS))
    );
    h.advance(i64::from(SESSION_MS));
    let id = h.join(4, "g", response.member_id.as_str(), &["range"]);
    assert_eq!(
        join_response(&h.replies(), id).error_code,
        25,
        "the handed-out id expired"
    );
}

#[test]
fn session_expiry_removes_a_member_and_rebalances() {
    let mut h = Harness::new();
    let (first, _) = form_single(&mut h, 0, "g");
    let second_join = h.join(0, "g", "", &["range"]);
    let first_join = h.join(0, "g", &first, &["range"]);
    let replies = h.replies();
    let second = join_response(&replies, second_join)
        .member_id
        .as_str()
        .to_owned();
    assert_eq!(join_response(&replies, first_join).generation_id, 2);
    let follower_sync = h.sync(0, "g", &second, 2, &[]);
    let leader_sync = h.sync(0, "g", &first, 2, &[(&first, "a"), (&second, "b")]);
    let replies = h.replies();
    assert_eq!(sync_response(&replies, follower_sync).error_code, 0);
    assert_eq!(sync_response(&replies, leader_sync).error_code, 0);
    // Only the first keeps heartbeating.
    for _ in 0..3 {
        h.advance(4_000);
        assert!(h.heartbeat("g", &first, 2) == 0 || h.heartbeat("g", &first, 2) == 27);
    }
    assert_eq!(
        h.coordinator.group_state("g"),
        Some(GroupState::PreparingRebalance)
    );
    assert_eq!(h.heartbeat("g", &second, 2), 25, "expired");
    let rejoin = h.join(0, "g", &first, &["range"]);
    let response = join_response(&h.replies(), rejoin);
    assert_eq!(response.generation_id, 3);
    assert_eq!(response.members.len(), 1);
}

#[test]
fn rebalance_deadline_drops_members_that_do_not_rejoin() {
    let mut h = Harness::new();
    // v0: the rebalance timeout is the session timeout.
    let (first, _) = form_single(&mut h, 0, "g");
    let second_join = h.join(0, "g", "", &["range"]);
    assert!(h.replies().is_empty());
    // The first member heartbeats (so its session stays alive) but never rejoins.
    for _ in 0..2 {
        h.advance(4_000);
        assert_eq!(h.heartbeat("g", &first, 1), 27);
    }
    h.advance(2_000);
    let replies = h.replies();
    let response = join_response(&replies, second_join);
    assert_eq!(response.error_code, 0);
    assert_eq!(response.generation_id, 2);
    assert_eq!(response.members.len(), 1, "the first member was dropped");
    assert_eq!(response.leader, response.member_id);
}

#[test]
fn leader_that_never_syncs_is_dropped_at_the_sync_deadline() {
    let mut h = Harness::new();
    let (first, _) = form_single(&mut h, 1, "g");
    let second_join = h.join(1, "g", "", &["range"]);
    let first_join = h.join(1, "g", &first, &["range"]);
    let replies = h.replies();
    let second = join_response(&replies, second_join)
        .member_id
        .as_str()
        .to_owned();
    assert_eq!(join_response(&replies, first_join).leader.as_str(), first);
    let follower_sync = h.sync(0, "g", &second, 2, &[]);
    assert!(h.replies().is_empty());
    h.advance(20_000);
    let replies = h.replies();
    assert_eq!(sync_response(&replies, follower_sync).error_code, 27);
    let rejoin = h.join(1, "g", &second, &["range"]);
    let response = join_response(&h.replies(), rejoin);
    assert_eq!(response.generation_id, 3);
    assert_eq!(response.leader.as_str(), second);
}

#[test]
fn leave_group_v0_and_batched_v3() {
    let mut h = Harness::new();
    let (first, _) = form_single(&mut h, 0, "g");
    let meta = h.meta(0);
    let mut request = LeaveGroupRequest::default();
    request.group_id = GroupId(s("g"));
    request.member_id = s("ghost");
    h.coordinator
        .handle_leave_group(h.now_ms, meta, request.clone());
    request.member_id = s(&first);
    let meta = h.meta(0);
    h.coordinator.handle_leave_group(h.now_ms, meta, request);
    let codes: Vec<i16> = h
        .replies()
        .into_iter()
        .map(|(_, response)| match response {
            Response::LeaveGroup(r) => r.error_code,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(codes, vec![25, 0]);
    assert_eq!(
        h.coordinator.group_state("g"),
        None,
        "an empty group without offsets is dropped"
    );

    let (first, _) = form_single(&mut h, 3, "g");
    let mut request = LeaveGroupRequest::default();
    request.group_id = GroupId(s("g"));
    for member in [first.as_str(), "ghost"] {
        let mut identity = MemberIdentity::default();
        identity.member_id = s(member);
        request.members.push(identity);
    }
    let meta = h.meta(3);
    h.coordinator.handle_leave_group(h.now_ms, meta, request);
    match h.replies().pop() {
        Some((_, Response::LeaveGroup(r))) => {
            assert_eq!(r.error_code, 0);
            let codes: Vec<i16> = r.members.iter().map(|m| m.error_code).collect();
            assert_eq!(codes, vec![0, 25]);
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn static_member_restart_fences_the_old_incarnation() {
    let mut h = Harness::new();
    let id = h.join_with(5, "g", "", &["range"], SESSION_MS, Some("instance-1"));
    let old = join_response(&h.replies(), id);
    assert_eq!(old.error_code, 0, "static members skip MEMBER_ID_REQUIRED");
    let old_id = old.member_id.as_str().to_owned();
    let id = h.join_with(5, "g", "", &["range"], SESSION_MS, Some("instance-1"));
    let new = join_response(&h.replies(), id);
    assert_eq!(new.error_code, 0);
    assert_ne!(new.member_id.as_str(), old_id);
    let meta = h.meta(3);
    let mut request = HeartbeatRequest::default();
    request.group_id = GroupId(s("g"));
    request.member_id = s(&old_id);
    request.generation_id = new.generation_id;
    request.group_instance_id = Some(s("instance-1"));
    h.coordinator.handle_heartbeat(h.now_ms, meta, request);
    match h.replies().pop() {
        Some((_, Response::Heartbeat(r))) => assert_eq!(r.error_code, 82),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn commits_are_acknowledged_only_once_durable_and_survive_a_restart() {
    let mut h = Harness::new();
    let (member, generation) = form_single(&mut h, 0, "g");
    let id = h.commit(2, "g", &member, generation, &[("t", 0, 42), ("t", 1, 7)]);
    let outputs = h.outputs();
    let commits = match &outputs[..] {
        [Output::PersistOffsets {
            request_id,
            commits,
        }] if *request_id == id => commits.clone(),
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(commits.len(), 2);
    assert_eq!(
        h.fetch(1, "g", &[("t", 0)]).topics[0].partitions[0].committed_offset,
        -1
    );
    h.coordinator.offsets_persisted(id, Ok(()));
    match h.replies().pop() {
        Some((request_id, Response::OffsetCommit(r))) => {
            assert_eq!(request_id, id);
            assert!(r
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .all(|p| p.error_code == 0));
        }
        other => panic!("unexpected {other:?}"),
    }
    let response = h.fetch(1, "g", &[("t", 0), ("t", 1), ("t", 2)]);
    let offsets: Vec<i64> = response
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| p.committed_offset)
        .collect();
    assert_eq!(offsets, vec![42, 7, -1]);
    // v0 answers UNKNOWN_TOPIC_OR_PARTITION for a partition without a commit.
    let v0 = h.fetch(0, "g", &[("t", 2)]);
    assert_eq!(v0.topics[0].partitions[0].error_code, 3);

    // Restart: replaying the persisted records (and a tombstone) rebuilds the table.
    let mut restarted = Harness::unloaded();
    let mut log: Vec<OffsetLogEntry> = commits
        .into_iter()
        .map(|(key, value)| OffsetLogEntry::Commit(key, value))
        .collect();
    log.push(OffsetLogEntry::Delete(OffsetKey {
        group: "g".into(),
        topic: "t".into(),
        partition: 1,
    }));
    restarted
        .coordinator
        .load_offsets(log.into_iter().map(Replayed::from));
    let offsets = restarted.coordinator.committed_offsets();
    assert_eq!(offsets.len(), 1);
    assert_eq!(offsets.get(&("g".into(), "t".into(), 0)), Some(&42));
}

#[test]
fn commit_rules_follow_kafka() {
    let mut h = Harness::new();
    // Standalone commits (no group management): v0, and v1+ with generation −1.
    for version in [0, 1, 2, 8] {
        let id = h.commit(version, "solo", "", -1, &[("t", 0, 5)]);
        h.coordinator.offsets_persisted(id, Ok(()));
    }
    let codes: Vec<i16> = h
        .outputs()
        .into_iter()
        .filter_map(|output| match output {
            Output::Reply {
                response: Response::OffsetCommit(r),
                ..
            } => Some(r.topics[0].partitions[0].error_code),
            _ => None,
        })
        .collect();
    assert_eq!(codes, vec![0, 0, 0, 0]);
    // A generation for a group that does not exist; an unknown member; a wrong generation;
    // an unknown topic; metadata too large.
    let (member, generation) = form_single(&mut h, 0, "g");
    h.commit(2, "nogroup", "m", 3, &[("t", 0, 1)]);
    h.commit(2, "g", "ghost", generation, &[("t", 0, 1)]);
    h.commit(2, "g", &member, generation + 1, &[("t", 0, 1)]);
    h.commit(2, "g", &member, generation, &[("missing", 0, 1)]);
    let codes: Vec<i16> = h
        .replies()
        .into_iter()
        .map(|(_, response)| match response {
            Response::OffsetCommit(r) => r.topics[0].partitions[0].error_code,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(codes, vec![22, 25, 22, 3]);
    let meta = h.meta(2);
    let mut request = OffsetCommitRequest::default();
    request.group_id = GroupId(s("g"));
    request.member_id = s(&member);
    request.generation_id_or_member_epoch = generation;
    let mut topic = OffsetCommitRequestTopic::default();
    topic.name = TopicName(s("t"));
    let mut big = OffsetCommitRequestPartition::default();
    big.committed_metadata = Some(StrBytes::from_string("x".repeat(5000)));
    let mut fine = OffsetCommitRequestPartition::default();
    fine.partition_index = 1;
    fine.committed_offset = 9;
    topic.partitions = vec![big, fine];
    request.topics = vec![topic];
    h.coordinator
        .handle_offset_commit(h.now_ms, meta.clone(), request, |_, _| true);
    let outputs = h.outputs();
    assert!(matches!(&outputs[..], [Output::PersistOffsets { commits, .. }] if commits.len() == 1));
    h.coordinator
        .offsets_persisted(meta.request_id, Err(PersistError::Unavailable));
    match h.replies().pop() {
        Some((_, Response::OffsetCommit(r))) => {
            let codes: Vec<i16> = r.topics[0]
                .partitions
                .iter()
                .map(|p| p.error_code)
                .collect();
            assert_eq!(codes, vec![12, 15]);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(
        h.coordinator.committed_offset("g", "t", 1),
        None,
        "a failed write commits nothing"
    );
}

#[test]
fn group_and_offset_table_bounds_answer_coordinator_not_available() {
    let mut h = Harness::new();
    h.coordinator.config.groups_max = 1;
    h.coordinator.config.committed_offsets_max = 1;
    let (member, generation) = form_single(&mut h, 0, "g");
    let id = h.join(0, "second", "", &["range"]);
    assert_eq!(join_response(&h.replies(), id).error_code, 15);
    let first = h.commit(2, "g", &member, generation, &[("t", 0, 1)]);
    assert!(matches!(&h.outputs()[..], [Output::PersistOffsets { .. }]));
    h.coordinator.offsets_persisted(first, Ok(()));
    h.outputs();
    // A new partition beyond the table bound is refused; updating a known one still works.
    h.commit(2, "g", &member, generation, &[("t", 1, 1)]);
    let update = h.commit(2, "g", &member, generation, &[("t", 0, 2)]);
    let outputs = h.outputs();
    match &outputs[..] {
        [Output::Reply {
            response: Response::OffsetCommit(refused),
            ..
        }, Output::PersistOffsets { request_id, .. }] => {
            assert_eq!(refused.topics[0].partitions[0].error_code, 15);
            assert_eq!(*request_id, update);
        }
        other => panic!("unexpected {other:?}"),
    }
    // A standalone commit may not create a group beyond the bound either.
    h.commit(2, "other", "", -1, &[("t", 0, 1)]);
    match &h.replies()[..] {
        [(_, Response::OffsetCommit(r))] => assert_eq!(r.topics[0].partitions[0].error_code, 15),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn a_late_older_persist_does_not_overwrite_a_newer_commit() {
    let mut h = Harness::new();
    let older = h.commit(2, "g", "", -1, &[("t", 0, 10)]);
    let newer = h.commit(2, "g", "", -1, &[("t", 0, 20)]);
    h.coordinator.offsets_persisted(newer, Ok(()));
    h.coordinator.offsets_persisted(older, Ok(()));
    assert_eq!(
        h.coordinator
            .committed_offset("g", "t", 0)
            .map(|c| c.offset),
        Some(20)
    );
}

#[test]
fn offset_fetch_all_partitions_and_v8_groups() {
    let mut h = Harness::new();
    let id = h.commit(2, "g", "", -1, &[("a", 0, 1), ("b", 3, 2)]);
    h.coordinator.offsets_persisted(id, Ok(()));
    h.outputs();
    let mut request = OffsetFetchRequest::default();
    request.group_id = GroupId(s("g"));
    request.topics = None;
    let meta = h.meta(2);
    h.coordinator.handle_offset_fetch(meta, request);
    let mut request = OffsetFetchRequest::default();
    let mut group = OffsetFetchRequestGroup::default();
    group.group_id = GroupId(s("g"));
    let mut topic = OffsetFetchRequestTopics::default();
    topic.name = TopicName(s("b"));
    topic.partition_indexes = vec![3, 4];
    group.topics = Some(vec![topic]);
    request.groups = vec![group];
    let meta = h.meta(8);
    h.coordinator.handle_offset_fetch(meta, request);
    let replies = h.replies();
    match &replies[..] {
        [(_, Response::OffsetFetch(all)), (_, Response::OffsetFetch(v8))] => {
            assert_eq!(all.topics.len(), 2);
            let offsets: Vec<i64> = v8.groups[0].topics[0]
                .partitions
                .iter()
                .map(|p| p.committed_offset)
                .collect();
            assert_eq!(offsets, vec![2, -1]);
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn describe_and_list() {
    let mut h = Harness::new();
    let (member, _) = form_single(&mut h, 0, "g");
    let mut describe = DescribeGroupsRequest::default();
    describe.groups = vec![GroupId(s("g")), GroupId(s("absent"))];
    for version in 0..=5 {
        let meta = h.meta(version);
        h.coordinator.handle_describe_groups(meta, describe.clone());
    }
    for version in 0..=5 {
        let mut list = ListGroupsRequest::default();
        if version >= 4 {
            list.states_filter = vec![s("stable")];
        }
        let meta = h.meta(version);
        h.coordinator.handle_list_groups(meta, list);
    }
    for (_, response) in h.replies() {
        match response {
            Response::DescribeGroups(r) => {
                assert_eq!(r.groups[0].group_state.as_str(), "Stable");
                assert_eq!(r.groups[0].protocol_data.as_str(), "range");
                assert_eq!(r.groups[0].members[0].member_id.as_str(), member);
                assert_eq!(r.groups[0].members[0].member_assignment, Bytes::from("all"));
                assert_eq!(r.groups[1].group_state.as_str(), "Dead");
            }
            Response::ListGroups(r) => {
                assert_eq!(r.groups.len(), 1);
                assert_eq!(r.groups[0].protocol_type.as_str(), "consumer");
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[test]
fn every_reply_encodes_at_every_version() {
    // `Harness::replies` encodes every reply it sees; drive each API across its versions through
    // success and error paths.
    for version in 0..=9 {
        let mut h = Harness::new();
        let (member, generation) = form_single(&mut h, version, "g");
        let bad = h.join(version, "g", "ghost", &["range"]);
        let sync_version = version.min(5);
        h.sync(sync_version, "g", "ghost", generation, &[]);
        let replies = h.replies();
        assert_eq!(join_response(&replies, bad).error_code, 25);
        for commit_version in 0..=8 {
            let id = h.commit(commit_version, "g", &member, generation, &[("t", 0, 1)]);
            h.coordinator.offsets_persisted(id, Ok(()));
            for output in h.outputs() {
                match output {
                    Output::Reply {
                        version, response, ..
                    } => {
                        encode(&response, version);
                    }
                    Output::PersistOffsets { .. }
                    | Output::PersistOffsetDeletes { .. }
                    | Output::PersistTxnOffsets { .. }
                    | Output::PersistConsumerRecords { .. } => {}
                }
            }
        }
        for fetch_version in 0..=7 {
            h.fetch(fetch_version, "g", &[("t", 0), ("u", 1)]);
        }
        for leave_version in 0..=5 {
            let mut request = LeaveGroupRequest::default();
            request.group_id = GroupId(s("g"));
            request.member_id = s("ghost");
            let mut identity = MemberIdentity::default();
            identity.member_id = s("ghost");
            request.members = vec![identity];
            let meta = h.meta(leave_version);
            h.coordinator.handle_leave_group(h.now_ms, meta, request);
        }
        for heartbeat_version in 0..=4 {
            let mut request = HeartbeatRequest::default();
            request.group_id = GroupId(s("g"));
            request.member_id = s(&member);
            request.generation_id = generation;
            let meta = h.meta(heartbeat_version);
            h.coordinator.handle_heartbeat(h.now_ms, meta, request);
        }
        h.replies();
    }
}

/// A LeaveGroup v0 for one member; returns its error code and the other replies it caused.
fn leave_v0(h: &mut Harness, group: &str, member: &str) -> (i16, Vec<(RequestId, Response)>) {
    let meta = h.meta(0);
    let mut request = LeaveGroupRequest::default();
    request.group_id = GroupId(s(group));
    request.member_id = s(member);
    h.coordinator.handle_leave_group(h.now_ms, meta, request);
    let mut replies = h.replies();
    match replies.pop() {
        Some((_, Response::LeaveGroup(r))) => (r.error_code, replies),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn initial_delay_holds_a_new_groups_first_join_until_it_ends() {
    let mut h = Harness::delayed(3_000);
    let start_ms = h.now_ms;
    let join = h.join(1, "g", "", &["range"]);
    assert!(h.replies().is_empty(), "the only member is held");
    assert_eq!(
        h.coordinator.group_state("g"),
        Some(GroupState::PreparingRebalance)
    );
    assert_eq!(h.coordinator.next_deadline_ms(), Some(start_ms + 3_000));
    h.advance(2_999);
    assert!(h.replies().is_empty());
    h.advance(1);
    let response = join_response(&h.replies(), join);
    assert_eq!(response.error_code, 0);
    assert_eq!(response.generation_id, 1);
    assert_eq!(response.leader, response.member_id);
    assert_eq!(response.members.len(), 1);
    assert_eq!(
        h.coordinator.group_state("g"),
        Some(GroupState::CompletingRebalance)
    );
}

#[test]
fn a_newcomer_during_the_initial_delay_extends_it_by_the_delay() {
    let mut h = Harness::delayed(3_000);
    let start_ms = h.now_ms;
    let first = h.join(1, "g", "", &["range"]);
    h.advance(1_000);
    let second = h.join(1, "g", "", &["range"]);
    assert!(
        h.replies().is_empty(),
        "everyone known has joined, still held"
    );
    h.advance(2_000);
    assert!(h.replies().is_empty(), "the newcomer earned one more delay");
    assert_eq!(h.coordinator.next_deadline_ms(), Some(start_ms + 6_000));
    h.advance(2_999);
    assert!(h.replies().is_empty());
    h.advance(1);
    let replies = h.replies();
    let (first, second) = (
        join_response(&replies, first),
        join_response(&replies, second),
    );
    assert_eq!((first.error_code, second.error_code), (0, 0));
    assert_eq!(first.generation_id, 1, "one generation for both");
    assert_eq!(second.generation_id, 1);
    assert_eq!(first.leader, second.leader);
    let leader = if first.leader == first.member_id {
        &first
    } else {
        &second
    };
    assert_eq!(leader.members.len(), 2);
}

#[test]
fn the_handshake_is_answered_at_once_and_its_join_extends_the_delay() {
    let mut h = Harness::delayed(3_000);
    let start_ms = h.now_ms;
    let mut handed_out = Vec::new();
    for _ in 0..2 {
        let id = h.join(4, "g", "", &["range"]);
        let response = join_response(&h.replies(), id);
        assert_eq!(response.error_code, code(ErrorCode::MEMBER_ID_REQUIRED));
        handed_out.push(response.member_id.as_str().to_owned());
    }
    let first = h.join(4, "g", &handed_out[0], &["range"]);
    h.advance(2_000);
    let second = h.join(4, "g", &handed_out[1], &["range"]);
    h.advance(1_000);
    assert!(h.replies().is_empty());
    assert_eq!(h.coordinator.next_deadline_ms(), Some(start_ms + 6_000));
    h.advance(3_000);
    let replies = h.replies();
    assert_eq!(join_response(&replies, first).generation_id, 1);
    assert_eq!(join_response(&replies, second).generation_id, 1);
}

#[test]
fn initial_delay_never_outlasts_the_rebalance_timeout() {
    // v0: the rebalance timeout is the session timeout, 6 s here.
    let rebalance_timeout_ms = 6_000;
    let mut h = Harness::delayed(4_000);
    let start_ms = h.now_ms;
    let joins: Vec<RequestId> = [0, 1_000, 4_000]
        .into_iter()
        .map(|at_ms| {
            h.advance(start_ms + at_ms - h.now_ms);
            h.join_with(0, "g", "", &["range"], rebalance_timeout_ms, None)
        })
        .collect();
    assert!(h.replies().is_empty());
    // The second member's delay would end at 8 s; the third one's would extend again.
    assert_eq!(h.coordinator.next_deadline_ms(), Some(start_ms + 6_000));
    h.advance(start_ms + 5_999 - h.now_ms);
    assert!(h.replies().is_empty());
    h.advance(1);
    let replies = h.replies();
    for join in joins {
        let response = join_response(&replies, join);
        assert_eq!((response.error_code, response.generation_id), (0, 1));
    }

    // A delay longer than the rebalance timeout (v1 members ask for 20 s) waits only that.
    let mut h = Harness::delayed(30_000);
    let join = h.join(1, "g", "", &["range"]);
    assert_eq!(h.coordinator.next_deadline_ms(), Some(h.now_ms + 20_000));
    h.advance(19_999);
    assert!(h.replies().is_empty());
    h.advance(1);
    assert_eq!(join_response(&h.replies(), join).generation_id, 1);
}

#[test]
fn zero_delay_completes_the_first_join_as_soon_as_everyone_has_joined() {
    let mut h = Harness::delayed(0);
    let join = h.join(1, "g", "", &["range"]);
    let response = join_response(&h.replies(), join);
    assert_eq!((response.error_code, response.generation_id), (0, 1));
    assert_eq!(
        h.coordinator.group_state("g"),
        Some(GroupState::CompletingRebalance)
    );
    // Next is the member's session (earlier than the sync deadline), not a join wait.
    assert_eq!(
        h.coordinator.next_deadline_ms(),
        Some(h.now_ms + i64::from(SESSION_MS))
    );
}

#[test]
fn only_a_group_leaving_empty_is_delayed() {
    let mut h = Harness::delayed(3_000);
    let first_join = h.join(1, "g", "", &["range"]);
    h.advance(3_000);
    let first = join_response(&h.replies(), first_join);
    let first = first.member_id.as_str().to_owned();
    let sync = h.sync(1, "g", &first, 1, &[(&first, "all")]);
    assert_eq!(sync_response(&h.replies(), sync).error_code, 0);
    // A Stable group: a newcomer's rebalance completes once everyone has rejoined, no waiting.
    let second_join = h.join(1, "g", "", &["range"]);
    assert!(
        h.replies().is_empty(),
        "waits for the first member to rejoin"
    );
    let first_rejoin = h.join(1, "g", &first, &["range"]);
    let replies = h.replies();
    assert_eq!(join_response(&replies, first_rejoin).generation_id, 2);
    let second = join_response(&replies, second_join);
    assert_eq!(second.generation_id, 2);
    let second = second.member_id.as_str().to_owned();
    // Commit an offset so that the group outlives its members, then let both leave.
    let sync_second = h.sync(1, "g", &second, 2, &[]);
    let sync_first = h.sync(1, "g", &first, 2, &[(&first, "a"), (&second, "b")]);
    let replies = h.replies();
    assert_eq!(sync_response(&replies, sync_second).error_code, 0);
    assert_eq!(sync_response(&replies, sync_first).error_code, 0);
    let commit = h.commit(2, "g", &first, 2, &[("t", 0, 5)]);
    let persist = h.outputs();
    assert!(
        matches!(&persist[..], [Output::PersistOffsets { request_id, .. }] if *request_id == commit)
    );
    h.coordinator.offsets_persisted(commit, Ok(()));
    h.replies();
    assert_eq!(leave_v0(&mut h, "g", &first).0, 0);
    assert_eq!(leave_v0(&mut h, "g", &second).0, 0);
    assert_eq!(h.coordinator.group_state("g"), Some(GroupState::Empty));
    // Empty again: the next first rebalance waits again.
    let third_join = h.join(1, "g", "", &["range"]);
    h.advance(2_999);
    assert!(h.replies().is_empty());
    h.advance(1);
    assert_eq!(join_response(&h.replies(), third_join).generation_id, 4);
}

#[test]
fn members_leaving_during_the_initial_delay() {
    let mut h = Harness::delayed(3_000);
    let start_ms = h.now_ms;
    let first_join = h.join(0, "g", "", &["range"]);
    let second_join = h.join(0, "g", "", &["range"]);
    assert!(h.replies().is_empty());
    let members: Vec<String> = h.coordinator.groups["g"].members.keys().cloned().collect();
    assert_eq!(members.len(), 2);
    // The second leaves: its own join is answered, the first still waits for the delay.
    let (leave_code, answered) = leave_v0(&mut h, "g", &members[1]);
    assert_eq!(leave_code, 0);
    assert_eq!(answered.len(), 1);
    assert_ne!(join_response(&answered, second_join).error_code, 0);
    assert_eq!(h.coordinator.next_deadline_ms(), Some(start_ms + 3_000));
    h.advance(3_000);
    assert!(
        h.replies().is_empty(),
        "the newcomer earned one more delay even though it left, as in Kafka"
    );
    h.advance(3_000);
    let replies = h.replies();
    let kept = join_response(&replies, first_join);
    assert_eq!((kept.error_code, kept.generation_id), (0, 1));
    assert_eq!(kept.members.len(), 1);
    assert_eq!(kept.member_id.as_str(), members[0]);

    // Everyone leaves: nothing is left to wait for, the group is forgotten at once.
    let mut h = Harness::delayed(3_000);
    h.join(0, "g", "", &["range"]);
    let member = h.coordinator.groups["g"].members.keys().next().cloned();
    let (leave_code, answered) = leave_v0(&mut h, "g", &member.unwrap_or_default());
    assert_eq!((leave_code, answered.len()), (0, 1));
    assert_eq!(h.coordinator.group_state("g"), None);
    assert_eq!(h.coordinator.next_deadline_ms(), None);
}

mod hostile {
    //! Arbitrary request sequences (any version, absurd timeouts, unknown and stale member ids,
    //! wrong generations, oversized metadata and assignments, failed writes): the coordinator never
    //! panics, every reply encodes at its version, and every request is answered exactly once.

    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        Join {
            version: i16,
            group: usize,
            member: usize,
            session_timeout_ms: i32,
            rebalance_timeout_ms: i32,
            protocols: Vec<(usize, usize)>,
            instance: Option<usize>,
        },
        Sync {
            version: i16,
            group: usize,
            member: usize,
            generation_delta: i32,
            assignments: Vec<(usize, usize)>,
        },
        Heartbeat {
            version: i16,
            group: usize,
            member: usize,
            generation_delta: i32,
        },
        Leave {
            version: i16,
            group: usize,
            members: Vec<usize>,
        },
        Commit {
            version: i16,
            group: usize,
            member: usize,
            generation_delta: i32,
            metadata_bytes: usize,
        },
        Fetch {
            version: i16,
            group: usize,
        },
        Describe {
            version: i16,
        },
        Tick {
            advance_ms: i64,
        },
        Persist {
            ok: bool,
        },
        DeleteGroups {
            version: i16,
            group: usize,
        },
        OffsetDelete {
            group: usize,
        },
    }

    const GROUPS: [&str; 3] = ["g", "h", ""];
    const PROTOCOLS: [&str; 3] = ["range", "roundrobin", ""];
    const TIMEOUTS_MS: [i32; 8] = [i32::MIN, -1, 0, 5_999, 6_000, 30_000, 1_800_001, i32::MAX];
    /// Sizes around the (lowered) metadata, assignment and offset-metadata maxima.
    const SIZES: [usize; 4] = [0, 10, 64, 65];

    /// Mostly the one group "g", sometimes "h" or the invalid empty id.
    fn group_index() -> impl Strategy<Value = usize> {
        prop_oneof![4 => Just(0usize), 1 => 0..3usize]
    }

    /// Mostly sizes under the lowered maxima, sometimes just over.
    fn size_index() -> impl Strategy<Value = usize> {
        prop_oneof![4 => 0..3usize, 1 => 0..4usize]
    }

    fn op() -> impl Strategy<Value = Op> {
        let version = |max: i16| 0..=max;
        prop_oneof![
            (
                version(9),
                group_index(),
                0..8usize,
                // Mostly valid timeouts and protocols, so that groups really form.
                prop_oneof![2 => Just(5usize), 1 => 0..8usize],
                prop_oneof![2 => Just(5usize), 1 => 0..8usize],
                proptest::collection::vec(
                    (prop_oneof![3 => Just(0usize), 1 => 0..3usize], size_index()),
                    1..3
                ),
                proptest::option::of(0..2usize),
            )
                .prop_map(
                    |(version, group, member, session, rebalance, protocols, instance)| {
                        Op::Join {
                            version,
                            group,
                            member,
                            session_timeout_ms: TIMEOUTS_MS[session],
                            rebalance_timeout_ms: TIMEOUTS_MS[rebalance],
                            protocols,
                            instance,
                        }
                    }
                ),
            (
                version(5),
                group_index(),
                0..8usize,
                -1..2i32,
                proptest::collection::vec((0..8usize, size_index()), 0..4)
            )
                .prop_map(|(version, group, member, generation_delta, assignments)| {
                    Op::Sync {
                        version,
                        group,
                        member,
                        generation_delta,
                        assignments,
                    }
                }),
            (version(4), group_index(), 0..8usize, -1..2i32).prop_map(
                |(version, group, member, generation_delta)| Op::Heartbeat {
                    version,
                    group,
                    member,
                    generation_delta,
                }
            ),
            (
                version(5),
                group_index(),
                proptest::collection::vec(0..8usize, 0..3)
            )
                .prop_map(|(version, group, members)| Op::Leave {
                    version,
                    group,
                    members,
                }),
            (version(8), group_index(), 0..8usize, -2..2i32, size_index()).prop_map(
                |(version, group, member, generation_delta, size)| Op::Commit {
                    version,
                    group,
                    member,
                    generation_delta,
                    metadata_bytes: SIZES[size],
                }
            ),
            (version(8), group_index()).prop_map(|(version, group)| Op::Fetch { version, group }),
            version(5).prop_map(|version| Op::Describe { version }),
            (0..40_000i64).prop_map(|advance_ms| Op::Tick { advance_ms }),
            any::<bool>().prop_map(|ok| Op::Persist { ok }),
            (version(2), group_index())
                .prop_map(|(version, group)| Op::DeleteGroups { version, group }),
            group_index().prop_map(|group| Op::OffsetDelete { group }),
        ]
    }

    struct Run {
        h: Harness,
        /// Member ids seen in JoinGroup replies, oldest first.
        member_ids: Vec<String>,
        outstanding: BTreeSet<RequestId>,
        /// Writes handed to the driver, oldest first: (request, whether they are tombstones).
        persists: std::collections::VecDeque<(RequestId, bool)>,
    }

    impl Run {
        /// 6 and 7 are the empty id and one never issued; lower indexes count back from the
        /// most recently issued id, so that live members are picked often.
        fn member(&self, index: usize) -> String {
            match index {
                6 => String::new(),
                7 => "never-issued".into(),
                back => self
                    .member_ids
                    .iter()
                    .rev()
                    .nth(back % self.member_ids.len().max(1))
                    .cloned()
                    .unwrap_or_default(),
            }
        }

        fn generation(&self, group: &str, delta: i32) -> i32 {
            self.h
                .coordinator
                .generation_id(group)
                .unwrap_or(0)
                .saturating_add(delta)
        }

        fn meta(&mut self, version: i16) -> RequestMeta {
            let meta = self.h.meta(version);
            self.outstanding.insert(meta.request_id);
            meta
        }

        fn drain(&mut self) {
            while let Some(output) = self.h.coordinator.poll_output() {
                match output {
                    Output::Reply {
                        request_id,
                        version,
                        response,
                    } => {
                        assert!(
                            self.outstanding.remove(&request_id),
                            "{request_id} answered twice"
                        );
                        encode(&response, version);
                        if let Response::JoinGroup(r) = &response {
                            let id = r.member_id.as_str().to_owned();
                            if !id.is_empty() && !self.member_ids.contains(&id) {
                                self.member_ids.push(id);
                            }
                        }
                    }
                    Output::PersistOffsets { request_id, .. } => {
                        self.persists.push_back((request_id, false))
                    }
                    Output::PersistOffsetDeletes { request_id, .. } => {
                        self.persists.push_back((request_id, true))
                    }
                    Output::PersistTxnOffsets { .. } => panic!("no TxnOffsetCommit is sent here"),
                    Output::PersistConsumerRecords { .. } => {
                        panic!("no ConsumerGroupHeartbeat is sent here")
                    }
                }
            }
        }

        fn apply(&mut self, op: Op) {
            let now_ms = self.h.now_ms;
            match op {
                Op::Join {
                    version,
                    group,
                    member,
                    session_timeout_ms,
                    rebalance_timeout_ms,
                    protocols,
                    instance,
                } => {
                    let meta = self.meta(version);
                    let mut request = JoinGroupRequest::default();
                    request.group_id = GroupId(s(GROUPS[group]));
                    request.session_timeout_ms = session_timeout_ms;
                    request.rebalance_timeout_ms = rebalance_timeout_ms;
                    request.member_id = s(&self.member(member));
                    request.group_instance_id = instance.map(|i| s(["i1", "i2"][i]));
                    request.protocol_type = s("consumer");
                    request.protocols = protocols
                        .iter()
                        .map(|(name, size)| {
                            let mut protocol = JoinGroupRequestProtocol::default();
                            protocol.name = s(PROTOCOLS[*name]);
                            protocol.metadata = Bytes::from(vec![1u8; SIZES[*size]]);
                            protocol
                        })
                        .collect();
                    self.h.coordinator.handle_join_group(now_ms, meta, request);
                }
                Op::Sync {
                    version,
                    group,
                    member,
                    generation_delta,
                    assignments,
                } => {
                    let meta = self.meta(version);
                    let mut request = SyncGroupRequest::default();
                    request.group_id = GroupId(s(GROUPS[group]));
                    request.member_id = s(&self.member(member));
                    request.generation_id = self.generation(GROUPS[group], generation_delta);
                    request.assignments = assignments
                        .iter()
                        .map(|(member, size)| {
                            let mut entry = SyncGroupRequestAssignment::default();
                            entry.member_id = s(&self.member(*member));
                            entry.assignment = Bytes::from(vec![2u8; SIZES[*size]]);
                            entry
                        })
                        .collect();
                    self.h.coordinator.handle_sync_group(now_ms, meta, request);
                }
                Op::Heartbeat {
                    version,
                    group,
                    member,
                    generation_delta,
                } => {
                    let meta = self.meta(version);
                    let mut request = HeartbeatRequest::default();
                    request.group_id = GroupId(s(GROUPS[group]));
                    request.member_id = s(&self.member(member));
                    request.generation_id = self.generation(GROUPS[group], generation_delta);
                    self.h.coordinator.handle_heartbeat(now_ms, meta, request);
                }
                Op::Leave {
                    version,
                    group,
                    members,
                } => {
                    let meta = self.meta(version);
                    let mut request = LeaveGroupRequest::default();
                    request.group_id = GroupId(s(GROUPS[group]));
                    request.member_id = s(&self.member(members.first().copied().unwrap_or(0)));
                    request.members = members
                        .iter()
                        .map(|member| {
                            let mut identity = MemberIdentity::default();
                            identity.member_id = s(&self.member(*member));
                            identity
                        })
                        .collect();
                    self.h.coordinator.handle_leave_group(now_ms, meta, request);
                }
                Op::Commit {
                    version,
                    group,
                    member,
                    generation_delta,
                    metadata_bytes,
                } => {
                    let meta = self.meta(version);
                    let mut request = OffsetCommitRequest::default();
                    request.group_id = GroupId(s(GROUPS[group]));
                    request.member_id = s(&self.member(member));
                    request.generation_id_or_member_epoch = if generation_delta < -1 {
                        -1
                    } else {
                        self.generation(GROUPS[group], generation_delta)
                    };
                    let mut topic = OffsetCommitRequestTopic::default();
                    topic.name = TopicName(s("t"));
                    let mut partition = OffsetCommitRequestPartition::default();
                    partition.committed_offset = 5;
                    partition.committed_metadata =
                        Some(StrBytes::from_string("m".repeat(metadata_bytes)));
                    topic.partitions = vec![partition];
                    request.topics = vec![topic];
                    self.h
                        .coordinator
                        .handle_offset_commit(now_ms, meta, request, |_, _| true);
                }
                Op::Fetch { version, group } => {
                    let meta = self.meta(version);
                    let mut request = OffsetFetchRequest::default();
                    request.group_id = GroupId(s(GROUPS[group]));
                    if version < 2 {
                        let mut topic = OffsetFetchRequestTopic::default();
                        topic.name = TopicName(s("t"));
                        topic.partition_indexes = vec![0, 1];
                        request.topics = Some(vec![topic]);
                    } else {
                        request.topics = None;
                    }
                    let mut group_entry = OffsetFetchRequestGroup::default();
                    group_entry.group_id = GroupId(s(GROUPS[group]));
                    request.groups = vec![group_entry];
                    self.h.coordinator.handle_offset_fetch(meta, request);
                }
                Op::Describe { version } => {
                    let meta = self.meta(version);
                    let mut request = DescribeGroupsRequest::default();
                    request.groups = GROUPS.iter().map(|g| GroupId(s(g))).collect();
                    self.h.coordinator.handle_describe_groups(meta, request);
                }
                Op::Tick { advance_ms } => self.h.advance(advance_ms),
                Op::Persist { ok } => {
                    if let Some((request_id, tombstones)) = self.persists.pop_front() {
                        let result = if ok {
                            Ok(())
                        } else {
                            Err(PersistError::Failed)
                        };
                        if tombstones {
                            self.h.coordinator.deletes_persisted(request_id, result);
                        } else {
                            self.h.coordinator.offsets_persisted(request_id, result);
                        }
                    }
                }
                Op::DeleteGroups { version, group } => {
                    let meta = self.meta(version);
                    let mut request = DeleteGroupsRequest::default();
                    request.groups_names = vec![GroupId(s(GROUPS[group]))];
                    self.h.coordinator.handle_delete_groups(meta, request);
                }
                Op::OffsetDelete { group } => {
                    let meta = self.meta(0);
                    let mut request = OffsetDeleteRequest::default();
                    request.group_id = GroupId(s(GROUPS[group]));
                    let mut topic =
                        kafka_protocol::messages::offset_delete_request::OffsetDeleteRequestTopic::default();
                    topic.name = TopicName(s("t"));
                    topic.partitions = vec![
                        kafka_protocol::messages::offset_delete_request::OffsetDeleteRequestPartition::default(),
                    ];
                    request.topics = vec![topic];
                    self.h
                        .coordinator
                        .handle_offset_delete(now_ms, meta, request, |_, _| None);
                }
            }
            self.drain();
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn arbitrary_requests_never_panic_and_are_all_answered(
            ops in proptest::collection::vec(op(), 1..120),
            initial_rebalance_delay_ms in prop_oneof![Just(0), Just(-1), 1..40_000i32],
        ) {
            let mut h = Harness::delayed(initial_rebalance_delay_ms);
            let config = &mut h.coordinator.config;
            config.member_metadata_bytes_max = 64;
            config.member_assignment_bytes_max = 64;
            config.offset_metadata_bytes_max = 64;
            let mut run = Run {
                h,
                member_ids: Vec::new(),
                outstanding: BTreeSet::new(),
                persists: Default::default(),
            };
            for op in ops {
                run.apply(op);
            }
            while !run.persists.is_empty() {
                run.apply(Op::Persist { ok: true });
            }
            for _ in 0..6 {
                run.apply(Op::Tick { advance_ms: i64::from(i32::MAX) });
            }
            prop_assert!(run.outstanding.is_empty(), "unanswered: {:?}", run.outstanding);
            prop_assert_eq!(run.h.coordinator.next_deadline_ms(), None);
            // Commits and deletions kept the offsets count in step with the offsets held.
            prop_assert_eq!(
                run.h.coordinator.offsets_count,
                run.h.coordinator.committed_offsets().len()
            );
        }
    }
}

mod loading {
    //! Partitions of `__consumer_offsets` loaded and unloaded with their leadership.
    use super::*;
    use crate::{coordinator_partition, Coordinated};

    const PARTITIONS: i32 = 50;

    fn leading(partitions: &[i32]) -> Coordinated {
        Coordinated {
            partitions: PARTITIONS,
            led: partitions.iter().copied().collect(),
        }
    }

    fn commit_entry(group: &str, offset: i64) -> OffsetLogEntry {
        OffsetLogEntry::Commit(
            OffsetKey {
                group: group.into(),
                topic: "t".into(),
                partition: 0,
            },
            OffsetValue {
                offset,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp_ms: 1,
            },
        )
    }

    /// Two group names that belong to different partitions.
    fn groups_on_two_partitions() -> ((String, i32), (String, i32)) {
        let first = ("g".to_owned(), coordinator_partition("g", PARTITIONS));
        let second = (0..)
            .map(|n| format!("other-{n}"))
            .map(|name| {
                let partition = coordinator_partition(&name, PARTITIONS);
                (name, partition)
            })
            .find(|(_, partition)| *partition != first.1)
            .expect("some name hashes elsewhere");
        (first, second)
    }

    fn describe_code(h: &mut Harness, group: &str) -> i16 {
        let mut describe = DescribeGroupsRequest::default();
        describe.groups = vec![GroupId(s(group))];
        let meta = h.meta(5);
        h.coordinator.handle_describe_groups(meta, describe);
        match h.replies().pop() {
            Some((_, Response::DescribeGroups(r))) => r.groups[0].error_code,
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn groups_led_elsewhere_get_not_coordinator_and_led_ones_wait_for_their_load() {
        let mut h = Harness::new();
        let partition = coordinator_partition("g", PARTITIONS);
        h.coordinator
            .set_coordinated(leading(&[(partition + 1) % PARTITIONS]));
        assert_eq!(describe_code(&mut h, "g"), code(ErrorCode::NOT_COORDINATOR));
        h.coordinator.set_coordinated(leading(&[partition]));
        assert_eq!(h.coordinator.partitions_to_load(), vec![partition]);
        assert_eq!(
            describe_code(&mut h, "g"),
            code(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS)
        );
        let mut list = ListGroupsRequest::default();
        list.states_filter = vec![];
        let meta = h.meta(4);
        h.coordinator.handle_list_groups(meta, list.clone());
        match h.replies().pop() {
            Some((_, Response::ListGroups(r))) => {
                assert_eq!(r.error_code, code(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS))
            }
            other => panic!("unexpected {other:?}"),
        }
        h.coordinator.load_partition(partition, []);
        assert!(h.coordinator.partitions_to_load().is_empty());
        assert_eq!(describe_code(&mut h, "g"), 0);
    }

    #[test]
    fn a_partition_load_applies_only_its_own_groups() {
        let ((first, first_partition), (second, _)) = groups_on_two_partitions();
        let mut h = Harness::new();
        h.coordinator.set_coordinated(leading(&[first_partition]));
        // A single-node offsets log held every group in one partition.
        let loaded = h.coordinator.load_partition(
            first_partition,
            [
                commit_entry(&first, 5).into(),
                commit_entry(&second, 9).into(),
                commit_entry(&first, 7).into(),
            ],
        );
        assert_eq!(
            loaded,
            Loaded {
                applied: 2,
                foreign: 1
            }
        );
        assert_eq!(
            h.coordinator.committed_offsets(),
            std::collections::BTreeMap::from([((first.clone(), "t".to_owned(), 0), 7)])
        );
        assert_eq!(h.coordinator.offsets_partition(&first), first_partition);
    }

    #[test]
    fn consumer_group_records_load_and_unload_with_their_partition() {
        use crate::consumer::records::GroupMetadataValue;
        use crate::consumer::ConsumerRecord;
        let ((first, first_partition), (second, second_partition)) = groups_on_two_partitions();
        let epoch = |group: &str, epoch| {
            Replayed::Consumer(ConsumerRecord::GroupMetadata {
                group: group.to_owned(),
                value: Some(GroupMetadataValue {
                    epoch,
                    metadata_hash: 0,
                }),
            })
        };
        let mut h = Harness::new();
        h.coordinator
            .set_coordinated(leading(&[first_partition, second_partition]));
        let loaded = h.coordinator.load_partition(
            first_partition,
            [
                epoch(&first, 3),
                epoch(&second, 9),
                commit_entry(&first, 1).into(),
            ],
        );
        assert_eq!(
            loaded,
            Loaded {
                applied: 2,
                foreign: 1
            }
        );
        h.coordinator
            .load_partition(second_partition, [epoch(&second, 4)]);
        let consumer = h.coordinator.consumer_groups();
        assert_eq!(consumer.group(&first).map(|g| g.group_epoch()), Some(3));
        assert_eq!(consumer.group(&second).map(|g| g.group_epoch()), Some(4));
        // Resigning the second partition forgets its consumer group, not the first's.
        h.coordinator.set_coordinated(leading(&[first_partition]));
        let consumer = h.coordinator.consumer_groups();
        assert!(consumer.group(&first).is_some() && consumer.group(&second).is_none());
    }

    #[test]
    fn resigning_a_partition_forgets_its_groups_and_answers_their_parked_requests() {
        let ((first, first_partition), (second, second_partition)) = groups_on_two_partitions();
        let mut h = Harness::new();
        h.coordinator
            .set_coordinated(leading(&[first_partition, second_partition]));
        h.coordinator
            .load_partition(first_partition, [commit_entry(&first, 3).into()]);
        h.coordinator
            .load_partition(second_partition, [commit_entry(&second, 4).into()]);
        // A member of `first` is parked in its join (the group holds it for a second member).
        let mut delayed = Harness::delayed(3_000);
        delayed
            .coordinator
            .set_coordinated(leading(&[first_partition, second_partition]));
        delayed.coordinator.load_partition(first_partition, []);
        delayed.coordinator.load_partition(second_partition, []);
        let parked = delayed.join(4, &first, "", &["range"]);
        // v4 asks for a member id first; join again with it.
        let member_id = match delayed.replies().pop() {
            Some((id, Response::JoinGroup(r))) if id == parked => r.member_id.to_string(),
            other => panic!("unexpected {other:?}"),
        };
        let parked = delayed.join(4, &first, &member_id, &["range"]);
        assert!(delayed.replies().is_empty(), "the join waits");
        delayed
            .coordinator
            .set_coordinated(leading(&[second_partition]));
        match &delayed.replies()[..] {
            [(id, Response::JoinGroup(r))] => {
                assert_eq!(*id, parked);
                assert_eq!(r.error_code, code(ErrorCode::NOT_COORDINATOR));
            }
            other => panic!("unexpected {other:?}"),
        }

        h.coordinator.set_coordinated(leading(&[second_partition]));
        assert_eq!(
            h.coordinator.committed_offsets(),
            std::collections::BTreeMap::from([((second.clone(), "t".to_owned(), 0), 4)])
        );
        assert_eq!(h.coordinator.offsets_count, 1);
        assert_eq!(
            describe_code(&mut h, &first),
            code(ErrorCode::NOT_COORDINATOR)
        );
        // Led again: loaded again from its log, not from memory.
        h.coordinator
            .set_coordinated(leading(&[first_partition, second_partition]));
        assert_eq!(h.coordinator.partitions_to_load(), vec![first_partition]);
        h.coordinator
            .load_partition(first_partition, [commit_entry(&first, 3).into()]);
        assert_eq!(h.coordinator.committed_offsets().len(), 2);
    }

    #[test]
    fn a_commit_whose_partition_resigned_before_it_was_durable_answers_not_coordinator() {
        let partition = coordinator_partition("g", PARTITIONS);
        let mut h = Harness::new();
        h.coordinator.set_coordinated(leading(&[partition]));
        h.coordinator.load_partition(partition, []);
        let id = h.commit(2, "g", "", -1, &[("t", 0, 10)]);
        let persisted: Vec<Output> = h.outputs();
        assert!(matches!(&persisted[..], [Output::PersistOffsets { .. }]));
        h.coordinator.set_coordinated(leading(&[]));
        h.coordinator.offsets_persisted(id, Ok(()));
        match h.replies().pop() {
            Some((_, Response::OffsetCommit(r))) => assert_eq!(
                r.topics[0].partitions[0].error_code,
                code(ErrorCode::NOT_COORDINATOR)
            ),
            other => panic!("unexpected {other:?}"),
        }
        assert!(h.coordinator.committed_offsets().is_empty());
        assert_eq!(h.coordinator.group_count(), 0);
    }
}
