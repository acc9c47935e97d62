//! On-disk names and small atomic files: 20-digit segment file names, partition directory names,
//! the old per-log checkpoint file (read for migration only: the directory's
//! `offset_checkpoint` replaced it) and the clean-shutdown marker, and the temp → fsync → rename
//! → fsync-dir sequence that writes them. Must never touch the file system except through
//! [`FileIo`].

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::io::{FileIo, OpenMode};
use crate::limits;

/// Suffix of a segment's log file.
pub(crate) const LOG_SUFFIX: &str = "log";
/// Suffix of a segment's offset index.
pub(crate) const INDEX_SUFFIX: &str = "index";
/// Suffix of a segment's time index.
pub(crate) const TIME_INDEX_SUFFIX: &str = "timeindex";
/// Suffix of a segment's aborted-transaction index (Kafka's name).
pub(crate) const TXN_INDEX_SUFFIX: &str = "txnindex";
/// Suffix of a producer-state snapshot, named by its offset (Kafka's name).
pub(crate) const SNAPSHOT_SUFFIX: &str = "snapshot";
/// Suffix of a segment's log file while truncation writes its replacement.
pub(crate) const TRUNCATING_SUFFIX: &str = "truncating";
/// A partition's checkpoint as Skiff wrote it before the directory's offset checkpoint: log
/// start offset and recovery point. Read when the directory checkpoint lacks the log, removed
/// once a durable directory checkpoint names it, never written.
pub(crate) const CHECKPOINT_FILE: &str = "checkpoint";
/// Suffix of a cleaned segment's log file before its swap (`<base>.log.cleaned`).
pub(crate) const CLEANED_SUFFIX: &str = "cleaned";
/// Suffix of any file being written before its atomic rename.
pub(crate) const TEMP_SUFFIX: &str = "tmp";
/// Marker written by a clean close of the data directory; its absence means recovery.
pub(crate) const CLEAN_SHUTDOWN_FILE: &str = ".skiff_clean_shutdown";
/// The data directory's lock file.
pub(crate) const LOCK_FILE: &str = ".lock";
/// Suffix of a partition directory being deleted (renamed first, so a crash never leaves half a
/// log under a valid name).
pub(crate) const DELETING_SUFFIX: &str = ".deleting";
/// First line of the checkpoint file: format version.
const CHECKPOINT_HEADER: &str = "skiff-checkpoint 1";

/// `dir/<20-digit base offset>.<suffix>`.
pub(crate) fn segment_file(dir: &Path, base_offset: i64, suffix: &str) -> PathBuf {
    dir.join(format!("{base_offset:020}.{suffix}"))
}

/// The base offset a `.log` file name encodes, if it is one.
pub(crate) fn parse_log_file_name(path: &Path) -> Option<i64> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(LOG_SUFFIX)?.strip_suffix('.')?;
    if stem.len() != 20 || !stem.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// Directory name of a partition log: `<topic>-<partition>`.
pub(crate) fn log_dir_name(topic: &str, partition: i32) -> Result<String> {
    let valid_topic = skiff_protocol::topic_name::validate_topic_name(topic).is_ok();
    if !valid_topic || partition < 0 {
        return Err(Error::InvalidName(format!("{topic}-{partition}")));
    }
    Ok(format!("{topic}-{partition}"))
}

/// Topic and partition of a partition directory name, if it is one.
pub(crate) fn parse_log_dir_name(name: &str) -> Option<(String, i32)> {
    let (topic, partition) = name.rsplit_once('-')?;
    if !partition.bytes().all(|byte| byte.is_ascii_digit()) || partition.is_empty() {
        return None;
    }
    let partition: i32 = partition.parse().ok()?;
    let canonical = log_dir_name(topic, partition).ok()?;
    (canonical == name).then(|| (topic.to_owned(), partition))
}

/// Writes `bytes` to `path` atomically: temp file, fsync, rename, fsync of the directory.
pub(crate) fn write_atomic(io: &dyn FileIo, path: &Path, bytes: &[u8]) -> Result<()> {
    let temp = path.with_extension(TEMP_SUFFIX);
    let file = io
        .open(&temp, OpenMode::CreateTruncate)
        .map_err(|error| Error::io(&temp, error))?;
    io.write_all_at(&file, bytes, 0)
        .map_err(|error| Error::io(&temp, error))?;
    io.sync(&file, crate::config::PersistMode::SyncAll)
        .map_err(|error| Error::io(&temp, error))?;
    drop(file);
    io.rename(&temp, path)
        .map_err(|error| Error::io(path, error))?;
    sync_parent(io, path)
}

