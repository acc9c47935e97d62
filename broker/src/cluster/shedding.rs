//! The controller's shedding cycle (docs/design/cluster.md §5.3): every
//! `skiff.placement.shed.interval.ms` the controller broker reads the load reports and bundle
//! records of its image, asks the configured shedder (`skiff_placement::shed`) for a plan, and
//! persists the moves it starts (`skiff_cluster::bundles::begin_moves`) and the splits it asks for;
//! the controller's regular plan then carries the moves out. Also what operators see of it: the
//! last plan, and the placement section of `/metrics` ([`PlacementMetrics`]: the counters, the
//! per-broker load as the controller scored it, and the bundles each broker owns).
//!
//! Owns the shedder's memory (hit counters, pending moves: rebuilt empty by a new controller,
//! while cooldowns and half-done moves live in the bundle records) and the shedding settings.
//!
//! Must never: write to the store itself (it returns fenced writes), or decide a move (the
//! shedder does) or run while it is not the controller.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use skiff_cluster::bundles::{self, BundleSettings, MoveRefused};
use skiff_cluster::controller::ControllerWrite;
use skiff_cluster::ClusterImage;
use skiff_placement::shed::{Balancer, BalancerConfig, PlacerConfig, ShedderConfig};
use skiff_placement::split::{PartitionLoad, SplitAlgorithm};
use skiff_placement::NodeId;

use super::figures::by_broker;
use super::ClusterHandle;
use crate::config::Config;
use crate::metrics::{Exposition, MetricsSection};

/// One broker's load as the controller scored it at the last cycle.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ScoredBroker {
    pub(crate) broker: NodeId,
    /// Bytes in from clients plus replication bytes in, per second.
    pub(crate) load_bytes_per_second: f64,
    /// The shedder's score, percent.
    pub(crate) score_pct: f64,
    /// Bundles it owns.
    pub(crate) bundles: usize,
}

/// One planned move and what became of it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PlannedMove {
    pub(crate) bundle: String,
    pub(crate) from: NodeId,
    pub(crate) to: NodeId,
    pub(crate) reason: String,
    /// "started", "dry run", or why it was refused.
    pub(crate) outcome: String,
}

/// The last shedding cycle, for `GET /placement/bundles` and `skiff placement status`.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct LastCycle {
    /// When it ran, Unix milliseconds (0: never).
    pub(crate) at_ms: u64,
    pub(crate) shedder: String,
    pub(crate) dry_run: bool,
    pub(crate) brokers: Vec<ScoredBroker>,
    pub(crate) moves: Vec<PlannedMove>,
    pub(crate) splits: Vec<String>,
}

/// Counters of the controller's placement work.
#[derive(Debug, Default)]
pub(crate) struct SheddingCounters {
    pub(crate) cycles: AtomicU64,
    pub(crate) planned: AtomicU64,
    pub(crate) started: AtomicU64,
    pub(crate) refused: AtomicU64,
    pub(crate) ping_pong: AtomicU64,
    pub(crate) splits: AtomicU64,
}

/// The shedding settings and the shedder's state.
pub(crate) struct Shedding {
    pub(crate) enabled: bool,
    pub(crate) interval_ms: u64,
    pub(crate) dry_run: bool,
    shedder_name: String,
    pub(crate) settings: BundleSettings,
    balancer: Balancer,
    rng: ChaCha8Rng,
    /// The controller epoch the balancer's memory belongs to: a new term starts it afresh.
    epoch: Option<i64>,
    pub(crate) last: LastCycle,
}

impl Shedding {
    pub(crate) fn new(config: &Config) -> Self {
        let settings = BundleSettings {
            cooldown_ms: config.placement_bundle_cooldown_ms,
            moves_per_cycle_max: config.placement_shed_moves_max,
            capacity_bytes_per_second: config.placement_broker_capacity_bytes_per_second as f64,
        };
        Self {
            enabled: config.placement_shed_enable,
            interval_ms: config.placement_shed_interval_ms,
            dry_run: config.placement_shed_dry_run,
            shedder_name: config.placement_shedder.clone(),
            balancer: Self::balancer(&config.placement_shedder, settings.cooldown_ms),
            settings,
            rng: ChaCha8Rng::seed_from_u64(0x5eed ^ u64::from(config.node_id.unsigned_abs())),
            epoch: None,
            last: LastCycle::default(),
        }
    }

