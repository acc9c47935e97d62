//! ConsumerGroupHeartbeat as Kafka 4.1.1's `GroupMetadataManager.consumerGroupHeartbeat` runs it:
//! validate the request, leave (epoch -1, or -2 for a static member), or join / heartbeat: find or
//! create the member (static members replace their instance id's previous holder once it left
//! with -2), record a changed subscription, resolve patterns, bump the group epoch when the
//! membership, a subscription or the subscribed topics' metadata changed, recompute the target
//! assignment when the group epoch is ahead of it, reconcile the member one step, and answer with
//! the heartbeat interval and the assignment when it changed.
//!
//! A heartbeat works on a copy of the group and replaces the group only when it succeeds, so a
//! refused request changes nothing (the copy costs one group's state per heartbeat: members ×
//! their metadata and assignments, kilobytes for a typical group).
//!
//! Must never: answer before every record it produced has been applied to the group.

use super::*;
use crate::consumer::epochs;
use crate::consumer::regex::{RegexError, TopicVisibility};

/// Bytes of any string a heartbeat brings (ids, names, pattern): what the records' i16 length
/// prefixes hold. Kafka's request decoder refuses longer strings already, so a real client never
/// meets this; it keeps a hand-built request from producing records that cannot be written.
pub const REQUEST_STRING_BYTES_MAX: usize = i16::MAX as usize;

/// ConsumerGroupHeartbeat's version from which the client must generate its member id (KIP-1082).
pub const CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION: i16 = 1;

/// A ConsumerGroupHeartbeat request, decoded (any version).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HeartbeatRequest {
    /// The group.
    pub group_id: String,
    /// The member id (empty on a v0 first join: the coordinator makes one).
    pub member_id: String,
    /// 0 to join, -1 to leave, -2 for a static member's temporary leave, else the current epoch.
    pub member_epoch: i32,
    /// The static instance id.
    pub instance_id: Option<String>,
    /// The rack.
    pub rack_id: Option<String>,
    /// The rebalance timeout, -1 when unchanged.
    pub rebalance_timeout_ms: i32,
    /// Subscribed topic names, `None` when unchanged.
    pub subscribed_topic_names: Option<Vec<String>>,
    /// Subscribed pattern, `None` when unchanged.
    pub subscribed_topic_regex: Option<String>,
    /// Requested server assignor, `None` when unchanged.
    pub server_assignor: Option<String>,
    /// Partitions the member owns, `None` when unchanged.
    pub topic_partitions: Option<Assignment>,
    /// The request header's client id.
    pub client_id: String,
    /// The client's address.
    pub client_host: String,
    /// The topics this member may Describe: a refresh of the group's patterns that this
    /// heartbeat brings resolves them to these only (Kafka 4.1.1 filters by the refreshing
    /// member's ACLs).
    pub topic_visibility: TopicVisibility,
}

/// A successful ConsumerGroupHeartbeat response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HeartbeatResponse {
    /// The member id.
    pub member_id: String,
    /// The member epoch.
    pub member_epoch: i32,
    /// The heartbeat interval (0 in a leave's response).
    pub heartbeat_interval_ms: i32,
    /// The member's assignment, only when it changed or the request was a full one.
    pub assignment: Option<Assignment>,
}

/// A heartbeat's answer and the records to persist (in order) before sending it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HeartbeatOutcome {
    /// The response.
    pub response: HeartbeatResponse,
    /// The records, already applied to the group.
    pub records: Vec<ConsumerRecord>,
}

/// Kafka's INVALID_REGULAR_EXPRESSION message (the description is the `regex` crate's, not RE2/J's).
pub(super) fn invalid_regex(regex: &str, error: &RegexError) -> HeartbeatError {
    HeartbeatError::InvalidRegularExpression(format!(
        "SubscribedTopicRegex `{regex}` is not a valid regular expression: {error}."
    ))
}

