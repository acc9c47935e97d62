//! `skiff-bench`: KIP-283's memory and throughput tests and the latency percentiles (issue #20)
//! against any Kafka-compatible broker on this
//! machine (or a `skiff` it spawns per setting), the raw loopback baseline, the report, and a
//! few-second smoke for CI. Each measuring subcommand writes `<data>/<kind>.json`; `report` turns
//! them into `bench/reports/kip283.md` and its SVG plots.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};
use skiff_bench::client::Security;
use skiff_bench::idle_connections::{self, IdleConnectionsSpec};
use skiff_bench::idle_polls::{self, IdlePollsSpec};
use skiff_bench::kip283::baseline;
use skiff_bench::kip283::broker::{
    default_skiff_binary, require_loopback, SpawnSpec, SpawnedBroker, Target,
};
use skiff_bench::kip283::machine::{unix_seconds_now, Machine};
use skiff_bench::kip283::memory::{self, MemorySpec};
use skiff_bench::kip283::produce::PRODUCE_REQUEST_BYTES_MAX;
use skiff_bench::kip283::report::{self, Inputs, RunRecord};
use skiff_bench::kip283::stats::Spread;
use skiff_bench::kip283::throughput::{
    self, SecurityProtocol, Setting, ThroughputSpec, CHUNK_BYTES_SWEEP,
};
use skiff_bench::latency;
use skiff_bench::latency::service_time::{PhaseServiceTimes, ServiceTimeSource};
use skiff_bench::latency::sweep::{Acks, LatencySpec};
use skiff_bench::tls::RunCertificate;
use skiff_protocol::down_convert::DOWN_CONVERT_CHUNK_BYTES;

/// Bytes of one baseline block: a 12-partition response of 1 MiB each.
const BASELINE_BLOCK_BYTES: usize = 12 << 20;

#[derive(Parser)]
#[command(about = "KIP-283's memory and throughput tests against a Kafka-compatible broker")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// C slow legacy consumers of 250 MB fetches; samples the broker's RSS.
    Memory(MemoryArgs),
    /// One consumer reading 12 partitions (or --partitions) with modern and legacy fetches;
    /// chunk-size sweep.
    Throughput(ThroughputArgs),
    /// The same bytes through a plain loopback TCP socket pair.
    Baseline(BaselineArgs),
    /// Renders the markdown report and SVG plots from the JSON the other subcommands wrote.
    Report(ReportArgs),
    /// Produce-ack and end-to-end latency percentiles at 10, 50 and 90 % of the maximum rate.
    Latency(LatencyArgs),
    /// One-connection produce throughput while N idle consumers long-poll another topic, for
    /// several N in one run, as a ratio to the first (issue 18: what idle long polls cost).
    IdleLongPolls(IdleLongPollsArgs),
    /// A fresh client's ApiVersions round trip with N idle connections open, below and at
    /// `max.connections`, and the broker's RSS per idle connection (issue 14 item 5).
    IdleConnections(IdleConnectionsArgs),
    /// A few seconds of everything against a spawned skiff; fails unless data was produced,
    /// consumed at every version and verified.
    Smoke(SmokeArgs),
    /// Broker CPU per GB and per million records on each path (produce, modern and legacy
    /// fetch), beside floors over the same bytes, in interleaved rounds (issue 41).
    Cpu(CpuArgs),
}

