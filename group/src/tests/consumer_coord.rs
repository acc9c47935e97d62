//! Tests of the consumer group entry points: routing by the kind of group an id names (answers
//! checked against Kafka 4.1.1's `GroupMetadataManager`), persist-then-reply, rollback of a failed
//! write, parking behind a write in flight and the parked heartbeats' combined writes, and the
//! tick's expiry writes.

use kafka_protocol::messages::{GroupId, HeartbeatRequest as ClassicHeartbeat, JoinGroupRequest};
use kafka_protocol::protocol::StrBytes;
use skiff_protocol::error_code::ErrorCode;
use skiff_protocol::responses::consumer_group::ConsumerGroupHeartbeatResponse;

use crate::consumer::{epochs, Assignment, ConsumerRecord, HeartbeatRequest};
use crate::{Output, PersistError, Response};

use crate::tests::harness::{H, TOPIC};

impl H {
    fn heartbeat(&mut self, request: HeartbeatRequest) -> u64 {
        let meta = self.meta(1);
        let id = meta.request_id;
        self.coordinator
            .handle_consumer_group_heartbeat(meta, request, self.now_ms);
        id
    }

    /// The one output, a heartbeat reply to `id`.
    fn reply(&mut self, id: u64) -> ConsumerGroupHeartbeatResponse {
        match self.outputs().as_slice() {
            [Output::Reply {
                request_id,
                response: Response::ConsumerGroupHeartbeat(response),
                ..
            }] if *request_id == id => response.clone(),
            other => panic!("expected the reply to {id}, got {other:?}"),
        }
    }

    /// The one output, a write; returns its id and record count.
    fn write(&mut self) -> (u64, usize) {
        match self.outputs().as_slice() {
            [Output::PersistConsumerRecords { write, records, .. }] => (*write, records.len()),
            other => panic!("expected one write, got {other:?}"),
        }
    }
}

fn join(group: &str, member: &str) -> HeartbeatRequest {
    HeartbeatRequest {
        group_id: group.to_owned(),
        member_id: member.to_owned(),
        member_epoch: epochs::JOIN,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(vec!["t".to_owned()]),
        topic_partitions: Some(Assignment::new()),
        client_id: "c".to_owned(),
        client_host: "/127.0.0.1".to_owned(),
        ..HeartbeatRequest::default()
    }
}

