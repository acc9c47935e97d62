//! The materializer: makes this broker's topics and logs ([`crate::partition::topics::Topics`])
//! follow its image of the store. It runs once before the broker serves, then after every image
//! change that changes what this broker replicates, and publishes the revision it reached so a
//! topic change can wait for its logs (`Cluster::wait_materialized`).
//!
//! Replicas are fed through a [`FeedStates`] the broker passes in (the replication driver's),
//! because replication follows the cluster's image and so imports this folder, not the reverse.
//!
//! Must never: decide what exists (the image does: `skiff_cluster::topics::local_topics`),
//! publish a revision before the replicas were fed its partition states, or run blocking IO on
//! an async worker (the reconcile and the feed run on a blocking thread).

use std::sync::Arc;
use std::time::Duration;

use skiff_cluster::topics::{local_topics, LocalTopic};
use tokio::sync::watch;

use super::{Cluster, ClusterHandle};
use crate::partition::topics::{TopicError, Topics};

/// Feeds the local replicas the image's partition states (blocking); the replication driver's
/// `feed_for_materializer`.
pub type FeedStates = fn(&Topics, &Cluster);

/// Pause before a failed reconcile (a full disk, say) is tried again.
const RECONCILE_RETRY: Duration = Duration::from_secs(1);

impl Cluster {
    /// What this broker replicates according to its image, and the image's revision.
    fn desired(&self) -> Option<(i64, Vec<LocalTopic>)> {
        self.with_image(|image| (image.revision(), local_topics(image, self.node_id)))
    }

    /// The image revision the topics and logs last followed, changing after every reconcile (the
    /// group coordinator follows its `__consumer_offsets` leaderships with it).
    pub fn materialized_changes(&self) -> watch::Receiver<i64> {
        self.materialized.subscribe()
    }

    /// Reconciles once, on a blocking thread; publishes the revision reached.
    pub async fn materialize(
        self: &Arc<Self>,
        topics: &Arc<Topics>,
        feed: FeedStates,
    ) -> Result<(), TopicError> {
        let Some((revision, desired)) = self.desired() else {
            return Err(TopicError::Storage("image unavailable".into()));
        };
        self.reconcile(topics, revision, desired, feed).await
    }

    async fn reconcile(
        self: &Arc<Self>,
        topics: &Arc<Topics>,
        revision: i64,
        desired: Vec<LocalTopic>,
        feed: FeedStates,
    ) -> Result<(), TopicError> {
        let reconciling = topics.clone();
        let report = tokio::task::spawn_blocking(move || reconciling.reconcile(&desired))
            .await
            .unwrap_or_else(|join| Err(TopicError::Storage(join.to_string())))?;
        if report != Default::default() {
            tracing::info!(
                revision,
                opened = report.partitions_opened,
                deleted = report.partitions_deleted,
                configs_changed = report.configs_changed,
                refused = report.refused,
                "topics follow the metadata store"
            );
        }
        self.publish(topics, revision, feed).await;
        Ok(())
    }

    /// Feeds the replicas the image's partition states, then publishes `revision` as followed:
    /// a produce that waited for its topic's logs finds their replicas leading (or not) as the
    /// image says.
    async fn publish(self: &Arc<Self>, topics: &Arc<Topics>, revision: i64, feed: FeedStates) {
        let (feeding, cluster) = (topics.clone(), self.clone());
        let fed = tokio::task::spawn_blocking(move || feed(&feeding, &cluster)).await;
        // The feed asserts (in debug builds) that it proposed no ISR change; that must surface.
        debug_assert!(fed.is_ok(), "feeding the replicas failed: {fed:?}");
        self.materialized.send_replace(revision);
    }
}

/// Runs the materializer until shutdown.
pub async fn run(
    cluster: ClusterHandle,
    topics: Arc<Topics>,
    feed: FeedStates,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut revisions = cluster.image_revision.subscribe();
    let mut last: Option<Vec<LocalTopic>> = None;
    loop {
        if let Some((revision, desired)) = cluster.desired() {
            if last.as_ref() == Some(&desired) {
                // Nothing this broker replicates changed (a load report, an ISR, a leader).
                cluster.publish(&topics, revision, feed).await;
            } else {
                match cluster
                    .reconcile(&topics, revision, desired.clone(), feed)
                    .await
                {
                    Ok(()) => last = Some(desired),
                    Err(error) => {
                        tracing::error!(%error, "topics cannot follow the metadata store; retrying");
                        tokio::select! {
                            _ = tokio::time::sleep(RECONCILE_RETRY) => {}
                            _ = shutdown.changed() => return,
                        }
                        continue;
                    }
                }
            }
        }
        tokio::select! {
            changed = revisions.changed() => if changed.is_err() { return },
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
    }
}
