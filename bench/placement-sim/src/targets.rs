//! The targets of docs/design/placement.md §3.3b, measured from runs, and the table that ends the
//! report.
//!
//! Owns Sim A's recalibrated regime (ledger rates capped at half the smallest node while
//! bursting, the exact p99, and per quorum shape the mean utilisation picked from a grid so that
//! uniform random sits where BP-65 started: median-window p99 under 1 s, peak 10–20 s), the runs
//! of Sim B's two pair shedders on five seeds, the measured value of each target (A1–A3 per
//! quorum shape and policy, B1–B5 over the seeds), the chance level of the herding index (balls
//! in bins) and the met/missed table. Every measured value comes from the runs made here; the
//! bars are the named constants below.

use std::fmt::Write as _;

use skiff_placement::{LoadWeightedConfig, SelectionPolicy};

use crate::bundles::{self, BundleConfig, BundleResult, Scenario};
use crate::replica::{self, LedgerCap, ReplicaConfig, RunResult, DIURNAL_AMPLITUDE, TAIL_MS};
use crate::{f0, f1, par_map, Job};

/// The quorum shapes (E, Qw, Qa) the targets are measured on.
pub const QUORUM_SHAPES: [(usize, usize, usize); 3] = [(2, 2, 2), (3, 3, 2), (5, 3, 2)];

/// One ledger's per-member rate while bursting is at most this share of the smallest node's
/// capacity: no single ledger can fill a node on its own, so a backlog needs several ledgers
/// (which is what placement decides).
pub const LEDGER_CAP_SMALLEST_NODE_SHARE: f64 = 0.5;

/// Mean utilisations tried for uniform random, per quorum shape (diurnal mean, bursts included).
/// A grid rather than a search: the peak p99 is the worst of 240 windows and is not monotone in
/// the load, and a grid shows how it moves.
pub const CALIBRATION_UTILS: [f64; 10] =
    [0.20, 0.25, 0.30, 0.35, 0.40, 0.45, 0.50, 0.55, 0.60, 0.65];

/// BP-65's starting regime for uniform random: median-window p99 under this, ms ...
pub const RANDOM_P99_MEDIAN_MAX_MS: f64 = 1_000.0;
/// ... and peak p99 in [`RANDOM_P99_PEAK_MIN_MS`, `RANDOM_P99_PEAK_MAX_MS`], ms (its 10–20 s).
pub const RANDOM_P99_PEAK_MIN_MS: f64 = 10_000.0;
/// See [`RANDOM_P99_PEAK_MIN_MS`].
pub const RANDOM_P99_PEAK_MAX_MS: f64 = 20_000.0;

/// View refresh of A1, A2's efficiency and A3, seconds.
pub const FRESH_REFRESH_S: u64 = 30;
/// View refresh of A2's "never worse than random", seconds.
pub const STALE_REFRESH_S: u64 = 300;

/// A1: random's peak p99 ÷ the policy's, at least.
pub const A1_P99_PEAK_TIMES_MIN: f64 = 10.0;
/// A2: (std_random − std_policy) ÷ (std_random − std_oracle) with fresh views, at least.
pub const A2_EFFICIENCY_MIN: f64 = 0.6;
/// A2: std_random − std_policy with stale views, at least (MB/s): never worse than random.
pub const A2_STALE_MARGIN_MIN_MBPS: f64 = 0.0;
/// A3: the policy's peak herding index ÷ uniform placement's chance level, at most.
pub const A3_HERDING_OVER_CHANCE_MAX: f64 = 2.0;

/// Sim B's targets are measured on this many seeds (the report's seed and the next ones).
pub const B_SEED_COUNT: u64 = 5;
/// B3: Skiff's moves ÷ AvgShedder's, over the scenarios where AvgShedder converges, at most
/// (on every seed).
pub const B3_MOVES_VS_AVG_MAX: f64 = 0.8;
/// B5: Skiff's scale-out moves ÷ the perfect-knowledge plan's, at most (on every seed).
pub const B5_SCALE_OUT_VS_PLAN_MAX: f64 = 1.2;

/// Which side of the bar a measured value must be on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bar {
    /// Met when the value is at least this.
    AtLeast(f64),
    /// Met when the value is at most this.
    AtMost(f64),
}

impl Bar {
    /// Whether `measured` meets the bar; a value that is not a number (nothing to measure)
    /// never does.
    pub fn met(self, measured: f64) -> bool {
        match self {
            Bar::AtLeast(bar) => measured >= bar,
            Bar::AtMost(bar) => measured <= bar,
        }
    }
}

/// One row of the targets table.
#[derive(Debug, Clone)]
pub struct Target {
    /// A1, A2, ..., B5.
    pub id: &'static str,
    /// Quorum shape and policy, or the seeds.
    pub scope: String,
    /// What is measured.
    pub criterion: String,
    /// The measured value (NaN: nothing to measure).
    pub measured: f64,
    /// The measured value as printed.
    pub shown: String,
    /// The bar.
    pub bar: Bar,
    /// The bar as printed.
    pub bar_shown: String,
}

impl Target {
    /// `met` or `missed`.
    pub fn verdict(&self) -> &'static str {
        if self.bar.met(self.measured) {
            "met"
        } else {
            "missed"
        }
    }
}

/// Whether uniform random's figures are in BP-65's starting regime.
pub fn in_regime(p99_median_ms: f64, p99_peak_ms: f64) -> bool {
    p99_median_ms < RANDOM_P99_MEDIAN_MAX_MS
        && (RANDOM_P99_PEAK_MIN_MS..=RANDOM_P99_PEAK_MAX_MS).contains(&p99_peak_ms)
}

/// The calibration picked from a grid of (mean utilisation, random's median p99, random's peak
/// p99): the index of the point used, and whether it is in the regime.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calibration {
    /// Index into the grid.
    pub index: usize,
    /// Random's median and peak p99 there are in BP-65's starting regime.
    pub in_regime: bool,
}

/// Picks the load: the highest mean utilisation of the grid where random is in the regime (the
/// busiest cluster that still starts where BP-65 did, nearest the 50–60 % of
/// docs/design/placement.md §3.1); if no point is, the one whose peak p99 is nearest the 10–20 s
/// band (by ratio) among those whose median is under 1 s, or among all if none is. `None` for an
/// empty grid.
pub fn choose_load(grid: &[(f64, f64, f64)]) -> Option<Calibration> {
    let best_in = grid
        .iter()
        .enumerate()
        .filter(|(_, &(_, median, peak))| in_regime(median, peak))
        .max_by(|a, b| a.1 .0.total_cmp(&b.1 .0))
        .map(|(index, _)| Calibration {
            index,
            in_regime: true,
        });
    if best_in.is_some() {
        return best_in;
    }
    let distance = |peak: f64| {
        let peak = peak.max(1e-9);
        if peak < RANDOM_P99_PEAK_MIN_MS {
            (RANDOM_P99_PEAK_MIN_MS / peak).ln()
        } else {
            (peak / RANDOM_P99_PEAK_MAX_MS).ln().max(0.0)
        }
    };
    let nearest = |candidates: &mut dyn Iterator<Item = (usize, &(f64, f64, f64))>| {
        candidates
            .min_by(|a, b| distance(a.1 .2).total_cmp(&distance(b.1 .2)))
            .map(|(index, _)| Calibration {
                index,
                in_regime: false,
            })
    };
    nearest(
        &mut grid
            .iter()
            .enumerate()
            .filter(|(_, p)| p.1 < RANDOM_P99_MEDIAN_MAX_MS),
    )
    .or_else(|| nearest(&mut grid.iter().enumerate()))
}