    fn balancer(name: &str, cooldown_ms: u64) -> Balancer {
        // Validated with the config; the default shedder if not.
        let mut shedder = ShedderConfig::named(name).unwrap_or_else(|_| ShedderConfig::skiff());
        if let ShedderConfig::Pair(pair) = &mut shedder {
            if pair.pair_cooldown_ms > 0 {
                pair.pair_cooldown_ms = cooldown_ms;
            }
        }
        Balancer::new(BalancerConfig {
            shedder,
            placer: PlacerConfig::LeastPredictedUsage,
            grace_period_ms: cooldown_ms,
        })
    }

    /// One shedding cycle on `image` as controller of `epoch`: the writes that start the planned
    /// moves and splits (none in a dry run).
    pub(crate) fn cycle(
        &mut self,
        image: &ClusterImage,
        epoch: i64,
        now_ms: u64,
        counters: &SheddingCounters,
    ) -> Vec<ControllerWrite> {
        if self.epoch != Some(epoch) {
            self.epoch = Some(epoch);
            self.balancer = Self::balancer(&self.shedder_name, self.settings.cooldown_ms);
        }
        counters.cycles.fetch_add(1, Ordering::Relaxed);
        let snapshot = bundles::load_snapshot(image, self.settings.capacity_bytes_per_second);
        let plan = self.balancer.plan(&snapshot, now_ms, &mut self.rng);
        counters
            .planned
            .fetch_add(plan.moves.len() as u64, Ordering::Relaxed);
        let mut last = LastCycle {
            at_ms: now_ms,
            shedder: self.shedder_name.clone(),
            dry_run: self.dry_run,
            brokers: snapshot
                .brokers
                .iter()
                .map(|b| ScoredBroker {
                    broker: b.node,
                    load_bytes_per_second: image
                        .loads()
                        .get(&b.node)
                        .map_or(0.0, |r| r.value.traffic.load_bytes_per_second()),
                    score_pct: b.usage_pct,
                    bundles: b.bundles.len(),
                })
                .collect(),
            moves: Vec::new(),
            splits: plan.splits.iter().map(ToString::to_string).collect(),
        };
        let describe = |m: &skiff_placement::shed::BundleMove| format!("{:?}", m.reason);
        if self.dry_run {
            last.moves = plan
                .moves
                .iter()
                .map(|m| PlannedMove {
                    bundle: m.bundle.to_string(),
                    from: m.from,
                    to: m.to,
                    reason: describe(m),
                    outcome: "dry run".to_owned(),
                })
                .collect();
            if !plan.moves.is_empty() || !plan.splits.is_empty() {
                tracing::info!(moves = ?last.moves, splits = ?last.splits, "shedding plan (dry run: nothing moves)");
            }
            self.last = last;
            return Vec::new();
        }
        let (mut writes, refused) =
            bundles::begin_moves(image, epoch, &plan.moves, now_ms, &self.settings, describe);
        let started = writes.len();
        counters
            .started
            .fetch_add(started as u64, Ordering::Relaxed);
        counters
            .refused
            .fetch_add(refused.len() as u64, Ordering::Relaxed);
        for planned in &plan.moves {
            let outcome = refused
                .iter()
                .find(|(m, _)| m == planned)
                .map_or_else(|| "started".to_owned(), |(_, why)| refusal(why).to_owned());
            if outcome == "started"
                && bundles::undoes_last_move(image, &planned.bundle, planned.from, planned.to)
            {
                counters.ping_pong.fetch_add(1, Ordering::Relaxed);
            }
            last.moves.push(PlannedMove {
                bundle: planned.bundle.to_string(),
                from: planned.from,
                to: planned.to,
                reason: describe(planned),
                outcome,
            });
        }
        for bundle in &plan.splits {
            let partitions: Vec<PartitionLoad> = bundles::bundle_partitions(image, bundle)
                .iter()
                .filter_map(|(topic, partition)| {
                    let partition = u32::try_from(*partition).ok()?;
                    Some(PartitionLoad {
                        hash: skiff_placement::bundle::partition_hash(topic, partition),
                        load: Default::default(),
                    })
                })
                .collect();
            let cuts = SplitAlgorithm::TopicCountEquallyDivide.cuts(bundle.range, &partitions);
            if let Some(write) = bundles::split(image, epoch, bundle, &cuts, now_ms) {
                counters.splits.fetch_add(1, Ordering::Relaxed);
                writes.push(write);
            }
        }
        if !last.moves.is_empty() || !last.splits.is_empty() {
            tracing::info!(moves = ?last.moves, splits = ?last.splits, "shedding plan");
        }
        self.last = last;
        writes
    }
}

