//! Broker configuration: every key, its default and why, in one table. Keys use Kafka's names where
//! Kafka has one (`log.dirs`, `listeners`, `message.max.bytes`, ...); Skiff's own keys start with
//! `skiff.`. Values come from a TOML file (dotted keys may be written quoted, `"log.dirs" = "..."`,
//! or as nested tables) and from `--set key=value` on the command line, in that order.
//!
//! Each key's own bound is a column of the table (`bounds.rs`), so validation is a loop over it;
//! the few rules between keys are a named list (`rules.rs`). The defaults of keys that other
//! folders use live here too (`group.rs` for the group coordinator's keys), and those folders read
//! them from here.
//!
//! Must never: read a key it does not know without an error, accept a value that breaks a bound or
//! a rule between keys, or read a default from another folder of the broker.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use skiff_protocol::release::{KafkaRelease, UnknownRelease};

mod bounds;
mod cleaner;
mod connections;
pub mod group;
mod legacy_isolation;
mod listeners;
mod rules;
mod security;
#[cfg(feature = "test-mutations")]
mod test_mutation;
pub mod txn;

pub use bounds::{Bound, Bounded, BoundedValue, TextRule, Unit};
pub use cleaner::{BytesPerSecond, CleanupPolicy, CleanupPolicyError, Fraction};
pub use legacy_isolation::LegacyIsolationLevel;

pub use connections::{ConnectionsPerIpOverrides, CONNECTIONS_PER_IP_MAX_DEFAULT};
pub use listeners::{ListenerAddress, ListenerConfig, ListenerList, ProtocolMap, SecurityProtocol};
pub use security::{
    ClientAuth, SaslMechanisms, SslPrincipalMappingRules, SuperUsers,
    SSL_PRINCIPAL_MAPPING_RULES_DEFAULT,
};

/// Why a configuration could not be used.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// The file is not valid TOML.
    #[error("config file {path} is not valid TOML: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        message: String,
    },
    /// A key Skiff does not know (a typo would otherwise be silently ignored).
    #[error("unknown config key '{key}' (run `skiff config-keys` for the list)")]
    UnknownKey {
        /// The key.
        key: String,
    },
    /// A key an earlier release had.
    #[error("config key '{key}' was removed: {instead}")]
    RemovedKey {
        /// The key.
        key: String,
        /// What replaced it.
        instead: &'static str,
    },
    /// A value of the wrong type or out of range.
    #[error("invalid value for '{key}': {reason}")]
    InvalidValue {
        /// The key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A value outside its key's bound (the key table's bound column).
    #[error("{key} = {value}: must be {bound}")]
    OutOfBounds {
        /// The key.
        key: &'static str,
        /// The value as written in a config file.
        value: String,
        /// What the key accepts.
        bound: Bound,
    },
    /// Values that are each within their bounds but together break a rule between keys.
    #[error("{reason} (rule '{rule}' over {})", keys.join(", "))]
    Conflict {
        /// The rule's name.
        rule: &'static str,
        /// The keys the rule reads.
        keys: &'static [&'static str],
        /// How the values break it, naming them.
        reason: String,
    },
    /// A `--set` argument without `=`.
    #[error("--set expects key=value, got '{argument}'")]
    BadOverride {
        /// The argument.
        argument: String,
    },
}

fn invalid(key: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::InvalidValue {
        key: key.to_owned(),
        reason: reason.into(),
    }
}

/// Keys earlier releases had, with what took their place: a config file naming one gets this
/// answer rather than "unknown key".
const REMOVED_KEYS: &[(&str, &str)] = &[(
    "skiff.offsets.compaction.bytes",
    "__consumer_offsets is compacted by the log cleaner now (cleanup.policy=compact, the log.cleaner.* keys); remove the key",
)];

/// The error for a key Skiff does not have: removed (with what replaced it) or unknown.
/// The listener of a `listener.name.<listener>.ssl.keystore.location` key (Kafka's per-listener
/// form; the name lower-case, as Kafka's prefix writes it), `None` for any other key.
pub fn listener_keystore_listener(key: &str) -> Option<&str> {
    key.strip_prefix("listener.name.")?
        .strip_suffix(".ssl.keystore.location")
        .filter(|name| !name.is_empty() && !name.contains('.'))
}

fn unknown_or_removed(key: &str) -> ConfigError {
    match REMOVED_KEYS.iter().find(|(removed, _)| *removed == key) {
        Some((_, instead)) => ConfigError::RemovedKey {
            key: key.to_owned(),
            instead,
        },
        None => ConfigError::UnknownKey {
            key: key.to_owned(),
        },
    }
}

/// Conversion of one TOML value into a typed config field.
trait FromConfigValue: Sized {
    fn from_value(key: &str, value: &toml::Value) -> Result<Self, ConfigError>;
}

impl FromConfigValue for bool {
    fn from_value(key: &str, value: &toml::Value) -> Result<Self, ConfigError> {
        match value {
            toml::Value::Boolean(flag) => Ok(*flag),
            toml::Value::String(text) if text == "true" => Ok(true),
            toml::Value::String(text) if text == "false" => Ok(false),
            _ => Err(invalid(key, "expected true or false")),
        }
    }
}

fn integer(key: &str, value: &toml::Value) -> Result<i64, ConfigError> {
    match value {
        toml::Value::Integer(number) => Ok(*number),
        toml::Value::String(text) => text
            .trim()
            .parse()
            .map_err(|_| invalid(key, format!("expected an integer, got '{text}'"))),
        _ => Err(invalid(key, "expected an integer")),
    }
}

macro_rules! integer_field {
    ($($ty:ty),*) => {$(
        impl FromConfigValue for $ty {
            fn from_value(key: &str, value: &toml::Value) -> Result<Self, ConfigError> {
                let number = integer(key, value)?;
                <$ty>::try_from(number).map_err(|_| {
                    invalid(key, format!("{number} is out of range for {}", stringify!($ty)))
                })
            }
        }
    )*};
}
integer_field!(i16, i32, i64, u32, u64, usize);

impl FromConfigValue for String {
    fn from_value(key: &str, value: &toml::Value) -> Result<Self, ConfigError> {
        match value {
            toml::Value::String(text) => Ok(text.clone()),
            _ => Err(invalid(key, "expected a string")),
        }
    }
}

impl FromConfigValue for PathBuf {
    fn from_value(key: &str, value: &toml::Value) -> Result<Self, ConfigError> {
        String::from_value(key, value).map(PathBuf::from)
    }
}

/// `Debug` writes the value as a config file does (`lazy`, `eager`), as every config type's must:
/// `Config::value_text`, DescribeConfigs and `skiff config-keys` show it, and the fuzz target
/// `config_toml` found the derived `Eager` did not load back.
impl std::fmt::Debug for DownConversionMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Lazy => "lazy",
            Self::Eager => "eager",
        })
    }
}

impl FromConfigValue for DownConversionMode {
    fn from_value(key: &str, value: &toml::Value) -> Result<Self, ConfigError> {
        match String::from_value(key, value)?.as_str() {
            "lazy" => Ok(Self::Lazy),
            "eager" => Ok(Self::Eager),
            other => Err(invalid(
                key,
                format!("expected lazy or eager, got '{other}'"),
            )),
        }
    }
}

impl FromConfigValue for Option<String> {
    fn from_value(key: &str, value: &toml::Value) -> Result<Self, ConfigError> {
        let text = String::from_value(key, value)?;
        Ok(if text.is_empty() { None } else { Some(text) })
    }
}

impl FromConfigValue for Option<KafkaRelease> {
    fn from_value(key: &str, value: &toml::Value) -> Result<Self, ConfigError> {
        Option::<String>::from_value(key, value)?
            .map(|name| {
                name.parse()
                    .map_err(|error: UnknownRelease| invalid(key, error.to_string()))
            })
            .transpose()
    }
}

impl FromConfigValue for Option<PathBuf> {
    fn from_value(key: &str, value: &toml::Value) -> Result<Self, ConfigError> {
        Ok(Option::<String>::from_value(key, value)?.map(PathBuf::from))
    }
}

/// Typed values parsed from one string, once, when their key is set.
macro_rules! parsed_from_text {
    ($($ty:ty),*) => {$(
        impl FromConfigValue for $ty {
            fn from_value(key: &str, value: &toml::Value) -> Result<Self, ConfigError> {
                <$ty>::parse(key, &String::from_value(key, value)?)
            }
        }
    )*};
}
parsed_from_text!(
    ConnectionsPerIpOverrides,
    ListenerList,
    ProtocolMap,
    ClientAuth,
    SaslMechanisms,
    SslPrincipalMappingRules,
    SuperUsers,
    group::ConsumerAssignors,
    group::ConsumerMigrationPolicy
);

impl FromConfigValue for Option<ListenerList> {
    fn from_value(key: &str, value: &toml::Value) -> Result<Self, ConfigError> {
        Option::<String>::from_value(key, value)?
            .map(|text| ListenerList::parse(key, &text))
            .transpose()
    }
}

impl FromConfigValue for Option<SocketAddr> {
    fn from_value(key: &str, value: &toml::Value) -> Result<Self, ConfigError> {
        Option::<String>::from_value(key, value)?
            .map(|text| {
                text.parse().map_err(|_| {
                    invalid(
                        key,
                        format!("'{text}' is not host:port (an IP address and a port)"),
                    )
                })
            })
            .transpose()
    }
}

impl FromConfigValue for skiff_meta::StoreAddress {
    fn from_value(key: &str, value: &toml::Value) -> Result<Self, ConfigError> {
        String::from_value(key, value)?
            .parse()
            .map_err(|error: skiff_meta::Error| invalid(key, error.to_string()))
    }
}

/// How legacy fetches are down-converted.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum DownConversionMode {
    /// KIP-283: convert one chunk at a time while the socket drains (the only mode for production).
    Lazy,
    /// Convert each partition's whole answer before sending, as Kafka did before 2.0. Exists only
    /// so `skiff-bench memory` can show what the lazy mode saves; its memory grows with the
    /// response size.
    Eager,
}

