//! AlterConfigs (the legacy, whole-set variant of IncrementalAlterConfigs; kafka-python's
//! `alter_configs`): each topic resource's overrides become exactly the keys given, effective at
//! once and durable; validate_only checks without changing. Broker resources are answered as
//! Kafka answers a key it cannot change dynamically. Also holds what both alter handlers share:
//! the duplicate-resource rule and the topic path. A topic needs AlterConfigs on it
//! (TOPIC_AUTHORIZATION_FAILED), a broker AlterConfigs on the cluster
//! (CLUSTER_AUTHORIZATION_FAILED).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse, RequestHeader};
use kafka_protocol::protocol::StrBytes;

use super::config_resources::{change_broker_configs, RESOURCE_TYPE_BROKER, RESOURCE_TYPE_TOPIC};
use super::error_code;
use crate::context::Ctx;
use crate::net::session::Session;
use crate::partition::config_change::{self, ConfigChangeError};
use crate::partition::topic_config::TopicConfig;
use crate::partition::topics::TopicError;
use crate::security::acl::{Operation, ResourceType};

/// A resource's error code and message.
pub(crate) struct Refusal {
    pub(crate) code: i16,
    pub(crate) message: Option<String>,
}

impl Refusal {
    pub(crate) fn code(code: i16) -> Self {
        Self {
            code,
            message: None,
        }
    }

    pub(crate) fn invalid_request(message: impl Into<String>) -> Self {
        Self {
            code: error_code::INVALID_REQUEST,
            message: Some(message.into()),
        }
    }

    pub(crate) fn duplicate_resource() -> Self {
        Self::invalid_request("Each resource must appear at most once.")
    }
}

impl From<ConfigChangeError> for Refusal {
    fn from(error: ConfigChangeError) -> Self {
        Self {
            code: error.code(),
            message: Some(error.to_string()),
        }
    }
}

impl From<TopicError> for Refusal {
    fn from(error: TopicError) -> Self {
        Self {
            code: error.code(),
            message: Some(error.to_string()),
        }
    }
}

/// The indexes of resources named more than once (Kafka refuses every copy).
pub(crate) fn duplicate_resources<'a>(
    resources: impl Iterator<Item = (i8, &'a str)>,
) -> BTreeSet<usize> {
    let mut first_seen: BTreeMap<(i8, &str), usize> = BTreeMap::new();
    let mut duplicates = BTreeSet::new();
    for (index, resource) in resources.enumerate() {
        if let Some(first) = first_seen.insert(resource, index) {
            duplicates.insert(first);
            duplicates.insert(index);
        }
    }
    duplicates
}

/// How long an alter waits for the store and this broker's image (the alter requests carry no
/// timeout of their own).
const ALTER_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Changes topic `name`'s overrides to what `change` makes of the current ones (given the broker
/// defaults), validated as a creation would be, through the metadata store; every replica's logs
/// take the new settings when their broker's image shows them. `change` may run more than once
/// (again on the newer overrides when another writer changed the topic first).
pub(crate) async fn alter_topic(
    ctx: &Ctx,
    name: &str,
    validate_only: bool,
    change: impl Fn(
        &BTreeMap<String, String>,
        &TopicConfig,
    ) -> Result<BTreeMap<String, String>, ConfigChangeError>,
) -> Result<(), Refusal> {
    let defaults = TopicConfig::resolve(&ctx.config, &BTreeMap::new()).map_err(TopicError::from)?;
    let topic = ctx.topics.get(name).ok_or(TopicError::Unknown)?;
    let altered = |current: &BTreeMap<String, String>| -> Result<_, TopicError> {
        let next = change(current, &defaults)?;
        ctx.topics.resolve_config(&next)?;
        Ok(next)
    };
    if validate_only {
        altered(&topic.record.configs)?;
        return Ok(());
    }
    ctx.cluster
        .alter_topic_configs(name, ALTER_WAIT, |current| {
            let next = altered(current)?;
            Ok((next != *current).then_some(next))
        })
        .await
        .map_err(Refusal::from)
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
                        config_change::check_whole(&changes)
                            .and_then(|()| {
                                change_broker_configs(
                                    ctx,
                                    &name,
                                    changes.iter().map(|(key, _)| key.as_str()),
                                )
                            })
                            .map_err(Refusal::from)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_copy_of_a_repeated_resource_is_refused() {
        let duplicates = duplicate_resources([(2, "a"), (2, "b"), (4, "a"), (2, "a")].into_iter());
        assert_eq!(duplicates, BTreeSet::from([0, 3]));
    }
}
