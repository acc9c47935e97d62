//! [`Coordinator`]: the transactional ids this broker coordinates, the inputs that drive them and
//! the outputs they produce; the one place a transition is applied (after its record is durable).
//!
//! Must never: read a clock (time is the `now_ms` argument), apply a transition before the
//! driver acknowledged its record, or answer a request twice.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use skiff_protocol::error_code::ErrorCode;
use skiff_protocol::records::txn::MarkerType;

use crate::config::TxnConfig;
use crate::log::TxnLogRecord;
use crate::state::{TopicPartition, TxnMetadata, TxnState};

/// Chosen by the driver for every request it hands in; comes back on the reply for it.
pub type RequestId = u64;
/// Chosen by the coordinator for every record it asks the driver to append.
pub type PersistId = u64;

/// What the coordinator needs to know about a request besides its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestMeta {
    /// The driver's handle for the eventual reply.
    pub request_id: RequestId,
    /// The request's API version (the driver encodes the reply with it).
    pub version: i16,
}

/// InitProducerId's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitProducerId {
    /// `None` (or absent) for an idempotent producer: a fresh producer id, epoch 0.
    pub transactional_id: Option<String>,
    /// The client's `transaction.timeout.ms`.
    pub timeout_ms: i32,
    /// KIP-360: the producer id the client holds (−1 if none).
    pub producer_id: i64,
    /// KIP-360: the epoch the client holds (−1 if none).
    pub producer_epoch: i16,
}

/// AddPartitionsToTxn's fields for one transaction (a client request, v0-3, or one transaction of
/// a broker's batched v4+ request); AddOffsetsToTxn is turned into one of these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddPartitions {
    /// The transactional id.
    pub transactional_id: String,
    /// The producer id the client holds.
    pub producer_id: i64,
    /// Its epoch.
    pub producer_epoch: i16,
    /// The partitions to add (or, verify-only, to check).
    pub partitions: Vec<TopicPartition>,
    /// 1 for client requests (v0-3) and v4, 2 for the v5 add a leader makes for Produce v12.
    pub client_tv: i16,
}

/// EndTxn's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndTxn {
    /// The transactional id.
    pub transactional_id: String,
    /// The producer id the client holds.
    pub producer_id: i64,
    /// Its epoch.
    pub producer_epoch: i16,
    /// Commit (true) or abort.
    pub commit: bool,
    /// 2 for EndTxn v5+ (the epoch bumps at every end), else 1.
    pub client_tv: i16,
}

/// DescribeTransactions' answer for one id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnDescription {
    /// The id asked about.
    pub transactional_id: String,
    /// NONE, TRANSACTIONAL_ID_NOT_FOUND, NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS.
    pub error: ErrorCode,
    /// Its state's name (empty on error).
    pub state: String,
    /// Its metadata (`None` on error).
    pub metadata: Option<TxnMetadata>,
}

/// ListTransactions' answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnListing {
    /// NONE, or COORDINATOR_LOAD_IN_PROGRESS while a state partition is loading.
    pub error: ErrorCode,
    /// State filters that name no state.
    pub unknown_state_filters: Vec<String>,
    /// (transactional id, producer id, state name) of each id that passed the filters.
    pub transactions: Vec<(String, i64, &'static str)>,
}

/// A response, one variant per API the coordinator answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// InitProducerId.
    InitProducerId {
        /// The error.
        error: ErrorCode,
        /// The producer id (−1 on error).
        producer_id: i64,
        /// The epoch (−1 on error).
        producer_epoch: i16,
    },
    /// AddPartitionsToTxn (every form): an error per partition asked about.
    AddPartitions {
        /// The partitions and their errors, in request order.
        results: Vec<(TopicPartition, ErrorCode)>,
    },
    /// AddOffsetsToTxn.
    AddOffsets {
        /// The error.
        error: ErrorCode,
    },
    /// EndTxn (v5 carries the producer id and epoch the client continues with).
    EndTxn {
        /// The error.
        error: ErrorCode,
        /// The producer id to use next (−1 on error).
        producer_id: i64,
        /// The epoch to use next (−1 on error).
        producer_epoch: i16,
    },
    /// DescribeTransactions.
    DescribeTransactions(Vec<TxnDescription>),
    /// ListTransactions.
    ListTransactions(TxnListing),
}

