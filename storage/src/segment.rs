//! One segment: the `.log` file of whole v2 batches plus its `.index` and `.timeindex`, named by
//! the base offset, and its `.txnindex` (aborted transactions, `txn_index`) when it has one.
//! Owns appending bytes at the end, keeping the indexes in step with the log (one function,
//! [`Segment::track_batch`], for appends, scans and rebuilds), locating the batch that holds an
//! offset, truncation, and checking the `.txnindex` against the ABORT markers after a crash. Not thread-safe on its own: `Log` serializes access
//! (and writes an append's bytes through an [`AppendTarget`] outside its state lock).
//! Must never write below `size_bytes` of a file a reader may hold (truncation of a shared file
//! writes a new inode instead), nor trust an index entry without checking the header it names,
//! nor read its `.log` view at or past `size_bytes`.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use memmap2::Mmap;
use skiff_protocol::limits::DECOMPRESSED_BYTES_MAX;
use skiff_protocol::records::record::batch_records;
use skiff_protocol::records::txn::{EndTxnMarker, MarkerType};
use skiff_protocol::records::v2::BatchHeader;
use skiff_protocol::records::RecordError;

use crate::config::{LogConfig, PersistMode};
use crate::error::{Error, Result};
use crate::fs::{
    self, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TRUNCATING_SUFFIX, TXN_INDEX_SUFFIX,
};
use crate::io::{FileIo, OpenMode};
use crate::limits::{self, HEADER_READ_BYTES, OFFSET_INDEX_ENTRY_BYTES, TIME_INDEX_ENTRY_BYTES};
use crate::log_files::{LogFiles, NOT_IN_SET};
use crate::mmap;
use crate::offset_index::{OffsetEntry, OffsetIndex};
use crate::recovery::{self, ScanEnd, ScanProblem};
use crate::time_index::{TimeEntry, TimeIndex};
use crate::txn_index::{self, TxnIndex};

/// Bytes copied per step when truncation copies a shared file's kept prefix.
const TRUNCATE_COPY_CHUNK_BYTES: usize = 1 << 20;

/// A segment of a partition log.
#[derive(Debug)]
pub(crate) struct Segment {
    /// Offset of the segment's first possible record; its files are named by it.
    pub(crate) base_offset: i64,
    log_path: Arc<Path>,
    /// Whether the segment takes appends (the last of its log). Its `.log` descriptor is not
    /// held here, active or not: appends, reads and flushes get one through [`LogFiles`], so
    /// an idle segment holds none.
    active: bool,
    /// The descriptor last handed out for `.log` (to [`LogFiles`], an append, a `FetchSlice`):
    /// reused while anyone holds it, so a file has one descriptor at a time and truncation can
    /// tell whether a reader holds it.
    shared_log: Mutex<Weak<File>>,
    log_files: Arc<LogFiles>,
    /// Names this segment in `log_files`.
    log_files_id: u64,
    /// Tick of this segment's last touch of `log_files` ([`NOT_IN_SET`] when it is not there).
    log_files_tick: AtomicU64,
    /// Bytes of whole batches in `.log`.
    pub(crate) size_bytes: u64,
    /// Offset after the last batch, or `base_offset` if empty.
    pub(crate) next_offset: i64,
    index: OffsetIndex,
    time_index: TimeIndex,
    /// The aborted transactions whose ABORT marker this segment holds (`.txnindex`).
    pub(crate) txn: TxnIndex,
    /// Index interval in force (`LogConfig::index_interval_bytes`).
    pub(crate) index_interval_bytes: u32,
    bytes_since_index_entry: u64,
    /// Greatest batch max timestamp, −1 if none.
    pub(crate) max_timestamp_ms: i64,
    offset_of_max_timestamp: i64,
    /// Caller's time of the first append, the base of `segment_ms` rolls; after a restart, the
    /// first batch's max timestamp stands in (as Kafka does).
    pub(crate) first_append_ms: Option<i64>,
    /// Read-only view of `.log` while the segment is active, longer than the file (see
    /// [`mmap::map_read_ahead`]): batch headers on the read path come from it instead of a
    /// `pread`, which was three quarters of a warm lookup's time. Only the active segment has one,
    /// so a partition holds one such mapping, not one per segment (`vm.max_map_count`); lookups
    /// in sealed segments `pread`.
    log_view: Option<Mmap>,
}

/// Bytes of the active segment's `.log` view: as far as the segment can grow under its
/// configuration (a batch larger than `segment_bytes` can fill an empty segment), capped by the
/// 4-byte positions. Reads past it fall back to `pread` (say, after `segment_bytes` was raised).
fn log_view_bytes(config: &LogConfig, size_bytes: u64) -> u64 {
    config
        .segment_bytes
        .max(u64::from(config.batch_bytes_max))
        .max(size_bytes)
        .min(limits::SEGMENT_BYTES_MAX)
}

fn index_capacity(config: &LogConfig, entry_bytes: usize) -> u32 {
    // Whole entries only, so the file length is always a multiple of the entry size.
    let entries = config.index_bytes_max as usize / entry_bytes;
    u32::try_from(entries * entry_bytes).unwrap_or(u32::MAX)
}

