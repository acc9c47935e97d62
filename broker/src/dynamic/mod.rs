//! Dynamic broker configs, as Kafka's `DynamicBrokerConfig` keeps them: the keys Kafka marks
//! dynamic that Skiff has ([`DYNAMIC_KEYS`]) may be set for the whole cluster (the default, the
//! empty broker name) or for one broker, in the metadata store (`R/broker-configs/<default|id>`,
//! [`store`]); every broker follows both records it cares about and its owners apply the
//! effective values live ([`DynamicConfigs::subscribe`]). Precedence, most specific first, as in
//! Kafka: DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG (the file or
//! `--set`), DEFAULT_CONFIG.
//!
//! A value is checked as a start-up value is (the key's bound, the rules between keys) on the
//! static config with the dynamic layers over it; a stored value this broker refuses (written by
//! a newer broker, or made invalid by this broker's file) is logged and left out.
//!
//! Must never: apply a key that is not in [`DYNAMIC_KEYS`], or block the request path on the store.

pub(crate) mod log_defaults;
pub(crate) mod store;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use tokio::sync::watch;

use crate::config::Config;

/// The keys that change without a restart, each applied live by its owner: `max.connections`
/// (`crate::net::admission`), the reassignment throttle (`crate::replication`), the log cleaner's
/// I/O throttle, backoff, thread count and buffer sizes (`crate::ops::cleaner`, which restarts
/// its threads for the last three, as Kafka does); and [`LOG_DEFAULT_KEYS`] ([`log_defaults`]).
pub(crate) const DYNAMIC_KEYS: &[&str] = &[
    "max.connections",
    "skiff.reassignment.throttle.bytes.per.second",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms",
    "log.cleaner.threads",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.size",
    "log.cleaner.io.buffer.load.factor",
];

/// The broker keys that are defaults of topic configs (Kafka's `DynamicLogConfig`: every broker
/// synonym of a topic key is dynamic), the index interval, and the data directory's sync
/// threads; followed by [`log_defaults`].
pub(crate) const LOG_DEFAULT_KEYS: &[&str] = &[
    "log.cleanup.policy",
    "log.cleaner.delete.retention.ms",
    "log.cleaner.max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio",
    "log.cleaner.min.compaction.lag.ms",
    "log.flush.interval.messages",
    "log.flush.interval.ms",
    "log.index.interval.bytes",
    "log.message.downconversion.enable",
    "log.retention.bytes",
    "log.retention.ms",
    "log.roll.ms",
    "log.segment.bytes",
    "message.max.bytes",
    "min.insync.replicas",
    "num.recovery.threads.per.data.dir",
    "skiff.legacy.isolation.level",
    "unclean.leader.election.enable",
];

/// Every dynamic key, for messages.
pub(crate) fn dynamic_keys() -> impl Iterator<Item = &'static str> {
    DYNAMIC_KEYS.iter().chain(LOG_DEFAULT_KEYS).copied()
}

/// Whether `key` may change at runtime.
pub(crate) fn is_dynamic(key: &str) -> bool {
    dynamic_keys().any(|dynamic| dynamic == key) || is_per_broker_only(key)
}

/// Whether `key` may be set for one broker only, never as the cluster default: a listener's
/// keystore (`listener.name.<listener>.ssl.keystore.location`, `crate::tls::live`), as in
/// Kafka, where each broker has its own certificate.
pub(crate) fn is_per_broker_only(key: &str) -> bool {
    crate::config::listener_keystore_listener(key).is_some()
}

/// Kafka's rule for a live change of `log.cleaner.threads` (`LogCleaner.validateReconfiguration`):
/// at least 1, no fewer than half and no more than double the threads running now.
pub(crate) fn check_cleaner_threads_change(current: &Config, next: &Config) -> Result<(), String> {
    let (now, wanted) = (current.log_cleaner_threads, next.log_cleaner_threads);
    if wanted < 1 {
        return Err("Log cleaner threads should be at least 1".to_owned());
    }
    if wanted < now / 2 {
        return Err(format!(
            "Log cleaner threads cannot be reduced to less than half the current value {now}"
        ));
    }
    if wanted > now.saturating_mul(2) {
        return Err(format!(
            "Log cleaner threads cannot be increased to more than double the current value {now}"
        ));
    }
    Ok(())
}

/// Kafka's config source codes a broker key can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// Set for this broker in the store.
    DynamicBroker,
    /// Set for every broker (the cluster default) in the store.
    DynamicDefault,
    /// Set in the config file or with `--set`.
    Static,
    /// Skiff's default.
    Default,
}

