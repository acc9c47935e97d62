//! Cleaning a [`Log`] (the I/O half of the log cleaner; the rules are in `crate::cleaner`):
//! its plan (`cleaning_plan`), and the clean pass (`clean`), which maps the dirty section's
//! keys, recopies the segments from the log start to the end of the mapped section in groups,
//! and swaps each group in as the `cleaner` module doc's protocol says. The copy holds no lock
//! (appends and reads go on); each group's swap holds the writer lock, and the state lock only
//! to replace the segments. Must never swap a group after a truncation, a move of the log start
//! or a close since the pass began, nor let a reader of an old segment see the new file's bytes
//! at old positions (the old files are held open until the swap is done).

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use skiff_protocol::limits::DECOMPRESSED_BYTES_MAX;
use skiff_protocol::records::record::batch_records;
use skiff_protocol::records::v2::{BatchHeader, BATCH_HEADER_BYTES};

use crate::cleaner::{
    filter_batch, plan, CleanError, CleanHooks, CleanPlan, CleanStats, CleanedTxns, Cleaner,
    FilterCounts, FilterRules, Filtered, LogOffsets, SegmentSummary, SwapManifest,
    SWAP_MANIFEST_FILE,
};
use crate::config::{LogConfig, PersistMode};
use crate::error::{Error, Result};
use crate::fs::{
    self, CLEANED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX,
};
use crate::io::OpenMode;
use crate::limits::TIME_INDEX_ENTRY_BYTES;
use crate::segment::{self, Segment};

use super::Log;

type CleanResult<T> = std::result::Result<T, CleanError>;

/// A sealed segment as the pass found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Source {
    pub(super) base_offset: i64,
    next_offset: i64,
    size_bytes: u64,
    /// Bytes of its aborted-transaction index (an entry written meanwhile aborts the swap).
    txn_bytes: u64,
}

/// What the pass took from the log when it began; a swap checks the log still matches.
#[derive(Debug, Clone)]
struct Snapshot {
    config: LogConfig,
    truncations: u64,
    log_start_offset: i64,
    /// The sealed segments below the plan's first uncleanable offset.
    sources: Vec<Source>,
    /// Base offset of the segment after the last source (the active one, or the first one the
    /// plan leaves out).
    next_base: i64,
}

/// `dir/<base>.log.cleaned`.
fn cleaned_path(dir: &Path, base_offset: i64) -> PathBuf {
    fs::segment_file(dir, base_offset, &format!("{LOG_SUFFIX}.{CLEANED_SUFFIX}"))
}

/// `dir/<base>.txnindex.cleaned`: the cleaned segment's aborted-transaction index before its
/// swap.
pub(super) fn cleaned_txn_path(dir: &Path, base_offset: i64) -> PathBuf {
    fs::segment_file(
        dir,
        base_offset,
        &format!("{TXN_INDEX_SUFFIX}.{CLEANED_SUFFIX}"),
    )
}

/// Kafka's `groupSegmentsBySize`: consecutive segments whose bytes together fit `segment_bytes`,
/// whose index entries (estimated one per `index_interval_bytes`) fit the index, and whose
/// offsets fit the 4-byte relative offsets of one segment.
fn group_by_size(sources: &[Source], config: &LogConfig) -> Vec<Vec<Source>> {
    let entries_max = u64::from(config.index_bytes_max) / TIME_INDEX_ENTRY_BYTES as u64;
    let interval = u64::from(config.index_interval_bytes.max(1));
    let mut groups: Vec<Vec<Source>> = Vec::new();
    for source in sources {
        let fits = groups.last().is_some_and(|group| {
            let bytes: u64 = group.iter().map(|s| s.size_bytes).sum::<u64>() + source.size_bytes;
            let first = group.first().map_or(source.base_offset, |s| s.base_offset);
            bytes <= config.segment_bytes
                && bytes / interval <= entries_max
                && source.next_offset - first <= i64::from(u32::MAX)
        });
        match groups.last_mut() {
            Some(group) if fits => group.push(*source),
            _ => groups.push(vec![*source]),
        }
    }
    groups
}