fn at_epoch(group: &str, member: &str, epoch: i32) -> HeartbeatRequest {
    HeartbeatRequest {
        group_id: group.to_owned(),
        member_id: member.to_owned(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        client_id: "c".to_owned(),
        client_host: "/127.0.0.1".to_owned(),
        ..HeartbeatRequest::default()
    }
}

/// A member joined and durable: returns its epoch.
fn joined(h: &mut H, group: &str, member: &str) -> i32 {
    let id = h.heartbeat(join(group, member));
    let (write, _) = h.write();
    h.coordinator.consumer_records_persisted(write, Ok(()));
    let response = h.reply(id);
    assert_eq!(response.error_code, 0, "{response:?}");
    response.member_epoch
}

/// A classic group with one member, in CompletingRebalance.
fn classic_member(h: &mut H, group: &str) {
    let meta = h.meta(3);
    let mut request = JoinGroupRequest::default();
    request.group_id = GroupId(StrBytes::from_string(group.to_owned()));
    request.session_timeout_ms = 10_000;
    request.rebalance_timeout_ms = 10_000;
    request.protocol_type = StrBytes::from_static_str("consumer");
    let mut protocol =
        kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default();
    protocol.name = StrBytes::from_static_str("range");
    request.protocols = vec![protocol];
    h.coordinator.handle_join_group(h.now_ms, meta, request);
    h.outputs();
}

#[test]
fn a_heartbeat_is_answered_only_once_its_records_are_durable() {
    let mut h = H::new();
    let id = h.heartbeat(join("g", "m1"));
    let (write, records) = h.write();
    assert!(records > 0);
    assert!(h.coordinator.consumer_groups().group("g").is_some());
    h.coordinator.consumer_records_persisted(write, Ok(()));
    let response = h.reply(id);
    assert_eq!(response.error_code, 0);
    assert_eq!(response.member_id.as_deref(), Some("m1"));
    assert_eq!(response.member_epoch, 1);
    let assigned = response.assignment.expect("the first answer assigns");
    assert_eq!(assigned.len(), 1);
    assert_eq!(assigned[0].topic_id.as_bytes(), &TOPIC.0);
    assert_eq!(assigned[0].partitions, vec![0, 1, 2, 3]);
    // A steady heartbeat writes nothing and is answered at once.
    let id = h.heartbeat(at_epoch("g", "m1", 1));
    assert_eq!(h.reply(id).member_epoch, 1);
}

#[test]
fn a_failed_write_rolls_the_group_back_and_answers_kafkas_error() {
    let mut h = H::new();
    let epoch = joined(&mut h, "g", "m1");
    let before = h.coordinator.consumer_groups().group("g").cloned();
    let id = h.heartbeat(join("g", "m2"));
    let (write, _) = h.write();
    assert_eq!(
        h.coordinator
            .consumer_groups()
            .group("g")
            .map(|g| g.members().len()),
        Some(2)
    );
    h.coordinator
        .consumer_records_persisted(write, Err(PersistError::NotLeader));
    let response = h.reply(id);
    assert_eq!(response.error_code, ErrorCode::NOT_COORDINATOR.code());
    assert_eq!(response.error_message, None);
    assert_eq!(response.member_id, None);
    let after = h.coordinator.consumer_groups().group("g").cloned();
    assert_eq!(
        after
            .as_ref()
            .map(|g| (g.members().clone(), g.group_epoch(), g.assignment_epoch())),
        before
            .as_ref()
            .map(|g| (g.members().clone(), g.group_epoch(), g.assignment_epoch()))
    );
    // Kafka sends UNKNOWN_SERVER_ERROR for a batch too large, COORDINATOR_NOT_AVAILABLE for a
    // write that may succeed when retried.
    for (error, code) in [
        (PersistError::TooLarge, ErrorCode::UNKNOWN_SERVER_ERROR),
        (
            PersistError::Unavailable,
            ErrorCode::COORDINATOR_NOT_AVAILABLE,
        ),
    ] {
        let id = h.heartbeat(join("g", "m2"));
        let (write, _) = h.write();
        h.coordinator.consumer_records_persisted(write, Err(error));
        assert_eq!(h.reply(id).error_code, code.code());
    }
    // A new group whose first write failed does not exist.
    let id = h.heartbeat(join("fresh", "m"));
    let (write, _) = h.write();
    h.coordinator
        .consumer_records_persisted(write, Err(PersistError::Failed));
    assert_eq!(
        h.reply(id).error_code,
        ErrorCode::UNKNOWN_SERVER_ERROR.code()
    );
    assert!(h.coordinator.consumer_groups().group("fresh").is_none());
    let id = h.heartbeat(at_epoch("g", "m1", epoch));
    assert_eq!(h.reply(id).member_epoch, epoch);
}

#[test]
fn heartbeats_wait_behind_their_groups_write() {
    let mut h = H::new();
    joined(&mut h, "g", "m1");
    let first = h.heartbeat(join("g", "m2"));
    let (write, _) = h.write();
    // Another group is not held up; this one's heartbeats wait, even those writing nothing.
    let other = h.heartbeat(join("other", "x"));
    let (other_write, _) = h.write();
    let steady = h.heartbeat(at_epoch("g", "m1", 1));
    // (m1 must now give partitions up to m2: its heartbeat writes too.)
    let third = h.heartbeat(join("g", "m3"));
    assert!(h.outputs().is_empty());
    // Both groups have a write in flight: their deadlines wait for the results.
    assert_eq!(h.coordinator.next_deadline_ms(), None);
    // The write's result runs the parked heartbeats, their records as one further write: they
    // are answered in arrival order, one write of the group in flight at a time.
    let mut write = Some(write);
    let (mut replied, mut writes) = (Vec::new(), 0);
    while let Some(done) = write.take() {
        writes += 1;
        h.coordinator.consumer_records_persisted(done, Ok(()));
        for output in h.outputs() {
            match output {
                Output::Reply {
                    request_id,
                    response: Response::ConsumerGroupHeartbeat(response),
                    ..
                } => {
                    assert_eq!(response.error_code, 0, "{response:?}");
                    replied.push(request_id);
                }
                Output::PersistConsumerRecords { write: next, .. } => {
                    assert!(write.replace(next).is_none(), "two writes of one group");
                }
                other => panic!("{other:?}"),
            }
        }
    }
    assert_eq!(replied, vec![first, steady, third]);
    assert_eq!(writes, 2, "the parked heartbeats share one write");
    h.coordinator
        .consumer_records_persisted(other_write, Ok(()));
    assert_eq!(h.reply(other).error_code, 0);
}

#[test]
fn session_expiry_is_written_and_rolled_back_when_the_write_fails() {
    let mut h = H::new();
    joined(&mut h, "g", "m1");
    let deadline = h.coordinator.next_deadline_ms().expect("a session");
    h.coordinator.tick(deadline);
    let (write, records) = h.write();
    assert!(records >= 3, "the member's tombstones and the epoch bump");
    assert!(h
        .coordinator
        .consumer_groups()
        .group("g")
        .is_some_and(|g| g.members().is_empty()));
    h.coordinator
        .consumer_records_persisted(write, Err(PersistError::Unavailable));
    assert!(h.outputs().is_empty(), "an expiry has nobody to answer");
    assert_eq!(
        h.coordinator
            .consumer_groups()
            .group("g")
            .map(|g| g.members().len()),
        Some(1)
    );
    // Tried again after Kafka's timer backoff, not at once.
    assert_eq!(
        h.coordinator.next_deadline_ms(),
        Some(deadline + crate::consumer_coord::EXPIRY_RETRY_BACKOFF_MS)
    );
    h.coordinator.tick(deadline + 500);
    let (write, _) = h.write();
    h.coordinator.consumer_records_persisted(write, Ok(()));
    assert!(h.outputs().is_empty());
    assert!(h
        .coordinator
        .consumer_groups()
        .group("g")
        .is_some_and(|g| g.members().is_empty()));
}

#[test]
fn a_consumer_heartbeat_on_a_classic_group_is_answered_as_kafka() {
    let mut h = H::with_policy(crate::consumer::MigrationPolicy::Downgrade);
    classic_member(&mut h, "classic");
    let not_found = ErrorCode::GROUP_ID_NOT_FOUND.code();
    let cases = [
        (
            join("classic", "m"),
            "Cannot upgrade classic group classic to consumer group because online upgrade is disabled.",
        ),
        (at_epoch("classic", "m", 3), "Group classic is not a consumer group."),
        (at_epoch("classic", "m", epochs::LEAVE), "Group classic is not a consumer group."),
        (at_epoch("missing", "m", epochs::LEAVE), "Group missing not found."),
        (at_epoch("missing", "m", 3), "Consumer group missing not found."),
    ];
    for (request, message) in cases {
        let id = h.heartbeat(request);
        let response = h.reply(id);
        assert_eq!(response.error_code, not_found);
        assert_eq!(response.error_message.as_deref(), Some(message));
    }
    // The request's own checks come first, as Kafka's.
    let mut bad = join("classic", "m");
    bad.rebalance_timeout_ms = -1;
    let id = h.heartbeat(bad);
    assert_eq!(h.reply(id).error_code, ErrorCode::INVALID_REQUEST.code());
    assert!(h.coordinator.consumer_groups().group("classic").is_none());
}

#[test]
fn a_join_takes_over_an_empty_classic_group_and_keeps_its_offsets() {
    let mut h = H::new();
    // A group known by its committed offsets only is an Empty classic group, as in Kafka.
    h.coordinator.load_offsets([crate::OffsetLogEntry::Commit(
        crate::OffsetKey {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
        },
        crate::OffsetValue {
            offset: 42,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: 1,
        },
    )
    .into()]);
    let id = h.heartbeat(at_epoch("g", "m", 1));
    assert_eq!(
        h.reply(id).error_message.as_deref(),
        Some("Group g is not a consumer group.")
    );
    joined(&mut h, "g", "m");
    assert_eq!(
        h.coordinator
            .committed_offset("g", "t", 0)
            .map(|c| c.offset),
        Some(42)
    );
}

#[test]
fn classic_requests_on_a_consumer_group_are_refused_as_kafka() {
    let mut h = H::new();
    joined(&mut h, "g", "m1");
    let meta = h.meta(5);
    let id = meta.request_id;
    let mut request = JoinGroupRequest::default();
    request.group_id = GroupId(StrBytes::from_static_str("g"));
    request.session_timeout_ms = 10_000;
    request.rebalance_timeout_ms = 10_000;
    request.protocol_type = StrBytes::from_static_str("consumer");
    h.coordinator.handle_join_group(h.now_ms, meta, request);
    match h.outputs().as_slice() {
        [Output::Reply {
            request_id,
            response: Response::JoinGroup(response),
            ..
        }] if *request_id == id => {
            assert_eq!(
                response.error_code,
                ErrorCode::INCONSISTENT_GROUP_PROTOCOL.code()
            );
        }
        other => panic!("{other:?}"),
    }
    // No member of a consumer group uses the classic protocol: Kafka answers UNKNOWN_MEMBER_ID.
    let meta = h.meta(3);
    let mut heartbeat = ClassicHeartbeat::default();
    heartbeat.group_id = GroupId(StrBytes::from_static_str("g"));
    heartbeat.member_id = StrBytes::from_static_str("m1");
    heartbeat.generation_id = 1;
    h.coordinator.handle_heartbeat(h.now_ms, meta, heartbeat);
    match h.outputs().as_slice() {
        [Output::Reply {
            response: Response::Heartbeat(response),
            ..
        }] => assert_eq!(response.error_code, ErrorCode::UNKNOWN_MEMBER_ID.code()),
        other => panic!("{other:?}"),
    }
    assert!(
        h.coordinator.group_state("g").is_none(),
        "no classic group was made"
    );
}

#[test]
fn describe_answers_each_group_as_kafka() {
    let mut h = H::new();
    joined(&mut h, "g", "m1");
    classic_member(&mut h, "classic");
    let meta = h.meta(1);
    h.coordinator.handle_consumer_group_describe(
        meta,
        vec![
            "g".into(),
            "classic".into(),
            "missing".into(),
            String::new(),
        ],
    );
    let outputs = h.outputs();
    let [Output::Reply {
        response: Response::ConsumerGroupDescribe(response),
        ..
    }] = outputs.as_slice()
    else {
        panic!("one describe reply");
    };
    let groups = &response.groups;
    assert_eq!(groups[0].error_code, 0);
    assert_eq!(groups[0].group_state, "Stable");
    assert_eq!(groups[0].assignor_name, "uniform");
    let member = &groups[0].members[0];
    assert_eq!(member.member_id, "m1");
    assert_eq!(member.member_type, 1);
    assert_eq!(member.assignment[0].topic_name, "t");
    assert_eq!(member.assignment[0].partitions, vec![0, 1, 2, 3]);
    let errors: Vec<(i16, Option<&str>)> = groups[1..]
        .iter()
        .map(|g| (g.error_code, g.error_message.as_deref()))
        .collect();
    assert_eq!(
        errors,
        vec![
            (69, Some("Group classic is not a consumer group.")),
            (69, Some("Group missing not found.")),
            (ErrorCode::INVALID_GROUP_ID.code(), None),
        ]
    );
}

#[test]
fn loaded_members_get_sessions_at_the_next_tick() {
    let mut h = H::new();
    joined(&mut h, "g", "m1");
    let records: Vec<crate::Replayed> = {
        let id = h.heartbeat(join("g2", "m"));
        let written = match h.outputs().as_slice() {
            [Output::PersistConsumerRecords { write, records, .. }] => {
                h.coordinator.consumer_records_persisted(*write, Ok(()));
                records.clone()
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(h.reply(id).error_code, 0);
        written.into_iter().map(crate::Replayed::Consumer).collect()
    };
    let mut restarted = H::new();
    restarted.coordinator.load_offsets(records);
    // The load asks for a tick at once; it starts the loaded member's session from then.
    assert_eq!(restarted.coordinator.next_deadline_ms(), Some(i64::MIN));
    restarted.coordinator.tick(5_000);
    let session = i64::from(crate::consumer::group::SESSION_TIMEOUT_MS_DEFAULT);
    assert_eq!(
        restarted.coordinator.next_deadline_ms(),
        Some(5_000 + session)
    );
    let members = restarted
        .coordinator
        .consumer_groups()
        .group("g2")
        .map(|g| g.members().len());
    assert_eq!(members, Some(1));
}

/// OffsetCommit of one partition of "t" at `version`; returns its error code once answered
/// (a durable write is acknowledged).
fn commit(h: &mut H, version: i16, group: &str, member: &str, epoch: i32, offset: i64) -> i16 {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{OffsetCommitRequest, TopicName};
    let mut partition = OffsetCommitRequestPartition::default();
    partition.partition_index = 0;
    partition.committed_offset = offset;
    let mut topic = OffsetCommitRequestTopic::default();
    topic.name = TopicName(StrBytes::from_static_str("t"));
    topic.partitions = vec![partition];
    let mut request = OffsetCommitRequest::default();
    request.group_id = GroupId(StrBytes::from_string(group.to_owned()));
    request.member_id = StrBytes::from_string(member.to_owned());
    request.generation_id_or_member_epoch = epoch;
    request.topics = vec![topic];
    let meta = h.meta(version);
    h.coordinator
        .handle_offset_commit(h.now_ms, meta, request, |_, _| true);
    loop {
        match h.outputs().as_slice() {
            [Output::PersistOffsets { request_id, .. }] => {
                h.coordinator.offsets_persisted(*request_id, Ok(()));
            }
            [Output::Reply {
                response: Response::OffsetCommit(response),
                ..
            }] => return response.topics[0].partitions[0].error_code,
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn offset_commits_of_a_consumer_group_are_checked_by_member_and_epoch() {
    let mut h = H::new();
    let epoch = joined(&mut h, "g", "m1");
    assert_eq!(commit(&mut h, 9, "g", "m1", epoch, 5), 0);
    assert_eq!(
        h.coordinator
            .committed_offset("g", "t", 0)
            .map(|c| c.offset),
        Some(5)
    );
    let refused = [
        (9, "m1", epoch + 1, ErrorCode::STALE_MEMBER_EPOCH),
        (9, "nobody", epoch, ErrorCode::UNKNOWN_MEMBER_ID),
        (8, "m1", epoch, ErrorCode::UNSUPPORTED_VERSION),
        // A group with members takes no commit without a member, as Kafka.
        (9, "", -1, ErrorCode::UNKNOWN_MEMBER_ID),
    ];
    for (version, member, member_epoch, expected) in refused {
        let code = commit(&mut h, version, "g", member, member_epoch, 6);
        assert_eq!(code, expected.code(), "v{version} {member} {member_epoch}");
    }
    assert_eq!(
        h.coordinator
            .committed_offset("g", "t", 0)
            .map(|c| c.offset),
        Some(5)
    );
    // An unknown group with an epoch: GROUP_ID_NOT_FOUND from v9, ILLEGAL_GENERATION before.
    assert_eq!(
        commit(&mut h, 9, "none", "m", 3, 1),
        ErrorCode::GROUP_ID_NOT_FOUND.code()
    );
    assert_eq!(
        commit(&mut h, 8, "none", "m", 3, 1),
        ErrorCode::ILLEGAL_GENERATION.code()
    );
}

#[test]
fn offset_fetch_v9_of_a_consumer_group_is_checked_by_member_and_epoch() {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
    use kafka_protocol::messages::OffsetFetchRequest;
    let mut h = H::new();
    let epoch = joined(&mut h, "g", "m1");
    assert_eq!(commit(&mut h, 9, "g", "m1", epoch, 5), 0);
    let mut fetch = |member: Option<&'static str>, member_epoch: i32| {
        let mut group = OffsetFetchRequestGroup::default();
        group.group_id = GroupId(StrBytes::from_static_str("g"));
        group.member_id = member.map(StrBytes::from_static_str);
        group.member_epoch = member_epoch;
        group.topics = None;
        let mut request = OffsetFetchRequest::default();
        request.groups = vec![group];
        let meta = h.meta(9);
        h.coordinator.handle_offset_fetch(meta, request);
        match h.outputs().as_slice() {
            [Output::Reply {
                response: Response::OffsetFetch(response),
                ..
            }] => {
                let group = &response.groups[0];
                let offsets: Vec<i64> = group
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter().map(|p| p.committed_offset))
                    .collect();
                (group.error_code, offsets)
            }
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(fetch(Some("m1"), epoch), (0, vec![5]));
    // Admin clients send no member and epoch -1.
    assert_eq!(fetch(None, -1), (0, vec![5]));
    assert_eq!(
        fetch(Some("m1"), epoch + 1),
        (ErrorCode::STALE_MEMBER_EPOCH.code(), vec![])
    );
    assert_eq!(
        fetch(Some("x"), epoch),
        (ErrorCode::UNKNOWN_MEMBER_ID.code(), vec![])
    );
}

#[test]
fn list_groups_shows_a_consumer_group_once_with_its_type_and_state() {
    use kafka_protocol::messages::ListGroupsRequest;
    let mut h = H::new();
    let epoch = joined(&mut h, "g", "m1");
    // Its offsets live in a classic entry of the same id; it is listed once, as a consumer group.
    assert_eq!(commit(&mut h, 9, "g", "m1", epoch, 5), 0);
    classic_member(&mut h, "classic");
    let mut list = |version: i16, states: &[&'static str], types: &[&'static str]| {
        let mut request = ListGroupsRequest::default();
        request.states_filter = states
            .iter()
            .map(|s| StrBytes::from_static_str(s))
            .collect();
        request.types_filter = types.iter().map(|s| StrBytes::from_static_str(s)).collect();
        let meta = h.meta(version);
        h.coordinator.handle_list_groups(meta, request);
        match h.outputs().as_slice() {
            [Output::Reply {
                response: Response::ListGroups(response),
                ..
            }] => response
                .groups
                .iter()
                .map(|g| {
                    let id = g.group_id.0.as_str().to_owned();
                    (
                        id,
                        g.protocol_type.as_str().to_owned(),
                        g.group_state.as_str().to_owned(),
                        g.group_type.as_str().to_owned(),
                    )
                })
                .collect::<Vec<_>>(),
            other => panic!("{other:?}"),
        }
    };
    let consumer = (
        "g".to_owned(),
        "consumer".to_owned(),
        "Stable".to_owned(),
        "consumer".to_owned(),
    );
    let all = list(5, &[], &[]);
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(all.contains(&consumer), "{all:?}");
    assert_eq!(list(5, &[], &["Consumer"]), vec![consumer.clone()]);
    assert_eq!(list(5, &["stable"], &[]), vec![consumer]);
    assert!(list(5, &[], &["classic"]).iter().all(|g| g.0 == "classic"));
    assert_eq!(list(3, &[], &[]).len(), 2);
}

#[test]
fn describe_groups_answers_a_consumer_group_dead_as_kafka_before_v6() {
    use kafka_protocol::messages::DescribeGroupsRequest;
    let mut h = H::new();
    let epoch = joined(&mut h, "g", "m1");
    assert_eq!(commit(&mut h, 9, "g", "m1", epoch, 5), 0);
    let mut request = DescribeGroupsRequest::default();
    request.groups = vec![GroupId(StrBytes::from_static_str("g"))];
    let meta = h.meta(5);
    h.coordinator.handle_describe_groups(meta, request);
    match h.outputs().as_slice() {
        [Output::Reply {
            response: Response::DescribeGroups(response),
            ..
        }] => {
            let group = &response.groups[0];
            assert_eq!(group.error_code, 0);
            assert_eq!(group.group_state.as_str(), "Dead");
            assert!(group.members.is_empty());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn delete_groups_refuses_a_consumer_group_with_members() {
    use kafka_protocol::messages::DeleteGroupsRequest;
    let mut h = H::new();
    let epoch = joined(&mut h, "g", "m1");
    assert_eq!(commit(&mut h, 9, "g", "m1", epoch, 5), 0);
    let mut request = DeleteGroupsRequest::default();
    request.groups_names = vec![GroupId(StrBytes::from_static_str("g"))];
    let meta = h.meta(2);
    h.coordinator.handle_delete_groups(meta, request);
    match h.outputs().as_slice() {
        [Output::Reply {
            response: Response::DeleteGroups(response),
            ..
        }] => assert_eq!(
            response.results[0].error_code,
            ErrorCode::NON_EMPTY_GROUP.code()
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        h.coordinator
            .committed_offset("g", "t", 0)
            .map(|c| c.offset),
        Some(5)
    );
}

/// A consumer group left empty: `member` joined, committed offset 5 and left.
fn emptied(h: &mut H, group: &str, member: &str) {
    let epoch = joined(h, group, member);
    assert_eq!(commit(h, 9, group, member, epoch, 5), 0);
    let id = h.heartbeat(at_epoch(group, member, epochs::LEAVE));
    let (write, _) = h.write();
    h.coordinator.consumer_records_persisted(write, Ok(()));
    assert_eq!(h.reply(id).error_code, 0);
    assert!(h.coordinator.consumer_groups().group(group).is_some());
}

/// DeleteGroups of `group`: its writes (consumer records, offsets' tombstones) in output order.
fn delete_group(h: &mut H, group: &str) -> (u64, Vec<Output>) {
    use kafka_protocol::messages::DeleteGroupsRequest;
    let mut request = DeleteGroupsRequest::default();
    request.groups_names = vec![GroupId(StrBytes::from_string(group.to_owned()))];
    let meta = h.meta(2);
    let id = meta.request_id;
    h.coordinator.handle_delete_groups(meta, request);
    (id, h.outputs())
}

fn delete_groups_error(outputs: &[Output]) -> i16 {
    match outputs {
        [Output::Reply {
            response: Response::DeleteGroups(response),
            ..
        }] => response.results[0].error_code,
        other => panic!("{other:?}"),
    }
}

#[test]
fn delete_groups_deletes_an_empty_consumer_group_with_its_offsets_once_both_are_durable() {
    let mut h = H::new();
    emptied(&mut h, "g", "m1");
    let (id, outputs) = delete_group(&mut h, "g");
    let write = match outputs.as_slice() {
        [Output::PersistConsumerRecords { write, records, .. }, Output::PersistOffsetDeletes { request_id, keys }]
            if *request_id == id && keys.len() == 1 =>
        {
            assert!(
                records.iter().all(|record| record.is_tombstone()),
                "{records:?}"
            );
            *write
        }
        other => panic!("{other:?}"),
    };
    // Neither write alone answers.
    h.coordinator.deletes_persisted(id, Ok(()));
    assert!(h.outputs().is_empty());
    h.coordinator.consumer_records_persisted(write, Ok(()));
    assert_eq!(delete_groups_error(&h.outputs()), 0);
    assert!(h.coordinator.consumer_groups().group("g").is_none());
    assert_eq!(h.coordinator.committed_offset("g", "t", 0), None);
    // Gone: a second deletion finds nothing.
    let (_, outputs) = delete_group(&mut h, "g");
    assert_eq!(
        delete_groups_error(&outputs),
        ErrorCode::GROUP_ID_NOT_FOUND.code()
    );
}

#[test]
fn a_failed_deletion_of_a_consumer_group_keeps_it() {
    let mut h = H::new();
    emptied(&mut h, "g", "m1");
    let (id, outputs) = delete_group(&mut h, "g");
    let Output::PersistConsumerRecords { write, .. } = outputs[0] else {
        panic!("{outputs:?}");
    };
    h.coordinator
        .consumer_records_persisted(write, Err(PersistError::NotLeader));
    h.coordinator.deletes_persisted(id, Ok(()));
    assert_eq!(
        delete_groups_error(&h.outputs()),
        ErrorCode::NOT_COORDINATOR.code()
    );
    assert!(h.coordinator.consumer_groups().group("g").is_some());
    // An empty consumer group without offsets has only its records to write.
    let (_, outputs) = delete_group(&mut h, "g");
    let [Output::PersistConsumerRecords { write, .. }] = outputs.as_slice() else {
        panic!("{outputs:?}");
    };
    h.coordinator.consumer_records_persisted(*write, Ok(()));
    assert_eq!(delete_groups_error(&h.outputs()), 0);
    assert!(h.coordinator.consumer_groups().group("g").is_none());
}

#[test]
fn offset_delete_refuses_the_topics_a_consumer_group_subscribes_to() {
    use kafka_protocol::messages::offset_delete_request::{
        OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
    };
    use kafka_protocol::messages::{OffsetDeleteRequest, TopicName};
    let mut h = H::new();
    let epoch = joined(&mut h, "g", "m1");
    assert_eq!(commit(&mut h, 9, "g", "m1", epoch, 5), 0);
    let mut partition = OffsetDeleteRequestPartition::default();
    partition.partition_index = 0;
    let mut topic = OffsetDeleteRequestTopic::default();
    topic.name = TopicName(StrBytes::from_static_str("t"));
    topic.partitions = vec![partition];
    let mut request = OffsetDeleteRequest::default();
    request.group_id = GroupId(StrBytes::from_static_str("g"));
    request.topics = vec![topic];
    let meta = h.meta(0);
    h.coordinator
        .handle_offset_delete(h.now_ms, meta, request, |_, _| None);
    match h.outputs().as_slice() {
        [Output::Reply {
            response: Response::OffsetDelete(response),
            ..
        }] => {
            assert_eq!(response.error_code, 0);
            let code = response.topics[0].partitions[0].error_code;
            assert_eq!(code, ErrorCode::GROUP_SUBSCRIBED_TO_TOPIC.code());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        h.coordinator
            .committed_offset("g", "t", 0)
            .map(|c| c.offset),
        Some(5)
    );
}

#[test]
fn a_resigned_partition_answers_its_parked_and_in_flight_heartbeats_not_coordinator() {
    use crate::Coordinated;
    let mut h = H::new();
    let leading = |led: &[i32]| Coordinated {
        partitions: 1,
        led: led.iter().copied().collect(),
    };
    h.coordinator.set_coordinated(leading(&[0]));
    h.coordinator.load_partition(0, []);
    joined(&mut h, "g", "m1");
    let in_flight = h.heartbeat(join("g", "m2"));
    let (write, _) = h.write();
    let parked = h.heartbeat(join("g", "m3"));
    assert!(h.outputs().is_empty());
    h.coordinator.set_coordinated(leading(&[]));
    assert_eq!(
        h.reply(parked).error_code,
        ErrorCode::NOT_COORDINATOR.code()
    );
    assert!(h.coordinator.consumer_groups().group("g").is_none());
    // The write's result (even a failure) touches nothing now: the next leader loads the log.
    h.coordinator
        .consumer_records_persisted(write, Err(PersistError::Unavailable));
    assert_eq!(
        h.reply(in_flight).error_code,
        ErrorCode::NOT_COORDINATOR.code()
    );
    assert!(h.coordinator.consumer_groups().group("g").is_none());
    let id = h.heartbeat(join("g", "m4"));
    assert_eq!(h.reply(id).error_code, ErrorCode::NOT_COORDINATOR.code());
}

#[test]
fn parked_heartbeats_are_bounded() {
    let mut h = H::new();
    let epoch = joined(&mut h, "g", "m1");
    h.heartbeat(join("g", "m2"));
    h.write();
    for _ in 0..crate::PARKED_HEARTBEATS_MAX {
        h.heartbeat(at_epoch("g", "m1", epoch));
    }
    assert!(h.outputs().is_empty());
    let over = h.heartbeat(at_epoch("g", "m1", epoch));
    let response = h.reply(over);
    assert_eq!(
        response.error_code,
        ErrorCode::COORDINATOR_NOT_AVAILABLE.code()
    );
}

/// The heartbeat replies among `outputs`, in order: (request, error code).
fn replies(outputs: &[Output]) -> Vec<(u64, i16)> {
    outputs
        .iter()
        .filter_map(|output| match output {
            Output::Reply {
                request_id,
                response: Response::ConsumerGroupHeartbeat(response),
                ..
            } => Some((*request_id, response.error_code)),
            _ => None,
        })
        .collect()
}

/// The writes among `outputs`: (write, the members whose metadata they carry).
fn writes(outputs: &[Output]) -> Vec<(u64, Vec<String>)> {
    outputs
        .iter()
        .filter_map(|output| match output {
            Output::PersistConsumerRecords { write, records, .. } => {
                let members = records
                    .iter()
                    .filter_map(|record| match record {
                        ConsumerRecord::MemberMetadata { member, .. } => Some(member.clone()),
                        _ => None,
                    })
                    .collect();
                Some((*write, members))
            }
            _ => None,
        })
        .collect()
}

/// The group's members and epochs, what a rollback must put back.
fn group_state(h: &H, group: &str) -> Option<impl PartialEq + std::fmt::Debug> {
    let group = h.coordinator.consumer_groups().group(group)?;
    Some((
        group.members().clone(),
        group.group_epoch(),
        group.assignment_epoch(),
    ))
}

#[test]
fn heartbeats_parked_behind_a_write_go_out_as_one_write_and_are_answered_after_it() {
    let mut h = H::new();
    joined(&mut h, "g", "m1");
    let first = h.heartbeat(join("g", "m2"));
    let (write, _) = h.write();
    // A refusal before any batched heartbeat wrote is answered at once, as with no write in
    // flight; one after a batched write waits for it (it may show what the batch changed).
    let unknown = h.heartbeat(at_epoch("g", "ghost", 3));
    let joins: Vec<u64> = (3..=6)
        .map(|n| h.heartbeat(join("g", &format!("m{n}"))))
        .collect();
    let late_unknown = h.heartbeat(at_epoch("g", "ghost", 3));
    assert!(h.outputs().is_empty());
    h.coordinator.consumer_records_persisted(write, Ok(()));
    let outputs = h.outputs();
    let unknown_code = ErrorCode::UNKNOWN_MEMBER_ID.code();
    assert_eq!(replies(&outputs), vec![(first, 0), (unknown, unknown_code)]);
    let members = ["m3", "m4", "m5", "m6"].map(str::to_owned).to_vec();
    let [(combined, written)] = writes(&outputs).try_into().expect("one write");
    assert_eq!(written, members, "one write carries every parked join");
    assert_eq!(h.coordinator.next_deadline_ms(), None);
    h.coordinator.consumer_records_persisted(combined, Ok(()));
    let outputs = h.outputs();
    assert!(writes(&outputs).is_empty());
    let mut expected: Vec<(u64, i16)> = joins.iter().map(|id| (*id, 0)).collect();
    expected.push((late_unknown, unknown_code));
    assert_eq!(replies(&outputs), expected, "answered in arrival order");
    let group = h.coordinator.consumer_groups().group("g").expect("group");
    assert_eq!(group.members().len(), 6);
}

#[test]
fn a_failed_combined_write_rolls_back_every_batched_heartbeat() {
    let mut h = H::new();
    joined(&mut h, "g", "m1");
    let first = h.heartbeat(join("g", "m2"));
    let (write, _) = h.write();
    let joins: Vec<u64> = (3..=5)
        .map(|n| h.heartbeat(join("g", &format!("m{n}"))))
        .collect();
    let before_batch = group_state(&h, "g");
    h.coordinator.consumer_records_persisted(write, Ok(()));
    let outputs = h.outputs();
    assert_eq!(replies(&outputs), vec![(first, 0)]);
    let [(combined, _)] = writes(&outputs).try_into().expect("one write");
    assert_ne!(group_state(&h, "g"), before_batch);
    h.coordinator
        .consumer_records_persisted(combined, Err(PersistError::Unavailable));
    let outputs = h.outputs();
    assert!(writes(&outputs).is_empty());
    let code = ErrorCode::COORDINATOR_NOT_AVAILABLE.code();
    let expected: Vec<(u64, i16)> = joins.iter().map(|id| (*id, code)).collect();
    assert_eq!(replies(&outputs), expected);
    assert_eq!(
        group_state(&h, "g"),
        before_batch,
        "back to before the batch"
    );
    // The group works again: the joins retried are written and answered.
    let retried = h.heartbeat(join("g", "m3"));
    let (write, _) = h.write();
    let parked = h.heartbeat(join("g", "m4"));
    h.coordinator.consumer_records_persisted(write, Ok(()));
    let outputs = h.outputs();
    assert_eq!(replies(&outputs), vec![(retried, 0)]);
    let [(write, _)] = writes(&outputs).try_into().expect("one write");
    h.coordinator.consumer_records_persisted(write, Ok(()));
    assert_eq!(h.reply(parked).error_code, 0);
    let group = h.coordinator.consumer_groups().group("g").expect("group");
    assert_eq!(group.members().len(), 4);
}

#[test]
fn a_combined_write_over_its_bound_goes_out_as_consecutive_writes() {
    let mut h = H::new();
    joined(&mut h, "g", "m1");
    let first = h.heartbeat(join("g", "m2"));
    let (mut write, _) = h.write();
    // Each join carries about 60 KB of subscription: eight cannot share one write.
    let big_join = |n: usize| {
        let mut request = join("g", &format!("m{n}"));
        let names = (0..300)
            .map(|t| format!("{t:0>200}"))
            .chain(["t".to_owned()]);
        request.subscribed_topic_names = Some(names.collect());
        request
    };
    let joins: Vec<u64> = (3..=10).map(|n| h.heartbeat(big_join(n))).collect();
    assert!(h.outputs().is_empty());
    let (mut answered, mut written, mut write_count) = (Vec::new(), Vec::new(), 0);
    loop {
        h.coordinator.consumer_records_persisted(write, Ok(()));
        let outputs = h.outputs();
        answered.extend(replies(&outputs).into_iter().map(|(id, code)| {
            assert_eq!(code, 0);
            id
        }));
        let next = match outputs.as_slice() {
            [.., Output::PersistConsumerRecords { write, records, .. }] => {
                let batch = crate::offsets_log::encode_consumer_batch(records, 0).expect("batch");
                assert!(
                    batch.len() <= crate::CONSUMER_WRITE_BYTES_MAX,
                    "{}",
                    batch.len()
                );
                Some(*write)
            }
            _ => None,
        };
        written.extend(
            writes(&outputs)
                .into_iter()
                .flat_map(|(_, members)| members),
        );
        let Some(next) = next else { break };
        (write, write_count) = (next, write_count + 1);
    }
    assert!(write_count >= 2, "{write_count} writes");
    let members: Vec<String> = (3..=10).map(|n| format!("m{n}")).collect();
    assert_eq!(written, members, "each join written once, in order");
    let mut expected = vec![first];
    expected.extend(joins);
    assert_eq!(answered, expected, "answered in arrival order");
}
