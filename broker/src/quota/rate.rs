//! The arithmetic of client quotas, pure and over milliseconds passed in: Kafka's sampled
//! [`Rate`] (the `quota.window.num` windows of `quota.window.size.seconds` that byte-rate and
//! request-time quotas are measured over), its throttle time, and the [`TokenBucket`] the
//! controller mutation quota uses.
//!
//! The figures follow Apache Kafka 4.1's `SampledStat`, `Rate.windowSize`, `TokenBucket` and
//! `QuotaUtils.throttleTime`: a client over its quota is throttled for the time its measured rate
//! takes to fall back to the quota, `(rate - quota) / quota × window`.
//!
//! Must never: read a clock, or allocate after a sensor is made.

/// `quota.window.num` and `quota.window.size.seconds`, as the arithmetic uses them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Windows {
    /// Samples kept (Kafka's `quota.window.num`, 11 by default).
    pub(crate) count: usize,
    /// Length of one sample in milliseconds (`quota.window.size.seconds` × 1000).
    pub(crate) window_ms: i64,
}

impl Windows {
    /// Kafka's defaults: 11 windows of 1 s.
    #[cfg(test)]
    pub(crate) const KAFKA_DEFAULT: Self = Self {
        count: 11,
        window_ms: 1000,
    };
}

/// One window of a [`Rate`]: what was recorded since it started.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Sample {
    started_ms: i64,
    value: f64,
}

/// A rate per second over the last `count` windows (Kafka's `Rate` over a `SampledStat` of
/// `WindowedSum`). Windows start at the first record after the previous one ended, so idle time
/// leaves no empty windows behind.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Rate {
    samples: Vec<Sample>,
    current: usize,
}

impl Rate {
    /// A rate with its first window starting at `now_ms`.
    pub(crate) fn new(windows: Windows, now_ms: i64) -> Self {
        debug_assert!(windows.count >= 2 && windows.window_ms > 0);
        Self {
            samples: vec![
                Sample {
                    started_ms: now_ms,
                    value: 0.0,
                };
                windows.count.max(1)
            ],
            current: 0,
        }
    }

    /// Adds `value` at `now_ms`, opening the next window if the current one has ended.
    pub(crate) fn record(&mut self, windows: Windows, value: f64, now_ms: i64) {
        let ended = self
            .samples
            .get(self.current)
            .is_some_and(|sample| now_ms - sample.started_ms >= windows.window_ms);
        if ended {
            self.current = (self.current + 1) % self.samples.len();
            if let Some(sample) = self.samples.get_mut(self.current) {
                *sample = Sample {
                    started_ms: now_ms,
                    value: 0.0,
                };
            }
        }
        if let Some(sample) = self.samples.get_mut(self.current) {
            sample.value += value;
        }
    }

    /// Forgets windows that started `count × window` or more before `now_ms` (Kafka's
    /// `purgeObsoleteSamples`).
    fn purge(&mut self, windows: Windows, now_ms: i64) {
        let expire_ms = windows.window_ms.saturating_mul(self.samples.len() as i64);
        for sample in &mut self.samples {
            if now_ms - sample.started_ms >= expire_ms {
                *sample = Sample {
                    started_ms: now_ms,
                    value: 0.0,
                };
            }
        }
    }

    /// The milliseconds the rate divides by: from the oldest window's start to `now_ms`, but
    /// never less than `count − 1` whole windows (Kafka's `Rate.windowSize`), so a new client's
    /// first burst is not measured over a few milliseconds.
    pub(crate) fn window_size_ms(&mut self, windows: Windows, now_ms: i64) -> i64 {
        self.purge(windows, now_ms);
        let oldest = self
            .samples
            .iter()
            .map(|sample| sample.started_ms)
            .min()
            .unwrap_or(now_ms);
        let mut elapsed = now_ms - oldest;
        let full_windows = elapsed / windows.window_ms;
        let min_full_windows = self.samples.len() as i64 - 1;
        if full_windows < min_full_windows {
            elapsed += (min_full_windows - full_windows) * windows.window_ms;
        }
        elapsed
    }

    /// The measured rate per second at `now_ms`.
    pub(crate) fn measure(&mut self, windows: Windows, now_ms: i64) -> f64 {
        let window_ms = self.window_size_ms(windows, now_ms);
        let total: f64 = self.samples.iter().map(|sample| sample.value).sum();
        if window_ms <= 0 {
            return 0.0;
        }
        total * 1000.0 / window_ms as f64
    }

