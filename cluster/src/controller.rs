//! The controller, as a pure function of the cluster image: [`plan`] returns the fenced Txns that
//! bring the store to what the image calls for (docs/design/cluster.md §3). The driver submits
//! them, waits until its image has caught up with their revisions, and plans again; the controller
//! therefore keeps no state of its own, and a new controller resumes whatever the last one left
//! half done.
//!
//! What a plan does:
//! - elects a leader for every partition whose leader is not registered: the first replica in
//!   assignment order that is in the ISR and running, at leader epoch + 1; with no such replica
//!   the leader becomes −1 (epoch + 1) and the ISR is kept, so its members can return and lead;
//! - with `unclean.leader.election.enable` on the topic (or as the broker default the driver
//!   passes in [`PlanLimits`]) and no ISR member running, elects the first running replica in
//!   assignment order instead, with ISR = {it} (docs/design/replication.md §6: acknowledged
//!   records it lacks are lost, by design);
//! - moves the leaderships of a broker in controlled shutdown (registered, `shutting_down`) to
//!   the first running ISR member in assignment order, at epoch + 1; a partition with no such
//!   member stays led by it until it exits (docs/design/cluster.md §3, "Controlled shutdown");
//! - removes unregistered and shutting-down brokers from ISRs (never the last member);
//! - in [`rebalance`], which the driver runs every `leader.imbalance.check.interval.seconds`
//!   (Kafka's automatic preferred-leader election): gives each broker whose share of
//!   partitions led elsewhere passes `leader.imbalance.per.broker.percentage` back the
//!   leaderships of those partitions for which it is the preferred replica (the first in
//!   assignment order), where it runs and is in the ISR;
//! - finishes topic creations whose author is gone (missing partition states, then `ready`), and
//!   carries out topic deletions (`deleting`: its partitions and the topic key in one Txn);
//! - takes every partition reassignment one step further ([`crate::reassign::plan`]: add the
//!   target replicas, move the leadership into the target once they are in the ISR, finish),
//!   after the elections and shrinks above, which go first on a partition both would write.
//!
//! Every write is fenced: `create_revision(R/controller) == controller_epoch`, the `mod_revision`
//! each partition state was read at, and the registration revision of every broker the decision
//! rests on (its `mod_revision`: 0 for a broker it took as dead, the registration as read for one
//! it elects or took as shutting down). A decision made on a stale image therefore fails instead
//! of landing: a controller that saw a leader's registration vanish cannot elect a replacement
//! once that leader has registered again, nor elect a broker that has begun shutting down since.
//!
//! Must never: read the clock, talk to the store, or keep leadership decisions in memory.

use std::collections::{BTreeMap, BTreeSet};

use skiff_meta::{Compare, CompareOp, KeyRange, Txn, TxnOp};
use skiff_placement::NodeId;

use crate::image::{ClusterImage, Versioned};
use crate::layout::Key;
use crate::records::{encode, PartitionState, TopicRecord, TopicState, Writer, NO_LEADER};

/// Compares a controller Txn carries besides one per record it writes: the fence and the
/// brokers' registrations it depends on.
pub const TXN_FIXED_COMPARES_MAX: usize = 8;

/// Records written per Txn (partition states, bundle records): etcd accepts
/// [`skiff_meta::limits::TXN_OPS_MAX`] operations and as many compares per Txn, and each record
/// costs one op and one compare, besides [`TXN_FIXED_COMPARES_MAX`].
pub const RECORDS_PER_TXN_MAX: usize = skiff_meta::limits::TXN_OPS_MAX - TXN_FIXED_COMPARES_MAX;

/// Partition states written per Txn.
pub const PARTITIONS_PER_TXN_MAX: usize = RECORDS_PER_TXN_MAX;

/// How many compares one Txn may carry (etcd's `--max-txn-ops` default applies to each part).
const COMPARES_PER_TXN_MAX: usize = skiff_meta::limits::TXN_OPS_MAX;

