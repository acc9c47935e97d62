//! The replica state machine of one partition on one broker (docs/design/replication.md §1), pure:
//! time, the partition state the store watch delivers, fetch requests (as a leader), fetch results
//! (as a follower) and the local log's facts come in; [`Action`]s come out, for the broker to carry
//! out (append, truncate, send a fetch, propose an ISR change, move the HW, answer produces).
//!
//! Roles: not a replica → leader at epoch E, or follower of L at E (truncating, then fetching);
//! every epoch change comes from the store and an epoch not above the local one is ignored;
//! offline after a log I/O error. The leader tracks each follower's fetch offset and last
//! caught-up time, keeps HW = min LEO over the (maximal) ISR, never decreasing, shrinks the ISR
//! after `replica.lag.time.max.ms`, expands it for a follower at or past both the HW and the
//! epoch's start, answers fetches with 74/75 fencing or a `DivergingEpoch`, and completes acks=all
//! produces when the HW passes them (19 before append, 20 if the ISR shrank below
//! `min.insync.replicas`). The follower truncates on `DivergingEpoch` by KIP-279's rule and keeps
//! HW = min(leader HW, own LEO).
//!
//! Owns: the role, the epoch, the HW, follower bookkeeping, pending acks=all produces, the one
//! ISR change in flight. The log and its leader-epoch cache belong to storage, which also owns
//! the epoch rules (Kafka's `endOffsetFor`): the machine reads their answers through
//! [`LocalLog`], and the log is changed only by the broker carrying out [`Action`]s; the driver
//! must apply an action before the next call.
//!
//! Must never: read a clock, touch files or sockets, write the store itself, or trust an epoch
//! it did not get from the store.

mod follower;
mod leader;

use skiff_placement::NodeId;
use skiff_protocol::error_code::ErrorCode;

use crate::records::{PartitionState, NO_LEADER};

/// `replica.lag.time.max.ms`'s default (Kafka's `REPLICA_LAG_TIME_MAX_MS_DEFAULT`).
pub const REPLICA_LAG_TIME_MAX_MS_DEFAULT: u64 = 30_000;
/// The cluster-mode default of `min.insync.replicas` (docs/design/replication.md §5).
pub const MIN_INSYNC_REPLICAS_DEFAULT: usize = 2;
/// How long a follower waits before fetching again after an error or a lost fetch.
pub const REPLICA_FETCH_BACKOFF_MS_DEFAULT: u64 = 1_000;

/// A leader epoch (Kafka's `partitionLeaderEpoch`).
pub type Epoch = i32;
/// An offset in the partition's log.
pub type Offset = i64;

/// What the broker's log tells the state machine: offsets, and the answers of its leader-epoch
/// cache (whose rules are storage's, `skiff_storage::EpochCache`).
pub trait LocalLog {
    /// The log end offset.
    fn log_end_offset(&self) -> Offset;
    /// The log start offset (equal to the end when the log is empty).
    fn log_start_offset(&self) -> Offset;
    /// The latest epoch in the cache, `None` if no batch carried one.
    fn latest_epoch(&self) -> Option<Epoch>;
    /// Where the latest epoch in the cache starts.
    fn latest_epoch_start(&self) -> Option<Offset>;
    /// Kafka's `endOffsetFor` over the cache with [`LocalLog::log_end_offset`] as the latest
    /// epoch's end: the greatest epoch ≤ `epoch` and the start of the first epoch above it
    /// (`(epoch, first start)` below every entry); `None` (Kafka's UNDEFINED) for an epoch above
    /// every entry, or an empty cache.
    fn end_offset_for(&self, epoch: Epoch) -> Option<(Epoch, Offset)>;
}

/// Settings of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaConfig {
    /// `replica.lag.time.max.ms`.
    pub replica_lag_time_max_ms: u64,
    /// `min.insync.replicas`.
    pub min_insync_replicas: usize,
    /// `replica.fetch.backoff.ms`.
    pub replica_fetch_backoff_ms: u64,
}

