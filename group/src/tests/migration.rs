//! Classic and consumer groups under one id: the online upgrade and classic members served by a
//! consumer group, through the coordinator's write path.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest as ClassicHeartbeat, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, SyncGroupRequest,
};
use kafka_protocol::protocol::StrBytes;
use skiff_protocol::error_code::ErrorCode;

use crate::consumer::embedded::{self, NamedPartitions, Subscription};
use crate::consumer::{epochs, Assignment, ConsumerRecord, HeartbeatRequest, MigrationPolicy};
use crate::tests::harness::{H, TOPIC};
use crate::Response;
use crate::{GroupState, Output, PersistError};

const GENERATION_START: i32 = 1;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

fn subscription(owned: &[i32]) -> Vec<u8> {
    embedded::encode_subscription(&Subscription {
        version: 3,
        topics: vec!["t".into()],
        owned_partitions: named(owned),
        generation_id: -1,
        ..Subscription::default()
    })
}

fn named(partitions: &[i32]) -> NamedPartitions {
    if partitions.is_empty() {
        return NamedPartitions::new();
    }
    BTreeMap::from([("t".to_owned(), partitions.iter().copied().collect())])
}

/// A range member's JoinGroup for "g" with this protocol metadata.
fn join_request(member_id: &str, metadata: Bytes) -> JoinGroupRequest {
    let mut request = JoinGroupRequest::default();
    request.group_id = GroupId(s("g"));
    request.member_id = s(member_id);
    request.session_timeout_ms = 10_000;
    request.rebalance_timeout_ms = 10_000;
    request.protocol_type = s("consumer");
    let mut protocol = JoinGroupRequestProtocol::default();
    protocol.name = s("range");
    protocol.metadata = metadata;
    request.protocols = vec![protocol];
    request
}

impl H {
    /// The reply to `id` among `outputs`.
    fn reply_in(outputs: &[Output], id: u64) -> Option<Response> {
        outputs.iter().find_map(|output| match output {
            Output::Reply {
                request_id,
                response,
                ..
            } if *request_id == id => Some(response.clone()),
            _ => None,
        })
    }

    fn join(&mut self, member_id: &str, owned: &[i32]) -> u64 {
        let meta = self.meta(3);
        let id = meta.request_id;
        let request = join_request(member_id, Bytes::from(subscription(owned)));
        self.coordinator
            .handle_join_group(self.now_ms, meta, request);
        id
    }

    fn sync(&mut self, member_id: &str, generation: i32, assignments: &[(&str, &[i32])]) -> u64 {
        let meta = self.meta(5);
        let id = meta.request_id;
        let mut request = SyncGroupRequest::default();
        request.group_id = GroupId(s("g"));
        request.member_id = s(member_id);
        request.generation_id = generation;
        request.protocol_type = Some(s("consumer"));
        request.protocol_name = Some(s("range"));
        request.assignments = assignments
            .iter()
            .map(|(member, partitions)| {
                let mut entry = SyncGroupRequestAssignment::default();
                entry.member_id = s(member);
                entry.assignment = Bytes::from(embedded::encode_assignment(&named(partitions), 3));
                entry
            })
            .collect();
        self.coordinator
            .handle_sync_group(self.now_ms, meta, request);
        id
    }

    fn classic_heartbeat(&mut self, member_id: &str, generation: i32) -> i16 {
        let meta = self.meta(3);
        let id = meta.request_id;
        let mut request = ClassicHeartbeat::default();
        request.group_id = GroupId(s("g"));
        request.member_id = s(member_id);
        request.generation_id = generation;
        self.coordinator
            .handle_heartbeat(self.now_ms, meta, request);
        match H::reply_in(&self.outputs(), id) {
            Some(Response::Heartbeat(response)) => response.error_code,
            other => panic!("{other:?}"),
        }
    }

    /// Persists every write among `outputs` (in order) with `result`; returns the outputs that
    /// follow.
    fn persist(&mut self, outputs: &[Output], result: Result<(), PersistError>) -> Vec<Output> {
        let mut after = Vec::new();
        for output in outputs {
            if let Output::PersistConsumerRecords { write, .. } = output {
                self.coordinator.consumer_records_persisted(*write, result);
                after.extend(self.outputs());
            }
        }
        after
    }

