//! Load shedding and bundle placement: which bundles leave which broker, and where they go
//! (docs/design/placement.md §1.7–1.8).
//!
//! Owns the shedders (Pulsar's OverloadShedder, ThresholdShedder, UniformLoadShedder,
//! TransferShedder and AvgShedder, plus Skiff's settled pair shedder), the bundle placement
//! strategies (LeastLongTermMessageRate, LeastResourceUsageWithWeight, AvgShedder's bound
//! destination with random fallback, and Skiff's predicted least-loaded), the unload grace period
//! and the preallocation book-keeping that counters stale views. Input is a [`LoadSnapshot`] (the
//! brokers' latest reports, each stamped with the time it was made) and `now_ms`; output is a
//! [`Plan`]. It never applies a plan: the caller changes ownership and reports back.
//!
//! # Skiff's shedder ([`ShedderConfig::skiff`])
//!
//! AvgShedder's pairing (i-th lowest score with i-th highest) and multi-hit trigger (8 hits for a
//! moderate gap, 2 for a gap ≥ 40), changed in nine ways, each aimed at a failure mode
//! docs/design/placement.md §2 lists:
//!
//! 1. **Settle before acting.** A broker that took part in a move is left alone until it has sent
//!    a report made after the move. Acting on a report that predates one's own last decision is
//!    what makes EMA- and lag-driven shedders unload twice for one imbalance.
//! 2. **Move score, not message rate, and never invert by much.** A bundle is worth, on a
//!    broker, the broker's usage times the mean of the bundle's shares of its message rate and
//!    throughput, so a broker with twice the hardware is asked for twice the traffic
//!    (AvgShedder's rate-only amount moves nothing, or the wrong amount, on mixed hardware).
//!    Bundles are taken largest first, each one only if it brings the predicted pair closer and
//!    leaves it inverted by less than half the deadband: one big bundle that overshoots a little
//!    replaces several small ones (fewer unloads), and so small an inversion can never fire the
//!    reverse move.
//! 3. **Pair cooldown.** No move from B to A within 30 min of a move from A to B: that move would
//!    undo recent work (the ping-pong docs/design/placement.md §3.3b counts); the pair waits and
//!    other pairs act.
//! 4. **A 10-point deadband** instead of 15, so that the gap it leaves is clearly inside a
//!    15-point convergence bar rather than at the mercy of measurement noise; and a pair stops
//!    taking bundles once its predicted gap is under 8 points, so it does not spend moves (each
//!    one an unload clients notice) fine-tuning a gap that no longer matters.
//! 5. **Placement that sees pending moves.** Bundles that have no bound destination (a broker
//!    left, a new bundle) go to the broker with the lowest score *including* what has already
//!    been sent to it since its last report, instead of AvgShedder's load-blind random choice.
//! 6. **Level to the cluster mean, not to the pair's midpoint.** A bundle is not taken if it would
//!    lift the low broker more than a quarter-deadband above the cluster mean: levelling a pair to
//!    its own midpoint pushes the low broker past the mean, and that load must move a second time
//!    later. Each point moves once.
//! 7. **A stuck partner is re-paired.** If the high broker of a firing pair can give nothing
//!    (its last bundle, bundles in their grace period, or usage that is background rather than
//!    traffic), the low broker is offered to the next-highest settled broker a deadband above
//!    it; otherwise AvgShedder's fixed pairing starves it for ever (the mixed-hardware case).
//! 8. **Split what is too big to move.** If no bundle of a firing pair can move whole (each would
//!    overshoot) but an eighth of one would be taken, the plan asks for that bundle to be split
//!    ([`Plan::splits`]; the caller's split rule cuts it). Auto-split stops at half an average
//!    broker's traffic, so a hot bundle's children (24–32 points in the simulator) can end up
//!    together on one broker 11–14 points above the mean, where no whole child can level any
//!    pair: without this the cluster never converges.
//! 9. **A moderate gap needs a second report.** A broker reports again only when its usage or
//!    traffic has moved by its report threshold (Pulsar's 10 %, Skiff's `report_due`), so a report
//!    made during a traffic spike can stand for many cycles after the spike is over, and every low
//!    hit of the run is then counted on that one stale sample: AvgShedder's "8 minutes of
//!    imbalance" becomes "one sample, 8 minutes ago". A pair that fires on low hits alone
//!    therefore waits until its high broker has reported again since its run of hits began,
//!    unless the gap exceeds the deadband by more than a report can be off
//!    ([`PairConfig::report_drift_pct`], 10 points). A real moderate gap waits at most one report
//!    interval (15 min); a phantom one costs two moves, there and back once the load is missed.
//!    High gaps (≥ 40) are not held: no stale report is that far off.
//!
//! A plan from it never moves load from a less loaded to a more loaded broker (property-tested).
//!
//! # Layout
//!
//! - `model`: what a cycle reads ([`LoadSnapshot`]) and writes ([`Plan`]);
//! - `config`: each shedder's and placer's settings with Pulsar's (and Skiff's) defaults;
//! - this file: the [`Balancer`] (state, the cycle, grace periods and preallocations);
//! - `modular`: the modular load manager's shedders (Overload, Threshold, UniformLoad);
//! - `transfer`: the extensible load manager's TransferShedder;
//! - `pair`: the pair shedders, AvgShedder and Skiff's;
//! - `placer`: where a bundle without a bound destination goes.

