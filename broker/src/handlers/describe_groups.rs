//! DescribeGroups: each group needs Describe (GROUP_AUTHORIZATION_FAILED for that group otherwise);
//! the others are handed to the group coordinator task, which describes each group it holds.
//!
//! Must never: answer from anything but the coordinator's reply (beyond the fallback when the
//! coordinator task has stopped, which happens only during shutdown).

use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::{
    DescribeGroupsRequest, DescribeGroupsResponse, GroupId, RequestHeader,
};

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
    mut request: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let access = ctx.access(session, header.request_api_key);
    let (allowed, refused): (Vec<GroupId>, Vec<GroupId>) = std::mem::take(&mut request.groups)
        .into_iter()
        .partition(|group_id| {
            access.allows(Operation::Describe, ResourceType::Group, group_id.as_str())
        });
    let answer = |groups: Vec<GroupId>, code: i16| {
        groups.into_iter().map(move |group_id| {
            DescribedGroup::default()
                .with_group_id(group_id)
                .with_error_code(code)
        })
    };
    let mut response = if allowed.is_empty() {
        DescribeGroupsResponse::default()
    } else {
        let asked = allowed.clone();
        request.groups = allowed;
        match super::common::leadership::group_call(
            ctx,
            header,
            GroupRequest::DescribeGroups(request),
        )
        .await
        {
            Some(GroupReply::Group(Response::DescribeGroups(response))) => response,
            _ => DescribeGroupsResponse::default()
                .with_groups(answer(asked, error_code::COORDINATOR_NOT_AVAILABLE).collect()),
        }
    };
    response
        .groups
        .extend(answer(refused, error_code::GROUP_AUTHORIZATION_FAILED));
    response
}