    /// A classic group "g" of two range members, Stable at generation 1 with {0,1} and {2,3}.
    fn classic_group(&mut self) -> (String, String) {
        let first = self.join("", &[]);
        let second = self.join("", &[]);
        self.outputs();
        let mut outputs = Vec::new();
        // The initial rebalance delay, extended once for the second member.
        for _ in 0..2 {
            self.now_ms += 3_001;
            self.coordinator.tick(self.now_ms);
            outputs.extend(self.outputs());
        }
        let joined = |id| match H::reply_in(&outputs, id) {
            Some(Response::JoinGroup(response)) => response,
            other => panic!("{other:?}"),
        };
        let (a, b): (JoinGroupResponse, JoinGroupResponse) = (joined(first), joined(second));
        assert_eq!(a.generation_id, GENERATION_START);
        let (leader, follower) = if a.leader == a.member_id {
            (a.member_id.to_string(), b.member_id.to_string())
        } else {
            (b.member_id.to_string(), a.member_id.to_string())
        };
        self.sync(&follower, 1, &[]);
        self.sync(&leader, 1, &[(&leader, &[0, 1]), (&follower, &[2, 3])]);
        self.outputs();
        assert_eq!(self.coordinator.group_state("g"), Some(GroupState::Stable));
        (leader, follower)
    }

    fn consumer_join(&mut self) -> u64 {
        let meta = self.meta(1);
        let id = meta.request_id;
        let request = HeartbeatRequest {
            group_id: "g".into(),
            member_id: "c1".into(),
            member_epoch: epochs::JOIN,
            rebalance_timeout_ms: 30_000,
            subscribed_topic_names: Some(vec!["t".into()]),
            topic_partitions: Some(Assignment::new()),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            ..HeartbeatRequest::default()
        };
        self.coordinator
            .handle_consumer_group_heartbeat(meta, request, self.now_ms);
        id
    }

    /// No partition is owned (assigned or pending revocation) by two members.
    fn check_single_owners(&self) {
        let group = self
            .coordinator
            .consumer_groups()
            .group("g")
            .expect("group");
        let mut seen = BTreeSet::new();
        for member in group.members().values() {
            for set in [
                &member.assignment.assigned,
                &member.assignment.pending_revocation,
            ] {
                for (topic, partitions) in set {
                    for partition in partitions {
                        assert!(seen.insert((*topic, *partition)), "{partition} owned twice");
                    }
                }
            }
        }
    }
}

/// The records of each write among `outputs`.
fn writes(outputs: &[Output]) -> Vec<&Vec<ConsumerRecord>> {
    outputs
        .iter()
        .filter_map(|output| match output {
            Output::PersistConsumerRecords { records, .. } => Some(records),
            _ => None,
        })
        .collect()
}

/// "g" is still a consumer group, of two classic members (no downgrade).
fn assert_still_consumer_group_of_two_classic_members(h: &H) {
    let group = h
        .coordinator
        .consumer_groups()
        .group("g")
        .expect("still a consumer group");
    assert_eq!(group.members().len(), 2);
    assert!(group
        .members()
        .values()
        .all(|m| m.metadata.classic.is_some()));
}

fn upgraded(h: &mut H) -> (String, String) {
    let members = h.classic_group();
    let id = h.consumer_join();
    let outputs = h.outputs();
    assert!(
        H::reply_in(&outputs, id).is_none(),
        "answered before durable"
    );
    let writes = writes(&outputs);
    assert_eq!(writes.len(), 1, "one write");
    let classic_metadata = writes[0]
        .iter()
        .filter(|record| {
            matches!(record, ConsumerRecord::MemberMetadata { value: Some(v), .. } if v.classic.is_some())
        })
        .count();
    assert_eq!(classic_metadata, 2);
    let after = h.persist(&outputs, Ok(()));
    match H::reply_in(&after, id) {
        Some(Response::ConsumerGroupHeartbeat(response)) => {
            assert_eq!(response.error_code, 0, "{response:?}");
            assert_eq!(response.member_epoch, GENERATION_START + 1);
        }
        other => panic!("{other:?}"),
    }
    members
}

