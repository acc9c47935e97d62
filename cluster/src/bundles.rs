//! Bundles in the cluster (docs/design/cluster.md §5.2–5.5): the controller's bundle records
//! (`R/bundles/<namespace>/<0xLO_0xHI>`), the shedder's view of the brokers' load, and the moves
//! that carry a bundle's leaderships from its owner to a target, as pure functions of the image.
//!
//! What it decides:
//! - **records**: every ready, non-internal topic's namespace gets
//!   [`NAMESPACE_BUNDLES_DEFAULT`] bundle records, each owned by the broker that is the preferred
//!   leader of most of its partitions (creation makes that the bundle's owner); the records of a
//!   namespace with no topic left are deleted;
//! - **the shedder's input** ([`load_snapshot`]): each running broker's load as its report gives
//!   it (bytes in from clients plus replication bytes in, as a share of a capacity), with the
//!   bundles it owns and their traffic from its per-partition figures;
//! - **starting moves** ([`begin_moves`]): a planned move is persisted first (owned →
//!   assigning, with its target), never more than the cycle's maximum, never for a bundle in its
//!   cooldown, and never one that would send a bundle back to a broker it left within the
//!   cooldown or reverse a recent move between the same pair (the ping-pong every report counts);
//! - **carrying a move out** ([`plan`]): for each partition of an assigning bundle, a target in
//!   the ISR becomes leader at epoch + 1 and the preferred replica; a target outside the replicas
//!   gets a reassignment (`R/reassign/…`, reason bundle move: the target first, the old owner
//!   dropped so the replication factor stays) that [`crate::reassign`] executes; a target that
//!   is a replica but not yet in the ISR is waited for. Once the target leads every partition
//!   and no reassignment of them is left, the bundle is `owned` by the target. A target that
//!   stops running aborts the move (the bundle stays with its owner);
//! - **splits** ([`split`]): metadata only, one fenced Txn replaces the parent by its children.
//!
//! Every write is fenced on the controller epoch and on the `mod_revision` of each key it read,
//! so a controller that lost its term, or planned on a stale image, writes nothing. A new
//! controller resumes half-done moves from the records alone.
//!
//! Must never: read the clock (`now_ms` is an argument), talk to the store, or choose what to
//! move (the shedder in `skiff_placement::shed` does).

use std::collections::BTreeMap;

use skiff_meta::{Compare, Txn, TxnOp};
use skiff_placement::bundle::{
    partition_hash, BundleMap, NamespaceRule, NAMESPACE_BUNDLES_DEFAULT, NAMESPACE_BUNDLES_MAX,
};
use skiff_placement::shed::{BrokerLoad, BundleMove, BundleStats, LoadSnapshot};
use skiff_placement::{BundleId, HashRange, NodeId};

use crate::controller::{
    fence, partition_unchanged, registration_unchanged, topic_unchanged, ControllerWrite,
    WriteReason, PARTITIONS_PER_TXN_MAX,
};
use crate::image::{ClusterImage, Versioned};
use crate::layout::Key;
use crate::records::{
    encode, BundleMoveRecord, BundleRecord, BundleState, PartitionState, ReassignReason,
    ReassignRecord, TopicRecord, Writer, BUNDLE_MOVE_HISTORY_MAX,
};
use crate::topics::is_internal;

/// How topics map to bundle namespaces: each topic is its own namespace, its partitions spread
/// over the namespace's bundles by the CRC32 of their names (docs/design/placement.md §1.4).
pub const BUNDLE_NAMESPACE_RULE: NamespaceRule = NamespaceRule::Topic;

/// Bundle records created or deleted per Txn (one op and one compare each, besides the fence).
const BUNDLE_RECORDS_PER_TXN_MAX: usize = crate::controller::RECORDS_PER_TXN_MAX;

/// Below this mean load per broker the cluster is idle: relative scores would only amplify
/// noise, so the shedder is given nothing to move.
pub const SHED_LOAD_MEAN_MIN_BYTES_PER_SECOND: f64 = 64.0 * 1024.0;

/// What the controller's bundle work may do.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BundleSettings {
    /// A bundle that moved is not moved again for this long, and no bundle returns within it to
    /// a broker it left (`skiff.placement.bundle.cooldown.ms`).
    pub cooldown_ms: u64,
    /// Most moves one shedding cycle starts (`skiff.placement.shed.moves.max`).
    pub moves_per_cycle_max: usize,
    /// The load (bytes per second in) at which a broker counts as fully used
    /// (`skiff.placement.broker.capacity.bytes.per.second`); 0 = relative: twice the cluster's
    /// mean load, so the mean broker scores 50 %.
    pub capacity_bytes_per_second: f64,
}

/// The ready topics of `namespace`, by name.
fn namespace_topics<'i>(
    image: &'i ClusterImage,
    namespace: &str,
) -> impl Iterator<Item = (&'i String, &'i Versioned<TopicRecord>)> + 'i {
    let namespace = namespace.to_owned();
    image.topics().iter().filter(move |(name, record)| {
        record.value.state == crate::records::TopicState::Ready
            && !is_internal(name)
            && BUNDLE_NAMESPACE_RULE.namespace_of(name) == namespace
    })
}

/// The partitions of `bundle`: every partition of its namespace's topics whose name hashes into
/// its range.
pub fn bundle_partitions(image: &ClusterImage, bundle: &BundleId) -> Vec<(String, i32)> {
    let mut out = Vec::new();
    for (topic, record) in namespace_topics(image, &bundle.namespace) {
        for partition in 0..record.value.replicas.len() {
            let partition = u32::try_from(partition).unwrap_or(u32::MAX);
            if bundle.range.contains(partition_hash(topic, partition)) {
                out.push((topic.clone(), i32::try_from(partition).unwrap_or(i32::MAX)));
            }
        }
    }
    out
}

