//! A simulated power cut over the real file system: [`SimIo`] is a [`FileIo`] that performs every
//! operation on real files (so memory maps, `sendfile` and the engine's `File` handles behave as
//! they do in production) and keeps, beside them, what a machine crash would leave: each file's
//! bytes as of its last successful fsync and each directory's entries as of its last directory
//! fsync. [`SimIo::power_cut`] then rewrites the directory tree to such a state, chosen by a
//! seed. Owns that model of durability; must never be used outside tests (it reads whole files on
//! every fsync) and never adds a branch to [`StdIo`]'s path: it is a separate implementation.
//!
//! What a cut does, by [`CutMode`]:
//! - [`CutMode::DropUnsynced`]: every byte and every directory change not synced is lost;
//! - [`CutMode::TearLastWrite`]: unsynced bytes and entries survive, except that the last
//!   unsynced write is torn at a 512-byte sector boundary (its later sectors are lost);
//! - [`CutMode::RandomPages`]: a random subset of the unsynced 4 KiB pages survives, each file
//!   keeps its synced or its current length, and each unsynced directory change (creation,
//!   rename, removal) survives or not at random; a rename not followed by a directory fsync can
//!   thus be lost.
//!
//! Failures before the cut: [`SimIo::fail_syncs_after`] makes a later fsync (file or directory)
//! return EIO, and every one after it (the disk has gone bad; the failed sync makes nothing
//! durable, as Linux may drop the dirty pages); [`SimIo::crash_after_ops`] makes every operation
//! after the next `n` fail, which stops the engine in the middle of a roll, a truncation or a
//! checkpoint; the cut then lands there.
//!
//! I/O that bypasses `FileIo`: the index files are written through memory maps. They are modelled
//! as unsynced until their flush: the engine's `msync(MS_SYNC)` goes through
//! [`FileIo::sync_map`], which here makes the mapped bytes (not the file's length) durable, as on
//! Linux. Until then a cut keeps none, some (random pages) or all of an index's entries, and
//! recovery must check indexes against the log. The active segment's read map and `sendfile`
//! only read. The model diffs each file's current bytes (however they were written) against its
//! synced bytes at the cut, so mapped writes are covered without being seen one by one.
//!
//! Simplifications: directories themselves (creation, `remove_dir_all`, directory renames) are
//! durable at once; a removed file whose entry was durable comes back with its synced bytes.

// Test support only (feature `power-sim`): the files it handles are a test's, a few KiB each,
// and a panic here fails that test, which is what it should do; the crate's no-panic lints are
// for the engine.
#![allow(
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    clippy::expect_used,
    clippy::unwrap_used
)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use super::{FileIo, OpenMode, StdIo};
use crate::config::PersistMode;

/// Bytes of one sector: the unit a torn write keeps or loses.
pub const SECTOR_BYTES: u64 = 512;
/// Bytes of one page: the unit the random-pages cut keeps or loses.
pub const PAGE_BYTES: u64 = 4096;

/// The seeds a power-loss test runs: `SKIFF_SEED=<seed>` replays one; otherwise
/// `0..SKIFF_POWER_SEEDS` (default `ci_seeds`: seeds from the clock would make runs differ),
/// then the `regressions` not already in that range. The one reader of the two variables, for
/// every simulated power-loss test (this crate's and the broker's).
pub fn seeds(ci_seeds: u64, regressions: &[u64]) -> Vec<u64> {
    if let Ok(seed) = std::env::var("SKIFF_SEED") {
        return vec![seed.parse().expect("SKIFF_SEED is a number")];
    }
    let count = std::env::var("SKIFF_POWER_SEEDS")
        .ok()
        .map_or(ci_seeds, |count| {
            count.parse().expect("SKIFF_POWER_SEEDS is a number")
        });
    let mut seeds: Vec<u64> = (0..count).collect();
    seeds.extend(regressions.iter().filter(|seed| **seed >= count));
    seeds
}

/// What a power cut keeps of the unsynced state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutMode {
    /// Nothing unsynced survives.
    DropUnsynced,
    /// Everything unsynced survives but the tail of the last unsynced write, cut at a sector.
    TearLastWrite,
    /// A random subset of unsynced pages and directory changes survives.
    RandomPages,
}

/// A file as the simulation knows it: sim-assigned, so a reused inode number is a new file.
type FileId = u64;

