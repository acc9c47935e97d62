//! Broker configuration: every key, its default and why, in one table. Keys use Kafka's names where
//! Kafka has one (`log.dirs`, `listeners`, `message.max.bytes`, ...); Skiff's own keys start with
//! `skiff.`. Values come from a TOML file (dotted keys may be written quoted, `"log.dirs" = "..."`, or
//! as nested tables) and from `--set key=value` on the command line, in that order.
//!
//! Must never: read a key it does not know without an error, or accept a value that breaks a bound.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

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
    /// A value of the wrong type or out of range.
    #[error("invalid value for '{key}': {reason}")]
    InvalidValue {
        /// The key.
        key: String,
        /// What is wrong with it.
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

impl FromConfigValue for Option<PathBuf> {
    fn from_value(key: &str, value: &toml::Value) -> Result<Self, ConfigError> {
        Ok(Option::<String>::from_value(key, value)?.map(PathBuf::from))
    }
}

/// How legacy fetches are down-converted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DownConversionMode {
    /// KIP-283: convert one chunk at a time while the socket drains (the only mode for production).
    Lazy,
    /// Convert each partition's whole answer before sending, as Kafka did before 2.0. Exists only so
    /// `skiff-bench memory` can show what the lazy mode saves; its memory grows with the response size.
    Eager,
}

