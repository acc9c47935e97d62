//! Unit tests of each API against Kafka's answers, driven by a tiny in-memory driver.

use skiff_protocol::error_code::ErrorCode;
use skiff_protocol::records::txn::MarkerType;

use super::log::{decode_batches, decode_value, encode_batch, encode_value};
use super::*;

const ID: &str = "txn-a";

/// A driver that keeps the outputs for inspection.
struct Harness {
    coordinator: Coordinator,
    now: i64,
    next_request: u64,
    /// Every record made durable, in order, per state partition.
    log: Vec<(i32, TxnLogRecord)>,
    replies: Vec<(u64, Response)>,
    markers: Vec<Output>,
    /// Persist outputs not acknowledged yet (when `auto_persist` is off).
    held: Vec<(PersistId, i32, TxnLogRecord)>,
    auto_persist: bool,
}

impl Harness {
    fn new() -> Self {
        Self::with(TxnConfig::default())
    }

    fn with(config: TxnConfig) -> Self {
        let partitions = config.state_log_partitions;
        let mut coordinator = Coordinator::new(config);
        for partition in 0..partitions {
            coordinator.partition_led(partition, 5);
            coordinator.load_partition(0, partition, 5, Vec::new());
        }
        let mut harness = Self {
            coordinator,
            now: 1_000,
            next_request: 1,
            log: Vec::new(),
            replies: Vec::new(),
            markers: Vec::new(),
            held: Vec::new(),
            auto_persist: true,
        };
        harness
            .coordinator
            .producer_ids_granted(0, Some((1000, 2000)));
        harness
    }

    fn meta(&mut self, version: i16) -> RequestMeta {
        self.next_request += 1;
        RequestMeta {
            request_id: self.next_request,
            version,
        }
    }

    fn drain(&mut self) {
        while let Some(output) = self.coordinator.poll_output() {
            match output {
                Output::Reply {
                    request_id,
                    response,
                    ..
                } => self.replies.push((request_id, response)),
                Output::Persist {
                    persist_id,
                    partition,
                    record,
                    ..
                } => {
                    if self.auto_persist {
                        self.log.push((partition, record));
                        self.coordinator.persisted(self.now, persist_id, Ok(()));
                    } else {
                        self.held.push((persist_id, partition, record));
                    }
                }
                markers @ Output::SendMarkers { .. } => self.markers.push(markers),
                Output::NeedProducerIds => self
                    .coordinator
                    .producer_ids_granted(self.now, Some((5000, 5002))),
            }
        }
    }

    fn last_reply(&mut self, request_id: u64) -> Response {
        self.drain();
        let found: Vec<&Response> = self
            .replies
            .iter()
            .filter(|(id, _)| *id == request_id)
            .map(|(_, response)| response)
            .collect();
        assert_eq!(
            found.len(),
            1,
            "request {request_id} answered {} times",
            found.len()
        );
        found[0].clone()
    }

    fn init(&mut self, id: Option<&str>, producer: (i64, i16)) -> Response {
        let meta = self.meta(4);
        self.coordinator.handle_init_producer_id(
            self.now,
            meta,
            InitProducerId {
                transactional_id: id.map(str::to_owned),
                timeout_ms: 60_000,
                producer_id: producer.0,
                producer_epoch: producer.1,
            },
        );
        self.last_reply(meta.request_id)
    }

    fn init_ok(&mut self, id: &str) -> (i64, i16) {
        match self.init(Some(id), (-1, -1)) {
            Response::InitProducerId {
                error: ErrorCode::NONE,
                producer_id,
                producer_epoch,
            } => (producer_id, producer_epoch),
            other => panic!("InitProducerId: {other:?}"),
        }
    }

    fn add(
        &mut self,
        id: &str,
        producer: (i64, i16),
        partitions: &[(&str, i32)],
    ) -> Vec<ErrorCode> {
        let meta = self.meta(3);
        self.coordinator.handle_add_partitions(
            self.now,
            meta,
            AddPartitions {
                transactional_id: id.into(),
                producer_id: producer.0,
                producer_epoch: producer.1,
                partitions: partitions
                    .iter()
                    .map(|(topic, partition)| TopicPartition::new(*topic, *partition))
                    .collect(),
                client_tv: 1,
            },
        );
        match self.last_reply(meta.request_id) {
            Response::AddPartitions { results } => results.into_iter().map(|(_, e)| e).collect(),
            other => panic!("AddPartitions: {other:?}"),
        }
    }