/// Writes `bytes` to `path` atomically and durably on the real file system; see
/// [`DurableFiles::write_atomically`]. For files outside any [`crate::LogDir`]; files beside a
/// log directory go through its [`crate::LogDir::files`], so a simulated power cut covers them.
pub fn write_file_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic(&crate::io::StdIo, path, bytes)
}

/// An embedder's own small durable files (the broker's topic metadata, its node identity, its
/// producer-id checkpoint) through the same file operations as a [`crate::LogDir`]'s logs:
/// [`crate::LogDir::files`] hands out the directory's, so when the directory runs on the
/// power-loss simulation (`sim::SimIo`) these files are cut with the logs. Cheap to clone.
#[derive(Clone, Debug)]
pub struct DurableFiles {
    io: std::sync::Arc<dyn FileIo>,
}

impl DurableFiles {
    pub(crate) fn new(io: std::sync::Arc<dyn FileIo>) -> Self {
        Self { io }
    }

    /// The real file system.
    pub fn real() -> Self {
        Self::new(std::sync::Arc::new(crate::io::StdIo))
    }

    /// The power-loss simulation (feature `power-sim`, for tests): for an embedder's files
    /// outside any [`crate::LogDir`] (a `LogDir` on the simulation hands out its own).
    #[cfg(feature = "power-sim")]
    pub fn simulated(io: std::sync::Arc<crate::io::sim::SimIo>) -> Self {
        Self::new(io)
    }

    /// Writes `bytes` to `path` atomically and durably, exactly as the engine writes its own
    /// checkpoints (temp file, fsync, rename, fsync of the directory): after a crash `path` holds
    /// the old bytes or the new ones, never a mix. The one such writer.
    pub fn write_atomically(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        write_atomic(self.io.as_ref(), path, bytes)
    }

    /// The whole of a small file, `None` if it does not exist; a file above `bytes_max` is an
    /// error (an [`Error::Io`] of kind `InvalidData`), found without reading it whole.
    pub fn read_small(&self, path: &Path, bytes_max: u64) -> Result<Option<Vec<u8>>> {
        match self.io.read_small(path, bytes_max) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(Error::io(path, error)),
        }
    }

    /// Creates a directory and its parents (durable at once in the simulation, as directories
    /// are there).
    pub fn create_dir_all(&self, path: &Path) -> Result<()> {
        self.io
            .create_dir_all(path)
            .map_err(|error| Error::io(path, error))
    }

    /// Opens the existing file `path` to append to it (a journal): writes go at its end, and
    /// are durable only after [`AppendFile::sync_data`].
    pub fn open_append(&self, path: &Path) -> Result<AppendFile> {
        let file = self
            .io
            .open(path, OpenMode::ReadWrite)
            .map_err(|error| Error::io(path, error))?;
        let len = self.io.len(&file).map_err(|error| Error::io(path, error))?;
        Ok(AppendFile {
            io: std::sync::Arc::clone(&self.io),
            file,
            path: path.to_owned(),
            len,
        })
    }
}

/// A file written only at its end, through [`DurableFiles`]' operations (see
/// [`DurableFiles::open_append`]). Tracks its own length, so a failed write never moves it: the
/// next write goes where the failed one began (the caller is expected to stop writing anyway).
#[derive(Debug)]
pub struct AppendFile {
    io: std::sync::Arc<dyn FileIo>,
    file: std::fs::File,
    path: PathBuf,
    len: u64,
}

impl AppendFile {
    /// Bytes in the file, as this handle wrote them.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the file is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes all of `bytes` at the end (not yet durable).
    pub fn append(&mut self, bytes: &[u8]) -> Result<()> {
        self.io
            .write_all_at(&self.file, bytes, self.len)
            .map_err(|error| Error::io(&self.path, error))?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// Makes the written bytes durable (`fdatasync`).
    pub fn sync_data(&self) -> Result<()> {
        self.io
            .sync(&self.file, crate::config::PersistMode::SyncData)
            .map_err(|error| Error::io(&self.path, error))
    }

    /// Cuts the file to `len` bytes (a torn tail) and makes that durable before any append.
    pub fn truncate(&mut self, len: u64) -> Result<()> {
        self.io
            .set_len(&self.file, len)
            .map_err(|error| Error::io(&self.path, error))?;
        self.len = len;
        self.sync_data()
    }
}

/// Fsyncs the directory holding `path`.
pub(crate) fn sync_parent(io: &dyn FileIo, path: &Path) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    io.sync_dir(dir).map_err(|error| Error::io(dir, error))
}

