//! AlterPartitionReassignments (v0; Kafka's `kafka-reassign-partitions`,
//! `Admin.alterPartitionReassignments`): per partition, a replica list starts a reassignment to
//! it (or replaces the one in progress), a null list cancels the one in progress (Kafka's revert:
//! back to the replicas it started from). This broker writes the `R/reassign/<t>/<p>` records
//! (`Cluster::alter_reassignments`, the rules of `skiff_cluster::reassign::plan_alter`) and the
//! controller carries them out; any broker answers, so there is no NOT_CONTROLLER.
//!
//! As Kafka's controller (`ReplicationControlManager.alterPartitionReassignments`): Alter on the
//! cluster is needed (CLUSTER_AUTHORIZATION_FAILED, top level and on every partition named,
//! otherwise); per partition UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (an empty
//! list, a broker named twice, one not registered), NO_REASSIGNMENT_IN_PROGRESS (a cancellation
//! with nothing to cancel), or REQUEST_TIMED_OUT when the store did not take the record within
//! `timeout_ms`. On the embedded store (a cluster of this one broker) the same code runs: a
//! reassignment to this broker completes at once, any other broker id is not registered.
//!
//! Must never: answer NONE before the store took the record, or move a replica itself.

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, RequestHeader,
};
use kafka_protocol::protocol::StrBytes;
use skiff_cluster::reassign::{AlterRefusal, AlterRequest};

use super::error_code;
use crate::cluster::requests::{request_wait, Answer};
use crate::context::Ctx;
use crate::security::acl::Operation;
use crate::security::session::Session;

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    let access = ctx.access(session, header.request_api_key);
    if !access.allows_cluster(Operation::Alter) {
        return refused(
            &request,
            error_code::CLUSTER_AUTHORIZATION_FAILED,
            "not authorized to alter the cluster",
        );
    }
    let asked: Vec<AlterRequest> = request
        .topics
        .iter()
        .flat_map(|topic| {
            let name = topic.name.0.to_string();
            topic.partitions.iter().map(move |partition| {
                let replicas = partition
                    .replicas
                    .as_ref()
                    .map(|ids| ids.iter().map(|id| id.0).collect());
                ((name.clone(), partition.partition_index), replicas)
            })
        })
        .collect();
    let mut answers = ctx
        .cluster
        .alter_reassignments(asked, request_wait(request.timeout_ms))
        .await
        .into_iter();
    // One response per topic entry of the request, its partitions in the order asked.
    let responses = request
        .topics
        .iter()
        .map(|topic| {
            let partitions = answers
                .by_ref()
                .take(topic.partitions.len())
                .map(|((_, partition), answer)| partition_response(partition, answer))
                .collect();
            ReassignableTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    AlterPartitionReassignmentsResponse::default().with_responses(responses)
}

/// The answer of one partition, with Kafka's messages.
fn partition_response(
    partition: i32,
    answer: Answer<AlterRefusal>,
) -> ReassignablePartitionResponse {
    let (code, message) = match answer {
        Answer::Written => (error_code::NONE, None),
        Answer::Refused(AlterRefusal::UnknownPartition) => (
            error_code::UNKNOWN_TOPIC_OR_PARTITION,
            Some("This server does not host this topic-partition.".to_owned()),
        ),
        Answer::Refused(AlterRefusal::InvalidReplicas(why)) => {
            (error_code::INVALID_REPLICA_ASSIGNMENT, Some(why))
        }
        Answer::Refused(AlterRefusal::NoReassignmentInProgress) => (
            error_code::NO_REASSIGNMENT_IN_PROGRESS,
            Some("No ongoing reassignment for this partition.".to_owned()),
        ),
        Answer::TimedOut => (
            error_code::REQUEST_TIMED_OUT,
            Some("The reassignment was not written within the request's timeout.".to_owned()),
        ),
    };
    ReassignablePartitionResponse::default()
        .with_partition_index(partition)
        .with_error_code(code)
        .with_error_message(message.map(StrBytes::from_string))
}

/// A whole request refused with `code` (Kafka's
/// `AlterPartitionReassignmentsRequest.getErrorResponse`): at the top level and on every
/// partition named.
fn refused(
    request: &AlterPartitionReassignmentsRequest,
    code: i16,
    message: &str,
) -> AlterPartitionReassignmentsResponse {
    let message = || Some(StrBytes::from_string(message.to_owned()));
    let responses = request
        .topics
        .iter()
        .map(|topic| {
            ReassignableTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(
                    topic
                        .partitions
                        .iter()
                        .map(|partition| {
                            ReassignablePartitionResponse::default()
                                .with_partition_index(partition.partition_index)
                                .with_error_code(code)
                                .with_error_message(message())
                        })
                        .collect(),
                )
        })
        .collect();
    AlterPartitionReassignmentsResponse::default()
        .with_error_code(code)
        .with_error_message(message())
        .with_responses(responses)
}
