//! One transactional id's metadata and Kafka's transaction states: which state may follow which,
//! the states' ids in `__transaction_state` and their names in DescribeTransactions and
//! ListTransactions, and the epoch arithmetic (exhaustion, bumps).
//!
//! Must never: hold a transition Kafka's coordinator does not make ([`TxnState::may_follow`] is
//! the one table; the coordinator asserts every transition against it in debug builds).

use std::collections::BTreeSet;

/// `RecordBatch.NO_PRODUCER_ID`: no producer id.
pub const NO_PRODUCER_ID: i64 = -1;
/// `RecordBatch.NO_PRODUCER_EPOCH`: no epoch (a producer id never used yet).
pub const NO_PRODUCER_EPOCH: i16 = -1;

/// Whether `epoch` leaves no room for another bump (Kafka's `isEpochExhausted`: the last epoch,
/// `i16::MAX`, is kept for fencing, so a producer at `i16::MAX - 1` gets a new producer id).
pub fn is_epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// A topic partition taking part in a transaction.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
}

impl TopicPartition {
    /// `topic`-`partition`.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        Self {
            topic: topic.into(),
            partition,
        }
    }
}

/// Kafka's transaction states (`TransactionState`), with their ids in the state log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TxnState {
    /// No transaction open (after InitProducerId).
    Empty,
    /// A transaction is open: partitions were added.
    Ongoing,
    /// EndTxn(commit) accepted; markers being written.
    PrepareCommit,
    /// EndTxn(abort), a timeout or a fence accepted; markers being written.
    PrepareAbort,
    /// Every COMMIT marker written.
    CompleteCommit,
    /// Every ABORT marker written.
    CompleteAbort,
    /// Expired: its tombstone is being written.
    Dead,
    /// An InitProducerId is fencing the open transaction (never written to the log; Kafka's
    /// pending state before the abort).
    PrepareEpochFence,
}

impl TxnState {
    /// Every state, in id order.
    pub const ALL: [TxnState; 8] = [
        Self::Empty,
        Self::Ongoing,
        Self::PrepareCommit,
        Self::PrepareAbort,
        Self::CompleteCommit,
        Self::CompleteAbort,
        Self::Dead,
        Self::PrepareEpochFence,
    ];

    /// The state's id in a `__transaction_state` value (`TransactionStatus`).
    pub fn id(self) -> i8 {
        match self {
            Self::Empty => 0,
            Self::Ongoing => 1,
            Self::PrepareCommit => 2,
            Self::PrepareAbort => 3,
            Self::CompleteCommit => 4,
            Self::CompleteAbort => 5,
            Self::Dead => 6,
            Self::PrepareEpochFence => 7,
        }
    }

    /// The state of a log id, `None` for an unknown one.
    pub fn from_id(id: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.id() == id)
    }

    /// The name DescribeTransactions and ListTransactions use (Kafka's `stateName`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::Ongoing => "Ongoing",
            Self::PrepareCommit => "PrepareCommit",
            Self::PrepareAbort => "PrepareAbort",
            Self::CompleteCommit => "CompleteCommit",
            Self::CompleteAbort => "CompleteAbort",
            Self::Dead => "Dead",
            Self::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// The state named `name` (as ListTransactions' state filter names it).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.name() == name)
    }

    /// Whether `self` may follow `previous` (Kafka's `validPreviousStates`).
    pub fn may_follow(self, previous: TxnState) -> bool {
        use TxnState::*;
        match self {
            Empty => matches!(previous, Empty | CompleteCommit | CompleteAbort),
            Ongoing => matches!(previous, Ongoing | Empty | CompleteCommit | CompleteAbort),
            PrepareCommit => previous == Ongoing,
            // Transaction version 2 may abort with no partition added (from Empty or Complete*).
            PrepareAbort => matches!(
                previous,
                Ongoing | PrepareEpochFence | Empty | CompleteCommit | CompleteAbort
            ),
            CompleteCommit => previous == PrepareCommit,
            CompleteAbort => previous == PrepareAbort,
            Dead => matches!(previous, Empty | CompleteCommit | CompleteAbort),
            PrepareEpochFence => previous == Ongoing,
        }
    }

    /// Whether markers are being written (PrepareCommit, PrepareAbort).
    pub fn is_prepare(self) -> bool {
        matches!(self, Self::PrepareCommit | Self::PrepareAbort)
    }

    /// Whether no transaction is open and none is ending (an id in these states may expire).
    pub fn is_idle(self) -> bool {
        matches!(
            self,
            Self::Empty | Self::CompleteCommit | Self::CompleteAbort
        )
    }
}

/// What the coordinator knows of one transactional id; what a `__transaction_state` value holds
/// plus the last epoch (memory only, for retried InitProducerIds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    /// The producer id in use.
    pub producer_id: i64,
    /// The producer id before the last change of producer id ([`NO_PRODUCER_ID`] if none).
    pub previous_producer_id: i64,
    /// With transaction version 2: the producer id the client moves to when the ending
    /// transaction completes (its epoch was exhausted), else [`NO_PRODUCER_ID`].
    pub next_producer_id: i64,
    /// The current epoch.
    pub producer_epoch: i16,
    /// The epoch before the last bump (not persisted; a retried InitProducerId is recognised by
    /// it), [`NO_PRODUCER_EPOCH`] if unknown.
    pub last_producer_epoch: i16,
    /// The client's `transaction.timeout.ms`.
    pub timeout_ms: i32,
    /// The state.
    pub state: TxnState,
    /// The partitions of the open or ending transaction (empty when Empty or Complete*).
    pub partitions: BTreeSet<TopicPartition>,
    /// When the open transaction started (ms; −1 if none).
    pub start_ms: i64,
    /// When the metadata last changed (ms).
    pub last_update_ms: i64,
    /// The transaction version the client uses (1: classic, 2: KIP-890's epoch bump per end).
    pub client_tv: i16,
}

impl TxnMetadata {
    /// A new id's metadata: `producer_id` with no epoch yet, Empty.
    pub fn new(producer_id: i64, timeout_ms: i32, now_ms: i64) -> Self {
        Self {
            producer_id,
            previous_producer_id: NO_PRODUCER_ID,
            next_producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now_ms,
            client_tv: 0,
        }
    }

    /// Whether the transaction version bumps the epoch at every end (version 2 and above).
    pub fn bumps_epoch_at_end(client_tv: i16) -> bool {
        client_tv >= 2
    }
}
