//! The behavioural suite every backend must pass: one body per etcd rule, run against the
//! embedded store (`tests/local_store.rs`) and a real 3-member etcd (`tests/etcd_store.rs`), so
//! the two agree on semantics. Each scenario works under its own key root and only compares
//! revisions relative to the ones it saw, so scenarios can share one etcd cluster.

// Each test binary that includes `common` uses a different part of it.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use skiff_meta::{
    Compare, CompareOp, Error, EventKind, GetRequest, KeyRange, KeyValue, MetaStore, Txn, TxnOp,
    TxnOpResponse, WatchBatch, Watcher, NO_LEASE,
};

/// Calls `$run!(scenario, ...)` with every scenario of the suite.
macro_rules! for_each_scenario {
    ($run:ident) => {
        $run!(
            versions_and_revisions,
            txn_compares,
            txn_limits,
            reads_at_past_revisions,
            watch_from_a_revision,
            compaction_forces_a_re_get,
            lease_lifecycle,
            lease_expiry_deletes_keys
        );
    };
}
pub(crate) use for_each_scenario;

const WAIT: Duration = Duration::from_secs(15);

fn key(root: &str, name: &str) -> Vec<u8> {
    format!("{root}{name}").into_bytes()
}

pub async fn one(store: &MetaStore, key: &[u8]) -> Option<KeyValue> {
    store
        .get(GetRequest::key(key))
        .await
        .unwrap()
        .kvs
        .into_iter()
        .next()
}

pub async fn next_batch(watcher: &mut Watcher) -> WatchBatch {
    tokio::time::timeout(WAIT, watcher.next())
        .await
        .expect("watch event in time")
        .unwrap()
}

pub async fn versions_and_revisions(store: &MetaStore, root: &str) {
    let k = key(root, "k");
    let first = store.put(k.clone(), "1", NO_LEASE).await.unwrap();
    let kv = one(store, &k).await.unwrap();
    assert_eq!(
        (kv.create_revision, kv.mod_revision, kv.version, kv.lease),
        (first, first, 1, 0)
    );
    let second = store.put(k.clone(), "2", NO_LEASE).await.unwrap();
    assert_eq!(second, first + 1);
    let kv = one(store, &k).await.unwrap();
    assert_eq!(
        (kv.create_revision, kv.mod_revision, kv.version),
        (first, second, 2)
    );
    let deleted = store.delete(KeyRange::key(k.clone())).await.unwrap();
    assert_eq!(deleted, second + 1);
    assert_eq!(one(store, &k).await, None);
    let absent = store.delete(KeyRange::key(k.clone())).await.unwrap();
    assert_eq!(
        absent, deleted,
        "deleting an absent key creates no revision"
    );
    let again = store.put(k.clone(), "3", NO_LEASE).await.unwrap();
    assert_eq!(again, deleted + 1);
    let kv = one(store, &k).await.unwrap();
    assert_eq!(
        (kv.create_revision, kv.version),
        (again, 1),
        "a re-created key restarts"
    );
    assert_eq!(store.get(GetRequest::key(k)).await.unwrap().revision, again);
}

