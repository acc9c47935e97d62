//! A seeded simulation of the coordinator: many members joining (every JoinGroup version),
//! syncing with a range assignor, heartbeating, committing, fetching offsets, leaving, crashing
//! and coming back, a driver that persists commits late or fails them, and broker restarts that
//! replay the offsets log through its real codec — all under a virtual clock, in one thread.
//! Seeds cycle the initial rebalance delay through Kafka's default, off, and longer than the
//! rebalance timeout.
//!
//! Checked after every step:
//! - no reply lost or doubled: each request gets exactly one reply (requests outstanding when the
//!   broker restarts are dropped with their connection, as a real close would);
//! - one generation at a time: every successful JoinGroup of a generation names the same leader,
//!   and generations never go back within one broker run;
//! - a Stable group's assignments cover every partition exactly once;
//! - the first generation after the group leaves Empty is answered no sooner than the initial
//!   rebalance delay (or the rebalance timeout, if shorter) and no later than the rebalance
//!   timeout (plus the clock's last advance: deadlines are noticed when the clock passes them);
//! - committed offsets: the coordinator shows exactly the last acknowledged commit per partition,
//!   never moves backwards (across restarts too) unless an acknowledged OffsetDelete or
//!   DeleteGroups removed it, and after a restart equals the replay of what the driver made
//!   durable (commits and tombstones in their order);
//! - an admin now and then deletes the group's offsets (OffsetDelete) or the group (DeleteGroups):
//!   NON_EMPTY_GROUP and GROUP_SUBSCRIBED_TO_TOPIC only while the group has members,
//!   GROUP_ID_NOT_FOUND only for a group the coordinator does not hold.
//!
//! A failure prints `SKIFF_SEED=<seed>`; `SKIFF_SEED=<seed> cargo test -p skiff-group sim::`
//! replays only that seed; `SKIFF_SIM_STATS=1` (with `--nocapture`) prints what each seed
//! exercised (broker restarts, stable generations checked, generations, commits).
//!
//! Must never: read a clock or sleep.

mod consumer;
mod migration;
mod txn;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, GroupId, HeartbeatRequest, JoinGroupRequest,
    LeaveGroupRequest, OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest,
    SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::offsets_log::{decode_replayed_batches, encode_batch};
use super::*;

/// Seeds run by the normal test run (each a few thousand steps).
const SEEDS: std::ops::RangeInclusive<u64> = 1..=24;
/// Steps per seed.
const STEPS: usize = 2_000;
/// The virtual clock advances by less than this per step.
const STEP_MS_MAX: i64 = 1_500;
/// Members the simulation may run at once.
const MEMBERS: usize = 6;
const GROUP: &str = "sim-group";
const TOPICS: [(&str, i32); 2] = [("orders", 5), ("events", 3)];
const SESSION_TIMEOUT_MS: i32 = 10_000;
const REBALANCE_TIMEOUT_MS: i32 = 15_000;
/// JoinGroup versions members speak (legacy v0/v1 and the modern handshake v4+).
const JOIN_VERSIONS: [i16; 6] = [0, 1, 4, 5, 7, 9];

type Partition = (String, i32);

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

fn all_partitions() -> Vec<Partition> {
    TOPICS
        .iter()
        .flat_map(|(topic, count)| (0..*count).map(|p| (topic.to_string(), p)))
        .collect()
}

/// Kafka's range assignor: per topic, partitions split in order among members sorted by id, the
/// first `count % members` members taking one more.
fn range_assign(members: &[String]) -> BTreeMap<String, Vec<Partition>> {
    let mut sorted = members.to_vec();
    sorted.sort();
    let mut out: BTreeMap<String, Vec<Partition>> =
        sorted.iter().map(|m| (m.clone(), Vec::new())).collect();
    let member_count = i32::try_from(sorted.len()).expect("few members").max(1);
    for (topic, count) in TOPICS {
        let (each, extra) = (count / member_count, count % member_count);
        let mut next = 0;
        for (index, member) in sorted.iter().enumerate() {
            let index = i32::try_from(index).expect("few members");
            let take = each + i32::from(index < extra);
            let owned = out.get_mut(member).expect("member listed");
            owned.extend((next..next + take).map(|partition| (topic.to_string(), partition)));
            next += take;
        }
    }
    out
}

fn encode_assignment(partitions: &[Partition]) -> Bytes {
    let text: Vec<String> = partitions.iter().map(|(t, p)| format!("{t}:{p}")).collect();
    Bytes::from(text.join(","))
}