/// The bundle of the image that holds `topic`'s `partition`, if its namespace has records.
/// One ordered lookup (ids sort by namespace, then range), not a pass over every bundle: topic
/// creation asks this for each new partition.
pub fn bundle_of(image: &ClusterImage, topic: &str, partition: i32) -> Option<BundleId> {
    let namespace = BUNDLE_NAMESPACE_RULE.namespace_of(topic);
    let hash = partition_hash(topic, u32::try_from(partition).ok()?);
    // The last id at or before (namespace, [hash, ∞)): the namespace's range starting at or
    // before the hash, if any.
    let probe = BundleId {
        namespace: namespace.to_owned(),
        range: HashRange {
            lo: u64::from(hash),
            hi: u64::MAX,
        },
    };
    image
        .bundles()
        .range(..=probe)
        .next_back()
        .map(|(id, _)| id)
        .filter(|id| id.namespace == namespace && id.range.contains(hash))
        .cloned()
}

/// An empty bundle map of the default layout: [`NAMESPACE_BUNDLES_DEFAULT`] equal ranges
/// (Pulsar's division) per namespace, the layout every new namespace's records start from.
pub(crate) fn default_layout() -> BundleMap {
    #[allow(clippy::expect_used)] // INVARIANT: the const assertion below checks the count's range
    BundleMap::new(BUNDLE_NAMESPACE_RULE, NAMESPACE_BUNDLES_DEFAULT)
        .expect("the default bundle count is valid")
}
const _: () = assert!(
    NAMESPACE_BUNDLES_DEFAULT >= 1 && NAMESPACE_BUNDLES_DEFAULT <= NAMESPACE_BUNDLES_MAX,
    "BundleMap::new accepts 1..=NAMESPACE_BUNDLES_MAX bundles"
);

/// The default ranges of a new namespace (Pulsar's equal division).
fn default_ranges(namespace: &str) -> Vec<HashRange> {
    let mut map = default_layout();
    map.ensure_namespace(namespace);
    map.bundles().map(|(id, _, _)| id.range).collect()
}

/// The broker that is the preferred leader (first replica) of most of `partitions`; ties go to
/// the lowest id. `None` for no partition.
fn preferred_owner(image: &ClusterImage, partitions: &[(String, i32)]) -> Option<NodeId> {
    let mut counts: BTreeMap<NodeId, usize> = BTreeMap::new();
    for (topic, partition) in partitions {
        let first = image
            .topics()
            .get(topic)
            .and_then(|record| record.value.replicas.get(usize::try_from(*partition).ok()?))
            .and_then(|replicas| replicas.first().copied());
        if let Some(first) = first {
            *counts.entry(first).or_default() += 1;
        }
    }
    let most = counts.values().copied().max()?;
    counts
        .into_iter()
        .find(|(_, n)| *n == most)
        .map(|(id, _)| id)
}

/// Every write the bundle records call for: records for new namespaces, deletion of those whose
/// namespace is gone, and the next step of every move in progress.
pub fn plan(image: &ClusterImage, controller_epoch: i64, now_ms: u64) -> Vec<ControllerWrite> {
    let mut writes = records_to_create(image, controller_epoch, now_ms);
    writes.extend(records_to_delete(image, controller_epoch));
    for (bundle, record) in image.bundles() {
        if record.value.state == BundleState::Assigning {
            writes.extend(move_step(image, controller_epoch, now_ms, bundle, record));
        }
    }
    writes
}

fn records_to_create(image: &ClusterImage, epoch: i64, now_ms: u64) -> Vec<ControllerWrite> {
    let mut namespaces: Vec<&str> = image
        .topics()
        .iter()
        .filter(|(name, record)| {
            record.value.state == crate::records::TopicState::Ready && !is_internal(name)
        })
        .map(|(name, _)| BUNDLE_NAMESPACE_RULE.namespace_of(name))
        .filter(|ns| !image.bundles().keys().any(|id| id.namespace == *ns))
        .collect();
    namespaces.dedup();
    let mut puts: Vec<(BundleId, BundleRecord)> = Vec::new();
    for namespace in namespaces {
        let ranges = default_ranges(namespace);
        let all: Vec<(String, i32)> = namespace_topics(image, namespace)
            .flat_map(|(topic, record)| {
                (0_i32..)
                    .zip(&record.value.replicas)
                    .map(move |(p, _)| (topic.clone(), p))
            })
            .collect();
        let fallback = preferred_owner(image, &all);
        for range in ranges {
            let id = BundleId {
                namespace: namespace.to_owned(),
                range,
            };
            let mine = bundle_partitions(image, &id);
            let Some(owner) = preferred_owner(image, &mine).or(fallback) else {
                continue;
            };
            puts.push((
                id,
                BundleRecord {
                    owner,
                    state: BundleState::Owned,
                    target: None,
                    since_ms: now_ms,
                    reason: "created with its topic: owned by its partitions' preferred leader"
                        .to_owned(),
                    moves: Vec::new(),
                },
            ));
        }
    }
    puts.chunks(BUNDLE_RECORDS_PER_TXN_MAX)
        .map(|chunk| {
            let mut compares = vec![fence(image, epoch)];
            let mut ops = Vec::new();
            for (id, record) in chunk {
                let key = image.layout().key(&Key::Bundle(id.clone()));
                compares.push(Compare::absent(key.clone()));
                ops.push(TxnOp::put(key, encode(record)));
            }
            ControllerWrite {
                reason: WriteReason::CreateBundles,
                txn: Txn::new().when(compares).and_then(ops),
                partitions: Vec::new(),
            }
        })
        .collect()
}

