//! The modular load manager's shedders: OverloadShedder, ThresholdShedder and
//! UniformLoadShedder. None binds a destination: the placer chooses it.

use super::{
    mean, short_term_size, Balancer, BrokerLoad, BundleStats, LoadSnapshot, MoveReason,
    OverloadConfig, ThresholdConfig, UniformConfig, Unload,
};

impl Balancer {
    /// Pulsar's shared "greedy descending" pick: largest first while the marked total is below
    /// the target, always at least one bundle; a broker with one bundle is never shed.
    fn greedy(
        &self,
        broker: &BrokerLoad,
        target_bytes_per_second: f64,
        reason: MoveReason,
    ) -> Vec<Unload> {
        if broker.bundles.len() <= 1 {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut marked = 0.0;
        for b in self.movable(broker) {
            if !out.is_empty() && marked >= target_bytes_per_second {
                break;
            }
            marked += b.short_term.throughput_bytes_per_second;
            out.push(Unload::new(b, broker.node, None, reason));
        }
        out
    }

    pub(super) fn shed_overload(
        &self,
        s: &LoadSnapshot,
        _now: u64,
        c: &OverloadConfig,
    ) -> Vec<Unload> {
        let mut out = Vec::new();
        for broker in &s.brokers {
            if broker.usage_pct >= c.overloaded_pct {
                let fraction = (broker.usage_pct - c.overloaded_pct + 5.0) / 100.0;
                let reason = MoveReason::Overloaded {
                    usage_pct: broker.usage_pct,
                };
                out.extend(self.greedy(broker, broker.throughput() * fraction, reason));
            }
        }
        out
    }

    pub(super) fn shed_threshold(
        &mut self,
        s: &LoadSnapshot,
        _now: u64,
        c: &ThresholdConfig,
    ) -> Vec<Unload> {
        let scores: Vec<f64> = s
            .brokers
            .iter()
            .map(|b| self.update_ema(b.node, b.usage_pct, c.history_fraction))
            .collect();
        let avg = mean(&scores);
        let mut out = Vec::new();
        for (broker, &h) in s.brokers.iter().zip(&scores) {
            if h < avg + c.threshold_pct {
                continue;
            }
            let fraction = (h - avg - c.threshold_pct + 5.0) / 100.0;
            let target = broker.throughput() * fraction;
            if target < c.min_throughput_bytes_per_second {
                continue;
            }
            let reason = MoveReason::AboveAverage {
                usage_pct: h,
                average_pct: avg,
            };
            out.extend(self.greedy(broker, target, reason));
        }
        out
    }

    pub(super) fn shed_uniform(
        &self,
        s: &LoadSnapshot,
        _now: u64,
        c: &UniformConfig,
    ) -> Vec<Unload> {
        let by = |f: &dyn Fn(&BrokerLoad) -> f64| {
            let max = s.brokers.iter().max_by(|a, b| f(a).total_cmp(&f(b)));
            let min = s.brokers.iter().min_by(|a, b| f(a).total_cmp(&f(b)));
            (max, min)
        };
        let (Some(rate_max), Some(rate_min)) = by(&BrokerLoad::msg_rate) else {
            return Vec::new();
        };
        let (Some(tput_max), Some(tput_min)) = by(&BrokerLoad::throughput) else {
            return Vec::new();
        };
        let min_rate = if rate_min.msg_rate() > 0.0 {
            rate_min.msg_rate()
        } else {
            1.0
        };
        let rate_diff_pct = (rate_max.msg_rate() - rate_min.msg_rate()) * 100.0 / min_rate;
        let min_tput = if tput_min.throughput() > 0.0 {
            tput_min.throughput()
        } else {
            1.0
        };
        let tput_ratio = tput_max.throughput() / min_tput;
        let (source, amount, by_rate, spread) = if rate_diff_pct > c.msg_rate_diff_pct {
            let amount = (rate_max.msg_rate() - rate_min.msg_rate()) * c.unload_fraction;
            if amount < c.min_msg_rate {
                return Vec::new();
            }
            (rate_max, amount, true, rate_diff_pct)
        } else if tput_ratio > c.throughput_multiplier {
            let amount = (tput_max.throughput() - tput_min.throughput()) * c.unload_fraction;
            if amount < c.min_throughput_bytes_per_second {
                return Vec::new();
            }
            (tput_max, amount, false, tput_ratio)
        } else {
            return Vec::new();
        };
        if source.bundles.len() <= 1 {
            return Vec::new();
        }
        let size = |b: &BundleStats| short_term_size(b, by_rate);
        let mut list = self.movable(source);
        list.sort_by(|a, b| size(b).total_cmp(&size(a)));
        let mut remaining = amount;
        let mut out = Vec::new();
        for b in list {
            if out.len() + 1 >= source.bundles.len() {
                break;
            }
            if size(b) > 0.0 && size(b) <= remaining {
                remaining -= size(b);
                out.push(Unload::new(
                    b,
                    source.node,
                    None,
                    MoveReason::RateSpread { spread },
                ));
            }
        }
        out
    }
}
