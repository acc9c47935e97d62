//! Per-pick node selection: how one node is drawn among the eligible ones.
//!
//! Owns the selection policies (uniform, BookKeeper's disk weight, BP-65's load weight, Skiff's
//! power of d choices, and two references used by the simulator: greedy least-loaded and
//! power-of-two-choices), the weighted draw, and a placer's own-placement accounting
//! ([`NodeWeights::add_write_rate`]). It knows nothing about racks or replica counts;
//! [`super::ensemble`] decides which nodes are eligible for each position and calls
//! [`NodeWeights::pick`].

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::{ClusterView, Node};

/// BP-65's defaults for load-weighted selection.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LoadWeightedConfig {
    /// Nodes whose IO utilisation is above this (percent) are not drawn (BP-65 default 70).
    pub load_threshold_pct: f64,
    /// If the nodes at or under the threshold are at most this share of all nodes, draw uniformly
    /// over all nodes instead: piling every new replica onto a few survivors would overload them.
    /// BP-65's default is not published; 0.3 is our choice (the simulator of
    /// docs/design/placement.md §3 tries 0.3 and 0.5).
    pub low_load_node_ratio: f64,
    /// The top of the weight scale: a node at weight 0 gets `weight_max` (100).
    pub weight_max: f64,
    /// The floor on `weight_max − weight` (10). This is the smoothing: the idlest node is at most
    /// 10× as likely as the busiest eligible one, so independent placers sharing one stale view do
    /// not all herd onto the same node.
    pub weight_min: f64,
    /// Weight given to a node above `weight_max` (overloaded): 5.
    pub weight_overloaded: f64,
}

impl Default for LoadWeightedConfig {
    fn default() -> Self {
        Self {
            load_threshold_pct: 70.0,
            low_load_node_ratio: 0.3,
            weight_max: 100.0,
            weight_min: 10.0,
            weight_overloaded: 5.0,
        }
    }
}

/// Default cap of disk-weight selection: a node is drawn at most 3× as often as the median node
/// (`bookieMaxMultipleForWeightBasedPlacement`).
pub const DISK_WEIGHT_MAX_MULTIPLE_DEFAULT: f64 = 3.0;

/// How one node is drawn among the eligible ones.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum SelectionPolicy {
    /// Every eligible node equally likely: the baseline.
    Uniform,
    /// BookKeeper's disk weight: probability ∝ free disk bytes, unknown nodes get the smallest
    /// known share, and no node more than `max_multiple` × the median (≤ 0 disables the cap).
    DiskWeight {
        /// The median multiple cap.
        max_multiple: f64,
    },
    /// BP-65: drop busy nodes, then probability ∝ max(100 − load, 10).
    LoadWeighted(LoadWeightedConfig),
    /// Always the least-loaded eligible node (ties drawn at random). Herds under stale views;
    /// kept as the simulator's anti-baseline.
    LeastLoaded,
    /// Draw two eligible nodes uniformly and keep the less loaded: a strong reference.
    PowerOfTwoChoices,
    /// Skiff's policy: draw `choices` eligible nodes uniformly (with replacement) and keep the
    /// least loaded. Meant to be used with own-placement accounting: the placer adds the predicted
    /// rate of every replica it placed since its last refresh to its private view
    /// ([`NodeWeights::add_write_rate`]), so its own recent decisions are not invisible to it.
    /// More choices follow the view more closely; fewer spread independent placers more. Not
    /// the default: in the simulator it does not clearly beat BP-65 (see
    /// `bench/reports/placement.md`), and with d ≥ 4 it herds on stale views.
    PowerOfChoices {
        /// Candidates drawn per pick (0 counts as 1).
        choices: usize,
    },
}

/// The load figure on BP-65's 0–100 "weight" scale: write throughput as a percentage of the
/// node's write capacity when both are known (our reading of BP-65, whose mapping is not
/// published), else the IO utilisation.
pub fn load_figure(node: &Node) -> Option<f64> {
    let wbps = node.load.write_bytes_per_second;
    if node.write_capacity_bytes_per_second > 0 && wbps >= 0.0 {
        return Some(100.0 * wbps / node.write_capacity_bytes_per_second as f64);
    }
    node.load.io_util_pct()
}

