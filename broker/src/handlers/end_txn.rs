//! EndTxn: commit or abort the open transaction, handed to the transaction coordinator's task,
//! which answers once PrepareCommit/PrepareAbort is durable and writes the markers after. Versions
//! 0-4 are transaction version 1 (the epoch stays); v5 is transaction version 2 (KIP-890): the
//! epoch bumps at every end and the response carries the producer id and epoch to continue with
//! (encoded by the protocol crate past kafka-protocol 0.15.1).
//!
//! Authorization as Kafka: Write on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
//!
//! Must never: answer NONE before the coordinator did.

use kafka_protocol::messages::{EndTxnRequest, ProducerId, RequestHeader};
use skiff_protocol::responses::end_txn::EndTxnResponse;
use skiff_txn::{EndTxn, Response};

use super::common::txn::{call, for_version};
use super::error_code;
use crate::context::Ctx;
use crate::security::acl::{Operation, ResourceType};
use crate::security::session::Session;
use crate::txn::driver::TxnRequest;

/// First version whose clients know PRODUCER_FENCED.
const PRODUCER_FENCED_VERSION_MIN: i16 = 2;
/// First version of transaction version 2 (the epoch bumps at every end).
const TV2_VERSION_MIN: i16 = 5;

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: EndTxnRequest,
) -> EndTxnResponse {
    let version = header.request_api_version;
    let access = ctx.access(session, header.request_api_key);
    let transactional_id = request.transactional_id.to_string();
    if !access.allows(
        Operation::Write,
        ResourceType::TransactionalId,
        &transactional_id,
    ) {
        return EndTxnResponse {
            error_code: error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            ..EndTxnResponse::default()
        };
    }
    let asked = TxnRequest::EndTxn(EndTxn {
        transactional_id,
        producer_id: request.producer_id.0,
        producer_epoch: request.producer_epoch,
        commit: request.committed,
        client_tv: if version >= TV2_VERSION_MIN { 2 } else { 1 },
    });
    match call(ctx, version, asked).await {
        Some(Response::EndTxn {
            error,
            producer_id,
            producer_epoch,
        }) => EndTxnResponse {
            error_code: for_version(error, version, PRODUCER_FENCED_VERSION_MIN),
            producer_id: ProducerId(producer_id),
            producer_epoch,
            ..EndTxnResponse::default()
        },
        _ => EndTxnResponse {
            error_code: error_code::COORDINATOR_NOT_AVAILABLE,
            ..EndTxnResponse::default()
        },
    }
}
