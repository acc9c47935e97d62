//! Broker CPU per gigabyte moved (issue 41), and floors measured in the same run: what a
//! user pays for on a machine whose cores are the limit. For each path the broker's CPU time
//! (user and system apart, from `/proc/<pid>/stat`) over a phase is divided by the bytes the
//! phase moved (batch bytes produced, response bytes fetched) and by its records.
//!
//! Paths: produce acks=1 of 1 kB and of 100 B records on one connection (Produce v3) and of
//! 1 kB records on several, a modern fetch (v4+) of the same bytes (over TLS too: `--tls` on a
//! spawned skiff, `--ssl-bootstrap` on a running broker), and the legacy fetches that
//! down-convert them (Fetch v2: magic 1, Fetch v0: magic 0). On a cluster ([`replicated`]),
//! produce at RF 1 with acks=1 and at RF 2 and more with acks=all, each broker's CPU apart.
//! Floors, small programs over the same bytes on the same machine: receiving the batches and
//! checking each one's CRC32C before writing it to a file in the page cache (produce; a
//! follower's floor too); `sendfile` of the stored bytes in fetch-response-sized blocks to a
//! loopback reader (modern fetch; a leader's to its followers); reading the bytes, computing a
//! CRC32 per 1 kB message and writing them to the socket (legacy fetch); reading them and
//! sealing 16 KiB TLS records with the provider the bench uses (TLS fetch). A floor's CPU is that
//! of the thread doing the broker's part (`/proc/thread-self/stat`). Rounds interleave every
//! path, and each figure is the median of the rounds with its range.
//!
//! Must never: time a phase it did not verify moved the bytes it counts (the produce is
//! acknowledged, the fetch reads to the end), or compare figures from different runs.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;

use anyhow::Context;
use bytes::BytesMut;
use serde::Serialize;

use crate::client::{Connection, Security};
use crate::kip283::consume::{read_pass, FetchSpec};
use crate::kip283::produce::{
    batch_of, create_ready, produce_over, ProduceOutcome, ProduceSpec, PRODUCE_REQUEST_BYTES_MAX,
};
use crate::kip283::{FETCH_MAX_BYTES, PARTITION_MAX_BYTES, RECORD_VALUE_BYTES};
use crate::tls::RunCertificate;

pub mod replicated;

/// CPU seconds, user and system apart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CpuTimes {
    /// User time.
    pub user_s: f64,
    /// System time.
    pub system_s: f64,
}

impl CpuTimes {
    /// A process's CPU so far.
    pub fn of_process(pid: u32) -> anyhow::Result<Self> {
        Self::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat"))?)
    }

    /// The calling thread's CPU so far.
    pub fn of_this_thread() -> anyhow::Result<Self> {
        Self::parse(&std::fs::read_to_string("/proc/thread-self/stat")?)
    }

    /// `utime` and `stime` of a `stat` line (fields 14 and 15; the command name, field 2, may
    /// hold spaces and parentheses, so fields are counted after its last `)`).
    fn parse(stat: &str) -> anyhow::Result<Self> {
        let after_name = stat.rsplit_once(')').context("no command name")?.1;
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        let ticks = |index: usize| -> anyhow::Result<f64> {
            let text = fields.get(index).context("short stat line")?;
            Ok(text.parse::<u64>()? as f64 / clock_ticks_per_second())
        };
        // After the name: state is field 3, so utime (14) and stime (15) are at 11 and 12.
        Ok(Self {
            user_s: ticks(11)?,
            system_s: ticks(12)?,
        })
    }

    /// The CPU spent since `earlier`.
    pub fn since(self, earlier: Self) -> Self {
        Self {
            user_s: self.user_s - earlier.user_s,
            system_s: self.system_s - earlier.system_s,
        }
    }

    /// User plus system.
    pub fn total(self) -> f64 {
        self.user_s + self.system_s
    }

