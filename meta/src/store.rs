//! [`MetaStore`]: the handle the rest of Skiff uses, whichever backend is behind it, and
//! [`StoreAddress`], how configuration names one (`local`, or `etcd://h1:2379,h2:2379`).
//!
//! A concrete enum rather than a trait object: there are exactly two backends, both known at
//! compile time; `async fn` in a trait is not object-safe without boxing every future; and the
//! watch handle stays a concrete type. Behaviour that both backends share (validation, the
//! convenience calls built on `txn`) lives here once; each backend validates its own requests
//! (the embedded one in [`crate::MetaCore`]), with the same functions of `types.rs`.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::local::{LocalStore, LocalWatcher};
use crate::types::{
    GetRequest, GetResponse, KeyRange, Lease, LeaseId, LeaseStatus, Txn, TxnOp, TxnResponse,
    WatchBatch,
};

/// Runs the same call on whichever backend is behind a [`MetaStore`].
macro_rules! dispatch {
    ($store:expr, $backend:ident => $call:expr) => {
        match $store {
            MetaStore::Local($backend) => $call,
            #[cfg(feature = "etcd")]
            MetaStore::Etcd($backend) => $call,
        }
    };
}

/// Where the metadata lives, as `skiff.metadata.store` names it. `Debug` writes the address as
/// the key is written (`local`, `etcd://...`): the broker's config shows every value through
/// `Debug`, and the derived `Local` did not load back (found by the fuzz target `config_toml`).
#[derive(Clone, PartialEq, Eq)]
pub enum StoreAddress {
    /// `local`: embedded, in the data directory.
    Local,
    /// `etcd://host:port,host:port,...`: an etcd cluster.
    Etcd {
        /// `host:port` of each member given.
        endpoints: Vec<String>,
    },
}

impl FromStr for StoreAddress {
    type Err = Error;

    fn from_str(address: &str) -> Result<Self> {
        let invalid = |reason: &str| Error::InvalidAddress {
            address: address.to_owned(),
            reason: reason.to_owned(),
        };
        if address == "local" {
            return Ok(StoreAddress::Local);
        }
        let Some(list) = address.strip_prefix("etcd://") else {
            return Err(invalid(
                "expected `local` or `etcd://host:port,host:port,...`",
            ));
        };
        let endpoints: Vec<String> = list.split(',').map(|e| e.trim().to_owned()).collect();
        for endpoint in &endpoints {
            let valid = endpoint
                .rsplit_once(':')
                .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
            if !valid {
                return Err(invalid(&format!("endpoint {endpoint:?} is not host:port")));
            }
        }
        Ok(StoreAddress::Etcd { endpoints })
    }
}

impl fmt::Debug for StoreAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for StoreAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreAddress::Local => f.write_str("local"),
            StoreAddress::Etcd { endpoints } => write!(f, "etcd://{}", endpoints.join(",")),
        }
    }
}

/// A metadata store with etcd's semantics. Cheap to clone; clones share the backend.
#[derive(Clone, Debug)]
pub enum MetaStore {
    /// The embedded store.
    Local(LocalStore),
    /// A real etcd cluster.
    #[cfg(feature = "etcd")]
    Etcd(crate::etcd::EtcdStore),
}

impl MetaStore {
    /// Opens the store `address` names; `data_dir` holds the embedded store's files (unused for
    /// etcd). An etcd address in a build without the `etcd` feature is a clear error.
    pub async fn open(address: &StoreAddress, data_dir: &Path) -> Result<Self> {
        match address {
            StoreAddress::Local => Ok(MetaStore::Local(LocalStore::open(data_dir).await?)),
            #[cfg(feature = "etcd")]
            StoreAddress::Etcd { endpoints } => Ok(MetaStore::Etcd(
                crate::etcd::EtcdStore::connect(crate::etcd::EtcdOptions::new(endpoints.clone()))
                    .await?,
            )),
            #[cfg(not(feature = "etcd"))]
            StoreAddress::Etcd { .. } => Err(Error::InvalidAddress {
                address: address.to_string(),
                reason: "this build has no etcd support (cargo feature `etcd`)".into(),
            }),
        }
    }

    /// Reads a key or prefix, at the latest or a past revision.
    pub async fn get(&self, request: GetRequest) -> Result<GetResponse> {
        dispatch!(self, store => store.get(request).await)
    }

