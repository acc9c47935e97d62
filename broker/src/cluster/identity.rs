//! The node identity kept in the data directory, as Kafka's `meta.properties`: which `node.id`
//! and cluster this directory belongs to, and a directory id that tells a restart of the same
//! broker (which may replace its own stale registration) from another broker claiming the id.
//!
//! Must never: be written anywhere but `log.dirs`, or be rewritten with a different node id.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine;
use rand::RngCore;
use skiff_storage::DurableFiles;

/// The file, in `log.dirs`.
pub const IDENTITY_FILE: &str = "meta.properties";
/// Largest identity file read: it holds four short lines.
const IDENTITY_FILE_BYTES_MAX: u64 = 4096;

/// Why the identity could not be read or kept.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not what this broker wrote.
    #[error("{path} is damaged: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The directory belongs to another node id.
    #[error(
        "{path} says this data directory belongs to node.id {stored}, but node.id is {configured}: \
         give this broker its own log.dirs, or set node.id back"
    )]
    NodeIdMismatch {
        /// The file.
        path: PathBuf,
        /// The id stored.
        stored: i32,
        /// The id configured.
        configured: i32,
    },
    /// The directory belongs to another cluster.
    #[error(
        "{path} says this data directory belongs to cluster {stored}, but the metadata store's \
         cluster is {store}: a data directory never moves between clusters"
    )]
    ClusterMismatch {
        /// The file.
        path: PathBuf,
        /// The cluster id stored.
        stored: String,
        /// The store's cluster id.
        store: String,
    },
}

/// A data directory's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// `node.id`.
    pub node_id: i32,
    /// Random, made when the directory is first used.
    pub directory_id: String,
    /// The cluster this directory joined, once it has.
    pub cluster_id: Option<String>,
}

/// A fresh Kafka-style id: 16 random bytes in URL-safe base64 without padding (22 characters, as
/// Kafka's `Uuid.toString`).
pub fn random_id() -> String {
    let mut bytes = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn path_in(dir: &Path) -> PathBuf {
    dir.join(IDENTITY_FILE)
}

/// Reads the identity of `dir`, or makes and stores one for `node_id` if the directory has none.
/// `files`: the log directory's file operations (`LogDir::files`).
pub fn load_or_create(
    dir: &Path,
    files: &DurableFiles,
    node_id: i32,
) -> Result<Identity, IdentityError> {
    let path = path_in(dir);
    let bytes = files
        .read_small(&path, IDENTITY_FILE_BYTES_MAX)
        .map_err(|error| IdentityError::Io {
            path: path.clone(),
            source: std::io::Error::other(error.to_string()),
        })?;
    let Some(bytes) = bytes else {
        let identity = Identity {
            node_id,
            directory_id: random_id(),
            cluster_id: None,
        };
        store(dir, files, &identity)?;
        return Ok(identity);
    };
    let text = std::str::from_utf8(&bytes).map_err(|_| IdentityError::Corrupt {
        path: path.clone(),
        reason: "not UTF-8".into(),
    })?;
    let identity = parse(&path, text)?;
    if identity.node_id != node_id {
        return Err(IdentityError::NodeIdMismatch {
            path,
            stored: identity.node_id,
            configured: node_id,
        });
    }
    Ok(identity)
}

fn parse(path: &Path, text: &str) -> Result<Identity, IdentityError> {
    let corrupt = |reason: String| IdentityError::Corrupt {
        path: path.to_owned(),
        reason,
    };
    let mut values = BTreeMap::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .ok_or_else(|| corrupt(format!("line {line:?} is not key=value")))?;
        values.insert(key.trim(), value.trim());
    }
    if values.get("version") != Some(&"1") {
        return Err(corrupt("version is not 1".into()));
    }
    let node_id = values
        .get("node.id")
        .and_then(|id| id.parse().ok())
        .ok_or_else(|| corrupt("node.id is missing or not a number".into()))?;
    let directory_id = values
        .get("directory.id")
        .filter(|id| !id.is_empty())
        .ok_or_else(|| corrupt("directory.id is missing".into()))?
        .to_string();
    Ok(Identity {
        node_id,
        directory_id,
        cluster_id: values.get("cluster.id").map(|id| id.to_string()),
    })
}

fn store(dir: &Path, files: &DurableFiles, identity: &Identity) -> Result<(), IdentityError> {
    let mut text = format!(
        "# Written by Skiff: this data directory's identity. Do not copy it to another broker.\n\
         version=1\nnode.id={}\ndirectory.id={}\n",
        identity.node_id, identity.directory_id
    );
    if let Some(cluster_id) = &identity.cluster_id {
        text.push_str(&format!("cluster.id={cluster_id}\n"));
    }
    files
        .write_atomically(&path_in(dir), text.as_bytes())
        .map_err(|error| IdentityError::Io {
            path: path_in(dir),
            source: std::io::Error::other(error.to_string()),
        })
}

/// Records the cluster the directory joined; refuses a directory that belongs to another one.
pub fn join_cluster(
    dir: &Path,
    files: &DurableFiles,
    identity: &mut Identity,
    cluster_id: &str,
) -> Result<(), IdentityError> {
    match &identity.cluster_id {
        Some(stored) if stored == cluster_id => Ok(()),
        Some(stored) => Err(IdentityError::ClusterMismatch {
            path: path_in(dir),
            stored: stored.clone(),
            store: cluster_id.to_owned(),
        }),
        None => {
            identity.cluster_id = Some(cluster_id.to_owned());
            store(dir, files, identity)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_is_made_once_and_then_checked() {
        let dir = tempfile::tempdir().unwrap();
        let files = DurableFiles::real();
        let mut first = load_or_create(dir.path(), &files, 3).unwrap();
        assert_eq!(first.directory_id.len(), 22);
        assert_eq!(load_or_create(dir.path(), &files, 3).unwrap(), first);
        let error = load_or_create(dir.path(), &files, 4)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("node.id 3") && error.contains("node.id is 4"),
            "{error}"
        );
        join_cluster(dir.path(), &files, &mut first, "abc").unwrap();
        let mut again = load_or_create(dir.path(), &files, 3).unwrap();
        assert_eq!(again.cluster_id.as_deref(), Some("abc"));
        let error = join_cluster(dir.path(), &files, &mut again, "xyz")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("cluster abc") && error.contains("xyz"),
            "{error}"
        );
    }

    #[test]
    fn a_damaged_identity_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let files = DurableFiles::real();
        std::fs::write(dir.path().join(IDENTITY_FILE), "version=1\nnode.id=x\n").unwrap();
        let error = load_or_create(dir.path(), &files, 1)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("damaged") && error.contains("node.id"),
            "{error}"
        );
    }
}
