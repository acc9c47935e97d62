//! One consumer group's state (members, epochs, target assignment, resolved patterns) and the
//! coordinator's table of consumer groups: replaying records, deadlines, offset commit/fetch
//! validation and what ConsumerGroupDescribe shows. The heartbeat itself is in `heartbeat.rs`.
//!
//! Every change to a group is a [`ConsumerRecord`] applied through [`ConsumerGroup::replay`],
//! live or when the log is loaded: replaying the records a group wrote rebuilds the same group
//! (the simulation checks it after every restart).
//!
//! Must never: change persisted group state other than through `replay`, or read a clock.

use std::collections::BTreeMap;

use skiff_protocol::error_code;

use super::assignor::AssignorKind;
use super::reconcile::{MemberAssignment, MemberState};
use super::records::{ConsumerRecord, MemberMetadataValue, RegexValue};
use super::regex::TopicRegex;
use super::{Assignment, TopicId};

#[path = "heartbeat.rs"]
mod heartbeat;

pub use heartbeat::classic::{
    ClassicError, ClassicGroupSnapshot, ClassicJoin, ClassicJoinOutcome, ClassicMemberSnapshot,
    ClassicTarget, Downgraded, CONSUMER_PROTOCOL_TYPE,
};
pub use heartbeat::{
    HeartbeatOutcome, HeartbeatRequest, HeartbeatResponse,
    CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION, REQUEST_STRING_BYTES_MAX,
};

/// Kafka's `group.consumer.heartbeat.interval.ms` default.
pub const HEARTBEAT_INTERVAL_MS_DEFAULT: i32 = 5_000;
/// Kafka's `group.consumer.session.timeout.ms` default.
pub const SESSION_TIMEOUT_MS_DEFAULT: i32 = 45_000;
/// Kafka's `group.consumer.min.session.timeout.ms` default (the broker's config bounds the key).
pub const SESSION_TIMEOUT_MS_MIN_DEFAULT: i32 = 45_000;
/// Kafka's `group.consumer.max.session.timeout.ms` default.
pub const SESSION_TIMEOUT_MS_MAX_DEFAULT: i32 = 60_000;
/// Kafka's `group.consumer.min.heartbeat.interval.ms` default.
pub const HEARTBEAT_INTERVAL_MS_MIN_DEFAULT: i32 = 5_000;
/// Kafka's `group.consumer.max.heartbeat.interval.ms` default.
pub const HEARTBEAT_INTERVAL_MS_MAX_DEFAULT: i32 = 15_000;
/// Members of one consumer group (`group.consumer.max.size`). Kafka's default is `i32::MAX`;
/// Skiff bounds it like the classic groups' `group.max.size` so one group's memory is bounded.
pub const CONSUMER_GROUP_MAX_SIZE_DEFAULT: usize = crate::config::GROUP_MEMBERS_MAX_DEFAULT;

/// The consumer groups' settings (Kafka's `group.consumer.*` keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupConfig {
    /// `group.consumer.heartbeat.interval.ms`: returned in every heartbeat response.
    pub heartbeat_interval_ms: i32,
    /// `group.consumer.session.timeout.ms`: a member silent this long is removed.
    pub session_timeout_ms: i32,
    /// `group.consumer.max.size`: a join beyond it gets GROUP_MAX_SIZE_REACHED.
    pub max_size: usize,
    /// `group.consumer.assignors`: the first is the default.
    pub assignors: Vec<AssignorKind>,
    /// `group.consumer.regex.refresh.interval.ms`: patterns are resolved again at least this
    /// often (a heartbeat after it brings the refresh), so changed ACLs show.
    pub regex_refresh_interval_ms: i32,
    /// `group.consumer.migration.policy`: whether classic groups are upgraded and consumer
    /// groups downgraded online.
    pub migration_policy: MigrationPolicy,
}

/// Kafka's `group.consumer.migration.policy` (`ConsumerGroupMigrationPolicy`): which online
/// conversions between a classic group and a consumer group are allowed. Kafka 4.1.1's default
/// is [`MigrationPolicy::Bidirectional`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MigrationPolicy {
    /// Neither.
    Disabled,
    /// Classic to consumer only.
    Upgrade,
    /// Consumer to classic only.
    Downgrade,
    /// Both.
    #[default]
    Bidirectional,
}

