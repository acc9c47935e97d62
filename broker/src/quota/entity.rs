//! Quota entities and keys as Kafka names them, and Kafka's precedence: which configured quota
//! applies to a (user, client id) pair, and which clients share its sensor. Pure.
//!
//! Precedence (Kafka's `ClientQuotaManager`, for each quota key on its own), first match wins:
//! 1. user and client id; 2. user and the default client id; 3. user;
//! 4. default user and client id; 5. default user and default client id; 6. default user;
//! 7. client id; 8. default client id. No match: no quota.
//!
//! Must never: know where quotas are stored, or measure anything.

use std::collections::BTreeMap;

/// The quota keys Kafka has for users and client ids (`QuotaConfig`); `ip` entities and their
/// `connection_creation_rate` are not served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum QuotaKey {
    /// Bytes per second of Produce requests.
    ProducerByteRate,
    /// Bytes per second of Fetch responses.
    ConsumerByteRate,
    /// Percent of one core spent on the client's requests.
    RequestPercentage,
    /// Partitions per second created, added or deleted.
    ControllerMutationRate,
}

impl QuotaKey {
    /// Every key, in Kafka's order.
    pub(crate) const ALL: [QuotaKey; 4] = [
        QuotaKey::ProducerByteRate,
        QuotaKey::ConsumerByteRate,
        QuotaKey::RequestPercentage,
        QuotaKey::ControllerMutationRate,
    ];

    /// Kafka's name of the key.
    pub(crate) fn name(self) -> &'static str {
        match self {
            QuotaKey::ProducerByteRate => "producer_byte_rate",
            QuotaKey::ConsumerByteRate => "consumer_byte_rate",
            QuotaKey::RequestPercentage => "request_percentage",
            QuotaKey::ControllerMutationRate => "controller_mutation_rate",
        }
    }

    /// The key of a name.
    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|key| key.name() == name)
    }

    /// Whether Kafka types the key as a whole number (LONG); the others are doubles.
    pub(crate) fn is_whole(self) -> bool {
        matches!(
            self,
            QuotaKey::ProducerByteRate | QuotaKey::ConsumerByteRate
        )
    }
}

/// One part of an entity: a named user or client id, or the default one (`<default>`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum EntityName {
    /// The default for every user (or client id) without its own entry.
    Default,
    /// One user (principal name) or client id.
    Named(String),
}

impl EntityName {
    /// As Kafka's protocol carries it: null for the default.
    pub(crate) fn wire(&self) -> Option<&str> {
        match self {
            EntityName::Default => None,
            EntityName::Named(name) => Some(name),
        }
    }
}

/// A quota entity: a user, a client id, or both (Kafka's combinations).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct QuotaEntity {
    /// The user part, if any.
    pub(crate) user: Option<EntityName>,
    /// The client-id part, if any.
    pub(crate) client_id: Option<EntityName>,
}

impl QuotaEntity {
    /// Whether the entity has at least one part (Kafka refuses an empty one).
    pub(crate) fn is_valid(&self) -> bool {
        self.user.is_some() || self.client_id.is_some()
    }
}

/// Every configured quota: entity → key → value.
pub(crate) type QuotaConfigs = BTreeMap<QuotaEntity, BTreeMap<QuotaKey, f64>>;

/// Who shares a sensor: Kafka's metric tags `user` and `client-id` (empty when the matched quota
/// does not distinguish them).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct SensorTags {
    /// The user tag.
    pub(crate) user: String,
    /// The client-id tag.
    pub(crate) client_id: String,
}

/// The quota of `key` for `user` and `client_id`, with the tags of the sensor it is measured on;
/// `None` when no entity sets `key` for them.
pub(crate) fn resolve(
    configs: &QuotaConfigs,
    key: QuotaKey,
    user: &str,
    client_id: &str,
) -> Option<(SensorTags, f64)> {
    let named = |text: &str| Some(EntityName::Named(text.to_owned()));
    let default = || Some(EntityName::Default);
    // (entity, whether the sensor tells users apart, whether it tells client ids apart), in
    // Kafka's order.
    let ladder = [
        (named(user), named(client_id), true, true),
        (named(user), default(), true, true),
        (named(user), None, true, false),
        (default(), named(client_id), true, true),
        (default(), default(), true, true),
        (default(), None, true, false),
        (None, named(client_id), false, true),
        (None, default(), false, true),
    ];
    ladder
        .into_iter()
        .find_map(|(user_part, client_part, by_user, by_client)| {
            let entity = QuotaEntity {
                user: user_part,
                client_id: client_part,
            };
            let quota = *configs.get(&entity)?.get(&key)?;
            let tag = |apart: bool, text: &str| {
                if apart {
                    text.to_owned()
                } else {
                    String::new()
                }
            };
            Some((
                SensorTags {
                    user: tag(by_user, user),
                    client_id: tag(by_client, client_id),
                },
                quota,
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(user: Option<&str>, client: Option<&str>) -> QuotaEntity {
        let part = |text: &str| {
            if text == "<default>" {
                EntityName::Default
            } else {
                EntityName::Named(text.to_owned())
            }
        };
        QuotaEntity {
            user: user.map(part),
            client_id: client.map(part),
        }
    }

    #[test]
    fn precedence_is_kafkas() {
        // Each level in turn, from the lowest: the quota found is always the highest level set.
        let levels = [
            (None, Some("<default>")),
            (None, Some("c")),
            (Some("<default>"), None),
            (Some("<default>"), Some("<default>")),
            (Some("<default>"), Some("c")),
            (Some("u"), None),
            (Some("u"), Some("<default>")),
            (Some("u"), Some("c")),
        ];
        let mut configs = QuotaConfigs::new();
        for (rank, (user, client)) in levels.iter().enumerate() {
            configs
                .entry(entity(*user, *client))
                .or_default()
                .insert(QuotaKey::ProducerByteRate, rank as f64);
            let (_, quota) = resolve(&configs, QuotaKey::ProducerByteRate, "u", "c").unwrap();
            assert_eq!(quota, rank as f64);
        }
        assert!(resolve(&configs, QuotaKey::ConsumerByteRate, "u", "c").is_none());
    }

    #[test]
    fn a_user_quota_is_shared_by_its_clients_a_client_quota_by_its_users() {
        let mut configs = QuotaConfigs::new();
        configs
            .entry(entity(Some("u"), None))
            .or_default()
            .insert(QuotaKey::ProducerByteRate, 1.0);
        configs
            .entry(entity(None, Some("<default>")))
            .or_default()
            .insert(QuotaKey::ConsumerByteRate, 2.0);
        let (tags, _) = resolve(&configs, QuotaKey::ProducerByteRate, "u", "c").unwrap();
        assert_eq!((tags.user.as_str(), tags.client_id.as_str()), ("u", ""));
        let (tags, quota) = resolve(&configs, QuotaKey::ConsumerByteRate, "v", "d").unwrap();
        assert_eq!(
            (tags.user.as_str(), tags.client_id.as_str(), quota),
            ("", "d", 2.0)
        );
    }
}
