//! CreateTopics: reads each topic's count, factor, assignment and configs from the request and
//! creates it through `crate::cluster::topic_creation` (which validates, places and writes it to
//! the metadata store; auto-creation and `__consumer_offsets` go there directly). Creating needs
//! Create on the cluster or on the topic (TOPIC_AUTHORIZATION_FAILED otherwise).
//!
//! Must never: create a topic but through `topic_creation`.

use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse, RequestHeader};
use kafka_protocol::protocol::StrBytes;

use kafka_protocol::messages::create_topics_request::CreatableTopic;

use super::common::throttle::Turn;
use super::common::topic_access::may_create;
use super::error_code;
use crate::cluster::topic_changes::change_wait;
use crate::cluster::topic_creation::Replicas;
use crate::context::Ctx;
use crate::partition::topics::TopicError;
use crate::security::acl::Access;
use crate::security::session::Session;

/// The replicas of a CreateTopics topic: its assignment when it has one (then its partition
/// count and replication factor must be -1, and its partitions 0..n each once, as Kafka
/// requires), else placement's choice for the count and factor.
fn requested_replicas(
    ctx: &Ctx,
    topic: &CreatableTopic,
    partition_count: i32,
    replication_factor: i16,
) -> Result<Replicas, (i16, String)> {
    if topic.assignments.is_empty() {
        return Ok(Replicas::Placed {
            partition_count,
            replication_factor,
        });
    }
    if topic.num_partitions != -1 || topic.replication_factor != -1 {
        return Err((
            error_code::INVALID_REQUEST,
            "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.".to_owned(),
        ));
    }
    let count = topic.assignments.len();
    if count > usize::try_from(crate::partition::topics::PARTITIONS_PER_TOPIC_MAX).unwrap_or(0) {
        let error = TopicError::InvalidPartitions(i32::try_from(count).unwrap_or(i32::MAX));
        return Err((error.code(), error.to_string()));
    }
    let mut by_index: Vec<Option<Vec<i32>>> = vec![None; count];
    for assignment in &topic.assignments {
        let slot = usize::try_from(assignment.partition_index)
            .ok()
            .and_then(|index| by_index.get_mut(index))
            .filter(|slot| slot.is_none());
        let Some(slot) = slot else {
            return Err((
                error_code::INVALID_REPLICA_ASSIGNMENT,
                format!(
                    "Partitions must be numbered 0 to {} each once; got partition {}.",
                    count - 1,
                    assignment.partition_index
                ),
            ));
        };
        *slot = Some(assignment.broker_ids.iter().map(|id| id.0).collect());
    }
    ctx.topic_creation()
        .checked_broker_lists(by_index.into_iter().flatten(), None)
        .map(Replicas::Assigned)
        .map_err(|error| (error_code::INVALID_REPLICA_ASSIGNMENT, error.to_string()))
}

/// First version whose clients know THROTTLING_QUOTA_EXCEEDED (KIP-599): an exhausted
/// `controller_mutation_rate` refuses the topic; older versions are throttled only.
const STRICT_MUTATION_QUOTA_VERSION_MIN: i16 = 6;

/// Creates one topic of a request (`options`: validate only, timeout) within the client's
/// mutation quota, its partitions counted once created; `shape` (partition count, replication
/// factor) becomes what an explicit assignment made.
async fn create_one(
    ctx: &Ctx,
    access: &Access<'_>,
    turn: &Turn<'_>,
    strict: bool,
    (validate_only, timeout_ms): (bool, i32),
    topic: &CreatableTopic,
    (partition_count, replication_factor): (&mut i32, &mut i16),
) -> Result<[u8; 16], (i16, String)> {
    let name = topic.name.0.to_string();
    if !may_create(access, &name) {
        return Err((
            error_code::TOPIC_AUTHORIZATION_FAILED,
            "not authorized to create the topic".to_owned(),
        ));
    }
    if skiff_cluster::topics::is_internal(&name) {
        let error = TopicError::Internal(name.clone());
        return Err((error.code(), error.to_string()));
    }
    let requested = requested_replicas(ctx, topic, *partition_count, *replication_factor)?;
    if let Replicas::Assigned(assigned) = &requested {
        // What the answer reports is what the assignment made.
        *partition_count = i32::try_from(assigned.len()).unwrap_or(i32::MAX);
        *replication_factor =
            i16::try_from(assigned.first().map_or(0, Vec::len)).unwrap_or(i16::MAX);
    }
    let configs = topic
        .configs
        .iter()
        .map(|config| {
            let value = config.value.as_ref().map(|value| value.to_string());
            (config.name.to_string(), value.unwrap_or_default())
        })
        .collect();
    if let Some(refusal) = turn.mutation_refused(strict) {
        return Err(refusal);
    }
    let created = ctx
        .topic_creation()
        .create(
            &name,
            requested,
            configs,
            validate_only,
            change_wait(timeout_ms),
        )
        .await
        .map_err(|error| (error.code(), error.to_string()))?;
    if !validate_only {
        turn.record_mutation(usize::try_from(*partition_count).unwrap_or(0));
    }
    Ok(created)
}

/// First CreateTopics response version with error messages.
const ERROR_MESSAGE_VERSION_MIN: i16 = 1;
/// First version echoing partition count and replication factor.
const TOPIC_DETAILS_VERSION_MIN: i16 = 5;
/// First version with topic ids.
const TOPIC_ID_VERSION_MIN: i16 = 7;

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    turn: &Turn<'_>,
    header: &RequestHeader,
    request: CreateTopicsRequest,
) -> CreateTopicsResponse {
    let access = ctx.access(session, header.request_api_key);
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let mut partition_count = if topic.num_partitions == -1 {
            ctx.config.num_partitions
        } else {
            topic.num_partitions
        };
        let mut replication_factor = if topic.replication_factor == -1 {
            ctx.config.default_replication_factor
        } else {
            topic.replication_factor
        };
        let outcome = create_one(
            ctx,
            &access,
            turn,
            header.request_api_version >= STRICT_MUTATION_QUOTA_VERSION_MIN,
            (request.validate_only, request.timeout_ms),
            &topic,
            (&mut partition_count, &mut replication_factor),
        )
        .await;
        let version = header.request_api_version;
        let mut result = CreatableTopicResult::default().with_name(topic.name);
        match outcome {
            Ok(topic_id) => {
                if version >= TOPIC_DETAILS_VERSION_MIN {
                    result = result
                        .with_num_partitions(partition_count)
                        .with_replication_factor(replication_factor);
                }
                if version >= TOPIC_ID_VERSION_MIN {
                    result = result.with_topic_id(uuid::Uuid::from_bytes(topic_id));
                }
            }
            Err((code, message)) => {
                result = result.with_error_code(code);
                if version >= ERROR_MESSAGE_VERSION_MIN {
                    result = result.with_error_message(Some(StrBytes::from_string(message)));
                }
            }
        }
        results.push(result);
    }
    CreateTopicsResponse::default().with_topics(results)
}
