//! Replication glue (docs/design/replication.md): the [`driver`] feeds every local partition
//! (`crate::partition::partition::Partition`, which drives its replica machine and carries out
//! what it decides: epoch assignment, acks=all completion, the high watermark) the store's
//! partition states and its timers, and submits the ISR compare-and-sets the machines propose;
//! the leader side of a follower's Fetch is in `handlers/fetch.rs`; the follower side is the
//! [`fetcher`], which paces reassignment catch-up with the [`throttle`]. The per-partition
//! replication gauges are this module's section of `/metrics`, registered in `crate::metrics` at
//! start.
//!
//! Must never: decide a role, an ISR or a high watermark itself (the pure replica machine does),
//! or be imported by `partition` (which it drives).

pub mod driver;
pub mod fetcher;
pub mod throttle;

use std::sync::Arc;

use crate::metrics::{Exposition, Metrics, MetricsSection};
use crate::partition::partition::ReplicationStatus;
use crate::partition::topics::Topics;

/// The replicas' section of `/metrics`: [`render_metrics`] over this broker's topics.
struct ReplicationMetrics(Arc<Topics>);

impl MetricsSection for ReplicationMetrics {
    fn render(&self, out: &mut Exposition) {
        render_metrics(&self.0, out);
    }
}

/// Registers the replicas' gauges in `metrics`, read from `topics` at every scrape.
pub(crate) fn register_metrics(topics: &Arc<Topics>, metrics: &Metrics) {
    metrics.register(Arc::new(ReplicationMetrics(topics.clone())));
}

/// The per-partition replication gauges, read from every local partition's machine at scrape
/// time (Kafka's UnderReplicatedPartitions, UnderMinIsrPartitionCount, offline log directories'
/// replicas and per-partition follower lag; the cluster-wide OfflinePartitionsCount is the
/// controller's, in `cluster`).
fn render_metrics(topics: &Topics, out: &mut Exposition) {
    let (mut led, mut under_replicated, mut under_min_isr, mut offline) = (0i64, 0i64, 0i64, 0i64);
    let mut max_lag = 0i64;
    let mut lag_by_partition = Vec::new();
    for topic in topics.all() {
        for partition in &topic.partitions {
            let status = match partition.replication_status() {
                ReplicationStatus::Offline => {
                    offline += 1;
                    continue;
                }
                ReplicationStatus::Led(status) => status,
                ReplicationStatus::Other => continue,
            };
            led += 1;
            under_replicated += i64::from(status.isr < status.replicas);
            under_min_isr += i64::from(status.isr < topic.config.min_insync_replicas as usize);
            max_lag = max_lag.max(status.max_follower_lag.unwrap_or(0));
            if status.replicas > 1 {
                if let Some(lag) = status.max_follower_lag {
                    lag_by_partition
                        .push(([topic.name.clone(), partition.index().to_string()], lag));
                }
            }
        }
    }
    out.gauge(
        "skiff_partitions_led",
        "Partitions this broker leads (by its replica machines).",
        led,
    );
    out.gauge(
        "skiff_partitions_under_replicated",
        "Led partitions whose ISR is smaller than their replica set.",
        under_replicated,
    );
    out.gauge(
        "skiff_partitions_under_min_isr",
        "Led partitions whose ISR is below min.insync.replicas (acks=all answers 19).",
        under_min_isr,
    );
    out.gauge(
        "skiff_replicas_offline",
        "Local replicas offline after a log I/O error.",
        offline,
    );
    out.gauge(
        "skiff_replica_max_lag",
        "Offsets the furthest-behind follower of any led partition lacks.",
        max_lag,
    );
    out.gauges_by_labels(
        "skiff_partition_follower_lag",
        "Per led partition with followers: offsets its furthest-behind follower lacks (from the \
         followers' last fetch offsets; absent until every follower has fetched).",
        &["topic", "partition"],
        lag_by_partition,
    );
}
