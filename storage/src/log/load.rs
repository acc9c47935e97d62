//! Opening a [`Log`]: the deferred log that answers `Error::Recovering` until it is recovered,
//! and recovery itself (listing the segments, removing what a crash left half-written, scanning
//! the segments after the recovery point, rebuilding the leader-epoch cache). Runs under the
//! writer lock, before the log serves anything; must never guess past a corrupt batch below the
//! flushed point.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crate::cleaner::{CleanerCheckpoints, SwapManifest, SWAP_MANIFEST_FILE};
use crate::config::LogConfig;
use crate::downgrade_guard::DowngradeGuard;
use crate::error::{Error, Result};
use crate::fs::{self, Checkpoint, CLEANED_SUFFIX, TEMP_SUFFIX, TRUNCATING_SUFFIX};
use crate::io::FileIo;
use crate::leader_epoch::EpochCache;
use crate::log_files::LogFiles;
use crate::offset_checkpoint::{LogKey, OffsetCheckpoints};
use crate::producer_snapshot;
use crate::segment::{self, Segment};

use super::{Log, LogState};

/// The base offsets of the segments in `dir`, in order, and the offsets of its producer
/// snapshots. Removes the temporary files a crash
/// left before their rename (the original is still in place), and cleaned segments a cleaning
/// left without committing their swap (called after `finish_swap`).
fn segment_bases(io: &dyn FileIo, dir: &Path) -> Result<(Vec<i64>, BTreeSet<i64>)> {
    let mut bases = Vec::new();
    let mut snapshots = BTreeSet::new();
    for path in io.read_dir(dir).map_err(|error| Error::io(dir, error))? {
        let extension = path.extension().and_then(|e| e.to_str());
        let leftover = [TEMP_SUFFIX, TRUNCATING_SUFFIX, CLEANED_SUFFIX];
        if extension.is_some_and(|extension| leftover.contains(&extension)) {
            io.remove_file(&path)
                .map_err(|error| Error::io(&path, error))?;
        } else if let Some(base) = fs::parse_log_file_name(&path) {
            bases.push(base);
        } else if let Some(offset) = producer_snapshot::parse_name(&path) {
            snapshots.insert(offset);
        }
    }
    bases.sort_unstable();
    Ok((bases, snapshots))
}

/// Recovers the segments at `bases` (not empty) in order: segments wholly below the recovery
/// point, or all with `clean`, are trusted; the rest are scanned. At the first torn point (a
/// cut tail, or a segment that ends before the next begins) every later segment is removed.
/// Flushed data lost is corruption.
#[allow(clippy::too_many_arguments)] // each is one fact recovery needs
fn recover_segments(
    io: &dyn FileIo,
    dir: &Path,
    bases: &[i64],
    config: &LogConfig,
    clean: bool,
    recovery_point: i64,
    log_files: &Arc<LogFiles>,
    compacted: bool,
) -> Result<BTreeMap<i64, Segment>> {
    let mut segments = BTreeMap::new();
    let mut expected_offset = bases.first().copied().unwrap_or(0);
    for (index, base) in bases.iter().enumerate() {
        let next_base = bases.get(index + 1);
        let trusted = clean || next_base.is_some_and(|next| *next <= recovery_point);
        let (segment, cut) = Segment::recover(
            io,
            dir,
            *base,
            config,
            trusted,
            expected_offset,
            recovery_point,
            log_files,
        )?;
        let (mut segment, mut cut) = (segment, cut);
        if !trusted {
            if let Some(position) = segment.reconcile_txn_index(io, recovery_point)? {
                // An ABORT marker lost its entry in the crash: it was never durable (the
                // recovery point stays below such a marker), so it goes like a torn tail.
                segment.truncate_at(io, dir, position, config)?;
                cut = true;
            }
        }
        expected_offset = segment.next_offset;
        // Rolls start the next segment at the log end offset, so a segment that ends
        // before the next one begins has lost its tail (say, truncated at a batch
        // boundary): flushed data is corruption, anything later a torn tail.
        // A cleaned segment ends where its last kept record does: a gap below the recovery
        // point of a compacted log is the cleaner's, not a lost tail (see `crate::cleaner`).
        let cleaned_gap = compacted && next_base.is_some_and(|next| *next <= recovery_point);
        let lost_tail = !cleaned_gap && next_base.is_some_and(|next| segment.next_offset < *next);
        if lost_tail && segment.next_offset < recovery_point {
            return Err(Error::corrupt(
                &**segment.log_path(),
                segment.size_bytes,
                format!(
                    "segment ends at offset {} but the next one starts at {}",
                    segment.next_offset,
                    next_base.copied().unwrap_or_default()
                ),
            ));
        }
        segments.insert(*base, segment);
        if cut || lost_tail {
            // Whatever follows a torn point was written after it: drop it as well.
            for later in bases.get(index + 1..).unwrap_or_default() {
                segment::remove_segment_files(io, dir, *later)?;
            }
            fs::sync_parent(io, &dir.join(fs::CHECKPOINT_FILE))?;
            break;
        }
    }
    Ok(segments)
}