impl Log {
    /// The cleaning plan of this log if its policy compacts (`None` otherwise): the cleanable
    /// range below `upper_bound` (the high watermark, or the last stable offset), its dirty
    /// ratio and compaction delay at `now_ms` (see [`CleanPlan`]). Reads one batch header per
    /// dirty segment when `max_compaction_lag_ms` is bounded.
    pub fn cleaning_plan(&self, upper_bound: i64, now_ms: i64) -> Result<Option<CleanPlan>> {
        let state = self.read_state()?;
        if !state.config.cleanup_policy.compacts() {
            return Ok(None);
        }
        let offsets = LogOffsets {
            log_start_offset: state.log_start_offset,
            log_end_offset: state.log_end_offset(),
            checkpointed_first_dirty: self.cleaner_offsets.get(&self.key)?,
        };
        let dirty_from = offsets.checkpointed_first_dirty.unwrap_or(0);
        let lag_bounded = state.config.max_compaction_lag_ms != i64::MAX;
        let active_base = state.active()?.base_offset;
        let mut summaries = Vec::new();
        for segment in state.segments.values() {
            let dirty = segment.next_offset > dirty_from && segment.base_offset != active_base;
            let first_batch_timestamp_ms = if lag_bounded && dirty {
                segment.first_batch_timestamp(self.io.as_ref())?
            } else {
                None
            };
            summaries.push(SegmentSummary {
                base_offset: segment.base_offset,
                size_bytes: segment.size_bytes,
                max_timestamp_ms: segment.max_timestamp_ms,
                first_batch_timestamp_ms,
            });
        }
        Ok(Some(plan(
            &summaries,
            &offsets,
            upper_bound,
            now_ms,
            &state.config,
        )))
    }

    /// Cleans the log as `plan` (from [`Log::cleaning_plan`]) says: maps the keys of the dirty
    /// section `[plan.first_dirty_offset, plan.first_uncleanable_offset)` into `cleaner`'s map
    /// (as far as it holds whole batches: the next pass goes on from there), then recopies
    /// every segment from the log start to the end of the mapped section, keeping per key only
    /// its latest record (every kept record at its own offset, with its timestamp and headers),
    /// dropping records without a key and tombstones past their delete horizon (a tombstone
    /// first passed gets the horizon `now_ms + delete_retention_ms`, KIP-534), and keeping the
    /// last batch of each producer in `live_producers` (producer id → last offset of its last
    /// batch), empty if need be (a marker whole). Transactions as Kafka's cleaner treats them
    /// (`cleaner::txn`, from the aborted-transaction index): the batches of aborted
    /// transactions go (and never enter the map), a marker stays while its transaction has data
    /// in the log and otherwise gets the delete horizon and goes after it, and the cleaned
    /// segment keeps the index entries of the ABORT markers kept with their data. The caller's
    /// upper bound must not pass the last stable offset. Small cleaned segments are merged up to `segment_bytes`. The
    /// log's first dirty offset becomes the end of the mapped section.
    ///
    /// Appends and reads go on meanwhile. A truncation, a move of the log start, a deletion or
    /// close, or `hooks` asking to stop aborts the pass ([`CleanError::Aborted`]): groups already
    /// swapped stay (each is a valid cleaning), the unfinished one's files are removed.
    pub fn clean(
        &self,
        plan: &CleanPlan,
        cleaner: &mut Cleaner,
        live_producers: &BTreeMap<i64, i64>,
        hooks: &mut dyn CleanHooks,
        now_ms: i64,
    ) -> CleanResult<CleanStats> {
        let result = self.clean_pass(plan, cleaner, live_producers, hooks, now_ms);
        cleaner.restore_buffers();
        result
    }

    fn clean_pass(
        &self,
        plan: &CleanPlan,
        cleaner: &mut Cleaner,
        live_producers: &BTreeMap<i64, i64>,
        hooks: &mut dyn CleanHooks,
        now_ms: i64,
    ) -> CleanResult<CleanStats> {
        let snapshot = self.clean_snapshot(plan)?;
        let mut stats = CleanStats {
            first_dirty_offset: plan.first_dirty_offset,
            end_offset: plan.first_dirty_offset,
            ..CleanStats::default()
        };
        let (mapped_end, complete) = self.build_map(&snapshot, plan, cleaner, hooks, &mut stats)?;
        stats.complete = complete;
        stats.end_offset = if complete {
            plan.first_uncleanable_offset
        } else {
            mapped_end
        };
        stats.map_utilization = cleaner.map.utilization();
        if mapped_end <= plan.first_dirty_offset && !complete {
            return Err(CleanError::Failed(Error::InvalidConfig(format!(
                "the cleaner's offset map ({} keys) cannot hold one batch at offset {}",
                cleaner.map.capacity(),
                plan.first_dirty_offset
            ))));
        }
        // Recovery accepts a cleaned segment's gap only on a log with an entry (or a compacting
        // policy): the entry is durable before the first swap.
        if self.cleaner_offsets.get(&self.key)?.is_none() {
            self.cleaner_offsets
                .set_and_write(&self.key, Some(plan.first_dirty_offset))?;
        }
        self.clean_groups(
            &snapshot,
            cleaner,
            live_producers,
            hooks,
            now_ms,
            &mut stats,
        )?;
        self.finish_pass(&snapshot, stats.end_offset)?;
        Ok(stats)
    }