impl Source {
    /// Kafka's `ConfigSource` id.
    pub(crate) fn code(self) -> i8 {
        match self {
            Source::DynamicBroker => 2,
            Source::DynamicDefault => 3,
            Source::Static => 4,
            Source::Default => 5,
        }
    }
}

/// The two dynamic layers a broker applies: the cluster default and its own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Layers {
    pub(crate) default: BTreeMap<String, String>,
    pub(crate) broker: BTreeMap<String, String>,
}

/// Why a dynamic value cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DynamicConfigError {
    /// The key is not one of [`DYNAMIC_KEYS`].
    #[error("Cannot update these configs dynamically: {0}")]
    NotDynamic(String),
    /// The value breaks the key's bound or a rule between keys.
    #[error(transparent)]
    Invalid(#[from] crate::config::ConfigError),
}

/// `base` with `layers` over it (the default first, then the broker's own), checked.
pub(crate) fn layered(base: &Config, layers: &Layers) -> Result<Config, DynamicConfigError> {
    let mut config = base.clone();
    for (key, value) in layers.default.iter().chain(&layers.broker) {
        if !is_dynamic(key) {
            return Err(DynamicConfigError::NotDynamic(key.clone()));
        }
        config.apply_override(&format!("{key}={value}"))?;
    }
    config.validate()?;
    Ok(config)
}

/// The broker's dynamic configs: the layers last applied from the store and the effective config
/// they make, which owners of dynamic keys follow.
#[derive(Debug)]
pub(crate) struct DynamicConfigs {
    node_id: i32,
    static_config: Arc<Config>,
    layers: RwLock<Layers>,
    effective: watch::Sender<Arc<Config>>,
}

impl DynamicConfigs {
    /// No dynamic values yet: the effective config is the static one.
    pub(crate) fn new(static_config: Arc<Config>) -> Self {
        Self {
            node_id: static_config.node_id,
            effective: watch::channel(static_config.clone()).0,
            static_config,
            layers: RwLock::new(Layers::default()),
        }
    }

    /// This broker's `node.id`.
    pub(crate) fn node_id(&self) -> i32 {
        self.node_id
    }

    /// The config as started (file and `--set`), under every dynamic value.
    pub(crate) fn static_config(&self) -> &Config {
        &self.static_config
    }

    /// The effective config now.
    pub(crate) fn effective(&self) -> Arc<Config> {
        self.effective.borrow().clone()
    }

    /// The effective config now, and each later one.
    pub(crate) fn subscribe(&self) -> watch::Receiver<Arc<Config>> {
        self.effective.subscribe()
    }

    /// The layers in force.
    pub(crate) fn layers(&self) -> Layers {
        self.layers
            .read()
            .map(|layers| layers.clone())
            .unwrap_or_default()
    }

    /// Applies the layers read from the store. A value this broker refuses is left out (and
    /// logged), the others apply.
    pub(crate) fn apply(&self, wanted: Layers) {
        let mut layers = wanted;
        let effective = loop {
            match layered(&self.static_config, &layers) {
                Ok(config) => break config,
                Err(error) => {
                    tracing::warn!(%error, "dynamic broker config refused; applying the others");
                    // Leave out the most specific value that fails on its own, then try again.
                    let Some(bad) = first_bad(&self.static_config, &layers) else {
                        break (*self.static_config).clone();
                    };
                    layers.default.remove(&bad);
                    layers.broker.remove(&bad);
                }
            }
        };
        if let Ok(mut current) = self.layers.write() {
            *current = layers;
        }
        self.effective.send_replace(Arc::new(effective));
    }

    /// Where the value of `key` comes from, with its synonyms in Kafka's order (most specific
    /// first): (name, value, source).
    pub(crate) fn synonyms(&self, key: &str) -> Vec<(String, Option<String>, Source)> {
        let layers = self.layers();
        let mut synonyms = Vec::new();
        if let Some(value) = layers.broker.get(key) {
            synonyms.push((key.to_owned(), Some(value.clone()), Source::DynamicBroker));
        }
        if let Some(value) = layers.default.get(key) {
            synonyms.push((key.to_owned(), Some(value.clone()), Source::DynamicDefault));
        }
        let value = self.static_config.value_text(key).flatten();
        let source = if self.static_config.explicitly_set.contains(key) {
            Source::Static
        } else {
            Source::Default
        };
        synonyms.push((key.to_owned(), value, source));
        synonyms
    }
}

