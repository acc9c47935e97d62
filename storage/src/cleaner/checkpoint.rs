//! The cleaner checkpoint of a data directory, `cleaner-offset-checkpoint` (Kafka's name and
//! format: its `OffsetCheckpointFile`, the text `high_watermark` owns): each compacted log's
//! first dirty offset, where the next cleaning starts. Owns the in-memory table and its atomic
//! writes; the logs decide the values. Must never hold an entry above what its log's cleanings
//! covered (a truncation lowers it first, a deleted log's entry goes), nor fail an open over a
//! damaged file (an entry only saves work: without it the log is cleaned from its start).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::fs;
use crate::high_watermark::{self, HighWatermark};
use crate::io::FileIo;
use crate::limits;
use crate::offset_checkpoint::LogKey;

/// Name of the file in the data directory (Kafka's).
pub(crate) const CLEANER_CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";

/// Every log's first dirty offset, and their one file.
#[derive(Debug)]
pub(crate) struct CleanerCheckpoints {
    path: PathBuf,
    io: Arc<dyn FileIo>,
    /// Held across a write, so two writers never share the temporary file.
    entries: Mutex<BTreeMap<LogKey, i64>>,
}

impl CleanerCheckpoints {
    /// The checkpoint of the data directory `dir`; empty if there is none, or if it is damaged
    /// (returned beside it, for the embedder to report).
    pub(crate) fn load(io: Arc<dyn FileIo>, dir: &Path) -> Result<(Self, Option<Error>)> {
        let path = dir.join(CLEANER_CHECKPOINT_FILE);
        let (entries, damage) = match io
            .read_small(&path, limits::HIGH_WATERMARK_CHECKPOINT_BYTES_MAX)
        {
            Ok(bytes) => match high_watermark::parse(&bytes) {
                Ok(entries) => (
                    entries
                        .into_iter()
                        .map(|entry| ((entry.topic, entry.partition), entry.offset))
                        .collect(),
                    None,
                ),
                Err(reason) => (BTreeMap::new(), Some(Error::corrupt(&path, 0, reason))),
            },
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => (BTreeMap::new(), None),
            Err(error) => (BTreeMap::new(), Some(Error::io(&path, error))),
        };
        let checkpoints = Self {
            path,
            io,
            entries: Mutex::new(entries),
        };
        Ok((checkpoints, damage))
    }

    fn entries(&self) -> Result<MutexGuard<'_, BTreeMap<LogKey, i64>>> {
        self.entries.lock().map_err(|_| Error::Poisoned)
    }

    /// The first dirty offset of `key`, if it has one.
    pub(crate) fn get(&self, key: &LogKey) -> Result<Option<i64>> {
        Ok(self.entries()?.get(key).copied())
    }

    /// Sets (or with `None` removes) the entry of `key` and writes the file, durably, before
    /// returning. Nothing is written if nothing changes.
    pub(crate) fn set_and_write(&self, key: &LogKey, offset: Option<i64>) -> Result<()> {
        let mut entries = self.entries()?;
        let before = entries.get(key).copied();
        if before == offset {
            return Ok(());
        }
        match offset {
            Some(offset) => entries.insert(key.clone(), offset),
            None => entries.remove(key),
        };
        let list: Vec<HighWatermark> = entries
            .iter()
            .map(|((topic, partition), offset)| HighWatermark {
                topic: topic.clone(),
                partition: *partition,
                offset: *offset,
            })
            .collect();
        let written = high_watermark::to_text(&list)
            .and_then(|text| fs::write_atomic(self.io.as_ref(), &self.path, text.as_bytes()));
        if written.is_err() {
            // The table must not claim what the file does not hold.
            match before {
                Some(offset) => entries.insert(key.clone(), offset),
                None => entries.remove(key),
            };
        }
        written
    }

    /// Lowers the entry of `key` to `offset` if it is above (a truncation's cut), durably.
    pub(crate) fn lower_to(&self, key: &LogKey, offset: i64) -> Result<()> {
        match self.get(key)? {
            Some(current) if current > offset => self.set_and_write(key, Some(offset)),
            _ => Ok(()),
        }
    }
}