/// Per-node draw weights for one policy over one view, computed once per topic or ensemble.
#[derive(Debug, Clone)]
pub struct NodeWeights {
    mode: Mode,
    /// Index-aligned with `view.nodes`: the draw weight (`Weighted`) or the load (`Least*`).
    values: Vec<f64>,
    /// `Weighted` only: running sums of `values` (the roulette wheel), so a draw over every node
    /// is a binary search instead of a pass.
    cumulative: Vec<f64>,
    fell_back: bool,
}

/// Draws from the whole wheel that [`NodeWeights::pick_where`] tries before it falls back to a
/// pass over every node. Ensembles are small against the cluster, so nearly every first draw is
/// eligible; the bound keeps the worst case (few eligible nodes) at one pass plus this.
pub const REJECTION_DRAWS_MAX: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Weighted,
    LeastLoaded,
    /// The least loaded of this many uniform draws (at least 1).
    Choices(usize),
}

impl NodeWeights {
    /// Computes the weights of every node of `view` under `policy`.
    pub fn compute(policy: &SelectionPolicy, view: &ClusterView) -> Self {
        let n = view.nodes.len();
        match policy {
            SelectionPolicy::Uniform => Self::weighted(vec![1.0; n], false),
            SelectionPolicy::DiskWeight { max_multiple } => {
                let free: Vec<f64> = view
                    .nodes
                    .iter()
                    .map(|node| node.load.disk_free().unwrap_or(0.0))
                    .collect();
                Self::weighted(disk_weights(&free, *max_multiple), false)
            }
            SelectionPolicy::LoadWeighted(config) => {
                let (weights, fell_back) = load_weights(view, config);
                Self::weighted(weights, fell_back)
            }
            SelectionPolicy::LeastLoaded => Self {
                mode: Mode::LeastLoaded,
                values: loads(view),
                cumulative: Vec::new(),
                fell_back: false,
            },
            SelectionPolicy::PowerOfTwoChoices => Self::choices(2, view),
            SelectionPolicy::PowerOfChoices { choices } => Self::choices(*choices, view),
        }
    }

    fn choices(choices: usize, view: &ClusterView) -> Self {
        Self {
            mode: Mode::Choices(choices.max(1)),
            values: loads(view),
            cumulative: Vec::new(),
            fell_back: false,
        }
    }

    /// Own-placement accounting: adds `bytes_per_second` of predicted writes to node index `i` of
    /// this (private) view, as a share of the node's write capacity, the unit the load-ordered
    /// policies compare. A negative rate releases load the placer knows has left the node (its
    /// previous ledger was closed). Until the next refresh a placer would otherwise see its own
    /// recent replicas nowhere and keep choosing the same nodes.
    ///
    /// Applies to the load-ordered policies (least-loaded and the choices policies). It is a no-op
    /// for the weighted ones (uniform, disk weight and BP-65, whose rule is kept as specified), for
    /// an index outside the view, for a node of unknown capacity or unknown load (an unknown load
    /// already sorts last), and for a rate that is not finite. Returns whether the view changed.
    pub fn add_write_rate(&mut self, view: &ClusterView, i: usize, bytes_per_second: f64) -> bool {
        if self.mode == Mode::Weighted || !bytes_per_second.is_finite() {
            return false;
        }
        let (Some(node), Some(value)) = (view.nodes.get(i), self.values.get_mut(i)) else {
            return false;
        };
        if node.write_capacity_bytes_per_second == 0 || *value == f64::MAX {
            return false;
        }
        let share_pct = 100.0 * bytes_per_second / node.write_capacity_bytes_per_second as f64;
        *value = (*value + share_pct).max(0.0);
        true
    }

    fn weighted(values: Vec<f64>, fell_back: bool) -> Self {
        let mut total = 0.0;
        let cumulative = values
            .iter()
            .map(|w| {
                if w.is_finite() && *w > 0.0 {
                    total += w;
                }
                total
            })
            .collect();
        Self {
            mode: Mode::Weighted,
            values,
            cumulative,
            fell_back,
        }
    }

