//! Partition reassignment (Kafka's KIP-455) as pure decisions over the cluster image: the
//! controller's next fenced write for every `R/reassign/<t>/<p>` record ([`plan`]), the writes of
//! an AlterPartitionReassignments request ([`plan_alter`]), what ListPartitionReassignments lists
//! ([`listed`]), and which partitions a broker is catching up for a reassignment
//! ([`catching_up`], the ones its fetcher throttles).
//!
//! A reassignment takes a partition from its replicas to the record's `target` in Kafka's order,
//! one fenced write per step, each decided from the image alone ([`next_step`]), so a new
//! controller finishes whatever the last one left half done:
//! 1. **add**: while `target ⊄ replicas`, replicas := target ++ (replicas − target), in the topic
//!    record and in the partition state's copy, in one Txn. Every broker's materializer opens the
//!    logs of its new replicas, which fetch from the leader and join the ISR by the leader's usual
//!    expansion;
//! 2. **catch up**: wait until every replica the reassignment adds (target − original) is in the
//!    ISR, and a target replica is (Kafka's `PartitionReassignmentReplicas` completion rule: the
//!    replicas that were there before need not be, so a cancellation, whose target is the
//!    original, completes at once);
//! 3. **elect**: if the leader is not in target or does not run, the first target replica in
//!    assignment order that is in the ISR and runs leads, at leader epoch + 1;
//! 4. **finish**: replicas := target, ISR := ISR ∩ target, and the record is deleted, in one Txn.
//!    The brokers that lost a replica delete its log.
//!
//! A record of a topic or partition that no longer exists (or whose topic is being deleted) is
//! deleted, and so is one whose target is unusable (empty, a duplicate or negative id: the store
//! is writable by anyone). A target naming an unregistered broker waits for it, as Kafka does;
//! an unregistered or shutting-down broker is never elected.
//!
//! Fencing, as every controller write (docs/design/cluster.md §3): the controller epoch, the
//! `mod_revision` of every key a step read (the reassignment record, the partition state, the topic
//! record it rewrites) and the registration of the broker it elects. One Txn per topic per plan
//! carries the steps of its partitions (the topic record holds every partition's replicas, so two
//! Txns rewriting it would refuse each other), within [`PARTITIONS_PER_TXN_MAX`] partitions and
//! [`skiff_meta::limits::TXN_OPS_MAX`] compares and ops; what does not fit waits for the next plan.
//!
//! Must never: read the clock, talk to the store, remove a replica before the replicas added are
//! in the ISR, elect outside the ISR, or write a partition that the controller's own elections
//! and ISR shrinks write in the same plan (they go first; the next plan sees their result).

use std::collections::{BTreeMap, BTreeSet};

use skiff_meta::limits::TXN_OPS_MAX;
use skiff_meta::{Compare, CompareOp, Txn, TxnOp};
use skiff_placement::NodeId;

use crate::controller::{
    fence, partition_unchanged, registration_unchanged, ControllerWrite, PlanLimits, WriteReason,
    PARTITIONS_PER_TXN_MAX,
};
use crate::image::{ClusterImage, Versioned};
use crate::layout::Key;
use crate::records::{
    encode, PartitionState, ReassignReason, ReassignRecord, TopicRecord, TopicState, Writer,
};

/// Why a reassignment makes no write now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waiting {
    /// Its topic is still being created.
    TopicCreating,
    /// The partition has no state in the image yet.
    NoPartitionState,
    /// These replicas it adds are not in the ISR yet.
    CatchingUp(Vec<NodeId>),
    /// No target replica is in the ISR and runs: nobody may lead the partition it ends as.
    NoEligibleLeader,
}

/// The next write one reassignment needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The record is stale (its partition is gone) or unusable: delete it.
    Drop,
    /// Add the target replicas: the partition's replicas become these.
    Add {
        /// Target first, then the replicas the target leaves out.
        replicas: Vec<NodeId>,
    },
    /// Nothing to write yet.
    Wait(Waiting),
    /// Move the leadership to a target replica, at leader epoch + 1.
    Elect {
        /// The new leader.
        leader: NodeId,
    },
    /// Complete: the partition ends with these replicas and this ISR, and the record goes.
    Finish {
        /// The target.
        replicas: Vec<NodeId>,
        /// ISR ∩ target, in ISR order.
        isr: Vec<NodeId>,
    },
}

/// Why a replica list cannot be a reassignment's target, in Kafka's words
/// (`ReplicationControlManager.validateManualPartitionAssignment`); `None` when it can.
/// `registered` tells whether a broker id is registered.
pub fn invalid_target(target: &[NodeId], registered: impl Fn(NodeId) -> bool) -> Option<String> {
    if target.is_empty() {
        return Some("The manual partition assignment includes an empty replica list.".to_owned());
    }
    let mut seen = BTreeSet::new();
    for id in target {
        if !seen.insert(*id) {
            return Some(format!(
                "The manual partition assignment includes the broker {id} more than once."
            ));
        }
        if *id < 0 || !registered(*id) {
            return Some(format!(
                "The manual partition assignment includes broker {id}, but no such broker is \
                 registered."
            ));
        }
    }
    None
}

/// The replicas of `partition` in `record`, if the topic has that partition.
fn replicas_of(record: &TopicRecord, partition: i32) -> Option<&Vec<NodeId>> {
    usize::try_from(partition)
        .ok()
        .and_then(|index| record.replicas.get(index))
}

