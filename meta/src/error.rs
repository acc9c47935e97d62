//! The one error type of the metadata store. Callers branch on it: `Compacted` means re-GET and
//! re-watch, `Unavailable` means retry later, a failed compare is not an error at all (it is
//! `TxnResponse::succeeded == false`).

use std::path::PathBuf;

use crate::types::LeaseId;

/// Result of every metadata store operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong with a metadata store operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The revision asked for (a read at a revision, a watch start) is older than the history
    /// kept, or a watcher fell too far behind. The caller must re-GET and watch again from the
    /// new header revision + 1. `compact_revision` is the oldest revision that can still be
    /// watched from, when the backend says (etcd does not for reads).
    #[error(
        "revision {requested_revision} has been compacted (compact revision {compact_revision:?})"
    )]
    Compacted {
        /// The revision the caller asked for.
        requested_revision: i64,
        /// The oldest revision still available, if known.
        compact_revision: Option<i64>,
    },
    /// A read at a revision the store has not reached yet.
    #[error(
        "revision {requested_revision} is in the future (current revision {current_revision})"
    )]
    FutureRevision {
        /// The revision the caller asked for.
        requested_revision: i64,
        /// The store's revision when it answered.
        current_revision: i64,
    },
    /// The lease does not exist (never granted, revoked, or expired).
    #[error("lease {lease} not found")]
    LeaseNotFound {
        /// The lease asked for.
        lease: LeaseId,
    },
    /// A Txn with more compares or more operations in one branch than etcd accepts.
    #[error("txn has {ops} operations in one part, at most {max} are allowed")]
    TxnTooLarge {
        /// Count in the largest part (compares, success or failure).
        ops: usize,
        /// The limit, [`crate::limits::TXN_OPS_MAX`].
        max: usize,
    },
    /// A key, value or request larger than its limit.
    #[error("{what} is {bytes} bytes, at most {max} are allowed")]
    TooLarge {
        /// Which item ("key", "value", "txn").
        what: &'static str,
        /// Its size.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// The store is full: keys, bytes, leases or watchers at their limit.
    #[error("metadata store quota exceeded: {what} at its limit of {max}")]
    QuotaExceeded {
        /// Which quota.
        what: &'static str,
        /// The limit.
        max: usize,
    },
    /// A malformed request: empty key, duplicate key in one Txn, negative revision, bad TTL.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The store cannot answer now (etcd unreachable or without a leader, after the backend's
    /// own retries). Retriable; the caller decides whether and when.
    #[error("metadata store unavailable: {reason}")]
    Unavailable {
        /// What the backend saw last.
        reason: String,
    },
    /// An earlier write failed to reach the disk, so memory and disk may disagree; the embedded
    /// store refuses everything until it is reopened (and recovers from the journal).
    #[error("metadata store poisoned by an earlier write failure; reopen it")]
    Poisoned,
    /// The store or the watcher was closed.
    #[error("metadata store closed")]
    Closed,
    /// The embedded store's directory is already open in another process or store.
    #[error("metadata directory {path} is in use by another store")]
    Locked {
        /// The directory.
        path: PathBuf,
    },
    /// A file system operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The journal is damaged before its last record (a torn last record is cut, not reported).
    #[error("metadata journal {path} is corrupt at byte {offset}: {reason}")]
    CorruptJournal {
        /// The journal file.
        path: PathBuf,
        /// Where the damage starts.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// The snapshot cannot be read; nothing is guessed, the store refuses to open.
    #[error("metadata snapshot {path} is corrupt: {reason}")]
    CorruptSnapshot {
        /// The snapshot file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A bad store address (`local` or `etcd://host:port,...`).
    #[error("invalid metadata store address {address:?}: {reason}")]
    InvalidAddress {
        /// The address given.
        address: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An answer from etcd that is neither of the above (permission, unexpected reply).
    #[error("etcd: {0}")]
    Etcd(String),
}

impl Error {
    /// Whether retrying the same call later may succeed. A guarded Txn retried after an ambiguous
    /// failure may find its own earlier write applied (docs/design/replication.md §4): re-read
    /// before concluding it lost.
    pub fn is_retriable(&self) -> bool {
        matches!(self, Error::Unavailable { .. })
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}