/// Recovers the log in `dir` into its state: with `clean` (the data directory's clean-shutdown
/// marker was present) only index tails are checked; without it every segment from the recovery
/// point on is scanned and a torn tail cut. Its offsets come from the directory's checkpoint, or
/// from the old per-log file when that lacks the log (a directory written before it existed);
/// the recovered offsets are put in the directory's table, and an old file noted for removal.
/// A cleaning's swap the crash interrupted is completed or rolled back first (`finish_swap`).
#[allow(clippy::too_many_arguments)] // each is one fact recovery needs
fn recover_state(
    io: &dyn FileIo,
    dir: &Path,
    config: LogConfig,
    clean: bool,
    log_files: &Arc<LogFiles>,
    checkpoints: &OffsetCheckpoints,
    cleaner_offsets: &CleanerCheckpoints,
    key: &LogKey,
) -> Result<LogState> {
    config.validate()?;
    let swapped_to = finish_swap(io, dir)?;
    let (bases, snapshots) = segment_bases(io, dir)?;
    let first_base = bases.first().copied();
    let (checkpoint, legacy) = starting_offsets(io, dir, checkpoints, key, first_base)?;
    let Checkpoint {
        log_start_offset,
        mut recovery_point,
    } = checkpoint;
    if let Some(end) = swapped_to {
        // The swapped group is fsynced up to its end (the swap's step 5, redone).
        recovery_point = recovery_point.max(end);
    }
    let compacted = config.cleanup_policy.compacts() || cleaner_offsets.get(key)?.is_some();
    let segments = open_segments(
        io,
        dir,
        &bases,
        &config,
        clean,
        (log_start_offset, recovery_point),
        log_files,
        compacted,
    )?;
    let mut state = LogState {
        config,
        segments,
        log_start_offset,
        recovery_point,
        truncations: 0,
        deleted: false,
        unflushed_records: 0,
        last_flush_ms: None,
        closed: false,
        epochs: EpochCache::default(),
        unindexed_aborts: BTreeMap::new(),
        snapshots: BTreeSet::new(),
    };
    state.check_recovered(checkpoints, key, first_base)?;
    state.snapshots = snapshots;
    // Snapshots past the recovered end describe batches the crash took.
    let log_end = state.log_end_offset();
    if state.forget_from(io, dir, log_end)? {
        fs::sync_parent(io, &dir.join(fs::CHECKPOINT_FILE))?;
    }
    state.epochs = recover_epochs(io, dir, &state, clean)?;
    checkpoints.set(key, state.checkpoint())?;
    if legacy {
        checkpoints.note_legacy(key, dir)?;
    }
    if swapped_to.is_some() {
        checkpoints.set_and_write(key, state.checkpoint())?;
    }
    remove_swap_manifest(io, dir)?;
    Ok(state)
}

/// The segments of a log at open: recovered (see `recover_segments`), or one empty segment at
/// the log start if there are none; the last takes appends, the others are sealed.
#[allow(clippy::too_many_arguments)] // each is one fact recovery needs
fn open_segments(
    io: &dyn FileIo,
    dir: &Path,
    bases: &[i64],
    config: &LogConfig,
    clean: bool,
    (log_start_offset, recovery_point): (i64, i64),
    log_files: &Arc<LogFiles>,
    compacted: bool,
) -> Result<BTreeMap<i64, Segment>> {
    let mut segments = if bases.is_empty() {
        if recovery_point > log_start_offset {
            return Err(Error::corrupt(
                dir.join(fs::CHECKPOINT_FILE),
                0,
                format!("no segments, but data up to offset {recovery_point} was flushed"),
            ));
        }
        let segment = Segment::create(io, dir, log_start_offset, config, log_files)?;
        fs::sync_parent(io, &dir.join(fs::CHECKPOINT_FILE))?;
        BTreeMap::from([(log_start_offset, segment)])
    } else {
        let recovered = recover_segments(
            io,
            dir,
            bases,
            config,
            clean,
            recovery_point,
            log_files,
            compacted,
        );
        recovered?
    };
    let last_base = segments.keys().next_back().copied();
    for (base, segment) in segments.iter_mut() {
        if Some(*base) == last_base {
            segment.unseal(io, config)?;
        } else {
            segment.seal(io)?;
        }
    }
    Ok(segments)
}