/// Why a write was planned: for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum WriteReason {
    /// Leader elections (the old leader is not registered).
    ElectLeaders,
    /// Leaderships moved off a broker in controlled shutdown.
    MoveLeaders,
    /// Unclean elections: no ISR member runs, the topic allows an out-of-ISR leader.
    UncleanElection,
    /// Leaderships given back to their preferred replicas ([`rebalance`]).
    PreferredElection,
    /// Unregistered followers removed from ISRs.
    ShrinkIsr,
    /// Partition states of a creation whose author is gone.
    FinishCreation,
    /// A creation whose partitions all exist becomes `ready`.
    MarkReady,
    /// A topic in `deleting` is removed with its partitions.
    DeleteTopic,
    /// Bundle records of a new namespace ([`crate::bundles`]).
    CreateBundles,
    /// Bundle records of a namespace with no topic left.
    DeleteBundles,
    /// A bundle move persisted before it runs (owned → assigning).
    BeginBundleMove,
    /// A moving bundle's partitions led by its target (in their ISR).
    MoveBundleLeaders,
    /// A moving bundle's partitions reassigned to include its target.
    ReassignForBundle,
    /// A moved bundle is owned by its target.
    FinishBundleMove,
    /// A move whose target stopped running: the bundle stays with its owner.
    AbortBundleMove,
    /// A bundle replaced by its children (metadata only).
    SplitBundle,
    /// Steps of partition reassignments ([`crate::reassign`]): replicas added, leaderships moved
    /// to the target, reassignments finished, stale records deleted.
    Reassign,
    /// Reassignment records an AlterPartitionReassignments request writes (not the
    /// controller's: the requesting broker's, fenced on its session).
    AlterReassignments,
}

/// One fenced Txn of a plan.
#[derive(Debug, Clone)]
pub struct ControllerWrite {
    /// Why.
    pub reason: WriteReason,
    /// The Txn, fenced on the controller epoch.
    pub txn: Txn,
    /// The partitions it writes (for elections, creations and shrinks).
    pub partitions: Vec<(String, i32)>,
}

/// The topic config (and broker default) that lets the controller elect a replica outside the
/// ISR when no ISR member runs (Kafka's key).
pub const UNCLEAN_LEADER_ELECTION_ENABLE: &str = "unclean.leader.election.enable";

/// What [`plan`] may do per call.
#[derive(Debug, Clone, Copy)]
pub struct PlanLimits {
    /// Partition states per Txn (at most [`PARTITIONS_PER_TXN_MAX`]).
    pub partitions_per_txn: usize,
    /// Whether a topic without its own [`UNCLEAN_LEADER_ELECTION_ENABLE`] may be led uncleanly:
    /// the controller broker's `unclean.leader.election.enable` (Kafka's default: false).
    pub unclean_leader_election_default: bool,
}

impl Default for PlanLimits {
    fn default() -> Self {
        Self {
            partitions_per_txn: PARTITIONS_PER_TXN_MAX,
            unclean_leader_election_default: false,
        }
    }
}

/// Whether `record` allows an unclean election: its own [`UNCLEAN_LEADER_ELECTION_ENABLE`]
/// (`true` or `false`, as the broker validates topic configs), else `default`. A value that is
/// neither (the store is writable by anyone) reads as the safe `false`.
pub fn unclean_leader_election_enabled(record: &TopicRecord, default: bool) -> bool {
    match record.configs.get(UNCLEAN_LEADER_ELECTION_ENABLE) {
        Some(value) => value.trim().parse().unwrap_or(false),
        None => default,
    }
}

/// The compare every controller write carries: the controller key still has the creation
/// revision this controller won it at.
pub fn fence(image: &ClusterImage, controller_epoch: i64) -> Compare {
    Compare::create_revision(
        image.layout().key(&Key::Controller),
        CompareOp::Equal,
        controller_epoch,
    )
}

