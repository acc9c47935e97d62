//! Idle long polls: consumers parked on an empty topic, each on its own connection, and the
//! `idle-long-polls` measurement built on them (issue 18 item 1): one-connection produce
//! throughput with N idle long polls on *another* topic, for several N in one run against one
//! broker, as a ratio to N = 0. A broker whose appends wake every parked fetch pays per idle
//! consumer on every produce; one that wakes per partition pays nothing.
//!
//! Must never: leave parked consumers running after a measurement (the set is aborted), or
//! produce to the topic the idle consumers wait on.

use std::time::Duration;

use anyhow::bail;
use kafka_protocol::messages::ApiKey;
use serde::{Deserialize, Serialize};

use crate::client::{fetch_request, Connection};
use crate::kip283::machine::Machine;
use crate::kip283::produce::{produce, ProduceSpec, PRODUCE_REQUEST_BYTES_MAX};
use crate::kip283::stats::Spread;
use crate::latency::run::FETCH_VERSION;
use crate::responses::fetch_v4;

/// How long the parked consumers get to send their first Fetch before the produce starts.
pub const PARK_SETTLE: Duration = Duration::from_secs(1);

/// Connections the spawned broker allows beyond the idle consumers (producer, topic admin).
pub const CONNECTIONS_SPARE: usize = 16;

/// Starts `count` consumers long-polling partition 0 of the empty `topic` (created here unless
/// `count` is 0), each on its own connection with Fetch `max_wait_ms = wait_ms`; they poll until
/// the returned set is aborted.
pub async fn park_fetchers(
    bootstrap: &str,
    topic: &str,
    count: usize,
    wait_ms: i32,
) -> anyhow::Result<tokio::task::JoinSet<anyhow::Result<()>>> {
    let mut parked = tokio::task::JoinSet::new();
    if count == 0 {
        return Ok(parked);
    }
    Connection::connect(bootstrap)
        .await?
        .create_topic(topic, 1)
        .await?;
    for _ in 0..count {
        let mut connection = Connection::connect(bootstrap).await?;
        let topic = topic.to_owned();
        parked.spawn(async move {
            let request = fetch_request(&topic, 0, 0, 1 << 20, 1 << 20, wait_ms);
            loop {
                let correlation_id = connection
                    .send(ApiKey::Fetch, FETCH_VERSION, &request)
                    .await?;
                let frame = connection.receive_frame().await?;
                for partition in fetch_v4(&frame, correlation_id)? {
                    if partition.error_code != 0 {
                        bail!("parked fetch failed with error {}", partition.error_code);
                    }
                }
            }
        });
    }
    Ok(parked)
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct IdlePollsSpec {
    /// host:port.
    pub bootstrap: String,
    /// Idle long-poll counts, each measured `repetitions` times (interleaved).
    pub counts: Vec<usize>,
    /// Repetitions of the whole list of counts.
    pub repetitions: usize,
    /// Partitions of each produced topic.
    pub partition_count: i32,
    /// Records (1 kB) per partition of each produced topic.
    pub records_per_partition: u64,
    /// Records per batch.
    pub records_per_batch: u64,
    /// Produce requests in flight on the one connection.
    pub in_flight: usize,
    /// The idle consumers' Fetch `max_wait_ms`.
    pub wait_ms: i32,
}

/// One count's samples.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CountResult {
    /// Idle long polls.
    pub idle_long_polls: usize,
    /// Produce bytes per second, one per repetition.
    pub bytes_per_second: Vec<f64>,
}

/// The run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdlePollsRecord {
    /// The command line.
    pub command: String,
    /// Load before.
    pub machine_before: Machine,
    /// Load after.
    pub machine_after: Machine,
    /// Per count.
    pub results: Vec<CountResult>,
}

