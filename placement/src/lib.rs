//! skiff-placement: where partition replicas live and which broker owns which bundle of partitions.
//!
//! This crate owns four pure decisions, each with its inputs passed in (time as `now_ms`, load
//! reports, a seeded RNG) and its answer returned as data:
//!
//! - [`load`]: the per-node load model (BP-65's figures, smoothed over a sliding window);
//! - [`select`] and [`ensemble`]: choosing R distinct nodes for a partition's replicas, rack-aware
//!   first and then load-weighted (BP-65) or disk-weighted (BookKeeper); [`assign_replicas`] is the
//!   entry point topic creation calls, with each partition's bundle owner (given, or drawn once
//!   per new bundle) as its preferred leader;
//! - [`bundle`] and [`split`]: partitions grouped per namespace into CRC32 hash-range bundles, and
//!   the four split algorithms;
//! - [`shed`]: load shedders and bundle placement strategies that turn a cluster load snapshot into
//!   a [`shed::Plan`] (a list of bundle moves).
//!
//! It must never read a clock, touch files or sockets, or depend on tokio (CI checks its dependency
//! tree and its source): the broker's glue (`skiff-broker`'s `placement::sampler` and
//! `placement::state`) gathers the inputs, and the simulator (`skiff-placement-sim`) drives the
//! very same code with virtual time. On one node every answer is that node, but it comes from the
//! same code path a cluster uses.

// The workspace's lint wall (root Cargo.toml) holds for library code; test code is exempt.
// clippy.toml lets tests unwrap, expect, panic and index; clippy has no such setting for casts,
// so the test build (whose library code the non-test build lints anyway) allows those two.
#![cfg_attr(test, allow(clippy::cast_possible_truncation, clippy::cast_sign_loss))]

pub mod bundle;
pub mod ensemble;
pub mod load;
pub mod select;
pub mod shed;
pub mod split;

use std::collections::BTreeMap;

use rand::Rng;
use serde::{Deserialize, Serialize};

pub use bundle::{BundleId, BundleMap, BundleSnapshot, HashRange, NamespaceRule};
pub use ensemble::{Adherence, Ensemble, RackPolicy};
pub use load::{LoadReport, LoadWindow, RawLoadSample};
pub use select::{LoadWeightedConfig, SelectionPolicy};
pub use shed::{BundleMove, MoveReason, Plan};

/// Identifies a broker (a storage node) in the cluster. Kafka's broker ids are 32-bit.
pub type NodeId = i32;

/// One broker as placement sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// The broker's id.
    pub id: NodeId,
    /// The rack (failure domain), if the operator configured one. Nodes without a rack share the
    /// default rack.
    pub rack: Option<String>,
    /// The latest load report received from this node (all figures unknown until it has one).
    pub load: LoadReport,
    /// Write throughput at which the node's log disk counts as fully used, in bytes per second.
    /// 0 means unknown; BP-65's 0–100 "weight" is then taken from IO utilisation alone.
    pub write_capacity_bytes_per_second: u64,
}

/// The set of live brokers placement may choose from, with their (possibly stale) load.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterView {
    /// Live nodes. Order does not matter for correctness; it only fixes the RNG's meaning.
    pub nodes: Vec<Node>,
}

impl ClusterView {
    /// A view of a single broker with unknown load: the single-node default.
    pub fn single(id: NodeId) -> Self {
        Self {
            nodes: vec![Node {
                id,
                rack: None,
                load: LoadReport::unknown(),
                write_capacity_bytes_per_second: 0,
            }],
        }
    }
}

/// Everything topic creation needs to know about how to choose replicas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplicaPolicy {
    /// How one node is drawn among the eligible ones.
    pub selection: SelectionPolicy,
    /// Rack constraints applied before the draw.
    pub racks: RackPolicy,
}

impl Default for ReplicaPolicy {
    fn default() -> Self {
        Self {
            selection: SelectionPolicy::LoadWeighted(LoadWeightedConfig::default()),
            racks: RackPolicy::default(),
        }
    }
}