/// What the coordinator asks the driver to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Send this response for that request.
    Reply {
        /// The request answered.
        request_id: RequestId,
        /// Its API version.
        version: i16,
        /// The response body.
        response: Response,
    },
    /// Append `record` to `__transaction_state` partition `partition` as its leader (acks=all,
    /// values in `value_version`), then call [`Coordinator::persisted`] with `persist_id`.
    Persist {
        /// The coordinator's handle.
        persist_id: PersistId,
        /// The state partition.
        partition: i32,
        /// The leader epoch of that partition the coordinator loaded it at: an append at another
        /// epoch must fail (NOT_COORDINATOR).
        coordinator_epoch: i32,
        /// The record (a tombstone when its value is `None`).
        record: TxnLogRecord,
        /// The value version to encode with.
        value_version: i16,
    },
    /// Write `marker` for (producer id, epoch) to every partition through its leader, then call
    /// [`Coordinator::markers_written`].
    SendMarkers {
        /// The transactional id.
        transactional_id: String,
        /// The producer id of the ending transaction.
        producer_id: i64,
        /// The epoch the markers carry.
        producer_epoch: i16,
        /// COMMIT or ABORT.
        marker: MarkerType,
        /// The coordinator epoch the markers carry.
        coordinator_epoch: i32,
        /// The transaction's partitions.
        partitions: Vec<TopicPartition>,
    },
    /// Claim a block of producer ids, then call [`Coordinator::producer_ids_granted`]. Emitted
    /// once per shortage; requests needing an id wait meanwhile.
    NeedProducerIds,
}

/// Why the driver could not append a state record; each maps to the error Kafka's coordinator
/// answers for a failed append of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PersistError {
    /// Not enough replicas, a timeout, or the partition missing: COORDINATOR_NOT_AVAILABLE.
    #[error("transaction state log unavailable")]
    Unavailable,
    /// This broker no longer leads the partition (or leads it at another epoch): NOT_COORDINATOR.
    #[error("not the leader of the transaction state partition")]
    NotLeader,
    /// Anything else: UNKNOWN_SERVER_ERROR.
    #[error("transaction state append failed")]
    Failed,
}

impl PersistError {
    /// The failure of an append that went through the partition, as Kafka maps it.
    pub fn from_append_error(code: ErrorCode) -> Self {
        match code {
            ErrorCode::NOT_ENOUGH_REPLICAS
            | ErrorCode::NOT_ENOUGH_REPLICAS_AFTER_APPEND
            | ErrorCode::REQUEST_TIMED_OUT
            | ErrorCode::UNKNOWN_TOPIC_OR_PARTITION => Self::Unavailable,
            ErrorCode::NOT_LEADER_OR_FOLLOWER | ErrorCode::KAFKA_STORAGE_ERROR => Self::NotLeader,
            _ => Self::Failed,
        }
    }

    /// The code answered to the request that waited for the append.
    pub fn error_code(self) -> ErrorCode {
        match self {
            Self::Unavailable => ErrorCode::COORDINATOR_NOT_AVAILABLE,
            Self::NotLeader => ErrorCode::NOT_COORDINATOR,
            Self::Failed => ErrorCode::UNKNOWN_SERVER_ERROR,
        }
    }
}

/// What happens once a pending record is durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum After {
    /// Answer InitProducerId with the new producer id and epoch.
    ReplyInit(RequestMeta),
    /// An InitProducerId fenced the open transaction: answer CONCURRENT_TRANSACTIONS (the client
    /// retries and then gets the bumped epoch), then write the ABORT markers.
    ReplyFenced(RequestMeta),
    /// Answer AddPartitionsToTxn (or AddOffsetsToTxn) with NONE.
    ReplyAdd(RequestMeta, Vec<TopicPartition>, bool),
    /// Answer EndTxn, then write the markers.
    ReplyEnd(RequestMeta),
    /// A timed-out transaction's abort: write the markers.
    Markers,
    /// CompleteCommit / CompleteAbort written: nothing more.
    Completed,
    /// The tombstone of an expired id written: forget the id.
    Removed,
}

