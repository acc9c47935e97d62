//! Where to cut a bundle, and when to split one automatically (docs/design/placement.md §1.5).
//!
//! Owns the four split algorithms (each returns cut points; [`BundleMap::split`] applies them)
//! and the auto-split rule with its hit counter. It never moves a bundle; splitting only makes
//! smaller units that the shedders in [`super::shed`] can then move.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::bundle::{BundleId, BundleLoad, BundleMap, HashRange, NAMESPACE_BUNDLES_MAX};

/// One partition inside a bundle, as the split algorithms see it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PartitionLoad {
    /// CRC32 of the partition name.
    pub hash: u32,
    /// Its traffic.
    pub load: BundleLoad,
}

/// The four split algorithms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SplitAlgorithm {
    /// One cut in the middle of the hash range (Pulsar's default).
    RangeEquallyDivide,
    /// One cut between the middle two partition hashes, so each half holds half the partitions.
    TopicCountEquallyDivide,
    /// Operator-given positions, those strictly inside the range (manual use).
    SpecifiedPositionsDivide(Vec<u64>),
    /// Cuts so that each piece carries at most the given rate and throughput.
    FlowOrQpsEquallyDivide(FlowLimits),
}

/// Limits for [`SplitAlgorithm::FlowOrQpsEquallyDivide`] and the auto-split rule.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FlowLimits {
    /// Largest message rate (in + out, per second) a bundle should carry (30 000).
    pub msg_rate_max: f64,
    /// Largest throughput (in + out, bytes per second) a bundle should carry (100 MB/s).
    pub throughput_bytes_per_second_max: f64,
    /// Flow split only fires when a limit is exceeded by this fraction (0.1).
    pub difference_fraction: f64,
}

impl Default for FlowLimits {
    fn default() -> Self {
        Self {
            msg_rate_max: 30_000.0,
            throughput_bytes_per_second_max: 100.0 * 1024.0 * 1024.0,
            difference_fraction: 0.1,
        }
    }
}

impl SplitAlgorithm {
    /// Cut points for a bundle covering `range` that holds `partitions`; empty means "do not
    /// split". Every returned cut lies strictly inside the range.
    pub fn cuts(&self, range: HashRange, partitions: &[PartitionLoad]) -> Vec<u64> {
        let mut hashes: Vec<u64> = partitions.iter().map(|p| u64::from(p.hash)).collect();
        hashes.sort_unstable();
        let inside = |c: &u64| range.lo < *c && *c < range.hi;
        let cuts = match self {
            Self::RangeEquallyDivide => vec![range.lo + (range.hi - range.lo) / 2],
            Self::TopicCountEquallyDivide => {
                let n = hashes.len();
                if n < 2 {
                    return Vec::new();
                }
                // n ≥ 2: both middle hashes exist.
                let (Some(&a), Some(&b)) = (hashes.get(n / 2 - 1), hashes.get(n / 2)) else {
                    return Vec::new();
                };
                // a + ⌈(b − a)/2⌉ puts a in the lower and b in the upper half when they differ.
                vec![a + (b - a).div_ceil(2)]
            }
            Self::SpecifiedPositionsDivide(positions) => {
                if hashes.len() < 2 {
                    return Vec::new();
                }
                let mut p = positions.clone();
                p.sort_unstable();
                p.dedup();
                p
            }
            Self::FlowOrQpsEquallyDivide(limits) => flow_cuts(limits, partitions),
        };
        cuts.into_iter().filter(inside).collect()
    }
}

fn flow_cuts(limits: &FlowLimits, partitions: &[PartitionLoad]) -> Vec<u64> {
    let mut active: Vec<&PartitionLoad> = partitions
        .iter()
        .filter(|p| p.load.msg_rate_per_second > 0.0 || p.load.throughput_bytes_per_second > 0.0)
        .collect();
    active.sort_by_key(|p| p.hash);
    let rate: f64 = active.iter().map(|p| p.load.msg_rate_per_second).sum();
    let tput: f64 = active
        .iter()
        .map(|p| p.load.throughput_bytes_per_second)
        .sum();
    let over = 1.0 + limits.difference_fraction;
    if active.len() < 2
        || (rate < limits.msg_rate_max * over
            && tput < limits.throughput_bytes_per_second_max * over)
    {
        return Vec::new();
    }
    let mut cuts = Vec::new();
    let (mut acc_rate, mut acc_tput) = (0.0, 0.0);
    let mut previous: Option<u64> = None;
    for p in &active {
        if let Some(prev) = previous {
            let full = acc_rate > limits.msg_rate_max
                || acc_tput > limits.throughput_bytes_per_second_max
                || acc_rate + p.load.msg_rate_per_second > limits.msg_rate_max
                || acc_tput + p.load.throughput_bytes_per_second
                    > limits.throughput_bytes_per_second_max;
            let here = u64::from(p.hash);
            // Equal hashes cannot be separated by any cut; keep them together.
            if full && here > prev {
                cuts.push(prev + (here - prev) / 2 + 1);
                acc_rate = 0.0;
                acc_tput = 0.0;
            }
        }
        acc_rate += p.load.msg_rate_per_second;
        acc_tput += p.load.throughput_bytes_per_second;
        previous = Some(u64::from(p.hash));
    }
    cuts
}

