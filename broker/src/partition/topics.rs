//! The broker's topics: names, ids, configs and the partition logs behind them. Creation, deletion,
//! added partitions and config changes go through here so the durable metadata and the logs on disk
//! change together; reads of the topic map never wait for a change in progress (a change puts a
//! new `Arc<Topic>` in the map; a request holding the old one finishes with it).
//!
//! Must never: report a topic whose logs are not open, or forget one whose metadata was saved.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

use rand::RngCore;
use skiff_storage::{Log, LogConfig, LogDir, PersistMode};

use crate::config::Config;
use crate::partition::config_change::ConfigChangeError;
use crate::partition::metadata_store::{MetadataStore, TopicRecord};
use crate::partition::producer_state::PartitionProducers;
use crate::partition::readable_end::ReadableEnd;
use crate::partition::topic_config::{TopicConfig, TopicConfigError};

/// Most partitions one topic may have on this node: the protocol's decode bound on a topic's
/// partition array, so a request can name every partition of any topic.
pub const PARTITIONS_PER_TOPIC_MAX: i32 = skiff_protocol::limits::PARTITIONS_PER_TOPIC_MAX as i32;

/// Offsets at the end of a partition scanned at open to rebuild its idempotent-producer state.
/// A producer whose last batches lie further back is forgotten: its next batch gets
/// UNKNOWN_PRODUCER_ID and the client re-initialises (what Kafka does once producer state expires).
/// Bounds start-up time by this many records per partition instead of the whole log.
pub const PRODUCER_REPLAY_OFFSETS_MAX: i64 = 100_000;
/// Bytes read at a time when a log is scanned at open (a larger batch is still read whole; it is
/// bounded by the log's `batch_bytes_max`).
pub const LOG_SCAN_READ_BYTES: u64 = 1024 * 1024;

/// One partition of a topic on this node.
pub struct Partition {
    /// Partition index.
    pub index: i32,
    /// The log.
    pub log: Arc<Log>,
    /// The idempotent producers appending here. Its lock is held across check, append and record
    /// so a retried batch is never appended twice.
    pub producers: Mutex<PartitionProducers>,
    /// Advanced after every append (and at deletion): wakes the fetches long-polling here.
    pub readable_end: ReadableEnd,
}

/// Reads the whole batches stored from the batch holding `offset` on, at most about
/// [`LOG_SCAN_READ_BYTES`] (at least one batch). Returns the bytes and the offset after the last
/// complete batch in them.
pub fn read_batches(log: &Log, offset: i64) -> Result<(Vec<u8>, i64), skiff_storage::Error> {
    let slice = log.read(offset, LOG_SCAN_READ_BYTES, true)?;
    // The slice length is at most LOG_SCAN_READ_BYTES or one batch, which the log bounded.
    let len = usize::try_from(slice.len()).unwrap_or(0);
    let mut bytes = vec![0u8; len];
    let mut filled = 0;
    while filled < len {
        let read = slice.read_at(filled as u64, &mut bytes[filled..])?;
        if read == 0 {
            bytes.truncate(filled);
            break;
        }
        filled += read;
    }
    let mut next = offset;
    let mut complete = 0;
    for item in skiff_protocol::records::v2::batch_positions(&bytes) {
        let Ok((position, header)) = item else { break };
        next = header.base_offset + i64::from(header.last_offset_delta) + 1;
        complete = position + header.total_bytes();
    }
    bytes.truncate(complete);
    Ok((bytes, next))
}

/// Rebuilds a partition's producer state from the batch headers of its last
/// [`PRODUCER_REPLAY_OFFSETS_MAX`] offsets.
fn replay_producers(log: &Log) -> Result<PartitionProducers, skiff_storage::Error> {
    let mut producers = PartitionProducers::default();
    let log_end = log.log_end_offset()?;
    let mut offset = log
        .log_start_offset()?
        .max(log_end.saturating_sub(PRODUCER_REPLAY_OFFSETS_MAX));
    while offset < log_end {
        let (bytes, next) = read_batches(log, offset)?;
        for (_, header) in skiff_protocol::records::v2::batch_positions(&bytes).flatten() {
            producers.replay(&header);
        }
        if next <= offset {
            break;
        }
        offset = next;
    }
    Ok(producers)
}