#[derive(Debug, Default)]
struct State {
    next_id: FileId,
    /// Live inode number → file.
    by_inode: HashMap<u64, FileId>,
    /// Bytes of each file as of its last successful fsync (empty if never synced).
    synced: HashMap<FileId, Vec<u8>>,
    /// Regular-file entries of each directory as of its last directory fsync.
    synced_dirs: HashMap<PathBuf, BTreeMap<OsString, FileId>>,
    /// The last write not yet covered by an fsync of its file: file, position, length.
    last_write: Option<(FileId, u64, u64)>,
    /// Fsyncs left before they fail; `Some(0)`: failing.
    syncs_before_failure: Option<u64>,
    /// Operations left before every operation fails; `Some(0)`: crashed.
    ops_before_crash: Option<u64>,
    /// Operations performed since the simulation began (or since the last cut).
    ops: u64,
    /// Fsyncs that returned EIO.
    failed_syncs: u64,
}

/// A [`FileIo`] that remembers what is durable and can cut the power. See the module docs.
#[derive(Debug)]
pub struct SimIo {
    root: PathBuf,
    state: Mutex<State>,
}

fn eio(what: &str) -> io::Error {
    io::Error::other(format!("simulated EIO ({what}); os error {}", libc::EIO))
}

/// splitmix64: the cut's choices come from a seed, with no dependency.
#[derive(Debug)]
struct Choices(u64);

impl Choices {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }
    fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            0
        } else {
            self.next() % bound
        }
    }
}

fn inode_of_path(path: &Path) -> io::Result<u64> {
    Ok(std::fs::metadata(path)?.ino())
}

fn read_all(file: &File) -> io::Result<Vec<u8>> {
    let len = usize::try_from(file.metadata()?.len()).unwrap_or(usize::MAX);
    let mut bytes = vec![0u8; len];
    file.read_exact_at(&mut bytes, 0)?;
    Ok(bytes)
}