/// A key of `layers` whose value alone (over the static config) is refused.
fn first_bad(base: &Config, layers: &Layers) -> Option<String> {
    layers
        .broker
        .iter()
        .chain(&layers.default)
        .find(|(key, value)| {
            let single = Layers {
                default: BTreeMap::new(),
                broker: BTreeMap::from([((*key).clone(), (*value).clone())]),
            };
            layered(base, &single).is_err()
        })
        .map(|(key, _)| key.clone())
}

/// Makes the broker's dynamic configs and starts following the store.
pub(crate) fn start(
    config: Arc<Config>,
    cluster: &crate::cluster::Cluster,
    shutdown: watch::Receiver<bool>,
) -> Arc<DynamicConfigs> {
    let dynamic = Arc::new(DynamicConfigs::new(config));
    tokio::spawn(store::follow(
        cluster.store().clone(),
        cluster.store_root().to_owned(),
        dynamic.clone(),
        shutdown,
    ));
    dynamic
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layers(default: &[(&str, &str)], broker: &[(&str, &str)]) -> Layers {
        let map = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        Layers {
            default: map(default),
            broker: map(broker),
        }
    }

    #[test]
    fn the_broker_layer_wins_over_the_default_which_wins_over_the_file() {
        let mut file = Config::default();
        file.apply_override("max.connections=100").unwrap();
        let dynamic = DynamicConfigs::new(Arc::new(file));
        let effective = dynamic.subscribe();
        dynamic.apply(layers(&[("max.connections", "200")], &[]));
        assert_eq!(effective.borrow().max_connections, 200);
        dynamic.apply(layers(
            &[("max.connections", "200")],
            &[("max.connections", "300")],
        ));
        assert_eq!(effective.borrow().max_connections, 300);
        let sources: Vec<i8> = dynamic
            .synonyms("max.connections")
            .iter()
            .map(|(_, _, source)| source.code())
            .collect();
        assert_eq!(sources, vec![2, 3, 4]);
        dynamic.apply(Layers::default());
        assert_eq!(effective.borrow().max_connections, 100);
    }

    #[test]
    fn a_refused_value_is_left_out_and_the_rest_applies() {
        let dynamic = DynamicConfigs::new(Arc::new(Config::default()));
        dynamic.apply(layers(
            &[
                ("max.connections", "0"),
                ("skiff.reassignment.throttle.bytes.per.second", "1000"),
            ],
            &[],
        ));
        let effective = dynamic.subscribe();
        assert_eq!(
            effective.borrow().reassignment_throttle_bytes_per_second,
            1000
        );
        assert_eq!(
            effective.borrow().max_connections,
            Config::default().max_connections
        );
        assert!(layered(&Config::default(), &layers(&[("log.dirs", "/x")], &[])).is_err());
    }

    #[test]
    fn log_defaults_and_cleaner_sizes_are_dynamic_and_checked_like_start_values() {
        for key in [
            "log.retention.ms",
            "log.segment.bytes",
            "min.insync.replicas",
            "log.cleaner.threads",
        ] {
            assert!(is_dynamic(key), "{key}");
        }
        assert!(!is_dynamic("log.dirs") && !is_dynamic("node.id"));
        let config = layered(
            &Config::default(),
            &layers(
                &[("log.retention.ms", "1000")],
                &[("log.segment.bytes", "2048")],
            ),
        )
        .expect("layered");
        assert_eq!(
            (config.log_retention_ms, config.log_segment_bytes),
            (1000, 2048)
        );
        assert!(layered(
            &Config::default(),
            &layers(&[("log.segment.bytes", "0")], &[])
        )
        .is_err());
    }

    fn with_threads(threads: usize) -> Config {
        let mut config = Config::default();
        config
            .apply_override(&format!("log.cleaner.threads={threads}"))
            .expect("threads");
        config
    }

    #[test]
    fn a_live_thread_count_change_stays_within_half_and_double_as_in_kafka() {
        let four = with_threads(4);
        assert!(check_cleaner_threads_change(&four, &with_threads(2)).is_ok());
        assert!(check_cleaner_threads_change(&four, &with_threads(8)).is_ok());
        assert!(check_cleaner_threads_change(&four, &with_threads(4)).is_ok());
        let fewer = check_cleaner_threads_change(&four, &with_threads(1)).expect_err("fewer");
        assert_eq!(
            fewer,
            "Log cleaner threads cannot be reduced to less than half the current value 4"
        );
        let more = check_cleaner_threads_change(&four, &with_threads(9)).expect_err("more");
        assert_eq!(
            more,
            "Log cleaner threads cannot be increased to more than double the current value 4"
        );
    }
}
