//! The defaults and bounds of the group coordinator's broker keys (`group.*`), with Kafka's default
//! where Kafka has one. The coordinator itself holds no default: the group driver maps these keys
//! onto its `GroupConfig`.
//!
//! Must never: import the coordinator (config is a leaf of the broker's folders).

/// Kafka's `group.min.session.timeout.ms`: a JoinGroup asking for less gets
/// INVALID_SESSION_TIMEOUT. Below this, a member that pauses for a GC or a slow poll would be
/// expelled constantly.
pub const SESSION_TIMEOUT_MS_MIN_DEFAULT: i32 = 6_000;

/// Kafka's `group.max.session.timeout.ms`: a JoinGroup asking for more gets
/// INVALID_SESSION_TIMEOUT. Above this a dead member would hold its partitions for too
/// long.
pub const SESSION_TIMEOUT_MS_MAX_DEFAULT: i32 = 1_800_000;

/// Kafka's `group.initial.rebalance.delay.ms` default: the first rebalance of an empty group waits
/// this long for more members, so a group that starts together gets one rebalance, not one per
/// member (and a member whose join beats its own metadata refresh is not left out).
pub const INITIAL_REBALANCE_DELAY_MS_DEFAULT: i32 = 3000;

/// The longest `group.initial.rebalance.delay.ms` the broker accepts (Kafka sets none). The wait
/// never outlasts a group's rebalance timeout anyway; this is Kafka's default
/// `max.poll.interval.ms`, the rebalance timeout Java consumers send, so a longer delay could only
/// hold a new group's first join for longer than any default client waits.
pub const INITIAL_REBALANCE_DELAY_MS_MAX: i32 = 300_000;

const _: () = assert!(SESSION_TIMEOUT_MS_MIN_DEFAULT <= SESSION_TIMEOUT_MS_MAX_DEFAULT);
const _: () = assert!(
    0 <= INITIAL_REBALANCE_DELAY_MS_DEFAULT
        && INITIAL_REBALANCE_DELAY_MS_DEFAULT <= INITIAL_REBALANCE_DELAY_MS_MAX
);