macro_rules! config_keys {
    ($( $key:literal => $field:ident : $ty:ty = $default:expr $(, $bound:expr)?; $doc:literal )*) => {
        /// The broker's configuration; see [`KEYS`] for every key, its default and its meaning.
        #[derive(Debug, Clone)]
        pub struct Config {
            $( #[doc = $doc] pub $field: $ty, )*
            /// The keys given in the config file or on the command line (DescribeConfigs reports
            /// them as STATIC_BROKER_CONFIG, the others as DEFAULT_CONFIG).
            pub explicitly_set: std::collections::BTreeSet<String>,
            /// `listener.name.<listener>.ssl.keystore.location`: a TLS listener's own keystore in
            /// place of `ssl.keystore.location`, by lower-case listener name (Kafka's listener
            /// prefix; a dynamic broker config, see `crate::tls::live::LiveAcceptor`).
            pub listener_keystores: std::collections::BTreeMap<String, std::path::PathBuf>,
            /// `skiff.test.mutation` (only with the feature `test-mutations`): a broker bug a test
            /// harness turns on; unset by default.
            #[cfg(feature = "test-mutations")]
            pub test_mutation: Option<test_mutation::TestMutation>,
        }

        impl Default for Config {
            fn default() -> Self {
                Self {
                    $( $field: $default, )*
                    explicitly_set: Default::default(),
                    listener_keystores: Default::default(),
                    #[cfg(feature = "test-mutations")]
                    test_mutation: None,
                }
            }
        }

        /// Every key: name, default as written in a config file, meaning.
        pub fn keys() -> Vec<(&'static str, String, &'static str)> {
            let defaults = Config::default();
            vec![ $( ($key, format!("{:?}", defaults.$field), $doc), )* ]
        }

        /// Every key that has a bound of its own, with it, in the table's order.
        pub const BOUNDS: &[(&str, Bound)] = &[ $( $( ($key, $bound), )? )* ];

        impl Config {
    /// The data directory's bounds, from `max.broker.partitions`, `skiff.log.files.max` and
    /// `num.recovery.threads.per.data.dir`.
    pub fn dir_config(&self) -> skiff_storage::DirConfig {
        skiff_storage::DirConfig {
            logs_max: self.max_broker_partitions,
            log_files_max: self.log_files_max,
            recovery_threads: self.num_recovery_threads_per_data_dir,
            ..skiff_storage::DirConfig::default()
        }
    }

            fn set(&mut self, key: &str, value: &toml::Value) -> Result<(), ConfigError> {
                match key {
                    $( $key => self.$field = FromConfigValue::from_value(key, value)?, )*
                    #[cfg(feature = "test-mutations")]
                    test_mutation::KEY => {
                        self.test_mutation = Some(FromConfigValue::from_value(key, value)?)
                    }
                    _ => match listener_keystore_listener(key) {
                        Some(listener) => {
                            let path: std::path::PathBuf = FromConfigValue::from_value(key, value)?;
                            self.listener_keystores.insert(listener.to_owned(), path);
                        }
                        None => return Err(unknown_or_removed(key)),
                    },
                }
                self.explicitly_set.insert(key.to_owned());
                Ok(())
            }

            /// Every bounded key with its bound and its value.
            fn bounded_values(&self) -> Vec<(&'static str, Bound, BoundedValue<'_>)> {
                vec![ $( $( ($key, $bound, Bounded::bounded(&self.$field)), )? )* ]
            }

            /// The value of `key` as written in a config file (`Some(None)` for an optional key
            /// left unset), or `None` for a key Skiff does not know.
            pub fn value_text(&self, key: &str) -> Option<Option<String>> {
                match key {
                    $( $key => Some(config_text(&format!("{:?}", self.$field))), )*
                    _ => listener_keystore_listener(key).map(|listener| {
                        self.listener_keystores
                            .get(listener)
                            .map(|path| path.display().to_string())
                    }),
                }
            }
        }
    };
}

/// The bound of `key` from the table's bound column, or `None` for a key without one (or one
/// Skiff does not know).
pub fn bound(key: &str) -> Option<Bound> {
    BOUNDS
        .iter()
        .find(|(name, _)| *name == key)
        .map(|(_, bound)| *bound)
}

/// Every rule between keys: its name and the keys it reads (`skiff config-keys` lists them).
pub fn cross_key_rules() -> impl Iterator<Item = (&'static str, &'static [&'static str])> {
    rules::CROSS_KEY_RULES
        .iter()
        .map(|rule| (rule.name, rule.keys))
}

/// A value's config-file text from its `Debug` form (which every config type writes as the value
/// would be written in a file, see `skiff config-keys`): `None` and `Some(..)` of optional keys
/// unwrapped, quoted strings unquoted and unescaped.
fn config_text(debug: &str) -> Option<String> {
    if debug == "None" {
        return None;
    }
    let inner = debug
        .strip_prefix("Some(")
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or(debug);
    Some(unescape_debug_str(inner).unwrap_or_else(|| inner.to_owned()))
}

/// The text of a string literal as Rust's `Debug` writes it (`"a\tb\u{c}"`), or `None` when
/// `quoted` is not one. Its escapes are not JSON's: a control character such as a form feed is
/// `\u{c}` there, and reading it as JSON left a value with its quotes and escapes in (the fuzz
/// target `config_toml` found it in `super.users`).
fn unescape_debug_str(quoted: &str) -> Option<String> {
    let body = quoted.strip_prefix('"')?.strip_suffix('"')?;
    let mut text = String::with_capacity(body.len());
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            text.push(c);
            continue;
        }
        let escaped = match chars.next()? {
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            '0' => '\0',
            '\\' => '\\',
            '"' => '"',
            '\'' => '\'',
            'u' => {
                let rest = chars.as_str().strip_prefix('{')?;
                let (hex, after) = rest.split_once('}')?;
                let code = u32::from_str_radix(hex, 16).ok()?;
                chars = after.chars();
                char::from_u32(code)?
            }
            _ => return None,
        };
        text.push(escaped);
    }
    Some(text)
}

/// `quota.window.num` default: Kafka's 11 samples.
pub const QUOTA_WINDOW_NUM_DEFAULT: usize = 11;
/// The most `quota.window.num` accepted: each quota sensor keeps one sample per window.
pub const QUOTA_WINDOW_NUM_MAX: i128 = 1000;
/// `quota.window.size.seconds` default: Kafka's 1 s.
pub const QUOTA_WINDOW_SECONDS_DEFAULT: u64 = 1;
/// The longest `quota.window.size.seconds` accepted: an hour.
pub const QUOTA_WINDOW_SECONDS_MAX: i128 = 3600;
/// `max.connections` default. Kafka has no limit by default; Skiff bounds connections and picks
/// 16384: the issue-14 load of 10,000 idle clients with 60 % to spare, about 180 MiB at the
/// ~11 KiB an idle connection costs, and 16384 plus the file reserve (`net::fd_limit`) fits the
/// usual hard RLIMIT_NOFILE (systemd's 524288, containers' 1048576) once the broker has raised its
/// soft limit. Where the hard limit is lower, the default shrinks to fit with a warning; a value
/// set explicitly that does not fit stops the start with an error.
pub const CONNECTIONS_MAX_DEFAULT: usize = 16 * 1024;
/// `socket.listen.backlog.size` default: 1024, not Kafka's 50 nor the 128 a plain bind gives. A
/// burst of clients reconnecting at once (a restart, a network blip: thousands with the defaults
/// above) overflows a short queue, and every SYN the kernel drops costs its client a 1 s
/// retransmit. Measured (`skiff-bench idle-connections --count 3000`, 256 connects at a time):
/// with 128, 568 SYNs overflowed the queue and opening took 6.3 s; with 1024, none and 0.2 s.
pub const LISTEN_BACKLOG_DEFAULT: u32 = 1024;
/// `queued.max.request.bytes` default: 512 MiB of request frames in memory at once, across
/// connections (Kafka bounds it only by request count, `queued.max.requests`, 500 by default: 500
/// frames of 1 MiB is the same order).
pub const QUEUED_REQUEST_BYTES_MAX_DEFAULT: usize = 512 * 1024 * 1024;
/// The largest `queued.max.request.bytes` accepted: 1 TiB, far above any memory, and below the
/// budget semaphore's own ceiling (`usize::MAX >> 3` permits).
pub const QUEUED_REQUEST_BYTES_MAX_LIMIT: usize = 1 << 40;
/// The largest `replica.fetch.response.max.bytes` accepted: a follower holds one response of
/// this size per leader it fetches from.
pub const REPLICA_FETCH_RESPONSE_BYTES_LIMIT: u32 = 1 << 30;
/// Kafka's `message.max.bytes` default: 1 MiB plus the 12-byte log overhead (the storage
/// engine's own default, so a log opened without the config has the same bound).
pub const MESSAGE_BYTES_MAX_DEFAULT: u32 = skiff_storage::BATCH_BYTES_MAX_DEFAULT;
/// Kafka's `socket.request.max.bytes` default.
// INVARIANT: the assertion checks the protocol crate's bound fits a u32 before the cast.
#[allow(clippy::cast_possible_truncation)]
pub const REQUEST_BYTES_MAX_DEFAULT: u32 = {
    // The protocol crate's default frame bound, as the config's type.
    assert!(skiff_protocol::limits::REQUEST_BYTES_MAX_DEFAULT <= u32::MAX as usize);
    skiff_protocol::limits::REQUEST_BYTES_MAX_DEFAULT as u32
};
/// Source bytes per converted chunk: the down-converter's own default (its doc says why 128 KiB).
pub const DOWN_CONVERSION_CHUNK_BYTES_DEFAULT: usize =
    skiff_protocol::limits::DOWN_CONVERT_CHUNK_BYTES;
/// Source bytes per read while a chunk is built: the down-converter's own default (its doc says
/// why 32 KiB).
pub const DOWN_CONVERSION_READ_BYTES_DEFAULT: usize =
    skiff_protocol::limits::DOWN_CONVERT_READ_BYTES;

/// `skiff.frame.capture.max.frames` default: more distinct frames than the real-client suite sends
/// one broker (test_security.py, the file that sends most, sends 629 across its brokers), few
/// enough to list at a glance.
pub const FRAME_CAPTURE_FRAMES_MAX_DEFAULT: usize = 10_000;
/// `skiff.frame.capture.max.bytes` default: 64 MiB of captured frames per broker (the whole suite
/// sends 10 MiB of distinct frames).
pub const FRAME_CAPTURE_BYTES_MAX_DEFAULT: u64 = 64 * 1024 * 1024;

/// `skiff.reassignment.throttle.bytes.per.second`'s default: 50 MiB/s, a fraction of a disk's or
/// a 1 Gbit/s link's bandwidth, so that a reassignment leaves room for clients.
pub const REASSIGNMENT_THROTTLE_BYTES_PER_SECOND_DEFAULT: u64 = 50 * 1024 * 1024;

/// The most `log.cleaner.threads`: more than the cores of any machine Skiff runs on; each thread
/// holds its share of the dedupe buffer and two I/O buffers.
pub const LOG_CLEANER_THREADS_MAX: i128 = 64;
/// The smallest `log.cleaner.dedupe.buffer.size`: 1 MiB (and 1 MiB per thread, a cross-key rule),
/// Kafka's own floor per thread.
pub const LOG_CLEANER_DEDUPE_BUFFER_MIN: i128 = 1024 * 1024;
/// The smallest `log.cleaner.io.buffer.size`: 4 KiB, a batch header and then some.
pub const LOG_CLEANER_IO_BUFFER_MIN: i128 = 4096;
/// `log.cleaner.io.buffer.load.factor` default (Kafka's).
pub const LOG_CLEANER_LOAD_FACTOR_DEFAULT: Fraction = Fraction::NINE_TENTHS;
/// `log.cleaner.min.cleanable.ratio` default (Kafka's).
pub const LOG_CLEANER_MIN_CLEANABLE_RATIO_DEFAULT: Fraction = Fraction::HALF;