    /// Recopies and swaps in, group by group, the segments below `stats.end_offset`.
    fn clean_groups(
        &self,
        snapshot: &Snapshot,
        cleaner: &mut Cleaner,
        live_producers: &BTreeMap<i64, i64>,
        hooks: &mut dyn CleanHooks,
        now_ms: i64,
        stats: &mut CleanStats,
    ) -> CleanResult<()> {
        let sources: Vec<Source> = snapshot
            .sources
            .iter()
            .copied()
            .filter(|source| source.base_offset < stats.end_offset)
            .collect();
        stats.segments_before = sources.len();
        // One transaction state for the whole pass (a transaction's data may lie in an earlier
        // group than its marker), fed each group's aborted transactions as it comes.
        let mut txns = CleanedTxns::default();
        for (index, group) in group_by_size(&sources, &snapshot.config).iter().enumerate() {
            let group_base = group.first().map_or(0, |source| source.base_offset);
            let group_end = self.base_after(snapshot, group).min(stats.end_offset);
            txns.add_range(
                self.aborted_transactions(group_base, group_end)?,
                (index > 0).then_some(group_base),
            );
            if !hooks.keep_going() {
                return Err(CleanError::Aborted("the embedder asked to stop"));
            }
            let rules = FilterRules {
                map: &cleaner.map,
                mapped_end: stats.end_offset,
                now_ms,
                delete_retention_ms: snapshot.config.delete_retention_ms,
            };
            let buffers = (
                &mut cleaner.read_buffer,
                &mut cleaner.write_buffer,
                &mut cleaner.scratch,
            );
            let written = self.write_cleaned(
                snapshot,
                group,
                (&rules, &mut txns),
                live_producers,
                buffers,
                hooks,
                stats,
            )?;
            self.swap_group(snapshot, group, self.base_after(snapshot, group), written)?;
            stats.segments_after += 1;
        }
        Ok(())
    }

    /// The base offset of the segment after `group` in the snapshot.
    fn base_after(&self, snapshot: &Snapshot, group: &[Source]) -> i64 {
        let last = group.last().map_or(i64::MIN, |source| source.base_offset);
        snapshot
            .sources
            .iter()
            .find(|source| source.base_offset > last)
            .map_or(snapshot.next_base, |source| source.base_offset)
    }

    /// The log as the pass begins; aborts if it no longer matches `plan`.
    fn clean_snapshot(&self, plan: &CleanPlan) -> CleanResult<Snapshot> {
        let state = self.read_state()?;
        if state.log_start_offset != plan.log_start_offset {
            return Err(CleanError::Aborted("the log start moved since the plan"));
        }
        if !state.config.cleanup_policy.compacts() {
            return Err(CleanError::Aborted("the log's policy no longer compacts"));
        }
        let active_base = state.active()?.base_offset;
        let sources: Vec<Source> = state
            .segments
            .values()
            .filter(|segment| segment.base_offset != active_base)
            .filter(|segment| segment.base_offset < plan.first_uncleanable_offset)
            .map(|segment| Source {
                base_offset: segment.base_offset,
                next_offset: segment.next_offset,
                size_bytes: segment.size_bytes,
                txn_bytes: segment.txn.size_bytes(),
            })
            .collect();
        let last = sources.last().map_or(i64::MIN, |source| source.base_offset);
        let next_base = state
            .segments
            .keys()
            .find(|base| **base > last)
            .copied()
            .unwrap_or(active_base);
        let snapshot = Snapshot {
            config: state.config.clone(),
            truncations: state.truncations,
            log_start_offset: state.log_start_offset,
            sources,
            next_base,
        };
        self.check_unchanged(&state, &snapshot)?;
        Ok(snapshot)
    }

    /// The open `.log` of the sealed segment `source`, if the log still matches the snapshot.
    fn source_file(&self, snapshot: &Snapshot, source: &Source) -> CleanResult<Arc<File>> {
        let state = self.read_state()?;
        self.check_unchanged(&state, snapshot)?;
        match state.segments.get(&source.base_offset) {
            Some(segment) if segment.size_bytes == source.size_bytes => {
                Ok(segment.log_file(self.io.as_ref())?)
            }
            _ => Err(CleanError::Aborted("a segment being cleaned changed")),
        }
    }