/// A topic and its partitions.
pub struct Topic {
    /// Name.
    pub name: String,
    /// KIP-516 id.
    pub topic_id: [u8; 16],
    /// Effective configuration.
    pub config: TopicConfig,
    /// The stored record (replicas, overrides).
    pub record: TopicRecord,
    /// Partitions by index.
    pub partitions: Vec<Arc<Partition>>,
}

impl Topic {
    /// The partition with this index.
    pub fn partition(&self, index: i32) -> Option<&Arc<Partition>> {
        usize::try_from(index)
            .ok()
            .and_then(|index| self.partitions.get(index))
    }
}

/// Why a topic operation failed; each maps to a Kafka error code.
#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    /// INVALID_TOPIC_EXCEPTION (17).
    #[error("invalid topic name: {0}")]
    InvalidName(skiff_protocol::topic_name::InvalidTopicName),
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
    #[error("invalid replication factor {0}: this node is the only broker")]
    InvalidReplicationFactor(i16),
    /// INVALID_CONFIG (40).
    #[error(transparent)]
    InvalidConfig(#[from] TopicConfigError),
    /// A config change refused before its values were looked at (INVALID_REQUEST or
    /// INVALID_CONFIG).
    #[error(transparent)]
    ConfigChange(#[from] ConfigChangeError),
    /// KAFKA_STORAGE_ERROR (56).
    #[error("storage: {0}")]
    Storage(String),
}

impl TopicError {
    /// The Kafka error code.
    pub fn code(&self) -> i16 {
        match self {
            Self::InvalidName(_) => 17,
            Self::AlreadyExists => 36,
            Self::Unknown => 3,
            Self::InvalidPartitions(_) => 37,
            Self::InvalidReplicationFactor(_) => 38,
            Self::InvalidConfig(_) => 40,
            Self::ConfigChange(error) => error.code(),
            Self::Storage(_) => 56,
        }
    }
}

/// Checks a topic name as Kafka does (the rule is skiff-protocol's, shared with storage).
pub fn validate_topic_name(name: &str) -> Result<(), TopicError> {
    skiff_protocol::topic_name::validate_topic_name(name).map_err(TopicError::InvalidName)
}

/// The broker's topic registry.
pub struct Topics {
    config: Arc<Config>,
    /// Taken out at [`Topics::close`]; `None` afterwards.
    log_dir: Mutex<Option<LogDir>>,
    store: Box<dyn MetadataStore>,
    topics: RwLock<BTreeMap<String, Arc<Topic>>>,
    /// Serializes creations and deletions so the saved metadata is always a consistent set.
    changes: Mutex<()>,
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
        ..LogConfig::default()
    }
}

fn storage(error: impl std::fmt::Display) -> TopicError {
    TopicError::Storage(error.to_string())
}

impl Topics {
    /// Opens every topic in the metadata store, with its logs (recovering them if needed).
    pub fn open(
        config: Arc<Config>,
        log_dir: LogDir,
        store: Box<dyn MetadataStore>,
    ) -> Result<Self, TopicError> {
        let records = store
            .load()
            .map_err(|error| TopicError::Storage(error.to_string()))?;
        let mut topics = BTreeMap::new();
        for record in records {
            let topic = Self::open_topic(&config, &log_dir, record)?;
            topics.insert(topic.name.clone(), Arc::new(topic));
        }
        Ok(Self {
            config,
            log_dir: Mutex::new(Some(log_dir)),
            store,
            topics: RwLock::new(topics),
            changes: Mutex::new(()),
        })
    }

