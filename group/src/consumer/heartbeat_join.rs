//! The join / heartbeat path of ConsumerGroupHeartbeat (epoch 0 or the member's epoch), and the
//! group-wide steps it runs: pattern resolution, the subscribed-topic hash, the group epoch bump
//! and the target assignment.
//!
//! Must never: compute a target assignment for an epoch that was not bumped first.

use std::collections::{BTreeMap, BTreeSet};

use super::{
    apply, check_member_epoch, known_member, HeartbeatOutcome, HeartbeatRequest, HeartbeatResponse,
};
use crate::consumer::assignor::{self, MemberSpec, TopicSpec};
use crate::consumer::epochs;
use crate::consumer::group::*;
use crate::consumer::reconcile::reconcile;
use crate::consumer::records::GroupMetadataValue;
use crate::consumer::regex::{
    TopicRegex, TopicVisibility, GROUP_REGEXES_MAX, REGEX_BATCH_REFRESH_MIN_INTERVAL_MS,
};

pub(super) fn join_or_heartbeat(
    group: &mut ConsumerGroup,
    config: &ConsumerGroupConfig,
    request: &HeartbeatRequest,
    member_id: &str,
    topics: &TopicImage,
    now_ms: i64,
) -> Result<HeartbeatOutcome, HeartbeatError> {
    if group.members.len() >= config.max_size
        && (request.member_id.is_empty() || !group.members.contains_key(&request.member_id))
    {
        return Err(HeartbeatError::GroupMaxSizeReached(format!(
            "The consumer group has reached its maximum capacity of {} members.",
            config.max_size
        )));
    }
    let mut records = Vec::new();
    let member = find_member(group, request, member_id, &mut records)?;
    let updated = updated_metadata(&member.metadata, request);
    if let Some(regex) = &updated.subscribed_topic_regex {
        group.compile_regex(regex)?;
    }
    let mut bump = false;
    if updated != member.metadata {
        bump = updated.subscribed_topic_names != member.metadata.subscribed_topic_names
            || updated.subscribed_topic_regex != member.metadata.subscribed_topic_regex;
        let record = ConsumerRecord::MemberMetadata {
            group: group.group_id.clone(),
            member: member_id.to_owned(),
            value: Some(updated),
        };
        apply(group, &mut records, vec![record]);
    }
    let refresh = Some(&request.topic_visibility);
    group.bump_and_assign(config, bump, refresh, topics, now_ms, &mut records)?;
    let before = member.assignment.assigned.clone();
    let after = group.reconcile_member(member_id, request, now_ms, &mut records)?;
    let session_ms = i64::from(config.session_timeout_ms);
    group
        .session_deadlines
        .insert(member_id.to_owned(), now_ms.saturating_add(session_ms));
    let full = request.member_epoch == epochs::JOIN
        || (request.rebalance_timeout_ms != -1
            && (request.subscribed_topic_names.is_some()
                || request.subscribed_topic_regex.is_some())
            && request.topic_partitions.is_some());
    let response = HeartbeatResponse {
        member_id: member_id.to_owned(),
        member_epoch: after.member_epoch,
        heartbeat_interval_ms: config.heartbeat_interval_ms,
        assignment: (full || after.assigned != before).then(|| after.assigned.clone()),
    };
    Ok(HeartbeatOutcome { response, records })
}

/// The member the request speaks for: an existing one (its epoch checked), a new dynamic one, or
/// for a static join the instance id's new holder (Kafka's `replaceMember`: the old member's
/// records are deleted and the new member inherits its assignment at epoch 0).
fn find_member(
    group: &mut ConsumerGroup,
    request: &HeartbeatRequest,
    member_id: &str,
    records: &mut Vec<ConsumerRecord>,
) -> Result<Member, HeartbeatError> {
    let joining = request.member_epoch == epochs::JOIN;
    let owned = request.topic_partitions.as_ref();
    let Some(instance_id) = &request.instance_id else {
        return match group.members.get(member_id) {
            Some(member) => {
                check_member_epoch(member, request.member_epoch, owned)?;
                Ok(member.clone())
            }
            None if joining => Ok(new_member(member_id)),
            None => known_member(group, member_id).cloned(),
        };
    };
    let existing = group.static_member(instance_id).cloned();
    match existing {
        None if joining => Ok(new_member(member_id)),
        Some(old) if joining => replace_static(group, old, member_id, instance_id, records),
        existing => {
            let old = existing.ok_or_else(|| {
                HeartbeatError::UnknownMemberId(format!("Instance id {instance_id} is unknown."))
            })?;
            super::fenced_instance(&old, member_id, instance_id)?;
            check_member_epoch(&old, request.member_epoch, owned)?;
            Ok(old)
        }
    }
}

