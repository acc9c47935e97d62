//! The offset checkpoint of a data directory, `skiff-offset-checkpoint`: one file holding every
//! log's log start offset and recovery point (Kafka keeps them in two files per directory,
//! `log-start-offset-checkpoint` and `recovery-point-offset-checkpoint`). Owns the file's text,
//! both ways, its bounds, the in-memory table the next write publishes, and the write itself
//! (atomic, through [`FileIo`]); the logs decide the values, [`crate::LogDir`] when a periodic
//! or closing write happens.
//!
//! Why one file for both offsets rather than Kafka's two: they were one per-log file before
//! (`checkpoint`, still read for migration), every event that must persist one at once (a
//! truncation, or a recovery, lowering a recovery point or a start) has the other at hand, one
//! write costs one fsync instead of two, and a crash can never leave the two from different
//! moments. A start moved up (retention, DeleteRecords) is only set in the table: the periodic
//! or closing write publishes it (see `log::retention` for why a crash before then is safe).
//!
//! Why one file per directory at all: a clean close or a periodic checkpoint of 10,000 logs
//! then costs one small write and its fsyncs instead of one file (and its journal commit, about
//! 1.3 ms each, serialized by ext4) per log; a log with nothing new costs nothing.
//!
//! Must never: publish a recovery point above what its log has made durable (the logs put only
//! synced recovery points in the table, and a lowered one is written before the data it no
//! longer covers is cut), accept a line it would not write itself, read more than
//! [`limits::OFFSET_CHECKPOINT_BYTES_MAX`] bytes or hold more than
//! [`limits::OFFSET_CHECKPOINT_ENTRIES_MAX`] entries, nor panic on any bytes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::fs::{self, Checkpoint};
use crate::io::FileIo;
use crate::limits;

/// Name of the checkpoint file in the data directory.
pub(crate) const OFFSET_CHECKPOINT_FILE: &str = "skiff-offset-checkpoint";
/// First line of the file: name and format version.
const HEADER: &str = "skiff-offset-checkpoint 1";

/// A log's name in the table: topic and partition.
pub(crate) type LogKey = (String, i32);

/// The checkpoint text of `entries` (in key order). Refuses, writing nothing, a key that cannot
/// name a log, a negative offset, and more than [`limits::OFFSET_CHECKPOINT_ENTRIES_MAX`]
/// entries: the reader would refuse each of them.
pub(crate) fn to_text(entries: &BTreeMap<LogKey, Checkpoint>) -> Result<String> {
    if entries.len() > limits::OFFSET_CHECKPOINT_ENTRIES_MAX {
        return Err(Error::LimitReached(format!(
            "{} logs to checkpoint, more than the {} an offset checkpoint holds",
            entries.len(),
            limits::OFFSET_CHECKPOINT_ENTRIES_MAX
        )));
    }
    // About 40 bytes a log: one allocation for the usual file.
    let mut text = String::with_capacity(32 + entries.len() * 40);
    text.push_str(&format!("{HEADER}\n{}\n", entries.len()));
    for ((topic, partition), checkpoint) in entries {
        fs::log_dir_name(topic, *partition)?;
        for offset in [checkpoint.log_start_offset, checkpoint.recovery_point] {
            if offset < 0 {
                return Err(Error::NegativeOffset(offset));
            }
        }
        text.push_str(&format!(
            "{topic} {partition} {} {}\n",
            checkpoint.log_start_offset, checkpoint.recovery_point
        ));
    }
    Ok(text)
}

/// A non-negative decimal number of ASCII digits only (no sign, no spaces), or why not.
fn number<T: std::str::FromStr>(field: &str) -> std::result::Result<T, &'static str> {
    if field.is_empty() || !field.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err("a number is not decimal digits");
    }
    field.parse().map_err(|_| "a number is out of range")
}