/// The largest `log.segment.bytes`: 4 GiB - 1, since index entries hold 4-byte positions.
pub const SEGMENT_BYTES_MAX: i128 = u32::MAX as i128;
/// The smallest `message.max.bytes`: 64 bytes, a little more than a record batch's header.
pub const MESSAGE_BYTES_MAX_MIN: i128 = 64;
/// The shortest `log.flush.offset.checkpoint.interval.ms` and
/// `replica.high.watermark.checkpoint.interval.ms`: 100 ms, so that checkpoints do not turn into
/// a stream of writes and syncs.
pub const CHECKPOINT_INTERVAL_MS_MIN: i128 = 100;
/// The shortest `replica.lag.time.max.ms`: 100 ms, a few fetch round trips.
pub const REPLICA_LAG_TIME_MS_MIN: i128 = 100;
/// The longest `replica.fetch.wait.max.ms`: one minute.
pub const REPLICA_FETCH_WAIT_MS_MAX: i128 = 60_000;
/// The most `num.recovery.threads.per.data.dir`.
pub const RECOVERY_THREADS_MAX: i128 = 256;
/// The bounds of `skiff.down.conversion.chunk.bytes` and `skiff.down.conversion.read.bytes`:
/// 1 KiB to 64 MiB.
pub const DOWN_CONVERSION_BYTES_MIN: i128 = 1024;
/// See [`DOWN_CONVERSION_BYTES_MIN`].
pub const DOWN_CONVERSION_BYTES_MAX: i128 = 64 * 1024 * 1024;
/// The longest `broker.session.timeout.ms`: one hour (the store's lease TTL is in whole seconds,
/// at least one).
pub const BROKER_SESSION_TIMEOUT_MS_MAX: i128 = 3_600_000;
/// The shortest `skiff.placement.shed.interval.ms`: one second.
pub const PLACEMENT_SHED_INTERVAL_MS_MIN: i128 = 1000;
/// The values of `skiff.placement.shedder`: the shedders
/// `skiff_placement::shed::ShedderConfig::named` knows (a test checks it knows each).
pub const SHEDDERS: &[&str] = &[
    "skiff",
    "avg",
    "threshold",
    "uniform",
    "transfer",
    "overload",
];

/// `default.replication.factor` and `offsets.topic.replication.factor` with a shared metadata
/// store, unless set (Kafka's recommended production values; see `Config::apply_cluster_defaults`).
pub const CLUSTER_REPLICATION_FACTOR_DEFAULT: i16 = 3;
/// `min.insync.replicas` with a shared metadata store, unless set (the replica machine's own
/// default, as the config's type).
// INVARIANT: the assertion checks the replica machine's default fits an i32 before the cast.
#[allow(clippy::cast_possible_truncation)]
pub const CLUSTER_MIN_INSYNC_REPLICAS_DEFAULT: i32 = {
    assert!(skiff_cluster::replica::MIN_INSYNC_REPLICAS_DEFAULT <= i32::MAX as usize);
    skiff_cluster::replica::MIN_INSYNC_REPLICAS_DEFAULT as i32
};

