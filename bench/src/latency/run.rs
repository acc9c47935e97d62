//! One timed phase: a producer thread sending on the fixed schedule with up to `in_flight_max`
//! Produce requests outstanding, an acknowledgement thread reading their answers on the same
//! connection, and a consumer thread long-polling Fetch v4 on its own connection. All three are
//! plain OS threads with blocking sockets, not tokio tasks: tokio's timer wheel has millisecond
//! granularity, which would add up to a millisecond of the *client's* lateness to sub-millisecond
//! broker latencies; a thread sleeping with a 1 ns timer slack wakes within microseconds.
//!
//! Must never: keep more than `in_flight_max` requests outstanding, run past its deadline, or
//! accept a message at an offset other than its sequence number (lost, duplicated or reordered
//! messages fail the phase).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use skiff_protocol::records::record::{batch_records, BatchBuilder, NewRecord};
use skiff_protocol::records::{v2, Compression};

use super::histogram::LatencyHistogram;
use super::schedule::Schedule;
use super::{read_value, write_value, Stamp, MESSAGE_VALUE_BYTES};
use crate::client::{
    fetch_request, produce_base_offset, produce_request, request_frame, PRODUCE_VERSION,
};
use crate::responses::fetch_v4;

/// The Fetch version the consumer long-polls with: the lowest Apache Kafka 4.x serves, and v2
/// batches as stored.
pub const FETCH_VERSION: i16 = 4;

/// Largest Produce response accepted (one topic, one partition: a few dozen bytes).
const PRODUCE_RESPONSE_BYTES_MAX: usize = 64 << 10;

/// The consumer's per-partition and per-response fetch limit.
const FETCH_BYTES_MAX: i32 = 1 << 20;

/// Largest Fetch response accepted: the limit above plus room for a first batch above it, as
/// brokers may send.
const FETCH_RESPONSE_BYTES_MAX: usize = 16 << 20;

/// Largest decompressed batch the consumer accepts (it produced none compressed).
const DECOMPRESSED_BYTES_MAX: usize = 16 << 20;

/// How one phase runs.
#[derive(Debug, Clone)]
pub struct PhaseSpec {
    /// host:port of the broker.
    pub bootstrap: String,
    /// A topic with one partition, created empty for this phase.
    pub topic: String,
    /// When each message is due.
    pub schedule: Schedule,
    /// Stop sending at this time (ns since the start) even if the schedule has more; the
    /// unthrottled phase that measures the maximum rate ends this way.
    pub send_until_nanos: u64,
    /// Produce acks (1 or −1).
    pub acks: i16,
    /// Records per Produce request at most (what a Kafka producer's `batch.size` allows).
    pub batch_records_max: u64,
    /// Produce requests outstanding at most (`max.in.flight.requests.per.connection`).
    pub in_flight_max: usize,
    /// Messages intended before this (ns since the start) are sent but not recorded.
    pub warmup_nanos: u64,
    /// Whether latencies are recorded at all (not for the unthrottled phase, where every message
    /// is "due" at the start).
    pub record_latency: bool,
    /// The Fetch long-poll `max_wait_ms`.
    pub fetch_max_wait_ms: i32,
    /// How long after the last send the consumer may take to see every message.
    pub drain_timeout: Duration,
}

/// What one phase measured.
#[derive(Debug, Clone)]
pub struct PhaseOutcome {
    /// Intended send time → acknowledgement read.
    pub produce: LatencyHistogram,
    /// Intended send time → fetched by the consumer.
    pub end_to_end: LatencyHistogram,
    /// Intended send time → the request carrying it was written (the client's own lateness).
    pub send_lateness: LatencyHistogram,
    /// Messages acknowledged.
    pub acked_count: u64,
    /// Messages consumed.
    pub consumed_count: u64,
    /// Seconds from the start to the last acknowledgement.
    pub acked_seconds: f64,
    /// Seconds from the start until the consumer had every message.
    pub consumed_seconds: f64,
}

impl PhaseOutcome {
    /// Acknowledged messages per second over the phase.
    pub fn acked_per_second(&self) -> f64 {
        self.acked_count as f64 / self.acked_seconds.max(f64::MIN_POSITIVE)
    }

