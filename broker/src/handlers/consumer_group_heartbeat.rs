//! ConsumerGroupHeartbeat (KIP-848, v0–v1): Read on the group (else GROUP_AUTHORIZATION_FAILED),
//! Describe on every subscribed topic name (else TOPIC_AUTHORIZATION_FAILED), as Kafka 4.1.1's
//! `KafkaApis.handleConsumerGroupHeartbeat` checks them; then the request, turned into the
//! coordinator's [`HeartbeatRequest`] with the client's id and address and the principal's
//! Describe access to topics (a refresh of the group's patterns this heartbeat brings keeps only
//! the topics it allows, as Kafka 4.1.1 filters them), is handed to the group
//! coordinator task, which answers once the records it wrote are durable (or at once, with
//! NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS for a group it does not hold).
//!
//! Must never: answer from anything but the coordinator's reply (beyond the refusals above and the
//! fallback when the coordinator task has stopped, which happens only during shutdown).

use std::sync::Arc;

use kafka_protocol::messages::RequestHeader;
use skiff_group::consumer::regex::{TopicDescribeCheck, TopicVisibility};
use skiff_group::consumer::{Assignment, HeartbeatRequest, TopicId};
use skiff_protocol::requests::ConsumerGroupHeartbeatRequest;
use skiff_protocol::responses::consumer_group::ConsumerGroupHeartbeatResponse;

use super::error_code;
use crate::context::Ctx;
use crate::group::driver::{GroupReply, GroupRequest};
use crate::group::Response;
use crate::security::acl::{Operation, ResourceType, TopicDescribe};
use crate::security::session::Session;

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    let access = ctx.access(session, header.request_api_key);
    if !access.allows(
        Operation::Read,
        ResourceType::Group,
        request.base.group_id.as_str(),
    ) {
        return refused(error_code::GROUP_AUTHORIZATION_FAILED);
    }
    let names = request.base.subscribed_topic_names.iter().flatten();
    // Every name is checked (Kafka filters the set, then compares sizes): each refusal counts.
    let refused_topics = names
        .filter(|name| !access.allows(Operation::Describe, ResourceType::Topic, name.as_str()))
        .count();
    if refused_topics > 0 {
        return refused(error_code::TOPIC_AUTHORIZATION_FAILED);
    }
    let mut request = core_request(header, session, request);
    if let Some(describe) = access.topic_describe() {
        request.topic_visibility = TopicVisibility::checked(Arc::new(DescribeCheck(describe)));
    }
    match super::common::leadership::group_call(
        ctx,
        header,
        GroupRequest::ConsumerGroupHeartbeat(request),
    )
    .await
    {
        Some(GroupReply::Group(Response::ConsumerGroupHeartbeat(response))) => response,
        _ => refused(error_code::COORDINATOR_NOT_AVAILABLE),
    }
}

/// The coordinator's view of [`TopicDescribe`].
struct DescribeCheck(TopicDescribe);

impl TopicDescribeCheck for DescribeCheck {
    fn may_describe(&self, topic: &str) -> bool {
        self.0.may_describe(topic)
    }
}

/// A refusal as Kafka's `getErrorResponse` writes it: the code, no message.
fn refused(code: i16) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse {
        error_code: code,
        ..ConsumerGroupHeartbeatResponse::default()
    }
}

/// The coordinator's form of the request: owned strings, the owned partitions by topic id (a
/// topic named twice has its partitions merged), the client id from the header and the client
/// host as Kafka prints an `InetAddress` ("/127.0.0.1"; empty when the peer is unknown).
fn core_request(
    header: &RequestHeader,
    session: &Session,
    request: ConsumerGroupHeartbeatRequest,
) -> HeartbeatRequest {
    let base = request.base;
    let owned = base.topic_partitions.map(|topics| {
        let mut owned = Assignment::new();
        for topic in topics {
            owned
                .entry(TopicId(*topic.topic_id.as_bytes()))
                .or_default()
                .extend(topic.partitions);
        }
        owned
    });
    HeartbeatRequest {
        group_id: base.group_id.0.to_string(),
        member_id: base.member_id.to_string(),
        member_epoch: base.member_epoch,
        instance_id: base.instance_id.map(|id| id.to_string()),
        rack_id: base.rack_id.map(|id| id.to_string()),
        rebalance_timeout_ms: base.rebalance_timeout_ms,
        subscribed_topic_names: base
            .subscribed_topic_names
            .map(|names| names.into_iter().map(|name| name.0.to_string()).collect()),
        subscribed_topic_regex: request
            .subscribed_topic_regex
            .map(|regex| regex.to_string()),
        server_assignor: base.server_assignor.map(|name| name.to_string()),
        topic_partitions: owned,
        client_id: header
            .client_id
            .as_ref()
            .map(|id| id.as_str().to_owned())
            .unwrap_or_default(),
        client_host: session
            .peer_ip
            .map(|ip| format!("/{ip}"))
            .unwrap_or_default(),
        topic_visibility: TopicVisibility::all(),
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
    use kafka_protocol::messages::{GroupId, TopicName};
    use kafka_protocol::protocol::StrBytes;

    use super::*;

    #[test]
    fn the_request_reaches_the_coordinator_with_its_partitions_merged_and_the_peer_address() {
        let id = uuid::Uuid::from_bytes([7; 16]);
        let mut request = ConsumerGroupHeartbeatRequest::default();
        request.base.group_id = GroupId(StrBytes::from_static_str("g"));
        request.base.member_id = StrBytes::from_static_str("m");
        request.base.member_epoch = 3;
        request.base.rebalance_timeout_ms = -1;
        request.base.subscribed_topic_names = Some(vec![TopicName(StrBytes::from_static_str("t"))]);
        request.base.topic_partitions = Some(vec![
            TopicPartitions::default()
                .with_topic_id(id)
                .with_partitions(vec![2, 0]),
            TopicPartitions::default()
                .with_topic_id(id)
                .with_partitions(vec![1]),
        ]);
        request.subscribed_topic_regex = Some(StrBytes::from_static_str("t.*"));
        let header =
            RequestHeader::default().with_client_id(Some(StrBytes::from_static_str("client")));
        let mut session = Session::plaintext_anonymous();
        session.peer_ip = Some(std::net::IpAddr::from([127, 0, 0, 1]));
        let core = core_request(&header, &session, request);
        assert_eq!(
            core.topic_partitions,
            Some([(TopicId([7; 16]), [0, 1, 2].into())].into())
        );
        assert_eq!(
            (core.client_id.as_str(), core.client_host.as_str()),
            ("client", "/127.0.0.1")
        );
        assert_eq!(core.subscribed_topic_regex.as_deref(), Some("t.*"));
        assert_eq!(core.subscribed_topic_names, Some(vec!["t".to_owned()]));
        assert_eq!((core.member_epoch, core.rebalance_timeout_ms), (3, -1));
    }
}
