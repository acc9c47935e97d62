//! The pair shedders: AvgShedder (the i-th lowest score paired with the i-th highest, fired by
//! hit counts) and Skiff's settled variant (see the module docs of [`super`]). Both bind each
//! bundle's destination to the low broker of its pair.

use super::{
    mean, median, short_term_size, Balancer, BrokerLoad, BundleId, BundleLoad, BundleStats,
    LoadSnapshot, MoveReason, NodeId, PairConfig, Unload,
};

/// Skiff's pair stops taking bundles once its predicted gap is under this × half the deadband
/// (8 points with the 10-point deadband): still clearly inside the 15-point convergence bar, and
/// each bundle not taken is one unload fewer.
const STOP_GAP_FACTOR: f64 = 1.6;

/// Skiff's pair shedder asks for a bundle to be split only if a piece this small of it (three
/// halvings) would be taken: the gap is then one a bundle of that size can close, and each split
/// (which is for ever) brings a fitting piece a step closer. A bundle that even this piece of
/// would overshoot is left alone: splitting it would not help the pair.
const SPLIT_PIECE_FRACTION_MIN: f64 = 0.125;

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct PairHits {
    low: u32,
    high: u32,
    /// When the report the broker's current run of low hits began on was made.
    run_report_ms: u64,
}

impl PairHits {
    /// Whether these counts fire a pair (AvgShedder: `hit_count_high` high hits or
    /// `hit_count_low` low hits).
    fn fire(self, c: &PairConfig) -> bool {
        self.fire_high(c) || self.low >= c.hit_count_low
    }

    /// Whether the high hits alone fire.
    fn fire_high(self, c: &PairConfig) -> bool {
        self.high >= c.hit_count_high
    }

    /// One more hit on a report made at `report_ms`.
    fn count_low(&mut self, report_ms: u64) {
        if self.low == 0 {
            self.run_report_ms = report_ms;
        }
        self.low += 1;
    }
}

/// What Skiff's score amount needs to know of the whole cluster; the same for every pair of a
/// cycle.
#[derive(Debug, Clone, Copy)]
struct ClusterScores {
    /// The cluster's median score points per (msg/s) and per (byte/s) ([`median_unit_costs`]).
    medians: (f64, f64),
    /// Mean usage over every broker of the snapshot, settled or not.
    mean_pct: f64,
    /// Half the deadband: how far a move may invert a pair.
    gap_enough_pct: f64,
}

/// The reason of a move from `high` to `low`.
fn pair_gap(high: &BrokerLoad, low: &BrokerLoad) -> MoveReason {
    MoveReason::PairGap {
        high_pct: high.usage_pct,
        low_pct: low.usage_pct,
    }
}

impl Balancer {
    pub(super) fn shed_pairs(&mut self, s: &LoadSnapshot, now: u64, c: &PairConfig) -> Vec<Unload> {
        let order = self.pairable(s, c);
        let candidates = self.count_pair_hits(&order, c);
        if candidates.is_empty() {
            self.hits.clear();
            return Vec::new();
        }
        let cluster = ClusterScores {
            medians: median_unit_costs(s),
            mean_pct: mean(&s.brokers.iter().map(|b| b.usage_pct).collect::<Vec<_>>()),
            gap_enough_pct: c.low_threshold_pct / 2.0,
        };
        let mut out = Vec::new();
        // A broker already re-paired in this cycle sits out: its report no longer tells what it
        // will carry.
        let mut busy: Vec<NodeId> = Vec::new();
        for (i, j) in candidates {
            let (Some(&low), Some(&high)) = (order.get(i), order.get(j)) else {
                continue; // count_pair_hits returns indices into `order` only
            };
            let hits =
                [low.node, high.node].map(|n| self.hits.get(&n).copied().unwrap_or_default());
            let fire = hits.iter().any(|h| h.fire(c));
            if !fire
                || !hits.iter().any(|h| h.fire_high(c)) && !self.gap_confirmed(high, low, c)
                || self.reverses_recent_move(high.node, low.node, now, c)
                || busy.contains(&low.node)
                || busy.contains(&high.node)
            {
                continue;
            }
            let _ = self.hits.insert(low.node, PairHits::default());
            let _ = self.hits.insert(high.node, PairHits::default());
            if c.score_amount {
                out.extend(self.shed_scored_pair(&order, (i, j), now, c, &cluster, &mut busy));
            } else {
                out.extend(self.pair_by_rate(high, low, c, pair_gap(high, low)));
            }
        }
        out
    }

