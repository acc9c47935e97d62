//! The broker's materialized topics: every ready topic of the cluster image (names, ids, configs,
//! the replicas of each partition) with the logs of the partitions this broker replicates. The
//! metadata store decides what exists (creation, deletion, growth and config changes are written
//! there by `crate::cluster`); [`Topics::reconcile`] makes the logs on disk follow. Reads of the
//! topic map never wait for a reconcile in progress (it puts new `Arc<Topic>`s in the map; a
//! request holding an old one finishes with it).
//!
//! Must never: report a topic whose logs are not open, decide on its own that a topic exists or
//! is gone, or delete the logs of a topic the store still has.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

use rand::RngCore;
use skiff_cluster::replica::ReplicaConfig;
use skiff_cluster::topics::LocalTopic;
use skiff_storage::{CleanupPolicy, Log, LogConfig, LogDir, PersistMode, Ratio};

use crate::config::Config;
use crate::partition::config_change::ConfigChangeError;
use crate::partition::materialized::{MaterializedTopicsFile, TopicRecord};
use crate::partition::partition::{create_log, replay_producers};
pub use crate::partition::partition::{read_batches, Partition};
use crate::partition::producer_state::PartitionProducers;
use crate::partition::replica::PartitionReplica;
use crate::partition::topic_config::{TopicConfig, TopicConfigError};

/// Most partitions one topic may have on this node: the protocol's decode bound on a topic's
/// partition array, so a request can name every partition of any topic.
// INVARIANT: the assertion checks the protocol crate's bound fits an i32 before the cast.
#[allow(clippy::cast_possible_truncation)]
pub const PARTITIONS_PER_TOPIC_MAX: i32 = {
    assert!(skiff_protocol::limits::PARTITIONS_PER_TOPIC_MAX <= i32::MAX as usize);
    skiff_protocol::limits::PARTITIONS_PER_TOPIC_MAX as i32
};

/// A topic and the partitions of it this broker replicates.
pub struct Topic {
    /// Name.
    pub name: String,
    /// KIP-516 id.
    pub topic_id: [u8; 16],
    /// Effective configuration.
    pub config: TopicConfig,
    /// The record as the metadata store holds it: the replicas of every partition (on every
    /// broker), and the overrides.
    pub record: TopicRecord,
    /// The partitions whose logs are on this broker, ascending by index (a sparse subset of
    /// `0..partition_count()`).
    pub partitions: Vec<Arc<Partition>>,
}

impl Topic {
    /// The partition with this index, if its log is on this broker.
    pub fn partition(&self, index: i32) -> Option<&Arc<Partition>> {
        self.partitions
            .binary_search_by_key(&index, |partition| partition.index())
            .ok()
            .and_then(|position| self.partitions.get(position))
    }

    /// How many partitions the topic has across the cluster.
    pub fn partition_count(&self) -> i32 {
        i32::try_from(self.record.replicas.len()).unwrap_or(i32::MAX)
    }

    /// Whether `index` names a partition of the topic (on any broker).
    pub fn has_partition(&self, index: i32) -> bool {
        (0..self.partition_count()).contains(&index)
    }

    /// Whether clients may not produce to it (`__consumer_offsets`).
    pub fn is_internal(&self) -> bool {
        skiff_cluster::topics::is_internal(&self.name)
    }
}

/// Why a topic operation failed; each maps to a Kafka error code.
#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    /// INVALID_TOPIC_EXCEPTION (17).
    #[error("invalid topic name: {0}")]
    InvalidName(skiff_protocol::topic_name::InvalidTopicName),
    /// INVALID_TOPIC_EXCEPTION (17): the operation is not allowed on an internal topic.
    #[error("{0} is an internal topic")]
    Internal(String),
    /// TOPIC_ALREADY_EXISTS (36).
    #[error("topic already exists")]
    AlreadyExists,
    /// UNKNOWN_TOPIC_OR_PARTITION (3).
    #[error("unknown topic")]
    Unknown,
    /// INVALID_PARTITIONS (37).
    #[error("invalid partition count {0}")]
    InvalidPartitions(i32),
    /// INVALID_REPLICATION_FACTOR (38).
    #[error("invalid replication factor {factor}: {why}")]
    InvalidReplicationFactor {
        /// The factor asked for.
        factor: i16,
        /// Why it cannot be had.
        why: String,
    },
    /// INVALID_CONFIG (40).
    #[error(transparent)]
    InvalidConfig(#[from] TopicConfigError),
    /// A config change refused before its values were looked at (INVALID_REQUEST or
    /// INVALID_CONFIG).
    #[error(transparent)]
    ConfigChange(#[from] ConfigChangeError),
    /// REQUEST_TIMED_OUT (7, retriable): the metadata store did not take the change (it is
    /// unreachable, or kept changing under it), or the change was made but this broker's image
    /// did not show it in time.
    #[error("{0}")]
    MetadataPending(String),
    /// KAFKA_STORAGE_ERROR (56).
    #[error("storage: {0}")]
    Storage(String),
    /// POLICY_VIOLATION (44): new partitions refused by a limit the message names
    /// (`max.broker.partitions`, the open-file limit, `vm.max_map_count`).
    #[error("{0}")]
    LimitReached(String),
}

impl TopicError {
    /// The Kafka error code.
    pub fn code(&self) -> i16 {
        use skiff_protocol::error_code;
        match self {
            Self::InvalidName(_) | Self::Internal(_) => error_code::INVALID_TOPIC_EXCEPTION,
            Self::AlreadyExists => error_code::TOPIC_ALREADY_EXISTS,
            Self::Unknown => error_code::UNKNOWN_TOPIC_OR_PARTITION,
            Self::InvalidPartitions(_) => error_code::INVALID_PARTITIONS,
            Self::InvalidReplicationFactor { .. } => error_code::INVALID_REPLICATION_FACTOR,
            Self::InvalidConfig(_) => error_code::INVALID_CONFIG,
            Self::ConfigChange(error) => error.code(),
            Self::MetadataPending(_) => error_code::REQUEST_TIMED_OUT,
            Self::Storage(_) => error_code::KAFKA_STORAGE_ERROR,
            Self::LimitReached(_) => error_code::POLICY_VIOLATION,
        }
    }
}

/// Checks a topic name as Kafka does (the rule is skiff-protocol's, shared with storage).
pub fn validate_topic_name(name: &str) -> Result<(), TopicError> {
    skiff_protocol::topic_name::validate_topic_name(name).map_err(TopicError::InvalidName)
}

/// A new KIP-516 topic id, as the hex the records carry.
pub fn new_topic_id() -> String {
    let mut topic_id = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut topic_id);
    topic_id.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// What one [`Topics::reconcile`] changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Reconciled {
    /// Partition logs opened or created.
    pub partitions_opened: usize,
    /// Partition logs deleted (their topic or replica is gone).
    pub partitions_deleted: usize,
    /// Topics whose overrides changed.
    pub configs_changed: usize,
    /// Topics left out because their record cannot be served (a config this broker refuses).
    pub refused: usize,
}

