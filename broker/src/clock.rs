//! The broker's clock readings, in one file so a test or a simulation can see every one: the
//! wall clock in milliseconds (log-append times, segment age, retention, the group coordinator's
//! deadlines), monotonic instants (how long something took, and the base the session fence
//! counts from), monotonic milliseconds since the first reading (the time the replica machines
//! run on, which a wall-clock step must not move), and tokio's timer clock (deadlines that timers
//! wait for, so a paused test runtime moves both).
//!
//! The pure cores (protocol, storage, the group coordinator, placement, the cluster crate and
//! its replica machines, the metadata store's core) never read a clock: the broker reads it here
//! and passes the value in. The wall clock is read nowhere else in the broker. Two kinds of
//! readings still bypass this file today: the admin requests' deadlines in
//! `cluster/requests.rs` and `cluster/topic_changes.rs` read tokio's clock directly (the clock
//! [`timer_now`] reads, so they agree with it), and start-up times partition recovery with a
//! `std::time::Instant` for its log line.
//!
//! Must never: be called from a pure core, or hand out a wall-clock reading where a duration is
//! measured (a clock step would bend it).

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
