//! Classic members in a consumer group, as Kafka 4.1.1's `GroupMetadataManager` serves them:
//! the online upgrade of a classic group (`convertToConsumerGroup` /
//! `ConsumerGroup.fromClassicGroup`), and JoinGroup, SyncGroup, Heartbeat and LeaveGroup of a
//! classic client in a consumer group (`classicGroupJoinToConsumerGroup`,
//! `classicGroupSyncToConsumerGroup`, `classicGroupHeartbeatToConsumerGroup`,
//! `classicGroupLeaveToConsumerGroup`). The server-side assignor decides for them too; a classic
//! member's "generation" is its member epoch, its SyncGroup answer its current assignment in
//! the consumer protocol's bytes, and its session its JoinGroup's session timeout (kept in the
//! member's [`ClassicMemberMetadata`]). The consumer side of the online downgrade
//! (`convertToClassicGroup`): whether it is allowed (a consumer-protocol member leaving, or a
//! classic static member's JoinGroup replacing the last one), the group's tombstones and its
//! members as classic members, each assigned its target.
//!
//! Must never: take a partition from a classic member before it has rejoined without it (the
//! same reconciliation as a consumer-protocol member, its owned partitions read from its
//! JoinGroup subscription), or change persisted state other than through records.

use std::collections::BTreeSet;

use skiff_protocol::error_code as code;

use super::{apply, fence_many, HeartbeatRequest};
use crate::consumer::embedded::{self, NamedPartitions};
use crate::consumer::group::*;
use crate::consumer::records::{ClassicMemberMetadata, GroupMetadataValue};

/// The consumer protocol's type name (`ConsumerProtocol.PROTOCOL_TYPE`).
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// A classic group's member as the upgrade reads it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClassicMemberSnapshot {
    /// Its member id (kept).
    pub member_id: String,
    /// Its static instance id.
    pub instance_id: Option<String>,
    /// Its client id.
    pub client_id: String,
    /// Its host.
    pub client_host: String,
    /// Its JoinGroup's session timeout.
    pub session_timeout_ms: i32,
    /// Its JoinGroup's rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// Its protocols, in its order.
    pub protocols: Vec<(String, Vec<u8>)>,
    /// What the leader assigned it (empty when nothing yet).
    pub assignment: Vec<u8>,
}

/// A classic group about to become a consumer group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClassicGroupSnapshot {
    /// The group.
    pub group_id: String,
    /// Its generation (the consumer group's epochs start there).
    pub generation_id: i32,
    /// The protocol chosen for the generation (whose subscriptions are read).
    pub protocol_name: Option<String>,
    /// Its members.
    pub members: Vec<ClassicMemberSnapshot>,
}

/// A JoinGroup of a classic member for a consumer group, validated as a classic JoinGroup is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClassicJoin {
    /// The group.
    pub group_id: String,
    /// Empty for a new member.
    pub member_id: String,
    /// Its static instance id.
    pub instance_id: Option<String>,
    /// Its protocol type.
    pub protocol_type: String,
    /// Its protocols, in its order.
    pub protocols: Vec<(String, Vec<u8>)>,
    /// Its session timeout.
    pub session_timeout_ms: i32,
    /// Its rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// The request header's client id.
    pub client_id: String,
    /// The client's address.
    pub client_host: String,
    /// The JoinGroup version (v4+ without an instance id first gets MEMBER_ID_REQUIRED).
    pub api_version: i16,
}

/// What a classic JoinGroup to a consumer group did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClassicJoinOutcome {
    /// MEMBER_ID_REQUIRED with this id (nothing changed).
    MemberIdRequired(String),
    /// Joined: the JoinGroup answer (leader none, so the member syncs as a follower) once
    /// `records` (already applied) are durable.
    Joined {
        /// Its member id.
        member_id: String,
        /// Its member epoch, sent as the generation.
        generation_id: i32,
        /// The first of its protocols.
        protocol_name: String,
        /// The records.
        records: Vec<ConsumerRecord>,
    },
    /// Joined in the place of the group's last consumer-protocol member (same instance id): the
    /// group is a classic group now (Kafka's `convertToClassicGroup` with a joining member).
    Downgraded {
        /// Its member id.
        member_id: String,
        /// Its member epoch, sent as the generation.
        generation_id: i32,
        /// The first of its protocols.
        protocol_name: String,
        /// Its subscription changed: the classic group rebalances.
        rebalance: bool,
        /// The classic group, the joining member in the replaced member's place; its records
        /// (the join's, then the whole group's tombstones) are applied: the group is gone.
        classic: Downgraded,
    },
}