    /// The CPU of several processes together.
    pub fn sum(all: &[Self]) -> Self {
        all.iter().fold(Self::default(), |sum, one| Self {
            user_s: sum.user_s + one.user_s,
            system_s: sum.system_s + one.system_s,
        })
    }
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf reads a constant of the running system; no memory is passed.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// One path's phase in one round.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    /// The path's name.
    pub path: String,
    /// Bytes moved.
    pub bytes: u64,
    /// Records moved.
    pub records: u64,
    /// CPU spent by the broker (or the floor's thread).
    pub cpu: CpuTimes,
}

impl Sample {
    /// CPU seconds per 10^9 bytes.
    pub fn cpu_s_per_gb(&self) -> f64 {
        self.cpu.total() / (self.bytes as f64 / 1e9).max(f64::MIN_POSITIVE)
    }

    /// CPU seconds per million records.
    pub fn cpu_s_per_million_records(&self) -> f64 {
        self.cpu.total() / (self.records as f64 / 1e6).max(f64::MIN_POSITIVE)
    }
}

/// What one round moves.
#[derive(Debug, Clone)]
pub struct CpuSpec {
    /// Partitions of each round's topic.
    pub partition_count: i32,
    /// 1 kB records per partition.
    pub records_per_partition: u64,
    /// Records per batch.
    pub records_per_batch: u64,
    /// Fetch versions: the first modern, the others legacy.
    pub versions: Vec<i16>,
    /// Bytes each fetch phase (and fetch floor) moves at least: the topic is read again until
    /// then, so the phase's CPU spans many of `/proc`'s 10 ms ticks.
    pub fetch_bytes_min: u64,
    /// Connections of the second 1 kB produce path (1 or less: that path is left out).
    pub connections: usize,
}

