//! The embedded store: the shared behavioural suite, then what only it has (persistence,
//! recovery, the directory lock).

// Test code: a failed unwrap, expect or index is the report. The workspace's lint wall is for
// library code; clippy.toml exempts #[test] functions but not the helpers beside them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

mod common;

use std::io::Write as _;

use common::behaviour::{self, for_each_scenario, one};
use skiff_meta::{
    Error, GetRequest, KeyRange, LocalOptions, LocalStore, MetaStore, StoreAddress, NO_LEASE,
};

macro_rules! on_local_store {
    ($($scenario:ident),*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $scenario() {
            let dir = tempfile::tempdir().unwrap();
            let store = MetaStore::open(&StoreAddress::Local, dir.path()).await.unwrap();
            behaviour::$scenario(&store, "/skiff/test/").await;
        }
    )*};
}
for_each_scenario!(on_local_store);

async fn open(dir: &std::path::Path) -> MetaStore {
    MetaStore::Local(LocalStore::open(dir).await.unwrap())
}

#[tokio::test]
async fn a_reopened_store_has_every_acknowledged_write_and_lease() {
    let dir = tempfile::tempdir().unwrap();
    let (revision, lease) = {
        let store = open(dir.path()).await;
        let lease = store.lease_grant(30).await.unwrap();
        store.put("/a", "1", NO_LEASE).await.unwrap();
        store.put("/b", "1", lease.id).await.unwrap();
        store.put("/a", "2", NO_LEASE).await.unwrap();
        (store.delete(KeyRange::key("/gone")).await.unwrap(), lease)
    };
    let store = open(dir.path()).await;
    let all = store.get(GetRequest::prefix("/")).await.unwrap();
    assert_eq!(all.revision, revision);
    assert_eq!(all.kvs.len(), 2);
    assert_eq!(
        (all.kvs[0].value.as_slice(), all.kvs[0].version),
        (&b"2"[..], 2)
    );
    assert_eq!(all.kvs[1].lease, lease.id);
    assert_eq!(
        store.lease_status(lease.id).await.unwrap().granted_ttl_secs,
        30
    );
    // The journal rebuilt the history: a watch from the first revision still works.
    let mut watcher = store.watch(KeyRange::prefix("/"), 2).await.unwrap();
    assert_eq!(behaviour::next_batch(&mut watcher).await.revision, 2);
    let next_lease = store.lease_grant(5).await.unwrap();
    assert!(next_lease.id > lease.id, "lease ids are never reused");
}

#[tokio::test]
async fn snapshots_bound_the_journal_and_recover() {
    let dir = tempfile::tempdir().unwrap();
    let options = LocalOptions {
        journal_bytes_before_snapshot: 2048,
        ..LocalOptions::default()
    };
    {
        let store = MetaStore::Local(
            LocalStore::open_with(dir.path(), options.clone())
                .await
                .unwrap(),
        );
        for i in 0..200 {
            store
                .put(format!("/k/{i:03}"), vec![b'x'; 64], NO_LEASE)
                .await
                .unwrap();
        }
    }
    let journal = std::fs::metadata(dir.path().join("journal")).unwrap().len();
    assert!(journal < 2048 + 512, "journal is {journal} bytes");
    assert!(dir.path().join("snapshot").exists());
    let store = MetaStore::Local(LocalStore::open_with(dir.path(), options).await.unwrap());
    let all = store.get(GetRequest::prefix("/k/")).await.unwrap();
    assert_eq!((all.count, all.revision), (200, 201));
    // History before the snapshot is gone, as after an etcd compaction.
    let mut old = store.watch(KeyRange::prefix("/k/"), 2).await.unwrap();
    assert!(matches!(old.next().await, Err(Error::Compacted { .. })));
}

#[tokio::test]
async fn a_torn_journal_tail_is_cut_and_the_store_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path()).await;
        store.put("/a", "1", NO_LEASE).await.unwrap();
        store.put("/b", "1", NO_LEASE).await.unwrap();
    }
    let path = dir.path().join("journal");
    let length = std::fs::metadata(&path).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(length - 3).unwrap();
    drop(file);
    let store = open(dir.path()).await;
    assert!(one(&store, b"/a").await.is_some());
    assert_eq!(one(&store, b"/b").await, None, "the torn write is gone");
    assert_eq!(store.put("/c", "1", NO_LEASE).await.unwrap(), 3);
    drop(store);
    let store = open(dir.path()).await;
    assert!(
        one(&store, b"/c").await.is_some(),
        "appends after the cut survive"
    );
    // Garbage appended after the last record (a torn header) is cut as well.
    drop(store);
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(&[0xff; 5])
        .unwrap();
    let store = open(dir.path()).await;
    assert!(one(&store, b"/c").await.is_some());
}

#[tokio::test]
async fn damage_inside_the_journal_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path()).await;
        for i in 0..3 {
            store.put(format!("/k{i}"), "v", NO_LEASE).await.unwrap();
        }
    }
    let path = dir.path().join("journal");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8 + 8 + 9] ^= 0x55; // inside the first record's payload
    std::fs::write(&path, &bytes).unwrap();
    let error = LocalStore::open(dir.path()).await.unwrap_err();
    assert!(
        matches!(error, Error::CorruptJournal { offset: 8, .. }),
        "{error}"
    );
}

#[tokio::test]
async fn a_corrupt_snapshot_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let options = LocalOptions {
        journal_bytes_before_snapshot: 1,
        ..LocalOptions::default()
    };
    {
        let store = LocalStore::open_with(dir.path(), options.clone())
            .await
            .unwrap();
        MetaStore::Local(store)
            .put("/a", "1", NO_LEASE)
            .await
            .unwrap();
    }
    let path = dir.path().join("snapshot");
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let error = LocalStore::open_with(dir.path(), options)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::CorruptSnapshot { path: p, .. } if p == &path),
        "{error}"
    );
    assert!(error.to_string().contains("checksum"), "{error}");
}

#[tokio::test]
async fn one_directory_one_store() {
    let dir = tempfile::tempdir().unwrap();
    let _first = LocalStore::open(dir.path()).await.unwrap();
    assert!(matches!(
        LocalStore::open(dir.path()).await,
        Err(Error::Locked { .. })
    ));
}

/// Only in the default build: with the feature, the address connects (tests/etcd_store.rs).
#[cfg(not(feature = "etcd"))]
#[tokio::test]
async fn an_etcd_address_without_the_feature_is_refused_clearly() {
    let address: StoreAddress = "etcd://127.0.0.1:1".parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let error = MetaStore::open(&address, dir.path()).await.unwrap_err();
    assert!(error.to_string().contains("feature `etcd`"), "{error}");
}