/// The next write the reassignment `record` of `topic`/`partition` needs in `image`.
pub fn next_step(
    image: &ClusterImage,
    topic: &str,
    partition: i32,
    record: &ReassignRecord,
) -> Step {
    let Some(topic_record) = image.topics().get(topic) else {
        return Step::Drop;
    };
    if !record.is_for(&topic_record.value.topic_id) {
        // Written for an earlier topic of this name, deleted before the record was.
        return Step::Drop;
    }
    match topic_record.value.state {
        TopicState::Creating => return Step::Wait(Waiting::TopicCreating),
        TopicState::Deleting => return Step::Drop,
        TopicState::Ready => {}
    }
    let Some(current) = replicas_of(&topic_record.value, partition) else {
        return Step::Drop;
    };
    // Registration is not checked here: a target broker that is down is waited for.
    if invalid_target(&record.target, |_| true).is_some() {
        return Step::Drop;
    }
    let Some(state) = image.partition(topic, partition) else {
        return Step::Wait(Waiting::NoPartitionState);
    };
    let state = &state.value;
    let target = &record.target;
    if !target.iter().all(|id| current.contains(id)) {
        let mut replicas = target.clone();
        replicas.extend(current.iter().filter(|id| !target.contains(id)));
        return Step::Add { replicas };
    }
    let missing: Vec<NodeId> = target
        .iter()
        .copied()
        .filter(|id| !record.original.contains(id) && !state.isr.contains(id))
        .collect();
    if !missing.is_empty() {
        return Step::Wait(Waiting::CatchingUp(missing));
    }
    if !target.contains(&state.leader) || !image.is_running(state.leader) {
        return match target
            .iter()
            .copied()
            .find(|id| state.isr.contains(id) && image.is_running(*id))
        {
            Some(leader) => Step::Elect { leader },
            None => Step::Wait(Waiting::NoEligibleLeader),
        };
    }
    let isr: Vec<NodeId> = state
        .isr
        .iter()
        .copied()
        .filter(|id| target.contains(id))
        .collect();
    if isr.is_empty() {
        // A leader outside its own ISR (never written by Skiff): the ISR must not become empty.
        return Step::Wait(Waiting::NoEligibleLeader);
    }
    Step::Finish {
        replicas: target.clone(),
        isr,
    }
}

/// The reassignment steps of one topic, packed into one Txn within the limits.
struct TopicTxn<'a> {
    image: &'a ClusterImage,
    topic: &'a str,
    /// The topic record as read, and its replicas as this Txn leaves them.
    record: Option<(&'a Versioned<TopicRecord>, Vec<Vec<NodeId>>)>,
    topic_rewritten: bool,
    partitions_max: usize,
    compares: Vec<Compare>,
    ops: Vec<TxnOp>,
    brokers: BTreeSet<NodeId>,
    partitions: Vec<(String, i32)>,
}

/// What one step adds to a Txn.
struct Cost {
    compares: usize,
    ops: usize,
    rewrites_topic: bool,
    broker: Option<NodeId>,
}

impl<'a> TopicTxn<'a> {
    fn new(image: &'a ClusterImage, topic: &'a str, limits: PlanLimits) -> Self {
        Self {
            image,
            topic,
            record: image
                .ready_topic(topic)
                .map(|record| (record, record.value.replicas.clone())),
            topic_rewritten: false,
            partitions_max: limits.partitions_per_txn.clamp(1, PARTITIONS_PER_TXN_MAX),
            compares: Vec::new(),
            ops: Vec::new(),
            brokers: BTreeSet::new(),
            partitions: Vec::new(),
        }
    }

    /// Whether a step costing `cost` still fits (the fence, and the topic record's compare and
    /// put once any step rewrites it, counted).
    fn fits(&self, cost: &Cost) -> bool {
        let topic = usize::from(self.topic_rewritten || cost.rewrites_topic);
        let broker = usize::from(cost.broker.is_some_and(|id| !self.brokers.contains(&id)));
        self.partitions.len() < self.partitions_max
            && 1 + topic + self.compares.len() + cost.compares + broker <= TXN_OPS_MAX
            && topic + self.ops.len() + cost.ops <= TXN_OPS_MAX
    }