/// The broker's paths in one round, on a fresh topic: produce, then a fetch pass per version.
pub async fn broker_round(
    bootstrap: &str,
    pid: u32,
    spec: &CpuSpec,
    round: usize,
    tls: Option<(&str, &Security)>,
) -> anyhow::Result<Vec<Sample>> {
    let topic = format!("cpu-per-gb-{}-{round}", std::process::id());
    let records = u64::try_from(spec.partition_count)? * spec.records_per_partition;
    // Created outside the measured window: a topic's creation is not produce's cost per GB.
    create_ready(bootstrap, &topic, spec.partition_count).await?;
    create_ready(bootstrap, &small_topic(&topic), spec.partition_count).await?;
    if spec.connections > 1 {
        create_ready(bootstrap, &many_topic(&topic), spec.partition_count).await?;
    }
    let mut samples = vec![
        produce_phase(
            bootstrap,
            pid,
            PRODUCE_LARGE.to_owned(),
            &produce_spec(spec, topic.clone(), false),
            1,
        )
        .await?,
    ];
    let end_offset = i64::try_from(spec.records_per_partition)?;
    let mut buffer = BytesMut::new();
    let plaintext = spec.versions.iter().map(|&version| (version, None));
    let modern = spec.versions.first().copied();
    let secured = tls.into_iter().filter_map(|tls| Some((modern?, Some(tls))));
    for (version, tls) in plaintext.chain(secured) {
        let mut connection = match tls {
            None => Connection::connect(bootstrap).await?,
            Some((address, security)) => {
                let connection = Connection::connect_with(address, security).await?;
                if let Some(negotiated) = connection.tls_negotiated() {
                    eprintln!("tls negotiated with the broker: {negotiated}");
                }
                connection
            }
        };
        let fetch = FetchSpec {
            topic: topic.clone(),
            partition_count: spec.partition_count,
            version,
            partition_max_bytes: PARTITION_MAX_BYTES,
            max_bytes: FETCH_MAX_BYTES,
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
        let before = CpuTimes::of_process(pid)?;
        let (mut bytes, mut read) = (0u64, 0u64);
        while bytes < spec.fetch_bytes_min || read == 0 {
            // The first pass checks every record; the others read the same bytes again.
            let verify = read == 0;
            let pass = read_pass(
                &mut connection,
                &fetch,
                end_offset,
                verify,
                deadline,
                &mut buffer,
            )
            .await?;
            anyhow::ensure!(
                pass.record_count == records,
                "fetch v{version} read {} of {records}",
                pass.record_count
            );
            bytes += pass.response_bytes;
            read += pass.record_count;
        }
        let name = fetch_path_name(version);
        samples.push(Sample {
            path: if tls.is_some() {
                format!("{name} over TLS")
            } else {
                name
            },
            bytes,
            records: read,
            cpu: CpuTimes::of_process(pid)?.since(before),
        });
    }
    let small = produce_spec(spec, small_topic(&topic), true);
    samples.push(produce_phase(bootstrap, pid, PRODUCE_SMALL.to_owned(), &small, 1).await?);
    if spec.connections > 1 {
        let path = format!(
            "produce acks=1, 1 kB records, {} connections",
            spec.connections
        );
        let many = produce_spec(spec, many_topic(&topic), false);
        samples.push(produce_phase(bootstrap, pid, path, &many, spec.connections).await?);
    }
    Ok(samples)
}

/// What a produce phase sends: 1 kB records in the round's batches, or (`small`) 100 B ones,
/// [`SMALL_RECORDS_FACTOR`] times as many in batches of about the same 16 kB.
fn produce_spec(spec: &CpuSpec, topic: String, small: bool) -> ProduceSpec {
    let (records_per_partition, records_per_batch, value_bytes) = if small {
        (
            spec.records_per_partition * SMALL_RECORDS_FACTOR,
            SMALL_RECORDS_PER_BATCH,
            SMALL_VALUE_BYTES,
        )
    } else {
        (
            spec.records_per_partition,
            spec.records_per_batch,
            crate::kip283::RECORD_VALUE_BYTES,
        )
    };
    ProduceSpec {
        topic,
        partition_count: spec.partition_count,
        records_per_partition,
        records_per_batch,
        value_bytes,
        in_flight: 4,
        request_bytes_max: PRODUCE_REQUEST_BYTES_MAX,
        acks: crate::client::ACKS_LEADER,
    }
}

/// One produce phase over `connections` connections, with the broker's CPU over it.
async fn produce_phase(
    bootstrap: &str,
    pid: u32,
    path: String,
    produce: &ProduceSpec,
    connections: usize,
) -> anyhow::Result<Sample> {
    let (produced, spent) = produce_measured(bootstrap, &[pid], produce, connections).await?;
    Ok(Sample {
        path,
        bytes: produced.batch_bytes,
        records: produced.record_count,
        cpu: CpuTimes::sum(&spent),
    })
}

/// One produce over `connections` connections to `bootstrap`, with what each of `pids` spent
/// over it (in their order): the measured window of every produce path.
async fn produce_measured(
    bootstrap: &str,
    pids: &[u32],
    produce: &ProduceSpec,
    connections: usize,
) -> anyhow::Result<(ProduceOutcome, Vec<CpuTimes>)> {
    let before: Vec<CpuTimes> = pids
        .iter()
        .map(|&pid| CpuTimes::of_process(pid))
        .collect::<anyhow::Result<_>>()?;
    let produced = produce_over(bootstrap, produce, connections).await?;
    let spent = pids
        .iter()
        .zip(before)
        .map(|(&pid, before)| Ok(CpuTimes::of_process(pid)?.since(before)))
        .collect::<anyhow::Result<_>>()?;
    Ok((produced, spent))
}

/// The topic of a round's produce over several connections.
fn many_topic(topic: &str) -> String {
    format!("{topic}-connections")
}

/// The topic of a round's 100 B records.
fn small_topic(topic: &str) -> String {
    format!("{topic}-small")
}

/// The small records' value size, and how many more of them a round produces than 1 kB ones
/// (so the phase spans enough of /proc's ticks), in batches of about the same 16 kB.
const SMALL_VALUE_BYTES: usize = 100;
const SMALL_RECORDS_FACTOR: u64 = 4;
const SMALL_RECORDS_PER_BATCH: u64 = 128;
const PRODUCE_SMALL: &str = "produce acks=1, 100 B records, 1 connection";
const PRODUCE_LARGE: &str = "produce acks=1, 1 kB records, 1 connection";

/// The name of the fetch path at `version`.
pub fn fetch_path_name(version: i16) -> String {
    match version {
        0 | 1 => format!("legacy fetch v{version} (v2 -> magic 0)"),
        2 | 3 => format!("legacy fetch v{version} (v2 -> magic 1)"),
        _ => format!("modern fetch v{version}"),
    }
}

/// The batches one round produces, in the order the producer sends them.
fn round_batches(
    spec: &CpuSpec,
    records_per_partition: u64,
    records_per_batch: u64,
    value_bytes: usize,
) -> anyhow::Result<Vec<Vec<u8>>> {
    let mut batches = Vec::new();
    let mut next = 0u64;
    while next < records_per_partition {
        let count = records_per_batch.min(records_per_partition - next);
        for _ in 0..spec.partition_count {
            batches.push(batch_of(next, count, value_bytes)?);
        }
        next += count;
    }
    Ok(batches)
}

/// The floors of one round, over the bytes of the same batches.
pub fn floor_round(spec: &CpuSpec, tls: Option<&RunCertificate>) -> anyhow::Result<Vec<Sample>> {
    let batches = round_batches(
        spec,
        spec.records_per_partition,
        spec.records_per_batch,
        RECORD_VALUE_BYTES,
    )?;
    let records = u64::try_from(spec.partition_count)? * spec.records_per_partition;
    let small = round_batches(
        spec,
        spec.records_per_partition * SMALL_RECORDS_FACTOR,
        SMALL_RECORDS_PER_BATCH,
        SMALL_VALUE_BYTES,
    )?;
    let small_bytes: u64 = small.iter().map(|b| b.len() as u64).sum();
    let small_cpu = produce_floor(&small)?;
    let bytes: u64 = batches.iter().map(|b| b.len() as u64).sum();
    let produce = produce_floor(&batches)?;
    let stored = store(&batches)?;
    // The fetch floors read the stored bytes as often as a fetch phase reads the topic.
    let passes = spec.fetch_bytes_min.div_ceil(bytes.max(1)).max(1);
    let block = usize::try_from(PARTITION_MAX_BYTES)?;
    let fetch = sendfile_floor(&stored, bytes, passes, block)?;
    let legacy = legacy_floor(&stored, bytes, passes)?;
    let sample = |path: &str, cpu, moved: u64, moved_records: u64| Sample {
        path: path.to_owned(),
        bytes: moved,
        records: moved_records,
        cpu,
    };
    let (read, read_records) = (bytes * passes, records * passes);
    let mut floors = vec![
        sample(FLOOR_PRODUCE, produce, bytes, records),
        sample(
            FLOOR_PRODUCE_SMALL,
            small_cpu,
            small_bytes,
            records * SMALL_RECORDS_FACTOR,
        ),
        sample(FLOOR_SENDFILE, fetch, read, read_records),
        sample(FLOOR_LEGACY, legacy, read, read_records),
    ];
    if let Some(certificate) = tls {
        let sealed = tls_floor(&stored, bytes, passes, certificate)?;
        floors.push(sample(FLOOR_TLS, sealed, read, read_records));
    }
    Ok(floors)
}

const FLOOR_PRODUCE: &str = "floor: receive, CRC32C per batch, write to a file";
const FLOOR_PRODUCE_SMALL: &str = "floor: the same, 100 B records";
const FLOOR_SENDFILE: &str = "floor: sendfile in 1 MiB blocks";
const FLOOR_LEGACY: &str = "floor: read, CRC32 per 1 kB message, write to the socket";
const FLOOR_TLS: &str = "floor: read, seal in 16 KiB TLS records, write to the socket";

/// A v2 batch's CRC32C covers the bytes from its attributes (offset 21) to its end.
const BATCH_CRC_START: usize = 21;

/// Receives the batches (each length-prefixed) on a loopback connection, checks each one's
/// CRC32C and appends it to a file; the receiving thread's CPU.
fn produce_floor(batches: &[Vec<u8>]) -> anyhow::Result<CpuTimes> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    let count = batches.len();
    let receiver = std::thread::spawn(move || -> anyhow::Result<CpuTimes> {
        let (mut stream, _) = listener.accept()?;
        let mut file = tempfile::tempfile()?;
        let mut body = Vec::new();
        let before = CpuTimes::of_this_thread()?;
        for _ in 0..count {
            let mut size = [0u8; 4];
            stream.read_exact(&mut size)?;
            body.resize(usize::try_from(u32::from_be_bytes(size))?, 0);
            stream.read_exact(&mut body)?;
            let stored = u32::from_be_bytes(body.get(17..21).context("short batch")?.try_into()?);
            let computed = crc32c::crc32c(body.get(BATCH_CRC_START..).context("short batch")?);
            anyhow::ensure!(stored == computed, "batch CRC mismatch");
            file.write_all(&body)?;
        }
        Ok(CpuTimes::of_this_thread()?.since(before))
    });
    let mut stream = TcpStream::connect(address)?;
    for one in batches {
        stream.write_all(&u32::try_from(one.len())?.to_be_bytes())?;
        stream.write_all(one)?;
    }
    receiver
        .join()
        .map_err(|_| anyhow::anyhow!("floor thread panicked"))?
}

