//! Metadata, from the cluster image: every live broker at its endpoint for the listener the client
//! came in on (with its rack), the controller, the cluster id, and the requested topics (all of
//! them for a null list, or for an empty list in v0; from v12 by topic id when the request names
//! ids) with each partition's leader, leader epoch, replicas, ISR and offline replicas
//! (LEADER_NOT_AVAILABLE while it has no leader), auto-creating unknown topics (asked for by
//! name) when allowed.
//!
//! Authorization (Kafka's rules): a listing of every topic leaves out those the principal may not
//! Describe; a named one it may not Describe gets TOPIC_AUTHORIZATION_FAILED, and so does an
//! unknown one it would auto-create without Create on the cluster or the topic.

use std::sync::Arc;

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, MetadataRequest, MetadataResponse, RequestHeader, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::error_code;
use crate::context::Ctx;
use crate::partition::topics::{Topic, TopicError};
use crate::security::acl::{Access, Operation, ResourceType};
use crate::security::session::Session;
use skiff_cluster::records::{PartitionState, NO_LEADER};

/// First Metadata version with partition leader epochs.
const LEADER_EPOCH_VERSION_MIN: i16 = 7;
/// First Metadata version with the topics' authorized operations (8, KIP-430).
const TOPIC_AUTHORIZED_OPERATIONS_VERSION_MIN: i16 = 8;
/// First Metadata version with topic ids.
const TOPIC_ID_VERSION_MIN: i16 = 10;
/// First Metadata version whose request may name topics by id (Kafka 4.1.1 refuses ids at v10
/// and v11).
const TOPIC_ID_LOOKUP_VERSION_MIN: i16 = 12;

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: MetadataRequest,
) -> MetadataResponse {
    let version = header.request_api_version;
    let access = ctx.access(session, header.request_api_key);
    // Read once per request: offline replicas are those not live, and a partition's leader is
    // named only if the response lists it (a client looks the leader up among the brokers).
    let listed = super::common::brokers::listed(ctx, session, version);
    let known = KnownBrokers {
        live: ctx
            .cluster
            .live_brokers()
            .iter()
            .map(|broker| broker.node_id)
            .collect(),
        listed: listed.iter().map(|broker| broker.node_id.0).collect(),
    };
    if let Some(refused) = refused_without_names(version, request.topics.as_deref()) {
        return refused;
    }
    let asked_operations = request.include_topic_authorized_operations;
    if let Some(ids) = requested_ids(version, request.topics.as_deref()) {
        let mut topics = by_id(ctx, &access, version, &known, &ids);
        if version >= TOPIC_AUTHORIZED_OPERATIONS_VERSION_MIN && asked_operations {
            with_authorized_operations(&mut topics, &access);
        }
        return response(ctx, version, listed, topics);
    }
    let requested: Option<Vec<String>> = match request.topics {
        None => None,
        Some(topics) if topics.is_empty() && version == 0 => None,
        Some(topics) => Some(
            topics
                .into_iter()
                .filter_map(|topic| topic.name.map(|name| name.0.to_string()))
                .collect(),
        ),
    };
    let allow_auto_create =
        ctx.config.auto_create_topics_enable && (version < 4 || request.allow_auto_topic_creation);
    let mut topics = match requested {
        None => ctx
            .topics
            .all()
            .iter()
            // Listing every topic silently leaves out those the principal may not describe.
            .filter(|topic| access.may(Operation::Describe, ResourceType::Topic, &topic.name))
            .map(|topic| describe(ctx, version, topic, &known))
            .collect(),
        Some(names) => {
            let mut out = Vec::with_capacity(names.len());
            for name in names {
                out.push(
                    match named_topic(ctx, &access, &name, allow_auto_create).await {
                        Ok(topic) => describe(ctx, version, &topic, &known),
                        Err(code) => MetadataResponseTopic::default()
                            .with_name(Some(TopicName(StrBytes::from_string(name))))
                            .with_error_code(code),
                    },
                );
            }
            out
        }
    };
    if version >= TOPIC_AUTHORIZED_OPERATIONS_VERSION_MIN && asked_operations {
        with_authorized_operations(&mut topics, &access);
    }
    response(ctx, version, listed, topics)
}

