//! InitProducerId: handed to the coordinator task, whose allocator hands out a fresh producer id
//! from a durably reserved block (idempotent producers; transactions are not served).
//!
//! Authorization as Kafka 3.x: with a transactional id, Write on it; without, IdempotentWrite on
//! the cluster or Write on some topic.
//!
//! Must never: invent a producer id itself.

use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProducerId, RequestHeader,
};

use super::error_code;
use crate::context::Ctx;
use crate::group::driver::{GroupReply, GroupRequest};
use crate::security::acl::{Operation, ResourceType};
use crate::security::session::Session;

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let access = ctx.access(session, header.request_api_key);
    let refused = match request
        .transactional_id
        .as_deref()
        .filter(|id| !id.is_empty())
    {
        Some(transactional_id) => (!access.allows(
            Operation::Write,
            ResourceType::TransactionalId,
            transactional_id,
        ))
        .then_some(error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        None => {
            (!access.allows_idempotent_write()).then_some(error_code::CLUSTER_AUTHORIZATION_FAILED)
        }
    };
    if let Some(code) = refused {
        return InitProducerIdResponse::default()
            .with_error_code(code)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
    }
    match ctx
        .groups
        .call(header, GroupRequest::InitProducerId(request))
        .await
    {
        Some(GroupReply::InitProducerId(response)) => response,
        _ => InitProducerIdResponse::default()
            .with_error_code(error_code::COORDINATOR_NOT_AVAILABLE)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    }
}