/// The batches written to a file (in the page cache, as a broker's recent segments are).
fn store(batches: &[Vec<u8>]) -> anyhow::Result<std::fs::File> {
    let mut file = tempfile::tempfile()?;
    for one in batches {
        file.write_all(one)?;
    }
    Ok(file)
}

/// Reads `bytes` from a loopback connection and drops them.
fn drain(address: std::net::SocketAddr, bytes: u64) -> std::thread::JoinHandle<anyhow::Result<()>> {
    std::thread::spawn(move || -> anyhow::Result<()> {
        let mut stream = TcpStream::connect(address)?;
        let mut buffer = vec![0u8; 1 << 20];
        let mut left = bytes;
        while left > 0 {
            let read = stream.read(&mut buffer)?;
            anyhow::ensure!(read > 0, "the floor's sender closed early");
            left = left.saturating_sub(read as u64);
        }
        Ok(())
    })
}

/// `sendfile` of the stored bytes, `passes` times, in `block` sized calls; the sending thread's
/// CPU.
fn sendfile_floor(
    file: &std::fs::File,
    bytes: u64,
    passes: u64,
    block: usize,
) -> anyhow::Result<CpuTimes> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let reader = drain(listener.local_addr()?, bytes * passes);
    let (stream, _) = listener.accept()?;
    let before = CpuTimes::of_this_thread()?;
    let end = libc::off_t::try_from(bytes)?;
    for _ in 0..passes {
        let mut offset: libc::off_t = 0;
        while offset < end {
            let left = usize::try_from(end - offset)?.min(block);
            // SAFETY: both descriptors are open for the call, and `offset` is a valid off_t the
            // call advances.
            let sent =
                unsafe { libc::sendfile(stream.as_raw_fd(), file.as_raw_fd(), &mut offset, left) };
            anyhow::ensure!(sent > 0, "sendfile: {}", std::io::Error::last_os_error());
        }
    }
    let cpu = CpuTimes::of_this_thread()?.since(before);
    drop(stream);
    reader
        .join()
        .map_err(|_| anyhow::anyhow!("reader panicked"))??;
    Ok(cpu)
}