    /// The brokers a pair shedder pairs, lowest score first: with settling, only those that
    /// have reported since their last move.
    fn pairable<'s>(&self, s: &'s LoadSnapshot, c: &PairConfig) -> Vec<&'s BrokerLoad> {
        let settled = |b: &BrokerLoad| {
            !c.settle
                || self
                    .moved_at_ms
                    .get(&b.node)
                    .is_none_or(|&at| b.report_ms > at)
        };
        let mut order: Vec<&BrokerLoad> = s.brokers.iter().filter(|b| settled(b)).collect();
        // AvgShedder truncates score differences to whole points when sorting; ties keep the
        // snapshot order, so the pairing is deterministic.
        order.sort_by(|a, b| a.usage_pct.trunc().total_cmp(&b.usage_pct.trunc()));
        order
    }

    /// AvgShedder's hit counting over the pairs of `order` (i-th lowest with i-th highest): a
    /// pair a deadband apart adds a low hit to both brokers, and a high hit if it is
    /// `high_threshold_pct` apart (else their high hits restart); a closer pair resets both.
    /// Returns the pairs a deadband apart, as indices into `order`.
    fn count_pair_hits(&mut self, order: &[&BrokerLoad], c: &PairConfig) -> Vec<(usize, usize)> {
        let mut candidates: Vec<(usize, usize)> = Vec::new();
        let (mut i, mut j) = (0usize, order.len().saturating_sub(1));
        while i < j {
            let (Some(&low), Some(&high)) = (order.get(i), order.get(j)) else {
                break; // i < j < order.len()
            };
            let d = high.usage_pct - low.usage_pct;
            let mut hl = self.hits.get(&low.node).copied().unwrap_or_default();
            let mut hh = self.hits.get(&high.node).copied().unwrap_or_default();
            if d < c.low_threshold_pct {
                hl = PairHits::default();
                hh = PairHits::default();
            } else {
                hl.count_low(low.report_ms);
                hh.count_low(high.report_ms);
                if d >= c.high_threshold_pct {
                    hl.high += 1;
                    hh.high += 1;
                } else {
                    hl.high = 0;
                    hh.high = 0;
                }
                candidates.push((i, j));
            }
            let _ = self.hits.insert(low.node, hl);
            let _ = self.hits.insert(high.node, hh);
            i += 1;
            j -= 1;
        }
        candidates
    }

    /// Whether a moderate gap (one that fires on low hits only) can be trusted: the high broker
    /// has reported since its run of hits began, or the gap exceeds the deadband by more than a
    /// report may be off ([`PairConfig::report_drift_pct`]). A broker reports again only when
    /// its usage has moved by its report threshold, so a report made during a spike can stand
    /// long after the spike, and every hit of the run is then counted on that one stale sample:
    /// waiting for a second report costs a moderate gap at most one report interval, and moving
    /// on a spike costs two moves (there, and back once the load is missed).
    fn gap_confirmed(&self, high: &BrokerLoad, low: &BrokerLoad, c: &PairConfig) -> bool {
        if c.report_drift_pct <= 0.0 {
            return true;
        }
        let run = self.hits.get(&high.node).copied().unwrap_or_default();
        high.report_ms > run.run_report_ms
            || high.usage_pct - low.usage_pct >= c.low_threshold_pct + c.report_drift_pct
    }

    /// Whether a move from `high` to `low` now would undo a move from `low` to `high` within the
    /// pair cooldown.
    fn reverses_recent_move(&self, high: NodeId, low: NodeId, now: u64, c: &PairConfig) -> bool {
        self.pair_moved_at_ms
            .get(&(low, high))
            .is_some_and(|&at| now < at.saturating_add(c.pair_cooldown_ms))
    }

    /// Skiff's moves for the firing pair `order[i]` (low) and `order[j]` (high): by score; if
    /// the high broker can give nothing, from another high broker ([`Self::re_pair`]); if
    /// nobody can, a split of one of the high broker's bundles. Adds the brokers it involves
    /// to `busy`.
    fn shed_scored_pair(
        &mut self,
        order: &[&BrokerLoad],
        (i, j): (usize, usize),
        now: u64,
        c: &PairConfig,
        cluster: &ClusterScores,
        busy: &mut Vec<NodeId>,
    ) -> Vec<Unload> {
        let (Some(&low), Some(&high)) = (order.get(i), order.get(j)) else {
            return Vec::new(); // the caller's indices come from `order`
        };
        let (mut moves, split) = self.pair_by_score(high, low, cluster, pair_gap(high, low));
        if moves.is_empty() {
            moves = self.re_pair(order, (i, j), now, c, cluster, busy);
        }
        // Nobody could give the low broker a whole bundle, but a piece of one of the high
        // broker's would fit: split it (an auto-split limit relative to a whole broker leaves
        // bundles that level no pair a deadband apart). The high broker sits out the rest of
        // the cycle: its next report shows the children.
        if moves.is_empty() {
            if let Some(id) = split {
                busy.push(high.node);
                self.requested_splits.push(id);
            }
        }
        busy.extend(moves.iter().flat_map(|m| [m.from, m.to.unwrap_or(m.from)]));
        moves
    }

    /// A high broker with nothing it may give (its last bundle, or all in their grace period,
    /// or load that is background rather than traffic) would keep its low partner
    /// `order[i]` starved for ever: offer the low broker to the next-highest settled broker
    /// below `order[j]` still a deadband above it that is not busy in this cycle. The moves of
    /// the first one that gives.
    fn re_pair(
        &self,
        order: &[&BrokerLoad],
        (i, j): (usize, usize),
        now: u64,
        c: &PairConfig,
        cluster: &ClusterScores,
        busy: &[NodeId],
    ) -> Vec<Unload> {
        let Some(&low) = order.get(i) else {
            return Vec::new(); // the caller's indices come from `order`
        };
        // Only brokers on the high half: a low-half broker receives this cycle.
        for k in (order.len() / 2..j).rev().filter(|&k| k > i) {
            let Some(&alt) = order.get(k) else {
                continue; // k < j < order.len()
            };
            if alt.usage_pct - low.usage_pct < c.low_threshold_pct
                || self.reverses_recent_move(alt.node, low.node, now, c)
                || busy.contains(&alt.node)
            {
                continue;
            }
            let moves = self.pair_by_score(alt, low, cluster, pair_gap(alt, low)).0;
            if !moves.is_empty() {
                return moves;
            }
        }
        Vec::new()
    }

    /// AvgShedder's amount: a fraction of the message-rate difference, else of the throughput
    /// difference; bundles largest-first, taken if they fit in what remains.
    fn pair_by_rate(
        &self,
        high: &BrokerLoad,
        low: &BrokerLoad,
        c: &PairConfig,
        reason: MoveReason,
    ) -> Vec<Unload> {
        let rate_amount = (high.msg_rate() - low.msg_rate()) * c.unload_fraction;
        let tput_amount = (high.throughput() - low.throughput()) * c.unload_fraction;
        let (amount, by_rate) = if rate_amount > c.min_msg_rate {
            (rate_amount, true)
        } else if tput_amount > c.min_throughput_bytes_per_second {
            (tput_amount, false)
        } else {
            return Vec::new();
        };
        let size = |b: &BundleStats| short_term_size(b, by_rate);
        let mut list = self.movable(high);
        list.sort_by(|a, b| size(b).total_cmp(&size(a)).then_with(|| a.id.cmp(&b.id)));
        let mut remaining = amount;
        let mut out = Vec::new();
        for b in list {
            if size(b) > 0.0 && size(b) <= remaining {
                remaining -= size(b);
                out.push(Unload::new(b, high.node, Some(low.node), reason));
            }
        }
        out
    }

    /// Skiff's amount (see the module docs): bundles of `high`, largest first, each taken if it
    /// brings the predicted pair closer without inverting it by `gap_enough_pct` or lifting
    /// `low` past the cluster mean; the costs are [`pair_unit_costs`]. Also the bundle to split
    /// when none is taken but a piece of one would be.
    fn pair_by_score(
        &self,
        high: &BrokerLoad,
        low: &BrokerLoad,
        cluster: &ClusterScores,
        reason: MoveReason,
    ) -> (Vec<Unload>, Option<BundleId>) {
        if high.msg_rate() <= 0.0 && high.throughput() <= 0.0 || high.bundles.len() <= 1 {
            return (Vec::new(), None);
        }
        let (high_costs, low_costs) = pair_unit_costs(high, low, cluster.medians);
        let (cluster_mean_pct, gap_enough_pct) = (cluster.mean_pct, cluster.gap_enough_pct);
        let points = |load: &BundleLoad, costs: (f64, f64)| {
            (costs.0 * load.msg_rate_per_second + costs.1 * load.throughput_bytes_per_second) / 2.0
        };
        let mut high_score = high.usage_pct;
        let mut low_score = low.usage_pct + points(&self.pending_load(low.node), low_costs);
        let mut out = Vec::new();
        // The smallest bundle rejected whole of which a piece ([`SPLIT_PIECE_FRACTION_MIN`])
        // would have been taken.
        let mut split = None;
        for b in self.movable(high) {
            // Stop once the predicted gap is well inside the deadband: fine-tuning it further
            // costs moves (each one an unload clients notice) for no change in the verdict.
            if out.len() + 1 >= high.bundles.len()
                || high_score - low_score < STOP_GAP_FACTOR * gap_enough_pct
            {
                break;
            }
            let drop = points(&b.short_term, high_costs);
            let rise = points(&b.short_term, low_costs);
            if drop <= 0.0 {
                continue;
            }
            let (h2, l2) = (high_score - drop, low_score + rise);
            // Take the bundle if it brings the pair closer, even past level as long as the
            // overshoot stays under `gap_enough_pct`: one large bundle that overshoots a little
            // replaces several small ones (each move an unload clients notice), and a gap that
            // small never fires the reverse pair (it is under the deadband, and the pair cooldown
            // bans it anyway).
            //
            // And never lift the low broker past the cluster mean by more than a quarter of the
            // deadband: a pair levelled to its own midpoint sends the low broker past the mean, and
            // that load has to move a second time later. Stopping at the mean moves each point
            // once, which is what keeps the move count down.
            let past_mean = cluster_mean_pct + gap_enough_pct / 2.0;
            let takes = |drop: f64, rise: f64| {
                let (h2, l2) = (high_score - drop, low_score + rise);
                (h2 - l2).abs() < high_score - low_score
                    && l2 - h2 < gap_enough_pct
                    && l2 <= past_mean.max(low_score)
            };
            if takes(drop, rise) {
                high_score = h2;
                low_score = l2;
                out.push(Unload::new(b, high.node, Some(low.node), reason));
            } else if takes(
                drop * SPLIT_PIECE_FRACTION_MIN,
                rise * SPLIT_PIECE_FRACTION_MIN,
            ) {
                split = Some(b.id.clone());
            }
        }
        let split = if out.is_empty() { split } else { None };
        (out, split)
    }
}

