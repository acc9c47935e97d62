//! Idempotent producers, as pure state: handing out producer ids (InitProducerId) from a durable
//! counter, and the per-partition sequence checks Kafka makes on every batch that carries a
//! producer id (KIP-98).
//!
//! It owns two things:
//! - [`ProducerIdAllocator`]: ids come from blocks claimed durably and cluster-wide (Kafka's
//!   producer-id blocks): when its block is used up it emits [`AllocatorOutput::ClaimBlock`],
//!   parks the InitProducerId requests, and answers them once the driver reports the block it
//!   claimed (by compare-and-set on the metadata store's `R/ids/producer_id_block`, so no two
//!   brokers ever hold one block). After a restart the allocator claims a fresh block, so no id is
//!   ever handed out twice (the unused rest of a block is skipped, as in Kafka).
//! - [`PartitionProducers`]: per partition, per producer id, the epoch and the last
//!   [`BATCHES_RETAINED_PER_PRODUCER`] batches' sequence ranges and offsets. A retried batch that
//!   matches one of them is a duplicate (acknowledged with its original offsets, not appended
//!   again); a gap is OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is INVALID_PRODUCER_EPOCH; an
//!   unknown producer whose first batch does not start at sequence 0 is UNKNOWN_PRODUCER_ID. The
//!   state is rebuilt from the v2 batch headers in the log ([`PartitionProducers::replay`]), so it
//!   survives a restart.
//! - Transactions (KIP-98), in the same [`PartitionProducers`]: a transactional batch opens the
//!   producer's transaction at its base offset if none is open; a non-transactional batch while
//!   one is open is INVALID_TXN_STATE; an end-transaction marker is checked
//!   ([`PartitionProducers::check_marker`]: an older producer epoch is INVALID_PRODUCER_EPOCH, an
//!   older coordinator epoch TRANSACTION_COORDINATOR_FENCED) and ends it
//!   ([`PartitionProducers::record_marker`], returning the [`CompletedTxn`]). The first unstable
//!   offset is the smallest first offset of the open transactions and of the ended ones whose
//!   marker the high watermark has not passed; [`PartitionProducers::last_stable_offset`] is it
//!   capped by the high watermark. A producer with an open transaction is never evicted by the
//!   bound. Replay reads markers too, so the state is the same at open and on followers.
//!
//! Epoch bumps: idempotent (non-transactional) clients bump their epoch themselves after a
//! sequence error, or ask InitProducerId for a fresh id (Kafka always hands a non-transactional
//! producer a new id with epoch 0, whatever id and epoch the request carries); a partition accepts
//! a higher epoch when it restarts at sequence 0. The allocator serves non-transactional
//! InitProducerId only: one with a transactional id gets INVALID_REQUEST (the transaction
//! coordinator serves those).
//!
//! Wiring (for the driver): one [`ProducerIdAllocator`] per broker, started from the floor below
//! which ids may already be in use (a single-node data directory's old reservation checkpoint, 0
//! otherwise); [`AllocatorOutput::ClaimBlock`] is a compare-and-set on the metadata store. One
//! [`PartitionProducers`] next to each partition's log: on Produce, for every v2 batch with a
//! producer id, [`PartitionProducers::check`] before the append; [`SequenceCheck::Duplicate`]
//! answers with the original base offset and appends nothing; after an append,
//! [`PartitionProducers::record_append`] with the assigned base offset (under the same partition
//! lock, so check and record see the same state); a marker likewise with
//! [`PartitionProducers::check_marker`] and [`PartitionProducers::record_marker`]. When a log is
//! opened, [`PartitionProducers::replay`] every batch in order.
//!
//! Must never: read a clock or a file, append a duplicate twice, or forget a producer without a
//! bound saying so ([`PRODUCERS_PER_PARTITION_MAX_DEFAULT`]).

use std::collections::{BTreeMap, VecDeque};

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use skiff_group::RequestId;
use skiff_protocol::error_code::ErrorCode;
use skiff_protocol::records::txn::{EndTxnMarker, MarkerType};
use skiff_protocol::records::v2::BatchHeader;

/// Batches remembered per producer and partition for duplicate detection. Kafka keeps 5, which is
/// why idempotent clients cap `max.in.flight.requests.per.connection` at 5: any retry is then one
/// of the last five batches.
pub const BATCHES_RETAINED_PER_PRODUCER: usize = 5;

/// Producers tracked per partition. Kafka expires idle producer state after
/// `producer.id.expiration.ms`; Skiff bounds the table instead and evicts the producer that
/// appended least recently (its next batch then gets UNKNOWN_PRODUCER_ID and the client resets).
pub const PRODUCERS_PER_PARTITION_MAX_DEFAULT: usize = 10_000;

/// Producer ids claimed at a time: one metadata-store write per this many InitProducerId calls; a
/// crash wastes at most this many ids (of 2^63). The cluster layout's one definition.
pub const PRODUCER_ID_BLOCK_COUNT: i64 = skiff_cluster::membership::PRODUCER_ID_BLOCK_SIZE;

