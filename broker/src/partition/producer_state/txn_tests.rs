//! The transactional side of [`PartitionProducers`]: open transactions, markers, the first
//! unstable offset, and a random history of batches and markers whose replay equals the live
//! state.

use std::collections::BTreeMap;

use proptest::prelude::*;
use skiff_protocol::records::txn::{EndTxnMarker, MarkerType};
use skiff_protocol::records::v2::{self, BatchHeader, ATTRIBUTE_TRANSACTIONAL};

use super::*;

fn data(producer_id: i64, epoch: i16, sequence: i32, records: i32, txn: bool) -> ProducerBatch {
    ProducerBatch {
        producer_id,
        producer_epoch: epoch,
        base_sequence: sequence,
        last_offset_delta: records - 1,
        transactional: txn,
        max_timestamp: 1_000,
    }
}

fn marker(producer_id: i64, epoch: i16, coordinator_epoch: i32, abort: bool) -> EndTxnMarker {
    EndTxnMarker {
        producer_id,
        producer_epoch: epoch,
        coordinator_epoch,
        marker_type: if abort {
            MarkerType::Abort
        } else {
            MarkerType::Commit
        },
    }
}

/// The log as replay reads it: each batch's header (at its offset) and bytes.
#[derive(Default)]
struct Log {
    batches: Vec<(BatchHeader, Vec<u8>)>,
    end: i64,
}

impl Log {
    fn append(&mut self, state: &mut PartitionProducers, batch: &ProducerBatch) -> i64 {
        let base = self.end;
        state.record_append(batch, base);
        let header = BatchHeader {
            base_offset: base,
            batch_length: 49,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: if batch.transactional {
                ATTRIBUTE_TRANSACTIONAL
            } else {
                0
            },
            last_offset_delta: batch.last_offset_delta,
            base_timestamp: 0,
            max_timestamp: batch.max_timestamp,
            producer_id: batch.producer_id,
            producer_epoch: batch.producer_epoch,
            base_sequence: batch.base_sequence,
            records_count: batch.last_offset_delta + 1,
        };
        self.batches.push((header, Vec::new()));
        self.end += i64::from(batch.last_offset_delta) + 1;
        base
    }

    fn append_marker(
        &mut self,
        state: &mut PartitionProducers,
        marker: &EndTxnMarker,
    ) -> CompletedTxn {
        let bytes = marker.encode_batch(2_000).expect("marker");
        let (_, mut header) = v2::batch_positions(&bytes)
            .next()
            .expect("one batch")
            .expect("valid");
        header.base_offset = self.end;
        let completed = state.record_marker(marker, self.end, header.max_timestamp);
        self.batches.push((header, bytes));
        self.end += 1;
        completed
    }

    fn replay(&self) -> PartitionProducers {
        let mut state = PartitionProducers::default();
        for (header, bytes) in &self.batches {
            state.replay(header, bytes);
        }
        state
    }
}

