//! InitProducerId: handed to the coordinator task, whose allocator hands out a fresh producer id
//! from a durably reserved block (idempotent producers; transactions are not served).
//!
//! Must never: invent a producer id itself.

use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProducerId, RequestHeader,
};

use super::error_code;
use crate::context::Ctx;
use crate::group_driver::{GroupReply, GroupRequest};

pub(crate) async fn handle(
    ctx: &Ctx,
    header: &RequestHeader,
    request: InitProducerIdRequest,
) -> InitProducerIdResponse {
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