impl Segment {
    /// Creates an empty segment at `base_offset` in `dir`.
    pub(crate) fn create(
        io: &dyn FileIo,
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        log_files: &Arc<LogFiles>,
    ) -> Result<Self> {
        let log_path = fs::segment_file(dir, base_offset, LOG_SUFFIX);
        let log = io
            .open(&log_path, OpenMode::CreateNew)
            .map_err(|error| Error::io(&log_path, error))?;
        let (index, time_index) = Self::create_indexes(io, dir, base_offset, config)?;
        // A new segment has no aborted transaction: a file left by an older one at this base
        // (deleted with its log) must not lend it entries.
        txn_index::remove_if_present(io, &fs::segment_file(dir, base_offset, TXN_INDEX_SUFFIX))?;
        let mut segment = Self::assemble(
            base_offset,
            &log_path,
            &Arc::new(log),
            index,
            time_index,
            config,
            base_offset,
            log_files,
        );
        segment.map_log_view(io, config)?;
        Ok(segment)
    }

    /// The `.log` descriptor, shared with whoever holds it now or else reopened, and marked as
    /// recently used in [`LogFiles`] (unless it was, lately: [`LogFiles::is_fresh`]).
    pub(crate) fn log_file(&self, io: &dyn FileIo) -> Result<Arc<File>> {
        let mut shared = self.shared_log.lock().map_err(|_| Error::Poisoned)?;
        let file = match shared.upgrade() {
            Some(file) => {
                if self
                    .log_files
                    .is_fresh(self.log_files_tick.load(Ordering::Relaxed))
                {
                    return Ok(file);
                }
                file
            }
            None => {
                let file = Arc::new(
                    io.open(&self.log_path, OpenMode::ReadWrite)
                        .map_err(|error| Error::io(&*self.log_path, error))?,
                );
                *shared = Arc::downgrade(&file);
                file
            }
        };
        // Under `shared_log`'s lock, so the tick stored is this segment's latest.
        self.remember(&file);
        Ok(file)
    }

    /// Puts `file`, this segment's `.log`, in [`LogFiles`] as just used.
    fn remember(&self, file: &Arc<File>) {
        let tick = self.log_files.touch(self.log_files_id, file);
        self.log_files_tick.store(tick, Ordering::Relaxed);
    }

    /// Takes this segment's `.log` out of [`LogFiles`] (the caller's handle, if any, is all that
    /// is left once readers let go).
    fn forget_file(&self) {
        self.log_files_tick.store(NOT_IN_SET, Ordering::Relaxed);
        drop(self.log_files.remove(self.log_files_id));
    }

    /// Maps the active segment's `.log` view (replacing any earlier one). The mapping outlives
    /// the descriptor it was made through.
    fn map_log_view(&mut self, io: &dyn FileIo, config: &LogConfig) -> Result<()> {
        self.log_view = None;
        let Ok(len) = usize::try_from(log_view_bytes(config, self.size_bytes)) else {
            // A target whose address space cannot hold the view reads with `pread`.
            return Ok(());
        };
        let view = mmap::map_read_ahead(&*self.log_file(io)?, len)
            .map_err(|error| Error::io(&*self.log_path, error))?;
        self.log_view = Some(view);
        Ok(())
    }

    /// `len` bytes of `.log` from `position` through the view, if it covers them. The caller
    /// guarantees `position + len` is within the file (at most `size_bytes` or the file length
    /// just read).
    fn viewed(&self, position: u64, len: usize) -> Option<&[u8]> {
        let start = usize::try_from(position).ok()?;
        self.log_view.as_ref()?.get(start..start.checked_add(len)?)
    }

    /// Creates fresh, empty, preallocated index files, unlinking old ones first so a mapping of
    /// an old file never sees it shrink.
    fn create_indexes(
        io: &dyn FileIo,
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
    ) -> Result<(OffsetIndex, TimeIndex)> {
        let index_path = fs::segment_file(dir, base_offset, INDEX_SUFFIX);
        let time_path = fs::segment_file(dir, base_offset, TIME_INDEX_SUFFIX);
        for path in [&index_path, &time_path] {
            match io.remove_file(path) {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(Error::io(path, error)),
            }
        }
        let index = OffsetIndex::create(
            io,
            &index_path,
            base_offset,
            index_capacity(config, OFFSET_INDEX_ENTRY_BYTES),
        )?;
        let time_index = TimeIndex::create(
            io,
            &time_path,
            base_offset,
            index_capacity(config, TIME_INDEX_ENTRY_BYTES),
        )?;
        Ok((index, time_index))
    }

