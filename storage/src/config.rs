//! Per-log configuration (Kafka's topic-level log settings) and its validation. Owns the defaults
//! and the ranges; must never read a clock or a file.

use crate::error::{Error, Result};
use crate::limits;

/// How a flush makes appended bytes durable.
///
/// What each survives: `Buffer` survives a crash of this process (the bytes are in the page
/// cache) but not of the machine; `SyncData` and `SyncAll` survive a machine crash once the flush
/// returns. `SyncData` (`fdatasync`) skips metadata that reading the data back does not need;
/// `SyncAll` (`fsync`) also writes the rest (timestamps).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PersistMode {
    /// Flushes do not call the OS: the recovery point advances only when the data directory
    /// syncs the log itself (`LogDir::checkpoint_recovery_points`, `LogDir::close`).
    Buffer,
    /// Flushes call `fdatasync`.
    #[default]
    SyncData,
    /// Flushes call `fsync`.
    SyncAll,
}

/// What happens to old data of a log (Kafka's `cleanup.policy`): deleted by age and size
/// (`retention_ms`, `retention_bytes`), compacted to the latest record per key (the log cleaner,
/// `crate::cleaner`), or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CleanupPolicy {
    /// `delete`: retention by time and size; never compacted. Kafka's default.
    #[default]
    Delete,
    /// `compact`: compacted; retention never deletes by time or size.
    Compact,
    /// `compact,delete`: both.
    CompactDelete,
}

impl CleanupPolicy {
    /// Whether retention deletes segments by time and size.
    pub fn deletes(self) -> bool {
        matches!(self, Self::Delete | Self::CompactDelete)
    }

    /// Whether the log cleaner compacts the log.
    pub fn compacts(self) -> bool {
        matches!(self, Self::Compact | Self::CompactDelete)
    }
}

/// A ratio in `[0, 1]` (Kafka's `min.cleanable.dirty.ratio`). Holds no NaN, so it compares and
/// is `Eq` by value.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Ratio(f64);

impl Eq for Ratio {}

impl Ratio {
    /// `value` if it lies in `[0, 1]` ([`Error::InvalidConfig`] otherwise, NaN included).
    pub fn new(value: f64) -> Result<Self> {
        if (0.0..=1.0).contains(&value) {
            Ok(Self(value))
        } else {
            Err(Error::InvalidConfig(format!("ratio {value} not in [0, 1]")))
        }
    }

    /// The value, in `[0, 1]`.
    pub fn get(self) -> f64 {
        self.0
    }
}

/// Settings of one partition log. Times are milliseconds on the caller's clock (storage never reads
/// one: every time comes in as an argument).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// Roll to a new segment before an append would make the active one larger than this
    /// (Kafka's `segment.bytes`). Default 1 GiB; at most `u32::MAX` because index positions are
    /// 4 bytes.
    pub segment_bytes: u64,
    /// Roll when the active segment's first append is this old (Kafka's `segment.ms`). Default
    /// 7 days.
    pub segment_ms: i64,
    /// Delete the oldest segments while the log is larger than this (Kafka's `retention.bytes`);
    /// `None` is unlimited (Kafka's −1). Default `None`.
    pub retention_bytes: Option<u64>,
    /// Delete segments whose newest timestamp is older than this (Kafka's `retention.ms`); `None`
    /// is unlimited. Default 7 days.
    pub retention_ms: Option<i64>,
    /// Add an offset-index entry after this many bytes of batches (Kafka's
    /// `index.interval.bytes`). Default 4096.
    pub index_interval_bytes: u32,
    /// Size each index file may grow to (Kafka's `segment.index.bytes`); a full index rolls the
    /// segment. Default 10 MiB.
    pub index_bytes_max: u32,
    /// Largest single batch an append accepts (Kafka's `max.message.bytes`). Default 1 MiB + 12.
    pub batch_bytes_max: u32,
    /// Flush after this many records since the last flush (Kafka's `flush.messages`); `Some(1)`
    /// flushes on every append; `None` never flushes by count. Default `None`.
    pub flush_messages_interval: Option<u64>,
    /// Flush when an append comes this long after the last flush (Kafka's `flush.ms`); `None`
    /// never flushes by time. Default `None`.
    pub flush_ms: Option<i64>,
    /// What a flush does. Default `SyncData`.
    pub persist_mode: PersistMode,
    /// Kafka's `cleanup.policy`. Default `Delete`. Retention by `retention_ms` and
    /// `retention_bytes` applies only when it deletes; compaction only when it compacts.
    pub cleanup_policy: CleanupPolicy,
    /// Kafka's `min.cleanable.dirty.ratio`: a compacted log is cleaned once its dirty bytes are
    /// more than this share of its cleanable bytes (or past `max_compaction_lag_ms`). Default
    /// 0.5.
    pub min_cleanable_dirty_ratio: Ratio,
    /// Kafka's `min.compaction.lag.ms`: a segment whose newest record is younger than this is
    /// not cleaned yet (consumers see every version for at least this long). Default 0.
    pub min_compaction_lag_ms: i64,
    /// Kafka's `max.compaction.lag.ms`: a dirty segment whose first batch is older than this
    /// forces a cleaning whatever the ratio. Default `i64::MAX` (unbounded). At least 1 and at
    /// least `min_compaction_lag_ms`.
    pub max_compaction_lag_ms: i64,
    /// Kafka's `delete.retention.ms`: how long a tombstone (a record with a null value) stays
    /// after the cleaning that first passed it (its delete horizon, KIP-534). Default 1 day.
    pub delete_retention_ms: i64,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: limits::SEGMENT_BYTES_DEFAULT,
            segment_ms: limits::SEGMENT_MS_DEFAULT,
            retention_bytes: None,
            retention_ms: Some(limits::SEGMENT_MS_DEFAULT),
            index_interval_bytes: limits::INDEX_INTERVAL_BYTES_DEFAULT,
            index_bytes_max: limits::INDEX_BYTES_MAX_DEFAULT,
            batch_bytes_max: limits::BATCH_BYTES_MAX_DEFAULT,
            flush_messages_interval: None,
            flush_ms: None,
            persist_mode: PersistMode::SyncData,
            cleanup_policy: CleanupPolicy::Delete,
            min_cleanable_dirty_ratio: Ratio(limits::MIN_CLEANABLE_DIRTY_RATIO_DEFAULT),
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: limits::DELETE_RETENTION_MS_DEFAULT,
        }
    }
}