fn decode_assignment(bytes: &[u8]) -> Vec<Partition> {
    let text = std::str::from_utf8(bytes).expect("utf8 assignment");
    text.split(',')
        .filter(|item| !item.is_empty())
        .map(|item| {
            let (topic, partition) = item.split_once(':').expect("topic:partition");
            (topic.to_owned(), partition.parse().expect("partition"))
        })
        .collect()
}

/// Initial rebalance delays the seeds cycle through: Kafka's default, off, and one longer than
/// the members' rebalance timeout (so the timeout caps every wait).
const INITIAL_REBALANCE_DELAYS_MS: [i32; 3] = [
    GroupKeys::KAFKA_DEFAULTS.initial_rebalance_delay_ms,
    0,
    20_000,
];
const _: () = assert!(INITIAL_REBALANCE_DELAYS_MS[2] > REBALANCE_TIMEOUT_MS);

fn new_coordinator(salt: u64, initial_rebalance_delay_ms: i32) -> Coordinator {
    let mut config = GroupConfig::new(GroupKeys::KAFKA_DEFAULTS, salt);
    config.initial_rebalance_delay_ms = initial_rebalance_delay_ms;
    Coordinator::new(config)
}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    /// Not in the group (or told to rejoin); will send JoinGroup with `member_id`.
    Idle,
    /// JoinGroup answered for `generation`; will send SyncGroup (with the assignment if it leads).
    Joined {
        generation: i32,
        /// The members' ids if this member leads.
        members: Option<Vec<String>>,
    },
    /// SyncGroup answered: owns `assignment` in `generation`.
    Stable {
        generation: i32,
        assignment: Vec<Partition>,
    },
    /// Crashed: sends nothing until it restarts as a new member.
    Dead,
}

#[derive(Debug, Clone)]
struct SimMember {
    member_id: String,
    join_version: i16,
    phase: Phase,
    /// One request in flight per member, as per connection in Kafka.
    waiting: bool,
    last_heartbeat_ms: i64,
}

impl SimMember {
    fn fresh(join_version: i16, now_ms: i64) -> Self {
        Self {
            member_id: String::new(),
            join_version,
            phase: Phase::Idle,
            waiting: false,
            last_heartbeat_ms: now_ms,
        }
    }
}

/// What a request was, to interpret its reply.
#[derive(Debug, Clone)]
enum Sent {
    Join {
        member: usize,
    },
    Sync {
        member: usize,
        generation: i32,
    },
    Heartbeat {
        member: usize,
    },
    Commit {
        member: usize,
        offsets: Vec<(Partition, i64)>,
    },
    Leave {
        member: usize,
    },
    Fetch,
    Describe,
    /// OffsetDelete of every partition of the group.
    DeleteOffsets,
    /// DeleteGroups of the group.
    DeleteGroup,
}

/// A write handed to the driver.
#[derive(Debug, Clone)]
enum Write {
    Commits(Vec<(OffsetKey, OffsetValue)>),
    Tombstones(Vec<OffsetKey>),
}

struct Sim {
    rng: ChaCha8Rng,
    now_ms: i64,
    coordinator: Coordinator,
    /// The coordinator's initial rebalance delay (kept across broker restarts).
    initial_rebalance_delay_ms: i32,
    /// When a JoinGroup last took the group out of Empty, until its generation is answered.
    left_empty_at_ms: Option<i64>,
    /// How far the clock moved last (a deadline is noticed up to that late).
    last_advance_ms: i64,
    members: Vec<SimMember>,
    next_request_id: RequestId,
    outstanding: BTreeMap<RequestId, Sent>,
    /// PersistOffsets and PersistOffsetDeletes not yet completed, oldest first (the driver
    /// appends in order).
    persist_queue: VecDeque<(RequestId, Write)>,
    /// The keys each pending deletion tombstones, for its acknowledgement.
    tombstoned: BTreeMap<RequestId, Vec<Partition>>,
    /// Deletions acknowledged.
    deletions: usize,
    /// The offsets log: v2 batches as the driver wrote them.
    log: Vec<u8>,
    /// Latest durable offset per partition (what a replay of `log` must give).
    durable: BTreeMap<Partition, i64>,
    /// Consumption progress per partition: every commit names a larger offset than any before.
    progress: BTreeMap<Partition, i64>,
    /// Last acknowledged offset per partition.
    acked: BTreeMap<Partition, i64>,
    /// Highest committed offset the coordinator ever showed, per partition.
    high_water: BTreeMap<Partition, i64>,
    /// Leader of each generation seen in this broker run.
    leaders: BTreeMap<i32, String>,
    generation_max: i32,
    restarts: usize,
    stable_checks: usize,
}

