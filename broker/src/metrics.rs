//! Counters, gauges and histograms the broker keeps about itself, and their Prometheus text
//! rendering (the endpoint that serves it is `ops::http`). The converted-bytes-in-flight
//! gauge is the visible proof that legacy fetches hold at most one chunk each.
//!
//! Recording is plain atomics, with one exception: the per-topic conversion counter (Kafka's
//! per-topic `FetchMessageConversionsPerSec`) is a map under a mutex, taken once per converted
//! record set (not per record or chunk), which allocates only the first time a topic is seen.
//!
//! A leaf: every part of the broker counts here, so this module imports no other folder of the
//! broker (only its own [`traffic`] counters and the workspace's pure crates).
//!
//! Must never: block on the hot path, allocate there beyond a topic's first conversion
//! (rendering a scrape allocates), or import another folder of the broker.

pub mod traffic;

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use skiff_cluster::records::TrafficRecord;
use skiff_cluster::traffic::TrafficCounts;

use traffic::TrafficCounters;

/// One past the highest Kafka API key counted per API (keys at or above it share the last slot;
/// the broker serves none of them).
pub const API_KEY_SLOTS: usize = 76;

/// What a handled request leaves for the connection to record once its response is written
/// ([`Metrics::request_done`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Served {
    /// Its API key.
    pub(crate) api_key: i16,
    /// Its frame's bytes.
    pub(crate) bytes_in: usize,
    /// Its response's bytes, as known when the response is laid out.
    pub(crate) bytes_out: u64,
    /// How long it waited on others (a Fetch's long poll, an acks=all Produce's wait for
    /// followers): left out of its service time, as Kafka leaves `RemoteTimeMs` out.
    pub(crate) remote: std::time::Duration,
}

/// Upper bounds of the request-latency histogram buckets, in milliseconds (Prometheus `le`).
pub const LATENCY_BUCKETS_MS: [u64; 13] = [
    1, 2, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000,
];
/// Upper bounds of the service-time histogram buckets, in microseconds: fine below and around
/// 1 ms (the bound a request's service time is judged by), coarser above.
pub const SERVICE_TIME_BUCKETS_US: [u64; 24] = [
    25, 50, 75, 100, 150, 200, 250, 300, 400, 500, 600, 750, 1_000, 1_500, 2_000, 3_000, 5_000,
    10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
];
/// Upper bounds of the conversion-time histogram buckets, in microseconds.
pub const CONVERSION_TIME_BUCKETS_US: [u64; 10] = [
    10, 50, 100, 500, 1_000, 5_000, 10_000, 50_000, 100_000, 1_000_000,
];
/// Upper bounds of the conversion temporary-memory histogram buckets, in bytes.
pub const CONVERSION_MEMORY_BUCKETS_BYTES: [u64; 9] = [
    1_024,
    16_384,
    65_536,
    262_144,
    1_048_576,
    4_194_304,
    16_777_216,
    67_108_864,
    268_435_456,
];

/// `api_key`'s slot of a per-API-key array: the last slot for a key outside it (negative, or past
/// the keys Skiff knows). `None` only for an empty array.
fn api_key_slot<T>(slots: &[T; API_KEY_SLOTS], api_key: i16) -> Option<&T> {
    usize::try_from(api_key)
        .ok()
        .and_then(|slot| slots.get(slot))
        .or(slots.last())
}

/// `value` rounded to the nearest whole number, for an integer gauge.
// INVARIANT: an f64 to i64 `as` saturates (NaN gives 0), which is what a gauge wants.
#[allow(clippy::cast_possible_truncation)]
pub(crate) fn rounded_gauge(value: f64) -> i64 {
    value.round() as i64
}

/// A cumulative histogram over fixed bucket bounds (each observation counted once, in the first
/// bucket whose bound holds it; rendering accumulates).
#[derive(Debug)]
struct Histogram<const N: usize> {
    bounds: [u64; N],
    /// One per bound, plus the overflow (+Inf) bucket last.
    counts: [AtomicU64; N],
    overflow: AtomicU64,
    sum: AtomicU64,
}

impl<const N: usize> Histogram<N> {
    fn new(bounds: [u64; N]) -> Self {
        Self {
            bounds,
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            overflow: AtomicU64::new(0),
            sum: AtomicU64::new(0),
        }
    }

