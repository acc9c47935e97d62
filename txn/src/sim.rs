//! A seeded simulation of the coordinator: many producer instances over a few transactional ids
//! (a new instance of an id fences the old one), transaction versions 1 and 2, a driver that
//! acknowledges records late, fails some, and writes markers late, leadership of the state
//! partitions moving (records in flight land or not; the new leader replays the log through the
//! real codec), transactions timing out — all under a virtual clock, in one thread.
//!
//! Checked after every step:
//! - every request is answered at most once, and by the end exactly once;
//! - no two producer instances are ever handed the same (producer id, epoch);
//! - a fenced instance never gets an end accepted: an accepted EndTxn comes from the instance
//!   that last got the id from InitProducerId;
//! - per producer id, the markers' epochs never go down (a zombie's commit after the abort that
//!   fenced it would carry a lower epoch);
//! - at the end, with the driver healthy, every PrepareCommit/PrepareAbort reaches its Complete.
//!
//! A failure prints `SKIFF_SEED=<seed>`; `SKIFF_SEED=<seed> cargo test -p skiff-txn sim::`
//! replays only that seed.
//!
//! Must never: read a clock or sleep.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use skiff_protocol::error_code::ErrorCode;
use skiff_protocol::records::txn::MarkerType;

use super::log::{decode_batches, encode_batch};
use super::*;

const SEEDS: std::ops::RangeInclusive<u64> = 1..=16;
const STEPS: usize = 3_000;
const IDS: [&str; 4] = ["a", "b", "c", "d"];
const STATE_PARTITIONS: i32 = 3;

#[derive(Debug, Clone)]
struct Instance {
    id: &'static str,
    tv: i16,
    producer: Option<(i64, i16)>,
    busy: bool,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Init,
    Add,
    End(bool),
}

struct Sim {
    rng: ChaCha8Rng,
    now: i64,
    coordinator: Coordinator,
    epochs: BTreeMap<i32, i32>,
    /// The durable log of each state partition, as encoded batches.
    logs: BTreeMap<i32, Vec<u8>>,
    held: VecDeque<(PersistId, i32, TxnLogRecord)>,
    markers: VecDeque<(String, i64, i16, i32)>,
    instances: Vec<Instance>,
    newest: BTreeMap<&'static str, usize>,
    outstanding: BTreeMap<RequestId, (usize, Kind)>,
    answered: BTreeSet<RequestId>,
    next_request: RequestId,
    granted: BTreeMap<(i64, i16), usize>,
    marker_epochs: BTreeMap<i64, (i16, MarkerType)>,
    next_block: i64,
    ids_wanted: bool,
    healthy: bool,
    commits: usize,
}

impl Sim {
    fn new(seed: u64) -> Self {
        let config = TxnConfig {
            state_log_partitions: STATE_PARTITIONS,
            abort_timed_out_interval_ms: 1_000,
            remove_expired_interval_ms: 5_000,
            id_expiration_ms: 50_000,
            ..TxnConfig::default()
        };
        let mut sim = Self {
            rng: ChaCha8Rng::seed_from_u64(seed),
            now: 0,
            coordinator: Coordinator::new(config),
            epochs: BTreeMap::new(),
            logs: BTreeMap::new(),
            held: VecDeque::new(),
            markers: VecDeque::new(),
            instances: Vec::new(),
            newest: BTreeMap::new(),
            outstanding: BTreeMap::new(),
            answered: BTreeSet::new(),
            next_request: 0,
            granted: BTreeMap::new(),
            marker_epochs: BTreeMap::new(),
            next_block: 0,
            ids_wanted: false,
            healthy: false,
            commits: 0,
        };
        for partition in 0..STATE_PARTITIONS {
            sim.move_leadership(partition);
        }
        sim
    }

    fn move_leadership(&mut self, partition: i32) {
        // Records in flight for the partition land or not, as an append racing a leader move.
        let (ours, others): (Vec<_>, Vec<_>) =
            self.held.drain(..).partition(|(_, p, _)| *p == partition);
        self.held = others.into();
        for (_, _, record) in ours {
            if self.rng.gen_bool(0.5) {
                self.append(partition, record);
            }
        }
        self.coordinator.unload_partition(partition);
        let epoch = self.epochs.entry(partition).or_insert(0);
        *epoch += 1;
        let epoch = *epoch;
        self.coordinator.partition_led(partition, epoch);
        self.drain();
        let mut records = Vec::new();
        let log = self.logs.get(&partition).cloned().unwrap_or_default();
        decode_batches(&log, &mut |record| records.push(record)).expect("the log decodes");
        self.coordinator
            .load_partition(self.now, partition, epoch, records);
        self.drain();
    }