/// Parses checkpoint bytes, or says why they are not a checkpoint. Only what [`to_text`] could
/// write is accepted (but for leading zeros): the header, a count that matches the entries,
/// every line ending in `\n`, each entry `topic partition log_start recovery_point` naming a
/// valid log at most once with offsets ≥ 0, and nothing after the last entry.
pub(crate) fn parse(
    bytes: &[u8],
) -> std::result::Result<BTreeMap<LogKey, Checkpoint>, &'static str> {
    if bytes.len() as u64 > limits::OFFSET_CHECKPOINT_BYTES_MAX {
        return Err("offset checkpoint too large");
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8")?;
    let body = text.strip_suffix('\n').ok_or("the last line has no end")?;
    let mut lines = body.split('\n');
    if lines.next() != Some(HEADER) {
        return Err("unknown offset checkpoint header");
    }
    let count: usize = lines.next().ok_or("no entry count").and_then(number)?;
    if count > limits::OFFSET_CHECKPOINT_ENTRIES_MAX {
        return Err("more entries than an offset checkpoint holds");
    }
    let mut entries = BTreeMap::new();
    for line in lines {
        if entries.len() == count {
            return Err("lines after the counted entries");
        }
        let mut fields = line.split(' ');
        let (Some(topic), Some(partition), Some(start), Some(recovery), None) = (
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
        ) else {
            return Err("an entry is not `topic partition log_start recovery_point`");
        };
        let partition: i32 = number(partition)?;
        let checkpoint = Checkpoint {
            log_start_offset: number(start)?,
            recovery_point: number(recovery)?,
        };
        fs::log_dir_name(topic, partition).map_err(|_| "an invalid topic name")?;
        if entries
            .insert((topic.to_owned(), partition), checkpoint)
            .is_some()
        {
            return Err("a log is listed twice");
        }
    }
    if entries.len() != count {
        return Err("fewer entries than counted");
    }
    Ok(entries)
}

/// What the next write publishes.
#[derive(Debug, Default)]
struct Table {
    entries: BTreeMap<LogKey, Checkpoint>,
    /// Something changed since the last snapshot was taken for a write.
    changed: bool,
}

/// What the file on disk holds, as far as later writes care.
#[derive(Debug, Default)]
struct OnDisk {
    /// Logs the durable file names (entries of logs deleted since stay there until the next
    /// write, and must be gone before a log of the same name is created).
    keys: BTreeSet<LogKey>,
    /// Logs recovered from their old per-log `checkpoint` file, by directory: the file is
    /// removed once a durable directory checkpoint names the log.
    legacy: BTreeMap<LogKey, PathBuf>,
}

/// The directory's table of log start offsets and recovery points, and its writer.
///
/// Lock order: a log's own locks, then `on_disk` (held for a whole write, so two writes never
/// publish out of order: a later snapshot is always written later), then `table` (held only to
/// change or copy the table, never across I/O, so a flush that advances a recovery point never
/// waits for a write).
#[derive(Debug)]
pub(crate) struct OffsetCheckpoints {
    path: PathBuf,
    io: Arc<dyn FileIo>,
    table: Mutex<Table>,
    on_disk: Mutex<OnDisk>,
}

impl OffsetCheckpoints {
    /// The checkpoint of the data directory `dir`: its entries, or none if there is no file. A
    /// damaged file (anything [`parse`] refuses, or too large) is returned as the
    /// [`Error::Corrupt`] beside an empty table: the caller then recovers every log from scratch.
    pub(crate) fn load(io: Arc<dyn FileIo>, dir: &Path) -> Result<(Self, Option<Error>)> {
        let path = dir.join(OFFSET_CHECKPOINT_FILE);
        let (entries, damage) = match io.read_small(&path, limits::OFFSET_CHECKPOINT_BYTES_MAX) {
            Ok(bytes) => match parse(&bytes) {
                Ok(entries) => (entries, None),
                Err(reason) => (BTreeMap::new(), Some(Error::corrupt(&path, 0, reason))),
            },
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => (BTreeMap::new(), None),
            Err(error) if error.kind() == std::io::ErrorKind::InvalidData => (
                BTreeMap::new(),
                Some(Error::corrupt(&path, 0, "offset checkpoint too large")),
            ),
            Err(error) => return Err(Error::io(&path, error)),
        };
        let on_disk = OnDisk {
            keys: entries.keys().cloned().collect(),
            legacy: BTreeMap::new(),
        };
        let checkpoints = Self {
            path,
            io,
            table: Mutex::new(Table {
                entries,
                changed: false,
            }),
            on_disk: Mutex::new(on_disk),
        };
        Ok((checkpoints, damage))
    }