mod config;
mod model;
mod modular;
mod pair;
mod placer;
mod transfer;

use std::collections::BTreeMap;

use rand::Rng;

use super::bundle::{BundleId, BundleLoad};
use super::NodeId;

pub use config::{
    BalancerConfig, OverloadConfig, PairConfig, PlacerConfig, ShedderConfig, ThresholdConfig,
    TransferConfig, UniformConfig, GRACE_PERIOD_MS_DEFAULT, OVERLOADED_PCT_DEFAULT,
    SKIFF_LOW_THRESHOLD_PCT, SKIFF_REPORT_DRIFT_PCT,
};
pub use model::{BrokerLoad, BundleMove, BundleStats, LoadSnapshot, MoveReason, Plan};
use pair::PairHits;

#[derive(Debug, Clone)]
struct Pending {
    at_ms: u64,
    load: BundleLoad,
}

/// The stateful balancer: shedder state, placer state, grace periods and preallocations.
#[derive(Debug, Clone)]
pub struct Balancer {
    config: BalancerConfig,
    /// Bundle → when it was last unloaded.
    unloaded_at_ms: BTreeMap<BundleId, u64>,
    /// Destination broker → traffic sent to it and not yet in its report.
    pending: BTreeMap<NodeId, Vec<Pending>>,
    /// Broker → time of its last move (for settling and TransferShedder's cooldown).
    moved_at_ms: BTreeMap<NodeId, u64>,
    /// ThresholdShedder's / TransferShedder's / LRUWW's usage EMA.
    ema: BTreeMap<NodeId, f64>,
    /// TransferShedder: report time at which each broker's EMA was last updated.
    ema_report_ms: BTreeMap<NodeId, u64>,
    /// AvgShedder-style per-broker hit counters.
    hits: BTreeMap<NodeId, PairHits>,
    /// TransferShedder's consecutive-condition counter.
    transfer_hits: u32,
    /// (from, to) → time of the last move between them, for the pair cooldown.
    pair_moved_at_ms: BTreeMap<(NodeId, NodeId), u64>,
    /// Splits asked for by the pair shedder in the current cycle.
    requested_splits: Vec<BundleId>,
}

