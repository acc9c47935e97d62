//! Deterministic simulation of membership and the controller (issue 15): brokers join, die, come
//! back, pause past their session and resume, create and delete topics, and campaign for
//! controller, over the pure metadata store (`skiff_meta::MetaCore`) with a fake clock. Each
//! broker's image lags behind the store by a random amount (it polls its watch when it runs, and
//! not every time), keep-alives take time to arrive and to be answered, and a controller may sit
//! on a plan across a pause before it submits it: the stale views a real cluster has.
//!
//! Invariants, checked at every step:
//! - **one leader per epoch**: per partition (by topic id), leader epochs only grow, and one
//!   epoch always names the same leader;
//! - **one writer**: at no instant do two brokers both believe they lead a partition *and* pass
//!   their session fence (`SessionFence::may_lead`), which is what lets them append, except
//!   during a handover from a live leader (a reassignment moving the leadership into its
//!   target): the old leader, still registered under its session, may not have seen the new
//!   epoch yet, as in Kafka (its acks=all writes cannot complete: its followers fetch at the new
//!   epoch; its acks=1 writes are truncated later). A leader whose session ended never passes;
//! - **controller fence**: no Txn from a controller whose epoch is no longer the controller key's
//!   is ever applied (checked against the store's own key at the time of the write);
//! - after the faults stop: one controller, every creation, deletion and partition reassignment
//!   finished, every partition of every ready topic led by a live broker, the topic records'
//!   replicas equal to the partition states', and every bundle move (the controller starts
//!   random ones to ISR members, as a shedder would) finished or aborted: none is left half
//!   done, whatever controller changes and pauses fell in between.
//!
//! Partition reassignments are requested (and cancelled) by brokers on their own stale images,
//! and their new replicas join the ISR at random moments (the leader's expansion, by
//! compare-and-set), so the controller's reassignment steps run under the same faults.
//!
//! A failing seed prints itself: `SKIFF_SEED=<seed> cargo test -p skiff-cluster --test
//! controller_sim` replays it; `SKIFF_CLUSTER_SEEDS=<n>` runs more seeds (the soak).

// Test code: a failed unwrap, expect or index is the report. The workspace's lint wall is for
// library code; clippy.toml exempts #[test] functions but not the helpers beside them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

use std::collections::{BTreeMap, BTreeSet};

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use skiff_cluster::bundles::{self, BundleSettings};
use skiff_cluster::controller::{self, initial_partition_state, PlanLimits, WriteReason};
use skiff_cluster::membership::{self, Campaign, Registration};
use skiff_cluster::records::{
    BrokerRegistration, BrokerState, BundleState, Endpoint, TopicRecord, TopicState, Writer,
    NO_LEADER,
};
use skiff_cluster::topics::{self, CreationProgress, TopicChange};
use skiff_cluster::{election, reassign};
use skiff_cluster::{ClusterImage, Key, Layout, SessionFence};
use skiff_meta::{EventKind, GetRequest, KeyRange, LeaseId, MetaCore, WatchId};
use skiff_placement::shed::{BundleMove, MoveReason};
use skiff_placement::{BundleId, NodeId};

const SESSION_TTL_SECS: i64 = 3;
const SESSION_TTL_MS: u64 = SESSION_TTL_SECS as u64 * 1000;
const STEPS_WITH_FAULTS: usize = 1_500;
const STEPS_TO_SETTLE: usize = 600;
const SEEDS_DEFAULT: u64 = 120;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Running,
    Paused { until_ms: u64 },
    Dead { restart_ms: u64 },
}

struct Broker {
    id: NodeId,
    directory_id: String,
    phase: Phase,
    lease: Option<LeaseId>,
    fence: SessionFence,
    image: ClusterImage,
    watch: Option<WatchId>,
    broker_epoch: Option<i64>,
    controller_epoch: Option<i64>,
    next_keep_alive_ms: u64,
    /// Keep-alives on their way to the store: (arrives at, sent at).
    keep_alives_out: Vec<(u64, u64)>,
    /// Answers on their way back: (arrives at, sent at, lease still alive).
    keep_alives_back: Vec<(u64, u64, bool)>,
    /// Planned controller writes not yet submitted (a pause may fall in between).
    planned: Vec<controller::ControllerWrite>,
    /// The store revision the image must reach before the controller plans again.
    replan_after_revision: i64,
    creation: Option<TopicChange>,
}

#[derive(Default, Debug)]
struct Coverage {
    elections: u64,
    leaderless: u64,
    creations_finished_by_controller: u64,
    deletions: u64,
    stale_controller_writes_refused: u64,
    controller_changes: u64,
    stale_own_registrations_replaced: u64,
    bundle_moves_started: u64,
    bundle_moves_finished: u64,
    bundle_leaders_moved: u64,
    reassignments_requested: u64,
    reassignments_done: u64,
    live_handovers: u64,
}