fn refusal(why: &MoveRefused) -> &'static str {
    match why {
        MoveRefused::CycleFull => "refused: the cycle's maximum of moves was reached",
        MoveRefused::NotOwned => "refused: the bundle is not the source's (or is moving)",
        MoveRefused::Cooldown => "refused: the bundle moved within the cooldown",
        MoveRefused::PingPong => "refused: it would undo a move within the cooldown",
        MoveRefused::TargetNotRunning => "refused: the target does not run",
    }
}

/// One bundle as operators see it cluster-wide (`GET /placement/bundles`).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct BundleView {
    /// `namespace/0x…_0x…`.
    pub(crate) name: String,
    pub(crate) namespace: String,
    pub(crate) hash_lo: u64,
    pub(crate) hash_hi: u64,
    pub(crate) owner: Option<NodeId>,
    /// "owned" or "assigning".
    pub(crate) state: String,
    pub(crate) target: Option<NodeId>,
    pub(crate) since_ms: u64,
    pub(crate) reason: String,
    /// Its traffic as its owner last reported it.
    pub(crate) load: skiff_placement::bundle::BundleLoad,
    /// The partitions it holds, and how many of them its owner leads.
    pub(crate) partitions: usize,
    pub(crate) partitions_led_by_owner: usize,
    pub(crate) last_move: Option<skiff_cluster::records::BundleMoveRecord>,
}

/// The cluster-wide bundle map with the last shedding cycle (on the controller).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct BundlesView {
    pub(crate) bundles: Vec<BundleView>,
    /// The controller's last shedding cycle (only when this broker is the controller).
    pub(crate) cycle: Option<LastCycle>,
    /// The controller's id, where to ask for the cycle.
    pub(crate) controller: Option<NodeId>,
}

/// The bundle records of `image`, each with its owner's traffic and leaderships.
pub(crate) fn bundle_views(image: &ClusterImage) -> Vec<BundleView> {
    image
        .bundles()
        .iter()
        .map(|(id, record)| {
            let partitions = bundles::bundle_partitions(image, id);
            let led = partitions
                .iter()
                .filter(|(t, p)| {
                    image
                        .partition(t, *p)
                        .is_some_and(|s| s.value.leader == record.value.owner)
                })
                .count();
            BundleView {
                name: id.to_string(),
                namespace: id.namespace.clone(),
                hash_lo: id.range.lo,
                hash_hi: id.range.hi,
                owner: Some(record.value.owner),
                state: match record.value.state {
                    skiff_cluster::records::BundleState::Owned => "owned",
                    skiff_cluster::records::BundleState::Assigning => "assigning",
                }
                .to_owned(),
                target: record.value.target,
                since_ms: record.value.since_ms,
                reason: record.value.reason.clone(),
                load: bundles::owner_traffic(image, id),
                partitions: partitions.len(),
                partitions_led_by_owner: led,
                last_move: record.value.moves.last().cloned(),
            }
        })
        .collect()
}