/// The broker's materialized topics: what the metadata store says this broker serves, with the
/// logs of the partitions it replicates.
pub struct Topics {
    /// The broker's effective config: the static one, then each one the dynamic broker configs
    /// make ([`Topics::follow_broker_config`]); topics resolve their defaults from it.
    config: RwLock<Arc<Config>>,
    /// Taken out at [`Topics::close`]; `None` afterwards.
    log_dir: Mutex<Option<LogDir>>,
    file: MaterializedTopicsFile,
    topics: RwLock<BTreeMap<String, Arc<Topic>>>,
    /// The file's topics until the first reconcile: a topic there and no longer in the store was
    /// deleted while this broker was down, and its logs go.
    known_at_start: Mutex<Option<Vec<TopicRecord>>>,
    /// Serializes reconciles, so the file and the map always name the same set.
    changes: Mutex<()>,
    /// The high watermarks the data directory's checkpoint held at open, by partition: where a
    /// partition's replica starts (a partition not there starts at its log start, which is
    /// safe: a high watermark only ever understates what the ISR holds).
    checkpointed_high_watermarks: BTreeMap<(String, i32), i64>,
}

/// The storage config of a topic's logs. Durability follows Kafka's `flush.messages` and
/// `flush.ms`: with either set, the log fsyncs (`PersistMode::SyncData`) when the policy says (the
/// append that reaches `flush.messages` records or comes `flush.ms` after the last flush, and the
/// maintenance task every `flush.ms`); with neither (the default) nothing is fsynced while the
/// broker runs (`PersistMode::Buffer`: the page cache decides, as in Kafka, where replication is
/// what protects data). Before this, any policy but `flush.messages = 1` kept `Buffer`, so its
/// flushes synced nothing.
fn log_config(topic: &TopicConfig, broker: &Config) -> LogConfig {
    let flush_policy = topic.flush_messages != u64::MAX || topic.flush_ms != u64::MAX;
    LogConfig {
        segment_bytes: topic.segment_bytes,
        segment_ms: i64::try_from(topic.segment_ms).unwrap_or(i64::MAX),
        retention_bytes: u64::try_from(topic.retention_bytes).ok(),
        retention_ms: (topic.retention_ms >= 0).then_some(topic.retention_ms),
        index_interval_bytes: broker.log_index_interval_bytes,
        // A batch must fit in one segment; a smaller segment.bytes caps the batch size too.
        batch_bytes_max: u32::try_from(u64::from(topic.max_message_bytes).min(topic.segment_bytes))
            .unwrap_or(u32::MAX),
        flush_messages_interval: (topic.flush_messages != u64::MAX).then_some(topic.flush_messages),
        flush_ms: i64::try_from(topic.flush_ms)
            .ok()
            .filter(|ms| *ms != i64::MAX),
        persist_mode: if flush_policy {
            PersistMode::SyncData
        } else {
            PersistMode::Buffer
        },
        // Storage applies retention only to a policy with delete, and the cleaner's rules to
        // one with compact.
        cleanup_policy: match (topic.cleanup_policy.compact, topic.cleanup_policy.delete) {
            (true, true) => CleanupPolicy::CompactDelete,
            (true, false) => CleanupPolicy::Compact,
            _ => CleanupPolicy::Delete,
        },
        // A `Fraction` is within [0, 1], so the default never stands in.
        min_cleanable_dirty_ratio: Ratio::new(topic.min_cleanable_dirty_ratio.get())
            .unwrap_or_else(|_| LogConfig::default().min_cleanable_dirty_ratio),
        min_compaction_lag_ms: topic.min_compaction_lag_ms,
        max_compaction_lag_ms: topic.max_compaction_lag_ms,
        delete_retention_ms: topic.delete_retention_ms,
        ..LogConfig::default()
    }
}

fn storage(error: impl std::fmt::Display) -> TopicError {
    TopicError::Storage(error.to_string())
}

/// The broker-side record of a store record.
fn local_record(topic: &LocalTopic) -> TopicRecord {
    TopicRecord {
        name: topic.name.clone(),
        topic_id: topic.record.topic_id.clone(),
        replicas: topic.record.replicas.clone(),
        configs: topic.record.configs.clone(),
    }
}

/// `existing` as it is, when `want` (with `record`) changes nothing of it: the same partitions
/// here and the same record.
fn unchanged(existing: &Topic, want: &LocalTopic, record: &TopicRecord) -> Option<Arc<Topic>> {
    let same_partitions = existing.partitions.len() == want.partitions.len()
        && existing
            .partitions
            .iter()
            .zip(&want.partitions)
            .all(|(have, want)| have.index() == *want);
    (same_partitions && existing.record == *record).then(|| {
        Arc::new(Topic {
            name: existing.name.clone(),
            topic_id: existing.topic_id,
            config: existing.config.clone(),
            record: record.clone(),
            partitions: existing.partitions.clone(),
        })
    })
}

/// A storage error creating partitions: a limit reached is the client's to hear about (the
/// partitions already open keep serving), anything else a storage error.
fn creation_error(error: skiff_storage::Error) -> TopicError {
    match error {
        skiff_storage::Error::LimitReached(message) => TopicError::LimitReached(format!(
            "new partitions refused, the existing ones keep serving: {message}"
        )),
        other => storage(other),
    }
}

/// Refuses `new_partitions` more logs before any is created if `log_dir` cannot hold them.
fn check_room(log_dir: &LogDir, new_partitions: usize) -> Result<(), TopicError> {
    log_dir.check_room(new_partitions).map_err(creation_error)
}

