//! The leader side of [`Replica`]: follower bookkeeping, the HW, ISR shrink and expansion,
//! fetch answers and acks=all completion (docs/design/replication.md §2, Kafka's `Partition`).
//!
//! Must never: change its local ISR before the store accepted the change (a shrink), or let the
//! HW go down.

use std::collections::BTreeMap;

use skiff_placement::NodeId;
use skiff_protocol::error_code::ErrorCode;

use super::{
    Acks, Action, Epoch, FetchAnswer, FollowerFetch, LeaderStatus, LocalLog, Offset, Replica, Role,
};
use crate::records::{PartitionState, Writer};

#[derive(Debug, Clone, Copy)]
pub(super) struct FollowerProgress {
    /// Its LEO as of its last fetch (None: unknown since we became leader).
    leo: Option<Offset>,
    last_caught_up_ms: u64,
    last_fetch_ms: u64,
    last_fetch_leader_leo: Offset,
}

impl FollowerProgress {
    /// A follower not heard from, and not caught up, since this broker leads.
    fn unknown() -> Self {
        Self {
            leo: None,
            last_caught_up_ms: 0,
            last_fetch_ms: 0,
            last_fetch_leader_leo: -1,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct PendingProduce {
    pub(super) id: u64,
    last_offset: Offset,
    deadline_ms: u64,
}

#[derive(Debug, Clone)]
pub(super) struct LeaderState {
    pub(super) isr: Vec<NodeId>,
    replicas: Vec<NodeId>,
    revision: i64,
    epoch_start_offset: Offset,
    followers: BTreeMap<NodeId, FollowerProgress>,
    /// The ISR proposed and not yet seen in the store, with the revision it was read at.
    in_flight: Option<(Vec<NodeId>, i64)>,
    pub(super) pending: Vec<PendingProduce>,
}

impl LeaderState {
    pub(super) fn apply_state(&mut self, me: NodeId, state: &PartitionState, revision: i64) {
        self.isr = state.isr.clone();
        self.replicas = state.replicas.clone();
        // A reassignment changes the replicas at the same epoch: an added replica is tracked
        // from its first fetch (unknown and never caught up until then, so it joins the ISR only
        // through the expansion rule); a removed one is forgotten.
        self.followers.retain(|id, _| state.replicas.contains(id));
        for id in &state.replicas {
            if *id != me {
                self.followers
                    .entry(*id)
                    .or_insert(FollowerProgress::unknown());
            }
        }
        self.revision = revision;
        if self.in_flight.as_ref().is_some_and(|(_, r)| revision > *r) {
            self.in_flight = None;
        }
    }

    /// The ISR counted for the HW: the local one plus a pending expansion.
    fn maximal_isr(&self) -> Vec<NodeId> {
        let mut isr = self.isr.clone();
        if let Some((proposed, _)) = &self.in_flight {
            for id in proposed {
                if !isr.contains(id) {
                    isr.push(*id);
                }
            }
        }
        isr
    }
}

impl Replica {
    pub(super) fn become_leader(
        &mut self,
        now: u64,
        state: &PartitionState,
        revision: i64,
        log: &impl LocalLog,
        actions: &mut Vec<Action>,
    ) {
        let leo = log.log_end_offset();
        actions.push(Action::AssignEpoch {
            epoch: state.leader_epoch,
            start: leo,
        });
        let followers = state
            .replicas
            .iter()
            .filter(|id| **id != self.me)
            .map(|id| {
                let mut progress = FollowerProgress::unknown();
                if state.isr.contains(id) {
                    progress.last_caught_up_ms = now;
                }
                (*id, progress)
            })
            .collect();
        self.role = Role::Leader(LeaderState {
            isr: state.isr.clone(),
            replicas: state.replicas.clone(),
            revision,
            epoch_start_offset: leo,
            followers,
            in_flight: None,
            pending: Vec::new(),
        });
    }

    /// Whether a produce may be appended, and the epoch to stamp on it: 6 when not the leader,
    /// 19 for acks=all with fewer than `min.insync.replicas` in the ISR.
    pub fn admit_produce(&self, acks: Acks) -> Result<Epoch, ErrorCode> {
        let Role::Leader(l) = &self.role else {
            return Err(ErrorCode::NOT_LEADER_OR_FOLLOWER);
        };
        if acks == Acks::All && l.isr.len() < self.config.min_insync_replicas {
            return Err(ErrorCode::NOT_ENOUGH_REPLICAS);
        }
        Ok(self.epoch)
    }

    /// The leader appended locally: the HW may move (at once when the ISR is the leader alone).
    pub fn poll_high_watermark(&mut self, now: u64, log: &impl LocalLog) -> Vec<Action> {
        let mut actions = Vec::new();
        self.after_leader_change(now, log, &mut actions);
        actions
    }

    /// An admitted acks=all produce was appended up to `last_offset`: it completes when the HW
    /// passes it, or fails with 7 at `deadline_ms`.
    pub fn await_replication(
        &mut self,
        now: u64,
        id: u64,
        last_offset: Offset,
        deadline_ms: u64,
        log: &impl LocalLog,
    ) -> Vec<Action> {
        let mut actions = Vec::new();
        match &mut self.role {
            Role::Leader(l) => l.pending.push(PendingProduce {
                id,
                last_offset,
                deadline_ms,
            }),
            _ => {
                actions.push(Action::CompleteProduce {
                    id,
                    error: Some(ErrorCode::NOT_LEADER_OR_FOLLOWER),
                });
                return actions;
            }
        }
        self.after_leader_change(now, log, &mut actions);
        actions
    }

    /// The leader's answer to a follower's Fetch, and what it changes.
    pub fn on_follower_fetch(
        &mut self,
        now: u64,
        fetch: FollowerFetch,
        log: &impl LocalLog,
    ) -> (FetchAnswer, Vec<Action>) {
        let mut actions = Vec::new();
        let epoch = self.epoch;
        let leo = log.log_end_offset();
        let hw = self.high_watermark;
        let Role::Leader(l) = &mut self.role else {
            return (
                FetchAnswer::Error(ErrorCode::NOT_LEADER_OR_FOLLOWER),
                actions,
            );
        };
        if !l.replicas.contains(&fetch.replica) || fetch.replica == self.me {
            return (
                FetchAnswer::Error(ErrorCode::NOT_LEADER_OR_FOLLOWER),
                actions,
            );
        }
        if fetch.current_leader_epoch < epoch {
            return (FetchAnswer::Error(ErrorCode::FENCED_LEADER_EPOCH), actions);
        }
        if fetch.current_leader_epoch > epoch {
            return (FetchAnswer::Error(ErrorCode::UNKNOWN_LEADER_EPOCH), actions);
        }
        if let Some(last_epoch) = fetch.last_fetched_epoch {
            match log.end_offset_for(last_epoch) {
                Some((e, end)) if e == last_epoch && end >= fetch.fetch_offset => {}
                Some((e, end)) => {
                    return (
                        FetchAnswer::Diverging {
                            epoch: e,
                            end_offset: end,
                            high_watermark: hw,
                        },
                        actions,
                    )
                }
                None => {
                    return (
                        FetchAnswer::Diverging {
                            epoch: -1,
                            end_offset: -1,
                            high_watermark: hw,
                        },
                        actions,
                    )
                }
            }
        }
        if fetch.fetch_offset > leo || fetch.fetch_offset < 0 {
            return (FetchAnswer::Error(ErrorCode::OFFSET_OUT_OF_RANGE), actions);
        }
        // Kafka's rule: caught up now if it reached our LEO, or as of its previous fetch if it
        // reached the LEO we had then.
        if let Some(progress) = l.followers.get_mut(&fetch.replica) {
            if fetch.fetch_offset >= leo {
                progress.last_caught_up_ms = progress.last_caught_up_ms.max(now);
            } else if fetch.fetch_offset >= progress.last_fetch_leader_leo {
                progress.last_caught_up_ms = progress.last_caught_up_ms.max(progress.last_fetch_ms);
            }
            progress.leo = Some(fetch.fetch_offset);
            progress.last_fetch_ms = now;
            progress.last_fetch_leader_leo = leo;
        }
        self.maybe_expand_isr(&mut actions, fetch.replica);
        self.after_leader_change(now, log, &mut actions);
        (
            FetchAnswer::Records {
                from: fetch.fetch_offset,
                to: leo,
                high_watermark: self.high_watermark,
            },
            actions,
        )
    }

    /// As leader, whether the HW still lags the offset this leader's epoch started at (Kafka's
    /// KIP-207): just after an election the HW is the old one until the followers fetch past
    /// the epoch start, so "latest" would move backwards for a consumer that asked the old
    /// leader. ListOffsets answers OFFSET_NOT_AVAILABLE (retriable) meanwhile. `false` when not
    /// leading.
    pub fn high_watermark_lags_epoch_start(&self) -> bool {
        match &self.role {
            Role::Leader(l) => l.epoch_start_offset > self.high_watermark,
            _ => false,
        }
    }

    /// As leader, for metrics: how many replicas and ISR members the partition has, and how
    /// far the furthest-behind follower is from `log_end_offset` (None: a follower not heard
    /// from since this broker became leader). `None` when not leading.
    pub fn leader_status(&self, log_end_offset: Offset) -> Option<LeaderStatus> {
        let Role::Leader(l) = &self.role else {
            return None;
        };
        let mut max_follower_lag = Some(0);
        for (id, progress) in &l.followers {
            if !l.replicas.contains(id) {
                continue;
            }
            max_follower_lag = match (max_follower_lag, progress.leo) {
                (Some(max), Some(leo)) => Some(max.max(log_end_offset.saturating_sub(leo))),
                _ => None,
            };
        }
        Some(LeaderStatus {
            replicas: l.replicas.len(),
            isr: l.isr.len(),
            max_follower_lag,
        })
    }

    /// The store refused the ISR proposal (a stale revision, or an ambiguous error): the driver
    /// re-reads and feeds the state in; the next poll proposes again if still needed.
    pub fn on_isr_proposal_failed(&mut self) {
        if let Role::Leader(l) = &mut self.role {
            l.in_flight = None;
        }
    }

    fn proposal(&self, l: &LeaderState, isr: Vec<NodeId>) -> Action {
        Action::ProposeIsr {
            expected_revision: l.revision,
            state: PartitionState {
                leader: self.me,
                leader_epoch: self.epoch,
                isr,
                replicas: l.replicas.clone(),
                writer: Writer::Leader,
            },
        }
    }

    /// Proposes `fetching` into the ISR if its fetch just showed it caught up (Kafka's
    /// `maybeExpandIsr`, called from the follower's own fetch only: a follower that stopped
    /// fetching must never be added on the strength of an old fetch offset; a refused proposal is
    /// retried at its next fetch).
    fn maybe_expand_isr(&mut self, actions: &mut Vec<Action>, fetching: NodeId) {
        let hw = self.high_watermark;
        let Role::Leader(l) = &self.role else { return };
        if l.in_flight.is_some() || l.isr.contains(&fetching) || !l.replicas.contains(&fetching) {
            return;
        }
        let caught_up = l.followers.get(&fetching).is_some_and(|p| {
            p.leo
                .is_some_and(|leo| leo >= hw && leo >= l.epoch_start_offset)
        });
        if !caught_up {
            return;
        }
        let mut isr = l.isr.clone();
        isr.push(fetching);
        let action = self.proposal(l, isr.clone());
        let revision = l.revision;
        if let Role::Leader(l) = &mut self.role {
            l.in_flight = Some((isr, revision));
        }
        actions.push(action);
    }

    pub(super) fn leader_poll(&mut self, now: u64, log: &impl LocalLog, actions: &mut Vec<Action>) {
        let lag = self.config.replica_lag_time_max_ms;
        if let Role::Leader(l) = &self.role {
            if l.in_flight.is_none() {
                let out: Vec<NodeId> = l
                    .isr
                    .iter()
                    .filter(|id| **id != self.me)
                    .filter(|id| {
                        l.followers
                            .get(id)
                            .is_none_or(|p| now.saturating_sub(p.last_caught_up_ms) > lag)
                    })
                    .copied()
                    .collect();
                if !out.is_empty() {
                    let isr: Vec<NodeId> = l
                        .isr
                        .iter()
                        .filter(|id| !out.contains(id))
                        .copied()
                        .collect();
                    let action = self.proposal(l, isr.clone());
                    let revision = l.revision;
                    if let Role::Leader(l) = &mut self.role {
                        l.in_flight = Some((isr, revision));
                    }
                    actions.push(action);
                }
            }
        }
        if let Role::Leader(l) = &mut self.role {
            l.pending.retain(|p| {
                if now >= p.deadline_ms {
                    actions.push(Action::CompleteProduce {
                        id: p.id,
                        error: Some(ErrorCode::REQUEST_TIMED_OUT),
                    });
                    false
                } else {
                    true
                }
            });
        }
        self.after_leader_change(now, log, actions);
    }

    /// Recomputes the HW and completes the produces it passed.
    pub(super) fn after_leader_change(
        &mut self,
        _now: u64,
        log: &impl LocalLog,
        actions: &mut Vec<Action>,
    ) {
        let leo = log.log_end_offset();
        let min_isr = self.config.min_insync_replicas;
        let Role::Leader(l) = &mut self.role else {
            return;
        };
        let mut hw = leo;
        for id in l.maximal_isr() {
            if id == self.me {
                continue;
            }
            match l.followers.get(&id).and_then(|p| p.leo) {
                Some(follower_leo) => hw = hw.min(follower_leo),
                None => hw = hw.min(self.high_watermark),
            }
        }
        if hw > self.high_watermark {
            self.high_watermark = hw;
            actions.push(Action::HighWatermark(hw));
        }
        let hw = self.high_watermark;
        let isr_len = l.isr.len();
        l.pending.retain(|p| {
            if p.last_offset < hw {
                let error =
                    (isr_len < min_isr).then_some(ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND);
                actions.push(Action::CompleteProduce { id: p.id, error });
                false
            } else {
                true
            }
        });
    }
}
