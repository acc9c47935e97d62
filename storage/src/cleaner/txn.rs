//! The clean pass's transaction rules (Kafka's `CleanedTransactionMetadata`): walking a log's
//! batches in offset order with the aborted transactions of the range (from the aborted-
//! transaction index), which transactional batches belong to an aborted transaction (removed)
//! and which markers may go (a marker whose transaction has no batch left in the log). Pure over
//! batch headers and the list it is given; must never decide on a batch at or past the pass's
//! mapped end (the caller copies those as they are) nor call a marker removable while a batch
//! of its transaction was seen.
//!
//! Kafka's rules, in order of the batches:
//! - an aborted transaction becomes *ongoing* for its producer once a batch reaching its first
//!   offset is read, and ends at its producer's ABORT marker;
//! - a transactional batch of a producer with an ongoing aborted transaction is aborted: it is
//!   removed (the producer's last batch is still kept, emptied) and marks the transaction as
//!   having had data in this pass; any other transactional batch marks its producer's
//!   transaction as committed-with-data;
//! - an ABORT marker whose transaction had data in this pass is kept (a read_committed reader
//!   that fetched that data before the cleaning still needs it); one whose transaction had none
//!   may go;
//! - a COMMIT marker whose transaction had a batch in this pass is kept; otherwise it may go;
//! - an empty control batch (an emptied marker) may go.
//!
//! A marker that may go is not dropped at once: it first gets a delete horizon
//! (`now + delete.retention.ms`, KIP-534) and is dropped by a cleaning after it (see `filter`).
//! The cleaned segment's aborted-transaction index keeps the entry of every ABORT marker it
//! keeps (`log/clean.rs`), so a marker and its entry always go together; Kafka drops the entry
//! as soon as the transaction has no data left, which a reader cannot tell apart.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use skiff_protocol::records::txn::{AbortedTxn, EndTxnMarker, MarkerType};
use skiff_protocol::records::v2::BatchHeader;

/// An ongoing aborted transaction: whether a batch of it was read.
#[derive(Debug, Clone, Copy)]
struct OngoingAbort {
    data_seen: bool,
}

/// The transaction state of one clean pass, fed every batch below the mapped end in offset
/// order.
#[derive(Debug, Default)]
pub(crate) struct CleanedTxns {
    /// Aborted transactions not reached yet, by first offset.
    pending: VecDeque<AbortedTxn>,
    /// Producers inside an aborted transaction.
    ongoing_aborted: BTreeMap<i64, OngoingAbort>,
    /// Producers with a non-aborted transactional batch read since their last marker.
    ongoing_committed: BTreeSet<i64>,
}

impl CleanedTxns {
    /// The state for a pass over a range whose aborted transactions are `aborted` (any order,
    /// duplicates allowed).
    #[cfg(test)]
    pub(crate) fn new(aborted: Vec<AbortedTxn>) -> Self {
        let mut txns = Self::default();
        txns.add_range(aborted, None);
        txns
    }

    /// Adds the aborted transactions of the next range of the pass, `[range_base, …)` (the
    /// aborted-transaction index's answer for it, any order), read range by range so no read
    /// holds more than one segment group's entries. `range_base`: `None` for the pass's first
    /// range; for a later one, its entries that started before it came with an earlier range
    /// and are skipped.
    pub(crate) fn add_range(&mut self, mut aborted: Vec<AbortedTxn>, range_base: Option<i64>) {
        if let Some(base) = range_base {
            aborted.retain(|txn| txn.first_offset >= base);
        }
        aborted.sort_by_key(|txn| (txn.first_offset, txn.producer_id, txn.last_offset));
        aborted.dedup();
        debug_assert!(match (self.pending.back(), aborted.first()) {
            (Some(last), Some(first)) => last.first_offset <= first.first_offset,
            _ => true,
        });
        self.pending.extend(aborted);
    }

    /// Moves every aborted transaction that starts at or below `offset` into the ongoing set
    /// (Kafka's `consumeAbortedTxnsUpTo`).
    fn reach(&mut self, offset: i64) {
        while let Some(txn) = self.pending.front().copied() {
            if txn.first_offset > offset {
                break;
            }
            self.pending.pop_front();
            self.ongoing_aborted
                .entry(txn.producer_id)
                .or_insert(OngoingAbort { data_seen: false });
        }
    }

    /// A data batch read: whether it belongs to an aborted transaction (Kafka's `onBatchRead`).
    pub(crate) fn on_data_batch(&mut self, header: &BatchHeader) -> bool {
        debug_assert!(!header.is_control());
        self.reach(header.last_offset());
        if !header.is_transactional() {
            return false;
        }
        if let Some(ongoing) = self.ongoing_aborted.get_mut(&header.producer_id) {
            ongoing.data_seen = true;
            return true;
        }
        self.ongoing_committed.insert(header.producer_id);
        false
    }