/// Bundles each owner owns in `image`.
pub(crate) fn bundles_by_owner(image: &ClusterImage) -> BTreeMap<NodeId, i64> {
    let mut by_owner: BTreeMap<NodeId, i64> = BTreeMap::new();
    for record in image.bundles().values() {
        *by_owner.entry(record.value.owner).or_default() += 1;
    }
    by_owner
}

/// The placement section of `/metrics`: the shedder's counters, the brokers as the last cycle
/// scored them (on the controller), and the bundles each broker owns by the image.
pub(crate) struct PlacementMetrics(pub(crate) ClusterHandle);

impl MetricsSection for PlacementMetrics {
    fn render(&self, out: &mut Exposition) {
        let cluster = &self.0;
        let shed = &cluster.shedding_counters;
        let counters = [
            (
                "skiff_placement_shed_cycles_total",
                "Shedding cycles this broker ran as controller.",
                &shed.cycles,
            ),
            (
                "skiff_placement_planned_moves_total",
                "Bundle moves the shedder planned (dry runs included).",
                &shed.planned,
            ),
            (
                "skiff_placement_moves_total",
                "Bundle moves started (persisted as assigning) by this broker as controller.",
                &shed.started,
            ),
            (
                "skiff_placement_moves_refused_total",
                "Planned bundle moves not started: cooldown, a would-be ping-pong, the cycle's \
                 maximum, or a bundle no longer its source's.",
                &shed.refused,
            ),
            (
                "skiff_placement_ping_pong_total",
                "Bundle moves started that sent a bundle straight back where its last move took \
                 it from (returns within the cooldown are refused instead).",
                &shed.ping_pong,
            ),
            (
                "skiff_placement_splits_total",
                "Bundle splits (metadata only) written by this broker as controller.",
                &shed.splits,
            ),
        ];
        for (name, help, value) in counters {
            out.counter(name, help, value.load(Ordering::Relaxed));
        }
        if let Some(cycle) = cluster.last_shedding_cycle() {
            render_scores(&cycle, out);
        }
        out.labelled_gauges(
            "skiff_placement_bundles_owned",
            "Bundles each broker owns, in this broker's image.",
            "broker",
            by_broker(cluster.with_image(bundles_by_owner).unwrap_or_default()),
        );
    }
}

/// Each broker's load and score as the controller's last shedding cycle saw them.
fn render_scores(cycle: &LastCycle, out: &mut Exposition) {
    let by = |value: fn(&ScoredBroker) -> f64| {
        cycle
            .brokers
            .iter()
            .map(|b| {
                (
                    b.broker.to_string(),
                    crate::metrics::rounded_gauge(value(b)),
                )
            })
            .collect::<Vec<_>>()
    };
    out.labelled_gauges(
        "skiff_placement_broker_load_bytes_per_second",
        "Each broker's load (bytes in from clients plus replication bytes in, per \
         second) as the controller saw it at its last shedding cycle.",
        "broker",
        by(|b| b.load_bytes_per_second),
    );
    out.labelled_gauges(
        "skiff_placement_broker_score_percent",
        "Each broker's shedder score at the controller's last shedding cycle.",
        "broker",
        by(|b| b.score_pct),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_cycles_scores_render_rounded_by_broker() {
        let cycle = LastCycle {
            brokers: vec![ScoredBroker {
                broker: 2,
                load_bytes_per_second: 1_499.6,
                score_pct: 87.2,
                bundles: 4,
            }],
            ..LastCycle::default()
        };
        let mut out = Exposition::default();
        render_scores(&cycle, &mut out);
        let text = out.text();
        assert!(text.contains("skiff_placement_broker_load_bytes_per_second{broker=\"2\"} 1500"));
        assert!(text.contains("skiff_placement_broker_score_percent{broker=\"2\"} 87"));
        let image = super::super::figures::tests::image(&[1, 2], &[(1, &[1, 2])]);
        assert!(bundles_by_owner(&image).is_empty());
    }
}
