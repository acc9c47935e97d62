//! The config resources that DescribeConfigs, AlterConfigs and IncrementalAlterConfigs name, and
//! what those three share: Kafka's resource type and config source codes, the rule that a broker
//! resource names this broker (or is empty: the cluster-wide default), and the answer for a
//! broker config change, which Skiff cannot make at runtime (deleting one of Kafka's
//! reassignment throttles, which Skiff never sets, changes nothing and succeeds).
//!
//! Must never: change a config itself (topics change through `Topics`), or hold a handler's logic.

use crate::context::Ctx;
use crate::partition::config_change::{ConfigChangeError, ConfigOp};

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
}