struct Sim {
    seed: u64,
    rng: ChaCha8Rng,
    now_ms: u64,
    core: MetaCore,
    layout: Layout,
    brokers: Vec<Broker>,
    checker: WatchId,
    /// Per (topic id, partition): epoch → leader, every epoch ever written.
    epochs: BTreeMap<(String, i32), BTreeMap<i32, NodeId>>,
    topic_ids: BTreeMap<String, String>,
    next_topic: u32,
    coverage: Coverage,
}

impl Broker {
    fn new(id: NodeId, layout: &Layout) -> Self {
        Self {
            id,
            directory_id: format!("dir-{id}"),
            phase: Phase::Running,
            lease: None,
            fence: SessionFence::new(SESSION_TTL_MS),
            image: ClusterImage::new(layout.clone()),
            watch: None,
            broker_epoch: None,
            controller_epoch: None,
            next_keep_alive_ms: 0,
            keep_alives_out: Vec::new(),
            keep_alives_back: Vec::new(),
            planned: Vec::new(),
            replan_after_revision: 0,
            creation: None,
        }
    }

    fn registration(&self) -> BrokerRegistration {
        BrokerRegistration {
            node_id: self.id,
            directory_id: self.directory_id.clone(),
            incarnation: format!("{}", self.lease.unwrap_or(0)),
            rack: None,
            listeners: vec![Endpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092,
                security_protocol: "PLAINTEXT".into(),
            }],
            state: BrokerState::Running,
        }
    }

    /// A process restart: nothing but the data directory survives.
    fn restart(&mut self, core: &mut MetaCore, layout: &Layout) {
        if let Some(watch) = self.watch.take() {
            core.watch_cancel(watch);
        }
        *self = Broker {
            directory_id: self.directory_id.clone(),
            ..Broker::new(self.id, layout)
        };
    }

    fn lose_session(&mut self) {
        self.fence.on_session_lost();
        self.lease = None;
        self.broker_epoch = None;
        self.controller_epoch = None;
        self.planned.clear();
    }

    /// Whether this broker would accept a write for the partition right now: the topic id and
    /// the leader epoch it would write at.
    fn would_append(&self, topic: &str, partition: i32, now_ms: u64) -> Option<(String, i32)> {
        if matches!(self.phase, Phase::Dead { .. }) {
            return None;
        }
        let topic_record = self.image.ready_topic(topic)?;
        let state = self.image.partition(topic, partition)?;
        (state.value.leader == self.id && self.fence.may_lead(now_ms, self.image.revision())).then(
            || {
                (
                    topic_record.value.topic_id.clone(),
                    state.value.leader_epoch,
                )
            },
        )
    }
}

impl Sim {
    fn new(seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let layout = Layout::new("sim").unwrap();
        let mut core = MetaCore::new();
        let checker = core.watch(KeyRange::prefix(layout.root()), 0).unwrap();
        let count = rng.gen_range(2..=5);
        let brokers = (0..count).map(|id| Broker::new(id, &layout)).collect();
        Self {
            seed,
            rng,
            now_ms: 1_000,
            core,
            layout,
            brokers,
            checker,
            epochs: BTreeMap::new(),
            topic_ids: BTreeMap::new(),
            next_topic: 0,
            coverage: Coverage::default(),
        }
    }

    fn fail(&self, what: &str) -> ! {
        panic!(
            "seed {} at {} ms: {what}\nreplay: SKIFF_SEED={} cargo test -p skiff-cluster --test controller_sim",
            self.seed, self.now_ms, self.seed
        );
    }

    fn run(&mut self) {
        for _ in 0..STEPS_WITH_FAULTS {
            self.step(true);
        }
        for broker in 0..self.brokers.len() {
            if let Phase::Dead { .. } | Phase::Paused { .. } = self.brokers[broker].phase {
                self.brokers[broker].phase = Phase::Paused { until_ms: 0 };
            }
        }
        for _ in 0..STEPS_TO_SETTLE {
            self.step(false);
        }
        self.check_settled();
    }

    fn step(&mut self, faults: bool) {
        self.now_ms += self.rng.gen_range(10..200);
        self.core.expire_leases(self.now_ms);
        self.deliver_keep_alives();
        if faults {
            self.inject_fault();
        }
        let mut order: Vec<usize> = (0..self.brokers.len()).collect();
        order.shuffle(&mut self.rng);
        for index in order {
            self.wake(index);
            if self.brokers[index].phase == Phase::Running && (!faults || self.rng.gen_bool(0.7)) {
                self.act(index, faults);
            }
        }
        self.join_isrs();
        self.core.take_changes();
        self.check();
    }

