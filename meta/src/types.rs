//! The request and response vocabulary shared by every backend: keys and their versions, ranges,
//! Txn compares and operations, watch events, leases. Plain data, mirroring etcd's v3 API so
//! that code written against the embedded store runs unchanged on etcd.

use crate::error::{Error, Result};
use crate::limits;

/// A lease id. `0` means "no lease", as in etcd.
pub type LeaseId = i64;

/// No lease: the key lives until deleted.
pub const NO_LEASE: LeaseId = 0;

/// A key with its value and etcd's version metadata.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyValue {
    /// The key.
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
    /// Revision of the key's last creation (0 for a deleted key in a delete event).
    pub create_revision: i64,
    /// Revision of the key's last modification (for a delete event: the deletion's revision).
    pub mod_revision: i64,
    /// Modifications since the last creation: 1 on creation, +1 per put, 0 once deleted.
    pub version: i64,
    /// The lease the key is attached to, or [`NO_LEASE`].
    pub lease: LeaseId,
}

/// One key, or every key starting with a prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyRange {
    /// Exactly this key.
    Key(Vec<u8>),
    /// Every key that starts with these bytes.
    Prefix(Vec<u8>),
}

impl KeyRange {
    /// Exactly `key`.
    pub fn key(key: impl Into<Vec<u8>>) -> Self {
        KeyRange::Key(key.into())
    }

    /// Every key starting with `prefix`.
    pub fn prefix(prefix: impl Into<Vec<u8>>) -> Self {
        KeyRange::Prefix(prefix.into())
    }

    /// Whether `key` is in the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        match self {
            KeyRange::Key(own) => own.as_slice() == key,
            KeyRange::Prefix(prefix) => key.starts_with(prefix),
        }
    }

    /// The key, or the prefix.
    pub fn start(&self) -> &[u8] {
        match self {
            KeyRange::Key(key) | KeyRange::Prefix(key) => key,
        }
    }

    /// Whether two ranges share a key.
    pub(crate) fn overlaps(&self, other: &KeyRange) -> bool {
        match (self, other) {
            (KeyRange::Key(key), range) | (range, KeyRange::Key(key)) => range.contains(key),
            (KeyRange::Prefix(left), KeyRange::Prefix(right)) => {
                left.starts_with(right) || right.starts_with(left)
            }
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        validate_key(self.start())
    }
}

pub(crate) fn validate_key(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        return Err(Error::InvalidArgument("empty key".into()));
    }
    if key.len() > limits::KEY_BYTES_MAX {
        return Err(Error::TooLarge {
            what: "key",
            bytes: key.len(),
            max: limits::KEY_BYTES_MAX,
        });
    }
    Ok(())
}

/// A read of a key or a prefix, at the latest or at a past revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GetRequest {
    /// What to read.
    pub range: KeyRange,
    /// The revision to read at; `0` reads the latest.
    pub revision: i64,
    /// Most keys to return; `0` returns all. `count` and `more` in the answer tell what was cut.
    pub limit: usize,
}

impl GetRequest {
    /// Reads one key at the latest revision.
    pub fn key(key: impl Into<Vec<u8>>) -> Self {
        Self {
            range: KeyRange::key(key),
            revision: 0,
            limit: 0,
        }
    }

    /// Reads every key under `prefix` at the latest revision.
    pub fn prefix(prefix: impl Into<Vec<u8>>) -> Self {
        Self {
            range: KeyRange::prefix(prefix),
            revision: 0,
            limit: 0,
        }
    }

    /// Reads at `revision` instead of the latest.
    pub fn at_revision(mut self, revision: i64) -> Self {
        self.revision = revision;
        self
    }

    /// Returns at most `limit` keys.
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        self.range.validate()?;
        if self.revision < 0 {
            return Err(Error::InvalidArgument(format!(
                "negative revision {}",
                self.revision
            )));
        }
        Ok(())
    }
}

