//! Every bound and timeout of the group coordinator, with Kafka's default where Kafka has one.
//! The three that are broker config keys ([`GroupKeys`]) have their defaults and bounds in the
//! broker's config, whose driver passes them in; nothing here reads a file.
//!
//! Must never: hold a limit that no check uses.

/// Members (joined plus awaiting their member id) in one group. Kafka's `group.max.size`
/// defaults to `i32::MAX`; Skiff bounds it so one group's memory is bounded (members × metadata
/// and assignment bytes max). A JoinGroup beyond it gets GROUP_MAX_SIZE_REACHED.
pub const GROUP_MEMBERS_MAX_DEFAULT: usize = 1_000;

/// Groups the coordinator holds (including empty groups that only keep committed offsets). A new
/// group beyond it gets COORDINATOR_NOT_AVAILABLE.
pub const GROUPS_MAX_DEFAULT: usize = 100_000;

/// Bytes of protocol metadata one member sends in a JoinGroup (all its protocols together). A
/// consumer's subscription for thousands of topics stays far below; beyond it: INVALID_REQUEST.
pub const MEMBER_METADATA_BYTES_MAX_DEFAULT: usize = 1024 * 1024;

/// Bytes of assignment the leader hands one member in SyncGroup. Beyond it: INVALID_REQUEST.
pub const MEMBER_ASSIGNMENT_BYTES_MAX_DEFAULT: usize = 1024 * 1024;

/// Kafka's `offset.metadata.max.bytes`: the metadata string of one committed offset. Beyond it that
/// partition gets OFFSET_METADATA_TOO_LARGE and the others are still committed.
pub const OFFSET_METADATA_BYTES_MAX_DEFAULT: usize = 4096;

/// Committed offsets (group, topic, partition entries) the coordinator holds in all. A commit that
/// would add entries beyond it gets COORDINATOR_NOT_AVAILABLE for the new partitions (updates of
/// existing entries still pass), so memory stays bounded against a client committing endless
/// partitions.
pub const COMMITTED_OFFSETS_MAX_DEFAULT: usize = 10_000_000;

/// Transactional offset commits (TxnOffsetCommit: one per group, producer and partition) held
/// pending until their transaction's marker, in all. Kafka has no such bound. A TxnOffsetCommit
/// that would add entries beyond it gets COORDINATOR_NOT_AVAILABLE for those partitions (the
/// producer retries; entries free up as transactions end); a partition already pending for that
/// producer still updates. A TxnOffsetCommit of a partition without a committed offset also
/// counts its pending entries against `committed_offsets_max`, so committing every pending
/// transaction never takes the committed offsets past their bound. A log replayed at load may
/// hold more (they were accepted before): they are kept, and new ones wait until it drains.
pub const PENDING_TXN_OFFSETS_MAX_DEFAULT: usize = 1_000_000;

/// How long an Empty group outlives the OffsetDelete that removed its last committed offset
/// (Kafka's `offsets.retention.check.interval.ms` default: Kafka 4.x keeps such a group until its
/// periodic cleanup, so `kafka-consumer-groups --delete-offsets` then `--delete` succeeds). The
/// group still counts against `groups_max` meanwhile.
pub const EMPTIED_GROUP_RETENTION_MS_DEFAULT: i64 = 600_000;

/// The coordinator's settings that are broker config keys (`group.min.session.timeout.ms`,
/// `group.max.session.timeout.ms`, `group.initial.rebalance.delay.ms`): the broker's config owns
/// their defaults and bounds, and the group driver passes them in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupKeys {
    /// A JoinGroup asking for a shorter session gets INVALID_SESSION_TIMEOUT.
    pub session_timeout_ms_min: i32,
    /// A JoinGroup asking for a longer session gets INVALID_SESSION_TIMEOUT.
    pub session_timeout_ms_max: i32,
    /// How long the first rebalance of an empty group waits for more members.
    pub initial_rebalance_delay_ms: i32,
}

