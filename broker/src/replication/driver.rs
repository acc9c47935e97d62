//! The replica driver: feeds every local partition's replica the partition state the image holds
//! ([`feed_states`], which the materializer also runs before it publishes a revision, so anyone
//! waiting for the logs to follow the image finds the replicas following it too), polls the
//! leaders' timers (ISR shrink, acks=all deadlines), submits the ISR compare-and-sets the
//! machines propose, checkpoints the high watermarks every
//! `replica.high.watermark.checkpoint.interval.ms`, and keeps one [`fetcher`](super::fetcher)
//! per leader this broker follows partitions of, all sharing one reassignment
//! [`throttle`](super::throttle).
//!
//! Must never: poll a follower's machine (its fetcher does: a fetch decided here would never be
//! sent), run log IO on an async worker (epoch assignment runs on a blocking thread), or submit
//! an ISR change the machine did not propose.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use skiff_cluster::replica::RoleView;
use skiff_placement::NodeId;
use tokio::sync::watch;

use super::fetcher::{self, Followed};
use super::throttle::TokenBucket;
use crate::cluster::isr::IsrOutcome;
use crate::cluster::Cluster;
use crate::context::Ctx;
use crate::partition::replica::{Proposal, ProposalReceiver};
use crate::partition::topics::{Topic, Topics};

/// How often leaders' timers are polled: the granularity of ISR shrinks and of acks=all
/// timeouts (REQUEST_TIMED_OUT comes at most this late).
const LEADER_POLL_INTERVAL: Duration = Duration::from_millis(100);

/// What one pass of [`feed_states`] found.
#[derive(Default)]
pub(crate) struct Fed {
    pub(crate) proposals: Vec<Proposal>,
    followed: BTreeMap<NodeId, Vec<Followed>>,
    /// Partitions left for a later pass: their logs are still being recovered after a crash.
    recovering: usize,
}

/// [`feed_states`] as the materializer runs it (its `FeedStates`) before it publishes a revision.
pub(crate) fn feed_for_materializer(topics: &Topics, cluster: &Cluster) {
    let fed = feed_states(topics, cluster);
    // Becoming leader or follower proposes no ISR change (only fetches and timers do).
    debug_assert!(fed.proposals.is_empty());
}

/// Feeds each local partition the image's state for it when that state changed since the last
/// feed, applying the epoch assignments it causes. Blocking (the log writes its epoch
/// checkpoint). A log still recovering is left unfed (it serves nothing yet) for a later pass.
pub(crate) fn feed_states(topics: &Topics, cluster: &Cluster) -> Fed {
    let mut fed = Fed::default();
    let Fed {
        proposals,
        followed,
        recovering,
    } = &mut fed;
    for topic in topics.all() {
        let states: Vec<_> = topic
            .partitions
            .iter()
            .map(|partition| {
                (
                    partition.clone(),
                    cluster.partition_state(&topic.name, partition.index()),
                )
            })
            .collect();
        for (partition, state) in states {
            if partition.log().is_recovering() {
                *recovering += 1;
                continue;
            }
            if let Some((state, revision)) = state {
                if revision > partition.fed_revision() {
                    partition.apply_state(&state, revision, &mut *proposals);
                }
            }
            if let RoleView::Follower(Some(leader), _) = partition.role() {
                followed.entry(leader).or_default().push(Followed {
                    topic: topic.clone(),
                    partition: partition.clone(),
                });
            }
        }
    }
    fed
}

/// Polls every partition this broker leads; returns their ISR proposals.
fn poll_leaders(topics: &[Arc<Topic>]) -> Vec<Proposal> {
    let now = crate::clock::mono_ms();
    let mut proposals = Vec::new();
    for topic in topics {
        for partition in &topic.partitions {
            partition.poll_as_leader(now, &mut proposals);
        }
    }
    proposals
}

/// Submits ISR proposals one after another (at most one per partition is ever in flight).
async fn submit(ctx: &Ctx, proposals: Vec<Proposal>) {
    for proposal in proposals {
        let outcome = ctx
            .cluster
            .propose_partition_state(
                &proposal.topic,
                proposal.index,
                proposal.expected_revision,
                &proposal.state,
            )
            .await;
        if outcome == IsrOutcome::Ineligible {
            // Repeats at every fetch of a follower shutting down: not worth a line (nor a
            // refused-change count) each; nothing reached the store.
            tracing::debug!(
                topic = %proposal.topic,
                partition = proposal.index,
                isr = ?proposal.state.isr,
                "ISR expansion not proposed: the joining replica is not running"
            );
            proposal.refused();
            continue;
        }
        tracing::info!(
            topic = %proposal.topic,
            partition = proposal.index,
            isr = ?proposal.state.isr,
            ?outcome,
            "ISR change proposed"
        );
        ctx.metrics
            .record_isr_change(outcome == IsrOutcome::Written);
        if outcome != IsrOutcome::Written {
            proposal.refused();
        }
    }
}

