//! KIP-283's throughput test: one topic of 12 partitions (or `--partitions`) of 1 kB messages, one
//! consumer reading it start to end several times, modern (Fetch v4, as stored) against legacy
//! v2→v1 (Fetch v2) and v2→v0 (Fetch v0), for each down-conversion setting (chunk sizes, and
//! eager), plus produce throughput. The first pass of every version is a verified one and is not
//! counted. Each version is read through every listener asked for (PLAINTEXT, and SSL for issue
//! #8's TLS cost) on the same broker and topic, so the two sit side by side in one run.
//!
//! Must never: count an unverified version (if the verified pass fails, the run fails), or run past
//! the run's deadline.

use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::BytesMut;
use serde::{Deserialize, Serialize};

use super::broker::{SpawnSpec, SpawnedBroker, Target};
use super::consume::{read_pass, FetchSpec, PassOutcome, MODERN_FETCH_VERSION_MIN};
use super::produce::{produce, ProduceOutcome, ProduceSpec};
use super::{FETCH_MAX_BYTES, PARTITION_MAX_BYTES};
use crate::client::{Connection, Security};

/// KIP-283's partition count for this test.
pub const PARTITION_COUNT_DEFAULT: i32 = 12;

/// The Fetch versions measured: modern, v2→v1 and v2→v0.
pub const VERSIONS: [i16; 3] = [MODERN_FETCH_VERSION_MIN, 2, 0];

/// KIP-283's chunk sizes, 16 KiB … 1 MiB.
pub const CHUNK_BYTES_SWEEP: [usize; 7] = [
    16 << 10,
    32 << 10,
    64 << 10,
    128 << 10,
    256 << 10,
    512 << 10,
    1 << 20,
];

/// A broker down-conversion setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Setting {
    /// Whatever the broker under test is configured with.
    AsConfigured,
    /// Lazy, with this chunk size.
    Lazy {
        /// `skiff.down.conversion.chunk.bytes`.
        chunk_bytes: usize,
    },
    /// Eager: whole responses converted before sending.
    Eager,
}

impl Setting {
    /// `--set` lines for a spawned skiff.
    pub fn skiff_settings(&self) -> Vec<String> {
        match self {
            Self::AsConfigured => Vec::new(),
            Self::Lazy { chunk_bytes } => vec![
                "skiff.down.conversion.mode=lazy".to_owned(),
                format!("skiff.down.conversion.chunk.bytes={chunk_bytes}"),
            ],
            Self::Eager => vec!["skiff.down.conversion.mode=eager".to_owned()],
        }
    }

    /// A short label for tables.
    pub fn label(&self) -> String {
        match self {
            Self::AsConfigured => "as configured".to_owned(),
            Self::Lazy { chunk_bytes } => format!("lazy {} KiB", chunk_bytes >> 10),
            Self::Eager => "eager".to_owned(),
        }
    }
}

/// The listener a pass reads through (issue #8: what TLS costs, on the same broker in one run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum SecurityProtocol {
    /// The PLAINTEXT listener (the figures of runs from before TLS was measured).
    #[default]
    Plaintext,
    /// The SSL listener: TLS with the certificate the bench generated for the run.
    Ssl,
}

impl SecurityProtocol {
    /// Kafka's name, as in `listener.security.protocol.map`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
        }
    }

    /// Parses `plaintext` or `ssl` (any case).
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "plaintext" => Ok(Self::Plaintext),
            "ssl" | "tls" => Ok(Self::Ssl),
            other => anyhow::bail!("unknown security protocol {other}; expected plaintext or ssl"),
        }
    }
}

/// Sizes and counts of one throughput run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThroughputSpec {
    /// Partitions.
    pub partition_count: i32,
    /// Records per partition.
    pub records_per_partition: u64,
    /// Records per produced batch.
    pub records_per_batch: u64,
    /// Produce requests in flight.
    pub produce_in_flight: usize,
    /// Batch bytes per Produce request at most (records written before it existed had none: one
    /// request a round, every partition's batch in it).
    #[serde(default = "unbounded_request_bytes")]
    pub produce_request_bytes_max: usize,
    /// Timed passes per version (after the verified one).
    pub pass_count: usize,
    /// Cap on the whole run.
    pub seconds_max: u64,
    /// Listeners read through, each with every Fetch version, against the same broker and topic.
    pub securities: Vec<SecurityProtocol>,
    /// Fetch versions read, in order (normally all of [`VERSIONS`]; one alone for a profile).
    pub versions: Vec<i16>,
}

/// What a record written before [`ThroughputSpec::produce_request_bytes_max`] existed did.
fn unbounded_request_bytes() -> usize {
    usize::MAX
}

/// Passes of one Fetch version against one setting.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VersionResult {
    /// Fetch version.
    pub version: i16,
    /// The listener read through.
    #[serde(default)]
    pub security: SecurityProtocol,
    /// The verified pass (not counted in the figures).
    pub verified: PassOutcome,
    /// Timed passes.
    pub passes: Vec<PassOutcome>,
}

