//! The rules between keys that no single key's bound can say: one key relative to another, and the
//! listeners' consistency with the security and cluster keys. Each rule is named and lists the
//! keys it involves, which its error repeats.
//!
//! Must never: repeat a single key's bound (that is the table's bound column, `bounds.rs`).

use super::{ClientAuth, Config, ConfigError, SecurityProtocol};

/// One rule over several keys.
pub(super) struct CrossKeyRule {
    /// A short name, in the error.
    pub(super) name: &'static str,
    /// The keys the rule reads, the one to change first.
    pub(super) keys: &'static [&'static str],
    /// Why `config` breaks the rule, or `None` when it keeps it. An error is a key that cannot be
    /// read at all (the listeners not resolving).
    pub(super) broken: fn(&Config) -> Result<Option<String>, ConfigError>,
}

/// Every rule, checked in this order after every key's own bound.
pub(super) const CROSS_KEY_RULES: &[CrossKeyRule] = &[
    CrossKeyRule {
        name: "a batch fits a request",
        keys: &["socket.request.max.bytes", "message.max.bytes"],
        broken: |c| {
            Ok(below(
                (
                    "socket.request.max.bytes",
                    c.socket_request_max_bytes.into(),
                ),
                ("message.max.bytes", c.message_max_bytes.into()),
                "no batch of that size could arrive",
            ))
        },
    },
    CrossKeyRule {
        name: "a request fits the request queue",
        keys: &["queued.max.request.bytes", "socket.request.max.bytes"],
        broken: |c| {
            Ok(below(
                (
                    "queued.max.request.bytes",
                    c.queued_max_request_bytes as i128,
                ),
                (
                    "socket.request.max.bytes",
                    c.socket_request_max_bytes.into(),
                ),
                "no frame of that size could be read",
            ))
        },
    },
    CrossKeyRule {
        name: "a partition's fetch fits the response",
        keys: &[
            "replica.fetch.response.max.bytes",
            "replica.fetch.max.bytes",
        ],
        broken: |c| {
            Ok(below(
                (
                    "replica.fetch.response.max.bytes",
                    c.replica_fetch_response_max_bytes.into(),
                ),
                ("replica.fetch.max.bytes", c.replica_fetch_max_bytes.into()),
                "a follower's fetch asks for more than the response may hold",
            ))
        },
    },
    CrossKeyRule {
        name: "group session timeouts are a range",
        keys: &[
            "group.max.session.timeout.ms",
            "group.min.session.timeout.ms",
        ],
        broken: |c| {
            Ok(below(
                (
                    "group.max.session.timeout.ms",
                    c.group_max_session_timeout_ms.into(),
                ),
                (
                    "group.min.session.timeout.ms",
                    c.group_min_session_timeout_ms.into(),
                ),
                "no session timeout would be allowed",
            ))
        },
    },
    CrossKeyRule {
        name: "consumer group timeouts are ordered",
        keys: &[
            "group.consumer.heartbeat.interval.ms",
            "group.consumer.session.timeout.ms",
            "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms",
            "group.consumer.min.session.timeout.ms",
            "group.consumer.max.session.timeout.ms",
        ],
        broken: |c| Ok(consumer_group_timeouts_broken(c)),
    },
    CrossKeyRule {
        name: "each cleaner thread has 1 MiB of key map",
        keys: &["log.cleaner.dedupe.buffer.size", "log.cleaner.threads"],
        // Kafka's rule: a thread's share of the dedupe buffer must hold a useful key map.
        broken: |c| {
            let threads = c.log_cleaner_threads.max(1) as i128;
            let share = i128::from(c.log_cleaner_dedupe_buffer_size) / threads;
            Ok(
                (share < super::LOG_CLEANER_DEDUPE_BUFFER_MIN).then(|| {
                    format!(
                        "log.cleaner.dedupe.buffer.size = {} is below 1 MiB for each of log.cleaner.threads = {}: a cleaner thread's key map would hold too few keys",
                        c.log_cleaner_dedupe_buffer_size, c.log_cleaner_threads
                    )
                }),
            )
        },
    },
    CrossKeyRule {
        name: "zero connections per address needs overrides",
        keys: &["max.connections.per.ip", "max.connections.per.ip.overrides"],
        // Kafka's rule: 0 alone would refuse every client.
        broken: |c| {
            let alone = c.max_connections_per_ip == 0
                && c.max_connections_per_ip_overrides.limits.is_empty();
            Ok(alone.then(|| {
                "max.connections.per.ip can be 0 only with max.connections.per.ip.overrides naming the addresses allowed".to_owned()
            }))
        },
    },
    CrossKeyRule {
        name: "a cluster member has its own id",
        keys: &["node.id", "skiff.metadata.store"],
        broken: |c| {
            let needs_id = c.metadata_store != skiff_meta::StoreAddress::Local
                && !c.explicitly_set.contains("node.id");
            Ok(needs_id.then(|| {
                "node.id must be set when skiff.metadata.store is a shared store: every broker of a cluster needs its own id".to_owned()
            }))
        },
    },
    CrossKeyRule {
        name: "listeners resolve",
        keys: &[
            "listeners",
            "advertised.listeners",
            "listener.security.protocol.map",
        ],
        // Resolving names the key at fault itself.
        broken: |c| c.listener_configs().map(|_| None),
    },
    CrossKeyRule {
        name: "TLS listeners have a PEM keystore",
        keys: &["ssl.keystore.type", "ssl.keystore.location", "listeners"],
        broken: |c| {
            if !c.any_listener(SecurityProtocol::uses_tls)? {
                return Ok(None);
            }
            Ok(if c.ssl_keystore_type != "PEM" {
                Some("ssl.keystore.type: only PEM is supported".to_owned())
            } else if c.ssl_keystore_location.is_none() {
                Some("ssl.keystore.location: an SSL or SASL_SSL listener needs a PEM file with the certificate chain and key".to_owned())
            } else {
                None
            })
        },
    },
    CrossKeyRule {
        name: "client certificates have a truststore",
        keys: &["ssl.truststore.location", "ssl.client.auth", "listeners"],
        broken: |c| {
            let needed = c.any_listener(SecurityProtocol::uses_tls)?
                && c.ssl_client_auth != ClientAuth::None;
            Ok((needed && c.ssl_truststore_location.is_none()).then(|| {
                "ssl.truststore.location: ssl.client.auth needs the CA certificates client certificates chain to".to_owned()
            }))
        },
    },
    CrossKeyRule {
        name: "SASL listeners have credentials",
        keys: &["skiff.sasl.credentials.file", "listeners"],
        broken: |c| {
            let missing =
                c.any_listener(SecurityProtocol::uses_sasl)? && c.sasl_credentials_file.is_none();
            Ok(missing.then(|| {
                "skiff.sasl.credentials.file: a SASL_PLAINTEXT or SASL_SSL listener needs a credentials file".to_owned()
            }))
        },
    },
    CrossKeyRule {
        name: "followers fetch over PLAINTEXT",
        keys: &[
            "inter.broker.listener.name",
            "listeners",
            "skiff.metadata.store",
        ],
        broken: inter_broker_listener_broken,
    },
];