    /// Runs a Txn. A failed compare is `succeeded == false`, not an error.
    pub async fn txn(&self, txn: Txn) -> Result<TxnResponse> {
        dispatch!(self, store => store.txn(txn).await)
    }

    /// Puts one key, unconditionally (a Txn of one put). Returns the write's revision.
    pub async fn put(
        &self,
        key: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
        lease: LeaseId,
    ) -> Result<i64> {
        let response =
            self.txn(Txn::new().and_then(vec![TxnOp::put_with_lease(key, value, lease)]));
        Ok(response.await?.revision)
    }

    /// Deletes a key or prefix (a Txn of one delete). Returns the header revision.
    pub async fn delete(&self, range: KeyRange) -> Result<i64> {
        Ok(self
            .txn(Txn::new().and_then(vec![TxnOp::Delete(range)]))
            .await?
            .revision)
    }

    /// Drops history before `revision`: later reads and watches below it get
    /// [`Error::Compacted`].
    pub async fn compact(&self, revision: i64) -> Result<()> {
        dispatch!(self, store => store.compact(revision).await)
    }

    /// Watches a range from `start_revision` (`0`: from the next revision on).
    pub async fn watch(&self, range: KeyRange, start_revision: i64) -> Result<Watcher> {
        Ok(Watcher(match self {
            MetaStore::Local(store) => {
                WatcherInner::Local(store.watch(range, start_revision).await?)
            }
            #[cfg(feature = "etcd")]
            MetaStore::Etcd(store) => {
                WatcherInner::Etcd(Box::new(store.watch(range, start_revision).await?))
            }
        }))
    }

    /// Grants a lease of `ttl_secs` seconds.
    pub async fn lease_grant(&self, ttl_secs: i64) -> Result<Lease> {
        dispatch!(self, store => store.lease_grant(ttl_secs).await)
    }

    /// Renews a lease for its full TTL. Returns the TTL; [`Error::LeaseNotFound`] once it is
    /// gone (the caller's session is over: its keys are deleted).
    pub async fn lease_keep_alive(&self, id: LeaseId) -> Result<i64> {
        dispatch!(self, store => store.lease_keep_alive(id).await)
    }

    /// Ends a lease now, deleting its keys.
    pub async fn lease_revoke(&self, id: LeaseId) -> Result<()> {
        dispatch!(self, store => store.lease_revoke(id).await)
    }

    /// A lease's granted and remaining TTL.
    pub async fn lease_status(&self, id: LeaseId) -> Result<LeaseStatus> {
        dispatch!(self, store => store.lease_status(id).await)
    }
}

/// A watch on a [`MetaStore`]: ordered batches, one revision each, with previous values.
/// Dropping it cancels the watch.
#[derive(Debug)]
pub struct Watcher(WatcherInner);

#[derive(Debug)]
enum WatcherInner {
    Local(LocalWatcher),
    /// Boxed: it carries a stream and a client, ten times a local watcher's size.
    #[cfg(feature = "etcd")]
    Etcd(Box<crate::etcd::EtcdWatcher>),
}

impl Watcher {
    /// The events of the next revision that touched the range, in revision order, waiting for
    /// one if needed. [`Error::Compacted`] ends the watch (the start revision was compacted, or
    /// the watcher fell behind): re-GET and watch again from the new header revision + 1.
    pub async fn next(&mut self) -> Result<WatchBatch> {
        match &mut self.0 {
            WatcherInner::Local(watcher) => watcher.next().await,
            #[cfg(feature = "etcd")]
            WatcherInner::Etcd(watcher) => watcher.next().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_or_say_why_not() {
        assert_eq!(
            "local".parse::<StoreAddress>().unwrap(),
            StoreAddress::Local
        );
        let etcd: StoreAddress = "etcd://127.0.0.1:2379,h2:2380".parse().unwrap();
        assert_eq!(etcd.to_string(), "etcd://127.0.0.1:2379,h2:2380");
        for bad in [
            "",
            "zk://h:1",
            "etcd://",
            "etcd://h",
            "etcd://h:99999",
            "etcd://:1",
        ] {
            assert!(
                matches!(
                    bad.parse::<StoreAddress>(),
                    Err(Error::InvalidAddress { .. })
                ),
                "{bad}"
            );
        }
    }
}