fn new_member(member_id: &str) -> Member {
    Member {
        member_id: member_id.to_owned(),
        metadata: MemberMetadataValue {
            rebalance_timeout_ms: -1,
            ..MemberMetadataValue::default()
        },
        assignment: MemberAssignment::default(),
    }
}

fn replace_static(
    group: &mut ConsumerGroup,
    old: Member,
    member_id: &str,
    instance_id: &str,
    records: &mut Vec<ConsumerRecord>,
) -> Result<Member, HeartbeatError> {
    if old.assignment.member_epoch != epochs::LEAVE_STATIC {
        return Err(HeartbeatError::UnreleasedInstanceId(format!(
            "Static member {member_id} with instance id {instance_id} cannot join the group because the \
             instance id is owned by {} member.",
            old.member_id
        )));
    }
    Ok(replace_member(group, old, member_id, records))
}

/// Kafka's `replaceMember`: the old member's records are deleted and `member_id` takes its
/// metadata, target and assignment at epoch 0.
pub(crate) fn replace_member(
    group: &mut ConsumerGroup,
    old: Member,
    member_id: &str,
    records: &mut Vec<ConsumerRecord>,
) -> Member {
    let name = group.group_id.clone();
    let old_id = old.member_id.clone();
    let target = group.target.get(&old_id).cloned().unwrap_or_default();
    let assignment = MemberAssignment {
        member_epoch: 0,
        previous_member_epoch: 0,
        ..old.assignment.clone()
    };
    let replaced = vec![
        ConsumerRecord::CurrentMemberAssignment {
            group: name.clone(),
            member: old_id.clone(),
            value: None,
        },
        ConsumerRecord::TargetAssignmentMember {
            group: name.clone(),
            member: old_id.clone(),
            value: None,
        },
        ConsumerRecord::MemberMetadata {
            group: name.clone(),
            member: old_id.clone(),
            value: None,
        },
        ConsumerRecord::MemberMetadata {
            group: name.clone(),
            member: member_id.to_owned(),
            value: Some(old.metadata.clone()),
        },
        ConsumerRecord::TargetAssignmentMember {
            group: name.clone(),
            member: member_id.to_owned(),
            value: Some(target),
        },
        ConsumerRecord::CurrentMemberAssignment {
            group: name,
            member: member_id.to_owned(),
            value: Some(assignment.clone()),
        },
    ];
    apply(group, records, replaced);
    group.forget_deadlines(&old_id);
    Member {
        member_id: member_id.to_owned(),
        metadata: old.metadata,
        assignment,
    }
}

/// Kafka's `ConsumerGroupMember.Builder.maybeUpdate*`: a field the request leaves unset keeps
/// its value; the client id and host always come from the request.
fn updated_metadata(
    current: &MemberMetadataValue,
    request: &HeartbeatRequest,
) -> MemberMetadataValue {
    let mut updated = current.clone();
    if request.instance_id.is_some() {
        updated.instance_id.clone_from(&request.instance_id);
    }
    if request.rack_id.is_some() {
        updated.rack_id.clone_from(&request.rack_id);
    }
    if request.rebalance_timeout_ms != -1 {
        updated.rebalance_timeout_ms = request.rebalance_timeout_ms;
    }
    if request.server_assignor.is_some() {
        updated.server_assignor.clone_from(&request.server_assignor);
    }
    if let Some(names) = &request.subscribed_topic_names {
        updated.subscribed_topic_names = names.clone();
    }
    if let Some(regex) = &request.subscribed_topic_regex {
        // An empty pattern clears the pattern subscription (Kafka's `maybeUpdateSubscribedTopicRegex`).
        updated.subscribed_topic_regex = (!regex.is_empty()).then(|| regex.clone());
    }
    updated.client_id.clone_from(&request.client_id);
    updated.client_host.clone_from(&request.client_host);
    // A ConsumerGroupHeartbeat speaks the consumer protocol (Kafka sets no classic metadata).
    updated.classic = None;
    updated
}

