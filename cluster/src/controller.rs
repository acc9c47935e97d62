//! The controller, as a pure function of the cluster image: [`plan`] returns the fenced Txns that
//! bring the store to what the image calls for (cluster.md §3). The driver submits them, waits
//! until its image has caught up with their revisions, and plans again; the controller therefore
//! keeps no state of its own, and a new controller resumes whatever the last one left half done.
//!
//! What a plan does:
//! - elects a leader for every partition whose leader is not registered: the first replica in
//!   assignment order that is in the ISR and running, at leader epoch + 1; with no such replica
//!   the leader becomes −1 (epoch + 1) and the ISR is kept, so its members can return and lead;
//! - removes unregistered brokers from the ISR of partitions whose leader is alive (never the
//!   last member);
//! - finishes topic creations whose author is gone (missing partition states, then `ready`), and
//!   carries out topic deletions (`deleting`: its partitions and the topic key in one Txn).
//!
//! Every write is fenced: `create_revision(R/controller) == controller_epoch`, the `mod_revision`
//! each partition state was read at, and the registration revision of every broker the decision
//! rests on (0 for a broker it took as dead, its epoch for one it elects). A decision made on a
//! stale image therefore fails instead of landing: a controller that saw a leader's registration
//! vanish cannot elect a replacement once that leader has registered again.
//!
//! Must never: read the clock, talk to the store, or keep leadership decisions in memory.

use std::collections::BTreeMap;

use skiff_meta::{Compare, CompareOp, KeyRange, Txn, TxnOp};
use skiff_placement::NodeId;

use crate::image::{ClusterImage, Versioned};
use crate::layout::Key;
use crate::records::{encode, PartitionState, TopicRecord, TopicState, Writer, NO_LEADER};

/// Partition states written per Txn: etcd accepts 128 operations and 128 compares per Txn, and
/// each partition costs one op and one compare, besides the fence and the broker compares.
pub const PARTITIONS_PER_TXN_MAX: usize = 120;

/// How many compares one Txn may carry (etcd's `--max-txn-ops` default applies to each part).
const COMPARES_PER_TXN_MAX: usize = skiff_meta::limits::TXN_OPS_MAX;

/// Why a write was planned: for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum WriteReason {
    /// Leader elections (the old leader is not registered).
    ElectLeaders,
    /// Unregistered followers removed from ISRs.
    ShrinkIsr,
    /// Partition states of a creation whose author is gone.
    FinishCreation,
    /// A creation whose partitions all exist becomes `ready`.
    MarkReady,
    /// A topic in `deleting` is removed with its partitions.
    DeleteTopic,
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

/// What [`plan`] may do per call.
#[derive(Debug, Clone, Copy)]
pub struct PlanLimits {
    /// Partition states per Txn (at most [`PARTITIONS_PER_TXN_MAX`]).
    pub partitions_per_txn: usize,
}

impl Default for PlanLimits {
    fn default() -> Self {
        Self {
            partitions_per_txn: PARTITIONS_PER_TXN_MAX,
        }
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

/// A compare that broker `id`'s registration is the one the image holds (or still absent).
fn registration_unchanged(image: &ClusterImage, id: NodeId) -> Compare {
    Compare::create_revision(
        image.layout().key(&Key::Broker(id)),
        CompareOp::Equal,
        image.broker_epoch(id).unwrap_or(0),
    )
}

/// The next state of a partition whose topic is served, or `None` when nothing is to change,
/// with the brokers whose registrations the decision rests on.
pub fn next_partition_state(
    image: &ClusterImage,
    state: &PartitionState,
) -> Option<(PartitionState, WriteReason, Vec<NodeId>)> {
    let live_isr: Vec<NodeId> = state
        .isr
        .iter()
        .copied()
        .filter(|id| image.is_live(*id))
        .collect();
    let dead_isr: Vec<NodeId> = state
        .isr
        .iter()
        .copied()
        .filter(|id| !image.is_live(*id))
        .collect();
    if state.leader != NO_LEADER && image.is_live(state.leader) {
        if dead_isr.is_empty() || live_isr.is_empty() {
            return None;
        }
        let next = PartitionState {
            isr: live_isr,
            writer: Writer::Controller,
            ..state.clone()
        };
        return Some((next, WriteReason::ShrinkIsr, dead_isr));
    }
    let candidate = state
        .replicas
        .iter()
        .copied()
        .find(|id| state.isr.contains(id) && image.is_running(*id));
    let mut depends_on = dead_isr;
    if state.leader != NO_LEADER && !depends_on.contains(&state.leader) {
        depends_on.push(state.leader);
    }
    match candidate {
        Some(leader) => {
            depends_on.push(leader);
            let next = PartitionState {
                leader,
                leader_epoch: state.leader_epoch + 1,
                isr: live_isr,
                replicas: state.replicas.clone(),
                writer: Writer::Controller,
            };
            Some((next, WriteReason::ElectLeaders, depends_on))
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

/// Packs partition writes into Txns under the compare and op limits.
struct Packer<'a> {
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
        Self {
            image,
            fence: fence(image, controller_epoch),
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
    fn push(
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

    fn finish(mut self) -> Vec<ControllerWrite> {
        self.flush();
        self.out
    }
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
                for (partition, state) in partitions {
                    if let Some((next, reason, depends_on)) =
                        next_partition_state(image, &state.value)
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
                for (partition, replicas) in record.value.replicas.iter().enumerate() {
                    let partition = partition as i32;
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
    for packer in by_reason.into_values() {
        writes.extend(packer.finish());
    }
    writes
}

fn partition_unchanged(
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

fn topic_unchanged(image: &ClusterImage, topic: &str, record: &Versioned<TopicRecord>) -> Compare {
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
