//! The server-side assignors of Kafka 4.1.1's consumer groups: `uniform` (the default, Kafka's
//! `UniformAssignor`) and `range` (Kafka's `RangeAssignor`). Each maps the group's members
//! (subscribed topic ids, current target assignment, optional rack and instance id) and the
//! subscribed topics' partition counts to a new target assignment.
//!
//! - `uniform`, homogeneous subscriptions (every member subscribed to the same topics): each
//!   member keeps its current partitions up to its quota (total / members, the first
//!   `total % members` members one more) and the rest, in topic and partition order, fill the
//!   members below their quota. Balanced within one partition, and sticky: an unchanged group keeps
//!   its assignment.
//! - `uniform`, heterogeneous subscriptions: each member keeps the partitions of topics it still
//!   subscribes to; unowned partitions go, the topics with fewest subscribers first, to the
//!   subscriber holding the fewest partitions; then partitions move from a member to a less loaded
//!   subscriber of that topic while that narrows the gap by two or more (bounded by
//!   [`HETEROGENEOUS_MOVES_MAX_PER_PARTITION`]). This keeps the properties of Kafka's
//!   `UniformHeterogeneousAssignmentBuilder` (sticky, every partition once, to subscribers only,
//!   no member two partitions above a fellow subscriber it could give one to) but not its exact
//!   choices: the same group may get a different, equally valid assignment than from Kafka.
//! - `range`: for each topic, its subscribers (static members by instance id first, then the
//!   others by member id) get contiguous ranges, the first `partitions % subscribers` one more;
//!   co-subscribed topics with equal partition counts are therefore co-partitioned. Deterministic,
//!   so an unchanged group keeps its assignment. Racks are not used by either.
//!
//! Where Kafka walks members and topics in hash-map order (which quota a member gets first in
//! `uniform`), these walk them by member id and topic id, so results are reproducible.
//!
//! Must never: assign a partition twice, assign a partition of a topic a member does not
//! subscribe to, or run past [`ASSIGNMENT_COST_MAX`] (members × subscribed partitions).

use std::collections::{BTreeMap, BTreeSet};

use super::{Assignment, TopicId};

/// Members × subscribed partitions one assignment may cost. The uniform heterogeneous balancing
/// visits every partition and every subscriber of its topic per pass; 10^8 keeps one computation
/// well under a second and allows, say, 1 000 members on 100 000 partitions. A group past it
/// keeps its previous target assignment ([`AssignorError::TooLarge`]).
pub const ASSIGNMENT_COST_MAX: u64 = 100_000_000;

/// Balancing moves of the uniform heterogeneous assignor, per subscribed partition. Every move
/// narrows a gap of two or more, so the loop ends on its own; the bound makes its cost linear.
pub const HETEROGENEOUS_MOVES_MAX_PER_PARTITION: usize = 4;

/// Which server-side assignor (Kafka's `group.consumer.assignors` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AssignorKind {
    /// Kafka's `uniform` (the default).
    Uniform,
    /// Kafka's `range`.
    Range,
}

impl AssignorKind {
    /// The name clients send in `ServerAssignor`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Uniform => "uniform",
            Self::Range => "range",
        }
    }

    /// The assignor of that name, if Skiff has it.
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Uniform, Self::Range]
            .into_iter()
            .find(|kind| kind.name() == name)
    }
}

/// One member as an assignor sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberSpec {
    /// The member id.
    pub member_id: String,
    /// Its static instance id, if any (the range assignor orders static members by it).
    pub instance_id: Option<String>,
    /// Its rack, if any (unused by both assignors, as in Kafka 4.1.1).
    pub rack: Option<String>,
    /// The topics it subscribes to (resolved to ids).
    pub topics: BTreeSet<TopicId>,
    /// Its current target assignment (stickiness starts from it).
    pub current: Assignment,
}

/// A subscribed topic as an assignor sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSpec {
    /// Its name (for error messages).
    pub name: String,
    /// Its partition count.
    pub partitions: i32,
}

/// Why no assignment was computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssignorError {
    /// Members × subscribed partitions above [`ASSIGNMENT_COST_MAX`].
    #[error(
        "assignment of {members} members × {partitions} partitions is above the bound {cost_max}"
    )]
    TooLarge {
        /// Members.
        members: usize,
        /// Subscribed partitions.
        partitions: u64,
        /// The bound.
        cost_max: u64,
    },
    /// A member subscribes to a topic id the topic table does not hold (Kafka's message).
    #[error(
        "Members are subscribed to topic {topic:?} which doesn't exist in the topic metadata."
    )]
    UnknownTopic {
        /// The topic id.
        topic: TopicId,
    },
}