impl Default for ReplicaConfig {
    fn default() -> Self {
        Self {
            replica_lag_time_max_ms: REPLICA_LAG_TIME_MAX_MS_DEFAULT,
            min_insync_replicas: MIN_INSYNC_REPLICAS_DEFAULT,
            replica_fetch_backoff_ms: REPLICA_FETCH_BACKOFF_MS_DEFAULT,
        }
    }
}

/// A follower's Fetch, as the leader reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerFetch {
    /// The follower's broker id.
    pub replica: NodeId,
    /// Its LEO.
    pub fetch_offset: Offset,
    /// The epoch of its last batch (None on an empty log).
    pub last_fetched_epoch: Option<Epoch>,
    /// The leader epoch it believes in.
    pub current_leader_epoch: Epoch,
}

/// The leader's answer to a follower's Fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchAnswer {
    /// An error: 6, 74, 75 or 1.
    Error(ErrorCode),
    /// The follower's log diverges: truncate per KIP-279 (epoch −1: unknown, truncate to HW).
    Diverging {
        /// The largest leader epoch ≤ the follower's last fetched epoch.
        epoch: Epoch,
        /// Where that epoch ends on the leader.
        end_offset: Offset,
        /// The leader's HW.
        high_watermark: Offset,
    },
    /// Records `[from, to)` (to = the leader's LEO) and the leader's HW.
    Records {
        /// The fetch offset.
        from: Offset,
        /// The leader's LEO.
        to: Offset,
        /// The leader's HW.
        high_watermark: Offset,
    },
}

/// One fetched batch, as the follower checks it: `[base, last]`, stamped `epoch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchedBatch {
    /// Its first offset.
    pub base: Offset,
    /// Its last offset.
    pub last: Offset,
    /// Its `partitionLeaderEpoch`.
    pub epoch: Epoch,
}

/// What a follower's fetch came back with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchResult {
    /// Batches (possibly none) and the leader's HW.
    Records {
        /// The batches, in offset order.
        batches: Vec<FetchedBatch>,
        /// The leader's HW.
        high_watermark: Offset,
    },
    /// The leader's `DivergingEpoch`.
    Diverging {
        /// Its epoch.
        epoch: Epoch,
        /// Its end offset.
        end_offset: Offset,
    },
    /// OFFSET_OUT_OF_RANGE with the leader's log start and HW: the fetch offset is below the
    /// leader's log start (retention or DeleteRecords passed it) or above its log end.
    OutOfRange {
        /// The leader's log start offset.
        log_start_offset: Offset,
        /// The leader's HW.
        high_watermark: Offset,
    },
    /// An error code from the leader.
    Error(ErrorCode),
    /// No answer (timeout, connection lost).
    Lost,
}

/// How a produce waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// acks=0 or 1: answered after the local append.
    Leader,
    /// acks=all.
    All,
}

/// What the broker does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Record a new epoch in the epoch cache and checkpoint it (becoming leader).
    AssignEpoch {
        /// The epoch.
        epoch: Epoch,
        /// Its start (the LEO).
        start: Offset,
    },
    /// Append the fetched batches with offsets below `up_to`, unchanged (the log adds cache
    /// entries for new epochs).
    AppendFetched {
        /// One past the last offset to append.
        up_to: Offset,
    },
    /// Truncate the log (and its epoch cache) to `offset`.
    TruncateTo {
        /// The new LEO.
        offset: Offset,
    },
    /// Empty the log and start it at `offset` (the leader's log start passed this log's end:
    /// Kafka's `truncateFullyAndStartAt`).
    ResetTo {
        /// The new log start and end.
        offset: Offset,
    },
    /// Send a Fetch to the leader.
    SendFetch {
        /// The leader.
        leader: NodeId,
        /// The request.
        fetch: FollowerFetch,
    },
    /// Compare-and-set the partition key: `mod_revision == expected_revision`.
    ProposeIsr {
        /// The revision the state was read at.
        expected_revision: i64,
        /// The state to write.
        state: PartitionState,
    },
    /// The HW moved.
    HighWatermark(Offset),
    /// An acks=all produce is answered (None: success).
    CompleteProduce {
        /// The id the broker gave it.
        id: u64,
        /// Its error, if any.
        error: Option<ErrorCode>,
    },
}

