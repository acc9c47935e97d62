//! A seeded simulation of one group id shared by classic clients (eager: they give up everything
//! before each JoinGroup, their leader assigns ranges in SyncGroup) and consumer-protocol clients
//! (ConsumerGroupHeartbeat), talking to a [`crate::Coordinator`] as the broker's driver does.
//! Clients are replaced now and then by a client of the other protocol, so the group is upgraded
//! to a consumer group (the first consumer-protocol client joining a classic group) and
//! downgraded back (the last consumer-protocol client leaving a group of classic members, or a
//! static one restarting as a classic client with its instance id) again and again; writes fail
//! now and then (the coordinator rolls back, the client retries). Some consumer-protocol clients
//! are static: one replaced leaves with a static leave and its classic successor joins with its
//! instance id, as a rolling restart does.
//!
//! Checked after every step:
//! - no partition is held by two clients, and in the consumer group no partition is in two
//!   members' assigned or pending-revocation sets;
//! - epochs only grow: each client's generation or member epoch in every successful answer, and
//!   the group's (the consumer group's epoch, or the classic group's generation while it is one);
//! - the consumer group replayed from the records whose writes succeeded is the live one;
//! - once replacements and faults stop and one more consumer-protocol client starts, the clients
//!   end up holding every partition (the new client is needed: Kafka does not rebalance a group
//!   a static member's join downgraded, so partitions that were in no member's target then, or
//!   not yet released to theirs, wait for the next membership change; `Sim::scale_out`).
//!
//! A failure prints `SKIFF_SEED=<seed>`; `SKIFF_SEED=<seed> cargo test -p skiff-group
//! migration_simulation` replays that seed.
//!
//! Must never: read a clock or sleep.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest as ClassicHeartbeat, JoinGroupRequest, LeaveGroupRequest,
    SyncGroupRequest,
};
use kafka_protocol::protocol::StrBytes;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use skiff_protocol::error_code::ErrorCode;

use crate::consumer::embedded::{self, NamedPartitions, Subscription};
use crate::consumer::{epochs, Assignment, ConsumerGroups, HeartbeatRequest, TopicId, TopicImage};
use crate::{Coordinator, GroupConfig, GroupKeys, Output, PersistError, RequestMeta, Response};

const SEEDS: std::ops::RangeInclusive<u64> = 1..=150;
const STEPS: usize = 150;
/// Steps without replacements or faults in which the clients must come to hold every partition.
const QUIET_STEPS: usize = 150;
const GROUP: &str = "g";
const TOPIC: &str = "t";
const TOPIC_ID: TopicId = TopicId([9; 16]);
const PARTITIONS: i32 = 6;
const CLIENTS: usize = 3;
const STEP_MS: i64 = 200;
const SESSION_TIMEOUT_MS: i32 = 10_000;
const REBALANCE_TIMEOUT_MS: i32 = 5_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Classic,
    Consumer,
}

/// Where a classic client is in its protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Join,
    /// Joined generation `.0`; `.1` the members to assign when it is the leader.
    Sync(i32, Option<Vec<String>>),
    Stable(i32),
}

#[derive(Debug, Clone)]
struct Client {
    protocol: Protocol,
    member_id: String,
    /// A consumer client's member epoch (0: joining).
    epoch: i32,
    phase: Phase,
    owned: BTreeSet<i32>,
    in_flight: bool,
    /// The highest generation or member epoch an answer gave it.
    seen: i32,
    /// Its group.instance.id, for a static member.
    instance_id: Option<String>,
}

impl Client {
    fn new(protocol: Protocol, id: usize) -> Self {
        Self {
            protocol,
            member_id: match protocol {
                Protocol::Classic => String::new(),
                Protocol::Consumer => format!("consumer-{id}"),
            },
            epoch: 0,
            phase: Phase::Join,
            owned: BTreeSet::new(),
            in_flight: false,
            seen: 0,
            instance_id: None,
        }
    }

    /// An answer's generation or epoch: never below one seen before.
    fn saw(&mut self, epoch: i32) {
        assert!(
            epoch >= self.seen,
            "{} went from epoch {} to {epoch}",
            self.member_id,
            self.seen
        );
        self.seen = epoch;
    }
}

