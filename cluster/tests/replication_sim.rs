//! Seeded deterministic simulation of one partition replicated over 3–5 brokers with
//! `skiff_cluster::replica`: a fake clock and network (message loss between pairs), a store
//! modelled as one partition key with a `mod_revision` CAS, sessions with a TTL, a controller
//! electing from the live ISR (docs/design/cluster.md §3), producers with acks=all and acks=1, and
//! injected kills, pauses, partitions, store isolation, lost sessions and the E9 double failover.
//! I1–I5 (docs/design/cluster.md §6) are checked after every step, I3 after a final quiescence.
//!
//! A failing seed prints itself: `SKIFF_SEED=<seed> cargo test -p skiff-cluster --test
//! replication_sim` replays it; `SKIFF_REPLICATION_SEEDS=<n>` runs more seeds (the soak).

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

use std::collections::{BTreeMap, HashSet};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use skiff_cluster::records::{PartitionState, Writer, NO_LEADER};
use skiff_cluster::replica::{
    Acks, Action, Epoch, FetchAnswer, FetchResult, FetchedBatch, FollowerFetch, LocalLog, Offset,
    Replica, ReplicaConfig, RoleView,
};
// The logs' epoch caches follow storage's rules, the ones the broker's logs follow.
use skiff_storage::{EpochCache, EpochEndOffset};

const SEEDS_DEFAULT: u64 = 16;
const STEPS: usize = 3_000;
const QUIET_STEPS: usize = 1_500;
const STEP_MS: u64 = 20;
const SESSION_TTL_MS: u64 = 3_000;
const FETCH_TIMEOUT_MS: u64 = 1_000;
const PRODUCE_TIMEOUT_MS: u64 = 4_000;
const FETCH_BATCHES_MAX: usize = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Rec {
    offset: Offset,
    epoch: i32,
    producer: u32,
    seq: u32,
    payload: u64,
}

#[derive(Debug, Default, Clone)]
struct Log {
    recs: Vec<Rec>,
    epochs: EpochCache,
}

impl LocalLog for Log {
    fn log_end_offset(&self) -> Offset {
        self.recs.len() as Offset
    }
    fn log_start_offset(&self) -> Offset {
        0
    }
    fn latest_epoch(&self) -> Option<Epoch> {
        self.epochs.latest_epoch()
    }
    fn latest_epoch_start(&self) -> Option<Offset> {
        self.epochs.entries().last().map(|entry| entry.start_offset)
    }
    fn end_offset_for(&self, epoch: Epoch) -> Option<(Epoch, Offset)> {
        let answer = self.epochs.end_offset_for(epoch, self.log_end_offset());
        (answer != EpochEndOffset::UNDEFINED).then_some((answer.epoch, answer.end_offset))
    }
}

impl Log {
    fn append(&mut self, rec: Rec) {
        assert_eq!(rec.offset, self.log_end_offset());
        self.epochs.assign(rec.epoch, rec.offset);
        self.recs.push(rec);
    }
    fn truncate(&mut self, to: Offset) {
        self.recs.truncate(to as usize);
        self.epochs.truncate_from_end(to);
    }
}

struct Broker {
    id: i32,
    alive: bool,
    paused_until: u64,
    store_cut_until: u64,
    session_down_until: u64,
    registered_until: Option<u64>,
    replica: Replica,
    log: Log,
    /// The next store event its watch delivers.
    next: usize,
    fetch_pending: Option<(u64, i32, i32)>,
    /// (epoch, hw) of its current leadership, for I5.
    leader_hw: Option<(i32, Offset)>,
}

enum Msg {
    Fetch(FollowerFetch),
    Answer {
        sent_epoch: i32,
        result: FetchResult,
        recs: Vec<Rec>,
    },
}

struct Envelope {
    at: u64,
    from: i32,
    to: i32,
    msg: Msg,
}

