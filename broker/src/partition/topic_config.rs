//! Per-topic configuration: Kafka's topic-level keys with the broker's defaults behind them, as
//! CreateTopics and the alter-config APIs set them and DescribeConfigs reports them.
//!
//! Must never: accept a key it does not understand or a value outside its bound (the topic would
//! then silently behave differently from what the operator asked).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::{CleanupPolicy, Config, Fraction, LegacyIsolationLevel};

/// How record timestamps are set on append.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimestampType {
    /// The producer's timestamps are kept.
    CreateTime,
    /// The broker's append time replaces them.
    LogAppendTime,
}

/// A topic's effective configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicConfig {
    /// `segment.bytes`.
    pub segment_bytes: u64,
    /// `segment.ms`.
    pub segment_ms: u64,
    /// `retention.ms`, −1 = forever.
    pub retention_ms: i64,
    /// `retention.bytes`, −1 = unlimited.
    pub retention_bytes: i64,
    /// `max.message.bytes`.
    pub max_message_bytes: u32,
    /// `message.downconversion.enable`.
    pub downconversion_enable: bool,
    /// `skiff.legacy.isolation.level`: what Fetch v0–v3 reads of transactional data.
    pub legacy_isolation_level: LegacyIsolationLevel,
    /// `message.timestamp.type`.
    pub timestamp_type: TimestampType,
    /// `compression.type`: `producer` keeps the producer's codec (the only one stored today);
    /// `zstd` makes Fetch < v10 answer UNSUPPORTED_COMPRESSION_TYPE for the whole partition.
    pub compression_type: String,
    /// `flush.messages`.
    pub flush_messages: u64,
    /// `flush.ms`.
    pub flush_ms: u64,
    /// `min.insync.replicas`: the ISR an acks=all produce needs.
    pub min_insync_replicas: u32,
    /// `cleanup.policy`: retention by time and size (delete), the log cleaner (compact), or both.
    pub cleanup_policy: CleanupPolicy,
    /// `min.cleanable.dirty.ratio`: the dirty share above which the cleaner picks the log.
    pub min_cleanable_dirty_ratio: Fraction,
    /// `min.compaction.lag.ms`: records younger than this are not compacted.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: records uncompacted for longer make the log cleanable whatever
    /// its dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// `delete.retention.ms`: how long a tombstone outlives the cleaning that first passes it.
    pub delete_retention_ms: i64,
    /// `unclean.leader.election.enable`: read by the controller from the topic record
    /// (`skiff_cluster::controller::unclean_leader_election_enabled`); here it is validated and
    /// described.
    pub unclean_leader_election_enable: bool,
}

/// Why a topic config was refused (CreateTopics and the alter-config APIs answer INVALID_CONFIG
/// with the message).
#[derive(Debug, thiserror::Error)]
#[error("invalid topic config {key}={value}: {reason}")]
pub struct TopicConfigError {
    /// The key.
    pub key: String,
    /// The value given.
    pub value: String,
    /// Why it was refused.
    pub reason: &'static str,
}

impl TopicConfigError {
    fn new(key: &str, value: &str, reason: &'static str) -> Self {
        Self {
            key: key.to_owned(),
            value: value.to_owned(),
            reason,
        }
    }
}

/// A number from a config value's text (surrounding spaces allowed, as Kafka's parser).
fn number<T: std::str::FromStr>(value: &str) -> Option<T> {
    value.trim().parse().ok()
}

/// Every topic key Skiff understands, for DescribeConfigs.
pub const TOPIC_CONFIG_KEYS: &[&str] = &[
    "cleanup.policy",
    "compression.type",
    "delete.retention.ms",
    "flush.messages",
    "flush.ms",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.downconversion.enable",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "min.insync.replicas",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.ms",
    "skiff.legacy.isolation.level",
    "unclean.leader.election.enable",
];

