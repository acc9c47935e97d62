//! What one shedding cycle reads (the brokers' latest reports, [`LoadSnapshot`]) and what it
//! writes ([`Plan`]: bundle moves and splits). Plain data; no decision is made here.

use serde::{Deserialize, Serialize};

use crate::bundle::{BundleId, BundleLoad};
use crate::NodeId;

/// One bundle on a broker, with short- and long-term traffic (Pulsar's N = 10 and N = 1000 means).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BundleStats {
    /// The bundle.
    pub id: BundleId,
    /// Short-term average traffic.
    pub short_term: BundleLoad,
    /// Long-term average traffic.
    pub long_term: BundleLoad,
}

/// One broker's latest report, as the leader holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BrokerLoad {
    /// The broker.
    pub node: NodeId,
    /// Weighted-max resource usage (CPU, NIC in/out, …) in percent, from the latest report.
    pub usage_pct: f64,
    /// The bundles it owns with their traffic, as of the report.
    pub bundles: Vec<BundleStats>,
    /// When the report was made (caller's clock).
    pub report_ms: u64,
}

impl BrokerLoad {
    /// Short-term messages per second over its bundles.
    pub fn msg_rate(&self) -> f64 {
        self.bundles
            .iter()
            .map(|b| b.short_term.msg_rate_per_second)
            .sum()
    }

    /// Short-term bytes per second over its bundles.
    pub fn throughput(&self) -> f64 {
        self.bundles
            .iter()
            .map(|b| b.short_term.throughput_bytes_per_second)
            .sum()
    }

    /// Long-term messages per second over its bundles.
    pub fn long_term_msg_rate(&self) -> f64 {
        self.bundles
            .iter()
            .map(|b| b.long_term.msg_rate_per_second)
            .sum()
    }
}

/// The leader's view of the cluster for one planning cycle.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LoadSnapshot {
    /// Every available broker.
    pub brokers: Vec<BrokerLoad>,
}

/// Why a bundle moves.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum MoveReason {
    /// The source's usage is above the overload threshold.
    Overloaded {
        /// Source usage, percent.
        usage_pct: f64,
    },
    /// The source's smoothed usage is above the average plus a margin.
    AboveAverage {
        /// Source smoothed usage, percent.
        usage_pct: f64,
        /// Cluster average, percent.
        average_pct: f64,
    },
    /// Message rate or throughput spread between the busiest and idlest broker.
    RateSpread {
        /// Max ÷ min (throughput) or percent difference (rate) that triggered.
        spread: f64,
    },
    /// TransferShedder: std of usage above target, or an under/overloaded broker.
    Transfer {
        /// Std of usage (fraction).
        std: f64,
    },
    /// A paired high and low broker (AvgShedder, Skiff).
    PairGap {
        /// Source score, percent.
        high_pct: f64,
        /// Destination score, percent.
        low_pct: f64,
    },
    /// The bundle had no owner (new, or its broker left) and is being placed.
    Unowned,
}

/// One bundle move.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BundleMove {
    /// Bundle to move.
    pub bundle: BundleId,
    /// Current owner.
    pub from: NodeId,
    /// New owner (equal to `from` when a placer puts an unloaded bundle back where it was: the
    /// unload still happens and clients still stall).
    pub to: NodeId,
    /// Why.
    pub reason: MoveReason,
}

/// A list of bundle moves, and bundles to split before anything can move.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Plan {
    /// Moves, in the order they were decided.
    pub moves: Vec<BundleMove>,
    /// Skiff's pair shedder: bundles to split because a pair a deadband apart could not move
    /// any bundle whole without overshooting, while a piece of one would fit. The caller
    /// splits them (its split rule decides the cuts and may refuse); the children stay on the
    /// owner and a later cycle moves one.
    pub splits: Vec<BundleId>,
}