struct Sim {
    rng: ChaCha8Rng,
    now_ms: i64,
    coord: Coordinator,
    clients: BTreeMap<usize, Client>,
    next_client: usize,
    /// Request id → the client that sent it.
    requests: BTreeMap<u64, usize>,
    next_request: u64,
    faults: bool,
    /// Records of the writes that succeeded, in order.
    log: Vec<crate::consumer::ConsumerRecord>,
    group_level: i32,
    /// (upgrades, downgrades, failed writes, static classic joins that downgraded) seen.
    stats: (usize, usize, usize, usize),
    was_consumer: bool,
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

fn subscription() -> Bytes {
    Bytes::from(embedded::encode_subscription(&Subscription {
        version: 3,
        topics: vec![TOPIC.to_owned()],
        generation_id: -1,
        ..Subscription::default()
    }))
}

/// The classic leader's range assignment of the topic over `members`.
fn ranges(members: &[String]) -> Vec<(String, NamedPartitions)> {
    let count = i32::try_from(members.len()).unwrap_or(1).max(1);
    members
        .iter()
        .enumerate()
        .map(|(index, member)| {
            let index = i32::try_from(index).unwrap_or(0);
            let mine: BTreeSet<i32> = (0..PARTITIONS).filter(|p| p % count == index).collect();
            (member.clone(), BTreeMap::from([(TOPIC.to_owned(), mine)]))
        })
        .collect()
}

impl Sim {
    fn new(seed: u64) -> Self {
        let mut config = GroupConfig::new(GroupKeys::KAFKA_DEFAULTS, seed);
        config.consumer.session_timeout_ms = SESSION_TIMEOUT_MS;
        config.consumer.heartbeat_interval_ms = 1_000;
        let mut coord = Coordinator::new(config);
        coord.load_offsets([]);
        coord.set_topic_image(TopicImage {
            version: 1,
            by_name: BTreeMap::from([(TOPIC.to_owned(), (TOPIC_ID, PARTITIONS))]),
        });
        let clients = (0..CLIENTS)
            .map(|id| (id, Client::new(Protocol::Classic, id)))
            .collect();
        Self {
            rng: ChaCha8Rng::seed_from_u64(seed),
            now_ms: 1_000,
            coord,
            clients,
            next_client: CLIENTS,
            requests: BTreeMap::new(),
            next_request: 0,
            faults: true,
            log: Vec::new(),
            group_level: 0,
            stats: (0, 0, 0, 0),
            was_consumer: false,
        }
    }

    fn meta(&mut self, client: Option<usize>, version: i16) -> RequestMeta {
        self.next_request += 1;
        if let Some(client) = client {
            self.requests.insert(self.next_request, client);
        }
        RequestMeta {
            request_id: self.next_request,
            version,
            client_id: "sim".into(),
            client_host: "/127.0.0.1".into(),
        }
    }

    /// One step: maybe a replacement, every idle client acts, time passes, writes resolve.
    fn step(&mut self) {
        if self.faults && self.rng.gen_bool(0.1) {
            self.replace();
        }
        let idle: Vec<usize> = self
            .clients
            .iter()
            .filter(|(_, client)| !client.in_flight)
            .map(|(id, _)| *id)
            .collect();
        for id in idle {
            self.act(id);
            self.resolve();
        }
        self.now_ms += STEP_MS;
        self.coord.tick(self.now_ms);
        self.resolve();
        self.check();
    }

    /// A random client leaves and one of the other protocol starts: a static consumer client's
    /// successor keeps its instance id; half the new consumer clients are static.
    fn replace(&mut self) {
        let ids: Vec<usize> = self.clients.keys().copied().collect();
        let id = ids[self.rng.gen_range(0..ids.len())];
        let Some(old) = self.clients.remove(&id) else {
            return;
        };
        self.leave(&old);
        let mut client = match old.protocol {
            Protocol::Classic => Client::new(Protocol::Consumer, self.next_client),
            Protocol::Consumer => Client::new(Protocol::Classic, self.next_client),
        };
        client.instance_id = match old.protocol {
            Protocol::Classic => self
                .rng
                .gen_bool(0.5)
                .then(|| format!("instance-{}", self.next_client)),
            Protocol::Consumer => old.instance_id,
        };
        self.clients.insert(self.next_client, client);
        self.next_client += 1;
        self.resolve();
    }

