//! AddPartitionsToTxn (the client's v0-3, a broker's batched v4+ with verify-only and v5 add) and
//! AddOffsetsToTxn (the group's `__consumer_offsets` partition joins the transaction).
//!
//! Must never: answer NONE for a partition before the record naming it is durable, or let a
//! transaction grow beyond `partitions_per_transaction_max`.

use skiff_protocol::error_code::ErrorCode;

use crate::coordinator::{AddPartitions, After, Coordinator, RequestMeta, Response};
use crate::state::{TopicPartition, TxnState};

/// Kafka's name of the group offsets topic, whose partition AddOffsetsToTxn adds.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// The answer of an add (every partition gets `error`), or of AddOffsetsToTxn if `offsets`.
pub(crate) fn add_reply(
    partitions: &[TopicPartition],
    error: ErrorCode,
    offsets: bool,
) -> Response {
    if offsets {
        Response::AddOffsets { error }
    } else {
        Response::AddPartitions {
            results: partitions.iter().map(|tp| (tp.clone(), error)).collect(),
        }
    }
}

impl Coordinator {
    /// Adds partitions to the transaction (client v0-3; a broker's v5 add with `client_tv` 2).
    pub fn handle_add_partitions(
        &mut self,
        now_ms: i64,
        meta: RequestMeta,
        request: AddPartitions,
    ) {
        self.add(now_ms, meta, request, false);
    }

    /// AddOffsetsToTxn: adds `group_id`'s partition of `__consumer_offsets` (of
    /// `offsets_partitions`) to the transaction.
    pub fn handle_add_offsets(
        &mut self,
        now_ms: i64,
        meta: RequestMeta,
        mut request: AddPartitions,
        group_id: &str,
        offsets_partitions: i32,
    ) {
        if offsets_partitions <= 0 {
            return self.reply(
                meta,
                add_reply(&[], ErrorCode::COORDINATOR_NOT_AVAILABLE, true),
            );
        }
        let partition = skiff_group::coordinator_partition(group_id, offsets_partitions);
        request.partitions = vec![TopicPartition::new(OFFSETS_TOPIC, partition)];
        self.add(now_ms, meta, request, true);
    }

    /// The checks every add and verification starts with (Kafka's order).
    fn add_checks(&self, request: &AddPartitions) -> Result<(), ErrorCode> {
        if request.transactional_id.is_empty() {
            return Err(ErrorCode::INVALID_REQUEST);
        }
        match self.coordination_error(&request.transactional_id) {
            ErrorCode::NONE => {}
            error => return Err(error),
        }
        let Some(entry) = self.entries.get(&request.transactional_id) else {
            return Err(ErrorCode::INVALID_PRODUCER_ID_MAPPING);
        };
        let current = &entry.meta;
        if current.producer_id != request.producer_id {
            Err(ErrorCode::INVALID_PRODUCER_ID_MAPPING)
        } else if current.producer_epoch != request.producer_epoch {
            Err(ErrorCode::PRODUCER_FENCED)
        } else if entry.pending.is_some()
            || current.state.is_prepare()
            || matches!(current.state, TxnState::Dead | TxnState::PrepareEpochFence)
        {
            Err(ErrorCode::CONCURRENT_TRANSACTIONS)
        } else {
            Ok(())
        }
    }

    fn add(&mut self, now_ms: i64, meta: RequestMeta, request: AddPartitions, offsets: bool) {
        if let Err(error) = self.add_checks(&request) {
            return self.reply(meta, add_reply(&request.partitions, error, offsets));
        }
        let id = request.transactional_id.as_str();
        let Some(current) = self.entries.get(id).map(|entry| &entry.meta) else {
            return;
        };
        let new: Vec<&TopicPartition> = request
            .partitions
            .iter()
            .filter(|tp| !current.partitions.contains(*tp))
            .collect();
        if current.state == TxnState::Ongoing && new.is_empty() {
            return self.reply(
                meta,
                add_reply(&request.partitions, ErrorCode::NONE, offsets),
            );
        }
        let mut target = current.clone();
        target.partitions.extend(new.into_iter().cloned());
        if target.partitions.len() > self.config.partitions_per_transaction_max {
            return self.reply(
                meta,
                add_reply(&request.partitions, ErrorCode::POLICY_VIOLATION, offsets),
            );
        }
        if current.state != TxnState::Ongoing {
            target.start_ms = now_ms;
        }
        target.state = TxnState::Ongoing;
        target.previous_producer_id = current.producer_id;
        target.last_update_ms = now_ms;
        target.client_tv = request.client_tv;
        let after = After::ReplyAdd(meta, request.partitions, offsets);
        self.begin_transition(&request.transactional_id, Some(target), after);
    }

    /// A broker's verify-only AddPartitionsToTxn (v4, for Produce <= v11 and TxnOffsetCommit <=
    /// v4 under KIP-890): answers per partition whether it is in the open transaction, changing
    /// nothing. A partition not in it gets INVALID_TXN_STATE (Kafka 4.x answers
    /// TRANSACTION_ABORTABLE, code 120, which the shared error table does not list yet).
    pub fn handle_verify_partitions(&mut self, meta: RequestMeta, request: AddPartitions) {
        if let Err(error) = self.add_checks(&request) {
            return self.reply(meta, add_reply(&request.partitions, error, false));
        }
        let current = self
            .entries
            .get(&request.transactional_id)
            .map(|entry| &entry.meta);
        let results = request
            .partitions
            .iter()
            .map(|tp| {
                let error = if current.is_some_and(|meta| meta.partitions.contains(tp)) {
                    ErrorCode::NONE
                } else {
                    ErrorCode::INVALID_TXN_STATE
                };
                (tp.clone(), error)
            })
            .collect();
        self.reply(meta, Response::AddPartitions { results });
    }
}
