//! DescribeConfigs for topics and for this broker. A topic shows every topic-level key Skiff
//! understands with its effective value and source (its override: DYNAMIC_TOPIC_CONFIG; else its
//! broker key's: STATIC_BROKER_CONFIG when set in the config file, DEFAULT_CONFIG otherwise); with
//! `include_synonyms` (v1+) each carries Kafka's synonyms, the override first, then the broker key
//! it defaults to. A broker (named by this node's id) shows every broker key by Kafka's name,
//! sensitive values hidden, read-only unless it is a dynamic key (`crate::dynamic`), with its
//! source and synonyms as Kafka gives them (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
//! STATIC_BROKER_CONFIG, DEFAULT_CONFIG, most specific first); the empty broker name (the
//! cluster's dynamic defaults) shows the keys set there. A topic needs DescribeConfigs on it
//! (TOPIC_AUTHORIZATION_FAILED), a broker DescribeConfigs on the cluster
//! (CLUSTER_AUTHORIZATION_FAILED).

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse, RequestHeader};
use kafka_protocol::protocol::StrBytes;

use super::common::config_resources::{
    RESOURCE_TYPE_BROKER, RESOURCE_TYPE_BROKER_LOGGER, RESOURCE_TYPE_TOPIC, SOURCE_DEFAULT_CONFIG,
    SOURCE_DYNAMIC_TOPIC_CONFIG,
};
use super::error_code;
use crate::context::Ctx;
use crate::dynamic::{is_dynamic, Source};
use crate::partition::topic_config::{broker_synonym, TopicConfig, TOPIC_CONFIG_KEYS};
use crate::security::acl::{Operation, ResourceType};
use crate::security::session::Session;

/// First version naming each entry's source and synonyms (v0 has `is_default` only).
const CONFIG_SOURCE_VERSION_MIN: i16 = 1;
/// First version with documentation.
const DOCUMENTATION_VERSION_MIN: i16 = 3;

/// What the request asks about each entry.
struct Wanted<'a> {
    keys: Option<&'a [StrBytes]>,
    version: i16,
    synonyms: bool,
    documentation: bool,
}

impl Wanted<'_> {
    fn key(&self, key: &str) -> bool {
        self.keys
            .is_none_or(|keys| keys.iter().any(|wanted| wanted.as_str() == key))
    }

    /// One entry: `synonyms` in Kafka's order (most specific first), the first one being the
    /// value's source.
    fn entry(
        &self,
        name: &str,
        value: Option<String>,
        read_only: bool,
        sensitive: bool,
        synonyms: Vec<(String, Option<String>, i8)>,
        documentation: Option<&str>,
    ) -> DescribeConfigsResourceResult {
        let source = synonyms
            .first()
            .map_or(SOURCE_DEFAULT_CONFIG, |(_, _, source)| *source);
        let hide = |value: Option<String>| if sensitive { None } else { value };
        let mut entry = DescribeConfigsResourceResult::default()
            .with_name(StrBytes::from_string(name.to_owned()))
            .with_value(hide(value).map(StrBytes::from_string))
            .with_read_only(read_only)
            .with_is_sensitive(sensitive);
        if self.version < CONFIG_SOURCE_VERSION_MIN {
            return entry.with_is_default(source == SOURCE_DEFAULT_CONFIG);
        }
        entry = entry.with_config_source(source);
        if self.synonyms {
            entry = entry.with_synonyms(
                synonyms
                    .into_iter()
                    .map(|(name, value, source)| {
                        DescribeConfigsSynonym::default()
                            .with_name(StrBytes::from_string(name))
                            .with_value(hide(value).map(StrBytes::from_string))
                            .with_source(source)
                    })
                    .collect(),
            );
        }
        if self.version >= DOCUMENTATION_VERSION_MIN {
            entry = entry.with_documentation(
                documentation
                    .filter(|_| self.documentation)
                    .map(|text| StrBytes::from_string(text.to_owned())),
            );
        }
        entry
    }
}

/// Whether a broker key holds a secret that DescribeConfigs must not show: Kafka's PASSWORD-typed
/// keys (`*.password`, `sasl.jaas.config`, the PEM key and chain given inline).
fn is_sensitive(key: &str) -> bool {
    key.ends_with(".password")
        || matches!(
            key,
            "sasl.jaas.config"
                | "ssl.keystore.key"
                | "ssl.keystore.certificate.chain"
                | "ssl.truststore.certificates"
        )
}

/// The broker key `key`'s synonyms, most specific first: its dynamic values (this broker's,
/// then the cluster default), then the static or default one.
fn broker_key_synonyms(
    ctx: &Ctx,
    key: &str,
    fallback: Option<String>,
) -> Vec<(String, Option<String>, i8)> {
    let mut synonyms: Vec<(String, Option<String>, i8)> = ctx
        .dynamic
        .synonyms(key)
        .into_iter()
        .map(|(name, value, source)| (name, value, source.code()))
        .collect();
    // A broker key Skiff does not have (log.message.timestamp.type, compression.type) stands at
    // Kafka's default, which is the topic default Skiff applies.
    if let Some(last) = synonyms.last_mut() {
        if last.1.is_none() {
            last.1 = fallback;
            last.2 = SOURCE_DEFAULT_CONFIG;
        }
    }
    synonyms
}