    fn check_unchanged(&self, state: &super::LogState, snapshot: &Snapshot) -> CleanResult<()> {
        if state.closed {
            return Err(CleanError::Aborted("the log was closed or deleted"));
        }
        if state.truncations != snapshot.truncations {
            return Err(CleanError::Aborted("the log was truncated"));
        }
        if state.log_start_offset != snapshot.log_start_offset {
            return Err(CleanError::Aborted("the log start moved"));
        }
        Ok(())
    }
}

/// Puts the keys of one batch into `map`; `false` (nothing put) if they may not fit. A marker
/// and a batch of an aborted transaction (`txns` decides, and reads the marker) put nothing: an
/// aborted later value must not make the cleaner drop the committed one before it (Kafka's
/// `buildOffsetMapForSegment`).
fn map_batch(
    map: &mut crate::cleaner::OffsetMap,
    scratch: &mut Vec<u8>,
    txns: &mut CleanedTxns,
    batch: &[u8],
    header: &BatchHeader,
    path: &Path,
    stats: &mut CleanStats,
) -> CleanResult<bool> {
    if header.is_control() {
        txns.on_control_batch(batch, header);
        return Ok(true);
    }
    if txns.on_data_batch(header) {
        stats.map_records_read += u64::from(header.records_count.unsigned_abs());
        return Ok(true);
    }
    let count = usize::try_from(header.records_count).unwrap_or(usize::MAX);
    if !map.has_room_for(count) || !map.can_hold_offset(header.last_offset()) {
        return Ok(false);
    }
    let corrupt =
        |error: skiff_protocol::records::RecordError| Error::corrupt(path, 0, error.to_string());
    for record in batch_records(batch, header, scratch, DECOMPRESSED_BYTES_MAX).map_err(corrupt)? {
        let record = record.map_err(corrupt)?;
        stats.map_records_read += 1;
        if let Some(key) = record.key {
            map.put(key, record.offset);
        }
    }
    Ok(true)
}

/// The buffers a pass reads and writes through: read, write, decompression scratch.
type Buffers<'a> = (&'a mut Vec<u8>, &'a mut Vec<u8>, &'a mut Vec<u8>);

impl Log {
    /// Calls `visit` with each whole batch of the first `size_bytes` of `file`, in order, until
    /// it answers `false`. Reads through `buffer` (grown to a batch larger than it, up to
    /// `batch_max`); reports each read to `hooks` (the throttle counts what the disk read).
    /// Returns the bytes of the batches visited (each batch once, as Kafka's "MB of log processed"
    /// counts them, though a batch cut by a chunk's end is read again with the next chunk).
    #[allow(clippy::too_many_arguments)] // the file, its extent, the buffer and its bound, the callbacks
    fn for_each_batch(
        &self,
        file: &File,
        path: &Path,
        size_bytes: u64,
        buffer: &mut Vec<u8>,
        batch_max: usize,
        hooks: &mut dyn CleanHooks,
        mut visit: impl FnMut(&[u8], &BatchHeader, &mut dyn CleanHooks) -> CleanResult<bool>,
    ) -> CleanResult<u64> {
        let corrupt = |position: u64, reason: String| {
            CleanError::Failed(Error::corrupt(path, position, reason))
        };
        let mut position = 0u64;
        let mut visited_bytes = 0u64;
        while position < size_bytes {
            let want = usize::try_from(size_bytes - position)
                .unwrap_or(usize::MAX)
                .min(buffer.len());
            let chunk = buffer.get_mut(..want).unwrap_or_default();
            self.io
                .read_exact_at(file, chunk, position)
                .map_err(|error| Error::io(path, error))?;
            hooks.on_io(want as u64);
            let mut at = 0usize;
            let mut grow_to = None;
            while let Some(rest) = chunk
                .get(at..)
                .filter(|rest| rest.len() >= BATCH_HEADER_BYTES)
            {
                let header = BatchHeader::parse(rest)
                    .map_err(|error| corrupt(position + at as u64, error.to_string()))?;
                let total = header.total_bytes();
                let Some(batch) = rest.get(..total) else {
                    if at == 0 {
                        grow_to = Some(total);
                    }
                    break;
                };
                if !visit(batch, &header, &mut *hooks)? {
                    return Ok(visited_bytes);
                }
                visited_bytes += total as u64;
                at += total;
            }
            if at == 0 {
                let Some(total) = grow_to.filter(|total| *total <= batch_max) else {
                    return Err(corrupt(
                        position,
                        "a batch the cleaner cannot read whole (torn, or past batch_bytes_max)"
                            .to_owned(),
                    ));
                };
                if position + total as u64 > size_bytes {
                    return Err(corrupt(
                        position,
                        "batch past the end of the segment".to_owned(),
                    ));
                }
                buffer.resize(total, 0);
                continue;
            }
            position += at as u64;
        }
        Ok(visited_bytes)
    }