/// When a bundle is split automatically.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutoSplitConfig {
    /// Split a bundle holding more partitions than this (1000).
    pub partitions_max: usize,
    /// Long-term traffic limits (30 000 msg/s, 100 MB/s).
    pub flow: FlowLimits,
    /// Consecutive cycles the condition must hold before splitting (3): one busy minute is not
    /// worth a split, which can never be undone.
    pub hit_count_threshold: u32,
    /// At most this many splits per cycle (10).
    pub splits_per_cycle_max: usize,
    /// Which algorithm places the cuts.
    pub algorithm: SplitAlgorithm,
    /// Skiff's addition (0 = off, Pulsar's behaviour): also split a bundle whose long-term message
    /// rate or throughput exceeds this share of an average broker's. Pulsar's limits are absolute
    /// (30 000 msg/s), so on small or busy clusters a bundle can be too big to move anywhere
    /// without overloading the destination; a relative limit keeps every bundle movable.
    pub broker_share_max: f64,
}

/// Skiff's relative split limit: no bundle above 50 % of an average broker's traffic, so a pair
/// shedder can always find a bundle that moves without swapping the pair's ranks.
pub const SKIFF_BROKER_SHARE_MAX: f64 = 0.5;

impl AutoSplitConfig {
    /// Pulsar's limits plus Skiff's relative limit ([`SKIFF_BROKER_SHARE_MAX`]).
    pub fn skiff() -> Self {
        Self {
            broker_share_max: SKIFF_BROKER_SHARE_MAX,
            ..Self::default()
        }
    }
}

impl Default for AutoSplitConfig {
    fn default() -> Self {
        Self {
            partitions_max: 1000,
            flow: FlowLimits::default(),
            hit_count_threshold: 3,
            splits_per_cycle_max: 10,
            algorithm: SplitAlgorithm::RangeEquallyDivide,
            broker_share_max: 0.0,
        }
    }
}

/// One bundle's inputs to the auto-split rule.
#[derive(Debug, Clone, PartialEq)]
pub struct SplitInput {
    /// The bundle.
    pub id: BundleId,
    /// Its partitions.
    pub partitions: Vec<PartitionLoad>,
    /// Its long-term traffic.
    pub long_term: BundleLoad,
}

/// The auto-split rule with its per-bundle hit counters.
#[derive(Debug, Clone, Default)]
pub struct SplitPlanner {
    config: AutoSplitConfig,
    hits: BTreeMap<BundleId, u32>,
}

impl SplitPlanner {
    /// A planner with `config`.
    pub fn new(config: AutoSplitConfig) -> Self {
        Self {
            config,
            hits: BTreeMap::new(),
        }
    }

    /// One cycle over every bundle of the cluster (`inputs`), which `broker_count` brokers
    /// share: returns the bundles to split and their cuts. Bundles are considered in the order
    /// given; counters of bundles that no longer qualify are cleared.
    pub fn plan(
        &mut self,
        map: &BundleMap,
        inputs: &[SplitInput],
        broker_count: usize,
    ) -> Vec<(BundleId, Vec<u64>)> {
        let c = &self.config;
        let (mut rate_max, mut tput_max) =
            (c.flow.msg_rate_max, c.flow.throughput_bytes_per_second_max);
        if c.broker_share_max > 0.0 && broker_count > 0 {
            let brokers = broker_count as f64;
            let rate: f64 = inputs.iter().map(|i| i.long_term.msg_rate_per_second).sum();
            let tput: f64 = inputs
                .iter()
                .map(|i| i.long_term.throughput_bytes_per_second)
                .sum();
            rate_max = rate_max.min(c.broker_share_max * rate / brokers);
            tput_max = tput_max.min(c.broker_share_max * tput / brokers);
        }
        let mut out = Vec::new();
        let mut next_hits = BTreeMap::new();
        for input in inputs {
            let hot = input.partitions.len() > c.partitions_max
                || input.long_term.msg_rate_per_second > rate_max
                || input.long_term.throughput_bytes_per_second > tput_max;
            if !hot || !Self::divisible(map, input) {
                continue;
            }
            let hits = self.hits.get(&input.id).copied().unwrap_or(0) + 1;
            if hits >= c.hit_count_threshold && out.len() < c.splits_per_cycle_max {
                let cuts = c.algorithm.cuts(input.id.range, &input.partitions);
                if !cuts.is_empty() {
                    out.push((input.id.clone(), cuts));
                    continue;
                }
            }
            let _ = next_hits.insert(input.id.clone(), hits);
        }
        self.hits = next_hits;
        out
    }

