//! The connection-limit keys, typed: `max.connections.per.ip.overrides` (Kafka's
//! `host:count,host:count`), parsed once when the key is set. The limits themselves are enforced
//! by `net::admission`.
//!
//! Must never: resolve a host name (Kafka resolves override hosts once at start; Skiff takes IP
//! addresses only and names a host name as the error, so no DNS answer can change a limit).

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use super::{comma_items, invalid, ConfigError};

/// `max.connections.per.ip` default: Kafka's, `Int.MaxValue` (no per-address limit).
pub const CONNECTIONS_PER_IP_MAX_DEFAULT: i32 = i32::MAX;

/// `max.connections.per.ip.overrides`: per-address limits that replace `max.connections.per.ip`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ConnectionsPerIpOverrides {
    /// Address (canonical: an IPv4-mapped IPv6 address is stored as IPv4) to its limit.
    pub limits: BTreeMap<IpAddr, i32>,
}

impl ConnectionsPerIpOverrides {
    /// Parses comma-separated `address:count` pairs; an IPv6 address may be bracketed
    /// (`[::1]:5`) or bare (`::1:5`, the count after the last colon, as Kafka splits it).
    pub fn parse(key: &str, text: &str) -> Result<Self, ConfigError> {
        let mut limits = BTreeMap::new();
        for item in comma_items(text) {
            let (host, count) = item
                .rsplit_once(':')
                .ok_or_else(|| invalid(key, format!("'{item}' is not address:count")))?;
            let host = host.trim();
            let unbracketed = host
                .strip_prefix('[')
                .and_then(|inner| inner.strip_suffix(']'))
                .unwrap_or(host);
            let address: IpAddr = unbracketed.parse().map_err(|_| {
                invalid(
                    key,
                    format!(
                        "'{host}' is not an IP address (host names are not resolved: write the address the clients connect from)"
                    ),
                )
            })?;
            let count: i32 = count.trim().parse().map_err(|_| {
                invalid(
                    key,
                    format!("'{count}' in '{item}' is not a connection count"),
                )
            })?;
            if count < 0 {
                return Err(invalid(
                    key,
                    format!("the count in '{item}' must be at least 0"),
                ));
            }
            if limits.insert(address.to_canonical(), count).is_some() {
                return Err(invalid(key, format!("{address} appears twice")));
            }
        }
        Ok(Self { limits })
    }
}

impl fmt::Debug for ConnectionsPerIpOverrides {
    /// The value as written in a config file.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let items: Vec<String> = self
            .limits
            .iter()
            .map(|(address, count)| match address {
                IpAddr::V4(v4) => format!("{v4}:{count}"),
                IpAddr::V6(v6) => format!("[{v6}]:{count}"),
            })
            .collect();
        write!(f, "{:?}", items.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "max.connections.per.ip.overrides";

    #[test]
    fn addresses_and_counts_parse_and_show_as_written() {
        let overrides = ConnectionsPerIpOverrides::parse(
            KEY,
            "127.0.0.1:5, [::1]:0,::ffff:10.0.0.1:7,fe80::2:9",
        )
        .expect("valid");
        let ip = |text: &str| text.parse::<IpAddr>().expect("ip");
        assert_eq!(overrides.limits[&ip("127.0.0.1")], 5);
        assert_eq!(overrides.limits[&ip("::1")], 0);
        assert_eq!(
            overrides.limits[&ip("10.0.0.1")],
            7,
            "mapped address is canonical"
        );
        assert_eq!(overrides.limits[&ip("fe80::2")], 9);
        let shown = format!("{overrides:?}");
        let again =
            ConnectionsPerIpOverrides::parse(KEY, shown.trim_matches('"')).expect("round trip");
        assert_eq!(again, overrides);
        assert!(ConnectionsPerIpOverrides::parse(KEY, "")
            .expect("empty")
            .limits
            .is_empty());
    }

    #[test]
    fn host_names_and_bad_counts_are_named() {
        for (text, expected) in [
            ("broker.example:5", "not an IP address"),
            ("localhost:5", "not an IP address"),
            ("127.0.0.1", "not address:count"),
            ("127.0.0.1:many", "not a connection count"),
            ("127.0.0.1:-1", "at least 0"),
            ("127.0.0.1:1,127.0.0.1:2", "appears twice"),
        ] {
            let error = ConnectionsPerIpOverrides::parse(KEY, text)
                .expect_err(text)
                .to_string();
            assert!(error.contains(expected), "{text}: {error}");
            assert!(error.contains(KEY), "{error}");
        }
    }
}