/// A leader's figures, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderStatus {
    /// Replicas of the partition.
    pub replicas: usize,
    /// Members of the ISR (the leader's local one).
    pub isr: usize,
    /// Offsets the furthest-behind follower lacks (None: one not heard from yet).
    pub max_follower_lag: Option<Offset>,
}

/// The sub-state of a follower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowerPhase {
    /// Its log may diverge from the leader's: fetches may answer `DivergingEpoch`.
    Truncating,
    /// Its log is a prefix of the leader's.
    Fetching,
}

/// The role, as the broker sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoleView {
    /// Not in the replicas (or no state yet).
    NotReplica,
    /// Leading at the epoch.
    Leader,
    /// Following (None: the partition has no leader).
    Follower(Option<NodeId>, FollowerPhase),
    /// A log I/O error.
    Offline,
}

#[derive(Debug, Clone)]
enum Role {
    NotReplica,
    Leader(leader::LeaderState),
    Follower(follower::FollowerState),
    Offline,
}

/// One partition's replica on one broker.
#[derive(Debug, Clone)]
pub struct Replica {
    me: NodeId,
    config: ReplicaConfig,
    role: Role,
    /// The highest leader epoch taken from the store (−1: none).
    epoch: Epoch,
    /// The partition state last applied and its `mod_revision`.
    state: Option<(PartitionState, i64)>,
    high_watermark: Offset,
}

impl Replica {
    /// A replica that has seen no partition state; `high_watermark` is the checkpointed HW.
    pub fn new(me: NodeId, config: ReplicaConfig, high_watermark: Offset) -> Self {
        Self {
            me,
            config,
            role: Role::NotReplica,
            epoch: -1,
            state: None,
            high_watermark,
        }
    }

    /// The checkpointed HW of a log recovered after this replica was made (a broker opens its
    /// replicas before their logs are recovered, at HW 0). Only before the first partition state:
    /// once a state is fed the HW moves by the protocol alone. Returns the HW to publish, if it
    /// rose.
    pub fn restore_high_watermark(&mut self, checkpointed: Offset) -> Option<Offset> {
        if self.state.is_some() || checkpointed <= self.high_watermark {
            return None;
        }
        self.high_watermark = checkpointed;
        Some(checkpointed)
    }

    /// New settings (a topic's `min.insync.replicas` altered), from the next call on.
    pub fn set_config(&mut self, config: ReplicaConfig) {
        self.config = config;
    }

    /// The role.
    pub fn role(&self) -> RoleView {
        match &self.role {
            Role::NotReplica => RoleView::NotReplica,
            Role::Leader(_) => RoleView::Leader,
            Role::Follower(f) => RoleView::Follower(f.leader, f.phase),
            Role::Offline => RoleView::Offline,
        }
    }

    /// The epoch last taken from the store.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The HW (consumers read below it).
    pub fn high_watermark(&self) -> Offset {
        self.high_watermark
    }

    /// The ISR this replica acts on (the leader's local ISR; the store's otherwise).
    pub fn isr(&self) -> Vec<NodeId> {
        match &self.role {
            Role::Leader(l) => l.isr.clone(),
            _ => self
                .state
                .as_ref()
                .map(|(s, _)| s.isr.clone())
                .unwrap_or_default(),
        }
    }