    /// Maps the keys of the dirty section into the cleaner's map, whole batches only, until the
    /// map is full or the section ends. Returns the offset after the last mapped batch and
    /// whether the whole section was mapped.
    fn build_map(
        &self,
        snapshot: &Snapshot,
        plan: &CleanPlan,
        cleaner: &mut Cleaner,
        hooks: &mut dyn CleanHooks,
        stats: &mut CleanStats,
    ) -> CleanResult<(i64, bool)> {
        let Cleaner {
            map,
            read_buffer,
            scratch,
            ..
        } = cleaner;
        let (start, stop) = (plan.first_dirty_offset, plan.first_uncleanable_offset);
        // A record per offset at most: the pass needs no more slots than the section has offsets.
        map.clear(
            start,
            u64::try_from(stop.saturating_sub(start)).unwrap_or(0),
        );
        let mut mapped_end = start;
        let mut full = false;
        let batch_max = (snapshot.config.batch_bytes_max as usize).max(read_buffer.len());
        // Records of aborted transactions never enter the map (see `map_batch`).
        let (mut txns, mut covered) = (CleanedTxns::default(), start);
        for source in snapshot
            .sources
            .iter()
            .filter(|source| source.next_offset > start)
        {
            if !hooks.keep_going() {
                return Err(CleanError::Aborted("the embedder asked to stop"));
            }
            let upper = self.base_after(snapshot, std::slice::from_ref(source));
            self.read_aborted_up_to(&mut txns, (start, &mut covered), upper.min(stop))?;
            let file = self.source_file(snapshot, source)?;
            let path = fs::segment_file(&self.dir, source.base_offset, LOG_SUFFIX);
            let mut done = false;
            stats.map_bytes_read += self.for_each_batch(
                &file,
                &path,
                source.size_bytes,
                read_buffer,
                batch_max,
                hooks,
                |batch, header, _| {
                    if header.last_offset() < start {
                        return Ok(true);
                    }
                    if header.base_offset >= stop {
                        done = true;
                        return Ok(false);
                    }
                    if !map_batch(map, scratch, &mut txns, batch, header, &path, stats)? {
                        full = true;
                        return Ok(false);
                    }
                    mapped_end = header.next_offset();
                    Ok(true)
                },
            )?;
            if full || done {
                break;
            }
        }
        Ok((mapped_end, !full))
    }

    /// Adds the aborted transactions of `[covered, upper)` to `txns` (from the index) and moves
    /// `covered` to `upper`. The mapping reads the index segment by segment over contiguous
    /// ranges from `start`: a cleaned segment may end before the next begins, and a transaction
    /// whose first batches went with that gap still starts there.
    fn read_aborted_up_to(
        &self,
        txns: &mut CleanedTxns,
        (start, covered): (i64, &mut i64),
        upper: i64,
    ) -> Result<()> {
        if upper > *covered {
            txns.add_range(
                self.aborted_transactions(*covered, upper)?,
                (*covered > start).then_some(*covered),
            );
            *covered = upper;
        }
        Ok(())
    }

