//! The tokio edge of the transaction coordinator: one task owns the sans-IO
//! [`Coordinator`], takes requests from a bounded channel, reads the clock, sleeps until the
//! coordinator's next deadline, makes state records durable in `__transaction_state`, claims
//! producer-id blocks in the metadata store, starts the marker writers, and hands each reply back
//! through a oneshot channel.
//!
//! State log: a transactional id's records go to its `__transaction_state` partition, a
//! compacted internal topic created on the first FindCoordinator for a transactional id. The task
//! follows this broker's leaderships of that topic (the image, read after every materializer
//! pass): a newly led partition is told to the coordinator ([`Coordinator::partition_led`], the
//! leader epoch being the coordinator epoch), its log replayed on a blocking thread and handed to
//! [`Coordinator::load_partition`]; a partition led elsewhere now, or at another epoch, is
//! unloaded.
//!
//! Durability: a record is appended through the partition's writer seam as its leader
//! (`Partition::admit_produce` then `append_as_leader` with `AppendOrigin::Coordinator`, acks=all,
//! refused when the partition's leader epoch is not the coordinator epoch) and
//! [`Coordinator::persisted`] is called only once the high watermark passed it: every in-sync
//! replica holds it. The wait runs beside the task, so other ids are served meanwhile.
//!
//! Producer ids: every producer id (idempotent and transactional) comes from a block claimed in
//! the metadata store (`Cluster::claim_producer_id_block`, a compare-and-set that makes it unique
//! across the cluster and durable) before any id of it is handed out; a single-node data
//! directory's older reservation checkpoint, [`PRODUCER_ID_CHECKPOINT_FILE`], is only read, as the
//! floor below which no id is handed out again.
//!
//! Must never: decide transaction semantics, acknowledge a state change before the HW passed its
//! record, write an id's record to another partition or to one it does not lead at the
//! coordinator epoch, or queue requests without a bound.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use skiff_cluster::replica::Acks;
use skiff_cluster::topics::TRANSACTION_STATE_TOPIC;
use skiff_protocol::error_code::ErrorCode;
use skiff_storage::{DurableFiles, Log};
use skiff_txn::log::{self as state_log, TxnLogRecord};
use skiff_txn::{
    AddPartitions, Coordinator, EndTxn, InitProducerId, ListFilters, Output, PersistError,
    PersistId, RequestId, RequestMeta, Response, TxnConfig,
};
use tokio::sync::{mpsc, oneshot};

use super::markers::{MarkerJob, MarkerWriter};
use crate::clock::now_ms;
use crate::partition::partition::{AppendOrigin, LeaderAppend};
use crate::partition::replica::{ProposalSender, ReplicationWait};
use crate::partition::topics::{read_batches, Partition, Topics};

/// File under `log.dirs` where single-node Skiff kept the durable end of its reserved producer-id
/// range; read at start as a floor (ids below it may be in use), never written any more.
pub const PRODUCER_ID_CHECKPOINT_FILE: &str = "producer-id-reserved";
/// Longest producer-id checkpoint file accepted at start (an i64 in decimal plus a newline).
const PRODUCER_ID_CHECKPOINT_BYTES_MAX: u64 = 32;
/// Transaction and InitProducerId requests waiting for the coordinator task. Every connection has
/// one request in flight, so this only decides when a flood of connections starts to wait.
pub const TXN_REQUESTS_QUEUED_MAX: usize = 1024;
/// Pause before a partition whose log could not be replayed is tried again.
const LOAD_RETRY_MS: i64 = 5_000;

/// Why the transaction task could not start.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum TxnDriverError {
    /// The producer-id checkpoint could not be read.
    #[error("producer-id checkpoint {path}: {reason}")]
    ProducerIdCheckpoint {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A `__transaction_state` partition could not be read.
    #[error("transaction state log: {0}")]
    StateLog(String),
}