fn records_to_delete(image: &ClusterImage, epoch: i64) -> Vec<ControllerWrite> {
    let gone: Vec<(&BundleId, &Versioned<BundleRecord>)> = image
        .bundles()
        .iter()
        // A namespace with a topic in any state (being created or deleted too) keeps them.
        .filter(|(id, _)| {
            !image
                .topics()
                .keys()
                .any(|t| BUNDLE_NAMESPACE_RULE.namespace_of(t) == id.namespace)
        })
        .collect();
    gone.chunks(BUNDLE_RECORDS_PER_TXN_MAX)
        .map(|chunk| {
            let mut compares = vec![fence(image, epoch)];
            let mut ops = Vec::new();
            for (id, record) in chunk {
                compares.push(bundle_unchanged(image, id, record));
                ops.push(TxnOp::delete(
                    image.layout().key(&Key::Bundle((*id).clone())),
                ));
            }
            ControllerWrite {
                reason: WriteReason::DeleteBundles,
                txn: Txn::new().when(compares).and_then(ops),
                partitions: Vec::new(),
            }
        })
        .collect()
}

fn bundle_unchanged(
    image: &ClusterImage,
    id: &BundleId,
    record: &Versioned<BundleRecord>,
) -> Compare {
    Compare::mod_revision(
        image.layout().key(&Key::Bundle(id.clone())),
        skiff_meta::CompareOp::Equal,
        record.mod_revision,
    )
}

/// `replicas` with `first` moved to the front (the preferred leader), order otherwise kept.
fn with_first(replicas: &[NodeId], first: NodeId) -> Vec<NodeId> {
    let mut out = vec![first];
    out.extend(replicas.iter().copied().filter(|id| *id != first));
    out
}

/// The replicas a bundle move reassigns a partition to when its target is not a replica: the
/// target first (it will lead), then the others without the old owner (or, if the owner is not
/// a replica, without the last one), so the replication factor stays.
pub fn reassignment_target(replicas: &[NodeId], owner: NodeId, target: NodeId) -> Vec<NodeId> {
    let mut rest: Vec<NodeId> = replicas
        .iter()
        .copied()
        .filter(|id| *id != target)
        .collect();
    if let Some(at) = rest.iter().position(|id| *id == owner) {
        rest.remove(at);
    } else {
        rest.pop();
    }
    let mut out = vec![target];
    out.extend(rest);
    out
}

/// What one partition of a moving bundle needs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PartitionStep {
    /// The target leads it and no reassignment of it is left.
    Done,
    /// Waiting: the target catches up, or a reassignment runs.
    Waiting,
    /// The target is in the ISR: make it leader and preferred replica.
    Lead,
    /// The target is not a replica: reassign the partition to these replicas.
    Reassign(Vec<NodeId>),
}

fn partition_step(
    image: &ClusterImage,
    topic: &str,
    partition: i32,
    owner: NodeId,
    target: NodeId,
) -> PartitionStep {
    let Some(state) = image.partition(topic, partition) else {
        return PartitionStep::Waiting;
    };
    let state = &state.value;
    if image.reassignment(topic, partition).is_some() {
        return PartitionStep::Waiting;
    }
    if state.leader == target {
        return PartitionStep::Done;
    }
    if state.isr.contains(&target) {
        return PartitionStep::Lead;
    }
    if state.replicas.contains(&target) {
        return PartitionStep::Waiting;
    }
    PartitionStep::Reassign(reassignment_target(&state.replicas, owner, target))
}

fn move_step(
    image: &ClusterImage,
    epoch: i64,
    now_ms: u64,
    bundle: &BundleId,
    record: &Versioned<BundleRecord>,
) -> Vec<ControllerWrite> {
    let owner = record.value.owner;
    let target = match record.value.target {
        Some(target) if image.is_running(target) => target,
        stopped => {
            let why = if stopped.is_some() {
                "aborted: the target is not running"
            } else {
                "aborted: no target"
            };
            return vec![finish(image, epoch, now_ms, bundle, record, owner, why)];
        }
    };
    let partitions = bundle_partitions(image, bundle);
    let mut lead: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    let mut reassign: Vec<(String, i32, Vec<NodeId>)> = Vec::new();
    let mut done = true;
    for (topic, partition) in &partitions {
        match partition_step(image, topic, *partition, owner, target) {
            PartitionStep::Done => {}
            PartitionStep::Waiting => done = false,
            PartitionStep::Lead => {
                done = false;
                lead.entry(topic.as_str()).or_default().push(*partition);
            }
            PartitionStep::Reassign(replicas) => {
                done = false;
                reassign.push((topic.clone(), *partition, replicas));
            }
        }
    }
    if done {
        return vec![finish(
            image,
            epoch,
            now_ms,
            bundle,
            record,
            target,
            "moved: the target leads every partition",
        )];
    }
    let mut writes = Vec::new();
    for (topic, partitions) in lead {
        if let Some(write) = lead_write(image, epoch, topic, &partitions, target) {
            writes.push(write);
        }
    }
    for chunk in reassign.chunks(BUNDLE_RECORDS_PER_TXN_MAX) {
        let mut compares = vec![fence(image, epoch), bundle_unchanged(image, bundle, record)];
        let mut ops = Vec::new();
        let mut moved = Vec::new();
        for (topic, partition, replicas) in chunk {
            let Some(state) = image.partition(topic, *partition) else {
                continue;
            };
            let key = image
                .layout()
                .key(&Key::Reassign(topic.clone(), *partition));
            compares.push(Compare::absent(key.clone()));
            compares.push(partition_unchanged(image, topic, *partition, state));
            ops.push(TxnOp::put(
                key,
                encode(&ReassignRecord {
                    topic_id: image
                        .topics()
                        .get(topic)
                        .map(|record| record.value.topic_id.clone())
                        .unwrap_or_default(),
                    target: replicas.clone(),
                    original: state.value.replicas.clone(),
                    reason: ReassignReason::BundleMove,
                    started_ms: now_ms,
                }),
            ));
            moved.push((topic.clone(), *partition));
        }
        writes.push(ControllerWrite {
            reason: WriteReason::ReassignForBundle,
            txn: Txn::new().when(compares).and_then(ops),
            partitions: moved,
        });
    }
    writes
}

