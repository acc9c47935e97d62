//! The process-wide limits that logs count against: open descriptors (RLIMIT_NOFILE, and the
//! system's `fs.file-max`) and memory maps (`vm.max_map_count`). Owns reading them and naming a
//! limit that was hit; must never change a limit (the embedder raises RLIMIT_NOFILE if it wants
//! to) nor decide what is admitted (`LogDir::check_room` does).

use std::io;

use crate::error::Error;
use crate::mmap;

/// `vm.max_map_count`, if this system has one to read.
pub(crate) fn max_map_count() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Descriptors this process holds open now (the entries of `/proc/self/fd`, less the one the
/// listing itself uses); `None` where there is no such directory.
pub(crate) fn open_files_count() -> Option<u64> {
    let entries = std::fs::read_dir("/proc/self/fd").ok()?;
    Some((entries.count() as u64).saturating_sub(1))
}

/// The soft RLIMIT_NOFILE.
pub(crate) fn open_files_limit() -> io::Result<u64> {
    mmap::open_files_limit()
}

/// If `error` is a process or system limit being hit (no descriptor left, no mapping left), the
/// same failure as [`Error::LimitReached`], naming the limit; otherwise `error` unchanged.
pub(crate) fn name_limit(error: Error) -> Error {
    let Error::Io { path, source } = &error else {
        return error;
    };
    let limit = match source.raw_os_error() {
        Some(libc::EMFILE) => format!(
            "the process's open-file limit (RLIMIT_NOFILE, soft {}) is reached",
            open_files_limit().map_or_else(|_| "?".to_owned(), |limit| limit.to_string())
        ),
        Some(libc::ENFILE) => "the system's open-file limit (fs.file-max) is reached".to_owned(),
        _ if source.kind() == io::ErrorKind::OutOfMemory => source.to_string(),
        _ => return error,
    };
    Error::LimitReached(format!("{limit} (at {})", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_named_and_other_errors_pass() {
        let emfile = Error::io("/x", io::Error::from_raw_os_error(libc::EMFILE));
        let named = name_limit(emfile).to_string();
        assert!(named.contains("RLIMIT_NOFILE"), "{named}");
        let enfile = Error::io("/x", io::Error::from_raw_os_error(libc::ENFILE));
        assert!(name_limit(enfile).to_string().contains("fs.file-max"));
        let eio = Error::io("/x", io::Error::from_raw_os_error(libc::EIO));
        assert!(matches!(name_limit(eio), Error::Io { .. }));
        assert!(open_files_count().unwrap() > 0);
        assert!(open_files_limit().unwrap() > 0);
    }
}