/// `low` below `high` breaks the rule "`low` at least `high`", for `why`.
fn below(low: (&str, i128), high: (&str, i128), why: &str) -> Option<String> {
    let ((low_key, low_value), (high_key, high_value)) = (low, high);
    (low_value < high_value)
        .then(|| format!("{low_key} = {low_value} is below {high_key} = {high_value}: {why}"))
}

/// Kafka 4.1.1's checks of the consumer group timeouts (`GroupCoordinatorConfig`'s
/// constructor), in its order and words.
fn consumer_group_timeouts_broken(c: &Config) -> Option<String> {
    let heartbeat = (
        "group.consumer.heartbeat.interval.ms",
        c.group_consumer_heartbeat_interval_ms,
    );
    let heartbeat_min = (
        "group.consumer.min.heartbeat.interval.ms",
        c.group_consumer_min_heartbeat_interval_ms,
    );
    let heartbeat_max = (
        "group.consumer.max.heartbeat.interval.ms",
        c.group_consumer_max_heartbeat_interval_ms,
    );
    let session = (
        "group.consumer.session.timeout.ms",
        c.group_consumer_session_timeout_ms,
    );
    let session_min = (
        "group.consumer.min.session.timeout.ms",
        c.group_consumer_min_session_timeout_ms,
    );
    let session_max = (
        "group.consumer.max.session.timeout.ms",
        c.group_consumer_max_session_timeout_ms,
    );
    let at_least = |a: (&str, i32), b: (&str, i32)| {
        (a.1 < b.1).then(|| format!("{} must be greater than or equal to {}", a.0, b.0))
    };
    let at_most = |a: (&str, i32), b: (&str, i32)| {
        (a.1 > b.1).then(|| format!("{} must be less than or equal to {}", a.0, b.0))
    };
    at_least(heartbeat_max, heartbeat_min)
        .or_else(|| at_least(heartbeat, heartbeat_min))
        .or_else(|| at_most(heartbeat, heartbeat_max))
        .or_else(|| at_least(session_max, session_min))
        .or_else(|| at_least(session, session_min))
        .or_else(|| at_most(session, session_max))
        .or_else(|| {
            (heartbeat.1 >= session.1)
                .then(|| format!("{} must be less than {}", heartbeat.0, session.0))
        })
}

/// With a shared metadata store, followers fetch over a PLAINTEXT listener that exists.
fn inter_broker_listener_broken(config: &Config) -> Result<Option<String>, ConfigError> {
    if matches!(config.metadata_store, skiff_meta::StoreAddress::Local) {
        return Ok(None);
    }
    let listeners = config.listener_configs()?;
    let key = "inter.broker.listener.name";
    let Some(name) = config.inter_broker_listener() else {
        return Ok(Some(format!(
            "{key}: followers fetch over PLAINTEXT: a cluster needs a PLAINTEXT listener"
        )));
    };
    Ok(
        match listeners.iter().find(|listener| listener.name == name) {
            None => Some(format!("{key}: no listener is named {name}")),
            Some(listener) if listener.protocol != SecurityProtocol::Plaintext => Some(format!(
                "{key}: listener {name} is {}: the replica fetcher speaks PLAINTEXT only",
                listener.protocol
            )),
            Some(_) => None,
        },
    )
}

impl Config {
    /// Whether a listener's security protocol has `property`.
    fn any_listener(&self, property: fn(SecurityProtocol) -> bool) -> Result<bool, ConfigError> {
        Ok(self
            .listener_configs()?
            .iter()
            .any(|listener| property(listener.protocol)))
    }

    /// Checks every cross-key rule, in order.
    pub(super) fn check_cross_key_rules(&self) -> Result<(), ConfigError> {
        for rule in CROSS_KEY_RULES {
            if let Some(reason) = (rule.broken)(self)? {
                return Err(ConfigError::Conflict {
                    rule: rule.name,
                    keys: rule.keys,
                    reason,
                });
            }
        }
        Ok(())
    }
}
