//! [`Log`]: one partition — an ordered set of segments with the log start offset and the recovery
//! point. Owns offset assignment (and leader-epoch stamping), or for a follower's append the
//! check that its leader's offsets continue the log, rolling, the flush policy and
//! poisoning, reads, time lookups, truncation (of a tail, or of everything to start afresh at
//! a follower's new start), retention, when the leader-epoch cache
//! (`leader_epoch`) changes and is checkpointed, and deferred recovery (a log listed at open but recovered later, answering
//! `Error::Recovering` meanwhile). Two locks: a writer `Mutex` serializes appends and every other
//! change to segments or offsets; the state `RwLock` is shared by reads and taken exclusively only
//! for short steps, so an append's CRC pass and page-cache copy run while readers go on. Lock
//! order: writer, then state, then the directory's offset checkpoint (`offset_checkpoint`, where
//! the log publishes its start and recovery point: in memory on a flush, written at once only
//! when a start moves or a truncation lowers the recovery point). Must never read a clock (every
//! time is an argument), fsync while holding either lock (except in the recovery of a deferred
//! log, which serves nothing until it is done), or report an offset as flushed before its fsync
//! returned.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use skiff_protocol::records::v2::{self, BatchHeader, BATCH_HEADER_BYTES};

use crate::config::{LogConfig, PersistMode};
use crate::error::{Error, Result};
use crate::fetch::FetchSlice;
use crate::fs::{self, Checkpoint, TEMP_SUFFIX, TRUNCATING_SUFFIX};
use crate::io::FileIo;
use crate::leader_epoch::{EpochCache, EpochEndOffset, EpochEntry};
use crate::limits;
use crate::log_files::LogFiles;
use crate::offset_checkpoint::{LogKey, OffsetCheckpoints};
use crate::segment::{self, Segment};

/// What an append did, for the produce response and the flush decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AppendInfo {
    /// Offset assigned to the first record.
    pub base_offset: i64,
    /// Offset of the last record.
    pub last_offset: i64,
    /// Greatest batch max timestamp among the appended batches (−1 if none had one).
    pub max_timestamp_ms: i64,
    /// Base offset of the batch carrying `max_timestamp_ms`.
    pub offset_of_max_timestamp: i64,
    /// The caller's time passed to `append` (the log-append time, should the topic use it).
    pub log_append_time_ms: i64,
    /// Base offset of the segment written.
    pub segment_base_offset: i64,
    /// Byte position of the first batch in that segment's `.log`.
    pub position: u64,
    /// Bytes appended.
    pub size_bytes: u64,
    /// Records appended.
    pub records_count: u64,
    /// Log start offset after the append.
    pub log_start_offset: i64,
    /// Whether the flush policy fsynced this append before returning.
    pub flushed: bool,
}

/// Answer of [`Log::offset_for_timestamp`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    /// Base offset of the first batch whose max timestamp is ≥ the target (at least the log start
    /// offset). Storage reads batch headers only, so this is the batch holding the first record
    /// at or after the target, not that record's own offset.
    pub offset: i64,
    /// That batch's max timestamp.
    pub timestamp_ms: i64,
}

/// One partition log. `Send + Sync`; every method takes `&self`.
#[derive(Debug)]
pub struct Log {
    dir: PathBuf,
    topic: String,
    partition: i32,
    io: Arc<dyn FileIo>,
    /// The data directory's open descriptors of sealed segments.
    log_files: Arc<LogFiles>,
    /// Held by every change to segments or offsets (appends, rolls, truncation, retention,
    /// configuration, close) for its whole length, before `state`: appends write their bytes
    /// holding only this, so it is what keeps a second writer from the end of the log.
    writer: Mutex<()>,
    state: RwLock<LogState>,
    /// Set by a failed write or fsync; checked before every append and flush.
    poisoned: AtomicBool,
    /// While set, the log is not recovered yet ([`LogDir::open_deferred`]): `state` is a
    /// placeholder holding only the configuration, and every call but [`Log::set_config`] and
    /// [`Log::recover_deferred`] answers [`Error::Recovering`].
    ///
    /// [`LogDir::open_deferred`]: crate::LogDir::open_deferred
    recovering: AtomicBool,
    /// Whether the pending recovery may trust the data (the directory was shut down cleanly).
    clean: bool,
    /// The data directory's offset checkpoint, where this log's log start offset and recovery
    /// point are published (see `offset_checkpoint`).
    checkpoints: Arc<OffsetCheckpoints>,
    /// Topic and partition: the log's name in `checkpoints`.
    key: LogKey,
}

#[derive(Debug)]
struct LogState {
    config: LogConfig,
    /// By base offset; never empty (the last is the active segment).
    segments: BTreeMap<i64, Segment>,
    log_start_offset: i64,
    recovery_point: i64,
    /// Bumped by every truncation: a flush that began before one must not advance the
    /// recovery point over offsets the truncation freed (they may hold new, unsynced batches).
    truncations: u64,
    /// The log was deleted: its entry must not come back into the directory's checkpoint.
    deleted: bool,
    unflushed_records: u64,
    last_flush_ms: Option<i64>,
    closed: bool,
    /// The leader-epoch cache; its checkpoint is written whenever it changes, before the batches
    /// that changed it (so recovery only ever trims it).
    epochs: EpochCache,
}

impl LogState {
    fn active(&self) -> Result<&Segment> {
        self.segments.values().next_back().ok_or(Error::Closed)
    }

    fn active_mut(&mut self) -> Result<&mut Segment> {
        self.segments.values_mut().next_back().ok_or(Error::Closed)
    }

    fn log_end_offset(&self) -> i64 {
        self.segments
            .values()
            .next_back()
            .map_or(self.log_start_offset, |segment| segment.next_offset)
    }

    /// The offsets the directory's checkpoint should hold for this log.
    fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            log_start_offset: self.log_start_offset,
            recovery_point: self.recovery_point,
        }
    }

    /// The last step of recovery: the log must reach the recovery point, and its start offset is
    /// brought within what the segments hold (`first_base`: the first segment found on disk).
    fn check_recovered(
        &mut self,
        checkpoints: &OffsetCheckpoints,
        key: &LogKey,
        first_base: Option<i64>,
    ) -> Result<()> {
        let (log_start_offset, recovery_point) = (self.log_start_offset, self.recovery_point);
        let log_end = self.log_end_offset();
        if recovery_point > log_end {
            let active = self.active()?;
            return Err(Error::corrupt(
                &**active.log_path(),
                active.size_bytes,
                format!("log ends at offset {log_end}, below the recovery point {recovery_point}"),
            ));
        }
        let first = first_base.unwrap_or(log_start_offset);
        self.log_start_offset = log_start_offset.max(first).min(log_end);
        if self.log_start_offset < log_start_offset {
            // Recovery cut the log below the checkpointed start (unflushed batches lost): the
            // lower start must be durable before new appends reuse those offsets, or a later
            // crash would bring the old start back and hide them.
            checkpoints.set_and_write(key, self.checkpoint())?;
        }
        Ok(())
    }
}

/// Counts of one validated append input.
struct InputSummary {
    records_count: u64,
    offsets_count: i64,
}

/// Checks that `batches` is a sequence of whole, valid v2 producer batches no larger than
/// `batch_bytes_max` each; nothing is modified.
fn check_input(batches: &[u8], batch_bytes_max: u32) -> Result<InputSummary> {
    if batches.is_empty() {
        return Err(Error::InvalidBatchLayout("no batch"));
    }
    let mut summary = InputSummary {
        records_count: 0,
        offsets_count: 0,
    };
    let mut at = 0usize;
    while let Some(rest) = batches.get(at..).filter(|rest| !rest.is_empty()) {
        if rest.len() < BATCH_HEADER_BYTES {
            return Err(Error::InvalidBatchLayout(
                "trailing bytes shorter than a batch header",
            ));
        }
        let header = BatchHeader::parse(rest)?;
        let size_bytes = header.total_bytes();
        if size_bytes > batch_bytes_max as usize {
            return Err(Error::BatchTooLarge {
                size_bytes: size_bytes as u64,
                limit_bytes: u64::from(batch_bytes_max),
            });
        }
        let batch = rest
            .get(..size_bytes)
            .ok_or(Error::InvalidBatchLayout("batch extends past the input"))?;
        v2::validate(batch)?;
        if header.records_count < 1 {
            return Err(Error::InvalidBatchLayout("batch has no records"));
        }
        if i64::from(header.last_offset_delta) != i64::from(header.records_count) - 1 {
            return Err(Error::InvalidBatchLayout(
                "last offset delta does not match the record count",
            ));
        }
        summary.records_count += u64::from(header.records_count.unsigned_abs());
        summary.offsets_count += i64::from(header.last_offset_delta) + 1;
        at += size_bytes;
    }
    Ok(summary)
}

/// Releases both locks, then closes `removed` (segments whose files are unlinked).
///
/// Why in this order: closing the last handle on an unlinked file makes the kernel free its page
/// cache there and then, milliseconds for a full segment (a fifth of the append benchmark's time
/// went to it), and neither readers nor appends need to wait for that.
fn close_after_unlock(
    state: RwLockWriteGuard<'_, LogState>,
    writer: MutexGuard<'_, ()>,
    removed: Vec<Segment>,
) {
    drop(state);
    drop(writer);
    drop(removed);
}

/// Offsets given to one append's batches.
struct Assigned {
    base_offset: i64,
    /// Offset after the last record.
    next_offset: i64,
    max_timestamp_ms: i64,
    offset_of_max_timestamp: i64,
}

/// How an append gives its batches offsets and leader epochs: the one difference between a
/// leader's (or a single node's) append and a follower's, which otherwise share every step
/// (checks, rolls, the write, the flush policy, poisoning).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Offsets {
    /// Producer batches: the log assigns offsets from its end by rewriting each base offset;
    /// `leader_epoch`, if given, is stamped on every batch, otherwise each keeps its own.
    Assign { leader_epoch: Option<i32> },
    /// A follower's copy of its leader's batches: offsets and epochs stay as the leader
    /// stamped them, and must continue this log ([`check_kept`], before anything changes).
    Keep,
}

/// Checks that `batches` (checked by [`check_input`]) continue a log ending at `log_end` whose
/// latest leader epoch is `latest_epoch`, as a follower's append must: the first batch starts at
/// `log_end` and each next one right after the last offset of the one before (Skiff has no
/// compaction, so a leader's log has no gaps), and no epoch ≥ 0 is below the latest before it.
/// Batches without an epoch (negative: written before epochs were stamped) are accepted and
/// left out of the epoch order, as the cache leaves them out.
///
/// Why refuse a lower epoch instead of doing what Kafka's cache does (drop the higher entries
/// with a warning): a leader never sends one to a follower that truncated as the protocol says
/// (to the leader's end of its latest epoch), so a lower epoch means the logs diverged, and
/// truncation ([`Log::truncate_to`]), not an append, must resolve that.
fn check_kept(batches: &[u8], log_end: i64, latest_epoch: Option<i32>) -> Result<()> {
    let mut expected = log_end;
    let mut latest = latest_epoch;
    let mut at = 0usize;
    while let Some(rest) = batches.get(at..).filter(|rest| !rest.is_empty()) {
        let header = BatchHeader::parse(rest)?;
        if header.base_offset != expected {
            return Err(Error::UnexpectedAppendOffset {
                expected,
                found: header.base_offset,
            });
        }
        let epoch = header.partition_leader_epoch;
        if epoch >= 0 {
            if let Some(latest) = latest.filter(|latest| epoch < *latest) {
                return Err(Error::EpochBelowLatest { epoch, latest });
            }
            latest = Some(epoch);
        }
        expected = expected
            .checked_add(i64::from(header.last_offset_delta) + 1)
            .ok_or(Error::InvalidBatchLayout("offsets pass i64::MAX"))?;
        at += header.total_bytes();
    }
    Ok(())
}