#[derive(Args)]
struct CpuArgs {
    /// An already running broker (127.0.0.1 only; Skiff or Apache Kafka) with its --pid; with
    /// --cluster, the PLAINTEXT listeners of a cluster's brokers, comma-separated. Without it, a
    /// skiff is spawned.
    #[arg(long, requires = "pid")]
    bootstrap: Option<String>,
    /// The broker process whose CPU is read from /proc (with --bootstrap); with --cluster, each
    /// broker's, in the order of --bootstrap.
    #[arg(long, value_delimiter = ',')]
    pid: Vec<u32>,
    /// The brokers of --bootstrap are one cluster: measure the replicated paths instead of the
    /// single-broker ones (produce of 1 kB records at RF 1 with acks=1 and at RF 2..n with
    /// acks=all, the first broker leading every partition, each broker's CPU apart).
    #[arg(long, requires = "bootstrap")]
    cluster: bool,
    /// The SSL listener (host:port) of the --bootstrap broker: also fetch over TLS, trusting
    /// the certificate of --ssl-keystore.
    #[arg(long, requires_all = ["bootstrap", "ssl_keystore"])]
    ssl_bootstrap: Option<String>,
    /// The broker's PEM keystore (its certificate, then its PKCS#8 key): the certificate the
    /// client trusts, and the TLS floor's.
    #[arg(long, requires = "ssl_bootstrap")]
    ssl_keystore: Option<PathBuf>,
    #[command(flatten)]
    skiff: SkiffArgs,
    /// Rounds; each produces a fresh topic, fetches it at every version, and runs the floors.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Partitions of each round's topic.
    #[arg(long, default_value_t = 12)]
    partitions: i32,
    /// 1 kB records per partition per round (16384: about 200 MB per round).
    #[arg(long, default_value_t = 16384)]
    records_per_partition: u64,
    /// Gigabytes each fetch phase and fetch floor moves at least (the topic is read again until
    /// then): /proc counts CPU in 10 ms ticks.
    #[arg(long, default_value_t = 2.0)]
    fetch_gb_min: f64,
    /// Fetch versions (4+: modern; 2 and 0: down-converted). Kafka 4 answers only 4+.
    #[arg(long, value_delimiter = ',', default_value = "4,2,0")]
    versions: Vec<i16>,
    /// Also fetch over TLS (the spawned skiff gets an SSL listener) beside a TLS floor.
    #[arg(long)]
    tls: bool,
    /// Connections of the second 1 kB produce path (each produces to every N-th partition);
    /// 1 leaves that path out.
    #[arg(long, default_value_t = 8)]
    connections: usize,
    /// CI's short form: 4096 records per partition, 0.5 GB per fetch phase, 2 rounds.
    #[arg(long)]
    smoke: bool,
    /// Also write the table here (markdown) and the samples beside it (`.json`).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Args)]
struct LatencyArgs {
    /// An already running broker (127.0.0.1 only): Skiff, Apache Kafka, Tansu... Without it, a
    /// skiff is spawned for the run.
    #[arg(long)]
    bootstrap: Option<String>,
    #[command(flatten)]
    skiff: SkiffArgs,
    /// The broker's name in the report and the file names.
    #[arg(long, default_value = "skiff")]
    name: String,
    /// Acks settings to sweep: `1`, `all`, or `1,all`.
    #[arg(long, value_delimiter = ',', default_value = "1,all")]
    acks: Vec<String>,
    /// Rates in percent of the maximum.
    #[arg(long, value_delimiter = ',', default_values_t = latency::sweep::RATE_PERCENTS_DEFAULT)]
    rates: Vec<f64>,
    /// The maximum rate in messages per second; measured first (unthrottled) when absent.
    #[arg(long)]
    max_rate: Option<f64>,
    /// Absolute rates in messages per second instead of percentages of a maximum (no unthrottled
    /// phase; the report shows them as percentages of the largest).
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["rates", "max_rate"])]
    rates_per_second: Vec<f64>,
    /// Seconds of the unthrottled phase that measures the maximum.
    #[arg(long, default_value_t = 5.0)]
    max_seconds: f64,
    /// Seconds per rate.
    #[arg(long, default_value_t = 20.0)]
    seconds: f64,
    /// Leading seconds of each rate left out of the histograms.
    #[arg(long, default_value_t = 2.0)]
    warmup_seconds: f64,
    /// Records per Produce request at most.
    #[arg(long, default_value_t = latency::sweep::BATCH_RECORDS_DEFAULT)]
    batch_records: u64,
    /// Produce requests in flight at most.
    #[arg(long, default_value_t = latency::sweep::IN_FLIGHT_DEFAULT)]
    in_flight: usize,
    /// Idle consumers long-polling an empty topic during the run (a diagnostic: what every append
    /// costs a broker with many parked fetches).
    #[arg(long, default_value_t = 0)]
    parked_fetchers: usize,
    /// Where `latency-<name>.json`, `.md` and `.svg` go.
    #[arg(long, default_value = "bench/reports/data/latency")]
    out: PathBuf,
    /// A Skiff's metrics listener (host:port): read its service time per API over each rate.
    #[arg(long, conflicts_with = "service_time_jmx")]
    service_time_metrics: Option<String>,
    /// An Apache Kafka's JMX port (host:port, its JMX_PORT): read its request metrics per API
    /// over each rate, with the Java program `--jmx-reader` (compiled with javac).
    #[arg(long)]
    service_time_jmx: Option<String>,
    /// The `.java` source of the JMX reader.
    #[arg(long, default_value = "bench/scripts/jmx/KafkaRequestTimes.java")]
    jmx_reader: PathBuf,
}