impl Sim {
    fn new(seed: u64) -> Self {
        let delay_index = usize::try_from(seed % 3).expect("below 3");
        let initial_rebalance_delay_ms = INITIAL_REBALANCE_DELAYS_MS[delay_index];
        let mut coordinator = new_coordinator(seed, initial_rebalance_delay_ms);
        coordinator.load_offsets([]);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let now_ms = 1_000_000;
        let members = (0..MEMBERS)
            .map(|_| SimMember::fresh(JOIN_VERSIONS[rng.gen_range(0..JOIN_VERSIONS.len())], now_ms))
            .collect();
        Self {
            rng,
            now_ms,
            coordinator,
            initial_rebalance_delay_ms,
            left_empty_at_ms: None,
            last_advance_ms: 0,
            members,
            next_request_id: 0,
            outstanding: BTreeMap::new(),
            persist_queue: VecDeque::new(),
            tombstoned: BTreeMap::new(),
            deletions: 0,
            log: Vec::new(),
            durable: BTreeMap::new(),
            progress: BTreeMap::new(),
            acked: BTreeMap::new(),
            high_water: BTreeMap::new(),
            leaders: BTreeMap::new(),
            generation_max: 0,
            restarts: 0,
            stable_checks: 0,
        }
    }

    fn meta(&mut self, version: i16, sent: Sent) -> RequestMeta {
        self.next_request_id += 1;
        if let Sent::Join { member }
        | Sent::Sync { member, .. }
        | Sent::Heartbeat { member }
        | Sent::Commit { member, .. }
        | Sent::Leave { member } = sent
        {
            self.members[member].waiting = true;
        }
        self.outstanding.insert(self.next_request_id, sent);
        RequestMeta {
            request_id: self.next_request_id,
            version,
            client_id: "sim".into(),
            client_host: "/10.0.0.1".into(),
        }
    }

    fn run(&mut self) {
        for _ in 0..STEPS {
            self.step();
            self.drain();
            self.check();
        }
        // Quiesce: nobody acts, the driver finishes its writes, time passes every deadline.
        while !self.persist_queue.is_empty() {
            self.complete_persist(true);
            self.drain();
        }
        for _ in 0..10 {
            self.advance(i64::from(REBALANCE_TIMEOUT_MS));
            self.coordinator.tick(self.now_ms);
            self.drain();
            self.check();
        }
        assert!(
            self.outstanding.is_empty(),
            "requests never answered: {:?}",
            self.outstanding
        );
        assert!(self.stable_checks > 0, "the group never became stable");
        assert!(!self.acked.is_empty(), "no commit was ever acknowledged");
    }

    fn advance(&mut self, by_ms: i64) {
        self.now_ms += by_ms;
        self.last_advance_ms = by_ms;
    }

    fn step(&mut self) {
        let by_ms = self.rng.gen_range(0..STEP_MS_MAX);
        self.advance(by_ms);
        if self
            .coordinator
            .next_deadline_ms()
            .is_some_and(|deadline| deadline <= self.now_ms)
        {
            self.coordinator.tick(self.now_ms);
            self.drain();
            self.check();
        }
        match self.rng.gen_range(0..1000) {
            0..=2 => self.restart_broker(),
            3..=150 => {
                if !self.persist_queue.is_empty() {
                    let ok = self.rng.gen_range(0..20) != 0;
                    self.complete_persist(ok);
                }
            }
            151..=165 => self.fetch_offsets(),
            166..=168 => self.delete_offsets(),
            169..=170 => self.delete_group(),
            _ => {
                let member = self.rng.gen_range(0..MEMBERS);
                if !self.members[member].waiting {
                    self.act(member);
                }
            }
        }
    }