/// The broker key whose value a topic key defaults to (Kafka's synonym, as DescribeConfigs
/// reports it), for every key in [`TOPIC_CONFIG_KEYS`].
pub fn broker_synonym(key: &str) -> Option<&'static str> {
    Some(match key {
        "cleanup.policy" => "log.cleanup.policy",
        "compression.type" => "compression.type",
        "delete.retention.ms" => "log.cleaner.delete.retention.ms",
        "max.compaction.lag.ms" => "log.cleaner.max.compaction.lag.ms",
        "min.cleanable.dirty.ratio" => "log.cleaner.min.cleanable.ratio",
        "min.compaction.lag.ms" => "log.cleaner.min.compaction.lag.ms",
        "flush.messages" => "log.flush.interval.messages",
        "flush.ms" => "log.flush.interval.ms",
        "max.message.bytes" => "message.max.bytes",
        "message.downconversion.enable" => "log.message.downconversion.enable",
        "message.timestamp.type" => "log.message.timestamp.type",
        "min.insync.replicas" => "min.insync.replicas",
        "retention.bytes" => "log.retention.bytes",
        "retention.ms" => "log.retention.ms",
        "segment.bytes" => "log.segment.bytes",
        "segment.ms" => "log.roll.ms",
        "skiff.legacy.isolation.level" => "skiff.legacy.isolation.level",
        "unclean.leader.election.enable" => "unclean.leader.election.enable",
        _ => return None,
    })
}

/// Whether a topic key is list-typed in Kafka (IncrementalAlterConfigs may APPEND to and
/// SUBTRACT from it). Of the keys Skiff honours, only `cleanup.policy` is.
pub fn is_list_key(key: &str) -> bool {
    key == "cleanup.policy"
}

impl TopicConfig {
    /// The broker defaults with `overrides` (topic-level keys) applied.
    pub fn resolve(
        broker: &Config,
        overrides: &BTreeMap<String, String>,
    ) -> Result<Self, TopicConfigError> {
        let mut config = Self {
            segment_bytes: broker.log_segment_bytes,
            segment_ms: broker.log_roll_ms,
            retention_ms: broker.log_retention_ms,
            retention_bytes: broker.log_retention_bytes,
            max_message_bytes: broker.message_max_bytes,
            downconversion_enable: broker.log_message_downconversion_enable,
            legacy_isolation_level: broker.legacy_isolation_level,
            timestamp_type: TimestampType::CreateTime,
            compression_type: "producer".to_owned(),
            flush_messages: broker.log_flush_interval_messages,
            flush_ms: broker.log_flush_interval_ms,
            min_insync_replicas: u32::try_from(broker.min_insync_replicas).unwrap_or(1),
            cleanup_policy: broker.log_cleanup_policy,
            min_cleanable_dirty_ratio: broker.log_cleaner_min_cleanable_ratio,
            min_compaction_lag_ms: broker.log_cleaner_min_compaction_lag_ms,
            max_compaction_lag_ms: broker.log_cleaner_max_compaction_lag_ms,
            delete_retention_ms: broker.log_cleaner_delete_retention_ms,
            unclean_leader_election_enable: broker.unclean_leader_election_enable,
        };
        for (key, value) in overrides {
            config.set(key, value)?;
        }
        config.check_compaction_lags()?;
        Ok(config)
    }

    /// [`TopicConfig::resolve`] for the topic `name`: the offsets topic is compacted unless its
    /// overrides say otherwise, since one created by an older Skiff has no `cleanup.policy` (its
    /// coordinator compacted it by snapshot then) and must never lose commits to retention.
    pub fn resolve_named(
        broker: &Config,
        name: &str,
        overrides: &BTreeMap<String, String>,
    ) -> Result<Self, TopicConfigError> {
        let mut config = Self::resolve(broker, overrides)?;
        if name == skiff_cluster::topics::OFFSETS_TOPIC && !overrides.contains_key("cleanup.policy")
        {
            config.cleanup_policy = CleanupPolicy::COMPACT;
        }
        Ok(config)
    }

