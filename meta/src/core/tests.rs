//! One test per etcd rule the core implements (etcd's `server/etcdserver/apply` and `mvcc`
//! behaviour, and the v3 API docs), plus the store's own bounds.

use super::*;
use crate::types::{CompareOp, EventKind, GetRequest, KeyRange, Txn, TxnOp, TxnOpResponse};

fn put(core: &mut MetaCore, key: &str, value: &str) -> TxnResponse {
    let response = core
        .txn(&Txn::new().and_then(vec![TxnOp::put(key, value)]))
        .unwrap();
    core.assert_invariants();
    response
}

fn get(core: &MetaCore, key: &str) -> Option<KeyValue> {
    core.get(&GetRequest::key(key))
        .unwrap()
        .kvs
        .into_iter()
        .next()
}

#[test]
fn a_fresh_store_is_at_revision_one_and_the_first_write_is_two() {
    let mut core = MetaCore::new();
    assert_eq!(core.revision(), 1);
    assert_eq!(put(&mut core, "a", "1").revision, 2);
}

#[test]
fn versions_count_puts_and_restart_at_one_after_a_re_create() {
    let mut core = MetaCore::new();
    put(&mut core, "a", "1");
    put(&mut core, "a", "2");
    let kv = get(&core, "a").unwrap();
    assert_eq!((kv.create_revision, kv.mod_revision, kv.version), (2, 3, 2));
    core.txn(&Txn::new().and_then(vec![TxnOp::delete("a")]))
        .unwrap();
    put(&mut core, "a", "3");
    let kv = get(&core, "a").unwrap();
    assert_eq!((kv.create_revision, kv.mod_revision, kv.version), (5, 5, 1));
}

#[test]
fn deleting_an_absent_key_does_not_bump_the_revision() {
    let mut core = MetaCore::new();
    put(&mut core, "a", "1");
    let response = core
        .txn(&Txn::new().and_then(vec![TxnOp::delete("b")]))
        .unwrap();
    assert_eq!(response.revision, 2);
    assert_eq!(
        response.responses,
        vec![TxnOpResponse::Delete { prev_kvs: vec![] }]
    );
    assert!(core
        .take_changes()
        .iter()
        .all(|c| !matches!(c, Change::Revision { revision: 3, .. })));
}

#[test]
fn a_txn_without_writes_does_not_bump_the_revision() {
    let mut core = MetaCore::new();
    put(&mut core, "a", "1");
    let txn = Txn::new()
        .when(vec![Compare::version("a", CompareOp::Equal, 7)])
        .and_then(vec![TxnOp::put("a", "x")])
        .or_else(vec![TxnOp::get("a")]);
    let response = core.txn(&txn).unwrap();
    assert!(!response.succeeded);
    assert_eq!(response.revision, 2);
    assert_eq!(core.revision(), 2);
}

#[test]
fn all_writes_of_one_txn_share_one_revision() {
    let mut core = MetaCore::new();
    let txn = Txn::new().and_then(vec![TxnOp::put("a", "1"), TxnOp::put("b", "2")]);
    assert_eq!(core.txn(&txn).unwrap().revision, 2);
    assert_eq!(get(&core, "a").unwrap().mod_revision, 2);
    assert_eq!(get(&core, "b").unwrap().mod_revision, 2);
}

#[test]
fn compares_on_a_missing_key_read_zero_and_a_value_compare_fails() {
    let mut core = MetaCore::new();
    let holds = |core: &mut MetaCore, compare: Compare| {
        core.txn(&Txn::new().when(vec![compare])).unwrap().succeeded
    };
    assert!(holds(&mut core, Compare::absent("k")));
    assert!(holds(
        &mut core,
        Compare::mod_revision("k", CompareOp::Equal, 0)
    ));
    assert!(holds(&mut core, Compare::version("k", CompareOp::Equal, 0)));
    assert!(holds(&mut core, Compare::lease("k", CompareOp::Equal, 0)));
    assert!(!holds(&mut core, Compare::value("k", CompareOp::Equal, "")));
    assert!(!holds(
        &mut core,
        Compare::value("k", CompareOp::NotEqual, "x")
    ));
}

