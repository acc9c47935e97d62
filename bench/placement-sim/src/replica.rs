//! Sim A: replica placement on a 255-node cluster (a BP-65 reproduction).
//!
//! Ledgers (partitions) with heavy-tailed write rates roll over every 10–240 min (or at 2 GB);
//! at each rollover the owning placer (one of 100 brokers) picks a new ensemble with Skiff's real
//! `ensemble::build` and a selection policy, from its own stale copy of the nodes' load reports.
//! Nodes are fluid queues; the latency proxy is M/M/1 p99 plus backlog delay. One second per step.
//!
//! Each node's demand is also kept in its parts (placed base rates, burst extra, background
//! noise) for the variance budget, and a placer may keep a private view with its own placements
//! accounted (Skiff's power of d choices). Diagnostic switches (equal capacities, no noise, no
//! bursts) exist only to measure those parts; the model of docs/design/placement.md §3.1 is
//! [`ReplicaConfig::bp65`].

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use skiff_placement::ensemble;
use skiff_placement::select::NodeWeights;
use skiff_placement::{
    ClusterView, LoadReport, LoadWeightedConfig, Node, RackPolicy, SelectionPolicy,
};

use super::stats;

/// Everything that shapes one Sim A run.
#[derive(Debug, Clone)]
pub struct ReplicaConfig {
    /// Storage nodes.
    pub node_count: usize,
    /// Racks (nodes are spread round-robin).
    pub rack_count: usize,
    /// Ledgers (one per partition).
    pub ledger_count: usize,
    /// Independent placers, each with its own stale view.
    pub placer_count: usize,
    /// Seconds simulated in total.
    pub duration_s: u64,
    /// Seconds before statistics start (lets the initial, load-blind placement roll over).
    pub warmup_s: u64,
    /// Seconds between a placer's view refreshes (random phase per placer).
    pub refresh_s: u64,
    /// Ensemble size, write quorum, ack quorum.
    pub quorum: (usize, usize, usize),
    /// Share of nodes with half the journal capacity.
    pub half_capacity_fraction: f64,
    /// Mean node utilisation the ledger rates are scaled to (diurnal mean, bursts included).
    pub mean_util: f64,
    /// If set, 30 % of ledgers roll over within 10 s at this second (after a broker restart).
    pub herding_at_s: Option<u64>,
    /// How hot one ledger may be (as if so hot a topic had been given more partitions).
    pub ledger_cap: LedgerCap,
    /// A bound, not a placer: every placement sees the true current load of every node (no
    /// staleness, no noise, no concurrency). With greedy least-loaded it shows how far any
    /// placer could cut dispersion in this model.
    pub oracle_view: bool,
    /// Own-placement accounting (for Skiff's power of d choices): each placer adds the predicted
    /// per-member rate of every ledger it placed since its last refresh to its private view, and
    /// takes it off the previous ledger's members. The prediction is the ledger's base rate.
    pub own_accounting: bool,
    /// Diagnostic: every node gets the mean capacity (175 MB/s) instead of 150–200.
    pub capacity_equal: bool,
    /// σ of the per-node AR(1) background noise as a share of capacity (spec: 0.05).
    pub noise_sigma_fraction: f64,
    /// Share of ledgers bursting at any time (spec: about 0.05).
    pub burst_share: f64,
    /// Seed of the workload (same for every policy: common random numbers).
    pub seed: u64,
}

impl ReplicaConfig {
    /// The spec's cluster: 255 nodes in 15 racks, 20 000 ledgers, 100 placers, (2, 2, 2).
    pub fn bp65(seed: u64) -> Self {
        Self {
            node_count: 255,
            rack_count: 15,
            ledger_count: 20_000,
            placer_count: 100,
            duration_s: 6 * 3600,
            warmup_s: 2 * 3600,
            refresh_s: 30,
            quorum: (2, 2, 2),
            half_capacity_fraction: 0.0,
            mean_util: 0.55,
            herding_at_s: None,
            ledger_cap: LedgerCap::None,
            oracle_view: false,
            own_accounting: false,
            capacity_equal: false,
            noise_sigma_fraction: NOISE_SIGMA_FRACTION,
            burst_share: BURST_SHARE,
            seed,
        }
    }

    /// A small configuration for tests.
    pub fn small(seed: u64) -> Self {
        Self {
            node_count: 20,
            rack_count: 3,
            ledger_count: 200,
            placer_count: 5,
            duration_s: 900,
            warmup_s: 300,
            ..Self::bp65(seed)
        }
    }
}

/// A cap on one ledger's per-member write rate while it bursts, as a share of a node's capacity.
/// Capped rates are cut to the cap and the others scaled up to keep the mean utilisation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LedgerCap {
    /// Uncapped lognormal rates (the model of docs/design/placement.md §3.1).
    None,
    /// A bursting ledger needs at most this share of an average node (the earlier capped
    /// variant: half an average node can still fill a half-capacity one).
    MeanNodeShare(f64),
    /// A bursting ledger needs at most this share of the smallest node (docs/design/placement.md
    /// §3.3b's recalibrated regime: no single ledger, even bursting, takes more than this share of
    /// any node).
    SmallestNodeShare(f64),
}

