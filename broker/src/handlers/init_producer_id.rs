//! InitProducerId: handed to the transaction coordinator's task, which hands out every producer
//! id from durably claimed blocks: a fresh id for an idempotent producer; for a transactional id,
//! its producer id with the epoch bumped (fencing older producers, aborting an open transaction
//! first), KIP-360's recovery when the client names what it holds.
//!
//! Authorization as Kafka: with a transactional id, Write on it; without, IdempotentWrite on the
//! cluster or Write on some topic.
//!
//! Must never: invent a producer id itself, or decide an epoch (skiff-txn's).

use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProducerId, RequestHeader,
};
use skiff_txn::{InitProducerId, Response};

use super::common::txn::{call, for_version};
use super::error_code;
use crate::context::Ctx;
use crate::security::acl::{Operation, ResourceType};
use crate::security::session::Session;
use crate::txn::driver::TxnRequest;

/// First version whose clients know PRODUCER_FENCED.
const PRODUCER_FENCED_VERSION_MIN: i16 = 4;

fn error_response(code: i16) -> InitProducerIdResponse {
    InitProducerIdResponse::default()
        .with_error_code(code)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
}

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let access = ctx.access(session, header.request_api_key);
    let transactional_id = request
        .transactional_id
        .as_ref()
        .map(|id| id.to_string())
        .filter(|id| !id.is_empty());
    let refused = match &transactional_id {
        Some(id) => (!access.allows(Operation::Write, ResourceType::TransactionalId, id))
            .then_some(error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        None => {
            (!access.allows_idempotent_write()).then_some(error_code::CLUSTER_AUTHORIZATION_FAILED)
        }
    };
    if let Some(code) = refused {
        return error_response(code);
    }
    let (producer_id, producer_epoch) = if header.request_api_version >= 3 {
        (request.producer_id.0, request.producer_epoch)
    } else {
        (-1, -1)
    };
    let asked = TxnRequest::InitProducerId(InitProducerId {
        transactional_id,
        timeout_ms: request.transaction_timeout_ms,
        producer_id,
        producer_epoch,
    });
    let version = header.request_api_version;
    match call(ctx, version, asked).await {
        Some(Response::InitProducerId {
            error,
            producer_id,
            producer_epoch,
        }) => InitProducerIdResponse::default()
            .with_error_code(for_version(error, version, PRODUCER_FENCED_VERSION_MIN))
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(producer_epoch),
        _ => error_response(error_code::COORDINATOR_NOT_AVAILABLE),
    }
}
