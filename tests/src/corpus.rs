//! The replay corpus of real clients' request frames (`tests/corpus/frames/<suite>/`): what a
//! captured frame is, how the collector (`examples/collect_frames.rs`) picks the few it keeps, and
//! how the replay test (`tests/frame_corpus.rs`) reads a response. Written by
//! `scripts/capture-frames.sh`; see `tests/corpus/README.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use bytes::{Buf, Bytes};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Decodable;
use skiff_protocol::error::RequestError;
use skiff_protocol::requests::decode_request_with_rest;

/// Largest frame the corpus keeps: a Produce of the suite's small test messages fits many times;
/// a frame above it (a bulk produce) is left out whole, never cut.
pub const CORPUS_FRAME_BYTES_MAX: usize = 16 * 1024;
/// Frames kept per (client, api, version, kind): the largest, which has the most fields filled.
pub const FRAMES_PER_KIND_MAX: usize = 1;

/// One frame of the corpus: the frame body as the client sent it (after the size prefix).
#[derive(Debug, Clone)]
pub struct CorpusFrame {
    /// The suite that sent it (`kcat`, `java_tools`, ...).
    pub suite: String,
    /// Its file.
    pub path: PathBuf,
    /// The bytes.
    pub frame: Bytes,
}

impl CorpusFrame {
    /// Api key, version and correlation id from the header start.
    pub fn start(&self) -> anyhow::Result<skiff_protocol::header::HeaderStart> {
        skiff_protocol::header::peek_start(&self.frame)
            .with_context(|| format!("{}: no header start", self.path.display()))
    }

    /// The client family the client id names: up to its first digit (an instance number or a
    /// version), then the first word (`consumer-java-group-2` and `consumer-1` are Apache Kafka's
    /// Java `consumer`, `perf-producer-client` its tools), or the first two for `kafka-python-*`
    /// and `kafka-node-*`; `rdkafka` for kcat and confluent-kafka.
    pub fn client(&self) -> String {
        let client_id = skiff_protocol::header::peek_client_id(&self.frame)
            .ok()
            .flatten()
            .map(|client_id| client_id.to_string())
            .unwrap_or_default();
        let unnumbered = client_id
            .split(|c: char| c.is_ascii_digit())
            .next()
            .unwrap_or("")
            .trim_end_matches(['-', '_', '.']);
        let words: Vec<&str> = unnumbered.split('-').collect();
        let kept = if words[0] == "kafka" { 2 } else { 1 };
        words[..kept.min(words.len())].join("-")
    }

    /// How the broker's decoder takes it.
    pub fn kind(&self) -> FrameKind {
        match decode_request_with_rest(&self.frame) {
            Ok((_, _, 0)) => FrameKind::Answered,
            Ok((_, _, rest)) => FrameKind::BytesPastSchema(rest),
            Err(RequestError::UnsupportedVersion { api_key, .. })
                if api_key == kafka_protocol::messages::ApiKey::ApiVersions as i16 =>
            {
                FrameKind::ApiVersionsAboveMax
            }
            Err(error) => FrameKind::Refused(error.to_string()),
        }
    }
}

/// What the broker's decoder makes of a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameKind {
    /// Decoded exactly.
    Answered,
    /// Decoded, with this many bytes after the schema ignored (as Kafka ignores them).
    BytesPastSchema(usize),
    /// An ApiVersions above the versions the broker has: answered at v0 with UNSUPPORTED_VERSION
    /// and the broker's versions (KIP-511), after which the client asks again at one it has.
    ApiVersionsAboveMax,
    /// Refused, for this reason.
    Refused(String),
}

impl FrameKind {
    /// A rank for grouping: answered, past the schema, ApiVersions above the max, refused.
    pub fn rank(&self) -> u8 {
        match self {
            Self::Answered => 0,
            Self::BytesPastSchema(_) => 1,
            Self::ApiVersionsAboveMax => 2,
            Self::Refused(_) => 3,
        }
    }
}

/// Every frame under `root` (`<root>/<suite>/*.bin`), sorted by suite and file name.
pub fn read_frames(root: &Path) -> anyhow::Result<Vec<CorpusFrame>> {
    let mut frames = Vec::new();
    for suite in std::fs::read_dir(root).with_context(|| format!("{}", root.display()))? {
        let suite = suite?;
        if !suite.file_type()?.is_dir() {
            continue;
        }
        let suite_name = suite.file_name().to_string_lossy().into_owned();
        for file in std::fs::read_dir(suite.path())? {
            let path = file?.path();
            if path.extension().is_some_and(|extension| extension == "bin") {
                let frame = Bytes::from(std::fs::read(&path)?);
                frames.push(CorpusFrame {
                    suite: suite_name.clone(),
                    path,
                    frame,
                });
            }
        }
    }
    frames.sort_by(|a, b| (&a.suite, &a.path).cmp(&(&b.suite, &b.path)));
    Ok(frames)
}

