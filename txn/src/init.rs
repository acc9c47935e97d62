//! InitProducerId (Kafka's `handleInitProducerId`): idempotent producers get a fresh producer id;
//! a transactional id gets its producer id with the epoch bumped (fencing older producers), its
//! open transaction aborted first, a new producer id once the epoch is exhausted, and KIP-360's
//! recovery when the client names the producer id and epoch it holds. Also the supply of producer
//! ids: blocks claimed by the driver, requests waiting while none is in hand.
//!
//! Must never: hand out a producer id twice, or a bumped epoch before its record is durable.

use skiff_protocol::error_code::ErrorCode;

use crate::config::WAITING_FOR_PRODUCER_IDS_MAX;
use crate::coordinator::{
    After, Coordinator, Entry, InitProducerId, Parked, RequestMeta, Response,
};
use crate::state::{is_epoch_exhausted, TxnMetadata, TxnState, NO_PRODUCER_EPOCH, NO_PRODUCER_ID};

/// InitProducerId's answer for an error.
pub(crate) fn init_error(error: ErrorCode) -> Response {
    Response::InitProducerId {
        error,
        producer_id: NO_PRODUCER_ID,
        producer_epoch: NO_PRODUCER_EPOCH,
    }
}

impl Coordinator {
    /// InitProducerId, every version.
    pub fn handle_init_producer_id(
        &mut self,
        now_ms: i64,
        meta: RequestMeta,
        request: InitProducerId,
    ) {
        let Some(id) = request.transactional_id.clone().filter(|id| !id.is_empty()) else {
            // An idempotent producer: a fresh id, epoch 0, whatever it held before.
            match self.take_producer_id() {
                Some(producer_id) => self.reply(
                    meta,
                    Response::InitProducerId {
                        error: ErrorCode::NONE,
                        producer_id,
                        producer_epoch: 0,
                    },
                ),
                None => self.park(Parked::Init(meta, request)),
            }
            return;
        };
        if let Err(error) = self.init_checks(&id, &request) {
            self.reply(meta, init_error(error));
            return;
        }
        if !self.entries.contains_key(&id) {
            if self.entries.len() >= self.config.transactional_ids_max {
                self.reply(meta, init_error(ErrorCode::COORDINATOR_NOT_AVAILABLE));
                return;
            }
            let Some(producer_id) = self.take_producer_id() else {
                self.park(Parked::Init(meta, request));
                return;
            };
            let partition = self.state_partition(&id);
            self.entries.insert(
                id.clone(),
                Entry {
                    meta: TxnMetadata::new(producer_id, request.timeout_ms, now_ms),
                    partition,
                    pending: None,
                    complete_retry: false,
                },
            );
        }
        self.init_existing(now_ms, meta, &id, request);
    }

    fn init_checks(&self, id: &str, request: &InitProducerId) -> Result<(), ErrorCode> {
        if (request.producer_id == NO_PRODUCER_ID) != (request.producer_epoch == NO_PRODUCER_EPOCH)
        {
            return Err(ErrorCode::INVALID_REQUEST);
        }
        if request.timeout_ms <= 0 || request.timeout_ms > self.config.max_timeout_ms {
            return Err(ErrorCode::INVALID_TRANSACTION_TIMEOUT);
        }
        match self.coordination_error(id) {
            ErrorCode::NONE => Ok(()),
            error => Err(error),
        }
    }

    /// Kafka's `prepareInitProducerIdTransit` for an id that exists.
    fn init_existing(&mut self, now_ms: i64, meta: RequestMeta, id: &str, request: InitProducerId) {
        let Some(entry) = self.entries.get(id) else {
            return;
        };
        let current = &entry.meta;
        let expected = (request.producer_id != NO_PRODUCER_ID)
            .then_some((request.producer_id, request.producer_epoch));
        if entry.pending.is_some() {
            return self.reply(meta, init_error(ErrorCode::CONCURRENT_TRANSACTIONS));
        }
        if let Some((producer_id, epoch)) = expected {
            // KIP-360: the client may name what it holds; anything else is a zombie.
            let valid = current.producer_epoch == NO_PRODUCER_EPOCH
                || producer_id == current.producer_id
                || (producer_id == current.previous_producer_id && is_epoch_exhausted(epoch));
            if !valid {
                return self.reply(meta, init_error(ErrorCode::PRODUCER_FENCED));
            }
        }
        let target = match current.state {
            TxnState::PrepareCommit
            | TxnState::PrepareAbort
            | TxnState::Dead
            | TxnState::PrepareEpochFence => {
                return self.reply(meta, init_error(ErrorCode::CONCURRENT_TRANSACTIONS));
            }
            TxnState::Ongoing => {
                // Abort the open transaction with a bumped epoch, which fences its producer; the
                // client retries (CONCURRENT_TRANSACTIONS) and then gets an epoch of its own.
                let target = fence_abort(current, now_ms);
                return self.begin_transition(id, Some(target), After::ReplyFenced(meta));
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let exhausted = is_epoch_exhausted(current.producer_epoch)
                    && expected.is_none_or(|(_, epoch)| epoch == current.producer_epoch);
                if exhausted {
                    let Some(new_id) = self.take_producer_id() else {
                        return self.park(Parked::Init(meta, request));
                    };
                    let Some(current) = self.entries.get(id).map(|entry| &entry.meta) else {
                        return;
                    };
                    rotate(
                        current,
                        new_id,
                        request.timeout_ms,
                        now_ms,
                        expected.is_some(),
                    )
                } else {
                    match bump(
                        current,
                        request.timeout_ms,
                        expected.map(|(_, e)| e),
                        now_ms,
                    ) {
                        Ok(target) => target,
                        Err(error) => return self.reply(meta, init_error(error)),
                    }
                }
            }
        };
        self.begin_transition(id, Some(target), After::ReplyInit(meta));
    }

