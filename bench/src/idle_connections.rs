//! Idle connections (issue 14 item 5): many clients that connected, asked ApiVersions once and
//! went quiet, and the `idle-connections` measurement built on them: a fresh client's ApiVersions
//! round trip (connect included) with none, with N below `max.connections`, and with the broker
//! full (where it must close the longest-idle connection to make room), and the broker's RSS
//! growth per idle connection.
//!
//! Must never: keep a connection past the measurement (they are dropped with the set), or count a
//! connection as open before the broker has answered on it.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Buf;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::client::request_frame;
use crate::kip283::machine::Machine;
use crate::kip283::rss;

/// Raises this process's soft RLIMIT_NOFILE to its hard limit if it is lower, and returns the soft
/// limit then in force: the client holds one socket per idle connection, as many as the broker.
/// A refused raise (a hard limit above the kernel's `nr_open`) keeps the old soft limit, which the
/// caller checks against what it needs. (The broker raises its own limit the same way at start.)
pub fn raise_open_file_limit() -> std::io::Result<u64> {
    let (soft, hard) = rlimit::Resource::NOFILE.get()?;
    if soft < hard && rlimit::Resource::NOFILE.set(hard, hard).is_ok() {
        return Ok(hard);
    }
    Ok(soft)
}

/// Connections opened at once while filling the broker (the kernel's accept queue and the
/// broker's accept loop take them in bursts of about this size).
pub const CONNECT_CONCURRENCY: usize = 256;

/// How long to wait after the broker is full before timing fresh clients, so the idle connections
/// are old enough to be evicted (the broker's `EVICTABLE_IDLE_MS_MIN`, 1 s, plus a margin).
pub const EVICTABLE_AFTER: Duration = Duration::from_millis(1300);

/// Largest ApiVersions response read (Skiff's is well under 1 KiB).
const API_VERSIONS_RESPONSE_BYTES_MAX: usize = 64 * 1024;

/// Connects to `broker` (from `source`'s address if given, port picked by the kernel).
pub async fn connect(
    broker: SocketAddr,
    source: Option<std::net::IpAddr>,
) -> anyhow::Result<TcpStream> {
    let socket = if broker.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    if let Some(source) = source {
        socket
            .bind(SocketAddr::new(source, 0))
            .with_context(|| format!("binding {source}"))?;
    }
    let stream = socket
        .connect(broker)
        .await
        .with_context(|| format!("connecting to {broker}"))?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Sends ApiVersions v0 and reads its answer, checking the correlation id and the error code.
pub async fn api_versions(stream: &mut TcpStream, correlation_id: i32) -> anyhow::Result<()> {
    let frame = request_frame(
        ApiKey::ApiVersions,
        0,
        correlation_id,
        &ApiVersionsRequest::default(),
    )?;
    stream.write_all(&frame).await?;
    let size = usize::try_from(stream.read_i32().await?).context("negative response size")?;
    if !(6..=API_VERSIONS_RESPONSE_BYTES_MAX).contains(&size) {
        bail!("ApiVersions response of {size} bytes");
    }
    let mut body = vec![0u8; size];
    stream.read_exact(&mut body).await?;
    let mut body = &body[..];
    let echoed = body.get_i32();
    if echoed != correlation_id {
        bail!("correlation id {echoed}, expected {correlation_id}");
    }
    let error_code = body.get_i16();
    if error_code != 0 {
        bail!("ApiVersions answered error {error_code}");
    }
    Ok(())
}

/// A fresh client's connection and how long it took to be answered.
pub struct FreshClient {
    /// Connect plus ApiVersions.
    pub took: Duration,
    /// Of which the connect (the kernel's share: the broker accepts after the handshake).
    pub connect_took: Duration,
    /// The connection (a caller that keeps it keeps its slot).
    pub stream: TcpStream,
}

/// A fresh client: connect, ApiVersions, answer.
pub async fn fresh_client_round_trip(broker: SocketAddr) -> anyhow::Result<FreshClient> {
    let started = Instant::now();
    let mut stream = connect(broker, None).await?;
    let connect_took = started.elapsed();
    api_versions(&mut stream, 1).await?;
    Ok(FreshClient {
        took: started.elapsed(),
        connect_took,
        stream,
    })
}

/// Whether the broker closed `stream` within `within` (end of stream or a reset), rather than
/// leaving it open.
pub async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut byte = [0u8; 1];
    matches!(
        tokio::time::timeout(within, stream.read(&mut byte)).await,
        Ok(Ok(0)) | Ok(Err(_))
    )
}

/// Whether the broker has closed `stream` as far as the reactor has seen, without waiting (an
/// idle connection has nothing else to read).
pub fn closed_now(stream: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match stream.try_read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(error) => error.kind() != std::io::ErrorKind::WouldBlock,
    }
}