/// InitProducerId requests parked while a block is being reserved. Each connection has one
/// request in flight, so this bounds the memory only against a flood of connections; beyond it the
/// request gets COORDINATOR_NOT_AVAILABLE and the client retries.
pub const INIT_PRODUCER_ID_WAITING_MAX: usize = 10_000;

/// "No producer id" in a batch header: the batch is not idempotent.
pub const NO_PRODUCER_ID: i64 = -1;

/// Why a batch was refused by the sequence checks.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProducerError {
    /// The batch's epoch is older than the producer's current one (a zombie).
    #[error("producer {producer_id}: epoch {epoch} is older than the current {current_epoch}")]
    InvalidProducerEpoch {
        /// The producer.
        producer_id: i64,
        /// The batch's epoch.
        epoch: i16,
        /// The epoch the partition knows.
        current_epoch: i16,
    },
    /// The batch does not follow the last one (a gap, or a new epoch not starting at 0).
    #[error("producer {producer_id}: sequence {sequence}, expected {expected}")]
    OutOfOrderSequence {
        /// The producer.
        producer_id: i64,
        /// The batch's first sequence.
        sequence: i32,
        /// The sequence that would have been in order.
        expected: i32,
    },
    /// The partition has no state for this producer and the batch does not start at 0.
    #[error("producer {producer_id} is unknown and sequence {sequence} is not 0")]
    UnknownProducerId {
        /// The producer.
        producer_id: i64,
        /// The batch's first sequence.
        sequence: i32,
    },
    /// A non-transactional batch from a producer whose transaction is open (Kafka's
    /// INVALID_TXN_STATE: "expected a transactional write").
    #[error(
        "producer {producer_id} has an open transaction; a non-transactional batch is refused"
    )]
    InvalidTxnState {
        /// The producer.
        producer_id: i64,
    },
    /// A marker from a transaction coordinator older than the last one seen for this producer
    /// (a zombie coordinator after a coordinator failover).
    #[error("producer {producer_id}: coordinator epoch {coordinator_epoch} is older than {last}")]
    CoordinatorFenced {
        /// The producer.
        producer_id: i64,
        /// The marker's coordinator epoch.
        coordinator_epoch: i32,
        /// The last coordinator epoch the partition saw for the producer.
        last: i32,
    },
}

impl ProducerError {
    /// The Kafka error code for the Produce response.
    pub fn error_code(&self) -> i16 {
        match self {
            Self::InvalidProducerEpoch { .. } => ErrorCode::INVALID_PRODUCER_EPOCH.code(),
            Self::OutOfOrderSequence { .. } => ErrorCode::OUT_OF_ORDER_SEQUENCE_NUMBER.code(),
            Self::UnknownProducerId { .. } => ErrorCode::UNKNOWN_PRODUCER_ID.code(),
            Self::InvalidTxnState { .. } => ErrorCode::INVALID_TXN_STATE.code(),
            Self::CoordinatorFenced { .. } => ErrorCode::TRANSACTION_COORDINATOR_FENCED.code(),
        }
    }
}

/// The producer fields of one v2 batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerBatch {
    /// Producer id ([`NO_PRODUCER_ID`] for a non-idempotent batch).
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
    /// Sequence of the first record.
    pub base_sequence: i32,
    /// Records in the batch minus one (the last record's offset delta).
    pub last_offset_delta: i32,
    /// Part of a transaction (the attribute bit): opens one if the producer has none open.
    pub transactional: bool,
    /// The batch's max timestamp (DescribeProducers' last timestamp).
    pub max_timestamp: i64,
}

impl From<&BatchHeader> for ProducerBatch {
    fn from(header: &BatchHeader) -> Self {
        Self {
            producer_id: header.producer_id,
            producer_epoch: header.producer_epoch,
            base_sequence: header.base_sequence,
            last_offset_delta: header.last_offset_delta,
            transactional: header.is_transactional(),
            max_timestamp: header.max_timestamp,
        }
    }
}

impl ProducerBatch {
    /// Sequence of the last record. Sequences wrap from `i32::MAX` to 0, as Kafka's do.
    pub fn last_sequence(&self) -> i32 {
        increment_sequence(self.base_sequence, self.last_offset_delta.max(0))
    }
}

/// `sequence + by`, wrapping past `i32::MAX` to 0.
pub fn increment_sequence(sequence: i32, by: i32) -> i32 {
    let sum = i64::from(sequence) + i64::from(by);
    let modulus = i64::from(i32::MAX) + 1;
    // The remainder of a non-negative sum is in [0, i32::MAX].
    i32::try_from(sum.rem_euclid(modulus)).unwrap_or(0)
}

/// What to do with a batch that passed the checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Append it, then call [`PartitionProducers::record_append`].
    Append,
    /// A retry of a batch already in the log: acknowledge these offsets, append nothing.
    Duplicate {
        /// Offset of the original batch's first record.
        base_offset: i64,
        /// Offset of its last record.
        last_offset: i64,
    },
}

/// One remembered batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BatchRange {
    first_sequence: i32,
    last_sequence: i32,
    base_offset: i64,
    last_offset_delta: i32,
}

