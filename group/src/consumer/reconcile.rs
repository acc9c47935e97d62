//! Moves one member's current assignment towards its target, one safe step per heartbeat (Kafka's
//! `CurrentAssignmentBuilder`). Partitions the target takes away are first *pending revocation*:
//! the member keeps its epoch until a heartbeat's owned partitions no longer name them. A
//! partition the target gives it while another member still owns it (assigned or pending
//! revocation, at any epoch) is *unreleased*: withheld until that owner lets go.
//!
//! Must never: add a partition to a member's assignment while another member owns it, or advance
//! a member past partitions it has not acknowledged revoking.

use super::{Assignment, TopicId};

/// Where a member is in its reconciliation (Kafka's `MemberState`, with its byte values as the
/// current-assignment record stores them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MemberState {
    /// Reconciled to its member epoch: owns what it was assigned.
    #[default]
    Stable,
    /// Must revoke partitions before it may move on.
    UnrevokedPartitions,
    /// Waits for partitions other members still own.
    UnreleasedPartitions,
    /// A state this code does not know (a record from a newer writer): the member must rejoin.
    Unknown,
}

impl MemberState {
    /// The byte Kafka writes for it.
    pub fn value(self) -> i8 {
        match self {
            Self::Stable => 0,
            Self::UnrevokedPartitions => 1,
            Self::UnreleasedPartitions => 2,
            Self::Unknown => 127,
        }
    }

    /// The state of a stored byte (an unknown byte is [`MemberState::Unknown`], as Kafka reads it).
    pub fn from_value(value: i8) -> Self {
        match value {
            0 => Self::Stable,
            1 => Self::UnrevokedPartitions,
            2 => Self::UnreleasedPartitions,
            _ => Self::Unknown,
        }
    }

    /// Kafka's name (ConsumerGroupDescribe and logs).
    pub fn name(self) -> &'static str {
        match self {
            Self::Stable => "STABLE",
            Self::UnrevokedPartitions => "UNREVOKED_PARTITIONS",
            Self::UnreleasedPartitions => "UNRELEASED_PARTITIONS",
            Self::Unknown => "UNKNOWN",
        }
    }
}

/// A member's current assignment: what the current-assignment record holds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberAssignment {
    /// Its state.
    pub state: MemberState,
    /// The epoch the member must send.
    pub member_epoch: i32,
    /// The epoch before the last bump (a member whose response was lost may still send it).
    pub previous_member_epoch: i32,
    /// The partitions it owns (or may own).
    pub assigned: Assignment,
    /// The partitions it must revoke.
    pub pending_revocation: Assignment,
}

/// Why a member cannot be reconciled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReconcileError {
    /// The member's state is unknown and its heartbeat still claims partitions (Kafka's
    /// FENCED_MEMBER_EPOCH message).
    #[error("The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin.")]
    UnknownState,
}

impl MemberAssignment {
    fn with_epoch(&self, epoch: i32) -> Self {
        Self {
            member_epoch: epoch,
            previous_member_epoch: self.member_epoch,
            ..self.clone()
        }
    }
}

/// Whether `owned` (a heartbeat's owned partitions; `None` when not sent) still names any of
/// `revoking`. Unknown means "still owns": the member has not said otherwise.
fn owns_any(owned: Option<&Assignment>, revoking: &Assignment) -> bool {
    let Some(owned) = owned else {
        return true;
    };
    owned.iter().any(|(topic, partitions)| {
        revoking
            .get(topic)
            .is_some_and(|pending| partitions.iter().any(|p| pending.contains(p)))
    })
}

/// The member's next state towards (`target_epoch`, `target`). `owner_epoch(topic, partition)`
/// says whether another member owns the partition (Kafka's partition epochs); `owned` is what
/// the heartbeat says the member owns.
pub fn reconcile(
    current: &MemberAssignment,
    target_epoch: i32,
    target: &Assignment,
    owner_epoch: &dyn Fn(TopicId, i32) -> Option<i32>,
    owned: Option<&Assignment>,
) -> Result<MemberAssignment, ReconcileError> {
    let step = Step {
        current,
        target_epoch,
        target,
        owner_epoch,
        owned,
    };
    match current.state {
        MemberState::Stable if current.member_epoch != target_epoch => {
            Ok(step.next(current.member_epoch))
        }
        MemberState::Stable => Ok(current.clone()),
        MemberState::UnrevokedPartitions => {
            if owns_any(owned, &current.pending_revocation) {
                Ok(current.clone())
            } else {
                Ok(step.next(current.member_epoch.saturating_add(1)))
            }
        }
        MemberState::UnreleasedPartitions => Ok(step.next(current.member_epoch)),
        MemberState::Unknown => {
            if owned.is_none_or(|owned| !owned.is_empty()) {
                return Err(ReconcileError::UnknownState);
            }
            Ok(step.next(target_epoch))
        }
    }
}

struct Step<'a> {
    current: &'a MemberAssignment,
    target_epoch: i32,
    target: &'a Assignment,
    owner_epoch: &'a dyn Fn(TopicId, i32) -> Option<i32>,
    owned: Option<&'a Assignment>,
}