#[derive(Args)]
struct IdleLongPollsArgs {
    /// An already running broker (127.0.0.1 only; its `max.connections` must exceed the largest
    /// count). Without it, one skiff is spawned for the whole run with `max.connections` raised.
    #[arg(long)]
    bootstrap: Option<String>,
    #[command(flatten)]
    skiff: SkiffArgs,
    /// Idle long-poll counts; the first is the reference of the ratio.
    #[arg(long, value_delimiter = ',', default_value = "0,1000")]
    counts: Vec<usize>,
    /// Repetitions of the list of counts (interleaved, so machine noise spreads over all).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// 1 kB messages per partition of each produced topic (12 partitions): 8192 is about 100 MB.
    #[arg(long, default_value_t = 8192)]
    messages_per_partition: u64,
    /// The idle consumers' Fetch max_wait_ms (a Kafka consumer's default fetch.max.wait.ms).
    #[arg(long, default_value_t = latency::sweep::FETCH_MAX_WAIT_MS_DEFAULT)]
    wait_ms: i32,
    /// Also write the markdown table here (`<out>.md`) and the JSON record in the `data/`
    /// directory beside it (`data/<name>.json`; bench/reports keeps its raw records there).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// The skiff to spawn when there is no `--bootstrap`.
#[derive(Args, Clone)]
struct SkiffArgs {
    /// The skiff binary to spawn (default: the one next to this binary).
    #[arg(long)]
    skiff_bin: Option<PathBuf>,
    /// Extra `key=value` settings for the spawned skiff.
    #[arg(long = "set")]
    settings: Vec<String>,
}

impl SkiffArgs {
    /// What to spawn: the given or default binary with the settings.
    fn spawn_spec(&self) -> anyhow::Result<SpawnSpec> {
        let binary = self
            .skiff_bin
            .clone()
            .or_else(default_skiff_binary)
            .context("no --bootstrap, and no skiff binary (--skiff-bin) to spawn")?;
        Ok(SpawnSpec {
            binary,
            settings: self.settings.clone(),
            ssl_keystore: None,
        })
    }
}

#[derive(Args)]
struct IdleConnectionsArgs {
    /// The broker: with --bootstrap, its `max.connections` must be --max-connections; without,
    /// a skiff is spawned with that setting.
    #[command(flatten)]
    target: TargetArgs,
    /// Idle connections held below the limit.
    #[arg(long, default_value_t = 10_000)]
    count: usize,
    /// The broker's max.connections (default: --count plus 16, filled for the at-limit phase).
    #[arg(long)]
    max_connections: Option<usize>,
    /// Fresh clients timed per phase.
    #[arg(long, default_value_t = 5)]
    fresh_clients: usize,
    /// Also write the markdown table here (`<out>.md`) and the JSON record in the `data/`
    /// directory beside it (`data/<name>.json`; bench/reports keeps its raw records there).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Args, Clone)]
struct BrokerArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// Where the JSON record goes (defined here only: clap refuses a flattened argument defined
    /// twice).
    #[arg(long, default_value = "bench/reports/data/kip283")]
    data: PathBuf,
}

/// The broker to measure: a running one, or a skiff to spawn.
#[derive(Args, Clone)]
struct TargetArgs {
    /// An already running broker (127.0.0.1 only). Without it, a skiff is spawned per setting.
    #[arg(long)]
    bootstrap: Option<String>,
    /// The pid of the --bootstrap broker, for RSS.
    #[arg(long)]
    broker_pid: Option<u32>,
    #[command(flatten)]
    skiff: SkiffArgs,
}

#[derive(Args)]
struct MemoryArgs {
    #[command(flatten)]
    broker: BrokerArgs,
    /// Concurrent slow consumers.
    #[arg(long, default_value_t = 100)]
    consumers: usize,
    /// Messages in all (KIP-283: 1 M).
    #[arg(long, default_value_t = memory::RECORD_COUNT_DEFAULT)]
    messages: u64,
    /// Partitions (KIP-283: 250).
    #[arg(long, default_value_t = memory::PARTITION_COUNT_DEFAULT)]
    partitions: i32,
    /// How long the consumers read.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Stop (and kill a spawned broker) when its RSS passes this.
    #[arg(long, default_value_t = 4096)]
    rss_cap_mib: u64,
    /// Settings to run against a spawned skiff: lazy (at the default chunk size), eager, or both.
    #[arg(long, default_value = "lazy,eager")]
    modes: String,
}

#[derive(Args)]
struct ThroughputArgs {
    #[command(flatten)]
    broker: BrokerArgs,
    /// Messages per partition. The default makes a pass of 12 partitions about 400 MB, long
    /// enough (a tenth of a second or more at loopback speed) that timer and scheduling noise stay
    /// small; with more partitions, lower it to keep the pass that size.
    #[arg(long, default_value_t = 32768)]
    messages_per_partition: u64,
    /// Partitions of the topic (issue #20: throughput spread over 1,000 partitions against 12).
    #[arg(long, default_value_t = throughput::PARTITION_COUNT_DEFAULT)]
    partitions: i32,
    /// KiB of batches per Produce request at most (Kafka's producer `max.request.size`, 1 MiB by
    /// default); 0 puts every partition's batch of a round in one request, as before this flag.
    #[arg(long, default_value_t = PRODUCE_REQUEST_BYTES_MAX >> 10)]
    produce_request_kib: usize,
    /// Timed passes per Fetch version.
    #[arg(long, default_value_t = 5)]
    passes: usize,
    /// Repetitions of the whole sweep.
    #[arg(long, default_value_t = 2)]
    repeat: usize,
    /// Chunk sizes in KiB (spawned skiff only); eager is added unless --no-eager.
    #[arg(long, value_delimiter = ',')]
    chunks_kib: Vec<usize>,
    /// Leave eager out of the sweep.
    #[arg(long)]
    no_eager: bool,
    /// Cap on the whole run.
    #[arg(long, default_value_t = 600)]
    seconds: u64,
    /// Listeners to read through, each with every Fetch version on the same broker: `plaintext`,
    /// `ssl`, or `plaintext,ssl` (issue #8's TLS cost). SSL needs a spawned skiff: the bench gives
    /// it a certificate generated for the run and trusts only that one.
    #[arg(long, value_delimiter = ',', default_value = "plaintext")]
    security: Vec<String>,
    /// Fetch versions to read with (4 modern, 2 for v2->v1, 0 for v2->v0); one alone is for
    /// profiling a single path, the report needs all three.
    #[arg(long, value_delimiter = ',', default_values_t = throughput::VERSIONS)]
    versions: Vec<i16>,
}

#[derive(Args)]
struct BaselineArgs {
    /// MiB per transfer.
    #[arg(long, default_value_t = 2048)]
    mib: u64,
    /// Transfers.
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Also time each transfer sent with `sendfile` from a file of this many MiB (the limit for
    /// serving stored bytes; 800 is a throughput pass), after the plain one.
    #[arg(long)]
    sendfile_file_mib: Option<u64>,
    /// With `--sendfile-file-mib`, also time the `sendfile` transfer taking turns as a consumer
    /// with one Fetch in flight does: a 128-byte request before each 12 MiB block (the limit of
    /// any broker for a 12-partition modern fetch).
    #[arg(long, requires = "sendfile_file_mib")]
    turns: bool,
    /// Where the JSON record goes.
    #[arg(long, default_value = "bench/reports/data/kip283")]
    data: PathBuf,
}

#[derive(Args)]
struct ReportArgs {
    /// Where the JSON records are.
    #[arg(long, default_value = "bench/reports/data/kip283")]
    data: PathBuf,
    /// Where kip283.md and its plots go.
    #[arg(long, default_value = "bench/reports")]
    out: PathBuf,
}

#[derive(Args)]
struct SmokeArgs {
    /// The skiff binary to spawn (default: the one next to this binary).
    #[arg(long)]
    skiff_bin: Option<PathBuf>,
}

fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

fn spawn_and_target(args: &TargetArgs) -> anyhow::Result<(Option<SpawnSpec>, Option<Target>)> {
    if let Some(bootstrap) = &args.bootstrap {
        require_loopback(bootstrap)?;
        return Ok((
            None,
            Some(Target {
                bootstrap: bootstrap.clone(),
                ssl_bootstrap: None,
                pid: args.broker_pid,
            }),
        ));
    }
    Ok((Some(args.skiff.spawn_spec()?), None))
}

fn write_record(data: &Path, kind: &str, record: &RunRecord) -> anyhow::Result<()> {
    std::fs::create_dir_all(data)?;
    let path = data.join(format!("{kind}.json"));
    std::fs::write(&path, serde_json::to_vec_pretty(record)?)
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

fn new_record() -> RunRecord {
    RunRecord {
        command: command_line(),
        started_unix_seconds: unix_seconds_now(),
        machine_before: Machine::now(),
        machine_after: Machine::now(),
        throughput: Vec::new(),
        truncated: false,
        memory: Vec::new(),
        baseline: Vec::new(),
        baseline_sendfile: Vec::new(),
        baseline_sendfile_turns: Vec::new(),
    }
}

fn memory_settings(modes: &str, spawned: bool) -> anyhow::Result<Vec<Setting>> {
    if !spawned {
        return Ok(vec![Setting::AsConfigured]);
    }
    modes
        .split(',')
        .map(|mode| match mode.trim() {
            "lazy" => Ok(Setting::Lazy {
                chunk_bytes: DOWN_CONVERT_CHUNK_BYTES,
            }),
            "eager" => Ok(Setting::Eager),
            other => bail!("unknown mode {other}; expected lazy or eager"),
        })
        .collect()
}

async fn run_memory(args: MemoryArgs) -> anyhow::Result<()> {
    let (spawn, target) = spawn_and_target(&args.broker.target)?;
    let partitions = args.partitions.max(1);
    let spec = MemorySpec {
        partition_count: partitions,
        records_per_partition: args.messages.div_ceil(u64::try_from(partitions)?),
        records_per_batch: 16,
        produce_in_flight: 2,
        consumer_count: args.consumers,
        read_piece_bytes: 64 << 10,
        read_pause_ms: 1,
        seconds_max: args.seconds,
        rss_cap_bytes: args.rss_cap_mib << 20,
    };
    let mut record = new_record();
    let settings = memory_settings(&args.modes, spawn.is_some())?;
    record.memory = memory::sweep(spawn.as_ref(), target.as_ref(), &spec, &settings).await?;
    record.machine_after = Machine::now();
    write_record(&args.broker.data, "memory", &record)
}

async fn run_throughput(args: ThroughputArgs) -> anyhow::Result<()> {
    let (mut spawn, target) = spawn_and_target(&args.broker.target)?;
    let securities = args
        .security
        .iter()
        .map(|text| SecurityProtocol::parse(text))
        .collect::<anyhow::Result<Vec<_>>>()?;
    // Kept until the run ends: the spawned brokers read the keystore from here.
    let keystore_directory = tempfile::Builder::new()
        .prefix("skiff-bench-tls-")
        .tempdir()?;
    let tls = if securities.contains(&SecurityProtocol::Ssl) {
        let spawn = spawn
            .as_mut()
            .context("--security ssl needs a spawned skiff (no --bootstrap)")?;
        let certificate = RunCertificate::generate()?;
        spawn.ssl_keystore = Some(certificate.write_keystore(keystore_directory.path())?);
        Some(Security::Tls(certificate.client_config()?))
    } else {
        None
    };
    if !(1..=i32::try_from(skiff_bench::responses::PARTITIONS_MAX).unwrap_or(i32::MAX))
        .contains(&args.partitions)
    {
        bail!(
            "--partitions must be 1 to {}",
            skiff_bench::responses::PARTITIONS_MAX
        );
    }
    let spec = ThroughputSpec {
        partition_count: args.partitions,
        records_per_partition: args.messages_per_partition,
        records_per_batch: 16,
        produce_in_flight: 4,
        produce_request_bytes_max: match args.produce_request_kib {
            0 => usize::MAX,
            kib => kib.saturating_mul(1 << 10),
        },
        pass_count: args.passes,
        seconds_max: args.seconds,
        securities,
        versions: args.versions.clone(),
    };
    let settings: Vec<Setting> = if spawn.is_some() {
        let chunks: Vec<usize> = if args.chunks_kib.is_empty() {
            CHUNK_BYTES_SWEEP.to_vec()
        } else {
            args.chunks_kib.iter().map(|kib| kib << 10).collect()
        };
        let mut settings: Vec<Setting> = chunks
            .into_iter()
            .map(|chunk_bytes| Setting::Lazy { chunk_bytes })
            .collect();
        if !args.no_eager {
            settings.push(Setting::Eager);
        }
        settings
    } else {
        vec![Setting::AsConfigured]
    };
    let mut record = new_record();
    let (results, truncated) = throughput::sweep(
        spawn.as_ref(),
        target.as_ref(),
        tls.as_ref(),
        &spec,
        &settings,
        args.repeat,
    )
    .await?;
    record.throughput = results;
    record.truncated = truncated;
    record.machine_after = Machine::now();
    write_record(&args.broker.data, "throughput", &record)
}

fn run_baseline(args: BaselineArgs) -> anyhow::Result<()> {
    let mut record = new_record();
    for _ in 0..args.repeat {
        let outcome = baseline::run(args.mib << 20, BASELINE_BLOCK_BYTES)?;
        eprintln!("baseline: {:.0} MB/s", outcome.bytes_per_second() / 1e6);
        record.baseline.push(outcome);
        let Some(file_mib) = args.sendfile_file_mib else {
            continue;
        };
        let paces = [
            (baseline::Pace::Stream, "baseline sendfile", true),
            (
                baseline::Pace::Turns,
                "baseline sendfile, taking turns",
                args.turns,
            ),
        ];
        for (pace, label, wanted) in paces {
            if !wanted {
                continue;
            }
            let outcome =
                baseline::run_sendfile(args.mib << 20, BASELINE_BLOCK_BYTES, file_mib << 20, pace)?;
            eprintln!("{label}: {:.0} MB/s", outcome.bytes_per_second() / 1e6);
            match pace {
                baseline::Pace::Stream => record.baseline_sendfile.push(outcome),
                baseline::Pace::Turns => record.baseline_sendfile_turns.push(outcome),
            }
        }
    }
    record.machine_after = Machine::now();
    write_record(&args.data, "baseline", &record)
}

fn read_record(path: &Path) -> anyhow::Result<Option<RunRecord>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(
            serde_json::from_slice(&bytes)
                .with_context(|| format!("parsing {}", path.display()))?,
        )),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error.into()),
    }
}

