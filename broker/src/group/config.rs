//! Every bound and timeout of the group coordinator, with Kafka's default where Kafka has one.
//! The broker's config maps its keys onto [`GroupConfig`]; nothing here reads a file.
//!
//! Must never: hold a limit that no check uses.

/// Kafka's `group.min.session.timeout.ms`: a JoinGroup asking for less gets
/// INVALID_SESSION_TIMEOUT. Below this, a member that pauses for a GC or a slow poll would be
/// expelled constantly.
pub const SESSION_TIMEOUT_MS_MIN_DEFAULT: i32 = 6_000;

/// Kafka's `group.max.session.timeout.ms`: a JoinGroup asking for more gets
/// INVALID_SESSION_TIMEOUT. Above this a dead member would hold its partitions for too
/// long.
pub const SESSION_TIMEOUT_MS_MAX_DEFAULT: i32 = 1_800_000;

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

/// Kafka's `group.initial.rebalance.delay.ms` default: the first rebalance of an empty group waits
/// this long for more members, so a group that starts together gets one rebalance, not one per
/// member (and a member whose join beats its own metadata refresh is not left out).
pub const INITIAL_REBALANCE_DELAY_MS_DEFAULT: i32 = 3000;

/// The longest `group.initial.rebalance.delay.ms` the broker accepts (Kafka sets none). The wait
/// never outlasts a group's rebalance timeout anyway; this is Kafka's default
/// `max.poll.interval.ms`, the rebalance timeout Java consumers send, so a longer delay could only
/// hold a new group's first join for longer than any default client waits.
pub const INITIAL_REBALANCE_DELAY_MS_MAX: i32 = 300_000;

/// How long an Empty group outlives the OffsetDelete that removed its last committed offset
/// (Kafka's `offsets.retention.check.interval.ms` default: Kafka 4.x keeps such a group until its
/// periodic cleanup, so `kafka-consumer-groups --delete-offsets` then `--delete` succeeds). The
/// group still counts against `groups_max` meanwhile.
pub const EMPTIED_GROUP_RETENTION_MS_DEFAULT: i64 = 600_000;

/// The coordinator's bounds and timeouts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    /// See [`SESSION_TIMEOUT_MS_MIN_DEFAULT`].
    pub session_timeout_ms_min: i32,
    /// See [`SESSION_TIMEOUT_MS_MAX_DEFAULT`].
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
    /// See [`INITIAL_REBALANCE_DELAY_MS_DEFAULT`]; 0 completes the first join as soon as every
    /// member has joined. Within `0..=`[`INITIAL_REBALANCE_DELAY_MS_MAX`] (the broker config
    /// checks it; the coordinator treats a negative value as 0).
    pub initial_rebalance_delay_ms: i32,
    /// See [`EMPTIED_GROUP_RETENTION_MS_DEFAULT`].
    pub emptied_group_retention_ms: i64,
    /// Mixed into every member id so that ids handed out before a restart are not handed out again
    /// after it (the driver passes something that differs per start, e.g. the start time).
    pub member_id_salt: u64,
}

impl GroupConfig {
    /// Kafka's defaults.
    pub fn new(member_id_salt: u64) -> Self {
        Self {
            session_timeout_ms_min: SESSION_TIMEOUT_MS_MIN_DEFAULT,
            session_timeout_ms_max: SESSION_TIMEOUT_MS_MAX_DEFAULT,
            group_members_max: GROUP_MEMBERS_MAX_DEFAULT,
            groups_max: GROUPS_MAX_DEFAULT,
            member_metadata_bytes_max: MEMBER_METADATA_BYTES_MAX_DEFAULT,
            member_assignment_bytes_max: MEMBER_ASSIGNMENT_BYTES_MAX_DEFAULT,
            offset_metadata_bytes_max: OFFSET_METADATA_BYTES_MAX_DEFAULT,
            committed_offsets_max: COMMITTED_OFFSETS_MAX_DEFAULT,
            initial_rebalance_delay_ms: INITIAL_REBALANCE_DELAY_MS_DEFAULT,
            emptied_group_retention_ms: EMPTIED_GROUP_RETENTION_MS_DEFAULT,
            member_id_salt,
        }
    }

    /// The initial rebalance delay as the coordinator applies it: a negative value (which the
    /// broker config refuses) counts as 0, i.e. off.
    pub(super) fn initial_rebalance_delay_ms_applied(&self) -> i64 {
        i64::from(self.initial_rebalance_delay_ms.max(0))
    }
}

const _: () = assert!(SESSION_TIMEOUT_MS_MIN_DEFAULT <= SESSION_TIMEOUT_MS_MAX_DEFAULT);
const _: () = assert!(
    0 <= INITIAL_REBALANCE_DELAY_MS_DEFAULT
        && INITIAL_REBALANCE_DELAY_MS_DEFAULT <= INITIAL_REBALANCE_DELAY_MS_MAX
);
// The leader's SyncGroup names every member; the request decoder refuses more than the protocol
// crate's maximum, so a group must never be allowed to grow past it.
const _: () = assert!(GROUP_MEMBERS_MAX_DEFAULT <= skiff_protocol::limits::GROUP_MEMBERS_MAX);