config_keys! {
    "node.id" => node_id: i32 = 1, Bound::AtLeast(0, Unit::Count);
        "This broker's id in Metadata answers and in the cluster. Required (no default) with a shared skiff.metadata.store (etcd://...)."
    "log.dirs" => log_dirs: PathBuf = PathBuf::from("./skiff-data");
        "Directory holding the partition logs, topic metadata and group offsets."
    "listeners" => listeners: ListenerList = ListenerList::plaintext_localhost_9092();
        "Comma-separated listeners, NAME://host:port. Port 0 picks a free port."
    "advertised.listeners" => advertised_listeners: Option<ListenerList> = None;
        "What Metadata tells clients to connect to; empty means the bound listener address."
    "num.partitions" => num_partitions: i32 = 1, Bound::AtLeast(1, Unit::Count);
        "Partitions of an auto-created topic."
    "default.replication.factor" => default_replication_factor: i16 = 1, Bound::AtLeast(1, Unit::Count);
        "Replication factor of an auto-created topic, or of a created one that asks for -1. A topic needs that many running brokers to be created (INVALID_REPLICATION_FACTOR otherwise). 3 with a shared skiff.metadata.store (etcd://...) unless set."
    "offsets.topic.num.partitions" => offsets_topic_num_partitions: i32 = 50, Bound::Between(1, skiff_protocol::limits::PARTITIONS_PER_TOPIC_MAX as i128, Unit::Count);
        "Partitions of __consumer_offsets, created on the first FindCoordinator: the coordinator of a group is the leader of its partition (Kafka's hash of the group id), so the groups spread over the brokers. Fixed once the topic exists."
    "offsets.topic.segment.bytes" => offsets_topic_segment_bytes: u64 = 100 * 1024 * 1024;
        "segment.bytes of the __consumer_offsets partitions, set when the topic is created: the offsets log before a snapshot (skiff.offsets.compaction.bytes) is dropped a whole segment at a time."
    "transaction.partition.verification.enable" => transaction_partition_verification_enable: bool = true;
        "KIP-890: a partition leader asks the transactional id's coordinator to confirm (Produce v11 and older) or add (v12) each partition of a transactional Produce before appending it, so a late or stray transactional batch cannot open a transaction no coordinator will end (Kafka's key and default)."
    "offsets.commit.timeout.ms" => offsets_commit_timeout_ms: u64 = 5_000;
        "How long an OffsetCommit (and a group or offset deletion) waits for its records to reach every in-sync replica of its __consumer_offsets partition; then it is answered COORDINATOR_NOT_AVAILABLE, which clients retry (Kafka's key and default)."
    "offsets.topic.replication.factor" => offsets_topic_replication_factor: i16 = 1, Bound::AtLeast(1, Unit::Count);
        "Replicas of each __consumer_offsets partition; the topic is created once that many brokers run (FindCoordinator answers COORDINATOR_NOT_AVAILABLE until then). 3 with a shared skiff.metadata.store unless set."
    "auto.create.topics.enable" => auto_create_topics_enable: bool = true;
        "Create a topic on first Metadata or Produce for it."
    "log.segment.bytes" => log_segment_bytes: u64 = 1024 * 1024 * 1024, Bound::Between(1, SEGMENT_BYTES_MAX, Unit::Bytes);
        "Size at which a segment rolls (at most 4 GiB - 1: index positions are 4 bytes)."
    "log.roll.ms" => log_roll_ms: u64 = 7 * 24 * 3600 * 1000;
        "Age at which a segment rolls."
    "log.retention.ms" => log_retention_ms: i64 = 7 * 24 * 3600 * 1000;
        "Age after which whole segments are deleted; -1 keeps them forever."
    "log.retention.bytes" => log_retention_bytes: i64 = -1;
        "Partition size above which the oldest segments are deleted; -1 means no limit."
    "log.retention.check.interval.ms" => log_retention_check_interval_ms: u64 = 5 * 60 * 1000;
        "How often segments are rolled by age and retention is enforced."
    "log.cleanup.policy" => log_cleanup_policy: CleanupPolicy = CleanupPolicy::DELETE;
        "Default of the topic config cleanup.policy (Kafka's key and default): delete (old segments go by log.retention.ms and log.retention.bytes), compact (the log cleaner keeps the latest record per key, docs/design/compaction.md) or compact,delete (both)."
    "log.cleaner.enable" => log_cleaner_enable: bool = true;
        "Run the log cleaner (Kafka's key, deprecated there in 4.1, where the cleaner always runs). false is refused at start while a compacted topic exists (__consumer_offsets is one): a topic that says compact must be compacted."
    "log.cleaner.threads" => log_cleaner_threads: usize = 1, Bound::Between(1, LOG_CLEANER_THREADS_MAX, Unit::Count);
        "Threads cleaning compacted logs, one log each at a time (Kafka's key and default; Kafka allows 0, Skiff does not, since a compacted topic would then grow without bound)."
    "log.cleaner.dedupe.buffer.size" => log_cleaner_dedupe_buffer_size: u64 = 128 * 1024 * 1024, Bound::AtLeast(LOG_CLEANER_DEDUPE_BUFFER_MIN, Unit::Bytes);
        "Memory for the cleaners' key maps, shared among log.cleaner.threads (Kafka's key and default, 128 MiB). Each thread's share bounds the keys one cleaning pass can deduplicate (20 bytes a slot, 22 a key at the default load factor); a log with more dirty keys is cleaned in several passes. At least 1 MiB per thread; a share above 2 GiB is capped at 2 GiB, as Kafka caps it."
    "log.cleaner.io.buffer.size" => log_cleaner_io_buffer_size: usize = 512 * 1024, Bound::Between(LOG_CLEANER_IO_BUFFER_MIN, skiff_storage::CLEANER_IO_BUFFER_BYTES_MAX as i128, Unit::Bytes);
        "Bytes of the read and of the write buffer each cleaner thread uses, grown up to message.max.bytes for a larger batch (Kafka's key and default)."
    "log.cleaner.io.buffer.load.factor" => log_cleaner_io_buffer_load_factor: Fraction = LOG_CLEANER_LOAD_FACTOR_DEFAULT;
        "How full a cleaner's key map may get before a pass stops mapping more keys (Kafka's key and default, 0.9); between 0 and 1."
    "log.cleaner.io.max.bytes.per.second" => log_cleaner_io_max_bytes_per_second: BytesPerSecond = BytesPerSecond::UNLIMITED;
        "Bytes per second the cleaners read and write together, so cleaning leaves disk bandwidth to clients (Kafka's key; its default, 1.7976931348623157e308, is unthrottled)."
    "log.cleaner.backoff.ms" => log_cleaner_backoff_ms: u64 = 15_000;
        "Pause of a cleaner thread that found no log to clean (Kafka's key and default)."
    "log.cleaner.min.cleanable.ratio" => log_cleaner_min_cleanable_ratio: Fraction = LOG_CLEANER_MIN_CLEANABLE_RATIO_DEFAULT;
        "Default of the topic config min.cleanable.dirty.ratio: the share of a log's cleanable bytes not yet cleaned above which the cleaner picks it (Kafka's key and default, 0.5); between 0 and 1."
    "log.cleaner.min.compaction.lag.ms" => log_cleaner_min_compaction_lag_ms: i64 = 0, Bound::AtLeast(0, Unit::Milliseconds);
        "Default of the topic config min.compaction.lag.ms: records younger than this stay uncompacted (Kafka's key and default)."
    "log.cleaner.max.compaction.lag.ms" => log_cleaner_max_compaction_lag_ms: i64 = i64::MAX, Bound::AtLeast(1, Unit::Milliseconds);
        "Default of the topic config max.compaction.lag.ms: a log with records uncompacted for longer is cleaned whatever its dirty ratio (Kafka's key and default, unbounded)."
    "log.cleaner.delete.retention.ms" => log_cleaner_delete_retention_ms: i64 = 24 * 3600 * 1000, Bound::AtLeast(0, Unit::Milliseconds);
        "Default of the topic config delete.retention.ms: how long a tombstone (a record with a null value) stays after the cleaning that first passes it, so consumers behind can see the delete (Kafka's key and default, one day)."
    "log.flush.interval.messages" => log_flush_interval_messages: u64 = u64::MAX, Bound::AtLeast(1, Unit::Count);
        "fsync after this many messages; 1 means every append is on disk before it is acknowledged."
    "log.flush.interval.ms" => log_flush_interval_ms: u64 = u64::MAX;
        "fsync when the oldest unflushed message is older than this."
    "log.flush.offset.checkpoint.interval.ms" => log_flush_offset_checkpoint_interval_ms: u64 = 60_000, Bound::AtLeast(CHECKPOINT_INTERVAL_MS_MIN, Unit::Milliseconds);
        "How often (milliseconds) the logs with data not yet on disk are synced (an fdatasync each when at most 512 are, else one syncfs) and every log's recovery point and log start are written to the data directory's skiff-offset-checkpoint (Kafka's key). Bounds what a power cut loses and what a restart after a crash rescans to about this interval's appends, and leaves a clean shutdown only what came since. At least 100."
    "log.index.interval.bytes" => log_index_interval_bytes: u32 = 4096;
        "Bytes of log between two offset-index entries."
    "max.broker.partitions" => max_broker_partitions: usize = skiff_storage::DirConfig::default().logs_max, Bound::AtLeast(1, Unit::Count);
        "Most partition logs this broker holds, internal ones included (the name of Kafka's KIP-578). CreateTopics and CreatePartitions past it answer POLICY_VIOLATION naming the limit; so do those the open-file limit or vm.max_map_count cannot hold. Each partition costs three memory maps and the memory docs/benchmarks.md measures (partitions at scale); open files are shared (skiff.log.files.max)."
    "skiff.log.files.max" => log_files_max: usize = skiff_storage::DirConfig::default().log_files_max;
        "Open descriptors kept for segment files (active and older ones alike), the most recently used first, at most a quarter of the open-file limit; an append, fetch or flush of another partition reopens its file (one open(2), a few microseconds), so idle partitions hold none. Each costs one descriptor: the broker keeps them out of max.connections' share of the limit."
    "num.recovery.threads.per.data.dir" => num_recovery_threads_per_data_dir: usize = skiff_storage::DirConfig::default().recovery_threads, Bound::Between(1, RECOVERY_THREADS_MAX, Unit::Count);
        "Threads that recover partition logs after a start (the broker listens first; a partition not recovered yet answers NOT_LEADER_OR_FOLLOWER, or LEADER_NOT_AVAILABLE in Metadata) and close them at clean shutdown (Kafka's key; its default is 1). Between 1 and 256."
    "message.max.bytes" => message_max_bytes: u32 = MESSAGE_BYTES_MAX_DEFAULT, Bound::AtLeast(MESSAGE_BYTES_MAX_MIN, Unit::Bytes);
        "Largest record batch a producer may append."
    "socket.request.max.bytes" => socket_request_max_bytes: u32 = REQUEST_BYTES_MAX_DEFAULT;
        "Largest request frame; a bigger size prefix closes the connection before anything is read."
    "socket.send.buffer.bytes" => socket_send_buffer_bytes: i32 = -1, Bound::MinusOneOrPositive("the kernel's autotuning", Unit::Bytes);
        "SO_SNDBUF of client connections in bytes; -1 (the default; Kafka's is 102400) keeps the kernel's autotuning (net.ipv4.tcp_wmem). A set size turns autotuning off and the kernel caps it at net.core.wmem_max."
    "socket.receive.buffer.bytes" => socket_receive_buffer_bytes: i32 = -1, Bound::MinusOneOrPositive("the kernel's autotuning", Unit::Bytes);
        "SO_RCVBUF of client connections in bytes; -1 (the default; Kafka's is 102400) keeps the kernel's autotuning (net.ipv4.tcp_rmem). A set size turns autotuning off and the kernel caps it at net.core.rmem_max."
    "queued.max.request.bytes" => queued_max_request_bytes: usize = QUEUED_REQUEST_BYTES_MAX_DEFAULT, Bound::AtMost(QUEUED_REQUEST_BYTES_MAX_LIMIT as i128, Unit::Bytes);
        "Bytes of request frames all connections may hold at once; a connection whose next frame does not fit waits before reading it (Kafka's key; its default -1 means no bound, Skiff's is 512 MiB). At least socket.request.max.bytes."
    "max.connections" => max_connections: usize = CONNECTIONS_MAX_DEFAULT, Bound::AtLeast(1, Unit::Count);
        "Connections served at once, across listeners. At the limit a new client is never left waiting: the connection idle longest (for at least 1 s) is closed to make room, or, if every connection is busy, the new one is closed at once. Must fit the process's open-file limit (RLIMIT_NOFILE, raised to its hard limit at start) with room for the logs' files."
    "max.connections.per.ip" => max_connections_per_ip: i32 = CONNECTIONS_PER_IP_MAX_DEFAULT, Bound::AtLeast(0, Unit::Count);
        "Connections one client address may hold (Kafka's key and default: 2147483647, no limit). A connection beyond it is closed at once; 0 refuses every address not in max.connections.per.ip.overrides."
    "max.connections.per.ip.overrides" => max_connections_per_ip_overrides: ConnectionsPerIpOverrides = ConnectionsPerIpOverrides::default();
        "Comma-separated address:count pairs that replace max.connections.per.ip for those addresses (Kafka's key; IP addresses only, host names are refused rather than resolved)."
    "socket.listen.backlog.size" => socket_listen_backlog_size: u32 = LISTEN_BACKLOG_DEFAULT, Bound::Between(1, i32::MAX as i128, Unit::Count);
        "Connections the kernel queues on each listener before the broker accepts them (Kafka's key; its default is 50). Linux caps it at net.core.somaxconn."
    "connections.max.idle.ms" => connections_max_idle_ms: u64 = 10 * 60 * 1000;
        "A connection with no request and no progress writing for this long is closed."
    "fetch.max.bytes" => fetch_max_bytes: u32 = 55 * 1024 * 1024;
        "Cap on one Fetch response's record bytes, whatever the client asks."
    "fetch.wait.max.ms" => fetch_wait_max_ms: u64 = 30_000;
        "Cap on a Fetch request's max_wait_ms (long polling)."
    "quota.window.num" => quota_window_num: usize = QUOTA_WINDOW_NUM_DEFAULT, Bound::Between(2, QUOTA_WINDOW_NUM_MAX, Unit::Count);
        "Samples a client quota's rate is measured over (Kafka's key and default, 11): a rate is the bytes (or request time) of the last quota.window.num windows over their length, at least quota.window.num - 1 windows. Between 2 and 1000."
    "quota.window.size.seconds" => quota_window_size_seconds: u64 = QUOTA_WINDOW_SECONDS_DEFAULT, Bound::Between(1, QUOTA_WINDOW_SECONDS_MAX, Unit::Seconds);
        "Length in seconds of one client-quota sample (Kafka's key and default, 1). Between 1 and 3600."
    "log.message.downconversion.enable" => log_message_downconversion_enable: bool = true;
        "Default of the topic config message.downconversion.enable: serve Fetch v0-v3 by conversion."
    "skiff.down.conversion.chunk.bytes" => down_conversion_chunk_bytes: usize = DOWN_CONVERSION_CHUNK_BYTES_DEFAULT, Bound::Between(DOWN_CONVERSION_BYTES_MIN, DOWN_CONVERSION_BYTES_MAX, Unit::Bytes);
        "Source bytes converted per chunk for legacy fetches; one response holds at most one chunk."
    "skiff.down.conversion.read.bytes" => down_conversion_read_bytes: usize = DOWN_CONVERSION_READ_BYTES_DEFAULT, Bound::Between(DOWN_CONVERSION_BYTES_MIN, DOWN_CONVERSION_BYTES_MAX, Unit::Bytes);
        "Most source bytes read at once while a legacy chunk is built (at least one batch; at most the chunk size). Held only while the chunk is converted."
    "skiff.legacy.isolation.level" => legacy_isolation_level: LegacyIsolationLevel = LegacyIsolationLevel::ReadUncommitted;
        "Default of the topic config skiff.legacy.isolation.level: what Fetch v0-v3 (no isolation level) reads of transactional data. read_uncommitted (Kafka's behaviour): up to the high watermark, aborted records included; read_committed: up to the last stable offset, aborted records left out."
    "skiff.down.conversion.mode" => down_conversion_mode: DownConversionMode = DownConversionMode::Lazy;
        "lazy (default) or eager. Eager converts whole responses up front and exists only for benchmarks."
    "skiff.advertised.kafka.version" => advertised_kafka_version: Option<KafkaRelease> = None;
        "Advertise only the API versions of this Kafka release (0.10.0, 0.10.2, ...) in ApiVersions."
    "skiff.shutdown.timeout.ms" => shutdown_timeout_ms: u64 = 10_000;
        "How long a graceful shutdown waits for in-flight responses."
    "group.min.session.timeout.ms" => group_min_session_timeout_ms: i32 = group::SESSION_TIMEOUT_MS_MIN_DEFAULT, Bound::AtLeast(1, Unit::Milliseconds);
        "Shortest session a group member may ask for; a JoinGroup asking less gets INVALID_SESSION_TIMEOUT."
    "group.max.session.timeout.ms" => group_max_session_timeout_ms: i32 = group::SESSION_TIMEOUT_MS_MAX_DEFAULT;
        "Longest session a group member may ask for; a JoinGroup asking more gets INVALID_SESSION_TIMEOUT."
    "group.initial.rebalance.delay.ms" => group_initial_rebalance_delay_ms: i32 = group::INITIAL_REBALANCE_DELAY_MS_DEFAULT, Bound::Between(0, group::INITIAL_REBALANCE_DELAY_MS_MAX as i128, Unit::Milliseconds);
        "How long the first rebalance of an empty group waits for more members (extended by each newcomer, up to the rebalance timeout); 0 rebalances at once."
    "group.consumer.session.timeout.ms" => group_consumer_session_timeout_ms: i32 = group::CONSUMER_SESSION_TIMEOUT_MS_DEFAULT, Bound::AtLeast(1, Unit::Milliseconds);
        "How long a consumer group (group.protocol=consumer) member may stay silent before it is removed and its partitions reassigned."
    "group.consumer.min.session.timeout.ms" => group_consumer_min_session_timeout_ms: i32 = group::CONSUMER_SESSION_TIMEOUT_MS_MIN_DEFAULT, Bound::AtLeast(1, Unit::Milliseconds);
        "Lower bound of group.consumer.session.timeout.ms."
    "group.consumer.max.session.timeout.ms" => group_consumer_max_session_timeout_ms: i32 = group::CONSUMER_SESSION_TIMEOUT_MS_MAX_DEFAULT, Bound::AtLeast(1, Unit::Milliseconds);
        "Upper bound of group.consumer.session.timeout.ms."
    "group.consumer.heartbeat.interval.ms" => group_consumer_heartbeat_interval_ms: i32 = group::CONSUMER_HEARTBEAT_INTERVAL_MS_DEFAULT, Bound::AtLeast(1, Unit::Milliseconds);
        "How often consumer group members heartbeat (sent to them in every heartbeat response); below group.consumer.session.timeout.ms."
    "group.consumer.min.heartbeat.interval.ms" => group_consumer_min_heartbeat_interval_ms: i32 = group::CONSUMER_HEARTBEAT_INTERVAL_MS_MIN_DEFAULT, Bound::AtLeast(1, Unit::Milliseconds);
        "Lower bound of group.consumer.heartbeat.interval.ms."
    "group.consumer.max.heartbeat.interval.ms" => group_consumer_max_heartbeat_interval_ms: i32 = group::CONSUMER_HEARTBEAT_INTERVAL_MS_MAX_DEFAULT, Bound::AtLeast(1, Unit::Milliseconds);
        "Upper bound of group.consumer.heartbeat.interval.ms."
    "group.consumer.max.size" => group_consumer_max_size: usize = group::CONSUMER_GROUP_MAX_SIZE_DEFAULT, Bound::AtLeast(1, Unit::Count);
        "Members of one consumer group; a join beyond it gets GROUP_MAX_SIZE_REACHED. Kafka's default is 2147483647; Skiff's 1000 bounds one group's memory."
    "group.consumer.assignors" => group_consumer_assignors: group::ConsumerAssignors = group::ConsumerAssignors::default();
        "The server-side assignors of consumer groups (uniform, range, or Kafka's class names for them), comma-separated; the first is used when a group's members ask for none, and a member asking for another gets UNSUPPORTED_ASSIGNOR."
    "group.consumer.regex.refresh.interval.ms" => group_consumer_regex_refresh_interval_ms: i32 = group::CONSUMER_REGEX_REFRESH_INTERVAL_MS_DEFAULT, Bound::AtLeast(group::CONSUMER_REGEX_REFRESH_INTERVAL_MS_MIN as i128, Unit::Milliseconds);
        "How often a consumer group's topic patterns (SubscribedTopicRegex) are resolved again when no topic changed, so a change of the members' ACLs shows (a new topic is picked up within 10 s); each resolution keeps only the topics the refreshing member may Describe."
    "group.consumer.migration.policy" => group_consumer_migration_policy: group::ConsumerMigrationPolicy = group::ConsumerMigrationPolicy::default();
        "Online conversion between classic and consumer groups: upgrade (a consumer-protocol member joining a classic group of consumer-protocol members converts it), downgrade, bidirectional (Kafka's default) or disabled."
    "transaction.state.log.num.partitions" => transaction_state_log_num_partitions: i32 = txn::STATE_LOG_PARTITIONS_DEFAULT, Bound::Between(1, skiff_protocol::limits::PARTITIONS_PER_TOPIC_MAX as i128, Unit::Count);
        "Partitions of __transaction_state, created on the first FindCoordinator for a transactional id: the coordinator of a transactional id is the leader of its partition (Kafka's hash of the id). Fixed once the topic exists."
    "transaction.state.log.replication.factor" => transaction_state_log_replication_factor: i16 = 1, Bound::AtLeast(1, Unit::Count);
        "Replicas of each __transaction_state partition. 3 (Kafka's default) with a shared skiff.metadata.store unless set; 1 on a single node."
    "transaction.state.log.min.isr" => transaction_state_log_min_isr: i32 = 1, Bound::AtLeast(1, Unit::Count);
        "min.insync.replicas of __transaction_state: a transaction state change is acknowledged only once this many replicas hold it. 2 (Kafka's default) with a shared skiff.metadata.store unless set; 1 on a single node."
    "transaction.state.log.segment.bytes" => transaction_state_log_segment_bytes: u64 = txn::STATE_LOG_SEGMENT_BYTES_DEFAULT, Bound::Between(1, SEGMENT_BYTES_MAX, Unit::Bytes);
        "segment.bytes of the __transaction_state partitions (compacted by key), set when the topic is created."
    "transaction.max.timeout.ms" => transaction_max_timeout_ms: i32 = txn::MAX_TIMEOUT_MS_DEFAULT, Bound::AtLeast(1, Unit::Milliseconds);
        "Longest transaction.timeout.ms a producer may ask for; InitProducerId asking more gets INVALID_TRANSACTION_TIMEOUT."
    "transactional.id.expiration.ms" => transactional_id_expiration_ms: i64 = txn::ID_EXPIRATION_MS_DEFAULT, Bound::AtLeast(1, Unit::Milliseconds);
        "How long a transactional id with no transaction open is kept after its last change; then it is removed (a tombstone in __transaction_state)."
    "transaction.abort.timed.out.transaction.cleanup.interval.ms" => transaction_abort_timed_out_interval_ms: i64 = txn::ABORT_TIMED_OUT_INTERVAL_MS_DEFAULT, Bound::AtLeast(1, Unit::Milliseconds);
        "How often the coordinator aborts transactions open longer than their timeout (bumping the epoch, which fences their producer)."
    "transaction.remove.expired.transaction.cleanup.interval.ms" => transaction_remove_expired_interval_ms: i64 = txn::REMOVE_EXPIRED_INTERVAL_MS_DEFAULT, Bound::AtLeast(1, Unit::Milliseconds);
        "How often the coordinator removes transactional ids past transactional.id.expiration.ms."
    "skiff.transactional.ids.max" => transactional_ids_max: u64 = txn::IDS_MAX_DEFAULT, Bound::AtLeast(1, Unit::Count);
        "Transactional ids one broker coordinates (bounds the coordinator's memory); an InitProducerId for a new id beyond it gets COORDINATOR_NOT_AVAILABLE until ids expire."
    "skiff.transaction.partitions.max" => transaction_partitions_max: u64 = txn::PARTITIONS_PER_TRANSACTION_MAX_DEFAULT, Bound::AtLeast(1, Unit::Count);
        "Partitions one transaction may span; AddPartitionsToTxn beyond it gets POLICY_VIOLATION."
    "skiff.metrics.listener" => metrics_listener: Option<SocketAddr> = None;
        "host:port of the Prometheus endpoint (GET /metrics); empty (default) serves none. Off by default so a broker never opens a second port nobody asked for."
    "listener.security.protocol.map" => listener_security_protocol_map: ProtocolMap = ProtocolMap::default();
        "Comma-separated LISTENER_NAME:SECURITY_PROTOCOL pairs; a listener's protocol comes from its name."
    "ssl.keystore.type" => ssl_keystore_type: String = "PEM".to_owned();
        "Format of ssl.keystore.location; only PEM is supported."
    "ssl.keystore.location" => ssl_keystore_location: Option<PathBuf> = None;
        "PEM file holding the certificate chain and the unencrypted private key of SSL/SASL_SSL listeners."
    "ssl.truststore.location" => ssl_truststore_location: Option<PathBuf> = None;
        "PEM file of CA certificates that client certificates must chain to (with ssl.client.auth)."
    "ssl.client.auth" => ssl_client_auth: ClientAuth = ClientAuth::None;
        "none, requested or required: whether SSL clients must present a certificate; its subject becomes the principal."
    "sasl.enabled.mechanisms" => sasl_enabled_mechanisms: SaslMechanisms = SaslMechanisms::default();
        "SASL mechanisms offered on SASL_PLAINTEXT/SASL_SSL listeners."
    "skiff.sasl.credentials.file" => sasl_credentials_file: Option<PathBuf> = None;
        "File of SASL users as salted SCRAM keys (`skiff sasl-credential` writes lines); needed by SASL listeners."
    "skiff.authentication.timeout.ms" => authentication_timeout_ms: u64 = 10_000, Bound::AtLeast(1, Unit::Milliseconds);
        "A connection on an SSL or SASL listener that has not finished its TLS handshake and SASL exchange within this long is closed."
    "authorizer.class.name" => authorizer_class_name: String = String::new();
        "Kafka's key: any class name (org.apache.kafka.metadata.authorizer.StandardAuthorizer) turns authorization on, with the cluster's ACLs from the metadata store (kafka-acls.sh manages them). Empty (default) with no skiff.acl.file: no authorization, everything is allowed to everyone, and the ACL APIs answer SECURITY_DISABLED."
    "skiff.acl.file" => acl_file: Option<PathBuf> = None;
        "File of ACLs to bootstrap the cluster's ACLs from; turns authorization on. The first broker that finds no ACLs in the metadata store imports it; until the first change through kafka-acls.sh that broker re-imports the file when it changes. Every other broker's file is ignored (with a warning)."
    "skiff.acl.reload.interval.ms" => acl_reload_interval_ms: u64 = 1000;
        "How often the importing broker checks its ACL file for changes while the store still follows the file."
    "super.users" => super_users: SuperUsers = SuperUsers::default();
        "Semicolon-separated principals (User:name) allowed everything, whatever the ACLs say."
    "skiff.metadata.store" => metadata_store: skiff_meta::StoreAddress = skiff_meta::StoreAddress::Local;
        "Where cluster metadata lives: local (default: embedded in log.dirs, a cluster of this one broker) or etcd://host:port,host:port,... (a cluster of brokers sharing that etcd; needs a build with the etcd feature)."
    "skiff.cluster.name" => cluster_name: String = "skiff".to_owned(), Bound::Text(TextRule::ClusterName);
        "Name of the cluster in the metadata store: its keys live under /skiff/<name>/v1, so one etcd can hold several clusters."
    "broker.rack" => broker_rack: Option<String> = None;
        "This broker's rack (failure domain), shown in Metadata and used by replica placement."
    "broker.session.timeout.ms" => broker_session_timeout_ms: u64 = 10_000, Bound::WholeSecondsBetween(1000, BROKER_SESSION_TIMEOUT_MS_MAX);
        "TTL of this broker's session lease: if the store hears no keep-alive for this long, the broker counts as dead and its registration and leaderships are taken away. The broker itself stops accepting writes a fifth of it earlier. Whole seconds, at least 1000."
    "replica.high.watermark.checkpoint.interval.ms" => replica_high_watermark_checkpoint_interval_ms: u64 = 5000, Bound::AtLeast(CHECKPOINT_INTERVAL_MS_MIN, Unit::Milliseconds);
        "How often every partition's high watermark is written to the data directory's replication-offset-checkpoint (and at clean shutdown): where a restarted replica's high watermark starts. At least 100."
    "inter.broker.listener.name" => inter_broker_listener_name: Option<String> = None;
        "The listener followers fetch from their leaders on (its name in listeners, on every broker). Empty: the first PLAINTEXT listener. The replica fetcher speaks PLAINTEXT only, so with a shared metadata store this listener must be PLAINTEXT."
    "replica.lag.time.max.ms" => replica_lag_time_max_ms: u64 = skiff_cluster::replica::REPLICA_LAG_TIME_MAX_MS_DEFAULT, Bound::AtLeast(REPLICA_LAG_TIME_MS_MIN, Unit::Milliseconds);
        "A follower that has not caught up with the leader's log end for this long leaves the ISR (Kafka's rule: it counts as caught up when a fetch reached the leader's log end, or the end the leader had at its previous fetch)."
    "min.insync.replicas" => min_insync_replicas: i32 = 1, Bound::AtLeast(1, Unit::Count);
        "Replicas (the leader included) that must be in the ISR for an acks=all produce: fewer answers NOT_ENOUGH_REPLICAS (19) before the append, or NOT_ENOUGH_REPLICAS_AFTER_APPEND (20) when the ISR shrank after it. Offset commits need it too. At least 1; 2 with a shared skiff.metadata.store unless set."
    "replica.fetch.wait.max.ms" => replica_fetch_wait_max_ms: u64 = 500, Bound::Between(1, REPLICA_FETCH_WAIT_MS_MAX, Unit::Milliseconds);
        "How long a follower's Fetch waits at its leader for new records."
    "replica.fetch.max.bytes" => replica_fetch_max_bytes: u32 = 1024 * 1024, Bound::AtLeast(1, Unit::Bytes);
        "Bytes a follower asks for per partition in one Fetch (at least one batch comes whatever this says)."
    "replica.fetch.response.max.bytes" => replica_fetch_response_max_bytes: u32 = 10 * 1024 * 1024, Bound::AtMost(REPLICA_FETCH_RESPONSE_BYTES_LIMIT as i128, Unit::Bytes);
        "Bytes a follower asks for in one Fetch over all its partitions; a response frame larger than this plus its framing is refused (the bound of a fetcher's buffer)."
    "replica.fetch.backoff.ms" => replica_fetch_backoff_ms: u64 = skiff_cluster::replica::REPLICA_FETCH_BACKOFF_MS_DEFAULT;
        "Pause of a follower's partition after a failed Fetch (an error from the leader, or no answer) before it fetches again."
    "skiff.reassignment.throttle.bytes.per.second" => reassignment_throttle_bytes_per_second: u64 = REASSIGNMENT_THROTTLE_BYTES_PER_SECOND_DEFAULT;
        "Bytes per second this broker's followers may fetch, summed over the partitions they are catching up for a partition reassignment (a replica in the reassignment's target, not yet in the ISR), so that a reassignment leaves bandwidth to clients and to the other followers (Kafka's follower.replication.throttled.rate, here applied to every reassignment without listing replicas). A second's worth may come at once. 0: unthrottled."
    "controlled.shutdown.enable" => controlled_shutdown_enable: bool = true;
        "At a graceful shutdown (SIGTERM) in a cluster, first mark this broker shutting_down in the metadata store so the controller moves each of its leaderships to another running ISR member and drops it from ISRs, and wait (still serving) until it leads nothing another broker could lead, or skiff.controlled.shutdown.timeout.ms (Kafka's key). Clients then fail over within moments instead of a session timeout. Alone in the cluster (the local store) there is nothing to move and it costs nothing."
    "skiff.controlled.shutdown.timeout.ms" => controlled_shutdown_timeout_ms: u64 = 30_000;
        "How long a controlled shutdown waits for its leaderships to move before the broker drains and exits anyway (the rest then fail over after the session ends, as after a crash)."
    "unclean.leader.election.enable" => unclean_leader_election_enable: bool = false;
        "Default of the topic config unclean.leader.election.enable (Kafka's key and default), as the controller applies it: when no ISR member of a partition runs, elect the first running replica outside the ISR, losing the acknowledged records it lacks, instead of leaving the partition leaderless until an ISR member returns."
    "auto.leader.rebalance.enable" => auto_leader_rebalance_enable: bool = true;
        "As controller, every leader.imbalance.check.interval.seconds, give partitions back to their preferred replica (the first of their replicas) where it runs and is in the ISR, for each broker whose share of such partitions led elsewhere is above leader.imbalance.per.broker.percentage (Kafka's keys and defaults). Leaderships that moved at a failover or a controlled shutdown thus return once the broker is back in sync."
    "leader.imbalance.check.interval.seconds" => leader_imbalance_check_interval_seconds: u64 = 300, Bound::AtLeast(1, Unit::Seconds);
        "How often the controller checks the leader imbalance (auto.leader.rebalance.enable). At least 1."
    "leader.imbalance.per.broker.percentage" => leader_imbalance_per_broker_percentage: u32 = 10, Bound::AtMost(100, Unit::Percent);
        "Share of the partitions a broker is the preferred replica of that may be led elsewhere before the controller rebalances them, in percent (0 to 100)."
    "skiff.placement.shed.enable" => placement_shed_enable: bool = true;
        "As controller, run the bundle shedder every skiff.placement.shed.interval.ms and move bundles (their partitions' leaderships) from the most to the least loaded brokers (docs/design/cluster.md §5). false turns shedding off; bundle records are still kept and moves already begun still finish."
    "skiff.placement.shed.interval.ms" => placement_shed_interval_ms: u64 = 60_000, Bound::AtLeast(PLACEMENT_SHED_INTERVAL_MS_MIN, Unit::Milliseconds);
        "How often the controller runs the shedder (one shedding cycle). At least 1000."
    "skiff.placement.shedder" => placement_shedder: String = "skiff".to_owned(), Bound::OneOf(SHEDDERS);
        "Which shedder decides the moves: skiff (Skiff's settled pair shedder, the default), avg (Pulsar's AvgShedder), threshold (ThresholdShedder), uniform (UniformLoadShedder), transfer (TransferShedder) or overload (OverloadShedder)."
    "skiff.placement.bundle.cooldown.ms" => placement_bundle_cooldown_ms: u64 = 1_800_000;
        "A bundle that moved is not moved again for this long, no bundle returns within it to a broker it left, and no move within it reverses a recent move between the same two brokers (Pulsar's 30 min grace period)."
    "skiff.placement.shed.moves.max" => placement_shed_moves_max: usize = 4, Bound::AtLeast(1, Unit::Count);
        "Most bundle moves one shedding cycle starts. At least 1."
    "skiff.placement.shed.dry.run" => placement_shed_dry_run: bool = false;
        "Run the shedder and log and show its plan (GET /placement/bundles, skiff placement status, skiff_placement_planned_moves_total) without moving anything."
    "skiff.placement.broker.capacity.bytes.per.second" => placement_broker_capacity_bytes_per_second: u64 = 0;
        "The load (bytes in from clients plus replication bytes in, per second) at which a broker scores 100 % for the shedder. 0 (default): relative, twice the cluster's mean load, so the mean broker scores 50 % and the shedder balances brokers against each other."
    "skiff.metadata.start.timeout.ms" => metadata_start_timeout_ms: u64 = 30_000;
        "How long a starting broker retries an unreachable metadata store before it exits with an error naming the endpoints."
    "allow.everyone.if.no.acl.found" => allow_everyone_if_no_acl_found: bool = false;
        "With an ACL file: allow an operation on a resource that no ACL mentions (Kafka's key; default deny)."
    "ssl.principal.mapping.rules" => ssl_principal_mapping_rules: SslPrincipalMappingRules = SslPrincipalMappingRules::default();
        "How a verified SSL client certificate's subject (its RFC 2253 name) becomes the user name of its principal (Kafka's key and syntax): comma-separated rules tried in order, DEFAULT (the name unchanged) or RULE:pattern/replacement/ with an optional L or U (lower or upper case); a rule applies when its pattern matches the whole name. A subject no rule applies to is refused: the connection is closed. Patterns use Java's regex syntax without look-around and back-references."
    "skiff.frame.capture.dir" => frame_capture_dir: Option<PathBuf> = None;
        "Directory to write every distinct request frame to, as received, for the replay corpus of real clients' requests (scripts/capture-frames.sh). Empty (default): nothing is written; frames hold client data (records, SASL passwords), so use it on test brokers only."
    "skiff.frame.capture.max.frames" => frame_capture_max_frames: usize = FRAME_CAPTURE_FRAMES_MAX_DEFAULT;
        "With skiff.frame.capture.dir: files written at most; later frames are dropped."
    "skiff.frame.capture.max.bytes" => frame_capture_max_bytes: u64 = FRAME_CAPTURE_BYTES_MAX_DEFAULT;
        "With skiff.frame.capture.dir: bytes of frames written at most; a frame that would pass it is dropped."
}