    fn end(
        &mut self,
        id: &str,
        producer: (i64, i16),
        commit: bool,
        tv: i16,
    ) -> (ErrorCode, i64, i16) {
        let meta = self.meta(if tv >= 2 { 5 } else { 4 });
        self.coordinator.handle_end_txn(
            self.now,
            meta,
            EndTxn {
                transactional_id: id.into(),
                producer_id: producer.0,
                producer_epoch: producer.1,
                commit,
                client_tv: tv,
            },
        );
        match self.last_reply(meta.request_id) {
            Response::EndTxn {
                error,
                producer_id,
                producer_epoch,
            } => (error, producer_id, producer_epoch),
            other => panic!("EndTxn: {other:?}"),
        }
    }

    /// Acknowledges every marker output sent so far.
    fn ack_markers(&mut self) {
        for output in std::mem::take(&mut self.markers) {
            if let Output::SendMarkers {
                transactional_id,
                producer_id,
                producer_epoch,
                coordinator_epoch,
                ..
            } = output
            {
                self.coordinator.markers_written(
                    self.now,
                    &transactional_id,
                    producer_id,
                    producer_epoch,
                    coordinator_epoch,
                );
            }
        }
        self.drain();
    }

    fn state(&self, id: &str) -> TxnState {
        self.coordinator.metadata(id).expect("id").state
    }
}

#[test]
fn idempotent_producers_get_fresh_ids_and_wait_for_a_block() {
    let mut harness = Harness::new();
    let Response::InitProducerId {
        error,
        producer_id,
        producer_epoch,
    } = harness.init(None, (-1, -1))
    else {
        panic!()
    };
    assert_eq!(
        (error, producer_id, producer_epoch),
        (ErrorCode::NONE, 1000, 0)
    );
    // A coordinator without ids asks for a block once and answers when it comes.
    let mut coordinator = Coordinator::new(TxnConfig::default());
    let meta = RequestMeta {
        request_id: 1,
        version: 0,
    };
    let request = InitProducerId {
        transactional_id: None,
        timeout_ms: 1,
        producer_id: -1,
        producer_epoch: -1,
    };
    coordinator.handle_init_producer_id(0, meta, request.clone());
    coordinator.handle_init_producer_id(
        0,
        RequestMeta {
            request_id: 2,
            ..meta
        },
        request,
    );
    assert_eq!(coordinator.poll_output(), Some(Output::NeedProducerIds));
    assert_eq!(coordinator.poll_output(), None);
    coordinator.producer_ids_granted(0, Some((7, 8)));
    let mut answers = Vec::new();
    while let Some(Output::Reply { response, .. }) = coordinator.poll_output() {
        answers.push(response);
    }
    assert_eq!(
        answers.len(),
        1,
        "one id in the block: the second waits again"
    );
    assert_eq!(coordinator.poll_output(), None);
}