#[test]
fn a_consumer_member_upgrades_a_classic_group_keeping_its_members_and_assignments() {
    let mut h = H::with_policy(MigrationPolicy::Bidirectional);
    let (leader, follower) = upgraded(&mut h);
    let group = h
        .coordinator
        .consumer_groups()
        .group("g")
        .expect("a consumer group");
    assert_eq!(group.members().len(), 3);
    let assigned = |member: &str| group.members()[member].assignment.assigned.clone();
    assert_eq!(
        assigned(&leader),
        BTreeMap::from([(TOPIC, BTreeSet::from([0, 1]))])
    );
    assert_eq!(
        assigned(&follower),
        BTreeMap::from([(TOPIC, BTreeSet::from([2, 3]))])
    );
    assert!(group.members()[&leader].metadata.classic.is_some());
    h.check_single_owners();
    // The classic entry keeps nothing but the offsets.
    assert_eq!(h.coordinator.group_state("g"), Some(GroupState::Empty));
}

#[test]
fn a_classic_member_rejoins_revokes_and_syncs_its_target_from_the_consumer_group() {
    let mut h = H::with_policy(MigrationPolicy::Upgrade);
    let (leader, _) = upgraded(&mut h);
    // The group moved on (epoch 2): the classic member must rejoin.
    let rejoin = ErrorCode::REBALANCE_IN_PROGRESS.code();
    assert_eq!(h.classic_heartbeat(&leader, GENERATION_START), rejoin);
    assert_eq!(
        h.classic_heartbeat(&leader, 7),
        ErrorCode::ILLEGAL_GENERATION.code()
    );
    let id = h.join(&leader, &[0, 1]);
    let outputs = h.outputs();
    let after = h.persist(&outputs, Ok(()));
    let joined = match H::reply_in(&outputs, id).or_else(|| H::reply_in(&after, id)) {
        Some(Response::JoinGroup(response)) => response,
        other => panic!("{other:?}"),
    };
    assert_eq!(joined.error_code, 0);
    assert_eq!(
        joined.leader.as_str(),
        "",
        "every classic member syncs as a follower"
    );
    let generation = joined.generation_id;
    h.check_single_owners();
    let id = h.sync(&leader, generation, &[]);
    let outputs = h.outputs();
    let assignment = match H::reply_in(&outputs, id) {
        Some(Response::SyncGroup(response)) => {
            assert_eq!(response.error_code, 0, "{response:?}");
            embedded::decode_assignment(&response.assignment).expect("decodes")
        }
        other => panic!("{other:?}"),
    };
    let group = h.coordinator.consumer_groups().group("g").expect("group");
    let member = &group.members()[&leader];
    let expected: BTreeSet<i32> = member
        .assignment
        .assigned
        .get(&TOPIC)
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        assignment.partitions.get("t").cloned().unwrap_or_default(),
        expected
    );
    assert!(
        expected.is_subset(&BTreeSet::from([0, 1])),
        "it gave up, never gained, first"
    );
    // Revoking: it is told to rejoin until it has.
    if !member.assignment.pending_revocation.is_empty() {
        assert_eq!(h.classic_heartbeat(&leader, generation), rejoin);
    }
}

#[test]
fn a_failed_upgrade_write_puts_the_classic_group_back() {
    let mut h = H::with_policy(MigrationPolicy::Bidirectional);
    let (leader, _) = h.classic_group();
    let id = h.consumer_join();
    let outputs = h.outputs();
    let after = h.persist(&outputs, Err(PersistError::Unavailable));
    match H::reply_in(&after, id) {
        Some(Response::ConsumerGroupHeartbeat(response)) => assert_ne!(response.error_code, 0),
        other => panic!("{other:?}"),
    }
    assert!(h.coordinator.consumer_groups().group("g").is_none());
    assert_eq!(h.coordinator.group_state("g"), Some(GroupState::Stable));
    assert_eq!(
        h.classic_heartbeat(&leader, GENERATION_START),
        0,
        "still a classic member"
    );
}