impl MigrationPolicy {
    /// Every value, as Kafka lists them.
    pub const ALL: [Self; 4] = [
        Self::Bidirectional,
        Self::Upgrade,
        Self::Downgrade,
        Self::Disabled,
    ];

    /// Kafka's name of the value.
    pub fn name(self) -> &'static str {
        match self {
            Self::Disabled => "disabled",
            Self::Upgrade => "upgrade",
            Self::Downgrade => "downgrade",
            Self::Bidirectional => "bidirectional",
        }
    }

    /// The value named `text`, case-insensitively (Kafka's `CaseInsensitiveValidString`).
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|policy| policy.name().eq_ignore_ascii_case(text.trim()))
    }

    /// Whether a classic group may become a consumer group.
    pub fn upgrade_enabled(self) -> bool {
        matches!(self, Self::Upgrade | Self::Bidirectional)
    }

    /// Whether a consumer group may become a classic group.
    pub fn downgrade_enabled(self) -> bool {
        matches!(self, Self::Downgrade | Self::Bidirectional)
    }
}

impl Default for ConsumerGroupConfig {
    fn default() -> Self {
        Self {
            heartbeat_interval_ms: HEARTBEAT_INTERVAL_MS_DEFAULT,
            session_timeout_ms: SESSION_TIMEOUT_MS_DEFAULT,
            max_size: CONSUMER_GROUP_MAX_SIZE_DEFAULT,
            assignors: vec![AssignorKind::Uniform, AssignorKind::Range],
            regex_refresh_interval_ms: super::regex::REGEX_REFRESH_INTERVAL_MS_DEFAULT,
            migration_policy: MigrationPolicy::default(),
        }
    }
}

/// A [`ConsumerGroupConfig`] Kafka would refuse to start with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConsumerConfigError {
    /// A timeout or interval below 1 ms.
    #[error("{key} must be at least 1, not {value}")]
    NotPositive {
        /// The key.
        key: &'static str,
        /// Its value.
        value: i32,
    },
    /// Kafka requires the heartbeat interval below the session timeout.
    #[error(
        "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms"
    )]
    HeartbeatNotBelowSession,
    /// `group.consumer.max.size` of 0, or no assignor.
    #[error("{0} must not be empty or zero")]
    Empty(&'static str),
}

impl ConsumerGroupConfig {
    /// Kafka's checks of these keys (`GroupCoordinatorConfig`'s `atLeast(1)` bounds and its
    /// interval-below-session requirement).
    pub fn validate(&self) -> Result<(), ConsumerConfigError> {
        for (key, value) in [
            (
                "group.consumer.heartbeat.interval.ms",
                self.heartbeat_interval_ms,
            ),
            ("group.consumer.session.timeout.ms", self.session_timeout_ms),
            (
                "group.consumer.regex.refresh.interval.ms",
                self.regex_refresh_interval_ms,
            ),
        ] {
            if value < 1 {
                return Err(ConsumerConfigError::NotPositive { key, value });
            }
        }
        if self.heartbeat_interval_ms >= self.session_timeout_ms {
            return Err(ConsumerConfigError::HeartbeatNotBelowSession);
        }
        if self.max_size == 0 {
            return Err(ConsumerConfigError::Empty("group.consumer.max.size"));
        }
        if self.assignors.is_empty() {
            return Err(ConsumerConfigError::Empty("group.consumer.assignors"));
        }
        Ok(())
    }
}

/// The topics the cluster has (from the broker's metadata), by name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicImage {
    /// Bumped by the driver whenever a topic is created, deleted or grows (patterns are resolved
    /// again then).
    pub version: i64,
    /// Topic name → (id, partition count).
    pub by_name: BTreeMap<String, (TopicId, i32)>,
}

