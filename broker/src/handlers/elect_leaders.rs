//! ElectLeaders (v0–v2): preferred (0) or unclean (1) leader elections on the partitions named,
//! or on every partition when `topic_partitions` is null. Planned and written by this broker
//! (`Cluster::elect_leaders`, the rules of `skiff_cluster::election`), answered once the store
//! took each election or refused it, per partition: NONE, ELECTION_NOT_NEEDED,
//! PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION, or
//! REQUEST_TIMED_OUT after `timeout_ms`.
//!
//! As Kafka's controller (`ReplicationControlManager.electLeaders`): Alter on the cluster is
//! needed (CLUSTER_AUTHORIZATION_FAILED, top level and on every partition named, otherwise); an
//! unknown election type is INVALID_REQUEST the same way; with null `topic_partitions` every
//! topic is listed but partitions that needed no election are left out.
//!
//! Must never: elect anything without the cluster's fenced plan, or answer NONE before the store
//! took the election.

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{
    ElectLeadersRequest, ElectLeadersResponse, RequestHeader, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use skiff_cluster::election::{ElectionType, NoElection};

use super::error_code;
use crate::cluster::elections::ElectionAnswer;
use crate::cluster::requests::{request_wait, Answer};
use crate::context::Ctx;
use crate::security::acl::Operation;
use crate::security::session::Session;

/// First response version with a top-level error code.
const TOP_LEVEL_ERROR_VERSION_MIN: i16 = 1;

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: ElectLeadersRequest,
) -> ElectLeadersResponse {
    let access = ctx.access(session, header.request_api_key);
    if !access.allows_cluster(Operation::Alter) {
        return refused(
            &request,
            header.request_api_version,
            error_code::CLUSTER_AUTHORIZATION_FAILED,
            "not authorized to alter the cluster".to_owned(),
        );
    }
    let Some(election_type) = ElectionType::from_code(request.election_type) else {
        return refused(
            &request,
            header.request_api_version,
            error_code::INVALID_REQUEST,
            format!("Unknown election type {}", request.election_type),
        );
    };
    let wait = request_wait(request.timeout_ms);
    match &request.topic_partitions {
        Some(topics) => {
            let asked: Vec<(String, i32)> = topics
                .iter()
                .flat_map(|topic| {
                    let name = topic.topic.0.to_string();
                    topic.partitions.iter().map(move |p| (name.clone(), *p))
                })
                .collect();
            let answers = ctx
                .cluster
                .elect_leaders(Some(asked), election_type, wait)
                .await;
            let mut answers = answers.into_iter();
            // One result per topic entry of the request, its partitions in the order asked.
            let results = topics
                .iter()
                .map(|topic| {
                    let partitions = answers
                        .by_ref()
                        .take(topic.partitions.len())
                        .map(|((name, partition), answer)| {
                            partition_result(&name, partition, answer)
                        })
                        .collect();
                    ReplicaElectionResult::default()
                        .with_topic(topic.topic.clone())
                        .with_partition_result(partitions)
                })
                .collect();
            ElectLeadersResponse::default().with_replica_election_results(results)
        }
        None => {
            let answers = ctx.cluster.elect_leaders(None, election_type, wait).await;
            let mut results: Vec<ReplicaElectionResult> = Vec::new();
            for ((name, partition), answer) in answers {
                if results
                    .last()
                    .is_none_or(|last| last.topic.0.as_str() != name)
                {
                    results.push(
                        ReplicaElectionResult::default()
                            .with_topic(TopicName(StrBytes::from_string(name.clone()))),
                    );
                }
                if answer == Answer::Refused(NoElection::NotNeeded) {
                    continue;
                }
                if let Some(last) = results.last_mut() {
                    last.partition_result
                        .push(partition_result(&name, partition, answer));
                }
            }
            ElectLeadersResponse::default().with_replica_election_results(results)
        }
    }
}

/// The answer of one partition, with Kafka's messages.
fn partition_result(topic: &str, partition: i32, answer: ElectionAnswer) -> PartitionResult {
    let (code, message) = match answer {
        Answer::Written => (error_code::NONE, None),
        Answer::Refused(NoElection::UnknownPartition) => (
            error_code::UNKNOWN_TOPIC_OR_PARTITION,
            Some(format!("No such topic partition as {topic}-{partition}")),
        ),
        Answer::Refused(NoElection::NotNeeded) => (
            error_code::ELECTION_NOT_NEEDED,
            Some("Leader election not needed for topic partition.".to_owned()),
        ),
        Answer::Refused(NoElection::PreferredNotAvailable) => (
            error_code::PREFERRED_LEADER_NOT_AVAILABLE,
            Some("The preferred leader was not available.".to_owned()),
        ),
        Answer::Refused(NoElection::EligibleNotAvailable) => (
            error_code::ELIGIBLE_LEADERS_NOT_AVAILABLE,
            Some("Eligible topic partition leaders are not available.".to_owned()),
        ),
        Answer::TimedOut => (
            error_code::REQUEST_TIMED_OUT,
            Some("The election did not complete within the request's timeout.".to_owned()),
        ),
    };
    PartitionResult::default()
        .with_partition_id(partition)
        .with_error_code(code)
        .with_error_message(message.map(StrBytes::from_string))
}

/// A whole request refused with `code` (Kafka's `ElectLeadersRequest.getErrorResponse`): on every
/// partition named, and at the top level from v1 (v0 has no top-level error code).
fn refused(
    request: &ElectLeadersRequest,
    version: i16,
    code: i16,
    message: String,
) -> ElectLeadersResponse {
    let results = request
        .topic_partitions
        .iter()
        .flatten()
        .map(|topic| {
            ReplicaElectionResult::default()
                .with_topic(topic.topic.clone())
                .with_partition_result(
                    topic
                        .partitions
                        .iter()
                        .map(|partition| {
                            PartitionResult::default()
                                .with_partition_id(*partition)
                                .with_error_code(code)
                                .with_error_message(Some(StrBytes::from_string(message.clone())))
                        })
                        .collect(),
                )
        })
        .collect();
    let top_level = if version >= TOP_LEVEL_ERROR_VERSION_MIN {
        code
    } else {
        error_code::NONE
    };
    ElectLeadersResponse::default()
        .with_error_code(top_level)
        .with_replica_election_results(results)
}