fn invalid(message: &str) -> HeartbeatError {
    HeartbeatError::InvalidRequest(message.to_owned())
}

fn empty_string(value: Option<&str>) -> bool {
    value.is_some_and(|value| value.trim().is_empty())
}

/// Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid`, same checks and messages.
fn validate(
    request: &HeartbeatRequest,
    api_version: i16,
    assignors: &[AssignorKind],
) -> Result<(), HeartbeatError> {
    let strings = [
        &request.group_id,
        &request.member_id,
        &request.client_id,
        &request.client_host,
    ]
    .into_iter()
    .chain(&request.instance_id)
    .chain(&request.rack_id)
    .chain(&request.subscribed_topic_regex)
    .chain(&request.server_assignor)
    .chain(request.subscribed_topic_names.iter().flatten());
    if strings
        .into_iter()
        .any(|text| text.len() > REQUEST_STRING_BYTES_MAX)
    {
        return Err(invalid("A string of the request is too long."));
    }
    let epoch = request.member_epoch;
    if (api_version >= CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION
        || epoch > 0
        || epoch == epochs::LEAVE)
        && request.member_id.trim().is_empty()
    {
        return Err(invalid("MemberId can't be empty."));
    }
    if request.group_id.trim().is_empty() {
        return Err(invalid("GroupId can't be empty."));
    }
    if empty_string(request.instance_id.as_deref()) {
        return Err(invalid("InstanceId can't be empty."));
    }
    if empty_string(request.rack_id.as_deref()) {
        return Err(invalid("RackId can't be empty."));
    }
    if epoch == epochs::JOIN {
        validate_join(request)?;
    } else if epoch == epochs::LEAVE_STATIC && request.instance_id.is_none() {
        return Err(invalid("InstanceId can't be null."));
    } else if epoch < epochs::LEAVE_STATIC {
        return Err(invalid("MemberEpoch is invalid."));
    }
    if let Some(name) = &request.server_assignor {
        if !assignors.iter().any(|kind| kind.name() == name) {
            let names: Vec<&str> = assignors.iter().map(|kind| kind.name()).collect();
            return Err(HeartbeatError::UnsupportedAssignor(format!(
                "ServerAssignor {name} is not supported. Supported assignors: {}.",
                names.join(", ")
            )));
        }
    }
    Ok(())
}

/// The checks of a joining heartbeat (epoch 0), as Kafka 4.1.1's
/// `GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid` makes them: owned
/// partitions may be null or empty, and an empty subscription is a member subscribed to nothing
/// (Kafka's consumer joins so while its client-side pattern matches no topic yet); only a
/// subscription given neither as names nor as a pattern is refused.
fn validate_join(request: &HeartbeatRequest) -> Result<(), HeartbeatError> {
    if request.rebalance_timeout_ms == -1 {
        return Err(invalid(
            "RebalanceTimeoutMs must be provided in first request.",
        ));
    }
    if request
        .topic_partitions
        .as_ref()
        .is_some_and(|owned| !owned.is_empty())
    {
        return Err(invalid("TopicPartitions must be empty when (re-)joining."));
    }
    if request.subscribed_topic_names.is_none() && request.subscribed_topic_regex.is_none() {
        return Err(invalid(
            "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
        ));
    }
    Ok(())
}

