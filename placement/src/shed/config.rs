//! The shedders' and placers' settings, with Pulsar's defaults and Skiff's recommended
//! configuration ([`BalancerConfig::skiff`]). Settings only: the shedders live beside this file.

use serde::{Deserialize, Serialize};

/// Re-shed ban per bundle (`loadBalancerSheddingGracePeriodMinutes` = 30): a bundle just moved
/// is not moved again within this time.
pub const GRACE_PERIOD_MS_DEFAULT: u64 = 30 * 60 * 1000;

/// Skiff's pair deadband (score points). Lower than AvgShedder's 15 on purpose: a shedder that
/// stops at a 15-point gap leaves measurement noise to decide whether the range is under 15.
pub const SKIFF_LOW_THRESHOLD_PCT: f64 = 10.0;

/// How far a broker's usage may drift before it sends a new report, at most (score points):
/// Pulsar's `loadBalancerReportUpdateThresholdPercentage` (10) as a share of a full broker, and
/// Skiff's 10 % change rule on each reported figure (at most 10 points of a 100-point score).
/// Skiff's pair shedder treats a report older than a run of hits as this uncertain.
pub const SKIFF_REPORT_DRIFT_PCT: f64 = 10.0;

/// Plain-usage overload line used by OverloadShedder and LeastLongTermMessageRate (85 %).
pub const OVERLOADED_PCT_DEFAULT: f64 = 85.0;

/// OverloadShedder's settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OverloadConfig {
    /// Usage at or above which a broker is shed (85).
    pub overloaded_pct: f64,
}

/// ThresholdShedder's settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ThresholdConfig {
    /// Shed brokers whose smoothed usage is ≥ average + this (10 points).
    pub threshold_pct: f64,
    /// EMA history weight α (0.9): h ← α·h + (1 − α)·u, once per cycle.
    pub history_fraction: f64,
    /// Skip when the throughput to shed is below this (10 MB/s).
    pub min_throughput_bytes_per_second: f64,
}

/// UniformLoadShedder's settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UniformConfig {
    /// Trigger when (max − min)·100/min message rate exceeds this (50).
    pub msg_rate_diff_pct: f64,
    /// Trigger when max/min throughput exceeds this (4).
    pub throughput_multiplier: f64,
    /// Share of the difference to move (0.2).
    pub unload_fraction: f64,
    /// Minimum message rate worth moving (1000/s).
    pub min_msg_rate: f64,
    /// Minimum throughput worth moving (1 MiB/s).
    pub min_throughput_bytes_per_second: f64,
}

/// TransferShedder's settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TransferConfig {
    /// Target std of usage as a fraction (0.25).
    pub target_std: f64,
    /// The condition must hold for more than this many consecutive cycles (3).
    pub hit_count_threshold: u32,
    /// Brokers in a transfer are left alone this long and until they report (180 s).
    pub cooldown_ms: u64,
    /// At most this many broker pairs per cycle (3).
    pub pairs_per_cycle_max: usize,
    /// Only the top K bundles of a broker are considered (10).
    pub top_bundles: usize,
    /// EMA history weight of the usage, applied per report (0.9).
    pub history_fraction: f64,
}

/// Pair shedders' settings: AvgShedder ([`ShedderConfig::avg_shedder`]) and Skiff's
/// ([`ShedderConfig::skiff`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PairConfig {
    /// Pairs closer than this (score points) are left alone (15).
    pub low_threshold_pct: f64,
    /// Pairs at least this far apart count as a "high" hit (40).
    pub high_threshold_pct: f64,
    /// Low hits needed to fire (8).
    pub hit_count_low: u32,
    /// High hits needed to fire (2).
    pub hit_count_high: u32,
    /// AvgShedder: share of the message-rate (or throughput) difference to move (0.5).
    pub unload_fraction: f64,
    /// Minimum message rate worth moving (1000/s).
    pub min_msg_rate: f64,
    /// Minimum throughput worth moving (1 MiB/s).
    pub min_throughput_bytes_per_second: f64,
    /// Skiff: amount from the score gap and each broker's score-per-byte, never inverting the
    /// pair by half the deadband or more; false = AvgShedder's message-rate amount.
    pub score_amount: bool,
    /// Skiff: leave a broker alone until it reports after its last move.
    pub settle: bool,
    /// Skiff: never move load from B to A within this long after a move from A to B (0: off).
    /// Such a move undoes recent work: it is the ping-pong docs/design/placement.md §3.3b counts.
    pub pair_cooldown_ms: u64,
    /// Skiff: how far a broker's usage may have drifted since its report without it reporting
    /// again (its report threshold, score points; 0: off). A moderate gap (low hits only) whose
    /// high broker has not reported since its run of hits began fires only if it exceeds the
    /// deadband by this much: the hits were all counted on one report, which may show a spike
    /// that is over.
    #[serde(default)]
    pub report_drift_pct: f64,
}

/// A shedder name [`ShedderConfig::named`] does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a shedder: skiff, avg, threshold, uniform, transfer or overload")]
pub struct UnknownShedder(pub String);

