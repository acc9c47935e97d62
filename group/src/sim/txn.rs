//! A seeded simulation of transactional offset commits: producers run transactions
//! (TxnOffsetCommit at v0–v4, then a COMMIT or ABORT marker appended to the offsets log and
//! reported with `complete_transaction`, the epoch bumped as TV2 does), a plain committer commits
//! the same partitions between them, fetchers ask with and without `require_stable`, the driver
//! makes writes durable late or fails them, and the broker crashes and replays the log's bytes
//! (sometimes between a marker's append and its report).
//!
//! The reference is a model of the log itself, kept by the simulation: every appended record at
//! its position, each producer's transactional records pending until its marker, a COMMIT
//! making a pending offset visible only if its record is later than the visible one's. Checked
//! after every step and after every restart:
//! - the coordinator's committed offsets are exactly the model's (so an aborted transaction's
//!   offsets are never visible, and a committed one's exactly once, also after a reload);
//! - no visible offset was ever written by an aborted transaction only;
//! - OffsetFetch without `require_stable` answers the visible offset; with it, a partition with
//!   a pending transactional commit (durable, or still being written) answers
//!   UNSTABLE_OFFSET_COMMIT and any other answers the visible offset;
//! - every request gets exactly one reply (requests outstanding at a crash are dropped).
//!
//! A failure prints `SKIFF_SEED=<seed>`; `SKIFF_SEED=<seed> cargo test -p skiff-group sim::txn`
//! replays only that seed.
//!
//! Must never: read a clock or sleep.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    GroupId, OffsetCommitRequest, OffsetFetchRequest, ProducerId, TopicName, TransactionalId,
    TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use skiff_protocol::error_code::ErrorCode;
use skiff_protocol::records::txn::{EndTxnMarker, MarkerType};

use crate::offsets_log::{
    decode_replayed_batches, encode_batches, encode_txn_batches, OffsetKey, OffsetLogEntry,
    OffsetValue, TxnProducer,
};
use crate::{Coordinator, GroupConfig, GroupKeys, Output, PersistError, RequestId, RequestMeta};
use crate::{Response, UNPARTITIONED};

/// Seeds run by the normal test run.
const SEEDS: std::ops::Range<u64> = 0..24;
/// Steps per seed.
const STEPS: usize = 2_000;
const GROUP: &str = "txn-group";
const TOPIC: &str = "t";
const PARTITIONS: i32 = 4;
const PRODUCERS: usize = 3;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

#[derive(Debug, Clone, Default)]
struct SimProducer {
    epoch: i16,
    in_txn: bool,
    /// Its TxnOffsetCommit in flight (one at a time, as Kafka's producer sends them).
    waiting: bool,
    /// A commit of this transaction failed: it must abort (Kafka's abortable error).
    must_abort: bool,
}

/// A write handed to the driver: plain commits, or one producer's transactional commits.
#[derive(Debug, Clone)]
struct Write {
    producer: Option<TxnProducer>,
    commits: Vec<(OffsetKey, OffsetValue)>,
}

/// What a request was, to interpret its reply.
#[derive(Debug, Clone, Copy)]
enum Sent {
    Txn(usize),
    Plain,
    Fetch { stable: bool },
}

/// The offsets log as the model sees it: (offset, record position) per partition.
#[derive(Debug, Clone, Default)]
struct LogModel {
    records: usize,
    visible: BTreeMap<i32, (i64, usize)>,
    pending: BTreeMap<i64, BTreeMap<i32, (i64, usize)>>,
    /// Offsets written only by transactions that aborted.
    aborted: BTreeSet<i64>,
}

impl LogModel {
    fn append(&mut self, write: &Write) {
        for (key, value) in &write.commits {
            self.records += 1;
            let record = (value.offset, self.records);
            match write.producer {
                None => {
                    self.visible.insert(key.partition, record);
                }
                Some(producer) => {
                    self.pending
                        .entry(producer.producer_id)
                        .or_default()
                        .insert(key.partition, record);
                }
            }
        }
    }

    fn end(&mut self, producer_id: i64, marker: MarkerType) {
        let Some(pending) = self.pending.remove(&producer_id) else {
            return;
        };
        for (partition, record) in pending {
            match marker {
                MarkerType::Abort => {
                    self.aborted.insert(record.0);
                }
                MarkerType::Commit => {
                    if self
                        .visible
                        .get(&partition)
                        .is_none_or(|visible| visible.1 < record.1)
                    {
                        self.visible.insert(partition, record);
                    }
                }
            }
        }
    }

