//! Rack-aware ensemble building: which E distinct nodes hold one partition (or ledger), so that
//! every write quorum spans enough racks.
//!
//! Owns the rack constraints and the position-by-position fill (BookKeeper's rack-aware policy,
//! docs/design/placement.md §1.3). The per-position draw is delegated to [`NodeWeights`], so the
//! constraint logic exists once whatever the selection policy.

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::select::NodeWeights;
use super::{ClusterView, NodeId, PlacementError};

/// Rack constraints (BookKeeper's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RackPolicy {
    /// Each write quorum should span at least min(Qw, this) racks (`minNumRacksPerWriteQuorum`,
    /// default 2).
    pub min_racks_per_write_quorum: usize,
    /// Fail instead of falling back when the racks cannot satisfy the minimum (default false).
    pub enforce_min_racks: bool,
}

impl Default for RackPolicy {
    fn default() -> Self {
        Self {
            min_racks_per_write_quorum: 2,
            enforce_min_racks: false,
        }
    }
}

/// Whether a built ensemble meets the rack constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Adherence {
    /// Every write quorum spans at least the minimum number of racks.
    Meets,
    /// At least one write quorum does not (only possible without enforcement).
    Fails,
}

/// A chosen ensemble: node indices into the view, in position order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ensemble {
    /// Indices into `view.nodes`, position 0 first.
    pub members: Vec<usize>,
    /// Rack adherence of the result.
    pub adherence: Adherence,
}

impl Ensemble {
    /// The node ids, position 0 (the preferred leader) first.
    pub fn node_ids(&self, view: &ClusterView) -> Vec<NodeId> {
        self.members
            .iter()
            .filter_map(|&i| view.nodes.get(i).map(|node| node.id))
            .collect()
    }
}

/// Each node's rack as a small integer, computed once per view so that building many ensembles
/// (a topic's partitions, or a simulator's rollovers) does not re-sort rack names every time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RackIndex {
    rack_of: Vec<u32>,
    rack_count: u32,
}

impl RackIndex {
    /// Indexes the racks of `view` (nodes without a rack share the default rack).
    pub fn new(view: &ClusterView) -> Self {
        let mut names: Vec<&str> = view
            .nodes
            .iter()
            .map(|node| node.rack.as_deref().unwrap_or(""))
            .collect();
        names.sort_unstable();
        names.dedup();
        let rack_of = view
            .nodes
            .iter()
            .map(|node| {
                let name = node.rack.as_deref().unwrap_or("");
                names
                    .binary_search(&name)
                    .ok()
                    .and_then(|i| u32::try_from(i).ok())
                    .unwrap_or(0)
            })
            .collect();
        Self {
            rack_of,
            // A rack per node at most: node counts are far below u32::MAX.
            rack_count: u32::try_from(names.len()).unwrap_or(u32::MAX),
        }
    }

    /// Number of nodes indexed.
    pub fn node_count(&self) -> usize {
        self.rack_of.len()
    }
}

/// Builds an ensemble over `view`; see [`build_indexed`].
pub fn build<R: Rng + ?Sized>(
    view: &ClusterView,
    weights: &NodeWeights,
    ensemble_size: usize,
    write_quorum: usize,
    racks: &RackPolicy,
    rng: &mut R,
) -> Result<Ensemble, PlacementError> {
    build_indexed(
        &RackIndex::new(view),
        weights,
        ensemble_size,
        write_quorum,
        racks,
        rng,
    )
}

/// Builds an ensemble of `ensemble_size` distinct nodes in which entry e is written to positions
/// e..e+`write_quorum` (mod E), so quorums are E windows of Qw consecutive positions.
///
/// Positions are filled in order. For each, the candidates are tried in tiers until one tier has a
/// node: (1) a rack not used yet in this ensemble, (2) a rack other than the previous position's,
/// (3) any node; tiers (1)–(3) all require the quorum coverage predicate, and a last tier (4) drops
/// it unless `racks.enforce_min_racks`. Tier (1) is our addition to BookKeeper's "~previous rack"
/// rule: Kafka writes every replica, so distinct racks wherever possible is what operators expect.
pub fn build_indexed<R: Rng + ?Sized>(
    index: &RackIndex,
    weights: &NodeWeights,
    ensemble_size: usize,
    write_quorum: usize,
    racks: &RackPolicy,
    rng: &mut R,
) -> Result<Ensemble, PlacementError> {
    build_led(
        index,
        weights,
        None,
        ensemble_size,
        write_quorum,
        racks,
        rng,
    )
}