/// Which shedder runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum ShedderConfig {
    /// OverloadShedder.
    Overload(OverloadConfig),
    /// ThresholdShedder.
    Threshold(ThresholdConfig),
    /// UniformLoadShedder.
    Uniform(UniformConfig),
    /// TransferShedder (transfer mode: the destination is bound).
    Transfer(TransferConfig),
    /// AvgShedder or Skiff's pair shedder.
    Pair(PairConfig),
}

impl ShedderConfig {
    /// The shedder an operator names (Skiff's `skiff.placement.shedder`): `skiff`, `avg`,
    /// `threshold`, `uniform`, `transfer` or `overload`, each with its defaults.
    pub fn named(name: &str) -> Result<Self, UnknownShedder> {
        Ok(match name {
            "skiff" => Self::skiff(),
            "avg" => Self::avg_shedder(),
            "threshold" => Self::threshold(),
            "uniform" => Self::uniform(),
            "transfer" => Self::transfer(),
            "overload" => Self::overload(),
            other => return Err(UnknownShedder(other.to_owned())),
        })
    }

    /// OverloadShedder with Pulsar's defaults.
    pub fn overload() -> Self {
        Self::Overload(OverloadConfig {
            overloaded_pct: OVERLOADED_PCT_DEFAULT,
        })
    }

    /// ThresholdShedder with Pulsar's defaults.
    pub fn threshold() -> Self {
        Self::Threshold(ThresholdConfig {
            threshold_pct: 10.0,
            history_fraction: 0.9,
            min_throughput_bytes_per_second: 10.0 * 1024.0 * 1024.0,
        })
    }

    /// UniformLoadShedder with Pulsar's defaults.
    pub fn uniform() -> Self {
        Self::Uniform(UniformConfig {
            msg_rate_diff_pct: 50.0,
            throughput_multiplier: 4.0,
            unload_fraction: 0.2,
            min_msg_rate: 1000.0,
            min_throughput_bytes_per_second: 1024.0 * 1024.0,
        })
    }

    /// TransferShedder with Pulsar's defaults.
    pub fn transfer() -> Self {
        Self::Transfer(TransferConfig {
            target_std: 0.25,
            hit_count_threshold: 3,
            cooldown_ms: 180_000,
            pairs_per_cycle_max: 3,
            top_bundles: 10,
            history_fraction: 0.9,
        })
    }

    /// AvgShedder with the PIP's recommended settings (15/40, 8/2, unload fraction 0.5).
    pub fn avg_shedder() -> Self {
        Self::Pair(PairConfig {
            low_threshold_pct: 15.0,
            high_threshold_pct: 40.0,
            hit_count_low: 8,
            hit_count_high: 2,
            unload_fraction: 0.5,
            min_msg_rate: 1000.0,
            min_throughput_bytes_per_second: 1024.0 * 1024.0,
            score_amount: false,
            settle: false,
            pair_cooldown_ms: 0,
            report_drift_pct: 0.0,
        })
    }

    /// Skiff's settled pair shedder (see the module docs): AvgShedder's thresholds and hit
    /// counts with settling, score-based amounts and no rank inversion.
    pub fn skiff() -> Self {
        let Self::Pair(avg) = Self::avg_shedder() else {
            unreachable!("avg_shedder is a pair shedder")
        };
        Self::Pair(PairConfig {
            low_threshold_pct: SKIFF_LOW_THRESHOLD_PCT,
            score_amount: true,
            settle: true,
            pair_cooldown_ms: GRACE_PERIOD_MS_DEFAULT,
            report_drift_pct: SKIFF_REPORT_DRIFT_PCT,
            ..avg
        })
    }
}

/// Where unloaded bundles without a bound destination go.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum PlacerConfig {
    /// Least long-term message rate including preallocations; brokers above 85 % excluded.
    LeastLongTermMessageRate,
    /// Uniform among brokers whose usage EMA is ≥ `threshold_pct` below the average.
    LeastResourceUsageWithWeight {
        /// δ (10 points).
        threshold_pct: f64,
        /// EMA history weight, updated per selection call as upstream does (0.9).
        history_fraction: f64,
    },
    /// AvgShedder's fallback: uniformly random.
    Random,
    /// Skiff: least predicted usage (report + preallocated traffic × score-per-byte).
    LeastPredictedUsage,
}

/// A shedder and a placer, with the unload grace period.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BalancerConfig {
    /// The shedder.
    pub shedder: ShedderConfig,
    /// The placer for bundles the shedder did not bind.
    pub placer: PlacerConfig,
    /// Re-shed ban per bundle.
    pub grace_period_ms: u64,
}

impl BalancerConfig {
    /// Skiff's recommended configuration.
    pub fn skiff() -> Self {
        Self {
            shedder: ShedderConfig::skiff(),
            placer: PlacerConfig::LeastPredictedUsage,
            grace_period_ms: GRACE_PERIOD_MS_DEFAULT,
        }
    }
}