    /// Asks the driver for producer ids (once) and keeps the request until they come.
    pub(crate) fn park(&mut self, parked: Parked) {
        if self.parked.len() >= WAITING_FOR_PRODUCER_IDS_MAX {
            let (meta, response) = match parked {
                Parked::Init(meta, _) => (meta, init_error(ErrorCode::COORDINATOR_NOT_AVAILABLE)),
                Parked::End(meta, _) => (
                    meta,
                    crate::end::end_error(ErrorCode::COORDINATOR_NOT_AVAILABLE),
                ),
            };
            return self.reply(meta, response);
        }
        self.parked.push_back(parked);
        if !self.ids_requested {
            self.ids_requested = true;
            self.outputs
                .push_back(crate::coordinator::Output::NeedProducerIds);
        }
    }

    /// The next producer id in hand, if any.
    pub(crate) fn take_producer_id(&mut self) -> Option<i64> {
        let (next, end) = self.ids;
        (next < end).then(|| {
            self.ids.0 = next + 1;
            next
        })
    }

    /// The driver's answer to [`crate::Output::NeedProducerIds`]: a block `[start, end)` claimed
    /// durably, or `None` if the claim failed (the waiting requests get COORDINATOR_NOT_AVAILABLE
    /// and clients retry). Waiting requests are then handled again, in order.
    pub fn producer_ids_granted(&mut self, now_ms: i64, block: Option<(i64, i64)>) {
        self.ids_requested = false;
        let waiting = std::mem::take(&mut self.parked);
        match block {
            Some((start, end)) if start >= 0 && end > start => {
                debug_assert!(start >= self.ids.1, "a block below the ids handed out");
                self.ids = (start, end);
                for parked in waiting {
                    match parked {
                        Parked::Init(meta, request) => {
                            self.handle_init_producer_id(now_ms, meta, request)
                        }
                        Parked::End(meta, request) => self.handle_end_txn(now_ms, meta, request),
                    }
                }
            }
            _ => {
                for parked in waiting {
                    match parked {
                        Parked::Init(meta, _) => {
                            self.reply(meta, init_error(ErrorCode::COORDINATOR_NOT_AVAILABLE))
                        }
                        Parked::End(meta, _) => self.reply(
                            meta,
                            crate::end::end_error(ErrorCode::COORDINATOR_NOT_AVAILABLE),
                        ),
                    }
                }
            }
        }
    }
}

/// Kafka's `prepareFenceProducerEpoch` followed by the abort: PrepareAbort with the epoch bumped
/// once (not past `i16::MAX`, which is kept for exactly this).
pub(crate) fn fence_abort(current: &TxnMetadata, now_ms: i64) -> TxnMetadata {
    let mut target = current.clone();
    target.state = TxnState::PrepareAbort;
    target.previous_producer_id = current.producer_id;
    target.producer_epoch = current.producer_epoch.saturating_add(1);
    target.last_producer_epoch = NO_PRODUCER_EPOCH;
    target.next_producer_id = NO_PRODUCER_ID;
    target.last_update_ms = now_ms;
    target
}

/// Kafka's `prepareIncrementProducerEpoch`: Empty with the epoch bumped, or (a retry of a bump
/// whose answer was lost) with the current epoch; PRODUCER_FENCED for any other epoch.
fn bump(
    current: &TxnMetadata,
    timeout_ms: i32,
    expected_epoch: Option<i16>,
    now_ms: i64,
) -> Result<TxnMetadata, ErrorCode> {
    let bumped = current.producer_epoch.saturating_add(1);
    let (epoch, last_epoch) = match expected_epoch {
        None => (bumped, NO_PRODUCER_EPOCH),
        Some(expected)
            if current.producer_epoch == NO_PRODUCER_EPOCH
                || expected == current.producer_epoch =>
        {
            (bumped, current.producer_epoch)
        }
        Some(expected) if expected == current.last_producer_epoch => {
            (current.producer_epoch, current.last_producer_epoch)
        }
        Some(_) => return Err(ErrorCode::PRODUCER_FENCED),
    };
    let mut target = current.clone();
    target.state = TxnState::Empty;
    target.previous_producer_id = current.producer_id;
    target.producer_epoch = epoch;
    target.last_producer_epoch = last_epoch;
    target.timeout_ms = timeout_ms;
    target.partitions.clear();
    target.start_ms = -1;
    target.last_update_ms = now_ms;
    Ok(target)
}

/// Kafka's `prepareProducerIdRotation`: a new producer id at epoch 0.
fn rotate(
    current: &TxnMetadata,
    new_id: i64,
    timeout_ms: i32,
    now_ms: i64,
    record_last_epoch: bool,
) -> TxnMetadata {
    let mut target = current.clone();
    target.state = TxnState::Empty;
    target.previous_producer_id = current.producer_id;
    target.producer_id = new_id;
    target.producer_epoch = 0;
    target.last_producer_epoch = if record_last_epoch {
        current.producer_epoch
    } else {
        NO_PRODUCER_EPOCH
    };
    target.timeout_ms = timeout_ms;
    target.partitions.clear();
    target.start_ms = -1;
    target.last_update_ms = now_ms;
    target
}