/// A classic JoinGroup applied to a copy of its consumer group, before the rebalance or the
/// downgrade that follows.
struct Joining {
    /// The member it speaks for.
    member: Member,
    /// The first of its protocols.
    protocol_name: Option<String>,
    /// Whether its subscription changed.
    bump: bool,
    /// The partitions its subscription says it owns.
    owned: Assignment,
    /// The records so far (applied to the copy).
    records: Vec<ConsumerRecord>,
}

/// A classic request's refusal: a classic error code.
pub type ClassicError = i16;

/// Partitions by topic id for names the topic image knows (Kafka's `toTopicPartitionMap`
/// drops the others).
fn by_id(named: &NamedPartitions, topics: &TopicImage) -> Assignment {
    let mut out = Assignment::new();
    for (name, partitions) in named {
        if let Some((id, _)) = topics.by_name.get(name) {
            out.entry(*id).or_default().extend(partitions);
        }
    }
    crate::consumer::normalized(out)
}

/// Partitions by topic name, for names the topic image knows.
fn by_name(assignment: &Assignment, topics: &TopicImage) -> NamedPartitions {
    let mut out = NamedPartitions::new();
    for (name, (id, _)) in &topics.by_name {
        if let Some(partitions) = assignment.get(id).filter(|set| !set.is_empty()) {
            out.insert(name.clone(), partitions.clone());
        }
    }
    out
}

/// Whether every member of a classic group may go over: Kafka's message when not.
fn upgrade_error(group_id: &str, reason: &str) -> HeartbeatError {
    HeartbeatError::GroupIdNotFound(format!(
        "Cannot upgrade classic group {group_id} to consumer group because {reason}"
    ))
}

/// One classic member as a consumer-group member at the classic generation, Stable, owning
/// what the leader gave it.
fn upgraded_member(
    group: &ClassicGroupSnapshot,
    member: &ClassicMemberSnapshot,
    protocol: &str,
    topics: &TopicImage,
) -> Result<(Member, Assignment), HeartbeatError> {
    let malformed = || {
        upgrade_error(
            &group.group_id,
            "the embedded consumer protocol is malformed.",
        )
    };
    let assignment = embedded::decode_assignment(&member.assignment).map_err(|_| malformed())?;
    if assignment
        .user_data
        .as_ref()
        .is_some_and(|data| !data.is_empty())
    {
        return Err(upgrade_error(
            &group.group_id,
            "an unsupported custom assignor is in use. Please refer to the documentation or switch to a default assignor before re-attempting the upgrade.",
        ));
    }
    let metadata = member
        .protocols
        .iter()
        .find(|(name, _)| name == protocol)
        .map(|(_, metadata)| metadata.as_slice())
        .ok_or_else(malformed)?;
    let subscription = embedded::decode_subscription(metadata).map_err(|_| malformed())?;
    let partitions = by_id(&assignment.partitions, topics);
    let value = MemberMetadataValue {
        instance_id: member.instance_id.clone(),
        rack_id: subscription.rack_id,
        client_id: member.client_id.clone(),
        client_host: member.client_host.clone(),
        subscribed_topic_names: subscription.topics,
        subscribed_topic_regex: None,
        rebalance_timeout_ms: member.rebalance_timeout_ms,
        server_assignor: None,
        classic: Some(ClassicMemberMetadata {
            session_timeout_ms: member.session_timeout_ms,
            supported_protocols: member.protocols.clone(),
        }),
    };
    let current = MemberAssignment {
        state: MemberState::Stable,
        member_epoch: group.generation_id,
        previous_member_epoch: group.generation_id,
        assigned: partitions.clone(),
        pending_revocation: Assignment::new(),
    };
    let member = Member {
        member_id: member.member_id.clone(),
        metadata: value,
        assignment: current,
    };
    Ok((member, partitions))
}