impl ConsumerGroup {
    /// The group-wide steps after a member's metadata: patterns resolved, the group epoch bumped
    /// when `bump` or the subscribed topics' metadata changed, and a new target assignment when
    /// the epoch is ahead of it; their records applied and kept in `records`. Only a
    /// ConsumerGroupHeartbeat brings a refresh of the patterns, seen through its member's
    /// `refresh` visibility (Kafka's `maybeUpdateRegularExpressions` runs there alone); a classic
    /// member's request passes `None` and only drops the patterns no member uses.
    pub(crate) fn bump_and_assign(
        &mut self,
        config: &ConsumerGroupConfig,
        bump: bool,
        refresh: Option<&TopicVisibility>,
        topics: &TopicImage,
        now_ms: i64,
        records: &mut Vec<ConsumerRecord>,
    ) -> Result<(), HeartbeatError> {
        let interval_ms = config.regex_refresh_interval_ms;
        let resolved = self.resolve_regexes(topics, refresh, interval_ms, now_ms);
        apply(self, records, resolved);
        let hash = self.metadata_hash_for(topics);
        if bump || hash != self.metadata_hash {
            let value = GroupMetadataValue {
                epoch: self.group_epoch.saturating_add(1),
                metadata_hash: hash,
            };
            let record = ConsumerRecord::GroupMetadata {
                group: self.group_id.clone(),
                value: Some(value),
            };
            apply(self, records, vec![record]);
        }
        if self.group_epoch > self.assignment_epoch {
            let target = self.target_records(config, topics)?;
            apply(self, records, target);
        }
        Ok(())
    }

    /// Compiles `regex` unless the group already has it; refuses an invalid pattern or one past
    /// [`GROUP_REGEXES_MAX`].
    fn compile_regex(&mut self, regex: &str) -> Result<(), HeartbeatError> {
        if self.compiled.contains_key(regex) {
            return Ok(());
        }
        let in_use = self.regexes_in_use();
        if !in_use.contains(regex) && in_use.len() >= GROUP_REGEXES_MAX {
            return Err(HeartbeatError::InvalidRegularExpression(format!(
                "SubscribedTopicRegex `{regex}` cannot be used: the group already uses {GROUP_REGEXES_MAX} patterns."
            )));
        }
        let compiled =
            TopicRegex::compile(regex).map_err(|error| super::invalid_regex(regex, &error))?;
        self.compiled.insert(regex.to_owned(), compiled);
        Ok(())
    }

    fn regexes_in_use(&self) -> BTreeSet<String> {
        self.members
            .values()
            .filter_map(|member| member.metadata.subscribed_topic_regex.clone())
            .collect()
    }

    /// Resolved patterns no member subscribes with any more.
    pub(super) fn unused_regexes(&self) -> Vec<String> {
        let in_use = self.regexes_in_use();
        self.resolved
            .keys()
            .filter(|regex| !in_use.contains(*regex))
            .cloned()
            .collect()
    }

