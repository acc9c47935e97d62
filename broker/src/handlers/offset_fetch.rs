//! OffsetFetch, v0–v8: Describe on the group (else GROUP_AUTHORIZATION_FAILED: per partition in
//! v0–1, top-level in v2–7, per group in v8) and on each topic: a named topic the principal may
//! not describe gets TOPIC_AUTHORIZATION_FAILED for its partitions, and an all-topics request
//! silently leaves such topics out (Kafka's rules). The rest is handed to the group coordinator
//! task, which answers from the committed offsets it loaded from the offsets log.
//!
//! Must never: answer from anything but the coordinator's reply (beyond the fallback when the
//! coordinator task has stopped, which happens only during shutdown).

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
use crate::net::session::Session;
use crate::security::acl::{Access, Operation, ResourceType};

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

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    mut request: OffsetFetchRequest,
) -> OffsetFetchResponse {
    let version = header.request_api_version;
    let access = ctx.access(session, header.request_api_key);
    let may_describe_group =
        |group_id: &GroupId| access.allows(Operation::Describe, ResourceType::Group, group_id);
    let refused_groups: Vec<GroupId>;
    let mut refused_topics: Vec<(GroupId, Refused)> = Vec::new();
    if version >= GROUPS_VERSION_MIN {
        let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut request.groups)
            .into_iter()
            .partition(|group| may_describe_group(&group.group_id));
        refused_groups = refused.into_iter().map(|group| group.group_id).collect();
        request.groups = allowed;
        for group in &mut request.groups {
            let (kept, refused) = split_topics(&access, group.topics.take(), |topic| {
                (topic.name.clone(), topic.partition_indexes.clone())
            });
            group.topics = kept;
            refused_topics.push((group.group_id.clone(), refused));
        }
    } else {
        if !may_describe_group(&request.group_id) {
            return fallback(version, &request, error_code::GROUP_AUTHORIZATION_FAILED);
        }
        refused_groups = Vec::new();
        let (kept, refused) = split_topics(&access, request.topics.take(), |topic| {
            (topic.name.clone(), topic.partition_indexes.clone())
        });
        request.topics = kept;
        refused_topics.push((request.group_id.clone(), refused));
    }
    let fallback = fallback(version, &request, error_code::COORDINATOR_NOT_AVAILABLE);
    let skip_call = version >= GROUPS_VERSION_MIN && request.groups.is_empty();
    let mut response = if skip_call {
        OffsetFetchResponse::default()
    } else {
        match ctx
            .groups
            .call(header, GroupRequest::OffsetFetch(request))
            .await
        {
            Some(GroupReply::Group(Response::OffsetFetch(response))) => response,
            _ => fallback,
        }
    };
    let may_describe_topic =
        |name: &TopicName| access.may(Operation::Describe, ResourceType::Topic, name);
    if version >= GROUPS_VERSION_MIN {
        for group in &mut response.groups {
            let Some((_, refused)) = refused_topics
                .iter()
                .find(|(group_id, _)| *group_id == group.group_id)
            else {
                continue;
            };
            if refused.filter_all {
                group.topics.retain(|topic| may_describe_topic(&topic.name));
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
            .extend(refused_groups.into_iter().map(|group_id| {
                OffsetFetchResponseGroup::default()
                    .with_group_id(group_id)
                    .with_error_code(error_code::GROUP_AUTHORIZATION_FAILED)
            }));
    } else if let Some((_, refused)) = refused_topics.first() {
        if refused.filter_all {
            response
                .topics
                .retain(|topic| may_describe_topic(&topic.name));
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
    response
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
