//! Kafka's ElectLeaders API (KIP-183, KIP-460) as decisions over the cluster image: which
//! requested partitions get a new leader, and why the others do not (Kafka's
//! `ReplicationControlManager.electLeader` rules).
//!
//! - **Preferred**: the preferred replica (the first in assignment order) already leads →
//!   [`NoElection::NotNeeded`]; it is not running or not in the ISR →
//!   [`NoElection::PreferredNotAvailable`]; otherwise it leads at epoch + 1, ISR unchanged (what
//!   [`crate::controller::rebalance`] writes).
//! - **Unclean**: a live leader → [`NoElection::NotNeeded`]; otherwise the controller's own
//!   election with unclean election allowed ([`crate::controller::next_partition_state`]): the
//!   first running ISR member, else the first running replica with ISR = {it}; nobody runs →
//!   [`NoElection::EligibleNotAvailable`].
//!
//! The broker that received the request submits the Txns [`plan`] returns, so there is no
//! broker-to-controller call. They are fenced like the controller's (docs/design/cluster.md §3):
//! the partition key's `mod_revision` as read and the registration of every broker the decision
//! rests on, plus [`requester_fence`] (the requesting broker's session, as the leaders' ISR writes
//! carry). A decision made on a stale image fails instead of landing; the broker re-reads and plans
//! again. The controller's concurrent writes race on the same compares, so one of the two is
//! refused and re-planned.
//!
//! Must never: read the clock, talk to the store, or elect a replica the controller's own rules
//! would not (outside the ISR only for [`ElectionType::Unclean`]).

use std::collections::BTreeMap;

use skiff_meta::{Compare, CompareOp};
use skiff_placement::NodeId;

use crate::controller::{
    next_partition_state, partition_unchanged, ControllerWrite, Packer, PlanLimits, WriteReason,
};
use crate::image::ClusterImage;
use crate::layout::{Key, Layout};
use crate::records::{PartitionState, Writer, NO_LEADER};

/// Kafka's `ElectionType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionType {
    /// 0: give the partition to its preferred replica.
    Preferred,
    /// 1: elect a leader for a leaderless partition, outside the ISR if need be.
    Unclean,
}

impl ElectionType {
    /// The type of the request's `election_type` byte; `None` for an unknown one
    /// (INVALID_REQUEST).
    pub fn from_code(code: i8) -> Option<Self> {
        match code {
            0 => Some(Self::Preferred),
            1 => Some(Self::Unclean),
            _ => None,
        }
    }
}

/// Why a partition gets no election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoElection {
    /// No such ready topic or partition (UNKNOWN_TOPIC_OR_PARTITION).
    UnknownPartition,
    /// The preferred replica leads already, or (unclean) a live leader exists
    /// (ELECTION_NOT_NEEDED).
    NotNeeded,
    /// The preferred replica is not running or not in the ISR (PREFERRED_LEADER_NOT_AVAILABLE).
    PreferredNotAvailable,
    /// No replica runs (ELIGIBLE_LEADERS_NOT_AVAILABLE).
    EligibleNotAvailable,
}

/// An election one partition gets: its next state, why, and the brokers whose registrations the
/// decision rests on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Election {
    /// The state to write.
    pub next: PartitionState,
    /// Preferred, clean or unclean election.
    pub reason: WriteReason,
    /// Brokers whose registration must be as read when it lands.
    pub depends_on: Vec<NodeId>,
}