macro_rules! config_keys {
    ($( $key:literal => $field:ident : $ty:ty = $default:expr; $doc:literal )*) => {
        /// The broker's configuration; see [`KEYS`] for every key, its default and its meaning.
        #[derive(Debug, Clone)]
        pub struct Config {
            $( #[doc = $doc] pub $field: $ty, )*
        }

        impl Default for Config {
            fn default() -> Self {
                Self { $( $field: $default, )* }
            }
        }

        /// Every key: name, default as written in a config file, meaning.
        pub fn keys() -> Vec<(&'static str, String, &'static str)> {
            let defaults = Config::default();
            vec![ $( ($key, format!("{:?}", defaults.$field), $doc), )* ]
        }

        impl Config {
            fn set(&mut self, key: &str, value: &toml::Value) -> Result<(), ConfigError> {
                match key {
                    $( $key => self.$field = FromConfigValue::from_value(key, value)?, )*
                    _ => return Err(ConfigError::UnknownKey { key: key.to_owned() }),
                }
                Ok(())
            }
        }
    };
}

/// Kafka's `message.max.bytes` default: 1 MiB plus the 12-byte log overhead.
pub const MESSAGE_BYTES_MAX_DEFAULT: u32 = 1024 * 1024 + 12;
/// Kafka's `socket.request.max.bytes` default.
pub const REQUEST_BYTES_MAX_DEFAULT: u32 = 100 * 1024 * 1024;
/// KIP-283's chunk: 128 KiB of source batches per converted chunk.
pub const DOWN_CONVERSION_CHUNK_BYTES_DEFAULT: usize = 128 * 1024;

config_keys! {
    "node.id" => node_id: i32 = 1;
        "This broker's id in Metadata answers."
    "log.dirs" => log_dirs: PathBuf = PathBuf::from("./skiff-data");
        "Directory holding the partition logs, topic metadata and group offsets."
    "listeners" => listeners: String = "PLAINTEXT://127.0.0.1:9092".to_owned();
        "Comma-separated listeners, NAME://host:port. Port 0 picks a free port."
    "advertised.listeners" => advertised_listeners: Option<String> = None;
        "What Metadata tells clients to connect to; empty means the bound listener address."
    "num.partitions" => num_partitions: i32 = 1;
        "Partitions of an auto-created topic."
    "default.replication.factor" => default_replication_factor: i16 = 1;
        "Replication factor of an auto-created topic (one node today: must be 1)."
    "auto.create.topics.enable" => auto_create_topics_enable: bool = true;
        "Create a topic on first Metadata or Produce for it."
    "log.segment.bytes" => log_segment_bytes: u64 = 1024 * 1024 * 1024;
        "Size at which a segment rolls (at most 4 GiB - 1: index positions are 4 bytes)."
    "log.roll.ms" => log_roll_ms: u64 = 7 * 24 * 3600 * 1000;
        "Age at which a segment rolls."
    "log.retention.ms" => log_retention_ms: i64 = 7 * 24 * 3600 * 1000;
        "Age after which whole segments are deleted; -1 keeps them forever."
    "log.retention.bytes" => log_retention_bytes: i64 = -1;
        "Partition size above which the oldest segments are deleted; -1 means no limit."
    "log.retention.check.interval.ms" => log_retention_check_interval_ms: u64 = 5 * 60 * 1000;
        "How often segments are rolled by age and retention is enforced."
    "log.flush.interval.messages" => log_flush_interval_messages: u64 = u64::MAX;
        "fsync after this many messages; 1 means every append is on disk before it is acknowledged."
    "log.flush.interval.ms" => log_flush_interval_ms: u64 = u64::MAX;
        "fsync when the oldest unflushed message is older than this."
    "log.index.interval.bytes" => log_index_interval_bytes: u32 = 4096;
        "Bytes of log between two offset-index entries."
    "message.max.bytes" => message_max_bytes: u32 = MESSAGE_BYTES_MAX_DEFAULT;
        "Largest record batch a producer may append."
    "socket.request.max.bytes" => socket_request_max_bytes: u32 = REQUEST_BYTES_MAX_DEFAULT;
        "Largest request frame; a bigger size prefix closes the connection before anything is read."
    "max.connections" => max_connections: usize = 1000;
        "Connections served at once; further clients wait in the kernel's accept queue."
    "connections.max.idle.ms" => connections_max_idle_ms: u64 = 10 * 60 * 1000;
        "A connection with no request and no progress writing for this long is closed."
    "fetch.max.bytes" => fetch_max_bytes: u32 = 55 * 1024 * 1024;
        "Cap on one Fetch response's record bytes, whatever the client asks."
    "fetch.wait.max.ms" => fetch_wait_max_ms: u64 = 30_000;
        "Cap on a Fetch request's max_wait_ms (long polling)."
    "log.message.downconversion.enable" => log_message_downconversion_enable: bool = true;
        "Default of the topic config message.downconversion.enable: serve Fetch v0-v3 by conversion."
    "skiff.down.conversion.chunk.bytes" => down_conversion_chunk_bytes: usize = DOWN_CONVERSION_CHUNK_BYTES_DEFAULT;
        "Source bytes converted per chunk for legacy fetches; one response holds at most one chunk."
    "skiff.down.conversion.mode" => down_conversion_mode: DownConversionMode = DownConversionMode::Lazy;
        "lazy (default) or eager. Eager converts whole responses up front and exists only for benchmarks."
    "skiff.advertised.kafka.version" => advertised_kafka_version: Option<String> = None;
        "Advertise only the API versions of this Kafka release (0.10.0, 0.10.2, ...) in ApiVersions."
    "skiff.shutdown.timeout.ms" => shutdown_timeout_ms: u64 = 10_000;
        "How long a graceful shutdown waits for in-flight responses."
    "group.min.session.timeout.ms" => group_min_session_timeout_ms: i32 = crate::group::config::SESSION_TIMEOUT_MS_MIN_DEFAULT;
        "Shortest session a group member may ask for; a JoinGroup asking less gets INVALID_SESSION_TIMEOUT."
    "group.max.session.timeout.ms" => group_max_session_timeout_ms: i32 = crate::group::config::SESSION_TIMEOUT_MS_MAX_DEFAULT;
        "Longest session a group member may ask for; a JoinGroup asking more gets INVALID_SESSION_TIMEOUT."
    "skiff.metrics.listener" => metrics_listener: Option<String> = None;
        "host:port of the Prometheus endpoint (GET /metrics); empty (default) serves none. Off by default so a broker never opens a second port nobody asked for."
    "listener.security.protocol.map" => listener_security_protocol_map: String = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL".to_owned();
        "Comma-separated LISTENER_NAME:SECURITY_PROTOCOL pairs; a listener's protocol comes from its name."
    "ssl.keystore.type" => ssl_keystore_type: String = "PEM".to_owned();
        "Format of ssl.keystore.location; only PEM is supported."
    "ssl.keystore.location" => ssl_keystore_location: Option<PathBuf> = None;
        "PEM file holding the certificate chain and the unencrypted private key of SSL/SASL_SSL listeners."
    "ssl.truststore.location" => ssl_truststore_location: Option<PathBuf> = None;
        "PEM file of CA certificates that client certificates must chain to (with ssl.client.auth)."
    "ssl.client.auth" => ssl_client_auth: String = "none".to_owned();
        "none, requested or required: whether SSL clients must present a certificate; its subject becomes the principal."
    "sasl.enabled.mechanisms" => sasl_enabled_mechanisms: String = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512".to_owned();
        "SASL mechanisms offered on SASL_PLAINTEXT/SASL_SSL listeners."
    "skiff.sasl.credentials.file" => sasl_credentials_file: Option<PathBuf> = None;
        "File of SASL users as salted SCRAM keys (`skiff sasl-credential` writes lines); needed by SASL listeners."
    "skiff.sasl.handshake.timeout.ms" => sasl_handshake_timeout_ms: u64 = 10_000;
        "A SASL connection that has not authenticated within this long is closed."
    "skiff.acl.file" => acl_file: Option<PathBuf> = None;
        "File of ACLs. Unset (default): no authorization, everything is allowed to everyone."
    "skiff.acl.reload.interval.ms" => acl_reload_interval_ms: u64 = 1000;
        "How often the ACL file is checked for changes; a changed file that parses replaces the ACLs without a restart."
    "super.users" => super_users: String = String::new();
        "Semicolon-separated principals (User:name) allowed everything, whatever the ACLs say."
    "allow.everyone.if.no.acl.found" => allow_everyone_if_no_acl_found: bool = false;
        "With an ACL file: allow an operation on a resource that no ACL mentions (Kafka's key; default deny)."
}

impl Config {
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

    /// Checks bounds and relations between keys.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.log_segment_bytes == 0 || self.log_segment_bytes > u64::from(u32::MAX) {
            return Err(invalid(
                "log.segment.bytes",
                "must be between 1 and 4294967295",
            ));
        }
        if self.num_partitions < 1 {
            return Err(invalid("num.partitions", "must be at least 1"));
        }
        if self.default_replication_factor != 1 {
            return Err(invalid(
                "default.replication.factor",
                "a single node supports only 1",
            ));
        }
        if self.message_max_bytes < 64 {
            return Err(invalid("message.max.bytes", "must be at least 64"));
        }
        if self.socket_request_max_bytes < self.message_max_bytes {
            return Err(invalid(
                "socket.request.max.bytes",
                "must be at least message.max.bytes, or no batch of that size could arrive",
            ));
        }
        if self.group_min_session_timeout_ms < 1
            || self.group_min_session_timeout_ms > self.group_max_session_timeout_ms
        {
            return Err(invalid(
                "group.min.session.timeout.ms",
                "must be at least 1 and at most group.max.session.timeout.ms",
            ));
        }
        if let Some(address) = &self.metrics_listener {
            address.parse::<SocketAddr>().map_err(|_| {
                invalid(
                    "skiff.metrics.listener",
                    format!("'{address}' is not host:port (an IP address and a port)"),
                )
            })?;
        }
        if self.max_connections == 0 {
            return Err(invalid("max.connections", "must be at least 1"));
        }
        if !(1024..=64 * 1024 * 1024).contains(&self.down_conversion_chunk_bytes) {
            return Err(invalid(
                "skiff.down.conversion.chunk.bytes",
                "must be between 1 KiB and 64 MiB",
            ));
        }
        if self.log_flush_interval_messages == 0 {
            return Err(invalid("log.flush.interval.messages", "must be at least 1"));
        }
        if let Some(release) = &self.advertised_kafka_version {
            if !crate::handlers::CAPPABLE_RELEASES.contains(&release.as_str()) {
                return Err(invalid(
                    "skiff.advertised.kafka.version",
                    format!("expected one of {:?}", crate::handlers::CAPPABLE_RELEASES),
                ));
            }
        }
        self.listener_addresses()?;
        Ok(())
    }

    /// The socket addresses of `listeners` (PLAINTEXT only in this release).
    pub fn listener_addresses(&self) -> Result<Vec<SocketAddr>, ConfigError> {
        parse_listeners("listeners", &self.listeners)
    }

    /// The host and port Metadata advertises for a listener bound at `bound`.
    pub fn advertised_address(&self, bound: SocketAddr) -> Result<(String, u16), ConfigError> {
        match &self.advertised_listeners {
            None => Ok((bound.ip().to_string(), bound.port())),
            Some(text) => {
                let first = text.split(',').next().unwrap_or_default().trim();
                let host_port = strip_protocol("advertised.listeners", first)?;
                let (host, port) = host_port
                    .rsplit_once(':')
                    .ok_or_else(|| invalid("advertised.listeners", "expected host:port"))?;
                let port: u16 = port
                    .parse()
                    .map_err(|_| invalid("advertised.listeners", "bad port"))?;
                let port = if port == 0 { bound.port() } else { port };
                Ok((host.trim_matches(['[', ']']).to_owned(), port))
            }
        }
    }
}