/// A request the coordinator task answers (the handlers' decoded and authorized form).
#[derive(Debug)]
pub(crate) enum TxnRequest {
    InitProducerId(InitProducerId),
    AddPartitions(AddPartitions),
    VerifyPartitions(AddPartitions),
    AddOffsets {
        request: AddPartitions,
        group_id: String,
        offsets_partitions: i32,
    },
    EndTxn(EndTxn),
    Describe(Vec<String>),
    List(ListFilters),
}

struct Envelope {
    version: i16,
    request: TxnRequest,
    reply: oneshot::Sender<Response>,
}

/// The handlers' side of the coordinator task.
#[derive(Clone)]
pub(crate) struct TxnHandle {
    requests: mpsc::Sender<Envelope>,
}

impl TxnHandle {
    /// Sends a request and waits for its reply; `None` if the task has stopped (the handler then
    /// answers COORDINATOR_NOT_AVAILABLE, which clients retry).
    pub(crate) async fn call(&self, version: i16, request: TxnRequest) -> Option<Response> {
        let (reply, answer) = oneshot::channel();
        let envelope = Envelope {
            version,
            request,
            reply,
        };
        self.requests.send(envelope).await.ok()?;
        answer.await.ok()
    }
}

/// What finished beside the task.
#[derive(Debug)]
pub(crate) enum Event {
    /// A state record's HW wait ended.
    Persisted(PersistId, Result<(), PersistError>),
    /// Every partition of a transaction has its marker.
    MarkersWritten {
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
    },
}

/// The replica of a loaded state partition.
struct LoadedLog {
    partition: Arc<Partition>,
    leader_epoch: i32,
}

/// Everything the coordinator task needs, opened before the broker serves.
pub(crate) struct TxnDriver {
    coordinator: Coordinator,
    logs: BTreeMap<i32, LoadedLog>,
    load_retry_at_ms: BTreeMap<i32, i64>,
    /// No producer id below this is handed out: the legacy checkpoint's reservation, then the
    /// end of the last block claimed.
    producer_id_floor: i64,
    /// How long a state append waits for its in-sync replicas.
    append_timeout_ms: u64,
    requests: mpsc::Receiver<Envelope>,
    waiting: BTreeMap<RequestId, oneshot::Sender<Response>>,
    next_request_id: RequestId,
    /// Ends of HW waits and of marker writes. Unbounded on purpose: each is one in-flight record
    /// or transaction end, at most one per transactional id, and the ids are bounded
    /// (`skiff.transactional.ids.max`).
    events: (mpsc::UnboundedSender<Event>, mpsc::UnboundedReceiver<Event>),
    /// Whether the session was provably alive when leadership was last followed: a request
    /// arriving after it lapsed (or came back) follows leadership again before it is answered.
    session_alive: bool,
}

