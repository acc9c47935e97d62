//! The topics this broker has materialized (name, id, replica assignment, overrides), in one JSON
//! file in `log.dirs`, replaced atomically (temp file, fsync, rename, fsync of the directory).
//! The metadata store is the truth about topics; this file only tells a restarted broker which
//! topic incarnation its logs on disk belong to, so a topic deleted (or deleted and created again)
//! while the broker was down has its old logs removed instead of served.
//!
//! Version 1 of the file is the single-node registry of earlier releases, where it *was* the
//! truth: its topics are migrated into the metadata store at the first start (see
//! `Cluster::migrate` in `crate::cluster::topic_changes`), after which the file is rewritten as
//! version 2.
//!
//! Version 3 is version 2 in a data directory that holds transactional batches: the previous
//! release (which reads versions 1 and 2 only) then refuses to start on it ("has unknown
//! version 3") instead of serving aborted records as committed. The file becomes version 3 before
//! the first transactional batch is written (storage's `LogDir::set_transactional_guard` runs
//! [`MaterializedTopicsFile::mark_transactional`]), and stays so.
//!
//! Must never: leave a half-written file where a crash could find it, nor write version 2 once
//! the directory holds transactional data.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use skiff_storage::DurableFiles;

/// One topic as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicRecord {
    /// Topic name.
    pub name: String,
    /// Topic id (KIP-516), 16 bytes as 32 hex digits.
    pub topic_id: String,
    /// Replica node ids per partition; the first is the preferred leader.
    pub replicas: Vec<Vec<i32>>,
    /// Topic-level config overrides, as given at creation or last altered.
    pub configs: std::collections::BTreeMap<String, String>,
}

/// What the file held.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadedTopics {
    /// The topics.
    pub topics: Vec<TopicRecord>,
    /// True for a version 1 file: the registry of a single-node release, still to migrate.
    pub needs_migration: bool,
}

/// The file, read and replaced through the log directory's file operations ([`DurableFiles`]),
/// so a simulated power cut of the directory covers it too.
/// Cheap to clone: clones share the file and whether it is at the transactional version.
#[derive(Debug, Clone)]
pub struct MaterializedTopicsFile {
    path: PathBuf,
    files: DurableFiles,
    /// Whether the file is (or is to be written) at [`TRANSACTIONAL_FILE_VERSION`]; its lock
    /// serializes writes, so marking never loses a concurrent save's topics.
    transactional: std::sync::Arc<std::sync::Mutex<bool>>,
}

/// File name inside `log.dirs` (the name the single-node registry had).
pub const METADATA_FILE_NAME: &str = "skiff-topics.json";
/// Largest file read at start: about 100,000 topics of a few partitions each, far above what one
/// broker serves; a larger file is refused rather than read whole.
pub const METADATA_FILE_BYTES_MAX: u64 = 256 * 1024 * 1024;

#[derive(Serialize, Deserialize)]
struct MetadataFile {
    version: u32,
    topics: Vec<TopicRecord>,
}

/// The single-node registry of earlier releases.
const REGISTRY_FILE_VERSION: u32 = 1;
/// The materialized set.
const MATERIALIZED_FILE_VERSION: u32 = 2;
/// The materialized set of a data directory holding transactional batches (see the module doc).
const TRANSACTIONAL_FILE_VERSION: u32 = 3;

impl MaterializedTopicsFile {
    /// The file in `dir` (the log directory `files` belong to, `LogDir::files`).
    pub fn new(dir: &Path, files: DurableFiles) -> Self {
        Self {
            path: dir.join(METADATA_FILE_NAME),
            files,
            transactional: std::sync::Arc::default(),
        }
    }