    fn append(&mut self, partition: i32, record: TxnLogRecord) {
        let batch = encode_batch(&[record], 1, self.now).expect("encode");
        self.logs.entry(partition).or_default().extend(batch);
    }

    fn drain(&mut self) {
        while let Some(output) = self.coordinator.poll_output() {
            match output {
                Output::Reply {
                    request_id,
                    response,
                    ..
                } => self.on_reply(request_id, response),
                Output::Persist {
                    persist_id,
                    partition,
                    record,
                    coordinator_epoch,
                    ..
                } => {
                    assert_eq!(Some(&coordinator_epoch), self.epochs.get(&partition));
                    self.held.push_back((persist_id, partition, record));
                }
                Output::SendMarkers {
                    transactional_id,
                    producer_id,
                    producer_epoch,
                    marker,
                    coordinator_epoch,
                    ..
                } => {
                    // A fence bumps the epoch, so a zombie's commit would carry a lower epoch
                    // than the abort that fenced it.
                    if let Some((epoch, _)) = self.marker_epochs.get(&producer_id) {
                        assert!(producer_epoch >= *epoch, "marker epoch went down");
                    }
                    self.marker_epochs
                        .insert(producer_id, (producer_epoch, marker));
                    self.markers.push_back((
                        transactional_id,
                        producer_id,
                        producer_epoch,
                        coordinator_epoch,
                    ));
                }
                Output::NeedProducerIds => self.ids_wanted = true,
            }
        }
    }

    fn grant(&mut self, producer: (i64, i16), instance: usize) {
        if let Some(owner) = self.granted.insert(producer, instance) {
            assert_eq!(owner, instance, "{producer:?} handed to two instances");
        }
        self.instances[instance].producer = Some(producer);
    }

    fn on_reply(&mut self, request_id: RequestId, response: Response) {
        assert!(
            self.answered.insert(request_id),
            "request {request_id} answered twice"
        );
        let (instance, kind) = self
            .outstanding
            .remove(&request_id)
            .expect("a request of ours");
        self.instances[instance].busy = false;
        match (kind, response) {
            (
                Kind::Init,
                Response::InitProducerId {
                    error: ErrorCode::NONE,
                    producer_id,
                    producer_epoch,
                },
            ) => {
                // The instance last handed the id's epoch is the only one that may end.
                self.newest.insert(self.instances[instance].id, instance);
                self.grant((producer_id, producer_epoch), instance);
            }
            (
                Kind::End(commit),
                Response::EndTxn {
                    error: ErrorCode::NONE,
                    producer_id,
                    producer_epoch,
                },
            ) => {
                let id = self.instances[instance].id;
                if self.newest.get(id) != Some(&instance) {
                    // Kafka answers an end whose epoch is one below the current one, after the
                    // transaction completed, as a retry of that end (transaction version 2):
                    // nothing is prepared for the fenced instance and it is handed nothing new.
                    let state = self.coordinator.metadata(id).map(|meta| meta.state);
                    assert!(
                        matches!(
                            state,
                            Some(TxnState::CompleteCommit | TxnState::CompleteAbort)
                        ),
                        "a fenced instance's end was accepted ({state:?})"
                    );
                    return;
                }
                self.commits += usize::from(commit);
                if self.instances[instance].tv >= 2 {
                    self.grant((producer_id, producer_epoch), instance);
                }
            }
            _ => {}
        }
    }

    fn request(&mut self, instance: usize, kind: Kind) {
        self.next_request += 1;
        let meta = RequestMeta {
            request_id: self.next_request,
            version: 0,
        };
        self.outstanding.insert(meta.request_id, (instance, kind));
        self.instances[instance].busy = true;
        let Instance {
            id, tv, producer, ..
        } = self.instances[instance].clone();
        let (producer_id, producer_epoch) = producer.unwrap_or((-1, -1));
        match kind {
            Kind::Init => self.coordinator.handle_init_producer_id(
                self.now,
                meta,
                InitProducerId {
                    transactional_id: Some(id.into()),
                    timeout_ms: 20_000,
                    producer_id,
                    producer_epoch,
                },
            ),
            Kind::Add => {
                let partition = self.rng.gen_range(0..4);
                self.coordinator.handle_add_partitions(
                    self.now,
                    meta,
                    AddPartitions {
                        transactional_id: id.into(),
                        producer_id,
                        producer_epoch,
                        partitions: vec![TopicPartition::new("t", partition)],
                        client_tv: tv,
                    },
                )
            }
            Kind::End(commit) => self.coordinator.handle_end_txn(
                self.now,
                meta,
                EndTxn {
                    transactional_id: id.into(),
                    producer_id,
                    producer_epoch,
                    commit,
                    client_tv: tv,
                },
            ),
        }
        self.drain();
    }

