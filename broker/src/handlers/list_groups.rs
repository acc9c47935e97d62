//! ListGroups: handed to the group coordinator task, which lists every group it holds.
//!
//! Must never: answer from anything but the coordinator's reply (beyond the fallback when the
//! coordinator task has stopped, which happens only during shutdown).

use kafka_protocol::messages::{ListGroupsRequest, ListGroupsResponse, RequestHeader};

use super::error_code;
use crate::context::Ctx;
use crate::group::Response;
use crate::group_driver::{GroupReply, GroupRequest};

pub(crate) async fn handle(
    ctx: &Ctx,
    header: &RequestHeader,
    request: ListGroupsRequest,
) -> ListGroupsResponse {
    match ctx
        .groups
        .call(header, GroupRequest::ListGroups(request))
        .await
    {
        Some(GroupReply::Group(Response::ListGroups(response))) => response,
        _ => ListGroupsResponse::default().with_error_code(error_code::COORDINATOR_NOT_AVAILABLE),
    }
}