    /// Records resolving the patterns in use again when `visibility` is given and they are due
    /// ([`Self::regexes_due`]), each to the topics it matches that `visibility` allows, and
    /// deleting those no member uses.
    fn resolve_regexes(
        &mut self,
        topics: &TopicImage,
        visibility: Option<&TopicVisibility>,
        refresh_interval_ms: i32,
        now_ms: i64,
    ) -> Vec<ConsumerRecord> {
        let mut records = Vec::new();
        let in_use = self.regexes_in_use();
        let visibility =
            visibility.filter(|_| self.regexes_due(&in_use, topics, refresh_interval_ms, now_ms));
        if let Some(visibility) = visibility {
            for regex in in_use {
                if !self.compiled.contains_key(&regex) && self.compile_regex(&regex).is_err() {
                    continue;
                }
                let Some(compiled) = self.compiled.get(&regex) else {
                    continue;
                };
                let matched: Vec<String> = topics
                    .by_name
                    .keys()
                    .filter(|name| compiled.matches(name) && visibility.allows(name))
                    .cloned()
                    .collect();
                let value = RegexValue {
                    topics: matched,
                    version: topics.version,
                    timestamp_ms: now_ms,
                };
                records.push(ConsumerRecord::RegularExpression {
                    group: self.group_id.clone(),
                    regex,
                    value: Some(value),
                });
            }
        }
        for regex in self.unused_regexes() {
            records.push(ConsumerRecord::RegularExpression {
                group: self.group_id.clone(),
                regex,
                value: None,
            });
        }
        records
    }

    /// Whether the group's patterns are resolved again now, all together as Kafka 4.1.1's
    /// `maybeUpdateRegularExpressions` does: one in use has no resolution yet (a member just
    /// brought it; Kafka would also wait out the batch interval here, Skiff resolves at once), the
    /// topics changed since the oldest resolution and it is at least
    /// [`REGEX_BATCH_REFRESH_MIN_INTERVAL_MS`] old, or it is older than
    /// `group.consumer.regex.refresh.interval.ms` (so a change of ACLs shows).
    fn regexes_due(
        &self,
        in_use: &BTreeSet<String>,
        topics: &TopicImage,
        refresh_interval_ms: i32,
        now_ms: i64,
    ) -> bool {
        let mut oldest_ms = i64::MAX;
        let mut topics_changed = false;
        for regex in in_use {
            let Some(value) = self.resolved.get(regex) else {
                return true;
            };
            oldest_ms = oldest_ms.min(value.timestamp_ms);
            topics_changed |= value.version != topics.version;
        }
        let age_ms = now_ms.saturating_sub(oldest_ms);
        (topics_changed && age_ms >= REGEX_BATCH_REFRESH_MIN_INTERVAL_MS)
            || age_ms >= i64::from(refresh_interval_ms)
    }

    /// The topic names `member` subscribes to: its list and what its pattern resolved to.
    pub(crate) fn member_topics(&self, member: &Member) -> BTreeSet<String> {
        let mut names: BTreeSet<String> = member
            .metadata
            .subscribed_topic_names
            .iter()
            .cloned()
            .collect();
        if let Some(resolved) = member
            .metadata
            .subscribed_topic_regex
            .as_ref()
            .and_then(|r| self.resolved.get(r))
        {
            names.extend(resolved.topics.iter().cloned());
        }
        names
    }

    /// A hash of the subscribed topics that exist (name, id, partition count): a change means the
    /// group must rebalance (Kafka 4.1's metadata hash, KIP-1101; Skiff's own function, FNV-1a).
    pub(crate) fn metadata_hash_for(&self, topics: &TopicImage) -> i64 {
        let names: BTreeSet<String> = self
            .members
            .values()
            .flat_map(|m| self.member_topics(m))
            .collect();
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut feed = |bytes: &[u8]| {
            for byte in bytes {
                hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
            }
        };
        for name in names {
            if let Some((id, partitions)) = topics.by_name.get(&name) {
                feed(name.as_bytes());
                feed(&[0]);
                feed(&id.0);
                feed(&partitions.to_be_bytes());
            }
        }
        i64::from_be_bytes(hash.to_be_bytes())
    }

    /// The assignor the group uses: the one most members ask for (ties by name), else the
    /// configured default.
    pub(crate) fn preferred_assignor(&self, config: &ConsumerGroupConfig) -> AssignorKind {
        let mut votes: BTreeMap<AssignorKind, usize> = BTreeMap::new();
        for member in self.members.values() {
            if let Some(kind) = member
                .metadata
                .server_assignor
                .as_deref()
                .and_then(AssignorKind::from_name)
            {
                *votes.entry(kind).or_default() += 1;
            }
        }
        let default = config
            .assignors
            .first()
            .copied()
            .unwrap_or(AssignorKind::Uniform);
        votes
            .into_iter()
            .max_by(|(a, x), (b, y)| x.cmp(y).then(b.name().cmp(a.name())))
            .map_or(default, |(kind, _)| kind)
    }