    /// Opens an existing segment and brings its indexes in line with its log.
    ///
    /// `trusted`: every batch was flushed (below the recovery point, or after a clean shutdown);
    /// then indexes that pass their checks are kept and only the bytes after the last index entry
    /// are scanned. Otherwise, or if that tail scan finds anything wrong, the whole log is scanned
    /// and the indexes rebuilt. `expected_offset` is the previous segment's next offset. A batch
    /// that fails the checks where the expected offset is below `recovery_point` is corruption of
    /// flushed data: an error naming file and position, with nothing cut. From the recovery point
    /// on, the log is cut there (a torn tail); the returned flag says whether it was.
    #[allow(clippy::too_many_arguments)] // each is one fact recovery needs; a struct would only rename them
    pub(crate) fn recover(
        io: &dyn FileIo,
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        trusted: bool,
        expected_offset: i64,
        recovery_point: i64,
        log_files: &Arc<LogFiles>,
    ) -> Result<(Self, bool)> {
        let log_path = fs::segment_file(dir, base_offset, LOG_SUFFIX);
        let log = io
            .open(&log_path, OpenMode::ReadWrite)
            .map_err(|error| Error::io(&log_path, error))?;
        let file_bytes = io.len(&log).map_err(|error| Error::io(&log_path, error))?;
        if file_bytes > limits::SEGMENT_BYTES_MAX {
            return Err(Error::corrupt(
                &log_path,
                limits::SEGMENT_BYTES_MAX,
                "segment larger than 4-byte positions allow",
            ));
        }
        let log = Arc::new(log);
        let expected_offset = expected_offset.max(base_offset);
        let assemble = |index, time_index| {
            Self::assemble(
                base_offset,
                &log_path,
                &log,
                index,
                time_index,
                config,
                expected_offset,
                log_files,
            )
        };
        if trusted {
            if let Some((index, time_index)) = Self::open_indexes(io, dir, base_offset, file_bytes)?
            {
                let mut segment = assemble(index, time_index);
                if segment.resume_tail(io, file_bytes)? {
                    segment.first_append_ms = segment.first_batch_timestamp(io)?;
                    segment.open_txn_index(io, true)?;
                    return Ok((segment, false));
                }
            }
        }
        let (index, time_index) = Self::create_indexes(io, dir, base_offset, config)?;
        let mut segment = assemble(index, time_index);
        let end = segment.scan_from(io, 0, expected_offset, file_bytes)?;
        if let Some(problem) = end.problem {
            if end.next_offset < recovery_point {
                return Err(Error::corrupt(
                    &log_path,
                    end.valid_bytes,
                    problem.to_string(),
                ));
            }
        }
        let cut = end.valid_bytes < file_bytes;
        if cut {
            io.set_len(&log, end.valid_bytes)
                .map_err(|error| Error::io(&log_path, error))?;
            io.sync(&log, PersistMode::SyncData)
                .map_err(|error| Error::io(&log_path, error))?;
        }
        segment.first_append_ms = segment.first_batch_timestamp(io)?;
        segment.open_txn_index(io, trusted)?;
        Ok((segment, cut))
    }

    /// Reads the `.txnindex` as recovery finds it (see [`TxnIndex::open`]; `strict` for synced
    /// data) and drops the entries whose marker lies past the recovered end.
    fn open_txn_index(&mut self, io: &dyn FileIo, strict: bool) -> Result<()> {
        let path = self.txn.path().to_path_buf();
        self.txn = TxnIndex::open(io, path, self.base_offset, strict)?;
        self.txn.truncate_from(io, self.next_offset)
    }

    #[allow(clippy::too_many_arguments)] // the parts of a segment, each from a different source
    fn assemble(
        base_offset: i64,
        log_path: &Path,
        log: &Arc<File>,
        index: OffsetIndex,
        time_index: TimeIndex,
        config: &LogConfig,
        expected_offset: i64,
        log_files: &Arc<LogFiles>,
    ) -> Self {
        let mut segment = Self {
            base_offset,
            log_path: log_path.into(),
            active: true,
            shared_log: Mutex::new(Arc::downgrade(log)),
            log_files: Arc::clone(log_files),
            log_files_id: log_files.segment_id(),
            log_files_tick: AtomicU64::new(NOT_IN_SET),
            size_bytes: 0,
            next_offset: expected_offset,
            index,
            time_index,
            txn: TxnIndex::empty(log_path.with_extension(TXN_INDEX_SUFFIX), base_offset),
            index_interval_bytes: config.index_interval_bytes,
            bytes_since_index_entry: 0,
            max_timestamp_ms: -1,
            offset_of_max_timestamp: base_offset,
            first_append_ms: None,
            log_view: None,
        };
        segment.remember(log);
        if let Some(last) = segment.time_index.last() {
            segment.max_timestamp_ms = last.timestamp_ms;
            segment.offset_of_max_timestamp = last.offset;
        }
        segment
    }

    /// With kept indexes: checks that the last index entry names a batch with exactly its offset,
    /// then scans from there to the end. `false` if anything is off (the caller rebuilds).
    fn resume_tail(&mut self, io: &dyn FileIo, file_bytes: u64) -> Result<bool> {
        let (start_position, start_offset) = match self.index.last() {
            None => (0, self.next_offset),
            Some(OffsetEntry { offset, position }) => {
                match self.read_header_within(io, u64::from(position), file_bytes) {
                    Ok(header) if header.base_offset == offset => {
                        // Both indexes get their entries together (`track_batch`), the time
                        // entry with the greatest timestamp up to and including this batch. A
                        // time index that does not reach it (emptied, or cut by whole entries)
                        // would hide the batches before this one from time lookups, which the
                        // scan below does not revisit: rebuild instead.
                        let covered = self
                            .time_index
                            .last()
                            .is_some_and(|last| last.timestamp_ms >= header.max_timestamp);
                        if !covered {
                            return Ok(false);
                        }
                        (u64::from(position), offset)
                    }
                    _ => return Ok(false),
                }
            }
        };
        let end = self.scan_from(io, start_position, start_offset, file_bytes)?;
        if end.problem.is_some() {
            return Ok(false);
        }
        // The last time entry carries the segment's greatest timestamp (retention and time
        // lookups rely on it): it must name a real batch with exactly that timestamp.
        if let Some(TimeEntry {
            timestamp_ms,
            offset,
        }) = self.time_index.last()
        {
            match self.find_batch(io, offset) {
                Ok(Some((_, header)))
                    if header.base_offset == offset && header.max_timestamp == timestamp_ms => {}
                _ => return Ok(false),
            }
        }
        Ok(true)
    }

