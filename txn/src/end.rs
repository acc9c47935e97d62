//! EndTxn (Kafka's `endTransaction` from a client): PrepareCommit / PrepareAbort, answered once
//! durable, markers after. Transaction version 1 keeps the epoch; version 2 (EndTxn v5+) bumps it
//! at every end, moves to a new producer id when the epoch is exhausted, lets a client abort with
//! no partition added, and recognises a retry of an end already done by the bumped epoch.
//!
//! Must never: let a fenced epoch end a transaction, or answer an end twice in different ways
//! (a retry of a completed end is answered NONE with what the first answer said).

use skiff_protocol::error_code::ErrorCode;

use crate::coordinator::{After, Coordinator, EndTxn, Parked, RequestMeta, Response};
use crate::state::{is_epoch_exhausted, TxnMetadata, TxnState, NO_PRODUCER_EPOCH, NO_PRODUCER_ID};

/// EndTxn's answer for an error.
pub(crate) fn end_error(error: ErrorCode) -> Response {
    Response::EndTxn {
        error,
        producer_id: NO_PRODUCER_ID,
        producer_epoch: NO_PRODUCER_EPOCH,
    }
}

/// The producer id and epoch a client continues with after `target` (a PrepareX, or the
/// Complete record of a retried end): the next producer id at epoch 0 when the epoch overflowed.
pub(crate) fn continuing_with(target: &TxnMetadata) -> (i64, i16) {
    if target.next_producer_id != NO_PRODUCER_ID {
        (target.next_producer_id, 0)
    } else {
        (target.producer_id, target.producer_epoch)
    }
}

/// What an EndTxn leads to.
enum Decision {
    /// Answer this error now.
    Error(ErrorCode),
    /// A retry of an end already done: answer NONE with the current id and epoch.
    AlreadyDone,
    /// Write PrepareCommit/PrepareAbort (`true`: commit); `no_partitions`: a version-2 abort of
    /// nothing.
    Prepare(bool, bool),
}

impl Coordinator {
    /// EndTxn, every version (`client_tv` 2 from v5 on).
    pub fn handle_end_txn(&mut self, now_ms: i64, meta: RequestMeta, request: EndTxn) {
        let decision = self.decide_end(&request);
        let id = request.transactional_id.as_str();
        let (commit, no_partitions) = match decision {
            Decision::Error(error) => return self.reply(meta, end_error(error)),
            Decision::AlreadyDone => {
                let (producer_id, producer_epoch) = self
                    .entries
                    .get(id)
                    .map_or((NO_PRODUCER_ID, NO_PRODUCER_EPOCH), |entry| {
                        (entry.meta.producer_id, entry.meta.producer_epoch)
                    });
                return self.reply(
                    meta,
                    Response::EndTxn {
                        error: ErrorCode::NONE,
                        producer_id,
                        producer_epoch,
                    },
                );
            }
            Decision::Prepare(commit, no_partitions) => (commit, no_partitions),
        };
        let Some(current) = self.entries.get(id).map(|entry| entry.meta.clone()) else {
            return;
        };
        let bumps = TxnMetadata::bumps_epoch_at_end(request.client_tv);
        let next_producer_id = if bumps && is_epoch_exhausted(current.producer_epoch) {
            match self.take_producer_id() {
                Some(next) => next,
                None => return self.park(Parked::End(meta, request)),
            }
        } else {
            NO_PRODUCER_ID
        };
        let mut target = current.clone();
        target.state = if commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        target.previous_producer_id = current.producer_id;
        if bumps {
            // Not past i16::MAX: an abort at that epoch (a fence already took it) goes through.
            target.producer_epoch = current.producer_epoch.saturating_add(1);
            target.last_producer_epoch = current.producer_epoch;
        }
        if no_partitions {
            target.start_ms = now_ms;
        }
        target.next_producer_id = next_producer_id;
        target.last_update_ms = now_ms;
        target.client_tv = request.client_tv;
        self.begin_transition(id, Some(target), After::ReplyEnd(meta));
    }