/// Ledger rollover bounds (Pulsar's managedLedgerMin/MaxLedgerRolloverTimeMinutes).
const ROLLOVER_MIN_S: u64 = 10 * 60;
const ROLLOVER_MAX_S: u64 = 240 * 60;
/// Size rollover (managedLedgerMaxSizePerLedgerMbytes), in MB.
const ROLLOVER_MB: f64 = 2048.0;
/// Burst model: about 5 % of ledgers are bursting at any time, ×5, for 1–3 minutes.
const BURST_SHARE: f64 = 0.05;
/// The multiplier of a bursting ledger's rate.
pub const BURST_MULTIPLIER: f64 = 5.0;
const BURST_MIN_S: u64 = 60;
const BURST_MAX_S: u64 = 180;
/// Diurnal swing ±30 %, compressed to one period over the measured span.
pub const DIURNAL_AMPLITUDE: f64 = 0.3;
/// Background noise: AR(1) with σ = 5 % of capacity and per-second correlation 0.95.
const NOISE_SIGMA_FRACTION: f64 = 0.05;
const NOISE_PHI: f64 = 0.95;
/// Journal capacity is uniform in this range, MB/s; the `capacity_equal` diagnostic uses the mean.
const CAPACITY_MIN_MBPS: f64 = 150.0;
const CAPACITY_MAX_MBPS: f64 = 200.0;
/// A write this slow or slower is in the tail BP-65 removed (its p99 went from 10–20 s to under
/// 1 s), ms.
pub const TAIL_MS: f64 = 1_000.0;
/// Seed offset of the placers' refresh phases (a stream of their own, see `run`).
const PHASE_STREAM: u64 = 0x005E_ED0F_9A5E;
/// Latency is sampled every this many seconds.
const LATENCY_SAMPLE_S: u64 = 10;
/// Entry size for the service time: S = 1 MB / μ.
const ENTRY_MB: f64 = 1.0;
/// Node-side smoothing window (BP-65's W = 3 one-second samples).
const UTIL_WINDOW: usize = 3;

/// Per-minute figures of one run.
#[derive(Debug, Clone, Default)]
pub struct Window {
    /// Std of per-node write throughput, MB/s.
    pub std_mbps: f64,
    /// Max − min of per-node write throughput, MB/s.
    pub range_mbps: f64,
    /// Mean throughput of the 10 busiest nodes, MB/s.
    pub top10_mbps: f64,
    /// Highest node utilisation (minute mean), percent.
    pub util_max_pct: f64,
    /// Nodes whose minute-mean demand exceeded capacity.
    pub nodes_over: usize,
    /// Write-rate-weighted p99 latency proxy, ms: exact, with no ceiling (a backlog of any size
    /// shows as its true delay).
    pub p99_ms: f64,
    /// Placements received by the most-chosen node ÷ the expected share.
    pub herding: f64,
    /// Ensembles placed in the window (the chance level of `herding` depends on it).
    pub decisions: u32,
    /// Share of the write rate whose latency was at least [`TAIL_MS`].
    pub tail_share: f64,
    /// Share of the write rate on ledgers bursting at the sample ...
    pub bursting_share: f64,
    /// ... and the same share among the writes of at least [`TAIL_MS`] (0 if there were none).
    pub tail_bursting_share: f64,
    /// Std of per-node utilisation (throughput ÷ capacity, minute mean), percentage points.
    pub util_std_pct: f64,
    /// Std of per-node replica write throughput without the background noise, MB/s.
    pub replica_std_mbps: f64,
    /// Variance budget, MB/s: std across nodes of the placed base rates (Σ r·Qw/E × diurnal,
    /// no bursts, no noise) ...
    pub steady_std_mbps: f64,
    /// ... of the burst extra on top of them ...
    pub burst_std_mbps: f64,
    /// ... and of the background noise (with the clamp at zero demand).
    pub noise_std_mbps: f64,
    /// Std of throughput if every node ran at the same utilisation as the cluster (the spread
    /// heterogeneous capacities force on an equal-utilisation placement), MB/s.
    pub equal_util_std_mbps: f64,
    /// Share of the write rate on ledgers whose own per-member rate exceeds the capacity of one
    /// of their nodes (no placement can keep such a node out of backlog).
    pub oversize_share: f64,
}

/// Summary of one run.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// Policy label.
    pub label: String,
    /// Per-minute figures after warm-up.
    pub windows: Vec<Window>,
    /// Share of placements where load-weighting fell back to uniform.
    pub fallback_share: f64,
    /// Std of per-node base throughput (no noise, no bursts) at the end of warm-up, MB/s.
    pub static_std_mbps: f64,
    /// Balls-in-bins prediction of that std for uniform placement, MB/s.
    pub static_std_predicted_mbps: f64,
    /// The hottest ledger's write rate while bursting, as a share of the cluster's mean write
    /// rate (bursts included): more than 1 % means its own writes alone can set the p99.
    pub hottest_burst_weight_share: f64,
    /// The hottest ledger's per-member rate while bursting, as a share of the smallest node's
    /// capacity (what one ledger alone adds to a node).
    pub hottest_burst_node_share: f64,
}

impl RunResult {
    /// Peak over windows of a figure.
    pub fn peak(&self, f: impl Fn(&Window) -> f64) -> f64 {
        stats::max(&self.windows.iter().map(f).collect::<Vec<_>>())
    }

    /// Median over windows of a figure.
    pub fn median(&self, f: impl Fn(&Window) -> f64) -> f64 {
        stats::median(&self.windows.iter().map(f).collect::<Vec<_>>())
    }
}