    /// Opens both indexes if they exist and pass their sanity checks against a log of
    /// `log_bytes`.
    fn open_indexes(
        io: &dyn FileIo,
        dir: &Path,
        base_offset: i64,
        log_bytes: u64,
    ) -> Result<Option<(OffsetIndex, TimeIndex)>> {
        let index_path = fs::segment_file(dir, base_offset, INDEX_SUFFIX);
        let time_path = fs::segment_file(dir, base_offset, TIME_INDEX_SUFFIX);
        let Some(index) = OffsetIndex::open(io, &index_path, base_offset)? else {
            return Ok(None);
        };
        let Some(time_index) = TimeIndex::open(io, &time_path, base_offset)? else {
            return Ok(None);
        };
        let next_bound = base_offset
            .saturating_add(i64::from(u32::MAX))
            .saturating_add(1);
        if !index.is_sane_for(log_bytes) || !time_index.is_sane_for(next_bound) {
            return Ok(None);
        }
        Ok(Some((index, time_index)))
    }

    /// Scans the log bytes `[start_position, file_bytes)` and tracks every accepted batch.
    fn scan_from(
        &mut self,
        io: &dyn FileIo,
        start_position: u64,
        start_offset: i64,
        file_bytes: u64,
    ) -> Result<ScanEnd> {
        self.size_bytes = start_position;
        if file_bytes <= start_position {
            return Ok(ScanEnd {
                valid_bytes: start_position,
                next_offset: self.next_offset,
                problem: (file_bytes < start_position).then_some(ScanProblem::IndexPastEnd),
            });
        }
        let len = usize::try_from(file_bytes)
            .map_err(|_| Error::corrupt(&*self.log_path, 0, "segment too large to map"))?;
        let map = mmap::map_read(&*self.log_file(io)?, 0, len)
            .map_err(|error| Error::io(&*self.log_path, error))?;
        let base_offset = self.base_offset;
        let end = recovery::scan(
            &map,
            start_position,
            start_offset,
            base_offset,
            |position, header| {
                self.track_batch(position, header);
            },
        );
        if end.valid_bytes > start_position || end.problem.is_none() {
            self.next_offset = self.next_offset.max(end.next_offset);
        }
        Ok(end)
    }

    /// Keeps size, next offset, max timestamp and both indexes in step with one batch written at
    /// `position`. The one place these rules live: appends, recovery scans and rebuilds call it.
    pub(crate) fn track_batch(&mut self, position: u32, header: &BatchHeader) {
        if header.max_timestamp > self.max_timestamp_ms {
            self.max_timestamp_ms = header.max_timestamp;
            self.offset_of_max_timestamp = header.base_offset;
        }
        if self.bytes_since_index_entry > u64::from(self.index_interval_bytes) {
            // A full index only makes lookups scan further; the next append rolls the segment.
            let _ = self.index.append(header.base_offset, position);
            let _ = self
                .time_index
                .maybe_append(self.max_timestamp_ms, self.offset_of_max_timestamp);
            self.bytes_since_index_entry = 0;
        }
        let size_bytes = header.total_bytes() as u64;
        self.bytes_since_index_entry += size_bytes;
        self.size_bytes = u64::from(position) + size_bytes;
        self.next_offset = header.next_offset();
    }

    /// Where the next append goes: the end of the log. The caller writes there (see
    /// [`AppendTarget`]), then calls [`Segment::track_appended`].
    pub(crate) fn append_target(&self, io: &dyn FileIo) -> Result<AppendTarget> {
        if !self.active {
            return Err(Error::Closed);
        }
        Ok(AppendTarget {
            file: self.log_file(io)?,
            path: Arc::clone(&self.log_path),
            position: self.size_bytes,
        })
    }

    /// Tracks validated batches with assigned offsets that were written at `position`, which must
    /// still be the end of the log (`false`, and nothing tracked, if it is not).
    pub(crate) fn track_appended(&mut self, batches: &[u8], position: u64, now_ms: i64) -> bool {
        if position != self.size_bytes {
            return false;
        }
        let mut at = 0usize;
        while let Some(rest) = batches.get(at..).filter(|rest| !rest.is_empty()) {
            // The caller validated every batch, so the headers parse; stop defensively if not.
            let Ok(header) = BatchHeader::parse(rest) else {
                break;
            };
            let Ok(batch_position) = u32::try_from(position + at as u64) else {
                break;
            };
            self.track_batch(batch_position, &header);
            at += header.total_bytes();
        }
        if self.first_append_ms.is_none() {
            self.first_append_ms = Some(now_ms);
        }
        true
    }
}