    fn decide_end(&self, request: &EndTxn) -> Decision {
        if request.transactional_id.is_empty() {
            return Decision::Error(ErrorCode::INVALID_REQUEST);
        }
        match self.coordination_error(&request.transactional_id) {
            ErrorCode::NONE => {}
            error => return Decision::Error(error),
        }
        let Some(entry) = self.entries.get(&request.transactional_id) else {
            return Decision::Error(ErrorCode::INVALID_PRODUCER_ID_MAPPING);
        };
        if entry.pending.is_some() {
            return Decision::Error(ErrorCode::CONCURRENT_TRANSACTIONS);
        }
        if TxnMetadata::bumps_epoch_at_end(request.client_tv) {
            decide_end_v2(&entry.meta, request)
        } else {
            decide_end_v1(&entry.meta, request)
        }
    }
}

/// Transaction version 1: the epoch never moves at an end, so a retry carries the same epoch.
fn decide_end_v1(current: &TxnMetadata, request: &EndTxn) -> Decision {
    use TxnState::*;
    if current.producer_id != request.producer_id {
        return Decision::Error(ErrorCode::INVALID_PRODUCER_ID_MAPPING);
    }
    if request.producer_epoch != current.producer_epoch {
        return Decision::Error(ErrorCode::PRODUCER_FENCED);
    }
    let commit = request.commit;
    match current.state {
        Ongoing => Decision::Prepare(commit, false),
        CompleteCommit if commit => Decision::AlreadyDone,
        CompleteAbort if !commit => Decision::AlreadyDone,
        PrepareCommit if commit => Decision::Error(ErrorCode::CONCURRENT_TRANSACTIONS),
        PrepareAbort if !commit => Decision::Error(ErrorCode::CONCURRENT_TRANSACTIONS),
        Dead | PrepareEpochFence => Decision::Error(ErrorCode::CONCURRENT_TRANSACTIONS),
        _ => Decision::Error(ErrorCode::INVALID_TXN_STATE),
    }
}

/// Transaction version 2: every end bumps the epoch, so the same epoch means the next end and a
/// retry carries the epoch before the bump (or, across an overflow, the previous producer id).
fn decide_end_v2(current: &TxnMetadata, request: &EndTxn) -> Decision {
    use TxnState::*;
    let retry_on_overflow = current.previous_producer_id == request.producer_id
        && request.producer_epoch == i16::MAX - 1
        && current.producer_epoch == 0;
    let retry_on_bump = i32::from(current.producer_epoch) == i32::from(request.producer_epoch) + 1;
    if current.producer_id != request.producer_id && !retry_on_overflow {
        return Decision::Error(ErrorCode::INVALID_PRODUCER_ID_MAPPING);
    }
    let same_epoch = request.producer_epoch == current.producer_epoch;
    let valid_epoch = match current.state {
        Ongoing | Empty | Dead | PrepareEpochFence => same_epoch,
        PrepareCommit | PrepareAbort => retry_on_bump,
        CompleteCommit | CompleteAbort => retry_on_bump || retry_on_overflow || same_epoch,
    };
    if !valid_epoch {
        return Decision::Error(ErrorCode::PRODUCER_FENCED);
    }
    let retry = retry_on_bump || retry_on_overflow;
    let commit = request.commit;
    match current.state {
        Ongoing => Decision::Prepare(commit, false),
        CompleteCommit if commit && retry => Decision::AlreadyDone,
        CompleteCommit if !commit && !retry => Decision::Prepare(false, true),
        CompleteAbort if !commit && retry => Decision::AlreadyDone,
        CompleteAbort if !commit => Decision::Prepare(false, true),
        PrepareCommit if commit => Decision::Error(ErrorCode::CONCURRENT_TRANSACTIONS),
        PrepareAbort if !commit => Decision::Error(ErrorCode::CONCURRENT_TRANSACTIONS),
        Empty if !commit => Decision::Prepare(false, true),
        Dead | PrepareEpochFence => Decision::Error(ErrorCode::CONCURRENT_TRANSACTIONS),
        _ => Decision::Error(ErrorCode::INVALID_TXN_STATE),
    }
}