/// Errors placement returns. Everything a caller's input can cause is an error, never a panic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlacementError {
    /// More replicas were asked for than there are distinct live nodes.
    #[error(
        "topic {topic}: replication factor {replication_factor} exceeds the {node_count} live nodes"
    )]
    NotEnoughNodes {
        /// Topic being placed.
        topic: String,
        /// Replicas asked for.
        replication_factor: usize,
        /// Live nodes available.
        node_count: usize,
    },
    /// A replication factor or ensemble size of zero.
    #[error("topic {topic}: replication factor must be at least 1")]
    ReplicationFactorZero {
        /// Topic being placed.
        topic: String,
    },
    /// The write quorum is larger than the ensemble, or zero.
    #[error("write quorum {write_quorum} does not fit ensemble size {ensemble_size}")]
    BadQuorum {
        /// Ensemble size E.
        ensemble_size: usize,
        /// Write quorum Qw.
        write_quorum: usize,
    },
    /// Rack enforcement is on and the topology cannot satisfy it.
    #[error("cannot place {ensemble_size} replicas across at least {racks_min} racks per quorum")]
    RackConstraint {
        /// Ensemble size E.
        ensemble_size: usize,
        /// Minimum racks per write quorum that could not be met.
        racks_min: usize,
    },
    /// Too many partitions asked for in one topic.
    #[error("topic {topic}: {partition_count} partitions exceed the maximum {partitions_max}")]
    TooManyPartitions {
        /// Topic being placed.
        topic: String,
        /// Partitions asked for.
        partition_count: usize,
        /// [`PARTITIONS_PER_TOPIC_MAX`].
        partitions_max: usize,
    },
    /// The two ids name the same node twice in a view.
    #[error("node {0} appears twice in the cluster view")]
    DuplicateNode(NodeId),
    /// A bundle id that the map does not hold (it was split, or never existed).
    #[error("unknown bundle {0}")]
    UnknownBundle(String),
    /// A namespace would exceed [`bundle::NAMESPACE_BUNDLES_MAX`], or a bundle is too narrow.
    #[error("bundle {bundle} cannot be split: {why}")]
    SplitRefused {
        /// Bundle name.
        bundle: String,
        /// Why not.
        why: &'static str,
    },
    /// The bundle count asked for a new namespace is outside 1..=[`bundle::NAMESPACE_BUNDLES_MAX`].
    #[error("bundle count {0} outside 1..={max}", max = bundle::NAMESPACE_BUNDLES_MAX)]
    BadBundleCount(usize),
    /// A preferred leader that is not a node of the view (the caller's owners and view disagree).
    #[error("preferred leader {0} is not a live node of the cluster view")]
    LeaderNotInView(NodeId),
    /// A forced ensemble member outside the view's node indices.
    #[error("node index {index} outside a view of {node_count} nodes")]
    NodeIndexOutOfView {
        /// The index given.
        index: usize,
        /// Nodes in the view.
        node_count: usize,
    },
}

/// What topic creation knows of a new partition's preferred leader (replica 0), from the bundle
/// the partition hashes into (docs/design/cluster.md §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PreferredLeader {
    /// Nothing: replica 0 is drawn with the other replicas.
    Any,
    /// The bundle's owner, which is running: replica 0 whatever the weights, so the bundle stays
    /// led by one broker and can be moved as one unit.
    Owner(NodeId),
    /// The bundle has no running owner yet (a new namespace): every partition given the same key
    /// shares one owner, drawn by weight when the key is first seen. See [`assign_replicas`].
    NewOwner(usize),
}

/// The share of a node's write capacity (percent) that [`assign_replicas`] counts for each replica
/// it has just put there, in its private copy of the view (own-placement accounting,
/// docs/design/placement.md §4). A new partition's write rate is unknown when its topic is created;
/// counting each new replica as 1 % of its node makes one CreateTopics request of many partitions
/// spread over the lightly loaded nodes instead of stacking onto the few that looked lightest in
/// one report. 1 % is our choice: about one partition's share on a node carrying some fifty
/// partitions at half load. It only affects the load-ordered policies (see
/// [`select::NodeWeights::add_write_rate`]).
pub const NEW_REPLICA_CAPACITY_SHARE_PCT: f64 = 1.0;

