//! DescribeConfigs for topics: every topic-level key Skiff understands with its effective value,
//! marked default or not. Broker resources get their error per resource. A topic needs
//! DescribeConfigs on it (TOPIC_AUTHORIZATION_FAILED), a broker DescribeConfigs on the cluster
//! (CLUSTER_AUTHORIZATION_FAILED).

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse, RequestHeader};
use kafka_protocol::protocol::StrBytes;

use super::error_code;
use crate::context::Ctx;
use crate::net::session::Session;
use crate::partition::topic_config::TOPIC_CONFIG_KEYS;
use crate::security::acl::{Operation, ResourceType};

/// Kafka's resource type code for topics.
const RESOURCE_TYPE_TOPIC: i8 = 2;
/// Kafka's resource type codes for a broker and a broker's loggers.
const RESOURCE_TYPE_BROKER: i8 = 4;
const RESOURCE_TYPE_BROKER_LOGGER: i8 = 8;
/// Config sources as DescribeConfigs v1+ reports them.
const SOURCE_TOPIC: i8 = 1;
const SOURCE_DEFAULT: i8 = 5;

pub(crate) fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let access = ctx.access(session, header.request_api_key);
    let results = request
        .resources
        .into_iter()
        .map(|resource| {
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            let refused = match resource.resource_type {
                RESOURCE_TYPE_TOPIC => (!access.allows(
                    Operation::DescribeConfigs,
                    ResourceType::Topic,
                    resource.resource_name.as_str(),
                ))
                .then_some(error_code::TOPIC_AUTHORIZATION_FAILED),
                RESOURCE_TYPE_BROKER | RESOURCE_TYPE_BROKER_LOGGER => (!access
                    .allows_cluster(Operation::DescribeConfigs))
                .then_some(error_code::CLUSTER_AUTHORIZATION_FAILED),
                _ => None,
            };
            if let Some(code) = refused {
                return result.with_error_code(code);
            }
            if resource.resource_type != RESOURCE_TYPE_TOPIC {
                return result
                    .with_error_code(error_code::INVALID_REQUEST)
                    .with_error_message(Some(StrBytes::from_static_str(
                        "only topic configs can be described",
                    )));
            }
            let Some(topic) = ctx.topics.get(resource.resource_name.as_str()) else {
                return result.with_error_code(error_code::UNKNOWN_TOPIC_OR_PARTITION);
            };
            let wanted = |key: &str| {
                resource
                    .configuration_keys
                    .as_ref()
                    .is_none_or(|keys| keys.iter().any(|wanted| wanted.as_str() == key))
            };
            let configs = TOPIC_CONFIG_KEYS
                .iter()
                .filter(|key| wanted(key))
                .map(|key| {
                    let overridden = topic.record.configs.contains_key(*key);
                    let result = DescribeConfigsResourceResult::default()
                        .with_name(StrBytes::from_static_str(key))
                        .with_value(topic.config.value_of(key).map(StrBytes::from_string));
                    // v0 says "is default"; v1+ name the source instead.
                    if header.request_api_version == 0 {
                        result.with_is_default(!overridden)
                    } else {
                        result.with_config_source(if overridden {
                            SOURCE_TOPIC
                        } else {
                            SOURCE_DEFAULT
                        })
                    }
                })
                .collect();
            result
                .with_error_code(error_code::NONE)
                .with_configs(configs)
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}
