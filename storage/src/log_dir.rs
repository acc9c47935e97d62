//! [`LogDir`]: a data directory holding one directory per partition log (`<topic>-<partition>`),
//! its lock file and its clean-shutdown marker. Owns which logs exist, their admission against
//! the directory's and the process's limits, creation, deletion, recovery at open, the periodic
//! recovery-point checkpoint and the clean close (both syncing only the logs with unsynced
//! data, recovery and syncs on at most `DirConfig::recovery_threads` threads), the directory's
//! offset checkpoint (`skiff-offset-checkpoint`, every log's start and recovery point, in
//! `offset_checkpoint`) and its high-watermark checkpoint (`replication-offset-checkpoint`, its
//! text in `high_watermark`). Must never let two owners open the same directory, publish a
//! recovery point above durable data, nor write the clean-shutdown marker while any log might
//! hold unflushed or unrecovered data.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::cleaner::CleanerCheckpoints;
use crate::config::{DirConfig, LogConfig};
use crate::downgrade_guard::{DowngradeGuard, TransactionalHook};
use crate::error::{Error, Result};
use crate::fs::{self, DurableFiles, CLEAN_SHUTDOWN_FILE, DELETING_SUFFIX, LOCK_FILE};
use crate::high_watermark::{self, HighWatermark, HIGH_WATERMARK_CHECKPOINT_FILE};
use crate::io::{FileIo, OpenMode, StdIo};
use crate::log::Log;
use crate::log_files::LogFiles;
use crate::offset_checkpoint::{LogKey, OffsetCheckpoints};
use crate::{limits, mmap, resources};

/// A data directory and the partition logs below it.
#[derive(Debug)]
pub struct LogDir {
    path: PathBuf,
    io: Arc<dyn FileIo>,
    default_config: LogConfig,
    dir_config: DirConfig,
    log_files: Arc<LogFiles>,
    logs: Mutex<BTreeMap<LogKey, Arc<Log>>>,
    /// Held while the high-watermark checkpoint is written: two writers would share its
    /// temporary file, and the rename could then publish a mix of both.
    high_watermarks_writer: Mutex<()>,
    /// Every log's log start offset and recovery point, and their one file.
    checkpoints: Arc<OffsetCheckpoints>,
    /// Every compacted log's first dirty offset, and their one file.
    cleaner_offsets: Arc<CleanerCheckpoints>,
    /// Runs the embedder's hook before the first transactional batch is written.
    downgrade_guard: Arc<DowngradeGuard>,
    /// Why the offset checkpoint could not be read at open, if it could not (its logs were then
    /// recovered from scratch).
    checkpoint_damage: Option<String>,
    /// Whether the clean-shutdown marker was there at open.
    opened_clean: bool,
    /// Holds the `flock` for as long as the directory is open.
    _lock: File,
}

impl LogDir {
    /// Opens (creating if needed) the data directory at `path`, takes its lock
    /// (`Error::Locked` if another process, or another `LogDir` in this one, holds it) and opens
    /// every partition log found, with `default_config`. Without the clean-shutdown marker left by
    /// [`LogDir::close`], every log is recovered: segments after its recovery point are scanned,
    /// torn tails cut and indexes rebuilt.
    pub fn open(path: impl AsRef<Path>, default_config: LogConfig) -> Result<Self> {
        Self::open_with(path, default_config, DirConfig::default())
    }

    /// [`LogDir::open`] with the directory's own bounds (how many logs, open read descriptors,
    /// recovery threads).
    pub fn open_with(
        path: impl AsRef<Path>,
        default_config: LogConfig,
        dir_config: DirConfig,
    ) -> Result<Self> {
        Self::open_with_io(path.as_ref(), default_config, dir_config, Arc::new(StdIo))
    }

    /// [`LogDir::open_with`] without recovering the logs: it returns once the directory is
    /// locked and listed, every log found answering [`Error::Recovering`] until
    /// [`LogDir::recover_pending`] (or [`Log::recover_deferred`] on it) has run. For an embedder
    /// that serves as soon as it can (a broker with 10,000 partitions listens at once and
    /// answers a retriable error for partitions not recovered yet). [`LogDir::close`] recovers
    /// what is still pending before it writes the clean-shutdown marker.
    pub fn open_deferred(
        path: impl AsRef<Path>,
        default_config: LogConfig,
        dir_config: DirConfig,
    ) -> Result<Self> {
        Self::open_listed(path.as_ref(), default_config, dir_config, Arc::new(StdIo))
    }

    /// Recovers every log still pending on `DirConfig::recovery_threads` threads, each through
    /// `around(log, recover)`: `around` must call `recover` (it may hold its own lock around
    /// it, so that its view of the log is rebuilt before anyone else sees the log recovered).
    /// The first error is returned; the logs it concerns stay pending.
    pub fn recover_pending(
        &self,
        around: impl Fn(&Arc<Log>, &dyn Fn() -> Result<()>) -> Result<()> + Sync,
    ) -> Result<()> {
        let pending: Vec<Arc<Log>> = self
            .logs()?
            .values()
            .filter(|log| log.is_recovering())
            .cloned()
            .collect();
        let recovered = on_threads(self.dir_config.recovery_threads, &pending, |log| {
            around(log, &|| log.recover_deferred())
        });
        recovered.into_iter().collect::<Result<Vec<()>>>()?;
        Ok(())
    }

    /// [`LogDir::open`] over a simulated file system (feature `power-sim`, for tests).
    #[cfg(feature = "power-sim")]
    pub fn open_simulated(
        path: impl AsRef<Path>,
        default_config: LogConfig,
        io: Arc<crate::io::sim::SimIo>,
    ) -> Result<Self> {
        Self::open_with_io(path.as_ref(), default_config, DirConfig::default(), io)
    }

    /// [`LogDir::open_simulated`] with the directory's own bounds (feature `power-sim`).
    #[cfg(feature = "power-sim")]
    pub fn open_simulated_with(
        path: impl AsRef<Path>,
        default_config: LogConfig,
        dir_config: DirConfig,
        io: Arc<crate::io::sim::SimIo>,
    ) -> Result<Self> {
        Self::open_with_io(path.as_ref(), default_config, dir_config, io)
    }

    pub(crate) fn open_with_io(
        path: &Path,
        default_config: LogConfig,
        dir_config: DirConfig,
        io: Arc<dyn FileIo>,
    ) -> Result<Self> {
        let dir = Self::open_listed(path, default_config, dir_config, io)?;
        dir.recover_pending(|_, recover| recover())?;
        Ok(dir)
    }