/// Largest partition count (entries of `leaders`) one call to [`assign_replicas`] accepts: the
/// answer is allocated up front, and the count comes from a client's CreateTopics request. The
/// protocol's limit, the most partitions a topic may have (the broker refuses more on
/// CreateTopics and CreatePartitions, and no request may list more).
pub const PARTITIONS_PER_TOPIC_MAX: usize = skiff_protocol::limits::PARTITIONS_PER_TOPIC_MAX;

/// Chooses replicas for new partitions, one per entry of `leaders`.
///
/// Returns one list per partition; the first node of each list is the preferred leader. Each list
/// holds `replication_factor` distinct nodes, spread over racks by `policy.racks` and drawn by
/// `policy.selection` from the load in `view`. Rejects a replication factor above the node count
/// with [`PlacementError::NotEnoughNodes`], and an [`PreferredLeader::Owner`] outside the view
/// with [`PlacementError::LeaderNotInView`].
///
/// Each partition is an independent ensemble of size = write quorum = replication factor (Kafka
/// writes every replica), so the rack rule "at least `min_racks_per_write_quorum` racks" applies to
/// the whole replica list; a given or drawn owner takes position 0 and the rest are drawn around
/// it by the same rules.
///
/// The owners of [`PreferredLeader::NewOwner`] keys are drawn like the members of one ensemble:
/// by weight, each distinct from the owners drawn before it while nodes with a positive weight
/// remain, then a new round. Independent draws would put every bundle of a small new topic on one
/// broker with probability (1/n)^(bundles−1) (1 in 27 for 4 bundles on 3 equal brokers), leaving
/// its leaderships to the shedder; the weights still decide which brokers, and in which order.
pub fn assign_replicas<R: Rng + ?Sized>(
    topic: &str,
    leaders: &[PreferredLeader],
    replication_factor: usize,
    view: &ClusterView,
    policy: &ReplicaPolicy,
    rng: &mut R,
) -> Result<Vec<Vec<NodeId>>, PlacementError> {
    if replication_factor == 0 {
        return Err(PlacementError::ReplicationFactorZero {
            topic: topic.to_owned(),
        });
    }
    if leaders.len() > PARTITIONS_PER_TOPIC_MAX {
        return Err(PlacementError::TooManyPartitions {
            topic: topic.to_owned(),
            partition_count: leaders.len(),
            partitions_max: PARTITIONS_PER_TOPIC_MAX,
        });
    }
    check_distinct(view)?;
    if replication_factor > view.nodes.len() {
        return Err(PlacementError::NotEnoughNodes {
            topic: topic.to_owned(),
            replication_factor,
            node_count: view.nodes.len(),
        });
    }
    let mut weights = select::NodeWeights::compute(&policy.selection, view);
    let racks = ensemble::RackIndex::new(view);
    let mut owners = NewOwners::default();
    let mut out = Vec::with_capacity(leaders.len());
    for leader in leaders {
        let first = match *leader {
            PreferredLeader::Any => None,
            PreferredLeader::Owner(id) => Some(
                view.nodes
                    .iter()
                    .position(|node| node.id == id)
                    .ok_or(PlacementError::LeaderNotInView(id))?,
            ),
            PreferredLeader::NewOwner(key) => Some(owners.of(key, &weights, view, rng)?),
        };
        let ensemble = ensemble::build_led(
            &racks,
            &weights,
            first,
            replication_factor,
            replication_factor,
            &policy.racks,
            rng,
        )?;
        for &member in &ensemble.members {
            let capacity = view
                .nodes
                .get(member)
                .map_or(0.0, |node| node.write_capacity_bytes_per_second as f64);
            let _ = weights.add_write_rate(
                view,
                member,
                capacity * NEW_REPLICA_CAPACITY_SHARE_PCT / 100.0,
            );
        }
        out.push(ensemble.node_ids(view));
    }
    Ok(out)
}