/// One producer's state in one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ProducerEntry {
    epoch: i16,
    /// Oldest first, at most [`BATCHES_RETAINED_PER_PRODUCER`].
    batches: VecDeque<BatchRange>,
    /// Order of the last append among all producers of the partition (for eviction).
    last_append_order: u64,
    /// The coordinator epoch of the last marker written for this producer (-1: none yet).
    coordinator_epoch: i32,
    /// Offset of the first batch of the producer's open transaction here.
    open_txn_first_offset: Option<i64>,
    /// Max timestamp of the last batch or marker.
    last_timestamp: i64,
}

impl ProducerEntry {
    fn new(epoch: i16, order: u64) -> Self {
        Self {
            epoch,
            batches: VecDeque::new(),
            last_append_order: order,
            coordinator_epoch: NO_COORDINATOR_EPOCH,
            open_txn_first_offset: None,
            last_timestamp: NO_TIMESTAMP,
        }
    }

    /// Moves to `epoch` if it is newer: the sequences of the old epoch are forgotten.
    fn bump_epoch(&mut self, epoch: i16) {
        if epoch != self.epoch {
            self.epoch = epoch;
            self.batches.clear();
        }
    }
}

/// "No marker seen yet" for a producer's coordinator epoch (Kafka's -1).
pub const NO_COORDINATOR_EPOCH: i32 = -1;
/// "No timestamp" (Kafka's -1).
pub const NO_TIMESTAMP: i64 = -1;

/// A transaction a marker ended in this partition (Kafka's `CompletedTxn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTxn {
    /// The producer.
    pub producer_id: i64,
    /// Offset of the transaction's first batch here (the marker's own offset for a transaction
    /// that wrote nothing here).
    pub first_offset: i64,
    /// Offset of the marker.
    pub last_offset: i64,
    /// Ended by an ABORT marker.
    pub aborted: bool,
}

/// One producer as DescribeProducers reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DescribedProducer {
    /// The producer.
    pub producer_id: i64,
    /// Its epoch.
    pub producer_epoch: i16,
    /// Last sequence appended (-1: none in this epoch).
    pub last_sequence: i32,
    /// Max timestamp of its last batch or marker (-1: none).
    pub last_timestamp: i64,
    /// Coordinator epoch of its last marker (-1: none).
    pub coordinator_epoch: i32,
    /// First offset of its open transaction (-1: none open).
    pub current_txn_start_offset: i64,
}

/// The idempotent producers of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionProducers {
    producers: BTreeMap<i64, ProducerEntry>,
    producers_max: usize,
    append_order: u64,
    /// Open transactions: first offset -> producer (first offsets are batch base offsets, so
    /// unique). Its smallest key bounds the last stable offset.
    open_txns: BTreeMap<i64, i64>,
    /// Transactions a marker ended whose marker the high watermark has not passed yet (Kafka's
    /// unreplicated transactions): first offset -> marker offset. They stay unstable until then,
    /// so a read_committed consumer never reads a transaction whose outcome could still be lost.
    unreplicated_txns: BTreeMap<i64, i64>,
}

impl Default for PartitionProducers {
    fn default() -> Self {
        Self::new(PRODUCERS_PER_PARTITION_MAX_DEFAULT)
    }
}

impl PartitionProducers {
    /// No producer known yet; at most `producers_max` (at least 1) tracked at a time.
    pub fn new(producers_max: usize) -> Self {
        Self {
            producers: BTreeMap::new(),
            producers_max: producers_max.max(1),
            append_order: 0,
            open_txns: BTreeMap::new(),
            unreplicated_txns: BTreeMap::new(),
        }
    }

    /// Producers tracked.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    /// Whether no producer is tracked.
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// The epoch and the last sequence the partition holds for a producer.
    pub fn last_sequence(&self, producer_id: i64) -> Option<(i16, i32)> {
        let entry = self.producers.get(&producer_id)?;
        let last = entry.batches.back()?;
        Some((entry.epoch, last.last_sequence))
    }

    /// Each tracked producer with the last offset of its last batch: the batches the log cleaner
    /// keeps (even emptied of records), so that a restart or a new leader replays every live
    /// producer's epoch and last sequence and still deduplicates its retries.
    pub fn last_batch_ends(&self) -> BTreeMap<i64, i64> {
        self.producers
            .iter()
            .filter_map(|(producer_id, entry)| {
                let last = entry.batches.back()?;
                Some((
                    *producer_id,
                    last.base_offset + i64::from(last.last_offset_delta),
                ))
            })
            .collect()
    }

