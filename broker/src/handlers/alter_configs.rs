//! AlterConfigs (the legacy, whole-set variant of IncrementalAlterConfigs; kafka-python's
//! `alter_configs`): each topic resource's overrides become exactly the keys given, effective at
//! once and durable; validate_only checks without changing. A broker resource's dynamic configs
//! become exactly the keys given (what both alter handlers share, the duplicate-resource rule,
//! the topic and the broker paths, is `common::config_resources`). A topic needs
//! AlterConfigs on it (TOPIC_AUTHORIZATION_FAILED), a broker AlterConfigs on the cluster
//! (CLUSTER_AUTHORIZATION_FAILED).

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse, RequestHeader};
use kafka_protocol::protocol::StrBytes;

use super::common::config_resources::{
    alter_broker, alter_topic, duplicate_resources, Refusal, RESOURCE_TYPE_BROKER,
    RESOURCE_TYPE_TOPIC,
};
use super::error_code;
use crate::context::Ctx;
use crate::partition::config_change;
use crate::security::acl::{Operation, ResourceType};
use crate::security::session::Session;

/// A broker resource's dynamic configs become exactly the keys given (Kafka's AlterConfigs
/// replaces the whole set).
async fn alter_broker_whole(
    ctx: &Ctx,
    name: &str,
    validate_only: bool,
    changes: &[(String, Option<String>)],
) -> Result<(), Refusal> {
    config_change::check_whole(changes)?;
    alter_broker(ctx, name, validate_only, |_| {
        config_change::apply_whole(changes)
    })
    .await
}

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: AlterConfigsRequest,
) -> AlterConfigsResponse {
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
        let changes: Vec<(String, Option<String>)> = resource
            .configs
            .into_iter()
            .map(|config| {
                (
                    config.name.to_string(),
                    config.value.map(|value| value.to_string()),
                )
            })
            .collect();
        let outcome = if duplicates.contains(&index) {
            Err(Refusal::duplicate_resource())
        } else {
            match resource.resource_type {
                RESOURCE_TYPE_TOPIC => {
                    if !access.allows(Operation::AlterConfigs, ResourceType::Topic, &name) {
                        Err(Refusal::code(error_code::TOPIC_AUTHORIZATION_FAILED))
                    } else {
                        alter_topic(ctx, &name, request.validate_only, move |_, _| {
                            config_change::apply_whole(&changes)
                        })
                        .await
                    }
                }
                RESOURCE_TYPE_BROKER => {
                    if !access.allows_cluster(Operation::AlterConfigs) {
                        Err(Refusal::code(error_code::CLUSTER_AUTHORIZATION_FAILED))
                    } else {
                        alter_broker_whole(ctx, &name, request.validate_only, &changes).await
                    }
                }
                // The legacy API never had broker loggers (Kafka refuses them the same way).
                other => Err(Refusal::invalid_request(format!(
                    "Unknown resource type {other}"
                ))),
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
    AlterConfigsResponse::default().with_responses(responses)
}