    fn observe(&self, value: u64) {
        match self
            .bounds
            .iter()
            .zip(&self.counts)
            .find(|(bound, _)| value <= **bound)
        {
            Some((_, count)) => count.fetch_add(1, Ordering::Relaxed),
            None => self.overflow.fetch_add(1, Ordering::Relaxed),
        };
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    fn count(&self) -> u64 {
        self.counts
            .iter()
            .map(|count| count.load(Ordering::Relaxed))
            .sum::<u64>()
            + self.overflow.load(Ordering::Relaxed)
    }

    /// Prometheus lines for this histogram; `labels` is empty or `key="value",`.
    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0u64;
        for (bound, count) in self.bounds.iter().zip(&self.counts) {
            cumulative += count.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels}le=\"{bound}\"}} {cumulative}");
        }
        cumulative += self.overflow.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels}le=\"+Inf\"}} {cumulative}");
        let sum = self.sum.load(Ordering::Relaxed);
        let labels = labels.trim_end_matches(',');
        let braced = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let _ = writeln!(out, "{name}_sum{braced} {sum}");
        let _ = writeln!(out, "{name}_count{braced} {cumulative}");
    }
}

/// Topics with their own conversion series; more share [`CONVERSION_TOPICS_OVERFLOW`].
pub const CONVERSION_TOPICS_MAX: usize = 10_000;
/// The series of topics beyond [`CONVERSION_TOPICS_MAX`] (a name no topic can have: `*` is not a
/// legal topic character).
pub const CONVERSION_TOPICS_OVERFLOW: &str = "*other*";

/// A part of the broker that keeps its own figures (the cluster glue, the controller's shedder,
/// the replicas' gauges) and writes its own metric families at each scrape. It registers once,
/// when the broker starts ([`Metrics::register`]), so this leaf never reaches into it.
pub(crate) trait MetricsSection: Send + Sync {
    /// Writes this section's families.
    fn render(&self, out: &mut Exposition);
}

/// The sections registered, rendered in the order they registered.
#[derive(Default)]
struct Sections(RwLock<Vec<Arc<dyn MetricsSection>>>);

impl std::fmt::Debug for Sections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count = self.0.read().map_or(0, |sections| sections.len());
        write!(f, "Sections({count})")
    }
}

/// Broker-wide figures.
#[derive(Debug)]
pub struct Metrics {
    connections: AtomicI64,
    /// New connections closed at once: their address was at `max.connections.per.ip`.
    connections_refused_per_ip: AtomicU64,
    /// New connections closed at once: `max.connections` were open, none idle enough to evict.
    connections_refused_full: AtomicU64,
    /// Idle connections closed to make room for a new one at `max.connections`.
    connections_evicted: AtomicU64,
    converted_bytes_in_flight: AtomicI64,
    converted_bytes_in_flight_peak: AtomicI64,
    /// The most bytes one planned legacy response held besides its chunk (its header bytes and
    /// planned record sets).
    legacy_plan_bytes_peak: AtomicU64,
    records_converted: AtomicU64,
    conversions: AtomicU64,
    /// Kafka's per-topic `FetchMessageConversionsPerSec`: records converted, by topic.
    records_converted_by_topic: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
    conversion_temporary_bytes: AtomicU64,
    conversion_nanos: AtomicU64,
    conversion_time_us: Histogram<10>,
    conversion_memory_bytes: Histogram<9>,
    request_latency_ms: [Histogram<13>; API_KEY_SLOTS],
    /// Frame received to response written, less the request's remote waits (Kafka's
    /// `TotalTimeMs` less `RemoteTimeMs`), by API key.
    service_time_us: [Histogram<24>; API_KEY_SLOTS],
    request_bytes_in: AtomicU64,
    response_bytes_out: AtomicU64,
    /// Requests (or parts of requests) refused by the ACLs, by API key.
    authorization_failures: [AtomicU64; API_KEY_SLOTS],
    /// ISR changes this broker's leaders wrote to the store, and those the store refused.
    isr_changes: AtomicU64,
    isr_changes_refused: AtomicU64,
    /// Fetch responses from a leader that did not decode.
    replica_fetch_decode_errors: AtomicU64,
    /// Record bytes and records through this broker: the partitions' gains, added up at each
    /// load sample (so the request paths share no counter).
    pub(crate) traffic: TrafficCounters,
    /// The traffic rates of the last load sample, as `f64` bits: bytes in, replication bytes in,
    /// bytes out, records in per second.
    traffic_rates: [AtomicU64; 4],
    /// The parts that render their own families after these.
    sections: Sections,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            connections: AtomicI64::new(0),
            connections_refused_per_ip: AtomicU64::new(0),
            connections_refused_full: AtomicU64::new(0),
            connections_evicted: AtomicU64::new(0),
            converted_bytes_in_flight: AtomicI64::new(0),
            converted_bytes_in_flight_peak: AtomicI64::new(0),
            legacy_plan_bytes_peak: AtomicU64::new(0),
            records_converted: AtomicU64::new(0),
            conversions: AtomicU64::new(0),
            records_converted_by_topic: std::sync::Mutex::new(std::collections::BTreeMap::new()),
            conversion_temporary_bytes: AtomicU64::new(0),
            conversion_nanos: AtomicU64::new(0),
            conversion_time_us: Histogram::new(CONVERSION_TIME_BUCKETS_US),
            conversion_memory_bytes: Histogram::new(CONVERSION_MEMORY_BUCKETS_BYTES),
            request_latency_ms: std::array::from_fn(|_| Histogram::new(LATENCY_BUCKETS_MS)),
            service_time_us: std::array::from_fn(|_| Histogram::new(SERVICE_TIME_BUCKETS_US)),
            request_bytes_in: AtomicU64::new(0),
            response_bytes_out: AtomicU64::new(0),
            authorization_failures: std::array::from_fn(|_| AtomicU64::new(0)),
            isr_changes: AtomicU64::new(0),
            isr_changes_refused: AtomicU64::new(0),
            replica_fetch_decode_errors: AtomicU64::new(0),
            traffic: TrafficCounters::default(),
            traffic_rates: std::array::from_fn(|_| AtomicU64::new(0f64.to_bits())),
            sections: Sections::default(),
        }
    }
}