    fn wake(&mut self, index: usize) {
        let now = self.now_ms;
        match self.brokers[index].phase {
            Phase::Paused { until_ms } if until_ms <= now => {
                self.brokers[index].phase = Phase::Running;
            }
            Phase::Dead { restart_ms } if restart_ms <= now => {
                let layout = self.layout.clone();
                self.brokers[index].restart(&mut self.core, &layout);
            }
            _ => {}
        }
    }

    fn deliver_keep_alives(&mut self) {
        let now = self.now_ms;
        for broker in &mut self.brokers {
            let (arrived, waiting): (Vec<_>, Vec<_>) = broker
                .keep_alives_out
                .iter()
                .partition(|(at, _)| *at <= now);
            broker.keep_alives_out = waiting;
            for (_, sent) in arrived {
                // A dead process's keep-alive in flight still reaches the store (it was sent).
                let alive = broker
                    .lease
                    .is_some_and(|lease| self.core.lease_keep_alive(lease, now).is_ok());
                let back = now + self.rng.gen_range(0..SESSION_TTL_MS / 6);
                broker.keep_alives_back.push((back, sent, alive));
            }
        }
    }

    fn inject_fault(&mut self) {
        let roll = self.rng.gen_range(0..1000);
        let index = self.rng.gen_range(0..self.brokers.len());
        let now = self.now_ms;
        match roll {
            0..=5 => {
                // kill -9: the lease stays until it expires.
                let restart_ms = now + self.rng.gen_range(0..3 * SESSION_TTL_MS);
                self.brokers[index].phase = Phase::Dead { restart_ms };
            }
            6..=11 => {
                // SIGSTOP, often past the session.
                let until_ms = now + self.rng.gen_range(0..5 * SESSION_TTL_MS / 2);
                if self.brokers[index].phase == Phase::Running {
                    self.brokers[index].phase = Phase::Paused { until_ms };
                }
            }
            12..=30 => self.start_creation(index),
            31..=37 => self.request_deletion(index),
            46..=60 => self.request_reassignment(index),
            38..=45 => {
                // Kill an author in the middle of a creation: the controller must finish it.
                let authors: Vec<usize> = (0..self.brokers.len())
                    .filter(|&b| self.brokers[b].creation.is_some())
                    .collect();
                if let Some(&author) = authors.choose(&mut self.rng) {
                    let restart_ms = now + self.rng.gen_range(0..3 * SESSION_TTL_MS);
                    self.brokers[author].phase = Phase::Dead { restart_ms };
                }
            }
            _ => {}
        }
    }

    fn start_creation(&mut self, index: usize) {
        let broker = &self.brokers[index];
        let (Phase::Running, Some(epoch), None) =
            (broker.phase, broker.broker_epoch, &broker.creation)
        else {
            return;
        };
        let running: Vec<NodeId> = broker
            .image
            .brokers()
            .keys()
            .copied()
            .filter(|id| broker.image.is_running(*id))
            .collect();
        if running.is_empty() {
            return;
        }
        let topic = format!("t{}", self.next_topic % 6);
        let id = self.next_topic;
        self.next_topic += 1;
        let partitions = self.rng.gen_range(1..=7);
        let replication = self.rng.gen_range(1..=running.len().min(3));
        let replicas: Vec<Vec<NodeId>> = (0..partitions)
            .map(|_| {
                let mut chosen = running.clone();
                chosen.shuffle(&mut self.rng);
                chosen.truncate(replication);
                chosen
            })
            .collect();
        let broker = &self.brokers[index];
        let states = replicas
            .iter()
            .map(|r| initial_partition_state(&broker.image, r, Writer::Creator))
            .collect();
        let record = TopicRecord {
            topic_id: format!("id{id}"),
            state: TopicState::Ready,
            replicas,
            configs: BTreeMap::new(),
            author: broker.id,
            author_epoch: epoch,
        };
        let per_txn = self.rng.gen_range(1..=3);
        let creation = TopicChange::new(&self.layout, &topic, record, states, per_txn);
        self.brokers[index].creation = Some(creation);
    }

    fn request_deletion(&mut self, index: usize) {
        let broker = &self.brokers[index];
        if broker.phase != Phase::Running || !broker.fence.is_registered() {
            return;
        }
        let ready: Vec<String> = broker
            .image
            .topics()
            .iter()
            .filter(|(_, t)| t.value.state == TopicState::Ready)
            .map(|(name, _)| name.clone())
            .collect();
        let Some(topic) = ready.choose(&mut self.rng) else {
            return;
        };
        let txn = topics::request_deletion(&self.layout, topic, &broker.image.topics()[topic]);
        self.core.txn(&txn).unwrap();
    }