    fn act(&mut self, index: usize) {
        let roll = self.rng.gen_range(0..100);
        let member = self.members[index].clone();
        match member.phase {
            Phase::Dead => {
                if roll < 3 {
                    // The process restarts: a new member with a new id.
                    let version = JOIN_VERSIONS[self.rng.gen_range(0..JOIN_VERSIONS.len())];
                    self.members[index] = SimMember::fresh(version, self.now_ms);
                }
            }
            Phase::Idle => self.send_join(index),
            Phase::Joined {
                generation,
                members,
            } => {
                if roll < 2 {
                    self.members[index].phase = Phase::Dead;
                    return;
                }
                let assignments = members.map(|ids| range_assign(&ids)).unwrap_or_default();
                let sent = Sent::Sync {
                    member: index,
                    generation,
                };
                let meta = self.meta(member.join_version.min(5), sent);
                let mut request = SyncGroupRequest::default();
                request.group_id = GroupId(s(GROUP));
                request.generation_id = generation;
                request.member_id = s(&member.member_id);
                request.assignments = assignments
                    .iter()
                    .map(|(id, partitions)| {
                        let mut entry = SyncGroupRequestAssignment::default();
                        entry.member_id = s(id);
                        entry.assignment = encode_assignment(partitions);
                        entry
                    })
                    .collect();
                self.coordinator
                    .handle_sync_group(self.now_ms, meta, request);
            }
            Phase::Stable {
                generation,
                assignment,
            } => match roll {
                0..=1 => self.members[index].phase = Phase::Dead,
                2..=3 => {
                    let version = if roll == 2 { 0 } else { 3 };
                    let meta = self.meta(version, Sent::Leave { member: index });
                    let mut request = LeaveGroupRequest::default();
                    request.group_id = GroupId(s(GROUP));
                    if version >= 3 {
                        let mut identity = MemberIdentity::default();
                        identity.member_id = s(&member.member_id);
                        request.members.push(identity);
                    } else {
                        request.member_id = s(&member.member_id);
                    }
                    self.coordinator
                        .handle_leave_group(self.now_ms, meta, request);
                }
                4..=30 if !assignment.is_empty() => {
                    self.send_commit(index, generation, &assignment);
                }
                // One member in six is slow and often misses its heartbeat.
                _ if index == 0 && roll < 60 => {}
                _ => {
                    if self.now_ms - member.last_heartbeat_ms >= 3_000 {
                        self.members[index].last_heartbeat_ms = self.now_ms;
                        let meta = self.meta(0, Sent::Heartbeat { member: index });
                        let mut request = HeartbeatRequest::default();
                        request.group_id = GroupId(s(GROUP));
                        request.generation_id = generation;
                        request.member_id = s(&member.member_id);
                        self.coordinator
                            .handle_heartbeat(self.now_ms, meta, request);
                    }
                }
            },
        }
    }

    fn send_join(&mut self, index: usize) {
        let member = self.members[index].clone();
        let version = member.join_version;
        let meta = self.meta(version, Sent::Join { member: index });
        let mut request = JoinGroupRequest::default();
        request.group_id = GroupId(s(GROUP));
        request.session_timeout_ms = SESSION_TIMEOUT_MS;
        request.rebalance_timeout_ms = REBALANCE_TIMEOUT_MS;
        request.member_id = s(&member.member_id);
        request.protocol_type = s("consumer");
        let mut protocol = JoinGroupRequestProtocol::default();
        protocol.name = s("range");
        protocol.metadata = Bytes::from_static(b"orders,events");
        request.protocols = vec![protocol];
        let was_empty = self
            .coordinator
            .group_state(GROUP)
            .is_none_or(|state| state == GroupState::Empty);
        self.coordinator
            .handle_join_group(self.now_ms, meta, request);
        let left_empty = self
            .coordinator
            .group_state(GROUP)
            .is_some_and(|state| state != GroupState::Empty);
        if was_empty && left_empty {
            self.left_empty_at_ms = Some(self.now_ms);
        }
    }

    fn send_commit(&mut self, index: usize, generation: i32, assignment: &[Partition]) {
        let version = [0i16, 1, 2, 5, 8][self.rng.gen_range(0..5)];
        let member_id = self.members[index].member_id.clone();
        let mut request = OffsetCommitRequest::default();
        request.group_id = GroupId(s(GROUP));
        request.generation_id_or_member_epoch = generation;
        request.member_id = s(&member_id);
        let mut by_topic: BTreeMap<&str, OffsetCommitRequestTopic> = BTreeMap::new();
        let mut offsets = Vec::new();
        for (topic, partition) in assignment {
            let next = self
                .progress
                .entry((topic.clone(), *partition))
                .or_insert(0);
            *next += self.rng.gen_range(1..50);
            offsets.push(((topic.clone(), *partition), *next));
            let mut entry = OffsetCommitRequestPartition::default();
            entry.partition_index = *partition;
            entry.committed_offset = *next;
            entry.committed_metadata = Some(s(""));
            let topic_entry = by_topic.entry(topic.as_str()).or_insert_with(|| {
                let mut t = OffsetCommitRequestTopic::default();
                t.name = TopicName(s(topic));
                t
            });
            topic_entry.partitions.push(entry);
        }
        let meta = self.meta(
            version,
            Sent::Commit {
                member: index,
                offsets,
            },
        );
        request.topics = by_topic.into_values().collect();
        self.coordinator
            .handle_offset_commit(self.now_ms, meta, request, |_, _| true);
    }