/// Reads the stored bytes, computes a CRC32 over each 1 kB message's worth and writes them to the
/// socket (what a down-conversion must at least do); the sending thread's CPU.
fn legacy_floor(file: &std::fs::File, bytes: u64, passes: u64) -> anyhow::Result<CpuTimes> {
    use std::os::unix::fs::FileExt;

    let listener = TcpListener::bind("127.0.0.1:0")?;
    let reader = drain(listener.local_addr()?, bytes * passes);
    let (mut stream, _) = listener.accept()?;
    let before = CpuTimes::of_this_thread()?;
    let mut buffer = vec![0u8; 128 * 1024];
    let mut position = 0u64;
    let mut checksums = 0u32;
    while position < bytes * passes {
        let read = file.read_at(&mut buffer, position % bytes)?;
        anyhow::ensure!(read > 0, "short file");
        let chunk = buffer.get(..read).context("read past the buffer")?;
        for message in chunk.chunks(RECORD_VALUE_BYTES) {
            let mut crc = flate2::Crc::new();
            crc.update(message);
            checksums ^= crc.sum();
        }
        stream.write_all(chunk)?;
        position += read as u64;
    }
    let cpu = CpuTimes::of_this_thread()?.since(before);
    drop(stream);
    std::hint::black_box(checksums);
    reader
        .join()
        .map_err(|_| anyhow::anyhow!("reader panicked"))??;
    Ok(cpu)
}