/// Kafka 4.1.1's refusal of a v10 or v11 request naming a topic by id or by no name
/// (`handleTopicMetadataRequest` throws INVALID_REQUEST, answered as `MetadataRequest`'s error
/// response: every requested topic, its name or "" and its id, with the error, and nothing else).
fn refused_without_names(
    version: i16,
    topics: Option<&[MetadataRequestTopic]>,
) -> Option<MetadataResponse> {
    let topics = topics?;
    let refused = (TOPIC_ID_VERSION_MIN..TOPIC_ID_LOOKUP_VERSION_MIN).contains(&version)
        && topics
            .iter()
            .any(|topic| topic.name.is_none() || !topic.topic_id.is_nil());
    refused.then(|| {
        let topics = topics
            .iter()
            .map(|topic| {
                let name = topic.name.clone().unwrap_or_default();
                MetadataResponseTopic::default()
                    .with_name(Some(name))
                    .with_topic_id(topic.topic_id)
                    .with_error_code(error_code::INVALID_REQUEST)
            })
            .collect();
        MetadataResponse::default().with_topics(topics)
    })
}

/// The topic ids a v12+ request asks for, when it asks by id: Kafka 4.1.1 then looks every topic
/// up by its id and ignores the names (`KafkaApis.handleTopicMetadataRequest`'s `useTopicId`).
/// Kafka's consumer asks this way for the topics of a KIP-848 assignment, which names topics by
/// id only (a broker-side pattern subscription knows no names).
fn requested_ids(version: i16, topics: Option<&[MetadataRequestTopic]>) -> Option<Vec<[u8; 16]>> {
    if version < TOPIC_ID_LOOKUP_VERSION_MIN {
        return None;
    }
    let ids: Vec<[u8; 16]> = topics?
        .iter()
        .map(|topic| *topic.topic_id.as_bytes())
        .filter(|id| *id != [0; 16])
        .collect();
    (!ids.is_empty()).then_some(ids)
}

/// The topics asked for by id: UNKNOWN_TOPIC_ID for an id no topic has, TOPIC_AUTHORIZATION_FAILED
/// (with the id, no name: Kafka does not treat ids as sensitive) for one the principal may not
/// Describe; never auto-created.
fn by_id(
    ctx: &Ctx,
    access: &Access<'_>,
    version: i16,
    known: &KnownBrokers,
    ids: &[[u8; 16]],
) -> Vec<MetadataResponseTopic> {
    let refused = |id: &[u8; 16], code: i16| {
        MetadataResponseTopic::default()
            .with_error_code(code)
            .with_name(None)
            .with_topic_id(uuid::Uuid::from_bytes(*id))
    };
    ids.iter()
        .map(|id| match ctx.topics.get_by_id(id) {
            None => refused(id, error_code::UNKNOWN_TOPIC_ID),
            Some(topic)
                if !access.allows(Operation::Describe, ResourceType::Topic, &topic.name) =>
            {
                refused(id, error_code::TOPIC_AUTHORIZATION_FAILED)
            }
            Some(topic) => describe(ctx, version, &topic, known),
        })
        .collect()
}

/// The response around `topics`: the brokers, the controller and the cluster id.
fn response(
    ctx: &Ctx,
    version: i16,
    listed: Vec<MetadataResponseBroker>,
    topics: Vec<MetadataResponseTopic>,
) -> MetadataResponse {
    // kafka-protocol refuses to encode a non-default value in a field the version lacks, so
    // version-gated fields are set only where they exist.
    let mut response = MetadataResponse::default()
        .with_brokers(listed)
        .with_topics(topics);
    if version >= 1 {
        // The controller; while none is known (an election in progress), this broker: every
        // broker serves the admin requests clients send "to the controller" (as KRaft brokers
        // forward them), and a -1 makes librdkafka's admin client wait for its next metadata
        // refresh, minutes away.
        let controller = ctx.cluster.controller_id().unwrap_or(ctx.config.node_id);
        response = response.with_controller_id(BrokerId(controller));
    }
    if version >= 2 {
        response = response.with_cluster_id(Some(StrBytes::from_string(ctx.cluster_id.clone())));
    }
    response
}

/// A topic the request names: TOPIC_AUTHORIZATION_FAILED without Describe on it (or without
/// Create when it would be auto-created), auto-created when allowed, else unknown.
async fn named_topic(
    ctx: &Ctx,
    access: &Access<'_>,
    name: &str,
    allow_auto_create: bool,
) -> Result<Arc<Topic>, i16> {
    if !access.allows(Operation::Describe, ResourceType::Topic, name) {
        return Err(error_code::TOPIC_AUTHORIZATION_FAILED);
    }
    match ctx.topics.get(name) {
        Some(topic) => Ok(topic),
        None if allow_auto_create && !super::common::topic_access::may_create(access, name) => {
            Err(error_code::TOPIC_AUTHORIZATION_FAILED)
        }
        None if allow_auto_create => ctx
            .topic_creation()
            .auto_create(name)
            .await
            .map_err(|error| error.code()),
        None => Err(TopicError::Unknown.code()),
    }
}