    /// Adds the step of one reassignment; `false` when it does not fit (it waits for the next
    /// plan, as does every later one of this topic).
    fn push(
        &mut self,
        partition: i32,
        reassignment: &Versioned<ReassignRecord>,
        state: Option<&Versioned<PartitionState>>,
        step: Step,
    ) -> bool {
        let layout = self.image.layout();
        let reassign_key = layout.key(&Key::Reassign(self.topic.to_owned(), partition));
        let reassign_guard = Compare::mod_revision(
            reassign_key.clone(),
            CompareOp::Equal,
            reassignment.mod_revision,
        );
        let (next, rewrites_topic, delete, broker) = match (&step, state) {
            (Step::Wait(_), _) => return true,
            (Step::Drop, _) => (None, None, true, None),
            (Step::Add { replicas }, Some(state)) => {
                let next = PartitionState {
                    replicas: replicas.clone(),
                    writer: Writer::Controller,
                    ..state.value.clone()
                };
                (Some(next), Some(replicas.clone()), false, None)
            }
            (Step::Elect { leader }, Some(state)) => {
                let next = PartitionState {
                    leader: *leader,
                    leader_epoch: state.value.leader_epoch + 1,
                    writer: Writer::Controller,
                    ..state.value.clone()
                };
                (Some(next), None, false, Some(*leader))
            }
            (Step::Finish { replicas, isr }, Some(state)) => {
                let next = PartitionState {
                    replicas: replicas.clone(),
                    isr: isr.clone(),
                    writer: Writer::Controller,
                    ..state.value.clone()
                };
                // A reassignment that changes nothing (a reorder already done, a cancellation
                // before anything was added) only deletes its record.
                let unchanged =
                    next.replicas == state.value.replicas && next.isr == state.value.isr;
                let current = self
                    .record
                    .as_ref()
                    .and_then(|(_, replicas)| replicas.get(usize::try_from(partition).ok()?));
                let topic = (current != Some(replicas)).then(|| replicas.clone());
                ((!unchanged).then_some(next), topic, true, None)
            }
            // Only Drop and Wait come without a partition state.
            (_, None) => return true,
        };
        let rewrites_topic = rewrites_topic.filter(|_| self.record.is_some());
        let cost = Cost {
            compares: 1 + usize::from(state.is_some() && !matches!(step, Step::Drop)),
            ops: usize::from(next.is_some()) + usize::from(delete),
            rewrites_topic: rewrites_topic.is_some(),
            broker,
        };
        if !self.fits(&cost) {
            return false;
        }
        self.compares.push(reassign_guard);
        if let (Some(state), false) = (state, matches!(step, Step::Drop)) {
            self.compares.push(partition_unchanged(
                self.image, self.topic, partition, state,
            ));
        }
        if let Some(id) = broker {
            if self.brokers.insert(id) {
                self.compares.push(registration_unchanged(self.image, id));
            }
        }
        if let Some(next) = next {
            let key = layout.key(&Key::Partition(self.topic.to_owned(), partition));
            self.ops.push(TxnOp::put(key, encode(&next)));
        }
        if delete {
            self.ops.push(TxnOp::delete(reassign_key));
        }
        if let (Some(replicas), Some((_, all))) = (rewrites_topic, self.record.as_mut()) {
            if let Some(slot) = usize::try_from(partition)
                .ok()
                .and_then(|index| all.get_mut(index))
            {
                *slot = replicas;
                self.topic_rewritten = true;
            }
        }
        self.partitions.push((self.topic.to_owned(), partition));
        true
    }

    fn finish(self, controller_epoch: i64) -> Option<ControllerWrite> {
        if self.ops.is_empty() {
            return None;
        }
        let mut compares = vec![fence(self.image, controller_epoch)];
        let mut ops = Vec::with_capacity(self.ops.len() + 1);
        if let (true, Some((seen, replicas))) = (self.topic_rewritten, self.record) {
            let key = self.image.layout().key(&Key::Topic(self.topic.to_owned()));
            compares.push(Compare::mod_revision(
                key.clone(),
                CompareOp::Equal,
                seen.mod_revision,
            ));
            let record = TopicRecord {
                replicas,
                ..seen.value.clone()
            };
            ops.push(TxnOp::put(key, encode(&record)));
        }
        compares.extend(self.compares);
        ops.extend(self.ops);
        Some(ControllerWrite {
            reason: WriteReason::Reassign,
            txn: Txn::new().when(compares).and_then(ops),
            partitions: self.partitions,
        })
    }
}

/// The next write of every reassignment in `image`, fenced on `controller_epoch`: one Txn per
/// topic that has a step to take. `busy` names the partitions the rest of the controller's plan
/// writes (elections, ISR shrinks): they are left for the next plan.
pub fn plan(
    image: &ClusterImage,
    controller_epoch: i64,
    limits: PlanLimits,
    busy: &BTreeSet<(String, i32)>,
) -> Vec<ControllerWrite> {
    let mut writes = Vec::new();
    let mut current: Option<TopicTxn<'_>> = None;
    let mut full = false;
    for ((topic, partition), reassignment) in image.reassignments() {
        if current.as_ref().is_none_or(|txn| txn.topic != topic) {
            if let Some(done) = current.take() {
                writes.extend(done.finish(controller_epoch));
            }
            current = Some(TopicTxn::new(image, topic, limits));
            full = false;
        }
        if full || busy.contains(&(topic.clone(), *partition)) {
            continue;
        }
        let step = next_step(image, topic, *partition, &reassignment.value);
        let state = image.partition(topic, *partition);
        if let Some(txn) = current.as_mut() {
            full = !txn.push(*partition, reassignment, state, step);
        }
    }
    if let Some(done) = current {
        writes.extend(done.finish(controller_epoch));
    }
    writes
}

/// Why AlterPartitionReassignments refuses one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterRefusal {
    /// No such ready topic or partition (UNKNOWN_TOPIC_OR_PARTITION).
    UnknownPartition,
    /// The replicas cannot be a target (INVALID_REPLICA_ASSIGNMENT), with Kafka's message.
    InvalidReplicas(String),
    /// A cancellation of a partition that is not being reassigned
    /// (NO_REASSIGNMENT_IN_PROGRESS).
    NoReassignmentInProgress,
}

/// One partition of an AlterPartitionReassignments request: its new target replicas, or `None`
/// to cancel its reassignment.
pub type AlterRequest = ((String, i32), Option<Vec<NodeId>>);