#[test]
fn compares_on_each_field_of_a_present_key() {
    let mut core = MetaCore::new();
    let lease = core.lease_grant(10, 0).unwrap();
    core.txn(&Txn::new().and_then(vec![TxnOp::put_with_lease("k", "v", lease.id)]))
        .unwrap();
    let holds = |core: &mut MetaCore, compare: Compare| {
        core.txn(&Txn::new().when(vec![compare])).unwrap().succeeded
    };
    assert!(holds(
        &mut core,
        Compare::create_revision("k", CompareOp::Equal, 2)
    ));
    assert!(holds(
        &mut core,
        Compare::mod_revision("k", CompareOp::Greater, 1)
    ));
    assert!(holds(&mut core, Compare::version("k", CompareOp::Less, 2)));
    assert!(holds(&mut core, Compare::value("k", CompareOp::Equal, "v")));
    assert!(holds(
        &mut core,
        Compare::value("k", CompareOp::Greater, "u")
    ));
    assert!(holds(
        &mut core,
        Compare::lease("k", CompareOp::Equal, lease.id)
    ));
    assert!(!holds(&mut core, Compare::absent("k")));
}

#[test]
fn create_if_absent_elects_exactly_one_writer() {
    let mut core = MetaCore::new();
    let campaign = |value: &str| {
        Txn::new()
            .when(vec![Compare::absent("ctl")])
            .and_then(vec![TxnOp::put("ctl", value)])
            .or_else(vec![TxnOp::get("ctl")])
    };
    let first = core.txn(&campaign("1")).unwrap();
    let second = core.txn(&campaign("2")).unwrap();
    assert!(first.succeeded && !second.succeeded);
    let TxnOpResponse::Get { kvs } = &second.responses[0] else {
        panic!("get")
    };
    assert_eq!(kvs[0].value, b"1");
    assert_eq!(kvs[0].create_revision, first.revision);
}

#[test]
fn ops_later_in_a_txn_see_earlier_ones() {
    let mut core = MetaCore::new();
    put(&mut core, "p/a", "old");
    let txn = Txn::new().and_then(vec![
        TxnOp::Delete(KeyRange::prefix("p/a")),
        TxnOp::put("p/b", "new"),
        TxnOp::Get(KeyRange::prefix("p/")),
    ]);
    let response = core.txn(&txn).unwrap();
    let TxnOpResponse::Delete { prev_kvs } = &response.responses[0] else {
        panic!("delete")
    };
    assert_eq!(prev_kvs.len(), 1);
    let TxnOpResponse::Get { kvs } = &response.responses[2] else {
        panic!("get")
    };
    assert_eq!(kvs.len(), 1);
    assert_eq!(
        (kvs[0].key.as_slice(), kvs[0].mod_revision),
        (&b"p/b"[..], 3)
    );
    assert_eq!(core.key_count(), 1);
    core.assert_invariants();
}

