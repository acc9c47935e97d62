//! The follower side of [`Replica`]: one fetch in flight, KIP-279 truncation on
//! `DivergingEpoch`, appends of the leader's batches unchanged, HW = min(leader HW, own LEO).
//!
//! Must never: append a batch that starts below its LEO or carries an epoch above the leader's,
//! or answer produces. A batch may start above the LEO: a compacted leader's log has gaps where
//! its cleaner removed whole batches, and the follower takes them as they are (Kafka's
//! `appendAsFollower` refuses only a first offset below the log end).

use skiff_placement::NodeId;

use super::{Action, FetchResult, FollowerFetch, FollowerPhase, LocalLog, Replica, Role};

#[derive(Debug, Clone)]
pub(super) struct FollowerState {
    pub(super) leader: Option<NodeId>,
    pub(super) phase: FollowerPhase,
    in_flight: bool,
    next_fetch_ms: u64,
}

impl FollowerState {
    pub(super) fn new(leader: Option<NodeId>) -> Self {
        Self {
            leader,
            phase: FollowerPhase::Truncating,
            in_flight: false,
            next_fetch_ms: 0,
        }
    }
}

impl Replica {
    pub(super) fn follower_poll(
        &mut self,
        now: u64,
        log: &impl LocalLog,
        actions: &mut Vec<Action>,
    ) {
        let epoch = self.epoch;
        let me = self.me;
        let Role::Follower(f) = &mut self.role else {
            return;
        };
        let Some(leader) = f.leader else { return };
        if f.in_flight || now < f.next_fetch_ms {
            return;
        }
        f.in_flight = true;
        actions.push(Action::SendFetch {
            leader,
            fetch: FollowerFetch {
                replica: me,
                fetch_offset: log.log_end_offset(),
                last_fetched_epoch: log.latest_epoch(),
                current_leader_epoch: epoch,
            },
        });
    }

    /// The answer to the fetch sent at `sent_epoch` to `leader`; one for an older epoch or
    /// another leader is dropped.
    pub fn on_fetch_result(
        &mut self,
        now: u64,
        leader: NodeId,
        sent_epoch: i32,
        result: &FetchResult,
        log: &impl LocalLog,
    ) -> Vec<Action> {
        let mut actions = Vec::new();
        let backoff = self.config.replica_fetch_backoff_ms;
        let epoch = self.epoch;
        let hw = self.high_watermark;
        let Role::Follower(f) = &mut self.role else {
            return actions;
        };
        if f.leader != Some(leader) || sent_epoch != epoch {
            return actions;
        }
        f.in_flight = false;
        let leo = log.log_end_offset();
        match result {
            FetchResult::Records {
                batches,
                high_watermark,
            } => {
                f.phase = FollowerPhase::Fetching;
                let mut next = leo;
                // Kafka's rule for an empty log whose fetch offset lies inside the leader's first
                // batch (the leader's log start moved into it, by DeleteRecords): start the log
                // at that batch's base and take it whole.
                if let Some(first) = batches.first() {
                    if leo == log.log_start_offset() && first.base < leo && first.last >= leo {
                        actions.push(Action::ResetTo { offset: first.base });
                        next = first.base;
                    }
                }
                for batch in batches {
                    if batch.base < next || batch.last < batch.base || batch.epoch > epoch {
                        break;
                    }
                    next = batch.last + 1;
                }
                if next > leo || matches!(actions.last(), Some(Action::ResetTo { .. })) {
                    actions.push(Action::AppendFetched { up_to: next });
                }
                let new_hw = (*high_watermark).min(next);
                if new_hw != hw {
                    self.high_watermark = new_hw;
                    actions.push(Action::HighWatermark(new_hw));
                }
            }
            FetchResult::Diverging {
                epoch: leader_epoch,
                end_offset,
            } => {
                f.phase = FollowerPhase::Truncating;
                let target = if *leader_epoch < 0 || *end_offset < 0 {
                    hw.min(leo)
                } else {
                    match log.end_offset_for(*leader_epoch) {
                        // KIP-279: the same epoch here: it ends at the smaller end.
                        Some((ours, our_end)) if ours == *leader_epoch => {
                            (*end_offset).min(our_end).min(leo)
                        }
                        // Our largest epoch ≤ theirs is older: truncate to its end, ask again.
                        Some((_, our_end)) => our_end.min(leo),
                        None => (*end_offset).min(leo),
                    }
                };
                // Truncate also when only the cache reaches `target`: an epoch we led without
                // writing leaves an entry at our LEO, and fetching with it would diverge forever.
                let cache_reaches = log
                    .latest_epoch_start()
                    .is_some_and(|start| start >= target);
                if target < leo || cache_reaches {
                    actions.push(Action::TruncateTo { offset: target });
                }
                if self.high_watermark > target {
                    self.high_watermark = target;
                    actions.push(Action::HighWatermark(target));
                }
            }
            FetchResult::OutOfRange {
                log_start_offset,
                high_watermark,
            } => {
                if leo < *log_start_offset {
                    // Everything we would fetch next is gone on the leader: start where it does.
                    actions.push(Action::ResetTo {
                        offset: *log_start_offset,
                    });
                    self.high_watermark = *log_start_offset;
                    actions.push(Action::HighWatermark(*log_start_offset));
                } else if *high_watermark >= 0 && leo > *high_watermark {
                    // Ahead of the leader's log with no epoch to compare (batches without one):
                    // keep only what the leader called replicated, as Kafka did before KIP-101.
                    actions.push(Action::TruncateTo {
                        offset: *high_watermark,
                    });
                    if self.high_watermark > *high_watermark {
                        self.high_watermark = *high_watermark;
                        actions.push(Action::HighWatermark(*high_watermark));
                    }
                } else {
                    f.next_fetch_ms = now + backoff;
                }
            }
            // 74 (we are behind the store), 75 (the leader is), 6, 1 or no answer: retry later;
            // a new epoch arrives through the store.
            FetchResult::Error(_) | FetchResult::Lost => f.next_fetch_ms = now + backoff,
        }
        actions
    }

    /// The leader this replica fetches from, if it is a follower of one.
    pub fn follower_leader(&self) -> Option<NodeId> {
        match &self.role {
            Role::Follower(f) => f.leader,
            _ => None,
        }
    }
}