/// The target assignment of `members` (every member has an entry, possibly empty) by `kind`.
pub fn assign(
    kind: AssignorKind,
    members: &[MemberSpec],
    topics: &BTreeMap<TopicId, TopicSpec>,
) -> Result<BTreeMap<String, Assignment>, AssignorError> {
    check_cost(members, topics)?;
    let mut sorted: Vec<&MemberSpec> = members.iter().collect();
    sorted.sort_by(|a, b| a.member_id.cmp(&b.member_id));
    sorted.dedup_by(|a, b| a.member_id == b.member_id);
    match kind {
        AssignorKind::Range => Ok(range(&sorted, topics)),
        AssignorKind::Uniform if is_homogeneous(&sorted) => {
            Ok(uniform_homogeneous(&sorted, topics))
        }
        AssignorKind::Uniform => Ok(uniform_heterogeneous(&sorted, topics)),
    }
}

fn check_cost(
    members: &[MemberSpec],
    topics: &BTreeMap<TopicId, TopicSpec>,
) -> Result<(), AssignorError> {
    let mut subscribed = BTreeSet::new();
    for member in members {
        for topic in &member.topics {
            if !topics.contains_key(topic) {
                return Err(AssignorError::UnknownTopic { topic: *topic });
            }
            subscribed.insert(*topic);
        }
    }
    let partitions: u64 = subscribed
        .iter()
        .filter_map(|topic| topics.get(topic))
        .map(|spec| u64::try_from(spec.partitions).unwrap_or(0))
        .sum();
    let members_count = u64::try_from(members.len()).unwrap_or(u64::MAX);
    if members_count.saturating_mul(partitions) > ASSIGNMENT_COST_MAX {
        return Err(AssignorError::TooLarge {
            members: members.len(),
            partitions,
            cost_max: ASSIGNMENT_COST_MAX,
        });
    }
    Ok(())
}

fn is_homogeneous(members: &[&MemberSpec]) -> bool {
    members
        .first()
        .is_none_or(|first| members.iter().all(|member| member.topics == first.topics))
}

fn partitions_of(topics: &BTreeMap<TopicId, TopicSpec>, topic: TopicId) -> i32 {
    topics.get(&topic).map_or(0, |spec| spec.partitions.max(0))
}

fn empty_assignments(members: &[&MemberSpec]) -> BTreeMap<String, Assignment> {
    members
        .iter()
        .map(|member| (member.member_id.clone(), Assignment::new()))
        .collect()
}

/// Each member's current partitions that it may keep: of a topic it subscribes to, within the
/// topic's partition count, and not already kept by a member earlier in the order (a duplicate in
/// the input is resolved, never assigned twice).
fn retained(
    members: &[&MemberSpec],
    topics: &BTreeMap<TopicId, TopicSpec>,
) -> (Vec<Vec<Partition>>, BTreeSet<Partition>) {
    let mut taken = BTreeSet::new();
    let kept = members
        .iter()
        .map(|member| {
            let mut kept = Vec::new();
            for (topic, partitions) in &member.current {
                if !member.topics.contains(topic) {
                    continue;
                }
                let count = partitions_of(topics, *topic);
                for partition in partitions.range(0..count) {
                    if taken.insert((*topic, *partition)) {
                        kept.push((*topic, *partition));
                    }
                }
            }
            kept
        })
        .collect();
    (kept, taken)
}

/// One partition of one topic.
type Partition = (TopicId, i32);

fn add(assignment: &mut Assignment, topic: TopicId, partition: i32) {
    assignment.entry(topic).or_default().insert(partition);
}

fn uniform_homogeneous(
    members: &[&MemberSpec],
    topics: &BTreeMap<TopicId, TopicSpec>,
) -> BTreeMap<String, Assignment> {
    let mut result = empty_assignments(members);
    let Some(first) = members.first() else {
        return result;
    };
    let subscribed: Vec<TopicId> = first.topics.iter().copied().collect();
    let (kept, taken) = retained(members, topics);
    let mut unassigned: Vec<(TopicId, i32)> = Vec::new();
    let mut total = 0usize;
    for topic in &subscribed {
        for partition in 0..partitions_of(topics, *topic) {
            total += 1;
            if !taken.contains(&(*topic, partition)) {
                unassigned.push((*topic, partition));
            }
        }
    }
    let min_quota = total / members.len();
    let mut extra = total % members.len();
    let mut unfilled: Vec<(&str, usize)> = Vec::new();
    for (member, kept) in members.iter().zip(kept) {
        let mut quota = min_quota;
        if extra > 0 {
            quota += 1;
            extra -= 1;
        }
        let assignment = result.entry(member.member_id.clone()).or_default();
        for (index, (topic, partition)) in kept.into_iter().enumerate() {
            if index < quota {
                add(assignment, topic, partition);
            } else {
                unassigned.push((topic, partition));
            }
        }
        let held = super::partition_count(assignment);
        if held < quota {
            unfilled.push((&member.member_id, quota - held));
        }
    }
    let mut next = unassigned.into_iter();
    for (member_id, missing) in unfilled {
        let Some(assignment) = result.get_mut(member_id) else {
            continue;
        };
        for (topic, partition) in next.by_ref().take(missing) {
            add(assignment, topic, partition);
        }
    }
    result
}