    /// Records `value` and answers how long the client must wait, in milliseconds, for the
    /// measured rate to fall back to `quota` (0 when within it). Kafka's
    /// `ClientQuotaManager.recordAndGetThrottleTimeMs`.
    pub(crate) fn record_and_throttle(
        &mut self,
        windows: Windows,
        quota: f64,
        value: f64,
        now_ms: i64,
    ) -> u64 {
        self.record(windows, value, now_ms);
        let rate = self.measure(windows, now_ms);
        if rate <= quota {
            return 0;
        }
        let window_ms = self.window_size_ms(windows, now_ms);
        throttle_ms(rate, quota, window_ms)
    }
}

/// `(rate − quota) / quota × window`, rounded (Kafka's `QuotaUtils.throttleTime`); 0 when within
/// the quota. A quota of 0 (everything refused) throttles for the whole window.
pub(crate) fn throttle_ms(rate: f64, quota: f64, window_ms: i64) -> u64 {
    if rate <= quota {
        return 0;
    }
    if quota <= 0.0 {
        return u64::try_from(window_ms).unwrap_or(0);
    }
    let throttle = (rate - quota) / quota * window_ms as f64;
    saturating_ms(throttle.round())
}

/// A non-negative float of milliseconds as a `u64`, saturating.
// INVARIANT: the `as` casts saturate (NaN gives 0), and negatives were mapped to 0 first.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn saturating_ms(ms: f64) -> u64 {
    if ms.is_nan() || ms <= 0.0 {
        0
    } else {
        ms as u64
    }
}

/// Kafka's `TokenBucket` for `controller_mutation_rate`: credits refill at the quota per second up
/// to a burst of `(count − 1) × window` seconds' worth; a mutation takes its partitions' worth and
/// may overdraw. A negative balance is the violation, and its throttle is the time to refill to 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct TokenBucket {
    tokens: f64,
    updated_ms: i64,
}

impl TokenBucket {
    /// A full bucket at `now_ms`.
    pub(crate) fn new(windows: Windows, quota: f64, now_ms: i64) -> Self {
        Self {
            tokens: burst(windows, quota),
            updated_ms: now_ms,
        }
    }

    fn refill(&mut self, windows: Windows, quota: f64, now_ms: i64) {
        let elapsed_s = (now_ms - self.updated_ms).max(0) as f64 / 1000.0;
        self.tokens = (self.tokens + quota * elapsed_s).min(burst(windows, quota));
        self.updated_ms = now_ms.max(self.updated_ms);
    }

    /// How long, in milliseconds, until the balance is back to 0 (0 when it is not negative).
    pub(crate) fn throttle_ms(&mut self, windows: Windows, quota: f64, now_ms: i64) -> u64 {
        self.refill(windows, quota, now_ms);
        if self.tokens >= 0.0 {
            return 0;
        }
        if quota <= 0.0 {
            return u64::try_from(windows.window_ms).unwrap_or(0);
        }
        saturating_ms((-self.tokens / quota * 1000.0).round())
    }

    /// The balance (negative when overdrawn), as of the last refill.
    pub(crate) fn tokens(&self) -> f64 {
        self.tokens
    }

    /// Takes `permits` at `now_ms` and answers the throttle after it.
    pub(crate) fn record(
        &mut self,
        windows: Windows,
        quota: f64,
        permits: f64,
        now_ms: i64,
    ) -> u64 {
        self.refill(windows, quota, now_ms);
        self.tokens = (self.tokens - permits).min(burst(windows, quota));
        self.throttle_ms(windows, quota, now_ms)
    }
}