/// The policies Sim A compares, with their labels.
pub fn policies() -> Vec<(&'static str, SelectionPolicy)> {
    vec![
        ("(a) uniform random", SelectionPolicy::Uniform),
        (
            "(b) disk weight, equal disks",
            SelectionPolicy::DiskWeight { max_multiple: 3.0 },
        ),
        (
            "(c) BP-65 load-weighted, ratio 0.3",
            SelectionPolicy::LoadWeighted(LoadWeightedConfig::default()),
        ),
        (
            "(c') BP-65 load-weighted, ratio 0.5",
            SelectionPolicy::LoadWeighted(LoadWeightedConfig {
                low_load_node_ratio: 0.5,
                ..LoadWeightedConfig::default()
            }),
        ),
        ("(d) inverse weight, no floor, no filter", unsmoothed()),
        ("(e) greedy least-loaded", SelectionPolicy::LeastLoaded),
        (
            "(f) power of two choices",
            SelectionPolicy::PowerOfTwoChoices,
        ),
    ]
}

/// Policy (d): BP-65's inverse weighting without the floor and without the 70 % filter.
pub fn unsmoothed() -> SelectionPolicy {
    SelectionPolicy::LoadWeighted(LoadWeightedConfig {
        load_threshold_pct: 100.0,
        weight_min: 0.0,
        weight_overloaded: 0.0,
        ..LoadWeightedConfig::default()
    })
}

struct Workload {
    rate_mbps: Vec<f64>,
    capacity_mbps: Vec<f64>,
}

fn workload(config: &ReplicaConfig) -> Workload {
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed ^ 0xA11CE);
    let capacity_mbps: Vec<f64> = (0..config.node_count)
        .map(|_| {
            // Drawn even when unused, so every variant keeps the same ledger rates.
            let drawn = rng.gen_range(CAPACITY_MIN_MBPS..CAPACITY_MAX_MBPS);
            let c = if config.capacity_equal {
                (CAPACITY_MIN_MBPS + CAPACITY_MAX_MBPS) / 2.0
            } else {
                drawn
            };
            if rng.gen::<f64>() < config.half_capacity_fraction {
                c / 2.0
            } else {
                c
            }
        })
        .collect();
    let raw: Vec<f64> = (0..config.ledger_count)
        .map(|_| (1.5 * stats::normal(&mut rng)).exp())
        .collect();
    // Each ledger puts r·Qw on the cluster; bursts add BURST_SHARE × (multiplier − 1) on average.
    let (_, write_quorum, _) = config.quorum;
    let burst_factor = 1.0 + config.burst_share * (BURST_MULTIPLIER - 1.0);
    let demand: f64 = raw.iter().sum::<f64>() * write_quorum as f64 * burst_factor;
    let capacity_total: f64 = capacity_mbps.iter().sum();
    let scale = config.mean_util * capacity_total / demand;
    let mut rate_mbps: Vec<f64> = raw.iter().map(|r| r * scale).collect();
    let bursting_cap_mbps = match config.ledger_cap {
        LedgerCap::None => None,
        LedgerCap::MeanNodeShare(share) => Some(share * capacity_total / config.node_count as f64),
        LedgerCap::SmallestNodeShare(share) => {
            Some(share * capacity_mbps.iter().copied().fold(f64::INFINITY, f64::min))
        }
    };
    if let Some(bursting_max_mbps) = bursting_cap_mbps.filter(|c| *c > 0.0 && c.is_finite()) {
        // Cap, then rescale the rest to keep the mean utilisation; a few rounds converge.
        let (ensemble_size, write_quorum, _) = config.quorum;
        let per_member = write_quorum as f64 / ensemble_size as f64;
        let cap = bursting_max_mbps / (BURST_MULTIPLIER * per_member);
        let target: f64 = rate_mbps.iter().sum();
        for _ in 0..8 {
            rate_mbps.iter_mut().for_each(|r| *r = r.min(cap));
            let sum: f64 = rate_mbps.iter().sum();
            let uncapped: f64 = rate_mbps.iter().filter(|r| **r < cap).sum();
            if uncapped <= 0.0 {
                break;
            }
            let factor = 1.0 + (target - sum) / uncapped;
            rate_mbps
                .iter_mut()
                .filter(|r| **r < cap)
                .for_each(|r| *r *= factor);
        }
        rate_mbps.iter_mut().for_each(|r| *r = r.min(cap));
    }
    Workload {
        rate_mbps,
        capacity_mbps,
    }
}

