//! Every file-system operation the engine performs goes through [`FileIo`], so tests can inject
//! EIO, failed fsyncs and torn writes into the real code paths. Owns opening, writing, syncing,
//! renaming and removing; must never decide what to write or when (that is `log`'s job), and no
//! other module may call `std::fs` mutators or `OpenOptions` directly.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::config::PersistMode;

#[cfg(feature = "power-sim")]
pub mod sim;

/// How to open a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpenMode {
    /// Create a new file for reading and writing; fail if it exists.
    CreateNew,
    /// Create or truncate a file for reading and writing.
    CreateTruncate,
    /// Open an existing file for reading and writing.
    ReadWrite,
    /// Open a file for reading and writing, creating it empty if it does not exist (never
    /// truncating one that does).
    CreateKeep,
}

/// The file-system operations of the engine. Positioned reads and writes take the `File` so the
/// same handle can be shared (`Arc<File>`) with readers.
pub(crate) trait FileIo: Send + Sync + std::fmt::Debug {
    /// Opens `path` in `mode`.
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<File>;
    /// Writes all of `bytes` at `position`.
    fn write_all_at(&self, file: &File, bytes: &[u8], position: u64) -> io::Result<()>;
    /// Fills `buf` from `position`; a short file is `UnexpectedEof`.
    fn read_exact_at(&self, file: &File, buf: &mut [u8], position: u64) -> io::Result<()>;
    /// Makes the file's written bytes durable as `mode` says.
    fn sync(&self, file: &File, mode: PersistMode) -> io::Result<()>;
    /// Writes the dirty pages of `map`, a mapping of the file at `path`, back and waits for them
    /// (`msync(MS_SYNC)`, which on Linux makes the mapped bytes durable, though not the file's
    /// length). Here rather than in the index so the power-loss simulation sees it.
    fn sync_map(&self, path: &Path, map: &memmap2::MmapMut) -> io::Result<()>;
    /// Sets the file's length (truncates or extends with zeros).
    fn set_len(&self, file: &File, len: u64) -> io::Result<()>;
    /// Current length of the file.
    fn len(&self, file: &File) -> io::Result<u64>;
    /// Renames `from` to `to`, replacing `to`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Removes a directory and everything below it.
    fn remove_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Creates a directory and its parents.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Makes a directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// Makes everything written on the file system holding `path` durable: every file's data
    /// (mapped pages included) and every directory entry (`syncfs(2)`). One call in place of an
    /// fsync per file, for a close of thousands of logs.
    fn sync_filesystem(&self, path: &Path) -> io::Result<()>;
    /// Entries of a directory, as full paths.
    fn read_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>>;
    /// Reads a whole small file, failing if it is larger than `bytes_max`.
    fn read_small(&self, path: &Path, bytes_max: u64) -> io::Result<Vec<u8>>;
}

/// The real file system.
#[derive(Debug, Default)]
pub(crate) struct StdIo;

impl FileIo for StdIo {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<File> {
        let mut options = OpenOptions::new();
        match mode {
            OpenMode::CreateNew => options.read(true).write(true).create_new(true),
            OpenMode::CreateTruncate => options.read(true).write(true).create(true).truncate(true),
            OpenMode::ReadWrite => options.read(true).write(true),
            OpenMode::CreateKeep => options.read(true).write(true).create(true),
        };
        options.open(path)
    }

    fn write_all_at(&self, file: &File, bytes: &[u8], position: u64) -> io::Result<()> {
        file.write_all_at(bytes, position)
    }

    fn read_exact_at(&self, file: &File, buf: &mut [u8], position: u64) -> io::Result<()> {
        file.read_exact_at(buf, position)
    }

    fn sync(&self, file: &File, mode: PersistMode) -> io::Result<()> {
        match mode {
            PersistMode::Buffer => Ok(()),
            PersistMode::SyncData => file.sync_data(),
            PersistMode::SyncAll => file.sync_all(),
        }
    }

    fn sync_map(&self, _path: &Path, map: &memmap2::MmapMut) -> io::Result<()> {
        map.flush()
    }

    fn set_len(&self, file: &File, len: u64) -> io::Result<()> {
        file.set_len(len)
    }

    fn len(&self, file: &File) -> io::Result<u64> {
        Ok(file.metadata()?.len())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir_all(path)
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        // A directory opened read-only can be fsynced on Linux; that is what makes a new, renamed
        // or removed entry survive a machine crash.
        File::open(path)?.sync_all()
    }

    fn sync_filesystem(&self, path: &Path) -> io::Result<()> {
        crate::mmap::sync_filesystem(&File::open(path)?)
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        let mut paths = Vec::new();
        for entry in std::fs::read_dir(path)? {
            paths.push(entry?.path());
        }
        paths.sort();
        Ok(paths)
    }

