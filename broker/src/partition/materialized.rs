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
//! Must never: leave a half-written file where a crash could find it.

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
#[derive(Debug)]
pub struct MaterializedTopicsFile {
    path: PathBuf,
    files: DurableFiles,
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

impl MaterializedTopicsFile {
    /// The file in `dir` (the log directory `files` belong to, `LogDir::files`).
    pub fn new(dir: &Path, files: DurableFiles) -> Self {
        Self {
            path: dir.join(METADATA_FILE_NAME),
            files,
        }
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
            REGISTRY_FILE_VERSION | MATERIALIZED_FILE_VERSION => Ok(LoadedTopics {
                topics: file.topics,
                needs_migration: file.version == REGISTRY_FILE_VERSION,
            }),
            other => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} has unknown version {other}", self.path.display()),
            )),
        }
    }

    /// Replaces the file with `topics` as the materialized set, durably, before returning.
    pub fn save(&self, topics: &[TopicRecord]) -> std::io::Result<()> {
        let file = MetadataFile {
            version: MATERIALIZED_FILE_VERSION,
            topics: topics.to_vec(),
        };
        let text = serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?;
        self.files
            .write_atomically(&self.path, &text)
            .map_err(std::io::Error::other)
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
