//! The ElectLeaders API's store side: the broker that received the request plans the elections
//! on its image (`skiff_cluster::election`, the same rules and fences as the controller's
//! elections), submits the fenced Txns itself, and re-plans what a failed compare refused on the
//! image that failure left behind, until the request's timeout. There is no call to the
//! controller: the store's compares order its writes against the controller's.
//!
//! Must never: decide an election itself (the pure plan does), write without the session fence,
//! or wait past the request's timeout.

use std::collections::BTreeMap;
use std::time::Duration;

use skiff_cluster::controller::{PlanLimits, WriteReason};
use skiff_cluster::election::{self, ElectionType, NoElection};

use super::{Cluster, RETRY_BACKOFF};

/// The longest an ElectLeaders request waits for its elections, whatever its `timeout_ms` says
/// (the Java admin client's default is 60 s).
pub const ELECTION_WAIT_MS_MAX: u64 = 60_000;

/// What became of one requested partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionAnswer {
    /// The store took its new leader.
    Elected,
    /// It gets no election, and why.
    Refused(NoElection),
    /// Not elected within the request's timeout (the store did not answer, or kept refusing).
    TimedOut,
}

/// How long a request with `timeout_ms` may wait (a negative timeout waits not at all).
pub fn election_wait(timeout_ms: i32) -> Duration {
    let ms = u64::try_from(timeout_ms).unwrap_or(0);
    Duration::from_millis(ms.min(ELECTION_WAIT_MS_MAX))
}

impl Cluster {
    /// Elects leaders of `requested` (every partition of every ready topic when `None`) by
    /// `election_type`, within `wait`. Answers every partition once, in the order asked (for
    /// `None`: topic and partition order). Once the store took an election, waits (within `wait`)
    /// until this broker's image shows it, so that its Metadata answers agree.
    pub async fn elect_leaders(
        &self,
        requested: Option<Vec<(String, i32)>>,
        election_type: ElectionType,
        wait: Duration,
    ) -> Vec<((String, i32), ElectionAnswer)> {
        let deadline = tokio::time::Instant::now() + wait;
        let requested = match requested {
            Some(requested) => requested,
            None => self
                .with_image(election::all_partitions)
                .unwrap_or_default(),
        };
        let mut answers: BTreeMap<(String, i32), ElectionAnswer> = BTreeMap::new();
        let mut pending = requested.clone();
        let mut written_revision = 0;
        let limits = PlanLimits::default();
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
                    let plan = self
                        .with_image(|image| {
                            election::plan(image, &pending, election_type, fence, limits)
                        })
                        .unwrap_or_else(|| election::ElectionPlan {
                            writes: Vec::new(),
                            refused: BTreeMap::new(),
                        });
                    for (partition, why) in plan.refused {
                        answers
                            .entry(partition)
                            .or_insert(ElectionAnswer::Refused(why));
                    }
                    for write in plan.writes {
                        let outcome =
                            tokio::time::timeout_at(deadline, self.store.txn(write.txn)).await;
                        match outcome {
                            Ok(Ok(response)) if response.succeeded => {
                                written_revision = written_revision.max(response.revision);
                                if write.reason == WriteReason::UncleanElection {
                                    tracing::warn!(
                                        partitions = ?write.partitions,
                                        revision = response.revision,
                                        "ElectLeaders: unclean election (records the new \
                                         leader lacks are lost)"
                                    );
                                } else {
                                    tracing::info!(
                                        reason = ?write.reason,
                                        partitions = write.partitions.len(),
                                        revision = response.revision,
                                        "ElectLeaders: elected"
                                    );
                                }
                                for partition in write.partitions {
                                    answers.insert(partition, ElectionAnswer::Elected);
                                }
                            }
                            Ok(Ok(response)) => {
                                replan_at = replan_at.max(Some(response.revision));
                                retry.extend(write.partitions);
                            }
                            Ok(Err(error)) => {
                                self.store_error("ElectLeaders", &error);
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
                let answer = answers
                    .get(&partition)
                    .copied()
                    .unwrap_or(ElectionAnswer::TimedOut);
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
        assert_eq!(election_wait(-5), Duration::ZERO);
        assert_eq!(election_wait(0), Duration::ZERO);
        assert_eq!(election_wait(1500), Duration::from_millis(1500));
        assert_eq!(
            election_wait(i32::MAX),
            Duration::from_millis(ELECTION_WAIT_MS_MAX)
        );
    }
}