/// The owners drawn for [`PreferredLeader::NewOwner`] keys in one [`assign_replicas`] call.
#[derive(Default)]
struct NewOwners {
    /// Key → node index.
    drawn: BTreeMap<usize, usize>,
    /// The node indices drawn in the current round (each distinct).
    round: Vec<usize>,
    scratch: Vec<usize>,
}

impl NewOwners {
    /// The owner of `key`: the one drawn before, or a new draw.
    fn of<R: Rng + ?Sized>(
        &mut self,
        key: usize,
        weights: &select::NodeWeights,
        view: &ClusterView,
        rng: &mut R,
    ) -> Result<usize, PlacementError> {
        if let Some(&owner) = self.drawn.get(&key) {
            return Ok(owner);
        }
        let n = view.nodes.len();
        let round = &self.round;
        let fresh = weights.pick_where(
            n,
            |i| weights.drawable(i) && !round.contains(&i),
            &mut self.scratch,
            rng,
        );
        let owner = match fresh {
            Some(owner) => owner,
            None => {
                // Every node worth drawing owns a bundle of this round: a new round.
                self.round.clear();
                weights
                    .pick_where(n, |_| true, &mut self.scratch, rng)
                    .ok_or(PlacementError::NotEnoughNodes {
                        topic: String::new(),
                        replication_factor: 1,
                        node_count: n,
                    })?
            }
        };
        self.round.push(owner);
        self.drawn.insert(key, owner);
        Ok(owner)
    }
}

