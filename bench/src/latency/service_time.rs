//! The broker's own service time per API over a latency phase, read from the broker itself: from
//! Skiff, the `skiff_request_service_time_us` histogram of its metrics listener, read before and
//! after the measured part of the phase (percentiles of the delta, interpolated linearly inside a
//! bucket); from Apache Kafka, its `kafka.network:type=RequestMetrics` histograms, read over JMX
//! by a small Java program (`bench/scripts/jmx/KafkaRequestTimes.java`, compiled once with
//! `javac` and kept running, one JSON line per read).
//!
//! Kafka's figures are what its Yammer histograms give: cumulative `Count` and `Mean` (so the
//! phase's own mean follows exactly from two reads) and percentiles of an exponentially decaying
//! reservoir (1028 samples, recent minutes weighted up), read at the phase's end. Kafka rounds
//! every time to whole milliseconds before recording it.
//!
//! Must never: read anything but 127.0.0.1, or be read while a phase's measured part runs except
//! at its two ends (a read costs the broker a scrape or a JMX call, nothing more).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

/// The APIs whose service time the latency bench reports.
pub const APIS: [&str; 2] = ["Produce", "Fetch"];

/// The Prometheus family of Skiff's service-time histogram (microseconds).
const SKIFF_FAMILY: &str = "skiff_request_service_time_us";

/// How long a metrics scrape may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// Quantiles reported from a bucket delta.
const QUANTILES: [f64; 3] = [0.50, 0.90, 0.99];

/// Where the service times come from.
#[derive(Debug, Clone)]
pub enum ServiceTimeSource {
    /// Skiff's metrics listener (`skiff.metrics.listener`), host:port.
    SkiffMetrics(String),
    /// Kafka's JMX port (`JMX_PORT`), host:port, read by the Java program at `program`.
    KafkaJmx {
        /// host:port of the JMX connector.
        address: String,
        /// The `.java` source of the reader.
        program: PathBuf,
    },
}

/// One API's service time over a phase, from Skiff's histogram delta.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkiffApiTime {
    /// Kafka's API name.
    pub api: String,
    /// Requests finished in the phase.
    pub count: u64,
    /// Exact mean over the phase (sum and count deltas), microseconds.
    pub mean_us: f64,
    /// p50, p90, p99 in microseconds, linearly interpolated inside their bucket; `None` when the
    /// quantile is past the last finite bucket.
    pub p50_us: Option<f64>,
    /// p90, as `p50_us`.
    pub p90_us: Option<f64>,
    /// p99, as `p50_us`.
    pub p99_us: Option<f64>,
    /// Share of the phase's requests at or under 1 ms (a bucket bound, so exact).
    pub share_within_1ms: f64,
}

/// One Kafka Yammer histogram over a phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KafkaHistogram {
    /// Requests recorded in the phase (`Count` delta).
    pub count: u64,
    /// The phase's own mean in ms, from the `Count` and `Mean` deltas (exact, of the rounded
    /// values Kafka records).
    pub phase_mean_ms: f64,
    /// The reservoir's percentiles at the phase's end, ms (not the phase's alone).
    pub p50_ms: f64,
    /// 99th percentile of the reservoir.
    pub p99_ms: f64,
    /// 99.9th percentile of the reservoir.
    pub p999_ms: f64,
    /// The largest value since the broker started.
    pub max_ms: f64,
}

/// One API's request metrics over a phase, by Kafka's histogram name (`TotalTimeMs`...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KafkaApiTimes {
    /// Kafka's request name (`Produce`, `Fetch`).
    pub api: String,
    /// Histogram name → its phase figures.
    pub histograms: BTreeMap<String, KafkaHistogram>,
}

/// The service times of one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "source")]
pub enum PhaseServiceTimes {
    /// From Skiff's histogram.
    Skiff {
        /// One entry per API of [`APIS`] with requests in the phase.
        apis: Vec<SkiffApiTime>,
    },
    /// From Kafka's JMX request metrics.
    Kafka {
        /// One entry per API of [`APIS`].
        apis: Vec<KafkaApiTimes>,
    },
}

/// A reading taken at one end of a phase.
#[derive(Debug, Clone)]
pub enum Reading {
    /// Skiff: API → cumulative bucket counts by bound (`None` is +Inf), sum and count.
    Skiff(BTreeMap<String, SkiffSeries>),
    /// Kafka: API → histogram name → its JMX attributes.
    Kafka(BTreeMap<String, BTreeMap<String, JmxHistogram>>),
}