    /// A broker handles AlterPartitionReassignments on its own image: a random partition of a
    /// ready topic to a random set of the brokers it sees, or (one time in five) a cancellation.
    fn request_reassignment(&mut self, index: usize) {
        let broker = &self.brokers[index];
        let (Phase::Running, Some(broker_epoch)) = (broker.phase, broker.broker_epoch) else {
            return;
        };
        let ready: Vec<(String, usize)> = broker
            .image
            .topics()
            .iter()
            .filter(|(_, t)| t.value.state == TopicState::Ready)
            .map(|(name, t)| (name.clone(), t.value.replicas.len()))
            .collect();
        let Some((topic, partitions)) = ready.choose(&mut self.rng).cloned() else {
            return;
        };
        let partition = self.rng.gen_range(0..partitions.max(1)) as i32;
        let mut brokers: Vec<NodeId> = broker.image.brokers().keys().copied().collect();
        brokers.shuffle(&mut self.rng);
        brokers.truncate(self.rng.gen_range(1..=3));
        let replicas = (!self.rng.gen_bool(0.2)).then_some(brokers);
        let fence = election::requester_fence(&self.layout, broker.id, broker_epoch);
        let plan = reassign::plan_alter(
            &broker.image,
            &[((topic, partition), replicas)],
            fence,
            self.now_ms,
            PlanLimits::default(),
        );
        for write in plan.writes {
            if self.core.txn(&write.txn).unwrap().succeeded {
                self.coverage.reassignments_requested += 1;
            }
        }
    }

    /// The leaders' ISR expansion, as far as reassignments need it: now and then the leader of
    /// a partition being reassigned adds a running replica to its ISR, on its own image, by a
    /// compare-and-set on the state as it read it.
    fn join_isrs(&mut self) {
        let mut txns = Vec::new();
        for broker in &self.brokers {
            if broker.phase != Phase::Running {
                continue;
            }
            let image = &broker.image;
            for (topic, partition) in image.reassignments().keys() {
                let Some(state) = image.partition(topic, *partition) else {
                    continue;
                };
                if state.value.leader != broker.id || !self.rng.gen_bool(0.3) {
                    continue;
                }
                let Some(joining) = state
                    .value
                    .replicas
                    .iter()
                    .copied()
                    .find(|id| !state.value.isr.contains(id) && image.is_running(*id))
                else {
                    continue;
                };
                let mut next = state.value.clone();
                next.isr.push(joining);
                next.writer = Writer::Leader;
                let key = self.layout.key(&Key::Partition(topic.clone(), *partition));
                txns.push(
                    skiff_meta::Txn::new()
                        .when(vec![skiff_meta::Compare::mod_revision(
                            key.clone(),
                            skiff_meta::CompareOp::Equal,
                            state.mod_revision,
                        )])
                        .and_then(vec![skiff_meta::TxnOp::put(
                            key,
                            serde_json::to_vec(&next).unwrap(),
                        )]),
                );
            }
        }
        for txn in txns {
            self.core.txn(&txn).unwrap();
        }
    }

    /// One broker process runs: answers arrive, it keeps its session, follows the store, and does
    /// its controller and creation work.
    fn act(&mut self, index: usize, faults: bool) {
        let now = self.now_ms;
        self.receive_keep_alive_answers(index);
        if self.brokers[index].lease.is_none() {
            self.register(index);
        }
        let broker = &mut self.brokers[index];
        if broker.lease.is_some() && now >= broker.next_keep_alive_ms {
            let arrives = now + self.rng.gen_range(0..SESSION_TTL_MS / 6);
            broker.keep_alives_out.push((arrives, now));
            broker.next_keep_alive_ms = now + SESSION_TTL_MS / 3;
        }
        if !faults || self.rng.gen_bool(0.7) {
            self.follow_store(index);
        }
        self.campaign(index);
        self.control(index, faults);
        self.create(index);
    }

    fn receive_keep_alive_answers(&mut self, index: usize) {
        let now = self.now_ms;
        let broker = &mut self.brokers[index];
        let (arrived, waiting): (Vec<_>, Vec<_>) = broker
            .keep_alives_back
            .iter()
            .partition(|(at, _, _)| *at <= now);
        broker.keep_alives_back = waiting;
        for (_, sent, alive) in arrived {
            if broker.lease.is_none() {
                continue;
            }
            if alive {
                broker.fence.on_keep_alive_acknowledged(sent);
            } else {
                broker.lose_session();
            }
        }
    }