/// Opens `count` connections to `broker`, each answered once (ApiVersions) before it goes idle,
/// [`CONNECT_CONCURRENCY`] at a time; returned in the order they were last active.
pub async fn open_idle(broker: SocketAddr, count: usize) -> anyhow::Result<Vec<TcpStream>> {
    let mut idle = Vec::with_capacity(count);
    while idle.len() < count {
        let batch = CONNECT_CONCURRENCY.min(count - idle.len());
        let mut opening = tokio::task::JoinSet::new();
        for index in 0..batch {
            opening.spawn(async move {
                let mut stream = connect(broker, None).await?;
                api_versions(&mut stream, 1).await?;
                anyhow::Ok((index, stream))
            });
        }
        let mut opened = Vec::with_capacity(batch);
        while let Some(result) = opening.join_next().await {
            opened.push(result??);
        }
        opened.sort_by_key(|(index, _)| *index);
        idle.extend(opened.into_iter().map(|(_, stream)| stream));
    }
    Ok(idle)
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct IdleConnectionsSpec {
    /// The broker's address.
    pub broker: SocketAddr,
    /// Its pid, for RSS.
    pub pid: Option<u32>,
    /// Idle connections to hold below the limit.
    pub count: usize,
    /// The broker's `max.connections`: at least `count`; the run fills it to time fresh clients at
    /// the limit.
    pub max_connections: usize,
    /// Fresh clients timed in each phase.
    pub fresh_clients: usize,
}

/// One phase's fresh-client round trips.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundTrips {
    /// Idle connections open when they were timed.
    pub idle_connections: usize,
    /// Each round trip (connect + ApiVersions), in ms.
    pub millis: Vec<f64>,
    /// The connect part of each, in ms.
    pub connect_millis: Vec<f64>,
}

impl RoundTrips {
    /// The slowest.
    pub fn max_ms(&self) -> f64 {
        self.millis.iter().copied().fold(0.0, f64::max)
    }