pub async fn txn_compares(store: &MetaStore, root: &str) {
    let ctl = key(root, "controller");
    let campaign = |value: &'static str| {
        Txn::new()
            .when(vec![Compare::absent(ctl.clone())])
            .and_then(vec![TxnOp::put(ctl.clone(), value)])
            .or_else(vec![TxnOp::get(ctl.clone())])
    };
    let won = store.txn(campaign("1")).await.unwrap();
    assert!(won.succeeded);
    let lost = store.txn(campaign("2")).await.unwrap();
    assert!(!lost.succeeded);
    assert_eq!(lost.revision, won.revision, "a failed guard writes nothing");
    let TxnOpResponse::Get { kvs } = &lost.responses[0] else {
        panic!("a get response")
    };
    assert_eq!(
        (kvs[0].value.as_slice(), kvs[0].create_revision),
        (&b"1"[..], won.revision)
    );

    // CAS on mod_revision: stale fails, current succeeds.
    let stale = Txn::new()
        .when(vec![Compare::mod_revision(
            ctl.clone(),
            CompareOp::Equal,
            won.revision - 1,
        )])
        .and_then(vec![TxnOp::put(ctl.clone(), "x")]);
    assert!(!store.txn(stale).await.unwrap().succeeded);
    let fresh = Txn::new()
        .when(vec![
            Compare::mod_revision(ctl.clone(), CompareOp::Equal, won.revision),
            Compare::version(ctl.clone(), CompareOp::Greater, 0),
            Compare::lease(ctl.clone(), CompareOp::Equal, NO_LEASE),
            Compare::value(ctl.clone(), CompareOp::Equal, "1"),
        ])
        .and_then(vec![
            TxnOp::put(ctl.clone(), "y"),
            TxnOp::put(key(root, "other"), "z"),
        ]);
    let cas = store.txn(fresh).await.unwrap();
    assert!(cas.succeeded);
    assert_eq!(
        cas.revision,
        won.revision + 1,
        "all writes of a txn share one revision"
    );
    assert_eq!(
        one(store, &key(root, "other")).await.unwrap().mod_revision,
        cas.revision
    );
    assert!(
        matches!(&cas.responses[0], TxnOpResponse::Put { prev_kv: Some(prev) } if prev.value == b"1")
    );

    // A missing key: numbers compare as 0, a value compare always fails.
    let missing = key(root, "missing");
    for (compare, holds) in [
        (
            Compare::create_revision(missing.clone(), CompareOp::Equal, 0),
            true,
        ),
        (
            Compare::mod_revision(missing.clone(), CompareOp::Equal, 0),
            true,
        ),
        (Compare::version(missing.clone(), CompareOp::Less, 1), true),
        (Compare::value(missing.clone(), CompareOp::Equal, ""), false),
        (
            Compare::value(missing.clone(), CompareOp::NotEqual, "x"),
            false,
        ),
    ] {
        let answer = store
            .txn(Txn::new().when(vec![compare.clone()]))
            .await
            .unwrap();
        assert_eq!(answer.succeeded, holds, "{compare:?}");
        assert_eq!(
            answer.revision, cas.revision,
            "a txn without writes creates no revision"
        );
    }
}

pub async fn txn_limits(store: &MetaStore, root: &str) {
    let puts = |count: usize| -> Vec<TxnOp> {
        (0..count)
            .map(|i| TxnOp::put(key(root, &format!("bulk/{i:03}")), "v"))
            .collect()
    };
    assert!(matches!(
        store.txn(Txn::new().and_then(puts(129))).await,
        Err(Error::TxnTooLarge { ops: 129, max: 128 })
    ));
    let full = store.txn(Txn::new().and_then(puts(128))).await.unwrap();
    let all = store
        .get(GetRequest::prefix(key(root, "bulk/")))
        .await
        .unwrap();
    assert_eq!(all.count, 128);
    assert!(all.kvs.iter().all(|kv| kv.mod_revision == full.revision));
    let twice = Txn::new().and_then(vec![
        TxnOp::put(key(root, "d"), "1"),
        TxnOp::put(key(root, "d"), "2"),
    ]);
    assert!(matches!(
        store.txn(twice).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        store.put("", "v", NO_LEASE).await,
        Err(Error::InvalidArgument(_))
    ));
    let unknown = store.put(key(root, "leased"), "v", 0x7fff_0000_0001).await;
    assert!(
        matches!(
            unknown,
            Err(Error::LeaseNotFound {
                lease: 0x7fff_0000_0001
            })
        ),
        "{unknown:?}"
    );
}

