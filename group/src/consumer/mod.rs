//! The consumer group protocol of KIP-848 (`group.protocol=consumer`, ConsumerGroupHeartbeat), as
//! Apache Kafka 4.1.1's group coordinator runs it, as a pure core: the server-side assignors, the
//! reconciliation of one member towards its target assignment, the group state machine (joins,
//! heartbeats, leaves, fencing, session and rebalance deadlines, regular-expression
//! subscriptions, offset commit/fetch validation, the data ConsumerGroupDescribe shows) and the
//! records it writes to `__consumer_offsets`, with their replay.
//!
//! It owns: member ids, member and group epochs, the target assignment, which partitions each
//! member may own and which it must revoke first, and the bytes of the consumer group records.
//!
//! Must never: read a clock (time comes as `now_ms`), draw random numbers (a server-generated
//! member id comes from the caller), touch files or sockets, or hand a partition to a member
//! before its previous owner has acknowledged revoking it.
//!
//! A group id names either a classic group or a consumer group; the [`crate::Coordinator`] holds
//! both kinds for its `__consumer_offsets` partitions (its classic groups, and a
//! [`ConsumerGroups`] at [`crate::Coordinator::consumer_groups`], loaded and unloaded with the
//! partitions). The coordinator (`consumer_coord.rs`, `migration.rs`) routes a group id to the
//! kind that holds it; a consumer group serves classic members too (`classic.rs`: their
//! JoinGroup, SyncGroup, Heartbeat and LeaveGroup, and the conversions' consumer side), and the
//! group converts between the kinds as `group.consumer.migration.policy` allows.

pub mod assignor;
pub mod embedded;
pub mod group;
pub mod reconcile;
pub mod records;
pub mod regex;

use std::collections::{BTreeMap, BTreeSet};

pub use assignor::{AssignorError, AssignorKind};
pub use group::{
    ClassicError, ClassicGroupSnapshot, ClassicJoin, ClassicJoinOutcome, ClassicMemberSnapshot,
    ClassicTarget, Downgraded, MigrationPolicy, CONSUMER_PROTOCOL_TYPE,
};
pub use group::{
    ConsumerConfigError, ConsumerGroup, ConsumerGroupConfig, ConsumerGroups, DeleteGroupError,
    GroupDescription, HeartbeatError, HeartbeatOutcome, HeartbeatRequest, HeartbeatResponse,
    MemberDescription, OffsetValidationError, TopicImage,
};
pub use reconcile::{MemberAssignment, MemberState};
pub use records::{ConsumerRecord, ConsumerRecordError};

/// A topic id (Kafka's 16-byte UUID).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TopicId(pub [u8; 16]);

/// Partitions per topic: an assignment, a member's owned partitions, or a set pending revocation.
pub type Assignment = BTreeMap<TopicId, BTreeSet<i32>>;

/// Partitions in an assignment.
pub fn partition_count(assignment: &Assignment) -> usize {
    assignment.values().map(BTreeSet::len).sum()
}

/// Whether `topic`/`partition` is in `assignment`.
pub fn contains(assignment: &Assignment, topic: TopicId, partition: i32) -> bool {
    assignment
        .get(&topic)
        .is_some_and(|partitions| partitions.contains(&partition))
}

/// `assignment` without empty topic entries (the form every comparison uses).
pub fn normalized(mut assignment: Assignment) -> Assignment {
    assignment.retain(|_, partitions| !partitions.is_empty());
    assignment
}

/// Kafka's special member epochs of ConsumerGroupHeartbeat.
pub mod epochs {
    /// A member (re)joining sends epoch 0.
    pub const JOIN: i32 = 0;
    /// A member leaving the group sends -1.
    pub const LEAVE: i32 = -1;
    /// A static member leaving for a while (it keeps its instance id's place) sends -2.
    pub const LEAVE_STATIC: i32 = -2;
}