    /// Writes the cleaned copy of `group` to `<base>.log.cleaned`, fsynced with its name.
    /// Returns its length and CRC32C.
    #[allow(clippy::too_many_arguments)] // the group, the rules, the producers, the buffers, the hooks, the figures
    fn write_cleaned(
        &self,
        snapshot: &Snapshot,
        group: &[Source],
        (rules, txns): (&FilterRules<'_>, &mut CleanedTxns),
        live_producers: &BTreeMap<i64, i64>,
        (read_buffer, write_buffer, scratch): Buffers<'_>,
        hooks: &mut dyn CleanHooks,
        stats: &mut CleanStats,
    ) -> CleanResult<(u64, u32, u64)> {
        let base = group.first().map_or(0, |source| source.base_offset);
        let mut kept_markers = Vec::new(); // their aborted-transaction entries go with them
        let path = cleaned_path(&self.dir, base);
        let out = self
            .io
            .open(&path, OpenMode::CreateTruncate)
            .map_err(|error| Error::io(&path, error))?;
        let flush_at = read_buffer.len().max(1);
        let mut sink = Sink::new(self.io.as_ref(), &out, &path, write_buffer, flush_at);
        let batch_max = (snapshot.config.batch_bytes_max as usize).max(read_buffer.len());
        let mut counts = FilterCounts::default();
        let result = (|| {
            for source in group {
                if !hooks.keep_going() {
                    return Err(CleanError::Aborted("the embedder asked to stop"));
                }
                let file = self.source_file(snapshot, source)?;
                let source_path = fs::segment_file(&self.dir, source.base_offset, LOG_SUFFIX);
                stats.bytes_read += self.for_each_batch(
                    &file,
                    &source_path,
                    source.size_bytes,
                    read_buffer,
                    batch_max,
                    hooks,
                    |batch, header, hooks| {
                        let rules = (rules, &mut *txns, live_producers);
                        let filtered = clean_batch(batch, header, rules, scratch, &mut counts)
                            .map_err(|error| Error::corrupt(&source_path, 0, error.to_string()))?;
                        if header.is_control() && !matches!(filtered, Filtered::Dropped) {
                            kept_markers.push(header.base_offset);
                        }
                        match filtered {
                            Filtered::Original => sink.push(batch, hooks)?,
                            Filtered::Rebuilt(bytes) => sink.push(&bytes, hooks)?,
                            Filtered::Dropped => {}
                        }
                        Ok(true)
                    },
                )?;
            }
            sink.flush(hooks)?;
            self.io
                .sync(&out, PersistMode::SyncData)
                .map_err(|error| Error::io(&path, error))?;
            let txn_entries = self.write_cleaned_txn_index(group, &kept_markers)?;
            fs::sync_parent(self.io.as_ref(), &path)?;
            Ok((sink.written, sink.crc, txn_entries))
        })();
        add_counts(stats, &counts, sink.written);
        if result.is_err() {
            self.remove_cleaned(base);
        }
        result
    }
}

/// What one batch of a group becomes: the transaction rules' verdict on it (below the mapped end;
/// past it everything is copied as it is, markers included), whether it is a live producer's
/// last batch (`live_producers`: producer id → last offset of its last batch), then the filter.
fn clean_batch(
    batch: &[u8],
    header: &BatchHeader,
    (rules, txns, live_producers): (&FilterRules<'_>, &mut CleanedTxns, &BTreeMap<i64, i64>),
    scratch: &mut Vec<u8>,
    counts: &mut FilterCounts,
) -> std::result::Result<Filtered, skiff_protocol::records::RecordError> {
    let retain_empty = header.producer_id >= 0
        && live_producers.get(&header.producer_id) == Some(&header.last_offset());
    let discardable = header.base_offset < rules.mapped_end
        && if header.is_control() {
            txns.on_control_batch(batch, header)
        } else {
            txns.on_data_batch(header)
        };
    filter_batch(
        batch,
        header,
        rules,
        (retain_empty, discardable),
        scratch,
        counts,
    )
}

/// Adds one group's filter counts and bytes written to the pass's figures.
fn add_counts(stats: &mut CleanStats, counts: &FilterCounts, bytes_written: u64) {
    stats.records_read += counts.records_read;
    stats.records_written += counts.records_kept;
    stats.invalid_records += counts.keyless_dropped;
    stats.tombstones_dropped += counts.tombstones_dropped;
    stats.aborted_records_dropped += counts.aborted_dropped;
    stats.markers_dropped += counts.markers_dropped;
    stats.bytes_written += bytes_written;
}

/// The cleaned file being written: batches gather in `buffer` and go out when it is full.
struct Sink<'a> {
    io: &'a dyn crate::io::FileIo,
    file: &'a File,
    path: &'a Path,
    buffer: &'a mut Vec<u8>,
    flush_at: usize,
    written: u64,
    crc: u32,
}

impl<'a> Sink<'a> {
    fn new(
        io: &'a dyn crate::io::FileIo,
        file: &'a File,
        path: &'a Path,
        buffer: &'a mut Vec<u8>,
        flush_at: usize,
    ) -> Self {
        buffer.clear();
        Self {
            io,
            file,
            path,
            buffer,
            flush_at,
            written: 0,
            crc: 0,
        }
    }

    fn push(&mut self, batch: &[u8], hooks: &mut dyn CleanHooks) -> CleanResult<()> {
        self.buffer.extend_from_slice(batch);
        if self.buffer.len() >= self.flush_at {
            self.flush(hooks)?;
        }
        Ok(())
    }