#[test]
fn the_policy_and_the_embedded_protocol_decide_whether_a_classic_group_upgrades() {
    for (policy, upgrades) in [
        (MigrationPolicy::Disabled, false),
        (MigrationPolicy::Downgrade, false),
        (MigrationPolicy::Upgrade, true),
        (MigrationPolicy::Bidirectional, true),
    ] {
        let mut h = H::with_policy(policy);
        h.classic_group();
        let id = h.consumer_join();
        let outputs = h.outputs();
        let wrote = outputs
            .iter()
            .any(|output| matches!(output, Output::PersistConsumerRecords { .. }));
        assert_eq!(wrote, upgrades, "{policy:?}");
        if !upgrades {
            match H::reply_in(&outputs, id) {
                Some(Response::ConsumerGroupHeartbeat(response)) => assert_eq!(
                    response.error_message.as_deref(),
                    Some("Cannot upgrade classic group g to consumer group because online upgrade is disabled.")
                ),
                other => panic!("{other:?}"),
            }
        }
    }
    assert_eq!(
        MigrationPolicy::parse("BIDIRECTIONAL"),
        Some(MigrationPolicy::Bidirectional)
    );
    assert_eq!(MigrationPolicy::parse("sideways"), None);
    assert_eq!(MigrationPolicy::default(), MigrationPolicy::Bidirectional);
}

#[test]
fn a_classic_member_leaving_a_consumer_group_is_fenced_once_durable() {
    let mut h = H::with_policy(MigrationPolicy::Bidirectional);
    let (leader, follower) = upgraded(&mut h);
    let (outputs, id) = h.leave(&[&leader, "nobody"]);
    assert!(H::reply_in(&outputs, id).is_none());
    let after = h.persist(&outputs, Ok(()));
    match H::reply_in(&after, id) {
        Some(Response::LeaveGroup(response)) => {
            let codes: Vec<i16> = response.members.iter().map(|m| m.error_code).collect();
            assert_eq!(codes, vec![0, ErrorCode::UNKNOWN_MEMBER_ID.code()]);
        }
        other => panic!("{other:?}"),
    }
    let group = h.coordinator.consumer_groups().group("g").expect("group");
    assert!(!group.members().contains_key(&leader));
    assert!(group.members().contains_key(&follower));
}

#[test]
fn a_classic_member_commits_with_its_member_epoch_as_generation() {
    let mut h = H::with_policy(MigrationPolicy::Bidirectional);
    let (leader, _) = upgraded(&mut h);
    let groups = h.coordinator.consumer_groups();
    assert_eq!(
        groups.validate_offset_commit("g", &leader, GENERATION_START, false, 2),
        Ok(())
    );
    let stale = groups.validate_offset_commit("g", &leader, GENERATION_START + 5, false, 8);
    assert_eq!(
        stale.map_err(|error| error.code()),
        Err(ErrorCode::ILLEGAL_GENERATION.code())
    );
}

#[test]
fn a_classic_group_with_a_malformed_subscription_is_not_upgraded() {
    let mut h = H::with_policy(MigrationPolicy::Bidirectional);
    let meta = h.meta(3);
    let request = join_request("", Bytes::from_static(&[0xff]));
    h.coordinator.handle_join_group(h.now_ms, meta, request);
    h.outputs();
    let id = h.consumer_join();
    let outputs = h.outputs();
    match H::reply_in(&outputs, id) {
        Some(Response::ConsumerGroupHeartbeat(response)) => assert_eq!(
            response.error_message.as_deref(),
            Some("Cannot upgrade classic group g to consumer group because the embedded consumer protocol is malformed.")
        ),
        other => panic!("{other:?}"),
    }
    assert!(h.coordinator.consumer_groups().group("g").is_none());
}

impl H {
    /// A LeaveGroup (v3) naming `members` of "g"; returns the outputs and the request id.
    fn leave(&mut self, members: &[&str]) -> (Vec<Output>, u64) {
        let meta = self.meta(3);
        let id = meta.request_id;
        let mut request = LeaveGroupRequest::default();
        request.group_id = GroupId(s("g"));
        request.members = members
            .iter()
            .map(|member_id| {
                let mut member = MemberIdentity::default();
                member.member_id = s(member_id);
                member
            })
            .collect();
        self.coordinator
            .handle_leave_group(self.now_ms, meta, request);
        (self.outputs(), id)
    }

