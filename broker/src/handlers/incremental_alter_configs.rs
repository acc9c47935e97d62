//! IncrementalAlterConfigs (`kafka-configs --alter`, AdminClient.incrementalAlterConfigs): per-key
//! SET, DELETE, APPEND and SUBTRACT on a topic's overrides, written to the metadata store
//! (`common::config_resources::alter_topic`); validate_only checks without changing. Broker
//! resources change the dynamic broker configs (`common::config_resources::alter_broker`: the
//! keys Kafka marks dynamic that Skiff has, for the cluster default or this broker), and deleting
//! Kafka's reassignment throttles (never set here) succeeds, as deleting an unset dynamic config
//! does in Kafka (`kafka-reassign-partitions --verify` deletes them). A topic needs AlterConfigs on it (TOPIC_AUTHORIZATION_FAILED), a broker
//! or broker logger AlterConfigs on the cluster (CLUSTER_AUTHORIZATION_FAILED).

use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, RequestHeader,
};
use kafka_protocol::protocol::StrBytes;

use super::common::config_resources::{
    alter_broker, alter_topic, duplicate_resources, without_unset_deletes, Refusal,
    RESOURCE_TYPE_BROKER, RESOURCE_TYPE_BROKER_LOGGER, RESOURCE_TYPE_TOPIC,
};
use super::error_code;
use crate::context::Ctx;
use crate::partition::config_change::{self, IncrementalChange};
use crate::partition::topic_config::is_list_key;
use crate::security::acl::{Operation, ResourceType};
use crate::security::session::Session;

/// A broker resource's changes, checked as Kafka checks them, applied to its dynamic configs;
/// deletes of Kafka's reassignment throttles (never set here) are left out.
async fn alter_broker_incrementally(
    ctx: &Ctx,
    name: &str,
    validate_only: bool,
    changes: &[IncrementalChange],
) -> Result<(), Refusal> {
    config_change::check_incremental(changes)?;
    let kept = without_unset_deletes(changes.iter().map(|(key, op, _)| (key.as_str(), *op)))
        .collect::<Vec<&str>>();
    let changes: Vec<IncrementalChange> = changes
        .iter()
        .filter(|(key, _, _)| kept.contains(&key.as_str()))
        .cloned()
        .collect();
    let defaults = ctx.dynamic.static_config();
    alter_broker(ctx, name, validate_only, |current| {
        config_change::apply_incremental(
            current,
            &changes,
            |_| false,
            |key| defaults.value_text(key).flatten(),
        )
    })
    .await
}

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let access = ctx.access(session, header.request_api_key);
    let duplicates = duplicate_resources(
        request
            .resources
            .iter()
            .map(|resource| (resource.resource_type, resource.resource_name.as_str())),
    );
    let mut responses = Vec::with_capacity(request.resources.len());
    for (index, resource) in request.resources.into_iter().enumerate() {
        let name = resource.resource_name.to_string();
        let changes: Vec<IncrementalChange> = resource
            .configs
            .into_iter()
            .map(|config| {
                (
                    config.name.to_string(),
                    config.config_operation,
                    config.value.map(|value| value.to_string()),
                )
            })
            .collect();
        let outcome: Result<(), Refusal> = if duplicates.contains(&index) {
            Err(Refusal::duplicate_resource())
        } else {
            match resource.resource_type {
                RESOURCE_TYPE_TOPIC => {
                    if !access.allows(Operation::AlterConfigs, ResourceType::Topic, &name) {
                        Err(Refusal::code(error_code::TOPIC_AUTHORIZATION_FAILED))
                    } else {
                        let validate_only = request.validate_only;
                        alter_topic(ctx, &name, validate_only, move |current, defaults| {
                            config_change::apply_incremental(current, &changes, is_list_key, |key| {
                                defaults.value_of(key)
                            })
                        })
                        .await
                    }
                }
                RESOURCE_TYPE_BROKER | RESOURCE_TYPE_BROKER_LOGGER
                    if !access.allows_cluster(Operation::AlterConfigs) =>
                {
                    Err(Refusal::code(error_code::CLUSTER_AUTHORIZATION_FAILED))
                }
                RESOURCE_TYPE_BROKER => {
                    alter_broker_incrementally(ctx, &name, request.validate_only, &changes).await
                }
                RESOURCE_TYPE_BROKER_LOGGER => Err(Refusal::invalid_request(
                    "broker log levels cannot be changed at runtime: Skiff's log filter is set at start (RUST_LOG)",
                )),
                other => Err(Refusal::invalid_request(format!("Unknown resource type {other}"))),
            }
        };
        let (code, message) = match outcome {
            Ok(()) => (error_code::NONE, None),
            Err(refusal) => (refusal.code, refusal.message),
        };
        responses.push(
            AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message.map(StrBytes::from_string))
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name),
        );
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}