fn strip_protocol<'a>(key: &str, listener: &'a str) -> Result<&'a str, ConfigError> {
    let (protocol, address) = listener
        .split_once("://")
        .ok_or_else(|| invalid(key, format!("'{listener}' is not NAME://host:port")))?;
    if protocol != "PLAINTEXT" {
        return Err(invalid(
            key,
            format!("security protocol {protocol} is not supported yet (PLAINTEXT only)"),
        ));
    }
    Ok(address)
}

fn parse_listeners(key: &str, text: &str) -> Result<Vec<SocketAddr>, ConfigError> {
    let mut addresses = Vec::new();
    for listener in text
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
    {
        let address = strip_protocol(key, listener)?;
        let address = address.replace("localhost", "127.0.0.1");
        let parsed: SocketAddr = address
            .parse()
            .map_err(|_| invalid(key, format!("'{address}' is not an ip:port")))?;
        addresses.push(parsed);
    }
    if addresses.is_empty() {
        return Err(invalid(key, "at least one listener is needed"));
    }
    Ok(addresses)
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
    fn defaults_are_the_embedded_single_node() {
        let config = Config::default();
        config.validate().expect("defaults validate");
        assert_eq!(
            config.listener_addresses().expect("listeners"),
            vec!["127.0.0.1:9092".parse().expect("addr")]
        );
        assert_eq!(config.log_dirs, PathBuf::from("./skiff-data"));
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
        let config = Config {
            listeners: "SSL://127.0.0.1:9093".into(),
            ..Config::default()
        };
        assert!(config
            .validate()
            .expect_err("ssl")
            .to_string()
            .contains("SSL"));
        assert!(Config::default().apply_toml("= broken").is_err());
    }
}
