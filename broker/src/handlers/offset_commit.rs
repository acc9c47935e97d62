//! OffsetCommit, v0–v9: Read on the group (else GROUP_AUTHORIZATION_FAILED for every partition),
//! then Read on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions); the authorized
//! topics are handed to the group coordinator task, which checks the member (a classic member's
//! generation, or from v9 a consumer group member's id and epoch, KIP-848) and answers once the
//! commit is durable in the offsets log.
//!
//! Must never: acknowledge a commit itself (only the coordinator's reply does, after the flush).

use kafka_protocol::messages::offset_commit_request::OffsetCommitRequestTopic;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse, RequestHeader};

use super::error_code;
use crate::context::Ctx;
use crate::group::driver::{GroupReply, GroupRequest};
use crate::group::Response;
use crate::security::acl::{Operation, ResourceType};
use crate::security::session::Session;

/// Every partition of `topics`, answered with `code`.
fn answer(topics: &[OffsetCommitRequestTopic], code: i16) -> Vec<OffsetCommitResponseTopic> {
    topics
        .iter()
        .map(|topic| {
            OffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(
                    topic
                        .partitions
                        .iter()
                        .map(|partition| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(partition.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect()
}

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    mut request: OffsetCommitRequest,
) -> OffsetCommitResponse {
    let access = ctx.access(session, header.request_api_key);
    if !access.allows(
        Operation::Read,
        ResourceType::Group,
        request.group_id.as_str(),
    ) {
        return OffsetCommitResponse::default().with_topics(answer(
            &request.topics,
            error_code::GROUP_AUTHORIZATION_FAILED,
        ));
    }
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut request.topics)
        .into_iter()
        .partition(|topic| {
            access.allows(Operation::Read, ResourceType::Topic, topic.name.as_str())
        });
    let refused = answer(&refused, error_code::TOPIC_AUTHORIZATION_FAILED);
    if allowed.is_empty() && !refused.is_empty() {
        return OffsetCommitResponse::default().with_topics(refused);
    }
    // Kept for the fallback, which must name every partition (OffsetCommit has no top-level
    // error code).
    let asked = answer(&allowed, error_code::COORDINATOR_NOT_AVAILABLE);
    request.topics = allowed;
    let mut response = match super::common::leadership::group_call(
        ctx,
        header,
        GroupRequest::OffsetCommit(request),
    )
    .await
    {
        Some(GroupReply::Group(Response::OffsetCommit(response))) => response,
        _ => OffsetCommitResponse::default().with_topics(asked),
    };
    response.topics.extend(refused);
    response
}
