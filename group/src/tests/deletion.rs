//! DeleteGroups and OffsetDelete: Kafka's error codes, the tombstones handed to the driver, the
//! answer only after they are durable, and what a failed or racing persist leaves behind.

use super::*;
use crate::offsets_log::{OffsetKey, OffsetLogEntry, OffsetValue};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};

/// A `ConsumerProtocolSubscription` v1: version, topics, null user data, no owned partitions.
fn subscription(topics: &[&str]) -> Bytes {
    let mut out = Vec::new();
    out.extend_from_slice(&1i16.to_be_bytes());
    out.extend_from_slice(&i32::try_from(topics.len()).unwrap().to_be_bytes());
    for topic in topics {
        out.extend_from_slice(&i16::try_from(topic.len()).unwrap().to_be_bytes());
        out.extend_from_slice(topic.as_bytes());
    }
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes());
    Bytes::from(out)
}

impl Harness {
    pub(super) fn delete_groups(&mut self, version: i16, groups: &[&str]) -> RequestId {
        let meta = self.meta(version);
        let id = meta.request_id;
        let mut request = DeleteGroupsRequest::default();
        request.groups_names = groups.iter().map(|g| GroupId(s(g))).collect();
        self.coordinator.handle_delete_groups(meta, request);
        id
    }

    pub(super) fn offset_delete(&mut self, group: &str, partitions: &[(&str, i32)]) -> RequestId {
        self.offset_delete_refusing(group, partitions, |_, _| None)
    }

    fn offset_delete_refusing(
        &mut self,
        group: &str,
        partitions: &[(&str, i32)],
        refused: impl Fn(&str, i32) -> Option<i16>,
    ) -> RequestId {
        let meta = self.meta(0);
        let id = meta.request_id;
        let mut request = OffsetDeleteRequest::default();
        request.group_id = GroupId(s(group));
        for (topic, partition) in partitions {
            let mut entry = OffsetDeleteRequestTopic::default();
            entry.name = TopicName(s(topic));
            entry.partitions =
                vec![OffsetDeleteRequestPartition::default().with_partition_index(*partition)];
            request.topics.push(entry);
        }
        self.coordinator
            .handle_offset_delete(self.now_ms, meta, request, refused);
        id
    }

    /// A standalone commit (no member, generation −1) made durable at once.
    fn commit_durably(&mut self, group: &str, offsets: &[(&str, i32, i64)]) {
        let id = self.commit(2, group, "", -1, offsets);
        match &self.outputs()[..] {
            [Output::PersistOffsets { request_id, .. }] => assert_eq!(*request_id, id),
            other => panic!("unexpected {other:?}"),
        }
        self.coordinator.offsets_persisted(id, Ok(()));
        self.replies();
    }

    /// The tombstones of the one pending deletion, checked to belong to `id`.
    fn tombstones(&mut self, id: RequestId) -> Vec<OffsetKey> {
        match self.outputs().as_slice() {
            [Output::PersistOffsetDeletes { request_id, keys }] if *request_id == id => {
                keys.clone()
            }
            other => panic!("expected the tombstones of {id}: {other:?}"),
        }
    }

    /// One member joined with a real consumer subscription, synced: the group is Stable.
    fn form_subscribed(&mut self, group: &str, topics: &[&str]) {
        let meta = self.meta(3);
        let mut request = JoinGroupRequest::default();
        request.group_id = GroupId(s(group));
        request.session_timeout_ms = SESSION_MS;
        request.rebalance_timeout_ms = 20_000;
        request.protocol_type = s("consumer");
        let mut protocol = JoinGroupRequestProtocol::default();
        protocol.name = s("range");
        protocol.metadata = subscription(topics);
        request.protocols = vec![protocol];
        let id = meta.request_id;
        self.coordinator
            .handle_join_group(self.now_ms, meta, request);
        let replies = self.replies();
        let joined = join_response(&replies, id);
        assert_eq!(joined.error_code, 0);
        let member = joined.member_id.as_str().to_owned();
        self.sync(3, group, &member, joined.generation_id, &[(&member, "a")]);
        self.replies();
        assert_eq!(
            self.coordinator.group_state(group),
            Some(GroupState::Stable)
        );
    }
}