    /// Builds a topic from its record, opening its partition logs (which the log directory
    /// recovered at open) or creating the ones missing.
    fn open_topic(
        config: &Config,
        log_dir: &LogDir,
        record: TopicRecord,
    ) -> Result<Topic, TopicError> {
        let topic_config = TopicConfig::resolve(config, &record.configs)?;
        let storage_config = log_config(&topic_config, config);
        let partitions = (0..record.replicas.len())
            .map(|index| Self::open_partition(log_dir, &record.name, index, &storage_config))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Topic {
            name: record.name.clone(),
            topic_id: parse_topic_id(&record.topic_id),
            config: topic_config,
            record,
            partitions,
        })
    }

    /// Opens partition `index` of `topic`: its log as recovered at open (with `storage_config`),
    /// or a new one if it has none, and its producer state.
    fn open_partition(
        log_dir: &LogDir,
        topic: &str,
        index: usize,
        storage_config: &LogConfig,
    ) -> Result<Arc<Partition>, TopicError> {
        let index = i32::try_from(index).map_err(|_| TopicError::InvalidPartitions(i32::MAX))?;
        let log = match log_dir.log(topic, index).map_err(storage)? {
            Some(log) => {
                log.set_config(storage_config.clone()).map_err(storage)?;
                log
            }
            None => log_dir
                .create(topic, index, Some(storage_config.clone()))
                .map_err(storage)?,
        };
        let producers = Mutex::new(replay_producers(&log).map_err(storage)?);
        Ok(Arc::new(Partition {
            index,
            log,
            producers,
            readable_end: ReadableEnd::default(),
        }))
    }

    /// Taken for every change of the topic set, so the saved metadata is always a consistent set.
    fn change_lock(&self) -> Result<std::sync::MutexGuard<'_, ()>, TopicError> {
        self.changes
            .lock()
            .map_err(|_| TopicError::Storage("poisoned".into()))
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

    /// Creates a topic with `replicas` (from placement) and config overrides; validates everything
    /// before anything is written. With `validate_only`, stops after validation.
    pub fn create(
        &self,
        name: &str,
        replicas: Vec<Vec<i32>>,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<Arc<Topic>, TopicError> {
        validate_topic_name(name)?;
        let partition_count = i32::try_from(replicas.len()).unwrap_or(i32::MAX);
        if !(1..=PARTITIONS_PER_TOPIC_MAX).contains(&partition_count) {
            return Err(TopicError::InvalidPartitions(partition_count));
        }
        TopicConfig::resolve(&self.config, &configs)?;
        let _change = self.change_lock()?;
        if self.get(name).is_some() {
            return Err(TopicError::AlreadyExists);
        }
        let mut topic_id = [0u8; 16];
        rand::thread_rng().fill_bytes(&mut topic_id);
        let record = TopicRecord {
            name: name.to_owned(),
            topic_id: topic_id.iter().map(|byte| format!("{byte:02x}")).collect(),
            replicas,
            configs,
        };
        if validate_only {
            return Self::open_topic_validated(&self.config, record);
        }
        let topic = {
            let log_dir = self.log_dir.lock().map_err(storage)?;
            let log_dir = log_dir.as_ref().ok_or_else(|| storage("shutting down"))?;
            Arc::new(Self::open_topic(&self.config, log_dir, record)?)
        };
        let mut records: Vec<TopicRecord> = self
            .all()
            .iter()
            .map(|topic| topic.record.clone())
            .collect();
        records.push(topic.record.clone());
        self.store
            .save(&records)
            .map_err(|error| TopicError::Storage(error.to_string()))?;
        if let Ok(mut topics) = self.topics.write() {
            topics.insert(name.to_owned(), topic.clone());
        }
        Ok(topic)
    }

    fn open_topic_validated(
        config: &Config,
        record: TopicRecord,
    ) -> Result<Arc<Topic>, TopicError> {
        Ok(Arc::new(Topic {
            name: record.name.clone(),
            topic_id: parse_topic_id(&record.topic_id),
            config: TopicConfig::resolve(config, &record.configs)?,
            record,
            partitions: Vec::new(),
        }))
    }

    /// Grows `name` to `replicas.len()` partitions: `replicas` is the whole assignment, the
    /// existing partitions' replicas first, unchanged. The new partitions' logs are created before
    /// the metadata naming them is saved, so a restart never finds a partition without its log
    /// (a log without its metadata is opened again by the next attempt). With `validate_only`,
    /// stops after validation.
    pub fn add_partitions(
        &self,
        name: &str,
        replicas: Vec<Vec<i32>>,
        validate_only: bool,
    ) -> Result<Arc<Topic>, TopicError> {
        let _change = self.change_lock()?;
        let topic = self.get(name).ok_or(TopicError::Unknown)?;
        let partition_count = i32::try_from(replicas.len()).unwrap_or(i32::MAX);
        if replicas.len() <= topic.partitions.len() || partition_count > PARTITIONS_PER_TOPIC_MAX {
            return Err(TopicError::InvalidPartitions(partition_count));
        }
        // The caller read the topic before this lock; a concurrent growth may have assigned the
        // partitions it meant to add differently.
        if replicas[..topic.record.replicas.len()] != topic.record.replicas[..] {
            return Err(TopicError::InvalidPartitions(partition_count));
        }
        let record = TopicRecord {
            replicas,
            ..topic.record.clone()
        };
        if validate_only {
            return Ok(topic);
        }
        let storage_config = log_config(&topic.config, &self.config);
        let mut partitions = topic.partitions.clone();
        {
            let log_dir = self.log_dir.lock().map_err(storage)?;
            let log_dir = log_dir.as_ref().ok_or_else(|| storage("shutting down"))?;
            for index in topic.partitions.len()..record.replicas.len() {
                partitions.push(Self::open_partition(log_dir, name, index, &storage_config)?);
            }
        }
        let grown = Arc::new(Topic {
            name: topic.name.clone(),
            topic_id: topic.topic_id,
            config: topic.config.clone(),
            record,
            partitions,
        });
        self.replace(grown.clone(), |store, records| store.save(records))?;
        Ok(grown)
    }

    /// Replaces the config overrides of `name` with what `change` makes of the current ones
    /// (computed under the change lock, so concurrent alters never lose one another; validated
    /// before anything changes), effective at once: every partition's log gets the new settings
    /// and later requests see the new config. With `validate_only`, returns the topic as it would
    /// be without changing anything.
    pub fn alter_configs(
        &self,
        name: &str,
        change: impl FnOnce(
            &BTreeMap<String, String>,
        ) -> Result<BTreeMap<String, String>, ConfigChangeError>,
        validate_only: bool,
    ) -> Result<Arc<Topic>, TopicError> {
        let _change = self.change_lock()?;
        let topic = self.get(name).ok_or(TopicError::Unknown)?;
        let overrides = change(&topic.record.configs)?;
        let config = TopicConfig::resolve(&self.config, &overrides)?;
        let storage_config = log_config(&config, &self.config);
        storage_config.validate().map_err(storage)?;
        let altered = Arc::new(Topic {
            name: topic.name.clone(),
            topic_id: topic.topic_id,
            config,
            record: TopicRecord {
                configs: overrides,
                ..topic.record.clone()
            },
            partitions: topic.partitions.clone(),
        });
        if validate_only {
            return Ok(altered);
        }
        self.replace(altered.clone(), |store, records| {
            store.save_topic_configs(records, name)
        })?;
        // Saved first: a crash between the two leaves the new settings to be applied at open.
        for partition in &altered.partitions {
            partition
                .log
                .set_config(storage_config.clone())
                .map_err(storage)?;
        }
        Ok(altered)
    }

    /// Saves the topic set with `changed` in place of its namesake (through `save`), then puts it
    /// in the map. Callers hold `changes`.
    fn replace(
        &self,
        changed: Arc<Topic>,
        save: impl FnOnce(&dyn MetadataStore, &[TopicRecord]) -> std::io::Result<()>,
    ) -> Result<(), TopicError> {
        let records: Vec<TopicRecord> = self
            .all()
            .iter()
            .map(|topic| {
                if topic.name == changed.name {
                    changed.record.clone()
                } else {
                    topic.record.clone()
                }
            })
            .collect();
        save(self.store.as_ref(), &records).map_err(storage)?;
        if let Ok(mut topics) = self.topics.write() {
            topics.insert(changed.name.clone(), changed);
        }
        Ok(())
    }

    /// Deletes a topic: forgotten in the metadata first (durably), then its logs removed.
    pub fn delete(&self, name: &str) -> Result<(), TopicError> {
        let _change = self.change_lock()?;
        let topic = self.get(name).ok_or(TopicError::Unknown)?;
        let records: Vec<TopicRecord> = self
            .all()
            .iter()
            .filter(|other| other.name != name)
            .map(|other| other.record.clone())
            .collect();
        self.store
            .save(&records)
            .map_err(|error| TopicError::Storage(error.to_string()))?;
        if let Ok(mut topics) = self.topics.write() {
            topics.remove(name);
        }
        // Fetches parked on the topic re-read now, find it gone and answer, releasing the
        // partitions (and their waiter lists) instead of holding them until max_wait_ms.
        for partition in &topic.partitions {
            partition.readable_end.advance();
        }
        let log_dir = self.log_dir.lock().map_err(storage)?;
        let log_dir = log_dir.as_ref().ok_or_else(|| storage("shutting down"))?;
        for partition in &topic.partitions {
            if let Err(error) = log_dir.delete(name, partition.index) {
                tracing::warn!(topic = name, partition = partition.index, %error, "deleting log");
            }
        }
        Ok(())
    }

    /// Flushes every log and writes the clean-shutdown marker.
    pub fn close(&self) -> Result<(), TopicError> {
        let log_dir = self.log_dir.lock().map_err(storage)?.take();
        match log_dir {
            Some(log_dir) => log_dir.close().map_err(storage),
            None => Ok(()),
        }
    }
}

