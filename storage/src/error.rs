//! The crate's one error type. Owns the taxonomy of what can go wrong in storage; must never carry
//! a panic's worth of meaning (every failure a peer or a file can cause is a variant here).

use std::path::PathBuf;

use skiff_protocol::records::RecordError;

/// Result alias for storage operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a storage operation failed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An operating-system call on a file or directory failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Bytes on disk that recovery cannot accept at a point it must not cut (before the flushed
    /// point), or a checkpoint it cannot read. Nothing is truncated when this is returned.
    #[error("corrupt data in {path} at byte {position}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Byte position in the file.
        position: u64,
        /// What is wrong.
        reason: String,
    },
    /// An earlier write or fsync failed, so the log no longer knows what is durable; every later
    /// append and flush fails with this until the directory is reopened (which runs recovery).
    #[error("log is poisoned by an earlier write or fsync failure; reopen to recover")]
    Poisoned,
    /// The log or its directory was closed.
    #[error("log is closed")]
    Closed,
    /// A read or lookup asked for an offset outside `[log_start, log_end]`.
    #[error("offset {requested} out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        /// The offset asked for.
        requested: i64,
        /// First offset still in the log.
        log_start: i64,
        /// Offset the next append will get.
        log_end: i64,
    },
    /// Another process, or another `LogDir` in this process, holds the directory's lock.
    #[error("data directory {path} is locked by another user")]
    Locked {
        /// The data directory.
        path: PathBuf,
    },
    /// A batch handed to append failed the v2 checks (magic, length, CRC32C).
    #[error("invalid record batch: {0}")]
    InvalidBatch(#[from] RecordError),
    /// The append input is not a sequence of whole v2 batches.
    #[error("invalid record batch layout: {0}")]
    InvalidBatchLayout(&'static str),
    /// A batch is larger than the configured `batch_bytes_max`, or an append cannot fit a segment.
    #[error("batch of {size_bytes} bytes exceeds the limit of {limit_bytes} bytes")]
    BatchTooLarge {
        /// Size of the batch or append.
        size_bytes: u64,
        /// The limit it exceeds.
        limit_bytes: u64,
    },
    /// A follower's append ([`crate::Log::append_replicated`]) does not continue the log: its
    /// first batch must start at the log end offset and each next batch right after the one
    /// before (Kafka's `UnexpectedAppendOffsetException`). Nothing is written.
    #[error("append expected a batch at offset {expected}, found one at {found}")]
    UnexpectedAppendOffset {
        /// The offset the batch had to start at.
        expected: i64,
        /// The base offset it carries.
        found: i64,
    },
    /// A follower's append carries a leader epoch below one the log already holds (the cache's
    /// latest, or an earlier batch of the same append): the leader's log and this one diverged,
    /// which truncation must resolve first. Nothing is written.
    #[error("leader epoch {epoch} is below the latest epoch {latest} of the log")]
    EpochBelowLatest {
        /// The batch's leader epoch.
        epoch: i32,
        /// The latest epoch the log holds.
        latest: i32,
    },
    /// An offset argument that no log can hold (negative).
    #[error("offset {0} is negative")]
    NegativeOffset(i64),
    /// A configuration value is out of its allowed range.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// A topic name or partition number that cannot name a log directory.
    #[error("invalid log name {0:?}")]
    InvalidName(String),
    /// `create` found the log already present.
    #[error("log {0} already exists")]
    LogExists(String),
    /// The named log does not exist.
    #[error("log {0} not found")]
    LogNotFound(String),
    /// A new log was refused because a limit would be passed or was hit (the directory's
    /// `logs_max`, the open-file limit, `vm.max_map_count`); the message names the limit. Logs
    /// already open are not affected.
    #[error("limit reached: {0}")]
    LimitReached(String),
    /// An aborted-transaction entry handed to [`crate::Log::append_aborted_txn`] that the index
    /// cannot take: its marker is outside the log, not after the last entry's, or its offsets
    /// are inconsistent. Nothing is written.
    #[error("invalid aborted-transaction entry: {0}")]
    InvalidTxnEntry(String),
    /// [`crate::Log::aborted_transactions`] found more entries in the range than one call
    /// returns ([`crate::ABORTED_TXNS_PER_READ_MAX`]); the caller asks for a smaller range
    /// (a lower upper bound, as a fetch of fewer bytes has).
    #[error(
        "more than {limit} aborted transactions between offsets {from_offset} and {upper_bound}"
    )]
    TooManyAbortedTxns {
        /// The bound passed.
        limit: usize,
        /// The range asked for: its first offset.
        from_offset: i64,
        /// The range asked for: its upper bound (exclusive).
        upper_bound: i64,
    },
    /// A producer-state snapshot handed to [`crate::Log::write_producer_snapshot`] that the log
    /// cannot keep (an offset outside the log, or more bytes than
    /// [`crate::PRODUCER_SNAPSHOT_BYTES_MAX`]). Nothing is written.
    #[error("invalid producer snapshot: {0}")]
    InvalidSnapshot(String),
    /// The log was opened with recovery deferred ([`crate::LogDir::open_deferred`]) and is not
    /// recovered yet; retry once it is.
    #[error("log {topic}-{partition} is not recovered yet")]
    Recovering {
        /// Its topic.
        topic: String,
        /// Its partition.
        partition: i32,
    },
}

impl Error {
    /// Wraps an OS error with the path it concerns.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    /// A corruption at `position` of `path`.
    pub(crate) fn corrupt(
        path: impl Into<PathBuf>,
        position: u64,
        reason: impl Into<String>,
    ) -> Self {
        Self::Corrupt {
            path: path.into(),
            position,
            reason: reason.into(),
        }
    }
}