/// The election `election_type` calls for on `topic`/`partition` in `image`.
pub fn decide(
    image: &ClusterImage,
    topic: &str,
    partition: i32,
    election_type: ElectionType,
) -> Result<Election, NoElection> {
    let state = image
        .ready_topic(topic)
        .and_then(|_| image.partition(topic, partition))
        .map(|state| &state.value)
        .ok_or(NoElection::UnknownPartition)?;
    match election_type {
        ElectionType::Preferred => {
            let preferred = *state
                .replicas
                .first()
                .ok_or(NoElection::PreferredNotAvailable)?;
            if state.leader == preferred {
                return Err(NoElection::NotNeeded);
            }
            if !state.isr.contains(&preferred) || !image.is_running(preferred) {
                return Err(NoElection::PreferredNotAvailable);
            }
            Ok(Election {
                next: PartitionState {
                    leader: preferred,
                    leader_epoch: state.leader_epoch + 1,
                    writer: Writer::Controller,
                    ..state.clone()
                },
                reason: WriteReason::PreferredElection,
                depends_on: vec![preferred],
            })
        }
        ElectionType::Unclean => {
            if state.leader != NO_LEADER && image.is_live(state.leader) {
                return Err(NoElection::NotNeeded);
            }
            match next_partition_state(image, state, true) {
                Some((next, reason, depends_on)) if next.leader != NO_LEADER => Ok(Election {
                    next,
                    reason,
                    depends_on,
                }),
                _ => Err(NoElection::EligibleNotAvailable),
            }
        }
    }
}

/// Every partition of every ready topic, in topic and partition order: what a request with null
/// `topic_partitions` asks for.
pub fn all_partitions(image: &ClusterImage) -> Vec<(String, i32)> {
    image
        .all_partitions()
        .filter(|(topic, _, _)| image.ready_topic(topic).is_some())
        .map(|(topic, partition, _)| (topic.to_owned(), partition))
        .collect()
}

/// The compare that the requesting broker `node_id` is still registered under the session of
/// `broker_epoch`: a broker whose session lapsed writes nothing.
pub fn requester_fence(layout: &Layout, node_id: NodeId, broker_epoch: i64) -> Compare {
    Compare::create_revision(
        layout.key(&Key::Broker(node_id)),
        CompareOp::Equal,
        broker_epoch,
    )
}

/// The elections of one request: the Txns to submit, and the partitions that get none.
#[derive(Debug, Clone)]
pub struct ElectionPlan {
    /// Fenced Txns; each lists the partitions it elects.
    pub writes: Vec<ControllerWrite>,
    /// The partitions that get no election, and why.
    pub refused: BTreeMap<(String, i32), NoElection>,
}

