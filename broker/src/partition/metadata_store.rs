//! Durable topic metadata (names, ids, partition counts, replica assignment, config overrides)
//! behind one interface. The single-node default keeps it in one JSON file in `log.dirs`, replaced
//! atomically (temp file, fsync, rename, fsync of the directory); a cluster would put the same
//! records in a coordination service instead, behind the same trait.
//!
//! Must never: leave a half-written file where a crash could find it.

use std::collections::BTreeMap;

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
    pub configs: BTreeMap<String, String>,
}

/// Where topic metadata lives.
pub trait MetadataStore: Send + Sync {
    /// Every topic, as last saved.
    fn load(&self) -> std::io::Result<Vec<TopicRecord>>;
    /// Replaces the stored set with `topics`, durably, before returning.
    fn save(&self, topics: &[TopicRecord]) -> std::io::Result<()>;
    /// Stores the config overrides of `topic` (as they are in `topics`, the whole set), durably,
    /// before returning. Its own call because a cluster keeps overrides apart from the topic
    /// (`R/configs/topics/<topic>`) and writes only that one key; the file store rewrites its file.
    fn save_topic_configs(&self, topics: &[TopicRecord], topic: &str) -> std::io::Result<()> {
        debug_assert!(topics.iter().any(|record| record.name == topic));
        self.save(topics)
    }
}

/// The single-node store: one JSON file, read and replaced through the log directory's file
/// operations ([`DurableFiles`]), so a simulated power cut of the directory covers it too.
#[derive(Debug)]
pub struct FileMetadataStore {
    path: PathBuf,
    files: DurableFiles,
}

/// File name of the topic metadata inside `log.dirs`.
pub const METADATA_FILE_NAME: &str = "skiff-topics.json";
/// Largest topic metadata file read at start: about 100,000 topics of a few partitions each, far
/// above what one node serves; a larger file is refused rather than read whole.
pub const METADATA_FILE_BYTES_MAX: u64 = 256 * 1024 * 1024;

impl FileMetadataStore {
    /// A store in `dir` (the log directory `files` belong to, `LogDir::files`).
    pub fn new(dir: &Path, files: DurableFiles) -> Self {
        Self {
            path: dir.join(METADATA_FILE_NAME),
            files,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct MetadataFile {
    version: u32,
    topics: Vec<TopicRecord>,
}

const METADATA_FILE_VERSION: u32 = 1;

impl MetadataStore for FileMetadataStore {
    fn load(&self) -> std::io::Result<Vec<TopicRecord>> {
        let bytes = self
            .files
            .read_small(&self.path, METADATA_FILE_BYTES_MAX)
            .map_err(std::io::Error::other)?;
        let Some(bytes) = bytes else {
            return Ok(Vec::new());
        };
        let file: MetadataFile = serde_json::from_slice(&bytes).map_err(|error| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} is corrupt: {error}", self.path.display()),
            )
        })?;
        if file.version != METADATA_FILE_VERSION {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "{} has unknown version {}",
                    self.path.display(),
                    file.version
                ),
            ));
        }
        Ok(file.topics)
    }

    fn save(&self, topics: &[TopicRecord]) -> std::io::Result<()> {
        let file = MetadataFile {
            version: METADATA_FILE_VERSION,
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

    #[test]
    fn save_then_load_round_trips_and_missing_file_is_empty() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = FileMetadataStore::new(dir.path(), DurableFiles::real());
        assert!(store.load().expect("empty").is_empty());
        let topics = vec![TopicRecord {
            name: "orders".into(),
            topic_id: "00112233445566778899aabbccddeeff".into(),
            replicas: vec![vec![1], vec![1]],
            configs: BTreeMap::from([("retention.ms".into(), "1000".into())]),
        }];
        store.save(&topics).expect("save");
        assert_eq!(store.load().expect("load"), topics);
    }

    #[test]
    fn corrupt_file_is_a_clear_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(METADATA_FILE_NAME), b"{not json").expect("write");
        let error = FileMetadataStore::new(dir.path(), DurableFiles::real())
            .load()
            .expect_err("corrupt");
        assert!(error.to_string().contains("corrupt"));
    }
}
