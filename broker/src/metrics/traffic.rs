//! Byte and record counters of the traffic through a partition: record bytes and records
//! appended from Produce, record bytes appended by this broker's follower fetches, record bytes
//! sent in Fetch responses. The maintenance task reads them every load sample and turns two
//! readings into the rates of the load report (`skiff_cluster::traffic`); the broker's running
//! totals (the same type, in `Metrics`) are the partitions' gains it adds up there.
//!
//! Counting is a relaxed `fetch_add` on the partition's own counters, on paths that already hold
//! the partition: no lock, no lookup, and no counter shared by all requests (the broker's totals
//! are added up off the hot path). Relaxed is enough: a reading needs each counter's own value,
//! never an order between counters or with the appended data.
//!
//! Must never: count a batch that was not appended (a retried duplicate, a refused append) or
//! bytes a response does not carry.

use std::sync::atomic::{AtomicU64, Ordering};

use skiff_cluster::traffic::TrafficCounts;

/// Traffic counters, of one partition or the broker's totals; they only grow.
#[derive(Debug, Default)]
pub struct TrafficCounters {
    bytes_in: AtomicU64,
    messages_in: AtomicU64,
    replication_bytes_in: AtomicU64,
    bytes_out: AtomicU64,
}

impl TrafficCounters {
    /// A Produce request's batches appended as leader: their stored bytes and record count.
    pub fn count_produced(&self, bytes: u64, records: u64) {
        self.bytes_in.fetch_add(bytes, Ordering::Relaxed);
        self.messages_in.fetch_add(records, Ordering::Relaxed);
    }

    /// Batches fetched from the leader appended as follower.
    pub fn count_replicated(&self, bytes: u64) {
        self.replication_bytes_in
            .fetch_add(bytes, Ordering::Relaxed);
    }

    /// Record bytes a Fetch response carries, to a consumer or a follower.
    pub fn count_sent(&self, bytes: u64) {
        self.bytes_out.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Adds counts gained elsewhere (the broker's totals, at each load sample).
    pub fn add(&self, counts: &TrafficCounts) {
        self.bytes_in.fetch_add(counts.bytes_in, Ordering::Relaxed);
        self.messages_in
            .fetch_add(counts.messages_in, Ordering::Relaxed);
        self.replication_bytes_in
            .fetch_add(counts.replication_bytes_in, Ordering::Relaxed);
        self.bytes_out
            .fetch_add(counts.bytes_out, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn read(&self) -> TrafficCounts {
        TrafficCounts {
            bytes_in: self.bytes_in.load(Ordering::Relaxed),
            messages_in: self.messages_in.load(Ordering::Relaxed),
            replication_bytes_in: self.replication_bytes_in.load(Ordering::Relaxed),
            bytes_out: self.bytes_out.load(Ordering::Relaxed),
        }
    }
}