/// Finer loads tried between two grid points when none is in the regime.
pub const CALIBRATION_REFINE_POINTS: usize = 4;

/// The finer loads to try for a grid (util, median p99, peak p99) with no point in the regime:
/// [`CALIBRATION_REFINE_POINTS`] evenly inside the highest bracket where the peak p99 goes from
/// under the band to over it while the median stays under 1 s. None without such a bracket.
pub fn refinement(grid: &[(f64, f64, f64)]) -> Vec<f64> {
    let bracket = grid.windows(2).rev().find(|pair| {
        pair[0].2 < RANDOM_P99_PEAK_MIN_MS
            && pair[1].2 > RANDOM_P99_PEAK_MAX_MS
            && pair[1].1 < RANDOM_P99_MEDIAN_MAX_MS
    });
    let Some([(lo, _, _), (hi, _, _)]) = bracket.map(|p| [p[0], p[1]]) else {
        return Vec::new();
    };
    let parts = CALIBRATION_REFINE_POINTS + 1;
    (1..parts)
        .map(|j| lo + (hi - lo) * j as f64 / parts as f64)
        .collect()
}

/// ln P(X ≤ m) for X ~ Binomial(k, p), from the pmf recurrence in logs (no term underflows on
/// its way to the mean).
fn binomial_ln_cdf(k: u32, p: f64, m: i64) -> f64 {
    if m < 0 {
        return f64::NEG_INFINITY;
    }
    if m >= i64::from(k) || p <= 0.0 {
        return 0.0;
    }
    if p >= 1.0 {
        return f64::NEG_INFINITY; // X = k > m
    }
    let k_f = f64::from(k);
    let odds_ln = (p / (1.0 - p)).ln();
    let mut ln_pmf = k_f * (1.0 - p).ln();
    let mut sum = ln_pmf.exp();
    for j in 0..m {
        let j = j as f64;
        ln_pmf += ((k_f - j) / (j + 1.0)).ln() + odds_ln;
        sum += ln_pmf.exp();
    }
    sum.min(1.0).ln()
}

