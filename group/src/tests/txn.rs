//! TxnOffsetCommit and the transactional offsets: pending until the producer's marker, made
//! visible by COMMIT (only if later in the log than the committed offset), dropped by ABORT,
//! KIP-447's fencing, OffsetFetch `require_stable`, replay of transactional batches and markers
//! through the real codec, tombstones over pending offsets, and the pending bound.

use super::*;
use crate::offsets_log::{
    decode_replayed_batches, encode_batches, encode_txn_batches, OffsetKey, OffsetLogEntry,
    OffsetValue, Replayed, TxnProducer,
};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use skiff_protocol::records::txn::{EndTxnMarker, MarkerType};

const PRODUCER: i64 = 4000;

/// TxnOffsetCommit's group metadata (v3+): generation, member id, group instance id.
struct Fence<'a> {
    generation: i32,
    member: &'a str,
    instance: Option<&'a str>,
}

const NO_FENCE: Fence<'static> = Fence {
    generation: -1,
    member: "",
    instance: None,
};

impl Harness {
    fn txn_commit(
        &mut self,
        version: i16,
        group: &str,
        (producer_id, producer_epoch): (i64, i16),
        fence: &Fence<'_>,
        offsets: &[(&str, i32, i64)],
    ) -> RequestId {
        let meta = self.meta(version);
        let id = meta.request_id;
        let mut request = TxnOffsetCommitRequest::default();
        request.transactional_id = TransactionalId(s("tx"));
        request.group_id = GroupId(s(group));
        request.producer_id = ProducerId(producer_id);
        request.producer_epoch = producer_epoch;
        request.generation_id = fence.generation;
        request.member_id = s(fence.member);
        request.group_instance_id = fence.instance.map(s);
        for (topic, partition, offset) in offsets {
            let mut entry = TxnOffsetCommitRequestTopic::default();
            entry.name = TopicName(s(topic));
            let mut p = TxnOffsetCommitRequestPartition::default();
            p.partition_index = *partition;
            p.committed_offset = *offset;
            p.committed_leader_epoch = 3;
            p.committed_metadata = Some(s("txn"));
            entry.partitions.push(p);
            request.topics.push(entry);
        }
        self.coordinator
            .handle_txn_offset_commit(self.now_ms, meta, request, |topic, _| topic != "missing");
        id
    }