/// The fetchers, one per leader, and the reassignment throttle they share.
struct Fetchers {
    by_leader: BTreeMap<NodeId, watch::Sender<Vec<Followed>>>,
    throttle: fetcher::Throttle,
}

impl Fetchers {
    fn update(&mut self, ctx: &Arc<Ctx>, mut followed: BTreeMap<NodeId, Vec<Followed>>) {
        // A leader no longer followed: dropping its sender stops its fetcher.
        self.by_leader
            .retain(|leader, _| followed.contains_key(leader));
        for (leader, partitions) in std::mem::take(&mut followed) {
            match self.by_leader.get(&leader) {
                Some(sender) => {
                    let changed = {
                        let current = sender.borrow();
                        !fetcher::same_partitions(&current, &partitions)
                    };
                    if changed {
                        sender.send_replace(partitions);
                    }
                }
                None => {
                    let (sender, receiver) = watch::channel(partitions);
                    tokio::spawn(fetcher::run(
                        ctx.clone(),
                        leader,
                        receiver,
                        self.throttle.clone(),
                        ctx.shutdown.subscribe(),
                    ));
                    self.by_leader.insert(leader, sender);
                }
            }
        }
    }
}

impl Fetchers {
    /// No fetchers yet; their shared throttle follows the dynamic
    /// `skiff.reassignment.throttle.bytes.per.second` until shutdown.
    fn following_the_throttle(ctx: &Ctx) -> Self {
        let throttle = Arc::new(std::sync::Mutex::new(TokenBucket::new(
            ctx.config.reassignment_throttle_bytes_per_second,
            crate::clock::mono_ms(),
        )));
        tokio::spawn(follow_throttle_rate(
            throttle.clone(),
            ctx.dynamic.subscribe(),
            ctx.shutdown.subscribe(),
        ));
        Self {
            by_leader: BTreeMap::new(),
            throttle,
        }
    }
}

/// Follows the dynamic `skiff.reassignment.throttle.bytes.per.second` until shutdown.
async fn follow_throttle_rate(
    throttle: Arc<std::sync::Mutex<TokenBucket>>,
    mut configs: tokio::sync::watch::Receiver<Arc<crate::config::Config>>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        let rate = configs
            .borrow_and_update()
            .reassignment_throttle_bytes_per_second;
        if let Ok(mut bucket) = throttle.lock() {
            bucket.set_rate(rate, crate::clock::mono_ms());
        }
        tokio::select! {
            changed = configs.changed() => if changed.is_err() { return },
            _ = shutdown.changed() => return,
        }
    }
}

/// Runs the driver until shutdown.
pub(crate) async fn run(ctx: Arc<Ctx>, mut queued: ProposalReceiver) {
    let mut shutdown = ctx.shutdown.subscribe();
    let mut materialized = ctx.cluster.materialized_changes();
    let mut fetchers = Fetchers::following_the_throttle(&ctx);
    let mut poll = tokio::time::interval(LEADER_POLL_INTERVAL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut checkpoint = tokio::time::interval(Duration::from_millis(
        ctx.config.replica_high_watermark_checkpoint_interval_ms,
    ));
    checkpoint.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut feed_due = true;
    // Some logs were still recovering at the last feed: feed again at the next poll.
    let mut recovering = false;
    loop {
        if feed_due {
            feed_due = false;
            let feeding = ctx.clone();
            let fed =
                tokio::task::spawn_blocking(move || feed_states(&feeding.topics, &feeding.cluster))
                    .await;
            let Ok(fed) = fed else {
                tracing::error!("replica states could not be fed; retrying");
                feed_due = true;
                continue;
            };
            recovering = fed.recovering > 0;
            fetchers.update(&ctx, fed.followed);
            submit(&ctx, fed.proposals).await;
        }
        tokio::select! {
            changed = materialized.changed() => {
                if changed.is_err() {
                    return;
                }
                feed_due = true;
            }
            _ = poll.tick() => {
                feed_due |= recovering;
                let topics = ctx.topics.all();
                let proposals = poll_leaders(&topics);
                submit(&ctx, proposals).await;
            }
            _ = checkpoint.tick() => {
                let topics = ctx.topics.clone();
                match tokio::task::spawn_blocking(move || topics.checkpoint_high_watermarks()).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(error)) => tracing::warn!(%error, "high watermarks not checkpointed"),
                    Err(error) => tracing::warn!(%error, "high-watermark checkpoint task failed"),
                }
            }
            Some(proposal) = queued.recv() => {
                let mut proposals = vec![proposal];
                while let Ok(more) = queued.try_recv() {
                    proposals.push(more);
                }
                submit(&ctx, proposals).await;
            }
            _ = shutdown.changed() => {}
        }
        if *shutdown.borrow() {
            return;
        }
    }
}