/// The chance level of the herding index: the median, under uniform placement, of its peak over
/// windows, where a window's index is the most placements any node received ÷ the expected number.
/// `decisions` are the ensembles placed per window; each ensemble takes `ensemble` distinct nodes
/// of `nodes`, so a node's count in a window of k ensembles is Binomial(k, E/n). Counts are treated
/// as independent across nodes and windows; within a window they are negatively associated (a
/// placement taken by one node is not another's), which makes the true peak a hair higher than this
/// (checked against thrown balls in the tests). Windows without placements do not count (the
/// simulator gives them index 0); none at all gives 0.
pub fn herding_by_chance(decisions: &[u32], nodes: usize, ensemble: usize) -> f64 {
    let windows: Vec<u32> = decisions.iter().copied().filter(|&k| k > 0).collect();
    if windows.is_empty() || nodes == 0 || ensemble == 0 || ensemble > nodes {
        return 0.0;
    }
    let p = ensemble as f64 / nodes as f64;
    // ln P(peak ≤ x): every node of every window at most x × its expected count.
    let ln_peak_cdf = |x: f64| -> f64 {
        windows
            .iter()
            .map(|&k| nodes as f64 * binomial_ln_cdf(k, p, (x * f64::from(k) * p).floor() as i64))
            .sum()
    };
    // The index is at most 1/p (one node in every ensemble), where the CDF is 1.
    let (mut lo, mut hi) = (0.0, 1.0 / p);
    for _ in 0..100 {
        let mid = (lo + hi) / 2.0;
        if ln_peak_cdf(mid) >= 0.5f64.ln() {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// (random − policy) ÷ (random − oracle): the share of the oracle's cut a placer gets. NaN when
/// the oracle cuts nothing (nothing to share).
pub fn stale_view_efficiency(random: f64, policy: f64, oracle: f64) -> f64 {
    let room = random - oracle;
    if room > 0.0 {
        (random - policy) / room
    } else {
        f64::NAN
    }
}

/// Skiff's moves ÷ AvgShedder's over the scenarios where AvgShedder converged, from (AvgShedder
/// moves, AvgShedder converged, Skiff moves) per scenario. No AvgShedder move to compare with
/// gives 0 if Skiff made none either, else infinity.
pub fn moves_against_avg(runs: &[(usize, bool, usize)]) -> f64 {
    let (avg, skiff) = runs
        .iter()
        .filter(|(_, converged, _)| *converged)
        .fold((0usize, 0usize), |(a, s), (avg, _, skiff)| {
            (a + avg, s + skiff)
        });
    if avg > 0 {
        skiff as f64 / avg as f64
    } else if skiff == 0 {
        0.0
    } else {
        f64::INFINITY
    }
}

/// Sim A's runs for one quorum shape.
pub struct ShapeRuns {
    /// (E, Qw, Qa).
    pub quorum: (usize, usize, usize),
    /// Uniform random at every grid utilisation, fresh views (same run at any refresh: random
    /// ignores the view, and the workload does not depend on the refresh).
    pub grid: Vec<(f64, RunResult)>,
    /// The load used.
    pub calibration: Calibration,
    /// BP-65 with fresh and stale views.
    pub bp65: (RunResult, RunResult),
    /// Skiff's power of d choices with own-placement accounting, fresh and stale views.
    pub skiff: (RunResult, RunResult),
    /// The bound: least-loaded on the true current load.
    pub oracle: RunResult,
}

impl ShapeRuns {
    /// Uniform random at the chosen load.
    pub fn random(&self) -> &RunResult {
        &self.grid[self.calibration.index].1
    }

    /// The chosen mean utilisation.
    pub fn util(&self) -> f64 {
        self.grid[self.calibration.index].0
    }
}

fn bp65_policy() -> SelectionPolicy {
    SelectionPolicy::LoadWeighted(LoadWeightedConfig::default())
}

/// Runs Sim A's regime: the grid, then per shape BP-65, Skiff's d choices (with `skiff_d`) and
/// the bound at the chosen load. `base` gives the cluster size and the run length.
pub fn run_regime(base: &ReplicaConfig, skiff_d: usize, utils: &[f64]) -> Vec<ShapeRuns> {
    let config_at = |quorum, util| ReplicaConfig {
        quorum,
        mean_util: util,
        refresh_s: FRESH_REFRESH_S,
        ledger_cap: LedgerCap::SmallestNodeShare(LEDGER_CAP_SMALLEST_NODE_SHARE),
        ..base.clone()
    };
    let random_runs = |points: &[((usize, usize, usize), f64)]| {
        let jobs: Vec<Job> = points
            .iter()
            .map(|&(q, u)| Job {
                config: config_at(q, u),
                label: format!("(a) uniform random, {q:?} at {:.1} %", u * 100.0),
                policy: SelectionPolicy::Uniform,
            })
            .collect();
        par_map(&jobs, |j| replica::run(&j.config, &j.label, &j.policy))
    };
    let summary = |grid: &[(f64, RunResult)]| -> Vec<(f64, f64, f64)> {
        grid.iter()
            .map(|(u, r)| (*u, r.median(|w| w.p99_ms), peak_p99(r)))
            .collect()
    };
    let coarse: Vec<((usize, usize, usize), f64)> = QUORUM_SHAPES
        .iter()
        .flat_map(|&q| utils.iter().map(move |&u| (q, u)))
        .collect();
    let mut coarse_runs = random_runs(&coarse).into_iter();
    let mut grids: Vec<Vec<(f64, RunResult)>> = QUORUM_SHAPES
        .iter()
        .map(|_| utils.iter().copied().zip(coarse_runs.by_ref()).collect())
        .collect();
    // Where no coarse point is in the regime, try finer loads between the two that bracket it.
    let fine: Vec<((usize, usize, usize), f64)> = QUORUM_SHAPES
        .iter()
        .zip(&grids)
        .filter(|(_, grid)| !summary(grid).iter().any(|p| in_regime(p.1, p.2)))
        .flat_map(|(&q, grid)| refinement(&summary(grid)).into_iter().map(move |u| (q, u)))
        .collect();
    let mut fine_runs = random_runs(&fine).into_iter();
    for ((q, u), run) in fine.iter().zip(fine_runs.by_ref()) {
        let shape = QUORUM_SHAPES.iter().position(|s| s == q).expect("a shape");
        grids[shape].push((*u, run));
        grids[shape].sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let calibrations: Vec<Calibration> = grids
        .iter()
        .map(|grid| choose_load(&summary(grid)).expect("the grid is not empty"))
        .collect();
    let mut jobs = Vec::new();
    for ((&quorum, grid), calibration) in QUORUM_SHAPES.iter().zip(&grids).zip(&calibrations) {
        let fresh = config_at(quorum, grid[calibration.index].0);
        let stale = ReplicaConfig {
            refresh_s: STALE_REFRESH_S,
            ..fresh.clone()
        };
        for config in [&fresh, &stale] {
            jobs.push(Job {
                config: config.clone(),
                label: "(c) BP-65 load-weighted, ratio 0.3".to_owned(),
                policy: bp65_policy(),
            });
        }
        for config in [&fresh, &stale] {
            jobs.push(Job::skiff(config, skiff_d));
        }
        jobs.push(Job::oracle(&fresh));
    }
    let mut runs = par_map(&jobs, |j| replica::run(&j.config, &j.label, &j.policy)).into_iter();
    QUORUM_SHAPES
        .iter()
        .zip(grids)
        .zip(calibrations)
        .map(|((&quorum, grid), calibration)| {
            let mut next = || runs.next().expect("five runs per shape");
            ShapeRuns {
                quorum,
                grid,
                calibration,
                bp65: (next(), next()),
                skiff: (next(), next()),
                oracle: next(),
            }
        })
        .collect()
}

/// Sim B's pair shedders on one seed: per scenario (AvgShedder, Skiff).
pub struct SeedRuns {
    /// The workload seed.
    pub seed: u64,
    /// Per scenario, in [`Scenario::ALL`] order.
    pub runs: Vec<(Scenario, BundleResult, BundleResult)>,
}

impl SeedRuns {
    /// Scenarios Skiff converged in.
    pub fn converged(&self) -> usize {
        self.runs
            .iter()
            .filter(|(_, _, s)| s.converge_cycles.is_some())
            .count()
    }

    /// Skiff's ping-pong moves over the scenarios.
    pub fn ping_pong(&self) -> usize {
        self.runs.iter().map(|(_, _, s)| s.ping_pong).sum()
    }

    /// Per scenario (AvgShedder moves, AvgShedder converged, Skiff moves).
    pub fn move_pairs(&self) -> Vec<(usize, bool, usize)> {
        self.runs
            .iter()
            .map(|(_, a, s)| (a.moves, a.converge_cycles.is_some(), s.moves))
            .collect()
    }

    fn scenario(&self, scenario: Scenario) -> Option<&(Scenario, BundleResult, BundleResult)> {
        self.runs.iter().find(|(s, _, _)| *s == scenario)
    }

    /// Skiff's moves under load jitter.
    pub fn jitter_moves(&self) -> usize {
        self.scenario(Scenario::LoadJitter)
            .map_or(0, |(_, _, s)| s.moves)
    }

    /// Skiff's scale-out moves and the perfect-knowledge plan's (at the bar less the noise
    /// margin, the one the report judges by; `None`: no plan found).
    pub fn scale_out(&self) -> (usize, Option<usize>) {
        self.scenario(Scenario::ScaleOut)
            .map_or((0, None), |(_, _, s)| {
                (s.moves, s.move_bounds.last().and_then(|b| b.greedy))
            })
    }

    /// Skiff's scale-out moves ÷ the plan's (NaN without a plan).
    pub fn scale_out_ratio(&self) -> f64 {
        match self.scale_out() {
            (moves, Some(plan)) if plan > 0 => moves as f64 / plan as f64,
            (0, Some(_)) => 0.0,
            _ => f64::NAN,
        }
    }
}

/// Runs AvgShedder and Skiff's pair shedder on every scenario for `B_SEED_COUNT` seeds from
/// `config.seed`.
pub fn run_seeds(config: &BundleConfig) -> Vec<SeedRuns> {
    let strategies = bundles::strategies();
    let pair = [strategies.len() - 2, strategies.len() - 1];
    let jobs: Vec<(u64, Scenario, usize)> = (0..B_SEED_COUNT)
        .flat_map(|k| {
            Scenario::ALL
                .iter()
                .flat_map(move |&scenario| pair.map(|i| (config.seed + k, scenario, i)))
        })
        .collect();
    let results = par_map(&jobs, |&(seed, scenario, i)| {
        let c = BundleConfig {
            seed,
            ..config.clone()
        };
        let s = &strategies[i];
        bundles::run(&c, scenario, s.label, &s.balancer, &s.split)
    });
    let mut it = results.into_iter();
    (0..B_SEED_COUNT)
        .map(|k| SeedRuns {
            seed: config.seed + k,
            runs: Scenario::ALL
                .iter()
                .map(|&scenario| {
                    let avg = it.next().expect("AvgShedder ran");
                    let skiff = it.next().expect("Skiff ran");
                    (scenario, avg, skiff)
                })
                .collect(),
        })
        .collect()
}

fn median_std(r: &RunResult) -> f64 {
    r.median(|w| w.std_mbps)
}

fn peak_p99(r: &RunResult) -> f64 {
    r.peak(|w| w.p99_ms)
}

fn chance(r: &RunResult, quorum: (usize, usize, usize), nodes: usize) -> f64 {
    let decisions: Vec<u32> = r.windows.iter().map(|w| w.decisions).collect();
    herding_by_chance(&decisions, nodes, quorum.0)
}

fn shape_label(q: (usize, usize, usize)) -> String {
    format!("({},{},{})", q.0, q.1, q.2)
}

fn times(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.1}×")
    } else {
        "—".to_owned()
    }
}

/// The targets of Sim A for every shape and both policies, and of Sim B over the seeds.
pub fn targets(shapes: &[ShapeRuns], seeds: &[SeedRuns], nodes: usize) -> Vec<Target> {
    let mut rows = Vec::new();
    let policies = |s: &ShapeRuns| -> [(&'static str, RunResult, RunResult); 2] {
        [
            ("(c) BP-65", s.bp65.0.clone(), s.bp65.1.clone()),
            ("(s) Skiff", s.skiff.0.clone(), s.skiff.1.clone()),
        ]
    };
    for s in shapes {
        let random = s.random();
        for (name, fresh, _) in policies(s) {
            let cut = peak_p99(random) / peak_p99(&fresh).max(1e-9);
            rows.push(Target {
                id: "A1",
                scope: format!("{}, {name}", shape_label(s.quorum)),
                criterion: format!(
                    "peak p99, random ÷ policy, {FRESH_REFRESH_S} s views ({} / {} ms)",
                    f0(peak_p99(random)),
                    f0(peak_p99(&fresh))
                ),
                measured: cut,
                shown: times(cut),
                bar: Bar::AtLeast(A1_P99_PEAK_TIMES_MIN),
                bar_shown: format!("≥ {A1_P99_PEAK_TIMES_MIN:.0}×"),
            });
        }
    }
    for s in shapes {
        let random = s.random();
        for (name, fresh, _) in policies(s) {
            let eff = stale_view_efficiency(
                median_std(random),
                median_std(&fresh),
                median_std(&s.oracle),
            );
            rows.push(Target {
                id: "A2",
                scope: format!("{}, {name}", shape_label(s.quorum)),
                criterion: format!(
                    "stale-view efficiency, {FRESH_REFRESH_S} s views: (random − policy) ÷ \
                     (random − oracle), median-window std ({} − {}) ÷ ({} − {})",
                    f1(median_std(random)),
                    f1(median_std(&fresh)),
                    f1(median_std(random)),
                    f1(median_std(&s.oracle)),
                ),
                measured: eff,
                shown: if eff.is_finite() {
                    format!("{eff:.2}")
                } else {
                    "—".to_owned()
                },
                bar: Bar::AtLeast(A2_EFFICIENCY_MIN),
                bar_shown: format!("≥ {A2_EFFICIENCY_MIN:.1}"),
            });
        }
        for (name, _, stale) in policies(s) {
            let margin = median_std(random) - median_std(&stale);
            rows.push(Target {
                id: "A2",
                scope: format!("{}, {name}", shape_label(s.quorum)),
                criterion: format!(
                    "median-window std, random − policy, {STALE_REFRESH_S} s views ({} − {} MB/s)",
                    f1(median_std(random)),
                    f1(median_std(&stale)),
                ),
                measured: margin,
                shown: format!("{margin:+.1} MB/s"),
                bar: Bar::AtLeast(A2_STALE_MARGIN_MIN_MBPS),
                bar_shown: format!("≥ {A2_STALE_MARGIN_MIN_MBPS:.0} MB/s"),
            });
        }
    }
    for s in shapes {
        for (name, fresh, _) in policies(s) {
            let by_chance = chance(&fresh, s.quorum, nodes);
            let ratio = fresh.peak(|w| w.herding) / by_chance;
            rows.push(Target {
                id: "A3",
                scope: format!("{}, {name}", shape_label(s.quorum)),
                criterion: format!(
                    "peak herding index ÷ uniform placement's chance level, {FRESH_REFRESH_S} s \
                     views ({} ÷ {})",
                    f1(fresh.peak(|w| w.herding)),
                    f1(by_chance)
                ),
                measured: ratio,
                shown: format!("{ratio:.2}"),
                bar: Bar::AtMost(A3_HERDING_OVER_CHANCE_MAX),
                bar_shown: format!("≤ {A3_HERDING_OVER_CHANCE_MAX:.0}"),
            });
        }
    }
    if seeds.is_empty() {
        return rows;
    }
    let scope = format!(
        "seeds {}–{}, Skiff",
        seeds[0].seed,
        seeds[seeds.len() - 1].seed
    );
    let runs: usize = seeds.iter().map(|s| s.runs.len()).sum();
    let converged: usize = seeds.iter().map(SeedRuns::converged).sum();
    rows.push(Target {
        id: "B1",
        scope: scope.clone(),
        criterion: "runs (scenario × seed) that converged".to_owned(),
        measured: converged as f64,
        shown: format!("{converged} of {runs}"),
        bar: Bar::AtLeast(runs as f64),
        bar_shown: format!("{runs} of {runs}"),
    });
    let ping_pong: usize = seeds.iter().map(SeedRuns::ping_pong).sum();
    rows.push(Target {
        id: "B2",
        scope: scope.clone(),
        criterion: "ping-pong moves, all runs".to_owned(),
        measured: ping_pong as f64,
        shown: ping_pong.to_string(),
        bar: Bar::AtMost(0.0),
        bar_shown: "0".to_owned(),
    });
    let ratios: Vec<f64> = seeds
        .iter()
        .map(|s| moves_against_avg(&s.move_pairs()))
        .collect();
    let worst = ratios.iter().copied().fold(0.0, f64::max);
    rows.push(Target {
        id: "B3",
        scope: scope.clone(),
        criterion: "moves ÷ AvgShedder's over the scenarios where AvgShedder converged, worst seed"
            .to_owned(),
        measured: worst,
        shown: format!("{worst:.2}"),
        bar: Bar::AtMost(B3_MOVES_VS_AVG_MAX),
        bar_shown: format!("≤ {B3_MOVES_VS_AVG_MAX:.1}"),
    });
    let jitter: usize = seeds.iter().map(SeedRuns::jitter_moves).sum();
    rows.push(Target {
        id: "B4",
        scope: scope.clone(),
        criterion: "moves under load jitter, all seeds".to_owned(),
        measured: jitter as f64,
        shown: jitter.to_string(),
        bar: Bar::AtMost(0.0),
        bar_shown: "0".to_owned(),
    });
    let scale_out: Vec<f64> = seeds.iter().map(SeedRuns::scale_out_ratio).collect();
    // A seed without a plan makes the criterion unmeasurable (NaN propagates).
    let worst = scale_out.iter().copied().fold(
        0.0,
        |a: f64, b| if b.is_nan() { f64::NAN } else { a.max(b) },
    );
    rows.push(Target {
        id: "B5",
        scope,
        criterion: "scale-out moves ÷ the perfect-knowledge plan's, worst seed".to_owned(),
        measured: worst,
        shown: if worst.is_finite() {
            format!("{worst:.2}")
        } else {
            "—".to_owned()
        },
        bar: Bar::AtMost(B5_SCALE_OUT_VS_PLAN_MAX),
        bar_shown: format!("≤ {B5_SCALE_OUT_VS_PLAN_MAX:.1}"),
    });
    rows
}

/// Writes the targets section: the regime's calibration and figures, why a target is out of
/// reach where the runs say so, Sim B per seed, and last the targets table.
pub fn section(
    md: &mut String,
    base: &ReplicaConfig,
    shapes: &[ShapeRuns],
    seeds: &[SeedRuns],
    skiff_d: usize,
) {
    let nodes = base.node_count;
    let _ = writeln!(md, "## Targets (§3.3b)\n");
    let _ = writeln!(
        md,
        "Sim A recalibrated to the regime BP-65 started from, for three quorum shapes, and Sim \
         B's two pair shedders on {} seeds; the table at the end is computed from these runs.\n",
        seeds.len()
    );
    let _ = writeln!(md, "### Sim A, recalibrated\n");
    let cap_line = shapes
        .first()
        .map(|s| {
            format!(
                " (the hottest ledger, bursting, is {:.0} % of the smallest node)",
                s.random().hottest_burst_node_share * 100.0
            )
        })
        .unwrap_or_default();
    let _ = writeln!(
        md,
        "What changes against Sim A above (everything else is the same: {} nodes, {} ledgers, {} \
         placers, noise, bursts, diurnal swing, {:.1} h measured after {:.1} h of warm-up):\n\n\
         - One ledger's per-member rate while bursting is capped at {:.0} % of the smallest node's \
         capacity{}, the other rates scaled up to keep the mean utilisation.\n\
         - The p99 is the exact write-weighted quantile of the sampled node delays, with no \
         ceiling: a backlog shows as its true delay.\n\
         - The mean utilisation is chosen per quorum shape from a grid ({:.0}–{:.0} %): the \
         busiest point where uniform random's median-window p99 is under {:.0} s and its peak p99 \
         is {:.0}–{:.0} s (BP-65's production before the change). Uniform random ignores the view \
         and the workload does not depend on the refresh, so its run is the same with {} s and \
         {} s views.\n\
         - Policies: (c) BP-65 (the broker's default), (s) Skiff's power of {} choices with \
         own-placement accounting (the d Sim A chose above), and the bound (o), least-loaded on \
         the true current load.\n",
        nodes,
        base.ledger_count,
        base.placer_count,
        (base.duration_s - base.warmup_s) as f64 / 3600.0,
        base.warmup_s as f64 / 3600.0,
        LEDGER_CAP_SMALLEST_NODE_SHARE * 100.0,
        cap_line,
        CALIBRATION_UTILS[0] * 100.0,
        CALIBRATION_UTILS[CALIBRATION_UTILS.len() - 1] * 100.0,
        RANDOM_P99_MEDIAN_MAX_MS / 1000.0,
        RANDOM_P99_PEAK_MIN_MS / 1000.0,
        RANDOM_P99_PEAK_MAX_MS / 1000.0,
        FRESH_REFRESH_S,
        STALE_REFRESH_S,
        skiff_d,
    );

    // Calibration grid.
    let _ = write!(
        md,
        "**Calibration: uniform random by mean utilisation**, p99 median / peak per window, ms \
         (the load used is marked; \"in\" = in the regime; loads between grid points were tried \
         only for a shape with no grid point in the regime, between the two that bracket it).\n\n\
         | Mean utilisation |"
    );
    for s in shapes {
        let _ = write!(md, " {} |", shape_label(s.quorum));
    }
    let _ = write!(md, "\n|---|");
    for _ in shapes {
        let _ = write!(md, "---|");
    }
    let _ = writeln!(md);
    let mut utils: Vec<f64> = shapes
        .iter()
        .flat_map(|s| s.grid.iter().map(|(u, _)| *u))
        .collect();
    utils.sort_by(f64::total_cmp);
    utils.dedup();
    for util in utils {
        let _ = write!(md, "| {:.0} % |", util * 100.0);
        for s in shapes {
            let Some(i) = s.grid.iter().position(|(u, _)| *u == util) else {
                let _ = write!(md, " — |");
                continue;
            };
            let r = &s.grid[i].1;
            let (median, peak) = (r.median(|w| w.p99_ms), peak_p99(r));
            let mark = match (i == s.calibration.index, in_regime(median, peak)) {
                (true, _) => " **used**",
                (false, true) => " in",
                _ => "",
            };
            let _ = write!(md, " {} / {}{} |", f0(median), f0(peak), mark);
        }
        let _ = writeln!(md);
    }
    let _ = writeln!(md);
    for s in shapes.iter().filter(|s| !s.calibration.in_regime) {
        let _ = writeln!(
            md,
            "{}: no grid point puts random in the regime; the nearest is used.\n",
            shape_label(s.quorum)
        );
    }

    // Figures per shape.
    let _ = writeln!(
        md,
        "**The regime's figures.** Per 1-min window, peak / median over the measured run; \
         throughput in MB/s, p99 in ms. \"By chance\" is the herding index uniform placement \
         gets from the same numbers of placements per window (balls in bins: the median of the \
         peak over windows).\n\n\
         | Shape | mean util | Policy | views (s) | std median | std peak | range peak | p99 median | p99 peak | nodes > 100 % peak | herding peak | herding by chance | writes ≥ 1 s, peak window |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for s in shapes {
        let rows: [(&str, u64, &RunResult); 6] = [
            ("(a) uniform random", FRESH_REFRESH_S, s.random()),
            ("(c) BP-65", FRESH_REFRESH_S, &s.bp65.0),
            ("(c) BP-65", STALE_REFRESH_S, &s.bp65.1),
            ("(s) Skiff", FRESH_REFRESH_S, &s.skiff.0),
            ("(s) Skiff", STALE_REFRESH_S, &s.skiff.1),
            ("(o) bound", FRESH_REFRESH_S, &s.oracle),
        ];
        for (name, refresh, r) in rows {
            let views = if name.starts_with("(a)") {
                "any".to_owned()
            } else if name.starts_with("(o)") {
                "true load".to_owned()
            } else {
                refresh.to_string()
            };
            let _ = writeln!(
                md,
                "| {} | {:.0} % | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} % |",
                shape_label(s.quorum),
                s.util() * 100.0,
                name,
                views,
                f1(median_std(r)),
                f1(r.peak(|w| w.std_mbps)),
                f0(r.peak(|w| w.range_mbps)),
                f0(r.median(|w| w.p99_ms)),
                f0(peak_p99(r)),
                f0(r.peak(|w| w.nodes_over as f64)),
                f1(r.peak(|w| w.herding)),
                f1(chance(r, s.quorum, nodes)),
                peak_window(r).map_or(0.0, |w| w.tail_share * 100.0),
            );
        }
    }
    let _ = writeln!(md);

    a1_analysis(md, shapes);
    a2_analysis(md, shapes);
    sim_b_seeds(md, seeds);

    let _ = writeln!(md, "### Targets table\n");
    let _ = writeln!(
        md,
        "Computed from the runs of this section: `met` when the measured value is on the right \
         side of the target, `missed` otherwise (or when there is nothing to measure).\n"
    );
    table(md, &targets(shapes, seeds, nodes));
}

/// The window with the highest p99.
fn peak_window(r: &RunResult) -> Option<&replica::Window> {
    r.windows
        .iter()
        .max_by(|a, b| a.p99_ms.total_cmp(&b.p99_ms))
}

/// What sets the peak p99 in the regime, and whether A1 is within any placer's reach.
fn a1_analysis(md: &mut String, shapes: &[ShapeRuns]) {
    let _ = writeln!(
        md,
        "**What sets the peak p99.** Per shape: how large the hottest ledger is while bursting, \
         what a node at the mean utilisation carries at the diurnal peak with that burst on top, \
         and random's worst window: the share of its writes at ≥ {:.0} s and how much of that tail \
         was on ledgers bursting at the time, against their share of all writes in that window.\n\n\
         | Shape | hottest ledger bursting: share of all writes | its per-member rate, share of the smallest node | mean node at the diurnal peak + that burst | random's worst window: writes ≥ {:.0} s | of them on bursting ledgers | bursting ledgers' share of all writes | peak p99 (a) / (c) / (o), ms | (o)'s cut of the peak |\n\
         |---|---|---|---|---|---|---|---|---|",
        TAIL_MS / 1000.0,
        TAIL_MS / 1000.0,
    );
    for s in shapes {
        let random = s.random();
        let worst = peak_window(random);
        let _ = writeln!(
            md,
            "| {} | {:.2} % | {:.0} % | {:.0} % | {:.1} % | {:.0} % | {:.0} % | {} / {} / {} | {} |",
            shape_label(s.quorum),
            random.hottest_burst_weight_share * 100.0,
            random.hottest_burst_node_share * 100.0,
            (s.util() * (1.0 + DIURNAL_AMPLITUDE) + random.hottest_burst_node_share) * 100.0,
            worst.map_or(0.0, |w| w.tail_share * 100.0),
            worst.map_or(0.0, |w| w.tail_bursting_share * 100.0),
            worst.map_or(0.0, |w| w.bursting_share * 100.0),
            f0(peak_p99(random)),
            f0(peak_p99(&s.bp65.0)),
            f0(peak_p99(&s.oracle)),
            times(peak_p99(random) / peak_p99(&s.oracle).max(1e-9)),
        );
    }
    let _ = writeln!(md);
    for s in shapes {
        let random = s.random();
        let cut = |r: &RunResult| peak_p99(random) / peak_p99(r).max(1e-9);
        let with_burst =
            (s.util() * (1.0 + DIURNAL_AMPLITUDE) + random.hottest_burst_node_share) * 100.0;
        if cut(&s.oracle) >= A1_P99_PEAK_TIMES_MIN {
            let _ = writeln!(
                md,
                "- {}: the bound (o) cuts the peak p99 {}, so the cut is there for a placer that \
                 sees the true current load; with {FRESH_REFRESH_S} s-old reports (c) gets {} and \
                 (s) {}. At the diurnal peak a node at the mean utilisation with the hottest burst \
                 on it is at {with_burst:.0} % of its capacity: there is headroom to steer into, \
                 for a placer that sees where it is now.",
                shape_label(s.quorum),
                times(cut(&s.oracle)),
                times(cut(&s.bp65.0)),
                times(cut(&s.skiff.0)),
            );
        } else {
            let _ = writeln!(
                md,
                "- {}: not even the bound (o) gets more than {}, so A1 is out of reach for every \
                 placer modelled here. At the diurnal peak a node at the mean utilisation with the \
                 hottest burst on it is at {with_burst:.0} % of its capacity{}, and every member of \
                 a bursting ledger carries its burst{}.",
                shape_label(s.quorum),
                times(cut(&s.oracle)),
                if with_burst >= 100.0 {
                    ": over it, so a hot ledger's burst builds backlog on any node near the mean"
                } else {
                    ""
                },
                if random.hottest_burst_weight_share > 0.01 {
                    format!(
                        "; that ledger alone is {:.2} % of all writes, more than the 1 % the p99 \
                         leaves out, so its own writes can set the peak",
                        random.hottest_burst_weight_share * 100.0
                    )
                } else {
                    String::new()
                },
            );
        }
    }
    let ratios: Vec<f64> = shapes
        .iter()
        .filter_map(|s| peak_window(s.random()))
        .map(|w| w.tail_bursting_share / w.bursting_share.max(1e-9))
        .collect();
    let (rich_lo, rich_hi) = (
        ratios.iter().copied().fold(f64::INFINITY, f64::min),
        ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    );
    let windows = shapes.first().map_or(0, |s| s.random().windows.len());
    let _ = writeln!(
        md,
        "\nIn random's worst window the writes at ≥ {:.0} s are {rich_lo:.1}–{rich_hi:.1}× as rich \
         in bursting ledgers as the writes overall: the tail comes with bursts, which start after \
         the ledger was placed and which no report shows in advance. The peak is the worst of \
         {windows} windows and jumps with the load (calibration table), so a single ratio is \
         rough.\n",
        TAIL_MS / 1000.0,
    );
}

/// Why the stale-view efficiency comes out where it does.
fn a2_analysis(md: &mut String, shapes: &[ShapeRuns]) {
    let _ = writeln!(
        md,
        "**Stale-view efficiency.** The share of the bound's std cut a placer gets with views \
         {FRESH_REFRESH_S} s old (median-window std, MB/s), and the odds BP-65 gives a node one \
         utilisation std below the mean against one a std above (weights ∝ 100 − load):\n\n\
         | Shape | random | (c) BP-65 | (s) Skiff | (o) bound | (c) efficiency | (s) efficiency | mean util at the diurnal mean, % | utilisation std under random, pp | BP-65's odds, −1 std : +1 std |\n\
         |---|---|---|---|---|---|---|---|---|---|"
    );
    for s in shapes {
        let (r, c, k, o) = (
            median_std(s.random()),
            median_std(&s.bp65.0),
            median_std(&s.skiff.0),
            median_std(&s.oracle),
        );
        let u = s.util() * 100.0;
        let spread = s.random().median(|w| w.util_std_pct);
        let odds = (100.0 - (u - spread)) / (100.0 - (u + spread)).max(1e-9);
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.0} | {:.1} | {:.2} |",
            shape_label(s.quorum),
            f1(r),
            f1(c),
            f1(k),
            f1(o),
            stale_view_efficiency(r, c, o),
            stale_view_efficiency(r, k, o),
            u,
            spread,
            odds,
        );
    }
    let odds: Vec<f64> = shapes
        .iter()
        .map(|s| {
            let u = s.util() * 100.0;
            let spread = s.random().median(|w| w.util_std_pct);
            (100.0 - (u - spread)) / (100.0 - (u + spread)).max(1e-9)
        })
        .collect();
    let (odds_lo, odds_hi) = (
        odds.iter().copied().fold(f64::INFINITY, f64::min),
        odds.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    );
    let efficiency = |s: &ShapeRuns, r: &RunResult| {
        stale_view_efficiency(median_std(s.random()), median_std(r), median_std(&s.oracle))
    };
    let skiff_further = shapes
        .iter()
        .all(|s| efficiency(s, &s.skiff.0) > efficiency(s, &s.bp65.0));
    let best = shapes
        .iter()
        .flat_map(|s| [efficiency(s, &s.bp65.0), efficiency(s, &s.skiff.0)])
        .fold(f64::NEG_INFINITY, f64::max);
    let _ = writeln!(
        md,
        "\nBP-65's weights are linear in headroom: at these loads a node one std below the mean is \
         drawn only {odds_lo:.2}–{odds_hi:.2}× as often as one a std above, so the placed rates \
         stay close to random's spread.{} The best efficiency here is {best:.2} (A2 asks \
         {A2_EFFICIENCY_MIN:.1}); the bound also sees bursts and noise as they happen, which no \
         report {FRESH_REFRESH_S} s old shows.\n",
        if skiff_further {
            " Skiff's power of d choices keeps the lighter of d uniformly drawn nodes, a much \
             stronger preference, and gets further on every shape."
        } else {
            ""
        }
    );
}

/// Sim B's pair shedders per seed, and the per-seed figures behind B1–B5.
fn sim_b_seeds(md: &mut String, seeds: &[SeedRuns]) {
    if seeds.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "### Sim B: the pair shedders on seeds {}–{}\n\n\
         Moves (cycles to converge, ping-pong) per scenario; the plan is the perfect-knowledge \
         plan for scale-out at the bar less the noise margin ({:.0} points).\n\n\
         | Seed | Scenario | AvgShedder | Skiff | plan |\n|---|---|---|---|---|",
        seeds[0].seed,
        seeds[seeds.len() - 1].seed,
        bundles::CONVERGED_RANGE_PCT - bundles::NOISE_MARGIN_PCT,
    );
    let cell = |r: &BundleResult| {
        format!(
            "{} ({}, {})",
            r.moves,
            r.converge_cycles
                .map_or("never".to_owned(), |c| format!("{c} cycles")),
            r.ping_pong
        )
    };
    for s in seeds {
        for (scenario, avg, skiff) in &s.runs {
            let plan = if *scenario == Scenario::ScaleOut {
                skiff
                    .move_bounds
                    .last()
                    .and_then(|b| b.greedy)
                    .map_or("— (stuck)".to_owned(), |g| g.to_string())
            } else {
                String::new()
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} |",
                s.seed,
                scenario.name(),
                cell(avg),
                cell(skiff),
                plan
            );
        }
    }
    let _ = writeln!(
        md,
        "\nPer seed (Skiff's settled pair shedder):\n\n\
         | Seed | converged (of {}) | ping-pong | scenarios where AvgShedder converged | moves there, Skiff / AvgShedder | ratio | moves under load jitter | scale-out moves / plan | ratio |\n\
         |---|---|---|---|---|---|---|---|---|",
        Scenario::ALL.len()
    );
    for s in seeds {
        let pairs = s.move_pairs();
        let (avg, skiff) = pairs
            .iter()
            .filter(|(_, converged, _)| *converged)
            .fold((0, 0), |(a, k), (avg, _, skiff)| (a + avg, k + skiff));
        let (moves, plan) = s.scale_out();
        let ratio = moves_against_avg(&pairs);
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} / {} | {} | {} | {} / {} | {} |",
            s.seed,
            s.converged(),
            s.ping_pong(),
            pairs.iter().filter(|(_, converged, _)| *converged).count(),
            skiff,
            avg,
            if ratio.is_finite() {
                format!("{ratio:.2}")
            } else {
                "—".to_owned()
            },
            s.jitter_moves(),
            moves,
            plan.map_or("—".to_owned(), |p| p.to_string()),
            if s.scale_out_ratio().is_finite() {
                format!("{:.2}", s.scale_out_ratio())
            } else {
                "—".to_owned()
            },
        );
    }
    let _ = writeln!(md);
    // Which scenarios B3 leaves out on its worst seed.
    if let Some(worst) = seeds.iter().max_by(|a, b| {
        moves_against_avg(&a.move_pairs()).total_cmp(&moves_against_avg(&b.move_pairs()))
    }) {
        let left_out: Vec<String> = worst
            .runs
            .iter()
            .filter(|(_, avg, _)| avg.converge_cycles.is_none())
            .map(|(scenario, avg, skiff)| {
                format!(
                    "{} (AvgShedder {}, Skiff {})",
                    scenario.name(),
                    avg.moves,
                    skiff.moves
                )
            })
            .collect();
        if !left_out.is_empty() {
            let _ = writeln!(
                md,
                "B3 compares moves only where AvgShedder converged. On seed {}, its worst seed, \
                 that leaves out {}.\n",
                worst.seed,
                left_out.join(", ")
            );
        }
    }
    let jittery: Vec<String> = seeds
        .iter()
        .filter(|s| s.jitter_moves() > 0)
        .map(|s| format!("seed {}: {}", s.seed, s.jitter_moves()))
        .collect();
    if !jittery.is_empty() {
        let _ = writeln!(
            md,
            "Skiff's moves under load jitter ({}): an earlier round traced those of seed 3 to a \
             report made during a spike. A broker re-reports only when something moved by more \
             than 10 % (or after 15 min), so a spike's report can stand after the spike is over, \
             and the 8 low hits count cycles over that one report; the load then moves back once \
             the pair cooldown allows. Skiff's pair shedder has since held a moderate gap until \
             its high broker reports again (rule 9 of `skiff_placement::shed`), which delays a \
             moderate-gap move by up to a report interval (full run, steady skew, seed 1: 9 \
             cycles to converge became 19); the moves counted here are those made with it.\n",
            jittery.join(", ")
        );
    }
}