/// The end of a segment's log as an append found it, written without the log's state lock.
///
/// Why apart from the segment: the page-cache copy of an append is most of its cost (a 16 KiB
/// batch into fresh page-cache pages is some 10 µs, against under 1 µs for the rest of the
/// engine's work), and readers need not wait for it: bytes past `size_bytes` are invisible to
/// them until [`Segment::track_appended`] moves the end, under the lock. `Log` serializes appends
/// (and every other change to the segments) with its writer lock, so nothing else writes here or
/// moves the end meanwhile, and the target's handle on the file is dropped before that lock is.
#[derive(Debug)]
pub(crate) struct AppendTarget {
    file: Arc<File>,
    path: Arc<Path>,
    /// Byte position of the end of the log when the target was taken.
    pub(crate) position: u64,
}

impl AppendTarget {
    /// Writes `batches` at the target (one positioned write).
    pub(crate) fn write(&self, io: &dyn FileIo, batches: &[u8]) -> Result<()> {
        io.write_all_at(&self.file, batches, self.position)
            .map_err(|error| Error::io(&*self.path, error))
    }
}

impl Segment {
    /// Path of the log file.
    pub(crate) fn log_path(&self) -> &Arc<Path> {
        &self.log_path
    }

    /// Whether the segment holds no batch.
    pub(crate) fn is_empty(&self) -> bool {
        self.size_bytes == 0
    }

    /// Whether either index is full (the segment must roll before the next append).
    pub(crate) fn indexes_full(&self) -> bool {
        self.index.is_full() || self.time_index.is_full()
    }

    /// Reads and parses the batch header at `position`, which must lie below `size_bytes`.
    pub(crate) fn read_header(&self, io: &dyn FileIo, position: u64) -> Result<BatchHeader> {
        self.read_header_within(io, position, self.size_bytes)
    }

    fn read_header_within(
        &self,
        io: &dyn FileIo,
        position: u64,
        end_bytes: u64,
    ) -> Result<BatchHeader> {
        let corrupt = |reason: String| Error::corrupt(&*self.log_path, position, reason);
        if position + HEADER_READ_BYTES as u64 > end_bytes {
            return Err(corrupt(
                "batch header past the end of the segment".to_owned(),
            ));
        }
        // `end_bytes` is `size_bytes` or the file length just read, so the view is read only
        // below the end of the file, as it must be.
        let parsed = match self.viewed(position, HEADER_READ_BYTES) {
            Some(bytes) => BatchHeader::parse(bytes),
            None => {
                let mut header = [0u8; HEADER_READ_BYTES];
                io.read_exact_at(&*self.log_file(io)?, &mut header, position)
                    .map_err(|error| Error::io(&*self.log_path, error))?;
                BatchHeader::parse(&header)
            }
        }
        .map_err(|error| corrupt(error.to_string()))?;
        if position + parsed.total_bytes() as u64 > end_bytes {
            return Err(corrupt(
                "batch extends past the end of the segment".to_owned(),
            ));
        }
        Ok(parsed)
    }

