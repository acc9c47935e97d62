//! The legacy read_committed filter (`skiff.legacy.isolation.level = read_committed`,
//! docs/design/downconversion.md §3.8): which source batches of a Fetch v0–v3 response belong to
//! aborted transactions, decided as Kafka's consumer decides it for Fetch v4+
//! (`CompletedFetch`'s aborted-transaction filter), from the aborted transactions of the fetched
//! range. Pure and incremental: fed the batches in offset order, one at a time, so its state
//! carries from chunk to chunk of a lazy conversion. Must never skip a batch that is not
//! transactional, nor keep one of a producer inside an aborted transaction.
//!
//! Kafka's consumer algorithm: a producer enters the aborted set when a batch reaching the first
//! offset of one of its aborted transactions is read, and leaves it at its ABORT marker; a
//! transactional data batch of a producer in the set is skipped.

use std::collections::BTreeSet;

use crate::records::txn::{decode_control_key, AbortedTxn, MarkerType};
use crate::records::v2::BatchHeader;

/// The filter state of one legacy read_committed response partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AbortedFilter {
    /// Aborted transactions (first offset, producer id) not reached yet, by first offset, from
    /// `next` on.
    aborted: Vec<(i64, i64)>,
    next: usize,
    /// Producers inside an aborted transaction.
    producers: BTreeSet<i64>,
}

impl AbortedFilter {
    /// The filter for a fetch whose range holds the aborted transactions `aborted` (the
    /// aborted-transaction index's answer for `[fetch offset, last stable offset)`, any order).
    pub fn new(aborted: Vec<AbortedTxn>) -> Self {
        Self::from_first_offsets(
            aborted
                .into_iter()
                .map(|txn| (txn.producer_id, txn.first_offset)),
        )
    }

    /// The filter from what a Fetch response's `aborted_transactions` carries: each aborted
    /// transaction's producer id and first offset (any order).
    pub fn from_first_offsets(aborted: impl IntoIterator<Item = (i64, i64)>) -> Self {
        let mut aborted: Vec<(i64, i64)> = aborted
            .into_iter()
            .map(|(producer_id, first_offset)| (first_offset, producer_id))
            .collect();
        aborted.sort_unstable();
        Self {
            aborted,
            next: 0,
            producers: BTreeSet::new(),
        }
    }

    /// Heap and inline bytes this filter holds (what a planned legacy response accounts for it):
    /// its aborted-transaction list and the producers found inside one so far (a B-tree's nodes
    /// counted at their keys' bytes).
    pub fn held_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.aborted.capacity() * std::mem::size_of::<(i64, i64)>()
            + self.producers.len() * std::mem::size_of::<i64>()
    }

    /// Reads the v2 batch `batch` (with its parsed `header`): whether it is skipped, as the
    /// data of an aborted transaction. Control batches are never skipped here (the converter
    /// drops them anyway); an ABORT marker ends its producer's aborted transaction. Feeding a
    /// data batch twice (a released prepared batch is converted again) changes nothing.
    pub fn skips(&mut self, batch: &[u8], header: &BatchHeader) -> bool {
        if header.producer_id < 0 {
            return false;
        }
        let last_offset = header.last_offset();
        while let Some((first_offset, producer_id)) = self.aborted.get(self.next) {
            if *first_offset > last_offset {
                break;
            }
            self.producers.insert(*producer_id);
            self.next += 1;
        }
        if header.is_control() {
            if is_abort_marker(batch, header) {
                self.producers.remove(&header.producer_id);
            }
            return false;
        }
        header.is_transactional() && self.producers.contains(&header.producer_id)
    }
}

/// Whether a control batch is an ABORT marker (Kafka's `containsAbortMarker`: the first control
/// record's key).
fn is_abort_marker(batch: &[u8], header: &BatchHeader) -> bool {
    let mut scratch = Vec::new();
    let Ok(mut records) = crate::records::record::batch_records(
        batch,
        header,
        &mut scratch,
        crate::records::txn::CONTROL_BATCH_BYTES_MAX,
    ) else {
        return false;
    };
    matches!(
        records
            .next()
            .map(|record| record.map(|r| decode_control_key(r.key))),
        Some(Ok(Ok(MarkerType::Abort)))
    )
}
