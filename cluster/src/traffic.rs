//! A broker's traffic for its load report (`R/load/<id>`, [`TrafficRecord`]): per-second rates
//! from two readings of its byte and record counters, per partition and in total.
//!
//! The counters only grow, except that a partition's start at zero when it is opened again (its
//! topic deleted and created anew, or the broker becoming one of its replicas again): a counter
//! below its previous reading, or one not read before, counts whole as the interval's traffic.
//! The broker's totals are the sum of every partition's gains (the ones the report leaves out
//! too), so the produce and fetch paths count each partition alone and share no counter; what a
//! partition deleted between two readings did since the first of them is not counted.
//!
//! Must never: read the clock (`elapsed_ms` is an argument) or the counters themselves.

use std::collections::BTreeMap;

use crate::records::{PartitionTraffic, TrafficRecord, LOAD_REPORT_PARTITIONS_MAX};

/// Counters of one partition, or of the whole broker, at one reading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrafficCounts {
    /// Record bytes appended from Produce requests (leading).
    pub bytes_in: u64,
    /// Records appended from Produce requests.
    pub messages_in: u64,
    /// Record bytes appended from this broker's follower fetches.
    pub replication_bytes_in: u64,
    /// Record bytes sent in Fetch responses, to consumers and followers.
    pub bytes_out: u64,
}

/// One reading of a broker's counters: each local partition's, by topic and partition.
pub type TrafficReading = BTreeMap<(String, i32), TrafficCounts>;

/// The traffic between two readings: its rates, and the counts it gained over all partitions
/// (which the broker adds to its running totals).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TrafficInterval {
    /// The rates, for the load report.
    pub record: TrafficRecord,
    /// What every partition gained, summed.
    pub gained: TrafficCounts,
}

/// What a counter gained from `before` to `after` (a counter that went back restarted at zero).
fn gained(before: u64, after: u64) -> u64 {
    after.checked_sub(before).unwrap_or(after)
}

/// The counts gained from `before` to `after`.
fn gains(before: &TrafficCounts, after: &TrafficCounts) -> TrafficCounts {
    TrafficCounts {
        bytes_in: gained(before.bytes_in, after.bytes_in),
        messages_in: gained(before.messages_in, after.messages_in),
        replication_bytes_in: gained(before.replication_bytes_in, after.replication_bytes_in),
        bytes_out: gained(before.bytes_out, after.bytes_out),
    }
}

/// Per-second rates of `counts` gained over `elapsed_ms` (> 0).
fn rates(counts: &TrafficCounts, elapsed_ms: u64) -> [f64; 4] {
    let per_second = |count: u64| count as f64 * 1000.0 / elapsed_ms as f64;
    [
        per_second(counts.bytes_in),
        per_second(counts.messages_in),
        per_second(counts.replication_bytes_in),
        per_second(counts.bytes_out),
    ]
}