/// Runs one policy over the workload of `config`.
pub fn run(config: &ReplicaConfig, label: &str, policy: &SelectionPolicy) -> RunResult {
    eprintln!("sim A: {label} (refresh {} s)", config.refresh_s);
    let n = config.node_count;
    let (e, qw, qa) = config.quorum;
    let w = workload(config);
    // Workload randomness (schedule, bursts, noise) is one stream, placement another, so every
    // policy faces the same events.
    let mut wrng = ChaCha8Rng::seed_from_u64(config.seed);
    let mut prng = ChaCha8Rng::seed_from_u64(config.seed.wrapping_add(0x9E37_79B9));
    let racks = RackPolicy::default();
    let mut view = ClusterView {
        nodes: (0..n)
            .map(|i| Node {
                id: i as i32,
                rack: Some(format!("rack{}", i % config.rack_count)),
                load: LoadReport::unknown(),
                write_capacity_bytes_per_second: (w.capacity_mbps[i] * 1e6) as u64,
            })
            .collect(),
    };
    let rack_index = ensemble::RackIndex::new(&view);
    let duration = config.duration_s as usize;
    let refresh = config.refresh_s.max(1) as usize;
    // Published (smoothed) metrics per second, kept for the longest staleness a view can have.
    let history_len = refresh + 2;
    let mut published_util = vec![vec![0.0f64; n]; history_len];
    let mut published_wbps = vec![vec![0.0f64; n]; history_len];
    // Refresh phases come from their own stream: drawn from the workload stream, the number of
    // draws `gen_range(0..refresh)` consumes depends on `refresh` (rejection sampling), so every
    // refresh period got a different schedule, bursts and noise, and the staleness sweep did
    // not compare like with like (uniform random, which ignores the view, came out different
    // at 30 s and 300 s).
    let mut phase_rng = ChaCha8Rng::seed_from_u64(config.seed ^ PHASE_STREAM);
    let phase: Vec<usize> = (0..config.placer_count)
        .map(|_| phase_rng.gen_range(0..refresh))
        .collect();

    let ledgers = config.ledger_count;
    let mut members = vec![0u32; ledgers * e];
    let mut multiplier = vec![1.0f64; ledgers];
    let mut next_roll = vec![0u64; ledgers];
    let mut rolls: Vec<Vec<u32>> = vec![Vec::new(); duration + 1];
    let mut burst_ends: Vec<Vec<u32>> = vec![Vec::new(); duration + BURST_MAX_S as usize + 1];
    let mut base = vec![0.0f64; n];
    let per_member = |rate: f64, mult: f64| rate * mult * qw as f64 / e as f64;

    let mut placements = vec![0u32; n];
    let mut placements_total = 0u32;
    let mut window_decisions = 0u32;
    let mut fallbacks = 0u64;
    let mut decisions = 0u64;

    // A placer's view is the row published at its last refresh, so every placer that refreshed
    // in the same second holds the same view and gets the same weights: compute them once per
    // (published second) instead of once per placement (255 reports rebuilt per rollover was
    // most of the old run time). Keyed by the absolute second, so a reused ring row never hits a
    // stale entry; `None` = the all-unknown view at t = 0.
    let mut weights_cache: Vec<Option<(Option<usize>, NodeWeights)>> = vec![None; history_len];
    // Own-placement accounting: each placer's private copy of the view it refreshed last, with
    // its own placements since then added (keyed like the cache).
    let mut private: Vec<Option<(Option<usize>, NodeWeights)>> = vec![None; config.placer_count];
    let mut place = |ledger: usize,
                     t: usize,
                     view: &mut ClusterView,
                     published_util: &[Vec<f64>],
                     published_wbps: &[Vec<f64>],
                     truth_mbps: &[f64],
                     previous: &[u32],
                     prng: &mut ChaCha8Rng|
     -> (Vec<u32>, bool) {
        let placer = ledger % config.placer_count;
        // The view this placer holds: the metrics published at its last refresh.
        let age = (t + phase[placer]) % refresh;
        let seen = t.saturating_sub(age + 1);
        let row = seen % history_len;
        let key = (t > 0).then_some(seen);
        let fresh = matches!(&weights_cache[row], Some((k, _)) if *k == key);
        if config.oracle_view && t > 0 {
            for (i, node) in view.nodes.iter_mut().enumerate() {
                let util = 100.0 * truth_mbps[i] / w.capacity_mbps[i];
                node.load = LoadReport {
                    write_bytes_per_second: truth_mbps[i] * 1e6,
                    disk_free_bytes: 1e12,
                    ..LoadReport::with_util(util)
                };
            }
            weights_cache[row] = Some((None, NodeWeights::compute(policy, view)));
        } else if !fresh {
            for (i, node) in view.nodes.iter_mut().enumerate() {
                let util = if t == 0 { -1.0 } else { published_util[row][i] };
                node.load = LoadReport {
                    write_bytes_per_second: if t == 0 {
                        -1.0
                    } else {
                        published_wbps[row][i] * 1e6
                    },
                    disk_free_bytes: 1e12,
                    ..LoadReport::with_util(util)
                };
            }
            weights_cache[row] = Some((key, NodeWeights::compute(policy, view)));
        }
        let Some((_, shared)) = &weights_cache[row] else {
            unreachable!("filled above")
        };
        let weights = if config.own_accounting && !config.oracle_view {
            let mine = &mut private[placer];
            if !matches!(mine, Some((k, _)) if *k == key) {
                *mine = Some((key, shared.clone()));
            }
            let Some((_, weights)) = mine else {
                unreachable!("filled above")
            };
            weights
        } else {
            shared
        };
        let chosen: Vec<u32> = ensemble::build_indexed(&rack_index, weights, e, qw, &racks, prng)
            .map(|en| en.members.iter().map(|&m| m as u32).collect())
            .unwrap_or_else(|_| (0..e as u32).collect());
        let fell_back = weights.fell_back();
        if config.own_accounting && !config.oracle_view {
            if let Some((_, weights)) = &mut private[placer] {
                // The placer predicts the new ledger's rate from the partition's previous ledger.
                let predicted_bps = per_member(w.rate_mbps[ledger], 1.0) * 1e6;
                for &m in previous {
                    weights.add_write_rate(view, m as usize, -predicted_bps);
                }
                for &m in &chosen {
                    weights.add_write_rate(view, m as usize, predicted_bps);
                }
            }
        }
        (chosen, fell_back)
    };

    // Initial placement at t = 0 (no load known: every policy starts load-blind) and staggered
    // rollovers, as in a cluster that has been running.
    for ledger in 0..ledgers {
        let (chosen, _) = place(
            ledger,
            0,
            &mut view,
            &published_util,
            &published_wbps,
            &base,
            &[],
            &mut prng,
        );
        for (k, &m) in chosen.iter().enumerate() {
            members[ledger * e + k] = m;
            base[m as usize] += per_member(w.rate_mbps[ledger], 1.0);
        }
        let interval = rollover_interval(&mut wrng, w.rate_mbps[ledger]);
        let first = wrng.gen_range(1..=interval);
        next_roll[ledger] = first;
        if (first as usize) <= duration {
            rolls[first as usize].push(ledger as u32);
        }
    }

    let mut noise = vec![0.0f64; n];
    let mut backlog_mb = vec![0.0f64; n];
    let mut util_ring = vec![[0.0f64; UTIL_WINDOW]; n];
    let mut minute_lambda = vec![0.0f64; n];
    let mut minute_rho = vec![0.0f64; n];
    // The variance budget: the burst extra inside `base`, and per-minute sums of each part.
    let mut burst_extra = vec![0.0f64; n];
    let mut minute_steady = vec![0.0f64; n];
    let mut minute_burst = vec![0.0f64; n];
    let mut minute_noise = vec![0.0f64; n];
    // Write weight sampled for the p99, and the part of it on ledgers too big for one of their
    // own nodes; only ledgers that exceed the smallest node while bursting can ever be.
    let (mut sampled_weight, mut oversize_weight) = (0.0f64, 0.0f64);
    // Write weight at or above TAIL_MS, the part of it on bursting ledgers, and the bursting
    // ledgers' weight overall: whether the tail is made of bursts no placer saw coming.
    let (mut tail_weight, mut tail_bursting_weight, mut bursting_weight) = (0.0f64, 0.0, 0.0);
    let capacity_min = w.capacity_mbps.iter().copied().fold(f64::MAX, f64::min);
    let hottest_mbps = w.rate_mbps.iter().copied().fold(0.0, f64::max);
    let burst_factor = 1.0 + config.burst_share * (BURST_MULTIPLIER - 1.0);
    let oversize_candidates: Vec<usize> = (0..ledgers)
        .filter(|&l| per_member(w.rate_mbps[l], BURST_MULTIPLIER) > capacity_min)
        .collect();
    // The p99 is exact: a write's latency is one node's delay, so each latency sample adds one
    // (delay, weight) pair per node, and the window's p99 is the weighted quantile of those.
    let mut node_weight = vec![0.0f64; n];
    let mut window_delays: Vec<(f64, f64)> = Vec::new();
    let mut windows = Vec::new();
    let mut static_std = 0.0;
    let mut static_pred = 0.0;
    let burst_start_mean =
        ledgers as f64 * config.burst_share / ((BURST_MIN_S + BURST_MAX_S) as f64 / 2.0);
    let measured_s = (config.duration_s - config.warmup_s).max(1) as f64;
    let mut delay_ms = vec![0.0f64; n];

    for t in 1..=duration {
        // Herding: 30 % of ledgers roll over within the next 10 s.
        if config.herding_at_s == Some(t as u64) {
            for (ledger, next) in next_roll.iter_mut().enumerate() {
                if wrng.gen::<f64>() < 0.3 {
                    let at = (t + wrng.gen_range(0..10)).min(duration);
                    *next = at as u64;
                    rolls[at].push(ledger as u32);
                }
            }
        }
        // Bursts start and end.
        for _ in 0..stats::poisson(&mut wrng, burst_start_mean) {
            let ledger = wrng.gen_range(0..ledgers);
            if multiplier[ledger] == 1.0 {
                let end = t + wrng.gen_range(BURST_MIN_S..=BURST_MAX_S) as usize;
                multiplier[ledger] = BURST_MULTIPLIER;
                let extra = per_member(w.rate_mbps[ledger], BURST_MULTIPLIER - 1.0);
                for k in 0..e {
                    base[members[ledger * e + k] as usize] += extra;
                    burst_extra[members[ledger * e + k] as usize] += extra;
                }
                burst_ends[end].push(ledger as u32);
            }
        }
        for ledger in std::mem::take(&mut burst_ends[t]) {
            let ledger = ledger as usize;
            let extra = per_member(w.rate_mbps[ledger], BURST_MULTIPLIER - 1.0);
            for k in 0..e {
                base[members[ledger * e + k] as usize] -= extra;
                burst_extra[members[ledger * e + k] as usize] -= extra;
            }
            multiplier[ledger] = 1.0;
        }
        // Rollovers: the owning placer chooses a new ensemble from its stale view.
        let measuring = t as u64 > config.warmup_s;
        for ledger in std::mem::take(&mut rolls[t]) {
            let ledger = ledger as usize;
            if next_roll[ledger] != t as u64 {
                continue; // superseded by a herding rollover
            }
            let previous: Vec<u32> = members[ledger * e..(ledger + 1) * e].to_vec();
            let (chosen, fell_back) = place(
                ledger,
                t,
                &mut view,
                &published_util,
                &published_wbps,
                &base,
                &previous,
                &mut prng,
            );
            let load = per_member(w.rate_mbps[ledger], multiplier[ledger]);
            let extra = per_member(w.rate_mbps[ledger], multiplier[ledger] - 1.0);
            for &m in &previous {
                base[m as usize] -= load;
                burst_extra[m as usize] -= extra;
            }
            for (k, &m) in chosen.iter().enumerate() {
                members[ledger * e + k] = m;
                base[m as usize] += load;
                burst_extra[m as usize] += extra;
                if measuring {
                    placements[m as usize] += 1;
                }
            }
            if measuring {
                placements_total += e as u32;
                window_decisions += 1;
                decisions += 1;
                fallbacks += u64::from(fell_back);
            }
            let next = t as u64 + rollover_interval(&mut wrng, w.rate_mbps[ledger]);
            next_roll[ledger] = next;
            if (next as usize) <= duration {
                rolls[next as usize].push(ledger as u32);
            }
        }
        // Nodes: demand, queue, published metrics.
        let phase_t = (t as f64 - config.warmup_s as f64) / measured_s;
        let diurnal = 1.0 + DIURNAL_AMPLITUDE * (2.0 * std::f64::consts::PI * phase_t).sin();
        let row = t % history_len;
        for i in 0..n {
            let mu = w.capacity_mbps[i];
            noise[i] = NOISE_PHI * noise[i]
                + (1.0 - NOISE_PHI * NOISE_PHI).sqrt()
                    * config.noise_sigma_fraction
                    * mu
                    * stats::normal(&mut wrng);
            let lambda = (base[i].max(0.0) * diurnal + noise[i]).max(0.0);
            backlog_mb[i] = (backlog_mb[i] + lambda - mu).max(0.0);
            let rho = lambda / mu;
            let util = if backlog_mb[i] > 0.0 {
                100.0
            } else {
                (rho * 100.0).min(100.0)
            };
            util_ring[i][t % UTIL_WINDOW] = util;
            published_util[row][i] = if t >= UTIL_WINDOW {
                util_ring[i].iter().sum::<f64>() / UTIL_WINDOW as f64
            } else {
                -1.0
            };
            published_wbps[row][i] = lambda;
            delay_ms[i] = node_delay_ms(mu, rho, backlog_mb[i]);
            if measuring {
                minute_lambda[i] += lambda;
                minute_rho[i] += rho;
                let placed = base[i].max(0.0) * diurnal;
                let burst = burst_extra[i].max(0.0) * diurnal;
                minute_steady[i] += placed - burst;
                minute_burst[i] += burst;
                minute_noise[i] += lambda - placed;
            }
        }
        if t as u64 == config.warmup_s {
            // `base` carries the extra of the ledgers bursting right now; the balls-in-bins
            // prediction is for the placed rates alone, so compare like with like.
            let placed: Vec<f64> = base.iter().zip(&burst_extra).map(|(b, x)| b - x).collect();
            static_std = stats::std_dev(&placed);
            let mean_sq: f64 = w
                .rate_mbps
                .iter()
                .map(|r| (r * qw as f64 / e as f64).powi(2))
                .sum::<f64>()
                / ledgers as f64;
            let replicas_per_node = (ledgers * e) as f64 / n as f64;
            static_pred = (replicas_per_node * mean_sq).sqrt();
        }
        if !measuring {
            continue;
        }
        if t as u64 % LATENCY_SAMPLE_S == 0 {
            for ledger in 0..ledgers {
                let weight = w.rate_mbps[ledger] * multiplier[ledger] / e as f64;
                sampled_weight += weight * e as f64;
                let ensemble = &members[ledger * e..(ledger + 1) * e];
                let bursting = multiplier[ledger] > 1.0;
                if bursting {
                    bursting_weight += weight * e as f64;
                }
                for start in 0..e {
                    let node = quorum_order_statistic(ensemble, start, qw, qa, &delay_ms);
                    node_weight[node] += weight;
                    if delay_ms[node] >= TAIL_MS {
                        tail_weight += weight;
                        if bursting {
                            tail_bursting_weight += weight;
                        }
                    }
                }
            }
            for (i, weight) in node_weight.iter_mut().enumerate() {
                if *weight > 0.0 {
                    window_delays.push((delay_ms[i], *weight));
                }
                *weight = 0.0;
            }
            for &ledger in &oversize_candidates {
                let own = per_member(w.rate_mbps[ledger], multiplier[ledger]);
                let ensemble = &members[ledger * e..(ledger + 1) * e];
                if ensemble.iter().any(|&m| own > w.capacity_mbps[m as usize]) {
                    oversize_weight += w.rate_mbps[ledger] * multiplier[ledger];
                }
            }
        }
        if (t as u64 - config.warmup_s) % 60 == 0 {
            let lambdas: Vec<f64> = minute_lambda.iter().map(|x| x / 60.0).collect();
            let mut sorted = lambdas.clone();
            sorted.sort_by(|a, b| b.total_cmp(a));
            let expected = placements_total as f64 / n as f64;
            let herding = if expected > 0.0 {
                f64::from(*placements.iter().max().unwrap_or(&0)) / expected
            } else {
                0.0
            };
            let per_s = |sums: &[f64]| sums.iter().map(|x| x / 60.0).collect::<Vec<f64>>();
            let noise_free: Vec<f64> = minute_steady
                .iter()
                .zip(&minute_burst)
                .map(|(s, b)| (s + b) / 60.0)
                .collect();
            let cluster_util = lambdas.iter().sum::<f64>() / w.capacity_mbps.iter().sum::<f64>();
            let equal_util: Vec<f64> = w.capacity_mbps.iter().map(|c| c * cluster_util).collect();
            let utils: Vec<f64> = minute_rho.iter().map(|r| r / 60.0 * 100.0).collect();
            windows.push(Window {
                util_std_pct: stats::std_dev(&utils),
                replica_std_mbps: stats::std_dev(&noise_free),
                steady_std_mbps: stats::std_dev(&per_s(&minute_steady)),
                burst_std_mbps: stats::std_dev(&per_s(&minute_burst)),
                noise_std_mbps: stats::std_dev(&per_s(&minute_noise)),
                equal_util_std_mbps: stats::std_dev(&equal_util),
                oversize_share: oversize_weight / sampled_weight.max(1e-9),
                std_mbps: stats::std_dev(&lambdas),
                range_mbps: stats::range(&lambdas),
                top10_mbps: stats::mean(&sorted[..10.min(n)]),
                util_max_pct: stats::max(&minute_rho) / 60.0 * 100.0,
                nodes_over: minute_rho.iter().filter(|r| **r / 60.0 > 1.0).count(),
                p99_ms: stats::weighted_quantile(&mut window_delays, 0.99),
                herding,
                decisions: window_decisions,
                tail_share: tail_weight / sampled_weight.max(1e-9),
                bursting_share: bursting_weight / sampled_weight.max(1e-9),
                tail_bursting_share: if tail_weight > 0.0 {
                    tail_bursting_weight / tail_weight
                } else {
                    0.0
                },
            });
            window_delays.clear();
            for sums in [
                &mut minute_lambda,
                &mut minute_rho,
                &mut minute_steady,
                &mut minute_burst,
                &mut minute_noise,
            ] {
                sums.iter_mut().for_each(|x| *x = 0.0);
            }
            (sampled_weight, oversize_weight) = (0.0, 0.0);
            placements.iter_mut().for_each(|x| *x = 0);
            placements_total = 0;
            window_decisions = 0;
            (tail_weight, tail_bursting_weight, bursting_weight) = (0.0, 0.0, 0.0);
        }
    }
    RunResult {
        label: label.to_owned(),
        windows,
        fallback_share: if decisions > 0 {
            fallbacks as f64 / decisions as f64
        } else {
            0.0
        },
        static_std_mbps: static_std,
        hottest_burst_weight_share: BURST_MULTIPLIER * hottest_mbps
            / (w.rate_mbps.iter().sum::<f64>() * burst_factor).max(1e-9),
        hottest_burst_node_share: per_member(hottest_mbps, BURST_MULTIPLIER) / capacity_min,
        static_std_predicted_mbps: static_pred,
    }
}

