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

/// Kafka's `group.consumer.session.timeout.ms`: a consumer group (KIP-848) member silent this
/// long is removed and its partitions go to the others.
pub const CONSUMER_SESSION_TIMEOUT_MS_DEFAULT: i32 = 45_000;
/// Kafka's `group.consumer.min.session.timeout.ms`.
pub const CONSUMER_SESSION_TIMEOUT_MS_MIN_DEFAULT: i32 = 45_000;
/// Kafka's `group.consumer.max.session.timeout.ms`.
pub const CONSUMER_SESSION_TIMEOUT_MS_MAX_DEFAULT: i32 = 60_000;
/// Kafka's `group.consumer.heartbeat.interval.ms`: how often a consumer group member
/// heartbeats (every heartbeat response carries it).
pub const CONSUMER_HEARTBEAT_INTERVAL_MS_DEFAULT: i32 = 5_000;
/// Kafka's `group.consumer.min.heartbeat.interval.ms`.
pub const CONSUMER_HEARTBEAT_INTERVAL_MS_MIN_DEFAULT: i32 = 5_000;
/// Kafka's `group.consumer.max.heartbeat.interval.ms`.
pub const CONSUMER_HEARTBEAT_INTERVAL_MS_MAX_DEFAULT: i32 = 15_000;
/// `group.consumer.max.size`: members of one consumer group; a join beyond it gets
/// GROUP_MAX_SIZE_REACHED. Kafka's default is `i32::MAX`; Skiff's is the classic groups' member
/// bound, so one group's memory (members × metadata and assignments) stays bounded.
pub const CONSUMER_GROUP_MAX_SIZE_DEFAULT: usize = 1_000;

const _: () = assert!(SESSION_TIMEOUT_MS_MIN_DEFAULT <= SESSION_TIMEOUT_MS_MAX_DEFAULT);
const _: () = assert!(
    CONSUMER_SESSION_TIMEOUT_MS_MIN_DEFAULT <= CONSUMER_SESSION_TIMEOUT_MS_DEFAULT
        && CONSUMER_SESSION_TIMEOUT_MS_DEFAULT <= CONSUMER_SESSION_TIMEOUT_MS_MAX_DEFAULT
        && CONSUMER_HEARTBEAT_INTERVAL_MS_MIN_DEFAULT <= CONSUMER_HEARTBEAT_INTERVAL_MS_DEFAULT
        && CONSUMER_HEARTBEAT_INTERVAL_MS_DEFAULT <= CONSUMER_HEARTBEAT_INTERVAL_MS_MAX_DEFAULT
        && CONSUMER_HEARTBEAT_INTERVAL_MS_DEFAULT < CONSUMER_SESSION_TIMEOUT_MS_DEFAULT
);
const _: () = assert!(
    0 <= INITIAL_REBALANCE_DELAY_MS_DEFAULT
        && INITIAL_REBALANCE_DELAY_MS_DEFAULT <= INITIAL_REBALANCE_DELAY_MS_MAX
);