/// The log start and recovery point recovery starts from: the directory checkpoint's, else the
/// old per-log file's (with `true`: noted for removal), else the first segment's base.
fn starting_offsets(
    io: &dyn FileIo,
    dir: &Path,
    checkpoints: &OffsetCheckpoints,
    key: &LogKey,
    first_base: Option<i64>,
) -> Result<(Checkpoint, bool)> {
    let (checkpoint, legacy) = match checkpoints.get(key)? {
        Some(checkpoint) => (Some(checkpoint), false),
        None => {
            let old = Checkpoint::read(io, dir)?;
            (old, old.is_some())
        }
    };
    let default_start = first_base.unwrap_or(0);
    let checkpoint = checkpoint.unwrap_or(Checkpoint {
        log_start_offset: default_start,
        recovery_point: default_start,
    });
    Ok((checkpoint, legacy))
}

/// Completes a cleaning's swap that a crash interrupted (its manifest is there): see
/// `clean::complete_swap`. Returns the swapped group's end offset if the new segment is in
/// place. The manifest stays until the raised recovery point is durable
/// (`remove_swap_manifest`).
fn finish_swap(io: &dyn FileIo, dir: &Path) -> Result<Option<i64>> {
    let path = dir.join(SWAP_MANIFEST_FILE);
    let bytes = match io.read_small(&path, crate::limits::SWAP_MANIFEST_BYTES_MAX) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(Error::io(&path, error)),
    };
    let manifest =
        SwapManifest::parse(&bytes).map_err(|reason| Error::corrupt(&path, 0, reason))?;
    let in_place = super::clean::complete_swap(io, dir, &manifest)?;
    Ok(in_place.then_some(manifest.end_offset))
}

fn remove_swap_manifest(io: &dyn FileIo, dir: &Path) -> Result<()> {
    let path = dir.join(SWAP_MANIFEST_FILE);
    match io.remove_file(&path) {
        Ok(()) => fs::sync_parent(io, &path),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(Error::io(&path, error)),
    }
}

/// The leader-epoch cache of a recovered log: its checkpoint, trimmed to the recovered log (a torn
/// tail drops the entries that start past the new end; retention those before the start); or,
/// when the checkpoint is missing or corrupt, rebuilt from the batch headers (one header read
/// per batch from the log start: bounded by the log, and only on this path). After a crash
/// (not `clean`), entries missing below the first one are filled in (`fill_below_first_entry`).
/// Written back if it changed.
fn recover_epochs(
    io: &dyn FileIo,
    dir: &Path,
    state: &LogState,
    clean: bool,
) -> Result<EpochCache> {
    let (mut epochs, mut changed) = match EpochCache::read(io, dir) {
        Ok(Some(epochs)) => (epochs, false),
        Ok(None) | Err(Error::Corrupt { .. }) => (scan_epochs(io, state, None)?, true),
        Err(error) => return Err(error),
    };
    if !clean {
        changed |= fill_below_first_entry(io, state, &mut epochs)?;
    }
    // Start first: on a log empty at its start, the entry moved there starts at the end and
    // goes too, whichever of the two checkpoints a crash left.
    changed |= epochs.truncate_from_start(state.log_start_offset);
    changed |= epochs.truncate_from_end(state.log_end_offset());
    if changed {
        epochs.write(io, dir)?;
    }
    Ok(epochs)
}