/// Highest utilisation the M/M/1 part of the delay is evaluated at: above it the queue is not
/// stable, and the fluid backlog term takes over.
const MM1_RHO_MAX: f64 = 0.99;

/// A node's write delay, ms: the M/M/1 p99 sojourn S·ln(100)/(1 − min(ρ, 0.99)) with S = 1 MB/μ,
/// plus the time the fluid backlog takes to drain at capacity (backlog/μ). Nothing caps it: a
/// backlog of any size is its true delay, which is what the p99 reports.
pub fn node_delay_ms(capacity_mbps: f64, rho: f64, backlog_mb: f64) -> f64 {
    let service_s = ENTRY_MB / capacity_mbps;
    1000.0 * (service_s * 100f64.ln() / (1.0 - rho.min(MM1_RHO_MAX)) + backlog_mb / capacity_mbps)
}

/// The node whose delay is the `qa`-th smallest among the `qw` consecutive members of `ensemble`
/// starting at `start` (the write's latency is that node's delay). A selection by counting, with
/// no allocation and no sort: it runs for every quorum of every ledger at every latency sample.
fn quorum_order_statistic(
    ensemble: &[u32],
    start: usize,
    qw: usize,
    qa: usize,
    delay_ms: &[f64],
) -> usize {
    let e = ensemble.len();
    let member = |k: usize| {
        let p = start + k;
        ensemble[if p < e { p } else { p - e }] as usize
    };
    // The common cases (the default (2, 2, 2) waits for every member) without ranking.
    if qa == qw || qa == 1 {
        let mut answer = member(0);
        for k in 1..qw {
            let node = member(k);
            let better = if qa == 1 {
                delay_ms[node] < delay_ms[answer]
            } else {
                delay_ms[node] >= delay_ms[answer]
            };
            if better {
                answer = node;
            }
        }
        return answer;
    }
    let mut answer = member(0);
    for k in 0..qw {
        let node = member(k);
        let d = delay_ms[node];
        // Rank with ties broken by quorum position, so exactly one member has each rank.
        let rank = (0..qw)
            .filter(|&j| {
                let other = delay_ms[member(j)];
                other < d || (other == d && j < k)
            })
            .count();
        if rank == qa - 1 {
            answer = node;
            break;
        }
    }
    answer
}