    fn transactional(&self) -> std::io::Result<std::sync::MutexGuard<'_, bool>> {
        self.transactional
            .lock()
            .map_err(|_| std::io::Error::other("topics file lock poisoned"))
    }

    /// The file's topics (none when it does not exist).
    pub fn load(&self) -> std::io::Result<LoadedTopics> {
        let bytes = self
            .files
            .read_small(&self.path, METADATA_FILE_BYTES_MAX)
            .map_err(std::io::Error::other)?;
        let Some(bytes) = bytes else {
            return Ok(LoadedTopics::default());
        };
        let file: MetadataFile = serde_json::from_slice(&bytes).map_err(|error| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} is corrupt: {error}", self.path.display()),
            )
        })?;
        match file.version {
            REGISTRY_FILE_VERSION | MATERIALIZED_FILE_VERSION | TRANSACTIONAL_FILE_VERSION => {
                if file.version == TRANSACTIONAL_FILE_VERSION {
                    *self.transactional()? = true;
                }
                Ok(LoadedTopics {
                    topics: file.topics,
                    needs_migration: file.version == REGISTRY_FILE_VERSION,
                })
            }
            other => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} has unknown version {other}", self.path.display()),
            )),
        }
    }

    /// Replaces the file with `topics` as the materialized set, durably, before returning.
    pub fn save(&self, topics: &[TopicRecord]) -> std::io::Result<()> {
        let transactional = self.transactional()?;
        self.write(topics, *transactional)
    }

    fn write(&self, topics: &[TopicRecord], transactional: bool) -> std::io::Result<()> {
        let file = MetadataFile {
            version: if transactional {
                TRANSACTIONAL_FILE_VERSION
            } else {
                MATERIALIZED_FILE_VERSION
            },
            topics: topics.to_vec(),
        };
        let text = serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?;
        self.files
            .write_atomically(&self.path, &text)
            .map_err(std::io::Error::other)
    }

    /// Has `log_dir` (the directory holding this file) call [`Self::mark_transactional`] before
    /// its first transactional batch is written, so that the previous release refuses it.
    pub fn guard_downgrades(&self, log_dir: &skiff_storage::LogDir) -> skiff_storage::Result<()> {
        let marker = self.clone();
        let hook = move || {
            marker
                .mark_transactional()
                .map_err(|source| skiff_storage::Error::Io {
                    path: marker.path.clone(),
                    source,
                })
        };
        log_dir.set_transactional_guard(std::sync::Arc::new(hook), false)
    }

    /// Rewrites the file, durably, at the version the previous release refuses, keeping its
    /// topics (nothing if it is there already): before the data directory's first
    /// transactional batch. A file still to migrate (version 1) keeps its topics for the
    /// migration, which reads them before this can run (no batch is appended before it).
    pub fn mark_transactional(&self) -> std::io::Result<()> {
        let mut transactional = self.transactional()?;
        if *transactional {
            return Ok(());
        }
        let bytes = self
            .files
            .read_small(&self.path, METADATA_FILE_BYTES_MAX)
            .map_err(std::io::Error::other)?;
        let topics = match bytes {
            None => Vec::new(),
            Some(bytes) => {
                serde_json::from_slice::<MetadataFile>(&bytes)
                    .map_err(|error| {
                        std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            format!("{} is corrupt: {error}", self.path.display()),
                        )
                    })?
                    .topics
            }
        };
        self.write(&topics, true)?;
        *transactional = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn save_then_load_round_trips_and_missing_file_is_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = MaterializedTopicsFile::new(dir.path(), DurableFiles::real());
        assert_eq!(file.load().expect("empty"), LoadedTopics::default());
        let topics = vec![TopicRecord {
            name: "orders".into(),
            topic_id: "00112233445566778899aabbccddeeff".into(),
            replicas: vec![vec![1], vec![1]],
            configs: BTreeMap::from([("retention.ms".into(), "1000".into())]),
        }];
        file.save(&topics).expect("save");
        let loaded = file.load().expect("load");
        assert_eq!(loaded.topics, topics);
        assert!(!loaded.needs_migration);
    }

    #[test]
    fn marking_transactional_keeps_the_topics_at_a_version_the_previous_release_refuses() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = MaterializedTopicsFile::new(dir.path(), DurableFiles::real());
        file.mark_transactional().expect("mark without a file");
        let topics = vec![TopicRecord {
            name: "orders".into(),
            topic_id: "00112233445566778899aabbccddeeff".into(),
            replicas: vec![vec![1]],
            configs: BTreeMap::new(),
        }];
        file.save(&topics).expect("save");
        let text = std::fs::read_to_string(dir.path().join(METADATA_FILE_NAME)).expect("read");
        assert!(text.contains("\"version\": 3"), "{text}");
        // A fresh handle (a restart) reads it and keeps writing version 3.
        let again = MaterializedTopicsFile::new(dir.path(), DurableFiles::real());
        assert_eq!(again.load().expect("load").topics, topics);
        again.save(&topics).expect("save");
        let text = std::fs::read_to_string(dir.path().join(METADATA_FILE_NAME)).expect("read");
        assert!(text.contains("\"version\": 3"), "{text}");
        // A version 2 file marked later keeps its topics.
        let other = tempfile::tempdir().expect("tempdir");
        let plain = MaterializedTopicsFile::new(other.path(), DurableFiles::real());
        plain.save(&topics).expect("save");
        plain.mark_transactional().expect("mark");
        let reread = MaterializedTopicsFile::new(other.path(), DurableFiles::real());
        assert_eq!(reread.load().expect("load").topics, topics);
        assert!(*reread.transactional().expect("lock"));
    }

    #[test]
    fn a_single_node_registry_is_read_for_migration() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join(METADATA_FILE_NAME),
            br#"{"version":1,"topics":[{"name":"t","topic_id":"00112233445566778899aabbccddeeff","replicas":[[1]],"configs":{}}]}"#,
        )
        .expect("write");
        let loaded = MaterializedTopicsFile::new(dir.path(), DurableFiles::real())
            .load()
            .expect("load");
        assert!(loaded.needs_migration);
        assert_eq!(loaded.topics[0].name, "t");
    }

    #[test]
    fn corrupt_or_unknown_files_are_clear_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(METADATA_FILE_NAME);
        std::fs::write(&path, b"{not json").expect("write");
        let file = MaterializedTopicsFile::new(dir.path(), DurableFiles::real());
        assert!(file
            .load()
            .expect_err("corrupt")
            .to_string()
            .contains("corrupt"));
        std::fs::write(&path, br#"{"version":9,"topics":[]}"#).expect("write");
        assert!(file
            .load()
            .expect_err("unknown")
            .to_string()
            .contains("unknown version 9"));
    }
}