/// The writes of one AlterPartitionReassignments request, and the partitions it refuses.
#[derive(Debug, Clone)]
pub struct AlterPlan {
    /// Txns carrying the requester's fence; each lists the partitions it writes.
    pub writes: Vec<ControllerWrite>,
    /// The partitions refused, and why.
    pub refused: BTreeMap<(String, i32), AlterRefusal>,
}

/// The record AlterPartitionReassignments writes for `topic`/`partition`: `replicas` is the new
/// target, `None` a cancellation (Kafka's revert: the target becomes the original replicas).
fn requested_record(
    image: &ClusterImage,
    topic: &str,
    partition: i32,
    replicas: Option<&[NodeId]>,
    now_ms: u64,
) -> Result<ReassignRecord, AlterRefusal> {
    let topic_record = image
        .ready_topic(topic)
        .filter(|_| image.partition(topic, partition).is_some())
        .ok_or(AlterRefusal::UnknownPartition)?;
    let current =
        replicas_of(&topic_record.value, partition).ok_or(AlterRefusal::UnknownPartition)?;
    let topic_id = topic_record.value.topic_id.clone();
    let existing = image
        .reassignment(topic, partition)
        .map(|r| &r.value)
        .filter(|existing| existing.is_for(&topic_id));
    let Some(replicas) = replicas else {
        return match existing {
            // A record whose target is its original is a cancellation already (or a
            // reassignment that changes nothing): nothing is in progress to cancel.
            Some(existing) if existing.target != existing.original => Ok(ReassignRecord {
                topic_id,
                target: existing.original.clone(),
                original: existing.original.clone(),
                reason: ReassignReason::Admin,
                started_ms: now_ms,
            }),
            _ => Err(AlterRefusal::NoReassignmentInProgress),
        };
    };
    if let Some(why) = invalid_target(replicas, |id| image.is_live(id)) {
        return Err(AlterRefusal::InvalidReplicas(why));
    }
    Ok(ReassignRecord {
        topic_id,
        target: replicas.to_vec(),
        // A replacement keeps the original replicas (Kafka reverts a replaced reassignment's
        // additions): what a cancellation returns to, and what the new target adds.
        original: existing.map_or_else(|| current.clone(), |e| e.original.clone()),
        reason: ReassignReason::Admin,
        started_ms: now_ms,
    })
}

/// The writes of AlterPartitionReassignments for `requested` (each partition once, however often
/// listed: the first entry counts), as Txns carrying `fence` first: a new record is guarded on
/// its key's absence, a replaced one on its `mod_revision` as read, so a request planned on a
/// stale image is refused instead of undoing a newer change. `now_ms` is the records'
/// `started_ms`.
pub fn plan_alter(
    image: &ClusterImage,
    requested: &[AlterRequest],
    fence: Compare,
    now_ms: u64,
    limits: PlanLimits,
) -> AlterPlan {
    let per_txn = limits
        .partitions_per_txn
        .clamp(1, PARTITIONS_PER_TXN_MAX)
        .min(TXN_OPS_MAX - 1);
    let mut refused = BTreeMap::new();
    let mut planned = BTreeSet::new();
    let mut writes = Vec::new();
    let (mut compares, mut ops, mut partitions) = (Vec::new(), Vec::new(), Vec::new());
    let mut flush = |compares: &mut Vec<Compare>, ops: &mut Vec<TxnOp>, partitions| {
        if ops.is_empty() {
            return;
        }
        let mut guarded = vec![fence.clone()];
        guarded.append(compares);
        writes.push(ControllerWrite {
            reason: WriteReason::AlterReassignments,
            txn: Txn::new().when(guarded).and_then(std::mem::take(ops)),
            partitions,
        });
    };
    for ((topic, partition), replicas) in requested {
        if !planned.insert((topic.as_str(), *partition)) {
            continue;
        }
        let record = match requested_record(image, topic, *partition, replicas.as_deref(), now_ms) {
            Ok(record) => record,
            Err(why) => {
                refused.insert((topic.clone(), *partition), why);
                continue;
            }
        };
        let key = image
            .layout()
            .key(&Key::Reassign(topic.clone(), *partition));
        compares.push(match image.reassignment(topic, *partition) {
            Some(seen) => Compare::mod_revision(key.clone(), CompareOp::Equal, seen.mod_revision),
            None => Compare::absent(key.clone()),
        });
        ops.push(TxnOp::put(key, encode(&record)));
        partitions.push((topic.clone(), *partition));
        if partitions.len() >= per_txn {
            flush(&mut compares, &mut ops, std::mem::take(&mut partitions));
        }
    }
    flush(&mut compares, &mut ops, partitions);
    AlterPlan { writes, refused }
}

/// One reassignment as ListPartitionReassignments lists it (Kafka's
/// `OngoingPartitionReassignment`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The replicas now (the target's added ones included once they were added).
    pub replicas: Vec<NodeId>,
    /// Target − original.
    pub adding: Vec<NodeId>,
    /// Original − target.
    pub removing: Vec<NodeId>,
}

