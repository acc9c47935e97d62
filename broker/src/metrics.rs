//! Counters and gauges the broker keeps about itself; the converted-bytes-in-flight gauge is the
//! visible proof that legacy fetches hold at most one chunk each.
//!
//! Must never: block or allocate on the hot path (plain atomics only).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Broker-wide figures.
#[derive(Debug, Default)]
pub struct Metrics {
    connections: AtomicI64,
    converted_bytes_in_flight: AtomicI64,
    converted_bytes_in_flight_peak: AtomicI64,
    records_converted: AtomicU64,
    conversion_temporary_bytes: AtomicU64,
    conversion_nanos: AtomicU64,
}

impl Metrics {
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

    /// Adds one finished conversion's figures.
    pub(crate) fn conversion_done(&self, records: u64, temporary_bytes: u64, nanos: u64) {
        self.records_converted.fetch_add(records, Ordering::Relaxed);
        self.conversion_temporary_bytes
            .fetch_add(temporary_bytes, Ordering::Relaxed);
        self.conversion_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Records down-converted since start.
    pub fn records_converted(&self) -> u64 {
        self.records_converted.load(Ordering::Relaxed)
    }
}