/// One API's series of Skiff's histogram.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SkiffSeries {
    /// Cumulative counts at each finite bound (µs), ascending.
    pub buckets: Vec<(u64, u64)>,
    /// The +Inf bucket (every observation).
    pub total: u64,
    /// Sum of observations, µs.
    pub sum: u64,
}

/// The attributes of one Yammer histogram MBean.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct JmxHistogram {
    /// `Count`.
    #[serde(rename = "Count")]
    pub count: u64,
    /// `Mean` (over every value since start).
    #[serde(rename = "Mean")]
    pub mean: f64,
    /// `50thPercentile`.
    #[serde(rename = "50thPercentile")]
    pub p50: f64,
    /// `99thPercentile`.
    #[serde(rename = "99thPercentile")]
    pub p99: f64,
    /// `999thPercentile`.
    #[serde(rename = "999thPercentile")]
    pub p999: f64,
    /// `Max`.
    #[serde(rename = "Max")]
    pub max: f64,
}

/// Reads one broker's service times; keeps the JMX reader running between reads.
pub struct ServiceTimeProbe {
    source: ServiceTimeSource,
    jmx: Option<JmxReader>,
}

impl ServiceTimeProbe {
    /// Checks `source` is on 127.0.0.1 and, for Kafka, compiles and starts the JMX reader.
    pub fn open(source: ServiceTimeSource) -> anyhow::Result<Self> {
        let jmx = match &source {
            ServiceTimeSource::SkiffMetrics(address) => {
                crate::kip283::broker::require_loopback(address)?;
                None
            }
            ServiceTimeSource::KafkaJmx { address, program } => {
                crate::kip283::broker::require_loopback(address)?;
                Some(JmxReader::start(program, address)?)
            }
        };
        Ok(Self { source, jmx })
    }

    /// Takes a reading now (blocking: a scrape or a JMX call, milliseconds).
    pub fn read(&mut self) -> anyhow::Result<Reading> {
        match (&self.source, self.jmx.as_mut()) {
            (ServiceTimeSource::SkiffMetrics(address), _) => {
                Ok(Reading::Skiff(parse_skiff(&scrape(address)?)))
            }
            (ServiceTimeSource::KafkaJmx { .. }, Some(reader)) => {
                Ok(Reading::Kafka(reader.read()?))
            }
            (ServiceTimeSource::KafkaJmx { .. }, None) => bail!("the JMX reader is not running"),
        }
    }
}

/// GET /metrics from a metrics listener, the body.
fn scrape(address: &str) -> anyhow::Result<String> {
    let mut stream = TcpStream::connect(address).with_context(|| format!("connect {address}"))?;
    stream.set_read_timeout(Some(SCRAPE_TIMEOUT))?;
    stream.set_write_timeout(Some(SCRAPE_TIMEOUT))?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .context("no end of the HTTP head")?;
    if !head.starts_with("HTTP/1.1 200") {
        bail!("GET /metrics: {}", head.lines().next().unwrap_or(""));
    }
    Ok(body.to_owned())
}

/// The value of `label` in a sample's label set (`api="Produce",le="100"`).
fn label<'a>(labels: &'a str, label: &str) -> Option<&'a str> {
    labels.split(',').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key == label).then(|| value.trim_matches('"'))
    })
}

/// Skiff's service-time series by API from a Prometheus text exposition.
pub fn parse_skiff(text: &str) -> BTreeMap<String, SkiffSeries> {
    let mut series: BTreeMap<String, SkiffSeries> = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(SKIFF_FAMILY) else {
            continue;
        };
        let Some((kind, rest)) = rest.split_once('{') else {
            continue;
        };
        let Some((labels, value)) = rest.split_once("} ") else {
            continue;
        };
        let (Some(api), Ok(value)) = (label(labels, "api"), value.trim().parse::<u64>()) else {
            continue;
        };
        let entry = series.entry(api.to_owned()).or_default();
        match (kind, label(labels, "le")) {
            ("_bucket", Some("+Inf")) => entry.total = value,
            ("_bucket", Some(bound)) => {
                if let Ok(bound) = bound.parse() {
                    entry.buckets.push((bound, value));
                }
            }
            ("_sum", _) => entry.sum = value,
            _ => {}
        }
    }
    for entry in series.values_mut() {
        entry.buckets.sort_unstable();
    }
    series
}