    fn fetch_offsets(&mut self) {
        let version = self.rng.gen_range(1..=7);
        let meta = self.meta(version, Sent::Fetch);
        let mut request = OffsetFetchRequest::default();
        request.group_id = GroupId(s(GROUP));
        request.topics = Some(
            TOPICS
                .iter()
                .map(|(topic, count)| {
                    let mut entry = OffsetFetchRequestTopic::default();
                    entry.name = TopicName(s(topic));
                    entry.partition_indexes = (0..*count).collect();
                    entry
                })
                .collect(),
        );
        self.coordinator.handle_offset_fetch(meta, request);
    }

    /// An admin deletes the group's committed offsets of every partition.
    fn delete_offsets(&mut self) {
        let meta = self.meta(0, Sent::DeleteOffsets);
        let mut request = OffsetDeleteRequest::default();
        request.group_id = GroupId(s(GROUP));
        request.topics = TOPICS
            .iter()
            .map(|(topic, count)| {
                let mut entry = OffsetDeleteRequestTopic::default();
                entry.name = TopicName(s(topic));
                entry.partitions = (0..*count)
                    .map(|partition| {
                        OffsetDeleteRequestPartition::default().with_partition_index(partition)
                    })
                    .collect();
                entry
            })
            .collect();
        self.coordinator
            .handle_offset_delete(self.now_ms, meta, request, |_, _| None);
    }

    /// An admin deletes the group.
    fn delete_group(&mut self) {
        let version = self.rng.gen_range(0..=2);
        let meta = self.meta(version, Sent::DeleteGroup);
        let mut request = DeleteGroupsRequest::default();
        request.groups_names = vec![GroupId(s(GROUP))];
        self.coordinator.handle_delete_groups(meta, request);
    }

    /// The driver finishes the oldest pending write: durable (appended to the log) or failed.
    fn complete_persist(&mut self, ok: bool) {
        let Some((request_id, write)) = self.persist_queue.pop_front() else {
            return;
        };
        let result = if ok {
            self.append_to_log(&write);
            Ok(())
        } else {
            Err(PersistError::Unavailable)
        };
        match write {
            Write::Commits(_) => self.coordinator.offsets_persisted(request_id, result),
            Write::Tombstones(_) => self.coordinator.deletes_persisted(request_id, result),
        }
    }

    fn append_to_log(&mut self, write: &Write) {
        let entries: Vec<OffsetLogEntry> = match write {
            Write::Commits(commits) => commits
                .iter()
                .map(|(key, value)| OffsetLogEntry::Commit(key.clone(), value.clone()))
                .collect(),
            Write::Tombstones(keys) => keys.iter().cloned().map(OffsetLogEntry::Delete).collect(),
        };
        let batch = encode_batch(&entries, self.now_ms).expect("encode offsets batch");
        self.log.extend_from_slice(&batch);
        match write {
            Write::Commits(commits) => {
                for (key, value) in commits {
                    self.durable
                        .insert((key.topic.clone(), key.partition), value.offset);
                }
            }
            Write::Tombstones(keys) => {
                for key in keys {
                    self.durable.remove(&(key.topic.clone(), key.partition));
                }
            }
        }
    }

    /// An acknowledged (or, at a crash, durable but unanswered) deletion: its offsets are gone
    /// and may start again from anything.
    fn forget_deleted(&mut self, keys: &[Partition]) {
        for key in keys {
            self.acked.remove(key);
            self.high_water.remove(key);
        }
    }

