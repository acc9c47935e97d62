//! OffsetFetch, v0–v9: Describe on the group (else GROUP_AUTHORIZATION_FAILED: per partition in
//! v0–1, top-level in v2–7, per group from v8) and on each topic: a named topic the principal may
//! not describe gets TOPIC_AUTHORIZATION_FAILED for its partitions, and an all-topics request
//! silently leaves such topics out (Kafka's rules). The rest is handed to the group coordinator
//! task, which answers from the committed offsets it loaded from the offsets log (with
//! `require_stable`, v7+: UNSTABLE_OFFSET_COMMIT for a partition whose transactional commit
//! awaits its marker; from v9 a group may name a consumer group member's id and epoch, which the
//! coordinator checks, KIP-848).
//!
//! Must never: answer from anything but the coordinator's reply (beyond the fallback when the
//! coordinator task has stopped, which happens only during shutdown).

use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopics;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    GroupId, OffsetFetchRequest, OffsetFetchResponse, RequestHeader, TopicName,
};

use super::error_code;
use crate::context::Ctx;
use crate::group::driver::{GroupReply, GroupRequest};
use crate::group::Response;
use crate::security::acl::{Access, Operation, ResourceType};
use crate::security::session::Session;

/// First version with a top-level error code.
const TOP_LEVEL_ERROR_VERSION_MIN: i16 = 2;
/// First version that asks for several groups at once.
const GROUPS_VERSION_MIN: i16 = 8;

/// What the ACLs took out of one group's request, to put back into its answer.
struct Refused {
    /// Named topics the principal may not describe, with their partitions.
    topics: Vec<(TopicName, Vec<i32>)>,
    /// The request asked for every topic: leave out those the principal may not describe.
    filter_all: bool,
}

/// What the ACLs took out of a whole request: groups refused outright (v8) and, per group kept,
/// its refused topics.
struct Authorized {
    refused_groups: Vec<GroupId>,
    refused_topics: Vec<(GroupId, Refused)>,
}

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    mut request: OffsetFetchRequest,
) -> OffsetFetchResponse {
    let version = header.request_api_version;
    let access = ctx.access(session, header.request_api_key);
    let authorized = match authorize(&access, version, &mut request) {
        Ok(authorized) => authorized,
        Err(refused) => return refused,
    };
    let mut response = ask_coordinator(ctx, header, request).await;
    if version >= GROUPS_VERSION_MIN {
        restore_refused_groups(&access, &mut response, authorized);
    } else if let Some((_, refused)) = authorized.refused_topics.first() {
        restore_refused_topics(&access, &mut response, refused);
    }
    response
}

/// Takes out of `request` what the principal may not describe, remembering it; before v8 a
/// refused group is the whole answer (`Err`).
fn authorize(
    access: &Access<'_>,
    version: i16,
    request: &mut OffsetFetchRequest,
) -> Result<Authorized, OffsetFetchResponse> {
    let may_describe_group =
        |group_id: &GroupId| access.allows(Operation::Describe, ResourceType::Group, group_id);
    let topic_parts =
        |topic: &OffsetFetchRequestTopics| (topic.name.clone(), topic.partition_indexes.clone());
    if version < GROUPS_VERSION_MIN {
        if !may_describe_group(&request.group_id) {
            return Err(fallback(
                version,
                request,
                error_code::GROUP_AUTHORIZATION_FAILED,
            ));
        }
        let (kept, refused) = split_topics(access, request.topics.take(), |topic| {
            (topic.name.clone(), topic.partition_indexes.clone())
        });
        request.topics = kept;
        return Ok(Authorized {
            refused_groups: Vec::new(),
            refused_topics: vec![(request.group_id.clone(), refused)],
        });
    }
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut request.groups)
        .into_iter()
        .partition(|group| may_describe_group(&group.group_id));
    request.groups = allowed;
    let mut refused_topics = Vec::with_capacity(request.groups.len());
    for group in &mut request.groups {
        let (kept, refused) = split_topics(access, group.topics.take(), topic_parts);
        group.topics = kept;
        refused_topics.push((group.group_id.clone(), refused));
    }
    Ok(Authorized {
        refused_groups: refused.into_iter().map(|group| group.group_id).collect(),
        refused_topics,
    })
}