    /// Kafka's rule between the two lags (`LogConfig.validateValues`): a record cannot have to
    /// wait longer before it may be compacted than it may wait before it must be.
    fn check_compaction_lags(&self) -> Result<(), TopicConfigError> {
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms {
            let lag = self.min_compaction_lag_ms.to_string();
            let reason = "conflicts with max.compaction.lag.ms, which is smaller";
            return Err(TopicConfigError::new("min.compaction.lag.ms", &lag, reason));
        }
        Ok(())
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), TopicConfigError> {
        let error = |reason| TopicConfigError::new(key, value, reason);
        match key {
            "segment.bytes" => {
                self.segment_bytes = number(value)
                    .filter(|bytes| (1024..=u64::from(u32::MAX)).contains(bytes))
                    .ok_or_else(|| error("must be between 1024 and 4294967295"))?
            }
            "segment.ms" => {
                self.segment_ms = number(value)
                    .filter(|ms| *ms > 0)
                    .ok_or_else(|| error("must be a positive number of ms"))?
            }
            "retention.ms" => {
                self.retention_ms = number(value)
                    .filter(|ms| *ms >= -1)
                    .ok_or_else(|| error("must be -1 or a number of ms"))?
            }
            "retention.bytes" => {
                self.retention_bytes = number(value)
                    .filter(|bytes| *bytes >= -1)
                    .ok_or_else(|| error("must be -1 or a number of bytes"))?
            }
            "max.message.bytes" => {
                self.max_message_bytes = number(value)
                    .filter(|bytes| *bytes >= 64)
                    .ok_or_else(|| error("must be at least 64"))?
            }
            "message.downconversion.enable" => {
                self.downconversion_enable =
                    number(value).ok_or_else(|| error("must be true or false"))?
            }
            "skiff.legacy.isolation.level" => {
                self.legacy_isolation_level = LegacyIsolationLevel::parse(value)
                    .ok_or_else(|| error("must be read_uncommitted or read_committed"))?
            }
            "message.timestamp.type" => {
                self.timestamp_type = match value {
                    "CreateTime" => TimestampType::CreateTime,
                    "LogAppendTime" => TimestampType::LogAppendTime,
                    _ => return Err(error("must be CreateTime or LogAppendTime")),
                }
            }
            "compression.type" => match value {
                "producer" | "uncompressed" | "gzip" | "snappy" | "lz4" | "zstd" => {
                    self.compression_type = value.to_owned()
                }
                _ => return Err(error("unknown compression type")),
            },
            "cleanup.policy"
            | "min.cleanable.dirty.ratio"
            | "min.compaction.lag.ms"
            | "max.compaction.lag.ms"
            | "delete.retention.ms" => return self.set_cleaning(key, value),
            "flush.messages" => {
                self.flush_messages = number(value)
                    .filter(|count| *count >= 1)
                    .ok_or_else(|| error("must be at least 1"))?
            }
            "flush.ms" => {
                self.flush_ms = number(value).ok_or_else(|| error("must be a number of ms"))?
            }
            "min.insync.replicas" => {
                self.min_insync_replicas = number(value)
                    .filter(|count| *count >= 1)
                    .ok_or_else(|| error("must be at least 1"))?
            }
            skiff_cluster::controller::UNCLEAN_LEADER_ELECTION_ENABLE => {
                self.unclean_leader_election_enable =
                    number(value).ok_or_else(|| error("must be true or false"))?
            }
            _ => return Err(error("unknown topic config key")),
        }
        Ok(())
    }