impl ConsumerGroups {
    /// Kafka's `validateOnlineUpgrade`: the policy, the embedded protocol, the size.
    pub fn check_upgrade(
        &self,
        group_id: &str,
        protocol_type: Option<&str>,
        members: usize,
    ) -> Result<(), HeartbeatError> {
        if !self.config.migration_policy.upgrade_enabled() {
            return Err(upgrade_error(group_id, "online upgrade is disabled."));
        }
        if protocol_type != Some(CONSUMER_PROTOCOL_TYPE) {
            return Err(upgrade_error(
                group_id,
                "the group does not use the consumer embedded protocol.",
            ));
        }
        if members > self.config.max_size {
            return Err(upgrade_error(
                group_id,
                "the group size exceeds the consumer group maximum size.",
            ));
        }
        Ok(())
    }

    /// Kafka's `ConsumerGroup.fromClassicGroup` and `createConsumerGroupRecords`: the classic
    /// group becomes a consumer group at its generation, every member Stable with its current
    /// assignment as its target; the records (applied here) in Kafka's order. Each member's
    /// session is its classic session timeout from `now_ms`.
    pub fn upgrade(
        &mut self,
        classic: &ClassicGroupSnapshot,
        topics: &TopicImage,
        now_ms: i64,
    ) -> Result<Vec<ConsumerRecord>, HeartbeatError> {
        let protocol = classic.protocol_name.as_deref().unwrap_or_default();
        let mut members = Vec::new();
        for member in &classic.members {
            members.push(upgraded_member(classic, member, protocol, topics)?);
        }
        let mut group = ConsumerGroup::new(&classic.group_id);
        let name = classic.group_id.clone();
        let mut records = Vec::new();
        let metadata = members
            .iter()
            .map(|(member, _)| ConsumerRecord::MemberMetadata {
                group: name.clone(),
                member: member.member_id.clone(),
                value: Some(member.metadata.clone()),
            });
        apply(&mut group, &mut records, metadata.collect());
        let epoch = GroupMetadataValue {
            epoch: classic.generation_id,
            metadata_hash: group.metadata_hash_for(topics),
        };
        let mut rest = vec![ConsumerRecord::GroupMetadata {
            group: name.clone(),
            value: Some(epoch),
        }];
        rest.extend(members.iter().map(|(member, target)| {
            ConsumerRecord::TargetAssignmentMember {
                group: name.clone(),
                member: member.member_id.clone(),
                value: Some(target.clone()),
            }
        }));
        rest.push(ConsumerRecord::TargetAssignmentMetadata {
            group: name.clone(),
            value: Some(classic.generation_id),
        });
        rest.extend(
            members
                .iter()
                .map(|(member, _)| ConsumerRecord::CurrentMemberAssignment {
                    group: name.clone(),
                    member: member.member_id.clone(),
                    value: Some(member.assignment.clone()),
                }),
        );
        apply(&mut group, &mut records, rest);
        for (member, _) in &members {
            group.refresh_session(&member.member_id, now_ms, &self.config);
        }
        self.groups.insert(name, group);
        Ok(records)
    }

    /// JoinGroup of a classic member for a non-empty consumer group (module doc). On success
    /// the records are applied; the coordinator answers once they are durable. A static member
    /// replacing the last consumer-protocol member downgrades the group (Kafka's
    /// `validateOnlineDowngradeWithReplacedMember`, `classic_members_max` its classic size bound).
    pub fn classic_join(
        &mut self,
        join: &ClassicJoin,
        topics: &TopicImage,
        now_ms: i64,
        fresh_member_id: &str,
        classic_members_max: usize,
    ) -> Result<ClassicJoinOutcome, ClassicError> {
        let existing = self
            .groups
            .get(&join.group_id)
            .ok_or(code::UNKNOWN_MEMBER_ID)?;
        let unknown = join.member_id.is_empty();
        let member_id = if unknown {
            fresh_member_id.to_owned()
        } else {
            join.member_id.clone()
        };
        if !existing.members.contains_key(&member_id)
            && existing.members.len() >= self.config.max_size
        {
            return Err(code::GROUP_MAX_SIZE_REACHED);
        }
        if !existing.supports_classic_protocols(&join.protocol_type, &join.protocols) {
            return Err(code::INCONSISTENT_GROUP_PROTOCOL);
        }
        if unknown && join.api_version >= 4 && join.instance_id.is_none() {
            return Ok(ClassicJoinOutcome::MemberIdRequired(member_id));
        }
        let downgrade = self.downgrade_replacing(existing, join, classic_members_max);
        let mut group = existing.clone();
        let mut records = Vec::new();
        let member = group.classic_member_for(join, &member_id, unknown, &mut records)?;
        let subscription = join
            .protocols
            .first()
            .and_then(|(_, metadata)| embedded::decode_subscription(metadata).ok())
            .ok_or(code::INCONSISTENT_GROUP_PROTOCOL)?;
        let bump = group.update_classic_metadata(&member, join, &subscription, &mut records);
        let owned = by_id(&subscription.owned_partitions, topics);
        let joined = Joining {
            member,
            protocol_name: join.protocols.first().map(|(name, _)| name.clone()),
            bump,
            owned,
            records,
        };
        if downgrade {
            return self.join_downgrading(group, joined, topics, now_ms);
        }
        self.join_rebalancing(group, joined, join.rebalance_timeout_ms, topics, now_ms)
    }

