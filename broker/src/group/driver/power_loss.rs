//! The broker's durable state under simulated power cuts: the group coordinator commits offsets
//! through the driver's own write path ([`append_durably`] to each group's `__consumer_offsets`
//! partition log, then the replay that loads a partition, [`replay_offsets`]), topic metadata is
//! saved through [`MaterializedTopicsFile`] and the node identity through `cluster::identity`, all
//! on a data directory opened with `skiff_storage::sim::SimIo`, as `Broker::start` opens it
//! (`LogDir` with the default `LogConfig` but for smaller segments and indexes, the other files
//! through `LogDir::files`). Seeded faults: a later fsync fails (EIO), or every operation after
//! some point fails (the machine stops mid-write). Then the power is cut (drop everything unsynced,
//! tear the last write at a sector, or keep random pages and directory changes) and the broker's
//! state is opened again on the same disk. After every restart:
//! - every acknowledged commit is there: a key's offset is its last acknowledged one, or one of
//!   the commits attempted after it whose answer was an error (those may or may not be durable);
//!   nothing else, and never an offset that was not committed;
//! - once a commit failed, no later commit of that run is acknowledged (a failed fsync poisons);
//! - the topic metadata is the last acknowledged save or a later failed one, never a mix;
//! - the node identity, once written, never changes.
//!
//! The offsets logs are synced before every answer whatever `log.flush.interval.messages` says
//! (`Log::sync`), so the promise holds with the broker's default flush settings, under which the
//! partition logs are opened `PersistMode::Buffer` as the topics open them, as well as with `=1`;
//! the seeds alternate between the two to show it.
//!
//! CI runs [`CI_SEEDS`] seeds; `SKIFF_POWER_SEEDS=N` runs N and
//! `SKIFF_SEED=<seed>` replays one. A failing seed prints itself.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{GroupId, OffsetCommitRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use skiff_group::{Coordinated, GroupConfig, OffsetLogEntry, Output, RequestMeta, Response};
use skiff_storage::sim::{CutMode, SimIo};
use skiff_storage::{LogConfig, LogDir, PersistMode};

use super::{append_as_leader, group_keys, replay_offsets, GroupDriver, OFFSETS_TOPIC};
use crate::cluster::identity;
use crate::partition::materialized::{MaterializedTopicsFile, TopicRecord};

/// Seeds `cargo test` runs.
const CI_SEEDS: u64 = 200;
/// Restarts (power cuts) per seed.
const CUTS_PER_SEED: usize = 4;
/// Groups and partitions the commits spread over.
const GROUPS: [&str; 3] = ["g0", "g1", "g2"];
const PARTITIONS: i32 = 4;
/// Partitions of `__consumer_offsets`: the groups' commits go to different logs.
const OFFSETS_PARTITIONS: i32 = 3;
const TOPIC: &str = "orders";

type Key = (String, String, i32);

/// Commits answered with an error under the injected faults, over all seeds.
static FAILED_COMMITS: AtomicU64 = AtomicU64::new(0);
/// Partition commits answered with success, across seeds (a run where none is would prove nothing).
static ACKNOWLEDGED_COMMITS: AtomicU64 = AtomicU64::new(0);

/// What the clients were told, and what they may find after a cut.
#[derive(Default)]
struct Model {
    /// The last acknowledged offset of each key.
    acknowledged: BTreeMap<Key, i64>,
    /// Offsets committed after the last acknowledgement whose answer was an error.
    unanswered: BTreeMap<Key, Vec<i64>>,
    /// Next offset to commit per key (commits only move forward, so every value is unique).
    next_offset: BTreeMap<Key, i64>,
    /// The last acknowledged topic metadata, and later saves that failed.
    topics_saved: Vec<TopicRecord>,
    topics_unanswered: Vec<Vec<TopicRecord>>,
    directory_id: Option<String>,
}

