//! Every request frame of the replay corpus (`tests/corpus/frames`: what kcat, confluent-kafka,
//! kafka-python at each api_version, kafka-node and Apache Kafka's Java client and tools sent in
//! the real-client suite, captured by `scripts/capture-frames.sh`) gets an answer: replayed as sent
//! on a fresh connection, each is answered with its correlation id and a response a client decodes
//! (Produce with acks=0 excepted: it has none), and the connection still answers an ApiVersions
//! after it. A frame that needs state the broker does not have (a member id, a producer id, a topic
//! id) must get an error code in a valid response, never a closed connection. Issue 14 item 1.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use skiff_protocol::error_code;
use skiff_protocol::requests::{decode_request, Request};
use skiff_tests::corpus::{decode_response, read_frames, CorpusFrame, FrameKind};
use skiff_tests::corpus::{CORPUS_FRAME_BYTES_MAX, FRAMES_PER_KIND_MAX};

use skiff_tests::TestBroker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long one answer may take: long enough for a long-polling Fetch (the clients ask 100 ms to
/// 500 ms) and a JoinGroup's rebalance on a broker without a rebalance delay.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(20);
/// Frames replayed at once (each on its own connection), so long polls overlap.
const REPLAYS_AT_ONCE: usize = 16;
/// The correlation id of the ApiVersions sent after each frame.
const PROBE_CORRELATION_ID: i32 = 0x5eed_0001;
/// Error codes that say the broker could not read the request it answered: a frame a real client
/// sent must never get one.
const UNREAD_REQUEST_CODES: &[i16] = &[
    error_code::UNSUPPORTED_VERSION,
    error_code::INVALID_REQUEST,
    error_code::CORRUPT_MESSAGE,
    error_code::UNKNOWN_SERVER_ERROR,
];
/// Client families the corpus must hold frames of: librdkafka (kcat, confluent-kafka),
/// kafka-python, kafka-node, and Apache Kafka's Java producer, consumer, admin client (modern and
/// legacy releases) and perf tools.
const CLIENTS: &[&str] = &[
    "rdkafka",
    "kafka-python",
    "kafka-node",
    "producer",
    "consumer",
    "adminclient",
    "perf",
];
/// The corpus stays a few hundred frames.
const CORPUS_FRAMES_MAX: usize = 500;

fn corpus() -> Vec<CorpusFrame> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/frames");
    read_frames(&root).expect("tests/corpus/frames (scripts/capture-frames.sh writes it)")
}

#[test]
fn the_corpus_covers_every_client_and_stays_small() {
    let frames = corpus();
    assert!(
        frames.len() <= CORPUS_FRAMES_MAX,
        "{} frames: keep the corpus small",
        frames.len()
    );
    let clients: BTreeSet<String> = frames.iter().map(CorpusFrame::client).collect();
    for client in CLIENTS {
        assert!(
            clients.contains(*client),
            "no frames of {client}: {clients:?}"
        );
    }
    for frame in &frames {
        assert!(
            frame.frame.len() <= CORPUS_FRAME_BYTES_MAX,
            "{}: {} bytes",
            frame.path.display(),
            frame.frame.len()
        );
    }
    let mut per_group = std::collections::BTreeMap::new();
    for frame in &frames {
        *per_group
            .entry(frame.group().expect("header start"))
            .or_insert(0usize) += 1;
    }
    assert!(
        per_group
            .values()
            .all(|count| *count <= FRAMES_PER_KIND_MAX),
        "{per_group:?}"
    );
    // librdkafka 2.16's pipelined Metadata v12 with 3 bytes after its schema (issue 14 item 1).
    assert!(
        frames.iter().any(|frame| {
            let start = frame.start().expect("header start");
            frame.client() == "rdkafka"
                && (start.api_key, start.api_version) == (3, 12)
                && frame.kind() == FrameKind::BytesPastSchema(3)
        }),
        "the corpus must hold librdkafka's Metadata v12 with bytes past the schema"
    );
}