    /// The classic join goes on in the consumer group: a new target if its subscription changed
    /// and one reconciliation step; its sync is due within its rebalance timeout.
    fn join_rebalancing(
        &mut self,
        mut group: ConsumerGroup,
        joined: Joining,
        rebalance_timeout_ms: i32,
        topics: &TopicImage,
        now_ms: i64,
    ) -> Result<ClassicJoinOutcome, ClassicError> {
        let member_id = joined.member.member_id;
        let (bump, owned) = (joined.bump, joined.owned);
        let after = group.classic_rebalance(&self.config, &member_id, bump, owned, topics, now_ms);
        let after = after.map_err(|error| error.code())?;
        let mut records = joined.records;
        records.extend(after.1);
        group.refresh_session(&member_id, now_ms, &self.config);
        group.join_deadlines.remove(&member_id);
        let sync_ms = i64::from(rebalance_timeout_ms.max(0));
        group
            .sync_deadlines
            .insert(member_id.clone(), now_ms.saturating_add(sync_ms));
        self.groups.insert(group.group_id.clone(), group);
        Ok(ClassicJoinOutcome::Joined {
            member_id,
            generation_id: after.0,
            protocol_name: joined.protocol_name.unwrap_or_default(),
            records,
        })
    }

    /// Kafka's `validateOnlineDowngradeWithReplacedMember`: the join's instance id is held by a
    /// consumer-protocol member, every other member is classic, the policy allows a downgrade
    /// and the classic group would hold them all.
    fn downgrade_replacing(
        &self,
        group: &ConsumerGroup,
        join: &ClassicJoin,
        classic_members_max: usize,
    ) -> bool {
        let Some(replaced) = join
            .instance_id
            .as_deref()
            .and_then(|instance_id| group.static_member(instance_id))
        else {
            return false;
        };
        replaced.metadata.classic.is_none()
            && group
                .members
                .values()
                .filter(|member| member.member_id != replaced.member_id)
                .all(|member| member.metadata.classic.is_some())
            && self.config.migration_policy.downgrade_enabled()
            && group.members.len() <= classic_members_max
    }

    /// Kafka's `classicGroupJoinToConsumerGroup` downgrading: no new target; unless its
    /// subscription changed the joining member reconciles one step to the current one; then the
    /// whole group goes (`convertToClassicGroup`), its members classic members at the group
    /// epoch, the joining member in the replaced member's place.
    fn join_downgrading(
        &mut self,
        mut group: ConsumerGroup,
        joined: Joining,
        topics: &TopicImage,
        now_ms: i64,
    ) -> Result<ClassicJoinOutcome, ClassicError> {
        let mut records = joined.records;
        let member_id = joined.member.member_id;
        let generation_id = if joined.bump {
            joined.member.assignment.member_epoch
        } else {
            let request = HeartbeatRequest {
                topic_partitions: Some(joined.owned),
                ..HeartbeatRequest::default()
            };
            let after = group.reconcile_member(&member_id, &request, now_ms, &mut records);
            after.map_err(|error| error.code())?.member_epoch
        };
        let group_id = group.group_id.clone();
        self.groups.insert(group_id.clone(), group);
        let mut classic = self
            .downgrade(&group_id, &BTreeSet::new(), topics)
            .ok_or(code::UNKNOWN_MEMBER_ID)?;
        records.append(&mut classic.records);
        classic.records = records;
        Ok(ClassicJoinOutcome::Downgraded {
            member_id,
            generation_id,
            protocol_name: joined.protocol_name.unwrap_or_default(),
            rebalance: joined.bump,
            classic,
        })
    }