#[test]
fn a_transaction_opens_at_its_first_batch_and_a_marker_ends_it() {
    let mut state = PartitionProducers::default();
    let mut log = Log::default();
    log.append(&mut state, &data(1, 0, 0, 2, false));
    assert_eq!(state.first_unstable_offset(), None);
    let first = data(7, 0, 0, 3, true);
    assert_eq!(state.check(&first), Ok(SequenceCheck::Append));
    let start = log.append(&mut state, &first);
    assert_eq!(start, 2);
    log.append(&mut state, &data(7, 0, 3, 1, true));
    assert_eq!(state.open_transaction(7), Some((0, 2)));
    assert_eq!(state.first_unstable_offset(), Some(2));
    assert_eq!(state.last_stable_offset(6), 2);
    assert_eq!(
        state.last_stable_offset(1),
        1,
        "never above the high watermark"
    );
    // A non-transactional batch while the transaction is open is INVALID_TXN_STATE.
    assert_eq!(
        state
            .check(&data(7, 0, 4, 1, false))
            .map_err(|error| error.error_code()),
        Err(ErrorCode::INVALID_TXN_STATE.code())
    );
    // A TV2 marker carries the bumped epoch and ends the transaction.
    let end = marker(7, 1, 5, true);
    assert_eq!(state.check_marker(&end), Ok(()));
    let completed = log.append_marker(&mut state, &end);
    assert_eq!(
        completed,
        CompletedTxn {
            producer_id: 7,
            first_offset: 2,
            last_offset: 6,
            aborted: true
        }
    );
    assert_eq!(state.open_transaction(7), None);
    // Unstable until the high watermark passes the marker (Kafka's unreplicated transactions).
    assert_eq!(state.last_stable_offset(6), 2);
    assert_eq!(state.last_stable_offset(7), 7);
    assert_eq!(state.first_unstable_offset(), None);
    // The ended transaction's epoch is fenced; the next one starts at sequence 0.
    assert_eq!(
        state
            .check(&data(7, 0, 4, 1, true))
            .map_err(|error| error.error_code()),
        Err(ErrorCode::INVALID_PRODUCER_EPOCH.code())
    );
    assert_eq!(
        state.check(&data(7, 1, 0, 1, true)),
        Ok(SequenceCheck::Append)
    );
    // An older coordinator is fenced; an older producer epoch too.
    assert_eq!(
        state
            .check_marker(&marker(7, 1, 4, false))
            .map_err(|error| error.error_code()),
        Err(ErrorCode::TRANSACTION_COORDINATOR_FENCED.code())
    );
    assert_eq!(
        state
            .check_marker(&marker(7, 0, 9, false))
            .map_err(|error| error.error_code()),
        Err(ErrorCode::INVALID_PRODUCER_EPOCH.code())
    );
    let described = state.describe();
    let seven = described.iter().find(|p| p.producer_id == 7).expect("7");
    assert_eq!(
        (
            seven.producer_epoch,
            seven.coordinator_epoch,
            seven.current_txn_start_offset,
            seven.last_sequence,
            seven.last_timestamp
        ),
        (1, 5, -1, -1, 2_000)
    );
    let mut rebuilt = log.replay();
    rebuilt.last_stable_offset(7);
    assert_eq!(rebuilt, state, "replay rebuilds the same state");
}

#[test]
fn a_marker_without_an_open_transaction_ends_an_empty_one_at_itself() {
    let mut state = PartitionProducers::default();
    let mut log = Log::default();
    log.append(&mut state, &data(1, 0, 0, 4, false));
    let completed = log.append_marker(&mut state, &marker(9, 0, 0, false));
    assert_eq!(
        (
            completed.first_offset,
            completed.last_offset,
            completed.aborted
        ),
        (4, 4, false)
    );
    assert_eq!(state.last_stable_offset(4), 4);
    assert_eq!(state.last_stable_offset(5), 5);
}

#[test]
fn the_smallest_open_transaction_bounds_the_stable_offset() {
    let mut state = PartitionProducers::default();
    let mut log = Log::default();
    log.append(&mut state, &data(1, 0, 0, 1, true)); // 0
    log.append(&mut state, &data(2, 0, 0, 1, true)); // 1
    assert_eq!(state.last_stable_offset(2), 0);
    log.append_marker(&mut state, &marker(1, 0, 0, false)); // 2
    assert_eq!(
        state.last_stable_offset(2),
        0,
        "1's marker is not replicated yet"
    );
    assert_eq!(state.last_stable_offset(3), 1, "2 is still open");
    log.append_marker(&mut state, &marker(2, 0, 0, false)); // 3
    assert_eq!(state.last_stable_offset(4), 4);
    assert_eq!(state.open_transactions(), 0);
}

#[test]
fn a_producer_in_a_transaction_is_never_evicted() {
    let mut state = PartitionProducers::new(2);
    let mut log = Log::default();
    log.append(&mut state, &data(1, 0, 0, 1, true));
    log.append(&mut state, &data(2, 0, 0, 1, false));
    log.append(&mut state, &data(3, 0, 0, 1, false));
    assert_eq!(
        state.open_transaction(1),
        Some((0, 0)),
        "1 is in a transaction"
    );
    assert_eq!(
        state.last_sequence(2),
        None,
        "2 was the least recent idle producer"
    );
    assert_eq!(state.last_stable_offset(3), 0);
}

/// One step of a random history.
#[derive(Debug, Clone)]
enum Step {
    /// The producer's next batch, transactional or not.
    Data { records: i32, txn: bool },
    /// A marker: abort or commit, with the epoch bumped (TV2) or not, from a coordinator whose
    /// epoch moved by this much (negative: a zombie coordinator).
    Marker {
        abort: bool,
        bump: bool,
        coordinator_delta: i32,
    },
    /// A batch from the producer's previous epoch (a zombie).
    Stale,
    /// The high watermark moves up by this fraction (in 1/4) of the distance to the log end.
    HighWatermark(u8),
}