    /// Cuts for a bundle that a shedder asked to split ([`Plan::splits`]: a pair that cannot move
    /// any whole bundle without inverting itself), with the configured algorithm and the same
    /// limits as auto-split. `None` if it cannot be split (fewer than two partitions, a full
    /// namespace, or no cut inside its range).
    ///
    /// [`Plan::splits`]: super::shed::Plan::splits
    pub fn requested(&self, map: &BundleMap, input: &SplitInput) -> Option<Vec<u64>> {
        if !Self::divisible(map, input) {
            return None;
        }
        let cuts = self
            .config
            .algorithm
            .cuts(input.id.range, &input.partitions);
        (!cuts.is_empty()).then_some(cuts)
    }

    /// A split can separate something (two partitions at least) and the namespace has room.
    fn divisible(map: &BundleMap, input: &SplitInput) -> bool {
        input.partitions.len() >= 2 && map.bundle_count(&input.id.namespace) < NAMESPACE_BUNDLES_MAX
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::bundle::{NamespaceRule, HASH_SPACE};

    fn part(hash: u32, rate: f64) -> PartitionLoad {
        PartitionLoad {
            hash,
            load: BundleLoad {
                msg_rate_per_second: rate,
                throughput_bytes_per_second: rate,
            },
        }
    }

    const WHOLE: HashRange = HashRange {
        lo: 0,
        hi: HASH_SPACE,
    };

    #[test]
    fn range_and_count_divide() {
        assert_eq!(
            SplitAlgorithm::RangeEquallyDivide.cuts(WHOLE, &[]),
            vec![1 << 31]
        );
        let tiny = HashRange { lo: 5, hi: 6 };
        assert!(SplitAlgorithm::RangeEquallyDivide
            .cuts(tiny, &[])
            .is_empty());
        let ps = [part(10, 1.0), part(20, 1.0), part(30, 1.0), part(40, 1.0)];
        assert_eq!(
            SplitAlgorithm::TopicCountEquallyDivide.cuts(WHOLE, &ps),
            vec![25]
        );
        assert!(SplitAlgorithm::TopicCountEquallyDivide
            .cuts(WHOLE, &ps[..1])
            .is_empty());
    }

    #[test]
    fn specified_positions_keep_inside_only() {
        let ps = [part(10, 1.0), part(20, 1.0)];
        let range = HashRange { lo: 5, hi: 100 };
        let algo = SplitAlgorithm::SpecifiedPositionsDivide(vec![200, 50, 5, 15, 50]);
        assert_eq!(algo.cuts(range, &ps), vec![15, 50]);
        assert!(algo.cuts(range, &ps[..1]).is_empty());
    }

    #[test]
    fn flow_divide_caps_each_piece() {
        let limits = FlowLimits {
            msg_rate_max: 100.0,
            throughput_bytes_per_second_max: 1e12,
            difference_fraction: 0.1,
        };
        let algo = SplitAlgorithm::FlowOrQpsEquallyDivide(limits);
        let ps = [
            part(10, 60.0),
            part(20, 60.0),
            part(30, 0.0),
            part(40, 60.0),
        ];
        // 60 | 60 | 60: cuts between 10/20 and 20/40 (the idle partition is ignored).
        assert_eq!(algo.cuts(WHOLE, &ps), vec![16, 31]);
        // Below limit × 1.1: no split.
        assert!(algo
            .cuts(WHOLE, &[part(10, 50.0), part(20, 55.0)])
            .is_empty());
    }

    #[test]
    fn auto_split_needs_consecutive_hits() {
        let mut map = BundleMap::new(NamespaceRule::Topic, 1).unwrap();
        let id = map.locate("t", 0);
        let input = SplitInput {
            id: id.clone(),
            partitions: vec![part(1, 1.0), part(2, 1.0)],
            long_term: BundleLoad {
                msg_rate_per_second: 50_000.0,
                throughput_bytes_per_second: 0.0,
            },
        };
        let mut planner = SplitPlanner::new(AutoSplitConfig::default());
        assert!(planner
            .plan(&map, std::slice::from_ref(&input), 1)
            .is_empty());
        assert!(planner
            .plan(&map, std::slice::from_ref(&input), 1)
            .is_empty());
        let cool = SplitInput {
            long_term: BundleLoad::default(),
            ..input.clone()
        };
        assert!(planner.plan(&map, &[cool], 1).is_empty());
        assert!(planner
            .plan(&map, std::slice::from_ref(&input), 1)
            .is_empty());
        assert!(planner
            .plan(&map, std::slice::from_ref(&input), 1)
            .is_empty());
        let got = planner.plan(&map, std::slice::from_ref(&input), 1);
        assert_eq!(got, vec![(id, vec![1 << 31])]);
    }

    #[test]
    fn relative_limit_splits_a_bundle_too_big_for_its_brokers() {
        let mut map = BundleMap::new(NamespaceRule::Topic, 2).unwrap();
        let _ = map.locate("t", 0);
        let ids: Vec<BundleId> = map.bundles().map(|(id, _, _)| id).collect();
        let input = |id: &BundleId, rate: f64| SplitInput {
            id: id.clone(),
            partitions: vec![part(1, 1.0), part(2, 1.0)],
            long_term: BundleLoad {
                msg_rate_per_second: rate,
                throughput_bytes_per_second: rate,
            },
        };
        let inputs = [input(&ids[0], 900.0), input(&ids[1], 100.0)];
        // Far below Pulsar's absolute limits: never split without the relative limit.
        let mut pulsar = SplitPlanner::new(AutoSplitConfig::default());
        // 900 of 1000 over 2 brokers is 1.8 average brokers, above 0.5: split on the 3rd hit.
        let mut skiff = SplitPlanner::new(AutoSplitConfig::skiff());
        for _ in 0..2 {
            assert!(pulsar.plan(&map, &inputs, 2).is_empty());
            assert!(skiff.plan(&map, &inputs, 2).is_empty());
        }
        assert!(pulsar.plan(&map, &inputs, 2).is_empty());
        let got = skiff.plan(&map, &inputs, 2);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, ids[0]);
    }