    /// Checks a batch before it is appended. Does not change any state.
    pub fn check(&self, batch: &ProducerBatch) -> Result<SequenceCheck, ProducerError> {
        if batch.producer_id < 0 {
            return Ok(SequenceCheck::Append);
        }
        let producer_id = batch.producer_id;
        let sequence = batch.base_sequence;
        let Some(entry) = self.producers.get(&producer_id) else {
            return if sequence == 0 {
                Ok(SequenceCheck::Append)
            } else {
                Err(ProducerError::UnknownProducerId {
                    producer_id,
                    sequence,
                })
            };
        };
        if batch.producer_epoch < entry.epoch {
            return Err(ProducerError::InvalidProducerEpoch {
                producer_id,
                epoch: batch.producer_epoch,
                current_epoch: entry.epoch,
            });
        }
        if !batch.transactional && entry.open_txn_first_offset.is_some() {
            return Err(ProducerError::InvalidTxnState { producer_id });
        }
        if batch.producer_epoch > entry.epoch {
            return if sequence == 0 {
                Ok(SequenceCheck::Append)
            } else {
                Err(ProducerError::OutOfOrderSequence {
                    producer_id,
                    sequence,
                    expected: 0,
                })
            };
        }
        let last_sequence = batch.last_sequence();
        let duplicate = entry
            .batches
            .iter()
            .find(|range| range.first_sequence == sequence && range.last_sequence == last_sequence);
        if let Some(range) = duplicate {
            return Ok(SequenceCheck::Duplicate {
                base_offset: range.base_offset,
                last_offset: range
                    .base_offset
                    .saturating_add(i64::from(range.last_offset_delta)),
            });
        }
        let expected = entry
            .batches
            .back()
            .map_or(0, |last| increment_sequence(last.last_sequence, 1));
        if sequence == expected {
            Ok(SequenceCheck::Append)
        } else {
            Err(ProducerError::OutOfOrderSequence {
                producer_id,
                sequence,
                expected,
            })
        }
    }

    /// Records a batch that [`PartitionProducers::check`] allowed and the log appended at
    /// `base_offset`. A transactional batch opens the producer's transaction at `base_offset`
    /// if none is open.
    pub fn record_append(&mut self, batch: &ProducerBatch, base_offset: i64) {
        if batch.producer_id < 0 || batch.base_sequence < 0 {
            return;
        }
        let order = self.next_order(batch.producer_id);
        let entry = self
            .producers
            .entry(batch.producer_id)
            .or_insert_with(|| ProducerEntry::new(batch.producer_epoch, order));
        entry.bump_epoch(batch.producer_epoch);
        if entry.batches.len() >= BATCHES_RETAINED_PER_PRODUCER {
            entry.batches.pop_front();
        }
        entry.batches.push_back(BatchRange {
            first_sequence: batch.base_sequence,
            last_sequence: batch.last_sequence(),
            base_offset,
            last_offset_delta: batch.last_offset_delta,
        });
        entry.last_append_order = order;
        entry.last_timestamp = batch.max_timestamp;
        if batch.transactional && entry.open_txn_first_offset.is_none() {
            entry.open_txn_first_offset = Some(base_offset);
            let previous = self.open_txns.insert(base_offset, batch.producer_id);
            debug_assert!(previous.is_none(), "two transactions open at {base_offset}");
        }
    }

    /// Checks an end-transaction marker before it is appended (Kafka's `appendEndTxnMarker`
    /// checks): an older producer epoch than the partition's is INVALID_PRODUCER_EPOCH, an older
    /// coordinator epoch than the last marker's TRANSACTION_COORDINATOR_FENCED. Changes nothing.
    pub fn check_marker(&self, marker: &EndTxnMarker) -> Result<(), ProducerError> {
        let Some(entry) = self.producers.get(&marker.producer_id) else {
            return Ok(());
        };
        if marker.producer_epoch < entry.epoch {
            return Err(ProducerError::InvalidProducerEpoch {
                producer_id: marker.producer_id,
                epoch: marker.producer_epoch,
                current_epoch: entry.epoch,
            });
        }
        if marker.coordinator_epoch < entry.coordinator_epoch {
            return Err(ProducerError::CoordinatorFenced {
                producer_id: marker.producer_id,
                coordinator_epoch: marker.coordinator_epoch,
                last: entry.coordinator_epoch,
            });
        }
        Ok(())
    }

    /// Records a marker [`PartitionProducers::check_marker`] allowed and the log appended at
    /// `offset`: the producer's transaction ends (it stays unstable until the high watermark
    /// passes `offset`), its epoch moves to the marker's if newer (a TV2 marker carries the bumped
    /// epoch, fencing the ended transaction's batches) and its coordinator epoch is remembered.
    pub fn record_marker(
        &mut self,
        marker: &EndTxnMarker,
        offset: i64,
        timestamp_ms: i64,
    ) -> CompletedTxn {
        let order = self.next_order(marker.producer_id);
        let entry = self
            .producers
            .entry(marker.producer_id)
            .or_insert_with(|| ProducerEntry::new(marker.producer_epoch, order));
        if marker.producer_epoch > entry.epoch {
            entry.bump_epoch(marker.producer_epoch);
        }
        entry.coordinator_epoch = entry.coordinator_epoch.max(marker.coordinator_epoch);
        entry.last_append_order = order;
        entry.last_timestamp = timestamp_ms;
        let first_offset = match entry.open_txn_first_offset.take() {
            Some(first_offset) => {
                self.open_txns.remove(&first_offset);
                first_offset
            }
            None => offset,
        };
        self.unreplicated_txns.insert(first_offset, offset);
        CompletedTxn {
            producer_id: marker.producer_id,
            first_offset,
            last_offset: offset,
            aborted: marker.marker_type == MarkerType::Abort,
        }
    }