/// Score points per (msg/s) and per (byte/s) on `broker`, from its own usage and traffic.
fn unit_costs(broker: &BrokerLoad) -> (f64, f64) {
    let per = |whole: f64| {
        if whole > 0.0 {
            broker.usage_pct / whole
        } else {
            0.0
        }
    };
    (per(broker.msg_rate()), per(broker.throughput()))
}

/// Score points per (msg/s) and per (byte/s) for a move from `high` to `low`. The drop on the
/// source uses the smaller of its own and the cluster's median cost per unit of traffic: a
/// broker whose usage is partly background (not traffic) would otherwise look as if each byte
/// cost far more than it does, and would never be unloaded. The rise on the destination uses its
/// own cost (erring on the side of moving less), or the source's if it carries nothing.
fn pair_unit_costs(
    high: &BrokerLoad,
    low: &BrokerLoad,
    medians: (f64, f64),
) -> ((f64, f64), (f64, f64)) {
    let (own_msg, own_byte) = unit_costs(high);
    let positive_min = |own: f64, median: f64| if median > 0.0 { own.min(median) } else { own };
    let high_costs = (
        positive_min(own_msg, medians.0),
        positive_min(own_byte, medians.1),
    );
    let low_carries = low.msg_rate() > 0.0 || low.throughput() > 0.0;
    let low_costs = if low_carries {
        unit_costs(low)
    } else {
        high_costs
    };
    (high_costs, low_costs)
}

/// The cluster's median unit costs over brokers that carry traffic.
fn median_unit_costs(snapshot: &LoadSnapshot) -> (f64, f64) {
    let (mut per_msg, mut per_byte) = (Vec::new(), Vec::new());
    for b in &snapshot.brokers {
        let (m, t) = unit_costs(b);
        if m > 0.0 {
            per_msg.push(m);
        }
        if t > 0.0 {
            per_byte.push(t);
        }
    }
    (median(&per_msg), median(&per_byte))
}