impl Topics {
    /// Takes the log directory (its logs recovered at open) and the materialized-topics file.
    /// Serves nothing until the first [`Topics::reconcile`]. Returns the file's topics when it is
    /// a single-node registry of an earlier release, to migrate into the metadata store first.
    pub fn open(
        config: Arc<Config>,
        log_dir: LogDir,
        file: MaterializedTopicsFile,
    ) -> Result<(Self, Vec<TopicRecord>), TopicError> {
        let loaded = file.load().map_err(storage)?;
        let checkpointed_high_watermarks = match log_dir.read_high_watermarks() {
            Ok(entries) => entries
                .into_iter()
                .map(|entry| ((entry.topic, entry.partition), entry.offset))
                .collect(),
            Err(error) => {
                // Starting every replica at its log start loses nothing (see the field's doc);
                // the leaders raise their high watermarks as their followers fetch.
                tracing::warn!(%error, "high-watermark checkpoint unreadable; replicas start at their log start");
                BTreeMap::new()
            }
        };
        let to_migrate = if loaded.needs_migration {
            loaded.topics.clone()
        } else {
            Vec::new()
        };
        let topics = Self {
            config: RwLock::new(config),
            log_dir: Mutex::new(Some(log_dir)),
            file,
            topics: RwLock::new(BTreeMap::new()),
            known_at_start: Mutex::new(Some(loaded.topics)),
            changes: Mutex::new(()),
            checkpointed_high_watermarks,
        };
        Ok((topics, to_migrate))
    }

    /// Opens partition `index` of `topic`: its log as recovered at open (with `storage_config`),
    /// or a new one if it has none, and its producer state.
    fn open_partition(
        &self,
        log_dir: &LogDir,
        topic: &str,
        index: i32,
        storage_config: &LogConfig,
        replica_config: ReplicaConfig,
    ) -> Result<Arc<Partition>, TopicError> {
        let node_id = self.broker_config().node_id;
        let log = match log_dir.log(topic, index).map_err(storage)? {
            Some(log) => {
                log.set_config(storage_config.clone()).map_err(storage)?;
                log
            }
            None => create_log(log_dir, topic, index, Some(storage_config.clone()))
                .map_err(creation_error)?,
        };
        // A log still recovering gets its producers in `recover_pending`.
        let producers = if log.is_recovering() {
            PartitionProducers::default()
        } else {
            replay_producers(&log).map_err(storage)?
        };
        // A log still recovering starts at 0 (it answers nothing meanwhile) and gets its
        // checkpointed HW in `recover_pending`.
        let high_watermark = if log.is_recovering() {
            0
        } else {
            self.starting_high_watermark(&log).map_err(storage)?
        };
        Ok(Arc::new(Partition::new(
            index,
            log,
            producers,
            PartitionReplica::new(node_id, replica_config, high_watermark),
        )))
    }

    /// The HW a replica of the recovered `log` starts at: the checkpointed one within the log,
    /// the log start without one (Kafka's rule: the leader raises it as its followers' ends
    /// come, at once without followers).
    fn starting_high_watermark(&self, log: &Log) -> Result<i64, skiff_storage::Error> {
        let (start, end) = (log.log_start_offset()?, log.log_end_offset()?);
        let checkpointed = self
            .checkpointed_high_watermarks
            .get(&(log.topic().to_owned(), log.partition()))
            .copied();
        Ok(checkpointed.map_or(start, |hw| hw.clamp(start, end)))
    }

    /// The topic with this name.
    pub fn get(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics.read().ok()?.get(name).cloned()
    }

    /// The topic with this KIP-516 id (Fetch v13+, DeleteTopics v6+). A scan under the read lock:
    /// nothing is cloned but the match.
    pub fn get_by_id(&self, topic_id: &[u8; 16]) -> Option<Arc<Topic>> {
        self.topics
            .read()
            .ok()?
            .values()
            .find(|topic| &topic.topic_id == topic_id)
            .cloned()
    }

    /// Every topic.
    pub fn all(&self) -> Vec<Arc<Topic>> {
        self.topics
            .read()
            .map(|topics| topics.values().cloned().collect())
            .unwrap_or_default()
    }