    fn flush(&mut self, hooks: &mut dyn CleanHooks) -> CleanResult<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        self.io
            .write_all_at(self.file, self.buffer, self.written)
            .map_err(|error| Error::io(self.path, error))?;
        self.crc = crc32c::crc32c_append(self.crc, self.buffer);
        self.written += self.buffer.len() as u64;
        hooks.on_io(self.buffer.len() as u64);
        self.buffer.clear();
        Ok(())
    }
}

impl Log {
    /// Swaps the cleaned copy of `group` in (steps 2–6 of the `cleaner` module doc's protocol),
    /// under the writer lock. Aborts, removing the copy, if the log changed since the snapshot.
    /// A failure once the manifest is written poisons the log (reopening completes the swap).
    fn swap_group(
        &self,
        snapshot: &Snapshot,
        group: &[Source],
        group_end: i64,
        (log_bytes, crc, txn_entries): (u64, u32, u64),
    ) -> CleanResult<()> {
        let base = group.first().map_or(0, |source| source.base_offset);
        let cleaned = cleaned_path(&self.dir, base);
        let writer = self.writer()?;
        let held = match self.hold_group(snapshot, group) {
            Ok(held) => held,
            Err(error) => {
                self.remove_cleaned(base);
                return Err(error);
            }
        };
        let manifest = SwapManifest {
            old_bases: group.iter().map(|source| source.base_offset).collect(),
            log_bytes,
            crc,
            end_offset: group_end,
            txn_entries,
        };
        let manifest_path = self.dir.join(SWAP_MANIFEST_FILE);
        if let Err(error) = fs::write_atomic(
            self.io.as_ref(),
            &manifest_path,
            manifest.to_text().as_bytes(),
        ) {
            let _ = self.io.remove_file(&cleaned);
            return Err(CleanError::Failed(self.poison(error)));
        }
        let result = (|| {
            complete_swap(self.io.as_ref(), &self.dir, &manifest)?;
            let (state, removed) = self.install_cleaned(&manifest, base, group_end)?;
            drop(state);
            self.io
                .remove_file(&manifest_path)
                .map_err(|error| Error::io(&manifest_path, error))?;
            fs::sync_parent(self.io.as_ref(), &manifest_path)?;
            Ok(removed)
        })();
        match result {
            Ok(removed) => {
                drop(writer);
                drop(removed);
                drop(held);
                Ok(())
            }
            Err(error) => Err(CleanError::Failed(self.poison(error))),
        }
    }

    /// Removes a cleaned copy that will not be swapped in (`.log` and `.txnindex`), best effort:
    /// the next open removes what is left.
    fn remove_cleaned(&self, base: i64) {
        let _ = self.io.remove_file(&cleaned_path(&self.dir, base));
        let _ = self.io.remove_file(&cleaned_txn_path(&self.dir, base));
    }

    /// The open `.log` of each old segment of `group`, if the log still matches the snapshot.
    /// Held until the new segment is in the state: a reader of an old segment then gets this
    /// descriptor (the old inode), never the new file under the old name.
    fn hold_group(&self, snapshot: &Snapshot, group: &[Source]) -> CleanResult<Vec<Arc<File>>> {
        let state = self.read_state()?;
        self.check_unchanged(&state, snapshot)?;
        group
            .iter()
            .map(|source| match state.segments.get(&source.base_offset) {
                Some(segment)
                    if segment.size_bytes == source.size_bytes
                        && segment.txn.size_bytes() == source.txn_bytes =>
                {
                    Ok(segment.log_file(self.io.as_ref())?)
                }
                _ => Err(CleanError::Aborted("a segment being cleaned changed")),
            })
            .collect()
    }

    /// Replaces the manifest's old segments by the new one at `base` (indexes rebuilt from its
    /// log) in the state, and raises the recovery point to `group_end`, durably. Returns the
    /// state, still locked, and the old segments for closing after the locks are released.
    fn install_cleaned(
        &self,
        manifest: &SwapManifest,
        base: i64,
        group_end: i64,
    ) -> Result<(
        std::sync::RwLockWriteGuard<'_, super::LogState>,
        Vec<Segment>,
    )> {
        let mut state = self.write_state()?;
        let config = state.config.clone();
        let io = self.io.as_ref();
        let (mut segment, cut) = Segment::recover(
            io,
            &self.dir,
            base,
            &config,
            false,
            base,
            base,
            &self.log_files,
        )?;
        if cut {
            return Err(Error::corrupt(
                &**segment.log_path(),
                segment.size_bytes,
                "the cleaned segment did not scan whole",
            ));
        }
        segment.seal(io)?;
        let removed: Vec<Segment> = manifest
            .old_bases
            .iter()
            .filter_map(|old| state.segments.remove(old))
            .collect();
        state.segments.insert(base, segment);
        // Every offset below the group's end is now in fsynced files.
        state.recovery_point = state.recovery_point.max(group_end);
        self.write_checkpoint(&state)?;
        Ok((state, removed))
    }

