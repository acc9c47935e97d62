//! The config resources that DescribeConfigs, AlterConfigs and IncrementalAlterConfigs name, and
//! what those three share: Kafka's resource type and config source codes, the rule that a broker
//! resource names this broker (or is empty: the cluster-wide default); and what both alter
//! handlers share: a resource's [`Refusal`], the duplicate-resource rule, the topic path
//! ([`alter_topic`]), which changes a topic's overrides through the metadata store, and the broker
//! path ([`alter_broker`]), which changes the dynamic broker configs there (deleting one of
//! Kafka's reassignment throttles, which Skiff never sets, changes nothing and succeeds).
//!
//! Must never: change a config but through the metadata store (`Cluster::alter_topic_configs`,
//! `crate::dynamic::store`), or hold one handler's logic.

use std::collections::{BTreeMap, BTreeSet};

use super::super::error_code;
use crate::context::Ctx;
use crate::dynamic::store::{self as dynamic_store, Scope};
use crate::partition::config_change::{ConfigChangeError, ConfigOp};
use crate::partition::topic_config::TopicConfig;
use crate::partition::topics::TopicError;

/// Kafka's `ConfigResource.Type` codes.
pub(crate) const RESOURCE_TYPE_TOPIC: i8 = 2;
pub(crate) const RESOURCE_TYPE_BROKER: i8 = 4;
pub(crate) const RESOURCE_TYPE_BROKER_LOGGER: i8 = 8;

/// Kafka's `DescribeConfigsResponse.ConfigSource` codes (DescribeConfigs v1+).
pub(crate) const SOURCE_DYNAMIC_TOPIC_CONFIG: i8 = 1;
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

/// Changes a broker resource's dynamic configs (the cluster default for the empty name, else
/// this broker's own) to what `change` makes of the current ones, through the metadata store;
/// every broker applies them from the store's watch (`crate::dynamic`). A key Skiff does not know
/// is INVALID_CONFIG; a known key that cannot change at runtime is INVALID_REQUEST with Kafka's
/// message naming it (Kafka answers INVALID_REQUEST for those, KAFKA-13609); a value the key's
/// bound or the rules between keys refuse is INVALID_CONFIG; the store out of reach is
/// REQUEST_TIMED_OUT. `change` may run again on a newer record (another writer came first).
pub(crate) async fn alter_broker(
    ctx: &Ctx,
    name: &str,
    validate_only: bool,
    change: impl Fn(&BTreeMap<String, String>) -> Result<BTreeMap<String, String>, ConfigChangeError>,
) -> Result<(), Refusal> {
    check_broker_name(ctx, name)?;
    let scope = if name.is_empty() {
        Scope::Default
    } else {
        Scope::Broker(ctx.config.node_id)
    };
    let mut layers = ctx.dynamic.layers();
    let current = match scope {
        Scope::Default => &mut layers.default,
        Scope::Broker(_) => &mut layers.broker,
    };
    let next = change(current)?;
    check_dynamic_keys(ctx, &next)?;
    if scope == Scope::Default {
        check_cluster_wide(&next)?;
    }
    *current = next.clone();
    let effective = crate::dynamic::layered(ctx.dynamic.static_config(), &layers)
        .map_err(|error| ConfigChangeError::InvalidConfig(error.to_string()))?;
    check_live_changes(ctx, &effective)?;
    if validate_only {
        return Ok(());
    }
    dynamic_store::alter(
        ctx.cluster.store(),
        ctx.cluster.store_root(),
        scope,
        |stored| change(stored).unwrap_or_else(|_| next.clone()),
    )
    .await
    .map_err(|error| Refusal {
        code: error_code::REQUEST_TIMED_OUT,
        message: Some(error.to_string()),
    })
}

/// No key of the cluster default's `values` may only be set per broker (INVALID_REQUEST with
/// Kafka's message naming them).
fn check_cluster_wide(values: &BTreeMap<String, String>) -> Result<(), ConfigChangeError> {
    let per_broker: Vec<&str> = values
        .keys()
        .map(String::as_str)
        .filter(|key| crate::dynamic::is_per_broker_only(key))
        .collect();
    if per_broker.is_empty() {
        return Ok(());
    }
    Err(ConfigChangeError::InvalidRequest(format!(
        "Cannot update these configs at default cluster level, broker id must be specified: {}",
        per_broker.join(", ")
    )))
}

/// What the owners of live values refuse in `effective` (the config the change would make on
/// this broker), with Kafka's messages (INVALID_CONFIG): a cleaner thread count beyond half or
/// double the current one, a keystore a TLS listener could not serve.
fn check_live_changes(
    ctx: &Ctx,
    effective: &crate::config::Config,
) -> Result<(), ConfigChangeError> {
    crate::dynamic::check_cleaner_threads_change(&ctx.dynamic.effective(), effective)
        .map_err(ConfigChangeError::InvalidConfig)?;
    for acceptor in &ctx.tls_listeners {
        acceptor.check(effective).map_err(|reason| {
            ConfigChangeError::InvalidConfig(format!(
                "Validation of dynamic config update of SSLFactory failed for listener {}: {reason}",
                acceptor.listener()
            ))
        })?;
    }
    Ok(())
}

/// Every key of `values` is a broker key Skiff knows (INVALID_CONFIG) and may change at runtime
/// (INVALID_REQUEST naming those that cannot).
fn check_dynamic_keys(
    ctx: &Ctx,
    values: &BTreeMap<String, String>,
) -> Result<(), ConfigChangeError> {
    if let Some(unknown) = values
        .keys()
        .find(|key| ctx.config.value_text(key).is_none())
    {
        return Err(ConfigChangeError::InvalidConfig(format!(
            "Unknown broker config {unknown}"
        )));
    }
    let fixed: Vec<&str> = values
        .keys()
        .map(String::as_str)
        .filter(|key| !crate::dynamic::is_dynamic(key))
        .collect();
    if fixed.is_empty() {
        return Ok(());
    }
    if fixed.contains(&"ssl.keystore.location") {
        return Err(ConfigChangeError::InvalidRequest(
            "These security configs can be dynamically updated only per-listener using the \
             listener prefix: ssl.keystore.location (set listener.name.<listener>.ssl.keystore.location \
             for one broker)"
                .to_owned(),
        ));
    }
    Err(ConfigChangeError::InvalidRequest(format!(
        "Cannot update these configs dynamically: {}. The broker configs that change at runtime \
         are {}; set the others in the config file (or with --set) and restart the broker",
        fixed.join(", "),
        crate::dynamic::dynamic_keys()
            .collect::<Vec<_>>()
            .join(", ")
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