/// `q` of the observations between two readings of one series, interpolated linearly inside its
/// bucket (from the bound below, or 0, to its own bound); `None` when it lies past the last
/// finite bound, or there are no observations.
pub fn delta_quantile(before: &SkiffSeries, after: &SkiffSeries, q: f64) -> Option<f64> {
    let count_before = |bound: u64| {
        before
            .buckets
            .iter()
            .find(|(b, _)| *b == bound)
            .map_or(0, |(_, count)| *count)
    };
    let total = after.total.saturating_sub(before.total);
    if total == 0 {
        return None;
    }
    let rank = q * total as f64;
    let (mut lower, mut below) = (0u64, 0u64);
    for &(bound, cumulative) in &after.buckets {
        let cumulative = cumulative.saturating_sub(count_before(bound));
        if cumulative as f64 >= rank && cumulative > below {
            let inside = (rank - below as f64) / (cumulative - below) as f64;
            return Some(lower as f64 + inside.clamp(0.0, 1.0) * (bound - lower) as f64);
        }
        (lower, below) = (bound, cumulative);
    }
    None
}

/// Skiff's figures for one API between two readings.
pub fn skiff_api_time(api: &str, before: &SkiffSeries, after: &SkiffSeries) -> SkiffApiTime {
    let count = after.total.saturating_sub(before.total);
    let sum = after.sum.saturating_sub(before.sum);
    let [p50_us, p90_us, p99_us] = QUANTILES.map(|q| delta_quantile(before, after, q));
    let at_1ms = |series: &SkiffSeries| {
        series
            .buckets
            .iter()
            .find(|(bound, _)| *bound == 1_000)
            .map_or(0, |(_, count)| *count)
    };
    let within = at_1ms(after).saturating_sub(at_1ms(before));
    SkiffApiTime {
        api: api.to_owned(),
        count,
        mean_us: if count == 0 {
            0.0
        } else {
            sum as f64 / count as f64
        },
        p50_us,
        p90_us,
        p99_us,
        share_within_1ms: if count == 0 {
            0.0
        } else {
            within as f64 / count as f64
        },
    }
}

/// One Kafka histogram's phase figures from two readings.
pub fn kafka_histogram(before: &JmxHistogram, after: &JmxHistogram) -> KafkaHistogram {
    let count = after.count.saturating_sub(before.count);
    let sum = after.mean * after.count as f64 - before.mean * before.count as f64;
    KafkaHistogram {
        count,
        phase_mean_ms: if count == 0 { 0.0 } else { sum / count as f64 },
        p50_ms: after.p50,
        p99_ms: after.p99,
        p999_ms: after.p999,
        max_ms: after.max,
    }
}

/// The phase's service times from the readings at its two ends.
pub fn between(before: &Reading, after: &Reading) -> anyhow::Result<PhaseServiceTimes> {
    match (before, after) {
        (Reading::Skiff(before), Reading::Skiff(after)) => {
            let empty = SkiffSeries::default();
            let apis = APIS
                .iter()
                .filter_map(|api| {
                    let after = after.get(*api)?;
                    Some(skiff_api_time(
                        api,
                        before.get(*api).unwrap_or(&empty),
                        after,
                    ))
                })
                .collect();
            Ok(PhaseServiceTimes::Skiff { apis })
        }
        (Reading::Kafka(before), Reading::Kafka(after)) => {
            let empty = BTreeMap::new();
            let apis = APIS
                .iter()
                .filter_map(|api| {
                    let after = after.get(*api)?;
                    let before = before.get(*api).unwrap_or(&empty);
                    let histograms = after
                        .iter()
                        .map(|(name, after)| {
                            let before = before.get(name).cloned().unwrap_or_default();
                            (name.clone(), kafka_histogram(&before, after))
                        })
                        .collect();
                    Some(KafkaApiTimes {
                        api: (*api).to_owned(),
                        histograms,
                    })
                })
                .collect();
            Ok(PhaseServiceTimes::Kafka { apis })
        }
        _ => bail!("readings of two different brokers"),
    }
}

/// The Java reader: compiled once into a temporary directory, then one process for the run that
/// answers each line on its stdin with one JSON line of the request metrics.
struct JmxReader {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// The compiled class, removed when the reader is dropped.
    _classes: tempfile::TempDir,
}

impl JmxReader {
    fn start(program: &Path, address: &str) -> anyhow::Result<Self> {
        let classes = tempfile::tempdir()?;
        let compiled = Command::new("javac")
            .arg("-d")
            .arg(classes.path())
            .arg(program)
            .output()
            .context("running javac")?;
        if !compiled.status.success() {
            bail!(
                "javac {}: {}",
                program.display(),
                String::from_utf8_lossy(&compiled.stderr)
            );
        }
        let class = program
            .file_stem()
            .and_then(|stem| stem.to_str())
            .context("the JMX reader's file name")?;
        let mut child = Command::new("java")
            .arg("-Xmx64m")
            .arg("-cp")
            .arg(classes.path())
            .arg(class)
            .arg(address)
            .args(APIS)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting the JMX reader")?;
        let stdin = child.stdin.take().context("the reader's stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("the reader's stdout")?);
        Ok(Self {
            child,
            stdin,
            stdout,
            _classes: classes,
        })
    }

    fn read(&mut self) -> anyhow::Result<BTreeMap<String, BTreeMap<String, JmxHistogram>>> {
        writeln!(self.stdin, "read")?;
        self.stdin.flush()?;
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            bail!("the JMX reader ended (is Kafka's JMX port open?)");
        }
        serde_json::from_str(&line).with_context(|| format!("the JMX reader said {line:?}"))
    }
}