/// The reassignments in progress of ready topics, by topic and partition: those of the topics
/// `filter` names (and of their partitions named) when given, every one otherwise. A record whose
/// target is its original (a cancellation being carried out, or a reassignment that changes
/// nothing) is not listed: Kafka completes those at once.
pub fn listed(image: &ClusterImage, filter: Option<&[(String, Vec<i32>)]>) -> Vec<Listed> {
    let wanted = |topic: &str, partition: i32| {
        filter.is_none_or(|topics| {
            topics
                .iter()
                .any(|(name, partitions)| name == topic && partitions.contains(&partition))
        })
    };
    image
        .reassignments()
        .iter()
        .filter(|((topic, partition), record)| {
            wanted(topic, *partition) && record.value.target != record.value.original
        })
        .filter_map(|((topic, partition), record)| {
            let topic_record = &image.ready_topic(topic)?.value;
            if !record.value.is_for(&topic_record.topic_id) {
                return None;
            }
            let replicas = replicas_of(topic_record, *partition)?;
            let without = |ids: &[NodeId], of: &[NodeId]| -> Vec<NodeId> {
                ids.iter().copied().filter(|id| !of.contains(id)).collect()
            };
            Some(Listed {
                topic: topic.clone(),
                partition: *partition,
                replicas: replicas.clone(),
                adding: without(&record.value.target, &record.value.original),
                removing: without(&record.value.original, &record.value.target),
            })
        })
        .collect()
}