    /// A replaced client's goodbye: a classic client's LeaveGroup, a consumer client's leave
    /// heartbeat (a static one's keeps its place for its successor).
    fn leave(&mut self, old: &Client) {
        match old.protocol {
            Protocol::Classic if !old.member_id.is_empty() => {
                let meta = self.meta(None, 3);
                let mut request = LeaveGroupRequest::default();
                request.group_id = GroupId(s(GROUP));
                let mut member = MemberIdentity::default();
                member.member_id = s(&old.member_id);
                member.group_instance_id = old.instance_id.as_deref().map(s);
                request.members = vec![member];
                self.coord.handle_leave_group(self.now_ms, meta, request);
            }
            Protocol::Consumer if old.epoch > 0 => {
                let meta = self.meta(None, 1);
                let member_epoch = match old.instance_id {
                    Some(_) => epochs::LEAVE_STATIC,
                    None => epochs::LEAVE,
                };
                let request = HeartbeatRequest {
                    group_id: GROUP.into(),
                    member_id: old.member_id.clone(),
                    member_epoch,
                    instance_id: old.instance_id.clone(),
                    rebalance_timeout_ms: -1,
                    ..HeartbeatRequest::default()
                };
                self.coord
                    .handle_consumer_group_heartbeat(meta, request, self.now_ms);
            }
            _ => {}
        }
    }

    fn act(&mut self, id: usize) {
        let Some(client) = self.clients.get_mut(&id) else {
            return;
        };
        client.in_flight = true;
        match (client.protocol, client.phase.clone()) {
            (Protocol::Consumer, _) => self.consumer_heartbeat(id),
            (Protocol::Classic, Phase::Join) => self.classic_join(id),
            (Protocol::Classic, Phase::Sync(generation, members)) => {
                self.classic_sync(id, generation, members.as_deref());
            }
            (Protocol::Classic, Phase::Stable(generation)) => {
                self.classic_heartbeat(id, generation)
            }
        }
    }

    fn consumer_heartbeat(&mut self, id: usize) {
        let Some(client) = self.clients.get_mut(&id) else {
            return;
        };
        if client.epoch == 0 {
            client.owned.clear();
        }
        let owned: Assignment = BTreeMap::from([(TOPIC_ID, client.owned.clone())]);
        let request = HeartbeatRequest {
            group_id: GROUP.into(),
            member_id: client.member_id.clone(),
            member_epoch: client.epoch,
            instance_id: client.instance_id.clone(),
            rebalance_timeout_ms: REBALANCE_TIMEOUT_MS,
            subscribed_topic_names: Some(vec![TOPIC.to_owned()]),
            topic_partitions: Some(crate::consumer::normalized(owned)),
            client_id: "sim".into(),
            client_host: "/127.0.0.1".into(),
            ..HeartbeatRequest::default()
        };
        let meta = self.meta(Some(id), 1);
        self.coord
            .handle_consumer_group_heartbeat(meta, request, self.now_ms);
    }

    fn classic_join(&mut self, id: usize) {
        let Some(client) = self.clients.get_mut(&id) else {
            return;
        };
        // Eager: everything is given up before joining.
        client.owned.clear();
        let mut request = JoinGroupRequest::default();
        request.group_id = GroupId(s(GROUP));
        request.member_id = s(&client.member_id);
        request.group_instance_id = client.instance_id.as_deref().map(s);
        request.session_timeout_ms = SESSION_TIMEOUT_MS;
        request.rebalance_timeout_ms = REBALANCE_TIMEOUT_MS;
        request.protocol_type = s("consumer");
        let mut protocol = JoinGroupRequestProtocol::default();
        protocol.name = s("range");
        protocol.metadata = subscription();
        request.protocols = vec![protocol];
        let meta = self.meta(Some(id), 9);
        self.coord.handle_join_group(self.now_ms, meta, request);
    }

    fn classic_sync(&mut self, id: usize, generation: i32, members: Option<&[String]>) {
        let Some(client) = self.clients.get(&id) else {
            return;
        };
        let mut request = SyncGroupRequest::default();
        request.group_id = GroupId(s(GROUP));
        request.member_id = s(&client.member_id);
        request.group_instance_id = client.instance_id.as_deref().map(s);
        request.generation_id = generation;
        request.protocol_type = Some(s("consumer"));
        request.protocol_name = Some(s("range"));
        request.assignments = ranges(members.unwrap_or_default())
            .into_iter()
            .map(|(member, partitions)| {
                let mut entry = SyncGroupRequestAssignment::default();
                entry.member_id = s(&member);
                entry.assignment = Bytes::from(embedded::encode_assignment(&partitions, 3));
                entry
            })
            .collect();
        let meta = self.meta(Some(id), 5);
        self.coord.handle_sync_group(self.now_ms, meta, request);
    }

