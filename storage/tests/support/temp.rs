//! Test-only temporary directories (tests, benches); kept apart from `batch.rs` because the fuzz
//! crate includes that file and has no `tempfile`.

#![allow(dead_code, unreachable_pub)]

/// A temporary directory, on tmpfs when the machine has one: these tests check logic, not the
/// disk, and an fsync on tmpfs costs nothing, which keeps the suite fast.
pub fn temp_dir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::tempdir_in(shm) {
            return dir;
        }
    }
    tempfile::tempdir().expect("temp dir")
}