impl LogConfig {
    /// Checks every value against its range; the first bad one is named in the error.
    pub fn validate(&self) -> Result<()> {
        let bad = |reason: String| Err(Error::InvalidConfig(reason));
        if self.segment_bytes < limits::SEGMENT_BYTES_MIN
            || self.segment_bytes > limits::SEGMENT_BYTES_MAX
        {
            return bad(format!(
                "segment_bytes {} not in [{}, {}]",
                self.segment_bytes,
                limits::SEGMENT_BYTES_MIN,
                limits::SEGMENT_BYTES_MAX
            ));
        }
        if self.segment_ms <= 0 {
            return bad(format!("segment_ms {} must be positive", self.segment_ms));
        }
        if let Some(retention_ms) = self.retention_ms {
            if retention_ms < 0 {
                return bad(format!(
                    "retention_ms {retention_ms} is negative (use None for unlimited)"
                ));
            }
        }
        if self.index_interval_bytes == 0 {
            return bad("index_interval_bytes must be positive".to_owned());
        }
        if self.index_bytes_max < limits::INDEX_BYTES_MIN {
            return bad(format!(
                "index_bytes_max {} below {}",
                self.index_bytes_max,
                limits::INDEX_BYTES_MIN
            ));
        }
        let batch_min = skiff_protocol::records::v2::BATCH_HEADER_BYTES as u64;
        if u64::from(self.batch_bytes_max) < batch_min
            || u64::from(self.batch_bytes_max) > self.segment_bytes
        {
            return bad(format!(
                "batch_bytes_max {} not in [{batch_min}, segment_bytes {}]",
                self.batch_bytes_max, self.segment_bytes
            ));
        }
        if self.flush_messages_interval == Some(0) {
            return bad("flush_messages_interval must be at least 1 (None disables)".to_owned());
        }
        if let Some(flush_ms) = self.flush_ms {
            if flush_ms < 0 {
                return bad(format!("flush_ms {flush_ms} is negative"));
            }
        }
        self.validate_compaction()
    }

    /// The compaction settings' ranges, as Kafka's `LogConfig.validateValues` checks them.
    fn validate_compaction(&self) -> Result<()> {
        let bad = |reason: String| Err(Error::InvalidConfig(reason));
        // `Ratio::new` is the only constructor outside this module; recheck anyway.
        Ratio::new(self.min_cleanable_dirty_ratio.get())?;
        if self.min_compaction_lag_ms < 0 {
            return bad(format!(
                "min_compaction_lag_ms {} is negative",
                self.min_compaction_lag_ms
            ));
        }
        if self.max_compaction_lag_ms < 1 {
            return bad(format!(
                "max_compaction_lag_ms {} must be at least 1",
                self.max_compaction_lag_ms
            ));
        }
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms {
            return bad(format!(
                "min_compaction_lag_ms {} above max_compaction_lag_ms {}",
                self.min_compaction_lag_ms, self.max_compaction_lag_ms
            ));
        }
        if self.delete_retention_ms < 0 {
            return bad(format!(
                "delete_retention_ms {} is negative",
                self.delete_retention_ms
            ));
        }
        Ok(())
    }
}

