//! Skiff's metadata store: etcd's semantics (docs/design/cluster.md §7), embedded or on etcd.
//!
//! - [`MetaCore`]: the pure state machine (no IO, no clock: time is passed in as milliseconds),
//!   usable directly by deterministic simulations.
//! - [`LocalStore`]: the default backend, the core plus an fsynced journal and snapshots in a
//!   directory, and a task that expires leases on the real clock.
//! - `EtcdStore` (cargo feature `etcd`, off by default because `etcd-client` needs `protoc` to
//!   build): a real etcd cluster, with the retry and stream-resume rules of docs/design/cluster.md
//!   §8.
//! - [`MetaStore`]: the one handle the rest of Skiff uses, whichever backend is behind it, chosen
//!   by a [`StoreAddress`] (`local` or `etcd://host:port,...`).
//!
//! What both backends guarantee (and `tests/common/behaviour.rs` checks on both):
//! - every Txn that writes gets exactly one new revision; one that writes nothing (failed guard,
//!   reads only, deleting absent keys) gets none; a key's version restarts at 1 when re-created;
//! - compares on a missing key read 0 for revisions, version and lease, and a value compare on
//!   it fails; at most [`limits::TXN_OPS_MAX`] compares and ops per branch;
//! - a watch delivers one [`WatchBatch`] per revision, in order, with previous values, from any
//!   start revision still in the history; otherwise (or when the watcher falls behind) it ends
//!   with [`Error::Compacted`], and the owner re-GETs and watches from the new revision + 1;
//! - keys put with a lease are deleted, in one revision, when the lease is revoked or expires.
//!
//! ```
//! use skiff_meta::{Compare, GetRequest, MetaStore, StoreAddress, Txn, TxnOp};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> skiff_meta::Result<()> {
//! let dir = tempfile::tempdir().unwrap();
//! let store = MetaStore::open(&StoreAddress::Local, dir.path()).await?;
//! let session = store.lease_grant(10).await?;
//! // Create-if-absent, on the session's lease: the controller election
//! // (docs/design/cluster.md §3).
//! let campaign = Txn::new()
//!     .when(vec![Compare::absent("/skiff/c/v1/controller")])
//!     .and_then(vec![TxnOp::put_with_lease("/skiff/c/v1/controller", "1", session.id)]);
//! let won = store.txn(campaign).await?;
//! assert!(won.succeeded);
//! let controller = store.get(GetRequest::key("/skiff/c/v1/controller")).await?;
//! assert_eq!(controller.kvs[0].create_revision, won.revision); // the controller epoch
//! # Ok(())
//! # }
//! ```

// The workspace's lint wall (root Cargo.toml) holds for library code; test code is exempt.
// clippy.toml lets tests unwrap, expect, panic and index; clippy has no such setting for casts,
// so the test build (whose library code the non-test build lints anyway) allows those two.
#![cfg_attr(test, allow(clippy::cast_possible_truncation, clippy::cast_sign_loss))]

mod codec;
pub mod core;
mod error;
#[cfg(feature = "etcd")]
mod etcd;
pub mod limits;
mod local;
mod store;
mod types;

/// The on-disk decoders, for the fuzz targets (`fuzz/src/meta.rs`). Not an API.
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::codec::{decode_snapshot, encode_snapshot, DecodeError};
    pub use crate::local::journal::{
        encode_record, scan as scan_journal, JournalDamage, Scan, JOURNAL_MAGIC,
    };
}

pub use crate::core::{Change, MetaCore, ReplayError, Snapshot, WatchId, Write, INITIAL_REVISION};
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
