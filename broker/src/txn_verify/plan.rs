//! Pure: what one Produce request must have verified, and what the coordinator's answers become.

use std::collections::BTreeMap;

use skiff_protocol::error_code::ErrorCode;
use skiff_protocol::records::v2;

/// First Produce version of transaction version 2: the leader adds the partition to the
/// transaction itself (AddPartitionsToTxn v5) instead of verifying it (v4).
pub const ADDS_PARTITIONS_PRODUCE_VERSION_MIN: i16 = 12;
pub use skiff_protocol::error_code::TRANSACTION_ABORTABLE;
/// First Produce version whose clients understand TRANSACTION_ABORTABLE (KIP-890); older ones get
/// INVALID_TXN_STATE in its place, as Kafka answers them.
pub const ABORTABLE_PRODUCE_VERSION_MIN: i16 = 11;

/// The producer of one partition's transactional records: the id and epoch of its first
/// transactional data batch, `None` when it has none (idempotent or plain records need no
/// verification).
pub fn transactional_producer(records: &[u8]) -> Option<(i64, i16)> {
    v2::batch_positions(records)
        .map_while(Result::ok)
        .map(|(_, header)| header)
        .find(|header| header.is_transactional() && !header.is_control() && header.producer_id >= 0)
        .map(|header| (header.producer_id, header.producer_epoch))
}

/// What a Produce request asks its transactional id's coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// The request's transactional id.
    pub transactional_id: String,
    /// The producer.
    pub producer_id: i64,
    /// Its epoch.
    pub producer_epoch: i16,
    /// Produce v12: add the partitions (AddPartitionsToTxn v5) rather than only verify them (v4).
    pub add: bool,
    /// The partitions to verify, by topic.
    pub partitions: BTreeMap<String, Vec<i32>>,
}

impl Verification {
    /// An empty verification of `producer` for a Produce of `version`.
    pub fn new(
        transactional_id: &str,
        (producer_id, producer_epoch): (i64, i16),
        version: i16,
    ) -> Self {
        Self {
            transactional_id: transactional_id.to_owned(),
            producer_id,
            producer_epoch,
            add: version >= ADDS_PARTITIONS_PRODUCE_VERSION_MIN,
            partitions: BTreeMap::new(),
        }
    }

    /// Whether a partition whose producer state here is `open` (its epoch and open transaction's
    /// first offset, if one is open) needs the coordinator: not when the same producer already
    /// has a transaction open there at this epoch (Kafka's shortcut; verified when it opened).
    pub fn needs(&self, open: Option<(i16, i64)>) -> bool {
        !matches!(open, Some((epoch, _)) if epoch == self.producer_epoch)
    }

    /// Adds a partition to ask about.
    pub fn push(&mut self, topic: &str, partition: i32) {
        self.partitions
            .entry(topic.to_owned())
            .or_default()
            .push(partition);
    }

    /// Whether nothing needs asking.
    pub fn is_empty(&self) -> bool {
        self.partitions.is_empty()
    }

    /// The AddPartitionsToTxn version to send.
    pub fn version(&self) -> i16 {
        if self.add {
            5
        } else {
            4
        }
    }
}

/// The Produce error of a partition whose verification the coordinator answered `code` (Kafka's
/// `AddPartitionsToTxnManager`): a coordinator that is unreachable, moving, loading or busy is
/// NOT_ENOUGH_REPLICAS, which every producer retries; PRODUCER_FENCED is INVALID_PRODUCER_EPOCH
/// (abortable, not fatal); TRANSACTION_ABORTABLE is INVALID_TXN_STATE for clients before
/// Produce v11; the rest as the coordinator said (INVALID_TXN_STATE: the partition is not in the
/// transaction).
pub fn produce_error(code: i16, produce_version: i16) -> i16 {
    let retriable = [
        ErrorCode::COORDINATOR_NOT_AVAILABLE,
        ErrorCode::NOT_COORDINATOR,
        ErrorCode::COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode::CONCURRENT_TRANSACTIONS,
        ErrorCode::REQUEST_TIMED_OUT,
        ErrorCode::NETWORK_EXCEPTION,
    ];
    if retriable.iter().any(|error| error.code() == code) {
        return ErrorCode::NOT_ENOUGH_REPLICAS.code();
    }
    if code == ErrorCode::PRODUCER_FENCED.code() {
        return ErrorCode::INVALID_PRODUCER_EPOCH.code();
    }
    if code == TRANSACTION_ABORTABLE && produce_version < ABORTABLE_PRODUCE_VERSION_MIN {
        return ErrorCode::INVALID_TXN_STATE.code();
    }
    code
}

/// The Produce version whose KIP-890 behaviour a TxnOffsetCommit of `version` shares: v5 (transaction
/// version 2) adds the group's offsets partition to the transaction as Produce v12 adds its
/// partition; v4 verifies it and understands TRANSACTION_ABORTABLE, as Produce v11; older ones
/// verify it and get INVALID_TXN_STATE in TRANSACTION_ABORTABLE's place.
pub fn produce_version_of_txn_offset_commit(version: i16) -> i16 {
    match version {
        5.. => ADDS_PARTITIONS_PRODUCE_VERSION_MIN,
        4 => ABORTABLE_PRODUCE_VERSION_MIN,
        _ => ABORTABLE_PRODUCE_VERSION_MIN - 1,
    }
}

