//! The producer state of one partition as bytes, for storage's producer snapshots
//! (`Log::write_producer_snapshot`, written when an append rolls a segment): every tracked
//! producer (epoch, sequences of its last batches, coordinator epoch, open transaction) and the
//! ended transactions still unstable. A restart replays only the batches after the newest
//! snapshot, so it rebuilds every open transaction however long ago it started (replay alone is
//! bounded by `PRODUCER_REPLAY_OFFSETS_MAX` and would miss one older than that).
//!
//! Must never: accept bytes it did not write (a version, count or length that does not add up is
//! an error and the caller falls back to an older snapshot or to replay), or allocate by a count
//! read from the bytes before checking the bytes hold that many entries.

use std::collections::{BTreeMap, VecDeque};

use skiff_protocol::codec::Reader;

use super::{BatchRange, PartitionProducers, ProducerEntry, BATCHES_RETAINED_PER_PRODUCER};

/// The layout's version (first two bytes).
const SNAPSHOT_VERSION: u16 = 1;
/// Bytes of one producer without its batches.
const PRODUCER_BYTES: usize = 8 + 2 + 4 + 8 + 8 + 8 + 1;
/// Bytes of one remembered batch.
const BATCH_BYTES: usize = 4 + 4 + 8 + 4;
/// Bytes of one unstable ended transaction.
const ENDED_BYTES: usize = 8 + 8;

/// Why snapshot bytes were refused.
#[derive(Debug, thiserror::Error)]
#[error("producer snapshot unreadable: {0}")]
pub struct SnapshotError(&'static str);

impl From<skiff_protocol::error::DecodeError> for SnapshotError {
    fn from(_: skiff_protocol::error::DecodeError) -> Self {
        Self("truncated")
    }
}

impl PartitionProducers {
    /// The state as snapshot bytes.
    pub fn encode_snapshot(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + self.producers.len() * (PRODUCER_BYTES + 40));
        out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        out.extend_from_slice(&(self.append_order as i64).to_be_bytes());
        out.extend_from_slice(&count(self.producers.len()).to_be_bytes());
        for (producer_id, entry) in &self.producers {
            out.extend_from_slice(&producer_id.to_be_bytes());
            out.extend_from_slice(&entry.epoch.to_be_bytes());
            out.extend_from_slice(&entry.coordinator_epoch.to_be_bytes());
            out.extend_from_slice(&entry.last_timestamp.to_be_bytes());
            out.extend_from_slice(&entry.open_txn_first_offset.unwrap_or(-1).to_be_bytes());
            out.extend_from_slice(&(entry.last_append_order as i64).to_be_bytes());
            // At most BATCHES_RETAINED_PER_PRODUCER (5).
            out.push(u8::try_from(entry.batches.len()).unwrap_or(u8::MAX));
            for batch in &entry.batches {
                out.extend_from_slice(&batch.first_sequence.to_be_bytes());
                out.extend_from_slice(&batch.last_sequence.to_be_bytes());
                out.extend_from_slice(&batch.base_offset.to_be_bytes());
                out.extend_from_slice(&batch.last_offset_delta.to_be_bytes());
            }
        }
        out.extend_from_slice(&count(self.unreplicated_txns.len()).to_be_bytes());
        for (first_offset, marker_offset) in &self.unreplicated_txns {
            out.extend_from_slice(&first_offset.to_be_bytes());
            out.extend_from_slice(&marker_offset.to_be_bytes());
        }
        out
    }

    /// The state `bytes` ([`PartitionProducers::encode_snapshot`]) hold, tracking at most
    /// `producers_max` producers from now on.
    pub fn decode_snapshot(bytes: &[u8], producers_max: usize) -> Result<Self, SnapshotError> {
        let mut reader = Reader::new(bytes);
        if reader.u16()? != SNAPSHOT_VERSION {
            return Err(SnapshotError("unknown version"));
        }
        let mut state = Self::new(producers_max);
        state.append_order = u64::try_from(reader.i64()?).map_err(|_| SnapshotError("order"))?;
        let count = reader.u32()? as usize;
        if count.saturating_mul(PRODUCER_BYTES) > reader.remaining() {
            return Err(SnapshotError("more producers than bytes"));
        }
        for _ in 0..count {
            let (producer_id, entry) = decode_producer(&mut reader)?;
            if let Some(first_offset) = entry.open_txn_first_offset {
                if state.open_txns.insert(first_offset, producer_id).is_some() {
                    return Err(SnapshotError("two transactions open at one offset"));
                }
            }
            if state.producers.insert(producer_id, entry).is_some() {
                return Err(SnapshotError("a producer twice"));
            }
        }
        let ended = reader.u32()? as usize;
        if ended.saturating_mul(ENDED_BYTES) != reader.remaining() {
            return Err(SnapshotError("ended transactions do not fill the rest"));
        }
        let mut unreplicated = BTreeMap::new();
        for _ in 0..ended {
            unreplicated.insert(reader.i64()?, reader.i64()?);
        }
        state.unreplicated_txns = unreplicated;
        Ok(state)
    }
}

