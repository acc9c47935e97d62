//! DeleteGroups: each group needs Delete (GROUP_AUTHORIZATION_FAILED for that group otherwise);
//! the others are handed to the group coordinator task, which deletes the Empty ones with their
//! committed offsets (tombstones in the offsets log, durable before the answer).
//!
//! Must never: answer from anything but the coordinator's reply (beyond the fallback when the
//! coordinator task has stopped, which happens only during shutdown).

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse, GroupId, RequestHeader};

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
    mut request: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let access = ctx.access(session, header.request_api_key);
    let (allowed, refused): (Vec<GroupId>, Vec<GroupId>) =
        std::mem::take(&mut request.groups_names)
            .into_iter()
            .partition(|group_id| {
                access.allows(Operation::Delete, ResourceType::Group, group_id.as_str())
            });
    let answer = |groups: Vec<GroupId>, code: i16| {
        groups.into_iter().map(move |group_id| {
            DeletableGroupResult::default()
                .with_group_id(group_id)
                .with_error_code(code)
        })
    };
    let mut response = if allowed.is_empty() {
        DeleteGroupsResponse::default()
    } else {
        let asked = allowed.clone();
        request.groups_names = allowed;
        match super::common::leadership::group_call(
            ctx,
            header,
            GroupRequest::DeleteGroups(request),
        )
        .await
        {
            Some(GroupReply::Group(Response::DeleteGroups(response))) => response,
            _ => DeleteGroupsResponse::default()
                .with_results(answer(asked, error_code::COORDINATOR_NOT_AVAILABLE).collect()),
        }
    };
    response
        .results
        .extend(answer(refused, error_code::GROUP_AUTHORIZATION_FAILED));
    response
}