struct Producer {
    id: u32,
    acks: Acks,
    seq: u32,
    leader_view: i32,
    in_flight: Option<(i32, u64)>,
    retry_at: u64,
}

struct Sim {
    seed: u64,
    rng: ChaCha8Rng,
    now: u64,
    config: ReplicaConfig,
    brokers: Vec<Broker>,
    state: PartitionState,
    revision: i64,
    history: Vec<(i64, PartitionState)>,
    net: Vec<Envelope>,
    cut: BTreeMap<(i32, i32), u64>,
    producers: Vec<Producer>,
    next_payload: u64,
    next_produce_id: u64,
    pending_produce: BTreeMap<u64, (usize, Rec)>,
    acked_all: Vec<Rec>,
    writers: BTreeMap<i32, i32>,
    consumed: BTreeMap<Offset, Rec>,
    restarts: Vec<(u64, usize)>,
    coverage: Coverage,
}

#[derive(Debug, Default, Clone, Copy)]
struct Coverage {
    elections: u64,
    acked_all: u64,
    acked_one: u64,
    truncations: u64,
    diverging: u64,
    shrinks: u64,
    expansions: u64,
    not_enough_replicas: u64,
    double_failovers: u64,
}

impl Sim {
    fn new(seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let n = rng.gen_range(3..=5);
        let config = ReplicaConfig {
            replica_lag_time_max_ms: 2_000,
            min_insync_replicas: 2,
            replica_fetch_backoff_ms: 100,
        };
        let replicas: Vec<i32> = (1..=n).collect();
        let state = PartitionState {
            leader: 1,
            leader_epoch: 0,
            isr: replicas.clone(),
            replicas: replicas.clone(),
            writer: Writer::Creator,
        };
        let brokers = replicas
            .iter()
            .map(|id| Broker {
                id: *id,
                alive: true,
                paused_until: 0,
                store_cut_until: 0,
                session_down_until: 0,
                registered_until: Some(SESSION_TTL_MS),
                replica: Replica::new(*id, config, 0),
                log: Log::default(),
                next: 0,
                fetch_pending: None,
                leader_hw: None,
            })
            .collect();
        let producers = (0..3)
            .map(|id| Producer {
                id,
                acks: if id == 2 { Acks::Leader } else { Acks::All },
                seq: 0,
                leader_view: 1,
                in_flight: None,
                retry_at: 0,
            })
            .collect();
        Self {
            seed,
            rng,
            now: 0,
            config,
            brokers,
            history: vec![(1, state.clone())],
            state,
            revision: 1,
            net: Vec::new(),
            cut: BTreeMap::new(),
            producers,
            next_payload: 0,
            next_produce_id: 0,
            pending_produce: BTreeMap::new(),
            acked_all: Vec::new(),
            writers: BTreeMap::new(),
            consumed: BTreeMap::new(),
            restarts: Vec::new(),
            coverage: Coverage::default(),
        }
    }

    fn fail(&self, what: String) -> ! {
        panic!(
            "seed {} at {} ms: {what}\nreplay: SKIFF_SEED={} cargo test -p skiff-cluster --test replication_sim",
            self.seed, self.now, self.seed
        );
    }

    fn idx(&self, id: i32) -> usize {
        (id - 1) as usize
    }

    fn runs(&self, b: usize) -> bool {
        self.brokers[b].alive && self.brokers[b].paused_until <= self.now
    }

    fn reaches_store(&self, b: usize) -> bool {
        self.runs(b)
            && self.brokers[b].store_cut_until <= self.now
            && self.brokers[b].session_down_until <= self.now
    }

    fn registered(&self, id: i32) -> bool {
        let b = &self.brokers[self.idx(id)];
        b.registered_until.is_some_and(|until| until > self.now)
    }

    fn linked(&self, a: i32, b: i32) -> bool {
        let key = (a.min(b), a.max(b));
        self.cut.get(&key).is_none_or(|until| *until <= self.now)
    }