/// A count as the layout stores it. Past `u32::MAX` (never: the producers are bounded far below)
/// the count no longer matches the entries and the snapshot is refused when read back.
fn count(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

fn decode_producer(reader: &mut Reader<'_>) -> Result<(i64, ProducerEntry), SnapshotError> {
    let producer_id = reader.i64()?;
    let epoch = reader.i16()?;
    let coordinator_epoch = reader.i32()?;
    let last_timestamp = reader.i64()?;
    let open_first = reader.i64()?;
    let last_append_order = u64::try_from(reader.i64()?).map_err(|_| SnapshotError("order"))?;
    let batch_count = usize::from(reader.u8()?);
    if batch_count > BATCHES_RETAINED_PER_PRODUCER || batch_count * BATCH_BYTES > reader.remaining()
    {
        return Err(SnapshotError("more batches than retained or than bytes"));
    }
    let mut batches = VecDeque::with_capacity(batch_count);
    for _ in 0..batch_count {
        batches.push_back(BatchRange {
            first_sequence: reader.i32()?,
            last_sequence: reader.i32()?,
            base_offset: reader.i64()?,
            last_offset_delta: reader.i32()?,
        });
    }
    let entry = ProducerEntry {
        epoch,
        batches,
        last_append_order,
        coordinator_epoch,
        open_txn_first_offset: (open_first >= 0).then_some(open_first),
        last_timestamp,
    };
    Ok((producer_id, entry))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::producer_state::ProducerBatch;

    #[test]
    fn a_snapshot_reads_back_equal_and_garbage_is_refused() {
        let mut state = PartitionProducers::default();
        let batch = |producer_id, sequence, transactional| ProducerBatch {
            producer_id,
            producer_epoch: 2,
            base_sequence: sequence,
            last_offset_delta: 1,
            transactional,
            max_timestamp: 77,
        };
        for sequence in 0..7 {
            state.record_append(&batch(1, sequence * 2, false), i64::from(sequence) * 2);
        }
        state.record_append(&batch(9, 0, true), 20);
        state.record_append(&batch(8, 0, true), 22);
        let marker = skiff_protocol::records::txn::EndTxnMarker {
            producer_id: 8,
            producer_epoch: 3,
            coordinator_epoch: 4,
            marker_type: skiff_protocol::records::txn::MarkerType::Abort,
        };
        state.record_marker(&marker, 24, 99);
        let bytes = state.encode_snapshot();
        let decoded =
            PartitionProducers::decode_snapshot(&bytes, PRODUCERS_PER_PARTITION_MAX_DEFAULT)
                .expect("reads back");
        assert_eq!(decoded, state);
        assert_eq!(decoded.first_unstable_offset(), Some(20));
        for cut in 0..bytes.len() {
            assert!(PartitionProducers::decode_snapshot(&bytes[..cut], 10).is_err());
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(PartitionProducers::decode_snapshot(&longer, 10).is_err());
        let mut huge = bytes;
        huge[10..14].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(PartitionProducers::decode_snapshot(&huge, 10).is_err());
    }

    use crate::partition::producer_state::PRODUCERS_PER_PARTITION_MAX_DEFAULT;
}