/// Makes `target` leader (epoch + 1) and preferred replica of `partitions` of `topic`, in one
/// Txn with the topic record (the preferred replica is its first replica: Kafka's automatic
/// preferred-leader election then agrees with the move instead of undoing it). At most
/// [`PARTITIONS_PER_TXN_MAX`] − 1 partitions; the rest wait for the next plan, since a second
/// Txn on the same topic record in one plan would be refused by its compare.
fn lead_write(
    image: &ClusterImage,
    epoch: i64,
    topic: &str,
    partitions: &[i32],
    target: NodeId,
) -> Option<ControllerWrite> {
    let record = image.topics().get(topic)?;
    let mut topic_record = record.value.clone();
    let mut compares = vec![
        fence(image, epoch),
        topic_unchanged(image, topic, record),
        registration_unchanged(image, target),
    ];
    let mut ops = Vec::new();
    let mut written = Vec::new();
    for partition in partitions.iter().take(PARTITIONS_PER_TXN_MAX - 1) {
        let Some(state) = image.partition(topic, *partition) else {
            continue;
        };
        let index = usize::try_from(*partition).ok()?;
        let replicas = with_first(&state.value.replicas, target);
        if let Some(slot) = topic_record.replicas.get_mut(index) {
            *slot = with_first(slot, target);
        }
        let next = PartitionState {
            leader: target,
            leader_epoch: state.value.leader_epoch + 1,
            isr: state.value.isr.clone(),
            replicas,
            writer: Writer::Controller,
        };
        compares.push(partition_unchanged(image, topic, *partition, state));
        ops.push(TxnOp::put(
            image
                .layout()
                .key(&Key::Partition(topic.to_owned(), *partition)),
            encode(&next),
        ));
        written.push((topic.to_owned(), *partition));
    }
    if written.is_empty() {
        return None;
    }
    ops.push(TxnOp::put(
        image.layout().key(&Key::Topic(topic.to_owned())),
        encode(&topic_record),
    ));
    Some(ControllerWrite {
        reason: WriteReason::MoveBundleLeaders,
        txn: Txn::new().when(compares).and_then(ops),
        partitions: written,
    })
}

/// Ends a move: the bundle is `owned` by `owner` (the target when it moved, the old owner when
/// the move was aborted), with the move recorded in its history when it happened.
fn finish(
    image: &ClusterImage,
    epoch: i64,
    now_ms: u64,
    bundle: &BundleId,
    record: &Versioned<BundleRecord>,
    owner: NodeId,
    reason: &str,
) -> ControllerWrite {
    let mut next = BundleRecord {
        owner,
        state: BundleState::Owned,
        target: None,
        since_ms: now_ms,
        reason: reason.to_owned(),
        moves: record.value.moves.clone(),
    };
    let moved = owner != record.value.owner;
    if moved {
        next.moves.push(BundleMoveRecord {
            from: record.value.owner,
            to: owner,
            started_ms: record.value.since_ms,
            finished_ms: now_ms,
        });
        let excess = next.moves.len().saturating_sub(BUNDLE_MOVE_HISTORY_MAX);
        next.moves.drain(..excess);
    }
    ControllerWrite {
        reason: if moved {
            WriteReason::FinishBundleMove
        } else {
            WriteReason::AbortBundleMove
        },
        txn: Txn::new()
            .when(vec![
                fence(image, epoch),
                bundle_unchanged(image, bundle, record),
            ])
            .and_then(vec![TxnOp::put(
                image.layout().key(&Key::Bundle(bundle.clone())),
                encode(&next),
            )]),
        partitions: Vec::new(),
    }
}

/// The shedder's input: every running broker with a load report, its score (load as a share of
/// `capacity_bytes_per_second`, or of twice the mean when that is 0) and the bundles it owns
/// with their traffic from its per-partition figures. Empty when the cluster is idle (mean load
/// under [`SHED_LOAD_MEAN_MIN_BYTES_PER_SECOND`]). Bundles being moved are left out: they are not
/// the owner's to give.
pub fn load_snapshot(image: &ClusterImage, capacity_bytes_per_second: f64) -> LoadSnapshot {
    let reports: Vec<(NodeId, &crate::records::LoadRecord)> = image
        .loads()
        .iter()
        .filter(|(id, _)| image.is_running(**id))
        .map(|(id, record)| (*id, &record.value))
        .collect();
    if reports.is_empty() {
        return LoadSnapshot::default();
    }
    let loads: Vec<f64> = reports
        .iter()
        .map(|(_, r)| r.traffic.load_bytes_per_second())
        .collect();
    let mean = loads.iter().sum::<f64>() / loads.len() as f64;
    if mean < SHED_LOAD_MEAN_MIN_BYTES_PER_SECOND {
        return LoadSnapshot::default();
    }
    let capacity = if capacity_bytes_per_second > 0.0 {
        capacity_bytes_per_second
    } else {
        2.0 * mean
    };
    let brokers = reports
        .iter()
        .zip(&loads)
        .map(|((node, report), load)| {
            let by_partition = partitions_by_name(report);
            let bundles = image
                .bundles()
                .iter()
                .filter(|(_, b)| b.value.owner == *node && b.value.state == BundleState::Owned)
                .map(|(id, _)| {
                    let load = traffic_of(image, id, &by_partition);
                    BundleStats {
                        id: id.clone(),
                        short_term: load,
                        long_term: load,
                    }
                })
                .collect();
            BrokerLoad {
                node: *node,
                usage_pct: 100.0 * load / capacity,
                bundles,
                report_ms: report.sample_ms,
            }
        })
        .collect();
    LoadSnapshot { brokers }
}