    /// SyncGroup of a classic member of a consumer group: its current assignment, encoded at its
    /// first protocol's subscription version, with the request's protocol type and name.
    pub fn classic_sync(
        &mut self,
        target: ClassicTarget<'_>,
        protocol: (Option<&str>, Option<&str>),
        topics: &TopicImage,
        now_ms: i64,
    ) -> Result<Vec<u8>, ClassicError> {
        let config = self.config.clone();
        let group = self
            .groups
            .get_mut(target.group_id)
            .ok_or(code::UNKNOWN_MEMBER_ID)?;
        let member = group.classic_member(&target)?;
        let classic = member.metadata.classic.clone().unwrap_or_default();
        let first = classic.supported_protocols.first();
        if protocol
            .0
            .is_some_and(|kind| kind != CONSUMER_PROTOCOL_TYPE)
            || protocol
                .1
                .is_some_and(|name| first.is_none_or(|(first, _)| first != name))
        {
            return Err(code::INCONSISTENT_GROUP_PROTOCOL);
        }
        if group.group_epoch > member.assignment.member_epoch
            && member.assignment.state != MemberState::UnrevokedPartitions
        {
            let member = member.clone();
            group.must_rejoin(&member, now_ms);
            return Err(code::REBALANCE_IN_PROGRESS);
        }
        let version = first
            .and_then(|(_, metadata)| embedded::decode_version(metadata).ok())
            .unwrap_or(0);
        let bytes =
            embedded::encode_assignment(&by_name(&member.assignment.assigned, topics), version);
        let member_id = member.member_id.clone();
        group.refresh_session(&member_id, now_ms, &config);
        group.sync_deadlines.remove(&member_id);
        Ok(bytes)
    }

    /// Heartbeat of a classic member of a consumer group: its session is refreshed; it must
    /// rejoin (REBALANCE_IN_PROGRESS) when the group moved on, while it has partitions to
    /// revoke, or once the partitions it waited for are free.
    pub fn classic_heartbeat(
        &mut self,
        target: ClassicTarget<'_>,
        now_ms: i64,
    ) -> Result<(), ClassicError> {
        let config = self.config.clone();
        let group = self
            .groups
            .get_mut(target.group_id)
            .ok_or(code::UNKNOWN_MEMBER_ID)?;
        let member = group.classic_member(&target)?.clone();
        group.refresh_session(&member.member_id, now_ms, &config);
        let state = member.assignment.state;
        let rejoin = member.assignment.member_epoch < group.group_epoch
            || state == MemberState::UnrevokedPartitions
            || (state == MemberState::UnreleasedPartitions
                && !group.waiting_on_unreleased(&member));
        if rejoin {
            group.must_rejoin(&member, now_ms);
            return Err(code::REBALANCE_IN_PROGRESS);
        }
        Ok(())
    }

    /// The members a LeaveGroup names (Kafka's `classicGroupLeaveToConsumerGroup`: any member
    /// of either protocol, by member id, or by instance id with the member id empty or its
    /// holder's): each one's member id, or its error code.
    pub fn leavers(
        &self,
        group_id: &str,
        leaving: &[(String, Option<String>)],
    ) -> Vec<Result<String, ClassicError>> {
        let group = self.groups.get(group_id);
        leaving
            .iter()
            .map(|(member_id, instance_id)| {
                let group = group.ok_or(code::UNKNOWN_MEMBER_ID)?;
                let member = match instance_id {
                    None => group.members.get(member_id),
                    Some(instance_id) => group.static_member(instance_id),
                }
                .ok_or(code::UNKNOWN_MEMBER_ID)?;
                if !member_id.is_empty() && member.member_id != *member_id {
                    return Err(code::FENCED_INSTANCE_ID);
                }
                Ok(member.member_id.clone())
            })
            .collect()
    }

    /// Fences `members` of `group_id` at once (Kafka's `consumerGroupFenceMembers`): their
    /// records, applied here.
    pub fn fence_members(
        &mut self,
        group_id: &str,
        members: &BTreeSet<String>,
        topics: &TopicImage,
    ) -> Vec<ConsumerRecord> {
        let Some(group) = self.groups.get_mut(group_id) else {
            return Vec::new();
        };
        if members.is_empty() {
            return Vec::new();
        }
        let members: Vec<String> = members.iter().cloned().collect();
        let mut records = Vec::new();
        let fenced = fence_many(group, &members, topics);
        apply(group, &mut records, fenced);
        for member in &members {
            group.forget_deadlines(member);
        }
        records
    }
}