/// The TxnOffsetCommit error of an offsets partition whose verification ended in the Produce
/// error `produce_code` (Kafka's mapping for offset commits): a coordinator that could not answer
/// (NOT_ENOUGH_REPLICAS for a Produce) is COORDINATOR_NOT_AVAILABLE, which the producer retries;
/// the rest as they are.
pub fn txn_offset_commit_error(produce_code: i16) -> i16 {
    if produce_code == ErrorCode::NOT_ENOUGH_REPLICAS.code() {
        ErrorCode::COORDINATOR_NOT_AVAILABLE.code()
    } else {
        produce_code
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skiff_protocol::records::record::{BatchBuilder, NewRecord};
    use skiff_protocol::records::Compression;

    fn records(producer_id: i64, transactional: bool) -> Vec<u8> {
        let mut builder = BatchBuilder::new(0, Compression::None);
        builder.producer_id = producer_id;
        builder.producer_epoch = 4;
        builder.base_sequence = 0;
        builder.transactional = transactional;
        builder
            .push(&NewRecord {
                offset_delta: 0,
                timestamp: 0,
                key: None,
                value: Some(b"v"),
                headers: &[],
            })
            .expect("fits");
        builder.build().expect("builds")
    }

    #[test]
    fn only_transactional_records_are_verified_and_an_open_transaction_skips_the_coordinator() {
        assert_eq!(transactional_producer(&records(7, true)), Some((7, 4)));
        assert_eq!(transactional_producer(&records(7, false)), None);
        assert_eq!(transactional_producer(b"garbage"), None);
        let mut verification = Verification::new("tx", (7, 4), 11);
        assert_eq!(verification.version(), 4, "Produce v11 only verifies");
        assert!(
            !verification.needs(Some((4, 100))),
            "open at this epoch: verified already"
        );
        assert!(verification.needs(Some((3, 100))), "open at an older epoch");
        assert!(verification.needs(None));
        assert!(verification.is_empty());
        verification.push("t", 1);
        verification.push("t", 2);
        assert_eq!(verification.partitions["t"], vec![1, 2]);
        assert_eq!(Verification::new("tx", (7, 4), 12).version(), 5, "v12 adds");
    }

    #[test]
    fn coordinator_answers_become_kafkas_produce_errors() {
        let code = |error: ErrorCode| error.code();
        for busy in [
            ErrorCode::COORDINATOR_NOT_AVAILABLE,
            ErrorCode::NOT_COORDINATOR,
            ErrorCode::CONCURRENT_TRANSACTIONS,
            ErrorCode::REQUEST_TIMED_OUT,
        ] {
            assert_eq!(
                produce_error(code(busy), 9),
                code(ErrorCode::NOT_ENOUGH_REPLICAS)
            );
        }
        assert_eq!(
            produce_error(code(ErrorCode::PRODUCER_FENCED), 11),
            code(ErrorCode::INVALID_PRODUCER_EPOCH)
        );
        assert_eq!(
            produce_error(TRANSACTION_ABORTABLE, 10),
            code(ErrorCode::INVALID_TXN_STATE)
        );
        assert_eq!(
            produce_error(TRANSACTION_ABORTABLE, 11),
            TRANSACTION_ABORTABLE
        );
        assert_eq!(
            produce_error(code(ErrorCode::INVALID_TXN_STATE), 9),
            code(ErrorCode::INVALID_TXN_STATE)
        );
        assert_eq!(produce_error(0, 9), 0);
    }

    #[test]
    fn txn_offset_commits_verify_like_the_produce_of_their_transaction_version() {
        assert_eq!(
            Verification::new("tx", (7, 4), produce_version_of_txn_offset_commit(5)).version(),
            5,
            "TxnOffsetCommit v5 adds the offsets partition"
        );
        for version in 0..=4 {
            let produce = produce_version_of_txn_offset_commit(version);
            assert_eq!(Verification::new("tx", (7, 4), produce).version(), 4);
        }
        let abortable = |version| {
            produce_error(
                TRANSACTION_ABORTABLE,
                produce_version_of_txn_offset_commit(version),
            )
        };
        assert_eq!(abortable(4), TRANSACTION_ABORTABLE);
        assert_eq!(abortable(3), ErrorCode::INVALID_TXN_STATE.code());
        let busy = produce_error(ErrorCode::NOT_COORDINATOR.code(), 12);
        assert_eq!(
            txn_offset_commit_error(busy),
            ErrorCode::COORDINATOR_NOT_AVAILABLE.code()
        );
        assert_eq!(
            txn_offset_commit_error(ErrorCode::INVALID_TXN_STATE.code()),
            ErrorCode::INVALID_TXN_STATE.code()
        );
    }
}
