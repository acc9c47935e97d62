//! Latency bookkeeping: an HDR histogram of nanoseconds from each message's *intended* send time
//! (see [`super::schedule`]) to the moment its acknowledgement or its fetch arrived, and the summary
//! the report shows (p50, p99, p99.9, max and the percentile curve for the plot).
//!
//! Must never: measure from the actual send time (that hides the lateness of a stalled sender), or
//! drop a sample (a value past the histogram's range is recorded at its top, and counted).

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Largest latency the histograms resolve: a minute. Anything slower is recorded as a minute and
/// counted in [`LatencySummary::saturated_count`].
pub const LATENCY_NANOS_MAX: u64 = 60_000_000_000;

/// Significant decimal digits the histograms keep (0.1 % resolution at every magnitude).
const SIGNIFICANT_DIGITS: u8 = 3;

/// Percentiles drawn in the plot, from the median to the 99.99th.
pub const CURVE_PERCENTILES: [f64; 13] = [
    50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 99.995, 99.999, 99.9995, 100.0,
];

/// Latencies of one kind (produce-ack or end-to-end) in one phase.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    histogram: Histogram<u64>,
    saturated_count: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// An empty histogram from 1 ns to [`LATENCY_NANOS_MAX`].
    pub fn new() -> Self {
        Self {
            // INVARIANT: the bounds are constants that satisfy hdrhistogram's conditions
            // (low ≥ 1, high ≥ 2·low, 0–5 significant digits).
            histogram: Histogram::new_with_bounds(1, LATENCY_NANOS_MAX, SIGNIFICANT_DIGITS)
                .expect("constant histogram bounds are valid"),
            saturated_count: 0,
        }
    }

    /// Records the latency of a message meant to be sent at `intended_nanos` and completed at
    /// `completed_nanos` (both since the phase started). A completion before the intended time
    /// (impossible unless the clock went backwards) counts as zero.
    pub fn record(&mut self, intended_nanos: u64, completed_nanos: u64) {
        let latency = completed_nanos.saturating_sub(intended_nanos);
        if latency > LATENCY_NANOS_MAX {
            self.saturated_count += 1;
        }
        self.histogram.saturating_record(latency.max(1));
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// Latency at `percentile` (0–100), in nanoseconds.
    pub fn nanos_at(&self, percentile: f64) -> u64 {
        self.histogram.value_at_percentile(percentile)
    }

    /// The summary the report shows; `None` when nothing was recorded.
    pub fn summary(&self) -> Option<LatencySummary> {
        if self.histogram.is_empty() {
            return None;
        }
        let millis = |nanos: u64| nanos as f64 / 1e6;
        Some(LatencySummary {
            count: self.count(),
            saturated_count: self.saturated_count,
            mean_ms: self.histogram.mean() / 1e6,
            p50_ms: millis(self.nanos_at(50.0)),
            p99_ms: millis(self.nanos_at(99.0)),
            p999_ms: millis(self.nanos_at(99.9)),
            max_ms: millis(self.histogram.max()),
            curve: CURVE_PERCENTILES
                .iter()
                .map(|percentile| (*percentile, millis(self.nanos_at(*percentile))))
                .collect(),
        })
    }
}

/// What the report shows of one histogram (milliseconds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Samples.
    pub count: u64,
    /// Samples slower than [`LATENCY_NANOS_MAX`] (recorded at it).
    pub saturated_count: u64,
    /// Mean.
    pub mean_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// 99.9th percentile.
    pub p999_ms: f64,
    /// Slowest sample.
    pub max_ms: f64,
    /// `(percentile, latency)` at each of [`CURVE_PERCENTILES`].
    pub curve: Vec<(f64, f64)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::schedule::Schedule;

    #[test]
    fn percentiles_of_known_samples() {
        let mut histogram = LatencyHistogram::new();
        for micros in 1..=1000u64 {
            histogram.record(5_000, 5_000 + micros * 1000);
        }
        let summary = histogram.summary().unwrap();
        assert_eq!(summary.count, 1000);
        // 0.1 % resolution.
        assert!((summary.p50_ms - 0.5).abs() < 0.001, "{}", summary.p50_ms);
        assert!((summary.p99_ms - 0.99).abs() < 0.001, "{}", summary.p99_ms);
        assert!((summary.max_ms - 1.0).abs() < 0.001, "{}", summary.max_ms);
        assert_eq!(summary.curve.len(), CURVE_PERCENTILES.len());
        assert!(LatencyHistogram::new().summary().is_none());
    }

    #[test]
    fn a_sample_past_the_range_is_kept_at_the_top_and_counted() {
        let mut histogram = LatencyHistogram::new();
        histogram.record(0, LATENCY_NANOS_MAX * 3);
        histogram.record(10, 5);
        let summary = histogram.summary().unwrap();
        assert_eq!((summary.count, summary.saturated_count), (2, 1));
        assert!(summary.max_ms >= 59_000.0);
    }

    /// A producer with one request in flight at 1,000 msg/s for one second, against a broker that
    /// answers in 50 µs except once, when it stalls for 100 ms. Measured from the intended times,
    /// the ~100 messages that were due during the stall each count their wait, so the p99 shows the
    /// stall; measured from the actual send (what a naive load generator does) only the one
    /// stalled request does, and the p99 would be 50 µs.
    #[test]
    fn a_broker_stall_shows_in_the_tail_because_latency_starts_at_the_intended_time() {
        const ANSWER_NANOS: u64 = 50_000;
        const STALL_NANOS: u64 = 100_000_000;
        let schedule = Schedule {
            rate_per_second: Some(1000.0),
            message_count: 1000,
        };
        let mut from_intended = LatencyHistogram::new();
        let mut from_sent = LatencyHistogram::new();
        let (mut now, mut sent, mut request) = (0u64, 0u64, 0u32);
        while let Some(next) = schedule.next_batch(sent, now, 16) {
            let batch = match next {
                Err(wait_until) => {
                    now = wait_until;
                    continue;
                }
                Ok(batch) => batch,
            };
            let answered = now
                + if request == 300 {
                    STALL_NANOS
                } else {
                    ANSWER_NANOS
                };
            for index in batch.clone() {
                from_intended.record(schedule.intended_nanos(index), answered);
                from_sent.record(now, answered);
            }
            request += 1;
            sent = batch.end;
            now = answered;
        }
        assert_eq!(from_intended.count(), 1000);
        // The messages due in the stall's 100 ms wait 0–100 ms: about a tenth of the second.
        assert!(from_intended.nanos_at(95.0) > 40_000_000);
        assert!(from_intended.nanos_at(99.0) > 90_000_000);
        // The naive measure sees one slow batch of one message among a thousand.
        assert!(from_sent.nanos_at(99.0) < 100_000);
        assert!(from_sent.nanos_at(99.95) >= STALL_NANOS);
    }
}
