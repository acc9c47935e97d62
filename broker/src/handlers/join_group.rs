//! JoinGroup: handed to the group coordinator task, which answers once the rebalance completes
//! (or the member's join times out); the connection waits, holding its one request in flight.
//!
//! Must never: answer from anything but the coordinator's reply (beyond the fallback when the
//! coordinator task has stopped, which happens only during shutdown).

use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse, RequestHeader};

use super::error_code;
use crate::context::Ctx;
use crate::group::Response;
use crate::group_driver::{GroupReply, GroupRequest};

pub(crate) async fn handle(
    ctx: &Ctx,
    header: &RequestHeader,
    request: JoinGroupRequest,
) -> JoinGroupResponse {
    match ctx
        .groups
        .call(header, GroupRequest::JoinGroup(request))
        .await
    {
        Some(GroupReply::Group(Response::JoinGroup(response))) => response,
        _ => JoinGroupResponse::default().with_error_code(error_code::COORDINATOR_NOT_AVAILABLE),
    }
}