/// Subscribers per topic, in member order.
fn subscribers(members: &[&MemberSpec]) -> BTreeMap<TopicId, Vec<usize>> {
    let mut by_topic: BTreeMap<TopicId, Vec<usize>> = BTreeMap::new();
    for (index, member) in members.iter().enumerate() {
        for topic in &member.topics {
            by_topic.entry(*topic).or_default().push(index);
        }
    }
    by_topic
}

/// The subscriber of a topic holding the fewest partitions (the first such in member order).
fn least_loaded(candidates: &[usize], counts: &[usize]) -> Option<usize> {
    candidates
        .iter()
        .copied()
        .min_by_key(|index| (counts.get(*index).copied().unwrap_or(usize::MAX), *index))
}

fn uniform_heterogeneous(
    members: &[&MemberSpec],
    topics: &BTreeMap<TopicId, TopicSpec>,
) -> BTreeMap<String, Assignment> {
    let by_topic = subscribers(members);
    let (kept, taken) = retained(members, topics);
    let mut owner: BTreeMap<(TopicId, i32), usize> = BTreeMap::new();
    let mut counts: Vec<usize> = kept.iter().map(Vec::len).collect();
    for (index, kept) in kept.iter().enumerate() {
        for partition in kept {
            owner.insert(*partition, index);
        }
    }
    let mut order: Vec<(&TopicId, &Vec<usize>)> = by_topic.iter().collect();
    order.sort_by_key(|(topic, subscribers)| (subscribers.len(), **topic));
    for (topic, candidates) in &order {
        for partition in 0..partitions_of(topics, **topic) {
            if taken.contains(&(**topic, partition)) {
                continue;
            }
            if let Some(index) = least_loaded(candidates, &counts) {
                owner.insert((**topic, partition), index);
                if let Some(count) = counts.get_mut(index) {
                    *count += 1;
                }
            }
        }
    }
    balance(&mut owner, &mut counts, &by_topic);
    let mut result = empty_assignments(members);
    for ((topic, partition), index) in owner {
        if let Some(member) = members.get(index) {
            add(
                result.entry(member.member_id.clone()).or_default(),
                topic,
                partition,
            );
        }
    }
    result
}

/// Moves partitions from a member to a less loaded subscriber of the same topic while that narrows
/// their gap by two or more; stops when a pass moves nothing or the move budget is spent.
fn balance(
    owner: &mut BTreeMap<(TopicId, i32), usize>,
    counts: &mut [usize],
    by_topic: &BTreeMap<TopicId, Vec<usize>>,
) {
    let mut budget = owner
        .len()
        .saturating_mul(HETEROGENEOUS_MOVES_MAX_PER_PARTITION);
    loop {
        let mut moved = false;
        for (partition, index) in owner.iter_mut() {
            let Some(candidates) = by_topic.get(&partition.0) else {
                continue;
            };
            let Some(target) = least_loaded(candidates, counts) else {
                continue;
            };
            let from = counts.get(*index).copied().unwrap_or(0);
            let to = counts.get(target).copied().unwrap_or(usize::MAX);
            if budget == 0 || to.saturating_add(1) >= from {
                continue;
            }
            if let Some(count) = counts.get_mut(*index) {
                *count -= 1;
            }
            if let Some(count) = counts.get_mut(target) {
                *count += 1;
            }
            *index = target;
            budget -= 1;
            moved = true;
        }
        if !moved {
            return;
        }
    }
}

/// Static members by instance id first, then the others by member id (Kafka's order).
fn range_order<'a>(members: &[&'a MemberSpec]) -> Vec<&'a MemberSpec> {
    let mut sorted = members.to_vec();
    sorted.sort_by(|a, b| match (&a.instance_id, &b.instance_id) {
        (Some(x), Some(y)) => x.cmp(y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.member_id.cmp(&b.member_id),
    });
    sorted
}

fn range(
    members: &[&MemberSpec],
    topics: &BTreeMap<TopicId, TopicSpec>,
) -> BTreeMap<String, Assignment> {
    let mut result = empty_assignments(members);
    let ordered = range_order(members);
    let by_topic = subscribers(&ordered);
    for (topic, candidates) in by_topic {
        let count = partitions_of(topics, topic);
        let subscribers = i32::try_from(candidates.len()).unwrap_or(i32::MAX).max(1);
        let (quota, mut extra) = (count / subscribers, count % subscribers);
        let mut start: i32 = 0;
        for index in candidates {
            let mut size = quota;
            if extra > 0 {
                size += 1;
                extra -= 1;
            }
            let end = start.saturating_add(size).min(count);
            if let Some(member) = ordered.get(index) {
                let assignment = result.entry(member.member_id.clone()).or_default();
                for partition in start..end {
                    add(assignment, topic, partition);
                }
            }
            start = end;
        }
    }
    result
}

#[cfg(test)]
#[path = "assignor_tests.rs"]
mod tests;