    /// The broker crashes and restarts: writes in flight either made it to the log or not (their
    /// commits were never acknowledged), connections close (outstanding requests get no reply and
    /// members start over), and the coordinator is rebuilt from the log bytes.
    fn restart_broker(&mut self) {
        self.restarts += 1;
        self.left_empty_at_ms = None;
        let pending: Vec<_> = self.persist_queue.drain(..).collect();
        for (request_id, write) in pending {
            if self.rng.gen_bool(0.5) {
                self.append_to_log(&write);
                if let Some(keys) = self.tombstoned.get(&request_id).cloned() {
                    self.forget_deleted(&keys);
                }
            }
        }
        self.tombstoned.clear();
        self.outstanding.clear();
        for member in &mut self.members {
            member.waiting = false;
            if member.phase != Phase::Dead {
                member.phase = Phase::Idle;
                member.member_id.clear();
            }
        }
        self.coordinator = new_coordinator(self.rng.gen(), self.initial_rebalance_delay_ms);
        let mut entries = Vec::new();
        let consumed = decode_replayed_batches(&self.log, &mut |entry| entries.push(entry))
            .expect("replay log");
        assert_eq!(consumed, self.log.len(), "the log is made of whole batches");
        self.coordinator.load_offsets(entries);
        let loaded: BTreeMap<Partition, i64> = self
            .coordinator
            .committed_offsets()
            .into_iter()
            .map(|((_, topic, partition), offset)| ((topic, partition), offset))
            .collect();
        assert_eq!(
            loaded, self.durable,
            "replay differs from what was made durable"
        );
        // Acknowledged commits are durable: the newest acknowledged value survives (or a later
        // durable one replaced it).
        for (partition, offset) in &self.acked {
            let survived = loaded.get(partition).copied().unwrap_or(-1);
            assert!(
                survived >= *offset,
                "{partition:?}: acked {offset}, replayed {survived}"
            );
        }
        self.acked = loaded;
        self.leaders.clear();
        self.generation_max = 0;
    }