    /// Messages per second both acknowledged and consumed: what the broker sustains end to end.
    /// An unthrottled producer alone can outrun the consumer for a few seconds (the consumer
    /// catches up after the last send), which is not a rate the broker can keep.
    pub fn end_to_end_per_second(&self) -> f64 {
        self.acked_count as f64
            / self
                .acked_seconds
                .max(self.consumed_seconds)
                .max(f64::MIN_POSITIVE)
    }
}

/// Why a thread of a phase ended because another one failed; the phase reports that other
/// thread's error instead.
#[derive(Debug)]
struct Stopped;

impl std::fmt::Display for Stopped {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("stopped: another thread of the phase failed")
    }
}

impl std::error::Error for Stopped {}

/// A request the acknowledgement thread must read the answer to.
struct InFlight {
    correlation_id: i32,
    messages: Range<u64>,
}

/// Nanoseconds since `epoch`.
fn nanos_since(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Reads one size-prefixed response frame (without the prefix), refusing sizes above `bytes_max`.
fn read_frame(stream: &mut TcpStream, bytes_max: usize) -> anyhow::Result<Vec<u8>> {
    let mut prefix = [0u8; 4];
    stream.read_exact(&mut prefix)?;
    let size = usize::try_from(i32::from_be_bytes(prefix)).context("negative response size")?;
    if size > bytes_max {
        bail!("a response of {size} bytes is above this client's limit of {bytes_max}");
    }
    let mut frame = vec![0u8; size];
    stream.read_exact(&mut frame)?;
    Ok(frame)
}

fn connect(bootstrap: &str) -> anyhow::Result<TcpStream> {
    let stream =
        TcpStream::connect(bootstrap).with_context(|| format!("connecting to {bootstrap}"))?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Lets this thread's sleeps end within microseconds of their deadline: Linux's default timer
/// slack (50 µs) would otherwise be added to every scheduled send.
fn tighten_timer_slack() {
    // SAFETY: prctl(PR_SET_TIMERSLACK) takes an integer argument and touches only this thread's
    // timer slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// One v2 batch of `messages`, each value stamped with its sequence and intended time.
fn stamped_batch(
    schedule: &Schedule,
    messages: Range<u64>,
    value: &mut Vec<u8>,
) -> anyhow::Result<Bytes> {
    let timestamp_ms = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis(),
    )?;
    let mut builder = BatchBuilder::new(0, Compression::None);
    builder.reserve(usize::try_from(messages.end - messages.start)? * (MESSAGE_VALUE_BYTES + 16));
    for (delta, sequence) in messages.enumerate() {
        write_value(
            Stamp {
                sequence,
                intended_nanos: schedule.intended_nanos(sequence),
            },
            value,
        );
        builder.push(&NewRecord {
            offset_delta: i32::try_from(delta)?,
            timestamp: timestamp_ms,
            key: None,
            value: Some(value),
            headers: &[],
        })?;
    }
    Ok(Bytes::from(builder.build()?))
}

/// The producer thread: sends every due message when a request slot is free.
fn produce(
    spec: &PhaseSpec,
    epoch: Instant,
    mut stream: TcpStream,
    in_flight: mpsc::Sender<InFlight>,
    freed: mpsc::Receiver<()>,
    stop: &AtomicBool,
    lateness: &mut LatencyHistogram,
) -> anyhow::Result<u64> {
    tighten_timer_slack();
    let schedule = spec.schedule;
    let (mut outstanding, mut sent, mut correlation_id) = (0usize, 0u64, 0i32);
    let mut value = Vec::with_capacity(MESSAGE_VALUE_BYTES);
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err(Stopped.into());
        }
        while outstanding >= spec.in_flight_max.max(1) {
            freed.recv().context("the acknowledgement thread ended")?;
            outstanding -= 1;
        }
        while freed.try_recv().is_ok() {
            outstanding -= 1;
        }
        let now = nanos_since(epoch);
        if now >= spec.send_until_nanos {
            break;
        }
        let messages = match schedule.next_batch(sent, now, spec.batch_records_max) {
            None => break,
            Some(Err(wait_until)) => {
                std::thread::sleep(Duration::from_nanos(
                    wait_until.min(spec.send_until_nanos) - now,
                ));
                continue;
            }
            Some(Ok(messages)) => messages,
        };
        let batch = stamped_batch(&schedule, messages.clone(), &mut value)?;
        correlation_id += 1;
        let request = produce_request(&spec.topic, spec.acks, &[(0, batch)]);
        let frame = request_frame(ApiKey::Produce, PRODUCE_VERSION, correlation_id, &request)?;
        stream.write_all(&frame)?;
        let written = nanos_since(epoch);
        if spec.record_latency {
            for index in messages.clone() {
                let intended = schedule.intended_nanos(index);
                if intended >= spec.warmup_nanos {
                    lateness.record(intended, written);
                }
            }
        }
        sent = messages.end;
        outstanding += 1;
        in_flight
            .send(InFlight {
                correlation_id,
                messages,
            })
            .context("the acknowledgement thread ended")?;
    }
    Ok(sent)
}

