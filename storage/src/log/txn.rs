//! A [`Log`]'s transactional state on disk: the aborted-transaction index of its segments
//! (`append_aborted_txn`, `aborted_transactions`; the file is `crate::txn_index`) and the
//! producer-state snapshots the embedder writes at segment boundaries (`producer_snapshot`).
//! Owns the order in which an ABORT marker, its index entry and the recovery point become
//! durable; must never let the recovery point pass an ABORT marker whose entry is not written
//! (see [`Log::append_aborted_txn`]), nor return more than [`ABORTED_TXNS_PER_READ_MAX`] entries.

use skiff_protocol::records::txn::{AbortedTxn, EndTxnMarker, MarkerType};
use skiff_protocol::records::v2::BatchHeader;

use crate::error::{Error, Result};
use crate::limits::UNINDEXED_ABORTS_MAX;
use crate::producer_snapshot::{self, ProducerSnapshot, PRODUCER_SNAPSHOT_BYTES_MAX};

use super::{Log, LogState};

/// Most entries one [`Log::aborted_transactions`] call returns (32 bytes each in memory, so
/// 4 MiB): far more than a bounded fetch can need (a 1 MiB fetch holds at most some 16,000
/// batches, so as many transactions end in it, plus those open across it, which the partition
/// bounds per producer). Past it the call fails with [`Error::TooManyAbortedTxns`] and the caller
/// asks for a smaller range; Kafka has no bound and reads every index of the segments the fetch
/// spans into memory.
pub const ABORTED_TXNS_PER_READ_MAX: usize = 1 << 17;

/// The ABORT markers among `batches` (whole, validated v2 batches), as their byte positions in
/// `batches`. Only a control batch's records are read. A control batch that is not an
/// end-transaction marker of Kafka's layout is not one (the partition validates markers before
/// appending them).
fn abort_markers(batches: &[u8]) -> Vec<usize> {
    let mut markers = Vec::new();
    let mut at = 0usize;
    while let Some(rest) = batches.get(at..).filter(|rest| !rest.is_empty()) {
        let Ok(header) = BatchHeader::parse(rest) else {
            break;
        };
        let size = header.total_bytes();
        if header.is_control() && header.is_transactional() {
            let marker = rest
                .get(..size)
                .and_then(|batch| EndTxnMarker::decode_with_header(batch, &header).ok());
            if marker.is_some_and(|marker| marker.marker_type == MarkerType::Abort) {
                markers.push(at);
            }
        }
        at += size;
    }
    markers
}

/// The base offsets of the batches at `positions` in `batches` (after offsets were assigned).
fn abort_marker_offsets(batches: &[u8], positions: &[usize]) -> Vec<i64> {
    positions
        .iter()
        .filter_map(|at| {
            batches
                .get(*at..)
                .and_then(|rest| BatchHeader::parse(rest).ok())
        })
        .map(|header| header.base_offset)
        .collect()
}

impl LogState {
    /// Refuses, before anything is written, an append of `markers` ABORT markers that would
    /// leave more than [`UNINDEXED_ABORTS_MAX`] waiting for their entries.
    pub(super) fn check_unindexed_room(&self, markers: usize) -> Result<()> {
        if self.unindexed_aborts.len() + markers > UNINDEXED_ABORTS_MAX {
            return Err(Error::LimitReached(format!(
                "{} ABORT markers wait for their aborted-transaction entries \
                 (Log::append_aborted_txn), at most {UNINDEXED_ABORTS_MAX}",
                self.unindexed_aborts.len()
            )));
        }
        Ok(())
    }

    /// The highest recovery point the log may publish below `end_offset`: never past an ABORT
    /// marker whose entry is not written, which recovery would have to cut.
    pub(super) fn recovery_point_cap(&self, end_offset: i64) -> i64 {
        self.unindexed_aborts
            .keys()
            .next()
            .map_or(end_offset, |first| end_offset.min(*first))
    }

