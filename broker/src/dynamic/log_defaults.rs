//! The log side of the dynamic broker configs: Kafka's `DynamicLogConfig`. The broker keys that
//! are defaults of topic configs (`log.retention.ms`, `log.segment.bytes`, `message.max.bytes`,
//! `min.insync.replicas`, the cleaner's per-log keys, ...; [`super::LOG_DEFAULT_KEYS`]) and
//! `num.recovery.threads.per.data.dir` are followed live: every topic that does not override a
//! changed key is resolved again and its logs reconfigured (`Topics::follow_broker_config`), the
//! controller takes the new `unclean.leader.election.enable` default, and the data directory its
//! new sync thread count.
//!
//! Must never: block the runtime (reconfiguring logs runs on a blocking thread), or change a
//! topic's own overrides (those live in its record in the metadata store).

use std::sync::Arc;

use tokio::sync::watch;

use crate::cluster::ClusterHandle;
use crate::config::Config;
use crate::partition::topics::Topics;

/// Applies each effective config the dynamic layers make to `topics` and `cluster` until
/// shutdown.
pub(crate) async fn follow(
    topics: Arc<Topics>,
    cluster: ClusterHandle,
    mut configs: watch::Receiver<Arc<Config>>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let config = configs.borrow_and_update().clone();
        if !Arc::ptr_eq(&config, &topics.broker_config()) {
            apply(&topics, &cluster, config).await;
        }
        tokio::select! {
            changed = configs.changed() => if changed.is_err() { return },
            _ = shutdown.changed() => return,
        }
    }
}

async fn apply(topics: &Arc<Topics>, cluster: &ClusterHandle, config: Arc<Config>) {
    cluster.set_unclean_leader_election_default(config.unclean_leader_election_enable);
    let topics = topics.clone();
    match tokio::task::spawn_blocking(move || topics.follow_broker_config(config)).await {
        Ok(Ok(report)) if report.configs_changed + report.refused > 0 => tracing::info!(
            topics_reconfigured = report.configs_changed,
            topics_refused = report.refused,
            "dynamic log defaults applied"
        ),
        Ok(Ok(_)) => {}
        Ok(Err(error)) => tracing::error!(%error, "dynamic log defaults not applied"),
        Err(error) => tracing::error!(%error, "dynamic log defaults task failed"),
    }
}