fn rollover_interval(rng: &mut ChaCha8Rng, rate_mbps: f64) -> u64 {
    let by_time = rng.gen_range(ROLLOVER_MIN_S..=ROLLOVER_MAX_S);
    let by_size = (ROLLOVER_MB / rate_mbps.max(1e-6)) as u64;
    by_time.min(by_size).max(60)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn the_smallest_node_cap_holds_and_keeps_the_load() {
        for quorum in [(2, 2, 2), (3, 3, 2), (5, 3, 2)] {
            let uncapped = ReplicaConfig {
                quorum,
                mean_util: 0.4,
                ..ReplicaConfig::bp65(1)
            };
            let capped = ReplicaConfig {
                ledger_cap: LedgerCap::SmallestNodeShare(0.5),
                ..uncapped.clone()
            };
            let (free, held) = (workload(&uncapped), workload(&capped));
            let (e, qw, _) = quorum;
            let bursting_member = |r: f64| r * BURST_MULTIPLIER * qw as f64 / e as f64;
            let smallest = held.capacity_mbps.iter().copied().fold(f64::MAX, f64::min);
            let hottest = held.rate_mbps.iter().copied().fold(0.0, f64::max);
            assert!(
                bursting_member(hottest) <= 0.5 * smallest * (1.0 + 1e-9),
                "{quorum:?}: {} > half of {smallest}",
                bursting_member(hottest)
            );
            // The uncapped workload does break the cap, so the test says something.
            let wild = free.rate_mbps.iter().copied().fold(0.0, f64::max);
            assert!(bursting_member(wild) > 0.5 * smallest, "{quorum:?}");
            // The mean utilisation is kept: the capped rates' sum is the uncapped one.
            let (a, b): (f64, f64) = (free.rate_mbps.iter().sum(), held.rate_mbps.iter().sum());
            assert!((a - b).abs() < 1e-6 * a, "{quorum:?}: {a} vs {b}");
        }
    }

    #[test]
    fn the_tail_share_agrees_with_the_p99() {
        // Two views of the same samples: more than 1 % of the writes at or above TAIL_MS exactly
        // when the p99 is at or above it.
        let config = ReplicaConfig {
            mean_util: 0.35,
            ..ReplicaConfig::small(5)
        };
        let r = run(&config, "random", &SelectionPolicy::Uniform);
        let (mut slow, mut fast) = (0, 0);
        for w in &r.windows {
            assert!(
                (0.0..=1.0 + 1e-9).contains(&w.tail_share),
                "{}",
                w.tail_share
            );
            assert!((0.0..=1.0 + 1e-9).contains(&w.tail_bursting_share));
            assert_eq!(w.p99_ms >= TAIL_MS, w.tail_share > 0.01, "{w:?}");
            if w.p99_ms >= TAIL_MS {
                slow += 1;
            } else {
                fast += 1;
            }
        }
        assert!(
            slow > 0 && fast > 0,
            "both kinds of window: {slow} slow, {fast} fast"
        );
    }

    #[test]
    fn the_workload_does_not_depend_on_the_view_refresh() {
        // Uniform random ignores the view, so with common random numbers it must give the same
        // run whatever the refresh period.
        let config = ReplicaConfig::small(3);
        let at = |refresh_s| {
            let r = run(
                &ReplicaConfig {
                    refresh_s,
                    ..config.clone()
                },
                "random",
                &SelectionPolicy::Uniform,
            );
            r.windows
                .iter()
                .map(|w| (w.std_mbps, w.p99_ms))
                .collect::<Vec<_>>()
        };
        assert_eq!(at(30), at(300));
        assert_eq!(at(30), at(7));
    }

    #[test]
    fn node_delay_is_mm1_plus_backlog_and_unclamped() {
        let ln100 = 100f64.ln();
        // Idle node of 200 MB/s: 5 ms service, p99 sojourn 5·ln(100) ms.
        assert!((node_delay_ms(200.0, 0.0, 0.0) - 5.0 * ln100).abs() < 1e-9);
        // Half loaded: twice that.
        assert!((node_delay_ms(200.0, 0.5, 0.0) - 10.0 * ln100).abs() < 1e-9);
        // Overloaded: the M/M/1 part stops at ρ = 0.99 and the backlog adds its drain time,
        // 2 400 MB at 200 MB/s = 12 s (a node at 110 % for 2 min).
        let d = node_delay_ms(200.0, 1.1, 2400.0);
        assert!((d - (500.0 * ln100 + 12_000.0)).abs() < 1e-6, "{d}");
        // No ceiling: 1 000 s of backlog reads as 1 000 s, not 120 s.
        assert!(node_delay_ms(200.0, 1.1, 200_000.0) > 1_000_000.0);
    }

    proptest! {
        #[test]
        fn order_statistic_matches_a_stable_sort(
            delays in proptest::collection::vec(0u8..4, 1..7),
            start_seed in any::<usize>(),
            qw_seed in any::<usize>(),
            qa_seed in any::<usize>(),
        ) {
            let delay_ms: Vec<f64> = delays.iter().map(|d| f64::from(*d)).collect();
            let e = delay_ms.len();
            let ensemble: Vec<u32> = (0..e as u32).rev().collect();
            let start = start_seed % e;
            let qw = 1 + qw_seed % e;
            let qa = 1 + qa_seed % qw;
            let mut quorum: Vec<usize> =
                (0..qw).map(|k| ensemble[(start + k) % e] as usize).collect();
            quorum.sort_by(|a, b| delay_ms[*a].total_cmp(&delay_ms[*b]));
            let got = quorum_order_statistic(&ensemble, start, qw, qa, &delay_ms);
            prop_assert_eq!(delay_ms[got], delay_ms[quorum[qa - 1]]);
        }
    }
}