/// The traffic between `previous` and `current`, read `elapsed_ms` apart: the counts every
/// partition gained, and as rates the totals and the partitions with any traffic, busiest first
/// by load (bytes in plus replication bytes in, then bytes out, then name), at most
/// [`LOAD_REPORT_PARTITIONS_MAX`]. No time elapsed means no rate can be told: an empty record
/// (the gains still count).
pub fn traffic_rates(
    previous: &TrafficReading,
    current: &TrafficReading,
    elapsed_ms: u64,
) -> TrafficInterval {
    let mut total = TrafficCounts::default();
    let mut partitions: Vec<PartitionTraffic> = Vec::new();
    for (key, after) in current {
        let gain = gains(&previous.get(key).copied().unwrap_or_default(), after);
        total.bytes_in += gain.bytes_in;
        total.messages_in += gain.messages_in;
        total.replication_bytes_in += gain.replication_bytes_in;
        total.bytes_out += gain.bytes_out;
        if gain == TrafficCounts::default() || elapsed_ms == 0 {
            continue;
        }
        let [bytes_in, messages_in, replication_bytes_in, bytes_out] = rates(&gain, elapsed_ms);
        partitions.push(PartitionTraffic {
            topic: key.0.clone(),
            partition: key.1,
            bytes_in_per_second: bytes_in,
            replication_bytes_in_per_second: replication_bytes_in,
            bytes_out_per_second: bytes_out,
            messages_in_per_second: messages_in,
        });
    }
    if elapsed_ms == 0 {
        return TrafficInterval {
            record: TrafficRecord::default(),
            gained: total,
        };
    }
    let load = |p: &PartitionTraffic| p.bytes_in_per_second + p.replication_bytes_in_per_second;
    partitions.sort_by(|a, b| {
        load(b)
            .total_cmp(&load(a))
            .then(b.bytes_out_per_second.total_cmp(&a.bytes_out_per_second))
            .then_with(|| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)))
    });
    partitions.truncate(LOAD_REPORT_PARTITIONS_MAX);
    let [bytes_in, messages_in, replication_bytes_in, bytes_out] = rates(&total, elapsed_ms);
    TrafficInterval {
        record: TrafficRecord {
            bytes_in_per_second: bytes_in,
            replication_bytes_in_per_second: replication_bytes_in,
            bytes_out_per_second: bytes_out,
            messages_in_per_second: messages_in,
            partitions,
        },
        gained: total,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(bytes_in: u64, messages_in: u64, replication: u64, bytes_out: u64) -> TrafficCounts {
        TrafficCounts {
            bytes_in,
            messages_in,
            replication_bytes_in: replication,
            bytes_out,
        }
    }

    fn reading(partitions: &[(&str, i32, TrafficCounts)]) -> TrafficReading {
        partitions
            .iter()
            .map(|(topic, partition, counts)| ((topic.to_string(), *partition), *counts))
            .collect()
    }

    #[test]
    fn deltas_over_the_interval_become_per_second_rates_busiest_first() {
        let previous = reading(&[
            ("a", 0, counts(1_000, 10, 0, 0)),
            ("b", 0, counts(0, 0, 500, 0)),
            ("c", 0, counts(0, 0, 0, 0)),
        ]);
        // Over 2 s: a/0 took 4,000 bytes in 40 records and sent 1,000; b/0 replicated 10,000;
        // c/0 did nothing; d/0 (new since) took 2,000.
        let current = reading(&[
            ("a", 0, counts(5_000, 50, 0, 1_000)),
            ("b", 0, counts(0, 0, 10_500, 0)),
            ("c", 0, counts(0, 0, 0, 0)),
            ("d", 0, counts(2_000, 20, 0, 0)),
        ]);
        let interval = traffic_rates(&previous, &current, 2_000);
        // The totals are the partitions' gains, summed.
        assert_eq!(interval.gained, counts(6_000, 60, 10_000, 1_000));
        let record = interval.record;
        assert_eq!(record.bytes_in_per_second, 3_000.0);
        assert_eq!(record.messages_in_per_second, 30.0);
        assert_eq!(record.replication_bytes_in_per_second, 5_000.0);
        assert_eq!(record.bytes_out_per_second, 500.0);
        let order: Vec<(&str, f64)> = record
            .partitions
            .iter()
            .map(|p| {
                (
                    p.topic.as_str(),
                    p.bytes_in_per_second + p.replication_bytes_in_per_second,
                )
            })
            .collect();
        assert_eq!(order, vec![("b", 5_000.0), ("a", 2_000.0), ("d", 1_000.0)]);
        assert_eq!(record.partitions[1].messages_in_per_second, 20.0);
        assert_eq!(record.partitions[1].bytes_out_per_second, 500.0);
    }

    #[test]
    fn a_counter_that_went_back_restarted_and_counts_whole() {
        // The topic was deleted and created again: its new counters started at zero.
        let previous = reading(&[("t", 0, counts(9_000, 9, 0, 0))]);
        let current = reading(&[("t", 0, counts(1_000, 1, 0, 0))]);
        let record = traffic_rates(&previous, &current, 1_000).record;
        assert_eq!(record.partitions[0].bytes_in_per_second, 1_000.0);
        assert_eq!(record.partitions[0].messages_in_per_second, 1.0);
    }

    #[test]
    fn only_the_busiest_partitions_are_listed_and_no_elapsed_time_tells_nothing() {
        let partitions: Vec<(String, i32, TrafficCounts)> = (0..LOAD_REPORT_PARTITIONS_MAX + 10)
            .map(|p| ("t".to_owned(), p as i32, counts(p as u64 + 1, 1, 0, 0)))
            .collect();
        let current: TrafficReading = partitions
            .into_iter()
            .map(|(topic, partition, counts)| ((topic, partition), counts))
            .collect();
        let record = traffic_rates(&TrafficReading::default(), &current, 1_000).record;
        assert_eq!(record.partitions.len(), LOAD_REPORT_PARTITIONS_MAX);
        // The ten least busy (partitions 0..10) are the ones left out.
        assert_eq!(record.partitions.last().map(|p| p.partition), Some(10));
        let unknown = traffic_rates(&TrafficReading::default(), &current, 0);
        assert_eq!(unknown.record, TrafficRecord::default());
        assert_eq!(
            unknown.gained.messages_in,
            current.len() as u64,
            "gains still count"
        );
    }
}