type PartitionsByName<'r> = BTreeMap<(&'r str, i32), &'r crate::records::PartitionTraffic>;

fn partitions_by_name(report: &crate::records::LoadRecord) -> PartitionsByName<'_> {
    report
        .traffic
        .partitions
        .iter()
        .map(|p| ((p.topic.as_str(), p.partition), p))
        .collect()
}

/// A bundle's traffic in one broker's report: records in, and load (bytes in from clients plus
/// replication bytes in) over its partitions.
fn traffic_of(
    image: &ClusterImage,
    bundle: &BundleId,
    by_partition: &PartitionsByName<'_>,
) -> skiff_placement::bundle::BundleLoad {
    let mut load = skiff_placement::bundle::BundleLoad::default();
    for (topic, partition) in bundle_partitions(image, bundle) {
        if let Some(p) = by_partition.get(&(topic.as_str(), partition)) {
            load.msg_rate_per_second += p.messages_in_per_second;
            load.throughput_bytes_per_second +=
                p.bytes_in_per_second + p.replication_bytes_in_per_second;
        }
    }
    load
}

/// A bundle's traffic as its owner last reported it (none without a report).
pub fn owner_traffic(
    image: &ClusterImage,
    bundle: &BundleId,
) -> skiff_placement::bundle::BundleLoad {
    let Some(record) = image.bundles().get(bundle) else {
        return Default::default();
    };
    image
        .loads()
        .get(&record.value.owner)
        .map(|report| traffic_of(image, bundle, &partitions_by_name(&report.value)))
        .unwrap_or_default()
}

/// Why a planned move was not started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MoveRefused {
    /// The cycle already started its maximum of moves.
    CycleFull,
    /// The bundle is not (or no longer) owned by the move's source, or is moving.
    NotOwned,
    /// The bundle moved less than the cooldown ago.
    Cooldown,
    /// It would return the bundle to a broker it left within the cooldown, or reverse a recent
    /// move between the same two brokers.
    PingPong,
    /// The target does not run.
    TargetNotRunning,
}

/// Whether a move `from` → `to` at `now_ms` is a ping-pong by the reports' definition: the
/// bundle returns to a broker it left within `cooldown_ms`, or some bundle moved `to` → `from`
/// within `cooldown_ms`.
pub fn is_ping_pong(
    image: &ClusterImage,
    bundle: &BundleId,
    from: NodeId,
    to: NodeId,
    now_ms: u64,
    cooldown_ms: u64,
) -> bool {
    let recent = |m: &BundleMoveRecord| now_ms.saturating_sub(m.finished_ms) < cooldown_ms;
    let returns = image
        .bundles()
        .get(bundle)
        .is_some_and(|record| record.value.moves.iter().any(|m| m.from == to && recent(m)));
    let reverses = image.bundles().values().any(|record| {
        record
            .value
            .moves
            .iter()
            .any(|m| m.from == to && m.to == from && recent(m))
    });
    returns || reverses
}

/// Whether a move `from` → `to` sends `bundle` straight back where its last move took it from:
/// the B → A after A → B of the reports' ping-pong definition, at any distance in time. The
/// shedding metrics count these among started moves; [`is_ping_pong`] is the stricter check
/// (within the cooldown, any bundle's reversal) that refuses a move before it starts.
pub fn undoes_last_move(image: &ClusterImage, bundle: &BundleId, from: NodeId, to: NodeId) -> bool {
    image
        .bundles()
        .get(bundle)
        .and_then(|record| record.value.moves.last())
        .is_some_and(|last| last.from == to && last.to == from)
}

/// The fenced writes that start `moves` (owned → assigning with the target), in order, and the
/// moves refused with why. At most `settings.moves_per_cycle_max` start.
pub fn begin_moves(
    image: &ClusterImage,
    epoch: i64,
    moves: &[BundleMove],
    now_ms: u64,
    settings: &BundleSettings,
    reason: impl Fn(&BundleMove) -> String,
) -> (Vec<ControllerWrite>, Vec<(BundleMove, MoveRefused)>) {
    let mut writes = Vec::new();
    let mut refused = Vec::new();
    for planned in moves {
        let Some(record) = image.bundles().get(&planned.bundle) else {
            refused.push((planned.clone(), MoveRefused::NotOwned));
            continue;
        };
        let refusal = if writes.len() >= settings.moves_per_cycle_max {
            Some(MoveRefused::CycleFull)
        } else if record.value.state != BundleState::Owned
            || record.value.owner != planned.from
            || planned.from == planned.to
        {
            Some(MoveRefused::NotOwned)
        } else if record
            .value
            .moves
            .last()
            .is_some_and(|m| now_ms.saturating_sub(m.finished_ms) < settings.cooldown_ms)
        {
            Some(MoveRefused::Cooldown)
        } else if is_ping_pong(
            image,
            &planned.bundle,
            planned.from,
            planned.to,
            now_ms,
            settings.cooldown_ms,
        ) {
            Some(MoveRefused::PingPong)
        } else if !image.is_running(planned.to) {
            Some(MoveRefused::TargetNotRunning)
        } else {
            None
        };
        if let Some(why) = refusal {
            refused.push((planned.clone(), why));
            continue;
        }
        let next = BundleRecord {
            owner: planned.from,
            state: BundleState::Assigning,
            target: Some(planned.to),
            since_ms: now_ms,
            reason: reason(planned),
            moves: record.value.moves.clone(),
        };
        writes.push(ControllerWrite {
            reason: WriteReason::BeginBundleMove,
            txn: Txn::new()
                .when(vec![
                    fence(image, epoch),
                    bundle_unchanged(image, &planned.bundle, record),
                    registration_unchanged(image, planned.to),
                ])
                .and_then(vec![TxnOp::put(
                    image.layout().key(&Key::Bundle(planned.bundle.clone())),
                    encode(&next),
                )]),
            partitions: Vec::new(),
        });
    }
    (writes, refused)
}

