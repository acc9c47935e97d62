//! Property test: random operations on [`MetaCore`] against a deliberately naive model that
//! keeps a full copy of the key space per revision. Checks answers, versions, reads at past
//! revisions, lease expiry and the exact event stream a watcher sees.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::types::{CompareOp, GetRequest, KeyRange, Txn, TxnOp};

#[derive(Clone, Debug)]
enum Op {
    Put {
        key: u8,
        value: u8,
        lease: Option<u8>,
    },
    Delete {
        key: u8,
    },
    DeleteAll,
    /// A CAS on the key's mod revision, with the right or a wrong expectation.
    CasPut {
        key: u8,
        value: u8,
        stale: bool,
    },
    Get {
        key: Option<u8>,
        back: u8,
    },
    Grant {
        ttl_secs: u8,
    },
    Revoke {
        lease: u8,
    },
    KeepAlive {
        lease: u8,
    },
    Advance {
        ms: u16,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..4u8, any::<u8>(), proptest::option::of(0..3u8))
            .prop_map(|(key, value, lease)| Op::Put { key, value, lease }),
        2 => (0..4u8).prop_map(|key| Op::Delete { key }),
        1 => Just(Op::DeleteAll),
        2 => (0..4u8, any::<u8>(), any::<bool>())
            .prop_map(|(key, value, stale)| Op::CasPut { key, value, stale }),
        2 => (proptest::option::of(0..4u8), 0..6u8).prop_map(|(key, back)| Op::Get { key, back }),
        1 => (1..4u8).prop_map(|ttl_secs| Op::Grant { ttl_secs }),
        1 => (0..3u8).prop_map(|lease| Op::Revoke { lease }),
        1 => (0..3u8).prop_map(|lease| Op::KeepAlive { lease }),
        2 => (0..2500u16).prop_map(|ms| Op::Advance { ms }),
    ]
}

#[derive(Clone, Debug, PartialEq)]
struct ModelKv {
    value: Vec<u8>,
    create: i64,
    modified: i64,
    version: i64,
    lease: i64,
}

/// A key and its new (value, lease), or `None` for a delete.
type ModelWrite = (Vec<u8>, Option<(Vec<u8>, i64)>);

#[derive(Default)]
struct Model {
    /// `states[r]`: the key space at revision r (index 0 unused).
    states: Vec<BTreeMap<Vec<u8>, ModelKv>>,
    /// Lease id → (ttl ms, deadline ms), in grant order.
    leases: BTreeMap<i64, (u64, u64)>,
    next_lease: i64,
}

impl Model {
    fn new() -> Self {
        Self {
            states: vec![BTreeMap::new(), BTreeMap::new()],
            next_lease: 1,
            ..Self::default()
        }
    }
    fn revision(&self) -> i64 {
        self.states.len() as i64 - 1
    }
    fn current(&self) -> &BTreeMap<Vec<u8>, ModelKv> {
        self.states.last().unwrap()
    }
    /// Applies puts (Some) and deletes (None) as one revision if anything changes.
    fn write(&mut self, writes: Vec<ModelWrite>) {
        let next = self.revision() + 1;
        let mut state = self.current().clone();
        let mut changed = false;
        for (key, write) in writes {
            match write {
                Some((value, lease)) => {
                    let (create, version) = match state.get(&key) {
                        Some(old) => (old.create, old.version + 1),
                        None => (next, 1),
                    };
                    state.insert(
                        key,
                        ModelKv {
                            value,
                            create,
                            modified: next,
                            version,
                            lease,
                        },
                    );
                    changed = true;
                }
                None => changed |= state.remove(&key).is_some(),
            }
        }
        if changed {
            self.states.push(state);
        }
    }
    fn expire(&mut self, now: u64) {
        let mut due: Vec<(u64, i64)> = self
            .leases
            .iter()
            .filter(|(_, (_, deadline))| *deadline <= now)
            .map(|(id, (_, deadline))| (*deadline, *id))
            .collect();
        due.sort();
        for (_, id) in due {
            self.revoke(id);
        }
    }
    fn revoke(&mut self, id: i64) {
        self.leases.remove(&id);
        let doomed: Vec<_> = self
            .current()
            .iter()
            .filter(|(_, kv)| kv.lease == id)
            .map(|(key, _)| (key.clone(), None))
            .collect();
        self.write(doomed);
    }
}

fn key_name(key: u8) -> Vec<u8> {
    format!("k{key}").into_bytes()
}

fn as_model(kv: &KeyValue) -> (Vec<u8>, ModelKv) {
    (
        kv.key.clone(),
        ModelKv {
            value: kv.value.clone(),
            create: kv.create_revision,
            modified: kv.mod_revision,
            version: kv.version,
            lease: kv.lease,
        },
    )
}