    fn register(&mut self, index: usize) {
        let now = self.now_ms;
        let lease = self.core.lease_grant(SESSION_TTL_SECS, now).unwrap();
        let broker = &mut self.brokers[index];
        broker.lease = Some(lease.id);
        broker.fence.on_lease_granted(now, lease.ttl_secs);
        broker.next_keep_alive_ms = now + SESSION_TTL_MS / 3;
        broker.keep_alives_out.clear();
        broker.keep_alives_back.clear();
        let registration = broker.registration();
        let response = self
            .core
            .txn(&membership::register(&self.layout, &registration, lease.id))
            .unwrap();
        match membership::registration_outcome(&registration, &response) {
            Ok(Registration::Registered { broker_epoch }) => {
                broker.broker_epoch = Some(broker_epoch);
                broker.fence.on_registered(broker_epoch);
            }
            Ok(Registration::StaleOwnRegistration { lease: old }) => {
                // The previous process of this data directory: revoke its lease, register next
                // time.
                self.coverage.stale_own_registrations_replaced += 1;
                self.core.lease_revoke(old).unwrap();
                self.core.lease_revoke(lease.id).unwrap();
                self.brokers[index].lose_session();
            }
            Ok(Registration::Retry) => {
                self.core.lease_revoke(lease.id).unwrap();
                self.brokers[index].lose_session();
            }
            Err(error) => self.fail(&format!("registration refused: {error}")),
        }
    }

    fn follow_store(&mut self, index: usize) {
        let root = self.layout.root().to_owned();
        let broker = &mut self.brokers[index];
        loop {
            let Some(watch) = broker.watch else {
                let snapshot = self.core.get(&GetRequest::prefix(root.clone())).unwrap();
                broker.image.reload(&snapshot);
                let watch = self
                    .core
                    .watch(KeyRange::prefix(root.clone()), snapshot.revision + 1)
                    .unwrap();
                broker.watch = Some(watch);
                continue;
            };
            match self.core.watch_poll(watch) {
                Ok(Some(batch)) => {
                    broker.image.apply(&batch);
                }
                Ok(None) => break,
                Err(skiff_meta::Error::Compacted { .. }) => {
                    self.core.watch_cancel(watch);
                    broker.watch = None;
                }
                Err(error) => panic!("watch: {error}"),
            }
        }
    }

    fn campaign(&mut self, index: usize) {
        let broker = &self.brokers[index];
        let (Some(epoch), Some(lease), None) =
            (broker.broker_epoch, broker.lease, broker.controller_epoch)
        else {
            return;
        };
        if broker.image.controller().is_some() || broker.image.revision() < epoch {
            return;
        }
        let txn = membership::campaign(&self.layout, broker.id, epoch, lease);
        match self.core.txn(&txn) {
            Ok(response) => match membership::campaign_outcome(&response).unwrap() {
                Campaign::Won { controller_epoch } => {
                    self.coverage.controller_changes += 1;
                    self.brokers[index].controller_epoch = Some(controller_epoch);
                }
                Campaign::Lost { .. } => {}
            },
            // Our lease expired before we noticed: the session is gone.
            Err(skiff_meta::Error::LeaseNotFound { .. }) => self.brokers[index].lose_session(),
            Err(error) => panic!("campaign: {error}"),
        }
    }

    fn control(&mut self, index: usize, faults: bool) {
        let Some(epoch) = self.brokers[index].controller_epoch else {
            return;
        };
        let broker = &mut self.brokers[index];
        if let Some((_, current)) = broker.image.controller() {
            if current != epoch && broker.image.revision() >= epoch {
                broker.controller_epoch = None; // someone else's key: step down
                broker.planned.clear();
                return;
            }
        }
        if broker.planned.is_empty() && broker.image.revision() >= broker.replan_after_revision {
            let limits = PlanLimits {
                partitions_per_txn: self.rng.gen_range(1..=controller::PARTITIONS_PER_TXN_MAX),
                ..PlanLimits::default()
            };
            broker.planned = controller::plan(&broker.image, epoch, limits);
            if broker.planned.is_empty() {
                broker.planned = bundles::plan(&broker.image, epoch, self.now_ms);
            }
            if broker.planned.is_empty() && faults && self.rng.gen_bool(0.05) {
                broker.planned =
                    random_bundle_move(&broker.image, epoch, self.now_ms, &mut self.rng);
            }
        }
        // Now and then the controller stops between planning and writing (a GC pause): the plan
        // may go stale, and must then be refused.
        if faults && self.rng.gen_bool(0.15) {
            return;
        }
        let writes = std::mem::take(&mut self.brokers[index].planned);
        let controller_key = self.layout.key(&Key::Controller);
        for write in writes {
            let current = self
                .core
                .get(&GetRequest::key(controller_key.clone()))
                .unwrap()
                .kvs
                .first()
                .map(|kv| kv.create_revision);
            let response = self.core.txn(&write.txn).unwrap();
            let broker = &mut self.brokers[index];
            broker.replan_after_revision = broker.replan_after_revision.max(response.revision);
            if current != Some(epoch) {
                if response.succeeded {
                    self.fail(&format!(
                        "a write of stale controller epoch {epoch} was applied (controller key at {current:?}): {:?}",
                        write.reason
                    ));
                }
                self.coverage.stale_controller_writes_refused += 1;
                broker.controller_epoch = None;
                broker.planned.clear();
                return;
            }
            if response.succeeded {
                match write.reason {
                    WriteReason::ElectLeaders
                    | WriteReason::MoveLeaders
                    | WriteReason::UncleanElection
                    | WriteReason::PreferredElection => {
                        self.coverage.elections += write.partitions.len() as u64
                    }
                    WriteReason::FinishCreation => {
                        self.coverage.creations_finished_by_controller += 1
                    }
                    WriteReason::DeleteTopic => self.coverage.deletions += 1,
                    WriteReason::BeginBundleMove => self.coverage.bundle_moves_started += 1,
                    WriteReason::FinishBundleMove => self.coverage.bundle_moves_finished += 1,
                    WriteReason::MoveBundleLeaders => {
                        self.coverage.elections += write.partitions.len() as u64;
                        self.coverage.bundle_leaders_moved += write.partitions.len() as u64;
                    }
                    WriteReason::ShrinkIsr
                    | WriteReason::MarkReady
                    | WriteReason::CreateBundles
                    | WriteReason::DeleteBundles
                    | WriteReason::ReassignForBundle
                    | WriteReason::AbortBundleMove
                    | WriteReason::SplitBundle
                    | WriteReason::Reassign
                    | WriteReason::AlterReassignments => {}
                }
            }
        }
    }

