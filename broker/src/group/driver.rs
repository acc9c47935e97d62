//! The tokio edge of the group coordinator and the producer-id allocator: one task owns the
//! sans-IO [`Coordinator`] and [`ProducerIdAllocator`], takes requests from a bounded channel,
//! reads the clock, sleeps until the coordinator's next deadline, makes committed offsets durable
//! in the internal offsets log and producer-id reservations durable in a small checkpoint file,
//! and hands each reply back through a oneshot channel.
//!
//! Durability: an OffsetCommit is answered only after its records are appended to the log
//! `__consumer_offsets-0` (a log directory of the broker's `LogDir`, never listed in Metadata
//! because it has no topic record) and that log is flushed; at start the whole log is replayed
//! into [`Coordinator::load_offsets`]. A producer-id block is claimed in the metadata store
//! (`crate::cluster::Cluster::claim_producer_id_block`, a compare-and-set that makes it unique
//! across the cluster and durable) before any id of it is handed out; a single-node data
//! directory's older reservation checkpoint, [`PRODUCER_ID_CHECKPOINT_FILE`], is only read, as
//! the floor below which no id is handed out again.
//!
//! Must never: decide group semantics (that is the coordinator's), acknowledge a commit before
//! the flush returned, or queue requests without a bound.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, HeartbeatRequest, InitProducerIdRequest,
    InitProducerIdResponse, JoinGroupRequest, LeaveGroupRequest, ListGroupsRequest,
    OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest, RequestHeader, SyncGroupRequest,
};
use skiff_storage::{DurableFiles, Log};
use tokio::sync::{mpsc, oneshot};

use crate::clock::now_ms;
use crate::group::offsets_log::{self, OffsetLogEntry};
use crate::group::{
    Coordinator, GroupConfig, Output, PersistError, RequestId, RequestMeta, Response,
};
use crate::partition::producer_state::{AllocatorOutput, ProducerIdAllocator};
use crate::partition::topics::{read_batches, Topics};

/// The internal topic name of the offsets log (Kafka's name, so operators recognise it).
pub const OFFSETS_TOPIC: &str = skiff_cluster::topics::OFFSETS_TOPIC;
/// The one partition of the offsets log: every group this broker coordinates (those whose
/// `__consumer_offsets` partition it leads) commits here. With one replica per partition a
/// group's coordinator never moves, so one local log per broker holds exactly its groups;
/// per-partition logs loaded and unloaded with leadership come with replication.
pub const OFFSETS_PARTITION: i32 = 0;
/// File under `log.dirs` where single-node Skiff kept the durable end of its reserved producer-id
/// range; read at start as a floor (ids below it may be in use), never written any more.
pub const PRODUCER_ID_CHECKPOINT_FILE: &str = "producer-id-reserved";
/// Longest producer-id checkpoint file accepted at start (an i64 in decimal plus a newline).
const PRODUCER_ID_CHECKPOINT_BYTES_MAX: u64 = 32;
/// Group and InitProducerId requests waiting for the coordinator task. Every connection has one
/// request in flight, so this only decides when a flood of connections starts to wait.
pub const GROUP_REQUESTS_QUEUED_MAX: usize = 1024;