    /// The last entry of the log's aborted-transaction index, if any.
    fn last_aborted_txn(&self) -> Option<&AbortedTxn> {
        self.segments
            .values()
            .rev()
            .find_map(|segment| segment.txn.last())
    }
}

impl LogState {
    /// Notes the ABORT markers at `positions` of `batches` (just appended, offsets assigned) as
    /// waiting for their entries; `flushed`: the append's flush policy syncs it.
    pub(super) fn note_unindexed_aborts(
        &mut self,
        batches: &[u8],
        positions: &[usize],
        flushed: bool,
    ) {
        for offset in abort_marker_offsets(batches, positions) {
            self.unindexed_aborts.insert(offset, flushed);
        }
    }
}

impl Log {
    /// Before an append writes anything, under the writer lock: for a `transactional` one (some
    /// batch is), runs the data directory's downgrade guard (one atomic load after its first
    /// run) and finds the ABORT markers (their positions in `batches`), refusing the append if
    /// more than [`UNINDEXED_ABORTS_MAX`] would then wait for their entries. Other appends skip
    /// both.
    pub(super) fn before_transactional(
        &self,
        transactional: bool,
        batches: &[u8],
    ) -> Result<Vec<usize>> {
        if !transactional {
            return Ok(Vec::new());
        }
        self.downgrade_guard.before_transactional_write()?;
        let positions = abort_markers(batches);
        // Exact: appends and entry writes all hold the writer lock.
        self.read_state()?.check_unindexed_room(positions.len())?;
        Ok(positions)
    }

    /// Records an aborted transaction in the aborted-transaction index (Kafka's `.txnindex`
    /// entry: producer id, first offset, offset of its ABORT marker, last stable offset once the
    /// marker was appended), in the segment holding `entry.last_offset` — the active one when
    /// the marker was just appended. Leader and follower alike call it after appending each
    /// ABORT marker ([`Log::append_with_epoch`], [`Log::append_replicated`]), before the next
    /// marker's entry.
    ///
    /// Durability: the log notes every ABORT marker it appends and keeps its recovery point
    /// below the first one whose entry is not written yet, so a flush never declares a marker
    /// durable without its entry; a flush syncs the `.txnindex` files with the `.log` files.
    /// Recovery of unflushed data drops entries past the recovered end and cuts the log at an
    /// ABORT marker left without its entry (a crash between the two), as it cuts a torn tail. If
    /// the marker's append was due for a flush under the flush policy, its `AppendInfo::flushed`
    /// is false and this flushes once the entry is written. Up to 1,024 markers
    /// (`UNINDEXED_ABORTS_MAX`) may wait for their entries; an append of more is refused
    /// ([`Error::LimitReached`]). A clean close with one still waiting writes no clean-shutdown
    /// marker, so the next open recovers (and cuts it).
    ///
    /// Refused with [`Error::InvalidTxnEntry`], writing nothing: a marker offset outside
    /// `[log start, log end)` or not after the last entry's, a first offset past the marker or
    /// negative. A write failure poisons the log.
    pub fn append_aborted_txn(&self, entry: AbortedTxn) -> Result<()> {
        let _writer = self.writer()?;
        let flush_owed = {
            let mut state = self.write_state()?;
            self.check_writable(&state)?;
            check_entry(&state, &entry)?;
            let base = state
                .segments
                .range(..=entry.last_offset)
                .next_back()
                .map(|(base, _)| *base)
                .ok_or(Error::Closed)?;
            let segment = state.segments.get_mut(&base).ok_or(Error::Closed)?;
            segment
                .txn
                .append(self.io.as_ref(), &entry)
                .map_err(|error| match error {
                    Error::InvalidTxnEntry(_) => error,
                    other => self.poison(other),
                })?;
            state
                .unindexed_aborts
                .remove(&entry.last_offset)
                .unwrap_or(false)
        };
        drop(_writer);
        if flush_owed {
            self.flush()?;
        }
        Ok(())
    }