/// A consumer group turned back into a classic group: its epoch (the classic generation) and
/// its remaining members as classic members.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Downgraded {
    /// The group epoch.
    pub generation_id: i32,
    /// The members that stay, each with its target assignment in the consumer protocol's bytes.
    pub members: Vec<ClassicMemberSnapshot>,
    /// The records deleting the consumer group (already applied: the group is gone).
    pub records: Vec<ConsumerRecord>,
}

impl ConsumerGroups {
    /// Kafka's `validateOnlineDowngradeWithFencedMembers`: with `leaving` gone, the group would
    /// still have members, all of them classic, the policy allows a downgrade and the classic
    /// group would hold them (`classic_members_max`).
    pub fn downgrade_allowed(
        &self,
        group_id: &str,
        leaving: &BTreeSet<String>,
        classic_members_max: usize,
    ) -> bool {
        let Some(group) = self.groups.get(group_id) else {
            return false;
        };
        let staying: Vec<&Member> = group
            .members
            .values()
            .filter(|member| !leaving.contains(&member.member_id))
            .collect();
        staying
            .iter()
            .all(|member| member.metadata.classic.is_some())
            && !staying.is_empty()
            && self.config.migration_policy.downgrade_enabled()
            && staying.len() <= classic_members_max
    }

    /// Kafka's `convertToClassicGroup` (consumer side): the records deleting the whole group
    /// (applied here) and its members other than `leaving` as classic members, each assigned its
    /// target.
    pub fn downgrade(
        &mut self,
        group_id: &str,
        leaving: &BTreeSet<String>,
        topics: &TopicImage,
    ) -> Option<Downgraded> {
        let group = self.groups.get(group_id)?;
        let members = group
            .members
            .values()
            .filter(|member| !leaving.contains(&member.member_id))
            .map(|member| downgraded_member(member, group.target(&member.member_id), topics))
            .collect();
        let generation_id = group.group_epoch;
        let records = group.all_tombstones();
        for record in &records {
            self.replay(record);
        }
        Some(Downgraded {
            generation_id,
            members,
            records,
        })
    }

    /// The members of `group_id` whose session or rebalance deadline has passed.
    pub fn expired_members(&self, group_id: &str, now_ms: i64) -> BTreeSet<String> {
        self.groups
            .get(group_id)
            .map(|group| super::super::table::expired_members(group, now_ms))
            .unwrap_or_default()
            .into_iter()
            .collect()
    }
}

/// A classic member of a consumer group as a classic group's member, its assignment its target
/// (Kafka's `ClassicGroup.fromConsumerGroup`): what it gets when it syncs again without a
/// rebalance.
fn downgraded_member(
    member: &Member,
    target: Option<&Assignment>,
    topics: &TopicImage,
) -> ClassicMemberSnapshot {
    let classic = member.metadata.classic.clone().unwrap_or_default();
    let version = classic
        .supported_protocols
        .first()
        .and_then(|(_, metadata)| embedded::decode_version(metadata).ok())
        .unwrap_or(0);
    let assigned = by_name(target.unwrap_or(&Assignment::new()), topics);
    ClassicMemberSnapshot {
        member_id: member.member_id.clone(),
        instance_id: member.metadata.instance_id.clone(),
        client_id: member.metadata.client_id.clone(),
        client_host: member.metadata.client_host.clone(),
        session_timeout_ms: classic.session_timeout_ms,
        rebalance_timeout_ms: member.metadata.rebalance_timeout_ms,
        protocols: classic.supported_protocols,
        assignment: embedded::encode_assignment(&assigned, version),
    }
}

impl ConsumerGroup {
    /// Kafka's `createGroupTombstoneRecords`: every member's current and target assignment, the
    /// target epoch, every member's metadata, the patterns, the group epoch last.
    fn all_tombstones(&self) -> Vec<ConsumerRecord> {
        let name = self.group_id.clone();
        let members = || self.members.keys().cloned();
        let mut records: Vec<ConsumerRecord> = members()
            .map(|member| ConsumerRecord::CurrentMemberAssignment {
                group: name.clone(),
                member,
                value: None,
            })
            .collect();
        records.extend(
            members().map(|member| ConsumerRecord::TargetAssignmentMember {
                group: name.clone(),
                member,
                value: None,
            }),
        );
        records.extend(members().map(|member| ConsumerRecord::MemberMetadata {
            group: name.clone(),
            member,
            value: None,
        }));
        records.extend(self.tombstones());
        records
    }
}