    /// Draws one node index among those of `0..node_count` for which `eligible` holds, with the
    /// same distribution as [`NodeWeights::pick`] over that set.
    ///
    /// First up to [`REJECTION_DRAWS_MAX`] draws from the whole wheel (weighted) or the whole
    /// node list (two choices), keeping the first eligible one: drawing from the whole wheel and
    /// skipping ineligible draws is exactly a draw ∝ weight among the eligible (BookKeeper's own
    /// loop). If none is eligible, one pass collects the eligible set into `scratch` and calls
    /// [`NodeWeights::pick`], which also handles an all-zero-weight set. Independent tries, so
    /// the fallback does not bias the result.
    pub fn pick_where<R: Rng + ?Sized>(
        &self,
        node_count: usize,
        eligible: impl Fn(usize) -> bool,
        scratch: &mut Vec<usize>,
        rng: &mut R,
    ) -> Option<usize> {
        let node_count = node_count.min(self.values.len());
        match self.mode {
            Mode::Weighted => {
                let total = self.cumulative.get(node_count.wrapping_sub(1)).copied();
                if let Some(total) = total.filter(|t| *t > 0.0 && t.is_finite()) {
                    for _ in 0..REJECTION_DRAWS_MAX {
                        let u = rng.gen::<f64>() * total;
                        // First node whose running sum exceeds u: it has positive weight.
                        let i = self
                            .cumulative
                            .get(..node_count)
                            .unwrap_or_default()
                            .partition_point(|c| *c <= u);
                        if i < node_count && eligible(i) {
                            return Some(i);
                        }
                    }
                }
            }
            Mode::Choices(choices) => {
                // `choices` uniform draws among the eligible, by rejection from all nodes; every
                // draw is made (a fixed RNG stream), and one that found nothing sends the pick to
                // the pass below.
                let mut best: Option<usize> = None;
                let mut missed = false;
                for _ in 0..choices {
                    let draw = (0..REJECTION_DRAWS_MAX)
                        .map(|_| rng.gen_range(0..node_count.max(1)))
                        .find(|&i| i < node_count && eligible(i));
                    match draw {
                        Some(i) => best = Some(self.less_loaded(best, i)),
                        None => missed = true,
                    }
                }
                if let (Some(best), false) = (best, missed) {
                    return Some(best);
                }
            }
            Mode::LeastLoaded => {}
        }
        scratch.clear();
        scratch.extend((0..node_count).filter(|&i| eligible(i)));
        self.pick(scratch, rng)
    }

    /// Whether node index `i` is one a weighted draw can land on (a positive weight: BP-65 leaves
    /// out busy and unknown nodes); every node under the load-ordered policies, which order
    /// rather than exclude. A caller spreading picks over distinct nodes stops at these, so
    /// spreading never reaches a node the weights left out.
    pub fn drawable(&self, i: usize) -> bool {
        self.mode != Mode::Weighted || self.weight(i) > 0.0
    }

    /// True if load-weighted selection found too few lightly loaded nodes and drew uniformly.
    pub fn fell_back(&self) -> bool {
        self.fell_back
    }

    /// The draw weight of node index `i` (for tests and reports).
    pub fn weight(&self, i: usize) -> f64 {
        self.values.get(i).copied().unwrap_or(0.0)
    }

    /// Node `i`'s load for the least-loaded modes; a node outside the view is never the least.
    fn value(&self, i: usize) -> f64 {
        self.values.get(i).copied().unwrap_or(f64::INFINITY)
    }

    /// Draws one node index among `eligible` (indices into the view's nodes).
    ///
    /// Drawing from the whole wheel and skipping ineligible draws (BookKeeper's loop) gives the
    /// same distribution as drawing ∝ weight among the eligible nodes, which is what this does in
    /// one pass and without BookKeeper's "seen every node" termination problem. If every eligible
    /// node has weight 0 (all filtered out as busy), the draw is uniform among them, so a
    /// placement that can be satisfied always is.
    pub fn pick<R: Rng + ?Sized>(&self, eligible: &[usize], rng: &mut R) -> Option<usize> {
        if eligible.is_empty() {
            return None;
        }
        match self.mode {
            Mode::Weighted => {
                let total: f64 = eligible.iter().map(|&i| self.weight(i)).sum();
                if total <= 0.0 || !total.is_finite() {
                    return eligible.get(rng.gen_range(0..eligible.len())).copied();
                }
                let mut u = rng.gen::<f64>() * total;
                for &i in eligible {
                    u -= self.weight(i);
                    if u < 0.0 {
                        return Some(i);
                    }
                }
                // Rounding left u a hair above zero: the last positive-weight node is the answer.
                eligible
                    .iter()
                    .rev()
                    .copied()
                    .find(|&i| self.weight(i) > 0.0)
            }
            Mode::LeastLoaded => {
                let mut best: Option<usize> = None;
                let mut ties = 0u32;
                for &i in eligible {
                    match best {
                        Some(b) if self.value(i) > self.value(b) => {}
                        Some(b) if self.value(i) == self.value(b) => {
                            ties += 1;
                            if rng.gen_range(0..ties + 1) == 0 {
                                best = Some(i);
                            }
                        }
                        _ => {
                            best = Some(i);
                            ties = 0;
                        }
                    }
                }
                best
            }
            Mode::Choices(choices) => {
                let mut best = None;
                for _ in 0..choices {
                    if let Some(&i) = eligible.get(rng.gen_range(0..eligible.len())) {
                        best = Some(self.less_loaded(best, i));
                    }
                }
                best
            }
        }
    }

