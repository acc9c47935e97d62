//! LeaveGroup: checked for Read on the group, then handed to the group coordinator task; the
//! remaining members rebalance.
//!
//! Must never: answer from anything but the coordinator's reply (beyond the fallback when the
//! coordinator task has stopped, which happens only during shutdown).

use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse, RequestHeader};

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
    request: LeaveGroupRequest,
) -> LeaveGroupResponse {
    let access = ctx.access(session, header.request_api_key);
    if !access.allows(
        Operation::Read,
        ResourceType::Group,
        request.group_id.as_str(),
    ) {
        return LeaveGroupResponse::default()
            .with_error_code(error_code::GROUP_AUTHORIZATION_FAILED);
    }
    match super::common::leadership::group_call(ctx, header, GroupRequest::LeaveGroup(request))
        .await
    {
        Some(GroupReply::Group(Response::LeaveGroup(response))) => response,
        _ => LeaveGroupResponse::default().with_error_code(error_code::COORDINATOR_NOT_AVAILABLE),
    }
}