/// The acknowledgement thread: reads the Produce answers in order.
fn acknowledge(
    spec: &PhaseSpec,
    epoch: Instant,
    mut stream: TcpStream,
    in_flight: mpsc::Receiver<InFlight>,
    freed: mpsc::Sender<()>,
    histogram: &mut LatencyHistogram,
) -> anyhow::Result<(u64, u64)> {
    let (mut acked, mut last_nanos) = (0u64, 0u64);
    for request in in_flight {
        let frame = read_frame(&mut stream, PRODUCE_RESPONSE_BYTES_MAX)?;
        let now = nanos_since(epoch);
        let base_offset = produce_base_offset(&frame, request.correlation_id)?;
        if u64::try_from(base_offset).ok() != Some(request.messages.start) {
            bail!(
                "messages from {} were appended at offset {base_offset}",
                request.messages.start
            );
        }
        if spec.record_latency {
            for index in request.messages.clone() {
                let intended = spec.schedule.intended_nanos(index);
                if intended >= spec.warmup_nanos {
                    histogram.record(intended, now);
                }
            }
        }
        acked += request.messages.end - request.messages.start;
        last_nanos = now;
        // The producer may have finished; then nobody waits for the slot.
        let _ = freed.send(());
    }
    Ok((acked, last_nanos))
}

/// The consumer thread: long-polls the partition from offset 0 until it has seen every message
/// the producer sent (`sent_total`, known once the producer ends) or the deadline passes. Returns
/// the count and when the last message arrived.
fn consume(
    spec: &PhaseSpec,
    epoch: Instant,
    sent_total: &AtomicU64,
    stop: &AtomicBool,
    histogram: &mut LatencyHistogram,
) -> anyhow::Result<(u64, u64)> {
    let mut stream = connect(&spec.bootstrap)?;
    let (mut offset, mut correlation_id, mut last_nanos) = (0i64, 0i32, 0u64);
    let mut scratch = Vec::new();
    let mut producer_done_at: Option<Instant> = None;
    loop {
        let total = sent_total.load(Ordering::Acquire);
        if u64::try_from(offset).unwrap_or(0) >= total {
            return Ok((total, last_nanos));
        }
        if total != u64::MAX {
            let done_at = *producer_done_at.get_or_insert_with(Instant::now);
            if done_at.elapsed() > spec.drain_timeout {
                bail!(
                    "consumed {offset} of {total} messages within {:?} of the last send",
                    spec.drain_timeout
                );
            }
        }
        if stop.load(Ordering::Relaxed) {
            return Err(Stopped.into());
        }
        correlation_id += 1;
        let request = fetch_request(
            &spec.topic,
            0,
            offset,
            FETCH_BYTES_MAX,
            FETCH_BYTES_MAX,
            spec.fetch_max_wait_ms,
        );
        stream.write_all(&request_frame(
            ApiKey::Fetch,
            FETCH_VERSION,
            correlation_id,
            &request,
        )?)?;
        let frame = read_frame(&mut stream, FETCH_RESPONSE_BYTES_MAX)?;
        let now = nanos_since(epoch);
        for partition in fetch_v4(&frame, correlation_id).context("decoding the Fetch response")? {
            if partition.error_code != 0 {
                bail!(
                    "fetch at offset {offset} failed with error {}",
                    partition.error_code
                );
            }
            for item in v2::batch_positions(partition.records) {
                let (position, header) = item?;
                if header.next_offset() <= offset {
                    continue;
                }
                let batch = &partition.records[position..position + header.total_bytes()];
                for record in batch_records(batch, &header, &mut scratch, DECOMPRESSED_BYTES_MAX)? {
                    let record = record?;
                    if record.offset < offset {
                        continue;
                    }
                    let stamp = record.value.and_then(read_value).with_context(|| {
                        format!(
                            "offset {} holds a value this run did not write",
                            record.offset
                        )
                    })?;
                    if i64::try_from(stamp.sequence).ok() != Some(record.offset)
                        || record.offset != offset
                    {
                        bail!(
                            "message {} found at offset {} while expecting offset {offset}",
                            stamp.sequence,
                            record.offset
                        );
                    }
                    if spec.record_latency && stamp.intended_nanos >= spec.warmup_nanos {
                        histogram.record(stamp.intended_nanos, now);
                    }
                    offset += 1;
                    last_nanos = now;
                }
            }
        }
    }
}

