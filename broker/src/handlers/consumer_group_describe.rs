//! ConsumerGroupDescribe (KIP-848, v0–v1), authorized as Kafka 4.1.1's
//! `KafkaApis.handleConsumerGroupDescribe` does: a group the principal may not Describe is answered
//! GROUP_AUTHORIZATION_FAILED (those entries first, then the coordinator's); the others are handed
//! to the group coordinator task. With ACLs, a described group whose members' assignments or
//! target assignments name a topic the principal may not Describe is replaced by a
//! TOPIC_AUTHORIZATION_FAILED entry without members, so no topic name leaks; a described group
//! gets its authorized operations when the request asks for them.
//!
//! Must never: answer from anything but the coordinator's reply (beyond the refusals above and the
//! fallback when the coordinator task has stopped, which happens only during shutdown), or show a
//! member of a group whose topics the principal may not see.

use std::collections::BTreeSet;

use kafka_protocol::messages::{ConsumerGroupDescribeRequest, RequestHeader};
use skiff_protocol::responses::consumer_group::{ConsumerGroupDescribeResponse, DescribedGroup};

use super::error_code;
use crate::context::Ctx;
use crate::group::driver::{GroupReply, GroupRequest};
use crate::group::Response;
use crate::security::acl::{Access, Operation, ResourceType};
use crate::security::session::Session;

/// Kafka 4.1.1's message for a group hidden because of its topics.
const HIDDEN_TOPICS_MESSAGE: &str =
    "The group has described topic(s) that the client is not authorized to describe.";

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    let access = ctx.access(session, header.request_api_key);
    let (allowed, refused): (Vec<String>, Vec<String>) = request
        .group_ids
        .into_iter()
        .map(|group_id| group_id.0.to_string())
        .partition(|group_id| access.allows(Operation::Describe, ResourceType::Group, group_id));
    let error = |group_id: String, code: i16| DescribedGroup {
        group_id,
        error_code: code,
        ..DescribedGroup::default()
    };
    let mut groups: Vec<DescribedGroup> = refused
        .into_iter()
        .map(|group_id| error(group_id, error_code::GROUP_AUTHORIZATION_FAILED))
        .collect();
    if !allowed.is_empty() {
        let asked = allowed.clone();
        let described = match super::common::leadership::group_call(
            ctx,
            header,
            GroupRequest::ConsumerGroupDescribe(allowed),
        )
        .await
        {
            Some(GroupReply::Group(Response::ConsumerGroupDescribe(response))) => response.groups,
            _ => asked
                .into_iter()
                .map(|group_id| error(group_id, error_code::COORDINATOR_NOT_AVAILABLE))
                .collect(),
        };
        groups.extend(described);
    }
    if request.include_authorized_operations {
        for group in groups.iter_mut().filter(|group| group.error_code == 0) {
            group.authorized_operations =
                access.authorized_operations(ResourceType::Group, &group.group_id);
        }
    }
    if access.enforced() {
        hide_unauthorized_topics(&access, &mut groups);
    }
    ConsumerGroupDescribeResponse {
        throttle_time_ms: 0,
        groups,
    }
}

/// Replaces each group naming a topic the principal may not Describe (in any member's assignment
/// or target assignment) by a TOPIC_AUTHORIZATION_FAILED entry, as Kafka does.
fn hide_unauthorized_topics(access: &Access<'_>, groups: &mut [DescribedGroup]) {
    let named: BTreeSet<&str> = groups
        .iter()
        .flat_map(|group| &group.members)
        .flat_map(|member| member.assignment.iter().chain(&member.target_assignment))
        .map(|topic| topic.topic_name.as_str())
        .collect();
    let hidden: BTreeSet<String> = named
        .into_iter()
        .filter(|name| !access.allows(Operation::Describe, ResourceType::Topic, name))
        .map(str::to_owned)
        .collect();
    if hidden.is_empty() {
        return;
    }
    for group in groups.iter_mut() {
        let names_hidden = group
            .members
            .iter()
            .flat_map(|member| member.assignment.iter().chain(&member.target_assignment))
            .any(|topic| hidden.contains(&topic.topic_name));
        if names_hidden {
            *group = DescribedGroup {
                group_id: std::mem::take(&mut group.group_id),
                error_code: error_code::TOPIC_AUTHORIZATION_FAILED,
                error_message: Some(HIDDEN_TOPICS_MESSAGE.to_owned()),
                ..DescribedGroup::default()
            };
        }
    }
}
