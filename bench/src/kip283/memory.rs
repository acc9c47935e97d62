//! KIP-283's memory test scaled to this machine: 1 M × 1 kB messages in 250 partitions, then C
//! concurrent legacy consumers (Fetch v2 and Fetch v0 alternating, `max_bytes` 250 MB, partition
//! max 1 MB, so each response is ~250 MB converted) that read slowly, while the broker's RSS is
//! sampled. Lazy conversion should hold about one chunk per response; eager grows with C × response
//! size, so the run stops (and a spawned broker is killed) when RSS passes the cap.
//!
//! Must never: run past `seconds_max`, or let a spawned broker grow past the RSS cap by more than
//! one sampling interval's growth.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use kafka_protocol::messages::ApiKey;
use serde::{Deserialize, Serialize};

use super::broker::{SpawnSpec, SpawnedBroker, Target};
use super::produce::{produce, ProduceOutcome, ProduceSpec};
use super::rss::{self, Sample, Sampler};
use super::throughput::Setting;
use super::{FETCH_MAX_BYTES, PARTITION_MAX_BYTES};
use crate::client::{fetch_request_partitions, Connection};

/// KIP-283's partition count for this test.
pub const PARTITION_COUNT_DEFAULT: i32 = 250;

/// KIP-283's message count (1 M), spread over the partitions.
pub const RECORD_COUNT_DEFAULT: u64 = 1_000_000;

/// RSS sampling interval.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);

/// How often a waiting consumer looks at the stop flags.
const STOP_POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Bytes a slow consumer reads between checks of its stop flags.
const CHECK_EVERY_BYTES: usize = 1 << 20;

/// Sizes, counts and limits of one memory run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemorySpec {
    /// Partitions.
    pub partition_count: i32,
    /// Records per partition.
    pub records_per_partition: u64,
    /// Records per produced batch.
    pub records_per_batch: u64,
    /// Produce requests in flight.
    pub produce_in_flight: usize,
    /// Concurrent slow consumers (C).
    pub consumer_count: usize,
    /// A slow consumer reads this much at a time…
    pub read_piece_bytes: usize,
    /// …and sleeps this long after each piece.
    pub read_pause_ms: u64,
    /// How long the consumers read.
    pub seconds_max: u64,
    /// Stop (and kill a spawned broker) when its RSS passes this.
    pub rss_cap_bytes: u64,
}

/// One memory run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemoryResult {
    /// Down-conversion setting.
    pub setting: Setting,
    /// The spec it ran with.
    pub spec: MemorySpec,
    /// Filling the topic.
    pub produce: ProduceOutcome,
    /// Broker RSS after producing, before the consumers.
    pub rss_before_bytes: u64,
    /// Highest sampled RSS.
    pub rss_peak_sampled_bytes: u64,
    /// Broker RssAnon (the memory it owns: heap, arenas, stacks) before the consumers (0 in
    /// records written before it was sampled).
    #[serde(default)]
    pub anon_before_bytes: u64,
    /// Highest sampled RssAnon.
    #[serde(default)]
    pub anon_peak_sampled_bytes: u64,
    /// Broker RssFile (resident pages of mapped files: segment views, indexes, the binary) before
    /// the consumers.
    #[serde(default)]
    pub file_before_bytes: u64,
    /// Highest sampled RssFile.
    #[serde(default)]
    pub file_peak_sampled_bytes: u64,
    /// VmHWM at the end (`None` when the broker was killed at the cap).
    pub hwm_bytes: Option<u64>,
    /// When RSS passed the cap, since the consumers started.
    pub capped_at_ms: Option<u64>,
    /// Declared sizes of the responses the consumers started reading.
    pub response_bytes_declared: u64,
    /// Bytes the consumers read in all.
    pub bytes_read: u64,
    /// Responses whose size prefix arrived.
    pub responses_started: u64,
    /// RSS over time.
    pub samples: Vec<Sample>,
}

