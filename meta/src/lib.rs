//! Skiff's metadata store: etcd's semantics (cluster.md §7), embedded or on etcd.
//!
//! - [`MetaCore`]: the pure state machine (no IO, no clock), usable directly by simulations.
//! - [`LocalStore`]: the default backend, the core plus a journal and snapshots in a directory.
//! - `EtcdStore` (cargo feature `etcd`): a real etcd cluster through `etcd-client`, with the
//!   retry and stream-resume rules of cluster.md §8.
//! - [`MetaStore`]: the one handle the broker uses, whichever backend is behind it.

mod codec;
pub mod core;
mod error;
#[cfg(feature = "etcd")]
mod etcd;
pub mod limits;
mod local;
mod store;
mod types;

pub use crate::core::{Change, MetaCore, Snapshot, WatchId, Write, INITIAL_REVISION};
pub use error::{Error, Result};
#[cfg(feature = "etcd")]
pub use etcd::{EtcdOptions, EtcdStore, EtcdWatcher};
pub use local::{LocalOptions, LocalStore, LocalWatcher};
pub use store::{MetaStore, StoreAddress, Watcher};
pub use types::{
    Compare, CompareOp, CompareTarget, Event, EventKind, GetRequest, GetResponse, KeyRange,
    KeyValue, Lease, LeaseId, LeaseStatus, Txn, TxnOp, TxnOpResponse, TxnResponse, WatchBatch,
    NO_LEASE,
};
