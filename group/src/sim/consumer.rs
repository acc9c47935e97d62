//! A seeded simulation of one KIP-848 consumer group: clients join (some static), heartbeat with
//! virtual time, leave (-1, or -2 for static members), crash (stop for good), pause (past their
//! session now and then), revoke slowly (past their rebalance timeout now and then), lose
//! responses, re-subscribe (topic lists and patterns), while topics gain partitions or appear, and
//! the coordinator restarts by replaying its records through the real codec.
//!
//! The clients talk to a [`crate::Coordinator`] as the broker's driver does
//! (`consumer_io.rs`): each heartbeat's records and each expiry's come out as a write, and a
//! write fails now and then (the heartbeat is then answered with the coordinator's error and the
//! client retries). In half the steps the due clients heartbeat at once, so all but the first
//! wait behind its write and then go out as one combined write (which fails now and then too).
//! The log holds only the writes that succeeded, and a restart replays only that log.
//!
//! Checked after every step:
//! - no partition is owned by two members at once: in the coordinator, each partition is in at
//!   most one member's assigned or pending-revocation set (Kafka's invariant), and what a live
//!   client holds is within what the coordinator says that member owns, so live clients never
//!   overlap;
//! - the target assignment names each partition at most once, and only to a subscriber;
//! - epochs only grow: the group epoch and the target assignment epoch (across restarts too),
//!   each member's epoch while it stays a member; the target epoch is never above the group's;
//! - when the group is Stable, every subscribed partition is owned by exactly one member;
//! - a restart's replay of the durable records rebuilds exactly the group the live coordinator
//!   had (so a failed write left nothing behind, and members keep their ids, epochs and
//!   partitions across restarts);
//! - every heartbeat is answered once, and only after its write's result;
//! - after the faults stop and every client heartbeats, the group becomes Stable.
//!
//! A failure prints `SKIFF_SEED=<seed>`; `SKIFF_SEED=<seed> cargo test -p skiff-group
//! consumer_group_simulation` replays that seed.
//!
//! Must never: read a clock or sleep.

use std::collections::{BTreeMap, BTreeSet};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::consumer::group::ConsumerGroupState;
use crate::consumer::regex::TopicVisibility;
use crate::consumer::{
    epochs, Assignment, ConsumerGroupConfig, ConsumerGroups, ConsumerRecord, HeartbeatRequest,
    TopicId, TopicImage,
};
use crate::offsets_log::{decode_replayed_batches, encode_consumer_batch};
use crate::Replayed;