    /// The log cleaner's keys (`set`'s other half).
    fn set_cleaning(&mut self, key: &str, value: &str) -> Result<(), TopicConfigError> {
        let error = |reason| TopicConfigError::new(key, value, reason);
        match key {
            "cleanup.policy" => {
                self.cleanup_policy = CleanupPolicy::parse(value)
                    .map_err(|_| error("must list delete and/or compact, separated by commas"))?
            }
            "min.cleanable.dirty.ratio" => {
                self.min_cleanable_dirty_ratio = number(value)
                    .and_then(Fraction::new)
                    .ok_or_else(|| error("must be a number between 0 and 1"))?
            }
            "min.compaction.lag.ms" => {
                self.min_compaction_lag_ms = number(value)
                    .filter(|ms| *ms >= 0)
                    .ok_or_else(|| error("must be at least 0 ms"))?
            }
            "max.compaction.lag.ms" => {
                self.max_compaction_lag_ms = number(value)
                    .filter(|ms| *ms >= 1)
                    .ok_or_else(|| error("must be at least 1 ms"))?
            }
            "delete.retention.ms" => {
                self.delete_retention_ms = number(value)
                    .filter(|ms| *ms >= 0)
                    .ok_or_else(|| error("must be at least 0 ms"))?
            }
            _ => return Err(error("unknown topic config key")),
        }
        Ok(())
    }