#[test]
fn invalid_txns_are_refused_before_anything_changes() {
    let mut core = MetaCore::new();
    let too_many: Vec<TxnOp> = (0..129).map(|i| TxnOp::put(format!("k{i}"), "v")).collect();
    assert!(matches!(
        core.txn(&Txn::new().and_then(too_many)),
        Err(Error::TxnTooLarge { ops: 129, max: 128 })
    ));
    let full: Vec<TxnOp> = (0..128).map(|i| TxnOp::put(format!("k{i}"), "v")).collect();
    assert!(core.txn(&Txn::new().and_then(full)).is_ok());
    let twice = Txn::new().and_then(vec![TxnOp::put("a", "1"), TxnOp::put("a", "2")]);
    assert!(matches!(core.txn(&twice), Err(Error::InvalidArgument(_))));
    let put_deleted = Txn::new().and_then(vec![
        TxnOp::Delete(KeyRange::prefix("k")),
        TxnOp::put("k1", "2"),
    ]);
    assert!(matches!(
        core.txn(&put_deleted),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        core.txn(&Txn::new().and_then(vec![TxnOp::put("", "v")])),
        Err(Error::InvalidArgument(_))
    ));
    let big = vec![0u8; limits::VALUE_BYTES_MAX + 1];
    assert!(matches!(
        core.txn(&Txn::new().and_then(vec![TxnOp::put("a", big)])),
        Err(Error::TooLarge { what: "value", .. })
    ));
    let unknown_lease = Txn::new().and_then(vec![TxnOp::put_with_lease("a", "v", 99)]);
    assert!(matches!(
        core.txn(&unknown_lease),
        Err(Error::LeaseNotFound { lease: 99 })
    ));
    assert_eq!(core.revision(), 2);
}

#[test]
fn reads_at_a_past_revision_see_that_revision() {
    let mut core = MetaCore::new();
    put(&mut core, "p/a", "1"); // 2
    put(&mut core, "p/b", "1"); // 3
    put(&mut core, "p/a", "2"); // 4
    core.txn(&Txn::new().and_then(vec![TxnOp::delete("p/b")]))
        .unwrap(); // 5
    let at = |revision| {
        core.get(&GetRequest::prefix("p/").at_revision(revision))
            .unwrap()
    };
    assert_eq!(at(1).kvs.len(), 0);
    let three = at(3);
    assert_eq!(three.revision, 5, "the header is the current revision");
    assert_eq!(
        three
            .kvs
            .iter()
            .map(|kv| (kv.key.clone(), kv.value.clone()))
            .collect::<Vec<_>>(),
        vec![
            (b"p/a".to_vec(), b"1".to_vec()),
            (b"p/b".to_vec(), b"1".to_vec())
        ]
    );
    assert_eq!(at(4).kvs[0].version, 2);
    assert_eq!(at(5).kvs.len(), 1);
    assert!(matches!(
        core.get(&GetRequest::key("p/a").at_revision(6)),
        Err(Error::FutureRevision {
            requested_revision: 6,
            current_revision: 5
        })
    ));
}

#[test]
fn limit_cuts_the_answer_and_says_so() {
    let mut core = MetaCore::new();
    for key in ["p/a", "p/b", "p/c", "q"] {
        put(&mut core, key, "v");
    }
    let response = core.get(&GetRequest::prefix("p/").with_limit(2)).unwrap();
    assert_eq!(
        (response.kvs.len(), response.count, response.more),
        (2, 3, true)
    );
}

#[test]
fn compaction_refuses_older_reads_and_watches() {
    let mut core = MetaCore::new();
    for value in ["1", "2", "3"] {
        put(&mut core, "a", value); // 2, 3, 4
    }
    core.compact(3).unwrap();
    assert!(core.get(&GetRequest::key("a").at_revision(3)).is_ok());
    assert!(matches!(
        core.get(&GetRequest::key("a").at_revision(2)),
        Err(Error::Compacted {
            requested_revision: 2,
            compact_revision: Some(3)
        })
    ));
    assert!(matches!(core.compact(3), Err(Error::Compacted { .. })));
    assert!(matches!(core.compact(9), Err(Error::FutureRevision { .. })));
    let old = core.watch(KeyRange::key("a"), 2).unwrap();
    assert!(matches!(
        core.watch_poll(old),
        Err(Error::Compacted {
            requested_revision: 2,
            compact_revision: Some(3)
        })
    ));
    assert!(
        matches!(core.watch_poll(old), Err(Error::Closed)),
        "a canceled watcher is gone"
    );
    let ok = core.watch(KeyRange::key("a"), 3).unwrap();
    assert_eq!(core.watch_poll(ok).unwrap().unwrap().revision, 3);
}