pub async fn reads_at_past_revisions(store: &MetaStore, root: &str) {
    let prefix = key(root, "p/");
    let a = store.put(key(root, "p/a"), "a1", NO_LEASE).await.unwrap();
    let b = store.put(key(root, "p/b"), "b1", NO_LEASE).await.unwrap();
    store.put(key(root, "p/c"), "c1", NO_LEASE).await.unwrap();
    let a2 = store.put(key(root, "p/a"), "a2", NO_LEASE).await.unwrap();
    let gone = store.delete(KeyRange::key(key(root, "p/b"))).await.unwrap();
    let values = |response: skiff_meta::GetResponse| -> Vec<(String, String)> {
        response
            .kvs
            .into_iter()
            .map(|kv| {
                let key = String::from_utf8(kv.key).unwrap();
                (
                    key.rsplit('/').next().unwrap().to_owned(),
                    String::from_utf8(kv.value).unwrap(),
                )
            })
            .collect()
    };
    let at = |revision| store.get(GetRequest::prefix(prefix.clone()).at_revision(revision));
    assert_eq!(values(at(a).await.unwrap()), [("a".into(), "a1".into())]);
    assert_eq!(values(at(b).await.unwrap()).len(), 2);
    let before_delete = at(a2).await.unwrap();
    assert_eq!(
        before_delete.revision, gone,
        "the header is the current revision"
    );
    assert_eq!(
        values(before_delete),
        [
            ("a".into(), "a2".into()),
            ("b".into(), "b1".into()),
            ("c".into(), "c1".into())
        ]
    );
    assert_eq!(values(at(gone).await.unwrap()).len(), 2);
    let limited = store
        .get(GetRequest::prefix(prefix.clone()).with_limit(1))
        .await
        .unwrap();
    assert_eq!(
        (limited.kvs.len(), limited.count, limited.more),
        (1, 2, true)
    );
    assert!(matches!(
        at(gone + 1000).await,
        Err(Error::FutureRevision { requested_revision, .. }) if requested_revision == gone + 1000
    ));
}

pub async fn watch_from_a_revision(store: &MetaStore, root: &str) {
    let (a, b) = (key(root, "w/a"), key(root, "w/b"));
    let first = store.put(a.clone(), "1", NO_LEASE).await.unwrap();
    store.put(b.clone(), "1", NO_LEASE).await.unwrap();
    let both = Txn::new().and_then(vec![TxnOp::put(a.clone(), "2"), TxnOp::delete(b.clone())]);
    let txn = store.txn(both).await.unwrap().revision;
    store
        .put(key(root, "elsewhere"), "x", NO_LEASE)
        .await
        .unwrap();
    let last = store.delete(KeyRange::key(a.clone())).await.unwrap();

    let mut from_now = store
        .watch(KeyRange::prefix(key(root, "w/")), 0)
        .await
        .unwrap();
    let mut watcher = store
        .watch(KeyRange::prefix(key(root, "w/")), first)
        .await
        .unwrap();
    let batch = next_batch(&mut watcher).await;
    assert_eq!((batch.revision, batch.events.len()), (first, 1));
    assert_eq!(batch.events[0].kind, EventKind::Put);
    assert_eq!(batch.events[0].prev_kv, None);
    assert_eq!(next_batch(&mut watcher).await.revision, first + 1);
    let batch = next_batch(&mut watcher).await;
    assert_eq!(batch.revision, txn, "one batch per txn");
    let kinds: Vec<_> = batch
        .events
        .iter()
        .map(|e| (e.kind, e.kv.key.clone()))
        .collect();
    assert_eq!(
        kinds,
        [(EventKind::Put, a.clone()), (EventKind::Delete, b.clone())]
    );
    assert_eq!(batch.events[0].prev_kv.as_ref().unwrap().value, b"1");
    assert_eq!(batch.events[1].kv.mod_revision, txn);
    assert_eq!(batch.events[1].prev_kv.as_ref().unwrap().value, b"1");
    let batch = next_batch(&mut watcher).await;
    assert_eq!(
        batch.revision, last,
        "the write outside the prefix is not seen"
    );
    assert_eq!(batch.events[0].kind, EventKind::Delete);
    assert_eq!(batch.events[0].prev_kv.as_ref().unwrap().value, b"2");

    // Live events reach both watchers, and the one from 0 saw nothing older.
    let live = store.put(b.clone(), "live", NO_LEASE).await.unwrap();
    assert_eq!(next_batch(&mut watcher).await.revision, live);
    let batch = next_batch(&mut from_now).await;
    assert_eq!(
        (batch.revision, batch.events[0].kv.value.as_slice()),
        (live, &b"live"[..])
    );
    assert!(matches!(
        store.watch(KeyRange::prefix(""), 0).await,
        Err(Error::InvalidArgument(_))
    ));
}