    fn create(&mut self, index: usize) {
        let broker = &mut self.brokers[index];
        let Some(creation) = broker.creation.as_mut() else {
            return;
        };
        if broker.broker_epoch.is_none() {
            broker.creation = None; // the session ended: the controller finishes it
            return;
        }
        let Some(txn) = creation.next_txn() else {
            broker.creation = None;
            return;
        };
        let response = self.core.txn(&txn).unwrap();
        match creation.on_response(&response) {
            CreationProgress::Continue => {}
            CreationProgress::Done
            | CreationProgress::AlreadyExists
            | CreationProgress::Interrupted => broker.creation = None,
        }
    }

    fn check(&mut self) {
        // Epochs as written, from the store's own event stream.
        while let Some(batch) = self.core.watch_poll(self.checker).unwrap() {
            for event in &batch.events {
                let Some(key) = self.layout.parse(&event.kv.key) else {
                    continue;
                };
                match (key, event.kind) {
                    (Key::Topic(topic), EventKind::Put) => {
                        let record: TopicRecord = serde_json::from_slice(&event.kv.value).unwrap();
                        self.topic_ids.insert(topic, record.topic_id);
                    }
                    (Key::Partition(topic, partition), EventKind::Put) => {
                        let state: skiff_cluster::records::PartitionState =
                            serde_json::from_slice(&event.kv.value).unwrap();
                        let Some(topic_id) = self.topic_ids.get(&topic).cloned() else {
                            self.fail(&format!(
                                "partition {topic}/{partition} written before its topic"
                            ));
                        };
                        if state.leader == NO_LEADER {
                            self.coverage.leaderless += 1;
                        }
                        let history = self.epochs.entry((topic_id, partition)).or_default();
                        if let Some((&last, _)) = history.last_key_value() {
                            if state.leader_epoch < last {
                                let what = format!(
                                    "{topic}/{partition}: epoch went back from {last} to {}",
                                    state.leader_epoch
                                );
                                self.fail(&what);
                            }
                        }
                        if let Some(&leader) = history.get(&state.leader_epoch) {
                            if leader != state.leader {
                                let what = format!(
                                    "{topic}/{partition}: epoch {} named leader {leader}, then {}",
                                    state.leader_epoch, state.leader
                                );
                                self.fail(&what);
                            }
                        }
                        history.insert(state.leader_epoch, state.leader);
                    }
                    (Key::Reassign(..), EventKind::Delete) => self.coverage.reassignments_done += 1,
                    _ => {}
                }
            }
        }
        // One writer per partition at this instant.
        let snapshot = self
            .core
            .get(&GetRequest::prefix(self.layout.root()))
            .unwrap();
        let mut partitions = BTreeSet::new();
        for kv in &snapshot.kvs {
            if let Some(Key::Partition(topic, partition)) = self.layout.parse(&kv.key) {
                partitions.insert((topic, partition));
            }
        }
        for broker in &self.brokers {
            for (topic, partition) in broker
                .image
                .all_partitions()
                .map(|(t, p, _)| (t.to_owned(), p))
            {
                partitions.insert((topic, partition));
            }
        }
        let registered: BTreeSet<NodeId> = snapshot
            .kvs
            .iter()
            .filter_map(|kv| match self.layout.parse(&kv.key) {
                Some(Key::Broker(id)) => Some(id),
                _ => None,
            })
            .collect();
        let mut latest_epochs: BTreeMap<(String, i32), i32> = BTreeMap::new();
        for kv in &snapshot.kvs {
            if let Some(Key::Partition(topic, partition)) = self.layout.parse(&kv.key) {
                if let Ok(state) =
                    serde_json::from_slice::<skiff_cluster::records::PartitionState>(&kv.value)
                {
                    latest_epochs.insert((topic, partition), state.leader_epoch);
                }
            }
        }
        let mut handovers = 0;
        for (topic, partition) in partitions {
            let writers: Vec<(NodeId, (String, i32))> = self
                .brokers
                .iter()
                .filter_map(|b| {
                    b.would_append(&topic, partition, self.now_ms)
                        .map(|id| (b.id, id))
                })
                .collect();
            let mut by_topic_id: BTreeMap<&str, Vec<NodeId>> = BTreeMap::new();
            let latest = latest_epochs.get(&(topic.clone(), partition)).copied();
            for (broker, (topic_id, epoch)) in &writers {
                // An old leader of a live handover: registered, behind the store's epoch.
                if writers.len() > 1
                    && registered.contains(broker)
                    && latest.is_some_and(|latest| *epoch < latest)
                {
                    handovers += 1;
                    continue;
                }
                by_topic_id.entry(topic_id).or_default().push(*broker);
            }
            for (topic_id, brokers) in by_topic_id {
                if brokers.len() > 1 {
                    self.fail(&format!(
                        "{topic}/{partition} (id {topic_id}): brokers {brokers:?} would all accept writes"
                    ));
                }
            }
        }
        self.coverage.live_handovers += handovers;
    }