impl Metrics {
    /// An ISR change proposed by a leader here: `written`, or refused / unanswered.
    pub(crate) fn record_isr_change(&self, written: bool) {
        if written {
            self.isr_changes.fetch_add(1, Ordering::Relaxed);
        } else {
            self.isr_changes_refused.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A leader's Fetch response did not decode.
    pub(crate) fn record_replica_fetch_decode_error(&self) {
        self.replica_fetch_decode_errors
            .fetch_add(1, Ordering::Relaxed);
    }

    /// ISR changes written by leaders here, and those refused or unanswered.
    pub fn isr_changes(&self) -> (u64, u64) {
        (
            self.isr_changes.load(Ordering::Relaxed),
            self.isr_changes_refused.load(Ordering::Relaxed),
        )
    }

    pub(crate) fn connection_opened(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn connection_closed(&self) {
        self.connections.fetch_sub(1, Ordering::Relaxed);
    }

    /// Open connections.
    pub fn connections(&self) -> i64 {
        self.connections.load(Ordering::Relaxed)
    }

    pub(crate) fn connection_refused_per_ip(&self) {
        self.connections_refused_per_ip
            .fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn connection_refused_full(&self) {
        self.connections_refused_full
            .fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn connection_evicted(&self) {
        self.connections_evicted.fetch_add(1, Ordering::Relaxed);
    }

    /// New connections closed at once since start: (over `max.connections.per.ip`, at
    /// `max.connections` with nothing to evict).
    pub fn connections_refused(&self) -> (u64, u64) {
        (
            self.connections_refused_per_ip.load(Ordering::Relaxed),
            self.connections_refused_full.load(Ordering::Relaxed),
        )
    }

    /// Idle connections closed to make room since start.
    pub fn connections_evicted(&self) -> u64 {
        self.connections_evicted.load(Ordering::Relaxed)
    }

    /// A converted chunk (and the source it came from) is now held in memory.
    pub(crate) fn converted_bytes_acquired(&self, bytes: usize) {
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        let now = self
            .converted_bytes_in_flight
            .fetch_add(bytes, Ordering::Relaxed)
            + bytes;
        self.converted_bytes_in_flight_peak
            .fetch_max(now, Ordering::Relaxed);
    }

    /// That chunk has been written and dropped.
    pub(crate) fn converted_bytes_released(&self, bytes: usize) {
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        self.converted_bytes_in_flight
            .fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Converted bytes held by all responses now.
    pub fn converted_bytes_in_flight(&self) -> i64 {
        self.converted_bytes_in_flight.load(Ordering::Relaxed)
    }

    /// The highest [`Metrics::converted_bytes_in_flight`] seen since start.
    pub fn converted_bytes_in_flight_peak(&self) -> i64 {
        self.converted_bytes_in_flight_peak.load(Ordering::Relaxed)
    }

    /// A legacy response was planned holding `bytes` until it is written (besides its chunk).
    pub(crate) fn legacy_plan_held(&self, bytes: usize) {
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        self.legacy_plan_bytes_peak
            .fetch_max(bytes, Ordering::Relaxed);
    }

    /// The most bytes one planned legacy response held besides its chunk, since start.
    pub fn legacy_plan_bytes_peak(&self) -> u64 {
        self.legacy_plan_bytes_peak.load(Ordering::Relaxed)
    }

    /// Adds one finished conversion's figures: the caller passes the totals of one converted
    /// record set (all its chunks summed), so each histogram observation is one conversion.
    pub(crate) fn conversion_done(
        &self,
        topic: &str,
        records: u64,
        temporary_bytes: u64,
        nanos: u64,
    ) {
        if let Ok(mut by_topic) = self.records_converted_by_topic.lock() {
            // A known topic's counter is found by its name, without allocating; a topic's name
            // is copied once, the first time it is converted. Bounded: topics beyond the cap
            // share one series rather than grow the map.
            let key = if by_topic.len() < CONVERSION_TOPICS_MAX || by_topic.contains_key(topic) {
                topic
            } else {
                CONVERSION_TOPICS_OVERFLOW
            };
            match by_topic.get_mut(key) {
                Some(count) => *count += records,
                None => {
                    by_topic.insert(key.to_owned(), records);
                }
            }
        }
        self.conversions.fetch_add(1, Ordering::Relaxed);
        self.records_converted.fetch_add(records, Ordering::Relaxed);
        self.conversion_temporary_bytes
            .fetch_add(temporary_bytes, Ordering::Relaxed);
        self.conversion_nanos.fetch_add(nanos, Ordering::Relaxed);
        self.conversion_time_us.observe(nanos / 1_000);
        self.conversion_memory_bytes.observe(temporary_bytes);
    }

    /// Records down-converted since start.
    pub fn records_converted(&self) -> u64 {
        self.records_converted.load(Ordering::Relaxed)
    }

    /// Down-conversions (converted record sets) since start.
    pub fn conversions(&self) -> u64 {
        self.conversions.load(Ordering::Relaxed)
    }

    /// One request finished, `elapsed` from its frame received to its response's last byte
    /// handed to the socket (or, with no response, to the end of its handling): its latency (the
    /// whole of it), its service time (less its remote waits, in µs) and its bytes in and out
    /// (response bytes known up front; lazily converted bytes are counted by the conversion
    /// figures). One clock read, by the caller, serves both histograms.
    pub(crate) fn request_done(&self, served: &Served, elapsed: std::time::Duration) {
        let ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        if let Some(latency) = api_key_slot(&self.request_latency_ms, served.api_key) {
            latency.observe(ms);
        }
        let service = elapsed.saturating_sub(served.remote);
        if let Some(histogram) = api_key_slot(&self.service_time_us, served.api_key) {
            histogram.observe(u64::try_from(service.as_micros()).unwrap_or(u64::MAX));
        }
        self.request_bytes_in.fetch_add(
            u64::try_from(served.bytes_in).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        self.response_bytes_out
            .fetch_add(served.bytes_out, Ordering::Relaxed);
    }

    /// One authorization refusal (a topic, group or cluster check that failed) for `api_key`.
    pub(crate) fn authorization_failed(&self, api_key: i16) {
        if let Some(failures) = api_key_slot(&self.authorization_failures, api_key) {
            failures.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Authorization refusals for one API key since start.
    pub fn authorization_failures(&self, api_key: i16) -> u64 {
        usize::try_from(api_key)
            .ok()
            .and_then(|slot| self.authorization_failures.get(slot))
            .map_or(0, |count| count.load(Ordering::Relaxed))
    }

    /// Record bytes and records through this broker since start, as of its last load sample:
    /// appended from Produce and by follower fetches, sent in Fetch responses.
    pub fn traffic_totals(&self) -> TrafficCounts {
        self.traffic.read()
    }

    /// Keeps the traffic rates this broker last measured (its load sample), for the gauges.
    pub(crate) fn set_traffic_rates(&self, traffic: &TrafficRecord) {
        let rates = [
            traffic.bytes_in_per_second,
            traffic.replication_bytes_in_per_second,
            traffic.bytes_out_per_second,
            traffic.messages_in_per_second,
        ];
        for (slot, rate) in self.traffic_rates.iter().zip(rates) {
            slot.store(rate.to_bits(), Ordering::Relaxed);
        }
    }

    /// The traffic rates last measured, rounded: bytes in, replication bytes in, bytes out and
    /// records in per second.
    fn traffic_rates(&self) -> [i64; 4] {
        self.traffic_rates
            .each_ref()
            .map(|slot| rounded_gauge(f64::from_bits(slot.load(Ordering::Relaxed))))
    }

    /// Response bytes since start, as each response was planned: its fields, stored records and
    /// converted records (at their declared size, which is what goes on the wire).
    pub fn bytes_out_total(&self) -> u64 {
        self.response_bytes_out.load(Ordering::Relaxed)
    }

    /// Requests handled for one API key since start.
    pub fn requests(&self, api_key: i16) -> u64 {
        usize::try_from(api_key)
            .ok()
            .and_then(|slot| self.request_latency_ms.get(slot))
            .map_or(0, Histogram::count)
    }

    /// Adds a section whose families every scrape renders after the broker-wide ones.
    pub(crate) fn register(&self, section: Arc<dyn MetricsSection>) {
        match self.sections.0.write() {
            Ok(mut sections) => sections.push(section),
            // No writer panics while holding the lock (it only pushes); keep what is there.
            Err(poisoned) => poisoned.into_inner().push(section),
        }
    }

    /// Every figure in the Prometheus text format (version 0.0.4): the broker-wide families,
    /// then each registered section's.
    pub fn render_prometheus(&self) -> String {
        let mut out = Exposition::default();
        self.render_traffic(&mut out);
        self.render_request_times(&mut out);
        self.render_authorization(&mut out);
        self.render_down_conversion(&mut out);
        self.render_replication(&mut out);
        let sections = match self.sections.0.read() {
            Ok(sections) => sections.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        for section in sections {
            section.render(&mut out);
        }
        out.text
    }

    /// The replication counters (the per-partition gauges come from `replication`).
    fn render_replication(&self, out: &mut Exposition) {
        let (written, refused) = self.isr_changes();
        out.counter(
            "skiff_isr_changes_total",
            "ISR shrinks and expansions written to the metadata store by leaders on this broker.",
            written,
        );
        out.counter(
            "skiff_isr_changes_refused_total",
            "ISR changes refused by the store (a stale revision, a lapsed session) or unanswered.",
            refused,
        );
        out.counter(
            "skiff_replica_fetch_decode_errors_total",
            "Fetch responses from a leader that did not decode (the fetch is retried).",
            self.replica_fetch_decode_errors.load(Ordering::Relaxed),
        );
    }

    /// Connections, and request and record bytes in and out.
    fn render_traffic(&self, out: &mut Exposition) {
        out.gauge(
            "skiff_connections",
            "Open client connections.",
            self.connections(),
        );
        out.counter(
            "skiff_connections_refused_per_ip_total",
            "New connections closed at once: their address held max.connections.per.ip.",
            self.connections_refused().0,
        );
        out.counter(
            "skiff_connections_refused_full_total",
            "New connections closed at once: max.connections were open and none idle for 1 s.",
            self.connections_refused().1,
        );
        out.counter(
            "skiff_connections_evicted_total",
            "Connections idle longest closed to make room for a new one at max.connections.",
            self.connections_evicted(),
        );
        out.counter(
            "skiff_request_bytes_total",
            "Request frame bytes received.",
            self.request_bytes_in.load(Ordering::Relaxed),
        );
        out.counter(
            "skiff_response_bytes_total",
            "Response bytes planned: fields, stored batches and converted record sets (at their declared size).",
            self.response_bytes_out.load(Ordering::Relaxed),
        );
        let totals = self.traffic_totals();
        let [bytes_in, replication_bytes_in, bytes_out, messages_in] = self.traffic_rates();
        for (name, help, total, rate) in [
            (
                "skiff_broker_bytes_in",
                "Record bytes appended from Produce requests, as leader",
                totals.bytes_in,
                bytes_in,
            ),
            (
                "skiff_broker_replication_bytes_in",
                "Record bytes appended from this broker's follower fetches",
                totals.replication_bytes_in,
                replication_bytes_in,
            ),
            (
                "skiff_broker_bytes_out",
                "Record bytes sent in Fetch responses, to consumers and followers (legacy \
                 fetches at their down-converted size)",
                totals.bytes_out,
                bytes_out,
            ),
            (
                "skiff_broker_messages_in",
                "Records appended from Produce requests, as leader",
                totals.messages_in,
                messages_in,
            ),
        ] {
            out.counter(&format!("{name}_total"), &format!("{help}."), total);
            out.gauge(
                &format!("{name}_per_second"),
                &format!("{help}, per second over this broker's last load sample."),
                rate,
            );
        }
    }

    /// Request latency and service time, by API.
    fn render_request_times(&self, out: &mut Exposition) {
        out.header(
            "skiff_request_latency_ms",
            "Time from a request frame received to its response written, waits included.",
            "histogram",
        );
        render_by_api(out, "skiff_request_latency_ms", &self.request_latency_ms);
        out.header(
            "skiff_request_service_time_us",
            "Time from a request frame received to its response written, less its waits for data \
             (a Fetch's long poll) and for followers (an acks=all Produce): Kafka's TotalTimeMs \
             less RemoteTimeMs.",
            "histogram",
        );
        render_by_api(out, "skiff_request_service_time_us", &self.service_time_us);
    }

    /// Requests the ACLs refused, by API (only APIs with refusals get a series).
    fn render_authorization(&self, out: &mut Exposition) {
        out.header(
            "skiff_authorization_failures_total",
            "Checks the ACLs refused, by API.",
            "counter",
        );
        for (api_key, failures) in self.authorization_failures.iter().enumerate() {
            let failures = failures.load(Ordering::Relaxed);
            if failures == 0 {
                continue;
            }
            let _ = writeln!(
                out.text,
                "skiff_authorization_failures_total{{api=\"{}\"}} {failures}",
                api_name(api_key)
            );
        }
    }

    /// What legacy fetches cost: conversions, records (in all and by topic), temporary memory,
    /// time, and the converted bytes held now (the KIP-283 bound made visible).
    fn render_down_conversion(&self, out: &mut Exposition) {
        out.counter(
            "skiff_down_conversions_total",
            "Record sets down-converted for legacy fetches.",
            self.conversions(),
        );
        out.counter(
            "skiff_down_converted_records_total",
            "Records down-converted for legacy fetches.",
            self.records_converted(),
        );
        if let Ok(by_topic) = self.records_converted_by_topic.lock() {
            out.header(
                "skiff_down_converted_records_by_topic_total",
                "Records down-converted, by topic (Kafka's per-topic FetchMessageConversionsPerSec).",
                "counter",
            );
            for (topic, records) in by_topic.iter() {
                let _ = writeln!(
                    out.text,
                    "skiff_down_converted_records_by_topic_total{{topic=\"{topic}\"}} {records}"
                );
            }
        }
        out.counter(
            "skiff_down_conversion_temporary_bytes_total",
            "Temporary memory allocated by down-conversions.",
            self.conversion_temporary_bytes.load(Ordering::Relaxed),
        );
        out.counter(
            "skiff_down_conversion_nanoseconds_total",
            "Time spent down-converting.",
            self.conversion_nanos.load(Ordering::Relaxed),
        );
        out.header(
            "skiff_down_conversion_time_us",
            "Time of one conversion (all its chunks).",
            "histogram",
        );
        self.conversion_time_us
            .render(&mut out.text, "skiff_down_conversion_time_us", "");
        out.header(
            "skiff_down_conversion_temporary_bytes",
            "Temporary memory of one conversion.",
            "histogram",
        );
        self.conversion_memory_bytes.render(
            &mut out.text,
            "skiff_down_conversion_temporary_bytes",
            "",
        );
        out.gauge(
            "skiff_converted_bytes_in_flight",
            "Converted bytes held by responses now.",
            self.converted_bytes_in_flight(),
        );
        out.gauge(
            "skiff_converted_bytes_in_flight_peak",
            "Highest converted bytes held at once since start.",
            self.converted_bytes_in_flight_peak(),
        );
        out.gauge(
            "skiff_legacy_response_plan_bytes_peak",
            "Most bytes one planned legacy response held besides its chunk, since start.",
            i64::try_from(self.legacy_plan_bytes_peak()).unwrap_or(i64::MAX),
        );
    }
}

/// One histogram family with a series per API that has observations, labelled with its name.
fn render_by_api<const N: usize>(
    out: &mut Exposition,
    name: &str,
    by_api: &[Histogram<N>; API_KEY_SLOTS],
) {
    for (api_key, histogram) in by_api.iter().enumerate() {
        if histogram.count() == 0 {
            continue;
        }
        let labels = format!("api=\"{}\",", api_name(api_key));
        histogram.render(&mut out.text, name, &labels);
    }
}

/// Kafka's name of an API key slot (`Fetch`), or the number for keys Kafka does not name.
fn api_name(api_key: usize) -> String {
    i16::try_from(api_key)
        .ok()
        .and_then(|key| kafka_protocol::messages::ApiKey::try_from(key).ok())
        .map_or_else(|| format!("{api_key}"), |key| format!("{key:?}"))
}

/// A Prometheus text exposition being written: the one place its line format is written.
#[derive(Default)]
pub(crate) struct Exposition {
    text: String,
}

impl Exposition {
    /// The text written so far (what a section's test reads).
    #[cfg(test)]
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// The `# HELP` and `# TYPE` lines of a metric family.
    fn header(&mut self, name: &str, help: &str, kind: &str) {
        let _ = writeln!(self.text, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    pub(crate) fn gauge(&mut self, name: &str, help: &str, value: i64) {
        self.header(name, help, "gauge");
        let _ = writeln!(self.text, "{name} {value}");
    }

    pub(crate) fn counter(&mut self, name: &str, help: &str, value: u64) {
        self.header(name, help, "counter");
        let _ = writeln!(self.text, "{name} {value}");
    }

    /// One gauge family with a sample per `label` value.
    pub(crate) fn labelled_gauges(
        &mut self,
        name: &str,
        help: &str,
        label: &str,
        values: impl IntoIterator<Item = (String, i64)>,
    ) {
        self.gauges_by_labels(
            name,
            help,
            &[label],
            values.into_iter().map(|(v, value)| ([v], value)),
        );
    }

    /// One gauge family with a sample per combination of `labels` values (one value per label,
    /// in order).
    pub(crate) fn gauges_by_labels<const N: usize>(
        &mut self,
        name: &str,
        help: &str,
        labels: &[&str; N],
        values: impl IntoIterator<Item = ([String; N], i64)>,
    ) {
        self.header(name, help, "gauge");
        for (label_values, value) in values {
            let _ = write!(self.text, "{name}{{");
            for (i, (label, label_value)) in labels.iter().zip(&label_values).enumerate() {
                let separator = if i == 0 { "" } else { "," };
                let _ = write!(self.text, "{separator}{label}=\"{label_value}\"");
            }
            let _ = writeln!(self.text, "}} {value}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(api_key: i16, remote: std::time::Duration) -> Served {
        Served {
            api_key,
            bytes_in: 100,
            bytes_out: 50,
            remote,
        }
    }

    #[test]
    fn histograms_accumulate_and_render_cumulative_buckets() {
        let metrics = Metrics::default();
        let fetch = served(1, std::time::Duration::ZERO);
        metrics.request_done(&fetch, std::time::Duration::from_millis(3));
        metrics.request_done(&fetch, std::time::Duration::from_millis(20_000));
        metrics.conversion_done("orders", 10, 4_096, 2_000_000);
        metrics.conversion_done("orders", 5, 100, 1_000);
        assert_eq!(metrics.requests(1), 2);
        assert_eq!(metrics.conversions(), 2);
        assert_eq!(metrics.records_converted(), 15);
        let text = metrics.render_prometheus();
        assert!(text.contains("skiff_request_latency_ms_bucket{api=\"Fetch\",le=\"2\"} 0"));
        assert!(text.contains("skiff_request_latency_ms_bucket{api=\"Fetch\",le=\"5\"} 1"));
        assert!(text.contains("skiff_request_latency_ms_bucket{api=\"Fetch\",le=\"+Inf\"} 2"));
        assert!(text.contains("skiff_request_latency_ms_sum{api=\"Fetch\"} 20003"));
        assert!(text.contains("skiff_down_conversion_temporary_bytes_sum 4196"));
        assert!(text.contains("skiff_down_conversion_time_us_bucket{le=\"10\"} 1"));
        assert!(text.contains("skiff_down_conversion_time_us_count 2"));
        assert!(text.contains("skiff_request_bytes_total 200"));
        assert!(text.contains("skiff_down_converted_records_by_topic_total{topic=\"orders\"} 15"));
    }

    #[test]
    fn service_time_lands_in_microsecond_buckets_by_api() {
        use std::time::Duration;
        let metrics = Metrics::default();
        metrics.request_done(&served(0, Duration::ZERO), Duration::from_micros(80));
        metrics.request_done(&served(0, Duration::ZERO), Duration::from_micros(999));
        metrics.request_done(&served(0, Duration::ZERO), Duration::from_micros(1_000));
        metrics.request_done(&served(0, Duration::ZERO), Duration::from_micros(1_001));
        metrics.request_done(&served(0, Duration::ZERO), Duration::from_secs(3));
        // A key past the known ones shares the last slot rather than being lost.
        metrics.request_done(&served(i16::MAX, Duration::ZERO), Duration::from_micros(10));
        let text = metrics.render_prometheus();
        for line in [
            "# TYPE skiff_request_service_time_us histogram",
            "skiff_request_service_time_us_bucket{api=\"Produce\",le=\"75\"} 0",
            "skiff_request_service_time_us_bucket{api=\"Produce\",le=\"100\"} 1",
            "skiff_request_service_time_us_bucket{api=\"Produce\",le=\"750\"} 1",
            "skiff_request_service_time_us_bucket{api=\"Produce\",le=\"1000\"} 3",
            "skiff_request_service_time_us_bucket{api=\"Produce\",le=\"1500\"} 4",
            "skiff_request_service_time_us_bucket{api=\"Produce\",le=\"1000000\"} 4",
            "skiff_request_service_time_us_bucket{api=\"Produce\",le=\"+Inf\"} 5",
            "skiff_request_service_time_us_sum{api=\"Produce\"} 3003080",
            "skiff_request_service_time_us_count{api=\"Produce\"} 5",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
        let last_slot = format!(
            "skiff_request_service_time_us_count{{api=\"{}\"}} 1",
            api_name(API_KEY_SLOTS - 1)
        );
        assert!(text.lines().any(|l| l == last_slot), "{text}");
        assert!(!text.contains("skiff_request_service_time_us_count{api=\"Fetch\"}"));
    }

    #[test]
    fn record_traffic_renders_as_totals_and_the_last_samples_rates() {
        let metrics = Metrics::default();
        metrics.traffic.add(&TrafficCounts {
            bytes_in: 3_000,
            messages_in: 30,
            replication_bytes_in: 700,
            bytes_out: 5_000,
        });
        metrics.set_traffic_rates(&TrafficRecord {
            bytes_in_per_second: 1_234.4,
            replication_bytes_in_per_second: 99.6,
            bytes_out_per_second: 0.0,
            messages_in_per_second: 12.0,
            partitions: Vec::new(),
        });
        let text = metrics.render_prometheus();
        for line in [
            "skiff_broker_bytes_in_total 3000",
            "skiff_broker_messages_in_total 30",
            "skiff_broker_replication_bytes_in_total 700",
            "skiff_broker_bytes_out_total 5000",
            "skiff_broker_bytes_in_per_second 1234",
            "skiff_broker_replication_bytes_in_per_second 100",
            "skiff_broker_bytes_out_per_second 0",
            "skiff_broker_messages_in_per_second 12",
            "# TYPE skiff_broker_bytes_in_total counter",
            "# TYPE skiff_broker_bytes_in_per_second gauge",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing");
        }
    }

    #[test]
    fn registered_sections_render_after_the_broker_wide_families_in_order() {
        struct Section(&'static str, i64);
        impl MetricsSection for Section {
            fn render(&self, out: &mut Exposition) {
                out.gauge(self.0, "A section's gauge.", self.1);
            }
        }
        let metrics = Metrics::default();
        metrics.register(Arc::new(Section("skiff_first", 1)));
        metrics.register(Arc::new(Section("skiff_second", 2)));
        let text = metrics.render_prometheus();
        let at = |line: &str| text.lines().position(|l| l == line);
        let first = at("skiff_first 1").expect("first section");
        let second = at("skiff_second 2").expect("second section");
        let own = at("skiff_connections 0").expect("broker-wide gauge");
        assert!(own < first && first < second, "{text}");
        assert!(text.contains("# TYPE skiff_second gauge"));
    }
}