/// Fills a fresh topic and lets the consumers loose on it while sampling the broker's RSS.
pub async fn measure(
    target: &Target,
    spec: &MemorySpec,
    setting: Setting,
    kill_at_cap: bool,
) -> anyhow::Result<MemoryResult> {
    let pid = target
        .pid
        .context("the memory test needs the broker's pid (--broker-pid)")?;
    let topic = format!(
        "kip283-memory-{}-{}",
        std::process::id(),
        super::machine::unix_seconds_now()
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
            request_bytes_max: super::produce::PRODUCE_REQUEST_BYTES_MAX,
            acks: crate::client::ACKS_LEADER,
        },
    )
    .await?;
    let before = rss::read(pid)?;
    let sampler = Sampler::start(pid, SAMPLE_INTERVAL, spec.rss_cap_bytes, kill_at_cap);
    let capped = sampler.capped_flag();
    let deadline = Instant::now() + Duration::from_secs(spec.seconds_max);
    let bytes_read = Arc::new(AtomicU64::new(0));
    let declared = Arc::new(AtomicU64::new(0));
    let started = Arc::new(AtomicU64::new(0));
    let partitions: Vec<(i32, i64)> = (0..spec.partition_count).map(|p| (p, 0)).collect();
    let mut consumers = Vec::new();
    for index in 0..spec.consumer_count {
        let version: i16 = if index % 2 == 0 { 2 } else { 0 };
        let request = fetch_request_partitions(
            &topic,
            &partitions,
            PARTITION_MAX_BYTES,
            FETCH_MAX_BYTES,
            500,
        );
        let bootstrap = target.bootstrap.clone();
        let (capped, bytes_read, declared, started) = (
            capped.clone(),
            bytes_read.clone(),
            declared.clone(),
            started.clone(),
        );
        let piece_bytes = spec.read_piece_bytes;
        let pause = Duration::from_millis(spec.read_pause_ms);
        consumers.push(tokio::spawn(async move {
            let work = async {
                let mut connection = Connection::connect(&bootstrap).await?;
                connection.send(ApiKey::Fetch, version, &request).await?;
                let size = connection.read_size().await?;
                declared.fetch_add(u64::try_from(size)?, Ordering::Relaxed);
                started.fetch_add(1, Ordering::Relaxed);
                let mut remaining = size;
                while remaining > 0 && !capped.load(Ordering::Relaxed) {
                    let step = remaining.min(CHECK_EVERY_BYTES);
                    connection.drain_slowly(step, piece_bytes, pause).await?;
                    bytes_read.fetch_add(u64::try_from(step)?, Ordering::Relaxed);
                    remaining -= step;
                }
                anyhow::Ok(())
            };
            tokio::select! {
                outcome = work => outcome,
                () = stop_signal(&capped, deadline) => Ok(()),
            }
        }));
    }
    let mut failures = Vec::new();
    for consumer in consumers {
        if let Err(error) = consumer.await? {
            failures.push(error);
        }
    }
    let was_capped = capped.load(Ordering::Relaxed);
    // After the cap the broker is gone; broken connections are expected then.
    if let (false, Some(error)) = (was_capped, failures.into_iter().next()) {
        return Err(error.context("a slow consumer failed"));
    }
    let samples = sampler.finish().await?;
    let hwm_bytes = rss::read(pid).ok().map(|memory| memory.hwm_bytes);
    Ok(MemoryResult {
        setting,
        spec: spec.clone(),
        produce: produced,
        rss_before_bytes: before.rss_bytes,
        rss_peak_sampled_bytes: samples
            .iter()
            .map(|sample| sample.rss_bytes)
            .max()
            .unwrap_or(0),
        anon_before_bytes: before.anon_bytes,
        anon_peak_sampled_bytes: samples
            .iter()
            .map(|sample| sample.anon_bytes)
            .max()
            .unwrap_or(0),
        file_before_bytes: before.file_bytes,
        file_peak_sampled_bytes: samples
            .iter()
            .map(|sample| sample.file_bytes)
            .max()
            .unwrap_or(0),
        hwm_bytes,
        capped_at_ms: samples
            .iter()
            .find(|sample| sample.rss_bytes > spec.rss_cap_bytes)
            .map(|sample| sample.at_ms),
        response_bytes_declared: declared.load(Ordering::Relaxed),
        bytes_read: bytes_read.load(Ordering::Relaxed),
        responses_started: started.load(Ordering::Relaxed),
        samples,
    })
}