    /// The consumer-protocol member c1 leaves (epoch -1); returns the outputs and the request id.
    fn consumer_leave(&mut self) -> (Vec<Output>, u64) {
        let meta = self.meta(1);
        let id = meta.request_id;
        let request = HeartbeatRequest {
            group_id: "g".into(),
            member_id: "c1".into(),
            member_epoch: epochs::LEAVE,
            rebalance_timeout_ms: -1,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            ..HeartbeatRequest::default()
        };
        self.coordinator
            .handle_consumer_group_heartbeat(meta, request, self.now_ms);
        (self.outputs(), id)
    }
}

#[test]
fn the_last_consumer_member_leaving_downgrades_the_group_and_the_classic_members_rejoin() {
    let mut h = H::with_policy(MigrationPolicy::Bidirectional);
    let (leader, follower) = upgraded(&mut h);
    let epoch = h
        .coordinator
        .consumer_groups()
        .group("g")
        .map(|g| g.group_epoch());
    let (outputs, id) = h.consumer_leave();
    assert!(
        H::reply_in(&outputs, id).is_none(),
        "answered before durable"
    );
    let tombstones = outputs.iter().any(|output| {
        matches!(output, Output::PersistConsumerRecords { records, .. }
            if records.iter().all(ConsumerRecord::is_tombstone)
                && records.iter().any(|r| matches!(r, ConsumerRecord::GroupMetadata { .. })))
    });
    assert!(tombstones, "{outputs:?}");
    let after = h.persist(&outputs, Ok(()));
    match H::reply_in(&after, id) {
        Some(Response::ConsumerGroupHeartbeat(response)) => {
            assert_eq!(
                (response.error_code, response.member_epoch),
                (0, epochs::LEAVE)
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(h.coordinator.consumer_groups().group("g").is_none());
    assert_eq!(
        h.coordinator.group_state("g"),
        Some(GroupState::PreparingRebalance)
    );
    // The classic members are told to rejoin, and a new generation follows theirs.
    let generation = epoch.expect("epoch");
    assert_eq!(
        h.classic_heartbeat(&leader, generation),
        ErrorCode::REBALANCE_IN_PROGRESS.code()
    );
    let first = h.join(&leader, &[]);
    let second = h.join(&follower, &[]);
    let outputs = h.outputs();
    for id in [first, second] {
        match H::reply_in(&outputs, id) {
            Some(Response::JoinGroup(response)) => {
                assert_eq!(response.error_code, 0);
                assert_eq!(response.generation_id, generation + 1);
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn a_failed_downgrade_write_keeps_the_consumer_group() {
    let mut h = H::with_policy(MigrationPolicy::Bidirectional);
    upgraded(&mut h);
    let (outputs, id) = h.consumer_leave();
    let after = h.persist(&outputs, Err(PersistError::Unavailable));
    match H::reply_in(&after, id) {
        Some(Response::ConsumerGroupHeartbeat(response)) => assert_ne!(response.error_code, 0),
        other => panic!("{other:?}"),
    }
    let group = h.coordinator.consumer_groups().group("g").expect("kept");
    assert_eq!(group.members().len(), 3);
    assert_eq!(h.coordinator.group_state("g"), Some(GroupState::Empty));
}

#[test]
fn without_downgrade_the_classic_members_stay_in_the_consumer_group() {
    let mut h = H::with_policy(MigrationPolicy::Upgrade);
    upgraded(&mut h);
    let (outputs, _) = h.consumer_leave();
    h.persist(&outputs, Ok(()));
    assert_still_consumer_group_of_two_classic_members(&h);
}

#[test]
fn a_classic_member_joins_a_consumer_group_of_consumer_members() {
    let mut h = H::with_policy(MigrationPolicy::Bidirectional);
    let id = h.consumer_join();
    let outputs = h.outputs();
    h.persist(&outputs, Ok(()));
    let id2 = h.join("", &[]);
    let outputs = h.outputs();
    assert!(H::reply_in(&outputs, id).is_none());
    let after = h.persist(&outputs, Ok(()));
    let joined = match H::reply_in(&outputs, id2).or_else(|| H::reply_in(&after, id2)) {
        Some(Response::JoinGroup(response)) => response,
        other => panic!("{other:?} {outputs:?}"),
    };
    assert_eq!(joined.error_code, 0, "{joined:?}");
    let member = joined.member_id.to_string();
    let sync = h.sync(&member, joined.generation_id, &[]);
    let outputs = h.outputs();
    match H::reply_in(&outputs, sync) {
        Some(Response::SyncGroup(response)) => assert_eq!(response.error_code, 0, "{response:?}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_classic_member_id_handed_out_by_member_id_required_joins_the_consumer_group() {
    let mut h = H::with_policy(MigrationPolicy::Bidirectional);
    let outputs = {
        h.consumer_join();
        h.outputs()
    };
    h.persist(&outputs, Ok(()));
    let meta = h.meta(9);
    let id = meta.request_id;
    let mut request = join_request("", Bytes::from(subscription(&[])));
    h.coordinator
        .handle_join_group(h.now_ms, meta, request.clone());
    let member_id = match H::reply_in(&h.outputs(), id) {
        Some(Response::JoinGroup(response)) => {
            assert_eq!(response.error_code, ErrorCode::MEMBER_ID_REQUIRED.code());
            response.member_id
        }
        other => panic!("{other:?}"),
    };
    request.member_id = member_id;
    let meta = h.meta(9);
    let id = meta.request_id;
    h.coordinator.handle_join_group(h.now_ms, meta, request);
    let outputs = h.outputs();
    let after = h.persist(&outputs, Ok(()));
    match H::reply_in(&after, id) {
        Some(Response::JoinGroup(response)) => assert_eq!(response.error_code, 0, "{response:?}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_classic_join_replaces_an_empty_consumer_group() {
    let mut h = H::with_policy(MigrationPolicy::Disabled);
    h.consumer_join();
    let outputs = h.outputs();
    h.persist(&outputs, Ok(()));
    let (outputs, _) = h.consumer_leave();
    h.persist(&outputs, Ok(()));
    assert!(h
        .coordinator
        .consumer_groups()
        .group("g")
        .is_some_and(|g| g.members().is_empty()));
    h.join("", &[]);
    let outputs = h.outputs();
    let wrote_tombstones = outputs.iter().any(|output| {
        matches!(output, Output::PersistConsumerRecords { records, .. }
            if records.iter().all(ConsumerRecord::is_tombstone))
    });
    assert!(wrote_tombstones, "{outputs:?}");
    assert!(h.coordinator.consumer_groups().group("g").is_none());
    assert_eq!(
        h.coordinator.group_state("g"),
        Some(GroupState::PreparingRebalance)
    );
    // The write fails: the consumer group is back, the classic member told to rejoin.
    let after = h.persist(&outputs, Err(PersistError::Unavailable));
    assert!(h.coordinator.consumer_groups().group("g").is_some());
    assert_eq!(h.coordinator.group_state("g"), Some(GroupState::Empty));
    let rejoin = after.iter().any(|output| {
        matches!(output, Output::Reply { response: Response::JoinGroup(r), .. }
            if r.error_code == ErrorCode::REBALANCE_IN_PROGRESS.code())
    });
    assert!(rejoin, "{after:?}");
}

#[test]
fn a_leave_group_naming_the_last_consumer_member_downgrades_the_group() {
    let mut h = H::with_policy(MigrationPolicy::Bidirectional);
    let (leader, follower) = upgraded(&mut h);
    // Kafka's LeaveGroup may name a consumer-protocol member (an admin's removal).
    let (outputs, id) = h.leave(&["c1"]);
    let after = h.persist(&outputs, Ok(()));
    match H::reply_in(&after, id) {
        Some(Response::LeaveGroup(response)) => assert_eq!(response.members[0].error_code, 0),
        other => panic!("{other:?}"),
    }
    assert!(h.coordinator.consumer_groups().group("g").is_none());
    assert_eq!(
        h.coordinator.group_state("g"),
        Some(GroupState::PreparingRebalance)
    );
    let rejoin = ErrorCode::REBALANCE_IN_PROGRESS.code();
    for member in [&leader, &follower] {
        let generation = h.coordinator.group_generation("g").expect("classic");
        assert_eq!(h.classic_heartbeat(member, generation), rejoin);
    }
}

#[test]
fn a_classic_member_told_to_rejoin_that_never_does_is_fenced_after_its_rebalance_timeout() {
    let mut h = H::with_policy(MigrationPolicy::Bidirectional);
    let (leader, _) = upgraded(&mut h);
    let rejoin = ErrorCode::REBALANCE_IN_PROGRESS.code();
    assert_eq!(h.classic_heartbeat(&leader, GENERATION_START), rejoin);
    // It keeps heartbeating (its session stays alive) but never rejoins.
    h.now_ms += 6_000;
    assert_eq!(h.classic_heartbeat(&leader, GENERATION_START), rejoin);
    h.now_ms += 4_001;
    h.coordinator.tick(h.now_ms);
    let outputs = h.outputs();
    h.persist(&outputs, Ok(()));
    let group = h.coordinator.consumer_groups().group("g").expect("group");
    assert!(
        !group.members().contains_key(&leader),
        "fenced by its join timeout"
    );
}

impl H {
    /// Static consumer-protocol member `member` (instance `instance`) heartbeats at `epoch`,
    /// owning what the group says it has; its write is persisted. Returns its request id.
    fn static_heartbeat(&mut self, member: &str, instance: &str, epoch: i32) -> u64 {
        let owned = self
            .coordinator
            .consumer_groups()
            .group("g")
            .and_then(|group| group.members().get(member).cloned())
            .map(|member| member.assignment.assigned)
            .unwrap_or_default();
        let meta = self.meta(1);
        let id = meta.request_id;
        let request = HeartbeatRequest {
            group_id: "g".into(),
            member_id: member.into(),
            member_epoch: epoch,
            instance_id: Some(instance.into()),
            rebalance_timeout_ms: 30_000,
            subscribed_topic_names: (epoch == epochs::JOIN).then(|| vec!["t".into()]),
            topic_partitions: Some(owned),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            ..HeartbeatRequest::default()
        };
        self.coordinator
            .handle_consumer_group_heartbeat(meta, request, self.now_ms);
        let outputs = self.outputs();
        self.persist(&outputs, Ok(()));
        id
    }

    /// The epoch of consumer member `member` of "g".
    fn member_epoch(&self, member: &str) -> i32 {
        let group = self
            .coordinator
            .consumer_groups()
            .group("g")
            .expect("group");
        group.members()[member].assignment.member_epoch
    }

    /// A static classic member (instance `instance`, JoinGroup v5) joins "g" with a new member
    /// id, owning nothing; returns the outputs and the request id.
    fn static_classic_join(&mut self, instance: &str) -> (Vec<Output>, u64) {
        let meta = self.meta(5);
        let id = meta.request_id;
        let mut request = join_request("", Bytes::from(subscription(&[])));
        request.group_instance_id = Some(s(instance));
        self.coordinator
            .handle_join_group(self.now_ms, meta, request);
        (self.outputs(), id)
    }
}

fn joined(outputs: &[Output], id: u64) -> JoinGroupResponse {
    match H::reply_in(outputs, id) {
        Some(Response::JoinGroup(response)) => response,
        other => panic!("{other:?}"),
    }
}

/// Two static consumer-protocol members s1 (instance i1) and s2 (i2) of "g" with two partitions
/// each; then s1's client restarts with the classic protocol (a static leave, a JoinGroup of
/// i1). Returns the classic member's JoinGroup answer and s2's partitions.
fn first_restarted(h: &mut H) -> (JoinGroupResponse, Vec<i32>) {
    h.static_heartbeat("s1", "i1", epochs::JOIN);
    h.static_heartbeat("s2", "i2", epochs::JOIN);
    for _ in 0..3 {
        for (member, instance) in [("s1", "i1"), ("s2", "i2")] {
            let epoch = h.member_epoch(member);
            h.static_heartbeat(member, instance, epoch);
        }
    }
    let group = h.coordinator.consumer_groups().group("g").expect("group");
    let second: Vec<i32> = group.members()["s2"].assignment.assigned[&TOPIC]
        .iter()
        .copied()
        .collect();
    assert_eq!(second.len(), 2, "{group:?}");
    h.static_heartbeat("s1", "i1", epochs::LEAVE_STATIC);
    let (outputs, id) = h.static_classic_join("i1");
    let after = h.persist(&outputs, Ok(()));
    let first = joined(&after, id);
    assert_eq!(first.error_code, 0, "{first:?}");
    let group = h
        .coordinator
        .consumer_groups()
        .group("g")
        .expect("still consumer");
    assert_eq!(group.members().len(), 2);
    (first, second)
}

#[test]
fn a_rolling_restart_of_static_members_into_the_classic_protocol_ends_in_a_classic_group() {
    let mut h = H::with_policy(MigrationPolicy::Bidirectional);
    let (first, second) = first_restarted(&mut h);
    let epoch = h
        .coordinator
        .consumer_groups()
        .group("g")
        .map(|group| group.group_epoch())
        .expect("group");
    h.static_heartbeat("s2", "i2", epochs::LEAVE_STATIC);
    let (outputs, id) = h.static_classic_join("i2");
    assert!(
        H::reply_in(&outputs, id).is_none(),
        "answered before durable"
    );
    let writes = writes(&outputs);
    assert_eq!(writes.len(), 1, "one write");
    assert!(
        writes[0].last().is_some_and(ConsumerRecord::is_tombstone),
        "the group's tombstones last: {:?}",
        writes[0]
    );
    let after = h.persist(&outputs, Ok(()));
    let replacing = joined(&after, id);
    assert_eq!(replacing.error_code, 0, "{replacing:?}");
    assert_eq!(replacing.generation_id, epoch);
    assert!(h.coordinator.consumer_groups().group("g").is_none());
    // Same subscription: no rebalance; the replaced member's partitions are the new member's.
    assert_eq!(h.coordinator.group_state("g"), Some(GroupState::Stable));
    assert_eq!(h.coordinator.group_generation("g"), Some(epoch));
    let member = replacing.member_id.to_string();
    let sync = h.sync(&member, replacing.generation_id, &[]);
    match H::reply_in(&h.outputs(), sync) {
        Some(Response::SyncGroup(response)) => {
            assert_eq!(response.error_code, 0, "{response:?}");
            let expected = embedded::encode_assignment(&named(&second), 3);
            assert_eq!(response.assignment.to_vec(), expected);
        }
        other => panic!("{other:?}"),
    }
    let first_member = first.member_id.to_string();
    assert_eq!(h.classic_heartbeat(&first_member, first.generation_id), 0);
}

#[test]
fn a_failed_write_of_a_downgrading_static_join_keeps_the_consumer_group() {
    let mut h = H::with_policy(MigrationPolicy::Bidirectional);
    first_restarted(&mut h);
    h.static_heartbeat("s2", "i2", epochs::LEAVE_STATIC);
    let (outputs, id) = h.static_classic_join("i2");
    assert!(h.coordinator.consumer_groups().group("g").is_none());
    let after = h.persist(&outputs, Err(PersistError::Unavailable));
    assert_ne!(joined(&after, id).error_code, 0);
    let group = h.coordinator.consumer_groups().group("g").expect("kept");
    assert_eq!(group.members().len(), 2);
    assert!(group.members().contains_key("s2"), "the replaced member");
    assert_eq!(h.coordinator.group_state("g"), Some(GroupState::Empty));
}

#[test]
fn without_downgrade_a_static_classic_member_replacing_the_last_consumer_member_joins_it() {
    let mut h = H::with_policy(MigrationPolicy::Upgrade);
    first_restarted(&mut h);
    h.static_heartbeat("s2", "i2", epochs::LEAVE_STATIC);
    let (outputs, id) = h.static_classic_join("i2");
    let after = h.persist(&outputs, Ok(()));
    assert_eq!(joined(&after, id).error_code, 0);
    assert_still_consumer_group_of_two_classic_members(&h);
}