#[test]
fn a_watch_replays_history_then_follows_with_prev_kv() {
    let mut core = MetaCore::new();
    put(&mut core, "p/a", "1"); // 2
    put(&mut core, "x", "1"); // 3
    let watcher = core.watch(KeyRange::prefix("p/"), 2).unwrap();
    let batch = core.watch_poll(watcher).unwrap().unwrap();
    assert_eq!(batch.revision, 2);
    assert_eq!(batch.events[0].kind, EventKind::Put);
    assert_eq!(batch.events[0].prev_kv, None);
    assert_eq!(
        core.watch_poll(watcher).unwrap(),
        None,
        "revision 3 is outside the prefix"
    );
    core.txn(&Txn::new().and_then(vec![TxnOp::put("p/a", "2"), TxnOp::put("p/b", "1")]))
        .unwrap();
    core.txn(&Txn::new().and_then(vec![TxnOp::Delete(KeyRange::prefix("p/"))]))
        .unwrap();
    let batch = core.watch_poll(watcher).unwrap().unwrap();
    assert_eq!((batch.revision, batch.events.len()), (4, 2));
    assert_eq!(batch.events[0].prev_kv.as_ref().unwrap().value, b"1");
    let batch = core.watch_poll(watcher).unwrap().unwrap();
    assert_eq!(batch.revision, 5);
    assert!(batch
        .events
        .iter()
        .all(|event| event.kind == EventKind::Delete));
    assert_eq!(batch.events[0].kv.mod_revision, 5);
    assert_eq!(batch.events[0].kv.version, 0);
    assert_eq!(batch.events[0].prev_kv.as_ref().unwrap().value, b"2");
}

#[test]
fn a_watch_from_zero_starts_at_the_next_revision() {
    let mut core = MetaCore::new();
    put(&mut core, "a", "1");
    let watcher = core.watch(KeyRange::key("a"), 0).unwrap();
    assert_eq!(core.watch_poll(watcher).unwrap(), None);
    put(&mut core, "a", "2");
    assert_eq!(core.watch_poll(watcher).unwrap().unwrap().revision, 3);
}

#[test]
fn a_watcher_that_falls_behind_is_canceled_like_a_compaction() {
    let mut core = MetaCore::new();
    let slow = core.watch(KeyRange::prefix("k"), 0).unwrap();
    for i in 0..=limits::WATCH_QUEUE_REVISIONS_MAX {
        put(&mut core, "k", &i.to_string());
    }
    assert!(matches!(
        core.watch_poll(slow),
        Err(Error::Compacted {
            requested_revision: 2,
            compact_revision: Some(_)
        })
    ));
    assert_eq!(core.watcher_count(), 0);
}

#[test]
fn history_is_bounded_and_compacts_itself() {
    let mut core = MetaCore::new();
    for i in 0..limits::HISTORY_REVISIONS_MAX + 10 {
        put(&mut core, "k", &i.to_string());
    }
    assert_eq!(core.compact_revision(), 12);
    assert!(core.get(&GetRequest::key("k").at_revision(11)).is_err());
    assert!(core.get(&GetRequest::key("k").at_revision(12)).is_ok());
}