impl After {
    /// The request waiting, if any.
    pub(crate) fn request(&self) -> Option<(RequestMeta, Option<&[TopicPartition]>, bool)> {
        match self {
            Self::ReplyInit(meta) | Self::ReplyFenced(meta) | Self::ReplyEnd(meta) => {
                Some((*meta, None, false))
            }
            Self::ReplyAdd(meta, partitions, offsets) => Some((*meta, Some(partitions), *offsets)),
            Self::Markers | Self::Completed | Self::Removed => None,
        }
    }
}

/// A transition waiting for its record to be durable (Kafka's pending state).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pending {
    pub(crate) persist_id: PersistId,
    /// The metadata once durable (`None`: the id's tombstone).
    pub(crate) target: Option<TxnMetadata>,
    pub(crate) after: After,
}

/// One transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) meta: TxnMetadata,
    /// The `__transaction_state` partition holding it.
    pub(crate) partition: i32,
    pub(crate) pending: Option<Pending>,
    /// The CompleteCommit/CompleteAbort append failed retriably: try again at the next tick.
    pub(crate) complete_retry: bool,
}

/// A request waiting for producer ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Parked {
    Init(RequestMeta, InitProducerId),
    End(RequestMeta, EndTxn),
}

/// A led state partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Led {
    /// The partition's leader epoch when this broker became its leader.
    pub(crate) coordinator_epoch: i32,
    /// Whether its log was replayed.
    pub(crate) loaded: bool,
}

/// The transaction coordinator. See the crate doc for the driver contract.
#[derive(Debug)]
pub struct Coordinator {
    pub(crate) config: TxnConfig,
    pub(crate) led: BTreeMap<i32, Led>,
    pub(crate) entries: BTreeMap<String, Entry>,
    pub(crate) outputs: VecDeque<Output>,
    /// Which id each record in flight belongs to.
    pub(crate) persisting: BTreeMap<PersistId, String>,
    pub(crate) next_persist_id: PersistId,
    /// The producer ids in hand: `[next, end)`.
    pub(crate) ids: (i64, i64),
    pub(crate) ids_requested: bool,
    pub(crate) parked: VecDeque<Parked>,
    pub(crate) next_abort_check_ms: i64,
    pub(crate) next_expire_check_ms: i64,
}