/// The leader-epoch cache the batches of `state`'s segments imply (those holding offsets at or
/// past the log start, and with `until`, only the batches starting below it).
fn scan_epochs(io: &dyn FileIo, state: &LogState, until: Option<i64>) -> Result<EpochCache> {
    let mut epochs = EpochCache::default();
    for segment in state.segments.values() {
        if segment.next_offset <= state.log_start_offset {
            continue;
        }
        let mut position = 0u64;
        while position < segment.size_bytes {
            let header = segment.read_header(io, position)?;
            if until.is_some_and(|until| header.base_offset >= until) {
                return Ok(epochs);
            }
            epochs.assign(header.partition_leader_epoch, header.base_offset);
            position += header.total_bytes() as u64;
        }
    }
    Ok(epochs)
}

/// Fills in the entries of the batches between the log start and the cache's first entry, if
/// that entry starts above the start. How a crash leaves that: a log start moved in memory only
/// (retention, DeleteRecords: the periodic checkpoint writes it) moved the first entry with it,
/// a later write of the cache (a new epoch) made that durable, and the crash brought the older
/// checkpointed start back. Returns whether the cache changed.
///
/// What it costs: one header read per batch below the first entry, on a recovery after a crash
/// only; in the case above, the batches a DeleteRecords had passed since the last checkpoint.
/// A log whose first batches carry no epoch (written before epochs were stamped) pays the same
/// and finds nothing to add.
fn fill_below_first_entry(
    io: &dyn FileIo,
    state: &LogState,
    epochs: &mut EpochCache,
) -> Result<bool> {
    let Some(first) = epochs.entries().first().copied() else {
        return Ok(false);
    };
    if first.start_offset <= state.log_start_offset {
        return Ok(false);
    }
    let mut filled = scan_epochs(io, state, Some(first.start_offset))?;
    if filled.entries().is_empty() {
        return Ok(false);
    }
    // The batch holding the first entry's start carries its epoch (the log's epochs never
    // fall), so the entries join where the scan stopped.
    for entry in epochs.entries() {
        filled.assign(entry.epoch, entry.start_offset);
    }
    let changed = filled.entries() != epochs.entries();
    *epochs = filled;
    Ok(changed)
}

impl Log {
    /// The log in `dir`, not recovered yet: [`Log::recover_deferred`] does that (at once for a
    /// new log, later for one listed at open), and until then it answers [`Error::Recovering`].
    pub(crate) fn deferred(
        io: Arc<dyn FileIo>,
        dir: &Path,
        key: LogKey,
        config: LogConfig,
        clean: bool,
        log_files: Arc<LogFiles>,
        (checkpoints, cleaner_offsets, downgrade_guard): (
            Arc<OffsetCheckpoints>,
            Arc<CleanerCheckpoints>,
            Arc<DowngradeGuard>,
        ),
    ) -> Result<Self> {
        config.validate()?;
        let placeholder = LogState {
            config,
            segments: BTreeMap::new(),
            log_start_offset: 0,
            recovery_point: 0,
            truncations: 0,
            deleted: false,
            unflushed_records: 0,
            last_flush_ms: None,
            closed: false,
            epochs: EpochCache::default(),
            unindexed_aborts: BTreeMap::new(),
            snapshots: BTreeSet::new(),
        };
        Ok(Self {
            dir: dir.to_owned(),
            topic: key.0.clone(),
            partition: key.1,
            io,
            log_files,
            writer: Mutex::new(()),
            state: RwLock::new(placeholder),
            poisoned: AtomicBool::new(false),
            recovering: AtomicBool::new(true),
            clean,
            checkpoints,
            cleaner_offsets,
            downgrade_guard,
            key,
        })
    }

    /// Recovers a log opened by [`LogDir::open_deferred`] (with the configuration last set);
    /// nothing if it is recovered already or was deleted meanwhile. A failure leaves it
    /// unrecovered, answering [`Error::Recovering`].
    ///
    /// [`LogDir::open_deferred`]: crate::LogDir::open_deferred
    pub fn recover_deferred(&self) -> Result<()> {
        let _writer = self.writer()?;
        if !self.recovering.load(Ordering::SeqCst) {
            return Ok(());
        }
        let mut state = self.state.write().map_err(|_| Error::Poisoned)?;
        if state.closed {
            return Ok(());
        }
        *state = recover_state(
            self.io.as_ref(),
            &self.dir,
            state.config.clone(),
            self.clean,
            &self.log_files,
            &self.checkpoints,
            &self.cleaner_offsets,
            &self.key,
        )?;
        self.recovering.store(false, Ordering::SeqCst);
        Ok(())
    }
}
