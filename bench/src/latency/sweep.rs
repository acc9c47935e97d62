//! The whole latency run against one broker: per acks setting, the maximum produce rate (measured
//! unthrottled, or given), then one phase at each fraction of it, each on a fresh topic; and the
//! JSON record the report is rendered from.
//!
//! Must never: reuse a topic between phases (the consumer checks offsets from 0), or run a phase
//! without a deadline.

use std::time::Duration;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use super::histogram::LatencySummary;
use super::run::{run_phase, PhaseOutcome, PhaseSpec};
use super::schedule::Schedule;
use super::service_time::{self, PhaseServiceTimes, ServiceTimeProbe, ServiceTimeSource};

use crate::client::{Connection, ACKS_ALL, ACKS_LEADER};
use crate::idle_polls::park_fetchers;
use crate::kip283::machine::{unix_seconds_now, Machine};

/// The rates, in percent of the maximum.
pub const RATE_PERCENTS_DEFAULT: [f64; 3] = [10.0, 50.0, 90.0];

/// Records per Produce request at most: 16 × 1 kB, about a Kafka producer's default
/// `batch.size` (16 KiB).
pub const BATCH_RECORDS_DEFAULT: u64 = 16;

/// Produce requests in flight at most: a Kafka producer's default
/// `max.in.flight.requests.per.connection`.
pub const IN_FLIGHT_DEFAULT: usize = 5;

/// The consumer's Fetch `max_wait_ms` (a Kafka consumer's default `fetch.max.wait.ms`).
pub const FETCH_MAX_WAIT_MS_DEFAULT: i32 = 500;

/// How long the consumer may take to catch up after the last send before the phase fails.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// A Produce acknowledgement setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Acks {
    /// The leader's acknowledgement (acks=1).
    Leader,
    /// Every in-sync replica's (acks=all, −1).
    All,
}

impl Acks {
    /// Parses `1` or `all` (or `-1`).
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        match text.trim() {
            "1" => Ok(Self::Leader),
            "all" | "-1" => Ok(Self::All),
            other => bail!("acks {other}: expected 1 or all"),
        }
    }

    /// The wire value.
    pub fn wire(self) -> i16 {
        match self {
            Self::Leader => ACKS_LEADER,
            Self::All => ACKS_ALL,
        }
    }

    /// `1` or `all`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Leader => "1",
            Self::All => "all",
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct LatencySpec {
    /// Which broker this is, for the report (`skiff`, `kafka`, `tansu`...).
    pub broker_name: String,
    /// host:port.
    pub bootstrap: String,
    /// Acks settings, each a full sweep.
    pub acks: Vec<Acks>,
    /// Rates in percent of the maximum.
    pub rate_percents: Vec<f64>,
    /// The maximum in messages per second; measured when `None`.
    pub max_rate: Option<f64>,
    /// How long the unthrottled phase runs.
    pub max_seconds: f64,
    /// How long each rate runs.
    pub seconds: f64,
    /// Leading part of each rate phase left out of the histograms.
    pub warmup_seconds: f64,
    /// Records per Produce request at most.
    pub batch_records_max: u64,
    /// Produce requests in flight at most.
    pub in_flight_max: usize,
    /// The consumer's Fetch `max_wait_ms`.
    pub fetch_max_wait_ms: i32,
    /// Extra consumers, each on its own connection, long-polling an empty topic for the whole
    /// run: what a broker with many idle consumers pays on every append (a diagnostic, 0 by
    /// default).
    pub parked_fetchers: usize,
    /// Where to read the broker's own service time per API over each rate's measured part.
    pub service_time: Option<ServiceTimeSource>,
}

/// One rate's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateResult {
    /// Percent of the maximum.
    pub percent_of_max: f64,
    /// Scheduled messages per second.
    pub target_per_second: f64,
    /// Acknowledged messages per second over the phase.
    pub achieved_per_second: f64,
    /// Messages sent (all acknowledged and consumed, or the run failed).
    pub message_count: u64,
    /// Intended send → acknowledgement.
    pub produce: Option<LatencySummary>,
    /// Intended send → fetched.
    pub end_to_end: Option<LatencySummary>,
    /// Intended send → written to the socket (the client's own lateness).
    pub send_lateness: Option<LatencySummary>,
    /// The broker's own service time per API over the measured part (after the warm-up, to the
    /// consumer's last fetch), when the run read it.
    #[serde(default)]
    pub service_time: Option<PhaseServiceTimes>,
}

