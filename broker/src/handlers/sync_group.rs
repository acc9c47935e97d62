//! SyncGroup: checked for Read on the group, then handed to the group coordinator task, which
//! answers when the leader's assignment has arrived.
//!
//! Must never: answer from anything but the coordinator's reply (beyond the fallback when the
//! coordinator task has stopped, which happens only during shutdown).

use kafka_protocol::messages::{RequestHeader, SyncGroupRequest, SyncGroupResponse};

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
    request: SyncGroupRequest,
) -> SyncGroupResponse {
    let access = ctx.access(session, header.request_api_key);
    if !access.allows(
        Operation::Read,
        ResourceType::Group,
        request.group_id.as_str(),
    ) {
        return SyncGroupResponse::default()
            .with_error_code(error_code::GROUP_AUTHORIZATION_FAILED);
    }
    match super::common::leadership::group_call(ctx, header, GroupRequest::SyncGroup(request)).await
    {
        Some(GroupReply::Group(Response::SyncGroup(response))) => response,
        _ => SyncGroupResponse::default().with_error_code(error_code::COORDINATOR_NOT_AVAILABLE),
    }
}