/// The member a classic SyncGroup, Heartbeat or LeaveGroup names.
#[derive(Debug, Clone, Copy)]
pub struct ClassicTarget<'a> {
    /// The group.
    pub group_id: &'a str,
    /// The member id (may be empty in a LeaveGroup naming an instance id).
    pub member_id: &'a str,
    /// The instance id.
    pub instance_id: Option<&'a str>,
    /// The generation it sends (none in a LeaveGroup).
    pub generation_id: Option<i32>,
}

/// The member's metadata after a classic JoinGroup (Kafka's builder in
/// `classicGroupJoinToConsumerGroup`).
fn classic_metadata(
    current: &MemberMetadataValue,
    join: &ClassicJoin,
    subscription: &embedded::Subscription,
) -> MemberMetadataValue {
    let mut updated = current.clone();
    if join.instance_id.is_some() {
        updated.instance_id.clone_from(&join.instance_id);
    }
    if subscription.rack_id.is_some() {
        updated.rack_id.clone_from(&subscription.rack_id);
    }
    if join.rebalance_timeout_ms != -1 {
        updated.rebalance_timeout_ms = join.rebalance_timeout_ms;
    }
    updated.subscribed_topic_names = subscription.topics.clone();
    updated.client_id.clone_from(&join.client_id);
    updated.client_host.clone_from(&join.client_host);
    updated.classic = Some(ClassicMemberMetadata {
        session_timeout_ms: join.session_timeout_ms,
        supported_protocols: join.protocols.clone(),
    });
    updated
}

impl ConsumerGroup {
    /// The session of `member_id` restarts: its classic session timeout, or the group's.
    pub(crate) fn refresh_session(
        &mut self,
        member_id: &str,
        now_ms: i64,
        config: &ConsumerGroupConfig,
    ) {
        let session_ms = self
            .members
            .get(member_id)
            .map_or(config.session_timeout_ms, |member| {
                member_session_ms(member, config)
            });
        self.session_deadlines.insert(
            member_id.to_owned(),
            now_ms.saturating_add(i64::from(session_ms)),
        );
    }

    /// Records a classic member's changed metadata; returns whether its subscription changed
    /// (the group epoch is bumped then; a new member's always is).
    fn update_classic_metadata(
        &mut self,
        member: &Member,
        join: &ClassicJoin,
        subscription: &embedded::Subscription,
        records: &mut Vec<ConsumerRecord>,
    ) -> bool {
        let updated = classic_metadata(&member.metadata, join, subscription);
        let bump = updated.subscribed_topic_names != member.metadata.subscribed_topic_names
            || updated.subscribed_topic_regex != member.metadata.subscribed_topic_regex
            || member.metadata == MemberMetadataValue::default();
        if updated != member.metadata {
            let record = ConsumerRecord::MemberMetadata {
                group: self.group_id.clone(),
                member: member.member_id.clone(),
                value: Some(updated),
            };
            apply(self, records, vec![record]);
        }
        bump
    }

    /// A classic member told to rejoin must do so within its rebalance timeout (Kafka's
    /// `scheduleConsumerGroupJoinTimeoutIfAbsent`: a deadline already running stays).
    fn must_rejoin(&mut self, member: &Member, now_ms: i64) {
        let timeout_ms = i64::from(member.metadata.rebalance_timeout_ms.max(0));
        self.join_deadlines
            .entry(member.member_id.clone())
            .or_insert(now_ms.saturating_add(timeout_ms));
    }

    /// Kafka's `supportsClassicProtocols`: the consumer protocol type, and for a group with
    /// classic members a protocol every one of them offers.
    fn supports_classic_protocols(&self, kind: &str, protocols: &[(String, Vec<u8>)]) -> bool {
        if kind != CONSUMER_PROTOCOL_TYPE || protocols.is_empty() {
            return false;
        }
        let classic: Vec<&ClassicMemberMetadata> = self
            .members
            .values()
            .filter_map(|member| member.metadata.classic.as_ref())
            .collect();
        classic.is_empty()
            || protocols.iter().any(|(name, _)| {
                classic
                    .iter()
                    .all(|member| member.supported_protocols.iter().any(|(n, _)| n == name))
            })
    }