    fn visible_offsets(&self) -> BTreeMap<i32, i64> {
        self.visible
            .iter()
            .map(|(partition, (offset, _))| (*partition, *offset))
            .collect()
    }
}

struct TxnSim {
    rng: ChaCha8Rng,
    now_ms: i64,
    coordinator: Coordinator,
    producers: Vec<SimProducer>,
    next_request_id: RequestId,
    outstanding: BTreeMap<RequestId, Sent>,
    persist_queue: VecDeque<(RequestId, Write)>,
    log: Vec<u8>,
    model: LogModel,
    /// Every offset value is used once, so a visible offset says which commit it came from.
    next_offset: i64,
    markers: BTreeMap<bool, usize>,
    restarts: usize,
}

fn new_coordinator(salt: u64) -> Coordinator {
    Coordinator::new(GroupConfig::new(GroupKeys::KAFKA_DEFAULTS, salt))
}

fn producer_id(index: usize) -> i64 {
    1_000 + i64::try_from(index).expect("few producers")
}

impl TxnSim {
    fn new(seed: u64) -> Self {
        let mut coordinator = new_coordinator(seed);
        coordinator.load_offsets([]);
        Self {
            rng: ChaCha8Rng::seed_from_u64(seed),
            now_ms: 1_000_000,
            coordinator,
            producers: vec![SimProducer::default(); PRODUCERS],
            next_request_id: 0,
            outstanding: BTreeMap::new(),
            persist_queue: VecDeque::new(),
            log: Vec::new(),
            model: LogModel::default(),
            next_offset: 0,
            markers: BTreeMap::new(),
            restarts: 0,
        }
    }

    fn meta(&mut self, version: i16, sent: Sent) -> RequestMeta {
        self.next_request_id += 1;
        self.outstanding.insert(self.next_request_id, sent);
        RequestMeta {
            request_id: self.next_request_id,
            version,
            client_id: "txn-sim".into(),
            client_host: "/10.0.0.2".into(),
        }
    }

    fn offsets(&mut self) -> Vec<(i32, i64)> {
        let count = self.rng.gen_range(1..=2);
        (0..count)
            .map(|_| {
                self.next_offset += 1;
                (self.rng.gen_range(0..PARTITIONS), self.next_offset)
            })
            .collect()
    }

    fn run(&mut self) {
        for _ in 0..STEPS {
            self.now_ms += self.rng.gen_range(0..100);
            match self.rng.gen_range(0..100) {
                0..=34 => self.producer_acts(),
                35..=44 => self.send_plain(),
                45..=59 => self.send_fetch(),
                60..=89 => self.complete_persist(),
                90..=91 => self.restart(),
                _ => {}
            }
            self.drain();
            self.check();
        }
        while !self.persist_queue.is_empty() {
            self.complete_persist();
            self.drain();
        }
        assert!(
            self.outstanding.is_empty(),
            "unanswered: {:?}",
            self.outstanding
        );
        assert!(
            self.markers.len() == 2,
            "both marker kinds: {:?}",
            self.markers
        );
    }

    fn producer_acts(&mut self) {
        let index = self.rng.gen_range(0..PRODUCERS);
        let producer = self.producers[index].clone();
        if producer.waiting {
            return;
        }
        if producer.in_txn && (producer.must_abort || self.rng.gen_bool(0.5)) {
            let marker = if producer.must_abort || self.rng.gen_bool(0.4) {
                MarkerType::Abort
            } else {
                MarkerType::Commit
            };
            self.end_txn(index, marker);
            return;
        }
        let version = self.rng.gen_range(0..=4);
        let offsets = self.offsets();
        let meta = self.meta(version, Sent::Txn(index));
        let mut request = TxnOffsetCommitRequest::default();
        request.transactional_id = TransactionalId(s("tx"));
        request.group_id = GroupId(s(GROUP));
        request.producer_id = ProducerId(producer_id(index));
        request.producer_epoch = producer.epoch;
        request.generation_id = -1;
        for (partition, offset) in offsets {
            let mut topic = TxnOffsetCommitRequestTopic::default();
            topic.name = TopicName(s(TOPIC));
            let mut entry = TxnOffsetCommitRequestPartition::default();
            entry.partition_index = partition;
            entry.committed_offset = offset;
            topic.partitions.push(entry);
            request.topics.push(topic);
        }
        let state = &mut self.producers[index];
        state.in_txn = true;
        state.waiting = true;
        self.coordinator
            .handle_txn_offset_commit(self.now_ms, meta, request, |_, _| true);
    }