    /// The aborted transactions a fetch of `[from_offset, upper_bound)` must report (Kafka's
    /// `UnifiedLog.collectAbortedTransactions`): every entry with `last_offset >= from_offset` and
    /// `first_offset < upper_bound`, in marker order. Reads the indexes of the segment holding
    /// `from_offset` and of every later segment that has one, stopping at the first entry whose
    /// last stable offset reaches `upper_bound` (every later transaction started at or after it).
    /// Segments without aborted transactions cost no I/O. More than
    /// [`ABORTED_TXNS_PER_READ_MAX`] matching entries is [`Error::TooManyAbortedTxns`].
    pub fn aborted_transactions(
        &self,
        from_offset: i64,
        upper_bound: i64,
    ) -> Result<Vec<AbortedTxn>> {
        let state = self.read_state()?;
        let mut found = Vec::new();
        if upper_bound <= from_offset {
            return Ok(found);
        }
        let first_base = state
            .segments
            .range(..=from_offset)
            .next_back()
            .map_or(i64::MIN, |(base, _)| *base);
        let mut complete = false;
        for segment in state
            .segments
            .range(first_base..)
            .map(|(_, segment)| segment)
        {
            if complete {
                break;
            }
            if segment.txn.is_empty() {
                continue;
            }
            segment.txn.for_each(self.io.as_ref(), |entry| {
                if entry.last_offset >= from_offset && entry.first_offset < upper_bound {
                    if found.len() == ABORTED_TXNS_PER_READ_MAX {
                        return Err(Error::TooManyAbortedTxns {
                            limit: ABORTED_TXNS_PER_READ_MAX,
                            from_offset,
                            upper_bound,
                        });
                    }
                    found.push(entry);
                }
                complete = entry.last_stable_offset >= upper_bound;
                Ok(!complete)
            })?;
        }
        Ok(found)
    }

    /// For the cleaner's swap (`clean.rs`): writes the cleaned segment's aborted-transaction
    /// index, `<base>.txnindex.cleaned` (base: the first of `bases`, the group's segments),
    /// holding the entries of the group whose ABORT marker the cleaned copy keeps
    /// (`kept_markers`, ascending: Kafka keeps an entry exactly while its marker is kept),
    /// fsynced (its name with the cleaned `.log`'s directory fsync). Returns how many; with none
    /// no file is written. Which markers survive is the cleaner's rule, not this.
    pub(super) fn write_cleaned_txn_index(
        &self,
        group: &[super::clean::Source],
        kept_markers: &[i64],
    ) -> Result<u64> {
        let bases: Vec<i64> = group.iter().map(|source| source.base_offset).collect();
        let Some(base) = bases.first().copied() else {
            return Ok(0);
        };
        let path = super::clean::cleaned_txn_path(&self.dir, base);
        let mut bytes = Vec::new();
        {
            let state = self.read_state()?;
            for segment in bases.iter().filter_map(|base| state.segments.get(base)) {
                segment.txn.for_each(self.io.as_ref(), |entry| {
                    if kept_markers.binary_search(&entry.last_offset).is_ok() {
                        bytes.extend_from_slice(&crate::txn_index::encode(&entry));
                    }
                    Ok(true)
                })?;
            }
        }
        if bytes.is_empty() {
            crate::txn_index::remove_if_present(self.io.as_ref(), &path)?;
            return Ok(0);
        }
        let file = self
            .io
            .open(&path, crate::io::OpenMode::CreateTruncate)
            .map_err(|error| Error::io(&path, error))?;
        self.io
            .write_all_at(&file, &bytes, 0)
            .map_err(|error| Error::io(&path, error))?;
        self.io
            .sync(&file, crate::config::PersistMode::SyncData)
            .map_err(|error| Error::io(&path, error))?;
        Ok((bytes.len() / crate::txn_index::TXN_ENTRY_BYTES) as u64)
    }

    /// Whether an ABORT marker appended to this log still waits for its entry.
    pub(crate) fn has_unindexed_aborts(&self) -> bool {
        self.state
            .read()
            .map_or(true, |state| !state.unindexed_aborts.is_empty())
    }

