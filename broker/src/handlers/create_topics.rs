//! CreateTopics (and auto-creation from Metadata and Produce, and `__consumer_offsets` on the
//! first FindCoordinator): validates every topic, asks placement for the replica assignment over
//! the running brokers, and writes the topic to the metadata store (`Cluster::create_topic`),
//! which answers once this broker's image and logs show it. Creating needs Create on the cluster
//! or on the topic (TOPIC_AUTHORIZATION_FAILED otherwise).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse, RequestHeader};
use kafka_protocol::protocol::StrBytes;

use super::error_code;
use crate::cluster::topic_changes::change_wait;
use crate::context::Ctx;
use crate::net::session::Session;
use crate::partition::topics::{Topic, TopicError};
use crate::security::acl::model::CLUSTER_NAME;
use crate::security::acl::{Access, Operation, ResourceType};
use skiff_cluster::preferred_leaders::preferred_leaders;
use skiff_placement::{PlacementError, PreferredLeader};

/// How long an auto-creation (from Metadata or Produce) waits for the topic; the client's
/// request has no timeout of its own for it.
const AUTO_CREATE_WAIT: Duration = Duration::from_secs(10);

/// Checks a replication factor: at least 1 (placement then needs that many running brokers).
pub(crate) fn check_replication_factor(factor: i16) -> Result<usize, TopicError> {
    match usize::try_from(factor) {
        Ok(replicas) if replicas >= 1 => Ok(replicas),
        _ => Err(TopicError::InvalidReplicationFactor {
            factor,
            why: "must be at least 1".to_owned(),
        }),
    }
}

/// Replicas for `added` new partitions of `topic` (after `existing` ones) with
/// `replication_factor` replicas each, from placement over the running brokers. Each partition's
/// preferred leader is its bundle's owner (`skiff_cluster::preferred_leaders`): the running owner
/// of the image's bundle record, else one drawn per bundle by placement.
pub(crate) fn assign_replicas(
    ctx: &Ctx,
    topic: &str,
    existing: usize,
    added: i32,
    replication_factor: i16,
) -> Result<Vec<Vec<i32>>, TopicError> {
    if !(1..=crate::partition::topics::PARTITIONS_PER_TOPIC_MAX).contains(&added) {
        return Err(TopicError::InvalidPartitions(added));
    }
    let replicas = check_replication_factor(replication_factor)?;
    let added_count = usize::try_from(added).unwrap_or(0);
    let nodes = ctx.cluster.placement_nodes(ctx.placement.local_load());
    let running: BTreeSet<i32> = nodes.iter().map(|node| node.id).collect();
    let first = i32::try_from(existing).unwrap_or(i32::MAX);
    let leaders = ctx
        .cluster
        .with_image(|image| preferred_leaders(image, topic, first, added_count, &running))
        // An unreadable image also left `nodes` empty: placement answers NotEnoughNodes.
        .unwrap_or_else(|| vec![PreferredLeader::Any; added_count]);
    ctx.placement.set_nodes(nodes);
    ctx.placement
        .assign_added(topic, &leaders, replicas)
        .map_err(|error| match error {
            PlacementError::TooManyPartitions { .. } => TopicError::InvalidPartitions(added),
            PlacementError::NotEnoughNodes { node_count, .. } => {
                TopicError::InvalidReplicationFactor {
                    factor: replication_factor,
                    why: format!("{node_count} running broker(s) to place it on"),
                }
            }
            other => TopicError::InvalidReplicationFactor {
                factor: replication_factor,
                why: other.to_string(),
            },
        })
}

/// Refuses new partitions whose replicas include this broker when its log directory cannot hold
/// them (POLICY_VIOLATION naming the limit), before anything is written to the store. (A broker
/// that cannot hold its share of a topic another broker created refuses to serve it and logs why.)
pub(crate) async fn check_room_here(ctx: &Ctx, replicas: &[Vec<i32>]) -> Result<(), TopicError> {
    let here = replicas
        .iter()
        .filter(|replicas| replicas.contains(&ctx.config.node_id))
        .count();
    let topics = ctx.topics.clone();
    // The check waits for the log directory, which recovery after a crash holds.
    tokio::task::spawn_blocking(move || topics.check_room(here))
        .await
        .unwrap_or_else(|join| Err(TopicError::Storage(join.to_string())))
}

/// Broker lists a client assigned to partitions (CreateTopics, CreatePartitions), checked as
/// Kafka checks them: each names at least one broker, only registered ones, none twice, and all
/// have the same number of replicas (`replication_factor` when the topic has one already).
/// The message of the first misfit, for INVALID_REPLICA_ASSIGNMENT.
pub(crate) fn checked_broker_lists(
    ctx: &Ctx,
    lists: impl Iterator<Item = Vec<i32>>,
    replication_factor: Option<usize>,
) -> Result<Vec<Vec<i32>>, String> {
    let mut replicas: Vec<Vec<i32>> = Vec::new();
    for brokers in lists {
        if brokers.is_empty() {
            return Err("An assignment must name at least one broker.".to_owned());
        }
        if let Some(unknown) = brokers.iter().find(|id| !ctx.cluster.is_live(**id)) {
            return Err(format!(
                "The manual partition assignment includes broker {unknown}, but no such broker is registered."
            ));
        }
        let mut distinct = std::collections::BTreeSet::new();
        if let Some(twice) = brokers.iter().find(|id| !distinct.insert(**id)) {
            return Err(format!(
                "The manual partition assignment includes the broker {twice} more than once."
            ));
        }
        let expected = replication_factor.or_else(|| replicas.first().map(Vec::len));
        if let Some(expected) = expected.filter(|n| *n != brokers.len()) {
            return Err(format!(
                "The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {expected} replica(s).",
                brokers.len()
            ));
        }
        replicas.push(brokers);
    }
    Ok(replicas)
}