/// A compare that broker `id`'s registration is exactly the one the image holds (or still
/// absent): same incarnation and same state (a registration changes only to `shutting_down`).
pub(crate) fn registration_unchanged(image: &ClusterImage, id: NodeId) -> Compare {
    Compare::mod_revision(
        image.layout().key(&Key::Broker(id)),
        CompareOp::Equal,
        image.brokers().get(&id).map_or(0, |v| v.mod_revision),
    )
}

/// The replica the controller elects cleanly: the first in assignment order that is in the ISR
/// and running (so never a broker shutting down).
fn clean_candidate(image: &ClusterImage, state: &PartitionState) -> Option<NodeId> {
    state
        .replicas
        .iter()
        .copied()
        .find(|id| state.isr.contains(id) && image.is_running(*id))
}

/// The partitions `broker` leads that the controller moves away once it shuts down: those with
/// another running ISR member. A broker in controlled shutdown waits until this is empty (the
/// others have nobody to go to and stay with it until it exits).
pub fn movable_leaderships(image: &ClusterImage, broker: NodeId) -> Vec<(String, i32)> {
    image
        .all_partitions()
        .filter(|(topic, _, state)| {
            image.ready_topic(topic).is_some()
                && state.value.leader == broker
                && state
                    .value
                    .isr
                    .iter()
                    .any(|id| *id != broker && image.is_running(*id))
        })
        .map(|(topic, partition, _)| (topic.to_owned(), partition))
        .collect()
}

/// The next state of a partition whose topic is served, or `None` when nothing is to change,
/// with the brokers whose registrations the decision rests on. `unclean`: whether the topic
/// allows an out-of-ISR leader ([`unclean_leader_election_enabled`]).
pub fn next_partition_state(
    image: &ClusterImage,
    state: &PartitionState,
    unclean: bool,
) -> Option<(PartitionState, WriteReason, Vec<NodeId>)> {
    let leader_live = state.leader != NO_LEADER && image.is_live(state.leader);
    // ISR members that leave: unregistered ones, and ones shutting down (they take no
    // leadership, and acks=all must not wait for them).
    let leaving: Vec<NodeId> = state
        .isr
        .iter()
        .copied()
        .filter(|id| !image.is_running(*id))
        .collect();
    if leader_live && image.is_running(state.leader) {
        let isr = without(&state.isr, &leaving);
        if leaving.is_empty() || isr.is_empty() {
            return None;
        }
        let next = PartitionState {
            isr,
            writer: Writer::Controller,
            ..state.clone()
        };
        return Some((next, WriteReason::ShrinkIsr, leaving));
    }
    let mut depends_on = leaving.clone();
    if state.leader != NO_LEADER && !depends_on.contains(&state.leader) {
        depends_on.push(state.leader);
    }
    if let Some(leader) = clean_candidate(image, state) {
        depends_on.push(leader);
        let next = PartitionState {
            leader,
            leader_epoch: state.leader_epoch + 1,
            isr: without(&state.isr, &leaving),
            replicas: state.replicas.clone(),
            writer: Writer::Controller,
        };
        let reason = if leader_live {
            WriteReason::MoveLeaders
        } else {
            WriteReason::ElectLeaders
        };
        return Some((next, reason, depends_on));
    }
    if leader_live {
        // A leader shutting down with nobody to hand over to keeps leading until it exits;
        // other members that leave still go.
        let leaving: Vec<NodeId> = leaving
            .into_iter()
            .filter(|id| *id != state.leader)
            .collect();
        if leaving.is_empty() {
            return None;
        }
        let next = PartitionState {
            isr: without(&state.isr, &leaving),
            writer: Writer::Controller,
            ..state.clone()
        };
        return Some((next, WriteReason::ShrinkIsr, leaving));
    }
    let unclean_leader = state
        .replicas
        .iter()
        .copied()
        .find(|id| image.is_running(*id))
        .filter(|_| unclean);
    match unclean_leader {
        Some(leader) => {
            // Rests on every ISR member being unregistered or shutting down, as read.
            for id in &state.isr {
                if !depends_on.contains(id) {
                    depends_on.push(*id);
                }
            }
            depends_on.push(leader);
            let next = PartitionState {
                leader,
                leader_epoch: state.leader_epoch + 1,
                isr: vec![leader],
                replicas: state.replicas.clone(),
                writer: Writer::Controller,
            };
            Some((next, WriteReason::UncleanElection, depends_on))
        }
        None if state.leader != NO_LEADER => {
            let next = PartitionState {
                leader: NO_LEADER,
                leader_epoch: state.leader_epoch + 1,
                writer: Writer::Controller,
                ..state.clone()
            };
            Some((next, WriteReason::ElectLeaders, depends_on))
        }
        None => None,
    }
}