    /// After the last group: the log's first dirty offset becomes `end_offset`, unless a
    /// truncation came in between (it lowered the entry itself).
    fn finish_pass(&self, snapshot: &Snapshot, end_offset: i64) -> CleanResult<()> {
        let _writer = self.writer()?;
        let state = self.read_state()?;
        if state.truncations != snapshot.truncations || state.closed {
            return Ok(());
        }
        drop(state);
        self.cleaner_offsets
            .set_and_write(&self.key, Some(end_offset))?;
        Ok(())
    }
}

/// Steps 3 and 4 of a group's swap, also what recovery redoes for a manifest it finds: puts the
/// cleaned `.log` in place of the group's first segment (its indexes removed, to be rebuilt)
/// and removes the group's other segments, each step fsynced. If the cleaned file is gone, the
/// new file is in place only if the first segment's `.log` has the manifest's length and
/// CRC32C; otherwise its rename was lost before anything old was removed, and nothing is done.
/// Returns whether the new segment is in place.
pub(super) fn complete_swap(
    io: &dyn crate::io::FileIo,
    dir: &Path,
    manifest: &SwapManifest,
) -> Result<bool> {
    let Some(base) = manifest.base_offset() else {
        return Ok(false);
    };
    let cleaned = cleaned_path(dir, base);
    let log = fs::segment_file(dir, base, LOG_SUFFIX);
    let exists = |path: &Path| io.open(path, OpenMode::ReadWrite).is_ok();
    if exists(&cleaned) {
        for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
            let path = fs::segment_file(dir, base, suffix);
            match io.remove_file(&path) {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(Error::io(&path, error)),
            }
        }
        // The aborted-transaction index moves before the log: once the new `.log` is in
        // place (the commit recovery recognises), the new `.txnindex` is too.
        place_cleaned_txn_index(io, dir, base, manifest.txn_entries)?;
        io.rename(&cleaned, &log)
            .map_err(|error| Error::io(&log, error))?;
        fs::sync_parent(io, &log)?;
    } else if !file_matches(io, &log, manifest)? {
        return Ok(false);
    }
    for old in manifest.old_bases.iter().skip(1) {
        segment::remove_segment_files(io, dir, *old)?;
    }
    fs::sync_parent(io, &log)?;
    Ok(true)
}

/// Puts the cleaned segment's `.txnindex` in place of the group's first segment's: renamed from
/// `<base>.txnindex.cleaned` when the manifest counts entries (already renamed if that file is
/// gone: this runs again after a crash), removed when it counts none; fsynced.
fn place_cleaned_txn_index(
    io: &dyn crate::io::FileIo,
    dir: &Path,
    base: i64,
    txn_entries: u64,
) -> Result<()> {
    let path = fs::segment_file(dir, base, TXN_INDEX_SUFFIX);
    if txn_entries == 0 {
        crate::txn_index::remove_if_present(io, &path)?;
    } else {
        let cleaned = cleaned_txn_path(dir, base);
        match io.rename(&cleaned, &path) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(Error::io(&path, error)),
        }
    }
    fs::sync_parent(io, &path)
}

/// Whether `path` holds exactly the manifest's length and CRC32C.
fn file_matches(io: &dyn crate::io::FileIo, path: &Path, manifest: &SwapManifest) -> Result<bool> {
    let file = match io.open(path, OpenMode::ReadWrite) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(Error::io(path, error)),
    };
    let len = io.len(&file).map_err(|error| Error::io(path, error))?;
    if len != manifest.log_bytes {
        return Ok(false);
    }
    let mut crc = 0u32;
    let mut buffer = vec![0u8; crate::limits::CLEANER_IO_BUFFER_BYTES_MIN * 16];
    let mut position = 0u64;
    while position < len {
        let step = usize::try_from(len - position)
            .unwrap_or(usize::MAX)
            .min(buffer.len());
        let chunk = buffer.get_mut(..step).unwrap_or_default();
        io.read_exact_at(&file, chunk, position)
            .map_err(|error| Error::io(path, error))?;
        crc = crc32c::crc32c_append(crc, chunk);
        position += step as u64;
    }
    Ok(crc == manifest.crc)
}
