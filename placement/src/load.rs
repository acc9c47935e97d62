//! The per-node load model: the figures BP-65 adds to BookKeeper's GetBookieInfo, and the sliding
//! window that turns raw counters into them.
//!
//! Owns [`LoadReport`] (what a node publishes), [`RawLoadSample`] (cumulative counters read at one
//! instant) and [`LoadWindow`] (the ring of samples and the rate arithmetic). It never reads
//! counters itself: the broker's `placement::sampler` does that on Linux, the simulator makes them up.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// Value of a figure that is not known (no sample yet, or not measurable on this host). Kept as
/// −1 rather than an `Option` because BP-65 publishes it that way on the wire.
pub const LOAD_UNKNOWN: f64 = -1.0;

/// Samples in BP-65's sliding window (`baseMetricMonitorMetricSlideWindowSize`): utilisation is
/// averaged over the last 3 intervals, so one idle or busy second does not flip placement.
pub const LOAD_WINDOW_SAMPLES_DEFAULT: usize = 3;

/// Largest window accepted, so a configuration typo cannot make the ring grow without bound.
pub const LOAD_WINDOW_SAMPLES_MAX: usize = 600;

/// What one node publishes about its load. Every figure is [`LOAD_UNKNOWN`] (−1) until measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    /// IO utilisation of the journal (write-ahead) disk, 0–100 %: BP-65's placement signal.
    pub journal_io_util_pct: f64,
    /// IO utilisation of the log (ledger) disk, 0–100 %. On Skiff the log is the journal, so a
    /// sampler fills both from the same device.
    pub log_io_util_pct: f64,
    /// CPU used by the broker process as a share of the whole machine, 0–100 %.
    pub cpu_used_pct: f64,
    /// Bytes written per second over the last interval (a single-interval delta, as in BP-65).
    pub write_bytes_per_second: f64,
    /// Free bytes on the log disk.
    pub disk_free_bytes: f64,
    /// Total bytes on the log disk.
    pub disk_total_bytes: f64,
}

impl LoadReport {
    /// A report with every figure unknown.
    pub const fn unknown() -> Self {
        Self {
            journal_io_util_pct: LOAD_UNKNOWN,
            log_io_util_pct: LOAD_UNKNOWN,
            cpu_used_pct: LOAD_UNKNOWN,
            write_bytes_per_second: LOAD_UNKNOWN,
            disk_free_bytes: LOAD_UNKNOWN,
            disk_total_bytes: LOAD_UNKNOWN,
        }
    }

    /// A report that only knows IO utilisation (both disks): handy for tests and the simulator.
    pub fn with_util(util_pct: f64) -> Self {
        Self {
            journal_io_util_pct: util_pct,
            log_io_util_pct: util_pct,
            ..Self::unknown()
        }
    }

    /// The IO utilisation placement filters on: the journal disk, else the log disk.
    pub fn io_util_pct(&self) -> Option<f64> {
        known(self.journal_io_util_pct).or_else(|| known(self.log_io_util_pct))
    }

    /// Free disk bytes, if known.
    pub fn disk_free(&self) -> Option<f64> {
        known(self.disk_free_bytes)
    }
}

fn known(value: f64) -> Option<f64> {
    (value >= 0.0 && value.is_finite()).then_some(value)
}

/// Cumulative counters read at one instant. `None` marks a counter this host cannot provide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RawLoadSample {
    /// When the counters were read (the caller's clock, milliseconds).
    pub now_ms: u64,
    /// Milliseconds the journal disk spent doing IO since boot (`io_ticks` in diskstats).
    pub journal_io_ticks_ms: Option<u64>,
    /// Milliseconds the log disk spent doing IO since boot.
    pub log_io_ticks_ms: Option<u64>,
    /// CPU ticks used by this process (user + system) since it started.
    pub process_cpu_ticks: Option<u64>,
    /// CPU ticks of the whole machine (all CPUs, all states) since boot.
    pub machine_cpu_ticks: Option<u64>,
    /// Bytes the broker has written since it started.
    pub write_bytes_total: Option<u64>,
    /// Free bytes on the log disk now.
    pub disk_free_bytes: Option<u64>,
    /// Total bytes on the log disk.
    pub disk_total_bytes: Option<u64>,
}

/// A ring of the last `window_samples + 1` raw samples and the rate arithmetic over it.
///
/// Utilisation over the window is `(ticks_t − ticks_{t−W}) × 100 / (ms_t − ms_{t−W})`, clamped to
/// 0–100: the average over the last W intervals. Nothing is published until the ring holds W
/// intervals, so a node that has just started reports unknown rather than a one-sample spike.
#[derive(Debug, Clone)]
pub struct LoadWindow {
    window_samples: usize,
    samples: VecDeque<RawLoadSample>,
}

impl LoadWindow {
    /// A window of `window_samples` intervals, clamped to 1..=[`LOAD_WINDOW_SAMPLES_MAX`].
    pub fn new(window_samples: usize) -> Self {
        let window_samples = window_samples.clamp(1, LOAD_WINDOW_SAMPLES_MAX);
        Self {
            window_samples,
            samples: VecDeque::with_capacity(window_samples + 1),
        }
    }

    /// Adds a sample and returns the smoothed report once the window is full.
    ///
    /// A sample whose time does not advance replaces nothing and is ignored: rates over a zero or
    /// negative interval would be meaningless.
    pub fn push(&mut self, sample: RawLoadSample) -> Option<LoadReport> {
        if let Some(last) = self.samples.back() {
            if sample.now_ms <= last.now_ms {
                return self.report();
            }
        }
        if self.samples.len() == self.window_samples + 1 {
            let _ = self.samples.pop_front();
        }
        self.samples.push_back(sample);
        self.report()
    }

