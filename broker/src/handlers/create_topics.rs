//! CreateTopics (and auto-creation from Metadata and Produce): validates every topic, asks placement
//! for the replica assignment, and creates the logs and the durable metadata together. Creating
//! needs Create on the cluster or on the topic (TOPIC_AUTHORIZATION_FAILED otherwise).

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse, RequestHeader};
use kafka_protocol::protocol::StrBytes;

use super::error_code;
use crate::context::Ctx;
use crate::net::session::Session;
use crate::partition::topics::{Topic, TopicError};
use crate::security::acl::model::CLUSTER_NAME;
use crate::security::acl::{Access, Operation, ResourceType};
use skiff_placement::PlacementError;

/// Replica assignment for `partition_count` partitions with `replication_factor` replicas each,
/// from placement (which also records each partition's bundle).
fn assign_replicas(
    ctx: &Ctx,
    topic: &str,
    partition_count: i32,
    replication_factor: i16,
    record_bundles: bool,
) -> Result<Vec<Vec<i32>>, TopicError> {
    if !(1..=crate::partition::topics::PARTITIONS_PER_TOPIC_MAX).contains(&partition_count) {
        return Err(TopicError::InvalidPartitions(partition_count));
    }
    let (Ok(partitions), Ok(replicas)) = (
        usize::try_from(partition_count),
        usize::try_from(replication_factor),
    ) else {
        return Err(TopicError::InvalidReplicationFactor(replication_factor));
    };
    ctx.placement
        .assign(topic, partitions, replicas, record_bundles)
        .map_err(|error| match error {
            PlacementError::TooManyPartitions { .. } => {
                TopicError::InvalidPartitions(partition_count)
            }
            _ => TopicError::InvalidReplicationFactor(replication_factor),
        })
}

async fn create(
    ctx: &Ctx,
    name: &str,
    partition_count: i32,
    replication_factor: i16,
    configs: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<Arc<Topic>, TopicError> {
    crate::partition::topics::validate_topic_name(name)?;
    if ctx.topics.get(name).is_some() {
        return Err(TopicError::AlreadyExists);
    }
    let replicas = assign_replicas(
        ctx,
        name,
        partition_count,
        replication_factor,
        !validate_only,
    )?;
    // Creating a topic creates directories and files and fsyncs them: a blocking thread's work.
    let topics = ctx.topics.clone();
    let name = name.to_owned();
    tokio::task::spawn_blocking(move || topics.create(&name, replicas, configs, validate_only))
        .await
        .unwrap_or_else(|join| Err(TopicError::Storage(join.to_string())))
}

/// Creates `name` with the broker defaults, or returns it if a concurrent request just did.
pub(crate) async fn auto_create(ctx: &Ctx, name: &str) -> Result<Arc<Topic>, TopicError> {
    let replication_factor = ctx.config.default_replication_factor;
    match create(
        ctx,
        name,
        ctx.config.num_partitions,
        replication_factor,
        BTreeMap::new(),
        false,
    )
    .await
    {
        Err(TopicError::AlreadyExists) => ctx.topics.get(name).ok_or(TopicError::Unknown),
        other => {
            if let Ok(topic) = &other {
                tracing::info!(topic = %topic.name, "auto-created topic");
            }
            other
        }
    }
}

/// First CreateTopics response version with error messages.
const ERROR_MESSAGE_VERSION_MIN: i16 = 1;
/// First version echoing partition count and replication factor.
const TOPIC_DETAILS_VERSION_MIN: i16 = 5;
/// First version with topic ids.
const TOPIC_ID_VERSION_MIN: i16 = 7;

/// Whether `access` may create the topic `name`: Create on the cluster or on the topic (Kafka's
/// rule, for CreateTopics and for auto-creation alike).
pub(crate) fn may_create(access: &Access<'_>, name: &str) -> bool {
    access.may(Operation::Create, ResourceType::Cluster, CLUSTER_NAME)
        || access.allows(Operation::Create, ResourceType::Topic, name)
}

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: CreateTopicsRequest,
) -> CreateTopicsResponse {
    let access = ctx.access(session, header.request_api_key);
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let partition_count = if topic.num_partitions == -1 {
            ctx.config.num_partitions
        } else {
            topic.num_partitions
        };
        let replication_factor = if topic.replication_factor == -1 {
            ctx.config.default_replication_factor
        } else {
            topic.replication_factor
        };
        let outcome = if !may_create(&access, &name) {
            Err((
                error_code::TOPIC_AUTHORIZATION_FAILED,
                "not authorized to create the topic".to_owned(),
            ))
        } else if !topic.assignments.is_empty() {
            Err(TopicError::InvalidPartitions(-1)).map_err(|_| {
                (
                    error_code::INVALID_REQUEST,
                    "manual replica assignment is not supported on one node".to_owned(),
                )
            })
        } else {
            let configs = topic
                .configs
                .into_iter()
                .map(|config| {
                    (
                        config.name.to_string(),
                        config
                            .value
                            .map(|value| value.to_string())
                            .unwrap_or_default(),
                    )
                })
                .collect();
            create(
                ctx,
                &name,
                partition_count,
                replication_factor,
                configs,
                request.validate_only,
            )
            .await
            .map_err(|error| (error.code(), error.to_string()))
        };
        let version = header.request_api_version;
        let mut result = CreatableTopicResult::default().with_name(topic.name);
        match outcome {
            Ok(created) => {
                if version >= TOPIC_DETAILS_VERSION_MIN {
                    result = result
                        .with_num_partitions(partition_count)
                        .with_replication_factor(replication_factor);
                }
                if version >= TOPIC_ID_VERSION_MIN {
                    result = result.with_topic_id(uuid::Uuid::from_bytes(created.topic_id));
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