/// [`build_indexed`] with position 0 given: node index `first` (a bundle's owner, the partition's
/// preferred leader) takes it whatever its weight, and the other positions are drawn as usual
/// around it. Position 0 has no rack constraint of its own (any rack may start an ensemble), so
/// a forced first node never makes an ensemble that the rules could have satisfied fail them.
// INVARIANT: every node index (`first`, a pick, a member of `used`) is below `n` =
// `rack_of.len()` (checked above, or drawn by `pick_where(n, ..)`); `rack_of`'s values are below
// `rack_count` = `rack_covers.len()`; `position` and `p` are below `slots.len()`.
#[allow(clippy::indexing_slicing)]
pub fn build_led<R: Rng + ?Sized>(
    index: &RackIndex,
    weights: &NodeWeights,
    first: Option<usize>,
    ensemble_size: usize,
    write_quorum: usize,
    racks: &RackPolicy,
    rng: &mut R,
) -> Result<Ensemble, PlacementError> {
    if ensemble_size == 0 || write_quorum == 0 || write_quorum > ensemble_size {
        return Err(PlacementError::BadQuorum {
            ensemble_size,
            write_quorum,
        });
    }
    let n = index.node_count();
    if let Some(first) = first.filter(|&first| first >= n) {
        return Err(PlacementError::NodeIndexOutOfView {
            index: first,
            node_count: n,
        });
    }
    let not_enough = PlacementError::NotEnoughNodes {
        topic: String::new(),
        replication_factor: ensemble_size,
        node_count: n,
    };
    if ensemble_size > n {
        return Err(not_enough);
    }
    let rack_of = &index.rack_of;
    let racks_min = write_quorum.min(racks.min_racks_per_write_quorum).max(1);

    if index.rack_count < 2 {
        if racks.enforce_min_racks && racks_min > 1 {
            return Err(PlacementError::RackConstraint {
                ensemble_size,
                racks_min,
            });
        }
        return build_one_rack(n, weights, first, ensemble_size, racks_min, not_enough, rng);
    }

    let mut slots: Vec<Option<usize>> = vec![None; ensemble_size];
    let mut used: Vec<usize> = Vec::with_capacity(ensemble_size);
    let mut scratch: Vec<usize> = Vec::with_capacity(n);
    for position in 0..ensemble_size {
        let previous_rack = position
            .checked_sub(1)
            .and_then(|p| slots[p])
            .map(|i| rack_of[i]);
        // Coverage depends on the candidate's rack only: decide it once per rack.
        let rack_covers: Vec<bool> = (0..index.rack_count)
            .map(|rack| coverage_ok(&slots, position, rack, write_quorum, racks_min, rack_of))
            .collect();
        let covers = |candidate: usize| rack_covers[rack_of[candidate] as usize];
        let mut pick = first.filter(|_| position == 0);
        for tier in 0..4 {
            if pick.is_some() {
                break;
            }
            let eligible = |i: usize| {
                !used.contains(&i)
                    && match tier {
                        0 => !used.iter().any(|&u| rack_of[u] == rack_of[i]) && covers(i),
                        1 => previous_rack != Some(rack_of[i]) && covers(i),
                        2 => covers(i),
                        _ => !racks.enforce_min_racks,
                    }
            };
            pick = weights.pick_where(n, eligible, &mut scratch, rng);
        }
        let Some(pick) = pick else {
            return Err(PlacementError::RackConstraint {
                ensemble_size,
                racks_min,
            });
        };
        slots[position] = Some(pick);
        used.push(pick);
    }
    let members = used;
    let adherence = if quorums_meet(&members, write_quorum, racks_min, rack_of) {
        Adherence::Meets
    } else {
        Adherence::Fails
    };
    Ok(Ensemble { members, adherence })
}

/// One rack (of `n` nodes): the rack constraint is moot; E nodes (after `first`, if given) drawn
/// by weight alone, failing adherence if the policy wanted more than one rack.
fn build_one_rack<R: Rng + ?Sized>(
    n: usize,
    weights: &NodeWeights,
    first: Option<usize>,
    ensemble_size: usize,
    racks_min: usize,
    not_enough: PlacementError,
    rng: &mut R,
) -> Result<Ensemble, PlacementError> {
    let mut members: Vec<usize> = Vec::with_capacity(ensemble_size);
    members.extend(first);
    let mut scratch: Vec<usize> = Vec::new();
    while members.len() < ensemble_size {
        let pick = weights
            .pick_where(n, |i| !members.contains(&i), &mut scratch, rng)
            .ok_or(not_enough.clone())?;
        members.push(pick);
    }
    let adherence = if racks_min > 1 {
        Adherence::Fails
    } else {
        Adherence::Meets
    };
    Ok(Ensemble { members, adherence })
}