#[test]
fn a_lease_keeps_its_keys_until_it_expires_at_the_injected_time() {
    let mut core = MetaCore::new();
    let lease = core.lease_grant(5, 1_000).unwrap();
    core.txn(&Txn::new().and_then(vec![
        TxnOp::put_with_lease("a", "1", lease.id),
        TxnOp::put_with_lease("b", "1", lease.id),
        TxnOp::put("c", "1"),
    ]))
    .unwrap();
    assert_eq!(core.next_lease_deadline_ms(), Some(6_000));
    assert_eq!(core.expire_leases(5_999), Vec::<LeaseId>::new());
    assert_eq!(core.lease_keep_alive(lease.id, 4_000).unwrap(), 5);
    assert_eq!(
        core.lease_status(lease.id, 4_500)
            .unwrap()
            .remaining_ttl_secs,
        5
    );
    assert_eq!(core.expire_leases(8_999), Vec::<LeaseId>::new());
    let watcher = core.watch(KeyRange::prefix(""), 0);
    assert!(watcher.is_err(), "an empty prefix is refused");
    let watcher = core.watch(KeyRange::key("a"), 0).unwrap();
    assert_eq!(core.expire_leases(9_000), vec![lease.id]);
    core.assert_invariants();
    assert_eq!(core.key_count(), 1);
    assert_eq!(core.revision(), 3, "both keys went in one revision");
    let batch = core.watch_poll(watcher).unwrap().unwrap();
    assert_eq!(batch.events[0].kind, EventKind::Delete);
    assert!(matches!(
        core.lease_keep_alive(lease.id, 9_000),
        Err(Error::LeaseNotFound { .. })
    ));
}

#[test]
fn revoking_a_lease_without_keys_creates_no_revision() {
    let mut core = MetaCore::new();
    let lease = core.lease_grant(5, 0).unwrap();
    assert_eq!(core.lease_revoke(lease.id).unwrap(), 1);
    assert!(matches!(
        core.lease_revoke(lease.id),
        Err(Error::LeaseNotFound { .. })
    ));
}

#[test]
fn a_put_without_the_lease_detaches_the_key() {
    let mut core = MetaCore::new();
    let lease = core.lease_grant(5, 0).unwrap();
    core.txn(&Txn::new().and_then(vec![TxnOp::put_with_lease("a", "1", lease.id)]))
        .unwrap();
    put(&mut core, "a", "2");
    core.expire_leases(10_000);
    assert_eq!(get(&core, "a").unwrap().value, b"2");
}

#[test]
fn bad_ttls_are_refused() {
    let mut core = MetaCore::new();
    assert!(matches!(
        core.lease_grant(0, 0),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        core.lease_grant(limits::LEASE_TTL_SECS_MAX + 1, 0),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn snapshot_and_replay_rebuild_the_same_state() {
    let mut core = MetaCore::new();
    let lease = core.lease_grant(5, 0).unwrap();
    put(&mut core, "a", "1");
    let snapshot = core.snapshot();
    core.take_changes();
    core.txn(&Txn::new().and_then(vec![
        TxnOp::put_with_lease("b", "1", lease.id),
        TxnOp::put("a", "2"),
    ]))
    .unwrap();
    let other = core.lease_grant(7, 0).unwrap();
    core.lease_revoke(lease.id).unwrap();
    core.compact(4).unwrap();
    let changes = core.take_changes();
    let mut rebuilt = MetaCore::from_snapshot(snapshot, 0).unwrap();
    for change in &changes {
        rebuilt.replay(change, 0).unwrap();
    }
    rebuilt.assert_invariants();
    assert_eq!(rebuilt.snapshot(), core.snapshot());
    assert_eq!(rebuilt.compact_revision(), 4);
    assert_eq!(
        rebuilt.lease_status(other.id, 0).unwrap().granted_ttl_secs,
        7
    );
    assert!(
        rebuilt.replay(&changes[0], 0).is_err(),
        "a revision out of order is refused"
    );
}

#[test]
fn inconsistent_snapshots_are_refused() {
    let mut core = MetaCore::new();
    let lease = core.lease_grant(5, 0).unwrap();
    core.txn(&Txn::new().and_then(vec![TxnOp::put_with_lease("b", "1", lease.id)]))
        .unwrap();
    let mut orphan = core.snapshot();
    orphan.leases.clear();
    assert!(MetaCore::from_snapshot(orphan, 0).is_err());
    let mut future = core.snapshot();
    future.revision = 1;
    assert!(MetaCore::from_snapshot(future, 0).is_err());
}