/// The targets table (the last thing the report prints).
pub fn table(md: &mut String, rows: &[Target]) {
    let _ = writeln!(
        md,
        "| Target | Scope | Criterion | Measured | Target value | Result |\n|---|---|---|---|---|---|"
    );
    for r in rows {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} |",
            r.id,
            r.scope,
            r.criterion,
            r.shown,
            r.bar_shown,
            r.verdict()
        );
    }
}

#[cfg(test)]
mod tests {
    use rand::seq::index::sample;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::stats;

    #[test]
    fn bars_say_met_or_missed() {
        assert!(Bar::AtLeast(10.0).met(10.0));
        assert!(Bar::AtLeast(10.0).met(25.0));
        assert!(!Bar::AtLeast(10.0).met(9.99));
        assert!(!Bar::AtLeast(10.0).met(f64::NAN));
        assert!(Bar::AtMost(0.8).met(0.8));
        assert!(!Bar::AtMost(0.8).met(0.81));
        assert!(!Bar::AtMost(0.8).met(f64::INFINITY));
        assert!(!Bar::AtMost(0.8).met(f64::NAN));
        assert!(Bar::AtMost(0.0).met(0.0));
        assert!(!Bar::AtMost(0.0).met(1.0));
        let row = |measured, bar| Target {
            id: "X",
            scope: String::new(),
            criterion: String::new(),
            measured,
            shown: String::new(),
            bar,
            bar_shown: String::new(),
        };
        assert_eq!(row(0.61, Bar::AtLeast(0.6)).verdict(), "met");
        assert_eq!(row(0.59, Bar::AtLeast(0.6)).verdict(), "missed");
        assert_eq!(row(f64::NAN, Bar::AtMost(1.2)).verdict(), "missed");
    }