    /// Applies every output: replies to members, writes queued for the driver.
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
                } => self
                    .persist_queue
                    .push_back((request_id, Write::Commits(commits))),
                Output::PersistTxnOffsets { .. } => {
                    panic!("this simulation sends no TxnOffsetCommit (see `sim/txn.rs`)")
                }
                Output::PersistOffsetDeletes { request_id, keys } => {
                    self.tombstoned.insert(
                        request_id,
                        keys.iter()
                            .map(|key| (key.topic.clone(), key.partition))
                            .collect(),
                    );
                    self.persist_queue
                        .push_back((request_id, Write::Tombstones(keys)));
                }
                Output::Reply {
                    request_id,
                    response,
                    ..
                } => {
                    let sent = self.outstanding.remove(&request_id).unwrap_or_else(|| {
                        panic!("reply to {request_id}: unknown or answered twice")
                    });
                    self.on_reply(request_id, sent, response);
                }
            }
        }
    }

    fn on_reply(&mut self, request_id: RequestId, sent: Sent, response: Response) {
        match (sent, response) {
            (Sent::Join { member }, Response::JoinGroup(r)) => {
                self.members[member].waiting = false;
                match r.error_code {
                    0 => {
                        let generation = r.generation_id;
                        let leader = r.leader.as_str().to_owned();
                        let previous = self.leaders.insert(generation, leader.clone());
                        assert!(
                            previous.as_ref().is_none_or(|p| *p == leader),
                            "generation {generation} has leaders {previous:?} and {leader}"
                        );
                        assert!(generation >= self.generation_max, "generation went back");
                        if let Some(left_empty_at_ms) = self.left_empty_at_ms.take() {
                            self.check_initial_wait(self.now_ms - left_empty_at_ms);
                        }
                        self.generation_max = generation;
                        assert_eq!(
                            Some(generation),
                            self.coordinator.generation_id(GROUP),
                            "a JoinGroup answered for a generation that is not current"
                        );
                        let member_id = r.member_id.as_str().to_owned();
                        let members = (leader == member_id).then(|| {
                            r.members
                                .iter()
                                .map(|m| m.member_id.as_str().to_owned())
                                .collect()
                        });
                        let state = &mut self.members[member];
                        state.member_id = member_id;
                        state.phase = Phase::Joined {
                            generation,
                            members,
                        };
                    }
                    // MEMBER_ID_REQUIRED: come back with the id.
                    79 => self.members[member].member_id = r.member_id.as_str().to_owned(),
                    // UNKNOWN_MEMBER_ID: start over without an id.
                    25 => {
                        self.members[member].member_id.clear();
                        self.members[member].phase = Phase::Idle;
                    }
                    // Superseded or raced with a rebalance: rejoin.
                    27 => self.members[member].phase = Phase::Idle,
                    other => panic!("unexpected JoinGroup error {other}"),
                }
            }
            (Sent::Sync { member, generation }, Response::SyncGroup(r)) => {
                self.members[member].waiting = false;
                match r.error_code {
                    0 => {
                        assert_eq!(
                            Some(generation),
                            self.coordinator.generation_id(GROUP),
                            "an assignment handed out for a stale generation"
                        );
                        self.members[member].phase = Phase::Stable {
                            generation,
                            assignment: decode_assignment(&r.assignment),
                        };
                    }
                    27 | 22 => self.members[member].phase = Phase::Idle,
                    25 => {
                        self.members[member].member_id.clear();
                        self.members[member].phase = Phase::Idle;
                    }
                    other => panic!("unexpected SyncGroup error {other}"),
                }
            }
            (Sent::Heartbeat { member }, Response::Heartbeat(r)) => {
                self.members[member].waiting = false;
                self.on_group_error(member, r.error_code, "Heartbeat");
            }
            (Sent::Commit { member, offsets }, Response::OffsetCommit(r)) => {
                self.members[member].waiting = false;
                let committed: BTreeMap<Partition, i64> = offsets.into_iter().collect();
                let mut group_error = 0;
                for topic in &r.topics {
                    for partition in &topic.partitions {
                        let key = (topic.name.0.as_str().to_owned(), partition.partition_index);
                        match partition.error_code {
                            0 => {
                                let offset = committed[&key];
                                self.acked.insert(key, offset);
                            }
                            // The driver failed the write: nothing was committed.
                            15 => {}
                            code => group_error = code,
                        }
                    }
                }
                self.on_group_error(member, group_error, "OffsetCommit");
            }
            (Sent::Leave { member }, Response::LeaveGroup(r)) => {
                self.members[member].waiting = false;
                let code = r.members.first().map_or(r.error_code, |m| m.error_code);
                assert!(
                    code == 0 || code == 25,
                    "unexpected LeaveGroup error {code}"
                );
                self.members[member].phase = Phase::Dead;
            }
            (Sent::Fetch, Response::OffsetFetch(r)) => {
                assert_eq!(r.error_code, 0);
                for topic in &r.topics {
                    for partition in &topic.partitions {
                        assert_eq!(partition.error_code, 0);
                        let key = (topic.name.0.as_str().to_owned(), partition.partition_index);
                        let acked = self.acked.get(&key).copied().unwrap_or(-1);
                        assert_eq!(partition.committed_offset, acked, "OffsetFetch of {key:?}");
                    }
                }
            }
            (Sent::Describe, Response::DescribeGroups(r)) => self.check_described(&r),
            (Sent::DeleteOffsets, Response::OffsetDelete(r)) => {
                let tombstoned = self.tombstoned.remove(&request_id).unwrap_or_default();
                let state = self.coordinator.group_state(GROUP);
                match r.error_code {
                    0 => {}
                    69 => assert_eq!(state, None, "GROUP_ID_NOT_FOUND for a held group"),
                    other => panic!("unexpected OffsetDelete error {other}"),
                }
                let mut deleted = Vec::new();
                for topic in &r.topics {
                    for partition in &topic.partitions {
                        let key = (topic.name.0.as_str().to_owned(), partition.partition_index);
                        match partition.error_code {
                            0 => deleted.push(key),
                            // The members' metadata is no subscription: every topic counts.
                            86 => assert!(
                                state.is_some_and(|state| state != GroupState::Empty),
                                "GROUP_SUBSCRIBED_TO_TOPIC for a group without members"
                            ),
                            // The driver failed the write: nothing was deleted.
                            15 => assert!(tombstoned.contains(&key)),
                            other => panic!("unexpected OffsetDelete partition error {other}"),
                        }
                    }
                }
                deleted.retain(|key| tombstoned.contains(key));
                self.deletions += usize::from(!deleted.is_empty());
                self.forget_deleted(&deleted);
            }
            (Sent::DeleteGroup, Response::DeleteGroups(r)) => {
                let tombstoned = self.tombstoned.remove(&request_id).unwrap_or_default();
                let state = self.coordinator.group_state(GROUP);
                match r.results[0].error_code {
                    0 => {
                        self.deletions += 1;
                        self.forget_deleted(&tombstoned);
                    }
                    68 => assert!(
                        state.is_some_and(|state| state != GroupState::Empty),
                        "NON_EMPTY_GROUP for a group without members"
                    ),
                    69 => assert_eq!(state, None, "GROUP_ID_NOT_FOUND for a held group"),
                    15 => assert!(
                        !tombstoned.is_empty(),
                        "a failed write that was never asked"
                    ),
                    other => panic!("unexpected DeleteGroups error {other}"),
                }
            }
            (sent, response) => panic!("{sent:?} answered with {response:?}"),
        }
    }

    /// What a member does after a Heartbeat or OffsetCommit error, as Kafka clients do.
    fn on_group_error(&mut self, member: usize, error_code: i16, api: &str) {
        let state = &mut self.members[member];
        match error_code {
            0 => {}
            27 | 22 => state.phase = Phase::Idle,
            25 => {
                state.member_id.clear();
                state.phase = Phase::Idle;
            }
            other => panic!("unexpected {api} error {other}"),
        }
    }

    fn check(&mut self) {
        // A group left with nothing is forgotten, and a new one starts again at generation 1.
        if self.coordinator.group_state(GROUP).is_none() {
            self.leaders.clear();
            self.generation_max = 0;
        }
        // Committed offsets: exactly the acknowledged ones, never backwards.
        let shown: BTreeMap<Partition, i64> = self
            .coordinator
            .committed_offsets()
            .into_iter()
            .map(|((_, topic, partition), offset)| ((topic, partition), offset))
            .collect();
        assert_eq!(
            shown, self.acked,
            "coordinator offsets differ from acknowledged"
        );
        for (partition, offset) in shown {
            let high = self.high_water.entry(partition.clone()).or_insert(offset);
            assert!(
                offset >= *high,
                "{partition:?} went back from {high} to {offset}"
            );
            *high = offset;
        }
        if self.coordinator.group_state(GROUP) == Some(GroupState::Stable) {
            let meta = self.meta(0, Sent::Describe);
            let mut request = DescribeGroupsRequest::default();
            request.groups = vec![GroupId(s(GROUP))];
            self.coordinator.handle_describe_groups(meta, request);
            self.drain();
        }
    }

    /// A group leaving Empty waited the initial delay, capped by its first member's rebalance
    /// timeout (the session timeout for v0 members, the shorter of the two here).
    fn check_initial_wait(&self, waited_ms: i64) {
        const _: () = assert!(SESSION_TIMEOUT_MS <= REBALANCE_TIMEOUT_MS);
        let delay_ms = i64::from(self.initial_rebalance_delay_ms);
        let shortest_ms = delay_ms.min(i64::from(SESSION_TIMEOUT_MS));
        assert!(
            waited_ms >= shortest_ms,
            "first join answered after {waited_ms} ms, the delay is {delay_ms} ms"
        );
        let longest_ms = i64::from(REBALANCE_TIMEOUT_MS) + self.last_advance_ms;
        assert!(
            waited_ms <= longest_ms,
            "first join answered after {waited_ms} ms, past the rebalance timeout"
        );
    }

    fn check_described(&mut self, response: &kafka_protocol::messages::DescribeGroupsResponse) {
        let group = &response.groups[0];
        assert_eq!(group.group_state.as_str(), "Stable");
        let mut seen: BTreeSet<Partition> = BTreeSet::new();
        for member in &group.members {
            for partition in decode_assignment(&member.member_assignment) {
                assert!(
                    seen.insert(partition.clone()),
                    "{partition:?} assigned twice"
                );
            }
        }
        let all: BTreeSet<Partition> = all_partitions().into_iter().collect();
        assert_eq!(seen, all, "a Stable generation must assign every partition");
        self.stable_checks += 1;
    }
}