    fn check_settled(&self) {
        let mut image = ClusterImage::new(self.layout.clone());
        image.reload(
            &self
                .core
                .get(&GetRequest::prefix(self.layout.root()))
                .unwrap(),
        );
        let live: Vec<NodeId> = image.brokers().keys().copied().collect();
        if live.len() != self.brokers.len() {
            self.fail(&format!("after settling, registered brokers are {live:?}"));
        }
        let Some((controller, epoch)) = image.controller() else {
            self.fail("after settling, there is no controller");
        };
        let believers: Vec<NodeId> = self
            .brokers
            .iter()
            .filter(|b| b.controller_epoch == Some(epoch))
            .map(|b| b.id)
            .collect();
        if believers != vec![controller] {
            self.fail(&format!(
                "controller {controller} (epoch {epoch}), but brokers {believers:?} act as it"
            ));
        }
        for (topic, record) in image.topics() {
            if record.value.state != TopicState::Ready {
                self.fail(&format!("topic {topic} is still {:?}", record.value.state));
            }
            let partitions = image.partitions(topic).map_or(0, |p| p.len());
            if partitions != record.value.replicas.len() {
                self.fail(&format!(
                    "topic {topic} has {partitions} of {} partitions",
                    record.value.replicas.len()
                ));
            }
        }
        for (bundle, record) in image.bundles() {
            if record.value.state != BundleState::Owned {
                self.fail(&format!(
                    "bundle {bundle} is still moving after settling: {:?}",
                    record.value
                ));
            }
        }
        if let Some(((topic, partition), record)) = image.reassignments().iter().next() {
            self.fail(&format!(
                "the reassignment of {topic}/{partition} never finished: {:?}",
                record.value
            ));
        }
        for (topic, partition, state) in image.all_partitions() {
            let in_record = image
                .topics()
                .get(topic)
                .and_then(|t| t.value.replicas.get(partition as usize));
            if in_record != Some(&state.value.replicas) {
                self.fail(&format!(
                    "{topic}/{partition}: the topic record says replicas {in_record:?}, the \
                     partition state {:?}",
                    state.value.replicas
                ));
            }
            if !image.is_live(state.value.leader) {
                self.fail(&format!(
                    "{topic}/{partition} has no live leader after settling: {:?}",
                    state.value
                ));
            }
        }
    }
}