fn parse_topic_id(hex: &str) -> [u8; 16] {
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

    fn open(dir: &std::path::Path) -> Topics {
        let log_dir = LogDir::open(dir, LogConfig::default()).expect("log dir");
        let store = Box::new(crate::partition::metadata_store::FileMetadataStore::new(
            dir,
            log_dir.files(),
        ));
        Topics::open(Arc::new(Config::default()), log_dir, store).expect("topics")
    }

    #[test]
    fn added_partitions_and_altered_configs_are_durable_and_validate_only_changes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let topics = open(dir.path());
        topics
            .create("t", vec![vec![1]], BTreeMap::new(), false)
            .expect("create");
        let three = vec![vec![1]; 3];
        topics
            .add_partitions("t", three.clone(), true)
            .expect("validate");
        assert_eq!(topics.get("t").expect("t").partitions.len(), 1);
        topics.add_partitions("t", three, false).expect("grow");
        assert!(matches!(
            topics.add_partitions("t", vec![vec![1]; 2], false),
            Err(TopicError::InvalidPartitions(2))
        ));
        let retention = |current: &BTreeMap<String, String>| {
            let mut next = current.clone();
            next.insert("retention.ms".to_owned(), "1000".to_owned());
            Ok(next)
        };
        topics
            .alter_configs("t", retention, true)
            .expect("validate");
        assert!(topics.get("t").expect("t").record.configs.is_empty());
        topics.alter_configs("t", retention, false).expect("alter");
        let altered = topics.get("t").expect("t");
        assert_eq!(altered.config.retention_ms, 1000);
        let log_retention = altered.partitions[0]
            .log
            .config()
            .expect("config")
            .retention_ms;
        assert_eq!(
            log_retention,
            Some(1000),
            "the log has the new setting at once"
        );
        let bad = |_: &BTreeMap<String, String>| {
            Ok(BTreeMap::from([(
                "segment.bytes".to_owned(),
                "1".to_owned(),
            )]))
        };
        assert!(matches!(
            topics.alter_configs("t", bad, false),
            Err(TopicError::InvalidConfig(_))
        ));
        topics.close().expect("close");
        drop(topics);

        let reopened = open(dir.path());
        let topic = reopened.get("t").expect("t");
        assert_eq!(topic.partitions.len(), 3);
        assert_eq!(topic.config.retention_ms, 1000);
        reopened.close().expect("close");
    }

    #[test]
    fn topic_id_hex_round_trips() {
        let id: [u8; 16] = std::array::from_fn(|index| index as u8 * 17);
        let hex: String = id.iter().map(|byte| format!("{byte:02x}")).collect();
        assert_eq!(parse_topic_id(&hex), id);
    }
}