/// A partition's durable offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    /// First offset still readable.
    pub(crate) log_start_offset: i64,
    /// Every offset below this was flushed; recovery scans only from here.
    pub(crate) recovery_point: i64,
}

impl Checkpoint {
    /// Reads the old per-log checkpoint of the log in `dir`; `None` if there is none.
    pub(crate) fn read(io: &dyn FileIo, dir: &Path) -> Result<Option<Self>> {
        let path = dir.join(CHECKPOINT_FILE);
        let bytes = match io.read_small(&path, limits::CHECKPOINT_BYTES_MAX) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(Error::io(&path, error)),
        };
        let corrupt = |reason: &str| Error::corrupt(&path, 0, reason);
        let text = std::str::from_utf8(&bytes).map_err(|_| corrupt("not UTF-8"))?;
        let mut lines = text.lines();
        if lines.next() != Some(CHECKPOINT_HEADER) {
            return Err(corrupt("unknown checkpoint header"));
        }
        let mut field = |name: &str| -> Result<i64> {
            let line = lines.next().ok_or_else(|| corrupt("missing line"))?;
            let value = line
                .strip_prefix(name)
                .and_then(|rest| rest.strip_prefix(' '))
                .ok_or_else(|| corrupt("unexpected field"))?;
            let value: i64 = value.parse().map_err(|_| corrupt("bad number"))?;
            if value < 0 {
                return Err(corrupt("negative offset"));
            }
            Ok(value)
        };
        let log_start_offset = field("log_start_offset")?;
        let recovery_point = field("recovery_point")?;
        Ok(Some(Self {
            log_start_offset,
            recovery_point,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::StdIo;

    #[test]
    fn segment_names_round_trip() {
        let path = segment_file(Path::new("/x"), 42, LOG_SUFFIX);
        assert_eq!(path, Path::new("/x/00000000000000000042.log"));
        assert_eq!(parse_log_file_name(&path), Some(42));
        assert_eq!(parse_log_file_name(Path::new("/x/42.log")), None);
        assert_eq!(
            parse_log_file_name(Path::new("/x/00000000000000000042.index")),
            None
        );
    }

    #[test]
    fn log_dir_names_are_validated() {
        assert_eq!(log_dir_name("orders", 3).unwrap(), "orders-3");
        assert_eq!(
            parse_log_dir_name("my-topic-12"),
            Some(("my-topic".to_owned(), 12))
        );
        for (topic, partition) in [("", 0), ("a/b", 0), ("..", 0), ("ok", -1), ("spa ce", 1)] {
            assert!(log_dir_name(topic, partition).is_err(), "{topic:?}");
        }
        for name in [
            "topic",
            "topic-",
            "topic-01",
            "a/b-0",
            "x-0.deleting",
            ".lock",
        ] {
            assert_eq!(parse_log_dir_name(name), None, "{name}");
        }
    }

    #[test]
    fn checkpoint_round_trip_and_garbage_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Checkpoint::read(&StdIo, dir.path()).unwrap(), None);
        let checkpoint = Checkpoint {
            log_start_offset: 5,
            recovery_point: 17,
        };
        std::fs::write(
            dir.path().join(CHECKPOINT_FILE),
            "skiff-checkpoint 1\nlog_start_offset 5\nrecovery_point 17\n",
        )
        .unwrap();
        assert_eq!(
            Checkpoint::read(&StdIo, dir.path()).unwrap(),
            Some(checkpoint)
        );
        std::fs::write(dir.path().join(CHECKPOINT_FILE), b"garbage").unwrap();
        assert!(matches!(
            Checkpoint::read(&StdIo, dir.path()),
            Err(Error::Corrupt { .. })
        ));
        std::fs::write(dir.path().join(CHECKPOINT_FILE), vec![b'x'; 10_000]).unwrap();
        assert!(Checkpoint::read(&StdIo, dir.path()).is_err());
    }
}