fn run_report(args: ReportArgs) -> anyhow::Result<()> {
    let inputs = Inputs {
        throughput: read_record(&args.data.join("throughput.json"))?,
        memory: read_record(&args.data.join("memory.json"))?,
        baseline: read_record(&args.data.join("baseline.json"))?,
    };
    let rendered = report::render(&inputs).map_err(|error| anyhow::anyhow!("plotting: {error}"))?;
    std::fs::create_dir_all(&args.out)?;
    std::fs::write(args.out.join("kip283.md"), rendered.markdown)?;
    if let Some(svg) = rendered.throughput_svg {
        std::fs::write(args.out.join(report::THROUGHPUT_SVG), svg)?;
    }
    if let Some(svg) = rendered.rss_svg {
        std::fs::write(args.out.join(report::RSS_SVG), svg)?;
    }
    eprintln!("wrote {}", args.out.join("kip283.md").display());
    Ok(())
}

/// The spawned broker (when there is no --bootstrap) and the address to measure.
fn latency_target(
    bootstrap: Option<&str>,
    skiff: &SkiffArgs,
) -> anyhow::Result<(Option<SpawnedBroker>, String)> {
    if let Some(bootstrap) = bootstrap {
        require_loopback(bootstrap)?;
        return Ok((None, bootstrap.to_owned()));
    }
    let broker = SpawnedBroker::start(&skiff.spawn_spec()?, &[])?;
    let bootstrap = broker.target().bootstrap.clone();
    Ok((Some(broker), bootstrap))
}