    fn read_small(&self, path: &Path, bytes_max: u64) -> io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        // Read one byte past the limit so a larger file is detected without reading it whole.
        File::open(path)?
            .take(bytes_max.saturating_add(1))
            .read_to_end(&mut bytes)?;
        if bytes.len() as u64 > bytes_max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("file larger than {bytes_max} bytes"),
            ));
        }
        Ok(bytes)
    }
}

#[cfg(test)]
pub(crate) mod faulty {
    //! A [`FileIo`] that fails on command: the next fsync, or writes that stop part way (torn);
    //! or that holds writes until released, to look at the log while an append is mid-write.

    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

    use super::*;

    /// Wraps [`StdIo`]; each switch is read on every call.
    #[derive(Debug, Default)]
    pub(crate) struct FaultyIo {
        /// Every `sync` fails with EIO while set (after the first `fail_sync_after`).
        pub(crate) fail_sync: AtomicBool,
        /// Syncs (file, map, directory) that still succeed once `fail_sync` is set, counted
        /// down: a failure at the n-th sync of an operation.
        pub(crate) fail_sync_after: AtomicU64,
        /// When non-zero, the next write writes only this many bytes, then fails with EIO.
        pub(crate) torn_write_bytes: AtomicUsize,
        /// While set, writes wait (counted in `writes_held`) before writing anything.
        pub(crate) hold_writes: AtomicBool,
        /// Writes waiting on `hold_writes`.
        pub(crate) writes_held: AtomicUsize,
    }

    fn eio() -> io::Error {
        io::Error::from_raw_os_error(libc::EIO)
    }

    impl FaultyIo {
        /// Whether this sync fails (and counts it down if it is one of those spared).
        fn sync_fails(&self) -> bool {
            if !self.fail_sync.load(Ordering::SeqCst) {
                return false;
            }
            let spared =
                self.fail_sync_after
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                        left.checked_sub(1)
                    });
            spared.is_err()
        }
    }

    impl FileIo for FaultyIo {
        fn open(&self, path: &Path, mode: OpenMode) -> io::Result<File> {
            StdIo.open(path, mode)
        }
        fn write_all_at(&self, file: &File, bytes: &[u8], position: u64) -> io::Result<()> {
            if self.hold_writes.load(Ordering::SeqCst) {
                self.writes_held.fetch_add(1, Ordering::SeqCst);
                while self.hold_writes.load(Ordering::SeqCst) {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                self.writes_held.fetch_sub(1, Ordering::SeqCst);
            }
            let torn = self.torn_write_bytes.swap(0, Ordering::SeqCst);
            if torn > 0 {
                let prefix = bytes.get(..torn.min(bytes.len())).unwrap_or_default();
                StdIo.write_all_at(file, prefix, position)?;
                return Err(eio());
            }
            StdIo.write_all_at(file, bytes, position)
        }
        fn read_exact_at(&self, file: &File, buf: &mut [u8], position: u64) -> io::Result<()> {
            StdIo.read_exact_at(file, buf, position)
        }
        fn sync(&self, file: &File, mode: PersistMode) -> io::Result<()> {
            if self.sync_fails() {
                return Err(eio());
            }
            StdIo.sync(file, mode)
        }
        fn sync_map(&self, path: &Path, map: &memmap2::MmapMut) -> io::Result<()> {
            if self.sync_fails() {
                return Err(eio());
            }
            StdIo.sync_map(path, map)
        }
        fn set_len(&self, file: &File, len: u64) -> io::Result<()> {
            StdIo.set_len(file, len)
        }
        fn len(&self, file: &File) -> io::Result<u64> {
            StdIo.len(file)
        }
        fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
            StdIo.rename(from, to)
        }
        fn remove_file(&self, path: &Path) -> io::Result<()> {
            StdIo.remove_file(path)
        }
        fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
            StdIo.remove_dir_all(path)
        }
        fn create_dir_all(&self, path: &Path) -> io::Result<()> {
            StdIo.create_dir_all(path)
        }
        fn sync_dir(&self, path: &Path) -> io::Result<()> {
            if self.sync_fails() {
                return Err(eio());
            }
            StdIo.sync_dir(path)
        }
        fn sync_filesystem(&self, path: &Path) -> io::Result<()> {
            if self.sync_fails() {
                return Err(eio());
            }
            StdIo.sync_filesystem(path)
        }
        fn read_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
            StdIo.read_dir(path)
        }
        fn read_small(&self, path: &Path, bytes_max: u64) -> io::Result<Vec<u8>> {
            StdIo.read_small(path, bytes_max)
        }
    }
}