/// `ids` without `removed`, in order.
fn without(ids: &[NodeId], removed: &[NodeId]) -> Vec<NodeId> {
    ids.iter()
        .copied()
        .filter(|id| !removed.contains(id))
        .collect()
}

/// The first state of a new partition: led by the first running replica in assignment order,
/// every registered replica in the ISR (all of them if none is: an empty partition has nothing
/// to lose, and the ISR is never empty).
pub fn initial_partition_state(
    image: &ClusterImage,
    replicas: &[NodeId],
    writer: Writer,
) -> PartitionState {
    let leader = replicas
        .iter()
        .copied()
        .find(|id| image.is_running(*id))
        .unwrap_or(NO_LEADER);
    let live: Vec<NodeId> = replicas
        .iter()
        .copied()
        .filter(|id| image.is_live(*id))
        .collect();
    PartitionState {
        leader,
        leader_epoch: 0,
        isr: if live.is_empty() {
            replicas.to_vec()
        } else {
            live
        },
        replicas: replicas.to_vec(),
        writer,
    }
}

/// Packs partition writes into Txns under the compare and op limits, each Txn carrying the
/// fence first.
pub(crate) struct Packer<'a> {
    image: &'a ClusterImage,
    fence: Compare,
    limits: PlanLimits,
    reason: WriteReason,
    out: Vec<ControllerWrite>,
    compares: Vec<Compare>,
    ops: Vec<TxnOp>,
    brokers: Vec<NodeId>,
    partitions: Vec<(String, i32)>,
}

impl<'a> Packer<'a> {
    fn new(
        image: &'a ClusterImage,
        controller_epoch: i64,
        limits: PlanLimits,
        reason: WriteReason,
    ) -> Self {
        Self::fenced(image, fence(image, controller_epoch), limits, reason)
    }

    /// A packer whose Txns carry `fence` (a controller's, or a requesting broker's session).
    pub(crate) fn fenced(
        image: &'a ClusterImage,
        fence: Compare,
        limits: PlanLimits,
        reason: WriteReason,
    ) -> Self {
        Self {
            image,
            fence,
            limits,
            reason,
            out: Vec::new(),
            compares: Vec::new(),
            ops: Vec::new(),
            brokers: Vec::new(),
            partitions: Vec::new(),
        }
    }

    /// Adds one partition write: `compare` guards the partition key itself.
    pub(crate) fn push(
        &mut self,
        topic: &str,
        partition: i32,
        compare: Compare,
        value: &PartitionState,
        depends_on: &[NodeId],
    ) {
        let new_brokers = depends_on
            .iter()
            .filter(|id| !self.brokers.contains(id))
            .count();
        let full = self.partitions.len()
            >= self.limits.partitions_per_txn.min(PARTITIONS_PER_TXN_MAX)
            || 1 + self.compares.len() + 1 + new_brokers > COMPARES_PER_TXN_MAX;
        if full {
            self.flush();
        }
        for id in depends_on {
            if !self.brokers.contains(id) {
                self.brokers.push(*id);
                self.compares.push(registration_unchanged(self.image, *id));
            }
        }
        let key = self
            .image
            .layout()
            .key(&Key::Partition(topic.to_owned(), partition));
        self.compares.push(compare);
        self.ops.push(TxnOp::put(key, encode(value)));
        self.partitions.push((topic.to_owned(), partition));
    }