    /// A partition state from the store watch (or a re-read), with its `mod_revision`.
    pub fn on_partition_state(
        &mut self,
        now: u64,
        state: &PartitionState,
        revision: i64,
        log: &impl LocalLog,
    ) -> Vec<Action> {
        let mut actions = Vec::new();
        if matches!(self.role, Role::Offline) {
            return actions;
        }
        if state.leader_epoch < self.epoch
            || self.state.as_ref().is_some_and(|(_, r)| revision <= *r)
        {
            return actions;
        }
        let new_epoch = state.leader_epoch > self.epoch;
        self.state = Some((state.clone(), revision));
        if !state.replicas.contains(&self.me) {
            self.epoch = state.leader_epoch;
            self.step_down(&mut actions);
            self.role = Role::NotReplica;
            return actions;
        }
        if new_epoch || matches!(self.role, Role::NotReplica) {
            self.epoch = state.leader_epoch;
            self.step_down(&mut actions);
            if state.leader == self.me {
                self.become_leader(now, state, revision, log, &mut actions);
                // With no follower in the ISR the HW is the LEO at once (Kafka's
                // maybeIncrementLeaderHW on becoming leader).
                self.after_leader_change(now, log, &mut actions);
            } else {
                let leader = (state.leader != NO_LEADER).then_some(state.leader);
                self.role = Role::Follower(follower::FollowerState::new(leader));
            }
            return actions;
        }
        // Same epoch: the ISR (or replicas) changed, by our CAS or the controller's.
        if let Role::Leader(l) = &mut self.role {
            l.apply_state(self.me, state, revision);
            self.after_leader_change(now, log, &mut actions);
        }
        actions
    }

    /// A local log I/O error: the replica goes offline (the broker reports it).
    pub fn on_log_error(&mut self) -> Vec<Action> {
        let mut actions = Vec::new();
        self.step_down_with(&mut actions, ErrorCode::KAFKA_STORAGE_ERROR);
        self.role = Role::Offline;
        actions
    }

    /// Timers: ISR shrink and expansion checks, pending produce deadlines, the next fetch.
    pub fn poll(&mut self, now: u64, log: &impl LocalLog) -> Vec<Action> {
        let mut actions = Vec::new();
        match &mut self.role {
            Role::Leader(_) => self.leader_poll(now, log, &mut actions),
            Role::Follower(_) => self.follower_poll(now, log, &mut actions),
            Role::NotReplica | Role::Offline => {}
        }
        actions
    }

    fn step_down(&mut self, actions: &mut Vec<Action>) {
        self.step_down_with(actions, ErrorCode::NOT_LEADER_OR_FOLLOWER);
    }