    /// The first offset of the oldest transaction not yet stable: open, or ended by a marker the
    /// high watermark has not passed yet (Kafka's first unstable offset).
    pub fn first_unstable_offset(&self) -> Option<i64> {
        let open = self.open_txns.keys().next().copied();
        let unreplicated = self.unreplicated_txns.keys().next().copied();
        match (open, unreplicated) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The last stable offset under `high_watermark`: what a read_committed consumer may read
    /// below. Forgets the ended transactions whose markers the high watermark passed.
    pub fn last_stable_offset(&mut self, high_watermark: i64) -> i64 {
        self.unreplicated_txns
            .retain(|_, marker_offset| *marker_offset >= high_watermark);
        self.first_unstable_offset()
            .map_or(high_watermark, |first| first.min(high_watermark))
    }

    /// The last stable offset right after `completed`'s marker was recorded, as its
    /// aborted-transaction index entry keeps it (Kafka's `lastStableOffset(completedTxn)`): the
    /// first offset of the oldest transaction still open, else the offset after the marker.
    pub fn stable_offset_after(&self, completed: &CompletedTxn) -> i64 {
        self.open_txns
            .keys()
            .next()
            .copied()
            .unwrap_or(completed.last_offset + 1)
    }

    /// The epoch and open transaction's first offset of a producer, if tracked (KIP-890's
    /// shortcut: a producer already in a transaction here with this epoch needs no verification).
    pub fn open_transaction(&self, producer_id: i64) -> Option<(i16, i64)> {
        let entry = self.producers.get(&producer_id)?;
        Some((entry.epoch, entry.open_txn_first_offset?))
    }

    /// Open transactions here.
    pub fn open_transactions(&self) -> usize {
        self.open_txns.len()
    }

    /// Every tracked producer, by id, as DescribeProducers reports it.
    pub fn describe(&self) -> Vec<DescribedProducer> {
        self.producers
            .iter()
            .map(|(producer_id, entry)| DescribedProducer {
                producer_id: *producer_id,
                producer_epoch: entry.epoch,
                last_sequence: entry.batches.back().map_or(-1, |last| last.last_sequence),
                last_timestamp: entry.last_timestamp,
                coordinator_epoch: entry.coordinator_epoch,
                current_txn_start_offset: entry.open_txn_first_offset.unwrap_or(-1),
            })
            .collect()
    }

    /// Rebuilds state from a batch read back from the log at start or on a follower (oldest
    /// first): a data batch as [`PartitionProducers::record_append`], an end-transaction marker
    /// (`batch` holds its bytes) as [`PartitionProducers::record_marker`]. No check is made: the
    /// log is the truth. Returns the transaction a marker ended.
    pub fn replay(&mut self, header: &BatchHeader, batch: &[u8]) -> Option<CompletedTxn> {
        if header.is_control() {
            if header.producer_id < 0 || !header.is_transactional() {
                return None;
            }
            // A control batch that is not a marker of Kafka's layout ends nothing.
            let marker = EndTxnMarker::decode_with_header(batch, header).ok()?;
            return Some(self.record_marker(&marker, header.base_offset, header.max_timestamp));
        }
        let batch = ProducerBatch::from(header);
        if batch.producer_id >= 0
            && self
                .producers
                .get(&batch.producer_id)
                .is_some_and(|entry| batch.producer_epoch < entry.epoch)
        {
            // An older epoch after a newer one cannot be produced by the checks; keep the newer.
            return None;
        }
        self.record_append(&batch, header.base_offset);
        None
    }

    /// The next append order, making room for `producer_id` first if it is new and the table
    /// is full.
    fn next_order(&mut self, producer_id: i64) -> u64 {
        if !self.producers.contains_key(&producer_id) && self.producers.len() >= self.producers_max
        {
            self.evict_least_recent();
        }
        self.append_order += 1;
        self.append_order
    }

    fn evict_least_recent(&mut self) {
        // A producer in a transaction is never forgotten: its first offset bounds the last
        // stable offset until a marker ends it.
        let oldest = self
            .producers
            .iter()
            .filter(|(_, entry)| entry.open_txn_first_offset.is_none())
            .min_by_key(|(_, entry)| entry.last_append_order)
            .map(|(producer_id, _)| *producer_id);
        if let Some(producer_id) = oldest {
            self.producers.remove(&producer_id);
        }
    }
}

/// What the allocator asks the driver to do.
#[derive(Debug, Clone, PartialEq)]
pub enum AllocatorOutput {
    /// Send this InitProducerId response (encode it with `version`).
    Reply {
        /// The request answered.
        request_id: RequestId,
        /// Its API version.
        version: i16,
        /// The response.
        response: InitProducerIdResponse,
    },
    /// Claim a block of [`PRODUCER_ID_BLOCK_COUNT`] ids that starts at `at_least` or above (ids
    /// below it may have been handed out), then call [`ProducerIdAllocator::block_claimed`].
    ClaimBlock {
        /// The lowest first id the block may have.
        at_least: i64,
    },
}

/// Hands out producer ids from durably claimed blocks.
#[derive(Debug, Clone)]
pub struct ProducerIdAllocator {
    next_id: i64,
    /// The end (exclusive) of the block ids are handed out from.
    reserved_end: i64,
    /// The `at_least` of the claim in flight, if any.
    reserving: Option<i64>,
    waiting: VecDeque<(RequestId, i16)>,
    outputs: VecDeque<AllocatorOutput>,
}

impl ProducerIdAllocator {
    /// An allocator that never hands out an id below `floor` (ids below it may have been used
    /// before a restart). It holds no block until its first claim.
    pub fn new(floor: i64) -> Self {
        let start = floor.max(0);
        Self {
            next_id: start,
            reserved_end: start,
            reserving: None,
            waiting: VecDeque::new(),
            outputs: VecDeque::new(),
        }
    }

