//! The coordinator's consumer groups by id: routing heartbeats and records to their group,
//! expiring sessions and rebalances by deadline, validating offset commits and fetches, and
//! describing a group.
//!
//! Must never: read a clock (deadlines are compared with the `now_ms` the caller passes).

use std::collections::BTreeMap;

use super::heartbeat::fence_records;
use super::*;

/// Every consumer group this coordinator holds.
#[derive(Debug, Clone, Default)]
pub struct ConsumerGroups {
    pub(super) config: ConsumerGroupConfig,
    pub(super) groups: BTreeMap<String, ConsumerGroup>,
}

/// What ConsumerGroupDescribe shows of one member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    /// The member id.
    pub member_id: String,
    /// Its static instance id.
    pub instance_id: Option<String>,
    /// Its rack.
    pub rack_id: Option<String>,
    /// Its member epoch.
    pub member_epoch: i32,
    /// Its client id.
    pub client_id: String,
    /// Its client host.
    pub client_host: String,
    /// Its subscribed topic names.
    pub subscribed_topic_names: Vec<String>,
    /// Its subscribed pattern.
    pub subscribed_topic_regex: Option<String>,
    /// What it owns (or may own) now.
    pub assignment: Assignment,
    /// Its target assignment.
    pub target_assignment: Assignment,
    /// Whether it speaks the classic protocol (Kafka's member type CLASSIC).
    pub classic: bool,
}

/// What ConsumerGroupDescribe shows of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// The group id.
    pub group_id: String,
    /// Kafka's state name.
    pub state: &'static str,
    /// The group epoch.
    pub group_epoch: i32,
    /// The target assignment epoch.
    pub assignment_epoch: i32,
    /// The assignor the group uses.
    pub assignor_name: &'static str,
    /// The members, by member id.
    pub members: Vec<MemberDescription>,
}