fn describe_topic(
    ctx: &Ctx,
    resource: &DescribeConfigsResource,
    wanted: &Wanted<'_>,
) -> Result<Vec<DescribeConfigsResourceResult>, (i16, Option<String>)> {
    let Some(topic) = ctx.topics.get(resource.resource_name.as_str()) else {
        return Err((error_code::UNKNOWN_TOPIC_OR_PARTITION, None));
    };
    // The value each key would have without the topic's overrides.
    let defaults = TopicConfig::resolve(&ctx.topics.broker_config(), &BTreeMap::new()).ok();
    Ok(TOPIC_CONFIG_KEYS
        .iter()
        .filter(|key| wanted.key(key))
        .map(|key| {
            let mut synonyms = Vec::new();
            if let Some(value) = topic.record.configs.get(*key) {
                synonyms.push((
                    (*key).to_owned(),
                    Some(value.clone()),
                    SOURCE_DYNAMIC_TOPIC_CONFIG,
                ));
            }
            if let Some(broker_key) = broker_synonym(key) {
                let fallback = defaults.as_ref().and_then(|config| config.value_of(key));
                synonyms.extend(broker_key_synonyms(ctx, broker_key, fallback));
            }
            wanted.entry(
                key,
                topic.config.value_of(key),
                false,
                false,
                synonyms,
                None,
            )
        })
        .collect())
}

fn describe_broker(
    ctx: &Ctx,
    resource: &DescribeConfigsResource,
    wanted: &Wanted<'_>,
) -> Result<Vec<DescribeConfigsResourceResult>, (i16, Option<String>)> {
    let name = resource.resource_name.as_str();
    let invalid = |message: String| (error_code::INVALID_REQUEST, Some(message));
    if name.is_empty() {
        // The cluster-wide dynamic defaults: the keys set there, and only those (as Kafka).
        let defaults = ctx.dynamic.layers().default;
        return Ok(defaults
            .into_iter()
            .filter(|(key, _)| wanted.key(key))
            .map(|(key, value)| {
                let source = Source::DynamicDefault.code();
                let synonyms = vec![(key.clone(), Some(value.clone()), source)];
                wanted.entry(&key, Some(value), false, is_sensitive(&key), synonyms, None)
            })
            .collect());
    }
    let id: i32 = name
        .parse()
        .map_err(|_| invalid(format!("Broker id must be an integer, but it is: {name}")))?;
    if id != ctx.config.node_id {
        return Err(invalid(format!(
            "Unexpected broker id, expected {} or empty string, but received {name}",
            ctx.config.node_id
        )));
    }
    let listener_keystores = listener_keystore_keys(ctx);
    let keys = crate::config::keys()
        .into_iter()
        .map(|(key, _, documentation)| (key.to_owned(), Some(documentation)))
        .chain(listener_keystores.into_iter().map(|key| (key, None)));
    Ok(keys
        .filter(|(key, _)| wanted.key(key))
        .map(|(key, documentation)| {
            let key = key.as_str();
            // Kafka's synonyms of a broker key: its dynamic values (this broker's, then the
            // cluster default), then the static one; the first is the value in force.
            let synonyms: Vec<(String, Option<String>, i8)> = ctx
                .dynamic
                .synonyms(key)
                .into_iter()
                .map(|(name, value, source)| (name, value, source.code()))
                .collect();
            let value = synonyms.first().and_then(|(_, value, _)| value.clone());
            wanted.entry(
                key,
                value,
                !is_dynamic(key),
                is_sensitive(key),
                synonyms,
                documentation,
            )
        })
        .collect())
}

/// The `listener.name.<listener>.ssl.keystore.location` keys set on this broker (in its file or
/// dynamically): the key table does not list per-listener keys.
fn listener_keystore_keys(ctx: &Ctx) -> Vec<String> {
    let layers = ctx.dynamic.layers();
    let mut keys: std::collections::BTreeSet<String> = layers
        .broker
        .into_keys()
        .filter(|key| crate::config::listener_keystore_listener(key).is_some())
        .collect();
    keys.extend(
        ctx.dynamic
            .static_config()
            .listener_keystores
            .keys()
            .map(|listener| format!("listener.name.{listener}.ssl.keystore.location")),
    );
    keys.into_iter().collect()
}

pub(crate) fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let access = ctx.access(session, header.request_api_key);
    let results = request
        .resources
        .iter()
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
            let wanted = Wanted {
                keys: resource.configuration_keys.as_deref(),
                version: header.request_api_version,
                synonyms: request.include_synonyms,
                documentation: request.include_documentation,
            };
            let described = match resource.resource_type {
                RESOURCE_TYPE_TOPIC => describe_topic(ctx, resource, &wanted),
                RESOURCE_TYPE_BROKER => describe_broker(ctx, resource, &wanted),
                RESOURCE_TYPE_BROKER_LOGGER => Err((
                    error_code::INVALID_REQUEST,
                    Some("broker loggers are not configurable: Skiff's log filter is set at start (RUST_LOG)".to_owned()),
                )),
                other => Err((
                    error_code::INVALID_REQUEST,
                    Some(format!("Unsupported resource type {other}")),
                )),
            };
            match described {
                Ok(configs) => result
                    .with_error_code(error_code::NONE)
                    .with_configs(configs),
                Err((code, message)) => result
                    .with_error_code(code)
                    .with_error_message(message.map(StrBytes::from_string)),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_keys_are_sensitive_and_paths_are_not() {
        assert!(is_sensitive("ssl.keystore.password"));
        assert!(is_sensitive("sasl.jaas.config"));
        assert!(!is_sensitive("ssl.keystore.location"));
        assert!(!is_sensitive("log.dirs"));
    }
}
