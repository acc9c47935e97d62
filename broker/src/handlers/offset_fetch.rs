//! OffsetFetch, v0–v8: handed to the group coordinator task, which answers from the committed
//! offsets it loaded from the offsets log.
//!
//! Must never: answer from anything but the coordinator's reply (beyond the fallback when the
//! coordinator task has stopped, which happens only during shutdown).

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, RequestHeader};

use super::error_code;
use crate::context::Ctx;
use crate::group::Response;
use crate::group_driver::{GroupReply, GroupRequest};

/// First version with a top-level error code.
const TOP_LEVEL_ERROR_VERSION_MIN: i16 = 2;
/// First version that asks for several groups at once.
const GROUPS_VERSION_MIN: i16 = 8;

pub(crate) async fn handle(
    ctx: &Ctx,
    header: &RequestHeader,
    request: OffsetFetchRequest,
) -> OffsetFetchResponse {
    let version = header.request_api_version;
    let fallback = fallback(version, &request);
    match ctx
        .groups
        .call(header, GroupRequest::OffsetFetch(request))
        .await
    {
        Some(GroupReply::Group(Response::OffsetFetch(response))) => response,
        _ => fallback,
    }
}

/// COORDINATOR_NOT_AVAILABLE where the version can carry it.
fn fallback(version: i16, request: &OffsetFetchRequest) -> OffsetFetchResponse {
    let code = error_code::COORDINATOR_NOT_AVAILABLE;
    if version >= GROUPS_VERSION_MIN {
        return OffsetFetchResponse::default().with_groups(
            request
                .groups
                .iter()
                .map(|group| {
                    OffsetFetchResponseGroup::default()
                        .with_group_id(group.group_id.clone())
                        .with_error_code(code)
                })
                .collect(),
        );
    }
    if version >= TOP_LEVEL_ERROR_VERSION_MIN {
        return OffsetFetchResponse::default().with_error_code(code);
    }
    let topics = request.topics.as_deref().unwrap_or_default();
    OffsetFetchResponse::default().with_topics(
        topics
            .iter()
            .map(|topic| {
                OffsetFetchResponseTopic::default()
                    .with_name(topic.name.clone())
                    .with_partitions(
                        topic
                            .partition_indexes
                            .iter()
                            .map(|partition| {
                                OffsetFetchResponsePartition::default()
                                    .with_partition_index(*partition)
                                    .with_committed_offset(-1)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}