fn step() -> impl Strategy<Value = (i64, Step)> {
    let kind = prop_oneof![
        6 => (1..4i32, any::<bool>()).prop_map(|(records, txn)| Step::Data { records, txn }),
        3 => (any::<bool>(), any::<bool>(), -1..2i32).prop_map(|(abort, bump, coordinator_delta)| {
            Step::Marker { abort, bump, coordinator_delta }
        }),
        1 => Just(Step::Stale),
        2 => (0..5u8).prop_map(Step::HighWatermark),
    ];
    (0..3i64, kind)
}

/// What the model knows of one producer.
#[derive(Default, Clone)]
struct Model {
    epoch: i16,
    next_sequence: i32,
    coordinator_epoch: i32,
    open_first: Option<i64>,
}

proptest! {
    /// Against a model: a non-transactional batch inside a transaction is refused, a zombie's
    /// batch and a zombie coordinator's marker are fenced, the last stable offset is the smallest
    /// of the high watermark, the open transactions' first offsets and the first offsets of the
    /// ended ones whose markers the high watermark has not passed; and the state replayed from
    /// the log equals the live state.
    #[test]
    fn random_histories_match_the_model_and_replay_equals_live(
        steps in proptest::collection::vec(step(), 1..120)
    ) {
        let mut state = PartitionProducers::default();
        let mut log = Log::default();
        let mut models: BTreeMap<i64, Model> = BTreeMap::new();
        let mut ended: Vec<(i64, i64)> = Vec::new();
        let mut hw = 0i64;
        for (producer_id, step) in steps {
            let model = models.entry(producer_id).or_default();
            match step {
                Step::Data { records, txn } => {
                    let batch = data(producer_id, model.epoch, model.next_sequence, records, txn);
                    let checked = state.check(&batch);
                    if model.open_first.is_some() && !txn {
                        prop_assert_eq!(checked.map_err(|e| e.error_code()), Err(48));
                        continue;
                    }
                    prop_assert_eq!(checked, Ok(SequenceCheck::Append));
                    let base = log.append(&mut state, &batch);
                    if txn && model.open_first.is_none() {
                        model.open_first = Some(base);
                    }
                    model.next_sequence = increment_sequence(model.next_sequence, records);
                }
                Step::Marker { abort, bump, coordinator_delta } => {
                    let epoch = if bump { model.epoch + 1 } else { model.epoch };
                    let coordinator_epoch = model.coordinator_epoch + coordinator_delta;
                    let end = marker(producer_id, epoch, coordinator_epoch, abort);
                    let checked = state.check_marker(&end);
                    if coordinator_delta < 0 && models_seen_marker(&log, producer_id) {
                        prop_assert_eq!(checked.map_err(|e| e.error_code()), Err(52));
                        continue;
                    }
                    prop_assert_eq!(checked, Ok(()));
                    let completed = log.append_marker(&mut state, &end);
                    let first = model.open_first.take().unwrap_or(completed.last_offset);
                    prop_assert_eq!(completed.first_offset, first);
                    prop_assert_eq!(completed.aborted, abort);
                    ended.push((first, completed.last_offset));
                    model.coordinator_epoch = coordinator_epoch;
                    if bump {
                        model.epoch = epoch;
                        model.next_sequence = 0;
                    }
                }
                Step::Stale => {
                    if model.epoch == 0 { continue; }
                    let batch = data(producer_id, model.epoch - 1, 0, 1, true);
                    prop_assert_eq!(state.check(&batch).map_err(|e| e.error_code()), Err(47));
                }
                Step::HighWatermark(quarters) => {
                    hw += (log.end - hw) * i64::from(quarters) / 4;
                }
            }
            let expected = models
                .values()
                .filter_map(|model| model.open_first)
                .chain(ended.iter().filter(|(_, marker)| *marker >= hw).map(|(first, _)| *first))
                .fold(hw, i64::min);
            prop_assert_eq!(state.last_stable_offset(hw), expected);
        }
        let mut rebuilt = log.replay();
        rebuilt.last_stable_offset(hw);
        state.last_stable_offset(hw);
        prop_assert_eq!(rebuilt, state);
    }
}

/// Whether the log holds a marker of `producer_id` (before one, any coordinator epoch passes).
fn models_seen_marker(log: &Log, producer_id: i64) -> bool {
    log.batches
        .iter()
        .any(|(header, _)| header.is_control() && header.producer_id == producer_id)
}