/// The fenced write that splits `bundle` at `cuts` (metadata only: the children keep the
/// parent's owner and history, no partition changes leader). `None` when it cannot split: not
/// owned and settled, no cut inside its range, or its namespace would pass
/// [`NAMESPACE_BUNDLES_MAX`].
pub fn split(
    image: &ClusterImage,
    epoch: i64,
    bundle: &BundleId,
    cuts: &[u64],
    now_ms: u64,
) -> Option<ControllerWrite> {
    let record = image.bundles().get(bundle)?;
    if record.value.state != BundleState::Owned {
        return None;
    }
    let mut edges: Vec<u64> = cuts
        .iter()
        .copied()
        .filter(|c| bundle.range.lo < *c && *c < bundle.range.hi)
        .collect();
    edges.sort_unstable();
    edges.dedup();
    if edges.is_empty() {
        return None;
    }
    let count = image
        .bundles()
        .keys()
        .filter(|id| id.namespace == bundle.namespace)
        .count();
    if count + edges.len() > NAMESPACE_BUNDLES_MAX {
        return None;
    }
    edges.insert(0, bundle.range.lo);
    edges.push(bundle.range.hi);
    let mut compares = vec![fence(image, epoch), bundle_unchanged(image, bundle, record)];
    let mut ops = vec![TxnOp::delete(
        image.layout().key(&Key::Bundle(bundle.clone())),
    )];
    for pair in edges.windows(2) {
        let &[lo, hi] = pair else {
            continue; // windows(2) yields pairs only
        };
        let child = BundleId {
            namespace: bundle.namespace.clone(),
            range: HashRange { lo, hi },
        };
        let key = image.layout().key(&Key::Bundle(child));
        compares.push(Compare::absent(key.clone()));
        ops.push(TxnOp::put(
            key,
            encode(&BundleRecord {
                since_ms: now_ms,
                reason: format!("split from {bundle}"),
                ..record.value.clone()
            }),
        ));
    }
    Some(ControllerWrite {
        reason: WriteReason::SplitBundle,
        txn: Txn::new().when(compares).and_then(ops),
        partitions: Vec::new(),
    })
}

