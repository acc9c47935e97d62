//! Writing request frames as they arrive to a directory (`skiff.frame.capture.dir`), for the
//! replay corpus of real clients' requests (`scripts/capture-frames.sh`, `tests/corpus/`). Off
//! by default: frames hold client data (records, SASL passwords).
//!
//! Each distinct frame is written once, as received (the frame body after the size prefix),
//! named by api key, version, client id and a hash of the frame with its correlation id zeroed,
//! so the same request sent again under another correlation id is not written twice, and several
//! brokers writing into one directory agree on the names. At most
//! `skiff.frame.capture.max.frames` files and `skiff.frame.capture.max.bytes` bytes are written
//! by one broker; frames beyond either bound are dropped (and counted in the log once).
//!
//! Must never: change the frame, delay the request (the file is written on a blocking thread,
//! and a write that fails is logged, never answered), or decode more of the frame than its header
//! start and client id.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::config::Config;

/// Characters of the client id kept in a file name.
const CLIENT_ID_NAME_CHARS_MAX: usize = 40;
/// Bytes of the frame hash written in a file name (hex doubles it).
const HASH_NAME_BYTES: usize = 8;
/// Where the correlation id sits in a frame body: after the api key and version (the header
/// start [`skiff_protocol::header::peek_start`] read, so a named frame has these bytes).
const CORRELATION_ID_BYTES: std::ops::Range<usize> = 4..8;
/// The client-id part of the name of a frame whose client id is null or empty.
const NULL_CLIENT_ID_NAME: &str = "_null_";

/// Why capturing could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot create skiff.frame.capture.dir {path}: {source}")]
pub struct CaptureDirError {
    /// The directory.
    pub path: PathBuf,
    /// The IO error.
    pub source: std::io::Error,
}

/// The capture of one broker: the directory and what it has written so far.
pub(crate) struct FrameCapture {
    dir: PathBuf,
    frames_max: usize,
    bytes_max: u64,
    written: Mutex<Written>,
}

#[derive(Default)]
struct Written {
    /// Hashes of the frames written (or being written).
    names: HashSet<String>,
    frames: usize,
    bytes: u64,
    /// Whether the drop of a frame over the bounds was logged already.
    dropped_logged: bool,
}

impl FrameCapture {
    /// The capture `config` asks for (`None` when `skiff.frame.capture.dir` is unset), with its
    /// directory created.
    pub(crate) fn open(config: &Config) -> Result<Option<Arc<Self>>, CaptureDirError> {
        let Some(dir) = &config.frame_capture_dir else {
            return Ok(None);
        };
        std::fs::create_dir_all(dir).map_err(|source| CaptureDirError {
            path: dir.clone(),
            source,
        })?;
        tracing::warn!(dir = %dir.display(), "writing every distinct request frame to a file (skiff.frame.capture.dir): for test corpora only");
        Ok(Some(Arc::new(Self {
            dir: dir.clone(),
            frames_max: config.frame_capture_max_frames,
            bytes_max: config.frame_capture_max_bytes,
            written: Mutex::new(Written::default()),
        })))
    }

    /// Writes `frame` (a frame body) unless the same frame was written or a bound is reached.
    pub(crate) fn record(&self, frame: &Bytes) {
        let Some(name) = file_name(frame) else {
            return;
        };
        {
            let Ok(mut written) = self.written.lock() else {
                return;
            };
            if written.names.contains(&name) {
                return;
            }
            let bytes = written.bytes.saturating_add(frame.len() as u64);
            if written.frames >= self.frames_max || bytes > self.bytes_max {
                if !written.dropped_logged {
                    written.dropped_logged = true;
                    tracing::warn!(
                        frames = written.frames,
                        bytes = written.bytes,
                        "frame capture bounds reached (skiff.frame.capture.max.frames, .max.bytes): later frames are not written"
                    );
                }
                return;
            }
            written.frames += 1;
            written.bytes = bytes;
            written.names.insert(name.clone());
        }
        let path = self.dir.join(name);
        let frame = frame.clone();
        tokio::task::spawn_blocking(move || {
            if let Err(error) = write_new(&path, &frame) {
                tracing::warn!(path = %path.display(), %error, "cannot write a captured frame");
            }
        });
    }
}

/// How the name of a capture still being written ends (`<name>.<pid>.tmp`, renamed when whole).
const TEMPORARY_SUFFIX: &str = ".tmp";

/// Writes `frame` to `path` through a temporary file and a rename, so a reader never sees half a
/// frame; a file already there (another broker wrote the same frame) is left as it is.
fn write_new(path: &Path, frame: &[u8]) -> std::io::Result<()> {
    if path.exists() {
        return Ok(());
    }
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(".{}{TEMPORARY_SUFFIX}", std::process::id()));
    let temporary = PathBuf::from(temporary);
    std::fs::write(&temporary, frame)?;
    std::fs::rename(&temporary, path)
}