impl ConsumerGroups {
    /// An empty table.
    pub fn new(config: ConsumerGroupConfig) -> Self {
        Self {
            config,
            groups: BTreeMap::new(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &ConsumerGroupConfig {
        &self.config
    }

    /// Replaces the settings (the broker's `group.consumer.*` keys); groups keep their state.
    pub fn set_config(&mut self, config: ConsumerGroupConfig) {
        self.config = config;
    }

    /// Forgets a group without writing anything: its `__consumer_offsets` partition is now led
    /// elsewhere.
    pub fn unload(&mut self, group_id: &str) {
        self.groups.remove(group_id);
    }

    /// A group.
    pub fn group(&self, group_id: &str) -> Option<&ConsumerGroup> {
        self.groups.get(group_id)
    }

    /// The groups' ids.
    pub fn group_ids(&self) -> impl Iterator<Item = &str> {
        self.groups.keys().map(String::as_str)
    }

    /// Applies one record, live or replayed from the log: creates the group on its first
    /// (non-tombstone) record, drops it at its group-metadata tombstone.
    pub fn replay(&mut self, record: &ConsumerRecord) {
        let group_id = record.group();
        if let ConsumerRecord::GroupMetadata { value: None, .. } = record {
            self.groups.remove(group_id);
            return;
        }
        // As Kafka: a tombstone of a group this coordinator does not hold is ignored.
        if record.is_tombstone() && !self.groups.contains_key(group_id) {
            return;
        }
        self.groups
            .entry(group_id.to_owned())
            .or_insert_with(|| ConsumerGroup::new(group_id))
            .replay(record);
    }

    /// After a load: every member without a session deadline gets a fresh one (as Kafka
    /// schedules on load), and members still revoking a fresh rebalance deadline. Members that
    /// already have deadlines keep them, so calling it again (a later partition's load) extends
    /// no live session.
    pub fn activate(&mut self, now_ms: i64) {
        for group in self.groups.values_mut() {
            for member in group.members.values() {
                let id = member.member_id.clone();
                let session_ms = i64::from(super::heartbeat::classic::member_session_ms(
                    member,
                    &self.config,
                ));
                group
                    .session_deadlines
                    .entry(id.clone())
                    .or_insert(now_ms.saturating_add(session_ms));
                if member.assignment.state == MemberState::UnrevokedPartitions {
                    let timeout = i64::from(member.metadata.rebalance_timeout_ms.max(0));
                    let deadline = now_ms.saturating_add(timeout);
                    group
                        .rebalance_deadlines
                        .entry(id)
                        .or_insert((deadline, member.assignment.member_epoch));
                }
            }
        }
    }

    /// The earliest session or rebalance deadline.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        self.next_deadline_ms_where(|_| true)
    }

    /// The earliest session or rebalance deadline of the groups `include` accepts (the
    /// coordinator leaves out groups whose records are being written).
    pub fn next_deadline_ms_where(&self, include: impl Fn(&str) -> bool) -> Option<i64> {
        self.groups
            .values()
            .filter(|group| include(&group.group_id))
            .flat_map(|group| {
                let sessions = group.session_deadlines.values().copied();
                let classic = group
                    .join_deadlines
                    .values()
                    .chain(group.sync_deadlines.values());
                sessions.chain(classic.copied()).chain(
                    group
                        .rebalance_deadlines
                        .values()
                        .map(|(deadline, _)| *deadline),
                )
            })
            .min()
    }

    /// Removes every member whose session or rebalance deadline has passed (Kafka fences them),
    /// returning the records written, to persist in order.
    pub fn tick(&mut self, now_ms: i64, topics: &TopicImage) -> Vec<ConsumerRecord> {
        let due: Vec<String> = self.groups_due(now_ms);
        due.iter()
            .flat_map(|group_id| self.expire(group_id, now_ms, topics))
            .collect()
    }

    /// The groups with a member whose session or rebalance deadline has passed.
    pub fn groups_due(&self, now_ms: i64) -> Vec<String> {
        self.groups
            .values()
            .filter(|group| !expired_members(group, now_ms).is_empty())
            .map(|group| group.group_id.clone())
            .collect()
    }

    /// Fences the members of `group_id` whose deadlines have passed, returning the records
    /// (already applied), to persist in order.
    pub fn expire(
        &mut self,
        group_id: &str,
        now_ms: i64,
        topics: &TopicImage,
    ) -> Vec<ConsumerRecord> {
        let Some(group) = self.groups.get_mut(group_id) else {
            return Vec::new();
        };
        let mut records = Vec::new();
        for member in expired_members(group, now_ms) {
            let fenced = fence_records(group, &member, topics, now_ms);
            for record in &fenced {
                group.replay(record);
            }
            group.forget_deadlines(&member);
            records.extend(fenced);
        }
        records
    }

    /// Moves the deadlines of `group_id` that fall before `until_ms` to it: the expiry of a
    /// group whose records could not be written is tried again then, not at every tick.
    pub fn postpone_deadlines(&mut self, group_id: &str, until_ms: i64) {
        if let Some(group) = self.groups.get_mut(group_id) {
            for deadline in group.session_deadlines.values_mut() {
                *deadline = (*deadline).max(until_ms);
            }
            for (deadline, _) in group.rebalance_deadlines.values_mut() {
                *deadline = (*deadline).max(until_ms);
            }
            let classic = group.join_deadlines.values_mut();
            for deadline in classic.chain(group.sync_deadlines.values_mut()) {
                *deadline = (*deadline).max(until_ms);
            }
        }
    }

    /// Puts a group back as it was before a write that failed (`None`: it did not exist).
    pub fn restore(&mut self, group_id: &str, group: Option<ConsumerGroup>) {
        match group {
            Some(group) => self.groups.insert(group_id.to_owned(), group),
            None => self.groups.remove(group_id),
        };
    }

    /// Kafka's request checks of a heartbeat (`throwIfConsumerGroupHeartbeatRequestIsInvalid`
    /// and the pattern's syntax), which come before the group is looked up.
    pub fn check_heartbeat(
        &self,
        request: &HeartbeatRequest,
        api_version: i16,
    ) -> Result<(), HeartbeatError> {
        super::heartbeat::check_request(request, api_version, &self.config.assignors)
    }

    /// Kafka's `ConsumerGroup.validateOffsetCommit` for an OffsetCommit (or TxnOffsetCommit) of
    /// a consumer group: an empty group takes commits with a negative epoch (admin clients);
    /// otherwise the member must exist and send its current epoch.
    pub fn validate_offset_commit(
        &self,
        group_id: &str,
        member_id: &str,
        member_epoch: i32,
        is_transactional: bool,
        api_version: i16,
    ) -> Result<(), OffsetValidationError> {
        let Some(group) = self.groups.get(group_id) else {
            return Ok(());
        };
        if member_epoch < 0 && group.members.is_empty() {
            return Ok(());
        }
        let member = known_member(group, member_id)?;
        if member.metadata.classic.is_some() && !is_transactional {
            // A classic member commits with its member epoch as the generation (any version).
            if member_epoch != member.assignment.member_epoch {
                return Err(OffsetValidationError::IllegalGeneration(format!(
                    "The received generation id {member_epoch} does not match the expected generation id {}.",
                    member.assignment.member_epoch
                )));
            }
            return Ok(());
        }
        if !is_transactional && api_version < 9 {
            return Err(OffsetValidationError::UnsupportedVersion(
                "OffsetCommit version 9 or above must be used by members using the modern group protocol"
                    .to_owned(),
            ));
        }
        check_epoch(member_epoch, member.assignment.member_epoch)
    }

    /// Kafka's `ConsumerGroup.validateOffsetFetch`: without a member id and with a negative epoch
    /// (admin clients, older clients) the fetch passes; otherwise as a commit.
    pub fn validate_offset_fetch(
        &self,
        group_id: &str,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), OffsetValidationError> {
        let Some(group) = self.groups.get(group_id) else {
            return Ok(());
        };
        if member_id.is_none() && member_epoch < 0 {
            return Ok(());
        }
        let member = known_member(group, member_id.unwrap_or_default())?;
        check_epoch(member_epoch, member.assignment.member_epoch)
    }

    /// DeleteGroups of a consumer group (Kafka's `validateDeleteGroup`): only an empty group may
    /// go; the records to persist (they are applied here already), or NON_EMPTY_GROUP's error.
    pub fn delete(&mut self, group_id: &str) -> Result<Vec<ConsumerRecord>, DeleteGroupError> {
        let group = self
            .groups
            .get(group_id)
            .ok_or(DeleteGroupError::GroupIdNotFound)?;
        if !group.members.is_empty() {
            return Err(DeleteGroupError::NonEmptyGroup);
        }
        let records = group.tombstones();
        for record in &records {
            self.replay(record);
        }
        Ok(records)
    }

    /// What ConsumerGroupDescribe shows of `group_id`, if this coordinator holds it.
    pub fn describe(&self, group_id: &str) -> Option<GroupDescription> {
        let group = self.groups.get(group_id)?;
        let assignor = group.preferred_assignor(&self.config);
        let members = group
            .members
            .values()
            .map(|member| MemberDescription {
                member_id: member.member_id.clone(),
                instance_id: member.metadata.instance_id.clone(),
                rack_id: member.metadata.rack_id.clone(),
                member_epoch: member.assignment.member_epoch,
                client_id: member.metadata.client_id.clone(),
                client_host: member.metadata.client_host.clone(),
                subscribed_topic_names: member.metadata.subscribed_topic_names.clone(),
                subscribed_topic_regex: member.metadata.subscribed_topic_regex.clone(),
                assignment: member.assignment.assigned.clone(),
                target_assignment: group
                    .target
                    .get(&member.member_id)
                    .cloned()
                    .unwrap_or_default(),
                classic: member.metadata.classic.is_some(),
            })
            .collect();
        Some(GroupDescription {
            group_id: group.group_id.clone(),
            state: group.state().name(),
            group_epoch: group.group_epoch,
            assignment_epoch: group.assignment_epoch,
            assignor_name: assignor.name(),
            members,
        })
    }
}

/// Why a consumer group could not be deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DeleteGroupError {
    /// GROUP_ID_NOT_FOUND: no consumer group of that id here.
    #[error("GROUP_ID_NOT_FOUND")]
    GroupIdNotFound,
    /// NON_EMPTY_GROUP: it still has members.
    #[error("NON_EMPTY_GROUP")]
    NonEmptyGroup,
}

impl DeleteGroupError {
    /// The error code on the wire.
    pub fn code(self) -> i16 {
        match self {
            Self::GroupIdNotFound => skiff_protocol::error_code::GROUP_ID_NOT_FOUND,
            Self::NonEmptyGroup => skiff_protocol::error_code::NON_EMPTY_GROUP,
        }
    }
}

/// The members of `group` whose session, classic join or sync deadline, or rebalance deadline
/// while still revoking at the epoch it was set at, has passed, by id.
pub(super) fn expired_members(group: &ConsumerGroup, now_ms: i64) -> Vec<String> {
    let mut expired: Vec<String> = group
        .session_deadlines
        .iter()
        .chain(&group.join_deadlines)
        .chain(&group.sync_deadlines)
        .filter(|(_, deadline)| **deadline <= now_ms)
        .map(|(member, _)| member.clone())
        .collect();
    for (member, (deadline, epoch)) in &group.rebalance_deadlines {
        let revoking = group.members.get(member).is_some_and(|m| {
            m.assignment.state == MemberState::UnrevokedPartitions
                && m.assignment.member_epoch == *epoch
        });
        if *deadline <= now_ms && revoking {
            expired.push(member.clone());
        }
    }
    expired.sort();
    expired.dedup();
    expired
}

fn known_member<'a>(
    group: &'a ConsumerGroup,
    member_id: &str,
) -> Result<&'a Member, OffsetValidationError> {
    group.members.get(member_id).ok_or_else(|| {
        OffsetValidationError::UnknownMemberId(format!(
            "Member {member_id} is not a member of group {}.",
            group.group_id
        ))
    })
}

fn check_epoch(received: i32, expected: i32) -> Result<(), OffsetValidationError> {
    if received == expected {
        return Ok(());
    }
    Err(OffsetValidationError::StaleMemberEpoch(format!(
        "The received member epoch {received} does not match the expected member epoch {expected}."
    )))
}
