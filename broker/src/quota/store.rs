//! Client quotas in the metadata store: one key per entity under `R/client-quotas/`, its value a
//! JSON record of the entity and its quotas; the pure key and record codec, and the two things the
//! broker does with them: follow the prefix with a watch (every broker, applying each change to
//! its [`super::ClientQuotas`]) and change one entity with a compare-and-set (the broker that
//! received AlterClientQuotas).
//!
//! The store is the one source of truth; a broker that loses it keeps enforcing the quotas it last
//! applied, and its watch resumes (or re-reads the prefix after a compaction) when it returns.
//!
//! Must never: block a request on the store beyond its bounded calls
//! (`crate::cluster::prefix_watch`), or apply half a record.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use skiff_meta::{GetRequest, MetaStore};
use tokio::sync::watch;

use crate::cluster::prefix_watch::{bounded, follow_prefix, read_modify_write, StoreCallError};

use super::entity::{EntityName, QuotaConfigs, QuotaEntity, QuotaKey};
use super::ClientQuotas;

/// An entity's quotas as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct QuotaRecord {
    user: Option<PartRecord>,
    client_id: Option<PartRecord>,
    /// Kafka's key names, so a later key survives a broker that does not know it.
    quotas: BTreeMap<String, f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum PartRecord {
    Default,
    Name(String),
}

impl From<&EntityName> for PartRecord {
    fn from(name: &EntityName) -> Self {
        match name {
            EntityName::Default => PartRecord::Default,
            EntityName::Named(name) => PartRecord::Name(name.clone()),
        }
    }
}

impl From<PartRecord> for EntityName {
    fn from(part: PartRecord) -> Self {
        match part {
            PartRecord::Default => EntityName::Default,
            PartRecord::Name(name) => EntityName::Named(name),
        }
    }
}

/// The prefix of every quota key of the cluster whose layout root is `root`.
pub(crate) fn prefix(root: &str) -> String {
    format!("{root}client-quotas/")
}

/// The key of `entity`: `<prefix>user=<part>/client-id=<part>`, each part `~` when absent,
/// `<default>` for the default, else the name percent-encoded (so no name can look like another
/// part, or contain a `/`).
pub(crate) fn key(root: &str, entity: &QuotaEntity) -> String {
    let part = |name: &Option<EntityName>| match name {
        None => "~".to_owned(),
        Some(EntityName::Default) => "<default>".to_owned(),
        Some(EntityName::Named(name)) => percent_encode(name),
    };
    format!(
        "{}user={}/client-id={}",
        prefix(root),
        part(&entity.user),
        part(&entity.client_id)
    )
}

fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 1);
    out.push('=');
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The record of `entity` with `quotas`.
fn encode(entity: &QuotaEntity, quotas: &BTreeMap<String, f64>) -> Vec<u8> {
    let record = QuotaRecord {
        user: entity.user.as_ref().map(PartRecord::from),
        client_id: entity.client_id.as_ref().map(PartRecord::from),
        quotas: quotas.clone(),
    };
    serde_json::to_vec(&record).unwrap_or_default()
}

/// An entity and its quotas (every key, known or not), from a stored value.
fn decode(value: &[u8]) -> Result<(QuotaEntity, BTreeMap<String, f64>), serde_json::Error> {
    let record: QuotaRecord = serde_json::from_slice(value)?;
    let entity = QuotaEntity {
        user: record.user.map(EntityName::from),
        client_id: record.client_id.map(EntityName::from),
    };
    Ok((entity, record.quotas))
}

/// What the broker knows of the stored quotas: by store key, the entity and its known quotas.
#[derive(Debug, Default)]
pub(crate) struct StoredQuotas {
    by_key: HashMap<Vec<u8>, (QuotaEntity, BTreeMap<QuotaKey, f64>)>,
}

impl StoredQuotas {
    /// Applies a put of `key`; an undecodable value is logged and the key dropped (as if absent).
    fn put(&mut self, key: &[u8], value: &[u8]) {
        match decode(value) {
            Ok((entity, quotas)) => {
                let known = quotas
                    .iter()
                    .filter_map(|(name, value)| Some((QuotaKey::from_name(name)?, *value)))
                    .collect();
                self.by_key.insert(key.to_vec(), (entity, known));
            }
            Err(error) => {
                tracing::warn!(key = %String::from_utf8_lossy(key), %error, "undecodable client quota record; ignored");
                self.by_key.remove(key);
            }
        }
    }