    /// Errors of a TxnOffsetCommit answered at once (nothing accepted).
    fn txn_commit_errors(&mut self) -> Vec<i16> {
        match &self.replies()[..] {
            [(_, Response::TxnOffsetCommit(r))] => partition_errors(r),
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Completes the pending persist of `id` (its only output) and returns the answer's errors.
    fn persist_txn(&mut self, id: RequestId, result: Result<(), PersistError>) -> Vec<i16> {
        match &self.outputs()[..] {
            [Output::PersistTxnOffsets { request_id, .. }] => assert_eq!(*request_id, id),
            other => panic!("unexpected {other:?}"),
        }
        self.coordinator.offsets_persisted(id, result);
        self.txn_commit_errors()
    }

    /// OffsetFetch v7 of one partition: (offset, error).
    fn fetch_stable(
        &mut self,
        group: &str,
        topic: &str,
        partition: i32,
        stable: bool,
    ) -> (i64, i16) {
        let meta = self.meta(7);
        let mut request = OffsetFetchRequest::default();
        request.group_id = GroupId(s(group));
        request.require_stable = stable;
        let mut entry = OffsetFetchRequestTopic::default();
        entry.name = TopicName(s(topic));
        entry.partition_indexes = vec![partition];
        request.topics = Some(vec![entry]);
        self.coordinator.handle_offset_fetch(meta, request);
        match self.replies().pop() {
            Some((_, Response::OffsetFetch(r))) => {
                let p = &r.topics[0].partitions[0];
                (p.committed_offset, p.error_code)
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}

fn partition_errors(response: &TxnOffsetCommitResponse) -> Vec<i16> {
    response
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| p.error_code)
        .collect()
}

#[test]
fn txn_offsets_stay_pending_until_a_commit_marker() {
    let mut h = Harness::new();
    let id = h.txn_commit(0, "g", (PRODUCER, 2), &NO_FENCE, &[("t", 0, 10)]);
    match &h.outputs()[..] {
        [Output::PersistTxnOffsets {
            request_id,
            producer,
            commits,
        }] => {
            assert_eq!(*request_id, id);
            assert_eq!(
                *producer,
                TxnProducer {
                    producer_id: PRODUCER,
                    producer_epoch: 2
                }
            );
            assert_eq!(commits.len(), 1);
            assert_eq!(commits[0].1.offset, 10);
        }
        other => panic!("unexpected {other:?}"),
    }
    // Pending at once: invisible, and unstable for a require_stable fetch.
    assert_eq!(h.fetch_stable("g", "t", 0, false), (-1, 0));
    assert_eq!(
        h.fetch_stable("g", "t", 0, true),
        (-1, code(ErrorCode::UNSTABLE_OFFSET_COMMIT))
    );
    h.coordinator.offsets_persisted(id, Ok(()));
    assert_eq!(h.txn_commit_errors(), vec![0]);
    assert_eq!(h.fetch_stable("g", "t", 0, false), (-1, 0));
    // A marker of another producer, or of another partition, changes nothing.
    let other = h
        .coordinator
        .complete_transaction(0, PRODUCER + 1, 3, MarkerType::Commit);
    assert_eq!(other, TxnCompletion::default());
    let elsewhere = h
        .coordinator
        .complete_transaction(1, PRODUCER, 3, MarkerType::Commit);
    assert_eq!(elsewhere.groups, 0);
    // TV2: the marker carries the bumped epoch.
    let done = h
        .coordinator
        .complete_transaction(0, PRODUCER, 3, MarkerType::Commit);
    assert_eq!(done.groups, 1);
    assert_eq!(done.applied, 1);
    assert_eq!(h.fetch_stable("g", "t", 0, true), (10, 0));
    let committed = h
        .coordinator
        .committed_offset("g", "t", 0)
        .expect("committed");
    // v0 carries no leader epoch (v2+ does).
    assert_eq!(committed.leader_epoch, -1);
    assert_eq!(committed.metadata, "txn");
    assert_eq!(h.coordinator.pending_txn_offsets(), 0);
    // The same marker again (a replay already saw it): nothing left to do.
    let again = h
        .coordinator
        .complete_transaction(0, PRODUCER, 3, MarkerType::Commit);
    assert_eq!(again, TxnCompletion::default());
}

#[test]
fn an_abort_marker_drops_the_pending_offsets() {
    let mut h = Harness::new();
    let plain = h.commit(2, "g", "", -1, &[("t", 0, 5)]);
    h.outputs();
    h.coordinator.offsets_persisted(plain, Ok(()));
    h.replies();
    let id = h.txn_commit(
        2,
        "g",
        (PRODUCER, 0),
        &NO_FENCE,
        &[("t", 0, 50), ("t", 1, 60)],
    );
    assert_eq!(h.persist_txn(id, Ok(())), vec![0, 0]);
    let done = h
        .coordinator
        .complete_transaction(0, PRODUCER, 0, MarkerType::Abort);
    assert_eq!((done.applied, done.dropped), (0, 2));
    assert_eq!(h.fetch_stable("g", "t", 0, true), (5, 0));
    assert_eq!(h.fetch_stable("g", "t", 1, true), (-1, 0));
}

#[test]
fn a_commit_marker_keeps_the_offset_latest_in_the_log() {
    let mut h = Harness::new();
    // The transactional record is written first, a plain commit after it: the plain one wins.
    let txn = h.txn_commit(2, "g", (PRODUCER, 0), &NO_FENCE, &[("t", 0, 100)]);
    h.persist_txn(txn, Ok(()));
    let plain = h.commit(2, "g", "", -1, &[("t", 0, 200)]);
    h.outputs();
    h.coordinator.offsets_persisted(plain, Ok(()));
    h.replies();
    let done = h
        .coordinator
        .complete_transaction(0, PRODUCER, 0, MarkerType::Commit);
    assert_eq!((done.applied, done.dropped), (0, 1));
    assert_eq!(h.fetch_stable("g", "t", 0, true), (200, 0));
    // The other way round: the transactional record is later and wins at its COMMIT.
    let txn = h.txn_commit(2, "g", (PRODUCER, 1), &NO_FENCE, &[("t", 0, 150)]);
    h.persist_txn(txn, Ok(()));
    let done = h
        .coordinator
        .complete_transaction(0, PRODUCER, 1, MarkerType::Commit);
    assert_eq!(done.applied, 1);
    assert_eq!(h.fetch_stable("g", "t", 0, true), (150, 0));
}

#[test]
fn txn_commit_fencing_follows_kip_447() {
    let mut h = Harness::new();
    let (member, generation) = form_single(&mut h, 5, "g");
    let producer = (PRODUCER, 0);
    let cases: Vec<(Fence<'_>, ErrorCode)> = vec![
        (
            Fence {
                generation: generation + 1,
                member: &member,
                instance: None,
            },
            ErrorCode::ILLEGAL_GENERATION,
        ),
        (
            Fence {
                generation,
                member: "stranger",
                instance: None,
            },
            ErrorCode::UNKNOWN_MEMBER_ID,
        ),
        (
            Fence {
                generation,
                member: &member,
                instance: Some("unknown-instance"),
            },
            ErrorCode::UNKNOWN_MEMBER_ID,
        ),
    ];
    for (fence, error) in &cases {
        h.txn_commit(3, "g", producer, fence, &[("t", 0, 1)]);
        assert_eq!(h.txn_commit_errors(), vec![code(*error)], "{error:?}");
    }
    // The current member commits; a v0–v2 request (no group metadata) commits in any state.
    let fence = Fence {
        generation,
        member: &member,
        instance: None,
    };
    let id = h.txn_commit(3, "g", producer, &fence, &[("t", 0, 1)]);
    assert_eq!(h.persist_txn(id, Ok(())), vec![0]);
    let id = h.txn_commit(2, "g", producer, &fence, &[("t", 1, 1)]);
    assert_eq!(h.persist_txn(id, Ok(())), vec![0]);
    // Unknown group: created for a negative generation, ILLEGAL_GENERATION otherwise.
    let unknown = Fence {
        generation: 1,
        member: "m",
        instance: None,
    };
    h.txn_commit(3, "new", producer, &unknown, &[("t", 0, 1)]);
    assert_eq!(
        h.txn_commit_errors(),
        vec![code(ErrorCode::ILLEGAL_GENERATION)]
    );
    assert!(h.coordinator.group_state("new").is_none());
    h.txn_commit(3, "", producer, &NO_FENCE, &[("t", 0, 1)]);
    assert_eq!(
        h.txn_commit_errors(),
        vec![code(ErrorCode::INVALID_GROUP_ID)]
    );
    // Per partition: unknown topic, metadata too large; the group is not kept for nothing.
    h.txn_commit(1, "other", producer, &NO_FENCE, &[("missing", 0, 1)]);
    assert_eq!(
        h.txn_commit_errors(),
        vec![code(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)]
    );
    assert!(h.coordinator.group_state("other").is_none());
}

#[test]
fn a_replaced_static_member_is_fenced() {
    let mut h = Harness::new();
    let join = h.join_with(5, "g", "", &["range"], SESSION_MS, Some("instance-1"));
    let member = join_response(&h.replies(), join)
        .member_id
        .as_str()
        .to_owned();
    let generation = h.coordinator.generation_id("g").expect("group");
    let fence = Fence {
        generation,
        member: "zombie",
        instance: Some("instance-1"),
    };
    h.txn_commit(3, "g", (PRODUCER, 0), &fence, &[("t", 0, 1)]);
    assert_eq!(
        h.txn_commit_errors(),
        vec![code(ErrorCode::FENCED_INSTANCE_ID)]
    );
    let fence = Fence {
        generation,
        member: &member,
        instance: Some("instance-1"),
    };
    let id = h.txn_commit(3, "g", (PRODUCER, 0), &fence, &[("t", 0, 1)]);
    assert_eq!(h.persist_txn(id, Ok(())), vec![0]);
}

#[test]
fn a_failed_persist_leaves_nothing_pending() {
    let mut h = Harness::new();
    let id = h.txn_commit(2, "g", (PRODUCER, 0), &NO_FENCE, &[("t", 0, 10)]);
    assert_eq!(
        h.persist_txn(id, Err(PersistError::Unavailable)),
        vec![code(ErrorCode::COORDINATOR_NOT_AVAILABLE)]
    );
    assert_eq!(h.coordinator.pending_txn_offsets(), 0);
    assert_eq!(h.fetch_stable("g", "t", 0, true), (-1, 0));
    assert!(h.coordinator.group_state("g").is_none());
}

#[test]
fn pending_offsets_are_bounded() {
    let mut h = Harness::new();
    h.coordinator.config.pending_txn_offsets_max = 2;
    let id = h.txn_commit(
        2,
        "g",
        (PRODUCER, 0),
        &NO_FENCE,
        &[("t", 0, 1), ("t", 1, 1), ("t", 2, 1)],
    );
    let unavailable = code(ErrorCode::COORDINATOR_NOT_AVAILABLE);
    assert_eq!(h.persist_txn(id, Ok(())), vec![0, 0, unavailable]);
    // Updating a partition already pending for the producer still passes; another producer waits.
    let id = h.txn_commit(2, "g", (PRODUCER, 0), &NO_FENCE, &[("t", 1, 9)]);
    assert_eq!(h.persist_txn(id, Ok(())), vec![0]);
    h.txn_commit(2, "g", (PRODUCER + 1, 0), &NO_FENCE, &[("t", 1, 9)]);
    assert_eq!(h.txn_commit_errors(), vec![unavailable]);
    assert_eq!(h.coordinator.pending_txn_offsets(), 2);
    h.coordinator
        .complete_transaction(0, PRODUCER, 0, MarkerType::Commit);
    assert_eq!(h.coordinator.pending_txn_offsets(), 0);
    assert_eq!(h.fetch_stable("g", "t", 1, true), (9, 0));
    // Pending offsets also count against the committed-offset bound.
    h.coordinator.config.committed_offsets_max = 3;
    h.txn_commit(2, "g", (PRODUCER + 1, 0), &NO_FENCE, &[("t", 5, 1)]);
    let id = h.next_request_id;
    assert_eq!(h.persist_txn(id, Ok(())), vec![0]);
    h.txn_commit(2, "g", (PRODUCER + 2, 0), &NO_FENCE, &[("t", 6, 1)]);
    assert_eq!(h.txn_commit_errors(), vec![unavailable]);
}

#[test]
fn a_stale_marker_leaves_newer_offsets_pending() {
    let mut h = Harness::new();
    let id = h.txn_commit(2, "g", (PRODUCER, 7), &NO_FENCE, &[("t", 0, 10)]);
    h.persist_txn(id, Ok(()));
    let stale = h
        .coordinator
        .complete_transaction(0, PRODUCER, 6, MarkerType::Commit);
    assert_eq!(stale.stale, 1);
    assert!(h.coordinator.has_pending_txn_offset("g", "t", 0));
}

#[test]
fn delete_groups_and_offset_delete_remove_pending_offsets() {
    let mut h = Harness::new();
    let id = h.txn_commit(
        2,
        "g",
        (PRODUCER, 0),
        &NO_FENCE,
        &[("t", 0, 10), ("u", 0, 1)],
    );
    h.persist_txn(id, Ok(()));
    // OffsetDelete of a partition with only a pending offset writes its tombstone.
    let delete = h.offset_delete("g", &[("u", 0)]);
    match &h.outputs()[..] {
        [Output::PersistOffsetDeletes { request_id, keys }] => {
            assert_eq!(*request_id, delete);
            assert_eq!(keys.len(), 1);
        }
        other => panic!("unexpected {other:?}"),
    }
    h.coordinator.deletes_persisted(delete, Ok(()));
    h.replies();
    assert!(!h.coordinator.has_pending_txn_offset("g", "u", 0));
    assert!(h.coordinator.has_pending_txn_offset("g", "t", 0));
    // DeleteGroups of the Empty group tombstones its pending offsets too.
    let delete = h.delete_groups(2, &["g"]);
    match &h.outputs()[..] {
        [Output::PersistOffsetDeletes { keys, .. }] => assert_eq!(keys.len(), 1),
        other => panic!("unexpected {other:?}"),
    }
    h.coordinator.deletes_persisted(delete, Ok(()));
    match &h.replies()[..] {
        [(_, Response::DeleteGroups(r))] => assert_eq!(r.results[0].error_code, 0),
        other => panic!("unexpected {other:?}"),
    }
    assert!(h.coordinator.group_state("g").is_none());
    assert_eq!(h.coordinator.pending_txn_offsets(), 0);
    // The transaction's COMMIT then finds nothing: deleted offsets stay deleted.
    let done = h
        .coordinator
        .complete_transaction(0, PRODUCER, 0, MarkerType::Commit);
    assert_eq!(done, TxnCompletion::default());
    assert_eq!(h.fetch_stable("g", "t", 0, true), (-1, 0));
}

fn commit_entry(topic: &str, partition: i32, offset: i64) -> OffsetLogEntry {
    OffsetLogEntry::Commit(
        OffsetKey {
            group: "g".into(),
            topic: topic.into(),
            partition,
        },
        OffsetValue {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: 1,
        },
    )
}

fn marker_batch(producer_id: i64, producer_epoch: i16, marker_type: MarkerType) -> Vec<u8> {
    EndTxnMarker {
        producer_id,
        producer_epoch,
        coordinator_epoch: 0,
        marker_type,
    }
    .encode_batch(1)
    .expect("marker")
}

#[test]
fn a_replayed_log_resolves_transactions_at_their_markers() {
    let producer = |producer_id| TxnProducer {
        producer_id,
        producer_epoch: 0,
    };
    let mut log = Vec::new();
    let mut append = |batches: Vec<Vec<u8>>| batches.into_iter().for_each(|b| log.extend(b));
    append(encode_batches(&[commit_entry("t", 0, 1)], 1).expect("plain"));
    // Producer 1 commits t-0 = 10 and t-1 = 11; producer 2 aborts t-2 = 20; producer 3 never ends.
    append(
        encode_txn_batches(
            &[commit_entry("t", 0, 10), commit_entry("t", 1, 11)],
            producer(1),
            1,
        )
        .expect("txn"),
    );
    append(encode_txn_batches(&[commit_entry("t", 2, 20)], producer(2), 1).expect("txn"));
    append(encode_txn_batches(&[commit_entry("t", 3, 30)], producer(3), 1).expect("txn"));
    // A plain commit of t-1 after producer 1's record: it stays, the COMMIT does not override it.
    append(encode_batches(&[commit_entry("t", 1, 5)], 1).expect("plain"));
    append(vec![marker_batch(1, 1, MarkerType::Commit)]);
    append(vec![marker_batch(2, 1, MarkerType::Abort)]);
    let mut items = Vec::new();
    let consumed = decode_replayed_batches(&log, &mut |item| items.push(item)).expect("decode");
    assert_eq!(consumed, log.len());
    assert!(matches!(
        items[1],
        Replayed::Txn(TxnProducer { producer_id: 1, .. }, _)
    ));
    assert!(matches!(
        items.last(),
        Some(Replayed::Marker(_, MarkerType::Abort))
    ));
    let mut h = Harness::unloaded();
    h.coordinator.load_offsets(items);
    let offsets = h.coordinator.committed_offsets();
    let get = |partition| {
        offsets
            .get(&("g".to_owned(), "t".to_owned(), partition))
            .copied()
    };
    assert_eq!(
        (get(0), get(1), get(2), get(3)),
        (Some(10), Some(5), None, None)
    );
    // Producer 3's transaction has no marker: still pending after the load, until its marker.
    assert_eq!(
        h.fetch_stable("g", "t", 3, true),
        (-1, code(ErrorCode::UNSTABLE_OFFSET_COMMIT))
    );
    let done = h
        .coordinator
        .complete_transaction(0, 3, 1, MarkerType::Commit);
    assert_eq!(done.applied, 1);
    assert_eq!(h.fetch_stable("g", "t", 3, true), (30, 0));
}

#[test]
fn every_txn_commit_reply_encodes() {
    let mut h = Harness::new();
    for version in 0..=4 {
        let id = h.txn_commit(
            version,
            "g",
            (PRODUCER, 0),
            &NO_FENCE,
            &[("t", 0, 1), ("missing", 0, 1)],
        );
        h.outputs();
        h.coordinator.offsets_persisted(id, Ok(()));
        let replies = h.replies();
        assert_eq!(replies.len(), 1);
    }
}
