//! The defaults and bounds of the group coordinator's broker keys (`group.*`), with Kafka's default
//! where Kafka has one. The coordinator itself holds no default: the group driver maps these keys
//! onto its `GroupConfig`.
//!
//! Must never: import the coordinator (config is a leaf of the broker's folders).

use std::fmt;

use super::{invalid, ConfigError};

/// Kafka's `group.min.session.timeout.ms`: a JoinGroup asking for less gets
/// INVALID_SESSION_TIMEOUT. Below this, a member that pauses for a GC or a slow poll would be
/// expelled constantly.
pub const SESSION_TIMEOUT_MS_MIN_DEFAULT: i32 = 6_000;

/// Kafka's `group.max.session.timeout.ms`: a JoinGroup asking for more gets
/// INVALID_SESSION_TIMEOUT. Above this a dead member would hold its partitions for too
/// long.
pub const SESSION_TIMEOUT_MS_MAX_DEFAULT: i32 = 1_800_000;

/// Kafka's `group.initial.rebalance.delay.ms` default: the first rebalance of an empty group waits
/// this long for more members, so a group that starts together gets one rebalance, not one per
/// member (and a member whose join beats its own metadata refresh is not left out).
pub const INITIAL_REBALANCE_DELAY_MS_DEFAULT: i32 = 3000;

/// The longest `group.initial.rebalance.delay.ms` the broker accepts (Kafka sets none). The wait
/// never outlasts a group's rebalance timeout anyway; this is Kafka's default
/// `max.poll.interval.ms`, the rebalance timeout Java consumers send, so a longer delay could only
/// hold a new group's first join for longer than any default client waits.
pub const INITIAL_REBALANCE_DELAY_MS_MAX: i32 = 300_000;

/// Kafka's `group.consumer.session.timeout.ms`: a consumer group (KIP-848) member silent this
/// long is removed and its partitions go to the others.
pub const CONSUMER_SESSION_TIMEOUT_MS_DEFAULT: i32 = 45_000;
/// Kafka's `group.consumer.min.session.timeout.ms`.
pub const CONSUMER_SESSION_TIMEOUT_MS_MIN_DEFAULT: i32 = 45_000;
/// Kafka's `group.consumer.max.session.timeout.ms`.
pub const CONSUMER_SESSION_TIMEOUT_MS_MAX_DEFAULT: i32 = 60_000;
/// Kafka's `group.consumer.heartbeat.interval.ms`: how often a consumer group member
/// heartbeats (every heartbeat response carries it).
pub const CONSUMER_HEARTBEAT_INTERVAL_MS_DEFAULT: i32 = 5_000;
/// Kafka's `group.consumer.min.heartbeat.interval.ms`.
pub const CONSUMER_HEARTBEAT_INTERVAL_MS_MIN_DEFAULT: i32 = 5_000;
/// Kafka's `group.consumer.max.heartbeat.interval.ms`.
pub const CONSUMER_HEARTBEAT_INTERVAL_MS_MAX_DEFAULT: i32 = 15_000;
/// `group.consumer.max.size`: members of one consumer group; a join beyond it gets
/// GROUP_MAX_SIZE_REACHED. Kafka's default is `i32::MAX`; Skiff's is the classic groups' member
/// bound, so one group's memory (members × metadata and assignments) stays bounded.
pub const CONSUMER_GROUP_MAX_SIZE_DEFAULT: usize = 1_000;

/// Kafka's `group.consumer.regex.refresh.interval.ms` (an internal key there): a consumer
/// group's topic patterns are resolved again at least this often, so changed ACLs show.
pub const CONSUMER_REGEX_REFRESH_INTERVAL_MS_DEFAULT: i32 =
    skiff_group::consumer::regex::REGEX_REFRESH_INTERVAL_MS_DEFAULT;
/// Kafka's lower bound of `group.consumer.regex.refresh.interval.ms` (`atLeast(10000)`).
pub const CONSUMER_REGEX_REFRESH_INTERVAL_MS_MIN: i32 = 10_000;

/// Kafka's `group.consumer.assignors`: the server-side assignors consumer groups may ask for
/// (ConsumerGroupHeartbeat's `server_assignor`), the first being the one a group uses when its
/// members ask for none. Kafka takes builtin names or class names; Skiff has Kafka's two builtin
/// assignors and takes their names or their Kafka class names, kept as the names.
#[derive(Clone, PartialEq, Eq)]
pub struct ConsumerAssignors(Vec<String>);

