//! File-system helpers of the embedded store: the directory lock and atomic replacement.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::io::AsRawFd;
use std::path::Path;

use crate::error::{Error, Result};

/// Name of the lock file inside the store's directory.
pub(super) const LOCK_FILE: &str = ".lock";

/// Takes an exclusive, non-blocking `flock` on `dir/.lock`: two stores (two brokers, or a
/// broker started twice) never share one directory. The lock lives as long as the file.
pub(super) fn lock_dir(dir: &Path) -> Result<File> {
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    // SAFETY: flock takes a file descriptor that `file` owns and keeps open for the call; it
    // touches no memory of ours.
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if locked != 0 {
        let error = std::io::Error::last_os_error();
        if error.kind() == std::io::ErrorKind::WouldBlock {
            return Err(Error::Locked {
                path: dir.to_path_buf(),
            });
        }
        return Err(Error::io(format!("locking {}", path.display()), error));
    }
    Ok(file)
}

/// Replaces `path` with `bytes` atomically: temp file, fsync, rename, fsync of the directory.
///
/// TO BE REPLACED by skiff-storage's public atomic-write helper once it lands (storage's
/// `fs::write_atomic` is crate-private today); this is the only copy in this crate.
pub(super) fn replace_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let temp = path.with_extension("tmp");
    let context = |what: &str| format!("{what} {}", temp.display());
    let mut file = File::create(&temp).map_err(|e| Error::io(context("creating"), e))?;
    file.write_all(bytes)
        .map_err(|e| Error::io(context("writing"), e))?;
    file.sync_all()
        .map_err(|e| Error::io(context("syncing"), e))?;
    drop(file);
    std::fs::rename(&temp, path).map_err(|e| {
        Error::io(
            format!("renaming {} to {}", temp.display(), path.display()),
            e,
        )
    })?;
    let dir = path.parent().unwrap_or(Path::new("."));
    File::open(dir)
        .and_then(|dir| dir.sync_all())
        .map_err(|e| Error::io(format!("syncing directory {}", dir.display()), e))
}
