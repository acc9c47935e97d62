//! CreatePartitions (`kafka-topics --alter --partitions`, AdminClient.createPartitions): grows a
//! topic to a larger partition count. The new partitions' replicas come from placement (as at
//! topic creation) or from the request's assignment, which may name running brokers only, with as
//! many replicas as the topic's existing partitions. The growth is written to the metadata store
//! (`Cluster::grow_topic`, re-planned if another writer changed the topic first) and answered once
//! this broker's image shows it; validate_only checks without changing.
//! Kafka's errors: INVALID_PARTITIONS for a count not above the current one or above the bound,
//! INVALID_REPLICA_ASSIGNMENT for an assignment that does not fit, INVALID_REQUEST for a topic
//! named twice. Needs Alter on the topic (TOPIC_AUTHORIZATION_FAILED).

use std::collections::BTreeSet;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse, RequestHeader};
use kafka_protocol::protocol::StrBytes;

use super::common::throttle::Turn;
use super::error_code;
use crate::context::Ctx;
use crate::partition::topics::{TopicError, PARTITIONS_PER_TOPIC_MAX};
use crate::security::acl::{Operation, ResourceType};
use crate::security::session::Session;

type Refusal = (i16, String);

/// The replicas a client assigned to the new partitions, checked against the running brokers and
/// the topic's replication factor.
fn checked_assignment(
    ctx: &Ctx,
    topic: &CreatePartitionsTopic,
    added: usize,
    replication_factor: usize,
) -> Result<Vec<Vec<i32>>, Refusal> {
    let invalid = |message: String| (error_code::INVALID_REPLICA_ASSIGNMENT, message);
    let assignments = topic.assignments.as_deref().unwrap_or_default();
    if assignments.len() != added {
        return Err(invalid(format!(
            "Attempted to add {added} additional partition(s), but only {} assignment(s) were specified.",
            assignments.len()
        )));
    }
    ctx.topic_creation()
        .checked_broker_lists(
            assignments
                .iter()
                .map(|a| a.broker_ids.iter().map(|id| id.0).collect()),
            Some(replication_factor),
        )
        .map_err(|error| invalid(error.to_string()))
}

async fn grow(
    ctx: &Ctx,
    topic: &CreatePartitionsTopic,
    validate_only: bool,
    timeout_ms: i32,
) -> Result<(), Refusal> {
    let name = topic.name.0.as_str();
    let refused = |error: TopicError| (error.code(), error.to_string());
    let current = ctx
        .topics
        .get(name)
        .ok_or_else(|| refused(TopicError::Unknown))?;
    if current.is_internal() {
        return Err(refused(TopicError::Internal(name.to_owned())));
    }
    let existing = current.record.replicas.len();
    let invalid = |message: String| (error_code::INVALID_PARTITIONS, message);
    let requested = usize::try_from(topic.count).unwrap_or(0);
    if requested < existing {
        return Err(invalid(format!(
            "Topic currently has {existing} partitions, which is higher than the requested {}.",
            topic.count
        )));
    }
    if requested == existing {
        return Err(invalid(format!("Topic already has {existing} partitions.")));
    }
    if topic.count > PARTITIONS_PER_TOPIC_MAX {
        return Err(invalid(format!(
            "Requested {} partitions, above the {PARTITIONS_PER_TOPIC_MAX} one topic may have.",
            topic.count
        )));
    }
    let added = requested - existing;
    let replication_factor = current.record.replicas.first().map_or(1, Vec::len);
    let chosen = topic.assignments.is_some();
    let new_replicas = if chosen {
        checked_assignment(ctx, topic, added, replication_factor)?
    } else {
        let factor = i16::try_from(replication_factor).unwrap_or(i16::MAX);
        let added = i32::try_from(added).unwrap_or(i32::MAX);
        ctx.topic_creation()
            .assign_replicas(name, existing, added, factor)
            .map_err(|error| (error_code::INVALID_REPLICA_ASSIGNMENT, error.to_string()))?
    };
    ctx.topic_creation()
        .check_room_here(&new_replicas)
        .await
        .map_err(refused)?;
    if validate_only {
        return Ok(());
    }
    let mut replicas = current.record.replicas.clone();
    replicas.extend(new_replicas);
    let wait = crate::cluster::topic_changes::change_wait(timeout_ms);
    ctx.cluster
        .grow_topic(name, wait, |seen| {
            if seen.replicas.len() >= replicas.len() {
                // Grown by another request meanwhile: as Kafka, the count is what decides.
                return Err(TopicError::InvalidPartitions(topic.count));
            }
            if replicas.get(..seen.replicas.len()) != Some(seen.replicas.as_slice()) {
                return Err(TopicError::InvalidPartitions(topic.count));
            }
            Ok(Some(replicas.clone()))
        })
        .await
        .map_err(refused)?;
    tracing::info!(topic = name, partitions = topic.count, "added partitions");
    Ok(())
}

/// First version whose clients know THROTTLING_QUOTA_EXCEEDED (KIP-599): an exhausted
/// `controller_mutation_rate` refuses the topic; older versions are throttled only.
const STRICT_MUTATION_QUOTA_VERSION_MIN: i16 = 3;

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    turn: &Turn<'_>,
    header: &RequestHeader,
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let access = ctx.access(session, header.request_api_key);
    let strict = header.request_api_version >= STRICT_MUTATION_QUOTA_VERSION_MIN;
    let mut seen = BTreeSet::new();
    let repeated: BTreeSet<&str> = request
        .topics
        .iter()
        .map(|topic| topic.name.0.as_str())
        .filter(|name| !seen.insert(*name))
        .collect();
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let name = topic.name.0.as_str();
        let outcome = if repeated.contains(name) {
            Err((
                error_code::INVALID_REQUEST,
                "Duplicate topic in request.".to_owned(),
            ))
        } else if !access.allows(Operation::Alter, ResourceType::Topic, name) {
            Err((
                error_code::TOPIC_AUTHORIZATION_FAILED,
                "not authorized to alter the topic".to_owned(),
            ))
        } else if let Some(refusal) = turn.mutation_refused(strict) {
            Err(refusal)
        } else {
            let before = ctx.topics.get(name).map_or(0, |t| t.record.replicas.len());
            let grown = grow(ctx, topic, request.validate_only, request.timeout_ms).await;
            if grown.is_ok() && !request.validate_only {
                let count = usize::try_from(topic.count).unwrap_or(0);
                turn.record_mutation(count.saturating_sub(before));
            }
            grown
        };
        let result = CreatePartitionsTopicResult::default().with_name(topic.name.clone());
        results.push(match outcome {
            Ok(()) => result,
            Err((code, message)) => result
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_string(message))),
        });
    }
    CreatePartitionsResponse::default().with_results(results)
}