/// Why the group task could not start.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum GroupDriverError {
    /// The offsets log could not be opened or read.
    #[error("offsets log: {0}")]
    OffsetsLog(String),
    /// The producer-id checkpoint could not be read.
    #[error("producer-id checkpoint {path}: {reason}")]
    ProducerIdCheckpoint {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

/// A request the coordinator task answers.
#[derive(Debug)]
pub(crate) enum GroupRequest {
    JoinGroup(JoinGroupRequest),
    SyncGroup(SyncGroupRequest),
    Heartbeat(HeartbeatRequest),
    LeaveGroup(LeaveGroupRequest),
    OffsetCommit(OffsetCommitRequest),
    OffsetFetch(OffsetFetchRequest),
    DescribeGroups(DescribeGroupsRequest),
    ListGroups(ListGroupsRequest),
    InitProducerId(InitProducerIdRequest),
    DeleteGroups(DeleteGroupsRequest),
    /// With the partitions the handler refused (authorization, unknown topic) and their error.
    OffsetDelete(OffsetDeleteRequest, BTreeMap<(String, i32), i16>),
}

/// The coordinator task's answer.
#[derive(Debug)]
pub(crate) enum GroupReply {
    Group(Response),
    InitProducerId(InitProducerIdResponse),
}

struct Envelope {
    version: i16,
    client_id: String,
    client_host: String,
    request: GroupRequest,
    reply: oneshot::Sender<GroupReply>,
}

/// The handlers' side of the coordinator task.
#[derive(Clone)]
pub(crate) struct GroupHandle {
    requests: mpsc::Sender<Envelope>,
}

impl GroupHandle {
    /// Sends a request and waits for its reply; `None` if the task has stopped (the handler then
    /// answers COORDINATOR_NOT_AVAILABLE, which clients retry).
    pub(crate) async fn call(
        &self,
        header: &RequestHeader,
        request: GroupRequest,
    ) -> Option<GroupReply> {
        let (reply, answer) = oneshot::channel();
        let envelope = Envelope {
            version: header.request_api_version,
            client_id: header
                .client_id
                .as_ref()
                .map(|id| id.as_str().to_owned())
                .unwrap_or_default(),
            // The dispatch does not see the peer address; DescribeGroups reports it empty.
            client_host: String::new(),
            request,
            reply,
        };
        self.requests.send(envelope).await.ok()?;
        answer.await.ok()
    }
}

/// Everything the coordinator task needs, opened before the broker serves.
pub(crate) struct GroupDriver {
    coordinator: Coordinator,
    allocator: ProducerIdAllocator,
    offsets_log: Arc<Log>,
    /// No producer id below this is handed out (the legacy checkpoint's reservation).
    producer_id_floor: i64,
    requests: mpsc::Receiver<Envelope>,
    waiting: BTreeMap<RequestId, oneshot::Sender<GroupReply>>,
    next_request_id: RequestId,
}

/// Replays the offsets log from its start, oldest first. A damaged record stops the replay with an
/// error rather than silently forgetting the offsets after it.
pub fn replay_offsets(log: &Log) -> Result<Vec<OffsetLogEntry>, GroupDriverError> {
    let failed = |error: &dyn std::fmt::Display| GroupDriverError::OffsetsLog(error.to_string());
    let log_end = log.log_end_offset().map_err(|error| failed(&error))?;
    let mut offset = log.log_start_offset().map_err(|error| failed(&error))?;
    let mut entries = Vec::new();
    while offset < log_end {
        let (bytes, next) = read_batches(log, offset).map_err(|error| failed(&error))?;
        offsets_log::decode_batches(&bytes, &mut |entry| entries.push(entry))
            .map_err(|error| failed(&error))?;
        if next <= offset {
            return Err(failed(&format!("no complete batch at offset {offset}")));
        }
        offset = next;
    }
    Ok(entries)
}

/// Reads the durable end of the reserved producer-id range (0 if the file does not exist yet),
/// through the log directory's file operations.
fn read_checkpoint(files: &DurableFiles, path: &Path) -> Result<i64, GroupDriverError> {
    let error = |reason: String| GroupDriverError::ProducerIdCheckpoint {
        path: path.to_owned(),
        reason,
    };
    let Some(bytes) = files
        .read_small(path, PRODUCER_ID_CHECKPOINT_BYTES_MAX)
        .map_err(|other| error(other.to_string()))?
    else {
        return Ok(0);
    };
    let text = String::from_utf8_lossy(&bytes);
    text.trim()
        .parse::<i64>()
        .ok()
        .filter(|end| *end >= 0)
        .ok_or_else(|| error(format!("'{}' is not a producer id", text.trim())))
}

impl GroupDriver {
    /// Opens (or creates) the offsets log in `log_dir`, replays it, reads the producer-id
    /// checkpoint, and returns the task with the handle the handlers use. Blocking: call it where
    /// blocking is allowed.
    pub(crate) fn open(
        log_dir: &skiff_storage::LogDir,
        data_dir: &Path,
        group_config: GroupConfig,
    ) -> Result<(Self, GroupHandle), GroupDriverError> {
        let failed = |error: skiff_storage::Error| GroupDriverError::OffsetsLog(error.to_string());
        let offsets_log = match log_dir
            .log(OFFSETS_TOPIC, OFFSETS_PARTITION)
            .map_err(failed)?
        {
            Some(log) => {
                // Opened with recovery deferred: the coordinator needs it now.
                log.recover_deferred().map_err(failed)?;
                log
            }
            None => log_dir
                .create(OFFSETS_TOPIC, OFFSETS_PARTITION, None)
                .map_err(failed)?,
        };
        let entries = replay_offsets(&offsets_log)?;
        let loaded_count = entries.len();
        let mut coordinator = Coordinator::new(group_config);
        coordinator.load_offsets(entries);
        tracing::info!(
            records = loaded_count,
            committed = coordinator.committed_offsets().len(),
            "offsets log replayed"
        );
        let checkpoint_path = data_dir.join(PRODUCER_ID_CHECKPOINT_FILE);
        let producer_id_floor = read_checkpoint(&log_dir.files(), &checkpoint_path)?;
        let (sender, requests) = mpsc::channel(GROUP_REQUESTS_QUEUED_MAX);
        Ok((
            Self {
                coordinator,
                allocator: ProducerIdAllocator::new(producer_id_floor),
                offsets_log,
                producer_id_floor,
                requests,
                waiting: BTreeMap::new(),
                next_request_id: 0,
            },
            GroupHandle { requests: sender },
        ))
    }

    /// Runs until every handle is dropped (the broker's shared state holds one, so: until the
    /// broker is gone). `topics` answers OffsetCommit's question whether a partition exists.
    pub(crate) async fn run(mut self, topics: Arc<Topics>, cluster: crate::cluster::ClusterHandle) {
        loop {
            let sleep_ms = self
                .coordinator
                .next_deadline_ms()
                .map(|deadline| u64::try_from(deadline.saturating_sub(now_ms())).unwrap_or(0));
            let envelope = match sleep_ms {
                Some(ms) => {
                    tokio::select! {
                        envelope = self.requests.recv() => Some(envelope),
                        () = tokio::time::sleep(std::time::Duration::from_millis(ms)) => None,
                    }
                }
                None => Some(self.requests.recv().await),
            };
            match envelope {
                Some(None) => break,
                Some(Some(envelope)) => {
                    // Which groups are coordinated here follows the image (the leaders of
                    // __consumer_offsets), read as each request comes.
                    self.coordinator.set_coordinated(cluster.coordinated());
                    self.accept(envelope, &topics);
                }
                None => self.coordinator.tick(now_ms()),
            }
            self.drain(&cluster).await;
        }
        tracing::debug!("group coordinator stopped");
    }

    fn accept(&mut self, envelope: Envelope, topics: &Topics) {
        self.next_request_id += 1;
        let request_id = self.next_request_id;
        let meta = RequestMeta {
            request_id,
            version: envelope.version,
            client_id: envelope.client_id,
            client_host: envelope.client_host,
        };
        self.waiting.insert(request_id, envelope.reply);
        let now = now_ms();
        let coordinator = &mut self.coordinator;
        match envelope.request {
            GroupRequest::JoinGroup(request) => coordinator.handle_join_group(now, meta, request),
            GroupRequest::SyncGroup(request) => coordinator.handle_sync_group(now, meta, request),
            GroupRequest::Heartbeat(request) => coordinator.handle_heartbeat(now, meta, request),
            GroupRequest::LeaveGroup(request) => coordinator.handle_leave_group(now, meta, request),
            GroupRequest::OffsetCommit(request) => {
                coordinator.handle_offset_commit(now, meta, request, |topic, partition| {
                    topics
                        .get(topic)
                        .is_some_and(|topic| topic.has_partition(partition))
                })
            }
            GroupRequest::OffsetFetch(request) => coordinator.handle_offset_fetch(meta, request),
            GroupRequest::DescribeGroups(request) => {
                coordinator.handle_describe_groups(meta, request)
            }
            GroupRequest::ListGroups(request) => coordinator.handle_list_groups(meta, request),
            GroupRequest::InitProducerId(request) => {
                self.allocator
                    .handle_init_producer_id(request_id, meta.version, &request)
            }
            GroupRequest::DeleteGroups(request) => coordinator.handle_delete_groups(meta, request),
            GroupRequest::OffsetDelete(request, refused) => {
                coordinator.handle_offset_delete(now, meta, request, |topic, partition| {
                    refused.get(&(topic.to_owned(), partition)).copied()
                })
            }
        }
        // Time passed in; expire whatever is due before answering, so a request never sees a
        // member whose session ended.
        self.coordinator.tick(now);
    }

    /// Acts on every output of the coordinator and the allocator until both are quiet. Disk work
    /// (offsets-log appends and flushes, the producer-id checkpoint) runs on a blocking thread;
    /// this task waits for it, so outputs are still acted on one at a time, in order.
    async fn drain(&mut self, cluster: &crate::cluster::Cluster) {
        loop {
            let mut progressed = false;
            while let Some(output) = self.coordinator.poll_output() {
                progressed = true;
                match output {
                    Output::Reply {
                        request_id,
                        response,
                        ..
                    } => self.send(request_id, GroupReply::Group(response)),
                    Output::PersistOffsets {
                        request_id,
                        commits,
                    } => {
                        let entries = commits
                            .into_iter()
                            .map(|(key, value)| OffsetLogEntry::Commit(key, value))
                            .collect();
                        let result = self.persist(entries).await;
                        if let Err(error) = &result {
                            tracing::error!(%error, "offsets log append failed");
                        }
                        self.coordinator.offsets_persisted(request_id, result);
                    }
                    Output::PersistOffsetDeletes { request_id, keys } => {
                        let entries = keys.into_iter().map(OffsetLogEntry::Delete).collect();
                        let result = self.persist(entries).await;
                        if let Err(error) = &result {
                            tracing::error!(%error, "offsets log tombstone append failed");
                        }
                        self.coordinator.deletes_persisted(request_id, result);
                    }
                }
            }
            while let Some(output) = self.allocator.poll_output() {
                progressed = true;
                match output {
                    AllocatorOutput::Reply {
                        request_id,
                        response,
                        ..
                    } => self.send(request_id, GroupReply::InitProducerId(response)),
                    AllocatorOutput::ClaimBlock { at_least } => {
                        let at_least = at_least.max(self.producer_id_floor);
                        let claimed = cluster.claim_producer_id_block(at_least).await;
                        if let Err(error) = &claimed {
                            tracing::error!(%error, "producer-id block claim failed");
                        }
                        self.allocator.block_claimed(at_least, claimed.ok());
                    }
                }
            }
            if !progressed {
                break;
            }
        }
    }

    fn send(&mut self, request_id: RequestId, reply: GroupReply) {
        if let Some(sender) = self.waiting.remove(&request_id) {
            // The connection may have gone meanwhile; its reply is then dropped.
            let _ = sender.send(reply);
        }
    }

    /// Appends commits or tombstones to the offsets log and flushes it, on a blocking thread.
    async fn persist(&self, entries: Vec<OffsetLogEntry>) -> Result<(), PersistError> {
        let log = self.offsets_log.clone();
        let written = tokio::task::spawn_blocking(move || append_durably(&log, &entries, now_ms()));
        written.await.unwrap_or(Err(PersistError::Failed))
    }
}

/// Appends `entries` to the offsets log and flushes it (fsync, whatever the broker's
/// `log.flush.interval.*`: the log has the default `LogConfig`, `PersistMode::SyncData`). `Ok`
/// only once the flush returned, which is what lets the coordinator acknowledge the commit. The
/// one write path of the offsets log; blocking.
fn append_durably(log: &Log, entries: &[OffsetLogEntry], now_ms: i64) -> Result<(), PersistError> {
    let batches =
        offsets_log::encode_batches(entries, now_ms).map_err(|_| PersistError::TooLarge)?;
    for mut batch in batches {
        log.append(&mut batch, now_ms)
            .map_err(|error| match error {
                skiff_storage::Error::BatchTooLarge { .. } => PersistError::TooLarge,
                _ => PersistError::Failed,
            })?;
    }
    log.flush().map_err(|_| PersistError::Failed)
}

/// The coordinator's configuration from the broker's.
pub(crate) fn group_config(config: &crate::config::Config) -> GroupConfig {
    // Differs per start, so member ids from before a restart are never handed out again.
    let salt = u64::try_from(now_ms()).unwrap_or(0);
    let mut group = GroupConfig::new(salt);
    group.session_timeout_ms_min = config.group_min_session_timeout_ms;
    group.session_timeout_ms_max = config.group_max_session_timeout_ms;
    group.initial_rebalance_delay_ms = config.group_initial_rebalance_delay_ms;
    group
}

#[cfg(test)]
mod power_loss;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::{OffsetKey, OffsetValue};

    fn commit(partition: i32, offset: i64) -> OffsetLogEntry {
        OffsetLogEntry::Commit(
            OffsetKey {
                group: "g".into(),
                topic: "t".into(),
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

    #[test]
    fn offsets_log_replays_what_was_appended_across_a_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let written: Vec<OffsetLogEntry> = (0..50)
            .map(|index| commit(index % 3, index.into()))
            .collect();
        {
            let log_dir =
                skiff_storage::LogDir::open(dir.path(), skiff_storage::LogConfig::default())
                    .expect("open");
            let log = log_dir
                .create(OFFSETS_TOPIC, OFFSETS_PARTITION, None)
                .expect("create");
            for chunk in written.chunks(7) {
                for mut batch in offsets_log::encode_batches(chunk, 1).expect("encode") {
                    log.append(&mut batch, 1).expect("append");
                }
            }
            log.flush().expect("flush");
            // No clean close: what was flushed must come back after recovery.
        }
        let log_dir = skiff_storage::LogDir::open(dir.path(), skiff_storage::LogConfig::default())
            .expect("reopen");
        let log = log_dir
            .log(OFFSETS_TOPIC, OFFSETS_PARTITION)
            .expect("log")
            .expect("present");
        assert_eq!(replay_offsets(&log).expect("replay"), written);
    }

    #[test]
    fn producer_id_checkpoint_round_trips_and_refuses_garbage() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(PRODUCER_ID_CHECKPOINT_FILE);
        let files = DurableFiles::real();
        assert_eq!(read_checkpoint(&files, &path).expect("missing is 0"), 0);
        std::fs::write(&path, "3000\n").expect("write");
        assert_eq!(read_checkpoint(&files, &path).expect("read"), 3000);
        std::fs::write(&path, "-5\n").expect("write");
        assert!(read_checkpoint(&files, &path).is_err());
        std::fs::write(&path, "x".repeat(100)).expect("write");
        assert!(read_checkpoint(&files, &path).is_err());
    }
}
