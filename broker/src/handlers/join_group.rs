//! JoinGroup: checked for Read on the group, then handed to the group coordinator task, which
//! answers once the rebalance completes (or the member's join times out); the connection waits,
//! holding its one request in flight.
//!
//! Must never: answer from anything but the coordinator's reply (beyond the fallback when the
//! coordinator task has stopped, which happens only during shutdown).

use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse, RequestHeader};
use kafka_protocol::protocol::StrBytes;

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
    request: JoinGroupRequest,
) -> JoinGroupResponse {
    let access = ctx.access(session, header.request_api_key);
    if !access.allows(
        Operation::Read,
        ResourceType::Group,
        request.group_id.as_str(),
    ) {
        return refused(header.request_api_version, request.member_id);
    }
    match super::common::leadership::group_call(ctx, header, GroupRequest::JoinGroup(request)).await
    {
        Some(GroupReply::Group(Response::JoinGroup(response))) => response,
        _ => JoinGroupResponse::default().with_error_code(error_code::COORDINATOR_NOT_AVAILABLE),
    }
}

/// First JoinGroup version whose protocol name is nullable.
const NULLABLE_PROTOCOL_NAME_VERSION_MIN: i16 = 7;

/// GROUP_AUTHORIZATION_FAILED, filled so that it encodes at `version`.
fn refused(version: i16, member_id: StrBytes) -> JoinGroupResponse {
    let mut response = JoinGroupResponse::default()
        .with_error_code(error_code::GROUP_AUTHORIZATION_FAILED)
        .with_generation_id(-1)
        .with_member_id(member_id);
    response.protocol_name = if version >= NULLABLE_PROTOCOL_NAME_VERSION_MIN {
        None
    } else {
        Some(StrBytes::default())
    };
    response
}