/// Runs every count `spec.repetitions` times against one broker.
pub async fn measure(spec: &IdlePollsSpec, command: String) -> anyhow::Result<IdlePollsRecord> {
    let machine_before = Machine::now();
    let run_id = format!(
        "{}-{}",
        crate::kip283::machine::unix_seconds_now(),
        std::process::id()
    );
    let mut results: Vec<CountResult> = spec
        .counts
        .iter()
        .map(|&idle_long_polls| CountResult {
            idle_long_polls,
            bytes_per_second: Vec::new(),
        })
        .collect();
    for repetition in 0..spec.repetitions {
        for result in &mut results {
            let tag = format!("{run_id}-{repetition}-{}", result.idle_long_polls);
            let mut parked = park_fetchers(
                &spec.bootstrap,
                &format!("idle-polls-{tag}-parked"),
                result.idle_long_polls,
                spec.wait_ms,
            )
            .await?;
            tokio::time::sleep(PARK_SETTLE).await;
            let produced = produce(
                &spec.bootstrap,
                &ProduceSpec {
                    topic: format!("idle-polls-{tag}-produced"),
                    partition_count: spec.partition_count,
                    records_per_partition: spec.records_per_partition,
                    records_per_batch: spec.records_per_batch,
                    value_bytes: crate::kip283::RECORD_VALUE_BYTES,
                    in_flight: spec.in_flight,
                    request_bytes_max: PRODUCE_REQUEST_BYTES_MAX,
                    acks: crate::client::ACKS_LEADER,
                },
            )
            .await;
            // A parked consumer that failed (refused connection, error code) spoils the figure.
            if let Some(Ok(Err(error))) = parked.try_join_next() {
                bail!("an idle long poll failed: {error}");
            }
            parked.abort_all();
            while parked.join_next().await.is_some() {}
            let produced = produced?;
            eprintln!(
                "idle-long-polls {} #{repetition}: produce {:.0} MB/s",
                result.idle_long_polls,
                produced.bytes_per_second() / 1e6
            );
            result.bytes_per_second.push(produced.bytes_per_second());
        }
    }
    Ok(IdlePollsRecord {
        command,
        machine_before,
        machine_after: Machine::now(),
        results,
    })
}

/// A markdown table: median (min–max) MB/s per count, and the median as a ratio of the first
/// count's (normally 0).
pub fn markdown(record: &IdlePollsRecord) -> String {
    let mut text = format!(
        "`{}`\n\nload average (1 min) {:.2} before, {:.2} after; {} CPUs\n\n\
         | idle long polls | produce MB/s, median (min–max) | ratio to the first row |\n|---|---|---|\n",
        record.command,
        record.machine_before.load_average_1m,
        record.machine_after.load_average_1m,
        record.machine_before.cpu_count,
    );
    let first = record
        .results
        .first()
        .and_then(|result| Spread::of(&result.bytes_per_second))
        .map(|spread| spread.median);
    for result in &record.results {
        let Some(spread) = Spread::of(&result.bytes_per_second) else {
            continue;
        };
        let ratio = first.map_or(f64::NAN, |first| spread.median / first);
        text.push_str(&format!(
            "| {} | {:.0} ({:.0}–{:.0}) | {:.0} % |\n",
            result.idle_long_polls,
            spread.median / 1e6,
            spread.min / 1e6,
            spread.max / 1e6,
            ratio * 100.0
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_gives_each_median_as_a_ratio_of_the_first_row() {
        let machine = Machine::now();
        let record = IdlePollsRecord {
            command: "skiff-bench idle-long-polls".into(),
            machine_before: machine.clone(),
            machine_after: machine,
            results: vec![
                CountResult {
                    idle_long_polls: 0,
                    bytes_per_second: vec![800e6, 700e6, 900e6],
                },
                CountResult {
                    idle_long_polls: 1000,
                    bytes_per_second: vec![400e6, 200e6, 300e6],
                },
            ],
        };
        let table = markdown(&record);
        assert!(table.contains("| 0 | 800 (700–900) | 100 % |"), "{table}");
        assert!(table.contains("| 1000 | 300 (200–400) | 38 % |"), "{table}");
    }
}