/// The answer to a [`GetRequest`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetResponse {
    /// The store's revision when it answered (the header revision), whatever revision was read.
    pub revision: i64,
    /// The keys, in key order.
    pub kvs: Vec<KeyValue>,
    /// How many keys the range holds (before `limit`).
    pub count: usize,
    /// Whether `limit` cut keys off.
    pub more: bool,
}

/// How a compare relates the key's field to the given value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareOp {
    /// field == value
    Equal,
    /// field != value
    NotEqual,
    /// field > value
    Greater,
    /// field < value
    Less,
}

impl CompareOp {
    pub(crate) fn holds(self, ordering: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::{Equal, Greater, Less};
        match self {
            CompareOp::Equal => ordering == Equal,
            CompareOp::NotEqual => ordering != Equal,
            CompareOp::Greater => ordering == Greater,
            CompareOp::Less => ordering == Less,
        }
    }
}

/// Which field of a key a compare looks at, and the value compared with. On a missing key,
/// the numeric fields read as 0 and a `Value` compare always fails (etcd's `applyCompare`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompareTarget {
    /// The key's `create_revision` (0 when absent: "create if absent" is `== 0`).
    CreateRevision(i64),
    /// The key's `mod_revision`.
    ModRevision(i64),
    /// The key's `version`.
    Version(i64),
    /// The key's value, bytewise.
    Value(Vec<u8>),
    /// The key's lease.
    Lease(LeaseId),
}

/// One guard of a Txn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compare {
    /// The key looked at.
    pub key: Vec<u8>,
    /// The relation.
    pub op: CompareOp,
    /// The field and value.
    pub target: CompareTarget,
}

impl Compare {
    /// `create_revision(key) <op> revision`.
    pub fn create_revision(key: impl Into<Vec<u8>>, op: CompareOp, revision: i64) -> Self {
        Self {
            key: key.into(),
            op,
            target: CompareTarget::CreateRevision(revision),
        }
    }

    /// `mod_revision(key) <op> revision`.
    pub fn mod_revision(key: impl Into<Vec<u8>>, op: CompareOp, revision: i64) -> Self {
        Self {
            key: key.into(),
            op,
            target: CompareTarget::ModRevision(revision),
        }
    }

    /// `version(key) <op> version`.
    pub fn version(key: impl Into<Vec<u8>>, op: CompareOp, version: i64) -> Self {
        Self {
            key: key.into(),
            op,
            target: CompareTarget::Version(version),
        }
    }

    /// `value(key) <op> value`.
    pub fn value(key: impl Into<Vec<u8>>, op: CompareOp, value: impl Into<Vec<u8>>) -> Self {
        Self {
            key: key.into(),
            op,
            target: CompareTarget::Value(value.into()),
        }
    }

    /// `lease(key) <op> lease`.
    pub fn lease(key: impl Into<Vec<u8>>, op: CompareOp, lease: LeaseId) -> Self {
        Self {
            key: key.into(),
            op,
            target: CompareTarget::Lease(lease),
        }
    }

    /// "The key does not exist": `create_revision == 0`.
    pub fn absent(key: impl Into<Vec<u8>>) -> Self {
        Self::create_revision(key, CompareOp::Equal, 0)
    }
}

/// One operation of a Txn branch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnOp {
    /// Writes a key (creating it or bumping its version), attached to `lease` (or none).
    Put {
        /// The key.
        key: Vec<u8>,
        /// The new value.
        value: Vec<u8>,
        /// The lease to attach it to, or [`NO_LEASE`] (which detaches it from any lease).
        lease: LeaseId,
    },
    /// Deletes the key or every key of the prefix.
    Delete(KeyRange),
    /// Reads the key or prefix as the Txn sees it (after earlier ops of the same branch).
    Get(KeyRange),
}