#[cfg(test)]
impl GroupKeys {
    /// Kafka's defaults of the three keys, which the coordinator's tests and simulation are
    /// written against (the broker runs with its config's).
    pub(crate) const KAFKA_DEFAULTS: Self = Self {
        session_timeout_ms_min: 6_000,
        session_timeout_ms_max: 1_800_000,
        initial_rebalance_delay_ms: 3000,
    };
}

/// The coordinator's bounds and timeouts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    /// See [`GroupKeys::session_timeout_ms_min`].
    pub session_timeout_ms_min: i32,
    /// See [`GroupKeys::session_timeout_ms_max`].
    pub session_timeout_ms_max: i32,
    /// See [`GROUP_MEMBERS_MAX_DEFAULT`].
    pub group_members_max: usize,
    /// See [`GROUPS_MAX_DEFAULT`].
    pub groups_max: usize,
    /// See [`MEMBER_METADATA_BYTES_MAX_DEFAULT`].
    pub member_metadata_bytes_max: usize,
    /// See [`MEMBER_ASSIGNMENT_BYTES_MAX_DEFAULT`].
    pub member_assignment_bytes_max: usize,
    /// See [`OFFSET_METADATA_BYTES_MAX_DEFAULT`].
    pub offset_metadata_bytes_max: usize,
    /// See [`COMMITTED_OFFSETS_MAX_DEFAULT`].
    pub committed_offsets_max: usize,
    /// See [`PENDING_TXN_OFFSETS_MAX_DEFAULT`].
    pub pending_txn_offsets_max: usize,
    /// See [`GroupKeys::initial_rebalance_delay_ms`]; 0 completes the first join as soon as every
    /// member has joined. The broker config bounds it; the coordinator treats a negative value
    /// as 0.
    pub initial_rebalance_delay_ms: i32,
    /// See [`EMPTIED_GROUP_RETENTION_MS_DEFAULT`].
    pub emptied_group_retention_ms: i64,
    /// Mixed into every member id so that ids handed out before a restart are not handed out again
    /// after it (the driver passes something that differs per start, e.g. the start time).
    pub member_id_salt: u64,
    /// The consumer groups' (KIP-848) settings, Kafka's `group.consumer.*` keys.
    pub consumer: crate::consumer::ConsumerGroupConfig,
}

impl GroupConfig {
    /// The keys as given, Kafka's defaults for the rest.
    pub fn new(keys: GroupKeys, member_id_salt: u64) -> Self {
        Self {
            session_timeout_ms_min: keys.session_timeout_ms_min,
            session_timeout_ms_max: keys.session_timeout_ms_max,
            group_members_max: GROUP_MEMBERS_MAX_DEFAULT,
            groups_max: GROUPS_MAX_DEFAULT,
            member_metadata_bytes_max: MEMBER_METADATA_BYTES_MAX_DEFAULT,
            member_assignment_bytes_max: MEMBER_ASSIGNMENT_BYTES_MAX_DEFAULT,
            offset_metadata_bytes_max: OFFSET_METADATA_BYTES_MAX_DEFAULT,
            committed_offsets_max: COMMITTED_OFFSETS_MAX_DEFAULT,
            pending_txn_offsets_max: PENDING_TXN_OFFSETS_MAX_DEFAULT,
            initial_rebalance_delay_ms: keys.initial_rebalance_delay_ms,
            emptied_group_retention_ms: EMPTIED_GROUP_RETENTION_MS_DEFAULT,
            member_id_salt,
            consumer: crate::consumer::ConsumerGroupConfig::default(),
        }
    }

    /// The initial rebalance delay as the coordinator applies it: a negative value (which the
    /// broker config refuses) counts as 0, i.e. off.
    pub(super) fn initial_rebalance_delay_ms_applied(&self) -> i64 {
        i64::from(self.initial_rebalance_delay_ms.max(0))
    }
}

// The leader's SyncGroup names every member; the request decoder refuses more than the protocol
// crate's maximum, so a group must never be allowed to grow past it.
const _: () = assert!(GROUP_MEMBERS_MAX_DEFAULT <= skiff_protocol::limits::GROUP_MEMBERS_MAX);