/// Reads the stored bytes and writes them, `passes` times, through a rustls server connection
/// (the provider and kind of certificate of the broker's listener in this run) to a loopback
/// client that decrypts them; the sending thread's CPU (the handshake included: one per call).
fn tls_floor(
    file: &std::fs::File,
    bytes: u64,
    passes: u64,
    certificate: &RunCertificate,
) -> anyhow::Result<CpuTimes> {
    use std::os::unix::fs::FileExt;

    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    let client_config = certificate.client_config()?;
    let total = bytes * passes;
    let reader = std::thread::spawn(move || -> anyhow::Result<()> {
        let tcp = TcpStream::connect(address)?;
        let name = crate::tls::server_name(&address.to_string())?;
        let connection = rustls::ClientConnection::new(client_config, name)?;
        let mut stream = rustls::StreamOwned::new(connection, tcp);
        let mut buffer = vec![0u8; 1 << 20];
        let mut left = total;
        while left > 0 {
            let read = stream.read(&mut buffer)?;
            anyhow::ensure!(read > 0, "the TLS floor's sender closed early");
            left = left.saturating_sub(read as u64);
        }
        Ok(())
    });
    let (tcp, _) = listener.accept()?;
    let connection = rustls::ServerConnection::new(certificate.server_config()?)?;
    let mut stream = rustls::StreamOwned::new(connection, tcp);
    let before = CpuTimes::of_this_thread()?;
    let mut buffer = vec![0u8; TLS_RECORD_BYTES];
    let mut position = 0u64;
    while position < total {
        let read = file.read_at(&mut buffer, position % bytes)?;
        anyhow::ensure!(read > 0, "short file");
        stream.write_all(buffer.get(..read).context("read past the buffer")?)?;
        position += read as u64;
    }
    stream.flush()?;
    let cpu = CpuTimes::of_this_thread()?.since(before);
    eprintln!(
        "tls negotiated by the floor: {:?} {:?}",
        stream.conn.protocol_version(),
        stream
            .conn
            .negotiated_cipher_suite()
            .map(|suite| suite.suite())
    );
    reader
        .join()
        .map_err(|_| anyhow::anyhow!("reader panicked"))??;
    Ok(cpu)
}

/// The largest TLS record's plaintext: the floor writes that much at a time.
const TLS_RECORD_BYTES: usize = 16 * 1024;

/// The median of `values` and their range.
fn median_range(mut values: Vec<f64>) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let median = values.get(values.len() / 2).copied().unwrap_or(f64::NAN);
    let low = values.first().copied().unwrap_or(f64::NAN);
    let high = values.last().copied().unwrap_or(f64::NAN);
    (median, low, high)
}

/// The floors a path is held against (its ratio is to their sum): replication's added cost to a
/// follower's receive and write plus the leader's send of the same bytes (issue 41's pairing); a
/// produce summed over several brokers to none.
fn floors_of(path: &str) -> &'static [&'static str] {
    if path == PRODUCE_SMALL {
        &[FLOOR_PRODUCE_SMALL]
    } else if path.starts_with(replicated::ADDED_COST) {
        &[FLOOR_PRODUCE, FLOOR_SENDFILE]
    } else if path.starts_with(replicated::LEADER_ADDED_COST) {
        &[FLOOR_SENDFILE]
    } else if path.starts_with(replicated::FOLLOWER) {
        &[FLOOR_PRODUCE]
    } else if path.starts_with(replicated::PRODUCE_ALL) {
        &[]
    } else if path.starts_with("produce") {
        &[FLOOR_PRODUCE]
    } else if path.starts_with("modern fetch") && path.ends_with("over TLS") {
        &[FLOOR_TLS]
    } else if path.starts_with("modern fetch") {
        &[FLOOR_SENDFILE]
    } else if path.starts_with("legacy fetch") {
        &[FLOOR_LEGACY]
    } else {
        &[]
    }
}