    fn table(&self) -> Result<MutexGuard<'_, Table>> {
        self.table.lock().map_err(|_| Error::Poisoned)
    }

    fn on_disk(&self) -> Result<MutexGuard<'_, OnDisk>> {
        self.on_disk.lock().map_err(|_| Error::Poisoned)
    }

    /// Keeps only the logs in `keys` (those found at open): entries of others go at the next
    /// write.
    pub(crate) fn retain(&self, keys: &BTreeSet<LogKey>) -> Result<()> {
        let mut table = self.table()?;
        let before = table.entries.len();
        table.entries.retain(|key, _| keys.contains(key));
        table.changed |= table.entries.len() != before;
        Ok(())
    }

    /// The entry of `key`, if the table has one.
    pub(crate) fn get(&self, key: &LogKey) -> Result<Option<Checkpoint>> {
        Ok(self.table()?.entries.get(key).copied())
    }

    /// Sets the entry of `key` for the next write (no I/O).
    pub(crate) fn set(&self, key: &LogKey, checkpoint: Checkpoint) -> Result<()> {
        let mut table = self.table()?;
        if table.entries.get(key) != Some(&checkpoint) {
            table.entries.insert(key.clone(), checkpoint);
            table.changed = true;
        }
        Ok(())
    }

    /// Sets the entry of `key` and writes the file before returning: for a change that must be
    /// durable before what follows it (a lowered recovery point before the cut, a new log
    /// start before its segments are unlinked).
    pub(crate) fn set_and_write(&self, key: &LogKey, checkpoint: Checkpoint) -> Result<()> {
        let mut on_disk = self.on_disk()?;
        self.set(key, checkpoint)?;
        self.write_locked(&mut on_disk)
    }

    /// Drops the entry of a deleted log (no I/O: the next write leaves it out).
    pub(crate) fn remove(&self, key: &LogKey) -> Result<()> {
        let mut table = self.table()?;
        table.changed |= table.entries.remove(key).is_some();
        Ok(())
    }

    /// Before a log named `key` is created: if the file on disk still names an earlier log of
    /// that name (deleted since), writes the file without it first. Otherwise a crash could
    /// give the new, empty log the old one's recovery point, above its data. One write serves
    /// every such log deleted before it, so recreating a deleted topic costs one write.
    pub(crate) fn forget_on_disk(&self, key: &LogKey) -> Result<()> {
        let mut on_disk = self.on_disk()?;
        if on_disk.keys.contains(key) {
            self.table()?.changed = true;
            self.write_locked(&mut on_disk)?;
        }
        Ok(())
    }

    /// Notes that `key` was recovered from the old per-log `checkpoint` file in `dir`: the next
    /// write names it, and then the old file is removed.
    pub(crate) fn note_legacy(&self, key: &LogKey, dir: &Path) -> Result<()> {
        self.on_disk()?.legacy.insert(key.clone(), dir.to_owned());
        self.table()?.changed = true;
        Ok(())
    }

    /// Writes the file if anything changed since the last write (nothing otherwise: a periodic
    /// checkpoint or a close with nothing new costs no I/O).
    pub(crate) fn write(&self) -> Result<()> {
        let mut on_disk = self.on_disk()?;
        self.write_locked(&mut on_disk)
    }

    fn write_locked(&self, on_disk: &mut OnDisk) -> Result<()> {
        let snapshot = {
            let mut table = self.table()?;
            if !table.changed {
                return Ok(());
            }
            table.changed = false;
            table.entries.clone()
        };
        let written = to_text(&snapshot)
            .and_then(|text| fs::write_atomic(self.io.as_ref(), &self.path, text.as_bytes()));
        if let Err(error) = written {
            // The next write must try again.
            if let Ok(mut table) = self.table() {
                table.changed = true;
            }
            return Err(error);
        }
        on_disk.keys = snapshot.keys().cloned().collect();
        // Durable now: the old per-log files of the logs it names are no longer needed. Their
        // removal need not be durable (a file that comes back after a crash is ignored, the
        // directory checkpoint naming the log), and a failed one is retried after the next write.
        let covered: Vec<LogKey> = on_disk
            .legacy
            .keys()
            .filter(|key| snapshot.contains_key(*key))
            .cloned()
            .collect();
        for key in covered {
            if let Some(dir) = on_disk.legacy.get(&key) {
                let old = dir.join(fs::CHECKPOINT_FILE);
                match self.io.remove_file(&old) {
                    Err(error) if error.kind() != std::io::ErrorKind::NotFound => continue,
                    _ => {}
                }
            }
            on_disk.legacy.remove(&key);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::StdIo;

    fn checkpoint(log_start_offset: i64, recovery_point: i64) -> Checkpoint {
        Checkpoint {
            log_start_offset,
            recovery_point,
        }
    }

    fn key(topic: &str, partition: i32) -> LogKey {
        (topic.to_owned(), partition)
    }

    #[test]
    fn the_text_round_trips() {
        let entries = BTreeMap::from([
            (key("orders", 0), checkpoint(5, 17)),
            (key("my-topic.x_y", 12), checkpoint(0, 0)),
        ]);
        let text = to_text(&entries).unwrap();
        assert_eq!(
            text,
            "skiff-offset-checkpoint 1\n2\nmy-topic.x_y 12 0 0\norders 0 5 17\n"
        );
        assert_eq!(parse(text.as_bytes()).unwrap(), entries);
        let empty = to_text(&BTreeMap::new()).unwrap();
        assert_eq!(parse(empty.as_bytes()).unwrap(), BTreeMap::new());
    }

    #[test]
    fn what_the_writer_would_not_write_is_refused() {
        let negative = BTreeMap::from([(key("t", 0), checkpoint(-1, 0))]);
        assert!(matches!(to_text(&negative), Err(Error::NegativeOffset(-1))));
        let bad_name = BTreeMap::from([(key("a/b", 0), checkpoint(0, 0))]);
        assert!(matches!(to_text(&bad_name), Err(Error::InvalidName(_))));
    }

    #[test]
    fn damage_is_refused_never_a_panic() {
        let oversized = usize::try_from(limits::OFFSET_CHECKPOINT_BYTES_MAX).unwrap() + 1;
        let damaged: [&[u8]; 16] = [
            b"",
            b"skiff-offset-checkpoint 1\n1\nt 0 0 5",
            b"skiff-offset-checkpoint 2\n0\n",
            b"skiff-checkpoint 1\n0\n",
            b"skiff-offset-checkpoint 1\n2\nt 0 0 5\n",
            b"skiff-offset-checkpoint 1\n1\nt 0 0 5\nt 1 0 5\n",
            b"skiff-offset-checkpoint 1\n2\nt 0 0 5\nt 0 0 6\n",
            b"skiff-offset-checkpoint 1\n1\nt 0 -1 5\n",
            b"skiff-offset-checkpoint 1\n1\nt 0 +1 5\n",
            b"skiff-offset-checkpoint 1\n1\nt 0 0 99999999999999999999\n",
            b"skiff-offset-checkpoint 1\n1\nt 0 0\n",
            b"skiff-offset-checkpoint 1\n1\nt 0 0 5 6\n",
            b"skiff-offset-checkpoint 1\n1\nt  0 0 5\n",
            b"skiff-offset-checkpoint 1\n1\n.. 0 0 5\n",
            b"skiff-offset-checkpoint 1\n99999999999\n",
            b"\xff\xfe\n",
        ];
        for bytes in damaged {
            assert!(
                parse(bytes).is_err(),
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
        }
        assert!(parse(&vec![b'0'; oversized]).is_err());
        // Every prefix of a good file but the whole is refused (a torn file never passes).
        let good = to_text(&BTreeMap::from([
            (key("a", 0), checkpoint(1, 2)),
            (key("b", 3), checkpoint(4, 50)),
        ]))
        .unwrap();
        for end in 0..good.len() {
            assert!(parse(&good.as_bytes()[..end]).is_err(), "prefix of {end}");
        }
    }

    #[test]
    fn a_damaged_file_loads_as_an_empty_table_and_its_error() {
        let dir = tempfile::tempdir().unwrap();
        let io: Arc<dyn FileIo> = Arc::new(StdIo);
        std::fs::write(dir.path().join(OFFSET_CHECKPOINT_FILE), b"garbage\n").unwrap();
        let (checkpoints, damage) = OffsetCheckpoints::load(Arc::clone(&io), dir.path()).unwrap();
        assert!(matches!(damage, Some(Error::Corrupt { .. })), "{damage:?}");
        assert_eq!(checkpoints.get(&key("t", 0)).unwrap(), None);
        // Writes replace it with a good file.
        checkpoints.set(&key("t", 0), checkpoint(0, 3)).unwrap();
        checkpoints.write().unwrap();
        let (checkpoints, damage) = OffsetCheckpoints::load(io, dir.path()).unwrap();
        assert!(damage.is_none());
        assert_eq!(
            checkpoints.get(&key("t", 0)).unwrap(),
            Some(checkpoint(0, 3))
        );
    }

    #[test]
    fn a_write_happens_only_after_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let (checkpoints, _) = OffsetCheckpoints::load(Arc::new(StdIo), dir.path()).unwrap();
        let path = dir.path().join(OFFSET_CHECKPOINT_FILE);
        checkpoints.write().unwrap();
        assert!(!path.exists(), "nothing to write");
        checkpoints.set(&key("t", 0), checkpoint(0, 3)).unwrap();
        checkpoints.write().unwrap();
        assert!(path.exists());
        std::fs::remove_file(&path).unwrap();
        checkpoints.set(&key("t", 0), checkpoint(0, 3)).unwrap();
        checkpoints.write().unwrap();
        assert!(!path.exists(), "the same value is no change");
        checkpoints.remove(&key("t", 0)).unwrap();
        checkpoints.write().unwrap();
        assert_eq!(parse(&std::fs::read(&path).unwrap()).unwrap().len(), 0);
    }
}