/// Settings of a data directory as a whole (every log below it). Bounds what the directory may
/// hold open and how many threads its start and close use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirConfig {
    /// Most logs the directory holds; [`crate::LogDir::check_room`] refuses more. Default
    /// 20,000.
    pub logs_max: usize,
    /// Descriptors of segments' `.log` files kept open, active and sealed alike, the most
    /// recently used first; capped at a quarter of the process's open-file limit at open. An
    /// append, read or flush of a segment outside this set reopens its file (one `open(2)`, a
    /// few µs), so an idle partition holds no descriptor. Cost: one descriptor each. Default
    /// 4096: more busy partitions than this pay a reopen per append.
    pub log_files_max: usize,
    /// Threads that recover the logs at open and close them at close, each taking the next log
    /// (Kafka's `num.recovery.threads.per.data.dir`). Default 4: the work is mostly waiting for
    /// fsync, so more threads than cores still help.
    pub recovery_threads: usize,
    /// Descriptors [`crate::LogDir::check_room`] keeps free below the process's open-file limit
    /// when it admits new logs (for sockets, reads and files being written). Default 1024, or a
    /// quarter of the limit if that is smaller.
    pub files_reserved: u64,
    /// Most logs with unsynced data that [`crate::LogDir::checkpoint_recovery_points`] and
    /// [`crate::LogDir::close`] sync one `fdatasync` each (on `recovery_threads` threads); with
    /// more, one `syncfs(2)` of the whole file system syncs them all. Default 512 (see
    /// `limits::FSYNC_PER_LOG_DIRTY_LOGS_MAX` for the figures); 0 always uses `syncfs`.
    pub sync_each_dirty_logs_max: usize,
}

impl Default for DirConfig {
    fn default() -> Self {
        Self {
            logs_max: limits::LOGS_MAX_DEFAULT,
            log_files_max: limits::LOG_FILES_MAX_DEFAULT,
            recovery_threads: limits::RECOVERY_THREADS_DEFAULT,
            files_reserved: limits::FILES_RESERVED_DEFAULT,
            sync_each_dirty_logs_max: limits::FSYNC_PER_LOG_DIRTY_LOGS_MAX,
        }
    }
}

impl DirConfig {
    /// Checks every value against its range.
    pub fn validate(&self) -> Result<()> {
        if self.logs_max == 0 {
            return Err(Error::InvalidConfig("logs_max must be positive".to_owned()));
        }
        if !(1..=limits::RECOVERY_THREADS_MAX).contains(&self.recovery_threads) {
            return Err(Error::InvalidConfig(format!(
                "recovery_threads {} not in [1, {}]",
                self.recovery_threads,
                limits::RECOVERY_THREADS_MAX
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid() {
        LogConfig::default().validate().unwrap();
        DirConfig::default().validate().unwrap();
        for bad in [
            DirConfig {
                logs_max: 0,
                ..DirConfig::default()
            },
            DirConfig {
                recovery_threads: 0,
                ..DirConfig::default()
            },
        ] {
            assert!(matches!(bad.validate(), Err(Error::InvalidConfig(_))));
        }
    }

    #[test]
    fn compaction_defaults_are_kafkas_and_ratios_are_bounded() {
        let config = LogConfig::default();
        assert_eq!(config.cleanup_policy, CleanupPolicy::Delete);
        assert!(config.cleanup_policy.deletes() && !config.cleanup_policy.compacts());
        assert!(CleanupPolicy::Compact.compacts() && !CleanupPolicy::Compact.deletes());
        assert!(CleanupPolicy::CompactDelete.compacts() && CleanupPolicy::CompactDelete.deletes());
        assert_eq!(config.min_cleanable_dirty_ratio.get(), 0.5);
        assert_eq!(config.min_compaction_lag_ms, 0);
        assert_eq!(config.max_compaction_lag_ms, i64::MAX);
        assert_eq!(config.delete_retention_ms, 86_400_000);
        for bad in [-0.1, 1.1, f64::NAN] {
            assert!(matches!(Ratio::new(bad), Err(Error::InvalidConfig(_))));
        }
        assert_eq!(Ratio::new(1.0).unwrap().get(), 1.0);
    }

    #[test]
    fn bad_values_are_typed_errors() {
        type Case = Box<dyn Fn(&mut LogConfig)>;
        let cases: Vec<Case> = vec![
            Box::new(|c| c.segment_bytes = u64::from(u32::MAX) + 1),
            Box::new(|c| c.segment_bytes = 10),
            Box::new(|c| c.segment_ms = 0),
            Box::new(|c| c.retention_ms = Some(-5)),
            Box::new(|c| c.index_interval_bytes = 0),
            Box::new(|c| c.index_bytes_max = 8),
            Box::new(|c| c.batch_bytes_max = 10),
            Box::new(|c| {
                c.segment_bytes = 1000;
                c.batch_bytes_max = 2000;
            }),
            Box::new(|c| c.flush_messages_interval = Some(0)),
            Box::new(|c| c.flush_ms = Some(-1)),
            Box::new(|c| c.min_compaction_lag_ms = -1),
            Box::new(|c| c.max_compaction_lag_ms = 0),
            Box::new(|c| {
                c.min_compaction_lag_ms = 10;
                c.max_compaction_lag_ms = 9;
            }),
            Box::new(|c| c.delete_retention_ms = -1),
        ];
        for (index, case) in cases.iter().enumerate() {
            let mut config = LogConfig::default();
            case(&mut config);
            let result = config.validate();
            assert!(
                matches!(result, Err(Error::InvalidConfig(_))),
                "case {index}: {result:?}"
            );
        }
    }
}