    /// The records of a new target assignment at the group epoch: each member whose target
    /// changed, then the target assignment epoch.
    pub(crate) fn target_records(
        &self,
        config: &ConsumerGroupConfig,
        topics: &TopicImage,
    ) -> Result<Vec<ConsumerRecord>, HeartbeatError> {
        let mut table: BTreeMap<TopicId, TopicSpec> = BTreeMap::new();
        let specs: Vec<MemberSpec> = self
            .members
            .values()
            .map(|member| {
                let mut ids = BTreeSet::new();
                for name in self.member_topics(member) {
                    if let Some((id, partitions)) = topics.by_name.get(&name) {
                        ids.insert(*id);
                        table.insert(
                            *id,
                            TopicSpec {
                                name,
                                partitions: *partitions,
                            },
                        );
                    }
                }
                MemberSpec {
                    member_id: member.member_id.clone(),
                    instance_id: member.metadata.instance_id.clone(),
                    rack: member.metadata.rack_id.clone(),
                    topics: ids,
                    current: self
                        .target
                        .get(&member.member_id)
                        .cloned()
                        .unwrap_or_default(),
                }
            })
            .collect();
        let kind = self.preferred_assignor(config);
        let assigned = assignor::assign(kind, &specs, &table)
            .map_err(|error| HeartbeatError::AssignorFailed(error.to_string()))?;
        let group = self.group_id.clone();
        let mut records: Vec<ConsumerRecord> = assigned
            .into_iter()
            .filter(|(member, assignment)| self.target.get(member) != Some(assignment))
            .map(
                |(member, assignment)| ConsumerRecord::TargetAssignmentMember {
                    group: group.clone(),
                    member,
                    value: Some(assignment),
                },
            )
            .collect();
        records.push(ConsumerRecord::TargetAssignmentMetadata {
            group,
            value: Some(self.group_epoch),
        });
        Ok(records)
    }

    /// Reconciles `member_id` one step (Kafka's `maybeReconcile`), recording a change and setting
    /// or cancelling its rebalance deadline. Returns its current assignment.
    pub(crate) fn reconcile_member(
        &mut self,
        member_id: &str,
        request: &HeartbeatRequest,
        now_ms: i64,
        records: &mut Vec<ConsumerRecord>,
    ) -> Result<MemberAssignment, HeartbeatError> {
        let member = known_member(self, member_id)?.clone();
        if member.is_reconciled_to(self.assignment_epoch) {
            return Ok(member.assignment);
        }
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let owner = |topic: TopicId, partition: i32| self.owner_epoch(member_id, topic, partition);
        let next = reconcile(
            &member.assignment,
            self.assignment_epoch,
            &target,
            &owner,
            request.topic_partitions.as_ref(),
        )
        .map_err(|error| HeartbeatError::FencedMemberEpoch(error.to_string()))?;
        if next != member.assignment {
            let record = ConsumerRecord::CurrentMemberAssignment {
                group: self.group_id.clone(),
                member: member_id.to_owned(),
                value: Some(next.clone()),
            };
            apply(self, records, vec![record]);
            if next.state == MemberState::UnrevokedPartitions {
                let timeout = i64::from(member.metadata.rebalance_timeout_ms.max(0));
                let deadline = now_ms.saturating_add(timeout);
                self.rebalance_deadlines
                    .insert(member_id.to_owned(), (deadline, next.member_epoch));
            } else {
                self.rebalance_deadlines.remove(member_id);
            }
        }
        Ok(next)
    }

    /// Drops a member's session and rebalance deadlines.
    pub(crate) fn forget_deadlines(&mut self, member_id: &str) {
        self.session_deadlines.remove(member_id);
        self.rebalance_deadlines.remove(member_id);
        self.join_deadlines.remove(member_id);
        self.sync_deadlines.remove(member_id);
    }
}