/// Prints `markdown` and, with `out`, writes it to `<out>.md` and `record` to `data/<name>.json`
/// beside it (reports and their raw records apart, as in bench/reports).
fn write_outputs(
    out: Option<&Path>,
    record: &impl serde::Serialize,
    markdown: &str,
) -> anyhow::Result<()> {
    if let Some(out) = out {
        let parent = out.parent().unwrap_or(Path::new(""));
        let file = out.file_name().context("--out names no file")?;
        let data = parent.join("data");
        std::fs::create_dir_all(&data)?;
        std::fs::write(
            data.join(file).with_extension("json"),
            serde_json::to_vec_pretty(record)?,
        )?;
        std::fs::write(out.with_extension("md"), markdown)?;
    }
    println!("{markdown}");
    Ok(())
}

async fn run_idle_long_polls(args: IdleLongPollsArgs) -> anyhow::Result<()> {
    let mut skiff = args.skiff.clone();
    let largest = args.counts.iter().copied().max().unwrap_or(0);
    skiff.settings.insert(
        0,
        format!(
            "max.connections={}",
            largest + idle_polls::CONNECTIONS_SPARE
        ),
    );
    let (broker, bootstrap) = latency_target(args.bootstrap.as_deref(), &skiff)?;
    let spec = IdlePollsSpec {
        bootstrap,
        counts: args.counts,
        repetitions: args.repeat.max(1),
        partition_count: throughput::PARTITION_COUNT_DEFAULT,
        records_per_partition: args.messages_per_partition,
        records_per_batch: 16,
        in_flight: 4,
        wait_ms: args.wait_ms,
    };
    let record = idle_polls::measure(&spec, command_line()).await;
    if let Some(broker) = broker {
        broker.stop()?;
    }
    let record = record?;
    let markdown = idle_polls::markdown(&record);
    write_outputs(args.out.as_deref(), &record, &markdown)
}