/// Raises `stop` when `result` is an error, so the phase's other threads end too.
fn flag_failure<T>(stop: &AtomicBool, result: anyhow::Result<T>) -> anyhow::Result<T> {
    if result.is_err() {
        stop.store(true, Ordering::Relaxed);
    }
    result
}

/// A joined thread's result, a panic being an error.
fn joined<T>(result: std::thread::Result<anyhow::Result<T>>, name: &str) -> anyhow::Result<T> {
    result.map_err(|_| anyhow::anyhow!("the {name} thread panicked"))?
}

/// Runs one phase on a fresh, empty one-partition topic.
pub fn run_phase(spec: &PhaseSpec) -> anyhow::Result<PhaseOutcome> {
    let producer_stream = connect(&spec.bootstrap)?;
    let reader_stream = producer_stream.try_clone()?;
    let (in_flight_sender, in_flight_receiver) = mpsc::channel();
    let (freed_sender, freed_receiver) = mpsc::channel();
    let stop = AtomicBool::new(false);
    let sent_total = AtomicU64::new(u64::MAX);
    let mut produce_histogram = LatencyHistogram::new();
    let mut end_to_end = LatencyHistogram::new();
    let mut lateness = LatencyHistogram::new();
    let epoch = Instant::now();
    let (sent, acked, consumed) = std::thread::scope(|scope| {
        let consumer = scope.spawn(|| {
            flag_failure(
                &stop,
                consume(spec, epoch, &sent_total, &stop, &mut end_to_end),
            )
        });
        let acknowledger = scope.spawn(|| {
            flag_failure(
                &stop,
                acknowledge(
                    spec,
                    epoch,
                    reader_stream,
                    in_flight_receiver,
                    freed_sender,
                    &mut produce_histogram,
                ),
            )
        });
        let sent = flag_failure(
            &stop,
            produce(
                spec,
                epoch,
                producer_stream,
                in_flight_sender,
                freed_receiver,
                &stop,
                &mut lateness,
            ),
        );
        if let Ok(sent) = &sent {
            sent_total.store(*sent, Ordering::Release);
        }
        let acked = acknowledger.join();
        let consumed = consumer.join();
        (sent, acked, consumed)
    });
    let sent = sent.context("producer");
    let acked = joined(acked, "acknowledgement").context("acknowledgements");
    let consumed = joined(consumed, "consumer").context("consumer");
    // The thread that failed first, not one that stopped because of it.
    let cause = [
        sent.as_ref().err(),
        acked.as_ref().err(),
        consumed.as_ref().err(),
    ]
    .into_iter()
    .flatten()
    .find(|error| error.downcast_ref::<Stopped>().is_none());
    if let Some(cause) = cause {
        bail!("{cause:#}");
    }
    let (sent, (acked_count, last_ack_nanos), (consumed_count, last_consumed_nanos)) =
        (sent?, acked?, consumed?);
    if acked_count != sent || consumed_count != sent {
        bail!("sent {sent}, acknowledged {acked_count}, consumed {consumed_count}");
    }
    Ok(PhaseOutcome {
        produce: produce_histogram,
        end_to_end,
        send_lateness: lateness,
        acked_count,
        consumed_count,
        acked_seconds: last_ack_nanos as f64 / 1e9,
        consumed_seconds: last_consumed_nanos as f64 / 1e9,
    })
}