    #[test]
    fn the_load_is_the_busiest_point_in_the_regime() {
        // (util, median p99, peak p99), ms.
        let grid = [
            (0.30, 90.0, 8_000.0),
            (0.35, 120.0, 16_000.0),
            (0.40, 200.0, 19_000.0),
            (0.45, 1_200.0, 15_000.0), // peak in the band, median too slow
            (0.50, 400.0, 37_000.0),
        ];
        assert_eq!(
            choose_load(&grid),
            Some(Calibration {
                index: 2,
                in_regime: true
            })
        );
        // Nothing in the regime: the peak nearest the band by ratio (25 s is 1.25× over, 7 s
        // is 1.43× under), among medians under 1 s.
        let grid = [
            (0.30, 90.0, 7_000.0),
            (0.35, 200.0, 25_000.0),
            (0.40, 2_000.0, 19_000.0),
        ];
        assert_eq!(
            choose_load(&grid),
            Some(Calibration {
                index: 1,
                in_regime: false
            })
        );
        // Every median too slow: the nearest peak among all.
        let grid = [(0.30, 2_000.0, 50_000.0), (0.35, 3_000.0, 30_000.0)];
        assert_eq!(choose_load(&grid).map(|c| c.index), Some(1));
        assert_eq!(choose_load(&[]), None);
        assert!(in_regime(999.0, 10_000.0) && in_regime(999.0, 20_000.0));
        assert!(!in_regime(1_000.0, 15_000.0) && !in_regime(500.0, 20_001.0));
    }