    /// The smoothed report from the samples held, or `None` before the window is full.
    pub fn report(&self) -> Option<LoadReport> {
        if self.samples.len() < self.window_samples + 1 {
            return None;
        }
        let newest = self.samples.back()?;
        let oldest = self.samples.front()?;
        let previous = self.samples.get(self.samples.len() - 2)?;
        let window_ms = newest.now_ms.saturating_sub(oldest.now_ms);
        let last_interval_ms = newest.now_ms.saturating_sub(previous.now_ms);
        let util = |new: Option<u64>, old: Option<u64>| -> f64 {
            match (new, old) {
                (Some(n), Some(o)) if n >= o && window_ms > 0 => {
                    ((n - o) as f64 * 100.0 / window_ms as f64).clamp(0.0, 100.0)
                }
                _ => LOAD_UNKNOWN,
            }
        };
        let cpu_used_pct = match (
            newest.process_cpu_ticks,
            oldest.process_cpu_ticks,
            newest.machine_cpu_ticks,
            oldest.machine_cpu_ticks,
        ) {
            (Some(pn), Some(po), Some(mn), Some(mo)) if pn >= po && mn > mo => {
                ((pn - po) as f64 * 100.0 / (mn - mo) as f64).clamp(0.0, 100.0)
            }
            _ => LOAD_UNKNOWN,
        };
        let write_bytes_per_second = match (newest.write_bytes_total, previous.write_bytes_total) {
            (Some(n), Some(o)) if n >= o && last_interval_ms > 0 => {
                (n - o) as f64 * 1000.0 / last_interval_ms as f64
            }
            _ => LOAD_UNKNOWN,
        };
        let as_f64 = |value: Option<u64>| value.map_or(LOAD_UNKNOWN, |v| v as f64);
        Some(LoadReport {
            journal_io_util_pct: util(newest.journal_io_ticks_ms, oldest.journal_io_ticks_ms),
            log_io_util_pct: util(newest.log_io_ticks_ms, oldest.log_io_ticks_ms),
            cpu_used_pct,
            write_bytes_per_second,
            disk_free_bytes: as_f64(newest.disk_free_bytes),
            disk_total_bytes: as_f64(newest.disk_total_bytes),
        })
    }
}

impl Default for LoadWindow {
    fn default() -> Self {
        Self::new(LOAD_WINDOW_SAMPLES_DEFAULT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(now_ms: u64, ticks: u64, written: u64) -> RawLoadSample {
        RawLoadSample {
            now_ms,
            journal_io_ticks_ms: Some(ticks),
            log_io_ticks_ms: Some(ticks),
            process_cpu_ticks: Some(now_ms / 40),
            machine_cpu_ticks: Some(now_ms / 5),
            write_bytes_total: Some(written),
            disk_free_bytes: Some(10),
            disk_total_bytes: Some(100),
        }
    }

    #[test]
    fn nothing_until_window_is_full() {
        let mut w = LoadWindow::new(3);
        assert_eq!(w.push(sample(0, 0, 0)), None);
        assert_eq!(w.push(sample(1000, 500, 10)), None);
        assert_eq!(w.push(sample(2000, 1000, 20)), None);
        let r = w.push(sample(3000, 1200, 50)).unwrap();
        // 1200 ticks over 3000 ms = 40 %, the window average, not the last second's 20 %.
        assert!((r.journal_io_util_pct - 40.0).abs() < 1e-9);
        // Write rate is the last interval only: 30 bytes in one second.
        assert!((r.write_bytes_per_second - 30.0).abs() < 1e-9);
        assert!((r.cpu_used_pct - 12.5).abs() < 1e-9);
        assert_eq!(r.disk_free_bytes, 10.0);
    }

    #[test]
    fn window_slides_and_clamps() {
        let mut w = LoadWindow::new(2);
        let _ = w.push(sample(0, 0, 0));
        let _ = w.push(sample(1000, 0, 0));
        let _ = w.push(sample(2000, 0, 0));
        let r = w.push(sample(3000, 5000, 0)).unwrap();
        assert_eq!(r.journal_io_util_pct, 100.0);
        let r = w.push(sample(4000, 5000, 0)).unwrap();
        assert_eq!(r.journal_io_util_pct, 100.0);
        let r = w.push(sample(5000, 5000, 0)).unwrap();
        assert_eq!(r.journal_io_util_pct, 0.0);
    }

    #[test]
    fn unknown_counters_and_time_going_back() {
        let mut w = LoadWindow::new(1);
        let _ = w.push(RawLoadSample {
            now_ms: 10,
            ..Default::default()
        });
        let r = w
            .push(RawLoadSample {
                now_ms: 20,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(r, LoadReport::unknown());
        assert_eq!(r.io_util_pct(), None);
        // A sample from the past is ignored; the previous report stands.
        let again = w.push(RawLoadSample {
            now_ms: 5,
            journal_io_ticks_ms: Some(1),
            ..Default::default()
        });
        assert_eq!(again, Some(r));
        // A counter that went backwards (device reset) reads as unknown, not as a huge rate.
        let mut w = LoadWindow::new(1);
        let _ = w.push(sample(0, 100, 100));
        let r = w.push(sample(1000, 50, 50)).unwrap();
        assert_eq!(r.io_util_pct(), None);
        assert_eq!(r.write_bytes_per_second, LOAD_UNKNOWN);
    }
}