    /// Bytes of the log's aborted-transaction indexes (beside [`Log::size_bytes`], which counts
    /// the `.log` files only, as Kafka's log size does).
    pub fn txn_index_bytes(&self) -> Result<u64> {
        Ok(self
            .read_state()?
            .segments
            .values()
            .map(|segment| segment.txn.size_bytes())
            .sum())
    }
}

/// Checks `entry` against the log as `append_aborted_txn` documents.
fn check_entry(state: &LogState, entry: &AbortedTxn) -> Result<()> {
    let invalid = |reason: String| Err(Error::InvalidTxnEntry(reason));
    let log_end = state.log_end_offset();
    if entry.last_offset < state.log_start_offset || entry.last_offset >= log_end {
        return invalid(format!(
            "marker offset {} outside the log [{}, {log_end})",
            entry.last_offset, state.log_start_offset
        ));
    }
    if entry.first_offset < 0 || entry.first_offset > entry.last_offset {
        return invalid(format!(
            "first offset {} not within [0, marker offset {}]",
            entry.first_offset, entry.last_offset
        ));
    }
    if entry.last_stable_offset < 0 {
        return invalid(format!(
            "negative last stable offset {}",
            entry.last_stable_offset
        ));
    }
    if let Some(last) = state.last_aborted_txn() {
        if entry.last_offset <= last.last_offset {
            return invalid(format!(
                "marker offset {} not after the last entry's {}",
                entry.last_offset, last.last_offset
            ));
        }
    }
    Ok(())
}

impl LogState {
    /// Unlinks the producer snapshots `doomed` says go, and forgets them. The caller fsyncs the
    /// directory if its change must be durable before the next step.
    pub(super) fn drop_snapshots(
        &mut self,
        io: &dyn crate::io::FileIo,
        dir: &std::path::Path,
        doomed: impl Fn(i64) -> bool,
    ) -> Result<bool> {
        let gone: Vec<i64> = self
            .snapshots
            .iter()
            .copied()
            .filter(|o| doomed(*o))
            .collect();
        for offset in &gone {
            crate::txn_index::remove_if_present(io, &producer_snapshot::path(dir, *offset))?;
            self.snapshots.remove(offset);
        }
        Ok(!gone.is_empty())
    }

    /// After segments below `first_base` were deleted: their snapshots go too, except the
    /// newest snapshot (an open replays from it, whatever segments are left), and so do the
    /// ABORT markers there still waiting for an entry (none can be written below the start).
    pub(super) fn forget_below(
        &mut self,
        io: &dyn crate::io::FileIo,
        dir: &std::path::Path,
        first_base: i64,
    ) -> Result<()> {
        let newest = self.snapshots.last().copied();
        self.drop_snapshots(io, dir, |offset| {
            offset < first_base && Some(offset) != newest
        })?;
        let start = self.log_start_offset;
        self.unindexed_aborts.retain(|offset, _| *offset >= start);
        Ok(())
    }

    /// After a truncation to `end_offset`: snapshots past it and pending ABORT markers at or
    /// past it describe batches that are gone.
    pub(super) fn forget_from(
        &mut self,
        io: &dyn crate::io::FileIo,
        dir: &std::path::Path,
        end_offset: i64,
    ) -> Result<bool> {
        self.unindexed_aborts
            .retain(|offset, _| *offset < end_offset);
        self.drop_snapshots(io, dir, |offset| offset > end_offset)
    }
}