/// Reads the durable end of the legacy reserved producer-id range (0 if the file does not
/// exist), through the log directory's file operations.
fn read_checkpoint(files: &DurableFiles, path: &Path) -> Result<i64, TxnDriverError> {
    let error = |reason: String| TxnDriverError::ProducerIdCheckpoint {
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

/// Replays a state partition's log from its start, oldest first. A damaged record stops the
/// replay with an error rather than silently forgetting the transactions after it.
pub fn replay_state_log(log: &Log) -> Result<Vec<TxnLogRecord>, TxnDriverError> {
    let failed = |error: &dyn std::fmt::Display| TxnDriverError::StateLog(error.to_string());
    let log_end = log.log_end_offset().map_err(|error| failed(&error))?;
    let mut offset = log.log_start_offset().map_err(|error| failed(&error))?;
    let mut records = Vec::new();
    while offset < log_end {
        let (bytes, next) = read_batches(log, offset).map_err(|error| failed(&error))?;
        state_log::decode_batches(&bytes, &mut |record| records.push(record))
            .map_err(|error| failed(&error))?;
        if next <= offset {
            return Err(failed(&format!("no complete batch at offset {offset}")));
        }
        offset = next;
    }
    Ok(records)
}

/// The coordinator's configuration from the broker's.
pub(crate) fn txn_config(config: &crate::config::Config) -> TxnConfig {
    TxnConfig {
        max_timeout_ms: config.transaction_max_timeout_ms,
        id_expiration_ms: config.transactional_id_expiration_ms,
        abort_timed_out_interval_ms: config.transaction_abort_timed_out_interval_ms,
        remove_expired_interval_ms: config.transaction_remove_expired_interval_ms,
        state_log_partitions: config.transaction_state_log_num_partitions,
        transactional_ids_max: usize::try_from(config.transactional_ids_max).unwrap_or(usize::MAX),
        partitions_per_transaction_max: usize::try_from(config.transaction_partitions_max)
            .unwrap_or(usize::MAX),
        // The level ApiVersions finalizes: state values in version 1 from level 2 on, as Kafka.
        transaction_version: skiff_protocol::responses::TransactionVersion::servable_max() as i16,
    }
}

impl TxnDriver {
    /// Reads the producer-id checkpoint and returns the task with the handle the handlers use.
    /// Blocking: call it where blocking is allowed.
    pub(crate) fn open(
        log_dir: &skiff_storage::LogDir,
        data_dir: &Path,
        config: TxnConfig,
        append_timeout_ms: u64,
    ) -> Result<(Self, TxnHandle), TxnDriverError> {
        let checkpoint_path = data_dir.join(PRODUCER_ID_CHECKPOINT_FILE);
        let producer_id_floor = read_checkpoint(&log_dir.files(), &checkpoint_path)?;
        let (sender, requests) = mpsc::channel(TXN_REQUESTS_QUEUED_MAX);
        Ok((
            Self {
                coordinator: Coordinator::new(config),
                logs: BTreeMap::new(),
                load_retry_at_ms: BTreeMap::new(),
                producer_id_floor,
                append_timeout_ms,
                requests,
                waiting: BTreeMap::new(),
                next_request_id: 0,
                events: mpsc::unbounded_channel(),
                session_alive: false,
            },
            TxnHandle { requests: sender },
        ))
    }

    /// Runs until every handle is dropped (the broker's shared state holds one, so: until the
    /// broker is gone).
    pub(crate) async fn run(
        mut self,
        topics: Arc<Topics>,
        cluster: crate::cluster::ClusterHandle,
        proposals: ProposalSender,
        markers: MarkerWriter,
    ) {
        let mut image_changes = Some(cluster.materialized_changes());
        self.follow_leadership(&topics, &cluster).await;
        self.drain(&cluster, &proposals, &markers).await;
        loop {
            let now = now_ms();
            let deadline = std::iter::once(self.coordinator.next_deadline_ms())
                .chain(self.load_retry_at_ms.values().copied())
                .min()
                .unwrap_or(now);
            let sleep_ms = u64::try_from(deadline.saturating_sub(now)).unwrap_or(0);
            let image_changed = async {
                match image_changes.as_mut() {
                    Some(changes) => changes.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                Some(event) = self.events.1.recv() => self.on_event(event),
                envelope = self.requests.recv() => match envelope {
                    Some(envelope) => {
                        let image_moved = image_changes.as_mut().is_some_and(|changes| {
                            let moved = changes.has_changed().unwrap_or(false);
                            changes.borrow_and_update();
                            moved
                        });
                        // A lapsed (or restored) session unloads (or loads) before answering
                        // from what was loaded, as the group coordinator does.
                        if image_moved || cluster.may_lead() != self.session_alive {
                            self.follow_leadership(&topics, &cluster).await;
                        }
                        self.accept(envelope);
                    }
                    None => break,
                },
                still_watching = image_changed => {
                    if !still_watching {
                        image_changes = None;
                    }
                    self.follow_leadership(&topics, &cluster).await;
                }
                () = tokio::time::sleep(std::time::Duration::from_millis(sleep_ms)) => {
                    self.coordinator.tick(now_ms());
                    if !self.load_retry_at_ms.is_empty() {
                        self.follow_leadership(&topics, &cluster).await;
                    }
                }
            }
            self.drain(&cluster, &proposals, &markers).await;
        }
        tracing::debug!("transaction coordinator stopped");
    }

    fn on_event(&mut self, event: Event) {
        match event {
            Event::Persisted(persist_id, result) => {
                if let Err(error) = &result {
                    tracing::warn!(%error, "transaction state record not replicated");
                }
                self.coordinator.persisted(now_ms(), persist_id, result);
            }
            Event::MarkersWritten {
                transactional_id,
                producer_id,
                producer_epoch,
                coordinator_epoch,
            } => self.coordinator.markers_written(
                now_ms(),
                &transactional_id,
                producer_id,
                producer_epoch,
                coordinator_epoch,
            ),
        }
    }

    /// Follows this broker's leaderships of `__transaction_state`: unloads the partitions no
    /// longer led (or led at another epoch), loads those newly led (one at a time, on a blocking
    /// thread). Nothing is led while the session is not provably alive (`led_partitions`).
    async fn follow_leadership(&mut self, topics: &Arc<Topics>, cluster: &crate::cluster::Cluster) {
        self.session_alive = cluster.may_lead();
        let (count, led) = cluster.led_partitions(TRANSACTION_STATE_TOPIC);
        self.coordinator.set_state_log_partitions(count);
        for (partition, epoch, _) in self.coordinator.led_partitions() {
            if led.get(&partition) != Some(&epoch) {
                self.coordinator.unload_partition(partition);
                self.logs.remove(&partition);
            }
        }
        self.logs
            .retain(|partition, loaded| led.get(partition) == Some(&loaded.leader_epoch));
        let now = now_ms();
        for (partition, leader_epoch) in led {
            let loaded = self.logs.contains_key(&partition);
            let retry_later = self
                .load_retry_at_ms
                .get(&partition)
                .is_some_and(|at| *at > now);
            if loaded || retry_later {
                continue;
            }
            let Some(replica) = topics
                .get(TRANSACTION_STATE_TOPIC)
                .and_then(|topic| topic.partition(partition).cloned())
            else {
                continue; // led but not materialized yet: the next pass wakes this task
            };
            self.coordinator.partition_led(partition, leader_epoch);
            self.load(partition, leader_epoch, replica, now).await;
        }
    }

    async fn load(&mut self, partition: i32, leader_epoch: i32, replica: Arc<Partition>, now: i64) {
        let replaying = replica.log().clone();
        let replayed = tokio::task::spawn_blocking(move || {
            replaying
                .recover_deferred()
                .map_err(|error| TxnDriverError::StateLog(error.to_string()))?;
            replay_state_log(&replaying)
        })
        .await
        .unwrap_or_else(|join| Err(TxnDriverError::StateLog(join.to_string())));
        match replayed {
            Ok(records) => {
                self.load_retry_at_ms.remove(&partition);
                let count = records.len();
                self.coordinator
                    .load_partition(now_ms(), partition, leader_epoch, records);
                tracing::info!(
                    partition,
                    records = count,
                    leader_epoch,
                    "transaction state partition loaded"
                );
                self.logs.insert(
                    partition,
                    LoadedLog {
                        partition: replica,
                        leader_epoch,
                    },
                );
            }
            Err(error) => {
                tracing::error!(partition, %error, "transaction state partition cannot be loaded; retrying");
                self.coordinator.unload_partition(partition);
                self.load_retry_at_ms
                    .insert(partition, now.saturating_add(LOAD_RETRY_MS));
            }
        }
    }

    fn accept(&mut self, envelope: Envelope) {
        self.next_request_id += 1;
        let meta = RequestMeta {
            request_id: self.next_request_id,
            version: envelope.version,
        };
        self.waiting.insert(meta.request_id, envelope.reply);
        let now = now_ms();
        let coordinator = &mut self.coordinator;
        match envelope.request {
            TxnRequest::InitProducerId(request) => {
                coordinator.handle_init_producer_id(now, meta, request)
            }
            TxnRequest::AddPartitions(request) => {
                coordinator.handle_add_partitions(now, meta, request)
            }
            TxnRequest::VerifyPartitions(request) => {
                coordinator.handle_verify_partitions(meta, request)
            }
            TxnRequest::AddOffsets {
                request,
                group_id,
                offsets_partitions,
            } => coordinator.handle_add_offsets(now, meta, request, &group_id, offsets_partitions),
            TxnRequest::EndTxn(request) => coordinator.handle_end_txn(now, meta, request),
            TxnRequest::Describe(ids) => coordinator.handle_describe(meta, ids),
            TxnRequest::List(filters) => coordinator.handle_list(now, meta, filters),
        }
    }

    /// Acts on every output of the coordinator until it is quiet, in order.
    async fn drain(
        &mut self,
        cluster: &crate::cluster::Cluster,
        proposals: &ProposalSender,
        markers: &MarkerWriter,
    ) {
        while let Some(output) = self.coordinator.poll_output() {
            match output {
                Output::Reply {
                    request_id,
                    response,
                    ..
                } => {
                    if let Some(sender) = self.waiting.remove(&request_id) {
                        // The connection may have gone meanwhile; its reply is then dropped.
                        let _ = sender.send(response);
                    }
                }
                Output::Persist {
                    persist_id,
                    partition,
                    coordinator_epoch,
                    record,
                    value_version,
                } => {
                    let written = (partition, coordinator_epoch, record, value_version);
                    self.persist(persist_id, written, proposals).await;
                }
                Output::SendMarkers {
                    transactional_id,
                    producer_id,
                    producer_epoch,
                    marker,
                    coordinator_epoch,
                    partitions,
                } => {
                    let state_partition = self.coordinator.state_partition(&transactional_id);
                    markers.start(
                        MarkerJob {
                            transactional_id,
                            producer_id,
                            producer_epoch,
                            marker,
                            coordinator_epoch,
                            state_partition,
                            partitions,
                        },
                        self.events.0.clone(),
                    );
                }
                Output::NeedProducerIds => {
                    let at_least = self.producer_id_floor;
                    let claimed = cluster.claim_producer_id_block(at_least).await;
                    match &claimed {
                        Ok((_, end)) => self.producer_id_floor = *end,
                        Err(error) => tracing::error!(%error, "producer-id block claim failed"),
                    }
                    self.coordinator
                        .producer_ids_granted(now_ms(), claimed.ok());
                }
            }
        }
    }

    /// Appends one state record to its partition as its leader at the coordinator epoch, on a
    /// blocking thread; [`Coordinator::persisted`] is called once the HW passed it (at once when
    /// no follower is in the ISR, else from a task beside this one).
    async fn persist(
        &mut self,
        persist_id: PersistId,
        (partition, coordinator_epoch, record, value_version): (i32, i32, TxnLogRecord, i16),
        proposals: &ProposalSender,
    ) {
        let replica = match self.logs.get(&partition) {
            Some(loaded) if loaded.leader_epoch == coordinator_epoch => loaded.partition.clone(),
            _ => {
                let result = Err(PersistError::NotLeader);
                return self.coordinator.persisted(now_ms(), persist_id, result);
            }
        };
        let (proposals, timeout_ms) = (proposals.clone(), self.append_timeout_ms);
        let appended = tokio::task::spawn_blocking(move || {
            let entry = (&record, value_version, coordinator_epoch);
            append_as_leader(&replica, entry, (now_ms(), timeout_ms), &proposals)
        })
        .await
        .unwrap_or(Err(PersistError::Failed));
        let mut wait = match appended {
            Ok(wait) => wait,
            Err(error) => return self.coordinator.persisted(now_ms(), persist_id, Err(error)),
        };
        match wait.try_recv() {
            Ok(outcome) => {
                let result = replication_outcome(outcome);
                self.coordinator.persisted(now_ms(), persist_id, result);
            }
            Err(oneshot::error::TryRecvError::Closed) => {
                let result = Err(PersistError::Unavailable);
                self.coordinator.persisted(now_ms(), persist_id, result);
            }
            Err(oneshot::error::TryRecvError::Empty) => {
                let events = self.events.0.clone();
                tokio::spawn(async move {
                    // A dropped sender: the partition went away (step-down answers first).
                    let outcome = wait
                        .await
                        .unwrap_or(Some(ErrorCode::NOT_LEADER_OR_FOLLOWER));
                    let event = Event::Persisted(persist_id, replication_outcome(outcome));
                    // The task gone (shutdown): nobody is left to answer.
                    let _ = events.send(event);
                });
            }
        }
    }
}

/// What a record's HW wait ended with, as Kafka maps its own append's produce errors.
fn replication_outcome(outcome: Option<ErrorCode>) -> Result<(), PersistError> {
    match outcome {
        None => Ok(()),
        Some(code) => Err(PersistError::from_append_error(code)),
    }
}

/// Appends one state record to a `__transaction_state` partition as its leader, through the
/// partition's writer seam (as a coordinator): admitted by its replica as an acks=all produce,
/// refused (NOT_COORDINATOR) unless it leads at `coordinator_epoch`, stamped with that epoch,
/// synced, the HW moved (at once without followers) and its ISR proposals queued. Returns the wait
/// for the HW to pass it (REQUEST_TIMED_OUT after `timeout_ms`). Blocking.
fn append_as_leader(
    partition: &Partition,
    (record, value_version, coordinator_epoch): (&TxnLogRecord, i16, i32),
    (now_ms, timeout_ms): (i64, u64),
    proposals: &ProposalSender,
) -> Result<ReplicationWait, PersistError> {
    let leader_epoch = partition
        .admit_produce(Acks::All)
        .map_err(PersistError::from_append_error)?;
    if leader_epoch != coordinator_epoch {
        return Err(PersistError::NotLeader);
    }
    let batch = state_log::encode_batch(std::slice::from_ref(record), value_version, now_ms)
        .map_err(|_| PersistError::Failed)?;
    let mut batches = [batch];
    let append = LeaderAppend {
        batches: &mut batches,
        origin: AppendOrigin::Coordinator,
        leader_epoch,
        now_ms,
        acks: Acks::All,
        timeout_ms,
    };
    let appended = partition
        .append_as_leader(append, proposals)
        .map_err(|_| PersistError::Failed)?;
    appended.replication.ok_or(PersistError::Failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_log_replays_what_was_appended_across_a_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut meta = skiff_txn::TxnMetadata::new(7, 60_000, 1);
        meta.producer_epoch = 0;
        let written: Vec<TxnLogRecord> = (0..20)
            .map(|index| TxnLogRecord {
                transactional_id: format!("id-{}", index % 4),
                value: (index % 5 != 4).then(|| meta.clone()),
            })
            .collect();
        {
            let log_dir =
                skiff_storage::LogDir::open(dir.path(), skiff_storage::LogConfig::default())
                    .expect("open");
            let log = log_dir
                .create(TRANSACTION_STATE_TOPIC, 3, None)
                .expect("create");
            for record in &written {
                let mut batch =
                    state_log::encode_batch(std::slice::from_ref(record), 1, 1).expect("encode");
                log.append_with_epoch(&mut batch, 0, 1).expect("append");
            }
            log.sync().expect("sync");
        }
        let log_dir = skiff_storage::LogDir::open(dir.path(), skiff_storage::LogConfig::default())
            .expect("reopen");
        let log = log_dir
            .log(TRANSACTION_STATE_TOPIC, 3)
            .expect("log")
            .expect("present");
        assert_eq!(replay_state_log(&log).expect("replay"), written);
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