/// Kafka's KIP-430 answer: each topic found gets the operations the principal may perform on it.
fn with_authorized_operations(topics: &mut [MetadataResponseTopic], access: &Access<'_>) {
    for topic in topics
        .iter_mut()
        .filter(|topic| topic.error_code == error_code::NONE)
    {
        let name = topic
            .name
            .as_ref()
            .map(|name| name.0.to_string())
            .unwrap_or_default();
        topic.topic_authorized_operations =
            access.authorized_operations(ResourceType::Topic, &name);
    }
}

/// First Metadata version with offline replicas.
const OFFLINE_REPLICAS_VERSION_MIN: i16 = 5;

/// The brokers one Metadata answer is built on.
struct KnownBrokers {
    /// Registered (offline replicas are the others).
    live: std::collections::BTreeSet<i32>,
    /// In the answer's broker list: live with the session's listener, and this broker.
    listed: std::collections::BTreeSet<i32>,
}

fn describe(ctx: &Ctx, version: i16, topic: &Topic, known: &KnownBrokers) -> MetadataResponseTopic {
    let states: std::collections::BTreeMap<i32, PartitionState> = ctx
        .cluster
        .partition_states(&topic.name)
        .into_iter()
        .collect();
    let partitions = (0..topic.partition_count())
        .zip(&topic.record.replicas)
        .map(|(index, recorded)| {
            let state = states.get(&index);
            let replicas: Vec<i32> =
                state.map_or_else(|| recorded.clone(), |state| state.replicas.clone());
            // A partition whose log is still being recovered here (after a crash) has no
            // leader yet, as Kafka answers while a leader is being elected: clients retry.
            let recovering = topic
                .partition(index)
                .is_some_and(|partition| partition.log().is_recovering());
            let stated_leader = match state {
                Some(state) if !recovering => state.leader,
                _ => NO_LEADER,
            };
            // A leader the answer does not list (its session just ended and the controller has
            // not elected yet, or it lacks this listener) is no leader to the client, as Kafka
            // answers: kafka-python stalls on a leader id it cannot resolve.
            let (leader, error) = if stated_leader == NO_LEADER {
                (NO_LEADER, error_code::LEADER_NOT_AVAILABLE)
            } else if known.listed.contains(&stated_leader) {
                (stated_leader, error_code::NONE)
            } else if known.live.contains(&stated_leader) {
                (NO_LEADER, error_code::LISTENER_NOT_FOUND)
            } else {
                (NO_LEADER, error_code::LEADER_NOT_AVAILABLE)
            };
            let isr: Vec<BrokerId> = state
                .map(|state| state.isr.iter().map(|id| BrokerId(*id)).collect())
                .unwrap_or_default();
            let offline: Vec<BrokerId> = replicas
                .iter()
                .filter(|id| !known.live.contains(*id) && !known.listed.contains(*id))
                .map(|id| BrokerId(*id))
                .collect();
            let mut partition = MetadataResponsePartition::default()
                .with_error_code(error)
                .with_partition_index(index)
                .with_leader_id(BrokerId(leader))
                .with_isr_nodes(isr)
                .with_replica_nodes(replicas.iter().map(|id| BrokerId(*id)).collect());
            if version >= LEADER_EPOCH_VERSION_MIN {
                partition =
                    partition.with_leader_epoch(state.map_or(-1, |state| state.leader_epoch));
            }
            if version >= OFFLINE_REPLICAS_VERSION_MIN {
                partition = partition.with_offline_replicas(offline);
            }
            partition
        })
        .collect();
    let mut described = MetadataResponseTopic::default()
        .with_error_code(error_code::NONE)
        .with_name(Some(TopicName(StrBytes::from_string(topic.name.clone()))))
        .with_partitions(partitions);
    if version >= 1 {
        described = described.with_is_internal(topic.is_internal());
    }
    if version >= TOPIC_ID_VERSION_MIN {
        described.with_topic_id(uuid::Uuid::from_bytes(topic.topic_id))
    } else {
        described
    }
}