    /// The broker config topics take their defaults from now.
    pub fn broker_config(&self) -> Arc<Config> {
        match self.config.read() {
            Ok(config) => config.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Makes `broker` the config topics take their defaults from (a dynamic broker config
    /// changed, `crate::dynamic`), as Kafka's `DynamicLogConfig` does: every topic whose
    /// effective config changes with it (a default it does not override) is resolved again and
    /// its logs reconfigured. A topic whose overrides no longer resolve over the new defaults
    /// (a per-topic lag above a new default maximum, say) keeps its config and is counted in
    /// `refused`. Blocking IO (a segment config change may roll nothing, but it takes the logs'
    /// locks).
    pub fn follow_broker_config(&self, broker: Arc<Config>) -> Result<Reconciled, TopicError> {
        let _change = self
            .changes
            .lock()
            .map_err(|_| TopicError::Storage("poisoned".into()))?;
        *self.config.write().map_err(storage)? = broker.clone();
        if let Some(log_dir) = self.log_dir.lock().map_err(storage)?.as_mut() {
            log_dir
                .set_recovery_threads(broker.num_recovery_threads_per_data_dir)
                .map_err(storage)?;
        }
        let mut report = Reconciled::default();
        let current = self.all();
        let mut next = BTreeMap::new();
        for topic in current {
            let updated = match self.with_broker_defaults(&topic, &broker) {
                Ok(Some(updated)) => {
                    report.configs_changed += 1;
                    updated
                }
                Ok(None) => topic,
                Err(error) => {
                    report.refused += 1;
                    tracing::error!(topic = %topic.name, %error, "new broker defaults refused for this topic; it keeps its config");
                    topic
                }
            };
            next.insert(updated.name.clone(), updated);
        }
        *self.topics.write().map_err(storage)? = next;
        Ok(report)
    }

    /// `topic` resolved over `broker`'s defaults, its logs reconfigured; `None` when nothing of
    /// its config changes.
    fn with_broker_defaults(
        &self,
        topic: &Topic,
        broker: &Config,
    ) -> Result<Option<Arc<Topic>>, TopicError> {
        let config = TopicConfig::resolve_named(broker, &topic.name, &topic.record.configs)?;
        let storage_config = log_config(&config, broker);
        storage_config.validate().map_err(storage)?;
        let unchanged = topic.partitions.first().is_none_or(|partition| {
            partition.log().config().ok().as_ref() == Some(&storage_config)
        });
        if config == topic.config && unchanged {
            return Ok(None);
        }
        for partition in &topic.partitions {
            partition
                .reconfigure(
                    storage_config.clone(),
                    crate::partition::replica::replica_config(broker, &config),
                )
                .map_err(storage)?;
        }
        Ok(Some(Arc::new(Topic {
            name: topic.name.clone(),
            topic_id: topic.topic_id,
            config,
            record: topic.record.clone(),
            partitions: topic.partitions.clone(),
        })))
    }

    /// The effective configuration `overrides` give, refused as a creation or an alter would be
    /// (an unknown or out-of-range value, or settings the log cannot take together).
    pub fn resolve_config(
        &self,
        name: &str,
        overrides: &BTreeMap<String, String>,
    ) -> Result<TopicConfig, TopicError> {
        let broker = self.broker_config();
        let config = TopicConfig::resolve_named(&broker, name, overrides)?;
        log_config(&config, &broker).validate().map_err(storage)?;
        Ok(config)
    }

    /// Makes the materialized topics what `desired` says (every ready topic of the image, with
    /// the partitions this broker replicates): opens or creates the logs of new partitions,
    /// applies changed overrides to the logs, deletes the logs of topics and replicas that are
    /// gone (or of an older incarnation of a topic's name), then saves the file. Blocking IO.
    pub fn reconcile(&self, desired: &[LocalTopic]) -> Result<Reconciled, TopicError> {
        let _change = self
            .changes
            .lock()
            .map_err(|_| TopicError::Storage("poisoned".into()))?;
        let log_dir = self.log_dir.lock().map_err(storage)?;
        let log_dir = log_dir.as_ref().ok_or_else(|| storage("shutting down"))?;
        let mut report = Reconciled::default();
        let current: BTreeMap<String, Arc<Topic>> = self
            .topics
            .read()
            .map(|topics| topics.clone())
            .map_err(storage)?;
        let known_at_start = self.known_at_start.lock().map_err(storage)?.take();
        let wanted: BTreeMap<&str, &LocalTopic> = desired
            .iter()
            .map(|topic| (topic.name.as_str(), topic))
            .collect();
        // Logs of incarnations that are gone: topics deleted (or deleted and created again)
        // while this broker was down, then those gone while it ran.
        for record in known_at_start.iter().flatten() {
            let current_id = wanted.get(record.name.as_str()).map(|t| &t.record.topic_id);
            if current_id != Some(&record.topic_id) {
                report.partitions_deleted += Self::delete_logs(log_dir, &record.name, None);
            }
        }
        let mut next = BTreeMap::new();
        for (name, topic) in &current {
            let same = wanted
                .get(name.as_str())
                .is_some_and(|want| parse_topic_id(&want.record.topic_id) == topic.topic_id);
            if !same {
                report.partitions_deleted += Self::remove(log_dir, topic);
            }
        }
        for want in desired {
            let existing = current
                .get(&want.name)
                .filter(|topic| topic.topic_id == parse_topic_id(&want.record.topic_id));
            match self.materialize(log_dir, want, existing.map(Arc::as_ref), &mut report) {
                Ok(topic) => {
                    next.insert(want.name.clone(), topic);
                }
                Err(error) => {
                    report.refused += 1;
                    tracing::error!(topic = %want.name, %error, "cannot serve topic");
                    if let Some(existing) = existing {
                        next.insert(want.name.clone(), existing.clone());
                    }
                }
            }
        }
        let records: Vec<TopicRecord> = next.values().map(|topic| topic.record.clone()).collect();
        if let Ok(mut topics) = self.topics.write() {
            *topics = next;
        }
        self.file.save(&records).map_err(storage)?;
        Ok(report)
    }

    /// `want` as a topic: `existing` (the same incarnation) kept where nothing changed, its new
    /// local partitions opened, its lost ones deleted, new overrides applied to every log.
    fn materialize(
        &self,
        log_dir: &LogDir,
        want: &LocalTopic,
        existing: Option<&Topic>,
        report: &mut Reconciled,
    ) -> Result<Arc<Topic>, TopicError> {
        let record = local_record(want);
        if let Some(unchanged) = existing.and_then(|existing| unchanged(existing, want, &record)) {
            return Ok(unchanged);
        }
        let broker = self.broker_config();
        let config = self.resolve_config(&record.name, &record.configs)?;
        let storage_config = log_config(&config, &broker);
        let configs_changed = existing.is_some_and(|e| e.record.configs != record.configs);
        if configs_changed {
            report.configs_changed += 1;
        }
        let new_partitions = want
            .partitions
            .iter()
            .filter(|index| {
                existing
                    .and_then(|topic| topic.partition(**index))
                    .is_none()
            })
            .count();
        check_room(log_dir, new_partitions)?;
        let mut partitions = Vec::with_capacity(want.partitions.len());
        for &index in &want.partitions {
            match existing.and_then(|topic| topic.partition(index)) {
                Some(partition) => {
                    if configs_changed {
                        partition
                            .reconfigure(
                                storage_config.clone(),
                                crate::partition::replica::replica_config(&broker, &config),
                            )
                            .map_err(storage)?;
                    }
                    partitions.push(partition.clone());
                }
                None => {
                    partitions.push(self.open_partition(
                        log_dir,
                        &want.name,
                        index,
                        &storage_config,
                        crate::partition::replica::replica_config(&broker, &config),
                    )?);
                    report.partitions_opened += 1;
                }
            }
        }
        for partition in existing
            .map(|topic| topic.partitions.as_slice())
            .unwrap_or(&[])
        {
            if want.partitions.binary_search(&partition.index()).is_err() {
                partition.wake_parked_fetches();
                report.partitions_deleted +=
                    Self::delete_logs(log_dir, &want.name, Some(partition.index()));
            }
        }
        Ok(Arc::new(Topic {
            name: want.name.clone(),
            topic_id: parse_topic_id(&record.topic_id),
            config,
            record,
            partitions,
        }))
    }

    /// Stops serving `topic` and deletes its logs. Returns how many were deleted.
    fn remove(log_dir: &LogDir, topic: &Topic) -> usize {
        // Fetches parked on the topic re-read now, find it gone and answer, releasing the
        // partitions (and their waiter lists) instead of holding them until max_wait_ms.
        for partition in &topic.partitions {
            partition.wake_parked_fetches();
        }
        Self::delete_logs(log_dir, &topic.name, None)
    }

    /// Deletes the logs of `topic` in the directory (one partition, or all of them). A failure is
    /// logged, not returned: the next reconcile (or start) tries again.
    fn delete_logs(log_dir: &LogDir, topic: &str, only: Option<i32>) -> usize {
        if skiff_cluster::topics::is_internal(topic) {
            // Its logs are the group coordinator's offsets logs (`crate::group::driver`), never
            // this registry's to delete, whatever becomes of the topic record.
            return 0;
        }
        let partitions: Vec<i32> = match log_dir.list() {
            Ok(logs) => logs
                .into_iter()
                .filter(|(name, partition)| {
                    name == topic && only.is_none_or(|only| only == *partition)
                })
                .map(|(_, partition)| partition)
                .collect(),
            Err(error) => {
                tracing::warn!(topic, %error, "listing logs to delete");
                return 0;
            }
        };
        let mut deleted = 0;
        for partition in partitions {
            match log_dir.delete(topic, partition) {
                Ok(()) => deleted += 1,
                Err(error) => tracing::warn!(topic, partition, %error, "deleting log"),
            }
        }
        deleted
    }

    /// Refuses `new_partitions` more partition logs on this broker, before anything is written,
    /// when the log directory cannot hold them (`max.broker.partitions`, the open-file limit,
    /// `vm.max_map_count`): POLICY_VIOLATION naming the limit.
    pub fn check_room(&self, new_partitions: usize) -> Result<(), TopicError> {
        let log_dir = self.log_dir.lock().map_err(storage)?;
        let log_dir = log_dir.as_ref().ok_or_else(|| storage("shutting down"))?;
        check_room(log_dir, new_partitions)
    }

    /// Recovers the partitions whose logs were opened with recovery deferred, on the log
    /// directory's recovery threads, and returns how many. Each is recovered with its producers
    /// lock held and its producer state replayed before the lock goes, so no append sees the log
    /// recovered but its producers not yet known. Until then its log answers `Recovering`
    /// (NOT_LEADER_OR_FOLLOWER to Produce and Fetch, LEADER_NOT_AVAILABLE in Metadata).
    pub fn recover_pending(&self) -> Result<usize, TopicError> {
        let log_dir = self.log_dir.lock().map_err(storage)?;
        let Some(log_dir) = log_dir.as_ref() else {
            return Ok(0);
        };
        let count = std::sync::atomic::AtomicUsize::new(0);
        log_dir
            .recover_pending(|log, recover| {
                count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let topic = self.get(log.topic());
                let Some(partition) = topic.as_ref().and_then(|t| t.partition(log.partition()))
                else {
                    return recover();
                };
                partition.recover(recover, |log| self.starting_high_watermark(log))
            })
            .map_err(storage)?;
        Ok(count.into_inner())
    }

    /// The log of (`topic`, `partition`) in the log directory, whether or not this broker
    /// serves it: the materialized partition's log, or one left in the directory without a
    /// replica here (the single-node offsets log, which predates the internal topic).
    pub fn log_in_dir(&self, topic: &str, partition: i32) -> Result<Option<Arc<Log>>, TopicError> {
        if let Some(served) = self
            .get(topic)
            .and_then(|t| t.partition(partition).map(|p| p.log().clone()))
        {
            return Ok(Some(served));
        }
        let log_dir = self.log_dir.lock().map_err(storage)?;
        let log_dir = log_dir.as_ref().ok_or_else(|| storage("shutting down"))?;
        log_dir.log(topic, partition).map_err(storage)
    }

    /// Deletes the log of (`topic`, `partition`) if this broker does not serve it (see
    /// [`Topics::log_in_dir`]); a served partition's log is kept. Returns whether one was deleted.
    pub fn remove_unserved_log(&self, topic: &str, partition: i32) -> Result<bool, TopicError> {
        let _change = self
            .changes
            .lock()
            .map_err(|_| TopicError::Storage("poisoned".into()))?;
        if self
            .get(topic)
            .is_some_and(|t| t.partition(partition).is_some())
        {
            return Ok(false);
        }
        let log_dir = self.log_dir.lock().map_err(storage)?;
        let log_dir = log_dir.as_ref().ok_or_else(|| storage("shutting down"))?;
        if log_dir.log(topic, partition).map_err(storage)?.is_none() {
            return Ok(false);
        }
        log_dir.delete(topic, partition).map_err(storage)?;
        Ok(true)
    }

    /// Flushes every log and writes the clean-shutdown marker.
    /// Writes every partition's high watermark to the data directory's checkpoint (Kafka's
    /// `replication-offset-checkpoint`, every `replica.high.watermark.checkpoint.interval.ms` and
    /// at close). Returns how many it wrote.
    pub fn checkpoint_high_watermarks(&self) -> Result<usize, TopicError> {
        let mut entries = Vec::new();
        for topic in self.all() {
            for partition in &topic.partitions {
                // A log still recovering keeps the HW it was opened with: dropping its entry
                // would start it at its log start after the next crash.
                let offset = if partition.log().is_recovering() {
                    self.checkpointed_high_watermarks
                        .get(&(topic.name.clone(), partition.index()))
                        .copied()
                        .unwrap_or(-1)
                } else {
                    partition.high_watermark()
                };
                if offset >= 0 {
                    entries.push(skiff_storage::HighWatermark {
                        topic: topic.name.clone(),
                        partition: partition.index(),
                        offset,
                    });
                }
            }
        }
        let log_dir = self.log_dir.lock().map_err(storage)?;
        let Some(log_dir) = log_dir.as_ref() else {
            return Ok(0);
        };
        log_dir.write_high_watermarks(&entries).map_err(storage)?;
        Ok(entries.len())
    }

    /// Syncs the logs with data not yet durable and writes the data directory's offset
    /// checkpoint (see [`skiff_storage::LogDir::checkpoint_recovery_points`]): every
    /// `log.flush.offset.checkpoint.interval.ms`, on a blocking thread. Holds the directory's
    /// lock meanwhile, so a CreateTopics or DeleteTopics waits for it (never a produce or fetch,
    /// which reach their logs without it).
    pub fn checkpoint_recovery_points(&self) -> Result<(), TopicError> {
        let log_dir = self.log_dir.lock().map_err(storage)?;
        match log_dir.as_ref() {
            Some(log_dir) => log_dir.checkpoint_recovery_points().map_err(storage),
            None => Ok(()),
        }
    }

    /// Checkpoints the high watermarks, then flushes and closes the log directory.
    pub fn close(&self) -> Result<(), TopicError> {
        if let Err(error) = self.checkpoint_high_watermarks() {
            tracing::warn!(%error, "high watermarks not checkpointed at close");
        }
        let log_dir = self.log_dir.lock().map_err(storage)?.take();
        match log_dir {
            Some(log_dir) => log_dir.close().map_err(storage),
            None => Ok(()),
        }
    }
}

/// The 16 bytes of a topic id in hex (zeros where the text is not hex).
pub fn parse_topic_id(hex: &str) -> [u8; 16] {
    let mut id = [0u8; 16];
    for (index, byte) in id.iter_mut().enumerate() {
        *byte = hex
            .get(index * 2..index * 2 + 2)
            .and_then(|pair| u8::from_str_radix(pair, 16).ok())
            .unwrap_or(0);
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_flush_policy_fsyncs_and_none_leaves_the_page_cache_to_decide() {
        let broker = Config::default();
        let resolve = |overrides: &[(&str, &str)]| {
            let overrides = overrides
                .iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                .collect();
            log_config(
                &TopicConfig::resolve(&broker, &overrides).expect("resolves"),
                &broker,
            )
        };
        let default = resolve(&[]);
        assert_eq!(default.persist_mode, PersistMode::Buffer);
        assert_eq!(
            (default.flush_messages_interval, default.flush_ms),
            (None, None)
        );
        for overrides in [
            &[("flush.messages", "1")][..],
            &[("flush.messages", "100")],
            &[("flush.ms", "1000")],
        ] {
            let config = resolve(overrides);
            assert_eq!(config.persist_mode, PersistMode::SyncData, "{overrides:?}");
        }
        assert_eq!(resolve(&[("flush.ms", "1000")]).flush_ms, Some(1000));
        assert_eq!(
            resolve(&[("flush.messages", "100")]).flush_messages_interval,
            Some(100)
        );
    }

    #[test]
    fn topic_names_follow_kafkas_rules() {
        assert!(validate_topic_name("orders.v1_eu-2").is_ok());
        for bad in ["", ".", "..", "a/b", "spaces here", &"x".repeat(250)] {
            assert!(validate_topic_name(bad).is_err(), "{bad}");
        }
    }

    fn open(dir: &std::path::Path) -> (Topics, Vec<TopicRecord>) {
        let log_dir = LogDir::open(dir, LogConfig::default()).expect("log dir");
        let files = log_dir.files();
        Topics::open(
            Arc::new(Config::default()),
            log_dir,
            MaterializedTopicsFile::new(dir, files),
        )
        .expect("topics")
    }

    fn local(name: &str, id: &str, replicas: Vec<Vec<i32>>, node: i32) -> LocalTopic {
        let partitions = (0i32..)
            .zip(&replicas)
            .filter(|(_, replicas)| replicas.contains(&node))
            .map(|(partition, _)| partition)
            .collect();
        LocalTopic {
            name: name.to_owned(),
            record: skiff_cluster::records::TopicRecord {
                topic_id: id.to_owned(),
                state: skiff_cluster::records::TopicState::Ready,
                replicas,
                configs: BTreeMap::new(),
                author: 1,
                author_epoch: 1,
            },
            partitions,
        }
    }

    const ID_A: &str = "0000000000000000000000000000000a";
    const ID_B: &str = "0000000000000000000000000000000b";

    #[test]
    fn replicas_start_at_the_checkpointed_high_watermark_within_their_log() {
        use skiff_cluster::replica::Action;
        use skiff_protocol::records::record::{BatchBuilder, NewRecord};
        use skiff_protocol::records::Compression;

        let batch = || {
            let mut builder = BatchBuilder::new(0, Compression::None);
            for offset_delta in 0..5 {
                let record = NewRecord {
                    offset_delta,
                    timestamp: 1_000,
                    key: None,
                    value: Some(b"v"),
                    headers: &[],
                };
                builder.push(&record).expect("fits");
            }
            builder.build().expect("builds")
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let t = local("t", ID_A, vec![vec![1], vec![1]], 1);
        {
            let (topics, _) = open(dir.path());
            topics
                .reconcile(std::slice::from_ref(&t))
                .expect("reconcile");
            let topic = topics.get("t").expect("t");
            for index in [0, 1] {
                let partition = topic.partition(index).expect("here");
                partition.log().append(&mut batch(), 1_000).expect("append");
                assert_eq!(partition.high_watermark(), 0);
            }
            // What the leader's machine published: 3 on partition 0, the log end on 1.
            let deferred = topic
                .partition(0)
                .expect("0")
                .replica()
                .settle(vec![Action::HighWatermark(3)]);
            assert!(deferred.proposals.is_empty());
            topic
                .partition(1)
                .expect("1")
                .replica()
                .settle(vec![Action::HighWatermark(5)]);
            assert_eq!(topics.checkpoint_high_watermarks().expect("written"), 2);
            topics.close().expect("close");
        }
        let text = std::fs::read_to_string(dir.path().join("replication-offset-checkpoint"))
            .expect("checkpoint");
        assert!(text.contains("t 0 3") && text.contains("t 1 5"), "{text}");
        // A checkpoint past the log (a log cut shorter by a crash) is clamped to its end.
        std::fs::write(
            dir.path().join("replication-offset-checkpoint"),
            "0\n2\nt 0 3\nt 1 99\n",
        )
        .expect("rewrite");
        let (topics, _) = open(dir.path());
        topics
            .reconcile(std::slice::from_ref(&t))
            .expect("reconcile");
        let topic = topics.get("t").expect("t");
        assert_eq!(topic.partition(0).expect("0").high_watermark(), 3);
        assert_eq!(topic.partition(1).expect("1").high_watermark(), 5);
        topics.close().expect("close");
        // The broker opens its logs deferred: a replica made before its log is recovered starts
        // at 0 and gets the checkpointed HW when the log is (the restart read nothing below it).
        let topics = open_deferred(dir.path(), Config::default());
        topics
            .reconcile(std::slice::from_ref(&t))
            .expect("reconcile");
        let topic = topics.get("t").expect("t");
        assert_eq!(topic.partition(0).expect("0").high_watermark(), 0);
        // A checkpoint written meanwhile keeps what the recovering logs were opened with.
        assert_eq!(topics.checkpoint_high_watermarks().expect("written"), 2);
        let text = std::fs::read_to_string(dir.path().join("replication-offset-checkpoint"))
            .expect("checkpoint");
        assert!(text.contains("t 0 3") && text.contains("t 1 5"), "{text}");
        assert_eq!(topics.recover_pending().expect("recovered"), 2);
        assert_eq!(topic.partition(0).expect("0").high_watermark(), 3);
        assert_eq!(topic.partition(1).expect("1").high_watermark(), 5);
        // An unreadable checkpoint starts every replica at its log start.
        topics.close().expect("close");
        std::fs::write(dir.path().join("replication-offset-checkpoint"), "garbage")
            .expect("garble");
        let (topics, _) = open(dir.path());
        topics
            .reconcile(std::slice::from_ref(&t))
            .expect("reconcile");
        assert_eq!(
            topics
                .get("t")
                .expect("t")
                .partition(0)
                .expect("0")
                .high_watermark(),
            0
        );
    }

    #[test]
    fn reconcile_opens_only_local_partitions_and_follows_growth_and_configs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (topics, to_migrate) = open(dir.path());
        assert!(to_migrate.is_empty());
        // Partitions 0 and 2 are here (node 1), 1 is on node 2.
        let mut t = local("t", ID_A, vec![vec![1], vec![2], vec![1]], 1);
        let report = topics
            .reconcile(std::slice::from_ref(&t))
            .expect("reconcile");
        assert_eq!(report.partitions_opened, 2);
        let topic = topics.get("t").expect("t");
        assert_eq!(topic.partition_count(), 3);
        assert!(topic.partition(0).is_some() && topic.partition(2).is_some());
        assert!(topic.partition(1).is_none() && topic.has_partition(1));
        assert!(!topic.has_partition(3));
        assert!(dir.path().join("t-2").exists() && !dir.path().join("t-1").exists());

        // Grown by one partition here, and an override.
        t.record.replicas.push(vec![1]);
        t.partitions.push(3);
        t.record
            .configs
            .insert("retention.ms".to_owned(), "1000".to_owned());
        let report = topics.reconcile(std::slice::from_ref(&t)).expect("grow");
        assert_eq!((report.partitions_opened, report.configs_changed), (1, 1));
        let topic = topics.get("t").expect("t");
        assert_eq!(topic.config.retention_ms, 1000);
        let log_retention = topic.partitions[0]
            .log()
            .config()
            .expect("config")
            .retention_ms;
        assert_eq!(
            log_retention,
            Some(1000),
            "the log has the new setting at once"
        );

        // A config this broker refuses leaves the topic as it was.
        let mut bad = t.clone();
        bad.record
            .configs
            .insert("segment.bytes".to_owned(), "1".to_owned());
        let report = topics.reconcile(std::slice::from_ref(&bad)).expect("bad");
        assert_eq!(report.refused, 1);
        assert_eq!(topics.get("t").expect("t").config.retention_ms, 1000);

        topics.close().expect("close");
        drop(topics);
        let (reopened, _) = open(dir.path());
        assert!(
            reopened.get("t").is_none(),
            "nothing is served before a reconcile"
        );
        reopened.reconcile(&[t]).expect("again");
        assert_eq!(reopened.get("t").expect("t").partitions.len(), 3);
        reopened.close().expect("close");
    }

    #[test]
    fn new_broker_defaults_reach_every_topic_that_does_not_override_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (topics, _) = open(dir.path());
        let plain = local("plain", ID_A, vec![vec![1], vec![1]], 1);
        let mut own = local("own", ID_B, vec![vec![1]], 1);
        own.record
            .configs
            .insert("retention.ms".to_owned(), "5000".to_owned());
        own.record
            .configs
            .insert("min.compaction.lag.ms".to_owned(), "100000".to_owned());
        topics.reconcile(&[plain, own]).expect("reconcile");
        let log_retention = |name: &str, index: usize| {
            let topic = topics.get(name).expect("topic");
            let partition = topic.partitions.get(index).expect("partition").clone();
            let retention = partition.log().config().expect("config").retention_ms;
            retention
        };

        let mut broker = (*topics.broker_config()).clone();
        broker
            .apply_override("log.retention.ms=60000")
            .expect("retention");
        broker
            .apply_override("num.recovery.threads.per.data.dir=3")
            .expect("threads");
        let report = topics
            .follow_broker_config(Arc::new(broker.clone()))
            .expect("follow");
        assert_eq!((report.configs_changed, report.refused), (1, 0));
        assert_eq!(
            topics.get("plain").expect("plain").config.retention_ms,
            60000
        );
        assert_eq!(log_retention("plain", 0), Some(60000));
        assert_eq!(log_retention("plain", 1), Some(60000));
        assert_eq!(log_retention("own", 0), Some(5000), "its override wins");
        assert_eq!(topics.broker_config().log_retention_ms, 60000);

        // A default maximum lag below the topic's own minimum does not resolve for that topic:
        // it keeps its config, the other topic takes the new default.
        broker
            .apply_override("log.cleaner.max.compaction.lag.ms=50000")
            .expect("lag");
        let report = topics
            .follow_broker_config(Arc::new(broker))
            .expect("follow");
        assert_eq!((report.configs_changed, report.refused), (1, 1));
        assert_eq!(
            topics.get("own").expect("own").config.max_compaction_lag_ms,
            i64::MAX
        );
        assert_eq!(
            topics
                .get("plain")
                .expect("plain")
                .config
                .max_compaction_lag_ms,
            50000
        );
        // A new topic resolves over the new defaults.
        let created = topics
            .resolve_config("later", &BTreeMap::new())
            .expect("resolve");
        assert_eq!(created.retention_ms, 60000);
        topics.close().expect("close");
    }

    #[test]
    fn a_topic_gone_or_recreated_while_down_loses_its_old_logs_and_nothing_else() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (topics, _) = open(dir.path());
        let gone = local("gone", ID_A, vec![vec![1]], 1);
        let again = local("again", ID_A, vec![vec![1]], 1);
        let kept = local("kept", ID_B, vec![vec![1]], 1);
        topics
            .reconcile(&[gone, again, kept.clone()])
            .expect("reconcile");
        let append = |topics: &Topics, name: &str| {
            use skiff_protocol::records::record::{BatchBuilder, NewRecord};
            let mut builder = BatchBuilder::new(0, skiff_protocol::records::Compression::None);
            builder
                .push(&NewRecord {
                    offset_delta: 0,
                    timestamp: 0,
                    key: None,
                    value: Some(b"v"),
                    headers: &[],
                })
                .expect("push");
            let mut batch = builder.build().expect("build");
            let topic = topics.get(name).expect("topic");
            topic.partitions[0]
                .log()
                .append(&mut batch, 0)
                .expect("append");
        };
        append(&topics, "again");
        append(&topics, "kept");
        topics.close().expect("close");
        drop(topics);

        // While down: "gone" deleted, "again" deleted and created anew (another id).
        let (topics, _) = open(dir.path());
        let recreated = local("again", ID_B, vec![vec![1]], 1);
        let report = topics.reconcile(&[recreated, kept]).expect("reconcile");
        assert_eq!(report.partitions_deleted, 2);
        assert!(!dir.path().join("gone-0").exists());
        let again = topics.get("again").expect("again");
        assert_eq!(again.partitions[0].log().log_end_offset().expect("leo"), 0);
        let kept = topics.get("kept").expect("kept");
        assert_eq!(kept.partitions[0].log().log_end_offset().expect("leo"), 1);

        // Deleted while running: its logs go at the next reconcile.
        topics.reconcile(&[]).expect("empty");
        assert!(topics.get("kept").is_none());
        assert!(!dir.path().join("kept-0").exists());
        topics.close().expect("close");
    }

    #[test]
    fn a_recovering_replicas_machine_is_locked_until_its_high_watermark_is_restored() {
        use skiff_cluster::replica::Action;

        // Many small batches: replaying the producers takes a while after the log itself is
        // recovered, the window in which a fetcher once locked the machine (and deadlocked).
        let dir = tempfile::tempdir().expect("tempdir");
        let t = local("t", ID_A, vec![vec![1]], 1);
        {
            let (topics, _) = open(dir.path());
            topics
                .reconcile(std::slice::from_ref(&t))
                .expect("reconcile");
            let topic = topics.get("t").expect("t");
            let partition = topic.partition(0).expect("0");
            for _ in 0..2_000 {
                partition
                    .log()
                    .append(&mut crate::partition::partition::tests::one_record(), 1_000)
                    .expect("append");
            }
            partition
                .replica()
                .settle(vec![Action::HighWatermark(1_500)]);
            topics.checkpoint_high_watermarks().expect("written");
            topics.close().expect("close");
        }
        let topics = Arc::new(open_deferred(dir.path(), Config::default()));
        topics
            .reconcile(std::slice::from_ref(&t))
            .expect("reconcile");
        let topic = topics.get("t").expect("t");
        let partition = topic.partition(0).expect("0");
        let recovering = topics.clone();
        let recovery = std::thread::spawn(move || recovering.recover_pending());
        // As a fetcher or the driver would: the machine, once the log answers, then the
        // producers. The machine must already have the checkpointed HW.
        while partition.log().is_recovering() {
            std::hint::spin_loop();
        }
        let machine = partition.replica().machine();
        assert_eq!(machine.high_watermark(), 1_500);
        drop(partition.producers().lock().expect("producers"));
        drop(machine);
        assert_eq!(recovery.join().expect("joined").expect("recovered"), 1);
    }

    fn open_deferred(dir: &std::path::Path, config: Config) -> Topics {
        let log_dir =
            LogDir::open_deferred(dir, LogConfig::default(), config.dir_config()).expect("log dir");
        let files = log_dir.files();
        Topics::open(
            Arc::new(config),
            log_dir,
            MaterializedTopicsFile::new(dir, files),
        )
        .expect("topics")
        .0
    }

    #[test]
    fn partitions_past_the_broker_limit_are_refused_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = Config::default();
        config
            .apply_override("max.broker.partitions=3")
            .expect("valid");
        let topics = open_deferred(dir.path(), config);
        let two = local("t", ID_A, vec![vec![1]; 2], 1);
        topics
            .reconcile(std::slice::from_ref(&two))
            .expect("two fit");
        let refused = topics.check_room(2).expect_err("a fourth does not");
        assert_eq!(refused.code(), 44, "POLICY_VIOLATION");
        assert!(
            refused.to_string().contains("max.broker.partitions"),
            "{refused}"
        );
        topics.check_room(1).expect("a third fits");
        // A topic from the store past the limit is not served here (and says so in the log).
        let report = topics
            .reconcile(&[two.clone(), local("u", ID_B, vec![vec![1]; 2], 1)])
            .expect("reconcile");
        assert_eq!(report.refused, 1);
        assert!(topics.get("u").is_none());
        topics
            .reconcile(&[local("t", ID_A, vec![vec![1]; 3], 1)])
            .expect("third");
        assert_eq!(topics.get("t").expect("t").partitions.len(), 3);
        topics.close().expect("close");
    }

    #[test]
    fn partitions_recover_after_open_and_answer_recovering_until_then() {
        let dir = tempfile::tempdir().expect("tempdir");
        let t = local("t", ID_A, vec![vec![1]; 3], 1);
        {
            let (topics, _) = open(dir.path());
            topics.reconcile(std::slice::from_ref(&t)).expect("create");
            let topic = topics.get("t").expect("t");
            topic.partitions[2]
                .log()
                .append(&mut crate::partition::partition::tests::one_record(), 1_000)
                .expect("append");
            // Dropped without close: a crash, so the next open must recover.
        }
        let topics = open_deferred(dir.path(), Config::default());
        topics
            .reconcile(std::slice::from_ref(&t))
            .expect("materialize");
        let topic = topics.get("t").expect("t");
        assert!(topic.partitions.iter().all(|p| p.log().is_recovering()));
        assert!(matches!(
            topic.partitions[2].log().log_end_offset(),
            Err(skiff_storage::Error::Recovering { .. })
        ));
        assert_eq!(topics.recover_pending().expect("recover"), 3);
        assert!(!topic.partitions[2].log().is_recovering());
        assert_eq!(topic.partitions[2].log().log_end_offset().expect("end"), 1);
        assert_eq!(topics.recover_pending().expect("nothing left"), 0);
        topics.close().expect("close");
    }

    #[test]
    fn topic_id_hex_round_trips() {
        let id: [u8; 16] = std::array::from_fn(|index| index as u8 * 17);
        let hex: String = id.iter().map(|byte| format!("{byte:02x}")).collect();
        assert_eq!(parse_topic_id(&hex), id);
    }
}