fn burst(windows: Windows, quota: f64) -> f64 {
    let seconds = (windows.count.saturating_sub(1)) as f64 * windows.window_ms as f64 / 1000.0;
    quota * seconds
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const W: Windows = Windows::KAFKA_DEFAULT;

    #[test]
    fn a_new_rate_divides_by_ten_windows_at_least() {
        let mut rate = Rate::new(W, 0);
        rate.record(W, 10_000.0, 0);
        // (11 − 1) windows of 1 s: 1000 per second, not 10 000 per millisecond.
        assert!((rate.measure(W, 0) - 1000.0).abs() < 1e-9);
    }

    #[test]
    fn throttle_is_the_time_for_the_rate_to_fall_back_to_the_quota() {
        let mut rate = Rate::new(W, 0);
        // 20 000 bytes over a 10 s window is 2000/s against a quota of 1000/s: 100 % over, so
        // one more window's worth (10 s) of silence.
        assert_eq!(rate.record_and_throttle(W, 1000.0, 20_000.0, 0), 10_000);
        let mut within = Rate::new(W, 0);
        assert_eq!(within.record_and_throttle(W, 1000.0, 9_000.0, 0), 0);
    }

    #[test]
    fn old_windows_are_forgotten() {
        let mut rate = Rate::new(W, 0);
        rate.record(W, 1e9, 0);
        assert_eq!(rate.measure(W, 11_000), 0.0);
    }

    #[test]
    fn token_bucket_overdraws_once_then_throttles_until_refilled() {
        let mut bucket = TokenBucket::new(W, 2.0, 0);
        // Burst: 10 s × 2 per second = 20 partitions.
        assert_eq!(bucket.record(W, 2.0, 20.0, 0), 0);
        assert_eq!(bucket.record(W, 2.0, 4.0, 0), 2000);
        assert_eq!(bucket.throttle_ms(W, 2.0, 1000), 1000);
        assert_eq!(bucket.throttle_ms(W, 2.0, 2000), 0);
    }

    proptest! {
        /// A client that waits out every throttle before its next request gets the quota on
        /// average over a long run, its requests each at most one window's worth (a request
        /// of many windows' worth overshoots by the burst a fresh window allows, in Kafka too:
        /// its throttle outlasts the windows that remember it).
        #[test]
        fn waiting_out_every_throttle_holds_the_quota(
            quota in 1_000.0f64..10_000_000.0,
            fractions in proptest::collection::vec(0.001f64..1.0, 50..400),
            gap_ms in 0i64..50,
        ) {
            let mut rate = Rate::new(W, 0);
            let mut now = 0i64;
            let mut sent = 0.0;
            let mut largest = 0.0f64;
            for fraction in &fractions {
                let size = quota * fraction;
                let throttle = rate.record_and_throttle(W, quota, size, now);
                sent += size;
                largest = largest.max(size);
                now += i64::try_from(throttle).unwrap() + gap_ms;
            }
            // Kafka's windows forget their oldest sample whole, a window's worth out of the
            // eleven, so a client kept at its quota averages up to 11/10 of it; beyond that, at
            // most the windows' worth a sensor remembers plus the last request.
            let elapsed_s = now as f64 / 1000.0;
            let windows = W.count as f64;
            let bound = quota * (elapsed_s * windows / (windows - 1.0) + windows) + largest;
            prop_assert!(sent <= bound + 1.0,
                "sent {sent} in {elapsed_s} s at quota {quota}");
        }

        /// The throttle is 0 exactly when the rate is within the quota, and grows with the excess.
        #[test]
        fn throttle_is_monotonic_in_the_rate(
            quota in 1.0f64..1e9, excess in 0.0f64..10.0, more in 0.0f64..10.0,
            window_ms in 1_000i64..60_000,
        ) {
            let low = throttle_ms(quota * (1.0 + excess), quota, window_ms);
            let high = throttle_ms(quota * (1.0 + excess + more), quota, window_ms);
            prop_assert!(low <= high);
            prop_assert_eq!(throttle_ms(quota, quota, window_ms), 0);
        }

        /// The measured rate never counts a value twice nor after it left the windows.
        #[test]
        fn measure_is_total_over_window(
            values in proptest::collection::vec((0.0f64..1e6, 0i64..3_000), 1..100),
        ) {
            let mut rate = Rate::new(W, 0);
            let mut now = 0i64;
            let mut total = 0.0;
            for (value, step) in &values {
                now += step;
                rate.record(W, *value, now);
                total += value;
            }
            let window = rate.window_size_ms(W, now);
            prop_assert!(window >= 10_000);
            prop_assert!(rate.measure(W, now) * window as f64 / 1000.0 <= total + 1e-3);
        }

        /// A bucket never holds more than its burst, and its throttle is 0 after waiting it out.
        #[test]
        fn bucket_throttle_is_waited_out(
            quota in 0.1f64..1000.0,
            takes in proptest::collection::vec((0.0f64..500.0, 0i64..5_000), 1..50),
        ) {
            let mut bucket = TokenBucket::new(W, quota, 0);
            let mut now = 0;
            for (permits, step) in takes {
                now += step;
                let throttle = bucket.record(W, quota, permits, now);
                let after = now + i64::try_from(throttle).unwrap() + 1;
                prop_assert_eq!(bucket.clone().throttle_ms(W, quota, after), 0);
            }
        }
    }
}
