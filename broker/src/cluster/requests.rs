//! The store side of the admin requests that change partitions without a call to the controller
//! (docs/design/cluster.md §3, "Requests that need the controller"): ElectLeaders
//! ([`super::elections`]) and AlterPartitionReassignments ([`super::reassignments`]). The broker
//! that received the request plans on its image with the request's pure planner
//! (`skiff_cluster::election`, `skiff_cluster::reassign`), submits the Txns itself under its own
//! session fence, and re-plans what a failed compare refused on the image that failure left behind,
//! until the request's timeout. The store's compares order these writes against the controller's.
//!
//! Must never: decide anything itself (the pure planners do), write without the session fence,
//! or wait past the request's timeout.

use std::collections::BTreeMap;
use std::time::Duration;

use skiff_cluster::controller::{ControllerWrite, WriteReason};
use skiff_cluster::election;
use skiff_cluster::ClusterImage;
use skiff_meta::Compare;

use super::{Cluster, RETRY_BACKOFF};

/// The longest such a request waits for its writes, whatever its `timeout_ms` says (the Java
/// admin client's default is 60 s).
pub const REQUEST_WAIT_MS_MAX: u64 = 60_000;

/// How long a request with `timeout_ms` may wait (a negative timeout waits not at all).
pub fn request_wait(timeout_ms: i32) -> Duration {
    let ms = u64::try_from(timeout_ms).unwrap_or(0);
    Duration::from_millis(ms.min(REQUEST_WAIT_MS_MAX))
}

/// What became of one requested partition; `R` says why a planner refused it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer<R> {
    /// The store took its write.
    Written,
    /// The planner refused it, and why.
    Refused(R),
    /// Not written within the request's timeout (the store did not answer, or kept refusing).
    TimedOut,
}

/// A request's plan on one image: the Txns (each listing its partitions) and the partitions
/// refused.
pub type Planned<R> = (Vec<ControllerWrite>, BTreeMap<(String, i32), R>);

impl Cluster {
    /// Writes what `plan` decides for `requested` (each partition answered once, in the order
    /// asked) within `wait`: `plan` gets the image, the partitions still pending and the session
    /// fence its Txns must carry. Once the store took a write, waits (within `wait`) until this
    /// broker's image shows it, so that its answers (Metadata, the List APIs) agree. `what` names
    /// the request in logs, `done` what a write did ("ElectLeaders: elected").
    pub(crate) async fn write_requested<R: Clone>(
        &self,
        (what, done): (&'static str, &'static str),
        requested: Vec<(String, i32)>,
        wait: Duration,
        plan: impl Fn(&ClusterImage, &[(String, i32)], Compare) -> Planned<R>,
    ) -> Vec<((String, i32), Answer<R>)> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut answers: BTreeMap<(String, i32), Answer<R>> = BTreeMap::new();
        let mut pending = requested.clone();
        let mut written_revision = 0;
        while !pending.is_empty() {
            let session = self.session.lock().ok().and_then(|s| *s);
            let mut retry = Vec::new();
            // The revision the image must reach before planning again (a refused write's), or
            // none when the store failed (then the retry waits a backoff instead).
            let mut replan_at = None;
            match session {
                None => retry = pending.clone(),
                Some(session) => {
                    let fence =
                        election::requester_fence(&self.layout, self.node_id, session.broker_epoch);
                    let (writes, refused) = self
                        .with_image(|image| plan(image, &pending, fence))
                        .unwrap_or_default();
                    for (partition, why) in refused {
                        answers.entry(partition).or_insert(Answer::Refused(why));
                    }
                    for write in writes {
                        let outcome =
                            tokio::time::timeout_at(deadline, self.store.txn(write.txn)).await;
                        match outcome {
                            Ok(Ok(response)) if response.succeeded => {
                                written_revision = written_revision.max(response.revision);
                                if write.reason == WriteReason::UncleanElection {
                                    tracing::warn!(
                                        partitions = ?write.partitions,
                                        revision = response.revision,
                                        "{what}: unclean election (records the new leader \
                                         lacks are lost)"
                                    );
                                } else {
                                    tracing::info!(
                                        reason = ?write.reason,
                                        partitions = ?write.partitions,
                                        revision = response.revision,
                                        "{what}: {done}"
                                    );
                                }
                                for partition in write.partitions {
                                    answers.insert(partition, Answer::Written);
                                }
                            }
                            Ok(Ok(response)) => {
                                replan_at = replan_at.max(Some(response.revision));
                                retry.extend(write.partitions);
                            }
                            Ok(Err(error)) => {
                                self.store_error(what, &error);
                                retry.extend(write.partitions);
                            }
                            Err(_) => retry.extend(write.partitions),
                        }
                    }
                }
            }
            pending = retry;
            if pending.is_empty() || tokio::time::Instant::now() >= deadline {
                break;
            }
            match replan_at {
                Some(revision) => {
                    if !self.image_reached(revision, deadline).await {
                        break;
                    }
                }
                None => {
                    tokio::time::sleep_until(
                        deadline.min(tokio::time::Instant::now() + RETRY_BACKOFF),
                    )
                    .await
                }
            }
        }
        if written_revision > 0 {
            self.image_reached(written_revision, deadline).await;
        }
        requested
            .into_iter()
            .map(|partition| {
                let answer = answers.get(&partition).cloned().unwrap_or(Answer::TimedOut);
                (partition, answer)
            })
            .collect()
    }

    /// Waits until the image has reached `revision` or `deadline` passed; whether it reached it.
    async fn image_reached(&self, revision: i64, deadline: tokio::time::Instant) -> bool {
        let mut revisions = self.image_revision.subscribe();
        let reached =
            tokio::time::timeout_at(deadline, revisions.wait_for(|seen| *seen >= revision))
                .await
                .is_ok_and(|seen| seen.is_ok());
        reached
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_follows_the_timeout_within_its_bounds() {
        assert_eq!(request_wait(-5), Duration::ZERO);
        assert_eq!(request_wait(0), Duration::ZERO);
        assert_eq!(request_wait(1500), Duration::from_millis(1500));
        assert_eq!(
            request_wait(i32::MAX),
            Duration::from_millis(REQUEST_WAIT_MS_MAX)
        );
    }
}