    /// The less loaded of the current best and a new candidate; the earlier draw wins a tie.
    fn less_loaded(&self, best: Option<usize>, candidate: usize) -> usize {
        match best {
            Some(b) if self.value(candidate) >= self.value(b) => b,
            _ => candidate,
        }
    }
}

fn loads(view: &ClusterView) -> Vec<f64> {
    // Unknown load sorts last: a node that has not reported is not assumed idle.
    view.nodes
        .iter()
        .map(|node| load_figure(node).unwrap_or(f64::MAX))
        .collect()
}

/// BP-65's filter → fallback → inverse-smoothed weights. Returns the weights and whether the
/// uniform fallback was taken.
fn load_weights(view: &ClusterView, config: &LoadWeightedConfig) -> (Vec<f64>, bool) {
    let n = view.nodes.len();
    let kept: Vec<bool> = view
        .nodes
        .iter()
        .map(|node| {
            node.load
                .io_util_pct()
                .is_some_and(|util| util <= config.load_threshold_pct)
                && load_figure(node).is_some()
        })
        .collect();
    let kept_count = kept.iter().filter(|k| **k).count();
    if (kept_count as f64) <= config.low_load_node_ratio * n as f64 {
        return (vec![1.0; n], true);
    }
    let weights = view
        .nodes
        .iter()
        .zip(&kept)
        .map(|(node, &kept)| {
            let Some(weight) = load_figure(node).filter(|_| kept) else {
                return 0.0;
            };
            if weight > config.weight_max {
                config.weight_overloaded
            } else {
                (config.weight_max - weight).max(config.weight_min)
            }
        })
        .collect();
    (weights, false)
}