impl TxnOp {
    /// A put without a lease.
    pub fn put(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Self {
        TxnOp::Put {
            key: key.into(),
            value: value.into(),
            lease: NO_LEASE,
        }
    }

    /// A put attached to `lease`.
    pub fn put_with_lease(
        key: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
        lease: LeaseId,
    ) -> Self {
        TxnOp::Put {
            key: key.into(),
            value: value.into(),
            lease,
        }
    }

    /// A delete of one key.
    pub fn delete(key: impl Into<Vec<u8>>) -> Self {
        TxnOp::Delete(KeyRange::key(key))
    }

    /// A read of one key.
    pub fn get(key: impl Into<Vec<u8>>) -> Self {
        TxnOp::Get(KeyRange::key(key))
    }

    pub(crate) fn is_write(&self) -> bool {
        !matches!(self, TxnOp::Get(_))
    }
}

/// A transaction: if every compare holds, run `success`, otherwise `failure`. All writes of the
/// branch that runs share one new revision; a branch that changes nothing creates none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Txn {
    /// The guards, all of which must hold.
    pub compares: Vec<Compare>,
    /// Run when every compare holds.
    pub success: Vec<TxnOp>,
    /// Run otherwise.
    pub failure: Vec<TxnOp>,
}

impl Txn {
    /// An empty Txn (no compares: `success` runs).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the compares.
    pub fn when(mut self, compares: Vec<Compare>) -> Self {
        self.compares = compares;
        self
    }

    /// Sets the success branch.
    pub fn and_then(mut self, ops: Vec<TxnOp>) -> Self {
        self.success = ops;
        self
    }

    /// Sets the failure branch.
    pub fn or_else(mut self, ops: Vec<TxnOp>) -> Self {
        self.failure = ops;
        self
    }

    /// Whether either branch writes.
    pub fn writes(&self) -> bool {
        self.success
            .iter()
            .chain(&self.failure)
            .any(TxnOp::is_write)
    }

    /// Whether a retry after an ambiguous failure is safe: the Txn only reads, or its writes
    /// are guarded by compares (a retry of an applied guarded write fails its guard instead of
    /// writing twice; the caller re-reads, docs/design/replication.md §4).
    pub fn is_retry_safe(&self) -> bool {
        !self.writes() || !self.compares.is_empty()
    }

    /// Checks the limits and etcd's request rules (non-empty keys, sizes, op counts, no key
    /// written twice in one branch), identically for every backend.
    pub(crate) fn validate(&self) -> Result<()> {
        let largest = self
            .compares
            .len()
            .max(self.success.len())
            .max(self.failure.len());
        if largest > limits::TXN_OPS_MAX {
            return Err(Error::TxnTooLarge {
                ops: largest,
                max: limits::TXN_OPS_MAX,
            });
        }
        let mut bytes = 0usize;
        for compare in &self.compares {
            validate_key(&compare.key)?;
            bytes += compare.key.len();
            if let CompareTarget::Value(value) = &compare.target {
                bytes += value.len();
            }
        }
        for branch in [&self.success, &self.failure] {
            for (index, op) in branch.iter().enumerate() {
                bytes += validate_op(op)?;
                if op.is_write()
                    && branch
                        .iter()
                        .take(index)
                        .any(|earlier| writes_overlap(earlier, op))
                {
                    return Err(Error::InvalidArgument(
                        "a key is written twice in one txn branch".into(),
                    ));
                }
            }
        }
        if bytes > limits::TXN_BYTES_MAX {
            return Err(Error::TooLarge {
                what: "txn",
                bytes,
                max: limits::TXN_BYTES_MAX,
            });
        }
        Ok(())
    }
}

fn validate_op(op: &TxnOp) -> Result<usize> {
    match op {
        TxnOp::Put { key, value, lease } => {
            validate_key(key)?;
            if value.len() > limits::VALUE_BYTES_MAX {
                return Err(Error::TooLarge {
                    what: "value",
                    bytes: value.len(),
                    max: limits::VALUE_BYTES_MAX,
                });
            }
            if *lease < 0 {
                return Err(Error::InvalidArgument(format!("negative lease id {lease}")));
            }
            Ok(key.len() + value.len())
        }
        TxnOp::Delete(range) | TxnOp::Get(range) => {
            range.validate()?;
            Ok(range.start().len())
        }
    }
}

