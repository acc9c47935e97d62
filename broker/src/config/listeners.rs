//! The listener keys, typed: `listeners` and `advertised.listeners` (`NAME://host:port,...`) and
//! `listener.security.protocol.map` (`NAME:PROTOCOL,...`), each parsed once when the key is set,
//! and [`ListenerConfig`], what the broker binds: the three joined by listener name.
//!
//! Must never: bind, resolve a host name, or read anything but the values it is given.

use std::fmt;
use std::net::SocketAddr;

use super::{comma_items, invalid, ConfigError};
pub use crate::security::session::SecurityProtocol;

/// One `NAME://host:port` entry of `listeners` or `advertised.listeners`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerAddress {
    /// The listener's name.
    pub name: String,
    /// The host as written (brackets of an IPv6 address removed).
    pub host: String,
    /// The port (0: a free port when binding, the bound port when advertising).
    pub port: u16,
}

/// The entries of `listeners` or `advertised.listeners`, in the order written.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ListenerList {
    /// Each entry.
    pub entries: Vec<ListenerAddress>,
}

impl ListenerList {
    /// `listeners`' default, `PLAINTEXT://127.0.0.1:9092` (a test checks it is what that parses
    /// to).
    pub fn plaintext_localhost_9092() -> Self {
        Self {
            entries: vec![ListenerAddress {
                name: "PLAINTEXT".to_owned(),
                host: "127.0.0.1".to_owned(),
                port: 9092,
            }],
        }
    }

    /// Parses `NAME://host:port,...`; IPv6 hosts are written in brackets. `key` names the key in
    /// errors.
    pub fn parse(key: &str, text: &str) -> Result<Self, ConfigError> {
        let mut entries = Vec::new();
        for listener in comma_items(text) {
            let (name, host_port) = listener
                .split_once("://")
                .ok_or_else(|| invalid(key, format!("'{listener}' is not NAME://host:port")))?;
            check_listener_name(key, name)?;
            let (host, port) = host_port
                .rsplit_once(':')
                .ok_or_else(|| invalid(key, format!("'{listener}' has no port")))?;
            let port: u16 = port
                .parse()
                .map_err(|_| invalid(key, format!("'{listener}' has a bad port")))?;
            let host = host.trim_matches(['[', ']']);
            if host.is_empty() {
                return Err(invalid(key, format!("'{listener}' has no host")));
            }
            if entries
                .iter()
                .any(|known: &ListenerAddress| known.name == name)
            {
                return Err(invalid(key, format!("listener {name} appears twice")));
            }
            entries.push(ListenerAddress {
                name: name.to_owned(),
                host: host.to_owned(),
                port,
            });
        }
        Ok(Self { entries })
    }
}

impl fmt::Debug for ListenerList {
    /// The value as written in a config file (what `skiff config-keys` shows).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text: Vec<String> = self
            .entries
            .iter()
            .map(|entry| {
                if entry.host.contains(':') {
                    format!("{}://[{}]:{}", entry.name, entry.host, entry.port)
                } else {
                    format!("{}://{}:{}", entry.name, entry.host, entry.port)
                }
            })
            .collect();
        write!(f, "{:?}", text.join(","))
    }
}

/// `listener.security.protocol.map`: each listener name's security protocol.
#[derive(Clone, PartialEq, Eq)]
pub struct ProtocolMap {
    /// Name to protocol, in the order written (for `skiff config-keys`).
    pub entries: Vec<(String, SecurityProtocol)>,
}

impl ProtocolMap {
    /// Parses `NAME:PROTOCOL,...`.
    pub fn parse(key: &str, text: &str) -> Result<Self, ConfigError> {
        let mut entries: Vec<(String, SecurityProtocol)> = Vec::new();
        for pair in comma_items(text) {
            let (name, protocol) = pair
                .split_once(':')
                .ok_or_else(|| invalid(key, format!("'{pair}' is not NAME:PROTOCOL")))?;
            check_listener_name(key, name)?;
            let protocol = SecurityProtocol::parse(protocol).ok_or_else(|| {
                invalid(
                    key,
                    format!("'{protocol}' is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
                )
            })?;
            entries.retain(|(known, _)| known != name);
            entries.push((name.to_owned(), protocol));
        }
        Ok(Self { entries })
    }

    /// The protocol of listener `name`.
    pub fn protocol_of(&self, name: &str) -> Option<SecurityProtocol> {
        self.entries
            .iter()
            .find(|(known, _)| known == name)
            .map(|(_, protocol)| *protocol)
    }
}

impl Default for ProtocolMap {
    /// Kafka's default: each protocol's name is a listener name of that protocol.
    fn default() -> Self {
        let entries = [
            SecurityProtocol::Plaintext,
            SecurityProtocol::Ssl,
            SecurityProtocol::SaslPlaintext,
            SecurityProtocol::SaslSsl,
        ]
        .into_iter()
        .map(|protocol| (protocol.name().to_owned(), protocol))
        .collect();
        Self { entries }
    }
}

impl fmt::Debug for ProtocolMap {
    /// The value as written in a config file.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text: Vec<String> = self
            .entries
            .iter()
            .map(|(name, protocol)| format!("{name}:{protocol}"))
            .collect();
        write!(f, "{:?}", text.join(","))
    }
}