    #[test]
    fn refinement_looks_inside_the_highest_crossing() {
        let grid = [
            (0.20, 50.0, 3_000.0),
            (0.25, 60.0, 8_000.0),
            (0.30, 90.0, 21_000.0),
            (0.35, 120.0, 9_000.0),
            (0.40, 300.0, 40_000.0),
            (0.45, 2_000.0, 90_000.0),
        ];
        let fine = refinement(&grid);
        assert_eq!(fine.len(), CALIBRATION_REFINE_POINTS);
        // The highest crossing with a fast median is 35 % → 40 %.
        assert!(
            fine.iter().all(|u| (0.35..0.40).contains(u) && *u > 0.35),
            "{fine:?}"
        );
        // A crossing whose upper end has a slow median does not count; no crossing, nothing.
        assert!(refinement(&[(0.3, 90.0, 8_000.0), (0.35, 1_500.0, 30_000.0)]).is_empty());
        assert!(refinement(&[(0.3, 90.0, 12_000.0), (0.35, 90.0, 30_000.0)]).is_empty());
    }

    #[test]
    fn binomial_cdf_matches_direct_sums() {
        let direct = |k: u32, p: f64, m: u32| -> f64 {
            let mut c = 1.0f64; // C(k, j)
            let mut sum = 0.0;
            for j in 0..=m.min(k) {
                if j > 0 {
                    c *= f64::from(k - j + 1) / f64::from(j);
                }
                sum += c * p.powi(j as i32) * (1.0 - p).powi((k - j) as i32);
            }
            sum
        };
        for (k, p, m) in [(10, 0.3, 2), (50, 0.02, 0), (50, 0.02, 3), (200, 0.1, 25)] {
            let got = binomial_ln_cdf(k, p, m).exp();
            let want = direct(k, p, m as u32);
            assert!((got - want).abs() < 1e-12, "{k} {p} {m}: {got} vs {want}");
        }
        assert_eq!(binomial_ln_cdf(5, 0.5, -1), f64::NEG_INFINITY);
        assert_eq!(binomial_ln_cdf(5, 0.5, 5), 0.0);
        // Far from the mean of a large k, the sum still comes out (no underflow to 0).
        assert!(binomial_ln_cdf(60_000, 0.02, 1_300).exp() > 0.9);
    }