    /// A control batch read (`batch` its bytes): whether its transaction has no batch left in
    /// the log, so the marker may go once past its delete horizon (Kafka's
    /// `onControlBatchRead`).
    pub(crate) fn on_control_batch(&mut self, batch: &[u8], header: &BatchHeader) -> bool {
        debug_assert!(header.is_control());
        self.reach(header.last_offset());
        if header.records_count == 0 {
            // A marker emptied by an earlier cleaning.
            return true;
        }
        let Ok(marker) = EndTxnMarker::decode_with_header(batch, header) else {
            // A control record this cleaner does not know stays as it is.
            return false;
        };
        match marker.marker_type {
            MarkerType::Abort => !self
                .ongoing_aborted
                .remove(&header.producer_id)
                .is_some_and(|ongoing| ongoing.data_seen),
            MarkerType::Commit => !self.ongoing_committed.remove(&header.producer_id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skiff_protocol::records::record::{BatchBuilder, NewRecord};
    use skiff_protocol::records::Compression;

    fn data(base: i64, producer_id: i64, transactional: bool) -> Vec<u8> {
        let mut builder = BatchBuilder::new(base, Compression::None);
        builder.producer_id = producer_id;
        builder.producer_epoch = 0;
        builder.base_sequence = 0;
        builder.transactional = transactional;
        builder
            .push(&NewRecord {
                offset_delta: 0,
                timestamp: 1,
                key: Some(b"k"),
                value: Some(b"v"),
                headers: &[],
            })
            .unwrap();
        builder.build().unwrap()
    }

    fn marker(base: i64, producer_id: i64, marker_type: MarkerType) -> Vec<u8> {
        let mut batch = EndTxnMarker {
            producer_id,
            producer_epoch: 0,
            coordinator_epoch: 0,
            marker_type,
        }
        .encode_batch(1)
        .unwrap();
        skiff_protocol::records::v2::set_base_offset(&mut batch, base).unwrap();
        batch
    }

    fn feed(txns: &mut CleanedTxns, batch: &[u8]) -> bool {
        let header = BatchHeader::parse(batch).unwrap();
        if header.is_control() {
            txns.on_control_batch(batch, &header)
        } else {
            txns.on_data_batch(&header)
        }
    }

    fn aborted(producer_id: i64, first_offset: i64, last_offset: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id,
            first_offset,
            last_offset,
            last_stable_offset: last_offset + 1,
        }
    }

    #[test]
    fn aborted_batches_go_and_their_marker_stays_with_its_entry_while_data_was_seen() {
        // Producer 1 aborts [0, 2], producer 2 commits [1, 3], producer 3 is not transactional.
        let entry = aborted(1, 0, 2);
        let mut txns = CleanedTxns::new(vec![entry, entry]);
        assert!(feed(&mut txns, &data(0, 1, true)), "aborted data");
        assert!(!feed(&mut txns, &data(1, 2, true)), "committed data");
        assert!(!feed(&mut txns, &marker(2, 1, MarkerType::Abort)), "kept");
        assert!(!feed(&mut txns, &marker(3, 2, MarkerType::Commit)), "kept");
        assert!(!feed(&mut txns, &data(4, 3, false)));
        assert!(!feed(&mut txns, &data(5, 1, true)), "after its abort");
    }

    #[test]
    fn markers_whose_transactions_left_no_data_may_go() {
        let mut txns = CleanedTxns::new(vec![aborted(1, 0, 2)]);
        assert!(feed(&mut txns, &marker(2, 1, MarkerType::Abort)));
        assert!(feed(&mut txns, &marker(3, 2, MarkerType::Commit)));
        let mut emptied = marker(4, 2, MarkerType::Commit);
        let header = BatchHeader::parse(&emptied).unwrap();
        // An emptied control batch: the header alone with no records.
        emptied.truncate(skiff_protocol::records::v2::BATCH_HEADER_BYTES);
        let mut empty_header = header;
        empty_header.records_count = 0;
        assert!(txns.on_control_batch(&emptied, &empty_header));
    }

    #[test]
    fn ranges_added_one_by_one_skip_what_an_earlier_range_brought() {
        // Producer 1's aborted transaction spans both ranges: both index reads answer it.
        let spanning = aborted(1, 5, 12);
        let mut txns = CleanedTxns::default();
        txns.add_range(vec![spanning, aborted(2, 1, 3)], None);
        txns.add_range(vec![spanning, aborted(3, 11, 13)], Some(10));
        assert_eq!(txns.pending.len(), 3);
        assert!(feed(&mut txns, &data(5, 1, true)));
        assert!(feed(&mut txns, &data(11, 3, true)));
        assert!(
            !feed(&mut txns, &marker(12, 1, MarkerType::Abort)),
            "data seen"
        );
    }

    #[test]
    fn a_producers_later_transaction_is_told_apart_from_its_aborted_one() {
        // Producer 1 aborts [0, 1], then commits [2, 3]; the second is not aborted.
        let mut txns = CleanedTxns::new(vec![aborted(1, 0, 1)]);
        assert!(feed(&mut txns, &data(0, 1, true)));
        assert!(!feed(&mut txns, &marker(1, 1, MarkerType::Abort)));
        assert!(!feed(&mut txns, &data(2, 1, true)));
        assert!(!feed(&mut txns, &marker(3, 1, MarkerType::Commit)));
    }
}
