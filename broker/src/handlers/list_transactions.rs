//! ListTransactions (KIP-664): the transactional ids coordinated here that pass the state,
//! producer-id, (v1) duration and (v2, KIP-1152) transactional-id pattern filters, handed to the
//! transaction coordinator's task. A pattern that does not compile is answered
//! INVALID_REGULAR_EXPRESSION before the task is asked, as Kafka answers it.
//!
//! Authorization as Kafka: only the ids the client may Describe are listed (the others are left
//! out silently).
//!
//! Must never: list an id the client may not see.

use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ListTransactionsResponse, ProducerId, RequestHeader, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use skiff_protocol::requests::{ListTransactionsRequest, ID_PATTERN_VERSION_MIN};
use skiff_txn::{IdPattern, ListFilters, Response};

use super::common::txn::call;
use super::error_code;
use crate::context::Ctx;
use crate::security::acl::{Operation, ResourceType};
use crate::security::session::Session;
use crate::txn::driver::TxnRequest;

/// First version with the duration filter.
const DURATION_FILTER_VERSION_MIN: i16 = 1;

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: ListTransactionsRequest,
) -> ListTransactionsResponse {
    let version = header.request_api_version;
    let access = ctx.access(session, header.request_api_key);
    let pattern = request
        .transactional_id_pattern
        .as_deref()
        .filter(|_| version >= ID_PATTERN_VERSION_MIN);
    let id_pattern = match IdPattern::compile(pattern) {
        Ok(id_pattern) => id_pattern,
        Err(error) => {
            tracing::debug!(%error, "ListTransactions refused");
            return ListTransactionsResponse::default()
                .with_error_code(error_code::INVALID_REGULAR_EXPRESSION);
        }
    };
    let request = request.base;
    let filters = ListFilters {
        states: request
            .state_filters
            .iter()
            .map(|s| s.to_string())
            .collect(),
        producer_ids: request.producer_id_filters.iter().map(|id| id.0).collect(),
        duration_ms: if version >= DURATION_FILTER_VERSION_MIN {
            request.duration_filter
        } else {
            -1
        },
        id_pattern,
    };
    let Some(Response::ListTransactions(listing)) =
        call(ctx, version, TxnRequest::List(filters)).await
    else {
        return ListTransactionsResponse::default()
            .with_error_code(error_code::COORDINATOR_NOT_AVAILABLE);
    };
    let states = listing
        .transactions
        .into_iter()
        .filter(|(id, _, _)| access.allows(Operation::Describe, ResourceType::TransactionalId, id))
        .map(|(id, producer_id, state)| {
            TransactionState::default()
                .with_transactional_id(TransactionalId(StrBytes::from_string(id)))
                .with_producer_id(ProducerId(producer_id))
                .with_transaction_state(StrBytes::from_static_str(state))
        })
        .collect();
    ListTransactionsResponse::default()
        .with_error_code(listing.error.code())
        .with_unknown_state_filters(
            listing
                .unknown_state_filters
                .into_iter()
                .map(StrBytes::from_string)
                .collect(),
        )
        .with_transaction_states(states)
}