    pub(crate) fn first_batch_timestamp(&self, io: &dyn FileIo) -> Result<Option<i64>> {
        if self.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.read_header(io, 0)?.max_timestamp))
    }

    /// Position and header of the first batch whose last offset is ≥ `target`, if any. Starts
    /// from the index's entry for `target`, verified against the header found there; an entry
    /// that does not match (a damaged index) falls back to the start of the segment.
    pub(crate) fn find_batch(
        &self,
        io: &dyn FileIo,
        target: i64,
    ) -> Result<Option<(u64, BatchHeader)>> {
        let OffsetEntry { offset, position } = self.index.lookup(target);
        let mut position = u64::from(position);
        if position > 0 {
            match self.read_header(io, position) {
                // The common case with batches at least one index interval long: the indexed
                // batch is the answer, found with one pread.
                Ok(header) if header.base_offset == offset && header.last_offset() >= target => {
                    return Ok(Some((position, header)));
                }
                Ok(header) if header.base_offset == offset => {
                    position += header.total_bytes() as u64;
                }
                _ => position = 0,
            }
        }
        self.first_batch_from(io, position, |header| header.last_offset() >= target)
    }

    /// First batch with max timestamp ≥ `target_ms` that holds an offset ≥ `from_offset` (the log
    /// start offset: batches wholly below it are deleted records), at or after the time index's
    /// starting point.
    pub(crate) fn find_timestamp(
        &self,
        io: &dyn FileIo,
        target_ms: i64,
        from_offset: i64,
    ) -> Result<Option<(u64, BatchHeader)>> {
        // An entry is used only if the batch it names is really there with that timestamp (a
        // damaged index must not hide batches); otherwise the scan starts at the segment's start.
        let mut position = 0;
        if let Some(entry) = self.time_index.lookup(target_ms) {
            if let Some((found, header)) = self.find_batch(io, entry.offset)? {
                if header.base_offset == entry.offset && header.max_timestamp == entry.timestamp_ms
                {
                    position = found;
                }
            }
        }
        self.first_batch_from(io, position, |header| {
            header.max_timestamp >= target_ms && header.last_offset() >= from_offset
        })
    }

    /// The first record with a timestamp ≥ `target_ms` and an offset ≥ `from_offset`, as
    /// (offset, timestamp) — Kafka's `LogSegment.findOffsetByTimestamp`: the batch comes from the
    /// time index ([`Segment::find_timestamp`]), then its records are read (decompressed under
    /// [`DECOMPRESSED_BYTES_MAX`]) for the exact one; a batch that has none (its late records
    /// lie below `from_offset`) passes the search to the next. In a LogAppendTime batch every
    /// record carries the batch's time.
    pub(crate) fn find_record_by_timestamp(
        &self,
        io: &dyn FileIo,
        target_ms: i64,
        from_offset: i64,
    ) -> Result<Option<(i64, i64)>> {
        let Some((mut position, _)) = self.find_timestamp(io, target_ms, from_offset)? else {
            return Ok(None);
        };
        let mut batch = Vec::new();
        let mut scratch = Vec::new();
        while position < self.size_bytes {
            let header = self.read_header(io, position)?;
            if header.max_timestamp >= target_ms && header.last_offset() >= from_offset {
                let bytes = match self.viewed(position, header.total_bytes()) {
                    Some(bytes) => bytes,
                    None => {
                        batch.resize(header.total_bytes(), 0);
                        io.read_exact_at(&*self.log_file(io)?, &mut batch, position)
                            .map_err(|error| Error::io(&*self.log_path, error))?;
                        &batch[..]
                    }
                };
                let found =
                    first_record_at_or_after(bytes, &header, target_ms, from_offset, &mut scratch)
                        .map_err(|error| {
                            Error::corrupt(&*self.log_path, position, error.to_string())
                        })?;
                if found.is_some() {
                    return Ok(found);
                }
            }
            position += header.total_bytes() as u64;
        }
        Ok(None)
    }

    /// The one header walk of the read path: from `position`, the first batch satisfying `stop`.
    fn first_batch_from(
        &self,
        io: &dyn FileIo,
        mut position: u64,
        stop: impl Fn(&BatchHeader) -> bool,
    ) -> Result<Option<(u64, BatchHeader)>> {
        while position < self.size_bytes {
            let header = self.read_header(io, position)?;
            if stop(&header) {
                return Ok(Some((position, header)));
            }
            position += header.total_bytes() as u64;
        }
        Ok(None)
    }

    /// Leaves the active role: records the final time-index entry (so the segment's greatest
    /// timestamp survives a restart), trims both indexes to their entries and drops the `.log`
    /// view (readers keep their descriptors; the set of open files forgets it in its time).
    pub(crate) fn seal(&mut self, io: &dyn FileIo) -> Result<()> {
        self.seal_with(io, true)
    }

    /// [`Segment::seal`]; with `msync` false the indexes' pages are left for a file-system sync.
    fn seal_with(&mut self, io: &dyn FileIo, msync: bool) -> Result<()> {
        self.log_view = None;
        self.active = false;
        if self.max_timestamp_ms >= 0 {
            let _ = self
                .time_index
                .maybe_append(self.max_timestamp_ms, self.offset_of_max_timestamp);
        }
        if msync {
            self.index.file_mut().seal(io)?;
            self.time_index.file_mut().seal(io)
        } else {
            self.index.file_mut().trim(io)?;
            self.time_index.file_mut().trim(io)
        }
    }

    /// Leaves the active role at a clean close of the last segment, without any I/O: drops the
    /// `.log` view; the indexes stay as they are, preallocated (their pages for whatever sync
    /// the close does, and an open finds their entries by their zero tail), and without the
    /// final time-index entry [`Segment::seal`] writes.
    ///
    /// Why no trim: two truncations of every log's indexes were journal work a close of 10,000
    /// logs paid for each (and a close after a periodic checkpoint should touch no log). Why no
    /// final time entry: the segment is still the last at the next open, whose tail scan (from
    /// the last offset-index entry, whose time entry covers every batch before it) finds its
    /// greatest timestamp again; a later roll seals it with the entry. Writing it faulted a
    /// page into each sparse time index: 4 of the 5 s a close of 2,000 logs with one fresh
    /// batch each took (storage example `close_many`).
    pub(crate) fn release_active(&mut self) {
        self.log_view = None;
        self.active = false;
    }

    /// Takes the active role: grows both indexes back to their capacity and maps the `.log` view.
    pub(crate) fn unseal(&mut self, io: &dyn FileIo, config: &LogConfig) -> Result<()> {
        self.active = true;
        self.index
            .file_mut()
            .unseal(io, index_capacity(config, OFFSET_INDEX_ENTRY_BYTES))?;
        self.time_index
            .file_mut()
            .unseal(io, index_capacity(config, TIME_INDEX_ENTRY_BYTES))?;
        self.map_log_view(io, config)
    }

    /// Cuts the log at `position` (a batch boundary) and rebuilds the indexes.
    ///
    /// If no reader holds the log file, it is shortened in place. If one does (a `FetchSlice` is
    /// still being sent), the kept prefix is copied to a new file that is renamed over the old
    /// name, so the reader's inode never shrinks and its bytes never change: no SIGBUS through a
    /// mapping, no wrong bytes through sendfile. The cost is a copy of the kept prefix, paid only
    /// when truncation races a reader (truncation itself is rare: replication divergence).
    pub(crate) fn truncate_at(
        &mut self,
        io: &dyn FileIo,
        dir: &Path,
        position: u64,
        config: &LogConfig,
    ) -> Result<()> {
        let log_path = self.log_path.to_path_buf();
        // The view goes before the file can shrink under it (the caller maps a new one).
        self.log_view = None;
        let file = self.log_file(io)?;
        // Out of the set of open files, so the count below is ours plus the readers' and
        // appends' (none: the caller holds the writer lock).
        self.forget_file();
        // The log's writer and state locks are held by the caller; readers get this descriptor
        // only under the state lock and appends (`AppendTarget`) only under the writer lock, so
        // the count cannot grow while we decide.
        let log = if Arc::strong_count(&file) == 1 {
            io.set_len(&file, position)
                .map_err(|error| Error::io(&log_path, error))?;
            file
        } else {
            let temp = log_path.with_extension(TRUNCATING_SUFFIX);
            let copy = io
                .open(&temp, OpenMode::CreateTruncate)
                .map_err(|error| Error::io(&temp, error))?;
            let mut buffer = vec![0u8; TRUNCATE_COPY_CHUNK_BYTES];
            let mut copied = 0u64;
            while copied < position {
                let step = usize::try_from(position - copied)
                    .unwrap_or(usize::MAX)
                    .min(TRUNCATE_COPY_CHUNK_BYTES);
                let chunk = buffer.get_mut(..step).unwrap_or_default();
                io.read_exact_at(&file, chunk, copied)
                    .map_err(|error| Error::io(&log_path, error))?;
                io.write_all_at(&copy, chunk, copied)
                    .map_err(|error| Error::io(&temp, error))?;
                copied += step as u64;
            }
            io.rename(&temp, &log_path)
                .map_err(|error| Error::io(&log_path, error))?;
            Arc::new(copy)
        };
        io.sync(&log, PersistMode::SyncData)
            .map_err(|error| Error::io(&log_path, error))?;
        fs::sync_parent(io, &log_path)?;
        let (index, time_index) = Self::create_indexes(io, dir, self.base_offset, config)?;
        let log_files = Arc::clone(&self.log_files);
        *self = Self::assemble(
            self.base_offset,
            &log_path,
            &log,
            index,
            time_index,
            config,
            self.base_offset,
            &log_files,
        );
        let end = self.scan_from(io, 0, self.base_offset, position)?;
        if let Some(problem) = end.problem {
            return Err(Error::corrupt(
                &log_path,
                end.valid_bytes,
                problem.to_string(),
            ));
        }
        self.first_append_ms = self.first_batch_timestamp(io)?;
        self.open_txn_index(io, true)
    }

    /// After the recovery of unsynced data (the segment was scanned, not trusted): checks every
    /// `.txnindex` entry against the segment's ABORT markers, in order (same offset, same
    /// producer). Why all of them and not only those past the recovery point: a power cut can
    /// leave an unsynced entry as bytes that decode (zeros do) with any offset. Entries from
    /// the first that does not match are cut (durably). An ABORT marker left without an entry
    /// below `recovery_point` is corruption (a flush syncs the entries before the recovery
    /// point passes their markers); the position of the first one at or after it is returned,
    /// for the caller to cut the log there as it cuts a torn tail (the crash fell between the
    /// marker and its entry: `Log::append_aborted_txn`).
    pub(crate) fn reconcile_txn_index(
        &mut self,
        io: &dyn FileIo,
        recovery_point: i64,
    ) -> Result<Option<u64>> {
        let markers = self.abort_markers_from(io, self.base_offset)?;
        let mut next_marker = markers.iter().peekable();
        let (mut kept, mut last) = (0u64, None);
        self.txn.for_each(io, |entry| {
            match next_marker.peek() {
                Some((_, offset, producer_id))
                    if *offset == entry.last_offset && *producer_id == entry.producer_id =>
                {
                    next_marker.next();
                }
                _ => return Ok(false),
            }
            kept += 1;
            last = Some(entry);
            Ok(true)
        })?;
        if kept * (txn_index::TXN_ENTRY_BYTES as u64) < self.txn.size_bytes() {
            self.txn.truncate_to_entries(io, kept, last)?;
        }
        match next_marker.next() {
            Some((_, offset, _)) if *offset < recovery_point => Err(Error::corrupt(
                self.txn.path(),
                self.txn.size_bytes(),
                format!("the ABORT marker at offset {offset}, flushed, has no entry"),
            )),
            Some((position, _, _)) => Ok(Some(*position)),
            None => Ok(None),
        }
    }

    /// The ABORT markers of this segment at or after offset `from`: (position, offset,
    /// producer id). Reads batch headers from the batch holding `from`, and the records of
    /// control batches only (as recovery's own scan, once per unsynced segment).
    fn abort_markers_from(&self, io: &dyn FileIo, from: i64) -> Result<Vec<(u64, i64, i64)>> {
        let mut markers = Vec::new();
        let Some((mut position, _)) = self.find_batch(io, from)? else {
            return Ok(markers);
        };
        let mut batch = Vec::new();
        while position < self.size_bytes {
            let header = self.read_header(io, position)?;
            if header.is_control() && header.is_transactional() && header.base_offset >= from {
                batch.resize(header.total_bytes(), 0);
                io.read_exact_at(&*self.log_file(io)?, &mut batch, position)
                    .map_err(|error| Error::io(&*self.log_path, error))?;
                let marker = EndTxnMarker::decode_with_header(&batch, &header);
                if marker.is_ok_and(|marker| marker.marker_type == MarkerType::Abort) {
                    markers.push((position, header.base_offset, header.producer_id));
                }
            }
            position += header.total_bytes() as u64;
        }
        Ok(markers)
    }

    /// Unlinks the segment's files. Readers holding the log file keep its inode and bytes.
    pub(crate) fn delete_files(&self, io: &dyn FileIo, dir: &Path) -> Result<()> {
        remove_segment_files(io, dir, self.base_offset)
    }

    /// Checks every index entry against the batch header it names (feature `power-sim`).
    #[cfg(feature = "power-sim")]
    pub(crate) fn verify_indexes(&self, io: &dyn FileIo) -> std::result::Result<(), IndexMismatch> {
        let mut index = 0;
        while let Some(OffsetEntry { offset, position }) = self.index.entry(index) {
            match self.read_header(io, u64::from(position)) {
                Ok(header) if header.base_offset == offset => {}
                other => {
                    return Err(IndexMismatch::Offset {
                        path: self.log_path.to_path_buf(),
                        index,
                        offset,
                        position,
                        found: format!("{other:?}"),
                    })
                }
            }
            index += 1;
        }
        let mut index = 0;
        while let Some(TimeEntry {
            timestamp_ms,
            offset,
        }) = self.time_index.entry(index)
        {
            match self.find_batch(io, offset) {
                Ok(Some((_, header)))
                    if header.base_offset == offset && header.max_timestamp == timestamp_ms => {}
                other => {
                    return Err(IndexMismatch::Time {
                        path: self.log_path.to_path_buf(),
                        index,
                        timestamp_ms,
                        offset,
                        found: format!("{other:?}"),
                    })
                }
            }
            index += 1;
        }
        Ok(())
    }
}