/// Gives the batches in `batches` (checked by [`check_input`], and by [`check_kept`] for
/// [`Offsets::Keep`]) their offsets from `base_offset` on as `offsets` says, and records each
/// batch's epoch in `epochs`. Returns whether `epochs` changed.
fn assign_offsets(
    batches: &mut [u8],
    base_offset: i64,
    offsets: Offsets,
    epochs: &mut EpochCache,
) -> Result<(Assigned, bool)> {
    let mut epochs_changed = false;
    let mut assigned = Assigned {
        base_offset,
        next_offset: base_offset,
        max_timestamp_ms: -1,
        offset_of_max_timestamp: base_offset,
    };
    let mut at = 0usize;
    while let Some(rest) = batches.get_mut(at..).filter(|rest| !rest.is_empty()) {
        let header = BatchHeader::parse(rest)?;
        let epoch = match offsets {
            Offsets::Assign { leader_epoch } => {
                // Both fields lie outside the CRC: nothing is re-encoded.
                v2::set_base_offset(rest, assigned.next_offset)?;
                if let Some(epoch) = leader_epoch {
                    v2::set_partition_leader_epoch(rest, epoch)?;
                }
                leader_epoch.unwrap_or(header.partition_leader_epoch)
            }
            Offsets::Keep => {
                debug_assert_eq!(header.base_offset, assigned.next_offset, "check_kept ran");
                header.partition_leader_epoch
            }
        };
        epochs_changed |= epochs.assign(epoch, assigned.next_offset);
        if header.max_timestamp > assigned.max_timestamp_ms {
            assigned.max_timestamp_ms = header.max_timestamp;
            assigned.offset_of_max_timestamp = assigned.next_offset;
        }
        assigned.next_offset += i64::from(header.last_offset_delta) + 1;
        at += header.total_bytes();
    }
    Ok((assigned, epochs_changed))
}

/// The base offsets of the segments in `dir`, in order. Removes the temporary files a crash
/// left before their rename (the original is still in place).
fn segment_bases(io: &dyn FileIo, dir: &Path) -> Result<Vec<i64>> {
    let mut bases = Vec::new();
    for path in io.read_dir(dir).map_err(|error| Error::io(dir, error))? {
        let extension = path.extension().and_then(|e| e.to_str());
        if extension == Some(TEMP_SUFFIX) || extension == Some(TRUNCATING_SUFFIX) {
            io.remove_file(&path)
                .map_err(|error| Error::io(&path, error))?;
        } else if let Some(base) = fs::parse_log_file_name(&path) {
            bases.push(base);
        }
    }
    bases.sort_unstable();
    Ok(bases)
}

/// Recovers the segments at `bases` (not empty) in order: segments wholly below the recovery
/// point, or all with `clean`, are trusted; the rest are scanned. At the first torn point (a
/// cut tail, or a segment that ends before the next begins) every later segment is removed.
/// Flushed data lost is corruption.
fn recover_segments(
    io: &dyn FileIo,
    dir: &Path,
    bases: &[i64],
    config: &LogConfig,
    clean: bool,
    recovery_point: i64,
    log_files: &Arc<LogFiles>,
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
        expected_offset = segment.next_offset;
        // Rolls start the next segment at the log end offset, so a segment that ends
        // before the next one begins has lost its tail (say, truncated at a batch
        // boundary): flushed data is corruption, anything later a torn tail.
        let lost_tail = next_base.is_some_and(|next| segment.next_offset < *next);
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
fn recover_state(
    io: &dyn FileIo,
    dir: &Path,
    config: LogConfig,
    clean: bool,
    log_files: &Arc<LogFiles>,
    checkpoints: &OffsetCheckpoints,
    key: &LogKey,
) -> Result<LogState> {
    config.validate()?;
    let bases = segment_bases(io, dir)?;
    let (checkpoint, legacy) = match checkpoints.get(key)? {
        Some(checkpoint) => (Some(checkpoint), false),
        None => {
            let old = Checkpoint::read(io, dir)?;
            (old, old.is_some())
        }
    };
    let first_base = bases.first().copied();
    let default_start = first_base.unwrap_or(0);
    let Checkpoint {
        log_start_offset,
        recovery_point,
    } = checkpoint.unwrap_or(Checkpoint {
        log_start_offset: default_start,
        recovery_point: default_start,
    });
    let mut segments = if bases.is_empty() {
        if recovery_point > log_start_offset {
            return Err(Error::corrupt(
                dir.join(fs::CHECKPOINT_FILE),
                0,
                format!("no segments, but data up to offset {recovery_point} was flushed"),
            ));
        }
        let segment = Segment::create(io, dir, log_start_offset, &config, log_files)?;
        fs::sync_parent(io, &dir.join(fs::CHECKPOINT_FILE))?;
        BTreeMap::from([(log_start_offset, segment)])
    } else {
        recover_segments(io, dir, &bases, &config, clean, recovery_point, log_files)?
    };
    let last_base = segments.keys().next_back().copied();
    for (base, segment) in segments.iter_mut() {
        if Some(*base) == last_base {
            segment.unseal(io, &config)?;
        } else {
            segment.seal(io)?;
        }
    }
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
    };
    state.check_recovered(checkpoints, key, first_base)?;
    state.epochs = recover_epochs(io, dir, &state)?;
    checkpoints.set(key, state.checkpoint())?;
    if legacy {
        checkpoints.note_legacy(key, dir)?;
    }
    Ok(state)
}

/// The leader-epoch cache of a recovered log: its checkpoint, trimmed to the recovered log (a torn
/// tail drops the entries that start past the new end; retention those before the start); or,
/// when the checkpoint is missing or corrupt, rebuilt from the batch headers (one header read
/// per batch from the log start: bounded by the log, and only on this path). Written back if it
/// changed.
fn recover_epochs(io: &dyn FileIo, dir: &Path, state: &LogState) -> Result<EpochCache> {
    let (mut epochs, mut changed) = match EpochCache::read(io, dir) {
        Ok(Some(epochs)) => (epochs, false),
        Ok(None) | Err(Error::Corrupt { .. }) => (scan_epochs(io, state)?, true),
        Err(error) => return Err(error),
    };
    // Start first: on a log empty at its start, the entry moved there starts at the end and
    // goes too, whichever of the two checkpoints a crash left.
    changed |= epochs.truncate_from_start(state.log_start_offset);
    changed |= epochs.truncate_from_end(state.log_end_offset());
    if changed {
        epochs.write(io, dir)?;
    }
    Ok(epochs)
}