    fn classic_heartbeat(&mut self, id: usize, generation: i32) {
        let Some(client) = self.clients.get(&id) else {
            return;
        };
        let mut request = ClassicHeartbeat::default();
        request.group_id = GroupId(s(GROUP));
        request.member_id = s(&client.member_id);
        request.group_instance_id = client.instance_id.as_deref().map(s);
        request.generation_id = generation;
        let meta = self.meta(Some(id), 3);
        self.coord.handle_heartbeat(self.now_ms, meta, request);
    }

    /// Drains the coordinator: writes succeed or (sometimes) fail, replies reach their clients.
    fn resolve(&mut self) {
        while let Some(output) = self.coord.poll_output() {
            match output {
                Output::PersistConsumerRecords { write, records, .. } => {
                    let fail = self.faults && self.rng.gen_bool(0.1);
                    if fail {
                        self.stats.2 += 1;
                        let error = PersistError::Unavailable;
                        self.coord.consumer_records_persisted(write, Err(error));
                    } else {
                        self.log.extend(records);
                        self.coord.consumer_records_persisted(write, Ok(()));
                    }
                }
                Output::Reply {
                    request_id,
                    response,
                    ..
                } => self.answer(request_id, response),
                _ => {}
            }
        }
    }

    fn answer(&mut self, request_id: u64, response: Response) {
        let Some(id) = self.requests.remove(&request_id) else {
            return;
        };
        let downgraded = self.was_consumer && self.coord.consumer_groups().group(GROUP).is_none();
        let Some(client) = self.clients.get_mut(&id) else {
            return;
        };
        client.in_flight = false;
        match response {
            Response::ConsumerGroupHeartbeat(response) => consumer_answer(client, &response),
            Response::JoinGroup(response) => {
                let code = response.error_code;
                if code == ErrorCode::MEMBER_ID_REQUIRED.code() {
                    client.member_id = response.member_id.to_string();
                } else if code == 0 {
                    client.saw(response.generation_id);
                    // A static member joins with no id and learns its id here.
                    client.member_id = response.member_id.to_string();
                    if downgraded && client.instance_id.is_some() {
                        self.stats.3 += 1;
                    }
                    let leader = response.leader == response.member_id;
                    let members = leader.then(|| {
                        response
                            .members
                            .iter()
                            .map(|m| m.member_id.to_string())
                            .collect()
                    });
                    client.phase = Phase::Sync(response.generation_id, members);
                } else {
                    classic_error(client, code);
                }
            }
            Response::SyncGroup(response) if response.error_code == 0 => {
                let assignment =
                    embedded::decode_assignment(&response.assignment).expect("decodes");
                client.owned = assignment
                    .partitions
                    .get(TOPIC)
                    .cloned()
                    .unwrap_or_default();
                if let Phase::Sync(generation, _) = client.phase {
                    client.phase = Phase::Stable(generation);
                }
            }
            Response::SyncGroup(response) => classic_error(client, response.error_code),
            Response::Heartbeat(response) if response.error_code != 0 => {
                classic_error(client, response.error_code);
            }
            _ => {}
        }
    }
}

fn consumer_answer(
    client: &mut Client,
    response: &skiff_protocol::responses::consumer_group::ConsumerGroupHeartbeatResponse,
) {
    let code = response.error_code;
    if code == 0 {
        client.saw(response.member_epoch);
        client.epoch = response.member_epoch;
        if let Some(assignment) = &response.assignment {
            client.owned = assignment
                .iter()
                .filter(|topic| topic.topic_id.as_bytes() == &TOPIC_ID.0)
                .flat_map(|topic| topic.partitions.iter().copied())
                .collect();
        }
    } else if code == ErrorCode::FENCED_MEMBER_EPOCH.code()
        || code == ErrorCode::UNKNOWN_MEMBER_ID.code()
    {
        client.epoch = 0;
        client.owned.clear();
    }
}

/// A classic client told to rejoin (or that its id is unknown, or its instance id another's)
/// gives up everything and rejoins.
fn classic_error(client: &mut Client, code: i16) {
    if code == ErrorCode::UNKNOWN_MEMBER_ID.code() || code == ErrorCode::FENCED_INSTANCE_ID.code() {
        client.member_id.clear();
    }
    client.owned.clear();
    client.phase = Phase::Join;
}

impl Sim {
    fn check(&mut self) {
        let mut held = BTreeSet::new();
        for client in self.clients.values() {
            for partition in &client.owned {
                assert!(
                    held.insert(*partition),
                    "partition {partition} held by two clients"
                );
            }
        }
        let consumer = self.coord.consumer_groups().group(GROUP).cloned();
        let level = match &consumer {
            Some(group) => {
                let mut owned = BTreeSet::new();
                for member in group.members().values() {
                    let a = &member.assignment;
                    for set in [&a.assigned, &a.pending_revocation] {
                        for partition in set.values().flatten() {
                            assert!(
                                owned.insert(*partition),
                                "{partition} owned twice in the group"
                            );
                        }
                    }
                }
                group.group_epoch()
            }
            None => self
                .coord
                .group_generation(GROUP)
                .unwrap_or(self.group_level),
        };
        assert!(
            level >= self.group_level,
            "group epoch went from {} to {level}",
            self.group_level
        );
        self.group_level = level;
        match (self.was_consumer, consumer.is_some()) {
            (false, true) => self.stats.0 += 1,
            (true, false) => self.stats.1 += 1,
            _ => {}
        }
        self.was_consumer = consumer.is_some();
        self.check_replay();
    }

