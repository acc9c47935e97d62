//! SyncGroup: handed to the group coordinator task, which answers when the leader's assignment
//! has arrived.
//!
//! Must never: answer from anything but the coordinator's reply (beyond the fallback when the
//! coordinator task has stopped, which happens only during shutdown).

use kafka_protocol::messages::{RequestHeader, SyncGroupRequest, SyncGroupResponse};

use super::error_code;
use crate::context::Ctx;
use crate::group::Response;
use crate::group_driver::{GroupReply, GroupRequest};

pub(crate) async fn handle(
    ctx: &Ctx,
    header: &RequestHeader,
    request: SyncGroupRequest,
) -> SyncGroupResponse {
    match ctx
        .groups
        .call(header, GroupRequest::SyncGroup(request))
        .await
    {
        Some(GroupReply::Group(Response::SyncGroup(response))) => response,
        _ => SyncGroupResponse::default().with_error_code(error_code::COORDINATOR_NOT_AVAILABLE),
    }
}
