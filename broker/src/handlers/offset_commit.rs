//! OffsetCommit, v0–v8: handed to the group coordinator task, which answers once the commit is
//! durable in the offsets log.
//!
//! Must never: acknowledge a commit itself (only the coordinator's reply does, after the flush).

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse, RequestHeader};

use super::error_code;
use crate::context::Ctx;
use crate::group::Response;
use crate::group_driver::{GroupReply, GroupRequest};

pub(crate) async fn handle(
    ctx: &Ctx,
    header: &RequestHeader,
    request: OffsetCommitRequest,
) -> OffsetCommitResponse {
    // Kept for the fallback, which must name every partition (OffsetCommit has no top-level
    // error code).
    let asked: Vec<OffsetCommitResponseTopic> = request
        .topics
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
                                .with_error_code(error_code::COORDINATOR_NOT_AVAILABLE)
                        })
                        .collect(),
                )
        })
        .collect();
    match ctx
        .groups
        .call(header, GroupRequest::OffsetCommit(request))
        .await
    {
        Some(GroupReply::Group(Response::OffsetCommit(response))) => response,
        _ => OffsetCommitResponse::default().with_topics(asked),
    }
}