    /// The durable records rebuild the live consumer group (or none).
    fn check_replay(&self) {
        let mut replayed = ConsumerGroups::new(self.coord.consumer_groups().config().clone());
        for record in &self.log {
            replayed.replay(record);
        }
        let live = self.coord.consumer_groups().group(GROUP);
        let again = replayed.group(GROUP);
        let view = |group: Option<&crate::consumer::ConsumerGroup>| {
            group.map(|g| (g.group_epoch(), g.assignment_epoch(), g.members().clone()))
        };
        assert_eq!(
            view(again),
            view(live),
            "the replayed group differs from the live one"
        );
    }

    /// One more consumer-protocol client starts. A group a static member's join downgraded is
    /// left Stable as Kafka leaves it, every member with its target of the moment, which may be
    /// stale (a member fenced since, its partitions in no target) or not yet reached: nothing
    /// hands those partitions out until the membership changes, so the quiet steps start with
    /// such a change.
    fn scale_out(&mut self) {
        let client = Client::new(Protocol::Consumer, self.next_client);
        self.clients.insert(self.next_client, client);
        self.next_client += 1;
    }

    fn all_held(&self) -> bool {
        let held: BTreeSet<i32> = self
            .clients
            .values()
            .flat_map(|c| c.owned.clone())
            .collect();
        held.len() == usize::try_from(PARTITIONS).unwrap_or(0)
    }
}

fn run_seed(seed: u64) -> (usize, usize, usize, usize) {
    let result = std::panic::catch_unwind(|| {
        let mut sim = Sim::new(seed);
        for _ in 0..STEPS {
            sim.step();
        }
        sim.faults = false;
        sim.scale_out();
        let mut quiet = 0;
        while !sim.all_held() {
            assert!(
                quiet < QUIET_STEPS,
                "the clients never came to hold every partition"
            );
            sim.step();
            quiet += 1;
        }
        sim.stats
    });
    match result {
        Ok(stats) => stats,
        Err(panic) => {
            eprintln!("migration simulation failed: SKIFF_SEED={seed}");
            std::panic::resume_unwind(panic);
        }
    }
}

#[test]
fn migration_simulation_keeps_its_invariants() {
    if let Some(seed) = std::env::var("SKIFF_SEED")
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
    {
        run_seed(seed);
        return;
    }
    let count = SEEDS.clone().count();
    let (upgrades, downgrades, failed, replaced) = SEEDS
        .map(run_seed)
        .fold((0, 0, 0, 0), |(u, d, f, r), (a, b, c, e)| {
            (u + a, d + b, f + c, r + e)
        });
    eprintln!("static classic joins that downgraded: {replaced}");
    assert!(upgrades > count, "groups were seldom upgraded ({upgrades})");
    assert!(
        downgrades > count,
        "groups were seldom downgraded ({downgrades})"
    );
    assert!(failed > count, "writes seldom failed ({failed})");
    assert!(
        replaced > count / 10,
        "static classic members seldom downgraded a group ({replaced})"
    );
}