    fn flush(&mut self) {
        if self.ops.is_empty() {
            return;
        }
        let mut compares = vec![self.fence.clone()];
        compares.append(&mut self.compares);
        self.out.push(ControllerWrite {
            reason: self.reason,
            txn: Txn::new()
                .when(compares)
                .and_then(std::mem::take(&mut self.ops)),
            partitions: std::mem::take(&mut self.partitions),
        });
        self.brokers.clear();
    }

    pub(crate) fn finish(mut self) -> Vec<ControllerWrite> {
        self.flush();
        self.out
    }

    /// Every partition pushed so far.
    fn planned(&self) -> impl Iterator<Item = &(String, i32)> {
        self.out
            .iter()
            .flat_map(|write| &write.partitions)
            .chain(&self.partitions)
    }
}

/// The state that gives partition `state` to its preferred replica (the first in assignment
/// order), at epoch + 1 with the ISR unchanged, when that replica runs, is in the ISR and does
/// not lead it yet, and the current leader is live (a leaderless partition is [`plan`]'s).
pub fn preferred_election(image: &ClusterImage, state: &PartitionState) -> Option<PartitionState> {
    let preferred = *state.replicas.first()?;
    let eligible = preferred != state.leader
        && state.leader != NO_LEADER
        && image.is_live(state.leader)
        && state.isr.contains(&preferred)
        && image.is_running(preferred);
    eligible.then(|| PartitionState {
        leader: preferred,
        leader_epoch: state.leader_epoch + 1,
        writer: Writer::Controller,
        ..state.clone()
    })
}

/// Of one preferred broker: how many partitions it is the preferred replica of, and which of
/// them another broker leads.
type Preference<'a> = (u64, Vec<(&'a str, i32)>);

/// Kafka's automatic leader rebalance: for every broker whose imbalance (partitions it is the
/// preferred replica of, led by another broker, over all it is the preferred replica of) is
/// above `imbalance_percentage` %, the [`preferred_election`]s of those partitions, fenced on
/// `controller_epoch`. Empty when every broker is within the bound.
pub fn rebalance(
    image: &ClusterImage,
    controller_epoch: i64,
    limits: PlanLimits,
    imbalance_percentage: u32,
) -> Vec<ControllerWrite> {
    let mut by_preferred: BTreeMap<NodeId, Preference<'_>> = BTreeMap::new();
    for (topic, partition, state) in image.all_partitions() {
        if image.ready_topic(topic).is_none() {
            continue;
        }
        let Some(preferred) = state.value.replicas.first() else {
            continue;
        };
        let entry = by_preferred.entry(*preferred).or_default();
        entry.0 += 1;
        if state.value.leader != *preferred {
            entry.1.push((topic, partition));
        }
    }
    let mut packer = Packer::new(
        image,
        controller_epoch,
        limits,
        WriteReason::PreferredElection,
    );
    for (preferred, (total, elsewhere)) in by_preferred {
        // elsewhere / total > percentage / 100, in integers.
        let imbalanced = elsewhere.len() as u64 * 100 > total * u64::from(imbalance_percentage);
        if !imbalanced {
            continue;
        }
        for (topic, partition) in elsewhere {
            let Some(state) = image.partition(topic, partition) else {
                continue;
            };
            if let Some(next) = preferred_election(image, &state.value) {
                let guard = partition_unchanged(image, topic, partition, state);
                packer.push(topic, partition, guard, &next, &[preferred]);
            }
        }
    }
    packer.finish()
}