    /// The next output to act on, oldest first.
    pub fn poll_output(&mut self) -> Option<AllocatorOutput> {
        self.outputs.pop_front()
    }

    /// InitProducerId, every version. A non-transactional producer gets a fresh id with epoch 0
    /// (at once if the reserved block has one left, else after the next block is durable).
    pub fn handle_init_producer_id(
        &mut self,
        request_id: RequestId,
        version: i16,
        request: &InitProducerIdRequest,
    ) {
        let transactional = request
            .transactional_id
            .as_ref()
            .is_some_and(|id| !id.0.is_empty());
        if transactional {
            self.reply_error(request_id, version, ErrorCode::INVALID_REQUEST);
            return;
        }
        if self.waiting.len() >= INIT_PRODUCER_ID_WAITING_MAX {
            self.reply_error(request_id, version, ErrorCode::COORDINATOR_NOT_AVAILABLE);
            return;
        }
        self.waiting.push_back((request_id, version));
        self.serve_waiting();
    }

    /// The driver's answer to [`AllocatorOutput::ClaimBlock`]: the block claimed (first id, end
    /// exclusive), or `None` if the claim failed. On failure the parked requests get
    /// COORDINATOR_NOT_AVAILABLE (clients retry) and the next request tries again.
    pub fn block_claimed(&mut self, at_least: i64, block: Option<(i64, i64)>) {
        if self.reserving != Some(at_least) {
            return;
        }
        self.reserving = None;
        match block {
            Some((start, end)) if start >= at_least && end > start => {
                self.next_id = start;
                self.reserved_end = end;
                self.serve_waiting();
            }
            _ => {
                debug_assert!(
                    block.is_none(),
                    "a claimed block below the floor: {block:?}"
                );
                while let Some((request_id, version)) = self.waiting.pop_front() {
                    self.reply_error(request_id, version, ErrorCode::COORDINATOR_NOT_AVAILABLE);
                }
            }
        }
    }

    fn serve_waiting(&mut self) {
        while !self.waiting.is_empty() && self.next_id < self.reserved_end {
            let Some((request_id, version)) = self.waiting.pop_front() else {
                break;
            };
            let mut response = InitProducerIdResponse::default();
            response.producer_id = ProducerId(self.next_id);
            response.producer_epoch = 0;
            self.next_id += 1;
            self.outputs.push_back(AllocatorOutput::Reply {
                request_id,
                version,
                response,
            });
        }
        if !self.waiting.is_empty() && self.reserving.is_none() {
            // Every id below the current block's end may have been handed out.
            let at_least = self.reserved_end;
            self.reserving = Some(at_least);
            self.outputs
                .push_back(AllocatorOutput::ClaimBlock { at_least });
        }
    }

    fn reply_error(&mut self, request_id: RequestId, version: i16, error: ErrorCode) {
        let mut response = InitProducerIdResponse::default();
        response.error_code = error.code();
        response.producer_id = ProducerId(NO_PRODUCER_ID);
        response.producer_epoch = -1;
        self.outputs.push_back(AllocatorOutput::Reply {
            request_id,
            version,
            response,
        });
    }
}

pub mod snapshot;
#[cfg(test)]
mod txn_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn batch(producer_id: i64, epoch: i16, sequence: i32, records: i32) -> ProducerBatch {
        ProducerBatch {
            producer_id,
            producer_epoch: epoch,
            base_sequence: sequence,
            last_offset_delta: records - 1,
            transactional: false,
            max_timestamp: 0,
        }
    }

    /// Checks and, if allowed, appends at `log_end`; returns the outcome and the new log end.
    fn produce(
        state: &mut PartitionProducers,
        batch: &ProducerBatch,
        log_end: &mut i64,
    ) -> Result<SequenceCheck, ProducerError> {
        let outcome = state.check(batch)?;
        if outcome == SequenceCheck::Append {
            state.record_append(batch, *log_end);
            *log_end += i64::from(batch.last_offset_delta) + 1;
        }
        Ok(outcome)
    }