    /// The transaction coordinator's marker: appended to the offsets log, then (unless the broker
    /// crashes first) reported to the group coordinator. TV2 bumps the epoch at every end.
    fn end_txn(&mut self, index: usize, marker: MarkerType) {
        let state = &mut self.producers[index];
        state.epoch += 1;
        state.in_txn = false;
        state.must_abort = false;
        let epoch = state.epoch;
        let id = producer_id(index);
        let batch = EndTxnMarker {
            producer_id: id,
            producer_epoch: epoch,
            coordinator_epoch: 0,
            marker_type: marker,
        }
        .encode_batch(self.now_ms)
        .expect("marker");
        self.log.extend(batch);
        self.model.end(id, marker);
        *self
            .markers
            .entry(marker == MarkerType::Commit)
            .or_default() += 1;
        if self.rng.gen_bool(0.05) {
            self.restart();
            return;
        }
        self.coordinator
            .complete_transaction(UNPARTITIONED, id, epoch, marker);
    }

    fn send_plain(&mut self) {
        let offsets = self.offsets();
        let meta = self.meta(2, Sent::Plain);
        let mut request = OffsetCommitRequest::default();
        request.group_id = GroupId(s(GROUP));
        request.generation_id_or_member_epoch = -1;
        for (partition, offset) in offsets {
            let mut topic = OffsetCommitRequestTopic::default();
            topic.name = TopicName(s(TOPIC));
            let mut entry = OffsetCommitRequestPartition::default();
            entry.partition_index = partition;
            entry.committed_offset = offset;
            topic.partitions.push(entry);
            request.topics.push(topic);
        }
        self.coordinator
            .handle_offset_commit(self.now_ms, meta, request, |_, _| true);
    }

    fn send_fetch(&mut self) {
        let stable = self.rng.gen_bool(0.5);
        let meta = self.meta(7, Sent::Fetch { stable });
        let mut request = OffsetFetchRequest::default();
        request.group_id = GroupId(s(GROUP));
        request.require_stable = stable;
        let mut topic = OffsetFetchRequestTopic::default();
        topic.name = TopicName(s(TOPIC));
        topic.partition_indexes = (0..PARTITIONS).collect();
        request.topics = Some(vec![topic]);
        self.coordinator.handle_offset_fetch(meta, request);
    }

    fn append(&mut self, write: &Write) {
        let entries: Vec<OffsetLogEntry> = write
            .commits
            .iter()
            .map(|(key, value)| OffsetLogEntry::Commit(key.clone(), value.clone()))
            .collect();
        let batches = match write.producer {
            Some(producer) => encode_txn_batches(&entries, producer, self.now_ms),
            None => encode_batches(&entries, self.now_ms),
        };
        for batch in batches.expect("encode") {
            self.log.extend(batch);
        }
        self.model.append(write);
    }

    /// The driver finishes the oldest write: durable, or (now and then) failed.
    fn complete_persist(&mut self) {
        let Some((request_id, write)) = self.persist_queue.pop_front() else {
            return;
        };
        let result = if self.rng.gen_bool(0.9) {
            self.append(&write);
            Ok(())
        } else {
            Err(PersistError::Unavailable)
        };
        self.coordinator.offsets_persisted(request_id, result);
    }

    /// A crash: writes in flight made it to the log or not, connections close, producers in a
    /// transaction are aborted by their coordinator, and the coordinator replays the log bytes.
    fn restart(&mut self) {
        self.restarts += 1;
        let pending: Vec<_> = self.persist_queue.drain(..).collect();
        for (_, write) in pending {
            if self.rng.gen_bool(0.5) {
                self.append(&write);
            }
        }
        self.outstanding.clear();
        self.coordinator = new_coordinator(self.rng.gen());
        let mut items = Vec::new();
        let consumed =
            decode_replayed_batches(&self.log, &mut |item| items.push(item)).expect("replay");
        assert_eq!(consumed, self.log.len());
        self.coordinator.load_offsets(items);
        self.check();
        for index in 0..PRODUCERS {
            self.producers[index].waiting = false;
            if self.producers[index].in_txn {
                self.end_txn(index, MarkerType::Abort);
            }
        }
    }