/// Every write the image calls for, fenced on `controller_epoch`. Empty when the store is where
/// it should be.
pub fn plan(
    image: &ClusterImage,
    controller_epoch: i64,
    limits: PlanLimits,
) -> Vec<ControllerWrite> {
    let mut writes = Vec::new();
    let mut by_reason: BTreeMap<WriteReason, Packer<'_>> = BTreeMap::new();
    for (topic, record) in image.topics() {
        match record.value.state {
            TopicState::Ready => {
                let Some(partitions) = image.partitions(topic) else {
                    continue;
                };
                let unclean = unclean_leader_election_enabled(
                    &record.value,
                    limits.unclean_leader_election_default,
                );
                for (partition, state) in partitions {
                    if let Some((next, reason, depends_on)) =
                        next_partition_state(image, &state.value, unclean)
                    {
                        let guard = partition_unchanged(image, topic, *partition, state);
                        by_reason
                            .entry(reason)
                            .or_insert_with(|| Packer::new(image, controller_epoch, limits, reason))
                            .push(topic, *partition, guard, &next, &depends_on);
                    }
                }
            }
            TopicState::Creating => {
                if image.broker_epoch(record.value.author) == Some(record.value.author_epoch) {
                    continue; // its author is alive and finishes it
                }
                let existing = image.partitions(topic).map_or(0, BTreeMap::len);
                if existing >= record.value.replicas.len() {
                    writes.push(mark_ready(image, controller_epoch, topic, record));
                    continue;
                }
                let packer = by_reason
                    .entry(WriteReason::FinishCreation)
                    .or_insert_with(|| {
                        Packer::new(image, controller_epoch, limits, WriteReason::FinishCreation)
                    });
                for (partition, replicas) in (0_i32..).zip(&record.value.replicas) {
                    if image.partition(topic, partition).is_some() {
                        continue;
                    }
                    let key = image
                        .layout()
                        .key(&Key::Partition(topic.clone(), partition));
                    let state = initial_partition_state(image, replicas, Writer::Controller);
                    packer.push(
                        topic,
                        partition,
                        Compare::absent(key),
                        &state,
                        &[record.value.author],
                    );
                }
            }
            TopicState::Deleting => {
                writes.push(delete_topic(image, controller_epoch, topic, record))
            }
        }
    }
    // Partitions written above are left to the next plan by the reassignments: two writes of
    // one partition state in one plan would refuse each other.
    let busy: BTreeSet<(String, i32)> = by_reason
        .values()
        .flat_map(Packer::planned)
        .cloned()
        .collect();
    for packer in by_reason.into_values() {
        writes.extend(packer.finish());
    }
    writes.extend(crate::reassign::plan(
        image,
        controller_epoch,
        limits,
        &busy,
    ));
    writes
}

pub(crate) fn partition_unchanged(
    image: &ClusterImage,
    topic: &str,
    partition: i32,
    state: &Versioned<PartitionState>,
) -> Compare {
    Compare::mod_revision(
        image
            .layout()
            .key(&Key::Partition(topic.to_owned(), partition)),
        CompareOp::Equal,
        state.mod_revision,
    )
}

pub(crate) fn topic_unchanged(
    image: &ClusterImage,
    topic: &str,
    record: &Versioned<TopicRecord>,
) -> Compare {
    Compare::mod_revision(
        image.layout().key(&Key::Topic(topic.to_owned())),
        CompareOp::Equal,
        record.mod_revision,
    )
}

fn mark_ready(
    image: &ClusterImage,
    controller_epoch: i64,
    topic: &str,
    record: &Versioned<TopicRecord>,
) -> ControllerWrite {
    let ready = TopicRecord {
        state: TopicState::Ready,
        ..record.value.clone()
    };
    ControllerWrite {
        reason: WriteReason::MarkReady,
        txn: Txn::new()
            .when(vec![
                fence(image, controller_epoch),
                topic_unchanged(image, topic, record),
            ])
            .and_then(vec![TxnOp::put(
                image.layout().key(&Key::Topic(topic.to_owned())),
                encode(&ready),
            )]),
        partitions: Vec::new(),
    }
}