    #[test]
    fn in_order_duplicate_gap_and_fencing() {
        let mut state = PartitionProducers::default();
        let mut end = 0;
        assert_eq!(
            produce(&mut state, &batch(7, 0, 0, 3), &mut end),
            Ok(SequenceCheck::Append)
        );
        assert_eq!(
            produce(&mut state, &batch(7, 0, 3, 2), &mut end),
            Ok(SequenceCheck::Append)
        );
        assert_eq!(end, 5);
        assert_eq!(
            produce(&mut state, &batch(7, 0, 0, 3), &mut end),
            Ok(SequenceCheck::Duplicate {
                base_offset: 0,
                last_offset: 2
            })
        );
        assert_eq!(end, 5, "a duplicate is not appended");
        let gap = produce(&mut state, &batch(7, 0, 9, 1), &mut end).unwrap_err();
        assert_eq!(gap.error_code(), 45);
        assert_eq!(
            produce(&mut state, &batch(8, 0, 4, 1), &mut end)
                .unwrap_err()
                .error_code(),
            59
        );
        // A new epoch must restart at 0; then the old epoch is fenced.
        assert_eq!(
            produce(&mut state, &batch(7, 1, 5, 1), &mut end)
                .unwrap_err()
                .error_code(),
            45
        );
        assert_eq!(
            produce(&mut state, &batch(7, 1, 0, 1), &mut end),
            Ok(SequenceCheck::Append)
        );
        assert_eq!(
            produce(&mut state, &batch(7, 0, 5, 1), &mut end)
                .unwrap_err()
                .error_code(),
            47
        );
        // Non-idempotent batches are never checked.
        assert_eq!(
            state.check(&batch(-1, -1, -1, 10)),
            Ok(SequenceCheck::Append)
        );
    }

    #[test]
    fn sequences_wrap_at_i32_max() {
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        let mut state = PartitionProducers::default();
        let mut end = 0;
        state.record_append(&batch(1, 0, i32::MAX - 1, 1), 0);
        end += 1;
        assert_eq!(
            produce(&mut state, &batch(1, 0, i32::MAX, 2), &mut end),
            Ok(SequenceCheck::Append)
        );
        assert_eq!(state.last_sequence(1), Some((0, 0)));
        assert_eq!(
            produce(&mut state, &batch(1, 0, 1, 1), &mut end),
            Ok(SequenceCheck::Append)
        );
    }

    #[test]
    fn only_the_last_five_batches_are_duplicates() {
        let mut state = PartitionProducers::default();
        let mut end = 0;
        for sequence in 0..6 {
            produce(&mut state, &batch(3, 0, sequence, 1), &mut end).expect("in order");
        }
        assert_eq!(
            state.check(&batch(3, 0, 1, 1)),
            Ok(SequenceCheck::Duplicate {
                base_offset: 1,
                last_offset: 1
            })
        );
        assert!(
            state.check(&batch(3, 0, 0, 1)).is_err(),
            "batch 0 fell out of the window"
        );
    }

    #[test]
    fn table_is_bounded_and_evicts_the_least_recent() {
        let mut state = PartitionProducers::new(2);
        let mut end = 0;
        produce(&mut state, &batch(1, 0, 0, 1), &mut end).expect("ok");
        produce(&mut state, &batch(2, 0, 0, 1), &mut end).expect("ok");
        produce(&mut state, &batch(1, 0, 1, 1), &mut end).expect("ok");
        produce(&mut state, &batch(3, 0, 0, 1), &mut end).expect("ok");
        assert_eq!(state.len(), 2);
        assert_eq!(
            state.last_sequence(2),
            None,
            "producer 2 appended least recently"
        );
        assert_eq!(
            state.check(&batch(2, 0, 1, 1)).unwrap_err().error_code(),
            ErrorCode::UNKNOWN_PRODUCER_ID.code()
        );
    }