    proptest! {
        #[test]
        fn split_never_loses_or_duplicates_a_partition(
            names in proptest::collection::vec(("[a-z]{1,6}", 0u32..64, 0.0f64..1000.0), 1..80),
            algo_index in 0usize..4,
            positions in proptest::collection::vec(any::<u32>(), 0..5),
            rounds in 1usize..6,
        ) {
            let mut map = BundleMap::new(NamespaceRule::Prefix { separator: '.', segments: 1 }, 2)
                .unwrap();
            let topic = |n: &str| format!("ns.{n}");
            for (n, p, _) in &names {
                let _ = map.locate(&topic(n), *p);
            }
            let algo = match algo_index {
                0 => SplitAlgorithm::RangeEquallyDivide,
                1 => SplitAlgorithm::TopicCountEquallyDivide,
                2 => SplitAlgorithm::SpecifiedPositionsDivide(
                    positions.iter().map(|&p| u64::from(p)).collect()),
                _ => SplitAlgorithm::FlowOrQpsEquallyDivide(FlowLimits {
                    msg_rate_max: 500.0,
                    throughput_bytes_per_second_max: 1e12,
                    difference_fraction: 0.1,
                }),
            };
            let loads: Vec<(u32, BundleLoad)> = names
                .iter()
                .map(|(n, p, r)| (crate::bundle::partition_hash(&topic(n), *p),
                    BundleLoad { msg_rate_per_second: *r, throughput_bytes_per_second: *r }))
                .collect();
            for _ in 0..rounds {
                let ids: Vec<BundleId> = map.bundles().map(|(id, _, _)| id).collect();
                for id in ids {
                    let parts: Vec<PartitionLoad> = loads
                        .iter()
                        .filter(|(h, _)| id.range.contains(*h))
                        .map(|(h, l)| PartitionLoad { hash: *h, load: *l })
                        .collect();
                    let cuts = algo.cuts(id.range, &parts);
                    for c in &cuts {
                        prop_assert!(id.range.lo < *c && *c < id.range.hi);
                    }
                    if !cuts.is_empty() {
                        let _ = map.split(&id, &cuts);
                    }
                }
            }
            // Ranges tile [0, 2^32) exactly, so every hash is in exactly one bundle.
            let ranges: Vec<HashRange> = map.bundles().map(|(id, _, _)| id.range).collect();
            prop_assert_eq!(ranges.first().map(|r| r.lo), Some(0));
            prop_assert_eq!(ranges.last().map(|r| r.hi), Some(HASH_SPACE));
            for w in ranges.windows(2) {
                prop_assert_eq!(w[0].hi, w[1].lo);
                prop_assert!(w[0].lo < w[0].hi);
            }
            for (n, p, _) in &names {
                let h = crate::bundle::partition_hash(&topic(n), *p);
                let holders = ranges.iter().filter(|r| r.contains(h)).count();
                prop_assert_eq!(holders, 1);
                let found = map.bundle_of(&topic(n), *p).unwrap();
                prop_assert!(found.range.contains(h));
            }
        }
    }
}