    #[test]
    fn herding_chance_level_on_small_cases() {
        // Two nodes, one-node ensembles, one placement: the chosen node got 1 against 0.5
        // expected, so the index is 2 whatever happens.
        let x = herding_by_chance(&[1], 2, 1);
        assert!((x - 2.0).abs() < 1e-6, "{x}");
        // A huge window evens out: close to 1.
        let x = herding_by_chance(&[100_000], 10, 1);
        assert!((1.0..1.05).contains(&x), "{x}");
        // More windows, higher peak; empty windows do not count.
        let one = herding_by_chance(&[160], 255, 2);
        let many = herding_by_chance(&[160; 240], 255, 2);
        assert!(many > one, "{many} vs {one}");
        assert_eq!(herding_by_chance(&[160, 0, 0], 255, 2), one);
        assert_eq!(herding_by_chance(&[0, 0], 255, 2), 0.0);
    }

    #[test]
    fn herding_chance_level_matches_balls_in_bins() {
        // Throw the ensembles for real (E distinct nodes each, uniformly) and take the median
        // over trials of the peak index; the closed form must agree within a few percent.
        let (nodes, windows, trials) = (255, 240, 61);
        for (ensemble, k) in [(2, 160), (5, 130)] {
            let mut rng = ChaCha8Rng::seed_from_u64(11);
            let mut peaks = Vec::new();
            for _ in 0..trials {
                let mut peak = 0.0f64;
                for _ in 0..windows {
                    let mut count = vec![0u32; nodes];
                    for _ in 0..k {
                        for node in sample(&mut rng, nodes, ensemble) {
                            count[node] += 1;
                        }
                    }
                    let expected = (k * ensemble) as f64 / nodes as f64;
                    let max = f64::from(*count.iter().max().expect("nodes"));
                    peak = peak.max(max / expected);
                }
                peaks.push(peak);
            }
            let simulated = stats::median(&peaks);
            let closed = herding_by_chance(&vec![k as u32; windows], nodes, ensemble);
            assert!(
                (closed / simulated - 1.0).abs() < 0.1,
                "E = {ensemble}: closed form {closed}, simulated {simulated}"
            );
        }
    }

    #[test]
    fn efficiency_and_move_ratios() {
        assert!((stale_view_efficiency(20.0, 17.0, 15.0) - 0.6).abs() < 1e-12);
        assert!(stale_view_efficiency(20.0, 21.0, 15.0) < 0.0);
        assert!(stale_view_efficiency(20.0, 17.0, 20.0).is_nan());
        // Only the scenarios where AvgShedder converged count.
        let runs = [
            (30, true, 20),
            (10, false, 50),
            (0, true, 0),
            (20, true, 20),
        ];
        assert!((moves_against_avg(&runs) - 0.8).abs() < 1e-12);
        assert_eq!(moves_against_avg(&[(5, false, 9)]), 0.0);
        assert_eq!(moves_against_avg(&[(0, true, 3)]), f64::INFINITY);
    }
}