impl SimIo {
    /// A simulation of the tree under `root` (which must exist); every file and directory entry
    /// already there counts as durable.
    pub fn new(root: &Path) -> io::Result<Self> {
        let sim = Self {
            root: root.to_owned(),
            state: Mutex::new(State::default()),
        };
        {
            let mut state = sim.lock();
            for dir in walk_dirs(root)? {
                Self::sync_dir_locked(&mut state, &dir, true)?;
            }
        }
        Ok(sim)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere in a test must not hide the state from the cut that follows.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// After `syncs` more successful syncs (file or directory fsync, index msync), every one fails
    /// with EIO until the next cut.
    pub fn fail_syncs_after(&self, syncs: u64) {
        self.lock().syncs_before_failure = Some(syncs);
    }

    /// After `ops` more operations, every operation fails with EIO until the next cut.
    pub fn crash_after_ops(&self, ops: u64) {
        self.lock().ops_before_crash = Some(ops);
    }

    /// Operations performed since the simulation began or the last power cut (each file
    /// operation counts one): a test counts a procedure's steps with it, to cut at each.
    pub fn ops(&self) -> u64 {
        self.lock().ops
    }

    /// How many fsyncs returned EIO since the simulation began.
    pub fn failed_syncs(&self) -> u64 {
        self.lock().failed_syncs
    }

    /// Whether an armed failure has fired (fsyncs or all operations now fail).
    pub fn has_failed(&self) -> bool {
        let state = self.lock();
        state.syncs_before_failure == Some(0) || state.ops_before_crash == Some(0)
    }

    /// Counts one operation against an armed crash.
    fn step(&self) -> io::Result<()> {
        let mut state = self.lock();
        state.ops += 1;
        match state.ops_before_crash {
            Some(0) => Err(eio("machine stopped")),
            Some(left) => {
                state.ops_before_crash = Some(left - 1);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Counts one fsync (of any kind) against an armed failure: EIO once it has fired.
    fn count_sync(state: &mut State, what: &str) -> io::Result<()> {
        match state.syncs_before_failure {
            Some(0) => {
                state.failed_syncs += 1;
                Err(eio(what))
            }
            Some(left) => {
                state.syncs_before_failure = Some(left - 1);
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn id_for_inode(state: &mut State, inode: u64) -> FileId {
        if let Some(id) = state.by_inode.get(&inode) {
            return *id;
        }
        let id = state.next_id;
        state.next_id += 1;
        state.by_inode.insert(inode, id);
        state.synced.insert(id, Vec::new());
        id
    }

    fn sync_dir_locked(state: &mut State, dir: &Path, with_data: bool) -> io::Result<()> {
        let mut entries = BTreeMap::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if !entry.file_type()?.is_file() {
                continue;
            }
            let path = entry.path();
            let inode = entry.metadata()?.ino();
            let known = state.by_inode.contains_key(&inode);
            let id = Self::id_for_inode(state, inode);
            if with_data && !known {
                // A file that predates the simulation is durable as it stands.
                let bytes = std::fs::read(&path)?;
                state.synced.insert(id, bytes);
            }
            entries.insert(entry.file_name(), id);
        }
        state.synced_dirs.insert(dir.to_owned(), entries);
        Ok(())
    }

    /// Cuts the power: rewrites every file and directory under the root to what survives, as
    /// `mode` and `seed` choose, and disarms the failures. Every handle and mapping of the files
    /// must be closed first (drop the `LogDir`, its logs and their slices).
    pub fn power_cut(&self, mode: CutMode, seed: u64) -> io::Result<()> {
        let mut choices = Choices(seed);
        let mut state = self.lock();
        let last_write = state.last_write.take();
        let dirs = walk_dirs(&self.root)?;
        let mut survivors: Vec<(PathBuf, Vec<u8>)> = Vec::new();
        let mut doomed: Vec<PathBuf> = Vec::new();
        for dir in &dirs {
            let mut current = BTreeMap::new();
            for entry in std::fs::read_dir(dir)? {
                let entry = entry?;
                if entry.file_type()?.is_file() {
                    let inode = entry.metadata()?.ino();
                    current.insert(entry.file_name(), Self::id_for_inode(&mut state, inode));
                }
            }
            let synced = state.synced_dirs.get(dir).cloned().unwrap_or_default();
            let names: BTreeSet<&OsString> = current.keys().chain(synced.keys()).collect();
            for name in names {
                let path = dir.join(name);
                let keep_change = match mode {
                    CutMode::DropUnsynced => false,
                    CutMode::TearLastWrite => true,
                    CutMode::RandomPages => choices.coin(),
                };
                let now = current.get(name).copied();
                let before = synced.get(name).copied();
                // Which file the name holds after the cut, if any: the current one (its bytes
                // mixed from synced and unsynced) or the synced one (its synced bytes).
                let outcome = match (now, before) {
                    (Some(now), Some(before)) if now == before => Some((now, true)),
                    (Some(now), _) if keep_change => Some((now, true)),
                    (_, Some(before)) => Some((before, false)),
                    (Some(_), None) => None,
                    (None, None) => None,
                };
                match outcome {
                    None => doomed.push(path),
                    Some((id, true)) => {
                        let current_bytes = std::fs::read(&path)?;
                        let synced_bytes = state.synced.get(&id).cloned().unwrap_or_default();
                        let tear = last_write.filter(|(file, _, _)| *file == id);
                        let bytes = mix(mode, &synced_bytes, &current_bytes, tear, &mut choices);
                        survivors.push((path, bytes));
                    }
                    Some((id, false)) => {
                        let bytes = state.synced.get(&id).cloned().unwrap_or_default();
                        survivors.push((path, bytes));
                    }
                }
            }
        }
        // Rewrite: every surviving name becomes a fresh file with its surviving bytes, which are
        // then durable (the machine is back up and nothing unsynced is left).
        for path in &doomed {
            std::fs::remove_file(path)?;
        }
        for (path, _) in &survivors {
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(error) => return Err(error),
            }
        }
        *state = State::default();
        for (path, bytes) in &survivors {
            std::fs::write(path, bytes)?;
        }
        for dir in &dirs {
            Self::sync_dir_locked(&mut state, dir, true)?;
        }
        Ok(())
    }
}

/// The bytes of a file after a cut, from its synced and current bytes. `tear`: the last
/// unsynced write, if it went to this file.
fn mix(
    mode: CutMode,
    synced: &[u8],
    current: &[u8],
    tear: Option<(FileId, u64, u64)>,
    choices: &mut Choices,
) -> Vec<u8> {
    let synced_len = synced.len() as u64;
    let current_len = current.len() as u64;
    // Byte at `at` as the current bytes or, if lost, as synced (zero past the synced length).
    let lost_byte = |at: u64| synced.get(at as usize).copied().unwrap_or(0);
    match mode {
        CutMode::DropUnsynced => synced.to_vec(),
        CutMode::TearLastWrite => {
            let mut bytes = current.to_vec();
            let Some((_, position, len)) = tear else {
                return bytes;
            };
            let end = position + len;
            // A sector boundary strictly inside or at the start of the write.
            let first_boundary = position.div_ceil(SECTOR_BYTES) * SECTOR_BYTES;
            let boundaries = if end > first_boundary {
                (end - 1 - first_boundary) / SECTOR_BYTES + 1
            } else {
                0
            };
            let cut = if first_boundary >= end {
                position
            } else {
                first_boundary + choices.below(boundaries) * SECTOR_BYTES
            };
            for at in cut..end.min(current_len) {
                bytes[at as usize] = lost_byte(at);
            }
            if end >= current_len {
                bytes.truncate(cut.max(synced_len).min(current_len) as usize);
            }
            bytes
        }
        CutMode::RandomPages => {
            let len = if choices.coin() {
                current_len
            } else {
                synced_len
            };
            let mut bytes = vec![0u8; len as usize];
            let mut page = 0;
            while page < len {
                let keep = choices.coin();
                for at in page..(page + PAGE_BYTES).min(len) {
                    let now = current.get(at as usize).copied();
                    bytes[at as usize] = match now {
                        Some(byte) if keep => byte,
                        _ => lost_byte(at),
                    };
                }
                page += PAGE_BYTES;
            }
            bytes
        }
    }
}

/// `root` and every directory below it.
fn walk_dirs(root: &Path) -> io::Result<Vec<PathBuf>> {
    let mut dirs = vec![root.to_owned()];
    let mut at = 0;
    while let Some(dir) = dirs.get(at).cloned() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                dirs.push(entry.path());
            }
        }
        at += 1;
    }
    Ok(dirs)
}

impl FileIo for SimIo {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<File> {
        self.step()?;
        let existed = inode_of_path(path).ok();
        let file = StdIo.open(path, mode)?;
        let inode = file.metadata()?.ino();
        let mut state = self.lock();
        if existed != Some(inode) {
            // A new inode (perhaps a reused number): a new file, nothing synced.
            state.by_inode.remove(&inode);
        }
        Self::id_for_inode(&mut state, inode);
        Ok(file)
    }

    fn write_all_at(&self, file: &File, bytes: &[u8], position: u64) -> io::Result<()> {
        self.step()?;
        StdIo.write_all_at(file, bytes, position)?;
        let inode = file.metadata()?.ino();
        let mut state = self.lock();
        let id = Self::id_for_inode(&mut state, inode);
        state.last_write = Some((id, position, bytes.len() as u64));
        Ok(())
    }

    fn read_exact_at(&self, file: &File, buf: &mut [u8], position: u64) -> io::Result<()> {
        self.step()?;
        StdIo.read_exact_at(file, buf, position)
    }

    fn sync(&self, file: &File, mode: PersistMode) -> io::Result<()> {
        self.step()?;
        if mode == PersistMode::Buffer {
            return Ok(());
        }
        let mut state = self.lock();
        Self::count_sync(&mut state, "fsync")?;
        let id = Self::id_for_inode(&mut state, file.metadata()?.ino());
        state.synced.insert(id, read_all(file)?);
        if state.last_write.is_some_and(|(file, _, _)| file == id) {
            state.last_write = None;
        }
        Ok(())
    }

    fn sync_map(&self, path: &Path, map: &memmap2::MmapMut) -> io::Result<()> {
        // msync(MS_SYNC) makes the mapped pages durable, not the length: the synced image takes
        // the mapped range and keeps its own length beyond it.
        self.step()?;
        let mut state = self.lock();
        Self::count_sync(&mut state, "msync")?;
        map.flush()?;
        let id = Self::id_for_inode(&mut state, inode_of_path(path)?);
        let synced = state.synced.entry(id).or_default();
        if synced.len() < map.len() {
            synced.resize(map.len(), 0);
        }
        synced[..map.len()].copy_from_slice(&map[..]);
        Ok(())
    }

    fn set_len(&self, file: &File, len: u64) -> io::Result<()> {
        self.step()?;
        StdIo.set_len(file, len)
    }

    fn len(&self, file: &File) -> io::Result<u64> {
        self.step()?;
        StdIo.len(file)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.step()?;
        StdIo.rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.step()?;
        StdIo.remove_file(path)
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        self.step()?;
        StdIo.remove_dir_all(path)?;
        let mut state = self.lock();
        state.synced_dirs.retain(|dir, _| !dir.starts_with(path));
        Ok(())
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.step()?;
        StdIo.create_dir_all(path)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.step()?;
        let mut state = self.lock();
        Self::count_sync(&mut state, "directory fsync")?;
        Self::sync_dir_locked(&mut state, path, false)
    }

    fn sync_filesystem(&self, _path: &Path) -> io::Result<()> {
        // The simulated tree is the whole file system: every file's bytes and every directory's
        // entries become durable.
        self.step()?;
        let mut state = self.lock();
        Self::count_sync(&mut state, "syncfs")?;
        for dir in walk_dirs(&self.root)? {
            Self::sync_dir_locked(&mut state, &dir, false)?;
            for entry in std::fs::read_dir(&dir)? {
                let entry = entry?;
                if !entry.file_type()?.is_file() {
                    continue;
                }
                let id = Self::id_for_inode(&mut state, entry.metadata()?.ino());
                let bytes = std::fs::read(entry.path())?;
                state.synced.insert(id, bytes);
            }
        }
        state.last_write = None;
        Ok(())
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<PathBuf>> {
        self.step()?;
        StdIo.read_dir(path)
    }

    fn read_small(&self, path: &Path, bytes_max: u64) -> io::Result<Vec<u8>> {
        self.step()?;
        StdIo.read_small(path, bytes_max)
    }
}
