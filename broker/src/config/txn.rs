//! The defaults and bounds of the transaction coordinator's broker keys (`transaction.*`,
//! `transactional.id.expiration.ms`, `transaction.state.log.*`), with Kafka's default where Kafka
//! has one. The coordinator (skiff-txn) holds its own copies of Kafka's defaults for its tests;
//! the transaction driver maps these keys onto its `TxnConfig`.
//!
//! Must never: import the coordinator (config is a leaf of the broker's folders).

/// Kafka's `transaction.state.log.num.partitions`.
pub const STATE_LOG_PARTITIONS_DEFAULT: i32 = 50;
/// Kafka's `transaction.state.log.segment.bytes` (100 MiB).
pub const STATE_LOG_SEGMENT_BYTES_DEFAULT: u64 = 100 * 1024 * 1024;
/// Kafka's `transaction.state.log.replication.factor` and `transaction.state.log.min.isr`, which a
/// cluster (a shared `skiff.metadata.store`) takes unless set; a single node keeps 1 and 1, as it
/// does for `offsets.topic.replication.factor`, so transactions work on it out of the box.
pub const STATE_LOG_CLUSTER_REPLICATION_FACTOR: i16 = 3;
/// See [`STATE_LOG_CLUSTER_REPLICATION_FACTOR`].
pub const STATE_LOG_CLUSTER_MIN_ISR: i32 = 2;
/// Kafka's `transaction.max.timeout.ms` (15 minutes).
pub const MAX_TIMEOUT_MS_DEFAULT: i32 = 900_000;
/// Kafka's `transactional.id.expiration.ms` (7 days).
pub const ID_EXPIRATION_MS_DEFAULT: i64 = 604_800_000;
/// Kafka's `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
pub const ABORT_TIMED_OUT_INTERVAL_MS_DEFAULT: i64 = 10_000;
/// Kafka's `transaction.remove.expired.transaction.cleanup.interval.ms` (1 hour).
pub const REMOVE_EXPIRED_INTERVAL_MS_DEFAULT: i64 = 3_600_000;
/// `skiff.transactional.ids.max`: ids one broker holds (memory per broker is bounded by it; a
/// loaded id is about a few hundred bytes plus its open transaction's partitions).
pub const IDS_MAX_DEFAULT: u64 = 1_000_000;
/// `skiff.transaction.partitions.max`: partitions one transaction may span.
pub const PARTITIONS_PER_TRANSACTION_MAX_DEFAULT: u64 = 10_000;
/// How long a transaction-state append waits for its in-sync replicas (Kafka's
/// `transaction.state.log` appends use `request.timeout.ms`-like bounds; Skiff reuses
/// `offsets.commit.timeout.ms`' default).
pub const APPEND_TIMEOUT_MS_DEFAULT: u64 = 5_000;