/// A heartbeat's refusal: Kafka's error code and message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeartbeatError {
    /// INVALID_REQUEST.
    #[error("INVALID_REQUEST: {0}")]
    InvalidRequest(String),
    /// UNSUPPORTED_ASSIGNOR.
    #[error("UNSUPPORTED_ASSIGNOR: {0}")]
    UnsupportedAssignor(String),
    /// INVALID_REGULAR_EXPRESSION.
    #[error("INVALID_REGULAR_EXPRESSION: {0}")]
    InvalidRegularExpression(String),
    /// GROUP_ID_NOT_FOUND.
    #[error("GROUP_ID_NOT_FOUND: {0}")]
    GroupIdNotFound(String),
    /// GROUP_MAX_SIZE_REACHED.
    #[error("GROUP_MAX_SIZE_REACHED: {0}")]
    GroupMaxSizeReached(String),
    /// UNKNOWN_MEMBER_ID.
    #[error("UNKNOWN_MEMBER_ID: {0}")]
    UnknownMemberId(String),
    /// FENCED_MEMBER_EPOCH: the member must give up its partitions and rejoin with epoch 0.
    #[error("FENCED_MEMBER_EPOCH: {0}")]
    FencedMemberEpoch(String),
    /// UNRELEASED_INSTANCE_ID.
    #[error("UNRELEASED_INSTANCE_ID: {0}")]
    UnreleasedInstanceId(String),
    /// FENCED_INSTANCE_ID.
    #[error("FENCED_INSTANCE_ID: {0}")]
    FencedInstanceId(String),
    /// UNKNOWN_SERVER_ERROR: the assignor could not run (the group is past its cost bound).
    #[error("UNKNOWN_SERVER_ERROR: {0}")]
    AssignorFailed(String),
}

impl HeartbeatError {
    /// The error code on the wire.
    pub fn code(&self) -> i16 {
        match self {
            Self::InvalidRequest(_) => error_code::INVALID_REQUEST,
            Self::UnsupportedAssignor(_) => error_code::UNSUPPORTED_ASSIGNOR,
            Self::InvalidRegularExpression(_) => error_code::INVALID_REGULAR_EXPRESSION,
            Self::GroupIdNotFound(_) => error_code::GROUP_ID_NOT_FOUND,
            Self::GroupMaxSizeReached(_) => error_code::GROUP_MAX_SIZE_REACHED,
            Self::UnknownMemberId(_) => error_code::UNKNOWN_MEMBER_ID,
            Self::FencedMemberEpoch(_) => error_code::FENCED_MEMBER_EPOCH,
            Self::UnreleasedInstanceId(_) => error_code::UNRELEASED_INSTANCE_ID,
            Self::FencedInstanceId(_) => error_code::FENCED_INSTANCE_ID,
            Self::AssignorFailed(_) => error_code::UNKNOWN_SERVER_ERROR,
        }
    }

    /// The error message on the wire (Kafka's text).
    pub fn message(&self) -> &str {
        match self {
            Self::InvalidRequest(m)
            | Self::UnsupportedAssignor(m)
            | Self::InvalidRegularExpression(m)
            | Self::GroupIdNotFound(m)
            | Self::GroupMaxSizeReached(m)
            | Self::UnknownMemberId(m)
            | Self::FencedMemberEpoch(m)
            | Self::UnreleasedInstanceId(m)
            | Self::FencedInstanceId(m)
            | Self::AssignorFailed(m) => m,
        }
    }
}

/// An OffsetCommit or OffsetFetch refused for a consumer group (Kafka's
/// `ConsumerGroup.validateOffsetCommit` / `validateOffsetFetch`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OffsetValidationError {
    /// UNKNOWN_MEMBER_ID.
    #[error("UNKNOWN_MEMBER_ID: {0}")]
    UnknownMemberId(String),
    /// STALE_MEMBER_EPOCH.
    #[error("STALE_MEMBER_EPOCH: {0}")]
    StaleMemberEpoch(String),
    /// UNSUPPORTED_VERSION: a consumer-protocol member committing with OffsetCommit below v9.
    #[error("UNSUPPORTED_VERSION: {0}")]
    UnsupportedVersion(String),
    /// ILLEGAL_GENERATION: a classic member of a consumer group committing with another
    /// generation than its member epoch.
    #[error("ILLEGAL_GENERATION: {0}")]
    IllegalGeneration(String),
}

