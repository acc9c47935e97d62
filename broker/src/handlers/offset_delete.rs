//! OffsetDelete: the group needs Delete (GROUP_AUTHORIZATION_FAILED for the whole request
//! otherwise), each topic Read (TOPIC_AUTHORIZATION_FAILED for its partitions), and each partition
//! must exist (UNKNOWN_TOPIC_OR_PARTITION), as Kafka checks them; the group coordinator task
//! decides the rest (GROUP_SUBSCRIBED_TO_TOPIC, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND) and deletes
//! the offsets durably before answering.
//!
//! Must never: answer from anything but the coordinator's reply (beyond the fallback when the
//! coordinator task has stopped, which happens only during shutdown).

use std::collections::BTreeMap;

use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse, RequestHeader};

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
    request: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    let access = ctx.access(session, header.request_api_key);
    if !access.allows(
        Operation::Delete,
        ResourceType::Group,
        request.group_id.as_str(),
    ) {
        return OffsetDeleteResponse::default()
            .with_error_code(error_code::GROUP_AUTHORIZATION_FAILED);
    }
    let mut refused = BTreeMap::new();
    for topic in &request.topics {
        let name = topic.name.0.as_str();
        let readable = access.allows(Operation::Read, ResourceType::Topic, name);
        let found = ctx.topics.get(name);
        for partition in &topic.partitions {
            let index = partition.partition_index;
            let code = if !readable {
                error_code::TOPIC_AUTHORIZATION_FAILED
            } else if !found.as_ref().is_some_and(|t| t.has_partition(index)) {
                error_code::UNKNOWN_TOPIC_OR_PARTITION
            } else {
                continue;
            };
            refused.insert((name.to_owned(), index), code);
        }
    }
    match super::common::leadership::group_call(
        ctx,
        header,
        GroupRequest::OffsetDelete(request, refused),
    )
    .await
    {
        Some(GroupReply::Group(Response::OffsetDelete(response))) => response,
        _ => OffsetDeleteResponse::default().with_error_code(error_code::COORDINATOR_NOT_AVAILABLE),
    }
}