    #[test]
    fn allocator_claims_blocks_and_never_reuses_after_restart() {
        let mut allocator = ProducerIdAllocator::new(0);
        let request = InitProducerIdRequest::default();
        allocator.handle_init_producer_id(1, 4, &request);
        assert_eq!(
            allocator.poll_output(),
            Some(AllocatorOutput::ClaimBlock { at_least: 0 })
        );
        assert_eq!(
            allocator.poll_output(),
            None,
            "the reply waits for the claim"
        );
        allocator.handle_init_producer_id(2, 0, &request);
        assert_eq!(allocator.poll_output(), None, "one claim at a time");
        // Another broker took 0..1000 meanwhile: the store hands this one the next block.
        allocator.block_claimed(0, Some((1000, 2000)));
        let ids: Vec<i64> = std::iter::from_fn(|| allocator.poll_output())
            .map(|output| match output {
                AllocatorOutput::Reply { response, .. } => response.producer_id.0,
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(ids, vec![1000, 1001]);
        // After a restart (floor: the old single-node checkpoint) nothing below the floor.
        let mut restarted = ProducerIdAllocator::new(5000);
        restarted.handle_init_producer_id(3, 4, &request);
        assert_eq!(
            restarted.poll_output(),
            Some(AllocatorOutput::ClaimBlock { at_least: 5000 })
        );
        restarted.block_claimed(5000, Some((5000, 5000 + PRODUCER_ID_BLOCK_COUNT)));
        match restarted.poll_output() {
            Some(AllocatorOutput::Reply { response, .. }) => {
                assert_eq!(response.producer_id.0, 5000);
                assert_eq!(response.error_code, 0);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn allocator_failure_and_transactions_answer_errors() {
        let mut allocator = ProducerIdAllocator::new(0);
        let mut request = InitProducerIdRequest::default();
        allocator.handle_init_producer_id(1, 4, &request);
        assert!(matches!(
            allocator.poll_output(),
            Some(AllocatorOutput::ClaimBlock { at_least: 0 })
        ));
        allocator.block_claimed(0, None);
        match allocator.poll_output() {
            Some(AllocatorOutput::Reply {
                request_id: 1,
                response,
                ..
            }) => {
                assert_eq!(
                    response.error_code,
                    ErrorCode::COORDINATOR_NOT_AVAILABLE.code()
                );
            }
            other => panic!("unexpected {other:?}"),
        }
        request.transactional_id = Some(kafka_protocol::messages::TransactionalId(
            kafka_protocol::protocol::StrBytes::from_static_str("txn"),
        ));
        allocator.handle_init_producer_id(2, 4, &request);
        match allocator.poll_output() {
            Some(AllocatorOutput::Reply {
                request_id: 2,
                response,
                ..
            }) => {
                assert_eq!(response.error_code, ErrorCode::INVALID_REQUEST.code());
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    /// The header a batch with these producer fields has in the log at `base_offset`.
    fn header_of(batch: &ProducerBatch, base_offset: i64) -> BatchHeader {
        BatchHeader {
            base_offset,
            batch_length: 49,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: batch.last_offset_delta,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: batch.producer_id,
            producer_epoch: batch.producer_epoch,
            base_sequence: batch.base_sequence,
            records_count: batch.last_offset_delta + 1,
        }
    }

    /// A producer in the model: epoch, next sequence, batches sent in this epoch with offsets.
    type ProducerModel = (i16, i32, Vec<(ProducerBatch, i64)>);

    /// One step a producer (or its retry logic) may take.
    #[derive(Debug, Clone)]
    enum Step {
        /// The next batch in sequence, with this many records.
        Next(i32),
        /// Resend one of the last batches sent (a retry after a lost response).
        Retry(usize),
        /// Skip ahead (a lost batch): a gap.
        Gap(i32),
        /// Bump the epoch and restart at 0.
        Bump,
    }

    fn step() -> impl Strategy<Value = (i64, Step)> {
        let kind = prop_oneof![
            6 => (1..5i32).prop_map(Step::Next),
            3 => (0..8usize).prop_map(Step::Retry),
            1 => (1..4i32).prop_map(Step::Gap),
            1 => Just(Step::Bump),
        ];
        (0..3i64, kind)
    }

    proptest! {
        /// Against a model that keeps every batch ever appended: in-order batches append, retries
        /// of the last five are duplicates with their original offsets, gaps are refused, and the
        /// state rebuilt from the appended batch headers equals the live state.
        #[test]
        fn checks_match_the_model_and_replay_rebuilds_state(
            steps in proptest::collection::vec(step(), 1..80)
        ) {
            let mut state = PartitionProducers::default();
            let mut end = 0i64;
            let mut model: BTreeMap<i64, ProducerModel> = BTreeMap::new();
            let mut appended_ever: std::collections::BTreeSet<i64> = Default::default();
            let mut log: Vec<(ProducerBatch, i64)> = Vec::new();
            for (producer_id, action) in steps {
                let (epoch, next, sent) = model.entry(producer_id).or_insert((0, 0, Vec::new()));
                match action {
                    Step::Next(records) => {
                        let b = batch(producer_id, *epoch, *next, records);
                        let outcome = produce(&mut state, &b, &mut end);
                        prop_assert_eq!(outcome, Ok(SequenceCheck::Append));
                        sent.push((b, end - i64::from(records)));
                        appended_ever.insert(producer_id);
                        log.push((b, end - i64::from(records)));
                        *next = increment_sequence(*next, records);
                    }
                    Step::Retry(back) => {
                        if sent.is_empty() { continue; }
                        let index = sent.len() - 1 - back.min(sent.len() - 1);
                        let (b, offset) = sent[index];
                        let outcome = produce(&mut state, &b, &mut end);
                        if sent.len() - index <= BATCHES_RETAINED_PER_PRODUCER {
                            prop_assert_eq!(outcome, Ok(SequenceCheck::Duplicate {
                                base_offset: offset,
                                last_offset: offset + i64::from(b.last_offset_delta),
                            }));
                        } else {
                            prop_assert!(outcome.is_err());
                        }
                    }
                    Step::Gap(skip) => {
                        let b = batch(producer_id, *epoch, increment_sequence(*next, skip), 1);
                        let outcome = produce(&mut state, &b, &mut end);
                        let expected = if appended_ever.contains(&producer_id) { 45 } else { 59 };
                        prop_assert_eq!(outcome.map_err(|e| e.error_code()), Err(expected));
                    }
                    Step::Bump => {
                        *epoch += 1;
                        *next = 0;
                        sent.clear();
                    }
                }
            }
            let mut rebuilt = PartitionProducers::default();
            for (b, offset) in &log {
                rebuilt.replay(&header_of(b, *offset), &[]);
            }
            for producer_id in model.keys() {
                let expected = state.last_sequence(*producer_id);
                prop_assert_eq!(rebuilt.last_sequence(*producer_id), expected);
            }
        }
    }
}
