//! Every bound of the metadata store, in one place, with its unit and reason. The embedded store
//! enforces all of them; the etcd backend enforces the request-side ones before a request leaves
//! (so both backends refuse the same inputs) and etcd enforces its own server-side quotas.

/// Most operations in one branch of a Txn, and most compares: etcd's `--max-txn-ops` default
/// (docs/design/cluster.md §8: a 129-put Txn was rejected).
pub const TXN_OPS_MAX: usize = 128;

/// Most bytes of keys and values in one Txn: etcd's `--max-request-bytes` default (1.5 MiB).
pub const TXN_BYTES_MAX: usize = 1_572_864;

/// Longest key. etcd has no separate key limit (only the request size); metadata keys are paths
/// such as `/skiff/<cluster>/v1/partitions/<topic>/<p>`, far below this.
pub const KEY_BYTES_MAX: usize = 4096;

/// Largest value: one request's worth, so any single put fits a Txn.
pub const VALUE_BYTES_MAX: usize = TXN_BYTES_MAX - KEY_BYTES_MAX;

/// Most live keys in the embedded store (10 k partitions need about 10 k keys;
/// docs/design/cluster.md §2).
pub const KEYS_MAX: usize = 1_000_000;

/// Most bytes of live keys and values in the embedded store; etcd's default quota is 2 GiB, the
/// metadata of 10 k partitions is about 3 MB.
pub const STORE_BYTES_MAX: usize = 256 * 1024 * 1024;

/// Most live leases (one per broker process, plus a few per test).
pub const LEASES_MAX: usize = 10_000;

/// Most keys attached to one lease. A broker attaches a handful (registration, load report,
/// controller key); the bound keeps one lease's revocation, a single journal record, bounded.
pub const LEASE_KEYS_MAX: usize = 10_000;

/// Longest lease TTL, in seconds (one year; etcd's own maximum is far larger and pointless here).
pub const LEASE_TTL_SECS_MAX: i64 = 365 * 24 * 3600;

/// Revisions of history kept for watch replay and reads at a past revision; older ones are
/// compacted away as if etcd's auto-compaction had run.
pub const HISTORY_REVISIONS_MAX: usize = 10_000;

/// Most bytes of history (keys, values and previous values of the events kept).
pub const HISTORY_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Most open watchers on one embedded store.
pub const WATCHERS_MAX: usize = 10_000;

/// Most undelivered revisions queued for one watcher. A watcher further behind is canceled as if
/// its start revision had been compacted, which forces its owner to re-GET (docs/design/cluster.md
/// §7). The queue holds revision numbers only; the events themselves live once, in the history.
pub const WATCH_QUEUE_REVISIONS_MAX: usize = 1024;

/// Journal bytes after which the embedded store writes a snapshot and starts a new journal.
pub const JOURNAL_BYTES_BEFORE_SNAPSHOT: u64 = 64 * 1024 * 1024;

/// Largest journal record payload: one Txn's writes, or the key deletions of one revoked lease,
/// with their framing.
pub const JOURNAL_RECORD_BYTES_MAX: usize =
    2 * TXN_BYTES_MAX + LEASE_KEYS_MAX * (KEY_BYTES_MAX + 16);

/// Largest journal file accepted on open: a snapshot is due at
/// [`JOURNAL_BYTES_BEFORE_SNAPSHOT`], and the append that crossed it is at most one record per
/// change of one operation (a Txn, or a lease revocation and its deletions).
pub const JOURNAL_BYTES_MAX: u64 =
    JOURNAL_BYTES_BEFORE_SNAPSHOT + 2 * (JOURNAL_RECORD_BYTES_MAX as u64) + 4096;

/// Largest snapshot file accepted on open: the store's bytes plus per-key and per-lease framing.
pub const SNAPSHOT_BYTES_MAX: u64 = (STORE_BYTES_MAX as u64) + 64 * (KEYS_MAX as u64) + (1 << 20);

/// How often the embedded store's driver checks lease deadlines, in milliseconds (etcd's lessor
/// checks every 500 ms; 100 ms keeps expiry within a tenth of a second of the TTL).
pub const LEASE_TICK_MS: u64 = 100;

const _: () = assert!(VALUE_BYTES_MAX + KEY_BYTES_MAX <= TXN_BYTES_MAX);
const _: () = assert!(JOURNAL_RECORD_BYTES_MAX > TXN_BYTES_MAX);
const _: () = assert!(WATCH_QUEUE_REVISIONS_MAX <= HISTORY_REVISIONS_MAX);