    fn client_step(&mut self) {
        if self.instances.is_empty() || self.rng.gen_bool(0.05) {
            let id = IDS[self.rng.gen_range(0..IDS.len())];
            let tv = self.rng.gen_range(1..=2);
            self.instances.push(Instance {
                id,
                tv,
                producer: None,
                busy: false,
            });
            let instance = self.instances.len() - 1;
            return self.request(instance, Kind::Init);
        }
        let instance = self.rng.gen_range(0..self.instances.len());
        if self.instances[instance].busy {
            return;
        }
        let kind = match (self.instances[instance].producer, self.rng.gen_range(0..10)) {
            (None, _) => Kind::Init,
            (Some(_), 0) => Kind::Init,
            (Some(_), 1..=5) => Kind::Add,
            (Some(_), roll) => Kind::End(roll < 8),
        };
        self.request(instance, kind);
    }

    fn driver_step(&mut self) {
        match self.rng.gen_range(0..10) {
            0..=4 => {
                if let Some((persist_id, partition, record)) = self.held.pop_front() {
                    let fail = !self.healthy && self.rng.gen_bool(0.1);
                    if fail {
                        self.coordinator.persisted(
                            self.now,
                            persist_id,
                            Err(PersistError::Unavailable),
                        );
                    } else {
                        self.append(partition, record);
                        self.coordinator.persisted(self.now, persist_id, Ok(()));
                    }
                }
            }
            5..=7 => {
                // Markers answered late, in any order (a lost ack is one answered much later).
                if !self.markers.is_empty() {
                    let index = self.rng.gen_range(0..self.markers.len());
                    if let Some((id, producer_id, epoch, coordinator_epoch)) =
                        self.markers.remove(index)
                    {
                        self.coordinator.markers_written(
                            self.now,
                            &id,
                            producer_id,
                            epoch,
                            coordinator_epoch,
                        );
                    }
                }
            }
            8 => {
                if self.ids_wanted {
                    self.ids_wanted = false;
                    let start = self.next_block;
                    self.next_block += 3;
                    self.coordinator
                        .producer_ids_granted(self.now, Some((start, start + 3)));
                }
            }
            _ => {
                if !self.healthy && self.rng.gen_bool(0.05) {
                    let partition = self.rng.gen_range(0..STATE_PARTITIONS);
                    self.move_leadership(partition);
                }
            }
        }
        self.drain();
    }

    fn step(&mut self) {
        self.now += self.rng.gen_range(0..300);
        self.coordinator.tick(self.now);
        self.drain();
        if self.rng.gen_bool(0.4) {
            self.client_step();
        } else {
            self.driver_step();
        }
    }

    /// The driver becomes healthy and does everything asked until nothing is left.
    fn settle(&mut self) {
        self.healthy = true;
        for _ in 0..100_000 {
            if self.held.is_empty() && self.markers.is_empty() && !self.ids_wanted {
                break;
            }
            self.driver_step();
        }
        assert!(
            self.outstanding.is_empty(),
            "unanswered: {:?}",
            self.outstanding
        );
        for id in IDS {
            if let Some(meta) = self.coordinator.metadata(id) {
                assert!(!meta.state.is_prepare(), "{id} stuck in {:?}", meta.state);
            }
        }
    }
}

#[test]
fn simulated_producers_keep_the_invariants() {
    let seeds: Vec<u64> = match std::env::var("SKIFF_SEED") {
        Ok(seed) => vec![seed.parse().expect("SKIFF_SEED is a number")],
        Err(_) => SEEDS.collect(),
    };
    let mut commits = 0;
    for seed in seeds {
        let result = std::panic::catch_unwind(|| {
            let mut sim = Sim::new(seed);
            for _ in 0..STEPS {
                sim.step();
            }
            sim.settle();
            sim.commits
        });
        match result {
            Ok(count) => commits += count,
            Err(panic) => {
                eprintln!("SKIFF_SEED={seed}");
                std::panic::resume_unwind(panic);
            }
        }
    }
    assert!(commits > 0, "the simulation committed nothing");
}