/// BookKeeper's disk-weight probabilities from free bytes (docs/design/placement.md §1.1): zero →
/// the smallest nonzero share; capped at `max_multiple` × median (zeros included in the median);
/// capped mass is not redistributed. All zero → uniform.
pub fn disk_weights(free_bytes: &[f64], max_multiple: f64) -> Vec<f64> {
    let total: f64 = free_bytes.iter().sum();
    if total <= 0.0 {
        return vec![1.0; free_bytes.len()];
    }
    let min_nonzero = free_bytes
        .iter()
        .copied()
        .filter(|w| *w > 0.0)
        .fold(f64::MAX, f64::min);
    let mut sorted = free_bytes.to_vec();
    sorted.sort_by(f64::total_cmp);
    // Not empty: the total above is positive.
    let (low, high) = sorted.split_at(sorted.len() / 2);
    let upper = high.first().copied().unwrap_or(0.0);
    let median = if low.len() == high.len() {
        (low.last().copied().unwrap_or(upper) + upper) / 2.0
    } else {
        upper
    };
    let cap = max_multiple * median;
    free_bytes
        .iter()
        .map(|&w| {
            let w = if w > 0.0 { w } else { min_nonzero };
            if cap > 0.0 {
                w.min(cap)
            } else {
                w
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::LoadReport;

    fn view_with(utils: &[f64]) -> ClusterView {
        ClusterView {
            nodes: utils
                .iter()
                .enumerate()
                .map(|(i, &u)| Node {
                    id: i as i32,
                    rack: None,
                    load: LoadReport::with_util(u),
                    write_capacity_bytes_per_second: 0,
                })
                .collect(),
        }
    }

    #[test]
    fn load_weights_follow_bp65() {
        let v = view_with(&[0.0, 50.0, 95.0, 70.0, -1.0, 92.0]);
        let w = NodeWeights::compute(&SelectionPolicy::LoadWeighted(Default::default()), &v);
        assert!(!w.fell_back());
        assert_eq!(w.weight(0), 100.0);
        assert_eq!(w.weight(1), 50.0);
        assert_eq!(w.weight(2), 0.0); // above the 70 % threshold
        assert_eq!(w.weight(3), 30.0); // at the threshold: kept
        assert_eq!(w.weight(4), 0.0); // unknown
                                      // The floor: a kept node at 95 % weight (capacity-based) gets
                                      // 10, over 100 gets 5.
        let mut v = view_with(&[10.0, 10.0, 10.0]);
        v.nodes[0].write_capacity_bytes_per_second = 100;
        v.nodes[0].load.write_bytes_per_second = 95.0;
        v.nodes[1].write_capacity_bytes_per_second = 100;
        v.nodes[1].load.write_bytes_per_second = 130.0;
        let w = NodeWeights::compute(&SelectionPolicy::LoadWeighted(Default::default()), &v);
        assert_eq!(w.weight(0), 10.0);
        assert_eq!(w.weight(1), 5.0);
        assert_eq!(w.weight(2), 90.0);
    }

    #[test]
    fn too_few_light_nodes_falls_back_to_uniform() {
        let v = view_with(&[10.0, 90.0, 90.0, 90.0, 90.0]);
        let w = NodeWeights::compute(&SelectionPolicy::LoadWeighted(Default::default()), &v);
        assert!(w.fell_back());
        assert!((0..5).all(|i| w.weight(i) == 1.0));
    }

    #[test]
    fn disk_weight_rules() {
        // Median of [0, 10, 20, 1000] is 15, cap 45; the zero takes the smallest nonzero (10).
        assert_eq!(
            disk_weights(&[0.0, 10.0, 20.0, 1000.0], 3.0),
            vec![10.0, 10.0, 20.0, 45.0]
        );
        assert_eq!(disk_weights(&[0.0, 0.0], 3.0), vec![1.0, 1.0]);
        assert_eq!(disk_weights(&[1.0, 100.0], 0.0), vec![1.0, 100.0]);
    }

    #[test]
    fn weighted_draw_matches_weights() {
        let v = view_with(&[0.0, 60.0, 80.0]);
        let w = NodeWeights::compute(&SelectionPolicy::LoadWeighted(Default::default()), &v);
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let mut counts = [0u32; 3];
        for _ in 0..14_000 {
            counts[w.pick(&[0, 1, 2], &mut rng).unwrap()] += 1;
        }
        // Weights 100 : 40 : 0 → 10 000 : 4 000 : 0 expected.
        assert_eq!(counts[2], 0);
        assert!((9_600..10_400).contains(&counts[0]), "{counts:?}");
        // Restricting the eligible set renormalises over it.
        assert_eq!(w.pick(&[1], &mut rng), Some(1));
        // Only zero-weight nodes eligible: still answers.
        assert_eq!(w.pick(&[2], &mut rng), Some(2));
        assert_eq!(w.pick(&[], &mut rng), None);
    }

    #[test]
    fn pick_where_matches_pick_over_the_eligible_set() {
        let v = view_with(&[0.0, 60.0, 80.0, 20.0, 50.0]);
        let w = NodeWeights::compute(&SelectionPolicy::LoadWeighted(Default::default()), &v);
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let mut scratch = Vec::new();
        let mut counts = [0u32; 5];
        // Eligible {1, 2, 3}: weights 40 : 0 : 80 → 4 000 : 0 : 8 000 of 12 000.
        for _ in 0..12_000 {
            let i = w
                .pick_where(5, |i| (1..=3).contains(&i), &mut scratch, &mut rng)
                .unwrap();
            counts[i] += 1;
        }
        assert_eq!((counts[0], counts[2], counts[4]), (0, 0, 0), "{counts:?}");
        assert!((3_700..4_300).contains(&counts[1]), "{counts:?}");
        // Only a zero-weight node eligible: the pass finds it; none eligible: None.
        assert_eq!(w.pick_where(5, |i| i == 2, &mut scratch, &mut rng), Some(2));
        assert_eq!(w.pick_where(5, |_| false, &mut scratch, &mut rng), None);
        assert_eq!(w.pick_where(0, |_| true, &mut scratch, &mut rng), None);
        let two = NodeWeights::compute(&SelectionPolicy::PowerOfTwoChoices, &v);
        for _ in 0..100 {
            let i = two
                .pick_where(5, |i| i != 0, &mut scratch, &mut rng)
                .unwrap();
            assert_ne!(i, 0);
        }
    }

    fn view_with_capacity(utils: &[f64], capacity_bytes_per_second: u64) -> ClusterView {
        let mut v = view_with(utils);
        for node in &mut v.nodes {
            node.write_capacity_bytes_per_second = capacity_bytes_per_second;
            if let Some(util) = node.load.io_util_pct() {
                node.load.write_bytes_per_second = util / 100.0 * capacity_bytes_per_second as f64;
            }
        }
        v
    }

    #[test]
    fn many_choices_find_the_least_loaded() {
        let v = view_with(&[30.0, 10.0, 50.0, -1.0]);
        let w = NodeWeights::compute(&SelectionPolicy::PowerOfChoices { choices: 64 }, &v);
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut scratch = Vec::new();
        // 64 draws over 4 nodes miss node 1 with probability (3/4)^64 ≈ 1e-8.
        for _ in 0..100 {
            assert_eq!(w.pick(&[0, 1, 2, 3], &mut rng), Some(1));
            assert_eq!(w.pick_where(4, |_| true, &mut scratch, &mut rng), Some(1));
        }
        // Zero choices count as one: still answers, never panics.
        let w = NodeWeights::compute(&SelectionPolicy::PowerOfChoices { choices: 0 }, &v);
        assert!(w.pick(&[2, 3], &mut rng).is_some());
        assert_eq!(w.pick(&[], &mut rng), None);
    }

    #[test]
    fn own_placements_move_the_next_pick() {
        // Two idle nodes of 100 B/s: after 60 B/s are accounted on node 0, node 1 is the least
        // loaded; releasing them makes node 0 the least loaded again (ties go to the first draw).
        let v = view_with_capacity(&[20.0, 20.0], 100);
        let mut w = NodeWeights::compute(&SelectionPolicy::LeastLoaded, &v);
        let mut rng = ChaCha8Rng::seed_from_u64(6);
        assert!(w.add_write_rate(&v, 0, 60.0));
        assert_eq!(w.weight(0), 80.0);
        assert_eq!(w.pick(&[0, 1], &mut rng), Some(1));
        assert!(w.add_write_rate(&v, 0, -70.0));
        assert_eq!(w.weight(0), 10.0);
        assert_eq!(w.pick(&[0, 1], &mut rng), Some(0));
        // Releasing more than was there floors at zero.
        assert!(w.add_write_rate(&v, 1, -1e9));
        assert_eq!(w.weight(1), 0.0);
        // No effect (and no panic) outside the view, on a non-finite rate, on unknown load or
        // capacity, and on the weighted policies.
        assert!(!w.add_write_rate(&v, 7, 10.0));
        assert!(!w.add_write_rate(&v, 0, f64::NAN));
        let unknown = view_with_capacity(&[-1.0, 20.0], 100);
        let mut u = NodeWeights::compute(&SelectionPolicy::PowerOfChoices { choices: 4 }, &unknown);
        assert!(!u.add_write_rate(&unknown, 0, 10.0));
        assert!(u.add_write_rate(&unknown, 1, 10.0));
        let no_capacity = view_with(&[20.0]);
        let mut n = NodeWeights::compute(&SelectionPolicy::LeastLoaded, &no_capacity);
        assert!(!n.add_write_rate(&no_capacity, 0, 10.0));
        let mut bp65 = NodeWeights::compute(&SelectionPolicy::LoadWeighted(Default::default()), &v);
        assert!(!bp65.add_write_rate(&v, 0, 10.0));
        assert_eq!(bp65.weight(0), 80.0);
    }

    #[test]
    fn least_loaded_and_two_choices() {
        let v = view_with(&[30.0, 10.0, 50.0, -1.0]);
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let w = NodeWeights::compute(&SelectionPolicy::LeastLoaded, &v);
        assert_eq!(w.pick(&[0, 1, 2, 3], &mut rng), Some(1));
        assert_eq!(w.pick(&[0, 3], &mut rng), Some(0));
        let w = NodeWeights::compute(&SelectionPolicy::PowerOfTwoChoices, &v);
        for _ in 0..50 {
            assert_ne!(w.pick(&[0, 1, 2], &mut rng), None);
            // Two draws of {2, 3}: the known load wins unless both draws hit 3.
            let p = w.pick(&[2, 3], &mut rng).unwrap();
            assert!(p == 2 || p == 3);
        }
    }
}