/// etcd refuses a Txn that puts a key twice, or puts a key that a delete of the same branch
/// also covers ("duplicate key given in txn request").
fn writes_overlap(earlier: &TxnOp, later: &TxnOp) -> bool {
    let range_of = |op: &TxnOp| match op {
        TxnOp::Put { key, .. } => Some(KeyRange::Key(key.clone())),
        TxnOp::Delete(range) => Some(range.clone()),
        TxnOp::Get(_) => None,
    };
    match (earlier, later, range_of(earlier), range_of(later)) {
        // Two deletes may overlap in etcd; deleting twice is harmless.
        (TxnOp::Delete(_), TxnOp::Delete(_), _, _) => false,
        (_, _, Some(left), Some(right)) => left.overlaps(&right),
        _ => false,
    }
}

/// What one op of the branch that ran returned, in branch order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnOpResponse {
    /// A put: the key's previous state, if it existed.
    Put {
        /// The key before the put.
        prev_kv: Option<KeyValue>,
    },
    /// A delete: the keys it removed, in key order.
    Delete {
        /// The removed keys as they were.
        prev_kvs: Vec<KeyValue>,
    },
    /// A get: the keys as the Txn saw them.
    Get {
        /// The keys, in key order.
        kvs: Vec<KeyValue>,
    },
}

/// The answer to a [`Txn`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnResponse {
    /// Whether every compare held (so `success` ran).
    pub succeeded: bool,
    /// The header revision: the Txn's own revision if it wrote, else the store's current one.
    pub revision: i64,
    /// One response per op of the branch that ran.
    pub responses: Vec<TxnOpResponse>,
}

/// Whether an event created or removed a key version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// The key was created or updated.
    Put,
    /// The key was deleted (by a delete, or by its lease ending).
    Delete,
}

/// One change seen by a watcher.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Put or delete.
    pub kind: EventKind,
    /// The key after the change. For a delete: the key and the deletion's `mod_revision`, all
    /// other fields zero (as etcd sends it).
    pub kv: KeyValue,
    /// The key before the change, if it existed.
    pub prev_kv: Option<KeyValue>,
}

/// All events of one revision (one Txn, or one lease expiry) that match a watch, in the order
/// the Txn applied them. A watcher applies a batch as a whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchBatch {
    /// The revision all these events share.
    pub revision: i64,
    /// The events, at least one.
    pub events: Vec<Event>,
}

/// A granted lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    /// Its id.
    pub id: LeaseId,
    /// Its TTL in seconds, as granted.
    pub ttl_secs: i64,
}

/// A lease's state, as a time-to-live query sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseStatus {
    /// Its id.
    pub id: LeaseId,
    /// The TTL it was granted, in seconds.
    pub granted_ttl_secs: i64,
    /// Seconds left before it expires unless kept alive (rounded up).
    pub remaining_ttl_secs: i64,
}

/// A watch needs a valid range and a start revision of 0 (now) or more.
pub(crate) fn validate_watch(range: &KeyRange, start_revision: i64) -> Result<()> {
    range.validate()?;
    if start_revision < 0 {
        return Err(Error::InvalidArgument(format!(
            "negative revision {start_revision}"
        )));
    }
    Ok(())
}

pub(crate) fn validate_ttl(ttl_secs: i64) -> Result<()> {
    if !(1..=limits::LEASE_TTL_SECS_MAX).contains(&ttl_secs) {
        return Err(Error::InvalidArgument(format!(
            "lease TTL {ttl_secs} s is outside 1..={} s",
            limits::LEASE_TTL_SECS_MAX
        )));
    }
    Ok(())
}