fn group_results(replies: &[(RequestId, Response)], id: RequestId) -> Vec<(String, i16)> {
    replies
        .iter()
        .find_map(|(request_id, response)| match response {
            Response::DeleteGroups(r) if *request_id == id => Some(
                r.results
                    .iter()
                    .map(|result| (result.group_id.0.as_str().to_owned(), result.error_code))
                    .collect(),
            ),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no DeleteGroups reply for {id} in {replies:?}"))
}

fn offset_delete_answer(replies: &[(RequestId, Response)], id: RequestId) -> OffsetDeleteResponse {
    replies
        .iter()
        .find_map(|(request_id, response)| match response {
            Response::OffsetDelete(r) if *request_id == id => Some(r.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no OffsetDelete reply for {id} in {replies:?}"))
}

fn partition_codes(response: &OffsetDeleteResponse) -> Vec<(String, i32, i16)> {
    response
        .topics
        .iter()
        .flat_map(|topic| {
            topic.partitions.iter().map(move |partition| {
                (
                    topic.name.0.as_str().to_owned(),
                    partition.partition_index,
                    partition.error_code,
                )
            })
        })
        .collect()
}

#[test]
fn delete_groups_answers_kafkas_codes_and_deletes_only_empty_groups() {
    for version in 0..=2 {
        let mut h = Harness::new();
        form_single(&mut h, 3, "live");
        h.commit_durably("idle", &[("t", 0, 7), ("t", 1, 9)]);
        let id = h.delete_groups(version, &["live", "unknown", "idle"]);
        let keys = h.tombstones(id);
        assert_eq!(keys.len(), 2, "{keys:?}");
        assert!(keys.iter().all(|key| key.group == "idle"));
        // Nothing changes and nothing is answered until the tombstones are durable.
        assert!(h.coordinator.committed_offset("idle", "t", 0).is_some());
        h.coordinator.deletes_persisted(id, Ok(()));
        let replies = h.replies();
        assert_eq!(
            group_results(&replies, id),
            vec![
                ("live".into(), code(ErrorCode::NON_EMPTY_GROUP)),
                ("unknown".into(), code(ErrorCode::GROUP_ID_NOT_FOUND)),
                ("idle".into(), 0),
            ]
        );
        assert!(h.coordinator.committed_offset("idle", "t", 0).is_none());
        assert_eq!(h.coordinator.group_state("idle"), None);
        assert_eq!(h.coordinator.group_state("live"), Some(GroupState::Stable));
        assert_eq!(h.coordinator.offsets_count, 0);
        // Deleted means gone: a second delete does not find it.
        let again = h.delete_groups(version, &["idle"]);
        let replies = h.replies();
        assert_eq!(
            group_results(&replies, again),
            vec![("idle".into(), code(ErrorCode::GROUP_ID_NOT_FOUND))]
        );
    }
}

#[test]
fn a_group_whose_members_left_is_deleted_with_its_offsets() {
    let mut h = Harness::new();
    let (member, generation) = form_single(&mut h, 3, "g");
    let id = h.commit(3, "g", &member, generation, &[("t", 0, 4)]);
    h.outputs();
    h.coordinator.offsets_persisted(id, Ok(()));
    h.replies();
    let meta = h.meta(0);
    let mut leave = LeaveGroupRequest::default();
    leave.group_id = GroupId(s("g"));
    leave.member_id = s(&member);
    h.coordinator.handle_leave_group(h.now_ms, meta, leave);
    h.replies();
    assert_eq!(h.coordinator.group_state("g"), Some(GroupState::Empty));
    let id = h.delete_groups(2, &["g"]);
    assert_eq!(h.tombstones(id).len(), 1);
    h.coordinator.deletes_persisted(id, Ok(()));
    assert_eq!(group_results(&h.replies(), id), vec![("g".into(), 0)]);
    assert_eq!(h.coordinator.group_state("g"), None);
}

#[test]
fn a_failed_tombstone_write_deletes_nothing_and_says_why() {
    let mut h = Harness::new();
    h.commit_durably("idle", &[("t", 0, 7)]);
    let id = h.delete_groups(1, &["idle"]);
    h.tombstones(id);
    h.coordinator
        .deletes_persisted(id, Err(PersistError::Unavailable));
    assert_eq!(
        group_results(&h.replies(), id),
        vec![("idle".into(), code(ErrorCode::COORDINATOR_NOT_AVAILABLE))]
    );
    assert_eq!(
        h.coordinator
            .committed_offset("idle", "t", 0)
            .map(|c| c.offset),
        Some(7)
    );
    // An unknown or repeated completion is ignored.
    h.coordinator.deletes_persisted(id, Ok(()));
    assert!(h.outputs().is_empty());
}

#[test]
fn a_commit_handed_out_after_the_tombstones_survives_them() {
    let mut h = Harness::new();
    h.commit_durably("idle", &[("t", 0, 7), ("t", 1, 8)]);
    let delete = h.delete_groups(2, &["idle"]);
    h.tombstones(delete);
    // A standalone commit arrives while the tombstones are being written; the driver appends it
    // after them, so a replay keeps it, and so must the live state.
    let commit = h.commit(2, "idle", "", -1, &[("t", 0, 11)]);
    h.outputs();
    h.coordinator.offsets_persisted(commit, Ok(()));
    h.coordinator.deletes_persisted(delete, Ok(()));
    let replies = h.replies();
    assert_eq!(group_results(&replies, delete), vec![("idle".into(), 0)]);
    assert_eq!(
        h.coordinator
            .committed_offset("idle", "t", 0)
            .map(|c| c.offset),
        Some(11)
    );
    assert!(h.coordinator.committed_offset("idle", "t", 1).is_none());
    assert_eq!(h.coordinator.group_state("idle"), Some(GroupState::Empty));
    // The same entries replayed give the same offsets.
    let key = |partition| OffsetKey {
        group: "idle".into(),
        topic: "t".into(),
        partition,
    };
    let value = |offset| OffsetValue {
        offset,
        leader_epoch: -1,
        metadata: "meta".into(),
        commit_timestamp_ms: 1,
    };
    let mut replayed = Harness::unloaded();
    replayed.coordinator.load_offsets(
        [
            OffsetLogEntry::Commit(key(0), value(7)),
            OffsetLogEntry::Commit(key(1), value(8)),
            OffsetLogEntry::Delete(key(0)),
            OffsetLogEntry::Delete(key(1)),
            OffsetLogEntry::Commit(key(0), value(11)),
        ]
        .map(crate::Replayed::from),
    );
    assert_eq!(
        replayed.coordinator.committed_offsets(),
        h.coordinator.committed_offsets()
    );
}

#[test]
fn offset_delete_follows_the_group_state_and_the_subscriptions() {
    let mut h = Harness::new();
    h.form_subscribed("live", &["t"]);
    h.commit_durably("idle", &[("t", 0, 1)]);
    let id = h.offset_delete("unknown", &[("t", 0)]);
    let answer = offset_delete_answer(&h.replies(), id);
    assert_eq!(answer.error_code, code(ErrorCode::GROUP_ID_NOT_FOUND));
    assert!(answer.topics.is_empty());

    // Offsets of the live group: one on its topic, one on a topic nobody subscribes to. The
    // live group has a member, so the commits go through it.
    let member = h.coordinator.groups["live"]
        .members
        .keys()
        .next()
        .cloned()
        .unwrap();
    let generation = h.coordinator.generation_id("live").unwrap();
    let commit = h.commit(3, "live", &member, generation, &[("t", 0, 3), ("u", 0, 5)]);
    h.outputs();
    h.coordinator.offsets_persisted(commit, Ok(()));
    h.replies();
    let id = h.offset_delete_refusing("live", &[("t", 0), ("u", 0), ("v", 2)], |topic, _| {
        (topic == "v").then_some(code(ErrorCode::TOPIC_AUTHORIZATION_FAILED))
    });
    let keys = h.tombstones(id);
    assert_eq!(
        keys,
        vec![OffsetKey {
            group: "live".into(),
            topic: "u".into(),
            partition: 0
        }]
    );
    h.coordinator.deletes_persisted(id, Ok(()));
    let answer = offset_delete_answer(&h.replies(), id);
    assert_eq!(answer.error_code, 0);
    assert_eq!(
        partition_codes(&answer),
        vec![
            ("t".into(), 0, code(ErrorCode::GROUP_SUBSCRIBED_TO_TOPIC)),
            ("u".into(), 0, 0),
            ("v".into(), 2, code(ErrorCode::TOPIC_AUTHORIZATION_FAILED)),
        ]
    );
    assert!(h.coordinator.committed_offset("live", "t", 0).is_some());
    assert!(h.coordinator.committed_offset("live", "u", 0).is_none());

    // An Empty group: every offset may go; a partition without an offset answers 0 too.
    let id = h.offset_delete("idle", &[("t", 0), ("t", 5)]);
    h.tombstones(id);
    h.coordinator.deletes_persisted(id, Ok(()));
    let answer = offset_delete_answer(&h.replies(), id);
    assert_eq!(
        partition_codes(&answer),
        vec![("t".into(), 0, 0), ("t".into(), 5, 0)]
    );
    // Its last offset gone, the group stays Empty (Kafka 4.x keeps it until its cleanup), so
    // DeleteGroups still finds it; ticks before the retention ends keep it too.
    h.advance(h.coordinator.config.emptied_group_retention_ms - 1);
    assert_eq!(h.coordinator.group_state("idle"), Some(GroupState::Empty));
    let id = h.delete_groups(2, &["idle"]);
    assert_eq!(group_results(&h.replies(), id), vec![("idle".into(), 0)]);
    assert_eq!(h.coordinator.group_state("idle"), None);
}

#[test]
fn a_group_emptied_by_offset_delete_is_forgotten_after_the_retention() {
    let mut h = Harness::new();
    h.commit_durably("idle", &[("t", 0, 1)]);
    let id = h.offset_delete("idle", &[("t", 0)]);
    h.tombstones(id);
    h.coordinator.deletes_persisted(id, Ok(()));
    h.replies();
    let retention_ms = h.coordinator.config.emptied_group_retention_ms;
    assert_eq!(
        h.coordinator.next_deadline_ms(),
        Some(h.now_ms + retention_ms)
    );
    h.advance(retention_ms);
    assert_eq!(h.coordinator.group_state("idle"), None);
    assert_eq!(h.coordinator.next_deadline_ms(), None);
}

#[test]
fn unreadable_subscriptions_count_as_subscribed_to_everything() {
    // form_single's member metadata is not a ConsumerProtocolSubscription: Kafka cannot tell
    // what the group consumes, so it refuses every topic.
    let mut h = Harness::new();
    let (member, generation) = form_single(&mut h, 3, "g");
    let commit = h.commit(3, "g", &member, generation, &[("u", 0, 5)]);
    h.outputs();
    h.coordinator.offsets_persisted(commit, Ok(()));
    h.replies();
    let id = h.offset_delete("g", &[("u", 0)]);
    let answer = offset_delete_answer(&h.replies(), id);
    assert_eq!(
        partition_codes(&answer),
        vec![("u".into(), 0, code(ErrorCode::GROUP_SUBSCRIBED_TO_TOPIC))]
    );
}

#[test]
fn a_non_empty_group_of_another_protocol_type_is_refused_whole() {
    let mut h = Harness::new();
    let meta = h.meta(3);
    let mut request = JoinGroupRequest::default();
    request.group_id = GroupId(s("connect"));
    request.session_timeout_ms = SESSION_MS;
    request.rebalance_timeout_ms = 20_000;
    request.protocol_type = s("connect");
    let mut protocol = JoinGroupRequestProtocol::default();
    protocol.name = s("sessioned");
    protocol.metadata = subscription(&["t"]);
    request.protocols = vec![protocol];
    h.coordinator.handle_join_group(h.now_ms, meta, request);
    h.replies();
    let id = h.offset_delete("connect", &[("u", 0)]);
    let answer = offset_delete_answer(&h.replies(), id);
    assert_eq!(answer.error_code, code(ErrorCode::NON_EMPTY_GROUP));
    assert!(answer.topics.is_empty());
}

#[test]
fn before_loading_both_answer_load_in_progress() {
    let mut h = Harness::unloaded();
    let id = h.delete_groups(2, &["g"]);
    assert_eq!(
        group_results(&h.replies(), id),
        vec![("g".into(), code(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS))]
    );
    let id = h.offset_delete("g", &[("t", 0)]);
    assert_eq!(
        offset_delete_answer(&h.replies(), id).error_code,
        code(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS)
    );
}
