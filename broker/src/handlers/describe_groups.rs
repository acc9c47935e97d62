//! DescribeGroups: handed to the group coordinator task, which describes each group it holds.
//!
//! Must never: answer from anything but the coordinator's reply (beyond the fallback when the
//! coordinator task has stopped, which happens only during shutdown).

use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse, RequestHeader};

use super::error_code;
use crate::context::Ctx;
use crate::group::Response;
use crate::group_driver::{GroupReply, GroupRequest};

pub(crate) async fn handle(
    ctx: &Ctx,
    header: &RequestHeader,
    request: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let asked = request.groups.clone();
    match ctx
        .groups
        .call(header, GroupRequest::DescribeGroups(request))
        .await
    {
        Some(GroupReply::Group(Response::DescribeGroups(response))) => response,
        _ => DescribeGroupsResponse::default().with_groups(
            asked
                .into_iter()
                .map(|group_id| {
                    DescribedGroup::default()
                        .with_group_id(group_id)
                        .with_error_code(error_code::COORDINATOR_NOT_AVAILABLE)
                })
                .collect(),
        ),
    }
}