/// The leader-epoch cache the batches of `state`'s segments imply.
fn scan_epochs(io: &dyn FileIo, state: &LogState) -> Result<EpochCache> {
    let mut epochs = EpochCache::default();
    for segment in state.segments.values() {
        if segment.next_offset <= state.log_start_offset {
            continue;
        }
        let mut position = 0u64;
        while position < segment.size_bytes {
            let header = segment.read_header(io, position)?;
            epochs.assign(header.partition_leader_epoch, header.base_offset);
            position += header.total_bytes() as u64;
        }
    }
    Ok(epochs)
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
        checkpoints: Arc<OffsetCheckpoints>,
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
            &self.key,
        )?;
        self.recovering.store(false, Ordering::SeqCst);
        Ok(())
    }

    /// Whether the log still waits for [`Log::recover_deferred`].
    pub fn is_recovering(&self) -> bool {
        self.recovering.load(Ordering::SeqCst)
    }

    fn recovering_error(&self) -> Error {
        Error::Recovering {
            topic: self.topic.clone(),
            partition: self.partition,
        }
    }

    fn read_state(&self) -> Result<RwLockReadGuard<'_, LogState>> {
        if self.is_recovering() {
            return Err(self.recovering_error());
        }
        // A panic while holding the lock leaves the state unknown: treat it like a failed write.
        self.state.read().map_err(|_| Error::Poisoned)
    }

    fn write_state(&self) -> Result<RwLockWriteGuard<'_, LogState>> {
        if self.is_recovering() {
            return Err(self.recovering_error());
        }
        self.state.write().map_err(|_| Error::Poisoned)
    }

    fn writer(&self) -> Result<MutexGuard<'_, ()>> {
        // As for the state lock: a panic mid-change leaves the log's files unknown.
        self.writer.lock().map_err(|_| Error::Poisoned)
    }

    fn check_writable(&self, state: &LogState) -> Result<()> {
        if self.poisoned.load(Ordering::SeqCst) {
            return Err(Error::Poisoned);
        }
        if state.closed {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// Writes the directory's offset checkpoint with this log's current offsets, durably, before
    /// returning: for a change the next steps rely on (see `OffsetCheckpoints::set_and_write`).
    fn write_checkpoint(&self, state: &LogState) -> Result<()> {
        self.checkpoints
            .set_and_write(&self.key, state.checkpoint())
    }

    /// Marks the log poisoned and passes the error on.
    fn poison(&self, error: Error) -> Error {
        self.poisoned.store(true, Ordering::SeqCst);
        error
    }

    /// Topic of this partition.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Partition number.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// The configuration in force.
    pub fn config(&self) -> Result<LogConfig> {
        Ok(self.read_state()?.config.clone())
    }

    /// Replaces the configuration (validated first). Takes effect from the next append or call.
    pub fn set_config(&self, config: LogConfig) -> Result<()> {
        config.validate()?;
        let _writer = self.writer()?;
        // Also while recovering: the placeholder keeps it for the recovery.
        let mut state = self.state.write().map_err(|_| Error::Poisoned)?;
        for segment in state.segments.values_mut() {
            segment.index_interval_bytes = config.index_interval_bytes;
        }
        state.config = config;
        Ok(())
    }

    /// Offset the next appended record will get.
    pub fn log_end_offset(&self) -> Result<i64> {
        Ok(self.read_state()?.log_end_offset())
    }

    /// First offset still in the log.
    pub fn log_start_offset(&self) -> Result<i64> {
        Ok(self.read_state()?.log_start_offset)
    }

    /// Every offset below this has been made durable by a flush (the recovery point).
    pub fn flushed_offset(&self) -> Result<i64> {
        Ok(self.read_state()?.recovery_point)
    }

    /// Bytes of all segments.
    pub fn size_bytes(&self) -> Result<u64> {
        Ok(self
            .read_state()?
            .segments
            .values()
            .map(|s| s.size_bytes)
            .sum())
    }

    /// Number of segments (at least one).
    pub fn segment_count(&self) -> Result<usize> {
        Ok(self.read_state()?.segments.len())
    }

    /// Whether an earlier write or fsync failed (every append now fails with `Error::Poisoned`).
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::SeqCst)
    }

    /// Appends one or more v2 batches as a produce request carries them.
    ///
    /// Each batch is checked (layout, magic, CRC32C, record count against the last offset delta,
    /// size against `batch_bytes_max`) before anything is written; then offsets are assigned by
    /// rewriting each base offset in `batches` (outside the CRC, so nothing is re-encoded), the
    /// bytes are written with one positioned write, and the indexes updated. `now_ms` is the
    /// caller's clock: the log-append time, the base of `segment_ms` rolls and of `flush_ms`.
    /// If the flush policy says so, the append is fsynced before this returns
    /// (`AppendInfo::flushed`). A write or fsync failure poisons the log.
    ///
    /// The batches keep the partition leader epoch they carry; each epoch ≥ 0 not seen before
    /// enters the leader-epoch cache. A leader appends with [`Log::append_with_epoch`] instead,
    /// and a follower with [`Log::append_replicated`] (which keeps the offsets as well).
    pub fn append(&self, batches: &mut [u8], now_ms: i64) -> Result<AppendInfo> {
        self.append_with(batches, Offsets::Assign { leader_epoch: None }, now_ms)
    }

    /// A follower's append of batches copied from its leader (Kafka's `appendAsFollower`): the
    /// checks of [`Log::append`] (layout, magic, CRC32C, counts, `batch_bytes_max`), but the
    /// offsets are not assigned. The first batch must start at the log end offset and each next
    /// one right after the last offset of the one before, or the append is refused with
    /// [`Error::UnexpectedAppendOffset`]. Leader epochs stay as stamped; each epoch ≥ 0 not seen
    /// before enters the leader-epoch cache (its checkpoint durable before the batches are
    /// written), and an epoch below the latest the log holds is refused with
    /// [`Error::EpochBelowLatest`] (the logs diverged: truncate first). A refused append writes
    /// nothing, not even a roll. Rolls, the flush policy and poisoning are those of `append`.
    ///
    /// `batches` is not modified, so the follower's segments hold exactly the leader's bytes.
    pub fn append_replicated(&self, batches: &mut [u8], now_ms: i64) -> Result<AppendInfo> {
        self.append_with(batches, Offsets::Keep, now_ms)
    }

    /// [`Log::append`] as a leader does it: every batch is stamped with `leader_epoch` (the
    /// partition leader epoch field, outside the CRC, rewritten in place like the base offset)
    /// and the leader-epoch cache records where that epoch starts if it is new. The cache's
    /// checkpoint is made durable before the batches are written.
    pub fn append_with_epoch(
        &self,
        batches: &mut [u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo> {
        if leader_epoch < 0 {
            return Err(Error::InvalidBatchLayout("negative leader epoch"));
        }
        let offsets = Offsets::Assign {
            leader_epoch: Some(leader_epoch),
        };
        self.append_with(batches, offsets, now_ms)
    }

    fn append_with(&self, batches: &mut [u8], offsets: Offsets, now_ms: i64) -> Result<AppendInfo> {
        // Three steps, so that readers wait only for the short ones: check the input (the CRC
        // pass, ~1 µs per 16 KiB) holding only the writer lock; assign offsets and take the end
        // of the log under the state lock; write (the page-cache copy, most of an append's cost)
        // holding only the writer lock; then publish the batches under the state lock. Until
        // then the bytes lie past `size_bytes`, where no reader looks.
        let writer = self.writer()?;
        let batch_bytes_max = {
            let state = self.read_state()?;
            self.check_writable(&state)?;
            state.config.batch_bytes_max
        };
        let summary = check_input(batches, batch_bytes_max)?;
        let size_bytes = batches.len() as u64;
        let (target, segment_base_offset, assigned, new_epochs) = {
            let mut state = self.write_state()?;
            self.check_writable(&state)?;
            let log_end = state.log_end_offset();
            if offsets == Offsets::Keep {
                // Before the roll: a refused append writes nothing.
                check_kept(batches, log_end, state.epochs.latest_epoch())?;
            }
            self.maybe_roll(&mut state, now_ms, size_bytes, summary.offsets_count)?;
            let active = state.active()?;
            if active.size_bytes + size_bytes > limits::SEGMENT_BYTES_MAX {
                return Err(Error::BatchTooLarge {
                    size_bytes,
                    limit_bytes: limits::SEGMENT_BYTES_MAX - active.size_bytes,
                });
            }
            let (target, segment_base_offset) =
                (active.append_target(self.io.as_ref())?, active.base_offset);
            let (assigned, epochs_changed) =
                assign_offsets(batches, log_end, offsets, &mut state.epochs)?;
            let new_epochs = epochs_changed.then(|| state.epochs.clone());
            (target, segment_base_offset, assigned, new_epochs)
        };
        if let Some(epochs) = new_epochs {
            // Once per leader epoch, under the writer lock only: the checkpoint names the new
            // epoch before any batch of it is on disk, so recovery only ever trims it.
            epochs
                .write(self.io.as_ref(), &self.dir)
                .map_err(|error| self.poison(error))?;
        }
        target
            .write(self.io.as_ref(), batches)
            .map_err(|error| self.poison(error))?;
        let (info, flush_due, persist_mode) = {
            let mut state = self.write_state()?;
            let tracked = state
                .segments
                .get_mut(&segment_base_offset)
                .is_some_and(|segment| segment.track_appended(batches, target.position, now_ms));
            if !tracked {
                // Only a change behind the writer lock's back could move the end: the state no
                // longer says where the log ends.
                return Err(self.poison(Error::Poisoned));
            }
            let flush_due = flush_due(&state, summary.records_count, now_ms);
            state.unflushed_records += summary.records_count;
            state.last_flush_ms.get_or_insert(now_ms);
            if flush_due {
                state.unflushed_records = 0;
                state.last_flush_ms = Some(now_ms);
            }
            let info = AppendInfo {
                base_offset: assigned.base_offset,
                last_offset: assigned.next_offset - 1,
                max_timestamp_ms: assigned.max_timestamp_ms,
                offset_of_max_timestamp: assigned.offset_of_max_timestamp,
                log_append_time_ms: now_ms,
                segment_base_offset,
                position: target.position,
                size_bytes,
                records_count: summary.records_count,
                log_start_offset: state.log_start_offset,
                flushed: false,
            };
            (info, flush_due, state.config.persist_mode)
        };
        // The fsync runs without the writer lock, so other appends go on meanwhile.
        drop(target);
        drop(writer);
        if flush_due {
            self.flush()?;
            // Under `PersistMode::Buffer` the flush synced nothing: the append is not durable.
            return Ok(AppendInfo {
                flushed: persist_mode != PersistMode::Buffer,
                ..info
            });
        }
        Ok(info)
    }

    /// Rolls before an append of `size_bytes` bytes and `offsets_count` offsets if the active
    /// segment is non-empty and too full, too old, out of index room, or would overflow its
    /// 4-byte relative offsets.
    fn maybe_roll(
        &self,
        state: &mut LogState,
        now_ms: i64,
        size_bytes: u64,
        offsets_count: i64,
    ) -> Result<bool> {
        if roll_due(state, now_ms, size_bytes, offsets_count)? {
            self.roll(state)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Whether an append of `size_bytes` bytes holding `records_count` records at `now_ms` would,
    /// as the log stands, block on more than a page-cache copy: roll a segment (file creation and
    /// a directory fsync) or fsync under the flush policy. A hint for callers on an async runtime
    /// that run such appends on a blocking thread: a concurrent append can change the answer.
    pub fn append_may_block(
        &self,
        size_bytes: u64,
        records_count: u64,
        now_ms: i64,
    ) -> Result<bool> {
        let state = self.read_state()?;
        let offsets_count = i64::try_from(records_count).unwrap_or(i64::MAX);
        Ok(roll_due(&state, now_ms, size_bytes, offsets_count)?
            || flush_due(&state, records_count, now_ms))
    }

    /// Seals the active segment and starts a new one at the log end offset.
    fn roll(&self, state: &mut LogState) -> Result<()> {
        let io = self.io.as_ref();
        let base_offset = state.log_end_offset();
        let config = state.config.clone();
        let result = (|| {
            state.active_mut()?.seal(io)?;
            let segment = Segment::create(io, &self.dir, base_offset, &config, &self.log_files)?;
            // The new file's name must survive a crash before any of its data is acknowledged.
            fs::sync_parent(io, &self.dir.join(fs::CHECKPOINT_FILE))?;
            state.segments.insert(base_offset, segment);
            // No checkpoint here (there was one per roll, a write and three fsyncs): the
            // embedder's periodic `LogDir::checkpoint_recovery_points` bounds what recovery
            // scans after a crash, as Kafka's `log.flush.offset.checkpoint.interval.ms` does.
            Ok(())
        })();
        result.map_err(|error| self.poison(error))
    }

    /// Rolls the active segment if its first append is `segment_ms` older than `now_ms`. Returns
    /// whether it rolled.
    pub fn roll_if_needed(&self, now_ms: i64) -> Result<bool> {
        let _writer = self.writer()?;
        let mut state = self.write_state()?;
        self.check_writable(&state)?;
        let active = state.active()?;
        let due = !active.is_empty()
            && active
                .first_append_ms
                .is_some_and(|first_ms| now_ms.saturating_sub(first_ms) >= state.config.segment_ms);
        if due {
            self.roll(&mut state)?;
        }
        Ok(due)
    }

    /// Makes everything appended so far durable as `persist_mode` says, and advances the
    /// recovery point. The fsyncs run without the log's lock, so reads and appends continue.
    /// With `PersistMode::Buffer` nothing is synced and the recovery point stays.
    ///
    /// Without a flush policy (the default, as Kafka's), the recovery point moves only when this
    /// is called: an embedder should call [`crate::LogDir::checkpoint_recovery_points`]
    /// periodically (Kafka flushes and checkpoints every minute), which flushes the logs with
    /// unsynced data and publishes their recovery points, so that recovery after a crash scans
    /// little. A flush itself only updates the directory's table (no write: the next checkpoint
    /// publishes it).
    pub fn flush(&self) -> Result<()> {
        self.flush_with(None)
    }

    /// Like [`Log::flush`], but syncs data (`PersistMode::SyncData`) whatever the log's
    /// `persist_mode`: for an embedder whose own acknowledgement promises durability (the
    /// broker's offsets commits) on a log whose other writers need no fsync.
    pub fn sync(&self) -> Result<()> {
        self.flush_with(Some(PersistMode::SyncData))
    }

    fn flush_with(&self, mode_override: Option<PersistMode>) -> Result<()> {
        let (files, end_offset, mode, truncations) = {
            let state = self.read_state()?;
            if self.poisoned.load(Ordering::SeqCst) {
                return Err(Error::Poisoned);
            }
            let mode = mode_override.unwrap_or(state.config.persist_mode);
            if mode == PersistMode::Buffer {
                return Ok(());
            }
            let recovery_point = state.recovery_point;
            let files = state
                .segments
                .values()
                .filter(|segment| segment.next_offset > recovery_point)
                .map(|segment| {
                    Ok((
                        segment.log_file(self.io.as_ref())?,
                        Arc::clone(segment.log_path()),
                    ))
                })
                .collect::<Result<Vec<_>>>()?;
            (files, state.log_end_offset(), mode, state.truncations)
        };
        for (file, path) in &files {
            self.io
                .sync(file, mode)
                .map_err(|error| self.poison(Error::io(&**path, error)))?;
        }
        self.advance_recovery_point(end_offset, truncations)
    }

    /// Raises the recovery point to `end_offset` (capped at the log end), which the caller has
    /// made durable, unless a truncation came in between (`truncations` is the count the caller
    /// saw when it took `end_offset`): the freed offsets may hold new batches nobody synced.
    /// Published to the directory's table, not written: the next checkpoint writes it.
    fn advance_recovery_point(&self, end_offset: i64, truncations: u64) -> Result<()> {
        let mut state = self.write_state()?;
        if state.truncations != truncations {
            return Ok(());
        }
        let log_end = state.log_end_offset();
        state.recovery_point = state.recovery_point.max(end_offset.min(log_end));
        if !state.deleted {
            self.checkpoints.set(&self.key, state.checkpoint())?;
        }
        Ok(())
    }

    /// Where the log ends and its truncation count, if it holds data not yet made durable (its
    /// recovery point is below its end); `None` if not, or if it is not recovered yet (then it
    /// has written nothing). For [`crate::LogDir`]'s checkpoint, which syncs such logs.
    pub(crate) fn unflushed_end(&self) -> Result<Option<(i64, u64)>> {
        if self.is_recovering() {
            return Ok(None);
        }
        let state = self.read_state()?;
        if self.poisoned.load(Ordering::SeqCst) {
            return Err(Error::Poisoned);
        }
        let end = state.log_end_offset();
        Ok((state.recovery_point < end).then_some((end, state.truncations)))
    }

    /// After a file-system sync that began after [`Log::unflushed_end`] returned `end_offset` and
    /// `truncations`: everything up to `end_offset` is durable.
    pub(crate) fn mark_synced(&self, end_offset: i64, truncations: u64) -> Result<()> {
        self.advance_recovery_point(end_offset, truncations)
    }

    /// Reads from the batch holding `fetch_offset`: up to `max_bytes` of that segment (possibly
    /// ending inside a batch, as Kafka's fetch does), or the whole first batch if it is larger and
    /// `min_one_batch` is set. A fetch at the log end offset returns an empty slice; outside
    /// `[log_start, log_end]` is `Error::OffsetOutOfRange`. A slice never spans two segments.
    pub fn read(
        &self,
        fetch_offset: i64,
        max_bytes: u64,
        min_one_batch: bool,
    ) -> Result<FetchSlice> {
        self.read_below(fetch_offset, i64::MAX, max_bytes, min_one_batch)
    }

    /// [`Log::read`] that stops before the batch holding `max_offset`: a consumer's read, capped
    /// at the high watermark (Kafka's `maxOffset`, translated to the position of the batch that
    /// holds it). Only whole batches below `max_offset` are returned, `min_one_batch` included;
    /// a fetch at or past `max_offset` (but within the log) returns an empty slice. A replica's
    /// high watermark is always a batch boundary, so nothing below it is held back.
    pub fn read_below(
        &self,
        fetch_offset: i64,
        max_offset: i64,
        max_bytes: u64,
        min_one_batch: bool,
    ) -> Result<FetchSlice> {
        let state = self.read_state()?;
        let log_end = state.log_end_offset();
        if fetch_offset < state.log_start_offset || fetch_offset > log_end {
            return Err(Error::OffsetOutOfRange {
                requested: fetch_offset,
                log_start: state.log_start_offset,
                log_end,
            });
        }
        let floor = state
            .segments
            .range(..=fetch_offset)
            .next_back()
            .map_or(i64::MIN, |(base, _)| *base);
        for segment in state.segments.range(floor..).map(|(_, segment)| segment) {
            if fetch_offset >= segment.next_offset {
                continue;
            }
            if fetch_offset >= max_offset {
                break;
            }
            if let Some((position, header)) = segment.find_batch(self.io.as_ref(), fetch_offset)? {
                let end = if max_offset < segment.next_offset {
                    segment
                        .find_batch(self.io.as_ref(), max_offset)?
                        .map_or(segment.size_bytes, |(limit, _)| limit)
                } else {
                    segment.size_bytes
                };
                let available = end.saturating_sub(position);
                let mut len = available.min(max_bytes);
                if min_one_batch {
                    len = len.max((header.total_bytes() as u64).min(available));
                }
                return self.slice(segment, position, len);
            }
        }
        let active = state.active()?;
        self.slice(active, active.size_bytes, 0)
    }

    fn slice(&self, segment: &Segment, position: u64, len: u64) -> Result<FetchSlice> {
        Ok(FetchSlice::new(
            segment.log_file(self.io.as_ref())?,
            Arc::clone(segment.log_path()),
            Arc::clone(&self.io),
            position,
            len,
        ))
    }

    /// The first record whose timestamp is ≥ `timestamp_ms` (its exact offset and timestamp, as
    /// Kafka answers ListOffsets), found through the time indexes and then the records of the
    /// batch; records below the log start offset do not count. `None` if every record is older.
    /// (Kafka's "earliest" and "latest" are [`Log::log_start_offset`] and
    /// [`Log::log_end_offset`].)
    pub fn offset_for_timestamp(&self, timestamp_ms: i64) -> Result<Option<TimestampOffset>> {
        let state = self.read_state()?;
        for segment in state.segments.values() {
            if segment.max_timestamp_ms < timestamp_ms
                || segment.next_offset <= state.log_start_offset
            {
                continue;
            }
            if let Some((offset, timestamp_ms)) = segment.find_record_by_timestamp(
                self.io.as_ref(),
                timestamp_ms,
                state.log_start_offset,
            )? {
                return Ok(Some(TimestampOffset {
                    offset,
                    timestamp_ms,
                }));
            }
        }
        Ok(None)
    }

    /// The record holding the greatest timestamp in the log (Kafka's ListOffsets "max
    /// timestamp", KIP-734): its offset and that timestamp; `None` for an empty log or one without
    /// timestamps. The earliest such record if several share the maximum.
    pub fn max_timestamp(&self) -> Result<Option<TimestampOffset>> {
        let max_timestamp_ms = {
            let state = self.read_state()?;
            state
                .segments
                .values()
                .filter(|segment| segment.next_offset > state.log_start_offset)
                .map(|segment| segment.max_timestamp_ms)
                .max()
        };
        match max_timestamp_ms {
            Some(timestamp_ms) if timestamp_ms >= 0 => self.offset_for_timestamp(timestamp_ms),
            _ => Ok(None),
        }
    }

    /// The greatest leader epoch that wrote to the log, `None` if no batch carried one.
    pub fn latest_epoch(&self) -> Result<Option<i32>> {
        Ok(self.read_state()?.epochs.latest_epoch())
    }

    /// The leader epoch that wrote `offset` (Kafka's `epochForOffset`, ListOffsets' answer):
    /// the latest epoch that started at or before it; `None` for −1 or an offset before every
    /// known epoch (batches written before epochs were stamped).
    pub fn epoch_for_offset(&self, offset: i64) -> Result<Option<i32>> {
        Ok(self.read_state()?.epochs.epoch_for(offset))
    }

    /// The leader-epoch cache, oldest epoch first.
    pub fn epoch_entries(&self) -> Result<Vec<EpochEntry>> {
        Ok(self.read_state()?.epochs.entries().to_vec())
    }

    /// A copy of the leader-epoch cache, for a caller that applies its rules to a snapshot of
    /// the log (the replica state machine's view of it).
    pub fn epoch_cache(&self) -> Result<EpochCache> {
        Ok(self.read_state()?.epochs.clone())
    }

    /// Where `epoch` ended, as Kafka's `endOffsetFor` answers OffsetsForLeaderEpoch: for the
    /// latest epoch the log end offset; for an older one the greatest known epoch ≤ it and the
    /// start offset of the first epoch above it; for an epoch below every known one, that epoch
    /// and the first one's start; [`EpochEndOffset::UNDEFINED`] for −1 or an epoch above every
    /// known one.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> Result<EpochEndOffset> {
        let state = self.read_state()?;
        Ok(state.epochs.end_offset_for(epoch, state.log_end_offset()))
    }

    /// Records that `epoch` starts at the log end offset, as a broker does on becoming leader
    /// at that epoch (Kafka's `assign(epoch, logEndOffset)`), and writes the checkpoint. Nothing
    /// if `epoch` is not above the latest epoch. Returns whether the cache changed.
    pub fn assign_epoch(&self, epoch: i32) -> Result<bool> {
        let _writer = self.writer()?;
        let epochs = {
            let mut state = self.write_state()?;
            self.check_writable(&state)?;
            if state
                .epochs
                .latest_epoch()
                .is_some_and(|latest| latest >= epoch)
            {
                return Ok(false);
            }
            let log_end = state.log_end_offset();
            if !state.epochs.assign(epoch, log_end) {
                return Ok(false);
            }
            state.epochs.clone()
        };
        epochs
            .write(self.io.as_ref(), &self.dir)
            .map_err(|error| self.poison(error))?;
        Ok(true)
    }

    /// Removes every batch holding an offset ≥ `offset` (a batch straddling it goes whole, as in
    /// Kafka), for a replica that diverged. The new log end offset is returned. The recovery
    /// point is lowered first, so a crash mid-way never leaves one above the data; a log start
    /// the cut passes drops to the new end after the cut. Slices already handed out stay valid
    /// (see [`FetchSlice`]).
    pub fn truncate_to(&self, offset: i64) -> Result<i64> {
        let _writer = self.writer()?;
        let mut state = self.write_state()?;
        self.check_writable(&state)?;
        let log_end = state.log_end_offset();
        if offset >= log_end {
            return Ok(log_end);
        }
        let io = Arc::clone(&self.io);
        let io = io.as_ref();
        let cut_base = state
            .segments
            .range(..=offset)
            .next_back()
            .or_else(|| state.segments.iter().next())
            .map(|(base, _)| *base)
            .ok_or(Error::Closed)?;
        let cut_segment = state.segments.get(&cut_base).ok_or(Error::Closed)?;
        let (cut_position, new_end) = match cut_segment.find_batch(io, offset)? {
            Some((position, header)) => (position, header.base_offset),
            None => (cut_segment.size_bytes, cut_segment.next_offset),
        };
        let result = (|| {
            // Only the recovery point drops before the cut. Why not the log start as well (when
            // the cut goes below it): a crash before the cut then left the whole log under a
            // start below the one the leader-epoch cache was moved to (`truncate_from_start`),
            // and recovery, which only trims the cache, kept an epoch-less start (found by
            // tests/power_loss.rs, seed 2509). Recovery lowers a start past the log end itself.
            state.recovery_point = state.recovery_point.min(new_end);
            state.truncations += 1;
            self.write_checkpoint(&state)?;
            let later: Vec<i64> = state
                .segments
                .range(cut_base + 1..)
                .map(|(b, _)| *b)
                .collect();
            for base in later {
                if let Some(segment) = state.segments.remove(&base) {
                    segment.delete_files(io, &self.dir)?;
                }
            }
            let config = state.config.clone();
            let segment = state.segments.get_mut(&cut_base).ok_or(Error::Closed)?;
            segment.truncate_at(io, &self.dir, cut_position, &config)?;
            segment.unseal(io, &config)?;
            fs::sync_parent(io, &self.dir.join(fs::CHECKPOINT_FILE))?;
            let new_end = state.log_end_offset();
            if new_end < state.log_start_offset {
                // The log is now empty below its old start: it starts at its end.
                state.log_start_offset = new_end;
                self.write_checkpoint(&state)?;
            }
            // After the log: a crash in between leaves entries past the end, which recovery trims.
            if state.epochs.truncate_from_end(new_end) {
                state.epochs.write(io, &self.dir)?;
            }
            Ok(new_end)
        })();
        result.map_err(|error| self.poison(error))
    }

    /// Deletes every segment and starts the log empty at `offset` (Kafka's
    /// `truncateFullyAndStartAt`): log start, log end and recovery point all become `offset`, and
    /// the leader-epoch cache is cleared. For a follower whose leader's log starts past this
    /// log's end (the leader answered OFFSET_OUT_OF_RANGE): it then fetches from the leader's
    /// start. Slices already handed out stay valid (see [`FetchSlice`]); a failure poisons.
    ///
    /// Crash-safe by the order of its writes, so that a crash anywhere leaves the old log, a
    /// prefix of it (possibly empty), or the new empty log at `offset`:
    /// 1. the checkpoint's recovery point drops to the first segment's base (or `offset`, if
    ///    lower), so it never names data a later step removes and recovery trusts nothing;
    /// 2. the segments are deleted newest first, the directory fsynced after each (a cut keeps
    ///    a random subset of unsynced directory changes, which would leave holes);
    /// 3. only then is the empty segment at `offset` created (its name fsynced): with no other
    ///    segment left, recovery starts the log there whatever the checkpoint says;
    /// 4. the checkpoint names `offset` as log start and recovery point;
    /// 5. the empty leader-epoch checkpoint is written last: before it, recovery trims the old
    ///    entries itself (none survives on a log empty at its start), whereas clearing it first
    ///    would leave a whole old log with an empty, wrong, cache.
    ///
    /// Step 2 costs a directory fsync per segment, under the locks as truncation's fsyncs are;
    /// a follower reset this far is rare and serves no reads meanwhile.
    pub fn truncate_fully_and_start_at(&self, offset: i64) -> Result<()> {
        if offset < 0 {
            return Err(Error::NegativeOffset(offset));
        }
        let writer = self.writer()?;
        let mut state = self.write_state()?;
        self.check_writable(&state)?;
        let io = Arc::clone(&self.io);
        let io = io.as_ref();
        let mut removed = Vec::new();
        let result = (|| {
            let first_base = state.segments.keys().next().copied().unwrap_or(offset);
            state.recovery_point = state.recovery_point.min(first_base).min(offset);
            state.truncations += 1;
            self.write_checkpoint(&state)?;
            while let Some((_, segment)) = state.segments.pop_last() {
                segment.delete_files(io, &self.dir)?;
                removed.push(segment);
                fs::sync_parent(io, &self.dir.join(fs::CHECKPOINT_FILE))?;
            }
            let config = state.config.clone();
            let segment = Segment::create(io, &self.dir, offset, &config, &self.log_files)?;
            fs::sync_parent(io, &self.dir.join(fs::CHECKPOINT_FILE))?;
            state.segments.insert(offset, segment);
            state.log_start_offset = offset;
            state.recovery_point = offset;
            state.unflushed_records = 0;
            state.last_flush_ms = None;
            self.write_checkpoint(&state)?;
            state.epochs = EpochCache::default();
            state.epochs.write(io, &self.dir)
        })();
        if let Err(error) = result {
            return Err(self.poison(error));
        }
        close_after_unlock(state, writer, removed);
        Ok(())
    }

    /// Advances the log start offset to `offset` (Kafka's DeleteRecords) and deletes the segments
    /// wholly below it. Returns the new log start offset.
    pub fn delete_records_before(&self, offset: i64) -> Result<i64> {
        let writer = self.writer()?;
        let mut state = self.write_state()?;
        self.check_writable(&state)?;
        let log_end = state.log_end_offset();
        if offset > log_end {
            return Err(Error::OffsetOutOfRange {
                requested: offset,
                log_start: state.log_start_offset,
                log_end,
            });
        }
        let mut removed = Vec::new();
        if offset > state.log_start_offset {
            state.log_start_offset = offset;
            let count = self.deletable_prefix(&state, None);
            removed = self.delete_oldest(&mut state, count)?;
        }
        let log_start_offset = state.log_start_offset;
        close_after_unlock(state, writer, removed);
        Ok(log_start_offset)
    }

    /// Deletes whole segments, oldest first, while they are past `retention_ms` (their newest
    /// timestamp older than `now_ms − retention_ms`), while the log is larger than
    /// `retention_bytes` without them, or while they lie wholly below the log start offset. The
    /// active segment is never deleted (roll it first with [`Log::roll_if_needed`]). Returns how
    /// many segments were deleted.
    pub fn enforce_retention(&self, now_ms: i64) -> Result<usize> {
        let writer = self.writer()?;
        let mut state = self.write_state()?;
        self.check_writable(&state)?;
        let count = self.deletable_prefix(&state, Some(now_ms));
        if count == 0 {
            // Nothing moves: no checkpoint to write (it would fsync under the locks, and
            // retention runs often).
            return Ok(0);
        }
        let removed = self.delete_oldest(&mut state, count)?;
        close_after_unlock(state, writer, removed);
        Ok(count)
    }

    /// How many of the oldest non-active segments may go. Without `now_ms`, only those below the
    /// log start offset.
    fn deletable_prefix(&self, state: &LogState, now_ms: Option<i64>) -> usize {
        let config = &state.config;
        let mut remaining_bytes: u64 = state.segments.values().map(|s| s.size_bytes).sum();
        let mut count = 0usize;
        let candidates = state.segments.len().saturating_sub(1);
        for segment in state.segments.values().take(candidates) {
            let below_start = segment.next_offset <= state.log_start_offset;
            let expired = now_ms.is_some_and(|now_ms| {
                config.retention_ms.is_some_and(|retention_ms| {
                    segment.max_timestamp_ms >= 0
                        && now_ms.saturating_sub(segment.max_timestamp_ms) > retention_ms
                })
            });
            let oversized = now_ms.is_some()
                && config.retention_bytes.is_some_and(|retention_bytes| {
                    remaining_bytes - segment.size_bytes >= retention_bytes
                });
            if !(below_start || expired || oversized) {
                break;
            }
            remaining_bytes -= segment.size_bytes;
            count += 1;
        }
        count
    }

    /// Deletes the `count` oldest segments: the log start offset moves past them and is
    /// checkpointed first, then the files are unlinked (open slices keep their inodes). Returns
    /// the removed segments, still open, for [`close_after_unlock`].
    fn delete_oldest(&self, state: &mut LogState, count: usize) -> Result<Vec<Segment>> {
        let io = self.io.as_ref();
        let doomed: Vec<i64> = state.segments.keys().take(count).copied().collect();
        let mut removed = Vec::new();
        let result = (|| {
            if let Some(first_kept) = state.segments.values().nth(count) {
                state.log_start_offset = state.log_start_offset.max(first_kept.base_offset);
            }
            self.write_checkpoint(state)?;
            for base in &doomed {
                if let Some(segment) = state.segments.remove(base) {
                    segment.delete_files(io, &self.dir)?;
                    removed.push(segment);
                }
            }
            if !doomed.is_empty() {
                fs::sync_parent(io, &self.dir.join(fs::CHECKPOINT_FILE))?;
            }
            if state.epochs.truncate_from_start(state.log_start_offset) {
                state.epochs.write(io, &self.dir)?;
            }
            Ok(())
        })();
        result.map_err(|error| self.poison(error))?;
        Ok(removed)
    }

    /// The first step of a clean close, without any I/O: recovers the log if it was not yet
    /// (the clean-shutdown marker promises every log is), then refuses further writes and lets
    /// go of the active segment's `.log` view. `LogDir::close` then syncs what is not durable
    /// yet (`Log::unflushed_end`) and writes the directory's checkpoint once. The active indexes
    /// stay at their preallocated length (no trim, which was two truncations per log): a clean
    /// open finds their entries by their zero tail (`IndexFile::open`).
    pub(crate) fn close_for_shutdown(&self) -> Result<()> {
        self.recover_deferred()?;
        let _writer = self.writer()?;
        let mut state = self.write_state()?;
        if state.closed {
            return Ok(());
        }
        if self.poisoned.load(Ordering::SeqCst) {
            return Err(Error::Poisoned);
        }
        state.active_mut()?.release_active();
        state.closed = true;
        Ok(())
    }

    /// Checks every segment's offset and time index against its log (feature `power-sim`, for
    /// tests): each entry must name the batch it claims. A description of the first mismatch.
    #[cfg(feature = "power-sim")]
    pub fn verify_indexes(&self) -> std::result::Result<(), segment::IndexMismatch> {
        let state = self.read_state()?;
        for segment in state.segments.values() {
            segment.verify_indexes(self.io.as_ref())?;
        }
        Ok(())
    }

    /// Refuses further writes without flushing (the log is being deleted).
    pub(crate) fn mark_closed(&self) -> Result<()> {
        let _writer = self.writer()?;
        // Also while recovering: a deleted log is then never recovered.
        let mut state = self.state.write().map_err(|_| Error::Poisoned)?;
        state.closed = true;
        // Under the state lock, which a flush's `advance_recovery_point` takes too: no flush
        // puts the log's entry back into the directory's checkpoint after this.
        state.deleted = true;
        Ok(())
    }

    /// The partition's directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Whether an append of `size_bytes` bytes and `offsets_count` offsets must first roll: the
/// active segment is non-empty and too full, too old, out of index room, or its 4-byte relative
/// offsets would overflow.
fn roll_due(state: &LogState, now_ms: i64, size_bytes: u64, offsets_count: i64) -> Result<bool> {
    let config = &state.config;
    let log_end = state.log_end_offset();
    let active = state.active()?;
    if active.is_empty() {
        return Ok(false);
    }
    let too_big = active.size_bytes + size_bytes > config.segment_bytes;
    let too_old = active
        .first_append_ms
        .is_some_and(|first_ms| now_ms.saturating_sub(first_ms) >= config.segment_ms);
    let last_relative = log_end + offsets_count - 1 - active.base_offset;
    let offsets_overflow = last_relative > i64::from(u32::MAX);
    Ok(too_big || too_old || active.indexes_full() || offsets_overflow)
}

/// Whether the flush policy calls for an fsync once `records_count` more records are appended at
/// `now_ms` (`flush.messages` reached, or `flush.ms` since the last flush; the first append
/// starts the `flush.ms` clock).
fn flush_due(state: &LogState, records_count: u64, now_ms: i64) -> bool {
    let unflushed_records = state.unflushed_records + records_count;
    let last_flush_ms = state.last_flush_ms.unwrap_or(now_ms);
    state
        .config
        .flush_messages_interval
        .is_some_and(|interval| unflushed_records >= interval)
        || state
            .config
            .flush_ms
            .is_some_and(|flush_ms| now_ms.saturating_sub(last_flush_ms) >= flush_ms)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::io::faulty::FaultyIo;
    use crate::log_dir::LogDir;
    use crate::testing::{batch, batch_with, record_times};
    use crate::testing_temp::temp_dir;
    use skiff_protocol::records::record::{BatchBuilder, NewRecord};
    use skiff_protocol::records::Compression;

    /// A data directory over the fault-injecting file system.
    fn open_faulty(path: &Path, config: LogConfig, io: &Arc<FaultyIo>) -> LogDir {
        LogDir::open_with_io(path, config, crate::DirConfig::default(), io.clone()).unwrap()
    }

    fn small_config() -> LogConfig {
        LogConfig {
            segment_bytes: 4096,
            batch_bytes_max: 4096,
            index_interval_bytes: 256,
            ..LogConfig::default()
        }
    }

    /// The stored bytes of the batch that starts at `offset`.
    fn batch_at(log: &Log, offset: i64) -> Vec<u8> {
        let slice = log.read(offset, 0, true).unwrap();
        slice.bytes().unwrap().to_vec()
    }

    fn expected(mut bytes: Vec<u8>, base_offset: i64) -> Vec<u8> {
        v2::set_base_offset(&mut bytes, base_offset).unwrap();
        bytes
    }

    #[test]
    fn append_assigns_offsets_rolls_and_reads_back() {
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        let log = data.create("t", 0, None).unwrap();
        let mut appended = Vec::new();
        for index in 0..120i32 {
            let records = index % 4 + 1;
            let original = batch(999, records, (index as usize * 7) % 90);
            let info = log.append(&mut original.clone(), 5_000).unwrap();
            assert_eq!(info.last_offset - info.base_offset + 1, i64::from(records));
            appended.push((info.base_offset, info.last_offset, original));
        }
        assert!(
            log.segment_count().unwrap() > 3,
            "segment_bytes forces rolls"
        );
        for (base, last, original) in &appended {
            let want = expected(original.clone(), *base);
            for offset in *base..=*last {
                assert_eq!(batch_at(&log, offset), want, "offset {offset}");
            }
        }
        let end = log.log_end_offset().unwrap();
        assert!(log.read(end, 100, true).unwrap().is_empty());
        assert!(matches!(
            log.read(end + 1, 100, true),
            Err(Error::OffsetOutOfRange { .. })
        ));
        // Without min_one_batch, a small max_bytes cuts inside the batch, as Kafka does.
        assert_eq!(log.read(0, 10, false).unwrap().len(), 10);
        assert_eq!(log.read(0, 0, false).unwrap().len(), 0);

        // Clean close and reopen keep everything and the offsets.
        data.close().unwrap();
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        let log = data.log("t", 0).unwrap().unwrap();
        assert_eq!(log.log_end_offset().unwrap(), end);
        for (base, _, original) in &appended {
            assert_eq!(batch_at(&log, *base), expected(original.clone(), *base));
        }
        let info = log.append(&mut batch(0, 1, 5), 6_000).unwrap();
        assert_eq!(info.base_offset, end);
    }

    /// The leading whole batches of `bytes` (a read may end inside a batch, as Kafka's fetch
    /// does; a follower appends the whole ones and fetches the rest again).
    fn whole_batches(bytes: &[u8]) -> Vec<u8> {
        let mut end = 0usize;
        while let Ok(header) = BatchHeader::parse(&bytes[end..]) {
            if end + header.total_bytes() > bytes.len() {
                break;
            }
            end += header.total_bytes();
        }
        bytes[..end].to_vec()
    }

    /// Every file of the log directory `dir` but its checkpoint, by name, with its bytes.
    fn segment_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.file_name().unwrap() != fs::CHECKPOINT_FILE)
            .map(|path| {
                let name = path.file_name().unwrap().to_str().unwrap().to_owned();
                (name, std::fs::read(&path).unwrap())
            })
            .collect()
    }

    /// A leader's log: single and grouped appends over several leader epochs and segments.
    fn leader_log(data: &LogDir) -> Arc<Log> {
        let leader = data.create("leader", 0, None).unwrap();
        leader.append(&mut batch(0, 2, 30), 0).unwrap(); // no epoch
        for index in 0..60i32 {
            let epoch = 1 + index / 15 * 2;
            let mut input = batch(0, index % 3 + 1, (index as usize * 13) % 300);
            if index % 4 == 0 {
                input.extend(batch(0, 2, 40));
            }
            leader.append_with_epoch(&mut input, epoch, 0).unwrap();
        }
        assert!(leader.segment_count().unwrap() > 4, "rolls");
        leader
    }

    #[test]
    fn replicated_appends_copy_a_leader_log_byte_for_byte() {
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        let leader = leader_log(&data);
        let leader_end = leader.log_end_offset().unwrap();
        // A follower that fetches up to a whole segment at a time, one that fetches one batch at
        // a time, and one that fetches 700 bytes at a time (reads that end inside a batch).
        for (partition, max_bytes) in [(0, 1 << 20), (1, 0), (2, 700)] {
            let follower = data.create("follower", partition, None).unwrap();
            while follower.log_end_offset().unwrap() < leader_end {
                let offset = follower.log_end_offset().unwrap();
                let slice = leader.read(offset, max_bytes, true).unwrap();
                let mut fetched = whole_batches(&slice.bytes().unwrap());
                let copy = fetched.clone();
                let info = follower.append_replicated(&mut fetched, 0).unwrap();
                assert_eq!(fetched, copy, "the batches are not modified");
                assert_eq!(info.base_offset, offset);
            }
            assert_eq!(follower.log_end_offset().unwrap(), leader_end);
            assert_eq!(
                follower.epoch_entries().unwrap(),
                leader.epoch_entries().unwrap()
            );
            let mut offset = 0;
            while offset < leader_end {
                let want = leader.read(offset, 0, true).unwrap().bytes().unwrap();
                let got = follower.read(offset, 0, true).unwrap().bytes().unwrap();
                assert_eq!(got, want, "batch at {offset}");
                offset = BatchHeader::parse(&want).unwrap().last_offset() + 1;
            }
        }
        // Fetching whole segments, the follower rolls where the leader did: its files (logs,
        // indexes, leader-epoch checkpoint) are the leader's, byte for byte.
        let leader_files = segment_files(&dir.path().join("leader-0"));
        assert!(leader_files.len() > 12);
        assert_eq!(segment_files(&dir.path().join("follower-0")), leader_files);
        // And a restart finds the follower's epochs from its checkpoint.
        drop((leader, data));
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        let (leader, follower) = (
            data.log("leader", 0).unwrap().unwrap(),
            data.log("follower", 0).unwrap().unwrap(),
        );
        assert_eq!(
            follower.epoch_entries().unwrap(),
            leader.epoch_entries().unwrap()
        );
    }

    /// A batch as a leader stored it: `records` records from `base_offset`, at `epoch`.
    fn leader_batch(base_offset: i64, records: i32, epoch: i32) -> Vec<u8> {
        let mut bytes = batch(base_offset, records, 20);
        v2::set_partition_leader_epoch(&mut bytes, epoch).unwrap();
        bytes
    }

    #[test]
    fn replicated_appends_that_do_not_continue_the_log_write_nothing() {
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        let log = data.create("t", 0, None).unwrap();
        log.append_replicated(&mut leader_batch(0, 3, 2), 0)
            .unwrap();
        let mut two = leader_batch(3, 2, 2);
        two.extend(leader_batch(5, 1, 4));
        log.append_replicated(&mut two, 0).unwrap();
        // A batch without an epoch is taken and stays out of the cache.
        log.append_replicated(&mut leader_batch(6, 1, -1), 0)
            .unwrap();
        assert_eq!(
            log.epoch_entries().unwrap(),
            [
                EpochEntry {
                    epoch: 2,
                    start_offset: 0
                },
                EpochEntry {
                    epoch: 4,
                    start_offset: 5
                }
            ]
        );
        // Fill the active segment so that the next append would roll: a refused one must not.
        while log.size_bytes().unwrap() + 2 * leader_batch(0, 1, 4).len() as u64 <= 4096 {
            let end = log.log_end_offset().unwrap();
            log.append_replicated(&mut leader_batch(end, 1, 4), 0)
                .unwrap();
        }
        let end = log.log_end_offset().unwrap();
        let before = (
            log.log_end_offset().unwrap(),
            log.size_bytes().unwrap(),
            log.segment_count().unwrap(),
            log.epoch_entries().unwrap(),
            segment_files(&dir.path().join("t-0")),
        );
        let mut gap = leader_batch(end, 1, 4);
        gap.extend(leader_batch(end + 2, 1, 4));
        let mut overlap = leader_batch(end, 2, 4);
        overlap.extend(leader_batch(end + 1, 1, 4));
        let mut falling = leader_batch(end, 1, 6);
        falling.extend(leader_batch(end + 1, 1, 5));
        let mut bad_crc = leader_batch(end, 1, 4);
        *bad_crc.last_mut().unwrap() ^= 1;
        let unexpected = |expected: i64, found: i64| {
            format!("UnexpectedAppendOffset {{ expected: {expected}, found: {found} }}")
        };
        let cases = [
            (
                "behind",
                leader_batch(end - 1, 1, 4),
                unexpected(end, end - 1),
            ),
            (
                "ahead",
                leader_batch(end + 1, 1, 4),
                unexpected(end, end + 1),
            ),
            ("gap", gap, unexpected(end + 1, end + 2)),
            ("overlap", overlap, unexpected(end + 2, end + 1)),
            (
                "below the cache",
                leader_batch(end, 1, 3),
                "EpochBelowLatest { epoch: 3, latest: 4 }".to_owned(),
            ),
            (
                "falling inside",
                falling,
                "EpochBelowLatest { epoch: 5, latest: 6 }".to_owned(),
            ),
            ("crc", bad_crc, "InvalidBatch(".to_owned()),
        ];
        for (name, mut input, expected_error) in cases {
            let copy = input.clone();
            let refused = log.append_replicated(&mut input, 0).unwrap_err();
            let refused = format!("{refused:?}");
            assert!(refused.starts_with(&expected_error), "{name}: {refused}");
            assert_eq!(input, copy, "{name}: input untouched");
            let after = (
                log.log_end_offset().unwrap(),
                log.size_bytes().unwrap(),
                log.segment_count().unwrap(),
                log.epoch_entries().unwrap(),
                segment_files(&dir.path().join("t-0")),
            );
            assert_eq!(after, before, "{name}: nothing written");
        }
        assert!(!log.is_poisoned());
        // The right batch is still taken, and rolls as `append` would.
        let info = log
            .append_replicated(&mut leader_batch(end, 1, 4), 0)
            .unwrap();
        assert_eq!(info.base_offset, end);
        let info = log
            .append_replicated(&mut leader_batch(end + 1, 1, 4), 0)
            .unwrap();
        assert_eq!(info.segment_base_offset, end + 1, "rolled");
    }

    #[test]
    fn replicated_appends_flush_and_poison_as_appends_do() {
        let dir = temp_dir();
        let io = Arc::new(FaultyIo::default());
        let config = LogConfig {
            flush_messages_interval: Some(2),
            ..small_config()
        };
        let data = open_faulty(dir.path(), config, &io);
        let log = data.create("t", 0, None).unwrap();
        let info = log
            .append_replicated(&mut leader_batch(0, 1, 1), 0)
            .unwrap();
        assert!(
            !info.flushed,
            "one record of the two flush.messages asks for"
        );
        let info = log
            .append_replicated(&mut leader_batch(1, 1, 1), 0)
            .unwrap();
        assert!(info.flushed);
        assert_eq!(log.flushed_offset().unwrap(), 2);
        io.fail_sync.store(true, Ordering::SeqCst);
        log.append_replicated(&mut leader_batch(2, 1, 1), 0)
            .unwrap();
        let failed = log.append_replicated(&mut leader_batch(3, 1, 1), 0);
        assert!(matches!(failed, Err(Error::Io { .. })), "{failed:?}");
        assert!(log.is_poisoned());
        io.fail_sync.store(false, Ordering::SeqCst);
        let end = log.log_end_offset().unwrap();
        assert!(matches!(
            log.append_replicated(&mut leader_batch(end, 1, 1), 0),
            Err(Error::Poisoned)
        ));
        assert!(matches!(
            log.truncate_fully_and_start_at(100),
            Err(Error::Poisoned)
        ));
    }

    #[test]
    fn truncate_fully_and_start_at_leaves_an_empty_log_at_the_offset() {
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        let log = leader_log(&data);
        log.delete_records_before(5).unwrap();
        let held = log.read(10, 1 << 20, true).unwrap();
        let held_bytes = held.bytes().unwrap().to_vec();
        let log_dir = dir.path().join("leader-0");
        for offset in [1_000, 1_000, 3] {
            log.truncate_fully_and_start_at(offset).unwrap();
            assert_eq!(log.log_start_offset().unwrap(), offset);
            assert_eq!(log.log_end_offset().unwrap(), offset);
            assert_eq!(log.flushed_offset().unwrap(), offset);
            assert_eq!(log.segment_count().unwrap(), 1);
            assert_eq!(log.epoch_entries().unwrap(), []);
            assert_eq!(log.latest_epoch().unwrap(), None);
            assert!(log.read(offset, 1 << 20, true).unwrap().is_empty());
            assert!(matches!(
                log.read(offset - 1, 1, true),
                Err(Error::OffsetOutOfRange { .. })
            ));
            let names: Vec<String> = segment_files(&log_dir).into_keys().collect();
            let base = format!("{offset:020}");
            assert_eq!(
                names,
                [
                    format!("{base}.index"),
                    format!("{base}.log"),
                    format!("{base}.timeindex"),
                    "leader-epoch-checkpoint".to_owned()
                ]
            );
            assert_eq!(
                std::fs::read_to_string(log_dir.join("leader-epoch-checkpoint")).unwrap(),
                "0\n0\n"
            );
            assert_eq!(
                dir_checkpoint_of(log_dir.parent().unwrap(), "leader"),
                Some(Checkpoint {
                    log_start_offset: offset,
                    recovery_point: offset
                })
            );
        }
        assert_eq!(
            held.bytes().unwrap().to_vec(),
            held_bytes,
            "slices stay valid"
        );
        assert!(matches!(
            log.truncate_fully_and_start_at(-1),
            Err(Error::NegativeOffset(-1))
        ));
        // The follower goes on from there, and a crash (no close) keeps it all.
        log.append_replicated(&mut leader_batch(3, 2, 7), 0)
            .unwrap();
        drop((log, data));
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        let log = data.log("leader", 0).unwrap().unwrap();
        assert_eq!(
            (
                log.log_start_offset().unwrap(),
                log.log_end_offset().unwrap()
            ),
            (3, 5)
        );
        assert_eq!(
            log.epoch_entries().unwrap(),
            [EpochEntry {
                epoch: 7,
                start_offset: 3
            }]
        );
        assert_eq!(batch_at(&log, 4), leader_batch(3, 2, 7));
    }

    #[test]
    fn a_failed_truncate_fully_poisons_and_recovers_to_a_prefix_or_the_new_log() {
        // Each sync in turn fails: whatever step it stopped at, reopening finds the old log
        // whole, a prefix of it, or the new empty log.
        let mut prefix_ends = Vec::new();
        let mut old_end = 0;
        for syncs_before_failure in 0.. {
            let dir = temp_dir();
            let io = Arc::new(FaultyIo::default());
            let data = open_faulty(dir.path(), small_config(), &io);
            let log = leader_log(&data);
            log.flush().unwrap();
            let end = log.log_end_offset().unwrap();
            old_end = end;
            let mut old = Vec::new();
            let mut offset = 0;
            while offset < end {
                let bytes = batch_at(&log, offset);
                let next = BatchHeader::parse(&bytes).unwrap().last_offset() + 1;
                old.push((offset, next, bytes));
                offset = next;
            }
            io.fail_sync_after
                .store(syncs_before_failure, Ordering::SeqCst);
            io.fail_sync.store(true, Ordering::SeqCst);
            let result = log.truncate_fully_and_start_at(end + 100);
            io.fail_sync.store(false, Ordering::SeqCst);
            assert_eq!(result.is_err(), log.is_poisoned());
            drop((log, data));
            let data = LogDir::open(dir.path(), small_config()).unwrap();
            let log = data.log("leader", 0).unwrap().unwrap();
            let (start, recovered_end) = (
                log.log_start_offset().unwrap(),
                log.log_end_offset().unwrap(),
            );
            if recovered_end == end + 100 {
                assert_eq!(start, end + 100, "the new log");
                assert_eq!(log.epoch_entries().unwrap(), []);
                if result.is_ok() {
                    assert!(syncs_before_failure > 8, "every step was reached");
                    break;
                }
                continue;
            }
            assert!(
                result.is_err(),
                "{syncs_before_failure}: done, yet not the new log"
            );
            assert!(recovered_end <= end, "{syncs_before_failure}: a prefix");
            prefix_ends.push(recovered_end);
            for (base, next, bytes) in &old {
                if *next <= recovered_end && *next > start {
                    assert_eq!(&batch_at(&log, *base.max(&start)), bytes);
                }
            }
        }
        // Each kind of outcome was seen: the old log whole, shorter prefixes, the empty one.
        assert_eq!(prefix_ends.first(), Some(&old_end));
        assert!(prefix_ends.iter().any(|end| (1..old_end).contains(end)));
        assert_eq!(prefix_ends.last(), Some(&0));
    }

    #[test]
    fn read_below_returns_only_whole_batches_under_the_bound() {
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        let log = data.create("t", 0, None).unwrap();
        // Batches of 3 records: [0,2] [3,5] … across several segments.
        let mut bases = Vec::new();
        for index in 0..60 {
            let info = log.append(&mut batch(1, 3, index % 50), 5_000).unwrap();
            bases.push(info.base_offset);
        }
        assert!(log.segment_count().unwrap() > 2);
        let end = log.log_end_offset().unwrap();
        for fetch_offset in [0, 1, 3, 40, end - 3] {
            for bound in [0, 3, 6, 7, 42, end - 3, end, i64::MAX] {
                let capped = log.read_below(fetch_offset, bound, 1 << 20, true).unwrap();
                let whole = log.read(fetch_offset, 1 << 20, true).unwrap();
                let bytes = capped.bytes().unwrap();
                let mut last = None;
                let mut covered = 0;
                for item in v2::batch_positions(&bytes) {
                    let (position, header) = item.unwrap();
                    last = Some(header.last_offset());
                    covered = position + header.total_bytes();
                }
                assert_eq!(covered, bytes.len(), "whole batches only");
                if fetch_offset >= bound {
                    assert!(capped.is_empty(), "{fetch_offset} {bound}");
                    continue;
                }
                let limit = bound.min(end);
                // Every batch returned lies below the bound, and the read stops only at the bound
                // or where the uncapped read (one segment) stops.
                assert!(
                    last.is_none_or(|last| last < limit),
                    "{fetch_offset} {bound}"
                );
                let next = last.map_or(fetch_offset, |last| last + 1);
                let whole_bytes = whole.bytes().unwrap();
                assert!(
                    next + 3 > limit || bytes.len() == whole_bytes.len(),
                    "{fetch_offset} {bound}: stopped at {next}"
                );
                assert_eq!(&whole_bytes[..bytes.len()], &bytes[..]);
            }
        }
        assert!(matches!(
            log.read_below(end + 1, i64::MAX, 100, true),
            Err(Error::OffsetOutOfRange { .. })
        ));
    }

    #[test]
    fn append_may_block_says_when_the_next_append_rolls_or_flushes() {
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        let log = data.create("t", 0, None).unwrap();
        // Empty active segment, no flush policy: a plain page-cache append.
        assert!(!log.append_may_block(100, 1, 1_000).unwrap());
        log.append(&mut batch(0, 1, 100), 1_000).unwrap();
        assert!(!log.append_may_block(100, 1, 1_000).unwrap());
        // Past segment_bytes (4 KiB) the append rolls first.
        assert!(log.append_may_block(4096, 1, 1_000).unwrap());
        // segment.ms elapsed since the first append: a roll.
        let old = log.config().unwrap().segment_ms;
        assert!(log.append_may_block(100, 1, 1_000 + old).unwrap());
        // flush.messages = 3 with one record unflushed: two more records reach it, one does not.
        log.set_config(LogConfig {
            flush_messages_interval: Some(3),
            ..small_config()
        })
        .unwrap();
        assert!(!log.append_may_block(100, 1, 1_000).unwrap());
        assert!(log.append_may_block(100, 2, 1_000).unwrap());
        let info = log.append(&mut batch(0, 2, 100), 1_000).unwrap();
        assert!(info.flushed, "the hint and the append agree");
        assert!(!log.append_may_block(100, 1, 1_000).unwrap());
    }

    #[test]
    fn headers_past_the_active_view_are_read_from_the_file() {
        // The active segment's `.log` view covers `segment_bytes` (here 4 KiB) as configured when
        // it was mapped; raising `segment_bytes` lets the segment grow past it, and lookups there
        // must fall back to `pread` and still find every batch.
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        let log = data.create("t", 0, None).unwrap();
        log.set_config(LogConfig {
            segment_bytes: 1 << 20,
            ..small_config()
        })
        .unwrap();
        let mut appended = Vec::new();
        while log.size_bytes().unwrap() < 3 * 4096 {
            let original = batch(0, 3, 100);
            let info = log.append(&mut original.clone(), 0).unwrap();
            appended.push((info.base_offset, info.last_offset, original));
        }
        assert_eq!(log.segment_count().unwrap(), 1);
        for (base, last, original) in &appended {
            let want = expected(original.clone(), *base);
            for offset in *base..=*last {
                assert_eq!(batch_at(&log, offset), want, "offset {offset}");
            }
        }
    }

    #[test]
    fn bad_input_is_refused_before_anything_is_written() {
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        let log = data.create("t", 0, None).unwrap();
        log.append(&mut batch(0, 2, 10), 0).unwrap();
        let good = batch(0, 1, 10);
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() ^= 1;
        let mut torn = good.clone();
        torn.extend_from_slice(&good[..40]);
        let mut trailing_header = good.clone();
        trailing_header.extend_from_slice(&good[..70]);
        let mut wrong_count = good.clone();
        wrong_count[23..27].copy_from_slice(&5i32.to_be_bytes()); // last offset delta
        let mut large = batch(0, 1, 5000);
        let mut empty = Vec::new();
        let cases: Vec<(&str, &mut Vec<u8>)> = vec![
            ("empty", &mut empty),
            ("crc", &mut flipped),
            ("torn", &mut torn),
            ("trailing", &mut trailing_header),
            ("count", &mut wrong_count),
            ("large", &mut large),
        ];
        for (name, input) in cases {
            let result = log.append(input, 0);
            assert!(
                matches!(
                    result,
                    Err(Error::InvalidBatch(_)
                        | Error::InvalidBatchLayout(_)
                        | Error::BatchTooLarge { .. })
                ),
                "{name}: {result:?}"
            );
        }
        assert_eq!(log.log_end_offset().unwrap(), 2);
        assert_eq!(log.size_bytes().unwrap(), batch(0, 2, 10).len() as u64);
    }

    #[test]
    fn fsync_error_poisons_log() {
        let dir = temp_dir();
        let io = Arc::new(FaultyIo::default());
        let config = LogConfig {
            flush_messages_interval: Some(1),
            ..small_config()
        };
        let data = open_faulty(dir.path(), config.clone(), &io);
        let log = data.create("t", 0, None).unwrap();
        let info = log.append(&mut batch(0, 1, 10), 0).unwrap();
        assert!(info.flushed);
        assert_eq!(log.flushed_offset().unwrap(), 1);
        io.fail_sync.store(true, Ordering::SeqCst);
        let failed = log.append(&mut batch(0, 1, 10), 0);
        assert!(matches!(failed, Err(Error::Io { .. })), "{failed:?}");
        assert!(log.is_poisoned());
        io.fail_sync.store(false, Ordering::SeqCst);
        // Even with the disk healthy again, the log does not pretend.
        for _ in 0..3 {
            assert!(matches!(
                log.append(&mut batch(0, 1, 10), 0),
                Err(Error::Poisoned)
            ));
        }
        assert!(matches!(log.flush(), Err(Error::Poisoned)));
        assert!(matches!(log.truncate_to(0), Err(Error::Poisoned)));
        assert_eq!(log.flushed_offset().unwrap(), 1);
        // Reads still work, and close refuses to write a clean marker.
        assert_eq!(batch_at(&log, 0), batch(0, 1, 10));
        assert!(data.close().is_err());
        assert!(!dir.path().join(fs::CLEAN_SHUTDOWN_FILE).exists());
        // Reopening recovers: the flushed batch is there.
        let data = LogDir::open(dir.path(), config).unwrap();
        let log = data.log("t", 0).unwrap().unwrap();
        assert!(log.log_end_offset().unwrap() >= 1);
        assert_eq!(batch_at(&log, 0), batch(0, 1, 10));
    }

    #[test]
    fn reads_go_on_while_an_append_writes_and_see_it_only_once_written() {
        let dir = temp_dir();
        let io = Arc::new(FaultyIo::default());
        let data = open_faulty(dir.path(), small_config(), &io);
        let log = data.create("t", 0, None).unwrap();
        log.append(&mut batch(0, 2, 10), 0).unwrap();
        let size_bytes = log.size_bytes().unwrap();
        io.hold_writes.store(true, Ordering::SeqCst);
        let appender = {
            let log = Arc::clone(&log);
            std::thread::spawn(move || log.append(&mut batch(0, 3, 10), 0))
        };
        while io.writes_held.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        // The append is inside its write. A reader must neither wait for it (the state lock is
        // free) nor see its bytes. Run in a thread so that a regression fails instead of hanging.
        let (sender, receiver) = std::sync::mpsc::channel();
        let reader = {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                let seen = (
                    log.log_end_offset().unwrap(),
                    log.size_bytes().unwrap(),
                    log.read(2, 1 << 20, true).unwrap().len(),
                    batch_at(&log, 1),
                );
                sender.send(seen).unwrap();
            })
        };
        let seen = receiver.recv_timeout(std::time::Duration::from_secs(60));
        io.hold_writes.store(false, Ordering::SeqCst);
        let (log_end, size_during, tail_len, first) =
            seen.expect("a read waited for an append's write");
        reader.join().unwrap();
        assert_eq!((log_end, size_during, tail_len), (2, size_bytes, 0));
        assert_eq!(first, batch(0, 2, 10));
        let info = appender.join().unwrap().unwrap();
        assert_eq!((info.base_offset, info.position), (2, size_bytes));
        assert_eq!(batch_at(&log, 4), expected(batch(0, 3, 10), 2));
    }

    #[test]
    fn torn_write_poisons_and_recovery_cuts_the_tail() {
        let dir = temp_dir();
        let io = Arc::new(FaultyIo::default());
        let data = open_faulty(dir.path(), small_config(), &io);
        let log = data.create("t", 0, None).unwrap();
        log.append(&mut batch(0, 3, 10), 0).unwrap();
        io.torn_write_bytes.store(40, Ordering::SeqCst);
        assert!(matches!(
            log.append(&mut batch(0, 1, 10), 0),
            Err(Error::Io { .. })
        ));
        assert!(matches!(
            log.append(&mut batch(0, 1, 10), 0),
            Err(Error::Poisoned)
        ));
        drop(log);
        drop(data);
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        let log = data.log("t", 0).unwrap().unwrap();
        assert_eq!(log.log_end_offset().unwrap(), 3);
        assert_eq!(log.size_bytes().unwrap(), batch(0, 3, 10).len() as u64);
        assert_eq!(log.append(&mut batch(0, 1, 10), 0).unwrap().base_offset, 3);
    }

    #[test]
    fn second_open_is_locked() {
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        assert!(matches!(
            LogDir::open(dir.path(), small_config()),
            Err(Error::Locked { .. })
        ));
        drop(data);
        LogDir::open(dir.path(), small_config()).unwrap();
    }

    #[test]
    fn roll_by_time_retention_and_delete_records() {
        let dir = temp_dir();
        let config = LogConfig {
            segment_ms: 1_000,
            retention_ms: Some(10_000),
            segment_bytes: 1 << 20,
            ..small_config()
        };
        let data = LogDir::open(dir.path(), config.clone()).unwrap();
        let log = data.create("t", 0, None).unwrap();
        // Five segments, one per second of caller time, with timestamps 1000 apart.
        for second in 0..5i64 {
            let now_ms = second * 1_000;
            let mut input = batch_with(0, 2, 20, now_ms, 1);
            log.append(&mut input, now_ms).unwrap();
        }
        assert_eq!(log.segment_count().unwrap(), 5);
        assert!(!log.roll_if_needed(4_500).unwrap());
        assert!(log.roll_if_needed(5_000).unwrap());
        assert_eq!(log.segment_count().unwrap(), 6);
        assert!(
            !log.roll_if_needed(5_000).unwrap(),
            "empty active never rolls"
        );

        // Time: segments whose newest timestamp is older than now − 10 s go, oldest first.
        assert_eq!(log.enforce_retention(10_500).unwrap(), 1);
        assert_eq!(log.log_start_offset().unwrap(), 2);
        assert!(matches!(
            log.read(0, 100, true),
            Err(Error::OffsetOutOfRange { .. })
        ));
        // Size: keep at most two segments' worth of bytes.
        let segment_bytes = batch(0, 2, 20).len() as u64;
        log.set_config(LogConfig {
            retention_bytes: Some(2 * segment_bytes),
            ..config.clone()
        })
        .unwrap();
        assert_eq!(log.enforce_retention(10_500).unwrap(), 2);
        assert_eq!(log.log_start_offset().unwrap(), 6);
        assert_eq!(log.size_bytes().unwrap(), 2 * segment_bytes);
        // DeleteRecords moves the start inside a segment, then past it.
        assert_eq!(log.delete_records_before(7).unwrap(), 7);
        assert_eq!(log.segment_count().unwrap(), 3);
        assert_eq!(log.read(7, 1, true).unwrap().position(), 0);
        assert_eq!(log.delete_records_before(8).unwrap(), 8);
        assert_eq!(log.segment_count().unwrap(), 2);
        assert!(log.delete_records_before(11).is_err());
        // The start offset survives a crash (no close).
        drop(log);
        drop(data);
        let data = LogDir::open(dir.path(), config).unwrap();
        let log = data.log("t", 0).unwrap().unwrap();
        assert_eq!(log.log_start_offset().unwrap(), 8);
        assert_eq!(log.log_end_offset().unwrap(), 10);
    }

    #[test]
    fn offset_for_timestamp_matches_a_linear_scan() {
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        let log = data.create("t", 0, None).unwrap();
        let mut records = Vec::new();
        for index in 0..80i64 {
            // Timestamps mostly rise, with some going back (producers' clocks differ).
            let timestamp = 1_000 + index * 100 - if index % 7 == 0 { 450 } else { 0 };
            let mut bytes = batch_with(0, 2, 30, timestamp, 2);
            log.append(&mut bytes, 0).unwrap();
            records.extend(record_times(&bytes));
        }
        for target in (-600..8_200).step_by(37) {
            let want = records
                .iter()
                .find(|(_, timestamp)| *timestamp >= target)
                .map(|(offset, timestamp)| TimestampOffset {
                    offset: *offset,
                    timestamp_ms: *timestamp,
                });
            assert_eq!(log.offset_for_timestamp(target).unwrap(), want, "{target}");
        }
        let (max_offset, max_timestamp_ms) = records
            .iter()
            .copied()
            .reduce(|best, next| if next.1 > best.1 { next } else { best })
            .unwrap();
        assert_eq!(
            log.max_timestamp().unwrap(),
            Some(TimestampOffset {
                offset: max_offset,
                timestamp_ms: max_timestamp_ms,
            })
        );
    }

    /// One batch whose records carry `timestamps` (any order), compressed with `compression`.
    fn batch_of_times(timestamps: &[i64], compression: Compression) -> Vec<u8> {
        let mut builder = BatchBuilder::new(0, compression);
        for (delta, timestamp) in timestamps.iter().enumerate() {
            builder
                .push(&NewRecord {
                    offset_delta: i32::try_from(delta).unwrap(),
                    timestamp: *timestamp,
                    key: None,
                    value: Some(b"value"),
                    headers: &[],
                })
                .unwrap();
        }
        builder.build().unwrap()
    }

    #[test]
    fn time_lookups_answer_the_matching_record_not_its_batch() {
        // Found by Kafka's Java client: ListOffsets by timestamp and MAX_TIMESTAMP answered the
        // batch's base offset and max timestamp. Kafka answers the first record with a timestamp
        // at or after the target (its own offset and timestamp), and for the max timestamp the
        // record holding it.
        for compression in [Compression::None, Compression::Gzip, Compression::Zstd] {
            let dir = temp_dir();
            let data = LogDir::open(dir.path(), small_config()).unwrap();
            let log = data.create("t", 0, None).unwrap();
            log.append(
                &mut batch_of_times(&[100, 300, 200, 500, 400], compression),
                0,
            )
            .unwrap();
            log.append(&mut batch_of_times(&[600, 700], compression), 0)
                .unwrap();
            let at = |target| {
                log.offset_for_timestamp(target)
                    .unwrap()
                    .map(|found| (found.offset, found.timestamp_ms))
            };
            assert_eq!(at(0), Some((0, 100)), "{compression:?}");
            assert_eq!(at(150), Some((1, 300)), "{compression:?}");
            assert_eq!(at(301), Some((3, 500)), "{compression:?}");
            assert_eq!(at(450), Some((3, 500)), "{compression:?}");
            assert_eq!(at(501), Some((5, 600)), "{compression:?}");
            assert_eq!(at(701), None, "{compression:?}");
            let max = log.max_timestamp().unwrap().unwrap();
            assert_eq!((max.offset, max.timestamp_ms), (6, 700), "{compression:?}");
            // The maximum in the middle of a batch: that record's offset.
            let dir = temp_dir();
            let data = LogDir::open(dir.path(), small_config()).unwrap();
            let log = data.create("t", 0, None).unwrap();
            log.append(&mut batch_of_times(&[10, 90, 30], compression), 0)
                .unwrap();
            let max = log.max_timestamp().unwrap().unwrap();
            assert_eq!((max.offset, max.timestamp_ms), (1, 90), "{compression:?}");
        }
    }

    #[test]
    fn time_lookups_skip_records_below_a_log_start_inside_a_batch() {
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        let log = data.create("t", 0, None).unwrap();
        log.append(
            &mut batch_of_times(&[100, 900, 200, 300], Compression::None),
            0,
        )
        .unwrap();
        assert_eq!(log.delete_records_before(2).unwrap(), 2);
        let found = log.offset_for_timestamp(0).unwrap().unwrap();
        assert_eq!((found.offset, found.timestamp_ms), (2, 200));
        // The record with the batch's max timestamp is gone: nothing at or after 900 remains.
        assert_eq!(log.offset_for_timestamp(500).unwrap(), None);
    }

    #[test]
    fn a_log_append_time_batch_answers_its_first_record_at_the_append_time() {
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        let log = data.create("t", 0, None).unwrap();
        let mut builder = BatchBuilder::new(0, Compression::None);
        builder.log_append_time_ms = Some(5_000);
        for delta in 0..3 {
            builder
                .push(&NewRecord {
                    offset_delta: delta,
                    timestamp: 10,
                    key: None,
                    value: None,
                    headers: &[],
                })
                .unwrap();
        }
        log.append(&mut builder.build().unwrap(), 0).unwrap();
        let found = log.offset_for_timestamp(4_000).unwrap().unwrap();
        assert_eq!((found.offset, found.timestamp_ms), (0, 5_000));
        let max = log.max_timestamp().unwrap().unwrap();
        assert_eq!((max.offset, max.timestamp_ms), (0, 5_000));
    }

    #[test]
    fn an_append_flushed_in_buffer_mode_is_not_reported_flushed() {
        // Found by tests/power_loss.rs (seed 12): with `persist_mode = Buffer` and a flush policy,
        // appends said `flushed: true` though nothing was synced, and a power cut lost them.
        let dir = temp_dir();
        let config = LogConfig {
            flush_messages_interval: Some(1),
            persist_mode: PersistMode::Buffer,
            ..small_config()
        };
        let data = LogDir::open(dir.path(), config).unwrap();
        let log = data.create("t", 0, None).unwrap();
        let info = log.append(&mut batch(0, 1, 10), 0).unwrap();
        assert!(!info.flushed);
        assert_eq!(log.flushed_offset().unwrap(), 0);
    }

    #[test]
    fn offset_for_timestamp_skips_batches_below_the_log_start() {
        // Found by tests/power_loss.rs (seed 1): DeleteRecords inside a segment left its older
        // batches in place, and a time lookup answered with one of them (its timestamp, with the
        // offset clamped to the log start), as Kafka does not.
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        let log = data.create("t", 0, None).unwrap();
        for timestamp in [3_000, 1_000, 2_000] {
            log.append(&mut batch_with(0, 1, 10, timestamp, 1), 0)
                .unwrap();
        }
        assert_eq!(log.delete_records_before(1).unwrap(), 1);
        assert_eq!(log.segment_count().unwrap(), 1);
        let found = log.offset_for_timestamp(0).unwrap().unwrap();
        assert_eq!((found.offset, found.timestamp_ms), (1, 1_000));
        let found = log.offset_for_timestamp(1_500).unwrap().unwrap();
        assert_eq!((found.offset, found.timestamp_ms), (2, 2_000));
    }

    #[test]
    fn truncate_keeps_outstanding_slices_intact() {
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        let log = data.create("t", 0, None).unwrap();
        for _ in 0..40 {
            log.append(&mut batch(0, 2, 50), 0).unwrap();
        }
        let end = log.log_end_offset().unwrap();
        // A slice of the active segment, held while truncation runs.
        let held = log.read(end - 2, 1 << 20, true).unwrap();
        let held_bytes = held.bytes().unwrap();
        let copy = held_bytes.to_vec();
        let new_end = log.truncate_to(end - 3).unwrap();
        assert_eq!(new_end, end - 4, "the straddling batch goes whole");
        assert_eq!(log.log_end_offset().unwrap(), new_end);
        let info = log.append(&mut batch(0, 2, 90), 0).unwrap();
        assert_eq!(info.base_offset, new_end);
        assert_eq!(held_bytes.to_vec(), copy, "mapping unchanged");
        let mut reread = vec![0u8; copy.len()];
        assert_eq!(held.read_at(0, &mut reread).unwrap(), copy.len());
        assert_eq!(reread, copy, "file unchanged");
        // Truncation into an earlier segment, without readers: in place.
        drop((held, held_bytes));
        // Read first, so its descriptor sits in the set of recent files: that is not a reader.
        log.read(0, 1 << 20, true).unwrap();
        let first = dir.path().join("t-0/00000000000000000000.log");
        let inode =
            |path: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(path).unwrap());
        let inode_before = inode(&first);
        assert_eq!(log.truncate_to(5).unwrap(), 4);
        assert_eq!(inode(&first), inode_before, "cut in place, not copied");
        assert_eq!(log.segment_count().unwrap(), 1);
        assert_eq!(log.append(&mut batch(0, 1, 5), 0).unwrap().base_offset, 4);
        // And it holds after a crash.
        drop(log);
        drop(data);
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        let log = data.log("t", 0).unwrap().unwrap();
        assert_eq!(log.log_end_offset().unwrap(), 5);
        assert_eq!(batch_at(&log, 4), expected(batch(0, 1, 5), 4));
    }

    #[test]
    fn truncation_below_the_log_start_lowers_the_start_only_after_the_cut() {
        // Found by tests/power_loss.rs (seed 2509): the start was lowered in the checkpoint
        // written before the cut, so a crash in between brought back the whole log under a start
        // the leader-epoch cache (moved to the old start) did not cover.
        let dir = temp_dir();
        let io = Arc::new(FaultyIo::default());
        let data = open_faulty(dir.path(), small_config(), &io);
        let log = data.create("t", 0, None).unwrap();
        log.append_with_epoch(&mut batch(0, 2, 10), 3, 0).unwrap();
        log.append_with_epoch(&mut batch(0, 4, 10), 5, 0).unwrap();
        log.flush().unwrap();
        log.delete_records_before(4).unwrap();
        let epochs = log.epoch_entries().unwrap();
        assert_eq!(
            epochs,
            [EpochEntry {
                epoch: 5,
                start_offset: 4
            }]
        );
        // The cut goes to 2, below the start: the checkpoint (two syncs) is written, then the
        // segment's sync fails.
        io.fail_sync_after.store(2, Ordering::SeqCst);
        io.fail_sync.store(true, Ordering::SeqCst);
        assert!(log.truncate_to(5).is_err());
        io.fail_sync.store(false, Ordering::SeqCst);
        let checkpoint = dir_checkpoint(dir.path()).unwrap();
        assert_eq!(
            checkpoint,
            Checkpoint {
                log_start_offset: 4,
                recovery_point: 2
            },
            "before the cut only the recovery point drops"
        );
        drop((log, data));
        // The cut itself reached the file (only its sync failed): the log is empty at 2.
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        let log = data.log("t", 0).unwrap().unwrap();
        assert_eq!(
            (
                log.log_start_offset().unwrap(),
                log.log_end_offset().unwrap()
            ),
            (2, 2)
        );
        assert_eq!(log.epoch_entries().unwrap(), []);
        // Without a failure the start drops to the new end at once.
        log.append_with_epoch(&mut batch(0, 4, 10), 6, 0).unwrap();
        log.delete_records_before(4).unwrap();
        assert_eq!(log.truncate_to(3).unwrap(), 2);
        assert_eq!(log.log_start_offset().unwrap(), 2);
        assert_eq!(
            dir_checkpoint(dir.path()),
            Some(Checkpoint {
                log_start_offset: 2,
                recovery_point: 2
            })
        );
    }

    #[test]
    fn slices_survive_retention_deleting_their_segment() {
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        let log = data.create("t", 0, None).unwrap();
        for _ in 0..40 {
            log.append(&mut batch(0, 2, 50), 0).unwrap();
        }
        let held = log.read(0, 1 << 20, true).unwrap();
        let before = held.bytes().unwrap().to_vec();
        log.delete_records_before(60).unwrap();
        assert!(!dir.path().join("t-0/00000000000000000000.log").exists());
        assert_eq!(held.bytes().unwrap().to_vec(), before);
        data.delete("t", 0).unwrap();
        assert_eq!(held.bytes().unwrap().to_vec(), before);
        assert!(matches!(
            log.append(&mut batch(0, 1, 1), 0),
            Err(Error::Closed)
        ));
        assert!(data.list().unwrap().is_empty());
    }

    /// The entry of `t-0` in the offset checkpoint of the data directory `data_dir`.
    fn dir_checkpoint(data_dir: &Path) -> Option<Checkpoint> {
        dir_checkpoint_of(data_dir, "t")
    }

    /// The entry of partition 0 of `topic` in the offset checkpoint of `data_dir`.
    fn dir_checkpoint_of(data_dir: &Path, topic: &str) -> Option<Checkpoint> {
        let path = data_dir.join(crate::offset_checkpoint::OFFSET_CHECKPOINT_FILE);
        let bytes = std::fs::read(path).ok()?;
        let entries = crate::offset_checkpoint::parse(&bytes).unwrap();
        entries.get(&(topic.to_owned(), 0)).copied()
    }

    #[test]
    fn flushes_publish_the_recovery_point_at_the_next_directory_checkpoint() {
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), small_config()).unwrap();
        let log = data.create("t", 0, None).unwrap();
        let read_checkpoint = || dir_checkpoint(dir.path());
        log.append(&mut batch(0, 1, 10), 0).unwrap();
        log.flush().unwrap();
        // A flush only updates the table: no checkpoint write on the append path.
        assert_eq!(log.flushed_offset().unwrap(), 1);
        assert!(read_checkpoint().is_none_or(|c| c.recovery_point == 0));
        // Nor does retention that deletes nothing (it runs often; the write would fsync), nor
        // a roll.
        assert_eq!(log.enforce_retention(0).unwrap(), 0);
        while log.segment_count().unwrap() < 3 {
            log.append(&mut batch(0, 2, 200), 0).unwrap();
        }
        assert!(read_checkpoint().is_none_or(|c| c.recovery_point == 0));
        log.flush().unwrap();
        let end = log.log_end_offset().unwrap();
        data.checkpoint_recovery_points().unwrap();
        assert_eq!(read_checkpoint().unwrap().recovery_point, end);
        // Unsynced appends are synced by the checkpoint itself.
        log.append(&mut batch(0, 2, 10), 0).unwrap();
        data.checkpoint_recovery_points().unwrap();
        assert_eq!(read_checkpoint().unwrap().recovery_point, end + 2);
        assert_eq!(log.flushed_offset().unwrap(), end + 2);
    }
}