/// Which frames of a corpus are alike: the same client family, api, version and kind.
pub type FrameGroup = (String, i16, i16, u8);

impl CorpusFrame {
    /// The group it belongs to.
    pub fn group(&self) -> anyhow::Result<FrameGroup> {
        let start = self.start()?;
        Ok((
            self.client(),
            start.api_key,
            start.api_version,
            self.kind().rank(),
        ))
    }
}

/// The frames the corpus keeps of `frames`: none above [`CORPUS_FRAME_BYTES_MAX`], each distinct
/// frame once (the capture's file name holds its hash), and per [`FrameGroup`] the
/// [`FRAMES_PER_KIND_MAX`] largest.
pub fn select(frames: Vec<CorpusFrame>) -> Vec<CorpusFrame> {
    let mut groups: BTreeMap<FrameGroup, Vec<CorpusFrame>> = BTreeMap::new();
    let mut seen = std::collections::BTreeSet::new();
    for frame in frames {
        if frame.frame.len() > CORPUS_FRAME_BYTES_MAX {
            continue;
        }
        let Ok(group) = frame.group() else { continue };
        let hash = frame.path.file_stem().map(|stem| {
            stem.to_string_lossy()
                .rsplit('-')
                .next()
                .unwrap_or("")
                .to_owned()
        });
        if !seen.insert(hash) {
            continue;
        }
        groups.entry(group).or_default().push(frame);
    }
    let mut kept = Vec::new();
    for (_, mut members) in groups {
        // Largest first; among equals, the first suite and file (a stable choice).
        members.sort_by(|a, b| {
            (b.frame.len(), &a.suite, &a.path).cmp(&(a.frame.len(), &b.suite, &b.path))
        });
        members.truncate(FRAMES_PER_KIND_MAX);
        kept.extend(members);
    }
    kept
}

/// A response frame body (after the size prefix) to `api_key` at `version`, decoded with
/// kafka-protocol as a client would: its correlation id and the response, shown with `Debug`.
/// Fails if the body does not decode or leaves bytes over.
pub fn decode_response(api_key: i16, version: i16, frame: &[u8]) -> anyhow::Result<(i32, String)> {
    let key = ApiKey::try_from(api_key).map_err(|_| anyhow::anyhow!("api key {api_key}"))?;
    let mut body = Bytes::copy_from_slice(frame);
    anyhow::ensure!(body.len() >= 4, "response of {} bytes", body.len());
    let correlation_id = body.get_i32();
    if key.response_header_version(version) >= 1 {
        // The tagged-field count of response header v1 (a varint; the broker writes none).
        anyhow::ensure!(
            body.has_remaining(),
            "response header v1 without its tagged fields"
        );
        let header_tags = body.get_u8();
        anyhow::ensure!(
            header_tags == 0,
            "response header with {header_tags} tagged fields"
        );
    }
    macro_rules! responses {
        ($($variant:ident => $response:ty),* $(,)?) => {
            match key {
                $( ApiKey::$variant => format!("{:?}", <$response>::decode(&mut body, version)?), )*
                other => anyhow::bail!("no response type for {other:?}"),
            }
        };
    }
    let shown = responses! {
        Produce => ProduceResponse,
        Fetch => FetchResponse,
        ListOffsets => ListOffsetsResponse,
        Metadata => MetadataResponse,
        OffsetCommit => OffsetCommitResponse,
        OffsetFetch => OffsetFetchResponse,
        FindCoordinator => FindCoordinatorResponse,
        JoinGroup => JoinGroupResponse,
        Heartbeat => HeartbeatResponse,
        LeaveGroup => LeaveGroupResponse,
        SyncGroup => SyncGroupResponse,
        DescribeGroups => DescribeGroupsResponse,
        ListGroups => ListGroupsResponse,
        SaslHandshake => SaslHandshakeResponse,
        ApiVersions => ApiVersionsResponse,
        CreateTopics => CreateTopicsResponse,
        DeleteTopics => DeleteTopicsResponse,
        DeleteRecords => DeleteRecordsResponse,
        InitProducerId => InitProducerIdResponse,
        DescribeConfigs => DescribeConfigsResponse,
        AlterConfigs => AlterConfigsResponse,
        DescribeLogDirs => DescribeLogDirsResponse,
        SaslAuthenticate => SaslAuthenticateResponse,
        CreatePartitions => CreatePartitionsResponse,
        DeleteGroups => DeleteGroupsResponse,
        IncrementalAlterConfigs => IncrementalAlterConfigsResponse,
        ListPartitionReassignments => ListPartitionReassignmentsResponse,
        AlterPartitionReassignments => AlterPartitionReassignmentsResponse,
        OffsetDelete => OffsetDeleteResponse,
    };
    anyhow::ensure!(
        !body.has_remaining(),
        "{} bytes after the response",
        body.remaining()
    );
    Ok((correlation_id, shown))
}