impl MemoryResult {
    /// Anonymous memory the broker gained per response started: (peak RssAnon − RssAnon before) ÷
    /// responses whose size prefix arrived, in bytes (`None` without responses or RssAnon).
    pub fn anon_growth_per_response_bytes(&self) -> Option<u64> {
        if self.responses_started == 0 || self.anon_peak_sampled_bytes == 0 {
            return None;
        }
        Some(
            self.anon_peak_sampled_bytes
                .saturating_sub(self.anon_before_bytes)
                / self.responses_started,
        )
    }
}

/// Resolves at the deadline or once the cap flag is up.
async fn stop_signal(capped: &AtomicBool, deadline: Instant) {
    while !capped.load(Ordering::Relaxed) && Instant::now() < deadline {
        tokio::time::sleep(STOP_POLL_INTERVAL).await;
    }
}

/// Runs each setting against a freshly spawned skiff (killed at the cap), or once against
/// `target`.
pub async fn sweep(
    spawn: Option<&SpawnSpec>,
    target: Option<&Target>,
    spec: &MemorySpec,
    settings: &[Setting],
) -> anyhow::Result<Vec<MemoryResult>> {
    let mut results = Vec::new();
    for setting in settings {
        let result = match (spawn, target) {
            (Some(spawn), _) => {
                let broker = SpawnedBroker::start(spawn, &setting.skiff_settings())?;
                let result = measure(broker.target(), spec, *setting, true).await;
                broker.stop()?;
                result?
            }
            (None, Some(target)) => measure(target, spec, *setting, false).await?,
            (None, None) => anyhow::bail!("neither a broker to spawn nor one to reach"),
        };
        eprintln!(
            "memory {} C={}: RSS before {:.0} MiB, peak {:.0} MiB (RssAnon {:.1} → {:.1} MiB, {} KiB per response; RssFile {:.1} → {:.1} MiB){}; {} responses of {:.0} MB declared, {:.0} MB read",
            setting.label(),
            spec.consumer_count,
            result.rss_before_bytes as f64 / 1048576.0,
            result.rss_peak_sampled_bytes as f64 / 1048576.0,
            result.anon_before_bytes as f64 / 1048576.0,
            result.anon_peak_sampled_bytes as f64 / 1048576.0,
            result
                .anon_growth_per_response_bytes()
                .map_or("?".to_owned(), |bytes| (bytes / 1024).to_string()),
            result.file_before_bytes as f64 / 1048576.0,
            result.file_peak_sampled_bytes as f64 / 1048576.0,
            result
                .capped_at_ms
                .map_or(String::new(), |at| format!(" (capped at {at} ms)")),
            result.responses_started,
            result.response_bytes_declared as f64 / 1e6,
            result.bytes_read as f64 / 1e6,
        );
        results.push(result);
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_per_response_is_anonymous_peak_less_before_over_responses() {
        let mut result: MemoryResult = serde_json::from_str(
            r#"{"setting":"Eager","spec":{"partition_count":1,"records_per_partition":1,
                "records_per_batch":1,"produce_in_flight":1,"consumer_count":1,
                "read_piece_bytes":1,"read_pause_ms":1,"seconds_max":1,"rss_cap_bytes":1},
                "produce":{"record_count":1,"batch_bytes":1,"seconds":1.0},
                "rss_before_bytes":1,"rss_peak_sampled_bytes":1,"hwm_bytes":null,
                "capped_at_ms":null,"response_bytes_declared":0,"bytes_read":0,
                "responses_started":0,"samples":[]}"#,
        )
        .expect("a record written before RssAnon was sampled still reads");
        assert_eq!(result.anon_growth_per_response_bytes(), None);
        result.anon_before_bytes = 10 << 20;
        result.anon_peak_sampled_bytes = 35 << 20;
        result.responses_started = 100;
        assert_eq!(result.anon_growth_per_response_bytes(), Some(256 * 1024));
    }
}