/// The markdown table of every path over the rounds: CPU s per GB (median, range, user and
/// system), per million records, and the ratio to its floors' medians (summed).
pub fn render(samples: &[Sample]) -> String {
    // Paths in the order they first ran, each with its rounds.
    let mut paths: Vec<(&str, Vec<&Sample>)> = Vec::new();
    for sample in samples {
        match paths.iter_mut().find(|(path, _)| *path == sample.path) {
            Some((_, rounds)) => rounds.push(sample),
            None => paths.push((&sample.path, vec![sample])),
        }
    }
    let per_gb =
        |rounds: &[&Sample]| median_range(rounds.iter().map(|s| s.cpu_s_per_gb()).collect());
    let mut out = String::from(
        "| path | rounds | CPU s/GB median (range) | user s/GB | system s/GB | CPU s per 10^6 records | ÷ floor |\n|---|---|---|---|---|---|---|\n",
    );
    for (path, rounds) in &paths {
        let (median, low, high) = per_gb(rounds);
        let gb = |s: &Sample| (s.bytes as f64 / 1e9).max(f64::MIN_POSITIVE);
        let user = median_range(rounds.iter().map(|s| s.cpu.user_s / gb(s)).collect()).0;
        let system = median_range(rounds.iter().map(|s| s.cpu.system_s / gb(s)).collect()).0;
        let per_million = median_range(
            rounds
                .iter()
                .map(|s| s.cpu_s_per_million_records())
                .collect(),
        )
        .0;
        let floors = floors_of(path);
        let floor_sum = floors
            .iter()
            .map(|floor| {
                let (_, rounds) = paths.iter().find(|(other, _)| other == floor)?;
                Some(per_gb(rounds).0)
            })
            .sum::<Option<f64>>()
            .filter(|_| !floors.is_empty());
        let floor = floor_sum.map(|sum| median / sum);
        out.push_str(&format!(
            "| {path} | {} | {median:.2} ({low:.2}–{high:.2}) | {user:.2} | {system:.2} | {per_million:.3} | {} |\n",
            rounds.len(),
            floor.map_or(String::new(), |ratio| format!("{ratio:.2}×")),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_with_spaces_and_parentheses_in_its_name_reads_utime_and_stime() {
        let ticks = clock_ticks_per_second();
        let line = "42 (a (b) c) S 1 42 42 0 -1 4194304 100 0 0 0 250 75 0 0 20 0 1 0 1 1 1";
        let cpu = CpuTimes::parse(line).expect("parse");
        assert_eq!(cpu.user_s, 250.0 / ticks);
        assert_eq!(cpu.system_s, 75.0 / ticks);
        assert!(CpuTimes::parse("42 (x) S 1").is_err());
    }

    #[test]
    fn the_floors_move_every_byte_and_record_of_a_round() {
        let spec = CpuSpec {
            partition_count: 2,
            records_per_partition: 64,
            records_per_batch: 16,
            versions: vec![4],
            fetch_bytes_min: 1,
            connections: 1,
        };
        let certificate = RunCertificate::generate().expect("certificate");
        let floors = floor_round(&spec, Some(&certificate)).expect("floors");
        assert_eq!(floors.len(), 5);
        let bytes = floors.first().expect("produce floor").bytes;
        let small = floors.get(1).expect("small floor");
        assert_eq!(small.records, 128 * SMALL_RECORDS_FACTOR);
        assert!(small.bytes < bytes * SMALL_RECORDS_FACTOR / 5);
        let rest = floors
            .iter()
            .filter(|floor| floor.path != FLOOR_PRODUCE_SMALL);
        assert!(rest
            .into_iter()
            .all(|floor| floor.bytes == bytes && floor.records == 128));
        let table = render(&floors);
        assert!(table.contains("floor: sendfile"), "{table}");
    }
}
