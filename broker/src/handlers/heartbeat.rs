//! Heartbeat: checked for Read on the group, then handed to the group coordinator task (a rebalance
//! in progress comes back as REBALANCE_IN_PROGRESS, which makes the member rejoin).
//!
//! Must never: answer from anything but the coordinator's reply (beyond the fallback when the
//! coordinator task has stopped, which happens only during shutdown).

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse, RequestHeader};

use super::error_code;
use crate::context::Ctx;
use crate::group::driver::{GroupReply, GroupRequest};
use crate::group::Response;
use crate::security::acl::{Operation, ResourceType};
use crate::security::session::Session;

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: HeartbeatRequest,
) -> HeartbeatResponse {
    let access = ctx.access(session, header.request_api_key);
    if !access.allows(
        Operation::Read,
        ResourceType::Group,
        request.group_id.as_str(),
    ) {
        return HeartbeatResponse::default()
            .with_error_code(error_code::GROUP_AUTHORIZATION_FAILED);
    }
    match super::common::leadership::group_call(ctx, header, GroupRequest::Heartbeat(request)).await
    {
        Some(GroupReply::Group(Response::Heartbeat(response))) => response,
        _ => HeartbeatResponse::default().with_error_code(error_code::COORDINATOR_NOT_AVAILABLE),
    }
}
