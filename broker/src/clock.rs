//! The only place in the broker that reads a clock. Pure cores (group coordinator, placement,
//! storage) take time as an argument; the edges read it here, so a test or a simulation can see
//! every reading in one file.
//!
//! Must never: be called from a pure core.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch: the wall clock for log-append times, segment age, retention
/// and the group coordinator's deadlines. A clock before 1970 reads as 0; one past i64 saturates.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// A monotonic instant, for measuring how long something took (request latency, conversion time).
pub(crate) fn instant() -> std::time::Instant {
    std::time::Instant::now()
}

/// The timer clock's present: tokio's, so that timers and deadlines agree (and a paused test
/// runtime moves both).
pub(crate) fn timer_now() -> tokio::time::Instant {
    tokio::time::Instant::now()
}

/// A timer deadline `after` from now.
pub(crate) fn deadline_after(after: Duration) -> tokio::time::Instant {
    timer_now() + after
}

/// Monotonic milliseconds since the first reading in this process: the time the pure replica
/// machines run on (lag limits, acks=all deadlines), which a wall-clock step must not move.
pub(crate) fn mono_ms() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let start = START.get_or_init(std::time::Instant::now);
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}
