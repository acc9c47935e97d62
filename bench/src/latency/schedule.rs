//! The producer's fixed schedule: message `i` is meant to be sent at `i / rate` seconds after the
//! phase starts, whatever happened to the messages before it. Latency is measured from this
//! intended time, so a send that is late (the previous request was slow, the in-flight window was
//! full, the thread was descheduled) counts its lateness instead of quietly moving the schedule
//! (Gil Tene's "coordinated omission").
//!
//! Must never: read a clock (times are passed in, in nanoseconds since the phase started), or let a
//! late send shift the intended time of the messages after it.

/// When each message of a phase is due.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    /// Messages per second; `None` sends as fast as the broker takes them (every message is due at
    /// the start), which is how the maximum throughput is measured.
    pub rate_per_second: Option<f64>,
    /// Messages in the phase.
    pub message_count: u64,
}

impl Schedule {
    /// Intended send time of message `index`, in nanoseconds since the phase started.
    pub fn intended_nanos(&self, index: u64) -> u64 {
        match self.rate_per_second {
            // f64 keeps 53 bits: exact to the nanosecond for any phase shorter than ~100 days.
            Some(rate) if rate > 0.0 => (index as f64 * 1e9 / rate).round() as u64,
            _ => 0,
        }
    }

    /// How many messages are due at `elapsed_nanos` (intended time ≤ now), at most the count.
    pub fn due_count(&self, elapsed_nanos: u64) -> u64 {
        match self.rate_per_second {
            Some(rate) if rate > 0.0 => {
                // The first guess from floating point, then corrected so that it agrees exactly
                // with `intended_nanos` (rounding must never make a due message not due).
                let mut due = ((elapsed_nanos as f64 * rate / 1e9).floor() as u64 + 1)
                    .min(self.message_count);
                while due > 0 && self.intended_nanos(due - 1) > elapsed_nanos {
                    due -= 1;
                }
                while due < self.message_count && self.intended_nanos(due) <= elapsed_nanos {
                    due += 1;
                }
                due
            }
            _ => self.message_count,
        }
    }

    /// The next request at `elapsed_nanos` when `sent` messages have gone: the range of messages
    /// it carries (every due one, at most `batch_records_max`), or `Err(wait_until)` with the
    /// intended time of the next message when none is due yet. `Ok` with an empty range never
    /// happens; `None` means the phase has sent everything.
    pub fn next_batch(
        &self,
        sent: u64,
        elapsed_nanos: u64,
        batch_records_max: u64,
    ) -> Option<Result<std::ops::Range<u64>, u64>> {
        if sent >= self.message_count {
            return None;
        }
        let due = self.due_count(elapsed_nanos);
        if due <= sent {
            return Some(Err(self.intended_nanos(sent)));
        }
        Some(Ok(sent..due.min(sent + batch_records_max.max(1))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn intended_times_are_evenly_spaced_from_zero() {
        let schedule = Schedule {
            rate_per_second: Some(1000.0),
            message_count: 10,
        };
        assert_eq!(schedule.intended_nanos(0), 0);
        assert_eq!(schedule.intended_nanos(1), 1_000_000);
        assert_eq!(schedule.intended_nanos(9), 9_000_000);
        assert_eq!(schedule.due_count(0), 1);
        assert_eq!(schedule.due_count(999_999), 1);
        assert_eq!(schedule.due_count(1_000_000), 2);
        assert_eq!(schedule.due_count(u64::MAX / 2), 10);
    }

    #[test]
    fn a_late_sender_takes_every_due_message_and_the_schedule_does_not_move() {
        let schedule = Schedule {
            rate_per_second: Some(1000.0),
            message_count: 100,
        };
        assert_eq!(schedule.next_batch(0, 0, 16), Some(Ok(0..1)));
        // Nothing more is due until 1 ms.
        assert_eq!(schedule.next_batch(1, 500_000, 16), Some(Err(1_000_000)));
        // The sender stalled for 10.5 ms: messages 1..=10 are all due now, and go together.
        assert_eq!(schedule.next_batch(1, 10_500_000, 16), Some(Ok(1..11)));
        // A longer stall is capped per request; the rest go next, still at their old times.
        assert_eq!(schedule.next_batch(11, 40_000_000, 16), Some(Ok(11..27)));
        assert_eq!(schedule.intended_nanos(27), 27_000_000);
        assert_eq!(schedule.next_batch(100, 1 << 40, 16), None);
    }

    #[test]
    fn an_unthrottled_schedule_has_everything_due_at_once() {
        let schedule = Schedule {
            rate_per_second: None,
            message_count: 40,
        };
        assert_eq!(schedule.intended_nanos(39), 0);
        assert_eq!(schedule.next_batch(0, 0, 16), Some(Ok(0..16)));
        assert_eq!(schedule.next_batch(32, 0, 16), Some(Ok(32..40)));
    }

    proptest! {
        #[test]
        fn due_count_agrees_with_intended_times(
            rate in 1.0f64..2_000_000.0,
            elapsed in 0u64..10_000_000_000,
        ) {
            let schedule = Schedule { rate_per_second: Some(rate), message_count: u64::MAX / 4 };
            let due = schedule.due_count(elapsed);
            prop_assert!(due >= 1);
            prop_assert!(schedule.intended_nanos(due - 1) <= elapsed);
            prop_assert!(schedule.intended_nanos(due) > elapsed);
        }
    }
}