fn delete_topic(
    image: &ClusterImage,
    controller_epoch: i64,
    topic: &str,
    record: &Versioned<TopicRecord>,
) -> ControllerWrite {
    ControllerWrite {
        reason: WriteReason::DeleteTopic,
        txn: Txn::new()
            .when(vec![
                fence(image, controller_epoch),
                topic_unchanged(image, topic, record),
            ])
            .and_then(vec![
                TxnOp::Delete(KeyRange::prefix(image.layout().partitions_prefix(topic))),
                TxnOp::delete(image.layout().key(&Key::Topic(topic.to_owned()))),
            ]),
        partitions: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::BrokerState;
    use crate::test_world::{state, World};

    #[test]
    fn a_rebalance_gives_leaderships_back_to_preferred_replicas_past_the_imbalance_bound() {
        let mut world = World::new(&[1, 2, 3]);
        // Broker 1 is preferred for 4 partitions and leads 3 of them: 25 % led elsewhere.
        world.topic("a", state(2, 3, &[1, 2], &[1, 2]), &[]);
        world.topic("b", state(1, 0, &[1, 2], &[1, 2]), &[]);
        world.topic("c", state(1, 0, &[1, 3], &[1, 3]), &[]);
        world.topic("d", state(1, 0, &[1, 3], &[1, 3]), &[]);
        // Broker 3 is preferred for one it is not in the ISR of: not eligible.
        world.topic("e", state(2, 1, &[2], &[3, 2]), &[]);
        assert!(rebalance(&world.image(), world.epoch, PlanLimits::default(), 25).is_empty());
        let writes = rebalance(&world.image(), world.epoch, PlanLimits::default(), 24);
        assert_eq!(writes.len(), 1);
        assert_eq!(writes[0].reason, WriteReason::PreferredElection);
        assert_eq!(writes[0].partitions, vec![("a".to_owned(), 0)]);
        // Planned while 1 ran; 1 began shutting down since: refused.
        world.register(1, BrokerState::ShuttingDown);
        assert!(!world.core.txn(&writes[0].txn).unwrap().succeeded);
        world.register(1, BrokerState::Running);
        let writes = rebalance(&world.image(), world.epoch, PlanLimits::default(), 24);
        assert!(world.core.txn(&writes[0].txn).unwrap().succeeded);
        assert_eq!(world.state("a"), state(1, 4, &[1, 2], &[1, 2]));
        assert_eq!(world.state("e"), state(2, 1, &[2], &[3, 2]));
        assert!(rebalance(&world.image(), world.epoch, PlanLimits::default(), 0).is_empty());
    }

    #[test]
    fn a_broker_shutting_down_hands_its_leaderships_to_running_isr_members_and_leaves_isrs() {
        let mut world = World::new(&[1, 2, 3]);
        world.topic("led", state(1, 4, &[1, 2, 3], &[1, 3, 2]), &[]);
        world.topic("followed", state(2, 7, &[2, 1, 3], &[2, 1, 3]), &[]);
        world.topic("alone", state(1, 2, &[1], &[1]), &[]);
        world.topic("other", state(3, 1, &[3, 2], &[3, 2, 1]), &[]);
        assert!(
            world.settle(false).is_empty(),
            "nothing to do while all run"
        );
        assert_eq!(
            movable_leaderships(&world.image(), 1),
            vec![("led".to_owned(), 0)]
        );
        world.register(1, BrokerState::ShuttingDown);
        let mut reasons = world.settle(false);
        reasons.sort();
        assert_eq!(
            reasons,
            vec![WriteReason::MoveLeaders, WriteReason::ShrinkIsr]
        );
        // The first running ISR member in assignment order, at the next epoch.
        assert_eq!(world.state("led"), state(3, 5, &[2, 3], &[1, 3, 2]));
        assert_eq!(world.state("followed"), state(2, 7, &[2, 3], &[2, 1, 3]));
        // Nobody to hand over to: it keeps leading until it exits, and the ISR is never empty.
        assert_eq!(world.state("alone"), state(1, 2, &[1], &[1]));
        assert_eq!(world.state("other"), state(3, 1, &[3, 2], &[3, 2, 1]));
        assert!(movable_leaderships(&world.image(), 1).is_empty());
    }

    #[test]
    fn a_move_planned_before_its_target_began_shutting_down_is_refused() {
        let mut world = World::new(&[1, 2, 3]);
        world.topic("led", state(1, 0, &[1, 2], &[1, 2, 3]), &[]);
        world.register(1, BrokerState::ShuttingDown);
        let writes = world.plan(false);
        assert_eq!(writes.len(), 1);
        world.register(2, BrokerState::ShuttingDown);
        assert!(!world.core.txn(&writes[0].txn).unwrap().succeeded);
        // Replanned on the new image: no running ISR member is left, the leader stays.
        assert_eq!(world.settle(false), vec![WriteReason::ShrinkIsr]);
        assert_eq!(world.state("led"), state(1, 0, &[1], &[1, 2, 3]));
    }

    #[test]
    fn without_unclean_election_a_partition_whose_isr_is_gone_waits_leaderless() {
        let mut world = World::new(&[1, 2]);
        world.topic("t", state(1, 3, &[1], &[1, 2]), &[]);
        world.topic(
            "off",
            state(1, 3, &[1], &[1, 2]),
            &[(UNCLEAN_LEADER_ELECTION_ENABLE, "false")],
        );
        world.deregister(1);
        // The broker default is on, but the topic's own "false" wins over it.
        assert_eq!(world.settle(false), vec![WriteReason::ElectLeaders]);
        assert_eq!(world.state("t"), state(NO_LEADER, 4, &[1], &[1, 2]));
        assert_eq!(world.settle(true).len(), 1, "the default applies to t only");
        assert_eq!(world.state("off"), state(NO_LEADER, 4, &[1], &[1, 2]));
        assert_eq!(world.state("t"), state(2, 5, &[2], &[1, 2]));
    }

    #[test]
    fn with_unclean_election_the_first_running_replica_leads_alone() {
        let mut world = World::new(&[1, 2, 3]);
        world.topic(
            "t",
            state(1, 3, &[1, 3], &[1, 3, 2]),
            &[(UNCLEAN_LEADER_ELECTION_ENABLE, "true")],
        );
        world.deregister(1);
        world.register(3, BrokerState::ShuttingDown);
        // ISR member 3 is registered but shutting down: not eligible, so 2 is elected uncleanly.
        assert_eq!(world.settle(false), vec![WriteReason::UncleanElection]);
        assert_eq!(world.state("t"), state(2, 4, &[2], &[1, 3, 2]));
    }

    #[test]
    fn with_unclean_election_allowed_a_running_isr_member_is_still_preferred() {
        let mut world = World::new(&[1, 2, 3]);
        world.topic(
            "t",
            state(1, 0, &[1, 2], &[1, 3, 2]),
            &[(UNCLEAN_LEADER_ELECTION_ENABLE, "true")],
        );
        world.deregister(1);
        assert_eq!(world.settle(false), vec![WriteReason::ElectLeaders]);
        assert_eq!(world.state("t"), state(2, 1, &[2], &[1, 3, 2]));
    }

    #[test]
    fn an_unclean_election_planned_before_an_isr_member_returned_is_refused() {
        let mut world = World::new(&[1, 2]);
        world.topic("t", state(NO_LEADER, 3, &[1], &[1, 2]), &[]);
        world.deregister(1);
        let writes = world.plan(true);
        assert_eq!(writes.len(), 1);
        assert_eq!(writes[0].reason, WriteReason::UncleanElection);
        world.register(1, BrokerState::Running);
        assert!(!world.core.txn(&writes[0].txn).unwrap().succeeded);
        assert_eq!(world.settle(true), vec![WriteReason::ElectLeaders]);
        assert_eq!(world.state("t"), state(1, 4, &[1], &[1, 2]));
    }
}
