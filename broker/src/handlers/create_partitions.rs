//! CreatePartitions (`kafka-topics --alter --partitions`, AdminClient.createPartitions): grows a
//! topic to a larger partition count. The new partitions' replicas come from placement (as at
//! topic creation) or from the request's assignment, which on one node may name only this broker,
//! with as many replicas as the topic's existing partitions. Their logs exist, and the metadata is
//! saved, before the answer (`Topics::add_partitions`); validate_only checks without changing.
//! Kafka's errors: INVALID_PARTITIONS for a count not above the current one or above the bound,
//! INVALID_REPLICA_ASSIGNMENT for an assignment that does not fit, INVALID_REQUEST for a topic
//! named twice. Needs Alter on the topic (TOPIC_AUTHORIZATION_FAILED).

use std::collections::BTreeSet;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse, RequestHeader};
use kafka_protocol::protocol::StrBytes;

use super::error_code;
use crate::context::Ctx;
use crate::net::session::Session;
use crate::partition::topics::{TopicError, PARTITIONS_PER_TOPIC_MAX};
use crate::security::acl::{Operation, ResourceType};

type Refusal = (i16, String);

/// The replicas a client assigned to the new partitions, checked against this one-node cluster
/// and the topic's replication factor.
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
    let mut replicas = Vec::with_capacity(added);
    for assignment in assignments {
        let brokers: Vec<i32> = assignment.broker_ids.iter().map(|id| id.0).collect();
        if brokers.is_empty() {
            return Err(invalid(
                "An assignment must name at least one broker.".to_owned(),
            ));
        }
        if let Some(unknown) = brokers.iter().find(|id| **id != ctx.config.node_id) {
            return Err(invalid(format!(
                "The manual partition assignment includes broker {unknown}, but no such broker is registered (this node, {}, is the only one).",
                ctx.config.node_id
            )));
        }
        if brokers.iter().collect::<BTreeSet<_>>().len() != brokers.len() {
            return Err(invalid(format!(
                "The manual partition assignment includes the broker {} more than once.",
                ctx.config.node_id
            )));
        }
        if brokers.len() != replication_factor {
            return Err(invalid(format!(
                "The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {replication_factor} replica(s).",
                brokers.len()
            )));
        }
        replicas.push(brokers);
    }
    Ok(replicas)
}

async fn grow(
    ctx: &Ctx,
    topic: &CreatePartitionsTopic,
    validate_only: bool,
) -> Result<(), Refusal> {
    let name = topic.name.0.as_str();
    let refused = |error: TopicError| (error.code(), error.to_string());
    let current = ctx
        .topics
        .get(name)
        .ok_or_else(|| refused(TopicError::Unknown))?;
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
        ctx.placement
            .assign_added(name, existing, added, replication_factor, !validate_only)
            .map_err(|error| (error_code::INVALID_REPLICA_ASSIGNMENT, error.to_string()))?
    };
    let mut replicas = current.record.replicas.clone();
    replicas.extend(new_replicas);
    // Creating logs creates directories and files and fsyncs them: a blocking thread's work.
    let topics = ctx.topics.clone();
    let owned_name = name.to_owned();
    let grown = tokio::task::spawn_blocking(move || {
        topics.add_partitions(&owned_name, replicas, validate_only)
    })
    .await
    .unwrap_or_else(|join| Err(TopicError::Storage(join.to_string())))
    .map_err(refused)?;
    if chosen && !validate_only {
        if let Err(error) =
            ctx.placement
                .record_assignment(name, existing, &grown.record.replicas[existing..])
        {
            tracing::warn!(topic = name, %error, "recording the bundles of added partitions");
        }
    }
    if !validate_only {
        tracing::info!(topic = name, partitions = topic.count, "added partitions");
    }
    Ok(())
}

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let access = ctx.access(session, header.request_api_key);
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
        } else {
            grow(ctx, topic, request.validate_only).await
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