    /// The configs the broker enforces.
    pub(crate) fn configs(&self) -> QuotaConfigs {
        self.by_key
            .values()
            .filter(|(entity, quotas)| entity.is_valid() && !quotas.is_empty())
            .map(|(entity, quotas)| (entity.clone(), quotas.clone()))
            .collect()
    }
}

/// Follows `R/client-quotas/` until shutdown, applying each revision's quotas to `quotas`. Until
/// the first read succeeds the broker enforces no quota; after that, a broker that loses the
/// store keeps enforcing what it last applied.
pub(crate) async fn follow(
    store: MetaStore,
    root: String,
    quotas: Arc<ClientQuotas>,
    shutdown: watch::Receiver<bool>,
) {
    follow_prefix(
        store,
        prefix(&root),
        "client quotas",
        shutdown,
        |snapshot| {
            let mut stored = StoredQuotas::default();
            for (key, value) in snapshot {
                stored.put(key, value);
            }
            quotas.apply(stored.configs());
        },
    )
    .await;
}

/// Every stored entity with its known quotas, read from the store itself (DescribeClientQuotas
/// answers what the cluster holds, and REQUEST_TIMED_OUT when the store is out of reach).
pub(crate) async fn read_all(
    store: &MetaStore,
    root: &str,
) -> Result<QuotaConfigs, StoreCallError> {
    let snapshot = bounded(store.get(GetRequest::prefix(prefix(root)))).await?;
    let mut stored = StoredQuotas::default();
    for kv in &snapshot.kvs {
        stored.put(&kv.key, &kv.value);
    }
    Ok(stored.configs())
}

/// One entity's change: keys to set and keys to remove.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct EntityChange {
    pub(crate) set: BTreeMap<QuotaKey, f64>,
    pub(crate) remove: Vec<QuotaKey>,
}

/// Applies `change` to `entity`'s record with a compare-and-set on its revision (retried when
/// another broker changed it in between); an entity left without quotas is deleted.
pub(crate) async fn alter(
    store: &MetaStore,
    root: &str,
    entity: &QuotaEntity,
    change: &EntityChange,
) -> Result<(), StoreCallError> {
    read_modify_write(store, &key(root, entity), |current| {
        let mut quotas = current
            .and_then(|value| decode(value).ok())
            .map(|(_, quotas)| quotas)
            .unwrap_or_default();
        for removed in &change.remove {
            quotas.remove(removed.name());
        }
        for (set, value) in &change.set {
            quotas.insert(set.name().to_owned(), *value);
        }
        (!quotas.is_empty()).then(|| encode(entity, &quotas))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(text: &str) -> Option<EntityName> {
        Some(EntityName::Named(text.to_owned()))
    }

    #[test]
    fn keys_are_distinct_and_records_round_trip() {
        let entities = [
            QuotaEntity {
                user: named("a/b"),
                client_id: None,
            },
            QuotaEntity {
                user: named("a"),
                client_id: named("b"),
            },
            QuotaEntity {
                user: Some(EntityName::Default),
                client_id: None,
            },
            QuotaEntity {
                user: named("<default>"),
                client_id: None,
            },
            QuotaEntity {
                user: None,
                client_id: named("~"),
            },
            QuotaEntity {
                user: None,
                client_id: Some(EntityName::Default),
            },
        ];
        let keys: std::collections::BTreeSet<String> =
            entities.iter().map(|entity| key("/R/", entity)).collect();
        assert_eq!(keys.len(), entities.len());
        for entity in &entities {
            let quotas = BTreeMap::from([("producer_byte_rate".to_owned(), 1024.0)]);
            let (decoded, decoded_quotas) = decode(&encode(entity, &quotas)).unwrap();
            assert_eq!(&decoded, entity);
            assert_eq!(decoded_quotas, quotas);
        }
    }

    #[test]
    fn unknown_keys_are_kept_in_the_record_but_not_enforced() {
        let mut stored = StoredQuotas::default();
        let entity = QuotaEntity {
            user: named("u"),
            client_id: None,
        };
        let quotas = BTreeMap::from([
            ("producer_byte_rate".to_owned(), 10.0),
            ("future_rate".to_owned(), 1.0),
        ]);
        stored.put(b"k", &encode(&entity, &quotas));
        let configs = stored.configs();
        assert_eq!(configs[&entity].len(), 1);
        stored.put(b"k", b"not json");
        assert!(stored.configs().is_empty());
    }
}