fn string(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

fn group_config() -> GroupConfig {
    GroupConfig::new(group_keys(&crate::config::Config::default()), 7)
}

/// Opens the data directory as `Broker::start` does, on the simulated disk. The default
/// `LogConfig` (its persist mode, no flush policy) but for sizes: small segments so the offsets
/// log rolls within a seed, and small indexes because the simulation copies whole files at every
/// fsync and cut.
fn open(data: &Path, sim: &Arc<SimIo>) -> (LogDir, GroupDriver) {
    let config = LogConfig {
        segment_bytes: 16 * 1024,
        batch_bytes_max: 16 * 1024,
        index_bytes_max: 4096,
        ..LogConfig::default()
    };
    let log_dir = LogDir::open_simulated(data, config.clone(), sim.clone()).expect("log dir opens");
    let (mut driver, _handle) =
        GroupDriver::open(&log_dir, data, group_config(), 1_000).expect("driver opens");
    // As the materializer opens the topic's logs without a flush policy, and the task loads
    // every partition it leads.
    let partition_config = LogConfig {
        persist_mode: PersistMode::Buffer,
        ..config
    };
    driver.coordinator.set_coordinated(Coordinated {
        partitions: OFFSETS_PARTITIONS,
        led: (0..OFFSETS_PARTITIONS).collect(),
    });
    for partition in 0..OFFSETS_PARTITIONS {
        let log = match log_dir.log(OFFSETS_TOPIC, partition).expect("log") {
            Some(log) => log,
            None => log_dir
                .create(OFFSETS_TOPIC, partition, Some(partition_config.clone()))
                .expect("create"),
        };
        log.set_config(partition_config.clone()).expect("config");
        log.recover_deferred().expect("recover");
        let (entries, bytes) = replay_offsets(&log).expect("offsets log replays");
        let led = crate::partition::topics::Partition::led_alone(partition, log);
        driver.install(partition, led, 0, entries, bytes);
    }
    (log_dir, driver)
}

/// One OffsetCommit of a simple consumer (no member, generation −1) for `offsets`.
fn commit_request(group: &str, offsets: &[(i32, i64)]) -> OffsetCommitRequest {
    let mut topic = OffsetCommitRequestTopic::default();
    topic.name = TopicName(string(TOPIC));
    for (partition, offset) in offsets {
        let mut entry = OffsetCommitRequestPartition::default();
        entry.partition_index = *partition;
        entry.committed_offset = *offset;
        entry.committed_metadata = Some(string("m"));
        topic.partitions.push(entry);
    }
    let mut request = OffsetCommitRequest::default();
    request.group_id = GroupId(string(group));
    request.generation_id_or_member_epoch = -1;
    request.member_id = string("");
    request.topics = vec![topic];
    request
}

/// Sends one commit through the coordinator and acts on its outputs as the driver does; returns
/// the per-partition error codes of the answer.
fn commit(
    driver: &mut GroupDriver,
    request_id: i64,
    now_ms: i64,
    request: OffsetCommitRequest,
) -> BTreeMap<i32, i16> {
    let meta = RequestMeta {
        request_id: request_id.try_into().expect("request id"),
        version: 8,
        client_id: "power-loss".into(),
        client_host: String::new(),
    };
    driver
        .coordinator
        .handle_offset_commit(now_ms, meta, request, |_, _| true);
    let mut codes = BTreeMap::new();
    while let Some(output) = driver.coordinator.poll_output() {
        match output {
            Output::PersistOffsets {
                request_id,
                commits,
            } => {
                let entries: Vec<_> = commits
                    .into_iter()
                    .map(|(key, value)| OffsetLogEntry::Commit(key, value))
                    .collect();
                let partition = driver
                    .coordinator
                    .offsets_partition(entries_group(&entries));
                // The driver's write path: as the partition's leader, alone in its ISR.
                let led = &driver.logs[&partition].partition;
                let (proposals, _queued) = crate::partition::replica::proposal_channel();
                let result = append_as_leader(led, (&entries, None), (now_ms, 1_000), &proposals)
                    .map(|mut wait| {
                        assert_eq!(wait.try_recv(), Ok(None), "the HW passed it at once");
                    });
                driver.coordinator.offsets_persisted(request_id, result);
            }
            Output::Reply {
                response: Response::OffsetCommit(response),
                ..
            } => {
                for topic in response.topics {
                    for partition in topic.partitions {
                        codes.insert(partition.partition_index, partition.error_code);
                    }
                }
            }
            other => panic!("unexpected output {other:?}"),
        }
    }
    codes
}

/// The group of one OffsetCommit's entries (a commit is for one group).
fn entries_group(entries: &[OffsetLogEntry]) -> &str {
    match entries.first() {
        Some(OffsetLogEntry::Commit(key, _)) | Some(OffsetLogEntry::Delete(key)) => &key.group,
        None => "",
    }
}

fn check_after_restart(model: &mut Model, driver: &GroupDriver, store: &MaterializedTopicsFile) {
    let recovered = driver.coordinator.committed_offsets();
    let keys: std::collections::BTreeSet<Key> = recovered
        .keys()
        .chain(model.acknowledged.keys())
        .chain(model.unanswered.keys())
        .cloned()
        .collect();
    for key in keys {
        let found = recovered.get(&key).copied();
        let acknowledged = model.acknowledged.get(&key).copied();
        let unanswered = model.unanswered.remove(&key).unwrap_or_default();
        let allowed = found == acknowledged || found.is_some_and(|at| unanswered.contains(&at));
        assert!(
            allowed,
            "{key:?}: found {found:?} after the cut, acknowledged {acknowledged:?}, \
             unanswered {unanswered:?}"
        );
        // Whatever came back is durable now (the cut rewrote the disk to what survived).
        match found {
            Some(offset) => model.acknowledged.insert(key, offset),
            None => model.acknowledged.remove(&key),
        };
    }
    let topics = store
        .load()
        .expect("topic metadata loads after a cut")
        .topics;
    let unanswered = std::mem::take(&mut model.topics_unanswered);
    assert!(
        topics == model.topics_saved || unanswered.contains(&topics),
        "topic metadata after the cut: {} topics, acknowledged {}",
        topics.len(),
        model.topics_saved.len()
    );
    model.topics_saved = topics;
}

fn topic_record(index: usize) -> TopicRecord {
    TopicRecord {
        name: format!("t{index}"),
        topic_id: format!("{index:032x}"),
        replicas: vec![vec![1]; 1 + index % 3],
        configs: BTreeMap::from([("flush.messages".to_owned(), "1".to_owned())]),
    }
}

/// One seed: [`CUTS_PER_SEED`] runs, each ending in a power cut. Returns the commits made.
fn run_seed(seed: u64) -> u64 {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    let sim = Arc::new(SimIo::new(root.path()).expect("sim"));
    let mut model = Model::default();
    let mut request_id = 0i64;
    let mut commits = 0u64;
    let mut now_ms = 1_700_000_000_000i64;
    for run in 0..CUTS_PER_SEED {
        let (log_dir, mut driver) = open(&data, &sim);
        let files = log_dir.files();
        let store = MaterializedTopicsFile::new(&data, files.clone());
        if run > 0 {
            check_after_restart(&mut model, &driver, &store);
        }
        match identity::load_or_create(&data, &files, 1) {
            Ok(found) => match &model.directory_id {
                Some(directory_id) => assert_eq!(&found.directory_id, directory_id),
                None => model.directory_id = Some(found.directory_id),
            },
            // Only reached before the first identity became durable (faults are armed below).
            Err(error) => panic!("identity: {error}"),
        }
        match rng.gen_range(0..4) {
            0 => sim.fail_syncs_after(rng.gen_range(0..30)),
            1 => sim.crash_after_ops(rng.gen_range(0..400)),
            _ => {}
        }
        let mut failed = false;
        for _ in 0..rng.gen_range(5..40) {
            now_ms += rng.gen_range(0..50);
            if rng.gen_range(0..8) == 0 {
                let mut topics = model.topics_saved.clone();
                topics.push(topic_record(topics.len()));
                match store.save(&topics) {
                    Ok(()) => {
                        model.topics_saved = topics;
                        model.topics_unanswered.clear();
                    }
                    Err(_) => model.topics_unanswered.push(topics),
                }
                continue;
            }
            let group = GROUPS[rng.gen_range(0..GROUPS.len())];
            let mut offsets = Vec::new();
            for partition in 0..PARTITIONS {
                if rng.gen_bool(0.5) {
                    let key = (group.to_owned(), TOPIC.to_owned(), partition);
                    let next = model.next_offset.entry(key).or_insert(0);
                    *next += rng.gen_range(1..1000);
                    offsets.push((partition, *next));
                }
            }
            if offsets.is_empty() {
                continue;
            }
            request_id += 1;
            commits += 1;
            let codes = commit(
                &mut driver,
                request_id,
                now_ms,
                commit_request(group, &offsets),
            );
            for (partition, offset) in offsets {
                let key = (group.to_owned(), TOPIC.to_owned(), partition);
                let code = codes.get(&partition).copied();
                if code == Some(0) {
                    assert!(!failed, "{key:?} acknowledged after a failed commit");
                    model.acknowledged.insert(key.clone(), offset);
                    model.unanswered.remove(&key);
                    ACKNOWLEDGED_COMMITS.fetch_add(1, Ordering::Relaxed);
                } else {
                    assert!(code.is_some(), "{key:?} has an answer");
                    failed = true;
                    FAILED_COMMITS.fetch_add(1, Ordering::Relaxed);
                    model.unanswered.entry(key).or_default().push(offset);
                }
            }
        }
        drop(store);
        drop(files);
        drop(driver);
        // No clean close: the cut comes with the logs as they are.
        drop(log_dir);
        let mode = [
            CutMode::DropUnsynced,
            CutMode::TearLastWrite,
            CutMode::RandomPages,
        ][rng.gen_range(0..3)];
        sim.power_cut(mode, rng.gen()).expect("power cut");
    }
    let (log_dir, driver) = open(&data, &sim);
    let store = MaterializedTopicsFile::new(&data, log_dir.files());
    check_after_restart(&mut model, &driver, &store);
    commits
}

#[test]
fn acknowledged_commits_and_topic_metadata_survive_power_cuts() {
    let seeds = skiff_storage::sim::seeds(CI_SEEDS, &[]);
    let mut commits = 0;
    for seed in &seeds {
        match catch_unwind(AssertUnwindSafe(|| run_seed(*seed))) {
            Ok(count) => commits += count,
            Err(panic) => {
                eprintln!("broker power_loss: seed {seed} failed; replay with SKIFF_SEED={seed}");
                std::panic::resume_unwind(panic);
            }
        }
    }
    eprintln!(
        "broker power_loss: {} seeds, {} power cuts, {commits} commits, {} partition commits \
         answered with an error under injected faults",
        seeds.len(),
        seeds.len() * CUTS_PER_SEED,
        FAILED_COMMITS.load(Ordering::Relaxed)
    );
    assert!(
        ACKNOWLEDGED_COMMITS.load(Ordering::Relaxed) > FAILED_COMMITS.load(Ordering::Relaxed),
        "most commits must be acknowledged for the check to mean anything"
    );
}
