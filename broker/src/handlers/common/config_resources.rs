//! The config resources that DescribeConfigs, AlterConfigs and IncrementalAlterConfigs name, and
//! what those three share: Kafka's resource type and config source codes, the rule that a broker
//! resource names this broker (or is empty: the cluster-wide default), and the answer for a
//! broker config change, which Skiff cannot make at runtime (deleting one of Kafka's
//! reassignment throttles, which Skiff never sets, changes nothing and succeeds); and what both
//! alter handlers share: a resource's [`Refusal`], the duplicate-resource rule and the topic path
//! ([`alter_topic`]), which changes a topic's overrides through the metadata store.
//!
//! Must never: change a config but through the metadata store (`Cluster::alter_topic_configs`),
//! or hold one handler's logic.

use std::collections::{BTreeMap, BTreeSet};

use super::super::error_code;
use crate::context::Ctx;
use crate::partition::config_change::{ConfigChangeError, ConfigOp};
use crate::partition::topic_config::TopicConfig;
use crate::partition::topics::TopicError;

/// Kafka's `ConfigResource.Type` codes.
pub(crate) const RESOURCE_TYPE_TOPIC: i8 = 2;
pub(crate) const RESOURCE_TYPE_BROKER: i8 = 4;
pub(crate) const RESOURCE_TYPE_BROKER_LOGGER: i8 = 8;

/// Kafka's `DescribeConfigsResponse.ConfigSource` codes (DescribeConfigs v1+).
pub(crate) const SOURCE_DYNAMIC_TOPIC_CONFIG: i8 = 1;
pub(crate) const SOURCE_STATIC_BROKER_CONFIG: i8 = 4;
pub(crate) const SOURCE_DEFAULT_CONFIG: i8 = 5;

/// Kafka's dynamic broker throttles of partition reassignment, which `kafka-reassign-partitions
/// --verify` deletes from every broker of a finished reassignment. Skiff never sets them (its
/// reassignment throttle is the static `skiff.reassignment.throttle.bytes.per.second`), so a
/// DELETE of one deletes an unset dynamic config, which Kafka answers with success;
/// [`without_unset_deletes`] drops those.
pub(crate) const KAFKA_REASSIGNMENT_THROTTLE_KEYS: &[&str] = &[
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
];

/// The keys of broker config `changes` (IncrementalAlterConfigs' key, operation id) that change
/// something: DELETEs of [`KAFKA_REASSIGNMENT_THROTTLE_KEYS`], never set here, change nothing.
pub(crate) fn without_unset_deletes<'a>(
    changes: impl Iterator<Item = (&'a str, i8)> + 'a,
) -> impl Iterator<Item = &'a str> + 'a {
    changes
        .filter(|(key, op)| {
            ConfigOp::from_id(*op) != Some(ConfigOp::Delete)
                || !KAFKA_REASSIGNMENT_THROTTLE_KEYS.contains(key)
        })
        .map(|(key, _)| key)
}

/// Checks that a broker resource names this broker: empty (the cluster default) or this node's
/// id, with Kafka's messages (INVALID_REQUEST).
pub(crate) fn check_broker_name(ctx: &Ctx, name: &str) -> Result<(), ConfigChangeError> {
    if name.is_empty() {
        return Ok(());
    }
    let id: i32 = name.parse().map_err(|_| {
        ConfigChangeError::InvalidRequest(format!("Node id must be an integer, but it is: {name}"))
    })?;
    if id != ctx.config.node_id {
        return Err(ConfigChangeError::InvalidRequest(format!(
            "Unexpected broker id, expected {}, but received {name}",
            ctx.config.node_id
        )));
    }
    Ok(())
}

/// The answer to changing broker config `keys`: Skiff reads every broker key once, at start, so
/// none can change at runtime. A key Skiff knows is INVALID_REQUEST with Kafka's message for a
/// key that is not dynamically updatable (Kafka answers INVALID_REQUEST for those, KAFKA-13609);
/// a key it does not know is INVALID_CONFIG. No keys at all is a change that changes nothing.
pub(crate) fn change_broker_configs<'a>(
    ctx: &Ctx,
    name: &str,
    keys: impl Iterator<Item = &'a str>,
) -> Result<(), ConfigChangeError> {
    check_broker_name(ctx, name)?;
    let keys: Vec<&str> = keys.collect();
    if let Some(unknown) = keys.iter().find(|key| ctx.config.value_text(key).is_none()) {
        return Err(ConfigChangeError::InvalidConfig(format!(
            "Unknown broker config {unknown}"
        )));
    }
    if keys.is_empty() {
        return Ok(());
    }
    Err(ConfigChangeError::InvalidRequest(format!(
        "Cannot update these configs dynamically: {}. Skiff reads broker configs at start only: \
         set them in the config file (or with --set) and restart the broker",
        keys.join(", ")
    )))
}

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
        ctx.topics.resolve_config(name, &next)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_deletes_of_kafkas_reassignment_throttles_are_dropped() {
        let changes = [
            ("leader.replication.throttled.rate", 1),
            ("follower.replication.throttled.rate", 0), // a SET stays: it would change something
            ("replica.alter.log.dirs.io.max.bytes.per.second", 1),
            ("log.retention.ms", 1), // a DELETE of another key stays
        ];
        let kept: Vec<&str> = without_unset_deletes(changes.into_iter()).collect();
        assert_eq!(
            kept,
            ["follower.replication.throttled.rate", "log.retention.ms"]
        );
    }

    #[test]
    fn every_copy_of_a_repeated_resource_is_refused() {
        let duplicates = duplicate_resources([(2, "a"), (2, "b"), (4, "a"), (2, "a")].into_iter());
        assert_eq!(duplicates, BTreeSet::from([0, 3]));
    }
}
