//! ListPartitionReassignments (v0): the reassignments in progress, from this broker's image of
//! the store (`skiff_cluster::reassign::listed`): each partition's replicas now, the replicas
//! being added (target − original) and removed (original − target). Needs Describe on the
//! cluster (CLUSTER_AUTHORIZATION_FAILED otherwise). With topics named, only their partitions
//! named are listed; names that do not exist, or partitions not being reassigned, are left out
//! without an error, as Kafka's controller does
//! (`ReplicationControlManager.listPartitionReassignments` skips a name it does not know).
//!
//! Must never: list a reassignment the store does not hold, or write anything.

use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, RequestHeader,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::error_code;
use crate::context::Ctx;
use crate::security::acl::Operation;
use crate::security::session::Session;

pub(crate) fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    let access = ctx.access(session, header.request_api_key);
    let response = ListPartitionReassignmentsResponse::default();
    if !access.allows_cluster(Operation::Describe) {
        return response.with_error_code(error_code::CLUSTER_AUTHORIZATION_FAILED);
    }
    let filter: Option<Vec<(String, Vec<i32>)>> = request.topics.map(|topics| {
        topics
            .into_iter()
            .map(|topic| (topic.name.0.to_string(), topic.partition_indexes))
            .collect()
    });
    let ids = |ids: Vec<i32>| ids.into_iter().map(BrokerId).collect::<Vec<_>>();
    let mut topics: Vec<OngoingTopicReassignment> = Vec::new();
    for listed in ctx.cluster.list_reassignments(filter.as_deref()) {
        if topics
            .last()
            .is_none_or(|last| last.name.0.as_str() != listed.topic)
        {
            topics.push(
                OngoingTopicReassignment::default()
                    .with_name(TopicName(StrBytes::from_string(listed.topic.clone()))),
            );
        }
        if let Some(topic) = topics.last_mut() {
            topic.partitions.push(
                OngoingPartitionReassignment::default()
                    .with_partition_index(listed.partition)
                    .with_replicas(ids(listed.replicas))
                    .with_adding_replicas(ids(listed.adding))
                    .with_removing_replicas(ids(listed.removing)),
            );
        }
    }
    response.with_topics(topics)
}