/// Where a new topic's replicas come from.
enum Replicas {
    /// Placement chooses them.
    Placed {
        partition_count: i32,
        replication_factor: i16,
    },
    /// The client assigned them (checked), partition by partition.
    Assigned(Vec<Vec<i32>>),
}

/// The replicas of a CreateTopics topic: its assignment when it has one (then its partition
/// count and replication factor must be -1, and its partitions 0..n each once, as Kafka
/// requires), else placement's choice for the count and factor.
fn requested_replicas(
    ctx: &Ctx,
    topic: &kafka_protocol::messages::create_topics_request::CreatableTopic,
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
    checked_broker_lists(ctx, by_index.into_iter().flatten(), None)
        .map(Replicas::Assigned)
        .map_err(|message| (error_code::INVALID_REPLICA_ASSIGNMENT, message))
}

/// Creates `name` (validated first); returns its id (zeros for a validate-only creation).
async fn create(
    ctx: &Ctx,
    name: &str,
    requested: Replicas,
    configs: BTreeMap<String, String>,
    validate_only: bool,
    wait: Duration,
) -> Result<[u8; 16], TopicError> {
    crate::partition::topics::validate_topic_name(name)?;
    let taken = ctx
        .cluster
        .with_image(|image| image.topics().contains_key(name))
        .unwrap_or(false);
    if taken || ctx.topics.get(name).is_some() {
        return Err(TopicError::AlreadyExists);
    }
    ctx.topics.resolve_config(&configs)?;
    let replicas = match requested {
        Replicas::Placed {
            partition_count,
            replication_factor,
        } => assign_replicas(ctx, name, 0, partition_count, replication_factor)?,
        Replicas::Assigned(replicas) => replicas,
    };
    check_room_here(ctx, &replicas).await?;
    if validate_only {
        return Ok([0; 16]);
    }
    let topic_id = ctx
        .cluster
        .create_topic(name, replicas, configs, wait)
        .await?;
    Ok(crate::partition::topics::parse_topic_id(&topic_id))
}

/// Creates `name` with the broker defaults, or returns it if a concurrent request just did.
pub(crate) async fn auto_create(ctx: &Ctx, name: &str) -> Result<Arc<Topic>, TopicError> {
    if skiff_cluster::topics::is_internal(name) {
        return Err(TopicError::Internal(name.to_owned()));
    }
    let created = create(
        ctx,
        name,
        Replicas::Placed {
            partition_count: ctx.config.num_partitions,
            replication_factor: ctx.config.default_replication_factor,
        },
        BTreeMap::new(),
        false,
        AUTO_CREATE_WAIT,
    )
    .await;
    match created {
        Ok(_) => tracing::info!(topic = name, "auto-created topic"),
        // Taken in the store or the image, but not served here yet: the materializer (or the
        // image) is behind. Answering UNKNOWN_TOPIC_OR_PARTITION for a topic that exists would
        // be wrong; wait for it, bounded.
        Err(TopicError::AlreadyExists) if ctx.topics.get(name).is_none() => {
            ctx.cluster
                .wait_topic_served(name, AUTO_CREATE_WAIT)
                .await?;
        }
        Err(TopicError::AlreadyExists) => {}
        Err(error) => return Err(error),
    }
    ctx.topics.get(name).ok_or(TopicError::Unknown)
}

/// Creates `__consumer_offsets` with `offsets.topic.num.partitions` partitions spread by
/// placement, unless it exists (Kafka creates it on the first FindCoordinator too).
pub(crate) async fn ensure_offsets_topic(ctx: &Ctx) -> Result<(), TopicError> {
    let created = create(
        ctx,
        skiff_cluster::topics::OFFSETS_TOPIC,
        Replicas::Placed {
            partition_count: ctx.config.offsets_topic_num_partitions,
            replication_factor: ctx.config.offsets_topic_replication_factor,
        },
        // Kafka's offsets topic has its own segment size; retention never applies to it
        // (`ops::maintenance`): the coordinator compacts it by snapshot (`group::driver`).
        BTreeMap::from([(
            "segment.bytes".to_owned(),
            ctx.config.offsets_topic_segment_bytes.to_string(),
        )]),
        false,
        AUTO_CREATE_WAIT,
    )
    .await;
    match created {
        Ok(_) => {
            tracing::info!(
                partitions = ctx.config.offsets_topic_num_partitions,
                "created {}",
                skiff_cluster::topics::OFFSETS_TOPIC
            );
            Ok(())
        }
        Err(TopicError::AlreadyExists) => Ok(()),
        Err(error) => Err(error),
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
        let outcome = if !may_create(&access, &name) {
            Err((
                error_code::TOPIC_AUTHORIZATION_FAILED,
                "not authorized to create the topic".to_owned(),
            ))
        } else if skiff_cluster::topics::is_internal(&name) {
            let error = TopicError::Internal(name.clone());
            Err((error.code(), error.to_string()))
        } else {
            let requested = requested_replicas(ctx, &topic, partition_count, replication_factor);
            if let Ok(Replicas::Assigned(assigned)) = &requested {
                // What the answer reports is what the assignment made.
                partition_count = i32::try_from(assigned.len()).unwrap_or(i32::MAX);
                replication_factor =
                    i16::try_from(assigned.first().map_or(0, Vec::len)).unwrap_or(i16::MAX);
            }
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
            match requested {
                Ok(requested) => create(
                    ctx,
                    &name,
                    requested,
                    configs,
                    request.validate_only,
                    change_wait(request.timeout_ms),
                )
                .await
                .map_err(|error| (error.code(), error.to_string())),
                Err(refusal) => Err(refusal),
            }
        };
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