    fn write_state(&mut self, state: PartitionState) {
        if state.leader_epoch < self.state.leader_epoch {
            self.fail(format!("I4: epoch went down {:?} -> {state:?}", self.state));
        }
        self.revision += 1;
        self.state = state;
        self.history.push((self.revision, self.state.clone()));
    }

    fn controller(&mut self) {
        let mut state = self.state.clone();
        let leader_live = state.leader != NO_LEADER && self.registered(state.leader);
        if !leader_live {
            let candidate = state
                .replicas
                .iter()
                .copied()
                .find(|id| state.isr.contains(id) && self.registered(*id));
            match candidate {
                Some(new_leader) => {
                    let old = state.leader;
                    state.leader = new_leader;
                    state.leader_epoch += 1;
                    if state.isr.len() > 1 {
                        state.isr.retain(|id| *id != old);
                    }
                    state.writer = Writer::Controller;
                    self.coverage.elections += 1;
                    self.write_state(state);
                }
                None if state.leader != NO_LEADER => {
                    state.leader = NO_LEADER;
                    state.leader_epoch += 1;
                    state.writer = Writer::Controller;
                    self.write_state(state);
                }
                None => {}
            }
            return;
        }
        let dead: Vec<i32> = state
            .isr
            .iter()
            .copied()
            .filter(|id| !self.registered(*id))
            .collect();
        if !dead.is_empty() {
            state.isr.retain(|id| !dead.contains(id));
            state.writer = Writer::Controller;
            self.write_state(state);
        }
    }

    fn apply(&mut self, b: usize, actions: Vec<Action>, fetched: &[Rec]) {
        for action in actions {
            match action {
                // As `Log::assign_epoch`: only an epoch above the latest.
                Action::AssignEpoch { epoch, start } => {
                    let epochs = &mut self.brokers[b].log.epochs;
                    if epochs.latest_epoch().is_none_or(|latest| latest < epoch) {
                        epochs.assign(epoch, start);
                    }
                }
                Action::AppendFetched { up_to } => {
                    for rec in fetched.iter().filter(|r| r.offset < up_to) {
                        if rec.offset >= self.brokers[b].log.log_end_offset() {
                            self.brokers[b].log.append(*rec);
                        }
                    }
                }
                Action::TruncateTo { offset } => {
                    self.coverage.truncations += 1;
                    self.brokers[b].log.truncate(offset);
                }
                Action::SendFetch { leader, fetch } => {
                    self.brokers[b].fetch_pending =
                        Some((self.now, leader, fetch.current_leader_epoch));
                    self.send(self.brokers[b].id, leader, Msg::Fetch(fetch));
                }
                Action::ProposeIsr {
                    expected_revision,
                    state,
                } => {
                    if self.reaches_store(b) && expected_revision == self.revision {
                        if state.isr.len() < self.state.isr.len() {
                            self.coverage.shrinks += 1;
                        } else {
                            self.coverage.expansions += 1;
                        }
                        self.write_state(state);
                    } else {
                        self.brokers[b].replica.on_isr_proposal_failed();
                    }
                }
                Action::ResetTo { offset } => {
                    panic!("no log start moves in this simulation, yet a reset to {offset}")
                }
                Action::HighWatermark(_) => {}
                Action::CompleteProduce { id, error } => self.complete(id, error),
            }
        }
    }

    fn complete(&mut self, id: u64, error: Option<skiff_protocol::error_code::ErrorCode>) {
        let Some((p, rec)) = self.pending_produce.remove(&id) else {
            return;
        };
        let producer = &mut self.producers[p];
        producer.in_flight = None;
        match error {
            None => {
                producer.seq += 1;
                self.coverage.acked_all += 1;
                self.acked_all.push(rec);
            }
            Some(_) => producer.retry_at = self.now + 100,
        }
    }

    fn send(&mut self, from: i32, to: i32, msg: Msg) {
        if !self.linked(from, to) || self.rng.gen_bool(0.02) {
            return;
        }
        let at = self.now + self.rng.gen_range(1..=60);
        self.net.push(Envelope { at, from, to, msg });
    }