#[test]
fn producer_ids_come_from_claimed_blocks_one_claim_at_a_time_and_a_failed_claim_answers() {
    let mut coordinator = Coordinator::new(TxnConfig::default());
    let idempotent = InitProducerId {
        transactional_id: None,
        timeout_ms: 1,
        producer_id: -1,
        producer_epoch: -1,
    };
    let meta = |request_id| RequestMeta {
        request_id,
        version: 4,
    };
    coordinator.handle_init_producer_id(0, meta(1), idempotent.clone());
    coordinator.handle_init_producer_id(0, meta(2), idempotent.clone());
    assert_eq!(coordinator.poll_output(), Some(Output::NeedProducerIds));
    assert_eq!(
        coordinator.poll_output(),
        None,
        "one claim at a time; replies wait"
    );
    // Another broker took 0..1000 meanwhile: the store hands this one the next block.
    coordinator.producer_ids_granted(0, Some((1000, 2000)));
    let ids: Vec<i64> = std::iter::from_fn(|| coordinator.poll_output())
        .map(|output| match output {
            Output::Reply {
                response: Response::InitProducerId { producer_id, .. },
                ..
            } => producer_id,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(ids, vec![1000, 1001]);
    // A claim that fails answers the waiting request COORDINATOR_NOT_AVAILABLE (clients retry).
    let mut failing = Coordinator::new(TxnConfig::default());
    failing.handle_init_producer_id(0, meta(3), idempotent);
    assert_eq!(failing.poll_output(), Some(Output::NeedProducerIds));
    failing.producer_ids_granted(0, None);
    assert_eq!(
        failing.poll_output(),
        Some(Output::Reply {
            request_id: 3,
            version: 4,
            response: init::init_error(ErrorCode::COORDINATOR_NOT_AVAILABLE),
        })
    );
}

#[test]
fn init_bumps_the_epoch_and_fences_the_older_producer() {
    let mut harness = Harness::new();
    let first = harness.init_ok(ID);
    assert_eq!(first.1, 0);
    let second = harness.init_ok(ID);
    assert_eq!(second, (first.0, 1));
    // The zombie (epoch 0) can no longer add partitions or end.
    assert_eq!(
        harness.add(ID, first, &[("t", 0)]),
        vec![ErrorCode::PRODUCER_FENCED]
    );
    assert_eq!(
        harness.end(ID, first, true, 1).0,
        ErrorCode::PRODUCER_FENCED
    );
    assert_eq!(
        harness.add(ID, (first.0 + 1, 1), &[("t", 0)]),
        vec![ErrorCode::INVALID_PRODUCER_ID_MAPPING]
    );
}

#[test]
fn init_validates_timeout_and_coordination() {
    let mut harness = Harness::new();
    let meta = harness.meta(1);
    harness.coordinator.handle_init_producer_id(
        0,
        meta,
        InitProducerId {
            transactional_id: Some(ID.into()),
            timeout_ms: 900_001,
            producer_id: -1,
            producer_epoch: -1,
        },
    );
    assert_eq!(
        harness.last_reply(meta.request_id),
        init::init_error(ErrorCode::INVALID_TRANSACTION_TIMEOUT)
    );
    harness
        .coordinator
        .unload_partition(harness.coordinator.state_partition(ID));
    assert_eq!(
        harness.init(Some(ID), (-1, -1)),
        init::init_error(ErrorCode::NOT_COORDINATOR)
    );
    let partition = harness.coordinator.state_partition(ID);
    harness.coordinator.partition_led(partition, 6);
    assert_eq!(
        harness.init(Some(ID), (-1, -1)),
        init::init_error(ErrorCode::COORDINATOR_LOAD_IN_PROGRESS)
    );
    assert_eq!(
        harness.init(Some(ID), (5, -1)),
        init::init_error(ErrorCode::INVALID_REQUEST)
    );
}

#[test]
fn a_commit_with_transaction_version_1_writes_markers_then_completes() {
    let mut harness = Harness::new();
    let producer = harness.init_ok(ID);
    assert_eq!(
        harness.add(ID, producer, &[("t", 0), ("t", 1)]),
        vec![ErrorCode::NONE; 2]
    );
    assert_eq!(harness.state(ID), TxnState::Ongoing);
    // Adding the same partitions again is answered at once, without a record.
    let records = harness.log.len();
    assert_eq!(
        harness.add(ID, producer, &[("t", 1)]),
        vec![ErrorCode::NONE]
    );
    assert_eq!(harness.log.len(), records);
    assert_eq!(
        harness.end(ID, producer, true, 1),
        (ErrorCode::NONE, producer.0, producer.1)
    );
    assert_eq!(harness.state(ID), TxnState::PrepareCommit);
    // While the markers are out, another end or add waits.
    assert_eq!(
        harness.end(ID, producer, true, 1).0,
        ErrorCode::CONCURRENT_TRANSACTIONS
    );
    assert_eq!(
        harness.end(ID, producer, false, 1).0,
        ErrorCode::INVALID_TXN_STATE
    );
    assert_eq!(
        harness.add(ID, producer, &[("t", 2)]),
        vec![ErrorCode::CONCURRENT_TRANSACTIONS]
    );
    let Some(Output::SendMarkers {
        marker,
        partitions,
        producer_epoch,
        coordinator_epoch,
        ..
    }) = harness.markers.first().cloned()
    else {
        panic!("no markers")
    };
    assert_eq!(marker, MarkerType::Commit);
    assert_eq!(partitions.len(), 2);
    assert_eq!((producer_epoch, coordinator_epoch), (producer.1, 5));
    harness.ack_markers();
    assert_eq!(harness.state(ID), TxnState::CompleteCommit);
    assert!(harness
        .coordinator
        .metadata(ID)
        .unwrap()
        .partitions
        .is_empty());
    // A retried commit is answered NONE; an abort after it is the wrong state.
    assert_eq!(harness.end(ID, producer, true, 1).0, ErrorCode::NONE);
    assert_eq!(
        harness.end(ID, producer, false, 1).0,
        ErrorCode::INVALID_TXN_STATE
    );
    // Ending with no transaction open is INVALID_TXN_STATE in version 1.
    let producer = harness.init_ok(ID);
    assert_eq!(
        harness.end(ID, producer, false, 1).0,
        ErrorCode::INVALID_TXN_STATE
    );
}

#[test]
fn transaction_version_2_bumps_the_epoch_at_every_end_and_answers_retries() {
    let mut harness = Harness::new();
    let producer = harness.init_ok(ID);
    harness.add(ID, producer, &[("t", 0)]);
    let (error, producer_id, epoch) = harness.end(ID, producer, true, 2);
    assert_eq!(
        (error, producer_id, epoch),
        (ErrorCode::NONE, producer.0, producer.1 + 1)
    );
    // The markers carry the bumped epoch.
    assert!(matches!(
        harness.markers.first(),
        Some(Output::SendMarkers { producer_epoch, .. }) if *producer_epoch == producer.1 + 1
    ));
    // A retry (old epoch) while the markers are out: CONCURRENT_TRANSACTIONS; after: NONE.
    assert_eq!(
        harness.end(ID, producer, true, 2).0,
        ErrorCode::CONCURRENT_TRANSACTIONS
    );
    // A new end at the bumped epoch while the markers are out is fenced (Kafka's answer in
    // PrepareCommit: only a retry is recognised there).
    assert_eq!(
        harness.end(ID, (producer.0, epoch), false, 2).0,
        ErrorCode::PRODUCER_FENCED
    );
    harness.ack_markers();
    assert_eq!(
        harness.end(ID, producer, true, 2),
        (ErrorCode::NONE, producer.0, epoch)
    );
    // An abort with nothing added is allowed in version 2 and bumps again.
    let (error, _, next_epoch) = harness.end(ID, (producer.0, epoch), false, 2);
    assert_eq!((error, next_epoch), (ErrorCode::NONE, epoch + 1));
    harness.drain();
    assert_eq!(harness.state(ID), TxnState::CompleteAbort);
    // The old epoch is fenced.
    harness.add(ID, (producer.0, epoch + 1), &[("t", 0)]);
    assert_eq!(
        harness.end(ID, (producer.0, epoch - 1), true, 2).0,
        ErrorCode::PRODUCER_FENCED
    );
}

#[test]
fn transaction_version_2_moves_to_a_new_producer_id_when_the_epoch_is_exhausted() {
    let mut harness = Harness::new();
    let producer = harness.init_ok(ID);
    // Force the epoch to the last usable one through the log's own replay.
    let mut meta = harness.coordinator.metadata(ID).unwrap().clone();
    meta.producer_epoch = i16::MAX - 1;
    let partition = harness.coordinator.state_partition(ID);
    harness.coordinator.unload_partition(partition);
    harness.coordinator.partition_led(partition, 6);
    harness.coordinator.load_partition(
        0,
        partition,
        6,
        vec![TxnLogRecord {
            transactional_id: ID.into(),
            value: Some(meta),
        }],
    );
    let held = (producer.0, i16::MAX - 1);
    harness.add(ID, held, &[("t", 0)]);
    let (error, new_id, new_epoch) = harness.end(ID, held, true, 2);
    assert_eq!(error, ErrorCode::NONE);
    assert_ne!(new_id, producer.0);
    assert_eq!(new_epoch, 0);
    // Markers go out under the old id at i16::MAX; then the id moves.
    assert!(matches!(
        harness.markers.first(),
        Some(Output::SendMarkers { producer_id, producer_epoch, .. })
            if *producer_id == producer.0 && *producer_epoch == i16::MAX
    ));
    harness.ack_markers();
    let after = harness.coordinator.metadata(ID).unwrap();
    assert_eq!((after.producer_id, after.producer_epoch), (new_id, 0));
    assert_eq!(after.previous_producer_id, producer.0);
    // A retry of that end with the old id is recognised.
    assert_eq!(harness.end(ID, held, true, 2), (ErrorCode::NONE, new_id, 0));
}

#[test]
fn init_during_an_open_transaction_aborts_it_with_a_bumped_epoch() {
    let mut harness = Harness::new();
    let producer = harness.init_ok(ID);
    harness.add(ID, producer, &[("t", 0)]);
    assert_eq!(
        harness.init(Some(ID), (-1, -1)),
        init::init_error(ErrorCode::CONCURRENT_TRANSACTIONS)
    );
    assert_eq!(harness.state(ID), TxnState::PrepareAbort);
    assert!(matches!(
        harness.markers.first(),
        Some(Output::SendMarkers { marker: MarkerType::Abort, producer_epoch, .. })
            if *producer_epoch == producer.1 + 1
    ));
    // The fenced producer cannot commit.
    assert_eq!(
        harness.end(ID, producer, true, 1).0,
        ErrorCode::PRODUCER_FENCED
    );
    harness.ack_markers();
    assert_eq!(harness.state(ID), TxnState::CompleteAbort);
    assert_eq!(harness.init_ok(ID), (producer.0, producer.1 + 2));
}

#[test]
fn kip_360_recovery_and_retried_init() {
    let mut harness = Harness::new();
    let producer = harness.init_ok(ID);
    // The client names what it holds: bumped.
    let bumped = match harness.init(Some(ID), producer) {
        Response::InitProducerId {
            producer_id,
            producer_epoch,
            ..
        } => (producer_id, producer_epoch),
        other => panic!("{other:?}"),
    };
    assert_eq!(bumped, (producer.0, producer.1 + 1));
    // The same request again (its answer was lost): the current epoch, not another bump.
    assert!(matches!(
        harness.init(Some(ID), producer),
        Response::InitProducerId { error: ErrorCode::NONE, producer_epoch, .. } if producer_epoch == bumped.1
    ));
    // A stale epoch or a foreign producer id is fenced.
    assert_eq!(
        harness.init(Some(ID), (producer.0, 7)),
        init::init_error(ErrorCode::PRODUCER_FENCED)
    );
    assert_eq!(
        harness.init(Some(ID), (99, 0)),
        init::init_error(ErrorCode::PRODUCER_FENCED)
    );
}

#[test]
fn timed_out_transactions_are_aborted_and_idle_ids_expire() {
    let config = TxnConfig {
        id_expiration_ms: 100_000,
        ..TxnConfig::default()
    };
    let mut harness = Harness::with(config);
    let producer = harness.init_ok(ID);
    harness.add(ID, producer, &[("t", 0)]);
    harness.coordinator.tick(harness.now);
    harness.drain();
    assert_eq!(harness.state(ID), TxnState::Ongoing);
    harness.now += 60_001;
    harness.coordinator.tick(harness.now);
    harness.drain();
    assert_eq!(harness.state(ID), TxnState::PrepareAbort);
    assert_eq!(
        harness.coordinator.metadata(ID).unwrap().producer_epoch,
        producer.1 + 1
    );
    harness.ack_markers();
    assert_eq!(
        harness.end(ID, producer, true, 1).0,
        ErrorCode::PRODUCER_FENCED
    );
    // Idle long enough: a tombstone, then the id is gone.
    harness.now += 200_000_000;
    harness.coordinator.tick(harness.now);
    harness.drain();
    assert!(harness.coordinator.metadata(ID).is_none());
    assert!(matches!(
        harness.log.last(),
        Some((_, TxnLogRecord { value: None, .. }))
    ));
}

#[test]
fn a_failed_append_answers_the_error_and_changes_nothing() {
    let mut harness = Harness::new();
    let producer = harness.init_ok(ID);
    harness.auto_persist = false;
    let meta = harness.meta(3);
    harness.coordinator.handle_add_partitions(
        harness.now,
        meta,
        AddPartitions {
            transactional_id: ID.into(),
            producer_id: producer.0,
            producer_epoch: producer.1,
            partitions: vec![TopicPartition::new("t", 0)],
            client_tv: 1,
        },
    );
    harness.drain();
    // A second request while the first is being written: CONCURRENT_TRANSACTIONS.
    assert_eq!(
        harness.end(ID, producer, true, 1).0,
        ErrorCode::CONCURRENT_TRANSACTIONS
    );
    let (persist_id, ..) = harness.held.pop().unwrap();
    harness
        .coordinator
        .persisted(harness.now, persist_id, Err(PersistError::Unavailable));
    assert_eq!(
        harness.last_reply(meta.request_id),
        Response::AddPartitions {
            results: vec![(
                TopicPartition::new("t", 0),
                ErrorCode::COORDINATOR_NOT_AVAILABLE
            )]
        }
    );
    assert_eq!(harness.state(ID), TxnState::Empty);
}

#[test]
fn bounds_refuse_with_clear_codes() {
    let config = TxnConfig {
        transactional_ids_max: 1,
        partitions_per_transaction_max: 2,
        ..TxnConfig::default()
    };
    let mut harness = Harness::with(config);
    let producer = harness.init_ok(ID);
    assert_eq!(
        harness.init(Some("another"), (-1, -1)),
        init::init_error(ErrorCode::COORDINATOR_NOT_AVAILABLE)
    );
    assert_eq!(
        harness.add(ID, producer, &[("t", 0), ("t", 1), ("t", 2)]),
        vec![ErrorCode::POLICY_VIOLATION; 3]
    );
}

#[test]
fn verify_only_answers_per_partition_and_add_offsets_adds_the_group_partition() {
    let mut harness = Harness::new();
    let producer = harness.init_ok(ID);
    harness.add(ID, producer, &[("t", 0)]);
    let meta = harness.meta(4);
    harness.coordinator.handle_verify_partitions(
        meta,
        AddPartitions {
            transactional_id: ID.into(),
            producer_id: producer.0,
            producer_epoch: producer.1,
            partitions: vec![TopicPartition::new("t", 0), TopicPartition::new("t", 1)],
            client_tv: 1,
        },
    );
    let Response::AddPartitions { results } = harness.last_reply(meta.request_id) else {
        panic!()
    };
    assert_eq!(results[0].1, ErrorCode::NONE);
    assert_eq!(results[1].1, ErrorCode::INVALID_TXN_STATE);
    let meta = harness.meta(3);
    harness.coordinator.handle_add_offsets(
        harness.now,
        meta,
        AddPartitions {
            transactional_id: ID.into(),
            producer_id: producer.0,
            producer_epoch: producer.1,
            partitions: Vec::new(),
            client_tv: 1,
        },
        "group",
        50,
    );
    assert_eq!(
        harness.last_reply(meta.request_id),
        Response::AddOffsets {
            error: ErrorCode::NONE
        }
    );
    let expected = TopicPartition::new(
        OFFSETS_TOPIC,
        skiff_group::coordinator_partition("group", 50),
    );
    assert!(harness
        .coordinator
        .metadata(ID)
        .unwrap()
        .partitions
        .contains(&expected));
}

#[test]
fn loading_resumes_markers_and_unloading_answers_not_coordinator() {
    let mut harness = Harness::new();
    let producer = harness.init_ok(ID);
    harness.add(ID, producer, &[("t", 0)]);
    harness.end(ID, producer, false, 1);
    harness.markers.clear();
    // A new coordinator replays the log: the abort's markers go out again.
    let partition = harness.coordinator.state_partition(ID);
    let records: Vec<TxnLogRecord> = harness
        .log
        .iter()
        .filter(|(p, _)| *p == partition)
        .map(|(_, record)| record.clone())
        .collect();
    let mut fresh = Coordinator::new(TxnConfig::default());
    fresh.partition_led(partition, 9);
    fresh.load_partition(0, partition, 9, records);
    assert_eq!(fresh.metadata(ID).unwrap().state, TxnState::PrepareAbort);
    assert!(matches!(
        fresh.poll_output(),
        Some(Output::SendMarkers {
            coordinator_epoch: 9,
            marker: MarkerType::Abort,
            ..
        })
    ));
    // Unloading while an append is in flight answers the waiting request NOT_COORDINATOR.
    let other = harness.init_ok("other");
    harness.auto_persist = false;
    let meta = harness.meta(0);
    harness.coordinator.handle_end_txn(
        harness.now,
        meta,
        EndTxn {
            transactional_id: "other".into(),
            producer_id: other.0,
            producer_epoch: other.1,
            commit: false,
            client_tv: 2,
        },
    );
    harness.drain();
    harness
        .coordinator
        .unload_partition(harness.coordinator.state_partition("other"));
    assert_eq!(
        harness.last_reply(meta.request_id),
        end::end_error(ErrorCode::NOT_COORDINATOR)
    );
}

#[test]
fn describe_and_list() {
    let mut harness = Harness::new();
    let producer = harness.init_ok(ID);
    harness.add(ID, producer, &[("t", 0)]);
    harness.now += 5_000;
    harness.init_ok("idle");
    let meta = harness.meta(0);
    harness
        .coordinator
        .handle_describe(meta, vec![ID.into(), "unknown".into()]);
    let Response::DescribeTransactions(descriptions) = harness.last_reply(meta.request_id) else {
        panic!()
    };
    assert_eq!(descriptions[0].state, "Ongoing");
    assert_eq!(descriptions[1].error, ErrorCode::TRANSACTIONAL_ID_NOT_FOUND);
    let meta = harness.meta(1);
    harness.coordinator.handle_list(
        harness.now,
        meta,
        ListFilters {
            states: vec!["Ongoing".into(), "Bogus".into()],
            producer_ids: Vec::new(),
            duration_ms: 1_000,
            id_pattern: None,
        },
    );
    let Response::ListTransactions(listing) = harness.last_reply(meta.request_id) else {
        panic!()
    };
    assert_eq!(listing.unknown_state_filters, vec!["Bogus".to_owned()]);
    assert_eq!(
        listing.transactions,
        vec![(ID.to_owned(), producer.0, "Ongoing")]
    );
    // v2's pattern keeps an id only if it matches whole (Kafka's RE2/J `matches`).
    let listed = |harness: &mut Harness, pattern: &str| {
        let meta = harness.meta(2);
        let filters = ListFilters {
            id_pattern: IdPattern::compile(Some(pattern)).unwrap(),
            duration_ms: -1,
            ..ListFilters::default()
        };
        harness.coordinator.handle_list(harness.now, meta, filters);
        let Response::ListTransactions(listing) = harness.last_reply(meta.request_id) else {
            panic!()
        };
        listing.transactions.len()
    };
    let prefix = &ID[..ID.len() - 1];
    assert_eq!(listed(&mut harness, &format!("{prefix}.")), 1);
    assert_eq!(
        listed(&mut harness, prefix),
        0,
        "a partial match is no match"
    );
    assert_eq!(listed(&mut harness, "other.*"), 0);
    let every = listed(&mut harness, ".*");
    assert!(every >= 2, "ids besides {ID} are held");
    assert_eq!(
        listed(&mut harness, ""),
        every,
        "an empty pattern lists every id"
    );
}

#[test]
fn an_invalid_or_oversized_id_pattern_is_refused_with_kafkas_message() {
    assert_eq!(IdPattern::compile(None).unwrap(), None);
    let error = IdPattern::compile(Some("txn-[")).unwrap_err();
    assert_eq!(error.pattern, "txn-[");
    assert!(
        error
            .to_string()
            .starts_with("Transaction ID pattern `txn-[` is not a valid regular expression: "),
        "{error}"
    );
    // A pattern whose program would exceed the bound is refused, not compiled.
    let huge = "(?:a{1000}){1000}";
    assert!(IdPattern::compile(Some(huge)).is_err());
}

#[test]
fn every_transition_taken_is_legal_in_kafkas_table() {
    use TxnState::*;
    assert!(PrepareAbort.may_follow(Empty));
    assert!(!PrepareCommit.may_follow(Empty));
    assert!(!CompleteCommit.may_follow(PrepareAbort));
    assert!(!Ongoing.may_follow(PrepareCommit));
    for state in TxnState::ALL {
        assert_eq!(TxnState::from_id(state.id()), Some(state));
        assert_eq!(TxnState::from_name(state.name()), Some(state));
    }
}

mod codec {
    use super::*;
    use proptest::prelude::*;

    fn metadata_strategy() -> impl Strategy<Value = TxnMetadata> {
        (
            any::<i64>(),
            any::<i64>(),
            any::<i64>(),
            any::<i16>(),
            any::<i32>(),
            0usize..8,
            proptest::collection::btree_set(("[a-z]{1,8}", 0i32..100), 0..20),
            any::<i64>(),
            any::<i64>(),
            0i16..3,
        )
            .prop_map(
                |(pid, prev, next, epoch, timeout, state, partitions, start, update, tv)| {
                    let state = TxnState::ALL[state];
                    TxnMetadata {
                        producer_id: pid,
                        previous_producer_id: prev,
                        next_producer_id: next,
                        producer_epoch: epoch,
                        last_producer_epoch: -1,
                        timeout_ms: timeout,
                        state,
                        partitions: if state == TxnState::Empty {
                            Default::default()
                        } else {
                            partitions
                                .into_iter()
                                .map(|(topic, partition)| TopicPartition::new(topic, partition))
                                .collect()
                        },
                        start_ms: start,
                        last_update_ms: update,
                        client_tv: tv,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn version_1_round_trips(meta in metadata_strategy()) {
            let bytes = encode_value(&meta, 1).unwrap();
            prop_assert_eq!(decode_value(&bytes).unwrap(), meta);
        }

        #[test]
        fn version_0_round_trips_without_the_tagged_fields(meta in metadata_strategy()) {
            let bytes = encode_value(&meta, 0).unwrap();
            let decoded = decode_value(&bytes).unwrap();
            let mut expected = meta;
            expected.previous_producer_id = -1;
            expected.next_producer_id = -1;
            expected.client_tv = 0;
            prop_assert_eq!(decoded, expected);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_value(&bytes);
            let _ = log::decode_key(&bytes);
            let _ = decode_batches(&bytes, &mut |_| {});
        }

        #[test]
        fn truncations_are_errors(meta in metadata_strategy(), cut in 0usize..1000) {
            let bytes = encode_value(&meta, 1).unwrap();
            let cut = cut % bytes.len();
            prop_assert!(decode_value(&bytes[..cut]).is_err());
        }
    }

    #[test]
    fn layouts_are_kafkas() {
        assert_eq!(log::encode_key("ab").unwrap(), [0, 0, 0, 2, b'a', b'b']);
        let mut meta = TxnMetadata::new(7, 60_000, 3);
        meta.producer_epoch = 1;
        let v0 = encode_value(&meta, 0).unwrap();
        let mut expected = vec![0, 0];
        expected.extend(7i64.to_be_bytes());
        expected.extend(1i16.to_be_bytes());
        expected.extend(60_000i32.to_be_bytes());
        expected.push(0); // Empty
        expected.extend((-1i32).to_be_bytes()); // null partitions
        expected.extend(3i64.to_be_bytes());
        expected.extend((-1i64).to_be_bytes());
        assert_eq!(v0, expected);
        // Version 1 with the client's transaction version as tag 2.
        meta.client_tv = 2;
        let v1 = encode_value(&meta, 1).unwrap();
        assert_eq!(&v1[..2], &[0, 1]);
        assert_eq!(&v1[v1.len() - 5..], &[1, 2, 2, 0, 2]);
        assert_eq!(
            log::decode_key(&[0, 1, 0, 0]),
            Err(TxnLogError::UnknownKeyVersion { version: 1 })
        );
        assert!(matches!(
            decode_value(&[0, 2]),
            Err(TxnLogError::UnknownValueVersion { version: 2 })
        ));
    }

    #[test]
    fn batches_round_trip_with_tombstones() {
        let meta = TxnMetadata::new(1, 10, 0);
        let records = vec![
            TxnLogRecord {
                transactional_id: "a".into(),
                value: Some(meta),
            },
            TxnLogRecord {
                transactional_id: "b".into(),
                value: None,
            },
        ];
        let bytes = encode_batch(&records, 1, 5).unwrap();
        let mut decoded = Vec::new();
        decode_batches(&bytes, &mut |record| decoded.push(record)).unwrap();
        assert_eq!(decoded, records);
    }
}