fn check_listener_name(key: &str, name: &str) -> Result<(), ConfigError> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(invalid(key, format!("'{name}' is not a listener name")));
    }
    Ok(())
}

/// One listener: its name, security protocol, bind address and advertised endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerConfig {
    /// The listener's name (`PLAINTEXT`, `SASL_SSL`, or a custom one from the protocol map).
    pub name: String,
    /// Its security protocol.
    pub protocol: SecurityProtocol,
    /// Where it binds (port 0 picks a free port).
    pub address: SocketAddr,
    /// Host and port from `advertised.listeners`; `None` advertises the bound address. A port of
    /// 0 there means the bound port.
    pub advertised: Option<(String, u16)>,
}

impl ListenerConfig {
    /// What Metadata tells clients who came in on this listener bound at `bound`.
    pub fn advertised_endpoint(&self, bound: SocketAddr) -> (String, u16) {
        match &self.advertised {
            None => (bound.ip().to_string(), bound.port()),
            Some((host, 0)) => (host.clone(), bound.port()),
            Some((host, port)) => (host.clone(), *port),
        }
    }
}

/// Joins the three listener keys by name: every listener needs a protocol and an IP address to
/// bind, and every advertised entry must name a listener.
pub(super) fn resolve(
    listeners: &ListenerList,
    advertised: Option<&ListenerList>,
    protocols: &ProtocolMap,
) -> Result<Vec<ListenerConfig>, ConfigError> {
    let advertised: &[ListenerAddress] = advertised.map_or(&[], |list| &list.entries);
    let mut resolved = Vec::with_capacity(listeners.entries.len());
    for entry in &listeners.entries {
        let protocol = protocols.protocol_of(&entry.name).ok_or_else(|| {
            invalid(
                "listeners",
                format!(
                    "listener {} has no entry in listener.security.protocol.map",
                    entry.name
                ),
            )
        })?;
        let ip = if entry.host == "localhost" {
            "127.0.0.1"
        } else {
            entry.host.as_str()
        };
        let port = entry.port;
        let address: SocketAddr = format!("{ip}:{port}")
            .parse()
            .or_else(|_| format!("[{ip}]:{port}").parse())
            .map_err(|_| {
                invalid(
                    "listeners",
                    format!("'{}:{port}' is not an ip:port", entry.host),
                )
            })?;
        let advertised = advertised
            .iter()
            .find(|advertised| advertised.name == entry.name)
            .map(|advertised| (advertised.host.clone(), advertised.port));
        resolved.push(ListenerConfig {
            name: entry.name.clone(),
            protocol,
            address,
            advertised,
        });
    }
    if resolved.is_empty() {
        return Err(invalid("listeners", "at least one listener is needed"));
    }
    if let Some(unknown) = advertised.iter().find(|advertised| {
        !listeners
            .entries
            .iter()
            .any(|entry| entry.name == advertised.name)
    }) {
        return Err(invalid(
            "advertised.listeners",
            format!("{} is not one of the listeners", unknown.name),
        ));
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_what_its_text_parses_to() {
        let parsed =
            ListenerList::parse("listeners", "PLAINTEXT://127.0.0.1:9092").expect("parses");
        assert!(parsed == ListenerList::plaintext_localhost_9092());
    }

    #[test]
    fn lists_show_as_written() {
        let list = ListenerList::parse("listeners", "A://h:1, B://[::1]:2").expect("parses");
        assert_eq!(format!("{list:?}"), "\"A://h:1,B://[::1]:2\"");
        assert_eq!(
            format!("{:?}", ProtocolMap::default()),
            "\"PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL\""
        );
    }

    #[test]
    fn each_mistake_names_its_key() {
        for (text, reason) in [
            ("PLAINTEXT", "is not NAME://host:port"),
            ("PLAINTEXT://h", "has no port"),
            ("PLAINTEXT://h:x", "bad port"),
            ("PLAINTEXT://:1", "has no host"),
            ("A B://h:1", "is not a listener name"),
            ("A://h:1,A://h:2", "appears twice"),
        ] {
            let error = ListenerList::parse("listeners", text)
                .expect_err(text)
                .to_string();
            assert!(
                error.contains("'listeners'") && error.contains(reason),
                "{error}"
            );
        }
        let key = "listener.security.protocol.map";
        assert!(ProtocolMap::parse(key, "A:TLS")
            .expect_err("unknown protocol")
            .to_string()
            .contains(key));
    }
}