fn run(ops: Vec<Op>) {
    let mut core = MetaCore::new();
    let mut model = Model::new();
    let mut now = 0u64;
    let watcher = core.watch(KeyRange::prefix("k"), 0).unwrap();
    for op in ops {
        let live: Vec<i64> = model.leases.keys().copied().collect();
        match op {
            Op::Put { key, value, lease } => {
                let lease = lease
                    .and_then(|index| live.get(index as usize).copied())
                    .unwrap_or(0);
                let txn =
                    Txn::new().and_then(vec![TxnOp::put_with_lease(key_name(key), [value], lease)]);
                let response = core.txn(&txn).unwrap();
                model.write(vec![(key_name(key), Some((vec![value], lease)))]);
                assert_eq!(response.revision, model.revision());
            }
            Op::Delete { key } => {
                let response = core
                    .txn(&Txn::new().and_then(vec![TxnOp::delete(key_name(key))]))
                    .unwrap();
                model.write(vec![(key_name(key), None)]);
                assert_eq!(response.revision, model.revision());
            }
            Op::DeleteAll => {
                let txn = Txn::new().and_then(vec![TxnOp::Delete(KeyRange::prefix("k"))]);
                core.txn(&txn).unwrap();
                let all = model
                    .current()
                    .keys()
                    .map(|key| (key.clone(), None))
                    .collect();
                model.write(all);
            }
            Op::CasPut { key, value, stale } => {
                let seen = model
                    .current()
                    .get(&key_name(key))
                    .map_or(0, |kv| kv.modified);
                let expected = if stale { seen + 1 } else { seen };
                let txn = Txn::new()
                    .when(vec![Compare::mod_revision(
                        key_name(key),
                        CompareOp::Equal,
                        expected,
                    )])
                    .and_then(vec![TxnOp::put(key_name(key), [value])]);
                let response = core.txn(&txn).unwrap();
                assert_eq!(response.succeeded, !stale);
                if !stale {
                    model.write(vec![(key_name(key), Some((vec![value], 0)))]);
                }
                assert_eq!(response.revision, model.revision());
            }
            Op::Get { key, back } => {
                let revision = (model.revision() - i64::from(back)).max(1);
                let request = match key {
                    Some(key) => GetRequest::key(key_name(key)),
                    None => GetRequest::prefix("k"),
                }
                .at_revision(revision);
                let response = core.get(&request).unwrap();
                let expected: BTreeMap<_, _> = model.states[revision as usize]
                    .iter()
                    .filter(|(k, _)| request.range.contains(k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let actual: BTreeMap<_, _> = response.kvs.iter().map(as_model).collect();
                assert_eq!(actual, expected);
                assert_eq!(response.revision, model.revision());
            }
            Op::Grant { ttl_secs } => {
                let lease = core.lease_grant(i64::from(ttl_secs), now).unwrap();
                assert_eq!(lease.id, model.next_lease);
                model.next_lease += 1;
                let ttl_ms = u64::from(ttl_secs) * 1000;
                model.leases.insert(lease.id, (ttl_ms, now + ttl_ms));
            }
            Op::Revoke { lease } => match live.get(lease as usize) {
                Some(&id) => {
                    core.lease_revoke(id).unwrap();
                    model.revoke(id);
                }
                None => assert!(core.lease_revoke(99).is_err()),
            },
            Op::KeepAlive { lease } => {
                if let Some(&id) = live.get(lease as usize) {
                    core.lease_keep_alive(id, now).unwrap();
                    let entry = model.leases.get_mut(&id).unwrap();
                    entry.1 = now + entry.0;
                }
            }
            Op::Advance { ms } => {
                now += u64::from(ms);
                core.expire_leases(now);
                model.expire(now);
            }
        }
        core.assert_invariants();
        assert_eq!(core.revision(), model.revision());
        let actual: BTreeMap<_, _> = core
            .get(&GetRequest::prefix("k"))
            .unwrap()
            .kvs
            .iter()
            .map(as_model)
            .collect();
        assert_eq!(&actual, model.current());
    }
    // The watcher saw exactly the model's transitions, one batch per revision.
    let mut seen = Vec::new();
    while let Some(batch) = core.watch_poll(watcher).unwrap() {
        seen.push(batch);
    }
    let mut expected_revisions = Vec::new();
    for revision in 2..=model.revision() {
        let (before, after) = (
            &model.states[revision as usize - 1],
            &model.states[revision as usize],
        );
        let mut changes: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
        for key in before.keys().chain(after.keys()) {
            let (old, new) = (before.get(key), after.get(key));
            let touched =
                new.is_some_and(|kv| kv.modified == revision) || (old.is_some() && new.is_none());
            if touched && !changes.iter().any(|(k, _)| k == key) {
                changes.push((key.clone(), new.map(|kv| kv.value.clone())));
            }
        }
        changes.sort();
        expected_revisions.push((revision, changes));
    }
    let actual_revisions: Vec<_> = seen
        .iter()
        .map(|batch| {
            let mut changes: Vec<_> = batch
                .events
                .iter()
                .map(|event| {
                    let value = (event.kind == EventKind::Put).then(|| event.kv.value.clone());
                    (event.kv.key.clone(), value)
                })
                .collect();
            changes.sort();
            (batch.revision, changes)
        })
        .collect();
    assert_eq!(actual_revisions, expected_revisions);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn core_matches_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        run(ops);
    }
}