/// The elections `election_type` calls for on `partitions` (each once, however often listed), as
/// Txns carrying `fence` first.
pub fn plan(
    image: &ClusterImage,
    partitions: &[(String, i32)],
    election_type: ElectionType,
    fence: Compare,
    limits: PlanLimits,
) -> ElectionPlan {
    let mut by_reason: BTreeMap<WriteReason, Packer<'_>> = BTreeMap::new();
    let mut refused = BTreeMap::new();
    let mut planned = std::collections::BTreeSet::new();
    for (topic, partition) in partitions {
        if !planned.insert((topic.as_str(), *partition)) {
            continue;
        }
        match decide(image, topic, *partition, election_type) {
            Ok(election) => {
                let Some(state) = image.partition(topic, *partition) else {
                    continue; // decide found it in the same image
                };
                let guard = partition_unchanged(image, topic, *partition, state);
                by_reason
                    .entry(election.reason)
                    .or_insert_with(|| {
                        Packer::fenced(image, fence.clone(), limits, election.reason)
                    })
                    .push(
                        topic,
                        *partition,
                        guard,
                        &election.next,
                        &election.depends_on,
                    );
            }
            Err(why) => {
                refused.insert((topic.clone(), *partition), why);
            }
        }
    }
    ElectionPlan {
        writes: by_reason.into_values().flat_map(Packer::finish).collect(),
        refused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::BrokerState;
    use crate::test_world::{state, World};

    /// Broker 1's session fence in the test world (registrations there have no lease; its
    /// registration's create revision is what a session would hold).
    fn fence_of(world: &World, id: NodeId) -> Compare {
        let epoch = world.image().brokers().get(&id).unwrap().create_revision;
        requester_fence(&world.layout, id, epoch)
    }

    fn request(names: &[&str]) -> Vec<(String, i32)> {
        names.iter().map(|name| (name.to_string(), 0)).collect()
    }

    /// Plans on the current image and submits every write; returns what each requested partition
    /// got (`None`: elected).
    fn elect(
        world: &mut World,
        names: &[&str],
        election_type: ElectionType,
    ) -> Vec<Option<NoElection>> {
        let plan = plan(
            &world.image(),
            &request(names),
            election_type,
            fence_of(world, 2),
            PlanLimits::default(),
        );
        for write in &plan.writes {
            assert!(world.core.txn(&write.txn).unwrap().succeeded);
        }
        names
            .iter()
            .map(|name| plan.refused.get(&(name.to_string(), 0)).copied())
            .collect()
    }

    #[test]
    fn a_preferred_election_moves_leadership_back_only_to_a_running_isr_member() {
        let mut world = World::new(&[1, 2, 3]);
        world.topic("moved", state(2, 4, &[2, 1, 3], &[1, 2, 3]), &[]);
        world.topic("home", state(1, 0, &[1, 2], &[1, 2]), &[]);
        world.topic("lagging", state(2, 1, &[2], &[3, 2]), &[]);
        world.topic("down", state(3, 2, &[3, 1], &[1, 3]), &[]);
        world.topic("leaving", state(1, 2, &[1, 2], &[2, 1]), &[]);
        world.deregister(1);
        let got = elect(
            &mut world,
            &["moved", "home", "lagging", "down", "leaving", "absent"],
            ElectionType::Preferred,
        );
        assert_eq!(
            got,
            vec![
                Some(NoElection::PreferredNotAvailable), // 1 is not registered
                Some(NoElection::NotNeeded),
                Some(NoElection::PreferredNotAvailable), // 3 runs, but is not in the ISR
                Some(NoElection::PreferredNotAvailable),
                None, // 2 runs and is in the ISR
                Some(NoElection::UnknownPartition),
            ]
        );
        assert_eq!(world.state("leaving"), state(2, 3, &[1, 2], &[2, 1]));
        world.register(1, BrokerState::Running);
        let got = elect(&mut world, &["moved", "down"], ElectionType::Preferred);
        assert_eq!(got, vec![None, None]);
        assert_eq!(world.state("moved"), state(1, 5, &[2, 1, 3], &[1, 2, 3]));
        assert_eq!(world.state("down"), state(1, 3, &[3, 1], &[1, 3]));
        // A second run finds nothing to do.
        let got = elect(&mut world, &["moved", "down"], ElectionType::Preferred);
        assert_eq!(got, vec![Some(NoElection::NotNeeded); 2]);
        // A preferred replica shutting down is not eligible.
        world.topic("other", state(3, 0, &[3, 1], &[1, 3]), &[]);
        world.register(1, BrokerState::ShuttingDown);
        let got = elect(&mut world, &["other"], ElectionType::Preferred);
        assert_eq!(got, vec![Some(NoElection::PreferredNotAvailable)]);
    }

    #[test]
    fn a_preferred_election_planned_before_the_preferred_replica_left_the_isr_is_refused() {
        let mut world = World::new(&[1, 2]);
        world.topic("t", state(2, 1, &[2, 1], &[1, 2]), &[]);
        let planned = plan(
            &world.image(),
            &request(&["t"]),
            ElectionType::Preferred,
            fence_of(&world, 2),
            PlanLimits::default(),
        );
        assert_eq!(planned.writes.len(), 1);
        assert_eq!(planned.writes[0].reason, WriteReason::PreferredElection);
        // The leader shrinks the ISR meanwhile: the partition key moved, the write fails.
        world.topic("t", state(2, 1, &[2], &[1, 2]), &[]);
        assert!(!world.core.txn(&planned.writes[0].txn).unwrap().succeeded);
        // Planned while 1 ran; 1 restarted since (a new registration): refused too.
        world.topic("t", state(2, 1, &[2, 1], &[1, 2]), &[]);
        let planned = plan(
            &world.image(),
            &request(&["t"]),
            ElectionType::Preferred,
            fence_of(&world, 2),
            PlanLimits::default(),
        );
        world.deregister(1);
        world.register(1, BrokerState::Running);
        assert!(!world.core.txn(&planned.writes[0].txn).unwrap().succeeded);
    }

    #[test]
    fn a_requester_whose_session_ended_cannot_write() {
        let mut world = World::new(&[1, 2]);
        world.topic("t", state(2, 1, &[2, 1], &[1, 2]), &[]);
        let planned = plan(
            &world.image(),
            &request(&["t"]),
            ElectionType::Preferred,
            fence_of(&world, 2),
            PlanLimits::default(),
        );
        // The requester (2) registers again under a new session before the write lands.
        world.deregister(2);
        world.register(2, BrokerState::Running);
        assert!(!world.core.txn(&planned.writes[0].txn).unwrap().succeeded);
        assert_eq!(world.state("t"), state(2, 1, &[2, 1], &[1, 2]));
    }

    #[test]
    fn an_unclean_election_is_only_for_partitions_without_a_live_leader() {
        let mut world = World::new(&[1, 2, 3]);
        world.topic("led", state(1, 0, &[1], &[1, 2]), &[]);
        world.topic("orphan", state(NO_LEADER, 3, &[1], &[1, 3, 2]), &[]);
        world.topic("clean", state(NO_LEADER, 3, &[1, 2], &[1, 3, 2]), &[]);
        world.topic("stale", state(1, 6, &[1], &[1, 2]), &[]);
        world.topic("gone", state(NO_LEADER, 2, &[1], &[1]), &[]);
        let got = elect(&mut world, &["led"], ElectionType::Unclean);
        assert_eq!(got, vec![Some(NoElection::NotNeeded)]);
        world.deregister(1);
        let got = elect(
            &mut world,
            &["orphan", "clean", "stale", "gone", "led"],
            ElectionType::Unclean,
        );
        assert_eq!(
            got,
            vec![
                None,
                None,
                None,
                Some(NoElection::EligibleNotAvailable),
                None
            ]
        );
        // The first running replica in assignment order, alone in the ISR.
        assert_eq!(world.state("orphan"), state(3, 4, &[3], &[1, 3, 2]));
        // An ISR member runs: it is elected cleanly, as the controller would.
        assert_eq!(world.state("clean"), state(2, 4, &[2], &[1, 3, 2]));
        // A leader that is not registered counts as none.
        assert_eq!(world.state("stale"), state(2, 7, &[2], &[1, 2]));
        assert_eq!(world.state("gone"), state(NO_LEADER, 2, &[1], &[1]));
    }

    #[test]
    fn an_unclean_election_planned_before_an_isr_member_returned_is_refused() {
        let mut world = World::new(&[1, 2]);
        world.topic("t", state(NO_LEADER, 3, &[1], &[1, 2]), &[]);
        world.deregister(1);
        let planned = plan(
            &world.image(),
            &request(&["t"]),
            ElectionType::Unclean,
            fence_of(&world, 2),
            PlanLimits::default(),
        );
        assert_eq!(planned.writes[0].reason, WriteReason::UncleanElection);
        world.register(1, BrokerState::Running);
        assert!(!world.core.txn(&planned.writes[0].txn).unwrap().succeeded);
    }

    #[test]
    fn every_partition_means_the_ready_topics_and_duplicates_count_once() {
        let mut world = World::new(&[1, 2]);
        world.topic("b", state(2, 0, &[1, 2], &[1, 2]), &[]);
        world.topic("a", state(1, 0, &[1, 2], &[1, 2]), &[]);
        let all = all_partitions(&world.image());
        assert_eq!(all, request(&["a", "b"]));
        let planned = plan(
            &world.image(),
            &request(&["b", "b", "a"]),
            ElectionType::Preferred,
            fence_of(&world, 2),
            PlanLimits::default(),
        );
        assert_eq!(planned.writes.len(), 1);
        assert_eq!(planned.writes[0].partitions, request(&["b"]));
        assert_eq!(planned.refused.len(), 1);
    }

    #[test]
    fn election_types_are_kafkas_codes() {
        assert_eq!(ElectionType::from_code(0), Some(ElectionType::Preferred));
        assert_eq!(ElectionType::from_code(1), Some(ElectionType::Unclean));
        assert_eq!(ElectionType::from_code(2), None);
        assert_eq!(ElectionType::from_code(-1), None);
    }
}