async fn run_idle_connections(args: IdleConnectionsArgs) -> anyhow::Result<()> {
    let max_connections = args.max_connections.unwrap_or(args.count + 16);
    // This process holds every idle connection too.
    let open_files_max = idle_connections::raise_open_file_limit()?;
    if (max_connections as u64) + 64 > open_files_max {
        bail!(
            "{max_connections} connections need more open files than this process may have ({open_files_max}); raise `ulimit -Hn`"
        );
    }
    let mut skiff = args.target.skiff.clone();
    skiff
        .settings
        .insert(0, format!("max.connections={max_connections}"));
    let (broker, bootstrap) = latency_target(args.target.bootstrap.as_deref(), &skiff)?;
    let pid = broker
        .as_ref()
        .and_then(|broker| broker.target().pid)
        .or(args.target.broker_pid);
    let spec = IdleConnectionsSpec {
        broker: bootstrap.parse().context("bootstrap is not host:port")?,
        pid,
        count: args.count,
        max_connections,
        fresh_clients: args.fresh_clients.max(1),
    };
    let record = idle_connections::measure(&spec, command_line()).await;
    if let Some(broker) = broker {
        broker.stop()?;
    }
    let record = record?;
    let markdown = idle_connections::markdown(&record);
    write_outputs(args.out.as_deref(), &record, &markdown)
}

async fn run_latency(args: LatencyArgs) -> anyhow::Result<()> {
    let (max_rate, rate_percents) = if args.rates_per_second.is_empty() {
        (args.max_rate, args.rates)
    } else {
        let (largest, percents) =
            latency::sweep::rates_as_percents_of_largest(&args.rates_per_second)?;
        (Some(largest), percents)
    };
    let (broker, bootstrap) = latency_target(args.bootstrap.as_deref(), &args.skiff)?;
    let spec = LatencySpec {
        broker_name: args.name.clone(),
        bootstrap,
        acks: args
            .acks
            .iter()
            .map(|text| Acks::parse(text))
            .collect::<anyhow::Result<_>>()?,
        rate_percents,
        max_rate,
        max_seconds: args.max_seconds,
        seconds: args.seconds,
        warmup_seconds: args.warmup_seconds,
        batch_records_max: args.batch_records,
        in_flight_max: args.in_flight,
        fetch_max_wait_ms: latency::sweep::FETCH_MAX_WAIT_MS_DEFAULT,
        parked_fetchers: args.parked_fetchers,
        service_time: match (args.service_time_metrics, args.service_time_jmx) {
            (Some(address), _) => Some(ServiceTimeSource::SkiffMetrics(address)),
            (None, Some(address)) => Some(ServiceTimeSource::KafkaJmx {
                address,
                program: args.jmx_reader,
            }),
            (None, None) => None,
        },
    };
    let record = latency::sweep::sweep(&spec, command_line()).await?;
    if let Some(broker) = broker {
        broker.stop()?;
    }
    std::fs::create_dir_all(&args.out)?;
    // Not `with_extension`: a name with a dot (`kafka-4.1.1`) would lose its tail.
    let stem = args.out.join(format!("latency-{}", args.name));
    let file = |extension: &str| args.out.join(format!("latency-{}.{extension}", args.name));
    std::fs::write(file("json"), serde_json::to_vec_pretty(&record)?)?;
    let markdown = latency::report::markdown(&record);
    std::fs::write(file("md"), &markdown)?;
    let svg =
        latency::report::plot(&record).map_err(|error| anyhow::anyhow!("plotting: {error}"))?;
    std::fs::write(file("svg"), svg)?;
    println!("{markdown}");
    eprintln!("wrote {}.{{json,md,svg}}", stem.display());
    Ok(())
}

/// A few seconds of `skiff-bench latency` against a spawned skiff: a short maximum, then 10 % and
/// 50 % of it; fails unless every message was acknowledged and consumed with latencies recorded.
async fn latency_smoke(binary: PathBuf) -> anyhow::Result<()> {
    // The service time is read from the broker's metrics listener, on a port free a moment ago.
    let metrics = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let skiff = SkiffArgs {
        skiff_bin: Some(binary),
        settings: vec![format!("skiff.metrics.listener={metrics}")],
    };
    let (broker, bootstrap) = latency_target(None, &skiff)?;
    let spec = LatencySpec {
        broker_name: "smoke".to_owned(),
        bootstrap,
        acks: vec![Acks::Leader],
        rate_percents: vec![10.0, 50.0],
        max_rate: None,
        max_seconds: 1.0,
        seconds: 1.0,
        warmup_seconds: 0.2,
        batch_records_max: latency::sweep::BATCH_RECORDS_DEFAULT,
        in_flight_max: latency::sweep::IN_FLIGHT_DEFAULT,
        fetch_max_wait_ms: latency::sweep::FETCH_MAX_WAIT_MS_DEFAULT,
        parked_fetchers: 0,
        service_time: Some(ServiceTimeSource::SkiffMetrics(metrics.to_string())),
    };
    let record = latency::sweep::sweep(&spec, command_line()).await?;
    drop(broker);
    let acks = record.results.first().context("no latency result")?;
    if acks.max_per_second <= 0.0 || acks.rates.len() != 2 {
        bail!("latency smoke measured no maximum or not every rate");
    }
    for rate in &acks.rates {
        // run_phase already failed unless every message was acknowledged and consumed in order.
        let (Some(produce), Some(end_to_end)) = (&rate.produce, &rate.end_to_end) else {
            bail!(
                "latency smoke recorded nothing at {:.0} %",
                rate.percent_of_max
            );
        };
        if produce.count == 0 || end_to_end.count != produce.count || produce.p50_ms <= 0.0 {
            bail!(
                "latency smoke at {:.0} %: {} produce and {} end-to-end samples",
                rate.percent_of_max,
                produce.count,
                end_to_end.count
            );
        }
        let served = |name: &str| match &rate.service_time {
            Some(PhaseServiceTimes::Skiff { apis }) => apis
                .iter()
                .find(|api| api.api == name)
                .is_some_and(|api| api.count > 0 && api.p50_us.is_some()),
            _ => false,
        };
        if !(served("Produce") && served("Fetch")) {
            bail!(
                "latency smoke at {:.0} %: no Produce and Fetch service time read: {:?}",
                rate.percent_of_max,
                rate.service_time
            );
        }
    }
    latency::report::plot(&record).map_err(|error| anyhow::anyhow!("plotting: {error}"))?;
    Ok(())
}