    fn step_down_with(&mut self, actions: &mut Vec<Action>, error: ErrorCode) {
        if let Role::Leader(l) = &mut self.role {
            for pending in l.pending.drain(..) {
                actions.push(Action::CompleteProduce {
                    id: pending.id,
                    error: Some(error),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Writer;
    // The epoch rules are storage's; the tests' logs use them as the broker's do.
    use skiff_storage::{EpochCache, EpochEndOffset};

    struct Log {
        leo: Offset,
        epochs: EpochCache,
    }

    impl LocalLog for Log {
        fn log_end_offset(&self) -> Offset {
            self.leo
        }
        fn log_start_offset(&self) -> Offset {
            0
        }
        fn latest_epoch(&self) -> Option<Epoch> {
            self.epochs.latest_epoch()
        }
        fn latest_epoch_start(&self) -> Option<Offset> {
            self.epochs.entries().last().map(|entry| entry.start_offset)
        }
        fn end_offset_for(&self, epoch: Epoch) -> Option<(Epoch, Offset)> {
            let answer = self.epochs.end_offset_for(epoch, self.leo);
            (answer != EpochEndOffset::UNDEFINED).then_some((answer.epoch, answer.end_offset))
        }
    }

    fn state(leader: NodeId, epoch: Epoch, isr: &[NodeId]) -> PartitionState {
        PartitionState {
            leader,
            leader_epoch: epoch,
            isr: isr.to_vec(),
            replicas: vec![1, 2, 3],
            writer: Writer::Controller,
        }
    }

    fn fetch(replica: NodeId, offset: Offset, last: Option<Epoch>, epoch: Epoch) -> FollowerFetch {
        FollowerFetch {
            replica,
            fetch_offset: offset,
            last_fetched_epoch: last,
            current_leader_epoch: epoch,
        }
    }

    fn leader_at_5() -> (Replica, Log) {
        let mut log = Log {
            leo: 10,
            epochs: EpochCache::default(),
        };
        log.epochs.assign(3, 0);
        let mut replica = Replica::new(1, ReplicaConfig::default(), 0);
        let actions = replica.on_partition_state(0, &state(1, 5, &[1, 2, 3]), 7, &log);
        assert_eq!(
            actions,
            vec![Action::AssignEpoch {
                epoch: 5,
                start: 10
            }]
        );
        log.epochs.assign(5, 10);
        (replica, log)
    }

    #[test]
    fn the_checkpointed_hw_is_restored_only_before_the_first_state() {
        let mut replica = Replica::new(1, ReplicaConfig::default(), 0);
        assert_eq!(replica.restore_high_watermark(7), Some(7));
        assert_eq!(replica.restore_high_watermark(5), None, "never lowered");
        assert_eq!(replica.high_watermark(), 7);
        let log = Log {
            leo: 10,
            epochs: EpochCache::default(),
        };
        replica.on_partition_state(0, &state(2, 1, &[1, 2]), 3, &log);
        assert_eq!(
            replica.restore_high_watermark(9),
            None,
            "fed: the protocol owns it"
        );
        assert_eq!(replica.high_watermark(), 7);
    }

    #[test]
    fn a_leader_alone_in_its_isr_moves_the_hw_with_its_own_appends() {
        let mut log = Log {
            leo: 4,
            epochs: EpochCache::default(),
        };
        let mut replica = Replica::new(1, ReplicaConfig::default(), 0);
        let actions = replica.on_partition_state(0, &state(1, 2, &[1]), 3, &log);
        assert_eq!(
            actions,
            vec![
                Action::AssignEpoch { epoch: 2, start: 4 },
                Action::HighWatermark(4)
            ]
        );
        log.epochs.assign(2, 4);
        log.leo = 9;
        assert_eq!(
            replica.poll_high_watermark(1, &log),
            vec![Action::HighWatermark(9)]
        );
        // With a follower in the ISR it waits for the follower instead.
        let actions = replica.on_partition_state(2, &state(1, 2, &[1, 2]), 4, &log);
        assert!(actions.is_empty(), "{actions:?}");
        log.leo = 12;
        assert!(replica.poll_high_watermark(3, &log).is_empty());
        assert_eq!(replica.high_watermark(), 9);
    }

    #[test]
    fn a_follower_joins_the_isr_only_through_its_own_fetch() {
        let (mut leader, log) = leader_at_5();
        // 3 leaves the ISR after fetching to 10 once, then stops fetching.
        leader.on_partition_state(1, &state(1, 5, &[1, 2]), 8, &log);
        leader.on_follower_fetch(2, fetch(2, 10, Some(3), 5), &log);
        leader.on_follower_fetch(2, fetch(3, 10, Some(3), 5), &log);
        // (that fetch proposed 3 back; the store refused it: 3 died meanwhile.)
        leader.on_isr_proposal_failed();
        for now in [100, 200, 300] {
            let actions = leader.poll(now, &log);
            assert!(
                !actions.iter().any(
                    |a| matches!(a, Action::ProposeIsr { state, .. } if state.isr.contains(&3))
                ),
                "{actions:?}"
            );
        }
        // Its next fetch proposes it again.
        let (_, actions) = leader.on_follower_fetch(400, fetch(3, 10, Some(3), 5), &log);
        assert!(actions
            .iter()
            .any(|a| matches!(a, Action::ProposeIsr { state, .. } if state.isr == vec![1, 2, 3])));
    }

    #[test]
    fn a_replica_added_at_the_same_epoch_joins_the_isr_and_a_removed_one_is_refused() {
        let (mut leader, log) = leader_at_5();
        leader.on_follower_fetch(1, fetch(2, 10, Some(3), 5), &log);
        leader.on_follower_fetch(1, fetch(3, 10, Some(3), 5), &log);
        // A reassignment adds 4 and, later, removes 3, at the same leader epoch.
        let added = PartitionState {
            replicas: vec![1, 2, 3, 4],
            ..state(1, 5, &[1, 2, 3])
        };
        leader.on_partition_state(2, &added, 8, &log);
        let (answer, actions) = leader.on_follower_fetch(3, fetch(4, 4, None, 5), &log);
        assert!(matches!(answer, FetchAnswer::Records { from: 4, .. }));
        assert!(actions.is_empty(), "behind the HW: not in the ISR yet");
        let (_, actions) = leader.on_follower_fetch(4, fetch(4, 10, Some(3), 5), &log);
        assert!(
            actions
                .iter()
                .any(|a| matches!(a, Action::ProposeIsr { state, .. }
                if state.isr == vec![1, 2, 3, 4] && state.replicas == vec![1, 2, 3, 4])),
            "{actions:?}"
        );
        let finished = PartitionState {
            replicas: vec![1, 2, 4],
            ..state(1, 5, &[1, 2, 4])
        };
        leader.on_partition_state(5, &finished, 9, &log);
        let (answer, _) = leader.on_follower_fetch(6, fetch(3, 10, Some(3), 5), &log);
        assert_eq!(
            answer,
            FetchAnswer::Error(ErrorCode::NOT_LEADER_OR_FOLLOWER)
        );
        let status = leader.leader_status(10).unwrap();
        assert_eq!((status.replicas, status.isr), (3, 3));
    }

    #[test]
    fn a_new_leaders_hw_lags_its_epoch_start_until_the_isr_fetches_past_it() {
        // Leader at epoch 5 from offset 10 with a checkpointed HW of 0: followers 2 and 3 in the
        // ISR.
        let (mut leader, log) = leader_at_5();
        assert!(leader.high_watermark() < 10);
        assert!(leader.high_watermark_lags_epoch_start());
        leader.on_follower_fetch(1, fetch(2, 10, Some(3), 5), &log);
        assert!(
            leader.high_watermark_lags_epoch_start(),
            "3 has not fetched yet"
        );
        leader.on_follower_fetch(2, fetch(3, 10, Some(3), 5), &log);
        assert_eq!(leader.high_watermark(), 10);
        assert!(!leader.high_watermark_lags_epoch_start());
        // A follower does not answer consumers' ListOffsets: never lagging.
        let mut follower = Replica::new(2, ReplicaConfig::default(), 0);
        follower.on_partition_state(0, &state(1, 5, &[1, 2]), 7, &log);
        assert!(!follower.high_watermark_lags_epoch_start());
    }

    #[test]
    fn a_follower_behind_the_leaders_log_start_resets_and_one_ahead_cuts_to_the_hw() {
        let log = Log {
            leo: 20,
            epochs: EpochCache::default(),
        };
        let mut follower = Replica::new(2, ReplicaConfig::default(), 5);
        follower.on_partition_state(0, &state(1, 4, &[1, 2]), 3, &log);
        follower.poll(0, &log);
        let gone = FetchResult::OutOfRange {
            log_start_offset: 50,
            high_watermark: 70,
        };
        assert_eq!(
            follower.on_fetch_result(1, 1, 4, &gone, &log),
            vec![Action::ResetTo { offset: 50 }, Action::HighWatermark(50)]
        );
        follower.poll(2, &log);
        let behind = FetchResult::OutOfRange {
            log_start_offset: 0,
            high_watermark: 12,
        };
        assert_eq!(
            follower.on_fetch_result(3, 1, 4, &behind, &log),
            vec![Action::TruncateTo { offset: 12 }, Action::HighWatermark(12)]
        );
        // Within the leader's range: nothing to do but wait and fetch again.
        follower.poll(4, &log);
        let odd = FetchResult::OutOfRange {
            log_start_offset: 0,
            high_watermark: 30,
        };
        assert!(follower.on_fetch_result(5, 1, 4, &odd, &log).is_empty());
        assert!(follower.poll(6, &log).is_empty(), "backing off");
    }

    #[test]
    fn an_empty_follower_log_starts_at_the_batch_holding_its_fetch_offset() {
        // Reset to 25, the leader's log start, which DeleteRecords put inside batch [20, 29].
        struct Empty;
        impl LocalLog for Empty {
            fn log_end_offset(&self) -> Offset {
                25
            }
            fn log_start_offset(&self) -> Offset {
                25
            }
            fn latest_epoch(&self) -> Option<Epoch> {
                None
            }
            fn latest_epoch_start(&self) -> Option<Offset> {
                None
            }
            fn end_offset_for(&self, _epoch: Epoch) -> Option<(Epoch, Offset)> {
                None
            }
        }
        let mut follower = Replica::new(2, ReplicaConfig::default(), 25);
        follower.on_partition_state(0, &state(1, 4, &[1, 2]), 3, &Empty);
        follower.poll(0, &Empty);
        let records = FetchResult::Records {
            batches: vec![
                FetchedBatch {
                    base: 20,
                    last: 29,
                    epoch: 3,
                },
                FetchedBatch {
                    base: 30,
                    last: 31,
                    epoch: 4,
                },
            ],
            high_watermark: 32,
        };
        assert_eq!(
            follower.on_fetch_result(1, 1, 4, &records, &Empty),
            vec![
                Action::ResetTo { offset: 20 },
                Action::AppendFetched { up_to: 32 },
                Action::HighWatermark(32)
            ]
        );
    }

    #[test]
    fn a_follower_takes_a_compacted_leaders_gaps_but_nothing_below_its_end() {
        // The follower's log ends at 10; the leader's cleaner removed [10, 14] and kept
        // [15, 17] and [20, 21].
        let mut log = Log {
            leo: 10,
            epochs: EpochCache::default(),
        };
        log.epochs.assign(4, 0);
        let mut follower = Replica::new(2, ReplicaConfig::default(), 10);
        follower.on_partition_state(0, &state(1, 4, &[1, 2]), 3, &log);
        follower.poll(0, &log);
        let batch = |base, last| FetchedBatch {
            base,
            last,
            epoch: 4,
        };
        let gaps = FetchResult::Records {
            batches: vec![batch(15, 17), batch(20, 21)],
            high_watermark: 22,
        };
        assert_eq!(
            follower.on_fetch_result(1, 1, 4, &gaps, &log),
            vec![
                Action::AppendFetched { up_to: 22 },
                Action::HighWatermark(22)
            ]
        );
        // A batch starting below the log end is never appended.
        follower.poll(2, &log);
        let overlapping = FetchResult::Records {
            batches: vec![batch(8, 12)],
            high_watermark: 22,
        };
        let actions = follower.on_fetch_result(3, 1, 4, &overlapping, &log);
        assert!(
            !actions
                .iter()
                .any(|action| matches!(action, Action::AppendFetched { .. })),
            "{actions:?}"
        );
    }

    #[test]
    fn the_leader_fences_stale_and_future_epochs_and_answers_divergence() {
        let (mut leader, log) = leader_at_5();
        let (answer, _) = leader.on_follower_fetch(1, fetch(2, 10, Some(3), 4), &log);
        assert_eq!(answer, FetchAnswer::Error(ErrorCode::FENCED_LEADER_EPOCH));
        let (answer, _) = leader.on_follower_fetch(1, fetch(2, 10, Some(3), 6), &log);
        assert_eq!(answer, FetchAnswer::Error(ErrorCode::UNKNOWN_LEADER_EPOCH));
        // The follower wrote epoch 4 (a leader we never saw): it diverges where our 3 ends.
        let (answer, _) = leader.on_follower_fetch(1, fetch(2, 12, Some(4), 5), &log);
        assert_eq!(
            answer,
            FetchAnswer::Diverging {
                epoch: 3,
                end_offset: 10,
                high_watermark: 0
            }
        );
    }

    #[test]
    fn the_hw_is_the_min_over_the_isr_and_acks_all_waits_for_it() {
        let (mut leader, log) = leader_at_5();
        assert_eq!(leader.admit_produce(Acks::All), Ok(5));
        assert!(leader.await_replication(1, 9, 9, 1_000, &log).is_empty());
        leader.on_follower_fetch(2, fetch(2, 10, Some(3), 5), &log);
        assert_eq!(leader.high_watermark(), 0, "follower 3 is still unknown");
        let (_, actions) = leader.on_follower_fetch(3, fetch(3, 8, Some(3), 5), &log);
        assert_eq!(actions, vec![Action::HighWatermark(8)]);
        let (_, actions) = leader.on_follower_fetch(4, fetch(3, 10, Some(3), 5), &log);
        assert_eq!(
            actions,
            vec![
                Action::HighWatermark(10),
                Action::CompleteProduce { id: 9, error: None }
            ]
        );
        // A lagging fetch never lowers it.
        leader.on_follower_fetch(5, fetch(3, 9, Some(3), 5), &log);
        assert_eq!(leader.high_watermark(), 10);
    }

    #[test]
    fn a_stuck_follower_is_shrunk_and_acks_all_needs_min_insync() {
        let (mut leader, log) = leader_at_5();
        let lag = REPLICA_LAG_TIME_MAX_MS_DEFAULT;
        leader.on_follower_fetch(lag, fetch(2, 10, Some(3), 5), &log);
        assert!(leader.poll(lag, &log).is_empty());
        let actions = leader.poll(lag + 2, &log);
        let [Action::ProposeIsr {
            expected_revision: 7,
            state,
        }] = actions.as_slice()
        else {
            panic!("{actions:?}");
        };
        assert_eq!(state.isr, vec![1, 2], "3 never fetched");
        leader.on_partition_state(
            lag + 3,
            &PartitionState {
                isr: vec![1],
                ..state.clone()
            },
            8,
            &log,
        );
        assert_eq!(
            leader.admit_produce(Acks::All),
            Err(ErrorCode::NOT_ENOUGH_REPLICAS)
        );
        assert_eq!(leader.admit_produce(Acks::Leader), Ok(5));
    }

    #[test]
    fn a_follower_truncates_by_kip_279_and_caps_its_hw() {
        let mut log = Log {
            leo: 20,
            epochs: EpochCache::default(),
        };
        log.epochs.assign(1, 0);
        log.epochs.assign(2, 12);
        let mut follower = Replica::new(2, ReplicaConfig::default(), 0);
        follower.on_partition_state(0, &state(1, 4, &[1, 2]), 3, &log);
        let actions = follower.poll(0, &log);
        assert!(matches!(
            actions.as_slice(),
            [Action::SendFetch { leader: 1, .. }]
        ));
        // The leader has epoch 1 up to 15 and no epoch 2: our epoch 1 ends at 12, ask again.
        let diverging = FetchResult::Diverging {
            epoch: 1,
            end_offset: 15,
        };
        let actions = follower.on_fetch_result(1, 1, 4, &diverging, &log);
        assert_eq!(actions, vec![Action::TruncateTo { offset: 12 }]);
        log.leo = 12;
        log.epochs.truncate_from_end(12);
        follower.poll(2, &log);
        let records = FetchResult::Records {
            batches: vec![FetchedBatch {
                base: 12,
                last: 14,
                epoch: 3,
            }],
            high_watermark: 30,
        };
        let actions = follower.on_fetch_result(3, 1, 4, &records, &log);
        assert_eq!(
            actions,
            vec![
                Action::AppendFetched { up_to: 15 },
                Action::HighWatermark(15)
            ]
        );
        assert_eq!(
            follower.role(),
            RoleView::Follower(Some(1), FollowerPhase::Fetching)
        );
    }
}
