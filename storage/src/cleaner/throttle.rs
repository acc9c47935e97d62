//! The I/O throttle's arithmetic (Kafka's `Throttler`, behind `log.cleaner.io.max.bytes.per.second`):
//! given the bytes moved and the time taken since a window began, how long to pause so the
//! rate stays at the limit. Pure; the caller measures time and sleeps.

use std::time::Duration;

/// How long to pause after moving `bytes` in `elapsed`, so that `bytes` over the whole time
/// (elapsed + pause) is at most `bytes_per_second`. Zero when under the rate; a limit of 0 or
/// `f64::INFINITY` never pauses (no limit).
pub fn throttle_pause(bytes: u64, elapsed: Duration, bytes_per_second: f64) -> Duration {
    if !(bytes_per_second > 0.0 && bytes_per_second.is_finite()) {
        return Duration::ZERO;
    }
    let needed = bytes as f64 / bytes_per_second;
    let pause = needed - elapsed.as_secs_f64();
    if pause > 0.0 {
        Duration::try_from_secs_f64(pause).unwrap_or(Duration::MAX)
    } else {
        Duration::ZERO
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_only_past_the_rate() {
        let rate = 50.0 * 1024.0 * 1024.0;
        assert_eq!(
            throttle_pause(25 << 20, Duration::from_secs(1), rate),
            Duration::ZERO
        );
        let pause = throttle_pause(100 << 20, Duration::from_secs(1), rate);
        assert!((pause.as_secs_f64() - 1.0).abs() < 1e-9);
        assert_eq!(
            throttle_pause(u64::MAX, Duration::ZERO, 0.0),
            Duration::ZERO
        );
        assert_eq!(
            throttle_pause(u64::MAX, Duration::ZERO, f64::INFINITY),
            Duration::ZERO
        );
    }
}