    fn deliver(&mut self) {
        let mut i = 0;
        while i < self.net.len() {
            let e = &self.net[i];
            let to = self.idx(e.to);
            if e.at > self.now || (self.brokers[to].alive && !self.runs(to)) {
                i += 1;
                continue;
            }
            let e = self.net.swap_remove(i);
            if !self.brokers[to].alive || !self.linked(e.from, e.to) {
                continue;
            }
            match e.msg {
                Msg::Fetch(fetch) => {
                    let broker = &mut self.brokers[to];
                    let (answer, actions) =
                        broker
                            .replica
                            .on_follower_fetch(self.now, fetch, &broker.log);
                    self.apply(to, actions, &[]);
                    let broker = &self.brokers[to];
                    let (result, recs) = match answer {
                        FetchAnswer::Error(code) => (FetchResult::Error(code), vec![]),
                        FetchAnswer::Diverging {
                            epoch, end_offset, ..
                        } => {
                            self.coverage.diverging += 1;
                            (FetchResult::Diverging { epoch, end_offset }, vec![])
                        }
                        FetchAnswer::Records {
                            from,
                            to: end,
                            high_watermark,
                        } => {
                            let recs: Vec<Rec> = broker.log.recs[from as usize..end as usize]
                                .iter()
                                .take(FETCH_BATCHES_MAX)
                                .copied()
                                .collect();
                            let batches = recs
                                .iter()
                                .map(|r| FetchedBatch {
                                    base: r.offset,
                                    last: r.offset,
                                    epoch: r.epoch,
                                })
                                .collect();
                            (
                                FetchResult::Records {
                                    batches,
                                    high_watermark,
                                },
                                recs,
                            )
                        }
                    };
                    self.send(
                        e.to,
                        e.from,
                        Msg::Answer {
                            sent_epoch: fetch.current_leader_epoch,
                            result,
                            recs,
                        },
                    );
                }
                Msg::Answer {
                    sent_epoch,
                    result,
                    recs,
                } => {
                    let broker = &mut self.brokers[to];
                    if broker
                        .fetch_pending
                        .is_some_and(|(_, l, ep)| l == e.from && ep == sent_epoch)
                    {
                        broker.fetch_pending = None;
                    }
                    let actions = broker.replica.on_fetch_result(
                        self.now,
                        e.from,
                        sent_epoch,
                        &result,
                        &broker.log,
                    );
                    self.apply(to, actions, &recs);
                }
            }
        }
    }

    fn produce(&mut self) {
        for p in 0..self.producers.len() {
            if self.producers[p].in_flight.is_some() || self.producers[p].retry_at > self.now {
                continue;
            }
            if self.rng.gen_bool(0.3) {
                self.producers[p].leader_view = self.state.leader;
            }
            let target = self.producers[p].leader_view;
            if target == NO_LEADER || !self.rng.gen_bool(0.5) {
                continue;
            }
            let b = self.idx(target);
            if !self.runs(b) {
                self.producers[p].retry_at = self.now + 200;
                continue;
            }
            let (pid, seq, acks) = (
                self.producers[p].id,
                self.producers[p].seq,
                self.producers[p].acks,
            );
            let broker = &mut self.brokers[b];
            let epoch = match broker.replica.admit_produce(acks) {
                Ok(epoch) => epoch,
                Err(code) => {
                    if code == skiff_protocol::error_code::ErrorCode::NOT_ENOUGH_REPLICAS {
                        self.coverage.not_enough_replicas += 1;
                    }
                    self.producers[p].retry_at = self.now + 100;
                    continue;
                }
            };
            // The broker's idempotence: a retried (producer, seq) is answered with its offset.
            let rec = match broker
                .log
                .recs
                .iter()
                .find(|r| r.producer == pid && r.seq == seq)
            {
                Some(rec) => *rec,
                None => {
                    let rec = Rec {
                        offset: broker.log.log_end_offset(),
                        epoch,
                        producer: pid,
                        seq,
                        payload: self.next_payload,
                    };
                    self.next_payload += 1;
                    broker.log.append(rec);
                    let id = broker.id;
                    if let Some(writer) = self.writers.insert(epoch, id) {
                        if writer != id {
                            self.fail(format!("I4: epoch {epoch} written by {writer} and {id}"));
                        }
                    }
                    rec
                }
            };
            match acks {
                Acks::Leader => {
                    self.producers[p].seq += 1;
                    self.coverage.acked_one += 1;
                }
                Acks::All => {
                    let id = self.next_produce_id;
                    self.next_produce_id += 1;
                    self.pending_produce.insert(id, (p, rec));
                    self.producers[p].in_flight = Some((target, id));
                    let broker = &mut self.brokers[b];
                    let actions = broker.replica.await_replication(
                        self.now,
                        id,
                        rec.offset,
                        self.now + PRODUCE_TIMEOUT_MS,
                        &broker.log,
                    );
                    self.apply(b, actions, &[]);
                }
            }
        }
    }