/// One acks setting's sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcksResult {
    /// `1` or `all`.
    pub acks: Acks,
    /// The maximum rate the fractions are of (messages per second).
    pub max_per_second: f64,
    /// Whether it was measured in this run (else given with --max-rate).
    pub max_measured: bool,
    /// One entry per rate.
    pub rates: Vec<RateResult>,
}

/// The JSON record of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyRecord {
    /// The command line.
    pub command: String,
    /// Which broker.
    pub broker_name: String,
    /// When it started.
    pub started_unix_seconds: u64,
    /// The machine and its load before.
    pub machine_before: Machine,
    /// Its load after.
    pub machine_after: Machine,
    /// Seconds per rate phase, and of warm-up left out of it.
    pub seconds: f64,
    /// Warm-up seconds per phase.
    pub warmup_seconds: f64,
    /// Records per request at most.
    pub batch_records_max: u64,
    /// Requests in flight at most.
    pub in_flight_max: usize,
    /// Idle long-polling consumers of an empty topic during the run.
    #[serde(default)]
    pub parked_fetchers: usize,
    /// One entry per acks setting.
    pub results: Vec<AcksResult>,
}

/// Absolute rates (messages per second) as the sweep's inputs: the largest is the given maximum
/// and every rate is a percentage of it, so `--rates-per-second` runs the same phases as
/// `--max-rate` with `--rates`.
pub fn rates_as_percents_of_largest(rates_per_second: &[f64]) -> anyhow::Result<(f64, Vec<f64>)> {
    if let Some(bad) = rates_per_second
        .iter()
        .find(|rate| !(rate.is_finite() && **rate > 0.0))
    {
        bail!("rate {bad} msg/s is not a positive number");
    }
    let largest = rates_per_second.iter().copied().fold(0.0, f64::max);
    if largest == 0.0 {
        bail!("no rate given");
    }
    let percents = rates_per_second
        .iter()
        .map(|rate| rate / largest * 100.0)
        .collect();
    Ok((largest, percents))
}

/// Nanoseconds in `seconds` (negative and NaN count as zero).
fn nanos(seconds: f64) -> u64 {
    (seconds.max(0.0) * 1e9) as u64
}

/// Creates `topic` (one partition), waits until it serves, and runs `spec` on it in a blocking
/// thread. With a `probe`, the broker's service times are read when the warm-up ends and when
/// the phase has ended.
async fn phase_on_fresh_topic(
    spec: PhaseSpec,
    probe: Option<&mut ServiceTimeProbe>,
) -> anyhow::Result<(PhaseOutcome, Option<PhaseServiceTimes>)> {
    let mut connection = Connection::connect(&spec.bootstrap).await?;
    connection.create_topic(&spec.topic, 1).await?;
    connection.await_partitions_ready(&spec.topic, 1).await?;
    let warmup = Duration::from_nanos(spec.warmup_nanos);
    let phase = tokio::task::spawn_blocking(move || run_phase(&spec));
    let Some(probe) = probe else {
        let outcome = phase.await.context("the phase thread panicked")??;
        return Ok((outcome, None));
    };
    tokio::time::sleep(warmup).await;
    // A reading blocks this thread for a scrape or a JMX call (milliseconds); the phase runs on
    // its own threads meanwhile.
    let before = probe.read().context("reading the service times")?;
    let outcome = phase.await.context("the phase thread panicked")??;
    let after = probe.read().context("reading the service times")?;
    Ok((outcome, Some(service_time::between(&before, &after)?)))
}

/// Runs the sweep.
pub async fn sweep(spec: &LatencySpec, command: String) -> anyhow::Result<LatencyRecord> {
    let mut record = LatencyRecord {
        command,
        broker_name: spec.broker_name.clone(),
        started_unix_seconds: unix_seconds_now(),
        machine_before: Machine::now(),
        machine_after: Machine::now(),
        seconds: spec.seconds,
        warmup_seconds: spec.warmup_seconds,
        batch_records_max: spec.batch_records_max,
        in_flight_max: spec.in_flight_max,
        parked_fetchers: spec.parked_fetchers,
        results: Vec::new(),
    };
    // Topic names unique to this run, so a broker that keeps its data can be measured again.
    let run_id = format!("{}-{}", record.started_unix_seconds, std::process::id());
    let mut parked = park_fetchers(
        &spec.bootstrap,
        &format!("latency-{run_id}-parked"),
        spec.parked_fetchers,
        spec.fetch_max_wait_ms,
    )
    .await?;
    let mut probe = spec
        .service_time
        .clone()
        .map(ServiceTimeProbe::open)
        .transpose()?;
    let outcome = sweep_acks(spec, &run_id, &mut record, probe.as_mut()).await;
    parked.abort_all();
    outcome?;
    record.machine_after = Machine::now();
    Ok(record)
}