/// One broker run at one setting.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SettingResult {
    /// The setting.
    pub setting: Setting,
    /// Which repetition (0-based).
    pub repetition: usize,
    /// Filling the topic.
    pub produce: ProduceOutcome,
    /// Per Fetch version.
    pub versions: Vec<VersionResult>,
}

/// Fills a fresh topic on `target` and reads it with every version in `spec.versions`.
pub async fn measure(
    target: &Target,
    spec: &ThroughputSpec,
    tls: Option<&Security>,
    setting: Setting,
    repetition: usize,
    deadline: Instant,
) -> anyhow::Result<SettingResult> {
    let topic = format!(
        "kip283-throughput-{}-{}",
        std::process::id(),
        super::machine::unix_seconds_now() * 1000 + repetition as u64
    );
    let produced = produce(
        &target.bootstrap,
        &ProduceSpec {
            topic: topic.clone(),
            partition_count: spec.partition_count,
            records_per_partition: spec.records_per_partition,
            records_per_batch: spec.records_per_batch,
            value_bytes: crate::kip283::RECORD_VALUE_BYTES,
            in_flight: spec.produce_in_flight,
            request_bytes_max: spec.produce_request_bytes_max,
            acks: crate::client::ACKS_LEADER,
        },
    )
    .await?;
    let end_offset = i64::try_from(spec.records_per_partition)?;
    let mut versions = Vec::new();
    let mut buffer = BytesMut::new();
    for (security, version) in spec.securities.iter().flat_map(|&security| {
        spec.versions
            .iter()
            .map(move |&version| (security, version))
    }) {
        let mut connection = match security {
            SecurityProtocol::Plaintext => Connection::connect(&target.bootstrap).await?,
            SecurityProtocol::Ssl => {
                let address = target
                    .ssl_bootstrap
                    .as_deref()
                    .context("the broker has no SSL listener")?;
                let tls = tls.context("no TLS client configuration")?;
                Connection::connect_with(address, tls).await?
            }
        };
        let fetch = FetchSpec {
            topic: topic.clone(),
            partition_count: spec.partition_count,
            version,
            partition_max_bytes: PARTITION_MAX_BYTES,
            max_bytes: FETCH_MAX_BYTES,
        };
        let verified = read_pass(
            &mut connection,
            &fetch,
            end_offset,
            true,
            deadline,
            &mut buffer,
        )
        .await?;
        let mut passes = Vec::new();
        for _ in 0..spec.pass_count {
            passes.push(
                read_pass(
                    &mut connection,
                    &fetch,
                    end_offset,
                    false,
                    deadline,
                    &mut buffer,
                )
                .await?,
            );
        }
        versions.push(VersionResult {
            version,
            security,
            verified,
            passes,
        });
    }
    Ok(SettingResult {
        setting,
        repetition,
        produce: produced,
        versions,
    })
}

/// Runs every setting `repetitions` times (settings interleaved, so slow phases of the shared
/// machine spread over all of them), each against a freshly spawned skiff, or once against
/// `target` when there is nothing to spawn. Stops early, keeping what it has, at `seconds_max`.
pub async fn sweep(
    spawn: Option<&SpawnSpec>,
    target: Option<&Target>,
    tls: Option<&Security>,
    spec: &ThroughputSpec,
    settings: &[Setting],
    repetitions: usize,
) -> anyhow::Result<(Vec<SettingResult>, bool)> {
    let deadline = Instant::now() + Duration::from_secs(spec.seconds_max);
    let mut results = Vec::new();
    for repetition in 0..repetitions {
        for setting in settings {
            if Instant::now() > deadline {
                return Ok((results, true));
            }
            let result = match (spawn, target) {
                (Some(spawn), _) => {
                    let broker = SpawnedBroker::start(spawn, &setting.skiff_settings())?;
                    let result =
                        measure(broker.target(), spec, tls, *setting, repetition, deadline).await;
                    broker.stop()?;
                    result?
                }
                (None, Some(target)) => {
                    measure(target, spec, tls, *setting, repetition, deadline).await?
                }
                (None, None) => anyhow::bail!("neither a broker to spawn nor one to reach"),
            };
            eprintln!(
                "throughput {} #{repetition}: produce {:.0} MB/s; {}",
                setting.label(),
                result.produce.bytes_per_second() / 1e6,
                result
                    .versions
                    .iter()
                    .map(|version| format!(
                        "v{} {} {:.0} MB/s",
                        version.version,
                        version.security.label(),
                        super::stats::Spread::of(
                            &version
                                .passes
                                .iter()
                                .map(PassOutcome::bytes_per_second)
                                .collect::<Vec<_>>()
                        )
                        .map_or(0.0, |spread| spread.median / 1e6)
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            results.push(result);
        }
    }
    Ok((results, false))
}