/// The coordinator's answer to what is left of the request, or COORDINATOR_NOT_AVAILABLE if its
/// task has stopped (shutdown). A v8 request with every group refused is not sent.
async fn ask_coordinator(
    ctx: &Ctx,
    header: &RequestHeader,
    request: OffsetFetchRequest,
) -> OffsetFetchResponse {
    let version = header.request_api_version;
    if version >= GROUPS_VERSION_MIN && request.groups.is_empty() {
        return OffsetFetchResponse::default();
    }
    let fallback = fallback(version, &request, error_code::COORDINATOR_NOT_AVAILABLE);
    match super::common::leadership::group_call(ctx, header, GroupRequest::OffsetFetch(request))
        .await
    {
        Some(GroupReply::Group(Response::OffsetFetch(response))) => response,
        _ => fallback,
    }
}

/// v8: puts the refused groups and topics back into the answer with their errors, and leaves
/// out of all-topics answers the topics the principal may not describe.
fn restore_refused_groups(
    access: &Access<'_>,
    response: &mut OffsetFetchResponse,
    authorized: Authorized,
) {
    for group in &mut response.groups {
        let Some((_, refused)) = authorized
            .refused_topics
            .iter()
            .find(|(group_id, _)| *group_id == group.group_id)
        else {
            continue;
        };
        if refused.filter_all {
            group
                .topics
                .retain(|topic| may_describe_topic(access, &topic.name));
        }
        group
            .topics
            .extend(refused.topics.iter().map(|(name, partitions)| {
                OffsetFetchResponseTopics::default()
                    .with_name(name.clone())
                    .with_partitions(
                        partitions
                            .iter()
                            .map(|partition| {
                                OffsetFetchResponsePartitions::default()
                                    .with_partition_index(*partition)
                                    .with_committed_offset(-1)
                                    .with_error_code(error_code::TOPIC_AUTHORIZATION_FAILED)
                            })
                            .collect(),
                    )
            }));
    }
    response
        .groups
        .extend(authorized.refused_groups.into_iter().map(|group_id| {
            OffsetFetchResponseGroup::default()
                .with_group_id(group_id)
                .with_error_code(error_code::GROUP_AUTHORIZATION_FAILED)
        }));
}

/// v0–v7: the same for the request's one group.
fn restore_refused_topics(
    access: &Access<'_>,
    response: &mut OffsetFetchResponse,
    refused: &Refused,
) {
    if refused.filter_all {
        response
            .topics
            .retain(|topic| may_describe_topic(access, &topic.name));
    }
    response
        .topics
        .extend(refused.topics.iter().map(|(name, partitions)| {
            OffsetFetchResponseTopic::default()
                .with_name(name.clone())
                .with_partitions(
                    partitions
                        .iter()
                        .map(|partition| {
                            OffsetFetchResponsePartition::default()
                                .with_partition_index(*partition)
                                .with_committed_offset(-1)
                                .with_error_code(error_code::TOPIC_AUTHORIZATION_FAILED)
                        })
                        .collect(),
                )
        }));
}

/// Whether an all-topics answer may show `name` (a check that does not count as a refusal).
fn may_describe_topic(access: &Access<'_>, name: &TopicName) -> bool {
    access.may(Operation::Describe, ResourceType::Topic, name)
}

/// Splits a group's requested topics into those the principal may describe (kept in the
/// request) and the refused ones; `None` (every topic) is kept and marked for filtering.
fn split_topics<T>(
    access: &Access<'_>,
    topics: Option<Vec<T>>,
    parts: impl Fn(&T) -> (TopicName, Vec<i32>),
) -> (Option<Vec<T>>, Refused) {
    let Some(topics) = topics else {
        return (
            None,
            Refused {
                topics: Vec::new(),
                filter_all: true,
            },
        );
    };
    let mut kept = Vec::with_capacity(topics.len());
    let mut refused = Vec::new();
    for topic in topics {
        let (name, partitions) = parts(&topic);
        if access.allows(Operation::Describe, ResourceType::Topic, &name) {
            kept.push(topic);
        } else {
            refused.push((name, partitions));
        }
    }
    (
        Some(kept),
        Refused {
            topics: refused,
            filter_all: false,
        },
    )
}

/// `code` where the version can carry it.
fn fallback(version: i16, request: &OffsetFetchRequest, code: i16) -> OffsetFetchResponse {
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