/// A move a shedder might plan: a random owned bundle with partitions to a random other broker
/// that is in the ISR of all of them (the simulation has no replication, so a target outside an
/// ISR would never catch up), started as the controller starts shedding moves.
fn random_bundle_move(
    image: &ClusterImage,
    epoch: i64,
    now_ms: u64,
    rng: &mut ChaCha8Rng,
) -> Vec<controller::ControllerWrite> {
    let owned: Vec<(&BundleId, NodeId)> = image
        .bundles()
        .iter()
        .filter(|(_, r)| r.value.state == BundleState::Owned)
        .map(|(id, r)| (id, r.value.owner))
        .collect();
    let Some(&(bundle, owner)) = owned.choose(rng) else {
        return Vec::new();
    };
    let partitions = bundles::bundle_partitions(image, bundle);
    let targets: Vec<NodeId> = image
        .brokers()
        .keys()
        .copied()
        .filter(|id| *id != owner)
        .filter(|id| {
            !partitions.is_empty()
                && partitions.iter().all(|(t, p)| {
                    image
                        .partition(t, *p)
                        .is_some_and(|s| s.value.isr.contains(id))
                })
        })
        .collect();
    let Some(&to) = targets.choose(rng) else {
        return Vec::new();
    };
    let planned = BundleMove {
        bundle: bundle.clone(),
        from: owner,
        to,
        reason: MoveReason::Unowned,
    };
    let settings = BundleSettings {
        cooldown_ms: 0,
        moves_per_cycle_max: 1,
        capacity_bytes_per_second: 0.0,
    };
    bundles::begin_moves(image, epoch, &[planned], now_ms, &settings, |_| {
        "simulated".to_owned()
    })
    .0
}

fn seeds() -> Vec<u64> {
    if let Ok(seed) = std::env::var("SKIFF_SEED") {
        return vec![seed.parse().expect("SKIFF_SEED is a number")];
    }
    let count = std::env::var("SKIFF_CLUSTER_SEEDS")
        .ok()
        .map(|n| n.parse().expect("SKIFF_CLUSTER_SEEDS is a number"))
        .unwrap_or(SEEDS_DEFAULT);
    (0..count).collect()
}

#[test]
fn the_controller_keeps_one_leader_per_epoch_and_one_writer_per_partition() {
    let mut total = Coverage::default();
    for seed in seeds() {
        let mut sim = Sim::new(seed);
        sim.run();
        let c = &sim.coverage;
        total.elections += c.elections;
        total.leaderless += c.leaderless;
        total.creations_finished_by_controller += c.creations_finished_by_controller;
        total.deletions += c.deletions;
        total.stale_controller_writes_refused += c.stale_controller_writes_refused;
        total.controller_changes += c.controller_changes;
        total.stale_own_registrations_replaced += c.stale_own_registrations_replaced;
        total.bundle_moves_started += c.bundle_moves_started;
        total.bundle_moves_finished += c.bundle_moves_finished;
        total.bundle_leaders_moved += c.bundle_leaders_moved;
        total.reassignments_requested += c.reassignments_requested;
        total.reassignments_done += c.reassignments_done;
        total.live_handovers += c.live_handovers;
    }
    eprintln!("{total:?}");
    if std::env::var("SKIFF_SEED").is_err() {
        // The faults must have happened, or the invariants were checked on a quiet cluster.
        assert!(total.elections > 0, "{total:?}");
        assert!(total.leaderless > 0, "{total:?}");
        assert!(total.creations_finished_by_controller > 0, "{total:?}");
        assert!(total.deletions > 0, "{total:?}");
        assert!(total.stale_controller_writes_refused > 0, "{total:?}");
        assert!(total.controller_changes > 0, "{total:?}");
        assert!(total.stale_own_registrations_replaced > 0, "{total:?}");
        assert!(total.bundle_moves_finished > 0, "{total:?}");
        assert!(total.reassignments_done > 0, "{total:?}");
    }
}

#[test]
fn a_live_node_id_from_another_directory_is_refused() {
    let layout = Layout::new("dup").unwrap();
    let mut core = MetaCore::new();
    let first = Broker::new(7, &layout);
    let lease = core.lease_grant(SESSION_TTL_SECS, 0).unwrap();
    let ours = first.registration();
    let response = core
        .txn(&membership::register(&layout, &ours, lease.id))
        .unwrap();
    assert!(matches!(
        membership::registration_outcome(&ours, &response),
        Ok(Registration::Registered { .. })
    ));
    let mut impostor = first.registration();
    impostor.directory_id = "elsewhere".into();
    let other_lease = core.lease_grant(SESSION_TTL_SECS, 0).unwrap();
    let response = core
        .txn(&membership::register(&layout, &impostor, other_lease.id))
        .unwrap();
    let error = membership::registration_outcome(&impostor, &response).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("node.id 7 is already registered"),
        "{message}"
    );
    assert!(
        message.contains("dir-7") && message.contains("elsewhere"),
        "{message}"
    );
    // Once the first broker's session expires, the id is free again.
    core.expire_leases(SESSION_TTL_MS + 1);
    let later = core
        .lease_grant(SESSION_TTL_SECS, SESSION_TTL_MS + 1)
        .unwrap();
    let response = core
        .txn(&membership::register(&layout, &impostor, later.id))
        .unwrap();
    assert!(response.succeeded);
}
