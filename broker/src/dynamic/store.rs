//! Dynamic broker configs in the metadata store: `R/broker-configs/default` (the cluster default,
//! Kafka's empty broker name) and `R/broker-configs/<node id>`, each a JSON map of key to value
//! text. Every broker follows the prefix and applies the default and its own record; the broker
//! that received an alter writes the record with a compare-and-set.
//!
//! Must never: apply another broker's record, or block a request beyond the bounded store calls.

use std::collections::BTreeMap;
use std::sync::Arc;

use skiff_meta::MetaStore;
use tokio::sync::watch;

use super::{DynamicConfigs, Layers};
use crate::cluster::prefix_watch::{follow_prefix, read_modify_write, StoreCallError};

/// Which record: the cluster default or one broker's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Every broker (Kafka's empty broker name).
    Default,
    /// One broker by `node.id`.
    Broker(i32),
}

fn prefix(root: &str) -> String {
    format!("{root}broker-configs/")
}

/// The key of `scope`'s record.
pub(crate) fn key(root: &str, scope: Scope) -> String {
    match scope {
        Scope::Default => format!("{}default", prefix(root)),
        Scope::Broker(id) => format!("{}{id}", prefix(root)),
    }
}

fn decode(value: &[u8]) -> Result<BTreeMap<String, String>, serde_json::Error> {
    serde_json::from_slice(value)
}

fn encode(values: &BTreeMap<String, String>) -> Vec<u8> {
    serde_json::to_vec(values).unwrap_or_default()
}

/// Follows `R/broker-configs/` until shutdown, applying the default and this broker's record.
pub(crate) async fn follow(
    store: MetaStore,
    root: String,
    dynamic: Arc<DynamicConfigs>,
    shutdown: watch::Receiver<bool>,
) {
    let default_key = key(&root, Scope::Default).into_bytes();
    let own_key = key(&root, Scope::Broker(dynamic.node_id())).into_bytes();
    follow_prefix(
        store,
        prefix(&root),
        "dynamic broker configs",
        shutdown,
        |snapshot| {
            let read = |key: &Vec<u8>| {
                snapshot.get(key).map_or_else(BTreeMap::new, |value| {
                    decode(value).unwrap_or_else(|error| {
                        tracing::warn!(%error, "undecodable dynamic broker config record; ignored");
                        BTreeMap::new()
                    })
                })
            };
            dynamic.apply(Layers {
                default: read(&default_key),
                broker: read(&own_key),
            });
        },
    )
    .await;
}

/// Replaces `scope`'s record with what `change` makes of it (an empty map deletes it).
pub(crate) async fn alter(
    store: &MetaStore,
    root: &str,
    scope: Scope,
    change: impl Fn(&BTreeMap<String, String>) -> BTreeMap<String, String>,
) -> Result<(), StoreCallError> {
    read_modify_write(store, &key(root, scope), |current| {
        let current = current
            .and_then(|value| decode(value).ok())
            .unwrap_or_default();
        let next = change(&current);
        (!next.is_empty()).then(|| encode(&next))
    })
    .await
}