/// An index entry that does not name the batch it claims (feature `power-sim`, for tests).
#[cfg(feature = "power-sim")]
#[derive(Debug, thiserror::Error)]
pub enum IndexMismatch {
    /// An offset index entry whose position holds no batch with its offset.
    #[error("{}: offset index entry {index} ({offset} at {position}) names {found}", path.display())]
    Offset {
        /// The segment's log file.
        path: std::path::PathBuf,
        /// The entry's number in the index.
        index: usize,
        /// The offset the entry claims.
        offset: i64,
        /// The position the entry claims.
        position: u32,
        /// What the log holds there (a debug rendering of the read).
        found: String,
    },
    /// A time index entry whose offset's batch does not have its timestamp.
    #[error(
        "{}: time index entry {index} ({timestamp_ms} ms, offset {offset}) names {found}",
        path.display()
    )]
    Time {
        /// The segment's log file.
        path: std::path::PathBuf,
        /// The entry's number in the index.
        index: usize,
        /// The timestamp the entry claims.
        timestamp_ms: i64,
        /// The offset the entry claims.
        offset: i64,
        /// What the log holds there (a debug rendering of the lookup).
        found: String,
    },
    /// The log's state could not be read (a poisoned lock).
    #[error(transparent)]
    Unreadable(#[from] Error),
}