impl Balancer {
    /// A balancer with `config` and no history.
    pub fn new(config: BalancerConfig) -> Self {
        Self {
            config,
            unloaded_at_ms: BTreeMap::new(),
            pending: BTreeMap::new(),
            moved_at_ms: BTreeMap::new(),
            ema: BTreeMap::new(),
            ema_report_ms: BTreeMap::new(),
            hits: BTreeMap::new(),
            transfer_hits: 0,
            pair_moved_at_ms: BTreeMap::new(),
            requested_splits: Vec::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &BalancerConfig {
        &self.config
    }

    /// One shedding cycle over `snapshot` at `now_ms`. The returned moves are recorded (grace
    /// period, preallocation) as if applied; the caller must apply them.
    pub fn plan<R: Rng + ?Sized>(
        &mut self,
        snapshot: &LoadSnapshot,
        now_ms: u64,
        rng: &mut R,
    ) -> Plan {
        self.forget_reported(snapshot, now_ms);
        self.requested_splits.clear();
        if snapshot.brokers.len() < 2 {
            return Plan::default();
        }
        let unloads = match self.config.shedder {
            ShedderConfig::Overload(c) => self.shed_overload(snapshot, now_ms, &c),
            ShedderConfig::Threshold(c) => self.shed_threshold(snapshot, now_ms, &c),
            ShedderConfig::Uniform(c) => self.shed_uniform(snapshot, now_ms, &c),
            ShedderConfig::Transfer(c) => self.shed_transfer(snapshot, now_ms, &c),
            ShedderConfig::Pair(c) => self.shed_pairs(snapshot, now_ms, &c),
        };
        let mut plan = Plan {
            moves: Vec::new(),
            splits: std::mem::take(&mut self.requested_splits),
        };
        for unload in unloads {
            let to = match unload.to {
                Some(to) => to,
                None => {
                    let candidates: Vec<NodeId> = snapshot.brokers.iter().map(|b| b.node).collect();
                    match self.choose(snapshot, &candidates, rng) {
                        Some(to) => to,
                        None => continue,
                    }
                }
            };
            self.record(&unload.bundle, unload.from, to, unload.load, now_ms);
            plan.moves.push(BundleMove {
                bundle: unload.bundle,
                from: unload.from,
                to,
                reason: unload.reason,
            });
        }
        plan
    }

    /// Places a bundle that has no owner (new, or its broker left) among `candidates`, and
    /// records the preallocation. `None` if there is no candidate.
    pub fn place<R: Rng + ?Sized>(
        &mut self,
        bundle: &BundleId,
        load: BundleLoad,
        snapshot: &LoadSnapshot,
        candidates: &[NodeId],
        now_ms: u64,
        rng: &mut R,
    ) -> Option<NodeId> {
        self.forget_reported(snapshot, now_ms);
        let to = self.choose(snapshot, candidates, rng)?;
        self.pending.entry(to).or_default().push(Pending {
            at_ms: now_ms,
            load,
        });
        let _ = bundle;
        Some(to)
    }

    fn record(&mut self, bundle: &BundleId, from: NodeId, to: NodeId, load: BundleLoad, now: u64) {
        let _ = self.unloaded_at_ms.insert(bundle.clone(), now);
        let _ = self.moved_at_ms.insert(from, now);
        let _ = self.moved_at_ms.insert(to, now);
        let _ = self.pair_moved_at_ms.insert((from, to), now);
        self.pending
            .entry(to)
            .or_default()
            .push(Pending { at_ms: now, load });
    }

    /// Drops preallocations that the destination's report now includes, and grace periods that
    /// have run out.
    fn forget_reported(&mut self, snapshot: &LoadSnapshot, now_ms: u64) {
        for broker in &snapshot.brokers {
            if let Some(list) = self.pending.get_mut(&broker.node) {
                list.retain(|p| p.at_ms >= broker.report_ms);
            }
        }
        let grace = self.config.grace_period_ms;
        self.unloaded_at_ms
            .retain(|_, at| now_ms < at.saturating_add(grace));
        let cooldown = match self.config.shedder {
            ShedderConfig::Pair(c) => c.pair_cooldown_ms,
            _ => 0,
        };
        self.pair_moved_at_ms
            .retain(|_, at| now_ms < at.saturating_add(cooldown));
    }

    fn recently_unloaded(&self, bundle: &BundleId) -> bool {
        self.unloaded_at_ms.contains_key(bundle)
    }

    fn pending_load(&self, node: NodeId) -> BundleLoad {
        let mut sum = BundleLoad::default();
        for p in self.pending.get(&node).into_iter().flatten() {
            sum.msg_rate_per_second += p.load.msg_rate_per_second;
            sum.throughput_bytes_per_second += p.load.throughput_bytes_per_second;
        }
        sum
    }

    /// Bundles of `broker` that may move, largest short-term throughput first.
    fn movable<'a>(&self, broker: &'a BrokerLoad) -> Vec<&'a BundleStats> {
        let mut list: Vec<&BundleStats> = broker
            .bundles
            .iter()
            .filter(|b| !self.recently_unloaded(&b.id))
            .collect();
        list.sort_by(|a, b| {
            b.short_term
                .throughput_bytes_per_second
                .total_cmp(&a.short_term.throughput_bytes_per_second)
                .then_with(|| a.id.cmp(&b.id))
        });
        list
    }

    fn update_ema(&mut self, node: NodeId, usage_pct: f64, history_fraction: f64) -> f64 {
        let h = self
            .ema
            .entry(node)
            .and_modify(|h| *h = *h * history_fraction + usage_pct * (1.0 - history_fraction))
            .or_insert(usage_pct);
        *h
    }
}

#[derive(Debug, Clone)]
struct Unload {
    bundle: BundleId,
    from: NodeId,
    to: Option<NodeId>,
    reason: MoveReason,
    load: BundleLoad,
}

impl Unload {
    fn new(b: &BundleStats, from: NodeId, to: Option<NodeId>, reason: MoveReason) -> Self {
        Self {
            bundle: b.id.clone(),
            from,
            to,
            reason,
            load: b.long_term,
        }
    }
}

/// A bundle's short-term message rate (`by_rate`) or throughput: what the rate-based shedders
/// (UniformLoadShedder, AvgShedder) measure amounts in.
fn short_term_size(b: &BundleStats, by_rate: bool) -> f64 {
    if by_rate {
        b.short_term.msg_rate_per_second
    } else {
        b.short_term.throughput_bytes_per_second
    }
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn extremes(xs: &[f64]) -> (usize, usize) {
    let Some(&first) = xs.first() else {
        return (0, 0);
    };
    let (mut imax, mut max) = (0, first);
    let (mut imin, mut min) = (0, first);
    for (i, &x) in xs.iter().enumerate() {
        if x > max {
            (imax, max) = (i, x);
        }
        if x < min {
            (imin, min) = (i, x);
        }
    }
    (imax, imin)
}

#[cfg(test)]
mod tests;