impl Config {
    /// Whether an acks=all Produce waits for the high watermark to pass its batches before it is
    /// answered: always, except under the test-only mutation `skiff.test.mutation=ack-before-hw`
    /// (builds with the feature `test-mutations`).
    pub fn acks_all_waits_for_high_watermark(&self) -> bool {
        #[cfg(feature = "test-mutations")]
        if self.test_mutation == Some(test_mutation::TestMutation::AckBeforeHw) {
            return false;
        }
        true
    }

    /// Reads a TOML file and applies `key=value` overrides over the defaults, then validates.
    pub fn load(file: Option<&Path>, overrides: &[String]) -> Result<Self, ConfigError> {
        let mut config = Self::default();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.to_owned(),
                source,
            })?;
            config.apply_toml(&text).map_err(|error| match error {
                ConfigError::Parse { message, .. } => ConfigError::Parse {
                    path: path.to_owned(),
                    message,
                },
                other => other,
            })?;
        }
        for argument in overrides {
            config.apply_override(argument)?;
        }
        config.validate()?;
        Ok(config)
    }

    /// Applies every key of a TOML document.
    pub fn apply_toml(&mut self, text: &str) -> Result<(), ConfigError> {
        let table: toml::Table =
            text.parse()
                .map_err(|error: toml::de::Error| ConfigError::Parse {
                    path: PathBuf::new(),
                    message: error.message().to_owned(),
                })?;
        let mut flat = BTreeMap::new();
        flatten("", &table, &mut flat);
        for (key, value) in flat {
            self.set(&key, &value)?;
        }
        Ok(())
    }

    /// Applies one `key=value` argument; the value is read as TOML if it parses, else as a string.
    pub fn apply_override(&mut self, argument: &str) -> Result<(), ConfigError> {
        let (key, raw) = argument
            .split_once('=')
            .ok_or_else(|| ConfigError::BadOverride {
                argument: argument.to_owned(),
            })?;
        let value = format!("value = {raw}")
            .parse::<toml::Table>()
            .ok()
            .and_then(|mut table| table.remove("value"))
            .unwrap_or_else(|| toml::Value::String(raw.to_owned()));
        self.set(key.trim(), &value)
    }

    /// The defaults of a cluster (a shared `skiff.metadata.store`) for the keys not set:
    /// `default.replication.factor`, `offsets.topic.replication.factor` and
    /// `transaction.state.log.replication.factor` 3 and `min.insync.replicas` and
    /// `transaction.state.log.min.isr` 2, so that a broker's loss loses no acknowledged record and acks=all
    /// still has a follower to wait for. The embedded single node keeps 1, 1 and 1 (it has one
    /// broker). Called by `Broker::start` before it validates.
    pub fn apply_cluster_defaults(&mut self) {
        if matches!(self.metadata_store, skiff_meta::StoreAddress::Local) {
            return;
        }
        let unset = |key: &str| !self.explicitly_set.contains(key);
        if unset("default.replication.factor") {
            self.default_replication_factor = CLUSTER_REPLICATION_FACTOR_DEFAULT;
        }
        if unset("offsets.topic.replication.factor") {
            self.offsets_topic_replication_factor = CLUSTER_REPLICATION_FACTOR_DEFAULT;
        }
        if unset("min.insync.replicas") {
            self.min_insync_replicas = CLUSTER_MIN_INSYNC_REPLICAS_DEFAULT;
        }
        if unset("transaction.state.log.replication.factor") {
            self.transaction_state_log_replication_factor =
                txn::STATE_LOG_CLUSTER_REPLICATION_FACTOR;
        }
        if unset("transaction.state.log.min.isr") {
            self.transaction_state_log_min_isr = txn::STATE_LOG_CLUSTER_MIN_ISR;
        }
    }

    /// Checks every key's own bound (the table's bound column), then the rules between keys.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (key, bound, value) in self.bounded_values() {
            if !bound.admits(value) {
                return Err(ConfigError::OutOfBounds {
                    key,
                    value: self.value_text(key).flatten().unwrap_or_default(),
                    bound,
                });
            }
        }
        self.check_cross_key_rules()?;
        self.check_listener_keystores()
    }

    /// Every `listener.name.<listener>.ssl.keystore.location` names a TLS listener of
    /// `listeners` (a keystore no listener would use is a mistake, not a no-op).
    fn check_listener_keystores(&self) -> Result<(), ConfigError> {
        if self.listener_keystores.is_empty() {
            return Ok(());
        }
        let listeners = self.listener_configs()?;
        for name in self.listener_keystores.keys() {
            let tls = listeners
                .iter()
                .find(|listener| listener.name.eq_ignore_ascii_case(name))
                .map(|listener| listener.protocol.uses_tls());
            if tls != Some(true) {
                return Err(ConfigError::InvalidValue {
                    key: format!("listener.name.{name}.ssl.keystore.location"),
                    reason: format!("no SSL or SASL_SSL listener is named {name} in listeners"),
                });
            }
        }
        Ok(())
    }

    /// The keystore a TLS listener serves: its own (`listener.name.<listener>.ssl.keystore.location`)
    /// or `ssl.keystore.location`.
    pub fn keystore_of(&self, listener: &str) -> Option<&std::path::Path> {
        self.listener_keystores
            .get(&listener.to_ascii_lowercase())
            .or(self.ssl_keystore_location.as_ref())
            .map(std::path::PathBuf::as_path)
    }

    /// The listener name followers fetch on: `inter.broker.listener.name`, else the first
    /// PLAINTEXT listener; `None` when there is none (a single node needs none).
    pub fn inter_broker_listener(&self) -> Option<String> {
        let listeners = self.listener_configs().ok()?;
        match &self.inter_broker_listener_name {
            Some(name) => Some(name.clone()),
            None => listeners
                .iter()
                .find(|listener| listener.protocol == SecurityProtocol::Plaintext)
                .map(|listener| listener.name.clone()),
        }
    }

    /// Every entry of `listeners` with its security protocol (from
    /// `listener.security.protocol.map`) and what `advertised.listeners` says for it.
    pub fn listener_configs(&self) -> Result<Vec<ListenerConfig>, ConfigError> {
        listeners::resolve(
            &self.listeners,
            self.advertised_listeners.as_ref(),
            &self.listener_security_protocol_map,
        )
    }
}