impl Drop for JmxReader {
    fn drop(&mut self) {
        // The reader ends at the end of its stdin; killed in case it is stuck on the connector.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
# TYPE skiff_request_service_time_us histogram
skiff_request_service_time_us_bucket{api=\"Produce\",le=\"100\"} 10
skiff_request_service_time_us_bucket{api=\"Produce\",le=\"500\"} 60
skiff_request_service_time_us_bucket{api=\"Produce\",le=\"1000\"} 100
skiff_request_service_time_us_bucket{api=\"Produce\",le=\"+Inf\"} 100
skiff_request_service_time_us_sum{api=\"Produce\"} 30000
skiff_request_service_time_us_count{api=\"Produce\"} 100
skiff_request_latency_ms_bucket{api=\"Produce\",le=\"1\"} 100
";

    #[test]
    fn the_exposition_parses_into_cumulative_buckets_by_api() {
        let series = parse_skiff(TEXT);
        let produce = &series["Produce"];
        assert_eq!(produce.buckets, vec![(100, 10), (500, 60), (1000, 100)]);
        assert_eq!((produce.total, produce.sum), (100, 30_000));
        assert_eq!(series.len(), 1);
    }

    #[test]
    fn quantiles_interpolate_inside_the_bucket_of_the_delta() {
        let after = parse_skiff(TEXT)["Produce"].clone();
        let before = SkiffSeries::default();
        // Rank 50 of 100: bucket (100, 500] holds ranks 11..=60, 40 of its 50 in.
        assert_eq!(
            delta_quantile(&before, &after, 0.5),
            Some(100.0 + 0.8 * 400.0)
        );
        // Rank 5: first bucket, from 0.
        assert_eq!(delta_quantile(&before, &after, 0.05), Some(50.0));
        // Rank 99 of (500, 1000]: 39 of 40.
        assert_eq!(
            delta_quantile(&before, &after, 0.99),
            Some(500.0 + 39.0 / 40.0 * 500.0)
        );
        // Only what came after `before` counts: 40 more, all in (500, 1000].
        let mut later = after.clone();
        later.buckets = vec![(100, 10), (500, 60), (1000, 140)];
        later.total = 140;
        later.sum += 40 * 800;
        assert_eq!(delta_quantile(&after, &later, 0.5), Some(750.0));
        let time = skiff_api_time("Produce", &after, &later);
        assert_eq!(
            (time.count, time.mean_us, time.share_within_1ms),
            (40, 800.0, 1.0)
        );
        // Past the last finite bound there is no figure; nothing at all neither.
        later.total = 200;
        assert_eq!(delta_quantile(&after, &later, 0.99), None);
        assert_eq!(delta_quantile(&after, &after, 0.5), None);
    }

    #[test]
    fn kafka_phase_mean_comes_from_the_count_and_mean_deltas() {
        let before = JmxHistogram {
            count: 100,
            mean: 2.0,
            ..JmxHistogram::default()
        };
        let after = JmxHistogram {
            count: 300,
            mean: 1.0,
            p99: 3.0,
            ..JmxHistogram::default()
        };
        // 200 in the phase summing 300 - 200 = 100 ms.
        let phase = kafka_histogram(&before, &after);
        assert_eq!(phase.count, 200);
        assert!((phase.phase_mean_ms - 0.5).abs() < 1e-9);
        assert_eq!(phase.p99_ms, 3.0);
        let parsed: BTreeMap<String, BTreeMap<String, JmxHistogram>> = serde_json::from_str(
            r#"{"Produce":{"TotalTimeMs":{"Count":5,"Mean":0.4,"50thPercentile":0.0,"99thPercentile":1.0,"999thPercentile":2.0,"Max":2.0}}}"#,
        )
        .unwrap();
        assert_eq!(parsed["Produce"]["TotalTimeMs"].count, 5);
        assert_eq!(parsed["Produce"]["TotalTimeMs"].p99, 1.0);
    }
}
