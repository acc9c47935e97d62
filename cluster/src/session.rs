//! Whether a broker may act as a partition leader right now: its session must be provably alive
//! (docs/design/cluster.md §3, issue 15 item 4). A broker appends only while
//! - it is registered, and its image has caught up with its registration (so the image shows
//!   every leadership change made while it was away), and
//! - its lease cannot have expired yet: the last keep-alive the store acknowledged was *sent* at
//!   `t`, the store renewed the lease no earlier than `t`, so the lease lives at least until
//!   `t + TTL`; the broker stops at `t + TTL − margin`.
//!
//! A controller that elects a replacement for a leader first sees that leader's registration
//! gone, which happens only after its lease expired, which is after the old leader stopped.
//!
//! Must never: read the clock (time is passed in, in milliseconds of one monotonic clock).

/// The session fence of one broker.
#[derive(Debug, Clone)]
pub struct SessionFence {
    ttl_ms: u64,
    margin_ms: u64,
    registered_at_revision: Option<i64>,
    lease_valid_until_ms: u64,
}

/// The smallest margin kept between the broker's own deadline and its lease's expiry, whatever
/// the session timeout: it absorbs scheduling delays between the check and the append.
pub const SESSION_MARGIN_MS_MIN: u64 = 200;

impl SessionFence {
    /// A fence for sessions of `ttl_ms` (`broker.session.timeout.ms`). The margin is a fifth of
    /// the timeout, at least [`SESSION_MARGIN_MS_MIN`].
    pub fn new(ttl_ms: u64) -> Self {
        let margin_ms = (ttl_ms / 5).max(SESSION_MARGIN_MS_MIN).min(ttl_ms);
        Self {
            ttl_ms,
            margin_ms,
            registered_at_revision: None,
            lease_valid_until_ms: 0,
        }
    }

    /// The margin in use.
    pub fn margin_ms(&self) -> u64 {
        self.margin_ms
    }

    /// The lease was granted by a request sent at `sent_ms`, with `ttl_secs` (the store may
    /// grant a different TTL than asked).
    pub fn on_lease_granted(&mut self, sent_ms: u64, ttl_secs: i64) {
        self.ttl_ms = u64::try_from(ttl_secs).unwrap_or(0).saturating_mul(1000);
        self.lease_valid_until_ms = 0;
        self.registered_at_revision = None;
        self.renew(sent_ms);
    }

    /// The registration Txn succeeded at `revision`.
    pub fn on_registered(&mut self, revision: i64) {
        self.registered_at_revision = Some(revision);
    }

    /// A keep-alive sent at `sent_ms` was acknowledged.
    pub fn on_keep_alive_acknowledged(&mut self, sent_ms: u64) {
        self.renew(sent_ms);
    }

    fn renew(&mut self, sent_ms: u64) {
        let until = sent_ms
            .saturating_add(self.ttl_ms)
            .saturating_sub(self.margin_ms);
        self.lease_valid_until_ms = self.lease_valid_until_ms.max(until);
    }

    /// The store said the lease is gone (expired or revoked): the broker must register again.
    pub fn on_session_lost(&mut self) {
        self.registered_at_revision = None;
        self.lease_valid_until_ms = 0;
    }

    /// Whether the broker is registered at all.
    pub fn is_registered(&self) -> bool {
        self.registered_at_revision.is_some()
    }

    /// Whether the broker may accept writes as a leader at `now_ms`, given the revision its image
    /// has reached.
    pub fn may_lead(&self, now_ms: u64, image_revision: i64) -> bool {
        match self.registered_at_revision {
            Some(registered) => image_revision >= registered && now_ms < self.lease_valid_until_ms,
            None => false,
        }
    }

    /// Until when (exclusive) the session is known alive; 0 before any grant.
    pub fn valid_until_ms(&self) -> u64 {
        self.lease_valid_until_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broker_stops_leading_a_margin_before_its_lease_can_expire() {
        let mut fence = SessionFence::new(10_000);
        assert!(!fence.may_lead(0, 100));
        fence.on_lease_granted(1_000, 10);
        fence.on_registered(5);
        assert!(!fence.may_lead(1_001, 4), "image behind the registration");
        assert!(fence.may_lead(1_001, 5));
        assert!(fence.may_lead(8_999, 5));
        assert!(
            !fence.may_lead(9_000, 5),
            "10 s TTL − 2 s margin after the grant was sent"
        );
        fence.on_keep_alive_acknowledged(4_000);
        assert!(fence.may_lead(11_999, 6));
        assert!(!fence.may_lead(12_000, 6));
        // A late acknowledgement of an older keep-alive never shortens the session.
        fence.on_keep_alive_acknowledged(2_000);
        assert!(fence.may_lead(11_999, 6));
        fence.on_session_lost();
        assert!(!fence.may_lead(5_000, 6));
    }

    #[test]
    fn short_sessions_keep_the_minimum_margin() {
        assert_eq!(SessionFence::new(500).margin_ms(), SESSION_MARGIN_MS_MIN);
        assert_eq!(SessionFence::new(3_000).margin_ms(), 600);
    }
}