/// The non-empty, trimmed items of a comma-separated value (Kafka's list syntax).
fn comma_items(text: &str) -> impl Iterator<Item = &str> {
    text.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
}

fn flatten(prefix: &str, table: &toml::Table, out: &mut BTreeMap<String, toml::Value>) {
    for (name, value) in table {
        let key = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        match value {
            toml::Value::Table(inner) => flatten(&key, inner, out),
            other => {
                out.insert(key, other.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_strings_unescape_to_their_text() {
        for text in [
            "",
            "plain",
            "User:admin\u{c}.d;User:ops",
            "tab\tnew\nline\r\0nul",
            "quote \" backslash \\ apostrophe '",
            "del \u{7f} and a tag \u{e0001}, an emoji \u{1f600}",
        ] {
            assert_eq!(
                unescape_debug_str(&format!("{text:?}")).as_deref(),
                Some(text)
            );
        }
        for not_a_literal in [
            "lazy",
            "\"unterminated",
            "\"bad \\q escape\"",
            "\"\\u{110000}\"",
        ] {
            assert_eq!(unescape_debug_str(not_a_literal), None, "{not_a_literal}");
        }
    }

    proptest::proptest! {
        #[test]
        fn every_string_survives_its_debug_form(text in ".*") {
            proptest::prop_assert_eq!(unescape_debug_str(&format!("{text:?}")), Some(text));
        }
    }

    /// The input the fuzz target `config_toml` found: a control character in `super.users` came
    /// back from `value_text` quoted and escaped, so the value did not load again.
    #[test]
    fn a_control_character_in_super_users_reads_back_as_set() {
        let mut config = Config::default();
        config
            .apply_toml("\"super.users\" = \"User:a\\fb;User:ops\"")
            .expect("loads");
        assert_eq!(
            config.value_text("super.users"),
            Some(Some("User:a\u{c}b;User:ops".to_owned()))
        );
    }

    #[test]
    fn a_cluster_defaults_to_three_replicas_and_two_in_sync_unless_set() {
        let mut local = Config::default();
        local.apply_cluster_defaults();
        assert_eq!(
            (
                local.default_replication_factor,
                local.offsets_topic_replication_factor,
                local.min_insync_replicas
            ),
            (1, 1, 1)
        );
        let mut cluster = Config::default();
        cluster
            .apply_override("skiff.metadata.store=etcd://127.0.0.1:2379")
            .expect("store");
        cluster
            .apply_override("offsets.topic.replication.factor=2")
            .expect("set");
        cluster.apply_cluster_defaults();
        assert_eq!(
            (
                cluster.default_replication_factor,
                cluster.offsets_topic_replication_factor,
                cluster.min_insync_replicas
            ),
            (3, 2, 2)
        );
    }

    #[test]
    fn socket_buffer_sizes_take_kafka_values_or_the_kernel_default() {
        // Kafka's shipped server.properties sets both to 102400.
        for key in ["socket.send.buffer.bytes", "socket.receive.buffer.bytes"] {
            for good in ["102400", "-1"] {
                let mut config = Config::default();
                config
                    .apply_override(&format!("{key}={good}"))
                    .expect("set");
                config.validate().expect(good);
            }
            for bad in ["0", "-2"] {
                let mut config = Config::default();
                config.apply_override(&format!("{key}={bad}")).expect("set");
                let error = config.validate().expect_err(bad).to_string();
                assert!(error.contains(key), "{error}");
            }
        }
        let defaults = Config::default();
        assert_eq!(
            (
                defaults.socket_send_buffer_bytes,
                defaults.socket_receive_buffer_bytes
            ),
            (-1, -1)
        );
    }

    #[test]
    fn defaults_are_the_embedded_single_node() {
        let config = Config::default();
        config.validate().expect("defaults validate");
        let listeners = config.listener_configs().expect("listeners");
        assert_eq!(listeners.len(), 1);
        assert_eq!(listeners[0].name, "PLAINTEXT");
        assert_eq!(listeners[0].protocol, SecurityProtocol::Plaintext);
        assert_eq!(
            listeners[0].address,
            "127.0.0.1:9092".parse().expect("addr")
        );
        assert_eq!(config.log_dirs, PathBuf::from("./skiff-data"));
    }

    #[cfg(not(feature = "test-mutations"))]
    #[test]
    fn the_test_mutation_key_is_unknown_without_its_feature() {
        let mut config = Config::default();
        let error = config
            .apply_override("skiff.test.mutation=ack-before-hw")
            .expect_err("refused");
        assert!(matches!(error, ConfigError::UnknownKey { .. }), "{error}");
        assert!(config.acks_all_waits_for_high_watermark());
    }

    #[cfg(feature = "test-mutations")]
    #[test]
    fn the_test_mutation_ack_before_hw_turns_the_acks_all_wait_off_only_when_set() {
        let mut config = Config::default();
        assert!(config.acks_all_waits_for_high_watermark());
        config
            .apply_override("skiff.test.mutation=ack-before-hw")
            .expect("known with the feature");
        assert!(!config.acks_all_waits_for_high_watermark());
        let error = config
            .apply_override("skiff.test.mutation=lose-everything")
            .expect_err("refused");
        assert!(matches!(error, ConfigError::InvalidValue { .. }), "{error}");
    }

    #[test]
    fn quoted_and_nested_dotted_keys_both_work() {
        let mut config = Config::default();
        config
            .apply_toml("\"num.partitions\" = 3\n[log.segment]\nbytes = 1048576\n")
            .expect("applies");
        assert_eq!(config.num_partitions, 3);
        assert_eq!(config.log_segment_bytes, 1_048_576);
    }

    #[test]
    fn overrides_parse_types_and_strings() {
        let mut config = Config::default();
        config
            .apply_override("auto.create.topics.enable=false")
            .expect("bool");
        config
            .apply_override("log.dirs=/tmp/x")
            .expect("bare string");
        config
            .apply_override("skiff.down.conversion.mode=eager")
            .expect("enum");
        assert!(!config.auto_create_topics_enable);
        assert_eq!(config.log_dirs, PathBuf::from("/tmp/x"));
        assert_eq!(config.down_conversion_mode, DownConversionMode::Eager);
    }

    #[test]
    fn values_read_back_as_written_and_set_keys_are_remembered() {
        let mut config = Config::default();
        config.apply_override("log.dirs=/tmp/x").expect("path");
        config.apply_override("num.partitions=3").expect("number");
        assert_eq!(
            config.value_text("log.dirs"),
            Some(Some("/tmp/x".to_owned()))
        );
        assert_eq!(
            config.value_text("num.partitions"),
            Some(Some("3".to_owned()))
        );
        assert_eq!(
            config.value_text("listeners"),
            Some(Some("PLAINTEXT://127.0.0.1:9092".to_owned()))
        );
        assert_eq!(
            config.value_text("auto.create.topics.enable"),
            Some(Some("true".to_owned()))
        );
        assert_eq!(config.value_text("skiff.acl.file"), Some(None));
        assert_eq!(config.value_text("log.dirz"), None);
        // As a file writes it (the derived `Debug` said `Lazy`, which does not load).
        config
            .apply_override("skiff.down.conversion.mode=eager")
            .expect("mode");
        assert_eq!(
            config.value_text("skiff.down.conversion.mode"),
            Some(Some("eager".to_owned()))
        );
        assert!(config.explicitly_set.contains("log.dirs"));
        assert!(!config.explicitly_set.contains("listeners"));
        for (key, _, _) in keys() {
            assert!(config.value_text(key).is_some(), "{key}");
        }
    }

    #[test]
    fn bad_config_gives_a_clear_error() {
        let mut config = Config::default();
        let error = config.apply_override("log.dirz=/tmp").expect_err("unknown");
        assert!(error.to_string().contains("log.dirz"));
        let error = config
            .apply_override("num.partitions=many")
            .expect_err("type");
        assert!(error.to_string().contains("num.partitions"));
        config.log_segment_bytes = 1 << 33;
        assert!(config.validate().is_err());
        assert!(configured(&["listeners=SSL://127.0.0.1:9093"])
            .expect_err("ssl without a keystore")
            .to_string()
            .contains("ssl.keystore.location"));
        let config = Config {
            group_initial_rebalance_delay_ms: -1,
            ..Config::default()
        };
        assert!(config
            .validate()
            .expect_err("negative delay")
            .to_string()
            .contains("group.initial.rebalance.delay.ms"));
        assert!(Config::default().apply_toml("= broken").is_err());
    }

    #[test]
    fn several_listeners_with_a_custom_name_and_advertised_endpoints() {
        let config = configured(&[
            "listeners=PLAINTEXT://127.0.0.1:0,INTERNAL://[::1]:9094,SASL_SSL://localhost:9095",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
            "advertised.listeners=SASL_SSL://broker.example:19095,PLAINTEXT://h:0",
            "ssl.keystore.location=/x.pem",
            "skiff.sasl.credentials.file=/users",
        ])
        .expect("valid");
        let listeners = config.listener_configs().expect("listeners");
        let protocols: Vec<_> = listeners.iter().map(|l| l.protocol).collect();
        assert_eq!(
            protocols,
            [
                SecurityProtocol::Plaintext,
                SecurityProtocol::SaslPlaintext,
                SecurityProtocol::SaslSsl
            ]
        );
        assert_eq!(listeners[1].address, "[::1]:9094".parse().expect("v6"));
        let bound: SocketAddr = "127.0.0.1:4000".parse().expect("addr");
        assert_eq!(listeners[0].advertised_endpoint(bound), ("h".into(), 4000));
        assert_eq!(
            listeners[1].advertised_endpoint(bound),
            ("127.0.0.1".into(), 4000)
        );
        assert_eq!(
            listeners[2].advertised_endpoint(bound),
            ("broker.example".into(), 19095)
        );
    }

    #[test]
    fn listener_mistakes_are_named() {
        let cases: [(&str, &[&str]); 10] = [
            (
                "listener.security.protocol.map",
                &["listeners=EXTERNAL://127.0.0.1:1"],
            ),
            (
                "appears twice",
                &["listeners=PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2"],
            ),
            (
                "skiff.sasl.credentials.file",
                &["listeners=SASL_PLAINTEXT://127.0.0.1:1"],
            ),
            (
                "sasl.enabled.mechanisms",
                &["sasl.enabled.mechanisms=GSSAPI"],
            ),
            (
                "ssl.truststore.location",
                &[
                    "listeners=SSL://127.0.0.1:1",
                    "ssl.keystore.location=/x.pem",
                    "ssl.client.auth=required",
                ],
            ),
            ("ssl.client.auth", &["ssl.client.auth=yes"]),
            ("advertised.listeners", &["advertised.listeners=SSL://h:1"]),
            (
                "skiff.metrics.listener",
                &["skiff.metrics.listener=localhost"],
            ),
            ("super.users", &["super.users=admin"]),
            (
                "queued.max.request.bytes",
                &["queued.max.request.bytes=1000"],
            ),
        ];
        for (expected, overrides) in cases {
            let error = configured(overrides).expect_err(expected).to_string();
            assert!(
                error.contains(expected),
                "{error} should mention {expected}"
            );
        }
    }

    #[test]
    fn typed_values_show_as_written_in_config_keys() {
        let shown: BTreeMap<&str, String> = keys()
            .into_iter()
            .map(|(key, default, _)| (key, default))
            .collect();
        for (key, default) in [
            ("listeners", "\"PLAINTEXT://127.0.0.1:9092\""),
            ("advertised.listeners", "None"),
            ("skiff.metrics.listener", "None"),
            (
                "listener.security.protocol.map",
                "\"PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL\"",
            ),
            ("ssl.client.auth", "\"none\""),
            (
                "sasl.enabled.mechanisms",
                "\"PLAIN,SCRAM-SHA-256,SCRAM-SHA-512\"",
            ),
            ("super.users", "\"\""),
        ] {
            assert_eq!(shown[key], default, "{key}");
        }
    }

    #[test]
    fn connection_limits_parse_and_bad_ones_are_named() {
        let config = configured(&[
            "max.connections.per.ip=0",
            "max.connections.per.ip.overrides=127.0.0.1:3,[::1]:2",
        ])
        .expect("0 with overrides");
        assert_eq!(config.max_connections_per_ip, 0);
        assert_eq!(config.max_connections_per_ip_overrides.limits.len(), 2);
        assert_eq!(
            config.value_text("max.connections.per.ip.overrides"),
            Some(Some("127.0.0.1:3,[::1]:2".to_owned()))
        );
        assert_eq!(Config::default().max_connections_per_ip, i32::MAX);
        for (expected, overrides) in [
            ("max.connections.per.ip", &["max.connections.per.ip=0"][..]),
            ("max.connections.per.ip", &["max.connections.per.ip=-1"][..]),
            (
                "max.connections.per.ip.overrides",
                &["max.connections.per.ip.overrides=broker.example:4"][..],
            ),
            ("max.connections", &["max.connections=0"][..]),
            (
                "socket.listen.backlog.size",
                &["socket.listen.backlog.size=0"][..],
            ),
        ] {
            let error = configured(overrides).expect_err(expected).to_string();
            assert!(
                error.contains(expected),
                "{error} should mention {expected}"
            );
        }
    }

    /// Walks the bound column, so a key given a bound later is covered without a new test.
    #[test]
    fn every_bounded_key_refuses_a_value_just_outside_its_bound_naming_all_three() {
        for &(key, bound) in BOUNDS {
            for value in bound.just_outside() {
                let mut config = Config::default();
                // The key's type must hold the value, or the bound says less than the type.
                config
                    .apply_override(&format!("{key}={value}"))
                    .unwrap_or_else(|error| panic!("{key}={value} does not load: {error}"));
                let error = config
                    .validate()
                    .expect_err(&format!("{key}={value} is outside {bound}"));
                let text = error.to_string();
                match error {
                    ConfigError::OutOfBounds {
                        key: named,
                        value: shown,
                        bound: said,
                    } => assert_eq!((named, shown.as_str(), said), (key, value.as_str(), bound)),
                    other => panic!("{key}={value}: {other}"),
                }
                assert!(
                    text.contains(key)
                        && text.contains(&value)
                        && text.contains(&bound.to_string()),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn every_bounded_key_accepts_its_bound_itself() {
        for &(key, bound) in BOUNDS {
            for value in bound.edges() {
                let config = configured(&[&format!("{key}={value}")]);
                match config {
                    Ok(config) => {
                        assert_eq!(config.value_text(key), Some(Some(value.clone())), "{key}")
                    }
                    // At its bound a key may still break a rule with another key's default
                    // (max.connections.per.ip = 0 needs overrides), never its own bound.
                    Err(ConfigError::Conflict { keys, .. }) if keys.contains(&key) => {}
                    Err(error) => panic!("{key}={value} is within {bound}: {error}"),
                }
            }
        }
    }

    #[test]
    fn the_defaults_keep_every_bound_and_every_key_named_in_the_table_exists() {
        let defaults = Config::default();
        for (key, bound, value) in defaults.bounded_values() {
            assert!(bound.admits(value), "{key}'s default is outside {bound}");
        }
        for rule in rules::CROSS_KEY_RULES {
            for key in rule.keys {
                assert!(defaults.value_text(key).is_some(), "{}: {key}", rule.name);
            }
        }
    }

    #[test]
    fn every_allowed_shedder_is_one_the_placement_crate_knows() {
        for name in SHEDDERS {
            skiff_placement::shed::ShedderConfig::named(name).expect(name);
        }
    }

    #[test]
    fn errors_read_key_value_and_bound() {
        for (overrides, expected) in [
            (
                &["log.segment.bytes=0"][..],
                "log.segment.bytes = 0: must be between 1 and 4294967295 bytes",
            ),
            (
                &["broker.session.timeout.ms=1500"][..],
                "broker.session.timeout.ms = 1500: must be whole seconds between 1000 and 3600000 ms",
            ),
            (
                &["socket.send.buffer.bytes=0"][..],
                "socket.send.buffer.bytes = 0: must be -1 (the kernel's autotuning) or at least 1 byte",
            ),
            (
                &["skiff.placement.shedder=fair"][..],
                "skiff.placement.shedder = fair: must be one of skiff, avg, threshold, uniform, transfer, overload",
            ),
            (
                &["message.max.bytes=2000", "socket.request.max.bytes=1000"][..],
                "socket.request.max.bytes = 1000 is below message.max.bytes = 2000: no batch of that size could arrive (rule 'a batch fits a request' over socket.request.max.bytes, message.max.bytes)",
            ),
        ] {
            let error = configured(overrides).expect_err(expected);
            assert_eq!(error.to_string(), expected);
        }
    }

    #[test]
    fn consumer_group_timeouts_are_checked_as_kafka_checks_them() {
        let rule = "(rule 'consumer group timeouts are ordered' over group.consumer.heartbeat.interval.ms, group.consumer.session.timeout.ms, group.consumer.min.heartbeat.interval.ms, group.consumer.max.heartbeat.interval.ms, group.consumer.min.session.timeout.ms, group.consumer.max.session.timeout.ms)";
        for (overrides, expected) in [
            (
                &["group.consumer.min.heartbeat.interval.ms=20000"][..],
                "group.consumer.max.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms",
            ),
            (
                &["group.consumer.heartbeat.interval.ms=16000"][..],
                "group.consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms",
            ),
            (
                &["group.consumer.session.timeout.ms=40000"][..],
                "group.consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms",
            ),
            (
                &["group.consumer.session.timeout.ms=70000"][..],
                "group.consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms",
            ),
            (
                &[
                    "group.consumer.min.session.timeout.ms=1000",
                    "group.consumer.session.timeout.ms=5000",
                ][..],
                "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms",
            ),
        ] {
            let error = configured(overrides).expect_err(expected);
            assert_eq!(error.to_string(), format!("{expected} {rule}"));
        }
        let fine = configured(&[
            "group.consumer.session.timeout.ms=50000",
            "group.consumer.heartbeat.interval.ms=15000",
        ]);
        assert!(fine.is_ok(), "{fine:?}");
    }

    /// The defaults with `overrides` applied (as `--set` does), validated.
    fn configured(overrides: &[&str]) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        for argument in overrides {
            config.apply_override(argument)?;
        }
        config.validate()?;
        Ok(config)
    }
}
