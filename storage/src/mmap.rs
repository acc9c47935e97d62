//! The crate's only `unsafe` code: memory maps (memmap2), the `flock(2)` call behind the data
//! directory's lock file, `syncfs(2)` and the `getrlimit(2)` read of the open-file limit. Owns the conditions under which a mapping is sound; must never map more
//! bytes than the file holds (except the active segment's read-ahead view, [`map_read_ahead`],
//! whose users read only below the file's length), nor hand out a mapping of a file that this
//! engine may shrink while the mapping lives (see `FetchSlice` and `Log::truncate_to` for how
//! shrinking is avoided).

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;

use memmap2::{Mmap, MmapMut, MmapOptions};

/// Maps `len` bytes of `file` from `position`, read-only. `len` must be > 0 and the bytes must
/// exist (checked here against the file's length).
pub(crate) fn map_read(file: &File, position: u64, len: usize) -> io::Result<Mmap> {
    check_range(file, position, len)?;
    name_map_limit(map_read_unchecked(file, position, len))
}

fn map_read_unchecked(file: &File, position: u64, len: usize) -> io::Result<Mmap> {
    // SAFETY: the range lies inside the file (checked above). The engine only appends beyond
    // existing bytes of a file that a reader can hold; it never shrinks or rewrites such a file
    // in place (truncation of a shared file copies the kept prefix to a new inode, and deletion
    // only unlinks, which keeps the inode and its pages alive for this mapping). No other process
    // writes the directory: the lock file excludes it.
    unsafe { MmapOptions::new().offset(position).len(len).map(file) }
}

/// Maps the first `len` bytes of `file` read-only, where `len` may exceed the file's current
/// length: the view of the active segment's `.log`, which grows under it by `pwrite` (one page
/// cache, so written bytes show through the mapping at once).
///
/// The caller must read only bytes below the file's length at the time of the read (a page wholly
/// past the end raises SIGBUS) and must drop the mapping before shrinking the file. `Segment`
/// reads only below `size_bytes`, which never exceeds the file's length, and drops the view when
/// it seals or truncates.
pub(crate) fn map_read_ahead(file: &File, len: usize) -> io::Result<Mmap> {
    if len == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "empty read-ahead mapping",
        ));
    }
    name_map_limit(map_read_ahead_unchecked(file, len))
}

fn map_read_ahead_unchecked(file: &File, len: usize) -> io::Result<Mmap> {
    // SAFETY: mapping past the end of a file is allowed; only touching a page wholly past it
    // faults, and the caller reads only below the file's length (see above). The bytes it reads
    // are never rewritten in place: appends add bytes after them, truncation drops this mapping
    // first, and no other process writes the directory (the lock file excludes it).
    unsafe { MmapOptions::new().len(len).map(file) }
}

/// Maps the first `len` bytes of `file` read-write (an index file). `len` must be > 0 and within
/// the file.
pub(crate) fn map_mut(file: &File, len: usize) -> io::Result<MmapMut> {
    check_range(file, 0, len)?;
    name_map_limit(map_mut_unchecked(file, len))
}

fn map_mut_unchecked(file: &File, len: usize) -> io::Result<MmapMut> {
    // SAFETY: the range lies inside the file (checked above). Index files are private to their
    // segment: only the owning index, behind the log's lock, writes through this mapping or
    // changes the file's length, and it drops the mapping before shrinking the file below it.
    unsafe { MmapOptions::new().len(len).map_mut(file) }
}

/// A refused mapping (ENOMEM) is nearly always the process's `vm.max_map_count`: said so in the
/// error, which keeps its `OutOfMemory` kind so callers can tell a limit from a failing disk.
fn name_map_limit<T>(result: io::Result<T>) -> io::Result<T> {
    result.map_err(|error| {
        if error.raw_os_error() != Some(libc::ENOMEM) {
            return error;
        }
        let max =
            crate::resources::max_map_count().map_or_else(|| "?".to_owned(), |max| max.to_string());
        io::Error::new(
            io::ErrorKind::OutOfMemory,
            format!(
                "mmap refused ({error}): the process has reached vm.max_map_count ({max} \
                 mappings) or its address space"
            ),
        )
    })
}

/// `syncfs(2)` on the file system holding `file`.
pub(crate) fn sync_filesystem(file: &File) -> io::Result<()> {
    // SAFETY: syncfs takes a file descriptor that `file` keeps open for the duration of the call
    // and touches no memory of ours.
    if unsafe { libc::syncfs(file.as_raw_fd()) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The soft RLIMIT_NOFILE: how many descriptors the process may hold open.
pub(crate) fn open_files_limit() -> io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit through a valid pointer to a local.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(limit.rlim_cur)
}

/// Takes an exclusive, non-blocking `flock` on `file`. `Ok(false)` if someone else holds it. The
/// lock belongs to the open file description, so a second open of the same lock file in this
/// process is refused too, and the kernel releases it when the process dies (even by kill -9).
pub(crate) fn lock_exclusive(file: &File) -> io::Result<bool> {
    // SAFETY: flock takes a file descriptor that `file` keeps open for the duration of the call
    // and touches no memory of ours.
    let result = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if result == 0 {
        return Ok(true);
    }
    let error = io::Error::last_os_error();
    if error.raw_os_error() == Some(libc::EWOULDBLOCK) {
        return Ok(false);
    }
    Err(error)
}

fn check_range(file: &File, position: u64, len: usize) -> io::Result<()> {
    let file_len = file.metadata()?.len();
    let end = position.checked_add(len as u64);
    if len == 0 || end.is_none_or(|end| end > file_len) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("mapping {len} bytes at {position} of a {file_len}-byte file"),
        ));
    }
    Ok(())
}