impl ConsumerGroups {
    /// Handles one ConsumerGroupHeartbeat at `now_ms` against the cluster's `topics`.
    /// `fresh_member_id` is used when a v0 client joins without a member id (the
    /// [`crate::Coordinator`] makes it as it makes classic member ids: the client id, a per-start
    /// salt and a counter; Kafka uses a random UUID, and clients treat it as opaque). On success
    /// the records are already applied; the coordinator has them persisted, then answers.
    pub fn heartbeat(
        &mut self,
        request: &HeartbeatRequest,
        api_version: i16,
        now_ms: i64,
        topics: &TopicImage,
        fresh_member_id: &str,
    ) -> Result<HeartbeatOutcome, HeartbeatError> {
        let existing = self.groups.get(&request.group_id);
        let cached = request
            .subscribed_topic_regex
            .as_deref()
            .is_some_and(|regex| existing.is_some_and(|group| group.compiled.contains_key(regex)));
        if cached {
            validate(request, api_version, &self.config.assignors)?;
        } else {
            check_request(request, api_version, &self.config.assignors)?;
        }
        let mut group = match existing {
            Some(group) => group.clone(),
            None if request.member_epoch == epochs::JOIN => ConsumerGroup::new(&request.group_id),
            None => {
                return Err(HeartbeatError::GroupIdNotFound(format!(
                    "Consumer group {} not found.",
                    request.group_id
                )))
            }
        };
        let outcome = if request.member_epoch == epochs::LEAVE
            || request.member_epoch == epochs::LEAVE_STATIC
        {
            leave(&mut group, request, topics, now_ms)?
        } else {
            let member_id = if request.member_id.is_empty() {
                fresh_member_id
            } else {
                &request.member_id
            };
            join_or_heartbeat(&mut group, &self.config, request, member_id, topics, now_ms)?
        };
        self.groups.insert(request.group_id.clone(), group);
        Ok(outcome)
    }
}

/// The request's checks and its pattern's syntax (Kafka checks the pattern with the request,
/// before looking at the group).
pub(super) fn check_request(
    request: &HeartbeatRequest,
    api_version: i16,
    assignors: &[AssignorKind],
) -> Result<(), HeartbeatError> {
    validate(request, api_version, assignors)?;
    if let Some(regex) = request
        .subscribed_topic_regex
        .as_deref()
        .filter(|r| !r.is_empty())
    {
        TopicRegex::compile(regex).map_err(|error| invalid_regex(regex, &error))?;
    }
    Ok(())
}

/// Applies `records` to `group` and keeps them in `out`.
fn apply(group: &mut ConsumerGroup, out: &mut Vec<ConsumerRecord>, records: Vec<ConsumerRecord>) {
    for record in records {
        group.replay(&record);
        out.push(record);
    }
}

fn leave(
    group: &mut ConsumerGroup,
    request: &HeartbeatRequest,
    topics: &TopicImage,
    now_ms: i64,
) -> Result<HeartbeatOutcome, HeartbeatError> {
    let member_id = match &request.instance_id {
        None => known_member(group, &request.member_id)?.member_id.clone(),
        Some(instance_id) => {
            let member = static_member(group, instance_id)?;
            fenced_instance(member, &request.member_id, instance_id)?;
            member.member_id.clone()
        }
    };
    let mut records = Vec::new();
    if request.member_epoch == epochs::LEAVE_STATIC {
        let member = known_member(group, &member_id)?;
        let value = MemberAssignment {
            member_epoch: epochs::LEAVE_STATIC,
            pending_revocation: Assignment::new(),
            ..member.assignment.clone()
        };
        let record = ConsumerRecord::CurrentMemberAssignment {
            group: group.group_id.clone(),
            member: member_id.clone(),
            value: Some(value),
        };
        apply(group, &mut records, vec![record]);
        group.rebalance_deadlines.remove(&member_id);
    } else {
        let fenced = fence_records(group, &member_id, topics, now_ms);
        apply(group, &mut records, fenced);
        group.forget_deadlines(&member_id);
    }
    let response = HeartbeatResponse {
        member_id,
        member_epoch: request.member_epoch,
        ..HeartbeatResponse::default()
    };
    Ok(HeartbeatOutcome { response, records })
}

fn known_member<'a>(
    group: &'a ConsumerGroup,
    member_id: &str,
) -> Result<&'a Member, HeartbeatError> {
    group.members.get(member_id).ok_or_else(|| {
        HeartbeatError::UnknownMemberId(format!(
            "Member {member_id} is not a member of group {}.",
            group.group_id
        ))
    })
}

