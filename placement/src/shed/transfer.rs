//! The extensible load manager's TransferShedder (transfer mode: it binds each bundle's
//! destination, the low broker of its pair).

use super::{
    extremes, mean, Balancer, BrokerLoad, BundleStats, LoadSnapshot, MoveReason, TransferConfig,
    Unload, OVERLOADED_PCT_DEFAULT,
};

impl Balancer {
    // INVARIANT: `h` has one entry per broker of `s` (transfer_usage) and `order` is a permutation
    // of its indices; `p < pairs <= order.len() / 2`.
    #[allow(clippy::indexing_slicing)]
    pub(super) fn shed_transfer(
        &mut self,
        s: &LoadSnapshot,
        now: u64,
        c: &TransferConfig,
    ) -> Vec<Unload> {
        let mut h = self.transfer_usage(s, c);
        if self.transfer_cooling(s, now, c) {
            return Vec::new();
        }
        if !transfer_needed(&h, s, c) {
            self.transfer_hits = 0;
            return Vec::new();
        }
        self.transfer_hits += 1;
        if self.transfer_hits <= c.hit_count_threshold {
            return Vec::new();
        }
        self.transfer_hits = 0;
        let mut out = Vec::new();
        let mut order: Vec<usize> = (0..h.len()).collect();
        order.sort_by(|&a, &b| h[a].total_cmp(&h[b]));
        let pairs = c.pairs_per_cycle_max.min(order.len() / 2);
        for p in 0..pairs {
            if !transfer_needed(&h, s, c) {
                break;
            }
            let (lo, hi) = (order[p], order[order.len() - 1 - p]);
            if h[hi] <= 0.0 {
                break;
            }
            let moved = self.transfer_pair(s, &h, (lo, hi), c, &mut out);
            let max_b = &s.brokers[hi];
            if max_b.throughput() > 0.0 {
                let shift = h[hi] * moved / max_b.throughput();
                h[hi] -= shift;
                h[lo] += shift;
            }
        }
        out
    }

    /// Each broker's smoothed usage as a fraction. The extensible manager keeps the EMA per
    /// report, not per cycle.
    fn transfer_usage(&mut self, s: &LoadSnapshot, c: &TransferConfig) -> Vec<f64> {
        let mut h: Vec<f64> = Vec::with_capacity(s.brokers.len());
        for b in &s.brokers {
            let fresh = self.ema_report_ms.get(&b.node) != Some(&b.report_ms);
            let value = if fresh {
                let _ = self.ema_report_ms.insert(b.node, b.report_ms);
                self.update_ema(b.node, b.usage_pct, c.history_fraction)
            } else {
                self.ema.get(&b.node).copied().unwrap_or(b.usage_pct)
            };
            h.push(value / 100.0);
        }
        h
    }

    /// Whether a broker took part in a transfer less than the cooldown ago, or has not
    /// reported since.
    fn transfer_cooling(&self, s: &LoadSnapshot, now: u64, c: &TransferConfig) -> bool {
        s.brokers.iter().any(|b| {
            self.moved_at_ms
                .get(&b.node)
                .is_some_and(|&at| now < at + c.cooldown_ms || b.report_ms <= at)
        })
    }

    /// Moves from `s.brokers[hi]` to `s.brokers[lo]` into `out`: of the high broker's top
    /// bundles, largest first, while they fit in its share of half the usage gap, always
    /// keeping one. Returns the throughput moved.
    // INVARIANT: `lo` and `hi` index both `s.brokers` and `h` (one entry per broker).
    #[allow(clippy::indexing_slicing)]
    fn transfer_pair(
        &self,
        s: &LoadSnapshot,
        h: &[f64],
        (lo, hi): (usize, usize),
        c: &TransferConfig,
        out: &mut Vec<Unload>,
    ) -> f64 {
        let (max_b, min_b) = (&s.brokers[hi], &s.brokers[lo]);
        let offload = (h[hi] - h[lo]) / 2.0;
        let target = max_b.throughput() * offload / h[hi];
        let mut top: Vec<&BundleStats> = max_b.bundles.iter().collect();
        top.sort_by(|a, b| {
            b.short_term
                .throughput_bytes_per_second
                .total_cmp(&a.short_term.throughput_bytes_per_second)
        });
        top.truncate(c.top_bundles);
        let keep_one = top.len().saturating_sub(1);
        let mut moved = 0.0;
        let movable = top.into_iter().filter(|b| !self.recently_unloaded(&b.id));
        for (count, b) in movable.enumerate() {
            let t = b.short_term.throughput_bytes_per_second;
            if count >= keep_one || moved + t > target {
                break;
            }
            moved += t;
            out.push(Unload::new(
                b,
                max_b.node,
                Some(min_b.node),
                MoveReason::Transfer { std: usage_std(h) },
            ));
        }
        moved
    }
}

/// Standard deviation of the usage fractions `h`.
fn usage_std(h: &[f64]) -> f64 {
    let avg = mean(h);
    (h.iter().map(|x| x * x).sum::<f64>() / h.len() as f64 - avg * avg)
        .max(0.0)
        .sqrt()
}

/// TransferShedder's condition: usage spread above the target, an underloaded broker (usage or
/// throughput), or an overloaded one.
fn transfer_needed(h: &[f64], s: &LoadSnapshot, c: &TransferConfig) -> bool {
    let k = (0.5f64).min(c.target_std / 2.0);
    let avg = mean(h);
    let (imax, imin) = extremes(h);
    let usage = |i: usize| h.get(i).copied().unwrap_or(0.0);
    let throughput = |i: usize| s.brokers.get(i).map_or(0.0, BrokerLoad::throughput);
    usage_std(h) > c.target_std
        || usage(imin) < avg * k
        || throughput(imin) < k * throughput(imax)
        || (usage(imax) > OVERLOADED_PCT_DEFAULT / 100.0 && usage(imax) > avg + c.target_std)
}
