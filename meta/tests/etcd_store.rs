//! The etcd backend against a real 3-member etcd 3.4 started on loopback: the shared
//! behavioural suite, then member failures under a held lease and an open watch.
//! Built only with `--features etcd`; then it never skips (a missing etcd fails).

#![cfg(feature = "etcd")]
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

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::behaviour::{self, for_each_scenario, next_batch, one};
use common::etcd_cluster::EtcdCluster;
use skiff_meta::{Compare, EventKind, KeyRange, MetaStore, StoreAddress, Txn, TxnOp};

/// One cluster for the whole file: starting etcd costs seconds, and every scenario works under
/// its own key root.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_backend() {
    let started = Instant::now();
    let mut cluster = EtcdCluster::start(3).await;
    eprintln!("3 etcd members healthy after {:?}", started.elapsed());
    let address = StoreAddress::Etcd {
        endpoints: cluster.endpoints(),
    };
    let store = MetaStore::open(&address, std::path::Path::new("unused"))
        .await
        .unwrap();

    macro_rules! on_etcd {
        ($($scenario:ident),*) => {$(
            let began = Instant::now();
            behaviour::$scenario(&store, concat!("/skiff/test/", stringify!($scenario), "/")).await;
            eprintln!("{}: {:?}", stringify!($scenario), began.elapsed());
        )*};
    }
    for_each_scenario!(on_etcd);

    let began = Instant::now();
    members_die_under_a_lease_and_a_watch(&store, &mut cluster).await;
    eprintln!("member failures: {:?}", began.elapsed());
}

/// docs/design/cluster.md §8's failover check: SIGKILL each member in turn (the Raft leader among
/// them) while holding a kept-alive lease and a prefix watch, writing through the outage. No event
/// may be lost or repeated, and the lease and its key must survive.
async fn members_die_under_a_lease_and_a_watch(store: &MetaStore, cluster: &mut EtcdCluster) {
    const WRITES_PER_OUTAGE: usize = 4;
    let root = "/skiff/test/failover/";
    let lease = store.lease_grant(5).await.unwrap();
    let registration = format!("{root}broker/1").into_bytes();
    store
        .put(registration.clone(), "me", lease.id)
        .await
        .unwrap();
    let mut watcher = store
        .watch(KeyRange::prefix(format!("{root}data/")), 0)
        .await
        .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let keeper = tokio::spawn({
        let (store, stop) = (store.clone(), stop.clone());
        async move {
            while !stop.load(Ordering::Relaxed) {
                let ttl = store
                    .lease_keep_alive(lease.id)
                    .await
                    .expect("keep-alive survives");
                assert_eq!(ttl, 5);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    });

    let mut written = Vec::new();
    for member in 0..3 {
        cluster.kill(member);
        for write in 0..WRITES_PER_OUTAGE {
            let key = format!("{root}data/{member}-{write}").into_bytes();
            // Guarded (create-if-absent), so the store may retry it through the outage.
            let txn = Txn::new()
                .when(vec![Compare::absent(key.clone())])
                .and_then(vec![TxnOp::put(key.clone(), "v")]);
            let response = store.txn(txn).await.unwrap();
            assert!(response.succeeded);
            written.push((response.revision, key));
        }
        cluster.restart(member).await;
    }

    for (revision, key) in &written {
        let batch = next_batch(&mut watcher).await;
        assert_eq!((batch.revision, &batch.events[0].kv.key), (*revision, key));
        assert_eq!(batch.events[0].kind, EventKind::Put);
    }
    stop.store(true, Ordering::Relaxed);
    keeper.await.unwrap();
    let status = store.lease_status(lease.id).await.unwrap();
    assert!(status.remaining_ttl_secs > 0, "{status:?}");
    assert_eq!(one(store, &registration).await.unwrap().lease, lease.id);
    // Nothing beyond the writes arrives.
    let extra = tokio::time::timeout(Duration::from_millis(300), watcher.next()).await;
    assert!(extra.is_err(), "unexpected event {extra:?}");
    store.lease_revoke(lease.id).await.unwrap();
}