/// Seeds of the normal test run.
const SEEDS: std::ops::RangeInclusive<u64> = 1..=300;
/// Steps per seed.
const STEPS: usize = 200;
const GROUP: &str = "sim-consumers";
const CLIENTS: usize = 5;
const SESSION_TIMEOUT_MS: i32 = 10_000;
const REBALANCE_TIMEOUT_MS: i32 = 5_000;
const HEARTBEAT_INTERVAL_MS: i32 = 1_000;
/// Patterns clients may subscribe with.
const PATTERNS: [&str; 3] = ["t[ab]", "t.*", "tc|td"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Liveness {
    Alive,
    /// Silent until this time.
    Paused(i64),
    /// Gone for good (a new client may take its slot).
    Crashed,
}

#[derive(Debug, Clone)]
struct Client {
    member_id: String,
    instance_id: Option<String>,
    /// 0 when (re)joining.
    epoch: i32,
    joined: bool,
    liveness: Liveness,
    names: Vec<String>,
    pattern: Option<String>,
    /// Whether the next heartbeat must carry the subscription.
    subscription_changed: bool,
    /// What the client holds.
    owned: Assignment,
    /// Whether what it holds changed since its last full heartbeat.
    owned_changed: bool,
    /// Whether it gives up revoked partitions slowly (past its rebalance timeout at times).
    slow: bool,
    /// The last assignment the coordinator gave it.
    assigned: Assignment,
    /// Partitions it is revoking, given up at this time.
    revoking_until: Option<i64>,
    next_heartbeat_ms: i64,
}

struct Sim {
    rng: ChaCha8Rng,
    now_ms: i64,
    topics: TopicImage,
    coord: crate::Coordinator,
    /// Writes that failed so far (the runs must exercise some).
    failed_writes: usize,
    /// Writes (and failed ones) carrying several members' current assignments: heartbeats
    /// batched into one write (the runs must exercise some).
    batched_writes: (usize, usize),
    /// Whether writes may fail in this step (not while quiescing).
    write_faults: bool,
    next_request: u64,
    clients: Vec<Client>,
    /// Every record the coordinator wrote, in order: its log.
    log: Vec<ConsumerRecord>,
    next_client: usize,
    group_epoch_max: i32,
    assignment_epoch_max: i32,
    member_epochs: BTreeMap<String, i32>,
    restarts: usize,
    stable_checks: usize,
    /// What the last check saw: (records written, restarts, partitions clients hold, topics).
    last_checked: Option<(usize, usize, usize, i64)>,
}

fn config() -> ConsumerGroupConfig {
    ConsumerGroupConfig {
        heartbeat_interval_ms: HEARTBEAT_INTERVAL_MS,
        session_timeout_ms: SESSION_TIMEOUT_MS,
        ..ConsumerGroupConfig::default()
    }
}

fn topic_id(index: u8) -> TopicId {
    TopicId([index + 1; 16])
}

impl Sim {
    fn new(seed: u64) -> Self {
        let by_name = [("ta", 3), ("tb", 2), ("tc", 4)]
            .iter()
            .zip(0u8..)
            .map(|((name, partitions), index)| ((*name).to_owned(), (topic_id(index), *partitions)))
            .collect();
        let mut sim = Self {
            rng: ChaCha8Rng::seed_from_u64(seed),
            now_ms: 0,
            topics: TopicImage {
                version: 1,
                by_name,
            },
            coord: io::coordinator(&[]),
            failed_writes: 0,
            batched_writes: (0, 0),
            write_faults: false,
            next_request: 0,
            clients: Vec::new(),
            log: Vec::new(),
            next_client: 0,
            group_epoch_max: 0,
            assignment_epoch_max: 0,
            member_epochs: BTreeMap::new(),
            restarts: 0,
            stable_checks: 0,
            last_checked: None,
        };
        for _ in 0..CLIENTS {
            let client = sim.new_client();
            sim.clients.push(client);
        }
        sim
    }

    fn new_client(&mut self) -> Client {
        self.next_client += 1;
        let n = self.next_client;
        let static_member = self.rng.gen_bool(0.3);
        let (names, pattern) = self.random_subscription();
        Client {
            member_id: format!("member-{n}"),
            instance_id: static_member.then(|| format!("instance-{}", n % CLIENTS)),
            epoch: 0,
            joined: false,
            liveness: Liveness::Alive,
            names,
            pattern,
            subscription_changed: true,
            owned: Assignment::new(),
            owned_changed: false,
            slow: self.rng.gen_bool(0.2),
            assigned: Assignment::new(),
            revoking_until: None,
            next_heartbeat_ms: self.now_ms,
        }
    }

    fn random_subscription(&mut self) -> (Vec<String>, Option<String>) {
        if self.rng.gen_bool(0.3) {
            let pattern = PATTERNS[self.rng.gen_range(0..PATTERNS.len())];
            return (Vec::new(), Some(pattern.to_owned()));
        }
        let all = ["ta", "tb", "tc", "td"];
        let mut names: Vec<String> = all
            .iter()
            .filter(|_| self.rng.gen_bool(0.5))
            .map(|n| (*n).to_owned())
            .collect();
        if names.is_empty() {
            names.push("ta".to_owned());
        }
        (names, None)
    }
}

#[path = "consumer_steps.rs"]
mod steps;

#[path = "consumer_io.rs"]
mod io;

/// What a seed exercised: restarts, Stable checks, failed writes, batched writes (and failed).
type SeedStats = (usize, usize, usize, (usize, usize));

fn run_seed(seed: u64) -> SeedStats {
    let result = std::panic::catch_unwind(|| {
        let mut sim = Sim::new(seed);
        for _ in 0..STEPS {
            sim.step(true);
            sim.check();
        }
        sim.quiesce();
        if std::env::var_os("SKIFF_SIM_STATS").is_some() {
            eprintln!(
                "seed {seed}: restarts {} stable checks {} group epoch {} records {} batched {:?}",
                sim.restarts,
                sim.stable_checks,
                sim.group_epoch_max,
                sim.log.len(),
                sim.batched_writes
            );
        }
        (
            sim.restarts,
            sim.stable_checks,
            sim.failed_writes,
            sim.batched_writes,
        )
    });
    match result {
        Ok(stats) => stats,
        Err(panic) => {
            eprintln!("consumer group simulation failed: SKIFF_SEED={seed}");
            std::panic::resume_unwind(panic);
        }
    }
}

/// Runs `seeds` (or only `SKIFF_SEED` when set, from the first half's test) and checks that they
/// exercised restarts, stable groups, failed writes and batched heartbeats (failed ones too).
fn run_seeds(seeds: std::ops::RangeInclusive<u64>, first_half: bool) {
    if let Some(seed) = std::env::var("SKIFF_SEED")
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
    {
        if first_half {
            run_seed(seed);
        }
        return;
    }
    let count = seeds.clone().count();
    let (restarts, stable_checks, failed_writes, batched) = seeds.map(run_seed).fold(
        (0, 0, 0, (0, 0)),
        |(r, s, f, (b, bf)), (restarts, stable, failed, (batched, batched_failed))| {
            (
                r + restarts,
                s + stable,
                f + failed,
                (b + batched, bf + batched_failed),
            )
        },
    );
    assert!(restarts > 0, "no seed restarted the coordinator");
    assert!(failed_writes > count, "writes seldom failed");
    assert!(stable_checks > count, "the group was seldom stable");
    assert!(batched.0 > count, "heartbeats were seldom batched");
    assert!(batched.1 > 0, "no batched write failed");
}

// The seeds run as two tests so the harness spreads them over two threads.
#[test]
fn consumer_group_simulation_keeps_its_invariants() {
    run_seeds(*SEEDS.start()..=SEEDS.end() / 2, true);
}

#[test]
fn consumer_group_simulation_keeps_its_invariants_more_seeds() {
    run_seeds(SEEDS.end() / 2 + 1..=*SEEDS.end(), false);
}

/// The pieces of a group that its records must rebuild.
fn snapshot(groups: &ConsumerGroups) -> Option<impl PartialEq + std::fmt::Debug> {
    let group = groups.group(GROUP)?;
    let targets: BTreeMap<String, Option<Assignment>> = group
        .members()
        .keys()
        .map(|id| (id.clone(), group.target(id).cloned()))
        .collect();
    Some((
        group.members().clone(),
        group.group_epoch(),
        group.assignment_epoch(),
        targets,
        group.resolved_regexes().clone(),
        group.state(),
    ))
}

fn replay_log(log: &[ConsumerRecord]) -> ConsumerGroups {
    let mut groups = ConsumerGroups::new(config());
    let bytes: Vec<u8> = log
        .chunks(50)
        .flat_map(|chunk| encode_consumer_batch(chunk, 0).expect("encode"))
        .collect();
    let consumed = decode_replayed_batches(&bytes, &mut |item| {
        if let Replayed::Consumer(record) = item {
            groups.replay(&record);
        }
    })
    .expect("decode");
    assert_eq!(consumed, bytes.len());
    groups
}

fn stable(groups: &ConsumerGroups) -> bool {
    groups
        .group(GROUP)
        .is_some_and(|group| group.state() == ConsumerGroupState::Stable)
}

fn all(set: &Assignment) -> BTreeSet<(TopicId, i32)> {
    set.iter()
        .flat_map(|(topic, partitions)| partitions.iter().map(|p| (*topic, *p)))
        .collect()
}

fn request(client: &Client, full: bool) -> HeartbeatRequest {
    let send_subscription = full || client.subscription_changed || client.epoch == epochs::JOIN;
    HeartbeatRequest {
        group_id: GROUP.to_owned(),
        member_id: client.member_id.clone(),
        member_epoch: client.epoch,
        instance_id: client.instance_id.clone(),
        rack_id: None,
        rebalance_timeout_ms: if send_subscription {
            REBALANCE_TIMEOUT_MS
        } else {
            -1
        },
        subscribed_topic_names: send_subscription.then(|| client.names.clone()),
        subscribed_topic_regex: if send_subscription {
            Some(client.pattern.clone().unwrap_or_default())
        } else {
            None
        },
        server_assignor: None,
        topic_partitions: if client.epoch == epochs::JOIN {
            Some(Assignment::new())
        } else {
            (full || send_subscription).then(|| client.owned.clone())
        },
        client_id: "sim".to_owned(),
        client_host: "/127.0.0.1".to_owned(),
        topic_visibility: TopicVisibility::all(),
    }
}