impl Coordinator {
    /// A coordinator leading no state partition and holding no producer id yet.
    pub fn new(config: TxnConfig) -> Self {
        Self {
            config,
            led: BTreeMap::new(),
            entries: BTreeMap::new(),
            outputs: VecDeque::new(),
            persisting: BTreeMap::new(),
            next_persist_id: 1,
            ids: (0, 0),
            ids_requested: false,
            parked: VecDeque::new(),
            next_abort_check_ms: 0,
            next_expire_check_ms: 0,
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &TxnConfig {
        &self.config
    }

    /// The next output to act on, oldest first.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// The `__transaction_state` partition of `transactional_id` (Kafka's `partitionFor`: the
    /// same hash as a group's, over `transaction.state.log.num.partitions`).
    pub fn state_partition(&self, transactional_id: &str) -> i32 {
        skiff_group::coordinator_partition(transactional_id, self.config.state_log_partitions)
    }

    /// The metadata of `transactional_id`, if loaded here (its state as last made durable).
    pub fn metadata(&self, transactional_id: &str) -> Option<&TxnMetadata> {
        self.entries.get(transactional_id).map(|entry| &entry.meta)
    }

    /// Transactional ids held.
    pub fn transactional_ids(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn reply(&mut self, meta: RequestMeta, response: Response) {
        self.outputs.push_back(Output::Reply {
            request_id: meta.request_id,
            version: meta.version,
            response,
        });
    }

    /// NONE if `transactional_id` is coordinated here and loaded, else NOT_COORDINATOR or
    /// COORDINATOR_LOAD_IN_PROGRESS.
    pub(crate) fn coordination_error(&self, transactional_id: &str) -> ErrorCode {
        match self.led.get(&self.state_partition(transactional_id)) {
            None => ErrorCode::NOT_COORDINATOR,
            Some(led) if !led.loaded => ErrorCode::COORDINATOR_LOAD_IN_PROGRESS,
            Some(_) => ErrorCode::NONE,
        }
    }

    /// Records that `target` (or a tombstone) is to be written for `id`, then `after` happens.
    /// The id must have no pending transition.
    pub(crate) fn begin_transition(&mut self, id: &str, target: Option<TxnMetadata>, after: After) {
        let Some(entry) = self.entries.get_mut(id) else {
            debug_assert!(false, "transition of an unknown id {id}");
            return;
        };
        debug_assert!(
            entry.pending.is_none(),
            "{id} already has a pending transition"
        );
        let to = target.as_ref().map_or(TxnState::Dead, |meta| meta.state);
        debug_assert!(
            to.may_follow(entry.meta.state),
            "{id}: {:?} may not follow {:?}",
            to,
            entry.meta.state
        );
        let Some(led) = self.led.get(&entry.partition) else {
            debug_assert!(false, "transition of {id} whose partition is not led");
            return;
        };
        let persist_id = self.next_persist_id;
        self.next_persist_id += 1;
        entry.pending = Some(Pending {
            persist_id,
            target: target.clone(),
            after,
        });
        self.persisting.insert(persist_id, id.to_owned());
        self.outputs.push_back(Output::Persist {
            persist_id,
            partition: entry.partition,
            coordinator_epoch: led.coordinator_epoch,
            record: TxnLogRecord {
                transactional_id: id.to_owned(),
                value: target,
            },
            value_version: self.config.log_value_version(),
        });
    }

    /// The driver's answer to [`Output::Persist`]: the record is durable (`Ok`) or could not be
    /// appended. A success applies the transition and does what waited for it; a failure answers
    /// the waiting request with Kafka's code and leaves the id as it was.
    pub fn persisted(
        &mut self,
        now_ms: i64,
        persist_id: PersistId,
        result: Result<(), PersistError>,
    ) {
        let Some(id) = self.persisting.remove(&persist_id) else {
            return; // its partition was unloaded meanwhile
        };
        let Some(entry) = self.entries.get_mut(&id) else {
            return;
        };
        let Some(pending) = entry
            .pending
            .take_if(|pending| pending.persist_id == persist_id)
        else {
            return;
        };
        match result {
            Ok(()) => self.apply(now_ms, &id, pending),
            Err(error) => self.persist_failed(&id, pending, error),
        }
    }

    fn apply(&mut self, now_ms: i64, id: &str, pending: Pending) {
        let Some(target) = pending.target else {
            self.entries.remove(id);
            return;
        };
        if let Some(entry) = self.entries.get_mut(id) {
            entry.meta = target.clone();
        }
        match pending.after {
            After::ReplyInit(meta) => self.reply(
                meta,
                Response::InitProducerId {
                    error: ErrorCode::NONE,
                    producer_id: target.producer_id,
                    producer_epoch: target.producer_epoch,
                },
            ),
            After::ReplyFenced(meta) => {
                self.reply(
                    meta,
                    crate::init::init_error(ErrorCode::CONCURRENT_TRANSACTIONS),
                );
                self.start_markers(now_ms, id);
            }
            After::ReplyAdd(meta, partitions, offsets) => {
                self.reply(
                    meta,
                    crate::add::add_reply(&partitions, ErrorCode::NONE, offsets),
                );
            }
            After::ReplyEnd(meta) => {
                let (producer_id, producer_epoch) = crate::end::continuing_with(&target);
                self.reply(
                    meta,
                    Response::EndTxn {
                        error: ErrorCode::NONE,
                        producer_id,
                        producer_epoch,
                    },
                );
                self.start_markers(now_ms, id);
            }
            After::Markers => self.start_markers(now_ms, id),
            After::Completed | After::Removed => {}
        }
    }

    fn persist_failed(&mut self, id: &str, pending: Pending, error: PersistError) {
        let completing = pending.target.as_ref().is_some_and(|meta| {
            matches!(
                meta.state,
                TxnState::CompleteCommit | TxnState::CompleteAbort
            )
        });
        if completing && error != PersistError::NotLeader {
            // The markers are written: only the Complete record is missing. Kafka retries it.
            if let Some(entry) = self.entries.get_mut(id) {
                entry.complete_retry = true;
            }
        }
        if let Some((meta, partitions, offsets)) = pending.after.request() {
            let code = error.error_code();
            let response = match pending.after {
                After::ReplyInit(_) | After::ReplyFenced(_) => crate::init::init_error(code),
                After::ReplyEnd(_) => crate::end::end_error(code),
                _ => crate::add::add_reply(partitions.unwrap_or(&[]), code, offsets),
            };
            self.reply(meta, response);
        }
    }

    /// Markers for the PrepareCommit/PrepareAbort of `id` (or, with no partition, its Complete
    /// record at once).
    pub(crate) fn start_markers(&mut self, now_ms: i64, id: &str) {
        let Some(entry) = self.entries.get(id) else {
            return;
        };
        let meta = &entry.meta;
        debug_assert!(
            meta.state.is_prepare(),
            "markers for {id} in {:?}",
            meta.state
        );
        if meta.partitions.is_empty() {
            self.complete(now_ms, id);
            return;
        }
        let Some(led) = self.led.get(&entry.partition) else {
            return;
        };
        self.outputs.push_back(Output::SendMarkers {
            transactional_id: id.to_owned(),
            producer_id: meta.producer_id,
            producer_epoch: meta.producer_epoch,
            marker: if meta.state == TxnState::PrepareCommit {
                MarkerType::Commit
            } else {
                MarkerType::Abort
            },
            coordinator_epoch: led.coordinator_epoch,
            partitions: meta.partitions.iter().cloned().collect(),
        });
    }

    /// The driver's answer to [`Output::SendMarkers`]: every partition has the marker (or no
    /// longer exists). Writes CompleteCommit / CompleteAbort. Ignored unless the id is still in
    /// that PrepareCommit/PrepareAbort with that producer id, epoch and coordinator epoch.
    pub fn markers_written(
        &mut self,
        now_ms: i64,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
    ) {
        let Some(entry) = self.entries.get(transactional_id) else {
            return;
        };
        let current = self
            .led
            .get(&entry.partition)
            .is_some_and(|led| led.coordinator_epoch == coordinator_epoch);
        if current
            && entry.pending.is_none()
            && entry.meta.state.is_prepare()
            && entry.meta.producer_id == producer_id
            && entry.meta.producer_epoch == producer_epoch
        {
            self.complete(now_ms, transactional_id);
        }
    }

    /// Kafka's `prepareComplete`: the Complete record of a PrepareCommit/PrepareAbort.
    pub(crate) fn complete(&mut self, now_ms: i64, id: &str) {
        let Some(entry) = self.entries.get_mut(id) else {
            return;
        };
        entry.complete_retry = false;
        let meta = &entry.meta;
        let mut target = meta.clone();
        target.state = if meta.state == TxnState::PrepareCommit {
            TxnState::CompleteCommit
        } else {
            TxnState::CompleteAbort
        };
        target.previous_producer_id = meta.producer_id;
        if TxnMetadata::bumps_epoch_at_end(meta.client_tv)
            && meta.next_producer_id != crate::state::NO_PRODUCER_ID
        {
            target.producer_id = meta.next_producer_id;
            target.producer_epoch = 0;
        }
        target.next_producer_id = crate::state::NO_PRODUCER_ID;
        target.partitions = BTreeSet::new();
        target.last_update_ms = now_ms;
        self.begin_transition(id, Some(target), After::Completed);
    }
}