    fn drain(&mut self) {
        while let Some(output) = self.coordinator.poll_output() {
            match output {
                Output::PersistConsumerRecords { .. } => {
                    panic!(
                        "this simulation sends no ConsumerGroupHeartbeat (see `sim/consumer.rs`)"
                    )
                }
                Output::PersistOffsets {
                    request_id,
                    commits,
                } => {
                    let write = Write {
                        producer: None,
                        commits,
                    };
                    self.persist_queue.push_back((request_id, write));
                }
                Output::PersistTxnOffsets {
                    request_id,
                    producer,
                    commits,
                } => {
                    let write = Write {
                        producer: Some(producer),
                        commits,
                    };
                    self.persist_queue.push_back((request_id, write));
                }
                Output::PersistOffsetDeletes { .. } => panic!("no deletion is sent here"),
                Output::Reply {
                    request_id,
                    response,
                    ..
                } => {
                    let sent = self
                        .outstanding
                        .remove(&request_id)
                        .unwrap_or_else(|| panic!("reply to {request_id}: unknown or twice"));
                    self.on_reply(sent, &response);
                }
            }
        }
    }

    fn on_reply(&mut self, sent: Sent, response: &Response) {
        match (sent, response) {
            (Sent::Txn(index), Response::TxnOffsetCommit(r)) => {
                let state = &mut self.producers[index];
                state.waiting = false;
                let failed = r
                    .topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .any(|p| p.error_code != 0);
                state.must_abort |= failed;
            }
            (Sent::Plain, Response::OffsetCommit(_)) => {}
            (Sent::Fetch { stable }, Response::OffsetFetch(r)) => self.check_fetch(stable, r),
            (sent, response) => panic!("{sent:?} answered with {response:?}"),
        }
    }

    /// Partitions with a transactional commit pending: durable in the model's log, or still
    /// being written.
    fn unstable_partitions(&self) -> BTreeSet<i32> {
        let durable = self.model.pending.values().flat_map(|p| p.keys().copied());
        let writing = self
            .persist_queue
            .iter()
            .filter(|(_, write)| write.producer.is_some())
            .flat_map(|(_, write)| write.commits.iter().map(|(key, _)| key.partition));
        durable.chain(writing).collect()
    }

    fn check_fetch(&self, stable: bool, response: &kafka_protocol::messages::OffsetFetchResponse) {
        assert_eq!(response.error_code, 0);
        let visible = self.model.visible_offsets();
        let unstable = self.unstable_partitions();
        for partition in &response.topics[0].partitions {
            let index = partition.partition_index;
            if stable && unstable.contains(&index) {
                assert_eq!(
                    partition.error_code,
                    ErrorCode::UNSTABLE_OFFSET_COMMIT.code(),
                    "partition {index} has a pending transactional commit"
                );
                continue;
            }
            assert_eq!(partition.error_code, 0, "partition {index}");
            let expected = visible.get(&index).copied().unwrap_or(-1);
            assert_eq!(partition.committed_offset, expected, "partition {index}");
        }
    }

    fn check(&self) {
        let shown: BTreeMap<i32, i64> = self
            .coordinator
            .committed_offsets()
            .into_iter()
            .map(|((_, _, partition), offset)| (partition, offset))
            .collect();
        assert_eq!(shown, self.model.visible_offsets(), "visible offsets");
        for offset in shown.values() {
            assert!(
                !self.model.aborted.contains(offset),
                "aborted offset {offset} visible"
            );
        }
        for partition in 0..PARTITIONS {
            let durable = self
                .model
                .pending
                .values()
                .any(|pending| pending.contains_key(&partition));
            if durable {
                assert!(
                    self.coordinator
                        .has_pending_txn_offset(GROUP, TOPIC, partition),
                    "partition {partition}: the log holds a pending commit"
                );
            }
        }
    }
}

fn run_seed(seed: u64) {
    let result = std::panic::catch_unwind(|| {
        let mut sim = TxnSim::new(seed);
        sim.run();
        if std::env::var_os("SKIFF_SIM_STATS").is_some() {
            eprintln!(
                "txn seed {seed}: restarts {} markers {:?} records {} visible {:?}",
                sim.restarts,
                sim.markers,
                sim.model.records,
                sim.model.visible_offsets()
            );
        }
    });
    if let Err(panic) = result {
        eprintln!("transactional offsets simulation failed: SKIFF_SEED={seed}");
        std::panic::resume_unwind(panic);
    }
}

#[test]
fn seeded_transactional_offsets_keep_their_invariants() {
    if let Some(seed) = std::env::var("SKIFF_SEED")
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
    {
        run_seed(seed);
        return;
    }
    SEEDS.for_each(run_seed);
}