/// Can a candidate from `candidate_rack` take `position` and still let every quorum through that
/// position reach `racks_min` racks? A quorum accepts if its distinct racks with the candidate,
/// plus the slots it still has free after this one, reach the minimum (BookKeeper's coverage
/// rule, in one formula). Allocation-free: it runs for every rack at every position.
// INVARIANT: indices taken modulo `e` = `slots.len()`; slots hold node indices below
// `rack_of.len()` (build_led's invariant).
#[allow(clippy::indexing_slicing)]
fn coverage_ok(
    slots: &[Option<usize>],
    position: usize,
    candidate_rack: u32,
    write_quorum: usize,
    racks_min: usize,
    rack_of: &[u32],
) -> bool {
    if write_quorum < 2 {
        return true;
    }
    let e = slots.len();
    let member_at = |start: usize, k: usize| {
        let p = (start + k) % e;
        if p == position {
            None
        } else {
            slots[p]
        }
    };
    (0..write_quorum).all(|back| {
        let start = (position + e - back) % e;
        let mut filled = 0;
        let mut distinct = 1; // the candidate's rack
        for k in 0..write_quorum {
            let Some(member) = member_at(start, k) else {
                continue;
            };
            filled += 1;
            let rack = rack_of[member];
            let seen = rack == candidate_rack
                || (0..k).any(|k2| member_at(start, k2).is_some_and(|m| rack_of[m] == rack));
            if !seen {
                distinct += 1;
            }
        }
        let free_after = write_quorum - filled - 1;
        distinct + free_after >= racks_min
    })
}

// INVARIANT: indices taken modulo `e` = `members.len()`; members are node indices below
// `rack_of.len()` (build_led's invariant).
#[allow(clippy::indexing_slicing)]
fn quorums_meet(members: &[usize], write_quorum: usize, racks_min: usize, rack_of: &[u32]) -> bool {
    let e = members.len();
    (0..e).all(|start| {
        let mut racks: Vec<u32> = (0..write_quorum)
            .map(|k| rack_of[members[(start + k) % e]])
            .collect();
        racks.sort_unstable();
        racks.dedup();
        racks.len() >= racks_min
    })
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::select::SelectionPolicy;
    use crate::tests::view;

    #[test]
    fn quorums_span_two_racks() {
        let v = view(10, 2);
        let w = NodeWeights::compute(&SelectionPolicy::Uniform, &v);
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        for _ in 0..200 {
            let e = build(&v, &w, 5, 3, &RackPolicy::default(), &mut rng).unwrap();
            assert_eq!(e.adherence, Adherence::Meets);
            let mut m = e.members.clone();
            m.sort_unstable();
            m.dedup();
            assert_eq!(m.len(), 5);
        }
    }

    #[test]
    fn one_rack_fails_only_when_enforced() {
        let v = view(4, 1);
        let w = NodeWeights::compute(&SelectionPolicy::Uniform, &v);
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let e = build(&v, &w, 2, 2, &RackPolicy::default(), &mut rng).unwrap();
        assert_eq!(e.adherence, Adherence::Fails);
        let enforce = RackPolicy {
            enforce_min_racks: true,
            ..Default::default()
        };
        assert!(matches!(
            build(&v, &w, 2, 2, &enforce, &mut rng),
            Err(PlacementError::RackConstraint { .. })
        ));
    }

    #[test]
    fn uneven_racks_fall_back_unless_enforced() {
        // Racks r0 = {0, 2}, r1 = {1}; three replicas must reuse a rack, still meeting 2 racks.
        let v = view(3, 2);
        let w = NodeWeights::compute(&SelectionPolicy::Uniform, &v);
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let e = build(&v, &w, 3, 3, &RackPolicy::default(), &mut rng).unwrap();
        assert_eq!(e.adherence, Adherence::Meets);
        assert!(build(&v, &w, 3, 4, &RackPolicy::default(), &mut rng).is_err());
        assert!(build(&v, &w, 4, 2, &RackPolicy::default(), &mut rng).is_err());
    }
}