impl ConsumerAssignors {
    /// Each builtin assignor's name and Kafka's class for it.
    const BUILTIN: [(&'static str, &'static str); 2] = [
        (
            "uniform",
            "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
        ),
        (
            "range",
            "org.apache.kafka.coordinator.group.assignor.RangeAssignor",
        ),
    ];

    /// A comma-separated list of names or class names, at least one.
    pub fn parse(key: &str, text: &str) -> Result<Self, ConfigError> {
        let mut names = Vec::new();
        for item in text
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
        {
            let Some((name, _)) = Self::BUILTIN
                .iter()
                .find(|(name, class)| item == *name || item == *class)
            else {
                return Err(invalid(
                    key,
                    format!("'{item}' is not an assignor Skiff has (uniform, range)"),
                ));
            };
            names.push((*name).to_owned());
        }
        if names.is_empty() {
            return Err(invalid(key, "at least one assignor is needed"));
        }
        Ok(Self(names))
    }

    /// The assignors' names, the default first.
    pub fn names(&self) -> &[String] {
        &self.0
    }
}

impl Default for ConsumerAssignors {
    /// Kafka's default: uniform, then range.
    fn default() -> Self {
        Self(
            Self::BUILTIN
                .iter()
                .map(|(name, _)| (*name).to_owned())
                .collect(),
        )
    }
}

/// Written as a config file writes it, as every config type's `Debug` must be.
impl fmt::Debug for ConsumerAssignors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join(","))
    }
}

/// Kafka's `group.consumer.migration.policy`: whether a classic group is upgraded online to a
/// consumer group when a consumer-protocol member joins it (`upgrade`), a consumer group
/// downgraded when its last consumer-protocol member leaves (`downgrade`), both
/// (`bidirectional`, Kafka 4.1.1's default) or neither (`disabled`); case-insensitive.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub enum ConsumerMigrationPolicy {
    /// Neither.
    Disabled,
    /// Classic to consumer.
    Upgrade,
    /// Consumer to classic.
    Downgrade,
    /// Both.
    #[default]
    Bidirectional,
}

impl ConsumerMigrationPolicy {
    const NAMES: [(&'static str, Self); 4] = [
        ("bidirectional", Self::Bidirectional),
        ("upgrade", Self::Upgrade),
        ("downgrade", Self::Downgrade),
        ("disabled", Self::Disabled),
    ];

    /// One of Kafka's names, in any case.
    pub fn parse(key: &str, text: &str) -> Result<Self, ConfigError> {
        Self::NAMES
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(text.trim()))
            .map(|(_, policy)| *policy)
            .ok_or_else(|| {
                invalid(
                    key,
                    format!("'{text}' is not one of bidirectional, upgrade, downgrade, disabled"),
                )
            })
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, policy)| *policy == self)
            .map_or("bidirectional", |(name, _)| name)
    }
}

/// Written as a config file writes it, as every config type's `Debug` must be.
impl fmt::Debug for ConsumerMigrationPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

const _: () = assert!(SESSION_TIMEOUT_MS_MIN_DEFAULT <= SESSION_TIMEOUT_MS_MAX_DEFAULT);
const _: () = assert!(
    CONSUMER_SESSION_TIMEOUT_MS_MIN_DEFAULT <= CONSUMER_SESSION_TIMEOUT_MS_DEFAULT
        && CONSUMER_SESSION_TIMEOUT_MS_DEFAULT <= CONSUMER_SESSION_TIMEOUT_MS_MAX_DEFAULT
        && CONSUMER_HEARTBEAT_INTERVAL_MS_MIN_DEFAULT <= CONSUMER_HEARTBEAT_INTERVAL_MS_DEFAULT
        && CONSUMER_HEARTBEAT_INTERVAL_MS_DEFAULT <= CONSUMER_HEARTBEAT_INTERVAL_MS_MAX_DEFAULT
        && CONSUMER_HEARTBEAT_INTERVAL_MS_DEFAULT < CONSUMER_SESSION_TIMEOUT_MS_DEFAULT
);
const _: () = assert!(
    0 <= INITIAL_REBALANCE_DELAY_MS_DEFAULT
        && INITIAL_REBALANCE_DELAY_MS_DEFAULT <= INITIAL_REBALANCE_DELAY_MS_MAX
);