/// A few seconds: a small throughput sweep (one chunk size and eager, every Fetch version with a
/// verified pass) and a small memory run, against spawned brokers.
async fn run_smoke(args: SmokeArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let binary = args
        .skiff_bin
        .or_else(default_skiff_binary)
        .context("no skiff binary (--skiff-bin)")?;
    let spawn = SpawnSpec {
        binary,
        settings: Vec::new(),
        ssl_keystore: None,
    };
    let spec = ThroughputSpec {
        partition_count: throughput::PARTITION_COUNT_DEFAULT,
        records_per_partition: 256,
        records_per_batch: 16,
        produce_in_flight: 4,
        produce_request_bytes_max: PRODUCE_REQUEST_BYTES_MAX,
        pass_count: 1,
        seconds_max: 60,
        securities: vec![SecurityProtocol::Plaintext],
        versions: throughput::VERSIONS.to_vec(),
    };
    let settings = [
        Setting::Lazy {
            chunk_bytes: 16 << 10,
        },
        Setting::Eager,
    ];
    let (results, truncated) =
        throughput::sweep(Some(&spawn), None, None, &spec, &settings, 1).await?;
    if truncated || results.len() != settings.len() {
        bail!("smoke throughput did not measure every setting");
    }
    let expected = spec.records_per_partition * u64::try_from(spec.partition_count)?;
    for result in &results {
        if result.produce.record_count != expected || result.produce.bytes_per_second() <= 0.0 {
            bail!("smoke produced nothing at {}", result.setting.label());
        }
        for version in &result.versions {
            // The verified pass read every record, each checked for offset, key and value.
            if version.verified.record_count != expected {
                bail!(
                    "smoke read {} of {expected} records with Fetch v{}",
                    version.verified.record_count,
                    version.version
                );
            }
            let speed = Spread::of(
                &version
                    .passes
                    .iter()
                    .map(|pass| pass.bytes_per_second())
                    .collect::<Vec<_>>(),
            )
            .map_or(0.0, |spread| spread.median);
            if speed <= 0.0 {
                bail!("smoke consumed nothing with Fetch v{}", version.version);
            }
        }
    }
    let memory_spec = MemorySpec {
        partition_count: 10,
        records_per_partition: 256,
        records_per_batch: 16,
        produce_in_flight: 2,
        consumer_count: 4,
        read_piece_bytes: 64 << 10,
        read_pause_ms: 1,
        seconds_max: 2,
        rss_cap_bytes: 1 << 30,
    };
    let memory = memory::sweep(
        Some(&spawn),
        None,
        &memory_spec,
        &[Setting::Lazy {
            chunk_bytes: DOWN_CONVERT_CHUNK_BYTES,
        }],
    )
    .await?;
    if memory
        .iter()
        .any(|result| result.bytes_read == 0 || result.samples.is_empty())
    {
        bail!("smoke memory run read nothing or sampled no RSS");
    }
    latency_smoke(spawn.binary.clone()).await?;
    println!(
        "smoke ok in {:.1} s: produced and consumed {expected} verified records per setting at Fetch v4, v2 and v0; latency at 10 and 50 % of the maximum",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The broker (or cluster) a cpu run measures, with what its TLS path needs.
struct CpuTarget {
    /// The skiff this run spawned (stopped at the end).
    spawned: Option<SpawnedBroker>,
    bootstrap: String,
    pids: Vec<u32>,
    /// The SSL listener and how to reach it.
    tls: Option<(String, Security)>,
    /// The certificate the broker presents: the TLS floor's too.
    certificate: Option<RunCertificate>,
}

/// Spawns a skiff (with an SSL listener for --tls) or takes the running broker of --bootstrap.
fn cpu_target(args: &CpuArgs, keystore_directory: &Path) -> anyhow::Result<CpuTarget> {
    let Some(bootstrap) = &args.bootstrap else {
        let certificate = args.tls.then(RunCertificate::generate).transpose()?;
        let mut spec = args.skiff.spawn_spec()?;
        if let Some(certificate) = &certificate {
            spec.ssl_keystore = Some(certificate.write_keystore(keystore_directory)?);
        }
        let broker = SpawnedBroker::start(&spec, &[])?;
        let target = broker.target();
        let tls = match &certificate {
            Some(certificate) => Some((
                target
                    .ssl_bootstrap
                    .clone()
                    .context("the spawned broker has no SSL listener")?,
                Security::Tls(certificate.client_config()?),
            )),
            None => None,
        };
        let (bootstrap, pid) = (target.bootstrap.clone(), target.pid);
        return Ok(CpuTarget {
            spawned: Some(broker),
            bootstrap,
            pids: vec![pid.context("the spawned broker has no pid")?],
            tls,
            certificate,
        });
    };
    if args.tls {
        bail!("--tls spawns a skiff with an SSL listener; a running broker's is --ssl-bootstrap");
    }
    let certificate = match &args.ssl_keystore {
        Some(path) => Some(RunCertificate::from_keystore_pem(
            &std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?,
        )?),
        None => None,
    };
    let tls = match (&args.ssl_bootstrap, &certificate) {
        (Some(address), Some(certificate)) => {
            require_loopback(address)?;
            Some((address.clone(), Security::Tls(certificate.client_config()?)))
        }
        _ => None,
    };
    Ok(CpuTarget {
        spawned: None,
        bootstrap: bootstrap.clone(),
        pids: args.pid.clone(),
        tls,
        certificate,
    })
}

async fn run_cpu(args: CpuArgs) -> anyhow::Result<()> {
    use skiff_bench::cpu;

    let (records_per_partition, rounds, fetch_bytes_min) = if args.smoke {
        (4096, 2, 500_000_000)
    } else {
        (
            args.records_per_partition,
            args.rounds.max(1),
            args.fetch_gb_min.mul_add(1e9, 0.0) as u64,
        )
    };
    let spec = cpu::CpuSpec {
        partition_count: args.partitions,
        records_per_partition,
        records_per_batch: 16,
        versions: args.versions.clone(),
        fetch_bytes_min,
        connections: args.connections,
    };
    // Kept until the run ends: the spawned broker reads its keystore from here.
    let keystore_directory = tempfile::Builder::new()
        .prefix("skiff-bench-cpu-")
        .tempdir()?;
    let target = cpu_target(&args, keystore_directory.path())?;
    let addresses: Vec<String> = target.bootstrap.split(',').map(str::to_owned).collect();
    for address in &addresses {
        require_loopback(address)?;
    }
    let cluster = if args.cluster {
        Some(cpu::replicated::cluster_brokers(&addresses, &target.pids).await?)
    } else {
        None
    };
    let pid = match (&cluster, target.pids.as_slice()) {
        (Some(_), _) | (None, [_]) => target.pids.first().copied().unwrap_or_default(),
        (None, _) => bail!("one broker needs one --pid (several are for --cluster)"),
    };
    let mut samples = Vec::new();
    for round in 0..rounds {
        samples.extend(match &cluster {
            Some(brokers) => cpu::replicated::replicated_round(brokers, &spec, round).await?,
            None => {
                let listener = target
                    .tls
                    .as_ref()
                    .map(|(address, security)| (address.as_str(), security));
                cpu::broker_round(&target.bootstrap, pid, &spec, round, listener).await?
            }
        });
        samples.extend(cpu::floor_round(&spec, target.certificate.as_ref())?);
        eprintln!("round {} of {rounds} done", round + 1);
    }
    if let Some(broker) = target.spawned {
        broker.stop()?;
    }
    let table = cpu::render(&samples);
    println!("{table}");
    if let Some(out) = args.out {
        std::fs::write(&out, &table)?;
        std::fs::write(
            out.with_extension("json"),
            serde_json::to_vec_pretty(&samples)?,
        )?;
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let command = Cli::parse().command;
    // Throughput measures one producer, then one consumer, each on one connection: on a
    // single-threaded runtime, as the baseline's receiver is one thread. On the two-worker
    // runtime the consumer's task was woken by whichever worker polled the socket's readiness and
    // moved between the two cores the broker also runs on: modern fetch measured 1.16x faster
    // single-threaded (median ratio of 10 interleaved rounds; bench/reports/kip283-findings.md,
    // session 6, has the rounds and the 20-round figures that followed).
    let runtime = match command {
        Command::Throughput(_) | Command::Cpu(_) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?,
        _ => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?,
    };
    runtime.block_on(run_command(command))
}

async fn run_command(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Memory(args) => run_memory(args).await,
        Command::Throughput(args) => run_throughput(args).await,
        Command::IdleLongPolls(args) => run_idle_long_polls(args).await,
        Command::IdleConnections(args) => run_idle_connections(args).await,
        Command::Baseline(args) => run_baseline(args),
        Command::Report(args) => run_report(args),
        Command::Latency(args) => run_latency(args).await,
        Command::Smoke(args) => run_smoke(args).await,
        Command::Cpu(args) => run_cpu(args).await,
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// Two flattened argument groups once both defined `--data`, and clap then refused every
    /// `throughput --data …`; its own consistency check catches such clashes.
    #[test]
    fn command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn throughput_takes_its_data_directory() {
        use clap::Parser;
        let cli = Cli::try_parse_from([
            "skiff-bench",
            "throughput",
            "--bootstrap",
            "127.0.0.1:9092",
            "--data",
            "/tmp/somewhere",
        ])
        .expect("throughput --data parses");
        let super::Command::Throughput(args) = cli.command else {
            panic!("not the throughput subcommand");
        };
        assert_eq!(args.broker.data, std::path::PathBuf::from("/tmp/somewhere"));
    }
}