/// The maximum and every rate, per acks setting, into `record`.
async fn sweep_acks(
    spec: &LatencySpec,
    run_id: &str,
    record: &mut LatencyRecord,
    mut probe: Option<&mut ServiceTimeProbe>,
) -> anyhow::Result<()> {
    let phase = |topic: String, schedule: Schedule, acks: Acks| PhaseSpec {
        bootstrap: spec.bootstrap.clone(),
        topic,
        schedule,
        send_until_nanos: u64::MAX,
        acks: acks.wire(),
        batch_records_max: spec.batch_records_max,
        in_flight_max: spec.in_flight_max,
        warmup_nanos: nanos(spec.warmup_seconds),
        record_latency: true,
        fetch_max_wait_ms: spec.fetch_max_wait_ms,
        drain_timeout: DRAIN_TIMEOUT,
    };
    for &acks in &spec.acks {
        let (max_per_second, max_measured) = match spec.max_rate {
            Some(rate) => (rate, false),
            None => {
                let mut unthrottled = phase(
                    format!("latency-{run_id}-acks{}-max", acks.label()),
                    Schedule {
                        rate_per_second: None,
                        message_count: u64::MAX,
                    },
                    acks,
                );
                unthrottled.send_until_nanos = nanos(spec.max_seconds);
                unthrottled.record_latency = false;
                let (outcome, _) = phase_on_fresh_topic(unthrottled, None).await?;
                eprintln!(
                    "acks={}: maximum {:.0} msg/s end to end ({} messages; acknowledged at {:.0} msg/s)",
                    acks.label(),
                    outcome.end_to_end_per_second(),
                    outcome.acked_count,
                    outcome.acked_per_second()
                );
                (outcome.end_to_end_per_second(), true)
            }
        };
        if !(max_per_second.is_finite() && max_per_second > 0.0) {
            bail!("the maximum rate {max_per_second} msg/s is not a positive number");
        }
        let mut rates = Vec::new();
        for &percent in &spec.rate_percents {
            let rate = max_per_second * percent / 100.0;
            let message_count = ((rate * spec.seconds).ceil() as u64).max(1);
            let phase = phase(
                format!("latency-{run_id}-acks{}-{percent}", acks.label()),
                Schedule {
                    rate_per_second: Some(rate),
                    message_count,
                },
                acks,
            );
            let (outcome, service_time) = phase_on_fresh_topic(phase, probe.as_deref_mut()).await?;
            let result = RateResult {
                percent_of_max: percent,
                target_per_second: rate,
                achieved_per_second: outcome.acked_per_second(),
                message_count: outcome.acked_count,
                produce: outcome.produce.summary(),
                end_to_end: outcome.end_to_end.summary(),
                send_lateness: outcome.send_lateness.summary(),
                service_time,
            };
            eprintln!("{}", super::report::progress_line(acks, &result));
            rates.push(result);
        }
        record.results.push(AcksResult {
            acks,
            max_per_second,
            max_measured,
            rates,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_rates_become_percents_of_the_largest() {
        let (max, percents) = rates_as_percents_of_largest(&[1_000.0, 5_000.0, 10_000.0]).unwrap();
        assert_eq!(max, 10_000.0);
        assert_eq!(percents, vec![10.0, 50.0, 100.0]);
        // The sweep's rate arithmetic gives the given rates back.
        let back: Vec<f64> = percents.iter().map(|p| max * p / 100.0).collect();
        assert_eq!(back, vec![1_000.0, 5_000.0, 10_000.0]);
        assert!(rates_as_percents_of_largest(&[]).is_err());
        assert!(rates_as_percents_of_largest(&[100.0, 0.0]).is_err());
        assert!(rates_as_percents_of_largest(&[f64::NAN]).is_err());
    }

    #[test]
    fn acks_parse_and_label() {
        assert_eq!(Acks::parse("1").unwrap(), Acks::Leader);
        assert_eq!(Acks::parse("all").unwrap().wire(), -1);
        assert_eq!(Acks::parse("-1").unwrap().label(), "all");
        assert!(Acks::parse("0").is_err());
    }
}