/// `<api key>-v<version>-<client id>-<hash>.bin`, or `None` for a frame too short to have a
/// header start (it is not a request; the connection answers it by closing).
fn file_name(frame: &Bytes) -> Option<String> {
    let start = skiff_protocol::header::peek_start(frame).ok()?;
    let client_id = skiff_protocol::header::peek_client_id(frame)
        .ok()
        .flatten()
        .map(|client_id| name_part(&client_id))
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| NULL_CLIENT_ID_NAME.to_owned());
    // The same request under another correlation id is the same frame.
    let mut unnumbered = frame.to_vec();
    if let Some(correlation_id) = unnumbered.get_mut(CORRELATION_ID_BYTES) {
        correlation_id.fill(0);
    }
    let hash: String = Sha256::digest(&unnumbered)
        .iter()
        .take(HASH_NAME_BYTES)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    Some(format!(
        "{}-v{}-{client_id}-{hash}.bin",
        start.api_key, start.api_version
    ))
}

/// A client id as a file-name part: every character but ASCII letters, digits, `.` and `_`
/// written as `_` (names stay portable and never hold the `-` that separates their parts).
fn name_part(client_id: &str) -> String {
    client_id
        .chars()
        .take(CLIENT_ID_NAME_CHARS_MAX)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// librdkafka 2.16's second Metadata v12 (issue 14), with its correlation id.
    fn metadata_v12(correlation_id: u8) -> Bytes {
        let mut frame = vec![0, 3, 0, 12, 0, 0, 0, correlation_id, 0, 7];
        frame.extend_from_slice(b"rdkafka");
        frame.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0, 0]);
        Bytes::from(frame)
    }

    fn capture(dir: &Path, frames_max: usize, bytes_max: u64) -> Arc<FrameCapture> {
        let config = Config {
            frame_capture_dir: Some(dir.to_owned()),
            frame_capture_max_frames: frames_max,
            frame_capture_max_bytes: bytes_max,
            ..Config::default()
        };
        FrameCapture::open(&config).expect("dir").expect("on")
    }

    /// The captured files written so far: a write still in flight (its temporary file, or one
    /// renamed between the listing and the read) is not one yet. Reading whatever the listing
    /// showed failed under load when a temporary file was renamed away first.
    fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
            .expect("dir")
            .filter_map(|entry| {
                let path = entry.expect("entry").path();
                let name = path
                    .file_name()
                    .expect("name")
                    .to_string_lossy()
                    .into_owned();
                if name.ends_with(TEMPORARY_SUFFIX) {
                    return None;
                }
                match std::fs::read(&path) {
                    Ok(bytes) => Some((name, bytes)),
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
                    Err(error) => panic!("reading {path:?}: {error}"),
                }
            })
            .collect();
        files.sort();
        files
    }

    /// Waits for the blocking writes `record` started.
    async fn settle(dir: &Path, count: usize) {
        for _ in 0..200 {
            if files(dir).len() >= count {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn a_frame_is_written_once_as_received_whatever_its_correlation_id() {
        let dir = tempfile::tempdir().expect("dir");
        let capture = capture(dir.path(), 10, 1 << 20);
        capture.record(&metadata_v12(3));
        capture.record(&metadata_v12(4));
        let mut other_client = metadata_v12(5).to_vec();
        other_client[10..17].copy_from_slice(b"kcat/1 ");
        capture.record(&Bytes::from(other_client));
        settle(dir.path(), 2).await;
        let written = files(dir.path());
        assert_eq!(written.len(), 2, "{written:?}");
        assert!(
            written[0].0.starts_with("3-v12-kcat_1_-"),
            "{}",
            written[0].0
        );
        assert!(
            written[1].0.starts_with("3-v12-rdkafka-"),
            "{}",
            written[1].0
        );
        assert_eq!(
            written[1].1,
            metadata_v12(3).to_vec(),
            "the first one, unchanged"
        );
    }

    #[tokio::test]
    async fn frames_beyond_the_bounds_are_not_written() {
        let dir = tempfile::tempdir().expect("dir");
        let by_count = capture(dir.path(), 1, 1 << 20);
        by_count.record(&metadata_v12(1));
        let mut second = metadata_v12(1).to_vec();
        second.push(0);
        by_count.record(&Bytes::from(second.clone()));
        settle(dir.path(), 1).await;
        assert_eq!(files(dir.path()).len(), 1);

        let dir = tempfile::tempdir().expect("dir");
        let by_bytes = capture(dir.path(), 10, metadata_v12(1).len() as u64);
        by_bytes.record(&metadata_v12(1));
        by_bytes.record(&Bytes::from(second));
        settle(dir.path(), 1).await;
        assert_eq!(files(dir.path()).len(), 1);
    }

    #[test]
    fn frames_without_a_header_start_or_client_id_are_named_or_skipped() {
        assert_eq!(file_name(&Bytes::from_static(&[0, 3, 0])), None);
        let null_client = Bytes::from_static(&[0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff]);
        let name = file_name(&null_client).expect("named");
        assert!(name.starts_with("18-v0-_null_-"), "{name}");
        let unicode_client =
            Bytes::from_static(b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x04\xc3\xa9-a");
        let name = file_name(&unicode_client).expect("named");
        assert!(name.starts_with("18-v0-__a-"), "{name}");
    }
}