impl OffsetValidationError {
    /// The error code on the wire.
    pub fn code(&self) -> i16 {
        match self {
            Self::UnknownMemberId(_) => error_code::UNKNOWN_MEMBER_ID,
            Self::StaleMemberEpoch(_) => error_code::STALE_MEMBER_EPOCH,
            Self::UnsupportedVersion(_) => error_code::UNSUPPORTED_VERSION,
            Self::IllegalGeneration(_) => error_code::ILLEGAL_GENERATION,
        }
    }
}

/// One member of a consumer group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Member {
    /// Its id.
    pub member_id: String,
    /// Its subscription and client facts (the member-metadata record).
    pub metadata: MemberMetadataValue,
    /// Its current assignment (the current-assignment record).
    pub assignment: MemberAssignment,
}

impl Member {
    /// Kafka's `isReconciledTo`: stable at the target epoch.
    pub fn is_reconciled_to(&self, target_epoch: i32) -> bool {
        self.assignment.state == MemberState::Stable && self.assignment.member_epoch == target_epoch
    }
}

/// One consumer group. Persisted state changes only through [`ConsumerGroup::replay`]; the
/// deadlines and compiled patterns are the live coordinator's alone.
#[derive(Debug, Clone, Default)]
pub struct ConsumerGroup {
    group_id: String,
    group_epoch: i32,
    metadata_hash: i64,
    assignment_epoch: i32,
    members: BTreeMap<String, Member>,
    target: BTreeMap<String, Assignment>,
    resolved: BTreeMap<String, RegexValue>,
    compiled: BTreeMap<String, TopicRegex>,
    session_deadlines: BTreeMap<String, i64>,
    /// Member → (deadline, the member epoch it was set at).
    rebalance_deadlines: BTreeMap<String, (i64, i32)>,
    /// Classic member → when it is fenced unless it rejoins (told REBALANCE_IN_PROGRESS; Kafka's
    /// join timeout, its rebalance timeout).
    join_deadlines: BTreeMap<String, i64>,
    /// Classic member → when it is fenced unless it syncs (after its JoinGroup; Kafka's sync
    /// timeout, its rebalance timeout).
    sync_deadlines: BTreeMap<String, i64>,
}

/// A consumer group's state as Kafka names it (ConsumerGroupDescribe, ListGroups).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerGroupState {
    /// No members.
    Empty,
    /// The group epoch is ahead of the target assignment's.
    Assigning,
    /// Some member is not yet at the target.
    Reconciling,
    /// Every member is at the target.
    Stable,
    /// Deleted.
    Dead,
}

impl ConsumerGroupState {
    /// Kafka's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::Assigning => "Assigning",
            Self::Reconciling => "Reconciling",
            Self::Stable => "Stable",
            Self::Dead => "Dead",
        }
    }
}

impl ConsumerGroup {
    fn new(group_id: &str) -> Self {
        Self {
            group_id: group_id.to_owned(),
            ..Self::default()
        }
    }

    /// The group id.
    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    /// The group epoch.
    pub fn group_epoch(&self) -> i32 {
        self.group_epoch
    }

    /// The hash of the subscribed topics' metadata at the last group epoch bump.
    pub fn metadata_hash(&self) -> i64 {
        self.metadata_hash
    }

    /// The target assignment's epoch.
    pub fn assignment_epoch(&self) -> i32 {
        self.assignment_epoch
    }

    /// The members by id.
    pub fn members(&self) -> &BTreeMap<String, Member> {
        &self.members
    }

    /// A member's target assignment.
    pub fn target(&self, member_id: &str) -> Option<&Assignment> {
        self.target.get(member_id)
    }

    /// The resolved patterns.
    pub fn resolved_regexes(&self) -> &BTreeMap<String, RegexValue> {
        &self.resolved
    }

    /// The group's state (Kafka's `maybeUpdateGroupState`).
    pub fn state(&self) -> ConsumerGroupState {
        if self.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.group_epoch > self.assignment_epoch {
            ConsumerGroupState::Assigning
        } else if self
            .members
            .values()
            .all(|member| member.is_reconciled_to(self.assignment_epoch))
        {
            ConsumerGroupState::Stable
        } else {
            ConsumerGroupState::Reconciling
        }
    }