pub async fn compaction_forces_a_re_get(store: &MetaStore, root: &str) {
    let k = key(root, "c");
    let first = store.put(k.clone(), "1", NO_LEASE).await.unwrap();
    let second = store.put(k.clone(), "2", NO_LEASE).await.unwrap();
    store.put(k.clone(), "3", NO_LEASE).await.unwrap();
    store.compact(second).await.unwrap();
    assert!(matches!(
        store.get(GetRequest::key(k.clone()).at_revision(first)).await,
        Err(Error::Compacted { requested_revision, .. }) if requested_revision == first
    ));
    let kv = store
        .get(GetRequest::key(k.clone()).at_revision(second))
        .await
        .unwrap();
    assert_eq!(kv.kvs[0].value, b"2");
    assert!(matches!(
        store.compact(second).await,
        Err(Error::Compacted { .. })
    ));

    let mut old = store.watch(KeyRange::key(k.clone()), first).await.unwrap();
    let canceled = tokio::time::timeout(WAIT, old.next())
        .await
        .expect("cancel in time");
    assert!(
        matches!(canceled, Err(Error::Compacted { compact_revision: Some(c), .. }) if c >= second),
        "{canceled:?}"
    );
    let mut ok = store.watch(KeyRange::key(k.clone()), second).await.unwrap();
    let batch = next_batch(&mut ok).await;
    assert_eq!(
        (batch.revision, batch.events[0].kv.value.as_slice()),
        (second, &b"2"[..])
    );
}

pub async fn lease_lifecycle(store: &MetaStore, root: &str) {
    let lease = store.lease_grant(10).await.unwrap();
    assert_eq!(lease.ttl_secs, 10);
    let k = key(root, "session");
    store.put(k.clone(), "me", lease.id).await.unwrap();
    assert_eq!(one(store, &k).await.unwrap().lease, lease.id);
    let status = store.lease_status(lease.id).await.unwrap();
    assert_eq!(status.granted_ttl_secs, 10);
    assert!((1..=10).contains(&status.remaining_ttl_secs), "{status:?}");
    assert_eq!(store.lease_keep_alive(lease.id).await.unwrap(), 10);
    assert_eq!(store.lease_keep_alive(lease.id).await.unwrap(), 10);
    let guarded = Txn::new()
        .when(vec![Compare::lease(k.clone(), CompareOp::Equal, lease.id)])
        .and_then(vec![TxnOp::put_with_lease(k.clone(), "me again", lease.id)]);
    assert!(store.txn(guarded).await.unwrap().succeeded);

    let mut watcher = store.watch(KeyRange::key(k.clone()), 0).await.unwrap();
    store.lease_revoke(lease.id).await.unwrap();
    let batch = next_batch(&mut watcher).await;
    assert_eq!(batch.events[0].kind, EventKind::Delete);
    assert_eq!(one(store, &k).await, None);
    let not_found = |result: Result<_, Error>| matches!(result, Err(Error::LeaseNotFound { lease: id }) if id == lease.id);
    assert!(not_found(
        store.lease_keep_alive(lease.id).await.map(|_| ())
    ));
    assert!(not_found(store.lease_status(lease.id).await.map(|_| ())));
    assert!(not_found(store.lease_revoke(lease.id).await));
    assert!(not_found(
        store.put(k.clone(), "late", lease.id).await.map(|_| ())
    ));
    assert!(matches!(
        store.lease_grant(0).await,
        Err(Error::InvalidArgument(_))
    ));
}

pub async fn lease_expiry_deletes_keys(store: &MetaStore, root: &str) {
    let lease = store.lease_grant(2).await.unwrap();
    let k = key(root, "ephemeral");
    let mut watcher = store.watch(KeyRange::key(k.clone()), 0).await.unwrap();
    let started = Instant::now();
    store.put(k.clone(), "v", lease.id).await.unwrap();
    assert_eq!(
        next_batch(&mut watcher).await.events[0].kind,
        EventKind::Put
    );
    let batch = next_batch(&mut watcher).await;
    let waited = started.elapsed();
    assert_eq!(batch.events[0].kind, EventKind::Delete);
    assert!(
        waited >= Duration::from_millis(1500),
        "expired after only {waited:?}"
    );
    assert_eq!(one(store, &k).await, None);
    assert!(matches!(
        store.lease_keep_alive(lease.id).await,
        Err(Error::LeaseNotFound { .. })
    ));
}