impl Log {
    /// Keeps `bytes`, the embedder's encoding of its producer state after every batch below
    /// `offset` was applied, as the snapshot at `offset` (`<offset>.snapshot`, Kafka's name;
    /// framed with a version and a CRC32C, see `producer_snapshot`), durably: written whole to a
    /// temporary file, fsynced, renamed, the directory fsynced, all without the log's locks. A
    /// partition writes one when an append rolls a segment (`AppendInfo::segment_base_offset`
    /// changes), so that an open replays only the batches after the newest snapshot.
    ///
    /// Snapshots go with the data they cover: a truncation below `offset` removes it (the state
    /// it describes included batches that are gone), retention and DeleteRecords remove those
    /// below the first remaining segment but the newest, recovery those past the recovered end.
    /// Refused with [`Error::InvalidSnapshot`]: `offset` outside `[log start, log end]`, more
    /// than [`PRODUCER_SNAPSHOT_BYTES_MAX`] bytes.
    pub fn write_producer_snapshot(&self, offset: i64, bytes: &[u8]) -> Result<()> {
        if bytes.len() > PRODUCER_SNAPSHOT_BYTES_MAX {
            return Err(Error::InvalidSnapshot(format!(
                "{} bytes, more than {PRODUCER_SNAPSHOT_BYTES_MAX}",
                bytes.len()
            )));
        }
        let truncations = {
            let state = self.read_state()?;
            self.check_writable(&state)?;
            check_snapshot_offset(&state, offset)?;
            state.truncations
        };
        let path = producer_snapshot::path(&self.dir, offset);
        crate::fs::write_atomic(
            self.io.as_ref(),
            &path,
            &producer_snapshot::encode(offset, bytes),
        )?;
        let _writer = self.writer()?;
        let mut state = self.write_state()?;
        let still_valid = state.truncations == truncations
            && !state.closed
            && check_snapshot_offset(&state, offset).is_ok();
        if !still_valid {
            // A truncation came in between: the state described batches that may be gone.
            crate::txn_index::remove_if_present(self.io.as_ref(), &path)?;
            return Err(Error::InvalidSnapshot(format!(
                "the log was truncated or closed while the snapshot at {offset} was written"
            )));
        }
        state.snapshots.insert(offset);
        Ok(())
    }

    /// The newest producer snapshot that reads back whole, if any: a file that fails its checks
    /// is removed and the next older one tried (as Kafka's `ProducerStateManager` does), so a
    /// damaged snapshot costs a longer replay, never a wrong state.
    pub fn latest_producer_snapshot(&self) -> Result<Option<ProducerSnapshot>> {
        let offsets: Vec<i64> = self.read_state()?.snapshots.iter().rev().copied().collect();
        for offset in offsets {
            let path = producer_snapshot::path(&self.dir, offset);
            let bytes_max = (PRODUCER_SNAPSHOT_BYTES_MAX + producer_snapshot::HEADER_BYTES) as u64;
            let read = match self.io.read_small(&path, bytes_max) {
                Ok(bytes) => producer_snapshot::decode(&bytes, offset).ok(),
                Err(error) if error.kind() == std::io::ErrorKind::InvalidData => None,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
                Err(error) => return Err(Error::io(&path, error)),
            };
            if let Some(snapshot) = read {
                return Ok(Some(snapshot));
            }
            let _writer = self.writer()?;
            let mut state = self.write_state()?;
            state.drop_snapshots(self.io.as_ref(), &self.dir, |o| o == offset)?;
        }
        Ok(None)
    }

    /// Whether the log holds a producer snapshot at `offset`.
    pub fn has_producer_snapshot(&self, offset: i64) -> Result<bool> {
        Ok(self.read_state()?.snapshots.contains(&offset))
    }

    /// Offsets of the producer snapshots the log holds, oldest first.
    pub fn producer_snapshot_offsets(&self) -> Result<Vec<i64>> {
        Ok(self.read_state()?.snapshots.iter().copied().collect())
    }
}

/// A snapshot's offset must lie within `[log start, log end]`.
fn check_snapshot_offset(state: &LogState, offset: i64) -> Result<()> {
    let log_end = state.log_end_offset();
    if offset < state.log_start_offset || offset > log_end {
        return Err(Error::InvalidSnapshot(format!(
            "offset {offset} outside the log [{}, {log_end}]",
            state.log_start_offset
        )));
    }
    Ok(())
}

#[cfg(test)]
#[path = "txn_tests.rs"]
mod tests;
