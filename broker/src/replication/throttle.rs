//! The reassignment throttle (Kafka's `follower.replication.throttled.rate`): one token bucket of
//! bytes per second, shared by every replica fetcher of this broker, for the partitions it is
//! catching up for a reassignment (`skiff_cluster::reassign::catching_up`). A fetcher asks at
//! most the bucket's [`TokenBucket::allowance`] of such partitions in one request and is charged
//! what came back ([`TokenBucket::take`]); a fetch answers whole batches, so the bucket may go
//! into debt, which later allowances pay back: the rate holds on average over any second, and
//! one burst is at most a second's worth plus one batch per partition.
//!
//! Pure: the time comes in as milliseconds, so the arithmetic is tested without a clock.
//!
//! Must never: read the clock, block a fetcher (an empty bucket leaves the throttled partitions
//! out of the next request; the others are fetched as usual), or throttle when the rate is 0.

/// How much a caller may fetch now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowance {
    /// No throttle (rate 0).
    Unlimited,
    /// At most this many bytes (at least 1).
    Bytes(u64),
    /// Nothing until the bucket refills.
    Empty,
}

/// A token bucket of bytes, refilled at `rate` bytes per second up to one second's worth.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    /// Bytes per second; 0 = unthrottled.
    rate: u64,
    /// Tokens in byte-milliseconds (bytes × 1000), so a refill after any interval is exact: one
    /// in whole bytes would round a frequent caller's refills down to nothing.
    milli_tokens: i128,
    last_ms: u64,
}

impl TokenBucket {
    /// A full bucket at `now_ms` (a burst of one second's worth is allowed at once).
    pub fn new(rate_bytes_per_second: u64, now_ms: u64) -> Self {
        Self {
            rate: rate_bytes_per_second,
            milli_tokens: Self::capacity(rate_bytes_per_second),
            last_ms: now_ms,
        }
    }

    fn capacity(rate: u64) -> i128 {
        i128::from(rate) * 1000
    }

    fn refill(&mut self, now_ms: u64) {
        let elapsed = now_ms.saturating_sub(self.last_ms);
        self.last_ms = self.last_ms.max(now_ms);
        let added = i128::from(self.rate) * i128::from(elapsed);
        self.milli_tokens = (self.milli_tokens + added).min(Self::capacity(self.rate));
    }

    /// What may be fetched at `now_ms`.
    pub fn allowance(&mut self, now_ms: u64) -> Allowance {
        if self.rate == 0 {
            return Allowance::Unlimited;
        }
        self.refill(now_ms);
        let bytes = self.milli_tokens / 1000;
        if bytes >= 1 {
            Allowance::Bytes(u64::try_from(bytes).unwrap_or(u64::MAX))
        } else {
            Allowance::Empty
        }
    }

    /// Changes the rate at `now_ms` (the dynamic `skiff.reassignment.throttle.bytes.per.second`):
    /// what was earned so far stays, within the new second's worth; 0 lifts the throttle.
    pub fn set_rate(&mut self, rate_bytes_per_second: u64, now_ms: u64) {
        self.refill(now_ms);
        if self.rate == 0 {
            // Unthrottled until now: start from a full bucket at the new rate.
            self.milli_tokens = Self::capacity(rate_bytes_per_second);
        }
        self.rate = rate_bytes_per_second;
        self.milli_tokens = self.milli_tokens.min(Self::capacity(self.rate));
    }

    /// Charges `bytes` fetched at `now_ms` (possibly past the allowance: the bucket goes into
    /// debt).
    pub fn take(&mut self, bytes: u64, now_ms: u64) {
        if self.rate == 0 {
            return;
        }
        self.refill(now_ms);
        self.milli_tokens -= i128::from(bytes) * 1000;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_full_bucket_allows_a_second_then_refills_at_the_rate() {
        let mut bucket = TokenBucket::new(1000, 0);
        assert_eq!(bucket.allowance(0), Allowance::Bytes(1000));
        bucket.take(1000, 0);
        assert_eq!(bucket.allowance(0), Allowance::Empty);
        assert_eq!(bucket.allowance(250), Allowance::Bytes(250));
        // Never more than a second's worth, however long it idles.
        assert_eq!(bucket.allowance(60_000), Allowance::Bytes(1000));
    }

    #[test]
    fn the_rate_changes_live() {
        let mut bucket = TokenBucket::new(0, 0);
        assert_eq!(bucket.allowance(0), Allowance::Unlimited);
        bucket.set_rate(500, 0);
        assert_eq!(bucket.allowance(0), Allowance::Bytes(500));
        bucket.take(500, 0);
        bucket.set_rate(2000, 0);
        assert_eq!(bucket.allowance(500), Allowance::Bytes(1000));
        bucket.set_rate(0, 500);
        assert_eq!(bucket.allowance(500), Allowance::Unlimited);
    }

    #[test]
    fn a_debt_is_paid_back_before_anything_more_is_allowed() {
        let mut bucket = TokenBucket::new(1000, 0);
        bucket.take(3000, 0); // one fetch answered a large batch whole
        assert_eq!(bucket.allowance(1_999), Allowance::Empty);
        assert_eq!(bucket.allowance(2_001), Allowance::Bytes(1));
    }

    #[test]
    fn frequent_callers_are_refilled_exactly() {
        // 7 bytes a second asked every millisecond: whole-byte refills would round to 0.
        let mut bucket = TokenBucket::new(7, 0);
        bucket.take(7, 0);
        let mut allowed_at = None;
        for now in 1..=1000 {
            if let Allowance::Bytes(_) = bucket.allowance(now) {
                allowed_at.get_or_insert(now);
            }
        }
        assert_eq!(allowed_at, Some(143), "1 byte after 1000/7 ms");
        assert_eq!(bucket.allowance(1000), Allowance::Bytes(7));
    }

    #[test]
    fn rate_zero_is_unthrottled_and_time_going_back_adds_nothing() {
        let mut off = TokenBucket::new(0, 0);
        off.take(u64::MAX, 5);
        assert_eq!(off.allowance(5), Allowance::Unlimited);
        let mut bucket = TokenBucket::new(100, 1_000);
        bucket.take(100, 1_000);
        assert_eq!(bucket.allowance(500), Allowance::Empty);
        assert_eq!(bucket.allowance(1_010), Allowance::Bytes(1));
    }

    proptest! {
        /// Whatever the pattern of asks, what a caller that takes its whole allowance gets over
        /// any run is at most one second's burst plus the rate times the time elapsed.
        #[test]
        fn the_rate_holds_over_any_run(
            rate in 1u64..1_000_000,
            steps in proptest::collection::vec((0u64..2_000, 0u64..3_000_000), 1..200),
        ) {
            let mut bucket = TokenBucket::new(rate, 0);
            let (mut now, mut taken) = (0u64, 0u128);
            for (advance, ask) in steps {
                now += advance;
                if let Allowance::Bytes(allowed) = bucket.allowance(now) {
                    let got = ask.min(allowed).max(1);
                    bucket.take(got, now);
                    taken += u128::from(got);
                }
                let bound = u128::from(rate) + u128::from(rate) * u128::from(now) / 1000;
                prop_assert!(taken <= bound, "{taken} > {bound} at {now} ms");
            }
        }
    }
}