/// Runs one seed; how many deletions were acknowledged.
fn run_seed(seed: u64) -> usize {
    let result = std::panic::catch_unwind(|| {
        let mut sim = Sim::new(seed);
        sim.run();
        if std::env::var_os("SKIFF_SIM_STATS").is_some() {
            eprintln!(
                "seed {seed}: delay {} ms restarts {} stable checks {} generation {} acked {} \
                 deletions {} requests {}",
                sim.initial_rebalance_delay_ms,
                sim.restarts,
                sim.stable_checks,
                sim.generation_max,
                sim.acked.len(),
                sim.deletions,
                sim.next_request_id
            );
        }
        sim.deletions
    });
    match result {
        Ok(deletions) => deletions,
        Err(panic) => {
            eprintln!("group simulation failed: SKIFF_SEED={seed}");
            std::panic::resume_unwind(panic);
        }
    }
}

#[test]
fn seeded_group_simulation_keeps_its_invariants() {
    if let Some(seed) = std::env::var("SKIFF_SEED")
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
    {
        run_seed(seed);
        return;
    }
    let deletions: usize = SEEDS.map(run_seed).sum();
    assert!(deletions > 0, "no seed ever deleted offsets or the group");
}

#[test]
fn range_assignor_covers_every_partition_once() {
    let members: Vec<String> = ["c", "a", "b"].iter().map(|m| m.to_string()).collect();
    let assigned = range_assign(&members);
    let mut all: Vec<Partition> = assigned.values().flatten().cloned().collect();
    all.sort();
    let mut expected = all_partitions();
    expected.sort();
    assert_eq!(all, expected);
    assert_eq!(assigned["a"].len(), 3, "orders 0-1 and events 0");
}