    /// Every topic some member subscribes to, by name or through a resolved pattern (Kafka's
    /// `subscribedTopicNames`, which `isSubscribedToTopic` reads).
    pub fn subscribed_topics(&self) -> std::collections::BTreeSet<String> {
        self.members
            .values()
            .flat_map(|member| self.member_topics(member))
            .collect()
    }

    /// The member holding `instance_id`.
    pub fn static_member(&self, instance_id: &str) -> Option<&Member> {
        self.members
            .values()
            .find(|member| member.metadata.instance_id.as_deref() == Some(instance_id))
    }

    /// The epoch at which another member than `except` owns the partition (assigned or pending
    /// revocation), Kafka's partition epochs.
    pub fn owner_epoch(&self, except: &str, topic: TopicId, partition: i32) -> Option<i32> {
        self.members
            .values()
            .filter(|member| member.member_id != except)
            .find(|member| {
                super::contains(&member.assignment.assigned, topic, partition)
                    || super::contains(&member.assignment.pending_revocation, topic, partition)
            })
            .map(|member| member.assignment.member_epoch)
    }

    /// Applies one record (live or replayed). Records of another group are ignored.
    pub fn replay(&mut self, record: &ConsumerRecord) {
        use ConsumerRecord::*;
        if record.group() != self.group_id {
            return;
        }
        match record {
            GroupMetadata { value, .. } => {
                let value = value.clone().unwrap_or_default();
                self.group_epoch = value.epoch;
                self.metadata_hash = value.metadata_hash;
            }
            PartitionMetadata { .. } => {}
            MemberMetadata {
                member,
                value: Some(value),
                ..
            } => {
                let entry = self
                    .members
                    .entry(member.clone())
                    .or_insert_with(|| Member {
                        member_id: member.clone(),
                        ..Member::default()
                    });
                entry.metadata = value.clone();
            }
            MemberMetadata {
                member,
                value: None,
                ..
            } => {
                self.members.remove(member);
            }
            TargetAssignmentMetadata { value, .. } => self.assignment_epoch = value.unwrap_or(0),
            TargetAssignmentMember {
                member,
                value: Some(value),
                ..
            } => {
                self.target.insert(member.clone(), value.clone());
            }
            TargetAssignmentMember {
                member,
                value: None,
                ..
            } => {
                self.target.remove(member);
            }
            CurrentMemberAssignment { member, value, .. } => self.replay_current(member, value),
            RegularExpression {
                regex,
                value: Some(value),
                ..
            } => {
                self.resolved.insert(regex.clone(), value.clone());
            }
            RegularExpression {
                regex, value: None, ..
            } => {
                self.resolved.remove(regex);
                self.compiled.remove(regex);
            }
        }
    }

    fn replay_current(&mut self, member: &str, value: &Option<MemberAssignment>) {
        match value {
            Some(value) => {
                let entry = self
                    .members
                    .entry(member.to_owned())
                    .or_insert_with(|| Member {
                        member_id: member.to_owned(),
                        ..Member::default()
                    });
                entry.assignment = value.clone();
            }
            None => {
                // As Kafka: the member is on its way out (its metadata tombstone follows) at -1.
                if let Some(entry) = self.members.get_mut(member) {
                    entry.assignment = MemberAssignment {
                        member_epoch: super::epochs::LEAVE,
                        previous_member_epoch: super::epochs::LEAVE,
                        ..MemberAssignment::default()
                    };
                }
            }
        }
    }

    /// The records deleting the group (DeleteGroups of an empty group): Kafka's order, the
    /// target assignment metadata first, the group metadata last.
    pub fn tombstones(&self) -> Vec<ConsumerRecord> {
        let group = self.group_id.clone();
        let mut records: Vec<ConsumerRecord> = self
            .resolved
            .keys()
            .map(|regex| ConsumerRecord::RegularExpression {
                group: group.clone(),
                regex: regex.clone(),
                value: None,
            })
            .collect();
        records.push(ConsumerRecord::TargetAssignmentMetadata {
            group: group.clone(),
            value: None,
        });
        records.push(ConsumerRecord::GroupMetadata { group, value: None });
        records
    }
}

#[path = "table.rs"]
mod table;

pub use table::{ConsumerGroups, DeleteGroupError, GroupDescription, MemberDescription};

#[cfg(test)]
#[path = "group_tests.rs"]
mod tests;