impl Step<'_> {
    /// Kafka's `computeNextAssignment`: keep what both hold, revoke what the target dropped
    /// (staying at `revoking_epoch` until acknowledged), then add the target's partitions that no
    /// one else owns.
    fn next(&self, revoking_epoch: i32) -> MemberAssignment {
        let mut kept = Assignment::new();
        let mut revoking = Assignment::new();
        let mut adding = Assignment::new();
        let mut unreleased = false;
        let topics: std::collections::BTreeSet<TopicId> = self
            .target
            .keys()
            .chain(self.current.assigned.keys())
            .copied()
            .collect();
        let empty = std::collections::BTreeSet::new();
        for topic in topics {
            let target = self.target.get(&topic).unwrap_or(&empty);
            let assigned = self.current.assigned.get(&topic).unwrap_or(&empty);
            let both: std::collections::BTreeSet<i32> =
                assigned.intersection(target).copied().collect();
            let dropped: std::collections::BTreeSet<i32> =
                assigned.difference(&both).copied().collect();
            let mut new: std::collections::BTreeSet<i32> =
                target.difference(&both).copied().collect();
            let before = new.len();
            new.retain(|partition| (self.owner_epoch)(topic, *partition).is_none());
            unreleased |= new.len() != before;
            for (set, partitions) in [
                (&mut kept, both),
                (&mut revoking, dropped),
                (&mut adding, new),
            ] {
                if !partitions.is_empty() {
                    set.insert(topic, partitions);
                }
            }
        }
        let base = |state, epoch, assigned| MemberAssignment {
            state,
            assigned,
            pending_revocation: Assignment::new(),
            ..self.current.with_epoch(epoch)
        };
        if !revoking.is_empty() && owns_any(self.owned, &revoking) {
            return MemberAssignment {
                pending_revocation: revoking,
                ..base(MemberState::UnrevokedPartitions, revoking_epoch, kept)
            };
        }
        for (topic, partitions) in adding {
            kept.entry(topic).or_default().extend(partitions);
        }
        let state = if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        };
        base(state, self.target_epoch, kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: u8) -> TopicId {
        TopicId([n; 16])
    }

    fn parts(list: &[i32]) -> Assignment {
        [(t(1), list.iter().copied().collect())].into()
    }

    fn stable(epoch: i32, list: &[i32]) -> MemberAssignment {
        MemberAssignment {
            member_epoch: epoch,
            previous_member_epoch: epoch - 1,
            assigned: parts(list),
            ..MemberAssignment::default()
        }
    }

    #[test]
    fn revocation_comes_first_and_waits_for_the_acknowledgement() {
        let free = |_: TopicId, _: i32| None;
        let member = stable(3, &[0, 1]);
        let next = reconcile(&member, 5, &parts(&[1, 2]), &free, Some(&parts(&[0, 1]))).unwrap();
        assert_eq!(next.state, MemberState::UnrevokedPartitions);
        assert_eq!((next.member_epoch, next.previous_member_epoch), (3, 3));
        assert_eq!(next.assigned, parts(&[1]));
        assert_eq!(next.pending_revocation, parts(&[0]));
        // Still owns 0: no progress.
        let same = reconcile(&next, 5, &parts(&[1, 2]), &free, Some(&parts(&[0, 1]))).unwrap();
        assert_eq!(same, next);
        // Revoked: moves to the target epoch with the new partition.
        let done = reconcile(&next, 5, &parts(&[1, 2]), &free, Some(&parts(&[1]))).unwrap();
        assert_eq!(done.state, MemberState::Stable);
        assert_eq!((done.member_epoch, done.previous_member_epoch), (5, 3));
        assert_eq!(done.assigned, parts(&[1, 2]));
    }

    #[test]
    fn a_partition_another_member_owns_is_withheld() {
        let owned_by_other = |_: TopicId, partition: i32| (partition == 2).then_some(4);
        let member = stable(3, &[1]);
        let next = reconcile(&member, 5, &parts(&[1, 2]), &owned_by_other, None).unwrap();
        assert_eq!(next.state, MemberState::UnreleasedPartitions);
        assert_eq!(next.member_epoch, 5);
        assert_eq!(next.assigned, parts(&[1]));
        let free = |_: TopicId, _: i32| None;
        let done = reconcile(&next, 5, &parts(&[1, 2]), &free, None).unwrap();
        assert_eq!(
            (done.state, done.assigned),
            (MemberState::Stable, parts(&[1, 2]))
        );
    }

    #[test]
    fn unknown_state_needs_an_empty_owned_set() {
        let free = |_: TopicId, _: i32| None;
        let member = MemberAssignment {
            state: MemberState::Unknown,
            ..stable(2, &[0])
        };
        assert!(reconcile(&member, 3, &parts(&[0]), &free, None).is_err());
        let next = reconcile(&member, 3, &parts(&[0]), &free, Some(&Assignment::new())).unwrap();
        assert_eq!((next.state, next.member_epoch), (MemberState::Stable, 3));
    }
}
