//! File-system helpers of the embedded store: the directory lock, and storage errors as this
//! crate's. Every read and write of the store's data goes through [`skiff_storage::DurableFiles`]
//! (so the power-loss simulation covers it); only the lock is taken here directly: it holds no
//! data, and `flock` needs the descriptor.

use std::fs::{File, OpenOptions};
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

/// A storage-layer file error as this crate's: `what` says what was being done.
pub(super) fn file_error(what: &str, error: skiff_storage::Error) -> Error {
    match error {
        skiff_storage::Error::Io { path, source } => {
            Error::io(format!("{what} {}", path.display()), source)
        }
        other => Error::io(what, std::io::Error::other(other.to_string())),
    }
}

/// Whether `error` is [`DurableFiles::read_small`]'s refusal of a file above its bound.
///
/// [`DurableFiles::read_small`]: skiff_storage::DurableFiles::read_small
pub(super) fn is_too_large(error: &skiff_storage::Error) -> bool {
    matches!(error, skiff_storage::Error::Io { source, .. }
        if source.kind() == std::io::ErrorKind::InvalidData)
}