    fn kill(&mut self, b: usize) {
        self.brokers[b].alive = false;
        self.brokers[b].fetch_pending = None;
        self.brokers[b].leader_hw = None;
        let dropped: Vec<u64> = self
            .pending_produce
            .iter()
            .filter(|(_, (p, _))| {
                self.producers[*p]
                    .in_flight
                    .is_some_and(|(t, _)| t == self.brokers[b].id)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in dropped {
            self.complete(
                id,
                Some(skiff_protocol::error_code::ErrorCode::REQUEST_TIMED_OUT),
            );
        }
    }

    fn restart(&mut self, b: usize) {
        let broker = &mut self.brokers[b];
        if broker.alive {
            return;
        }
        broker.alive = true;
        broker.paused_until = 0;
        let hw = broker
            .replica
            .high_watermark()
            .min(broker.log.log_end_offset());
        broker.replica = Replica::new(broker.id, self.config, hw);
        // A restart reads the current state (a GET), then watches.
        broker.next = self.history.len() - 1;
    }

    fn faults(&mut self) {
        let n = self.brokers.len();
        let roll: f64 = self.rng.gen();
        let b = self.rng.gen_range(0..n);
        if roll < 0.004 {
            self.kill(b);
            let at = self.now + self.rng.gen_range(500..8_000);
            self.restarts.push((at, b));
        } else if roll < 0.007 {
            self.brokers[b].paused_until = self.now + self.rng.gen_range(500..6_000);
        } else if roll < 0.011 {
            let other = self.rng.gen_range(0..n);
            if other != b {
                let (x, y) = (self.brokers[b].id, self.brokers[other].id);
                let until = self.now + self.rng.gen_range(500..8_000);
                self.cut.insert((x.min(y), x.max(y)), until);
            }
        } else if roll < 0.013 {
            self.brokers[b].store_cut_until = self.now + self.rng.gen_range(500..8_000);
        } else if roll < 0.015 {
            // Lost session: the registration goes at once, the process runs on.
            self.brokers[b].registered_until = None;
            self.brokers[b].session_down_until = self.now + self.rng.gen_range(200..3_000);
        } else if roll < 0.016 && self.state.leader != NO_LEADER {
            // E9: kill the leader and another ISR member; the other comes back first.
            let a = self.idx(self.state.leader);
            if let Some(other) = self
                .state
                .isr
                .iter()
                .map(|id| self.idx(*id))
                .find(|x| *x != a)
            {
                self.coverage.double_failovers += 1;
                self.kill(a);
                self.kill(other);
                let first = self.now + SESSION_TTL_MS + 500;
                self.restarts.push((first, other));
                self.restarts
                    .push((first + self.rng.gen_range(1_000..6_000), a));
            }
        }
    }

    fn step(&mut self, faults: bool) {
        self.now += STEP_MS;
        if faults {
            self.faults();
        }
        let due: Vec<usize> = self
            .restarts
            .iter()
            .filter(|(at, _)| *at <= self.now)
            .map(|(_, b)| *b)
            .collect();
        self.restarts.retain(|(at, _)| *at > self.now);
        for b in due {
            self.restart(b);
        }
        for b in 0..self.brokers.len() {
            if self.reaches_store(b) {
                // Keep-alive, or a new session after an expiry.
                self.brokers[b].registered_until = Some(self.now + SESSION_TTL_MS);
            }
        }
        if self.rng.gen_bool(0.5) {
            self.controller();
        }
        for b in 0..self.brokers.len() {
            if !self.reaches_store(b) || !self.rng.gen_bool(0.7) {
                continue;
            }
            // The watch delivers every event in order from `next`.
            while self.brokers[b].next < self.history.len() {
                let (revision, state) = self.history[self.brokers[b].next].clone();
                self.brokers[b].next += 1;
                let broker = &mut self.brokers[b];
                let actions =
                    broker
                        .replica
                        .on_partition_state(self.now, &state, revision, &broker.log);
                self.apply(b, actions, &[]);
            }
        }
        self.deliver();
        for b in 0..self.brokers.len() {
            if !self.runs(b) {
                continue;
            }
            if let Some((sent, leader, epoch)) = self.brokers[b].fetch_pending {
                if self.now >= sent + FETCH_TIMEOUT_MS {
                    self.brokers[b].fetch_pending = None;
                    let broker = &mut self.brokers[b];
                    let actions = broker.replica.on_fetch_result(
                        self.now,
                        leader,
                        epoch,
                        &FetchResult::Lost,
                        &broker.log,
                    );
                    self.apply(b, actions, &[]);
                }
            }
            let broker = &mut self.brokers[b];
            let actions = broker.replica.poll(self.now, &broker.log);
            self.apply(b, actions, &[]);
        }
        if faults {
            self.produce();
        }
        self.check();
    }

    fn check(&mut self) {
        // I4: epochs in each log only grow.
        for broker in &self.brokers {
            if broker.log.recs.windows(2).any(|w| w[0].epoch > w[1].epoch) {
                self.fail(format!("I4: broker {} has epochs out of order", broker.id));
            }
            // I2: no duplicate (producer, seq).
            let mut seen = HashSet::new();
            for rec in &broker.log.recs {
                if !seen.insert((rec.producer, rec.seq)) {
                    self.fail(format!("I2: broker {} holds {rec:?} twice", broker.id));
                }
            }
        }
        // I1: every acknowledged acks=all record is at its offset on every ISR member.
        for rec in &self.acked_all {
            for id in &self.state.isr {
                let log = &self.brokers[self.idx(*id)].log;
                if log.recs.get(rec.offset as usize) != Some(rec) {
                    self.fail(format!(
                        "I1: acked {rec:?} not at its offset on ISR member {id} (has {:?}); state {:?}",
                        log.recs.get(rec.offset as usize),
                        self.state
                    ));
                }
            }
        }
        // I5: a leader's HW never goes down; what a consumer reads below it never changes.
        for b in 0..self.brokers.len() {
            let broker = &self.brokers[b];
            if !broker.alive || broker.replica.role() != RoleView::Leader {
                self.brokers[b].leader_hw = None;
                continue;
            }
            let (epoch, hw) = (broker.replica.epoch(), broker.replica.high_watermark());
            if let Some((e, last)) = broker.leader_hw {
                if e == epoch && hw < last {
                    self.fail(format!("I5: leader {} HW {last} -> {hw}", broker.id));
                }
            }
            if hw > broker.log.log_end_offset() {
                self.fail(format!("leader {} HW {hw} above its LEO", broker.id));
            }
            for rec in &broker.log.recs[..hw as usize] {
                if let Some(before) = self.consumed.get(&rec.offset) {
                    if before != rec {
                        self.fail(format!(
                            "I5: offset {} read as {before:?}, now {rec:?} on {}",
                            rec.offset, broker.id
                        ));
                    }
                }
            }
            let recs: Vec<Rec> = broker.log.recs[..hw as usize].to_vec();
            for rec in recs {
                self.consumed.insert(rec.offset, rec);
            }
            self.brokers[b].leader_hw = Some((epoch, hw));
        }
    }

    fn run(&mut self) {
        for _ in 0..STEPS {
            self.step(true);
        }
        // Quiescence: heal everything, bring every broker back, stop producing.
        self.cut.clear();
        for b in 0..self.brokers.len() {
            self.brokers[b].paused_until = 0;
            self.brokers[b].store_cut_until = 0;
            self.brokers[b].session_down_until = 0;
            self.restart(b);
        }
        self.restarts.clear();
        for _ in 0..QUIET_STEPS {
            self.step(false);
        }
        // I3: identical logs and epoch caches, and I1 on every replica.
        let first = &self.brokers[0].log;
        for broker in &self.brokers[1..] {
            // Caches agree on every epoch that has records (a leader's own entry at its LEO has
            // none yet).
            let leo = first.log_end_offset();
            let with_records = |log: &Log| -> Vec<(i32, Offset)> {
                log.epochs
                    .entries()
                    .iter()
                    .map(|entry| (entry.epoch, entry.start_offset))
                    .filter(|(_, start)| *start < leo)
                    .collect()
            };
            if broker.log.recs != first.recs || with_records(&broker.log) != with_records(first) {
                self.fail(format!(
                    "I3: broker {} {:?} epoch {} pending {:?} (LEO {}, {:?}) differs from broker 1 {:?} {} {:?} (LEO {}, {:?}); state {:?}",
                    broker.id,
                    broker.replica.role(),
                    broker.replica.epoch(),
                    broker.fetch_pending,
                    broker.log.log_end_offset(),
                    broker.log.epochs.entries(),
                    self.brokers[0].replica.role(),
                    self.brokers[0].replica.epoch(),
                    self.brokers[0].fetch_pending,
                    first.log_end_offset(),
                    first.epochs.entries(),
                    self.state
                ));
            }
        }
        for rec in &self.acked_all {
            if first.recs.get(rec.offset as usize) != Some(rec) {
                self.fail(format!("I1: acked {rec:?} lost after quiescence"));
            }
        }
    }
}

fn seeds() -> Vec<u64> {
    if let Ok(seed) = std::env::var("SKIFF_SEED") {
        return vec![seed.parse().expect("SKIFF_SEED is a number")];
    }
    let count = std::env::var("SKIFF_REPLICATION_SEEDS")
        .ok()
        .map(|n| n.parse().expect("SKIFF_REPLICATION_SEEDS is a number"))
        .unwrap_or(SEEDS_DEFAULT);
    (0..count).collect()
}

#[test]
fn replication_keeps_acknowledged_records_and_converges() {
    let mut total = Coverage::default();
    for seed in seeds() {
        let mut sim = Sim::new(seed);
        sim.run();
        let c = sim.coverage;
        total.elections += c.elections;
        total.acked_all += c.acked_all;
        total.acked_one += c.acked_one;
        total.truncations += c.truncations;
        total.diverging += c.diverging;
        total.shrinks += c.shrinks;
        total.expansions += c.expansions;
        total.not_enough_replicas += c.not_enough_replicas;
        total.double_failovers += c.double_failovers;
    }
    eprintln!("{total:?}");
    if std::env::var("SKIFF_SEED").is_err() {
        assert!(
            total.elections > 0 && total.acked_all > 0 && total.truncations > 0,
            "{total:?}"
        );
        assert!(
            total.shrinks > 0 && total.expansions > 0 && total.double_failovers > 0,
            "{total:?}"
        );
    }
}
