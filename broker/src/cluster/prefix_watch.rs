//! Following one prefix of the metadata store for the parts of the broker that keep their own
//! records there (client quotas, dynamic broker configs): read the prefix, then apply every
//! watched change, and hand the owner the whole set of keys and values after each store revision.
//! After a broken watch it resumes from the last revision, or re-reads the prefix when the store
//! compacted the history it needs; meanwhile the owner keeps what it last had.
//!
//! Must never: hand the owner half a revision, or give up before shutdown.

use std::collections::BTreeMap;
use std::time::Duration;

use skiff_meta::{EventKind, GetRequest, KeyRange, MetaStore};
use tokio::sync::watch;

/// Pause before a failed read or watch is tried again.
const RETRY: Duration = Duration::from_millis(250);

/// Every key under the prefix with its value.
pub(crate) type PrefixSnapshot = BTreeMap<Vec<u8>, Vec<u8>>;

/// Follows `prefix` until shutdown, calling `changed` with every key and value under it once at
/// the first read and then after each revision that touched it. `what` names the owner in logs.
pub(crate) async fn follow_prefix(
    store: MetaStore,
    prefix: String,
    what: &'static str,
    mut shutdown: watch::Receiver<bool>,
    mut changed: impl FnMut(&PrefixSnapshot) + Send,
) {
    let mut snapshot = PrefixSnapshot::new();
    let mut revision: Option<i64> = None;
    while !*shutdown.borrow() {
        let from = match revision {
            Some(revision) => revision + 1,
            None => match store.get(GetRequest::prefix(prefix.clone())).await {
                Ok(read) => {
                    snapshot = read.kvs.into_iter().map(|kv| (kv.key, kv.value)).collect();
                    changed(&snapshot);
                    revision = Some(read.revision);
                    read.revision + 1
                }
                Err(error) => {
                    tracing::warn!(%error, "{what}: reading the metadata store failed; retrying");
                    pause(&mut shutdown).await;
                    continue;
                }
            },
        };
        let mut watcher = match store.watch(KeyRange::prefix(prefix.clone()), from).await {
            Ok(watcher) => watcher,
            Err(error) => {
                revision = resume_from(what, revision, &error);
                pause(&mut shutdown).await;
                continue;
            }
        };
        loop {
            let next = tokio::select! {
                next = watcher.next() => next,
                _ = shutdown.changed() => return,
            };
            match next {
                Ok(batch) => {
                    for event in batch.events {
                        match event.kind {
                            EventKind::Put => snapshot.insert(event.kv.key, event.kv.value),
                            EventKind::Delete => snapshot.remove(&event.kv.key),
                        };
                    }
                    changed(&snapshot);
                    revision = Some(batch.revision);
                }
                Err(error) => {
                    revision = resume_from(what, revision, &error);
                    pause(&mut shutdown).await;
                    break;
                }
            }
        }
    }
}

/// Where the watch resumes after `error`: from the last revision, or from a fresh read when the
/// history it needs was compacted.
fn resume_from(what: &str, revision: Option<i64>, error: &skiff_meta::Error) -> Option<i64> {
    tracing::warn!(%error, "{what}: the metadata store's watch failed; resuming");
    if matches!(error, skiff_meta::Error::Compacted { .. }) {
        None
    } else {
        revision
    }
}

async fn pause(shutdown: &mut watch::Receiver<bool>) {
    tokio::select! {
        _ = tokio::time::sleep(RETRY) => {}
        _ = shutdown.changed() => {}
    }
}

/// The longest an admin request waits for one store call; past it the request answers
/// REQUEST_TIMED_OUT (the Java admin client waits 30 s per request, so it sees the error).
pub(crate) const STORE_CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// A store call that did not answer within [`STORE_CALL_TIMEOUT`], or answered an error.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreCallError {
    /// No answer in time.
    #[error("the metadata store did not answer within {0:?}")]
    TimedOut(Duration),
    /// The store answered with an error.
    #[error("metadata store: {0}")]
    Store(#[from] skiff_meta::Error),
    /// Other brokers kept changing the key.
    #[error("the record changed under {0} attempts")]
    Contended(usize),
}

/// A store call bounded by [`STORE_CALL_TIMEOUT`].
pub(crate) async fn bounded<T>(
    call: impl std::future::Future<Output = skiff_meta::Result<T>>,
) -> Result<T, StoreCallError> {
    match tokio::time::timeout(STORE_CALL_TIMEOUT, call).await {
        Ok(result) => Ok(result?),
        Err(_) => Err(StoreCallError::TimedOut(STORE_CALL_TIMEOUT)),
    }
}

/// Compare-and-set attempts of one record before giving up (other brokers changing it at the
/// same moment).
const CAS_ATTEMPTS_MAX: usize = 5;

/// Replaces the value of `key` with what `change` makes of the current one (`None`: absent);
/// `change` answering `None` deletes the key. A compare on the key's revision guards the write,
/// retried on the newer value when another writer came first.
pub(crate) async fn read_modify_write(
    store: &MetaStore,
    key: &str,
    change: impl Fn(Option<&[u8]>) -> Option<Vec<u8>>,
) -> Result<(), StoreCallError> {
    use skiff_meta::{Compare, CompareOp, Txn, TxnOp};
    for _ in 0..CAS_ATTEMPTS_MAX {
        let current = bounded(store.get(GetRequest::key(key.to_owned()))).await?;
        let kv = current.kvs.first();
        let mod_revision = kv.map_or(0, |kv| kv.mod_revision);
        let write = match change(kv.map(|kv| kv.value.as_slice())) {
            Some(value) => TxnOp::put(key.to_owned(), value),
            None => TxnOp::delete(key.to_owned()),
        };
        let guard = Compare::mod_revision(key.to_owned(), CompareOp::Equal, mod_revision);
        let txn = Txn::new().when(vec![guard]).and_then(vec![write]);
        if bounded(store.txn(txn)).await?.succeeded {
            return Ok(());
        }
    }
    Err(StoreCallError::Contended(CAS_ATTEMPTS_MAX))
}
