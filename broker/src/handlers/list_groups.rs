//! ListGroups: handed to the group coordinator task, which lists every group it holds.
//!
//! Must never: answer from anything but the coordinator's reply (beyond the fallback when the
//! coordinator task has stopped, which happens only during shutdown).

use kafka_protocol::messages::{ListGroupsRequest, ListGroupsResponse, RequestHeader};

use super::error_code;
use crate::context::Ctx;
use crate::group::driver::{GroupReply, GroupRequest};
use crate::group::Response;
use crate::security::acl::model::CLUSTER_NAME;
use crate::security::acl::{Operation, ResourceType};
use crate::security::session::Session;

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: ListGroupsRequest,
) -> ListGroupsResponse {
    match super::common::leadership::group_call(ctx, header, GroupRequest::ListGroups(request))
        .await
    {
        Some(GroupReply::Group(Response::ListGroups(mut response))) => {
            // Describe on the cluster lists every group; without it, only the groups the
            // principal may describe (Kafka's rule), silently.
            let access = ctx.access(session, header.request_api_key);
            if !access.may(Operation::Describe, ResourceType::Cluster, CLUSTER_NAME) {
                response.groups.retain(|group| {
                    access.may(
                        Operation::Describe,
                        ResourceType::Group,
                        group.group_id.as_str(),
                    )
                });
            }
            response
        }
        _ => ListGroupsResponse::default().with_error_code(error_code::COORDINATOR_NOT_AVAILABLE),
    }
}