/// The partitions `node` is catching up for a reassignment: a record exists, `node` is in its
/// target and not in the partition's ISR. The fetcher throttles these
/// (`skiff.reassignment.throttle.bytes.per.second`).
pub fn catching_up(image: &ClusterImage, node: NodeId) -> BTreeSet<(String, i32)> {
    image
        .reassignments()
        .iter()
        .filter(|((topic, partition), record)| {
            record.value.target.contains(&node)
                && image
                    .partition(topic, *partition)
                    .is_some_and(|state| !state.value.isr.contains(&node))
        })
        .map(|(key, _)| key.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::BrokerState;
    use crate::test_world::{state, World};
    use proptest::prelude::*;

    const TOPIC: &str = "t";

    fn record(target: &[NodeId], original: &[NodeId]) -> ReassignRecord {
        ReassignRecord {
            topic_id: String::new(),
            target: target.to_vec(),
            original: original.to_vec(),
            reason: ReassignReason::Admin,
            started_ms: 7,
        }
    }

    /// Writes (or replaces) the reassignment of partition `partition` of TOPIC.
    fn reassign(world: &mut World, partition: i32, target: &[NodeId], original: &[NodeId]) {
        let key = world
            .layout
            .key(&Key::Reassign(TOPIC.to_owned(), partition));
        world
            .core
            .txn(&Txn::new().and_then(vec![TxnOp::put(key, encode(&record(target, original)))]))
            .unwrap();
    }

    /// What the leader's ISR expansion would write: `joining` added to the ISR.
    fn join_isr(world: &mut World, partition: i32, joining: NodeId) {
        let mut next = world.state_of(TOPIC, partition);
        if !next.isr.contains(&joining) {
            next.isr.push(joining);
        }
        world.put_state(TOPIC, partition, &next);
    }

    /// AlterPartitionReassignments' writes on `image`, fenced as the controller's (the fence is
    /// not what these tests look at).
    fn alter(image: &ClusterImage, epoch: i64, requested: &[AlterRequest]) -> AlterPlan {
        plan_alter(
            image,
            requested,
            fence(image, epoch),
            9,
            PlanLimits::default(),
        )
    }

    fn step_of(world: &World, partition: i32) -> Step {
        let image = world.image();
        let record = image.reassignment(TOPIC, partition).unwrap().value.clone();
        next_step(&image, TOPIC, partition, &record)
    }

    fn replicas_in_record(world: &World, partition: usize) -> Vec<NodeId> {
        world.image().ready_topic(TOPIC).unwrap().value.replicas[partition].clone()
    }

    #[test]
    fn a_reassignment_adds_waits_for_the_isr_moves_the_leader_and_finishes() {
        let mut world = World::new(&[1, 2, 3]);
        world.topic(TOPIC, state(1, 4, &[1, 2], &[1, 2]), &[]);
        reassign(&mut world, 0, &[3, 2], &[1, 2]);
        // Add: target first, then the replicas it leaves out, in the topic and the state.
        assert_eq!(world.settle(false), vec![WriteReason::Reassign]);
        assert_eq!(replicas_in_record(&world, 0), vec![3, 2, 1]);
        assert_eq!(world.state(TOPIC), state(1, 4, &[1, 2], &[3, 2, 1]));
        assert_eq!(
            catching_up(&world.image(), 3),
            BTreeSet::from([(TOPIC.to_owned(), 0)])
        );
        assert!(catching_up(&world.image(), 2).is_empty());
        assert_eq!(step_of(&world, 0), Step::Wait(Waiting::CatchingUp(vec![3])));
        assert!(world.settle(false).is_empty(), "nothing while 3 catches up");
        // 3 joins the ISR (the leader's expansion): the leadership moves to it, then it finishes.
        join_isr(&mut world, 0, 3);
        assert!(catching_up(&world.image(), 3).is_empty());
        assert_eq!(step_of(&world, 0), Step::Elect { leader: 3 });
        assert_eq!(
            world.settle(false),
            vec![WriteReason::Reassign, WriteReason::Reassign]
        );
        assert_eq!(world.state(TOPIC), state(3, 5, &[2, 3], &[3, 2]));
        assert_eq!(replicas_in_record(&world, 0), vec![3, 2]);
        assert!(world.image().reassignments().is_empty());
    }

    #[test]
    fn a_target_broker_that_is_down_is_waited_for_and_never_elected() {
        let mut world = World::new(&[1, 2, 3]);
        world.topic(TOPIC, state(1, 0, &[1, 2, 3], &[1, 2, 3]), &[]);
        world.deregister(3);
        reassign(&mut world, 0, &[3, 2], &[1, 2, 3]);
        // The controller's own shrink takes 3 out of the ISR first; the reassignment waits.
        assert_eq!(world.plan(false).len(), 1);
        assert_eq!(world.plan(false)[0].reason, WriteReason::ShrinkIsr);
        world.settle(false);
        // 3 was an original replica: nothing waits for it to catch up, but it cannot lead, so 2
        // (in the target, in the ISR, running) does, and the reassignment finishes without it.
        assert_eq!(world.state(TOPIC), state(2, 1, &[2], &[3, 2]));
        assert!(world.image().reassignments().is_empty());

        // A target broker that is down and is added: waited for.
        let mut world = World::new(&[1, 2, 3, 4]);
        world.topic(TOPIC, state(1, 0, &[1, 2], &[1, 2]), &[]);
        world.deregister(4);
        reassign(&mut world, 0, &[4], &[1, 2]);
        world.settle(false);
        assert_eq!(step_of(&world, 0), Step::Wait(Waiting::CatchingUp(vec![4])));
        assert_eq!(world.state(TOPIC), state(1, 0, &[1, 2], &[4, 1, 2]));
        // Even in the ISR, an unregistered broker is not elected.
        join_isr(&mut world, 0, 4);
        assert_eq!(step_of(&world, 0), Step::Wait(Waiting::NoEligibleLeader));
        world.register(4, BrokerState::Running);
        world.settle(false);
        assert_eq!(world.state(TOPIC), state(4, 1, &[4], &[4]));
    }

    #[test]
    fn a_cancellation_returns_to_the_original_replicas_at_once() {
        let mut world = World::new(&[1, 2, 3]);
        world.topic(TOPIC, state(1, 2, &[1, 2], &[1, 2]), &[]);
        reassign(&mut world, 0, &[3], &[1, 2]);
        world.settle(false);
        assert_eq!(world.state(TOPIC).replicas, vec![3, 1, 2]);
        // Cancelled while 3 catches up: the target becomes the original.
        let image = world.image();
        let plan = alter(&image, world.epoch, &[((TOPIC.to_owned(), 0), None)]);
        assert!(plan.refused.is_empty());
        assert!(world.core.txn(&plan.writes[0].txn).unwrap().succeeded);
        assert!(
            listed(&world.image(), None).is_empty(),
            "a revert is not listed"
        );
        world.settle(false);
        assert_eq!(world.state(TOPIC), state(1, 2, &[1, 2], &[1, 2]));
        assert_eq!(replicas_in_record(&world, 0), vec![1, 2]);
        assert!(world.image().reassignments().is_empty());
        // Nothing left to cancel.
        let image = world.image();
        let plan = alter(&image, world.epoch, &[((TOPIC.to_owned(), 0), None)]);
        assert_eq!(
            plan.refused.get(&(TOPIC.to_owned(), 0)),
            Some(&AlterRefusal::NoReassignmentInProgress)
        );
    }

    #[test]
    fn stale_and_unusable_records_are_deleted() {
        let mut world = World::new(&[1, 2]);
        world.topic(TOPIC, state(1, 0, &[1], &[1]), &[]);
        reassign(&mut world, 5, &[2], &[1]); // no partition 5
        reassign(&mut world, 0, &[2, 2], &[1]); // a duplicate: written by hand
        let key = world.layout.key(&Key::Reassign("gone".to_owned(), 0));
        world
            .core
            .txn(&Txn::new().and_then(vec![TxnOp::put(key, encode(&record(&[2], &[1])))]))
            .unwrap();
        assert_eq!(
            world.settle(false),
            vec![WriteReason::Reassign, WriteReason::Reassign]
        );
        assert!(world.image().reassignments().is_empty());
        assert_eq!(world.state(TOPIC), state(1, 0, &[1], &[1]));
    }

    #[test]
    fn a_record_of_an_earlier_topic_of_the_same_name_is_deleted_not_carried_out() {
        let mut world = World::new(&[1, 2]);
        world.topic(TOPIC, state(1, 0, &[1], &[1]), &[]);
        let topic_id = world
            .image()
            .ready_topic(TOPIC)
            .unwrap()
            .value
            .topic_id
            .clone();
        let key = world.layout.key(&Key::Reassign(TOPIC.to_owned(), 0));
        let earlier = ReassignRecord {
            topic_id: "00000000000000000000000000000001".to_owned(),
            ..record(&[2], &[1])
        };
        assert!(!earlier.is_for(&topic_id) && record(&[2], &[1]).is_for(&topic_id));
        world
            .core
            .txn(&Txn::new().and_then(vec![TxnOp::put(key, encode(&earlier))]))
            .unwrap();
        assert!(listed(&world.image(), None).is_empty());
        assert_eq!(step_of(&world, 0), Step::Drop);
        // An operator's request meanwhile starts afresh from the topic's own replicas.
        let plan = alter(
            &world.image(),
            world.epoch,
            &[((TOPIC.to_owned(), 0), Some(vec![2]))],
        );
        assert!(plan.refused.is_empty());
        assert_eq!(
            world.submit(plan.writes),
            vec![WriteReason::AlterReassignments]
        );
        let written = world.image().reassignment(TOPIC, 0).unwrap().value.clone();
        assert_eq!((written.topic_id, written.original), (topic_id, vec![1]));
    }

    #[test]
    fn a_step_planned_before_the_record_or_the_partition_changed_is_refused() {
        let mut world = World::new(&[1, 2, 3]);
        world.topic(TOPIC, state(1, 0, &[1, 2, 3], &[1, 2, 3]), &[]);
        reassign(&mut world, 0, &[2, 3], &[1, 2, 3]);
        let writes = world.plan(false);
        assert_eq!(writes.len(), 1);
        // The operator replaces the reassignment meanwhile: the planned election is refused.
        reassign(&mut world, 0, &[1, 3], &[1, 2, 3]);
        assert!(!world.core.txn(&writes[0].txn).unwrap().succeeded);
        // Planned, then the candidate restarts (a new registration): refused too.
        reassign(&mut world, 0, &[2, 3], &[1, 2, 3]);
        let writes = world.plan(false);
        world.deregister(2);
        world.register(2, BrokerState::Running);
        assert!(!world.core.txn(&writes[0].txn).unwrap().succeeded);
        // And a controller that lost its epoch writes nothing.
        let writes = world.plan(false);
        world.new_controller();
        assert!(!world.core.txn(&writes[0].txn).unwrap().succeeded);
        world.settle(false);
        assert_eq!(world.state(TOPIC), state(2, 1, &[2, 3], &[2, 3]));
    }

    #[test]
    fn the_controllers_own_elections_go_first() {
        let mut world = World::new(&[1, 2, 3]);
        world.topic(TOPIC, state(1, 0, &[1, 2], &[1, 2]), &[]);
        reassign(&mut world, 0, &[2, 3], &[1, 2]);
        world.deregister(1);
        let writes = world.plan(false);
        assert_eq!(writes.len(), 1, "{writes:?}");
        assert_eq!(writes[0].reason, WriteReason::ElectLeaders);
        world.settle(false);
        join_isr(&mut world, 0, 3);
        world.settle(false);
        assert_eq!(world.state(TOPIC), state(2, 1, &[2, 3], &[2, 3]));
    }

    #[test]
    fn alter_validates_each_partition_and_guards_its_record() {
        let mut world = World::new(&[1, 2, 3]);
        world.topic(TOPIC, state(1, 0, &[1, 2], &[1, 2]), &[]);
        let image = world.image();
        let request = |partition: i32, replicas: Option<&[NodeId]>| {
            (
                (TOPIC.to_owned(), partition),
                replicas.map(<[NodeId]>::to_vec),
            )
        };
        let plan = alter(
            &image,
            world.epoch,
            &[
                request(0, Some(&[3, 2])),
                request(0, Some(&[1])), // listed twice: the first counts
                request(1, Some(&[3])),
                (("absent".to_owned(), 0), Some(vec![1])),
            ],
        );
        assert_eq!(plan.writes.len(), 1);
        assert_eq!(plan.writes[0].partitions, vec![(TOPIC.to_owned(), 0)]);
        assert_eq!(plan.refused.len(), 2);
        assert!(plan
            .refused
            .values()
            .all(|why| *why == AlterRefusal::UnknownPartition));
        for (replicas, message) in [
            (&[][..], "an empty replica list"),
            (&[2, 2][..], "the broker 2 more than once"),
            (&[4][..], "broker 4, but no such broker is registered"),
            (&[-1][..], "broker -1, but no such broker is registered"),
        ] {
            let plan = alter(&image, world.epoch, &[request(0, Some(replicas))]);
            match plan.refused.get(&(TOPIC.to_owned(), 0)) {
                Some(AlterRefusal::InvalidReplicas(why)) => assert!(why.contains(message), "{why}"),
                other => panic!("{replicas:?}: {other:?}"),
            }
        }
        // A new record is guarded on absence: a concurrent request that wrote first wins.
        let first = alter(&image, world.epoch, &[request(0, Some(&[3, 2]))]);
        let second = alter(&image, world.epoch, &[request(0, Some(&[2, 3]))]);
        assert!(world.core.txn(&first.writes[0].txn).unwrap().succeeded);
        assert!(!world.core.txn(&second.writes[0].txn).unwrap().succeeded);
        let listed_now = listed(&world.image(), None);
        assert_eq!(
            listed_now,
            vec![Listed {
                topic: TOPIC.to_owned(),
                partition: 0,
                replicas: vec![1, 2],
                adding: vec![3],
                removing: vec![1],
            }]
        );
        // A replacement keeps the original replicas and is guarded on the record as read.
        let image = world.image();
        let plan = alter(&image, world.epoch, &[request(0, Some(&[3]))]);
        assert!(world.core.txn(&plan.writes[0].txn).unwrap().succeeded);
        let now = world.image().reassignment(TOPIC, 0).unwrap().value.clone();
        assert_eq!(now.target, vec![3]);
        assert_eq!(now.original, vec![1, 2]);
        assert!(!world.core.txn(&plan.writes[0].txn).unwrap().succeeded);
        // The filter of ListPartitionReassignments.
        let image = world.image();
        assert_eq!(
            listed(&image, Some(&[(TOPIC.to_owned(), vec![0])])).len(),
            1
        );
        assert!(listed(&image, Some(&[(TOPIC.to_owned(), vec![1])])).is_empty());
        assert!(listed(&image, Some(&[("other".to_owned(), vec![0])])).is_empty());
    }

    /// A topic of `count` partitions on brokers 1 and 2, every one reassigned to 3 and 2.
    fn many(count: i32) -> World {
        let mut world = World::new(&[1, 2, 3]);
        world.topic_with(TOPIC, vec![state(1, 0, &[1, 2], &[1, 2]); count as usize]);
        for partition in 0..count {
            reassign(&mut world, partition, &[3, 2], &[1, 2]);
        }
        world
    }

    #[test]
    fn a_large_topic_is_reassigned_in_txns_within_the_limits() {
        let count = 300;
        let mut world = many(count);
        let mut txns = 0;
        for round in 0.. {
            assert!(round < 40, "never finished");
            let writes = world.plan(false);
            if writes.is_empty() {
                break;
            }
            assert_eq!(writes.len(), 1, "one Txn per topic per plan");
            for write in writes {
                assert!(write.txn.compares.len() <= TXN_OPS_MAX);
                assert!(write.txn.success.len() <= TXN_OPS_MAX);
                assert!(write.partitions.len() <= PARTITIONS_PER_TXN_MAX);
                // The store refuses a Txn over its limits: each one lands.
                assert!(world.core.txn(&write.txn).unwrap().succeeded);
                txns += 1;
            }
            // The new replica catches up on every partition it was added to.
            for partition in 0..count {
                if world.state_of(TOPIC, partition).replicas.contains(&3) {
                    join_isr(&mut world, partition, 3);
                }
            }
        }
        for partition in 0..count {
            assert_eq!(
                world.state_of(TOPIC, partition),
                state(3, 1, &[2, 3], &[3, 2])
            );
        }
        assert!(world.image().reassignments().is_empty());
        // Each step costs two compares (the record and the state): at most 63 partitions a Txn.
        assert!(txns >= 3 + 3 + 5, "{txns} Txns");
    }

    /// One reassignment's step machine run by a succession of controllers, each planning from
    /// the image alone, with the new replicas joining the ISR at random points.
    fn run(target: Vec<NodeId>, original: Vec<NodeId>, joins: Vec<bool>, controllers: Vec<bool>) {
        let mut world = World::new(&[1, 2, 3, 4, 5]);
        let isr = original.clone();
        world.topic(TOPIC, state(original[0], 3, &isr, &original), &[]);
        reassign(&mut world, 0, &target, &original);
        let mut joins = joins.into_iter();
        for new_controller in controllers {
            if new_controller {
                world.new_controller();
            }
            let writes = world.plan(false);
            for write in writes {
                assert!(world.core.txn(&write.txn).unwrap().succeeded);
            }
            // Invariants at every step: the ISR is never empty and only holds replicas, the
            // leader is a replica in the ISR, and the topic record and the state agree.
            let now = world.state(TOPIC);
            assert!(!now.isr.is_empty());
            assert!(now.isr.iter().all(|id| now.replicas.contains(id)));
            assert!(now.isr.contains(&now.leader), "{now:?}");
            assert_eq!(replicas_in_record(&world, 0), now.replicas);
            if world.image().reassignments().is_empty() {
                // Finished: only once every replica it added was in the ISR.
                assert_eq!(now.replicas, target);
                assert!(target
                    .iter()
                    .all(|id| original.contains(id) || now.isr.contains(id)));
                break;
            }
            // In progress: no replica has been removed yet.
            assert!(original.iter().all(|id| now.replicas.contains(id)));
            for id in &target {
                if now.replicas.contains(id) && joins.next().unwrap_or(true) {
                    join_isr(&mut world, 0, *id);
                }
            }
        }
        // Finish with a last controller, however far the others got.
        world.new_controller();
        for id in &target {
            if world.state(TOPIC).replicas.contains(id) {
                join_isr(&mut world, 0, *id);
            }
        }
        world.settle(false);
        for id in &target {
            join_isr(&mut world, 0, *id);
        }
        world.settle(false);
        let end = world.state(TOPIC);
        assert_eq!(end.replicas, target);
        assert_eq!(replicas_in_record(&world, 0), target);
        assert!(target.contains(&end.leader));
        assert!(world.image().reassignments().is_empty());
        let moved = end.leader != original[0];
        assert_eq!(end.leader_epoch, 3 + i32::from(moved));
    }

    fn replica_set() -> impl Strategy<Value = Vec<NodeId>> {
        proptest::sample::subsequence(vec![1, 2, 3, 4, 5], 1..=3).prop_shuffle()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn any_reassignment_finishes_whatever_controller_runs_each_step(
            target in replica_set(),
            original in replica_set(),
            joins in proptest::collection::vec(any::<bool>(), 0..12),
            controllers in proptest::collection::vec(any::<bool>(), 1..8),
        ) {
            run(target, original, joins, controllers);
        }
    }

    #[test]
    fn a_new_controller_finishes_a_half_done_reassignment() {
        let mut world = World::new(&[1, 2, 3]);
        world.topic(TOPIC, state(1, 0, &[1, 2], &[1, 2]), &[]);
        reassign(&mut world, 0, &[3], &[1, 2]);
        // The old controller added 3, and 3 caught up; then the controller changed.
        world.settle(false);
        join_isr(&mut world, 0, 3);
        world.new_controller();
        let writes = world.plan(false);
        assert_eq!(writes.len(), 1);
        assert_eq!(writes[0].reason, WriteReason::Reassign);
        world.settle(false);
        assert_eq!(world.state(TOPIC), state(3, 1, &[3], &[3]));
    }
}
