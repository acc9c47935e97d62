//! Every bound and interval of the transaction coordinator, with Kafka's default where Kafka has
//! one. The broker's config owns the keys (`transaction.*`, `transactional.id.expiration.ms`,
//! `transaction.state.log.num.partitions`) and their validation; its driver passes them in as a
//! [`TxnConfig`]. Nothing here reads a file.
//!
//! Must never: hold a limit that no check uses.

/// Kafka's `transaction.max.timeout.ms`: an InitProducerId asking for a longer (or a non-positive)
/// `transaction.timeout.ms` gets INVALID_TRANSACTION_TIMEOUT.
pub const TRANSACTION_MAX_TIMEOUT_MS_DEFAULT: i32 = 900_000;
/// Kafka's `transactional.id.expiration.ms`: an id idle (Empty, CompleteCommit, CompleteAbort) for
/// this long is removed with a tombstone (7 days).
pub const TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT: i64 = 604_800_000;
/// Kafka's `transaction.abort.timed.out.transaction.cleanup.interval.ms`: how often open
/// transactions past their timeout are looked for.
pub const ABORT_TIMED_OUT_INTERVAL_MS_DEFAULT: i64 = 10_000;
/// Kafka's `transaction.remove.expired.transaction.cleanup.interval.ms`: how often expired ids are
/// looked for.
pub const REMOVE_EXPIRED_INTERVAL_MS_DEFAULT: i64 = 3_600_000;
/// Kafka's `transaction.state.log.num.partitions`.
pub const STATE_LOG_PARTITIONS_DEFAULT: i32 = 50;
/// Skiff's `skiff.transactional.ids.max`: transactional ids one broker holds (loaded from its
/// state partitions plus new ones). Kafka has no bound; Skiff bounds memory per broker: an
/// InitProducerId for a new id beyond it gets COORDINATOR_NOT_AVAILABLE (the client retries, and
/// expiration frees ids). Ids already in a loaded log are always loaded.
pub const TRANSACTIONAL_IDS_MAX_DEFAULT: usize = 1_000_000;
/// Skiff's `skiff.transaction.partitions.max`: partitions one transaction may span. Kafka has no
/// bound; beyond it AddPartitionsToTxn answers POLICY_VIOLATION for the request's partitions (a
/// fatal error for the client: such a transaction could never be written as one state record of
/// bounded size).
pub const PARTITIONS_PER_TRANSACTION_MAX_DEFAULT: usize = 10_000;
/// Requests waiting for a block of producer ids at once; beyond it COORDINATOR_NOT_AVAILABLE.
pub const WAITING_FOR_PRODUCER_IDS_MAX: usize = 10_000;

/// The coordinator's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnConfig {
    /// `transaction.max.timeout.ms`.
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`.
    pub id_expiration_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    pub abort_timed_out_interval_ms: i64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`.
    pub remove_expired_interval_ms: i64,
    /// `transaction.state.log.num.partitions` (fixed once the topic exists).
    pub state_log_partitions: i32,
    /// `skiff.transactional.ids.max`.
    pub transactional_ids_max: usize,
    /// `skiff.transaction.partitions.max`.
    pub partitions_per_transaction_max: usize,
    /// The finalized `transaction.version`: from 2 on, state values are written in version 1
    /// (with the previous/next producer ids and the client's transaction version), as Kafka does.
    pub transaction_version: i16,
}

impl Default for TxnConfig {
    fn default() -> Self {
        Self {
            max_timeout_ms: TRANSACTION_MAX_TIMEOUT_MS_DEFAULT,
            id_expiration_ms: TRANSACTIONAL_ID_EXPIRATION_MS_DEFAULT,
            abort_timed_out_interval_ms: ABORT_TIMED_OUT_INTERVAL_MS_DEFAULT,
            remove_expired_interval_ms: REMOVE_EXPIRED_INTERVAL_MS_DEFAULT,
            state_log_partitions: STATE_LOG_PARTITIONS_DEFAULT,
            transactional_ids_max: TRANSACTIONAL_IDS_MAX_DEFAULT,
            partitions_per_transaction_max: PARTITIONS_PER_TRANSACTION_MAX_DEFAULT,
            transaction_version: 2,
        }
    }
}

impl TxnConfig {
    /// The `__transaction_state` value version written (Kafka's `transactionLogValueVersion`).
    pub fn log_value_version(&self) -> i16 {
        if self.transaction_version >= 2 {
            1
        } else {
            0
        }
    }
}