    /// The value of a key as DescribeConfigs reports it.
    pub fn value_of(&self, key: &str) -> Option<String> {
        Some(match key {
            "cleanup.policy" => self.cleanup_policy.to_string(),
            "min.cleanable.dirty.ratio" => format!("{:?}", self.min_cleanable_dirty_ratio),
            "min.compaction.lag.ms" => self.min_compaction_lag_ms.to_string(),
            "max.compaction.lag.ms" => self.max_compaction_lag_ms.to_string(),
            "delete.retention.ms" => self.delete_retention_ms.to_string(),
            "compression.type" => self.compression_type.clone(),
            "flush.messages" => self.flush_messages.min(i64::MAX as u64).to_string(),
            "flush.ms" => self.flush_ms.min(i64::MAX as u64).to_string(),
            "max.message.bytes" => self.max_message_bytes.to_string(),
            "message.downconversion.enable" => self.downconversion_enable.to_string(),
            "skiff.legacy.isolation.level" => self.legacy_isolation_level.as_str().to_owned(),
            "min.insync.replicas" => self.min_insync_replicas.to_string(),
            "message.timestamp.type" => match self.timestamp_type {
                TimestampType::CreateTime => "CreateTime".to_owned(),
                TimestampType::LogAppendTime => "LogAppendTime".to_owned(),
            },
            "retention.bytes" => self.retention_bytes.to_string(),
            "retention.ms" => self.retention_ms.to_string(),
            "segment.bytes" => self.segment_bytes.to_string(),
            "segment.ms" => self.segment_ms.to_string(),
            "unclean.leader.election.enable" => self.unclean_leader_election_enable.to_string(),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_apply_and_bad_values_are_refused() {
        let broker = Config::default();
        let mut overrides = BTreeMap::new();
        overrides.insert("retention.ms".to_owned(), "1000".to_owned());
        overrides.insert(
            "message.downconversion.enable".to_owned(),
            "false".to_owned(),
        );
        let config = TopicConfig::resolve(&broker, &overrides).expect("valid");
        assert_eq!(config.retention_ms, 1000);
        assert!(!config.downconversion_enable);
        assert_eq!(config.value_of("retention.ms").as_deref(), Some("1000"));
        overrides.insert("segment.bytes".to_owned(), "99999999999".to_owned());
        assert!(TopicConfig::resolve(&broker, &overrides).is_err());
        let mut unknown = BTreeMap::new();
        unknown.insert("colour".to_owned(), "blue".to_owned());
        assert!(TopicConfig::resolve(&broker, &unknown).is_err());
    }

    #[test]
    fn the_legacy_isolation_level_defaults_to_the_brokers_and_refuses_other_values() {
        let mut broker = Config::default();
        let none = BTreeMap::new();
        let config = TopicConfig::resolve(&broker, &none).expect("defaults");
        assert_eq!(
            config.legacy_isolation_level,
            LegacyIsolationLevel::ReadUncommitted
        );
        assert_eq!(
            config.value_of("skiff.legacy.isolation.level").as_deref(),
            Some("read_uncommitted")
        );
        broker.legacy_isolation_level = LegacyIsolationLevel::ReadCommitted;
        let config = TopicConfig::resolve(&broker, &none).expect("broker default");
        assert_eq!(
            config.legacy_isolation_level,
            LegacyIsolationLevel::ReadCommitted
        );
        let key = "skiff.legacy.isolation.level".to_owned();
        let topic = BTreeMap::from([(key.clone(), "read_uncommitted".to_owned())]);
        let config = TopicConfig::resolve(&broker, &topic).expect("topic override");
        assert_eq!(
            config.legacy_isolation_level,
            LegacyIsolationLevel::ReadUncommitted
        );
        let bad = BTreeMap::from([(key, "committed".to_owned())]);
        let error = TopicConfig::resolve(&broker, &bad).expect_err("refused");
        assert_eq!(error.key, "skiff.legacy.isolation.level");
        assert!(
            error
                .to_string()
                .contains("read_uncommitted or read_committed"),
            "{error}"
        );
    }

    #[test]
    fn every_listed_key_has_a_value_and_a_synonym() {
        let config = TopicConfig::resolve(&Config::default(), &BTreeMap::new()).expect("defaults");
        for key in TOPIC_CONFIG_KEYS {
            assert!(config.value_of(key).is_some(), "{key}");
            assert!(broker_synonym(key).is_some(), "{key}");
        }
    }

    #[test]
    fn cleaning_keys_resolve_describe_and_keep_their_rules() {
        let broker = Config::default();
        let overrides = BTreeMap::from([
            ("cleanup.policy".to_owned(), "delete,compact".to_owned()),
            ("min.cleanable.dirty.ratio".to_owned(), "0.01".to_owned()),
            ("delete.retention.ms".to_owned(), "100".to_owned()),
        ]);
        let config = TopicConfig::resolve(&broker, &overrides).expect("valid");
        assert!(config.cleanup_policy.compact && config.cleanup_policy.delete);
        assert_eq!(
            config.value_of("cleanup.policy").as_deref(),
            Some("compact,delete")
        );
        assert_eq!(
            config.value_of("min.cleanable.dirty.ratio").as_deref(),
            Some("0.01")
        );
        assert_eq!(config.delete_retention_ms, 100);
        for (key, bad) in [
            ("cleanup.policy", "shred"),
            ("cleanup.policy", ""),
            ("min.cleanable.dirty.ratio", "1.5"),
            ("min.compaction.lag.ms", "-1"),
            ("max.compaction.lag.ms", "0"),
            ("delete.retention.ms", "-5"),
        ] {
            let overrides = BTreeMap::from([(key.to_owned(), bad.to_owned())]);
            assert!(
                TopicConfig::resolve(&broker, &overrides).is_err(),
                "{key}={bad}"
            );
        }
        let lags = BTreeMap::from([
            ("min.compaction.lag.ms".to_owned(), "10".to_owned()),
            ("max.compaction.lag.ms".to_owned(), "5".to_owned()),
        ]);
        let error = TopicConfig::resolve(&broker, &lags).expect_err("conflict");
        assert_eq!(error.key, "min.compaction.lag.ms");
    }

    #[test]
    fn the_offsets_topic_is_compacted_unless_it_says_otherwise() {
        let broker = Config::default();
        let offsets = skiff_cluster::topics::OFFSETS_TOPIC;
        let none = BTreeMap::new();
        let config = TopicConfig::resolve_named(&broker, offsets, &none).expect("valid");
        assert_eq!(config.cleanup_policy, CleanupPolicy::COMPACT);
        let plain = TopicConfig::resolve_named(&broker, "orders", &none).expect("valid");
        assert_eq!(plain.cleanup_policy, CleanupPolicy::DELETE);
    }
}
