//! Where a bundle without a bound destination goes: LeastLongTermMessageRate,
//! LeastResourceUsageWithWeight, uniformly random, or Skiff's least predicted usage.

use rand::Rng;

use super::{
    mean, median, Balancer, BrokerLoad, LoadSnapshot, NodeId, PlacerConfig, OVERLOADED_PCT_DEFAULT,
};

impl Balancer {
    pub(super) fn choose<R: Rng + ?Sized>(
        &mut self,
        s: &LoadSnapshot,
        candidates: &[NodeId],
        rng: &mut R,
    ) -> Option<NodeId> {
        let brokers: Vec<&BrokerLoad> = s
            .brokers
            .iter()
            .filter(|b| candidates.contains(&b.node))
            .collect();
        if brokers.is_empty() {
            return candidates.first().copied();
        }
        match self.config.placer {
            PlacerConfig::Random => brokers.get(rng.gen_range(0..brokers.len())).map(|b| b.node),
            PlacerConfig::LeastLongTermMessageRate => {
                let scores: Vec<f64> = brokers
                    .iter()
                    .map(|b| {
                        if b.usage_pct > OVERLOADED_PCT_DEFAULT {
                            f64::INFINITY
                        } else {
                            b.long_term_msg_rate() + self.pending_load(b.node).msg_rate_per_second
                        }
                    })
                    .collect();
                pick_min(&brokers, &scores, rng)
            }
            PlacerConfig::LeastResourceUsageWithWeight {
                threshold_pct,
                history_fraction,
            } => {
                let h: Vec<f64> = brokers
                    .iter()
                    .map(|b| self.update_ema(b.node, b.usage_pct, history_fraction))
                    .collect();
                let avg = mean(&h);
                let best: Vec<&&BrokerLoad> = brokers
                    .iter()
                    .zip(&h)
                    .filter(|(_, h)| **h + threshold_pct <= avg)
                    .map(|(b, _)| b)
                    .collect();
                if best.is_empty() {
                    brokers.get(rng.gen_range(0..brokers.len())).map(|b| b.node)
                } else {
                    best.get(rng.gen_range(0..best.len())).map(|b| b.node)
                }
            }
            PlacerConfig::LeastPredictedUsage => {
                let costs: Vec<f64> = brokers
                    .iter()
                    .filter(|b| b.throughput() > 0.0)
                    .map(|b| b.usage_pct / b.throughput())
                    .collect();
                let median_cost = median(&costs);
                let scores: Vec<f64> = brokers
                    .iter()
                    .map(|b| {
                        let cost = if b.throughput() > 0.0 {
                            b.usage_pct / b.throughput()
                        } else {
                            median_cost
                        };
                        b.usage_pct + self.pending_load(b.node).throughput_bytes_per_second * cost
                    })
                    .collect();
                pick_min(&brokers, &scores, rng)
            }
        }
    }
}

/// Uniform among the minimum-score brokers; all infinite → uniform among all.
fn pick_min<R: Rng + ?Sized>(
    brokers: &[&BrokerLoad],
    scores: &[f64],
    rng: &mut R,
) -> Option<NodeId> {
    let min = scores.iter().copied().fold(f64::INFINITY, f64::min);
    let best: Vec<NodeId> = if min.is_finite() {
        brokers
            .iter()
            .zip(scores)
            .filter(|(_, s)| **s <= min)
            .map(|(b, _)| b.node)
            .collect()
    } else {
        brokers.iter().map(|b| b.node).collect()
    };
    if best.is_empty() {
        None
    } else {
        best.get(rng.gen_range(0..best.len())).copied()
    }
}