    fn open_listed(
        path: &Path,
        default_config: LogConfig,
        dir_config: DirConfig,
        io: Arc<dyn FileIo>,
    ) -> Result<Self> {
        default_config.validate()?;
        dir_config.validate()?;
        io.create_dir_all(path)
            .map_err(|error| Error::io(path, error))?;
        let lock_path = path.join(LOCK_FILE);
        let lock = match io.open(&lock_path, OpenMode::ReadWrite) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => io
                .open(&lock_path, OpenMode::CreateTruncate)
                .map_err(|error| Error::io(&lock_path, error))?,
            Err(error) => return Err(Error::io(&lock_path, error)),
        };
        if !mmap::lock_exclusive(&lock).map_err(|error| Error::io(&lock_path, error))? {
            return Err(Error::Locked {
                path: path.to_owned(),
            });
        }
        let marker = path.join(CLEAN_SHUTDOWN_FILE);
        let (marker_found, found) = Self::list_logs(io.as_ref(), path, &marker)?;
        let mut clean = marker_found;
        let (checkpoints, damage) = OffsetCheckpoints::load(Arc::clone(&io), path)?;
        if damage.is_some() {
            // Without the offsets, nothing the marker promised can be tied to a recovery point
            // or a log start: every log is recovered from its first segment, trusting nothing.
            clean = false;
        }
        checkpoints.retain(
            &found
                .iter()
                .map(|(key, _)| key.clone())
                .collect::<BTreeSet<_>>(),
        )?;
        let checkpoints = Arc::new(checkpoints);
        // A damaged cleaner checkpoint only costs work (logs are cleaned from their start).
        let (cleaner_offsets, _damage) = CleanerCheckpoints::load(Arc::clone(&io), path)?;
        let cleaner_offsets = Arc::new(cleaner_offsets);
        let downgrade_guard = Arc::new(DowngradeGuard::default());
        if marker_found {
            // From here on a crash must mean recovery again.
            io.remove_file(&marker)
                .map_err(|error| Error::io(&marker, error))?;
            fs::sync_parent(io.as_ref(), &marker)?;
        }
        // A quarter of the open-file limit at most, whatever the setting: the rest is for
        // connections and the embedder's own files.
        let log_files_max =
            resources::open_files_limit().map_or(dir_config.log_files_max, |limit| {
                dir_config
                    .log_files_max
                    .min(usize::try_from(limit / 4).unwrap_or(usize::MAX))
            });
        let log_files = Arc::new(LogFiles::new(log_files_max));
        let shared = (
            Arc::clone(&checkpoints),
            Arc::clone(&cleaner_offsets),
            Arc::clone(&downgrade_guard),
        );
        let logs = deferred_logs(&io, found, &default_config, clean, &log_files, &shared)?;
        Ok(Self {
            path: path.to_owned(),
            io,
            default_config,
            dir_config,
            log_files,
            logs: Mutex::new(logs),
            high_watermarks_writer: Mutex::new(()),
            checkpoints,
            cleaner_offsets,
            downgrade_guard,
            checkpoint_damage: damage.map(|error| error.to_string()),
            opened_clean: clean,
            _lock: lock,
        })
    }

    /// The partition directories in the data directory `path`, and whether the clean-shutdown
    /// `marker` is there; removes what a crash left of a deletion.
    fn list_logs(
        io: &dyn FileIo,
        path: &Path,
        marker: &Path,
    ) -> Result<(bool, Vec<(LogKey, PathBuf)>)> {
        let mut marker_found = false;
        let mut found = Vec::new();
        for entry in io.read_dir(path).map_err(|error| Error::io(path, error))? {
            let Some(name) = entry.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if entry == marker {
                marker_found = true;
            } else if name.ends_with(DELETING_SUFFIX) {
                io.remove_dir_all(&entry)
                    .map_err(|error| Error::io(&entry, error))?;
            } else if let Some(key) = fs::parse_log_dir_name(name) {
                found.push((key, entry));
            }
        }
        Ok((marker_found, found))
    }

    /// Sets the hook that runs once before the first transactional batch (a transactional
    /// producer's batch, or an end-transaction marker) is written to any log of this directory,
    /// for the embedder to record durably, where the previous release checks it, that the
    /// directory now holds transactional data (the broker rewrites its topics file at a version
    /// the previous release refuses). `already_marked`: the mark is on disk from an earlier run,
    /// the hook never runs. The append that triggers it waits for it, and fails, writing
    /// nothing, if it fails (the next transactional append runs it again). Without a hook,
    /// nothing is marked.
    pub fn set_transactional_guard(
        &self,
        hook: TransactionalHook,
        already_marked: bool,
    ) -> Result<()> {
        self.downgrade_guard.set(hook, already_marked)
    }

    /// Makes `threads` the number of threads the directory syncs and recovers logs on (the
    /// embedder's `num.recovery.threads.per.data.dir` changed while it runs); out of
    /// `DirConfig`'s range it is refused and nothing changes.
    pub fn set_recovery_threads(&mut self, threads: usize) -> Result<()> {
        let next = DirConfig {
            recovery_threads: threads,
            ..self.dir_config.clone()
        };
        next.validate()?;
        self.dir_config = next;
        Ok(())
    }

    /// Whether the directory was closed cleanly before this open (its logs then need no scan:
    /// recovering them is only loading their indexes, quick enough to wait for).
    pub fn opened_clean(&self) -> bool {
        self.opened_clean
    }

    /// Why the directory's offset checkpoint (`skiff-offset-checkpoint`) was refused at open,
    /// if it was: a damaged file (the writer's atomic rename never leaves one, so the disk
    /// returned bytes nobody wrote). Not an error at open, because nothing is lost by ignoring
    /// it: every log was then recovered from its first segment, its recovery point and log
    /// start taken as that segment's base (a DeleteRecords start not yet reached by retention
    /// comes back), exactly as if no checkpoint had ever been written. The embedder should log
    /// it; the next checkpoint replaces the file.
    pub fn checkpoint_damage(&self) -> Option<&str> {
        self.checkpoint_damage.as_deref()
    }

    /// Whether `new_logs` more logs fit: under `logs_max`, and within the process's open-file
    /// limit and `vm.max_map_count` with room to spare (`files_reserved` descriptors, an eighth
    /// of the maps). `Error::LimitReached`, naming the limit and the figures, if not. Call it
    /// once before creating a batch of logs (it lists the process's descriptors); [`LogDir::create`]
    /// still names a limit hit on the way.
    pub fn check_room(&self, new_logs: usize) -> Result<()> {
        let logs_count = self.logs()?.len();
        let wanted = logs_count.saturating_add(new_logs);
        if wanted > self.dir_config.logs_max {
            return Err(Error::LimitReached(format!(
                "{new_logs} more partitions would make {wanted} on this broker, past the limit \
                 of {} (logs_max, the broker's max.broker.partitions); {logs_count} exist",
                self.dir_config.logs_max
            )));
        }
        let new_logs = new_logs as u64;
        if let (Ok(limit), Some(open)) =
            (resources::open_files_limit(), resources::open_files_count())
        {
            let reserved = self.dir_config.files_reserved.min(limit / 4);
            // New logs add descriptors only until the set of open log files is full.
            let room_in_set = self
                .log_files
                .capacity()
                .saturating_sub(self.log_files.len()) as u64;
            let needed = (new_logs * limits::FILES_PER_LOG).min(room_in_set);
            if open + needed + reserved > limit {
                return Err(Error::LimitReached(format!(
                    "{new_logs} more partitions need {needed} open files, but {open} of the \
                     process's {limit} (RLIMIT_NOFILE soft limit) are open and {reserved} are \
                     kept for connections and reads: raise the limit (`ulimit -n`, systemd's \
                     LimitNOFILE)"
                )));
            }
        }
        if let Some(max_maps) = resources::max_map_count() {
            let usable = max_maps - max_maps / 8;
            let needed = (logs_count as u64 + new_logs) * limits::MAPS_PER_LOG;
            if needed > usable {
                return Err(Error::LimitReached(format!(
                    "{wanted} partitions need about {needed} memory maps (3 each), past the \
                     {usable} of vm.max_map_count ({max_maps}) this broker uses: raise \
                     vm.max_map_count (sysctl)"
                )));
            }
        }
        Ok(())
    }

    /// How many logs the directory holds.
    pub fn log_count(&self) -> Result<usize> {
        Ok(self.logs()?.len())
    }

    fn logs(&self) -> Result<MutexGuard<'_, BTreeMap<LogKey, Arc<Log>>>> {
        self.logs.lock().map_err(|_| Error::Poisoned)
    }

    /// The directory's file operations, for the embedder's own small durable files beside the
    /// logs (see [`DurableFiles`]): on a simulated directory they are simulated too.
    pub fn files(&self) -> DurableFiles {
        DurableFiles::new(Arc::clone(&self.io))
    }

    /// The data directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Topic and partition of every log, in order.
    pub fn list(&self) -> Result<Vec<(String, i32)>> {
        Ok(self.logs()?.keys().cloned().collect())
    }

    /// The open log of `topic`/`partition`, if it exists.
    pub fn log(&self, topic: &str, partition: i32) -> Result<Option<Arc<Log>>> {
        Ok(self.logs()?.get(&(topic.to_owned(), partition)).cloned())
    }

    /// Creates an empty log for `topic`/`partition` with `config` (or the directory's default).
    /// `Error::LogExists` if it is already there; `Error::InvalidName` for a bad topic name
    /// (ASCII letters, digits, `.`, `_`, `-`; at most 249 bytes) or a negative partition.
    pub fn create(
        &self,
        topic: &str,
        partition: i32,
        config: Option<LogConfig>,
    ) -> Result<Arc<Log>> {
        let name = fs::log_dir_name(topic, partition)?;
        let config = config.unwrap_or_else(|| self.default_config.clone());
        config.validate()?;
        let mut logs = self.logs()?;
        let key = (topic.to_owned(), partition);
        if logs.contains_key(&key) {
            return Err(Error::LogExists(name));
        }
        if logs.len() >= self.dir_config.logs_max {
            return Err(Error::LimitReached(format!(
                "{} partitions exist on this broker, the limit (logs_max, the broker's max.broker.partitions)",
                logs.len()
            )));
        }
        let dir = self.path.join(&name);
        // A log of this name deleted before may still be in the checkpoint on disk.
        self.checkpoints.forget_on_disk(&key)?;
        let created = (|| {
            self.io
                .create_dir_all(&dir)
                .map_err(|error| Error::io(&dir, error))?;
            fs::sync_parent(self.io.as_ref(), &dir)?;
            // A new directory has nothing to recover: open it as if cleanly shut down.
            let log = Log::deferred(
                Arc::clone(&self.io),
                &dir,
                key.clone(),
                config,
                true,
                Arc::clone(&self.log_files),
                (
                    Arc::clone(&self.checkpoints),
                    Arc::clone(&self.cleaner_offsets),
                    Arc::clone(&self.downgrade_guard),
                ),
            )?;
            log.recover_deferred()?;
            Ok(log)
        })();
        let log = match created {
            Ok(log) => Arc::new(log),
            Err(error) => {
                // Nothing of a log that could not open stays behind (a later attempt starts
                // afresh, and its files would count against the limit that was hit).
                let _ = self.io.remove_dir_all(&dir);
                return Err(resources::name_limit(error));
            }
        };
        logs.insert(key, Arc::clone(&log));
        Ok(log)
    }

    /// Deletes the log of `topic`/`partition`: it refuses further writes, its directory is
    /// renamed out of the way (atomic) and then removed. Slices already handed out stay readable.
    pub fn delete(&self, topic: &str, partition: i32) -> Result<()> {
        let name = fs::log_dir_name(topic, partition)?;
        let log = self
            .logs()?
            .remove(&(topic.to_owned(), partition))
            .ok_or_else(|| Error::LogNotFound(name.clone()))?;
        log.mark_closed()?;
        // Its entry leaves the table; the file still naming it is rewritten before a log of the
        // same name is created (`OffsetCheckpoints::forget_on_disk`).
        self.checkpoints.remove(&(topic.to_owned(), partition))?;
        // Durably: a log created under this name must start with no first dirty offset.
        self.cleaner_offsets
            .set_and_write(&(topic.to_owned(), partition), None)?;
        let dir = log.dir().to_owned();
        let doomed = self.path.join(format!("{name}{DELETING_SUFFIX}"));
        self.io
            .rename(&dir, &doomed)
            .map_err(|error| Error::io(&dir, error))?;
        fs::sync_parent(self.io.as_ref(), &dir)?;
        self.io
            .remove_dir_all(&doomed)
            .map_err(|error| Error::io(&doomed, error))?;
        fs::sync_parent(self.io.as_ref(), &dir)
    }

    /// Writes the high-watermark checkpoint of the directory, `replication-offset-checkpoint` in
    /// Kafka's format (version `0`, a count, then `topic partition offset` lines, in the order
    /// given), atomically and durably through [`LogDir::files`] (temp file, fsync, rename, fsync
    /// of the directory): after a crash the file holds the previous entries or these, never a
    /// mix. The whole set each time, as Kafka's `ReplicaManager` checkpoints it (every
    /// `replica.high.watermark.checkpoint.interval.ms`, 5 s, and at shutdown; the embedder
    /// decides when, [`LogDir::close`] does not write it).
    ///
    /// Refused, writing nothing: an entry whose topic or partition cannot name a log, a
    /// partition listed twice ([`Error::InvalidName`]), a negative offset
    /// ([`Error::NegativeOffset`]), more entries than `limits::HIGH_WATERMARK_ENTRIES_MAX`
    /// ([`Error::LimitReached`]).
    pub fn write_high_watermarks(&self, entries: &[HighWatermark]) -> Result<()> {
        let text = high_watermark::to_text(entries)?;
        let _writer = self
            .high_watermarks_writer
            .lock()
            .map_err(|_| Error::Poisoned)?;
        fs::write_atomic(
            self.io.as_ref(),
            &self.path.join(HIGH_WATERMARK_CHECKPOINT_FILE),
            text.as_bytes(),
        )
    }

    /// The entries of the high-watermark checkpoint, in file order; none if there is no file
    /// (a directory that never checkpointed one).
    ///
    /// A file that is not a checkpoint (not UTF-8, malformed, a number out of range or
    /// negative, an invalid topic, a partition twice, a count that does not match, more than
    /// `limits::HIGH_WATERMARK_CHECKPOINT_BYTES_MAX` bytes or
    /// `limits::HIGH_WATERMARK_ENTRIES_MAX` entries) is [`Error::Corrupt`], as in Kafka (whose
    /// reader throws and takes the directory offline), not "no high watermarks": the writer's
    /// atomic rename never leaves a torn file, so such content means the disk returned bytes
    /// nobody wrote, which the operator should hear of, and storage never discards what it
    /// cannot read in silence.
    ///
    /// What an embedder may do with the error instead of failing: start every partition's high
    /// watermark at its log start offset, as for a missing file. That is safe, because a high
    /// watermark only ever rises to what the ISR holds: a leader with a low one serves
    /// consumers less (not wrong) data until its followers' next fetches raise it again, a
    /// follower learns its high watermark from the leader's next fetch response, and since
    /// KIP-101 no replica truncates to its high watermark (truncation follows leader epochs).
    /// What must never happen is a high watermark above what was replicated, which only an
    /// accepted damaged file could cause: hence the strict reader.
    pub fn read_high_watermarks(&self) -> Result<Vec<HighWatermark>> {
        let path = self.path.join(HIGH_WATERMARK_CHECKPOINT_FILE);
        let bytes = match self
            .io
            .read_small(&path, limits::HIGH_WATERMARK_CHECKPOINT_BYTES_MAX)
        {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) if error.kind() == std::io::ErrorKind::InvalidData => {
                return Err(Error::corrupt(
                    &path,
                    0,
                    "high-watermark checkpoint too large",
                ))
            }
            Err(error) => return Err(Error::io(&path, error)),
        };
        high_watermark::parse(&bytes).map_err(|reason| Error::corrupt(&path, 0, reason))
    }

    /// Makes the data of every log with unsynced data durable, advances those logs' recovery
    /// points and writes the directory's offset checkpoint once, with every log start moved
    /// since (by retention or DeleteRecords, which only set it in memory), nothing at all if no
    /// log changed since the last one: Kafka's periodic recovery-point and log-start-offset
    /// checkpoints (`log.flush.offset.checkpoint.interval.ms`). The embedder calls it on a timer, off its
    /// request paths: it waits for fsyncs. No log lock is held across an fsync (each log's
    /// flush syncs without its locks, as [`Log::flush`] does), so appends and reads go on.
    ///
    /// Few dirty logs (at most `DirConfig::sync_each_dirty_logs_max`, default 512) are synced one
    /// `fdatasync` each, on `DirConfig::recovery_threads` threads; more, with one `syncfs` of
    /// the file system (see the limit for why), whatever the log's `PersistMode` (under
    /// `Buffer`, the default of a broker without a flush policy, this is the only sync its data
    /// gets while the broker runs, as in Kafka). Errors: the first; every log that did sync
    /// still has its recovery point advanced and written.
    pub fn checkpoint_recovery_points(&self) -> Result<()> {
        let logs: Vec<Arc<Log>> = self.logs()?.values().cloned().collect();
        let synced = self.sync_unflushed(&logs);
        let written = self.checkpoints.write();
        synced.and(written)
    }

    /// Syncs the logs with unsynced data (see [`LogDir::checkpoint_recovery_points`]).
    fn sync_unflushed(&self, logs: &[Arc<Log>]) -> Result<()> {
        let mut first_error = None;
        let mut dirty = Vec::new();
        for log in logs {
            match log.unflushed_end() {
                Ok(Some(end)) => dirty.push((Arc::clone(log), end)),
                Ok(None) => {}
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        if dirty.len() <= self.dir_config.sync_each_dirty_logs_max {
            let threads = self.dir_config.recovery_threads;
            for synced in on_threads(threads, &dirty, |(log, _)| log.sync()) {
                if let Err(error) = synced {
                    first_error.get_or_insert(error);
                }
            }
        } else {
            match self.io.sync_filesystem(&self.path) {
                Ok(()) => {
                    for (log, (end, truncations)) in &dirty {
                        if let Err(error) = log.mark_synced(*end, *truncations) {
                            first_error.get_or_insert(error);
                        }
                    }
                }
                Err(error) => {
                    first_error.get_or_insert(Error::io(&self.path, error));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Closes every log and then writes the clean-shutdown marker, so the next open skips
    /// recovery (not if a log holds an ABORT marker still waiting for its aborted-transaction
    /// entry: see [`Log::append_aborted_txn`]). If any log fails, no marker is written and the
    /// first error is returned. Logs still shared elsewhere refuse writes afterwards.
    ///
    /// The order, and why a crash at any point is safe: every log is closed without I/O (a log
    /// not yet recovered is recovered first; then it refuses writes, so nothing new becomes
    /// dirty); the logs with unsynced data are synced exactly as by
    /// [`LogDir::checkpoint_recovery_points`] (an `fdatasync` each when few, one `syncfs` when
    /// many) and only then their recovery points raised to their ends; the directory's offset
    /// checkpoint is written once, atomically (temp file, fsync, rename, directory fsync), if
    /// anything changed; the marker last. A crash before the checkpoint's rename leaves the
    /// old one, whose recovery points were durable when written; after it, the new one, whose
    /// recovery points are durable now; without the marker, recovery scans from them.
    ///
    /// What it costs: a log with nothing unsynced (say, everything was made durable by the last
    /// periodic checkpoint) costs no I/O at all; each dirty log one `fdatasync`, or all of them
    /// one `syncfs`. Before, every log was closed with its own checkpoint file (and its index
    /// trims) under a temporary name, then two `syncfs` and a rename per log: 3.4 s for 10,000
    /// logs, 53 s while other processes had 270 MiB unwritten (bench/reports/partition-scale.md).
    pub fn close(self) -> Result<()> {
        let logs: Vec<Arc<Log>> = self.logs()?.values().cloned().collect();
        let threads = self.dir_config.recovery_threads;
        for closed in on_threads(threads, &logs, |log| log.close_for_shutdown()) {
            closed?;
        }
        self.sync_unflushed(&logs)?;
        self.checkpoints.write()?;
        // An ABORT marker still waiting for its aborted-transaction entry must meet the next
        // open's recovery (which cuts it, as the crash it is), not a trusted clean open.
        if logs.iter().any(|log| log.has_unindexed_aborts()) {
            return Ok(());
        }
        fs::write_atomic(self.io.as_ref(), &self.path.join(CLEAN_SHUTDOWN_FILE), b"")
    }
}

/// What every log of a directory shares: its offset checkpoint, its cleaner checkpoint and its
/// downgrade guard.
type Shared = (
    Arc<OffsetCheckpoints>,
    Arc<CleanerCheckpoints>,
    Arc<DowngradeGuard>,
);

/// The logs `found` at open, each waiting for its recovery ([`Log::recover_deferred`]).
fn deferred_logs(
    io: &Arc<dyn FileIo>,
    found: Vec<(LogKey, PathBuf)>,
    default_config: &LogConfig,
    clean: bool,
    log_files: &Arc<LogFiles>,
    shared: &Shared,
) -> Result<BTreeMap<LogKey, Arc<Log>>> {
    let mut logs = BTreeMap::new();
    for ((topic, partition), dir) in found {
        let log = Log::deferred(
            Arc::clone(io),
            &dir,
            (topic.clone(), partition),
            default_config.clone(),
            clean,
            Arc::clone(log_files),
            shared.clone(),
        )?;
        logs.insert((topic, partition), Arc::new(log));
    }
    Ok(logs)
}

/// `work` applied to every item on at most `threads` threads, each taking the next item; the
/// results in the items' order. Why threads and not one loop: opening and closing a log is
/// mostly waiting (fsync, page faults), so a few at a time finish several times sooner (the
/// figures are in bench/reports/partition-scale.md).
fn on_threads<T: Sync, R: Send>(
    threads: usize,
    items: &[T],
    work: impl Fn(&T) -> Result<R> + Sync,
) -> Vec<Result<R>> {
    let threads = threads.clamp(1, items.len().max(1));
    if threads == 1 {
        return items.iter().map(&work).collect();
    }
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Result<R>>>> = items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let (Some(item), Some(slot)) = (items.get(index), slots.get(index)) else {
                        break;
                    };
                    let result = work(item);
                    if let Ok(mut slot) = slot.lock() {
                        *slot = Some(result);
                    }
                })
            })
            .collect();
        for worker in workers {
            // Joined here so a panicking worker does not panic the scope: its item keeps no
            // result and reads as poisoned below.
            let _ = worker.join();
        }
    });
    slots
        .into_iter()
        .map(|slot| {
            slot.into_inner()
                .ok()
                .flatten()
                .unwrap_or(Err(Error::Poisoned))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::batch;
    use crate::testing_temp::temp_dir;

    /// Descriptors of this process open on files below `dir` (other tests' files do not count).
    fn files_open_below(dir: &Path) -> usize {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
            .filter(|target| target.starts_with(dir))
            .count()
    }

    fn small_segments() -> LogConfig {
        LogConfig {
            segment_bytes: 1024,
            batch_bytes_max: 1024,
            index_interval_bytes: 64,
            ..LogConfig::default()
        }
    }

    #[test]
    fn logs_share_a_bounded_set_of_descriptors_and_stay_writable_and_readable() {
        let dir = temp_dir();
        let dir_config = DirConfig {
            log_files_max: 2,
            ..DirConfig::default()
        };
        let data = LogDir::open_with(dir.path(), small_segments(), dir_config.clone()).unwrap();
        let log = data.create("t", 0, None).unwrap();
        for _ in 0..40 {
            log.append(&mut batch(0, 2, 200), 1_000).unwrap();
        }
        let segments = log.segment_count().unwrap();
        assert!(segments >= 10, "{segments} segments");
        // More logs than descriptors: each append reopens what the others evicted.
        let others: Vec<_> = (1..6).map(|p| data.create("t", p, None).unwrap()).collect();
        for round in 0..3 {
            for other in &others {
                other.append(&mut batch(0, 1, 10), 1_000).unwrap();
                assert!(
                    files_open_below(dir.path()) <= 1 + 2,
                    "the lock and log_files_max"
                );
            }
            for other in &others {
                let slice = other.read(round, 1 << 20, true).unwrap();
                assert_eq!(&slice.bytes().unwrap()[..8], &round.to_be_bytes());
            }
        }
        assert!(files_open_below(dir.path()) <= 1 + 2);
        for offset in (0..80).step_by(2) {
            let slice = log.read(offset, 1 << 20, true).unwrap();
            assert_eq!(&slice.bytes().unwrap()[..8], &offset.to_be_bytes());
        }
        assert_eq!(
            files_open_below(dir.path()),
            1 + 2,
            "the lock and log_files_max"
        );
        // A slice keeps its descriptor past eviction, and so does an append's target (it is
        // taken and dropped inside `append`, so only slices can be seen here).
        let held = log.read(0, 1 << 20, true).unwrap();
        for offset in (40..80).step_by(2) {
            log.read(offset, 1 << 20, true).unwrap();
        }
        for other in &others {
            other.append(&mut batch(0, 1, 10), 1_000).unwrap();
        }
        assert_eq!(
            files_open_below(dir.path()),
            1 + 2 + 1,
            "plus the held slice's"
        );
        assert_eq!(&held.bytes().unwrap()[..8], &0i64.to_be_bytes());
        drop(held);
        // Flushing every log reopens what it must and syncs through it.
        for other in &others {
            other.flush().unwrap();
            assert_eq!(other.flushed_offset().unwrap(), 4);
        }
        data.close().unwrap();
        drop((log, others));
        assert_eq!(files_open_below(dir.path()), 0);
        let data = LogDir::open_with(dir.path(), small_segments(), dir_config).unwrap();
        assert!(data.opened_clean());
        assert!(files_open_below(dir.path()) <= 1 + 2);
        let log = data.log("t", 0).unwrap().unwrap();
        assert_eq!(log.log_end_offset().unwrap(), 80);
        for partition in 1..6 {
            let other = data.log("t", partition).unwrap().unwrap();
            assert_eq!(other.log_end_offset().unwrap(), 4);
            let slice = other.read(3, 1 << 20, true).unwrap();
            assert_eq!(&slice.bytes().unwrap()[..8], &3i64.to_be_bytes());
        }
        // Truncation of an active segment whose descriptor was evicted.
        assert_eq!(log.truncate_to(3).unwrap(), 2);
        log.append(&mut batch(0, 2, 200), 1_000).unwrap();
        assert_eq!(log.log_end_offset().unwrap(), 4);
        assert!(files_open_below(dir.path()) <= 1 + 2);
    }

    #[test]
    fn a_clean_close_keeps_the_greatest_timestamp_without_a_final_time_entry() {
        let dir = temp_dir();
        let config = LogConfig {
            index_interval_bytes: 64,
            ..LogConfig::default()
        };
        let data = LogDir::open_with(dir.path(), config.clone(), DirConfig::default()).unwrap();
        let log = data.create("t", 0, None).unwrap();
        // The greatest timestamp sits in a batch before the last offset-index entry, and again
        // in one after it, so both the kept time entries and the tail scan are needed.
        for (index, first_ms) in [1_000, 9_000, 2_000, 3_000, 4_000, 9_500, 5_000]
            .into_iter()
            .enumerate()
        {
            let offset = i64::try_from(index).unwrap() * 2;
            log.append(
                &mut crate::testing::batch_with(offset, 2, 100, first_ms, 1),
                1_000,
            )
            .unwrap();
        }
        let before = log.max_timestamp().unwrap();
        let lookup = log.offset_for_timestamp(9_200).unwrap();
        assert_eq!(before.map(|found| found.timestamp_ms), Some(9_501));
        drop(log);
        data.close().unwrap();
        for _ in 0..2 {
            let data = LogDir::open_with(dir.path(), config.clone(), DirConfig::default()).unwrap();
            assert!(data.opened_clean());
            let log = data.log("t", 0).unwrap().unwrap();
            assert_eq!(log.max_timestamp().unwrap(), before);
            assert_eq!(log.offset_for_timestamp(9_200).unwrap(), lookup);
            drop(log);
            data.close().unwrap();
        }
    }

    #[test]
    fn logs_past_logs_max_are_refused_and_the_others_serve() {
        let dir = temp_dir();
        let dir_config = DirConfig {
            logs_max: 3,
            ..DirConfig::default()
        };
        let data = LogDir::open_with(dir.path(), LogConfig::default(), dir_config).unwrap();
        data.check_room(3).unwrap();
        for partition in 0..3 {
            data.create("t", partition, None).unwrap();
        }
        for refused in [data.check_room(1), data.create("t", 3, None).map(|_| ())] {
            let message = refused.unwrap_err().to_string();
            assert!(message.contains("max.broker.partitions"), "{message}");
        }
        assert!(!dir.path().join("t-3").exists());
        let log = data.log("t", 0).unwrap().unwrap();
        log.append(&mut batch(0, 1, 10), 1_000).unwrap();
        assert_eq!(data.log_count().unwrap(), 3);
    }

    #[test]
    fn logs_recover_in_parallel_after_a_crash() {
        let dir = temp_dir();
        let dir_config = DirConfig {
            recovery_threads: 3,
            ..DirConfig::default()
        };
        {
            let data =
                LogDir::open_with(dir.path(), LogConfig::default(), dir_config.clone()).unwrap();
            for partition in 0..20 {
                let log = data.create("t", partition, None).unwrap();
                for _ in 0..=partition {
                    log.append(&mut batch(0, 1, 10), 1_000).unwrap();
                }
            }
            // Dropped without close: no clean-shutdown marker, every log is recovered.
        }
        let data = LogDir::open_with(dir.path(), LogConfig::default(), dir_config).unwrap();
        for partition in 0..20 {
            let log = data.log("t", partition).unwrap().unwrap();
            assert_eq!(log.log_end_offset().unwrap(), i64::from(partition) + 1);
        }
        data.close().unwrap();
    }

    #[test]
    fn deferred_logs_answer_recovering_until_recovered() {
        let dir = temp_dir();
        {
            let data = LogDir::open(dir.path(), LogConfig::default()).unwrap();
            for partition in 0..4 {
                let log = data.create("t", partition, None).unwrap();
                log.append(&mut batch(0, 3, 10), 1_000).unwrap();
            }
        }
        let data =
            LogDir::open_deferred(dir.path(), LogConfig::default(), DirConfig::default()).unwrap();
        let log = data.log("t", 1).unwrap().unwrap();
        assert!(log.is_recovering());
        assert!(matches!(
            log.log_end_offset(),
            Err(Error::Recovering { partition: 1, .. })
        ));
        assert!(matches!(
            log.append(&mut batch(0, 1, 10), 1_000),
            Err(Error::Recovering { .. })
        ));
        let retention = LogConfig {
            retention_ms: Some(5),
            ..LogConfig::default()
        };
        log.set_config(retention.clone()).unwrap();
        let seen = Mutex::new(Vec::new());
        data.recover_pending(|log, recover| {
            recover()?;
            seen.lock().unwrap().push(log.partition());
            Ok(())
        })
        .unwrap();
        assert_eq!(seen.into_inner().unwrap().len(), 4);
        assert!(!log.is_recovering());
        assert_eq!(log.log_end_offset().unwrap(), 3);
        assert_eq!(log.config().unwrap(), retention);
        // A second pass has nothing to do; close after a deferred open without a pass recovers
        // first, so its clean-shutdown marker is true.
        data.recover_pending(|_, _| panic!("nothing pending"))
            .unwrap();
        data.close().unwrap();
        let data =
            LogDir::open_deferred(dir.path(), LogConfig::default(), DirConfig::default()).unwrap();
        data.close().unwrap();
        let data = LogDir::open(dir.path(), LogConfig::default()).unwrap();
        assert_eq!(
            data.log("t", 3).unwrap().unwrap().log_end_offset().unwrap(),
            3
        );
    }

    fn high_watermark(topic: &str, partition: i32, offset: i64) -> HighWatermark {
        HighWatermark {
            topic: topic.to_owned(),
            partition,
            offset,
        }
    }

    #[test]
    fn high_watermarks_are_checkpointed_in_kafkas_file_and_read_back() {
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), LogConfig::default()).unwrap();
        data.create("t", 0, None).unwrap();
        assert_eq!(data.read_high_watermarks().unwrap(), [], "no file yet");
        let entries = [high_watermark("t", 0, 42), high_watermark("other", 3, 7)];
        data.write_high_watermarks(&entries).unwrap();
        let path = dir.path().join(HIGH_WATERMARK_CHECKPOINT_FILE);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "0\n2\nt 0 42\nother 3 7\n"
        );
        assert_eq!(data.read_high_watermarks().unwrap(), entries);
        // A refused set writes nothing.
        let twice = [high_watermark("t", 0, 1), high_watermark("t", 0, 2)];
        assert!(matches!(
            data.write_high_watermarks(&twice),
            Err(Error::InvalidName(_))
        ));
        assert_eq!(data.read_high_watermarks().unwrap(), entries);
        // The file is not a log: reopening lists the one log, and the entries are still there.
        drop(data);
        let data = LogDir::open(dir.path(), LogConfig::default()).unwrap();
        assert_eq!(data.list().unwrap(), [("t".to_owned(), 0)]);
        assert_eq!(data.read_high_watermarks().unwrap(), entries);
        data.write_high_watermarks(&[]).unwrap();
        assert_eq!(data.read_high_watermarks().unwrap(), []);
        // Damage is corruption, not "no high watermarks" (see `read_high_watermarks`).
        let oversized = usize::try_from(limits::HIGH_WATERMARK_CHECKPOINT_BYTES_MAX).unwrap() + 1;
        for damage in [
            &b"0\n1\nt 0 -5\n"[..],
            b"0\n2\nt 0 5\n",
            &vec![b'0'; oversized],
        ] {
            std::fs::write(&path, damage).unwrap();
            let read = data.read_high_watermarks();
            assert!(matches!(read, Err(Error::Corrupt { .. })), "{read:?}");
        }
    }

    #[test]
    fn concurrent_high_watermark_writers_leave_one_whole_set() {
        let dir = temp_dir();
        let data = LogDir::open(dir.path(), LogConfig::default()).unwrap();
        std::thread::scope(|scope| {
            for writer in 0..4i64 {
                let data = &data;
                scope.spawn(move || {
                    for round in 0..20 {
                        let entries: Vec<HighWatermark> = (0..50)
                            .map(|partition| high_watermark("t", partition, writer * 100 + round))
                            .collect();
                        data.write_high_watermarks(&entries).unwrap();
                    }
                });
            }
        });
        let read = data.read_high_watermarks().unwrap();
        assert_eq!(read.len(), 50);
        assert!(read.iter().all(|entry| entry.offset == read[0].offset));
    }

    /// The real file system, recording every operation (its name, and its path when it has one).
    #[derive(Debug, Default)]
    struct CountingIo {
        calls: Mutex<Vec<(&'static str, Option<PathBuf>)>>,
    }

    impl CountingIo {
        fn record(&self, op: &'static str, path: Option<&Path>) {
            self.calls
                .lock()
                .unwrap()
                .push((op, path.map(Path::to_owned)));
        }

        fn take(&self) -> Vec<(&'static str, Option<PathBuf>)> {
            std::mem::take(&mut *self.calls.lock().unwrap())
        }
    }

    impl FileIo for CountingIo {
        fn open(&self, path: &Path, mode: OpenMode) -> std::io::Result<File> {
            self.record("open", Some(path));
            StdIo.open(path, mode)
        }
        fn write_all_at(&self, file: &File, bytes: &[u8], position: u64) -> std::io::Result<()> {
            self.record("write", None);
            StdIo.write_all_at(file, bytes, position)
        }
        fn read_exact_at(&self, file: &File, buf: &mut [u8], position: u64) -> std::io::Result<()> {
            self.record("read", None);
            StdIo.read_exact_at(file, buf, position)
        }
        fn sync(&self, file: &File, mode: crate::PersistMode) -> std::io::Result<()> {
            self.record("sync", None);
            StdIo.sync(file, mode)
        }
        fn sync_map(&self, path: &Path, map: &memmap2::MmapMut) -> std::io::Result<()> {
            self.record("sync_map", Some(path));
            StdIo.sync_map(path, map)
        }
        fn set_len(&self, file: &File, len: u64) -> std::io::Result<()> {
            self.record("set_len", None);
            StdIo.set_len(file, len)
        }
        fn len(&self, file: &File) -> std::io::Result<u64> {
            self.record("len", None);
            StdIo.len(file)
        }
        fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
            self.record("rename", Some(to));
            StdIo.rename(from, to)
        }
        fn remove_file(&self, path: &Path) -> std::io::Result<()> {
            self.record("remove_file", Some(path));
            StdIo.remove_file(path)
        }
        fn remove_dir_all(&self, path: &Path) -> std::io::Result<()> {
            self.record("remove_dir_all", Some(path));
            StdIo.remove_dir_all(path)
        }
        fn create_dir_all(&self, path: &Path) -> std::io::Result<()> {
            self.record("create_dir_all", Some(path));
            StdIo.create_dir_all(path)
        }
        fn sync_dir(&self, path: &Path) -> std::io::Result<()> {
            self.record("sync_dir", Some(path));
            StdIo.sync_dir(path)
        }
        fn sync_filesystem(&self, path: &Path) -> std::io::Result<()> {
            self.record("sync_filesystem", Some(path));
            StdIo.sync_filesystem(path)
        }
        fn read_dir(&self, path: &Path) -> std::io::Result<Vec<PathBuf>> {
            self.record("read_dir", Some(path));
            StdIo.read_dir(path)
        }
        fn read_small(&self, path: &Path, bytes_max: u64) -> std::io::Result<Vec<u8>> {
            self.record("read_small", Some(path));
            StdIo.read_small(path, bytes_max)
        }
    }

    #[test]
    fn a_close_after_a_checkpoint_with_no_new_writes_touches_no_log() {
        let dir = temp_dir();
        let io = Arc::new(CountingIo::default());
        let data = LogDir::open_with_io(
            dir.path(),
            LogConfig::default(),
            DirConfig::default(),
            Arc::clone(&io) as Arc<dyn FileIo>,
        )
        .unwrap();
        for partition in 0..20 {
            let log = data.create("t", partition, None).unwrap();
            log.append(&mut batch(0, 2, 100), 1_000).unwrap();
        }
        io.take();
        data.checkpoint_recovery_points().unwrap();
        let checkpoint_calls = io.take();
        let syncs = checkpoint_calls
            .iter()
            .filter(|(op, _)| *op == "sync")
            .count();
        // One fdatasync per dirty log (few: no file-system sync), then the checkpoint's own.
        assert_eq!(syncs, 20 + 1, "{checkpoint_calls:?}");
        assert!(!checkpoint_calls
            .iter()
            .any(|(op, _)| *op == "sync_filesystem"));
        // A second checkpoint with nothing new does nothing at all.
        data.checkpoint_recovery_points().unwrap();
        assert_eq!(io.take(), []);
        // And the close writes only the clean-shutdown marker (temp file, write, sync, rename,
        // directory sync): no log's file, no checkpoint.
        data.close().unwrap();
        let close_calls = io.take();
        let marker = dir.path().join(CLEAN_SHUTDOWN_FILE);
        for (op, path) in &close_calls {
            if let Some(path) = path {
                assert!(
                    path == &marker
                        || path == &marker.with_extension(fs::TEMP_SUFFIX)
                        || path == dir.path(),
                    "{op} {path:?} at close"
                );
            }
        }
        assert_eq!(close_calls.len(), 5, "{close_calls:?}");
        // Reopened clean: every log is there, with its indexes as the close left them.
        let data = LogDir::open(dir.path(), LogConfig::default()).unwrap();
        assert!(data.opened_clean());
        for partition in 0..20 {
            let log = data.log("t", partition).unwrap().unwrap();
            assert_eq!(log.log_end_offset().unwrap(), 2);
            assert_eq!(log.flushed_offset().unwrap(), 2);
        }
    }

    #[test]
    fn a_close_syncs_only_the_dirty_logs_and_writes_one_checkpoint() {
        let dir = temp_dir();
        let io = Arc::new(CountingIo::default());
        let data = LogDir::open_with_io(
            dir.path(),
            LogConfig::default(),
            DirConfig::default(),
            Arc::clone(&io) as Arc<dyn FileIo>,
        )
        .unwrap();
        let logs: Vec<_> = (0..10)
            .map(|p| data.create("t", p, None).unwrap())
            .collect();
        for log in &logs {
            log.append(&mut batch(0, 1, 100), 1_000).unwrap();
        }
        data.checkpoint_recovery_points().unwrap();
        logs[3].append(&mut batch(0, 1, 100), 1_000).unwrap();
        io.take();
        drop(logs);
        data.close().unwrap();
        let calls = io.take();
        let syncs = calls.iter().filter(|(op, _)| *op == "sync").count();
        assert_eq!(
            syncs,
            1 + 1 + 1,
            "the dirty log, the checkpoint, the marker: {calls:?}"
        );
        let checkpoint = dir
            .path()
            .join(crate::offset_checkpoint::OFFSET_CHECKPOINT_FILE);
        assert_eq!(
            calls
                .iter()
                .filter(|(op, path)| *op == "rename" && path.as_ref() == Some(&checkpoint))
                .count(),
            1
        );
        let data = LogDir::open(dir.path(), LogConfig::default()).unwrap();
        assert_eq!(
            data.log("t", 3).unwrap().unwrap().log_end_offset().unwrap(),
            2
        );
    }

    /// Retention and DeleteRecords move the log start in memory and the directory's table only
    /// (no write of the offset checkpoint, which names every log); the periodic checkpoint
    /// writes it once, and a crash before that may bring the older start back (as in Kafka),
    /// never one below it.
    #[test]
    fn a_moved_log_start_is_written_by_the_next_checkpoint_not_at_once() {
        let dir = temp_dir();
        let io = Arc::new(CountingIo::default());
        let checkpoint = dir
            .path()
            .join(crate::offset_checkpoint::OFFSET_CHECKPOINT_FILE);
        let renames_of_checkpoint = |calls: &[(&'static str, Option<PathBuf>)]| {
            calls
                .iter()
                .filter(|(op, path)| *op == "rename" && path.as_ref() == Some(&checkpoint))
                .count()
        };
        let config = LogConfig {
            retention_ms: Some(1_000),
            ..small_segments()
        };
        let start_2 = {
            let data = LogDir::open_with_io(
                dir.path(),
                config.clone(),
                DirConfig::default(),
                Arc::clone(&io) as Arc<dyn FileIo>,
            )
            .unwrap();
            let logs: Vec<_> = (0..3).map(|p| data.create("t", p, None).unwrap()).collect();
            for log in &logs {
                for _ in 0..20 {
                    log.append(&mut batch(0, 2, 200), 1_000).unwrap();
                }
            }
            data.checkpoint_recovery_points().unwrap();
            io.take();
            assert_eq!(
                logs[0].delete_records_before(1).unwrap(),
                1,
                "no segment deleted"
            );
            assert_eq!(
                io.take(),
                [],
                "a start moved inside the first segment costs no I/O"
            );
            assert_eq!(logs[1].delete_records_before(7).unwrap(), 7);
            assert!(logs[2].enforce_retention(10_000).unwrap() > 0);
            let start_2 = logs[2].log_start_offset().unwrap();
            assert!(start_2 > 0);
            assert_eq!(
                renames_of_checkpoint(&io.take()),
                0,
                "no checkpoint written"
            );
            data.checkpoint_recovery_points().unwrap();
            assert_eq!(renames_of_checkpoint(&io.take()), 1, "one for all three");
            assert_eq!(logs[0].delete_records_before(3).unwrap(), 3);
            assert_eq!(logs[1].delete_records_before(9).unwrap(), 9);
            // Dropped without close: a crash after the checkpoint.
            start_2
        };
        let data = LogDir::open(dir.path(), config).unwrap();
        let start = |partition| {
            data.log("t", partition)
                .unwrap()
                .unwrap()
                .log_start_offset()
                .unwrap()
        };
        // The checkpointed starts, or for log 1 the first segment the DeleteRecords of 9 left
        // (a segment holds 4 batches of 2 offsets: it deleted the one below 8).
        assert_eq!(start(0), 1);
        assert_eq!(start(1), 8);
        assert_eq!(start(2), start_2);
        data.close().unwrap();
    }

    #[test]
    fn per_log_checkpoints_are_read_and_removed_once_the_directory_checkpoint_covers_them() {
        let dir = temp_dir();
        {
            let data = LogDir::open(dir.path(), small_segments()).unwrap();
            for partition in 0..3 {
                let log = data.create("t", partition, None).unwrap();
                for _ in 0..20 {
                    log.append(&mut batch(0, 2, 200), 1_000).unwrap();
                }
                log.delete_records_before(7).unwrap();
                log.flush().unwrap();
            }
            data.checkpoint_recovery_points().unwrap();
            // Dropped without close: recovery from the checkpoint's recovery point.
        }
        // Make the directory look like one an older Skiff wrote: a per-log `checkpoint` file
        // each (the start and a recovery point below the end), no directory checkpoint.
        let checkpoint_path = dir
            .path()
            .join(crate::offset_checkpoint::OFFSET_CHECKPOINT_FILE);
        std::fs::remove_file(&checkpoint_path).unwrap();
        for partition in 0..3 {
            std::fs::write(
                dir.path()
                    .join(format!("t-{partition}"))
                    .join(fs::CHECKPOINT_FILE),
                "skiff-checkpoint 1\nlog_start_offset 7\nrecovery_point 11\n",
            )
            .unwrap();
        }
        let data =
            LogDir::open_deferred(dir.path(), small_segments(), DirConfig::default()).unwrap();
        data.log("t", 0)
            .unwrap()
            .unwrap()
            .recover_deferred()
            .unwrap();
        let log = data.log("t", 0).unwrap().unwrap();
        assert_eq!(log.log_start_offset().unwrap(), 7, "the old file's start");
        assert_eq!(log.log_end_offset().unwrap(), 40);
        let old = |partition: i32| {
            dir.path()
                .join(format!("t-{partition}"))
                .join(fs::CHECKPOINT_FILE)
        };
        // Written for the recovered log only: the others keep their old files.
        data.checkpoint_recovery_points().unwrap();
        assert!(!old(0).exists());
        assert!(old(1).exists() && old(2).exists());
        let entries =
            crate::offset_checkpoint::parse(&std::fs::read(&checkpoint_path).unwrap()).unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[&("t".to_owned(), 0)].log_start_offset, 7);
        data.close().unwrap();
        for partition in 0..3 {
            assert!(!old(partition).exists());
        }
        let data = LogDir::open(dir.path(), small_segments()).unwrap();
        for partition in 0..3 {
            let log = data.log("t", partition).unwrap().unwrap();
            assert_eq!(log.log_start_offset().unwrap(), 7);
            assert_eq!(log.log_end_offset().unwrap(), 40);
        }
    }

    #[test]
    fn a_damaged_directory_checkpoint_means_recovery_from_scratch() {
        let dir = temp_dir();
        {
            let data = LogDir::open(dir.path(), small_segments()).unwrap();
            let log = data.create("t", 0, None).unwrap();
            for _ in 0..20 {
                log.append(&mut batch(0, 2, 200), 1_000).unwrap();
            }
            data.close().unwrap();
        }
        let checkpoint_path = dir
            .path()
            .join(crate::offset_checkpoint::OFFSET_CHECKPOINT_FILE);
        // A recovery point far past the data, in a file that does not parse.
        std::fs::write(
            &checkpoint_path,
            "skiff-offset-checkpoint 1\n1\nt 0 0 999\nx\n",
        )
        .unwrap();
        let data = LogDir::open(dir.path(), small_segments()).unwrap();
        let damage = data.checkpoint_damage().unwrap().to_owned();
        assert!(damage.contains("skiff-offset-checkpoint"), "{damage}");
        assert!(!data.opened_clean(), "nothing trusted");
        let log = data.log("t", 0).unwrap().unwrap();
        assert_eq!(log.log_end_offset().unwrap(), 40);
        assert_eq!(log.flushed_offset().unwrap(), 0);
        data.close().unwrap();
        let data = LogDir::open(dir.path(), small_segments()).unwrap();
        assert!(data.checkpoint_damage().is_none());
        assert_eq!(
            data.log("t", 0).unwrap().unwrap().flushed_offset().unwrap(),
            40
        );
    }

    #[test]
    fn a_recreated_log_never_inherits_a_deleted_ones_recovery_point() {
        let dir = temp_dir();
        {
            let data = LogDir::open(dir.path(), LogConfig::default()).unwrap();
            let log = data.create("t", 0, None).unwrap();
            log.append(&mut batch(0, 5, 10), 1_000).unwrap();
            data.checkpoint_recovery_points().unwrap();
            data.delete("t", 0).unwrap();
            data.create("t", 0, None).unwrap();
            // Dropped without close: the checkpoint on disk must not say 5 for the new log.
        }
        let data = LogDir::open(dir.path(), LogConfig::default()).unwrap();
        let log = data.log("t", 0).unwrap().unwrap();
        assert_eq!(log.log_end_offset().unwrap(), 0);
    }

    #[test]
    fn work_on_threads_keeps_the_order_of_the_items() {
        let items: Vec<u32> = (0..100).collect();
        let doubled = on_threads(4, &items, |item| Ok(item * 2));
        let doubled: Vec<u32> = doubled.into_iter().map(|result| result.unwrap()).collect();
        assert_eq!(doubled, (0..100).map(|item| item * 2).collect::<Vec<_>>());
        let failed = on_threads(3, &items, |item| {
            if *item == 50 {
                Err(Error::Closed)
            } else {
                Ok(*item)
            }
        });
        assert!(matches!(failed[50], Err(Error::Closed)));
        assert!(failed[49].is_ok());
    }
}