/// Partition leaders that disagree with their bundle's owner (owned bundles only): empty when
/// the bundle map and the partition states agree.
pub fn owner_disagreements(image: &ClusterImage) -> Vec<(String, i32, NodeId, NodeId)> {
    let mut out = Vec::new();
    for (id, record) in image.bundles() {
        if record.value.state != BundleState::Owned {
            continue;
        }
        for (topic, partition) in bundle_partitions(image, id) {
            if let Some(state) = image.partition(&topic, partition) {
                if state.value.leader != record.value.owner {
                    out.push((topic, partition, record.value.owner, state.value.leader));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{LoadRecord, PartitionTraffic, TrafficRecord};
    use crate::test_world::{state, World};
    use skiff_placement::shed::MoveReason;
    use skiff_placement::LoadReport;

    const SETTINGS: BundleSettings = BundleSettings {
        cooldown_ms: 60_000,
        moves_per_cycle_max: 2,
        capacity_bytes_per_second: 0.0,
    };

    /// A world of brokers 1–4 with topic `t` of 8 partitions, each led by 1 with ISR and
    /// replicas {1, 2}, and its bundle records created.
    fn world() -> World {
        let mut world = World::new(&[1, 2, 3, 4]);
        world.topic_with("t", vec![state(1, 0, &[1, 2], &[1, 2]); 8]);
        let writes = plan(&world.image(), world.epoch, 1_000);
        assert_eq!(world.submit(writes), vec![WriteReason::CreateBundles]);
        world
    }

    /// A bundle of `t` holding at least one partition.
    fn busy_bundle(world: &World) -> BundleId {
        let image = world.image();
        image
            .bundles()
            .keys()
            .find(|id| !bundle_partitions(&image, id).is_empty())
            .cloned()
            .unwrap()
    }

    fn moving(bundle: &BundleId, from: NodeId, to: NodeId) -> BundleMove {
        BundleMove {
            bundle: bundle.clone(),
            from,
            to,
            reason: MoveReason::PairGap {
                high_pct: 80.0,
                low_pct: 20.0,
            },
        }
    }

    fn begin(world: &mut World, moves: &[BundleMove], now_ms: u64) -> Vec<MoveRefused> {
        let (writes, refused) = begin_moves(
            &world.image(),
            world.epoch,
            moves,
            now_ms,
            &SETTINGS,
            |_| "test".to_owned(),
        );
        let count = writes.len();
        assert_eq!(world.submit(writes).len(), count);
        refused.into_iter().map(|(_, why)| why).collect()
    }

    /// Plans and submits bundle steps until none is left; the reasons that landed.
    fn settle(world: &mut World, now_ms: u64) -> Vec<WriteReason> {
        let mut reasons = Vec::new();
        for _ in 0..10 {
            let writes = plan(&world.image(), world.epoch, now_ms);
            if writes.is_empty() {
                return reasons;
            }
            let count = writes.len();
            let landed = world.submit(writes);
            assert_eq!(landed.len(), count, "a step was refused: {landed:?}");
            reasons.extend(landed);
        }
        reasons
    }

    fn record(world: &World, bundle: &BundleId) -> BundleRecord {
        world.image().bundles()[bundle].value.clone()
    }

    #[test]
    fn a_new_topic_gets_the_default_bundles_owned_by_their_preferred_leaders_and_loses_them_with_it(
    ) {
        let mut world = world();
        let image = world.image();
        assert_eq!(image.bundles().len(), NAMESPACE_BUNDLES_DEFAULT);
        let covered: usize = image
            .bundles()
            .keys()
            .map(|id| bundle_partitions(&image, id).len())
            .sum();
        assert_eq!(covered, 8, "every partition is in exactly one bundle");
        assert!(image
            .bundles()
            .values()
            .all(|b| b.value.owner == 1 && b.value.state == BundleState::Owned));
        assert!(owner_disagreements(&image).is_empty());
        assert!(plan(&image, world.epoch, 2_000).is_empty(), "settled");
        world.delete_key(&Key::Topic("t".into()));
        assert_eq!(settle(&mut world, 3_000), vec![WriteReason::DeleteBundles]);
        assert!(world.image().bundles().is_empty());
    }

    #[test]
    fn a_move_to_an_isr_member_makes_it_leader_and_preferred_then_owner() {
        let mut world = world();
        let bundle = busy_bundle(&world);
        let partitions = bundle_partitions(&world.image(), &bundle);
        assert!(begin(&mut world, &[moving(&bundle, 1, 2)], 10_000).is_empty());
        assert_eq!(record(&world, &bundle).state, BundleState::Assigning);
        assert_eq!(
            settle(&mut world, 11_000),
            vec![
                WriteReason::MoveBundleLeaders,
                WriteReason::FinishBundleMove
            ]
        );
        let image = world.image();
        for (topic, partition) in &partitions {
            let state = &image.partition(topic, *partition).unwrap().value;
            assert_eq!(state, &state_of(2, 1, &[1, 2], &[2, 1]));
            assert_eq!(
                image.topics()["t"].value.replicas[*partition as usize],
                vec![2, 1]
            );
        }
        let done = record(&world, &bundle);
        assert_eq!((done.owner, done.state), (2, BundleState::Owned));
        assert_eq!(
            done.moves,
            vec![BundleMoveRecord {
                from: 1,
                to: 2,
                started_ms: 10_000,
                finished_ms: 11_000
            }]
        );
        assert!(owner_disagreements(&image).is_empty());
        // Kafka's preferred-leader rebalance agrees with the move.
        assert!(
            crate::controller::rebalance(&image, world.epoch, Default::default(), 0).is_empty()
        );
    }

    fn state_of(leader: NodeId, epoch: i32, isr: &[NodeId], replicas: &[NodeId]) -> PartitionState {
        state(leader, epoch, isr, replicas)
    }

    #[test]
    fn a_move_to_a_broker_outside_the_replicas_reassigns_and_resumes_under_a_new_controller() {
        let mut world = world();
        let bundle = busy_bundle(&world);
        let partitions = bundle_partitions(&world.image(), &bundle);
        assert!(begin(&mut world, &[moving(&bundle, 1, 3)], 10_000).is_empty());
        let old_epoch = world.epoch;
        let stale = plan(&world.image(), old_epoch, 10_500);
        // The controller changes before its step lands: the old term's writes are refused …
        world.new_controller();
        assert!(world.submit(stale).is_empty());
        // … and the new controller resumes from the records alone.
        assert_eq!(
            settle(&mut world, 11_000),
            vec![WriteReason::ReassignForBundle]
        );
        let image = world.image();
        for (topic, partition) in &partitions {
            let reassign = &image.reassignment(topic, *partition).unwrap().value;
            assert_eq!(
                reassign.target,
                vec![3, 2],
                "target first, the old owner dropped"
            );
            assert_eq!(reassign.original, vec![1, 2]);
            assert_eq!(reassign.reason, ReassignReason::BundleMove);
        }
        // Waiting while the reassignment runs; then it completes (as crate::reassign does).
        assert!(plan(&image, world.epoch, 12_000).is_empty());
        for (topic, partition) in &partitions {
            world.put_key(
                &Key::Partition(topic.clone(), *partition),
                &state(3, 1, &[3, 2], &[3, 2]),
            );
            world.delete_key(&Key::Reassign(topic.clone(), *partition));
        }
        assert_eq!(
            settle(&mut world, 13_000),
            vec![WriteReason::FinishBundleMove]
        );
        assert_eq!(record(&world, &bundle).owner, 3);
    }

    #[test]
    fn a_move_whose_target_stops_running_is_aborted() {
        let mut world = world();
        let bundle = busy_bundle(&world);
        assert!(begin(&mut world, &[moving(&bundle, 1, 3)], 10_000).is_empty());
        world.deregister(3);
        assert_eq!(
            settle(&mut world, 11_000),
            vec![WriteReason::AbortBundleMove]
        );
        let after = record(&world, &bundle);
        assert_eq!((after.owner, after.state), (1, BundleState::Owned));
        assert!(after.moves.is_empty());
    }

    #[test]
    fn moves_in_cooldown_ping_pong_or_past_the_cycle_maximum_are_refused() {
        let mut world = world();
        let bundles: Vec<BundleId> = world.image().bundles().keys().cloned().collect();
        let bundle = busy_bundle(&world);
        assert!(begin(&mut world, &[moving(&bundle, 1, 2)], 10_000).is_empty());
        settle(&mut world, 11_000);
        // The same bundle again within the cooldown, and its way back.
        assert_eq!(
            begin(&mut world, &[moving(&bundle, 2, 3)], 20_000),
            vec![MoveRefused::Cooldown]
        );
        let other = bundles.iter().find(|b| **b != bundle).unwrap();
        // Another bundle from 2 back to 1 would reverse the recent 1 → 2 move.
        world.put_key(
            &Key::Bundle(other.clone()),
            &BundleRecord {
                owner: 2,
                ..record(&world, other)
            },
        );
        assert_eq!(
            begin(&mut world, &[moving(other, 2, 1)], 20_000),
            vec![MoveRefused::PingPong]
        );
        // After the cooldown it may.
        assert!(!is_ping_pong(&world.image(), other, 2, 1, 80_000, 60_000));
        // The metrics still count the moved bundle's own way back as undoing its last move, at
        // any distance in time; another bundle's 2 → 1, or a move elsewhere, is not.
        assert!(undoes_last_move(&world.image(), &bundle, 2, 1));
        assert!(!undoes_last_move(&world.image(), &bundle, 2, 3));
        assert!(!undoes_last_move(&world.image(), other, 2, 1));
        // Not the owner, the same broker, or more than the cycle maximum.
        let rest: Vec<BundleMove> = bundles
            .iter()
            .filter(|b| **b != bundle && *b != other)
            .map(|b| moving(b, 1, 4))
            .collect();
        let mut planned = vec![moving(other, 3, 4), moving(other, 2, 2)];
        planned.extend(rest);
        planned.push(moving(other, 2, 4));
        let refused = begin(&mut world, &planned, 20_000);
        assert_eq!(
            refused,
            vec![
                MoveRefused::NotOwned,
                MoveRefused::NotOwned,
                MoveRefused::CycleFull
            ]
        );
        let assigning = world
            .image()
            .bundles()
            .values()
            .filter(|b| b.value.state == BundleState::Assigning)
            .count();
        assert_eq!(assigning, SETTINGS.moves_per_cycle_max);
    }

    fn report(load: f64, partitions: Vec<PartitionTraffic>) -> LoadRecord {
        LoadRecord {
            report: LoadReport::unknown(),
            write_capacity_bytes_per_second: 0,
            sample_ms: 5_000,
            traffic: TrafficRecord {
                bytes_in_per_second: load,
                replication_bytes_in_per_second: 0.0,
                bytes_out_per_second: 0.0,
                messages_in_per_second: load / 100.0,
                partitions,
            },
        }
    }

    #[test]
    fn the_snapshot_scores_load_against_twice_the_mean_and_sums_bundle_traffic() {
        let mut world = world();
        let bundle = busy_bundle(&world);
        let partitions = bundle_partitions(&world.image(), &bundle);
        let traffic: Vec<PartitionTraffic> = partitions
            .iter()
            .map(|(topic, partition)| PartitionTraffic {
                topic: topic.clone(),
                partition: *partition,
                bytes_in_per_second: 1e6,
                replication_bytes_in_per_second: 0.0,
                bytes_out_per_second: 5e5,
                messages_in_per_second: 1e3,
            })
            .collect();
        // Idle: nothing to shed.
        world.put_key(&Key::Load(1), &report(1_000.0, Vec::new()));
        assert!(load_snapshot(&world.image(), 0.0).brokers.is_empty());
        world.put_key(&Key::Load(1), &report(3e6, traffic));
        world.put_key(&Key::Load(2), &report(1e6, Vec::new()));
        let snapshot = load_snapshot(&world.image(), 0.0);
        assert_eq!(
            snapshot.brokers.len(),
            2,
            "brokers without a report are left out"
        );
        let one = &snapshot.brokers[0];
        assert_eq!(one.node, 1);
        assert!((one.usage_pct - 75.0).abs() < 1e-9, "{}", one.usage_pct);
        assert!((snapshot.brokers[1].usage_pct - 25.0).abs() < 1e-9);
        let stats = one.bundles.iter().find(|b| b.id == bundle).unwrap();
        let n = partitions.len() as f64;
        assert!((stats.short_term.throughput_bytes_per_second - n * 1e6).abs() < 1e-6);
        assert!((stats.short_term.msg_rate_per_second - n * 1e3).abs() < 1e-6);
        // With a configured capacity, scores are absolute.
        let absolute = load_snapshot(&world.image(), 6e6);
        assert!((absolute.brokers[0].usage_pct - 50.0).abs() < 1e-9);
    }

    #[test]
    fn a_split_replaces_the_parent_by_children_with_its_owner() {
        let mut world = world();
        let bundle = busy_bundle(&world);
        let middle = (bundle.range.lo + bundle.range.hi) / 2;
        assert!(split(&world.image(), world.epoch, &bundle, &[bundle.range.lo], 0).is_none());
        let write = split(&world.image(), world.epoch, &bundle, &[middle], 50_000).unwrap();
        assert_eq!(world.submit(vec![write]), vec![WriteReason::SplitBundle]);
        let image = world.image();
        assert!(!image.bundles().contains_key(&bundle));
        assert_eq!(image.bundles().len(), NAMESPACE_BUNDLES_DEFAULT + 1);
        let children: Vec<&Versioned<BundleRecord>> = image
            .bundles()
            .iter()
            .filter(|(id, _)| bundle.range.lo <= id.range.lo && id.range.hi <= bundle.range.hi)
            .map(|(_, r)| r)
            .collect();
        assert_eq!(children.len(), 2);
        assert!(children.iter().all(|c| c.value.owner == 1));
        assert!(
            plan(&image, world.epoch, 60_000).is_empty(),
            "no leader moves"
        );
    }

    #[test]
    fn a_reassignment_target_keeps_the_replication_factor() {
        assert_eq!(reassignment_target(&[1, 2, 3], 1, 4), vec![4, 2, 3]);
        assert_eq!(reassignment_target(&[2, 3], 1, 4), vec![4, 2]);
        assert_eq!(reassignment_target(&[1], 1, 4), vec![4]);
    }
}