impl Drop for Segment {
    /// A dropped segment's descriptor leaves the set of open files with it (closing it, unless
    /// a reader holds it); `Log` drops deleted segments after releasing its locks.
    fn drop(&mut self) {
        self.forget_file();
    }
}

/// The first record of one whole v2 `batch` with timestamp ≥ `target_ms` and offset ≥
/// `from_offset`, as (offset, timestamp).
fn first_record_at_or_after(
    batch: &[u8],
    header: &BatchHeader,
    target_ms: i64,
    from_offset: i64,
    scratch: &mut Vec<u8>,
) -> std::result::Result<Option<(i64, i64)>, RecordError> {
    let log_append_time = header.is_log_append_time();
    for record in batch_records(batch, header, scratch, DECOMPRESSED_BYTES_MAX)? {
        let record = record?;
        let timestamp = if log_append_time {
            header.max_timestamp
        } else {
            record.timestamp
        };
        if timestamp >= target_ms && record.offset >= from_offset {
            return Ok(Some((record.offset, timestamp)));
        }
    }
    Ok(None)
}

/// Unlinks the files of the segment at `base_offset` in `dir` (those that exist).
pub(crate) fn remove_segment_files(io: &dyn FileIo, dir: &Path, base_offset: i64) -> Result<()> {
    for suffix in [
        LOG_SUFFIX,
        INDEX_SUFFIX,
        TIME_INDEX_SUFFIX,
        TXN_INDEX_SUFFIX,
    ] {
        let path = fs::segment_file(dir, base_offset, suffix);
        match io.remove_file(&path) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(Error::io(&path, error)),
        }
    }
    Ok(())
}