    /// The member a classic JoinGroup speaks for (Kafka's `getOrMaybeSubscribe*ConsumerGroupMember`
    /// with the classic protocol): the member of that id, new or known, or for an unknown member
    /// id with an instance id, that instance id's new holder (the old one's records go).
    fn classic_member_for(
        &mut self,
        join: &ClassicJoin,
        member_id: &str,
        unknown: bool,
        records: &mut Vec<ConsumerRecord>,
    ) -> Result<Member, ClassicError> {
        let fresh = || Member {
            member_id: member_id.to_owned(),
            ..Member::default()
        };
        let Some(instance_id) = join.instance_id.as_deref() else {
            // Any member id joins (Kafka keeps no pending ids for a consumer group: the id a
            // MEMBER_ID_REQUIRED handed out comes back unknown).
            return Ok(self.members.get(member_id).cloned().unwrap_or_else(fresh));
        };
        let existing = self.static_member(instance_id).cloned();
        match existing {
            None if unknown => Ok(fresh()),
            None => Err(code::UNKNOWN_MEMBER_ID),
            Some(old) if unknown => Ok(super::join::replace_member(self, old, member_id, records)),
            Some(old) if old.member_id != member_id => Err(code::FENCED_INSTANCE_ID),
            Some(old) => Ok(old),
        }
    }

    /// After a classic member's metadata changed: the group epoch bump, the target assignment
    /// and one reconciliation step with what its subscription says it owns. Returns its member
    /// epoch and the records.
    fn classic_rebalance(
        &mut self,
        config: &ConsumerGroupConfig,
        member_id: &str,
        bump: bool,
        owned: Assignment,
        topics: &TopicImage,
        now_ms: i64,
    ) -> Result<(i32, Vec<ConsumerRecord>), HeartbeatError> {
        let mut records = Vec::new();
        self.bump_and_assign(config, bump, None, topics, now_ms, &mut records)?;
        let request = HeartbeatRequest {
            topic_partitions: Some(owned),
            ..HeartbeatRequest::default()
        };
        let after = self.reconcile_member(member_id, &request, now_ms, &mut records)?;
        Ok((after.member_epoch, records))
    }

    /// The classic member a SyncGroup, Heartbeat or LeaveGroup names (Kafka's
    /// `validateConsumerGroupMember`, `throwIfMemberDoesNotUseClassicProtocol` and
    /// `throwIfGenerationIdUnmatched`).
    fn classic_member(&self, target: &ClassicTarget<'_>) -> Result<&Member, ClassicError> {
        let member = match target.instance_id {
            None => self.members.get(target.member_id),
            Some(instance_id) => {
                let member = self
                    .static_member(instance_id)
                    .ok_or(code::UNKNOWN_MEMBER_ID)?;
                let leave_by_instance =
                    target.generation_id.is_none() && target.member_id.is_empty();
                if member.member_id != target.member_id && !leave_by_instance {
                    return Err(code::FENCED_INSTANCE_ID);
                }
                Some(member)
            }
        };
        let member = member
            .filter(|member| member.metadata.classic.is_some())
            .ok_or(code::UNKNOWN_MEMBER_ID)?;
        if target
            .generation_id
            .is_some_and(|generation| generation != member.assignment.member_epoch)
        {
            return Err(code::ILLEGAL_GENERATION);
        }
        Ok(member)
    }

    /// Kafka's `waitingOnUnreleasedPartition`: some partition of its target it does not have yet
    /// is still owned by another member.
    fn waiting_on_unreleased(&self, member: &Member) -> bool {
        let Some(target) = self.target.get(&member.member_id) else {
            return false;
        };
        target.iter().any(|(topic, partitions)| {
            let held: BTreeSet<i32> = member
                .assignment
                .assigned
                .get(topic)
                .cloned()
                .unwrap_or_default();
            partitions.iter().any(|partition| {
                !held.contains(partition)
                    && self
                        .owner_epoch(&member.member_id, *topic, *partition)
                        .is_some()
            })
        })
    }
}

/// A member's session timeout: its JoinGroup's for a classic member, else the group config's.
pub(crate) fn member_session_ms(member: &Member, config: &ConsumerGroupConfig) -> i32 {
    member
        .metadata
        .classic
        .as_ref()
        .map_or(config.session_timeout_ms, |classic| {
            classic.session_timeout_ms
        })
}