/// Every frame decodes, but ApiVersions above the broker's versions (answered at v0, KIP-511).
#[test]
fn every_frame_decodes() {
    let refused: Vec<String> = corpus()
        .iter()
        .filter_map(|frame| match frame.kind() {
            FrameKind::Refused(reason) => Some(format!("{}: {reason}", frame.path.display())),
            _ => None,
        })
        .collect();
    assert!(refused.is_empty(), "refused:\n{}", refused.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_frame_is_answered() -> anyhow::Result<()> {
    // Without the initial rebalance delay a JoinGroup is answered at once; each JoinGroup gets a
    // broker of its own, so no replayed member waits for another to rejoin.
    let settings = ["group.initial.rebalance.delay.ms=0"];
    let shared = Arc::new(TestBroker::start(&settings).await?);
    let gate = Arc::new(tokio::sync::Semaphore::new(REPLAYS_AT_ONCE));
    let mut replays = tokio::task::JoinSet::new();
    let frames = corpus();
    let count = frames.len();
    for frame in frames {
        let shared = shared.clone();
        let gate = gate.clone();
        replays.spawn(async move {
            let _permit = gate.acquire_owned().await?;
            let start = frame.start()?;
            let result = if start.api_key == 11 {
                let own = TestBroker::start(&settings).await?;
                let result = replay(&own, &frame).await;
                own.stop().await;
                result
            } else {
                replay(&shared, &frame).await
            };
            result.map_err(|error| anyhow::anyhow!("{}: {error:#}", frame.path.display()))
        });
    }
    let mut failures = Vec::new();
    while let Some(done) = replays.join_next().await {
        if let Err(error) = done? {
            failures.push(error.to_string());
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {count} frames not answered:\n{}",
        failures.len(),
        failures.join("\n")
    );
    if let Ok(shared) = Arc::try_unwrap(shared) {
        shared.stop().await;
    }
    Ok(())
}

/// Sends `frame` and an ApiVersions v0 on one connection; checks both answers.
async fn replay(broker: &TestBroker, frame: &CorpusFrame) -> anyhow::Result<()> {
    let start = frame.start()?;
    let answered = match decode_request(&frame.frame) {
        Ok((_, Request::Produce(produce))) => produce.acks != 0,
        _ => true,
    };
    let mut stream = TcpStream::connect(broker.address).await?;
    let mut out = Vec::with_capacity(frame.frame.len() + 32);
    out.extend_from_slice(&u32::try_from(frame.frame.len())?.to_be_bytes());
    out.extend_from_slice(&frame.frame);
    let probe = probe();
    out.extend_from_slice(&u32::try_from(probe.len())?.to_be_bytes());
    out.extend_from_slice(&probe);
    stream.write_all(&out).await?;
    if answered {
        let response = read_frame(&mut stream)
            .await
            .map_err(|error| anyhow::anyhow!("no answer: {error:#}"))?;
        let above_max = frame.kind() == FrameKind::ApiVersionsAboveMax;
        // KIP-511: an ApiVersions above the broker's is answered at v0.
        let version = if above_max { 0 } else { start.api_version };
        let (correlation_id, shown) = decode_response(start.api_key, version, &response)?;
        if above_max {
            anyhow::ensure!(
                shown.contains(&format!("error_code: {}", error_code::UNSUPPORTED_VERSION)),
                "an ApiVersions above the broker's must get UNSUPPORTED_VERSION: {shown}"
            );
        }
        anyhow::ensure!(
            correlation_id == start.correlation_id,
            "answered with correlation id {correlation_id}, sent {}",
            start.correlation_id
        );
        for code in error_codes(&shown) {
            anyhow::ensure!(
                above_max || !UNREAD_REQUEST_CODES.contains(&code),
                "error code {code} in {shown}"
            );
        }
    }
    let probe_answer = read_frame(&mut stream)
        .await
        .map_err(|error| anyhow::anyhow!("connection unusable after the frame: {error:#}"))?;
    let (correlation_id, _) = decode_response(18, 0, &probe_answer)?;
    anyhow::ensure!(
        correlation_id == PROBE_CORRELATION_ID,
        "probe answered as {correlation_id}"
    );
    Ok(())
}

/// An ApiVersions v0 request frame body (header v1, client id `replay`).
fn probe() -> Vec<u8> {
    let mut body = vec![0, 18, 0, 0];
    body.extend_from_slice(&PROBE_CORRELATION_ID.to_be_bytes());
    body.extend_from_slice(&6i16.to_be_bytes());
    body.extend_from_slice(b"replay");
    body
}

async fn read_frame(stream: &mut TcpStream) -> anyhow::Result<Bytes> {
    tokio::time::timeout(ANSWER_TIMEOUT, async {
        let size = stream.read_u32().await?;
        let mut body = vec![0u8; usize::try_from(size)?];
        stream.read_exact(&mut body).await?;
        anyhow::Ok(Bytes::from(body))
    })
    .await
    .map_err(|_| anyhow::anyhow!("nothing within {ANSWER_TIMEOUT:?}"))?
}

/// Every `error_code: N` in a response's `Debug` text.
fn error_codes(shown: &str) -> Vec<i16> {
    shown
        .match_indices("error_code: ")
        .filter_map(|(at, label)| {
            let rest = &shown[at + label.len()..];
            let end = rest
                .find(|c: char| c != '-' && !c.is_ascii_digit())
                .unwrap_or(rest.len());
            rest[..end].parse().ok()
        })
        .collect()
}