fn check_distinct(view: &ClusterView) -> Result<(), PlacementError> {
    let mut ids: Vec<NodeId> = view.nodes.iter().map(|n| n.id).collect();
    ids.sort_unstable();
    for pair in ids.windows(2) {
        if let &[a, b] = pair {
            if a == b {
                return Err(PlacementError::DuplicateNode(a));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;

    /// How many distinct racks `replicas` span in `view`.
    fn racks_spanned(view: &ClusterView, replicas: &[NodeId]) -> usize {
        let mut racks: Vec<_> = replicas
            .iter()
            .map(|id| view.nodes[*id as usize].rack.clone())
            .collect();
        racks.sort();
        racks.dedup();
        racks.len()
    }

    fn unled(count: usize) -> Vec<PreferredLeader> {
        vec![PreferredLeader::Any; count]
    }

    pub(crate) fn view(node_count: usize, rack_count: usize) -> ClusterView {
        ClusterView {
            nodes: (0..node_count)
                .map(|i| Node {
                    id: i as NodeId,
                    rack: (rack_count > 0).then(|| format!("r{}", i % rack_count)),
                    load: LoadReport::with_util(((i * 37) % 90) as f64),
                    write_capacity_bytes_per_second: 0,
                })
                .collect(),
        }
    }

    #[test]
    fn single_node_answers_that_node() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let got = assign_replicas(
            "t",
            &unled(3),
            1,
            &ClusterView::single(7),
            &ReplicaPolicy::default(),
            &mut rng,
        )
        .unwrap();
        assert_eq!(got, vec![vec![7], vec![7], vec![7]]);
    }

    #[test]
    fn replication_factor_above_nodes_is_typed_error() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let err = assign_replicas(
            "t",
            &unled(1),
            2,
            &ClusterView::single(0),
            &ReplicaPolicy::default(),
            &mut rng,
        )
        .unwrap_err();
        assert!(matches!(
            err,
            PlacementError::NotEnoughNodes { node_count: 1, .. }
        ));
        let err = assign_replicas(
            "t",
            &unled(1),
            0,
            &view(3, 1),
            &ReplicaPolicy::default(),
            &mut rng,
        )
        .unwrap_err();
        assert!(matches!(err, PlacementError::ReplicationFactorZero { .. }));
    }

    #[test]
    fn duplicate_node_ids_are_rejected() {
        let mut v = view(3, 0);
        v.nodes[2].id = 0;
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let err = assign_replicas("t", &unled(1), 1, &v, &ReplicaPolicy::default(), &mut rng)
            .unwrap_err();
        assert_eq!(err, PlacementError::DuplicateNode(0));
    }

    #[test]
    fn replicas_use_distinct_racks_when_possible() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let v = view(12, 3);
        let got =
            assign_replicas("t", &unled(50), 3, &v, &ReplicaPolicy::default(), &mut rng).unwrap();
        for replicas in got {
            assert_eq!(racks_spanned(&v, &replicas), 3);
        }
    }

    #[test]
    fn one_topic_of_many_partitions_spreads_by_own_accounting() {
        // Node 0 reports 0 % and the nine others 50 %. Without accounting every one of the 60
        // partitions would land on node 0 (64 draws over 10 nodes almost always include it); with
        // each new replica counted as 1 % of its node, node 0 fills to about the others' 50 %
        // and the rest spread.
        let mut v = view(10, 0);
        for (i, node) in v.nodes.iter_mut().enumerate() {
            node.write_capacity_bytes_per_second = 100_000_000;
            node.load.write_bytes_per_second = if i == 0 { 0.0 } else { 50_000_000.0 };
        }
        let policy = ReplicaPolicy {
            selection: SelectionPolicy::PowerOfChoices { choices: 64 },
            racks: RackPolicy::default(),
        };
        let mut rng = ChaCha8Rng::seed_from_u64(12);
        let got = assign_replicas("t", &unled(60), 1, &v, &policy, &mut rng).unwrap();
        let on_zero = got.iter().filter(|r| r[0] == 0).count();
        assert!((45..=52).contains(&on_zero), "{on_zero} of 60 on node 0");
    }

    #[test]
    fn a_given_owner_is_replica_zero_and_the_rest_keep_the_rack_rule() {
        // Node 4 is above BP-65's 70 % threshold (weight 0): as an owner it leads anyway.
        let mut v = view(12, 3);
        v.nodes[4].load = LoadReport::with_util(95.0);
        let leaders: Vec<PreferredLeader> = (0..60)
            .map(|p| PreferredLeader::Owner([4, 7, 11][p % 3]))
            .collect();
        let mut rng = ChaCha8Rng::seed_from_u64(21);
        let got =
            assign_replicas("t", &leaders, 3, &v, &ReplicaPolicy::default(), &mut rng).unwrap();
        for (leader, replicas) in leaders.iter().zip(&got) {
            assert_eq!(PreferredLeader::Owner(replicas[0]), *leader);
            assert_eq!(racks_spanned(&v, replicas), 3, "{replicas:?}");
        }
        // Node 4 only ever holds the partitions it owns: the weights leave it out elsewhere.
        let elsewhere = got.iter().filter(|r| r[1..].contains(&4)).count();
        assert_eq!(elsewhere, 0);
    }

    #[test]
    fn an_owner_outside_the_view_is_a_typed_error() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let err = assign_replicas(
            "t",
            &[PreferredLeader::Owner(9)],
            1,
            &view(3, 0),
            &ReplicaPolicy::default(),
            &mut rng,
        )
        .unwrap_err();
        assert_eq!(err, PlacementError::LeaderNotInView(9));
    }

    #[test]
    fn partitions_of_one_new_bundle_share_an_owner_and_bundles_spread() {
        // 12 partitions in 4 bundles over 3 equally loaded brokers: each bundle's partitions share
        // replica 0, and every broker owns a bundle. Independent draws would miss a broker in
        // 4 seeds of 9 (and put all 4 bundles on one broker in 1 of 27).
        let mut v = view(3, 0);
        v.nodes
            .iter_mut()
            .for_each(|node| node.load = LoadReport::with_util(20.0));
        let leaders: Vec<PreferredLeader> =
            (0..12).map(|p| PreferredLeader::NewOwner(p % 4)).collect();
        for seed in 0..200 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let got =
                assign_replicas("t", &leaders, 2, &v, &ReplicaPolicy::default(), &mut rng).unwrap();
            let owners: Vec<NodeId> = (0..4).map(|bundle| got[bundle][0]).collect();
            for (p, replicas) in got.iter().enumerate() {
                assert_eq!(replicas[0], owners[p % 4], "seed {seed}");
            }
            let mut distinct = owners[..3].to_vec();
            distinct.sort_unstable();
            assert_eq!(distinct, vec![0, 1, 2], "seed {seed}: {owners:?}");
        }
    }

    #[test]
    fn new_owners_are_never_nodes_the_weights_leave_out() {
        // Node 0 is busy (95 %, above the threshold) and node 5 unknown: 8 bundles over the four
        // others, two rounds of four distinct owners.
        let mut v = view(6, 0);
        for (i, node) in v.nodes.iter_mut().enumerate() {
            node.load = match i {
                0 => LoadReport::with_util(95.0),
                5 => LoadReport::unknown(),
                _ => LoadReport::with_util(10.0),
            };
        }
        let leaders: Vec<PreferredLeader> = (0..8).map(PreferredLeader::NewOwner).collect();
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let got =
            assign_replicas("t", &leaders, 1, &v, &ReplicaPolicy::default(), &mut rng).unwrap();
        let owners: Vec<NodeId> = got.iter().map(|r| r[0]).collect();
        for round in owners.chunks(4) {
            let mut round = round.to_vec();
            round.sort_unstable();
            assert_eq!(round, vec![1, 2, 3, 4], "{owners:?}");
        }
    }

    /// A preferred leader per partition from two proptest numbers: none, a node of the view, or
    /// one of four new-bundle keys.
    fn leader_of((kind, n): (u8, usize), node_count: usize) -> PreferredLeader {
        match kind % 3 {
            1 if node_count > 0 => PreferredLeader::Owner((n % node_count) as NodeId),
            2 => PreferredLeader::NewOwner(n % 4),
            _ => PreferredLeader::Any,
        }
    }

    proptest! {
        #[test]
        fn replicas_are_on_distinct_nodes(
            seed in any::<u64>(),
            node_count in 0usize..40,
            rack_count in 0usize..6,
            rf in 1usize..6,
            policy_index in 0usize..6,
            choices in 0usize..9,
            unknown_loads in any::<bool>(),
            leader_draws in proptest::collection::vec((any::<u8>(), any::<usize>()), 8),
        ) {
            let mut v = view(node_count, rack_count);
            if unknown_loads {
                v.nodes.iter_mut().for_each(|node| node.load = LoadReport::unknown());
            }
            let selection = match policy_index {
                0 => SelectionPolicy::Uniform,
                1 => SelectionPolicy::DiskWeight { max_multiple: 3.0 },
                2 => SelectionPolicy::LoadWeighted(LoadWeightedConfig::default()),
                3 => SelectionPolicy::LeastLoaded,
                4 => SelectionPolicy::PowerOfTwoChoices,
                _ => SelectionPolicy::PowerOfChoices { choices },
            };
            let policy = ReplicaPolicy { selection, racks: RackPolicy::default() };
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let leaders: Vec<PreferredLeader> =
                leader_draws.iter().map(|draw| leader_of(*draw, node_count)).collect();
            match assign_replicas("t", &leaders, rf, &v, &policy, &mut rng) {
                Ok(all) => {
                    prop_assert!(rf <= node_count);
                    prop_assert_eq!(all.len(), 8);
                    let mut new_owners = BTreeMap::new();
                    for (leader, replicas) in leaders.iter().zip(all) {
                        prop_assert_eq!(replicas.len(), rf);
                        let mut sorted = replicas.clone();
                        sorted.sort_unstable();
                        sorted.dedup();
                        prop_assert_eq!(sorted.len(), rf);
                        match *leader {
                            PreferredLeader::Owner(id) => prop_assert_eq!(replicas[0], id),
                            PreferredLeader::NewOwner(key) => {
                                let owner = *new_owners.entry(key).or_insert(replicas[0]);
                                prop_assert_eq!(replicas[0], owner);
                            }
                            PreferredLeader::Any => {}
                        }
                        // Every rack holds a node (node i is in rack i mod racks): with as many
                        // racks as replicas, each replica is in its own, given leader or not.
                        if rack_count >= rf && node_count >= rack_count {
                            prop_assert_eq!(racks_spanned(&v, &replicas), rf);
                        }
                    }
                }
                Err(PlacementError::NotEnoughNodes { .. }) => prop_assert!(rf > node_count),
                Err(other) => prop_assert!(false, "unexpected {other}"),
            }
        }
    }
}