    /// The slowest connect.
    pub fn connect_max_ms(&self) -> f64 {
        self.connect_millis.iter().copied().fold(0.0, f64::max)
    }
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdleConnectionsRecord {
    /// The command line.
    pub command: String,
    /// The machine and its load before and after.
    pub machine_before: Machine,
    /// After.
    pub machine_after: Machine,
    /// No idle connections (the reference).
    pub empty: RoundTrips,
    /// `count` idle connections, below the limit.
    pub below_limit: RoundTrips,
    /// The broker full: each fresh client takes the slot of the longest-idle connection.
    pub at_limit: RoundTrips,
    /// Seconds to open the `count` idle connections.
    pub open_seconds: f64,
    /// The broker's VmRSS before and with `count` idle connections, in bytes.
    pub rss_before_bytes: Option<u64>,
    /// With them.
    pub rss_idle_bytes: Option<u64>,
    /// Idle connections the broker closed to make room in the at-limit phase.
    pub evicted_seen: usize,
    /// The latest-opened of them, by position in opening order (the longest idle are the first
    /// [`CONNECT_CONCURRENCY`], opened together).
    pub evicted_last_position: Option<usize>,
}

impl IdleConnectionsRecord {
    /// RSS growth per idle connection, in bytes.
    pub fn rss_per_connection_bytes(&self) -> Option<f64> {
        let (before, idle) = (self.rss_before_bytes?, self.rss_idle_bytes?);
        let count = self.below_limit.idle_connections;
        (count > 0).then(|| (idle as f64 - before as f64) / count as f64)
    }
}

/// Times `clients` fresh clients one after another; `held` keeps their connections open (at the
/// limit, so that each one must push out an idle connection rather than take the slot the
/// previous one left).
async fn time_fresh(
    broker: SocketAddr,
    idle_connections: usize,
    clients: usize,
    held: Option<&mut Vec<TcpStream>>,
) -> anyhow::Result<RoundTrips> {
    let mut millis = Vec::with_capacity(clients);
    let mut connect_millis = Vec::with_capacity(clients);
    let mut kept = Vec::new();
    for _ in 0..clients {
        let fresh = tokio::time::timeout(Duration::from_secs(30), fresh_client_round_trip(broker))
            .await
            .context("a fresh client got no answer within 30 s")??;
        millis.push(fresh.took.as_secs_f64() * 1e3);
        connect_millis.push(fresh.connect_took.as_secs_f64() * 1e3);
        kept.push(fresh.stream);
    }
    if let Some(held) = held {
        held.append(&mut kept);
    }
    Ok(RoundTrips {
        idle_connections,
        millis,
        connect_millis,
    })
}

/// Runs the measurement against a broker whose `max.connections` is `spec.max_connections`.
pub async fn measure(
    spec: &IdleConnectionsSpec,
    command: String,
) -> anyhow::Result<IdleConnectionsRecord> {
    if spec.max_connections < spec.count {
        bail!(
            "max.connections {} is below the idle count {}",
            spec.max_connections,
            spec.count
        );
    }
    let machine_before = Machine::now();
    let rss = |pid: Option<u32>| {
        pid.and_then(|pid| rss::read(pid).ok())
            .map(|memory| memory.rss_bytes)
    };
    let empty = time_fresh(spec.broker, 0, spec.fresh_clients, None).await?;
    let rss_before_bytes = rss(spec.pid);
    let started = Instant::now();
    let mut idle = open_idle(spec.broker, spec.count).await?;
    let open_seconds = started.elapsed().as_secs_f64();
    // The broker's tasks for the fresh clients are gone by now; let its allocator settle.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss_idle_bytes = rss(spec.pid);
    let below_limit = time_fresh(spec.broker, idle.len(), spec.fresh_clients, None).await?;
    // Fill the broker; a fresh client must then push out one of the longest idle.
    let spare = spec.max_connections - idle.len();
    idle.extend(open_idle(spec.broker, spare).await?);
    tokio::time::sleep(EVICTABLE_AFTER).await;
    let mut fresh = Vec::new();
    let at_limit = time_fresh(
        spec.broker,
        idle.len(),
        spec.fresh_clients,
        Some(&mut fresh),
    )
    .await?;
    // Give the reactor a moment to see the closes, then find them without waiting on each.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let evicted: Vec<usize> = idle
        .iter()
        .enumerate()
        .filter(|(_, stream)| closed_now(stream))
        .map(|(position, _)| position)
        .collect();
    drop(idle);
    drop(fresh);
    Ok(IdleConnectionsRecord {
        command,
        machine_before,
        machine_after: Machine::now(),
        empty,
        below_limit,
        at_limit,
        open_seconds,
        rss_before_bytes,
        rss_idle_bytes,
        evicted_seen: evicted.len(),
        evicted_last_position: evicted.last().copied(),
    })
}

/// The record as a markdown table.
pub fn markdown(record: &IdleConnectionsRecord) -> String {
    let mut out = String::new();
    out.push_str("| phase | idle connections | fresh ApiVersions round trip, max (ms) | of which connect, max (ms) | all (ms) |\n|---|---|---|---|---|\n");
    for (phase, trips) in [
        ("empty broker", &record.empty),
        ("below max.connections", &record.below_limit),
        (
            "at max.connections (evicts the longest idle)",
            &record.at_limit,
        ),
    ] {
        let all: Vec<String> = trips.millis.iter().map(|ms| format!("{ms:.1}")).collect();
        out.push_str(&format!(
            "| {phase} | {} | {:.1} | {:.1} | {} |\n",
            trips.idle_connections,
            trips.max_ms(),
            trips.connect_max_ms(),
            all.join(", ")
        ));
    }
    let mib = |bytes: Option<u64>| {
        bytes.map_or("?".to_owned(), |bytes| {
            format!("{:.1}", bytes as f64 / (1 << 20) as f64)
        })
    };
    out.push_str(&format!(
        "\nOpened {} idle connections in {:.1} s. Broker RSS {} MiB before, {} MiB with them: {} per connection. \
         At the limit {} idle connections were closed for {} fresh clients (kept open, so each needed one), the latest-opened of them at position {} (the first {CONNECT_CONCURRENCY} were opened together). Load average (1 min) {:.2} before, {:.2} after; {} cores.\n",
        record.below_limit.idle_connections,
        record.open_seconds,
        mib(record.rss_before_bytes),
        mib(record.rss_idle_bytes),
        record
            .rss_per_connection_bytes()
            .map_or("?".to_owned(), |bytes| format!("{:.1} KiB", bytes / 1024.0)),
        record.evicted_seen,
        record.at_limit.millis.len(),
        record
            .evicted_last_position
            .map_or("-".to_owned(), |position| position.to_string()),
        record.machine_before.load_average_1m,
        record.machine_after.load_average_1m,
        record.machine_before.cpu_count,
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_open_file_limit_is_raised_to_the_hard_one() {
        let soft = raise_open_file_limit().expect("getrlimit");
        let (now_soft, hard) = rlimit::Resource::NOFILE.get().expect("getrlimit");
        assert_eq!(soft, now_soft, "it returns the limit in force");
        // An unlimited hard limit cannot be a soft one on Linux (above nr_open): the raise is
        // refused then.
        assert!(
            now_soft == hard || hard == rlimit::INFINITY,
            "{soft} of {hard}"
        );
        assert_eq!(
            raise_open_file_limit().expect("getrlimit"),
            soft,
            "idempotent"
        );
    }
}