fn static_member<'a>(
    group: &'a ConsumerGroup,
    instance_id: &str,
) -> Result<&'a Member, HeartbeatError> {
    group.static_member(instance_id).ok_or_else(|| {
        HeartbeatError::UnknownMemberId(format!("Instance id {instance_id} is unknown."))
    })
}

fn fenced_instance(
    member: &Member,
    member_id: &str,
    instance_id: &str,
) -> Result<(), HeartbeatError> {
    if member.member_id == member_id {
        return Ok(());
    }
    Err(HeartbeatError::FencedInstanceId(format!(
        "Static member {member_id} with instance id {instance_id} was fenced by member {}.",
        member.member_id
    )))
}

/// The records removing `member_id` (Kafka's `consumerGroupFenceMember`): its current
/// assignment, target assignment and metadata tombstones, tombstones of patterns no other member
/// uses, and the group epoch bumped with the remaining members' subscribed-topic hash.
pub(super) fn fence_records(
    group: &ConsumerGroup,
    member_id: &str,
    topics: &TopicImage,
    now_ms: i64,
) -> Vec<ConsumerRecord> {
    let _ = now_ms;
    fence_many(group, &[member_id.to_owned()], topics)
}

/// The records removing `members` at once (Kafka's `consumerGroupFenceMembers`): each one's
/// tombstones, then the unused patterns' and one group epoch bump.
pub(super) fn fence_many(
    group: &ConsumerGroup,
    members: &[String],
    topics: &TopicImage,
) -> Vec<ConsumerRecord> {
    let name = group.group_id.clone();
    let mut records = Vec::new();
    for member_id in members {
        records.extend([
            ConsumerRecord::CurrentMemberAssignment {
                group: name.clone(),
                member: member_id.clone(),
                value: None,
            },
            ConsumerRecord::TargetAssignmentMember {
                group: name.clone(),
                member: member_id.clone(),
                value: None,
            },
            ConsumerRecord::MemberMetadata {
                group: name.clone(),
                member: member_id.clone(),
                value: None,
            },
        ]);
    }
    let mut remaining = group.clone();
    for record in &records {
        remaining.replay(record);
    }
    for regex in remaining.unused_regexes() {
        records.push(ConsumerRecord::RegularExpression {
            group: name.clone(),
            regex: regex.clone(),
            value: None,
        });
        remaining.resolved.remove(&regex);
    }
    let value = crate::consumer::records::GroupMetadataValue {
        epoch: group.group_epoch.saturating_add(1),
        metadata_hash: remaining.metadata_hash_for(topics),
    };
    records.push(ConsumerRecord::GroupMetadata {
        group: name,
        value: Some(value),
    });
    records
}

/// Kafka's `throwIfConsumerGroupMemberEpochIsInvalid`.
fn check_member_epoch(
    member: &Member,
    received: i32,
    owned: Option<&Assignment>,
) -> Result<(), HeartbeatError> {
    let known = member.assignment.member_epoch;
    let fenced = |relation: &str| {
        HeartbeatError::FencedMemberEpoch(format!(
            "The consumer group member has a {relation} member epoch ({received}) than the one known by the \
             group coordinator ({known}). The member must abandon all its partitions and rejoin."
        ))
    };
    if received > known {
        return Err(fenced("greater"));
    }
    if received < known {
        let subset = owned.is_some_and(|owned| {
            owned.iter().all(|(topic, partitions)| {
                member
                    .assignment
                    .assigned
                    .get(topic)
                    .is_some_and(|held| partitions.is_subset(held))
            })
        });
        if received != member.assignment.previous_member_epoch || !subset {
            return Err(fenced("smaller"));
        }
    }
    Ok(())
}

#[path = "heartbeat_join.rs"]
mod join;

#[path = "classic.rs"]
pub(crate) mod classic;

use join::join_or_heartbeat;
