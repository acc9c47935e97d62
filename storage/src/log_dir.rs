//! [`LogDir`]: a data directory holding one directory per partition log (`<topic>-<partition>`),
//! its lock file and its clean-shutdown marker. Owns which logs exist, their creation, deletion
//! and recovery at open, and the clean close. Must never let two owners open the same directory,
//! nor write the clean-shutdown marker while any log might hold unflushed or unrecovered data.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::config::LogConfig;
use crate::error::{Error, Result};
use crate::fs::{self, DurableFiles, CLEAN_SHUTDOWN_FILE, DELETING_SUFFIX, LOCK_FILE};
use crate::io::{FileIo, OpenMode, StdIo};
use crate::log::Log;
use crate::mmap;

type LogKey = (String, i32);

/// A data directory and the partition logs below it.
#[derive(Debug)]
pub struct LogDir {
    path: PathBuf,
    io: Arc<dyn FileIo>,
    default_config: LogConfig,
    logs: Mutex<BTreeMap<LogKey, Arc<Log>>>,
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
        Self::open_with_io(path.as_ref(), default_config, Arc::new(StdIo))
    }

    /// [`LogDir::open`] over a simulated file system (feature `power-sim`, for tests).
    #[cfg(feature = "power-sim")]
    pub fn open_simulated(
        path: impl AsRef<Path>,
        default_config: LogConfig,
        io: Arc<crate::io::sim::SimIo>,
    ) -> Result<Self> {
        Self::open_with_io(path.as_ref(), default_config, io)
    }

    pub(crate) fn open_with_io(
        path: &Path,
        default_config: LogConfig,
        io: Arc<dyn FileIo>,
    ) -> Result<Self> {
        default_config.validate()?;
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
        let mut clean = false;
        let mut found = Vec::new();
        for entry in io.read_dir(path).map_err(|error| Error::io(path, error))? {
            let Some(name) = entry.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if entry == marker {
                clean = true;
            } else if name.ends_with(DELETING_SUFFIX) {
                io.remove_dir_all(&entry)
                    .map_err(|error| Error::io(&entry, error))?;
            } else if let Some(key) = fs::parse_log_dir_name(name) {
                found.push((key, entry));
            }
        }
        if clean {
            // From here on a crash must mean recovery again.
            io.remove_file(&marker)
                .map_err(|error| Error::io(&marker, error))?;
            fs::sync_parent(io.as_ref(), &marker)?;
        }
        let mut logs = BTreeMap::new();
        for ((topic, partition), dir) in found {
            let log = Log::open(
                Arc::clone(&io),
                &dir,
                &topic,
                partition,
                default_config.clone(),
                clean,
            )?;
            logs.insert((topic, partition), Arc::new(log));
        }
        Ok(Self {
            path: path.to_owned(),
            io,
            default_config,
            logs: Mutex::new(logs),
            _lock: lock,
        })
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
        let dir = self.path.join(&name);
        self.io
            .create_dir_all(&dir)
            .map_err(|error| Error::io(&dir, error))?;
        fs::sync_parent(self.io.as_ref(), &dir)?;
        // A new directory has nothing to recover: open it as if cleanly shut down.
        let log = Arc::new(Log::open(
            Arc::clone(&self.io),
            &dir,
            topic,
            partition,
            config,
            true,
        )?);
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

    /// Closes every log (flush, trim indexes, checkpoint) and then writes the clean-shutdown
    /// marker, so the next open skips recovery. If any log fails, no marker is written and the
    /// first error is returned. Logs still shared elsewhere refuse writes afterwards.
    pub fn close(self) -> Result<()> {
        let logs: Vec<Arc<Log>> = self.logs()?.values().cloned().collect();
        for log in logs {
            log.close()?;
        }
        fs::write_atomic(self.io.as_ref(), &self.path.join(CLEAN_SHUTDOWN_FILE), b"")
    }
}
