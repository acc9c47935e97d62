//! The pure metadata store: an ordered map key → (value, create_revision, mod_revision, version,
//! lease), a revision counter, a bounded history of revisions for watches and reads at a past
//! revision, leases that expire at a time passed in, and watchers with bounded queues.
//!
//! It owns etcd's semantics and nothing else: no tokio, no files, no clock reads. Time comes in
//! as milliseconds on a monotonic clock chosen by the caller; persistence reads the [`Change`]s
//! that every mutation records ([`MetaCore::take_changes`]) and replays them on recovery
//! ([`MetaCore::replay`]). The embedded store ([`crate::LocalStore`]) drives it from tokio; a
//! simulation can drive it with a fake clock.

mod staging;
mod watch;

#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::error::{Error, Result};
use crate::limits;
use crate::types::{
    validate_ttl, Compare, CompareTarget, Event, EventKind, GetRequest, GetResponse, KeyRange,
    KeyValue, Lease, LeaseId, LeaseStatus, Txn, TxnOp, TxnOpResponse, TxnResponse, NO_LEASE,
};
use staging::Staging;
pub use watch::WatchId;
use watch::Watcher;

/// The revision of an empty store, as in etcd (its first write is revision 2).
pub const INITIAL_REVISION: i64 = 1;

/// Why a snapshot or a recorded change does not follow from the store's state during recovery
/// (the caller reports the file as corrupt).
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A snapshot's revision below the first one a store has.
    #[error("revision {0} below {INITIAL_REVISION}")]
    RevisionBelowInitial(i64),
    /// A snapshot's lease id that is no lease's, or that another lease already has.
    #[error("bad or duplicate lease id {0}")]
    BadLeaseId(i64),
    /// A snapshot's next lease id that one of its leases already has.
    #[error("next lease id {0} already used")]
    NextLeaseIdUsed(i64),
    /// A snapshot's key whose revisions contradict each other or the snapshot's.
    #[error("key {key:?} has inconsistent revisions")]
    InconsistentRevisions {
        /// The key.
        key: Vec<u8>,
    },
    /// A snapshot's key attached to a lease the snapshot does not hold.
    #[error("key {key:?} on unknown lease {lease}")]
    KeyOnUnknownLease {
        /// The key.
        key: Vec<u8>,
        /// Its lease id.
        lease: i64,
    },
    /// A snapshot holding one key twice.
    #[error("duplicate key")]
    DuplicateKey,
    /// A revision that does not follow the current one, or has no writes.
    #[error("revision {revision} after {current}")]
    RevisionOutOfOrder {
        /// The change's revision.
        revision: i64,
        /// The store's revision.
        current: i64,
    },
    /// A put attached to a lease the store does not hold.
    #[error("put on unknown lease {0}")]
    PutOnUnknownLease(i64),
    /// A delete of a key the store does not hold.
    #[error("delete of absent key {0:?}")]
    DeleteOfAbsentKey(Vec<u8>),
    /// A lease grant below the next lease id, or with a TTL out of bounds.
    #[error("lease grant {0:?} out of order")]
    LeaseGrantOutOfOrder(Lease),
    /// A revoke of a lease the store does not hold, or that still has keys.
    #[error("revoke of unknown or non-empty lease {0}")]
    BadLeaseRevoke(i64),
    /// A change the store itself refuses (a lease TTL or a compaction out of bounds).
    #[error(transparent)]
    Refused(#[from] Error),
}

/// Fixed cost counted per stored key or history event, for the byte quotas.
const ENTRY_OVERHEAD_BYTES: usize = 48;

/// One resolved write, as the journal records it. Replaying the writes of a revision in order
/// recomputes versions and create revisions exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    /// Put `value` at `key`, attached to `lease` (or none).
    Put {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
        /// The lease, or [`NO_LEASE`].
        lease: LeaseId,
    },
    /// Delete `key` (which existed).
    Delete {
        /// The key.
        key: Vec<u8>,
    },
}

/// A mutation of the store, in the order it happened: what persistence must write (and
/// replay) to rebuild the same state. Keep-alives are not changes: lease deadlines restart in
/// full on recovery, as etcd's do after a leader change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// A new revision with its writes (a Txn, or the key deletions of a revoked lease).
    Revision {
        /// The new revision (the previous one + 1).
        revision: i64,
        /// Its writes, in order.
        writes: Vec<Write>,
    },
    /// A lease was granted.
    LeaseGrant(Lease),
    /// A lease ended (revoked or expired); its keys were deleted by the revision just before.
    LeaseRevoke(LeaseId),
    /// History before this revision was dropped.
    Compact(i64),
}

/// The durable state of a store at one revision: enough to rebuild it (history excepted).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The revision the state is at.
    pub revision: i64,
    /// The next lease id to hand out.
    pub next_lease_id: LeaseId,
    /// Live leases.
    pub leases: Vec<Lease>,
    /// Live keys, in key order.
    pub kvs: Vec<KeyValue>,
}

/// One revision of history: the events a Txn or a lease expiry made.
#[derive(Debug)]
struct RevisionRecord {
    revision: i64,
    events: Vec<Event>,
    bytes: usize,
}

#[derive(Debug)]
struct LeaseState {
    ttl_secs: i64,
    deadline_ms: u64,
    keys: BTreeSet<Vec<u8>>,
}

/// The pure store. See the module docs.
#[derive(Debug)]
pub struct MetaCore {
    kvs: BTreeMap<Vec<u8>, KeyValue>,
    store_bytes: usize,
    revision: i64,
    /// The oldest revision a watch may start from; reads below it are refused too. Every
    /// revision from here to `revision` that has events is in `history`.
    compact_revision: i64,
    history: VecDeque<RevisionRecord>,
    history_bytes: usize,
    leases: BTreeMap<LeaseId, LeaseState>,
    next_lease_id: LeaseId,
    watchers: BTreeMap<WatchId, Watcher>,
    next_watch_id: WatchId,
    changes: Vec<Change>,
}

impl Default for MetaCore {
    fn default() -> Self {
        Self::new()
    }
}

impl MetaCore {
    /// An empty store at [`INITIAL_REVISION`].
    pub fn new() -> Self {
        Self {
            kvs: BTreeMap::new(),
            store_bytes: 0,
            revision: INITIAL_REVISION,
            compact_revision: INITIAL_REVISION,
            history: VecDeque::new(),
            history_bytes: 0,
            leases: BTreeMap::new(),
            next_lease_id: 1,
            watchers: BTreeMap::new(),
            next_watch_id: 1,
            changes: Vec::new(),
        }
    }

    /// The store's current revision.
    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// The oldest revision a watch can start from.
    pub fn compact_revision(&self) -> i64 {
        self.compact_revision
    }

    /// Live key count.
    pub fn key_count(&self) -> usize {
        self.kvs.len()
    }

    /// The changes made since the last call, for persistence, oldest first.
    pub fn take_changes(&mut self) -> Vec<Change> {
        std::mem::take(&mut self.changes)
    }

    // ----- reads -----

    /// Reads a key or prefix at the latest or at a past revision.
    pub fn get(&self, request: &GetRequest) -> Result<GetResponse> {
        request.validate()?;
        let at = request.revision;
        let mut kvs: BTreeMap<Vec<u8>, KeyValue> = self
            .range(&request.range)
            .map(|kv| (kv.key.clone(), kv.clone()))
            .collect();
        if at != 0 && at != self.revision {
            self.check_readable(at)?;
            // Undo, newest first, every event after `at` that touched the range.
            for record in self
                .history
                .iter()
                .rev()
                .take_while(|record| record.revision > at)
            {
                for event in record.events.iter().rev() {
                    if !request.range.contains(&event.kv.key) {
                        continue;
                    }
                    match &event.prev_kv {
                        Some(prev) => kvs.insert(prev.key.clone(), prev.clone()),
                        None => kvs.remove(&event.kv.key),
                    };
                }
            }
        }
        let count = kvs.len();
        let mut kvs: Vec<KeyValue> = kvs.into_values().collect();
        let more = request.limit > 0 && count > request.limit;
        if more {
            kvs.truncate(request.limit);
        }
        Ok(GetResponse {
            revision: self.revision,
            kvs,
            count,
            more,
        })
    }

    fn check_readable(&self, at: i64) -> Result<()> {
        if at > self.revision {
            return Err(Error::FutureRevision {
                requested_revision: at,
                current_revision: self.revision,
            });
        }
        if at < self.compact_revision {
            return Err(Error::Compacted {
                requested_revision: at,
                compact_revision: Some(self.compact_revision),
            });
        }
        Ok(())
    }

    fn range<'a>(&'a self, range: &'a KeyRange) -> impl Iterator<Item = &'a KeyValue> + 'a {
        let start = range.start().to_vec();
        self.kvs
            .range(start..)
            .take_while(move |(key, _)| match range {
                KeyRange::Key(own) => key.as_slice() == own.as_slice(),
                KeyRange::Prefix(prefix) => key.starts_with(prefix),
            })
            .map(|(_, kv)| kv)
    }

    // ----- transactions -----

    /// Runs a Txn: evaluates the compares against the current state, runs the matching branch,
    /// and gives its writes one new revision (none if it changed nothing).
    pub fn txn(&mut self, txn: &Txn) -> Result<TxnResponse> {
        txn.validate()?;
        let succeeded = txn
            .compares
            .iter()
            .all(|compare| self.compare_holds(compare));
        let branch = if succeeded {
            &txn.success
        } else {
            &txn.failure
        };
        self.check_leases(branch)?;
        let mut staging = Staging::new(self.revision + 1);
        let mut responses = Vec::with_capacity(branch.len());
        for op in branch {
            let response = match op {
                TxnOp::Put { key, value, lease } => TxnOpResponse::Put {
                    prev_kv: staging.put(self, key, value, *lease),
                },
                TxnOp::Delete(range) => TxnOpResponse::Delete {
                    prev_kvs: staging.delete(self, range),
                },
                TxnOp::Get(range) => TxnOpResponse::Get {
                    kvs: staging.read(self, range),
                },
            };
            responses.push(response);
        }
        self.check_quota(&staging)?;
        let revision = self.commit(staging);
        Ok(TxnResponse {
            succeeded,
            revision,
            responses,
        })
    }

    /// Every lease a put names must exist, and keep at most [`limits::LEASE_KEYS_MAX`] keys.
    fn check_leases(&self, branch: &[TxnOp]) -> Result<()> {
        let mut added: BTreeMap<LeaseId, usize> = BTreeMap::new();
        for op in branch {
            if let TxnOp::Put { key, lease, .. } = op {
                if *lease == NO_LEASE {
                    continue;
                }
                let state = self
                    .leases
                    .get(lease)
                    .ok_or(Error::LeaseNotFound { lease: *lease })?;
                let count = added.entry(*lease).or_insert(state.keys.len());
                *count += usize::from(!state.keys.contains(key));
                if *count > limits::LEASE_KEYS_MAX {
                    return Err(Error::QuotaExceeded {
                        what: "keys on one lease",
                        max: limits::LEASE_KEYS_MAX,
                    });
                }
            }
        }
        Ok(())
    }

    fn compare_holds(&self, compare: &Compare) -> bool {
        let current = self.kvs.get(&compare.key);
        let ordering = match (&compare.target, current) {
            // etcd: a value compare on a missing key always fails, whatever the operator.
            (CompareTarget::Value(_), None) => return false,
            (CompareTarget::Value(value), Some(kv)) => kv.value.as_slice().cmp(value.as_slice()),
            (target, current) => {
                let zero = KeyValue::default();
                let kv = current.unwrap_or(&zero);
                let (field, wanted) = match target {
                    CompareTarget::CreateRevision(wanted) => (kv.create_revision, *wanted),
                    CompareTarget::ModRevision(wanted) => (kv.mod_revision, *wanted),
                    CompareTarget::Version(wanted) => (kv.version, *wanted),
                    CompareTarget::Lease(wanted) => (kv.lease, *wanted),
                    CompareTarget::Value(_) => unreachable!("handled above"),
                };
                field.cmp(&wanted)
            }
        };
        compare.op.holds(ordering)
    }

    fn check_quota(&self, staging: &Staging) -> Result<()> {
        let (keys_added, bytes_added) = staging.growth(self);
        if keys_added > 0 && self.kvs.len() + keys_added > limits::KEYS_MAX {
            return Err(Error::QuotaExceeded {
                what: "keys",
                max: limits::KEYS_MAX,
            });
        }
        if bytes_added > 0 && self.store_bytes + bytes_added > limits::STORE_BYTES_MAX {
            return Err(Error::QuotaExceeded {
                what: "store bytes",
                max: limits::STORE_BYTES_MAX,
            });
        }
        Ok(())
    }

    /// Applies a staged revision: the map, lease key sets, history, watchers and the change log.
    /// Returns the header revision (unchanged when nothing was written).
    fn commit(&mut self, staging: Staging) -> i64 {
        let (revision, events) = staging.finish();
        if events.is_empty() {
            return self.revision;
        }
        debug_assert_eq!(revision, self.revision + 1);
        let mut writes = Vec::with_capacity(events.len());
        let mut record_bytes = 0;
        for event in &events {
            record_bytes += event_bytes(event);
            let key = &event.kv.key;
            let previous = match event.kind {
                EventKind::Put => {
                    writes.push(Write::Put {
                        key: key.clone(),
                        value: event.kv.value.clone(),
                        lease: event.kv.lease,
                    });
                    self.store_bytes += kv_bytes(&event.kv);
                    if event.kv.lease != NO_LEASE {
                        let lease = self.leases.get_mut(&event.kv.lease);
                        debug_assert!(lease.is_some(), "put on a lease checked to exist");
                        if let Some(lease) = lease {
                            lease.keys.insert(key.clone());
                        }
                    }
                    self.kvs.insert(key.clone(), event.kv.clone())
                }
                EventKind::Delete => {
                    writes.push(Write::Delete { key: key.clone() });
                    self.kvs.remove(key)
                }
            };
            debug_assert_eq!(previous.as_ref(), event.prev_kv.as_ref());
            if let Some(previous) = previous {
                self.store_bytes -= kv_bytes(&previous);
                let moved = event.kind == EventKind::Delete || previous.lease != event.kv.lease;
                if previous.lease != NO_LEASE && moved {
                    if let Some(lease) = self.leases.get_mut(&previous.lease) {
                        lease.keys.remove(key);
                    }
                }
            }
        }
        self.revision = revision;
        self.changes.push(Change::Revision { revision, writes });
        self.notify_watchers(revision, &events);
        self.history.push_back(RevisionRecord {
            revision,
            events,
            bytes: record_bytes,
        });
        self.history_bytes += record_bytes;
        self.trim_history();
        revision
    }

    fn trim_history(&mut self) {
        while self.history.len() > 1
            && (self.history.len() > limits::HISTORY_REVISIONS_MAX
                || self.history_bytes > limits::HISTORY_BYTES_MAX)
        {
            if let Some(oldest) = self.history.pop_front() {
                self.history_bytes -= oldest.bytes;
                self.compact_revision = oldest.revision + 1;
            }
        }
    }

    /// Drops history before `revision`, as etcd's Compact: reads below it and watches starting
    /// below it are refused with [`Error::Compacted`] afterwards.
    pub fn compact(&mut self, revision: i64) -> Result<()> {
        if revision > self.revision {
            return Err(Error::FutureRevision {
                requested_revision: revision,
                current_revision: self.revision,
            });
        }
        if revision <= self.compact_revision {
            return Err(Error::Compacted {
                requested_revision: revision,
                compact_revision: Some(self.compact_revision),
            });
        }
        while self
            .history
            .front()
            .is_some_and(|record| record.revision < revision)
        {
            if let Some(oldest) = self.history.pop_front() {
                self.history_bytes -= oldest.bytes;
            }
        }
        self.compact_revision = revision;
        self.changes.push(Change::Compact(revision));
        Ok(())
    }

    // ----- leases -----

    /// Grants a lease of `ttl_secs`, expiring at `now_ms` + TTL unless kept alive.
    pub fn lease_grant(&mut self, ttl_secs: i64, now_ms: u64) -> Result<Lease> {
        validate_ttl(ttl_secs)?;
        if self.leases.len() >= limits::LEASES_MAX {
            return Err(Error::QuotaExceeded {
                what: "leases",
                max: limits::LEASES_MAX,
            });
        }
        let lease = Lease {
            id: self.next_lease_id,
            ttl_secs,
        };
        self.insert_lease(lease, now_ms);
        self.changes.push(Change::LeaseGrant(lease));
        Ok(lease)
    }

    fn insert_lease(&mut self, lease: Lease, now_ms: u64) {
        let state = LeaseState {
            ttl_secs: lease.ttl_secs,
            deadline_ms: deadline(now_ms, lease.ttl_secs),
            keys: BTreeSet::new(),
        };
        let replaced = self.leases.insert(lease.id, state);
        debug_assert!(replaced.is_none(), "lease ids are never reused");
        self.next_lease_id = self.next_lease_id.max(lease.id + 1);
    }

    /// Renews a lease: it now expires at `now_ms` + its TTL. Returns the TTL in seconds. A lease
    /// already past its deadline is not renewed, even if [`MetaCore::expire_leases`] has not
    /// run yet: it is as good as gone.
    pub fn lease_keep_alive(&mut self, id: LeaseId, now_ms: u64) -> Result<i64> {
        let lease = self
            .leases
            .get_mut(&id)
            .filter(|lease| lease.deadline_ms > now_ms)
            .ok_or(Error::LeaseNotFound { lease: id })?;
        lease.deadline_ms = deadline(now_ms, lease.ttl_secs);
        Ok(lease.ttl_secs)
    }

    /// A lease's TTL and remaining time at `now_ms`.
    pub fn lease_status(&self, id: LeaseId, now_ms: u64) -> Result<LeaseStatus> {
        let lease = self
            .leases
            .get(&id)
            .ok_or(Error::LeaseNotFound { lease: id })?;
        let remaining_ms = lease.deadline_ms.saturating_sub(now_ms);
        Ok(LeaseStatus {
            id,
            granted_ttl_secs: lease.ttl_secs,
            remaining_ttl_secs: i64::try_from(remaining_ms.div_ceil(1000)).unwrap_or(i64::MAX),
        })
    }

    /// Ends a lease and deletes its keys in one new revision (none if it had no keys).
    /// Returns the header revision.
    pub fn lease_revoke(&mut self, id: LeaseId) -> Result<i64> {
        let keys = match self.leases.get(&id) {
            Some(lease) => lease.keys.clone(),
            None => return Err(Error::LeaseNotFound { lease: id }),
        };
        let mut staging = Staging::new(self.revision + 1);
        for key in keys {
            staging.delete(self, &KeyRange::Key(key));
        }
        let revision = self.commit(staging);
        let removed = self.leases.remove(&id);
        debug_assert!(removed.is_some_and(|lease| lease.keys.is_empty()));
        self.changes.push(Change::LeaseRevoke(id));
        Ok(revision)
    }

    /// Revokes every lease whose deadline is at or before `now_ms`, oldest deadline first, each
    /// in its own revision (as etcd's lessor does). Returns the revoked ids.
    pub fn expire_leases(&mut self, now_ms: u64) -> Vec<LeaseId> {
        let mut expired: Vec<(u64, LeaseId)> = self
            .leases
            .iter()
            .filter(|(_, lease)| lease.deadline_ms <= now_ms)
            .map(|(id, lease)| (lease.deadline_ms, *id))
            .collect();
        expired.sort_unstable();
        for (_, id) in &expired {
            let revoked = self.lease_revoke(*id);
            debug_assert!(revoked.is_ok(), "an expired lease exists");
        }
        expired.into_iter().map(|(_, id)| id).collect()
    }

    /// The earliest lease deadline, for a driver's timer.
    pub fn next_lease_deadline_ms(&self) -> Option<u64> {
        self.leases.values().map(|lease| lease.deadline_ms).min()
    }

    // ----- persistence -----

    /// The durable state (the history is not part of it).
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            revision: self.revision,
            next_lease_id: self.next_lease_id,
            leases: self
                .leases
                .iter()
                .map(|(id, lease)| Lease {
                    id: *id,
                    ttl_secs: lease.ttl_secs,
                })
                .collect(),
            kvs: self.kvs.values().cloned().collect(),
        }
    }

    /// Rebuilds a store from a snapshot; leases restart their full TTL at `now_ms`. The history
    /// starts empty, so the oldest watchable revision is the snapshot's + 1. Refuses a snapshot
    /// that contradicts itself (the caller reports it as corrupt).
    pub fn from_snapshot(snapshot: Snapshot, now_ms: u64) -> Result<Self, ReplayError> {
        let mut core = MetaCore::new();
        if snapshot.revision < INITIAL_REVISION {
            return Err(ReplayError::RevisionBelowInitial(snapshot.revision));
        }
        core.revision = snapshot.revision;
        core.compact_revision = snapshot.revision + 1;
        for lease in snapshot.leases {
            if lease.id <= NO_LEASE || core.leases.contains_key(&lease.id) {
                return Err(ReplayError::BadLeaseId(lease.id));
            }
            validate_ttl(lease.ttl_secs)?;
            core.insert_lease(lease, now_ms);
        }
        if snapshot.next_lease_id < core.next_lease_id {
            return Err(ReplayError::NextLeaseIdUsed(snapshot.next_lease_id));
        }
        core.next_lease_id = snapshot.next_lease_id;
        for kv in snapshot.kvs {
            let consistent = kv.version >= 1
                && kv.create_revision >= 1
                && kv.create_revision <= kv.mod_revision
                && kv.mod_revision <= snapshot.revision;
            if !consistent {
                return Err(ReplayError::InconsistentRevisions { key: kv.key });
            }
            if kv.lease != NO_LEASE {
                let lease = core.leases.get_mut(&kv.lease).ok_or_else(|| {
                    ReplayError::KeyOnUnknownLease {
                        key: kv.key.clone(),
                        lease: kv.lease,
                    }
                })?;
                lease.keys.insert(kv.key.clone());
            }
            core.store_bytes += kv_bytes(&kv);
            if core.kvs.insert(kv.key.clone(), kv).is_some() {
                return Err(ReplayError::DuplicateKey);
            }
        }
        Ok(core)
    }

    /// Re-applies one recorded change during recovery. Refuses a change that does not follow
    /// from the current state (the caller reports the journal as corrupt).
    pub fn replay(&mut self, change: &Change, now_ms: u64) -> Result<(), ReplayError> {
        match change {
            Change::Revision { revision, writes } => {
                if *revision != self.revision + 1 || writes.is_empty() {
                    return Err(ReplayError::RevisionOutOfOrder {
                        revision: *revision,
                        current: self.revision,
                    });
                }
                let mut staging = Staging::new(*revision);
                for write in writes {
                    match write {
                        Write::Put { key, value, lease } => {
                            if *lease != NO_LEASE && !self.leases.contains_key(lease) {
                                return Err(ReplayError::PutOnUnknownLease(*lease));
                            }
                            staging.put(self, key, value, *lease);
                        }
                        Write::Delete { key } => {
                            if staging.delete(self, &KeyRange::Key(key.clone())).is_empty() {
                                return Err(ReplayError::DeleteOfAbsentKey(key.clone()));
                            }
                        }
                    }
                }
                self.commit(staging);
            }
            Change::LeaseGrant(lease) => {
                if lease.id < self.next_lease_id || validate_ttl(lease.ttl_secs).is_err() {
                    return Err(ReplayError::LeaseGrantOutOfOrder(*lease));
                }
                self.insert_lease(*lease, now_ms);
            }
            Change::LeaseRevoke(id) => match self.leases.get(id) {
                Some(lease) if lease.keys.is_empty() => {
                    self.leases.remove(id);
                }
                _ => return Err(ReplayError::BadLeaseRevoke(*id)),
            },
            Change::Compact(revision) => self.compact(*revision)?,
        }
        self.changes.clear();
        Ok(())
    }

    /// Checks every internal invariant; tests call it after each step.
    #[cfg(test)]
    pub(crate) fn assert_invariants(&self) {
        let bytes: usize = self.kvs.values().map(kv_bytes).sum();
        assert_eq!(bytes, self.store_bytes);
        for (key, kv) in &self.kvs {
            assert_eq!(key, &kv.key);
            assert!(kv.mod_revision <= self.revision && kv.create_revision <= kv.mod_revision);
            if kv.lease != NO_LEASE {
                assert!(self.leases[&kv.lease].keys.contains(key));
            }
        }
        for (id, lease) in &self.leases {
            for key in &lease.keys {
                assert_eq!(self.kvs[key].lease, *id);
            }
        }
        let mut expected = self.history.front().map(|record| record.revision);
        for record in &self.history {
            assert_eq!(Some(record.revision), expected);
            expected = Some(record.revision + 1);
            assert!(record.revision >= self.compact_revision);
        }
        if let Some(last) = self.history.back() {
            assert_eq!(last.revision, self.revision);
        }
        assert!(self.history.len() <= limits::HISTORY_REVISIONS_MAX);
    }
}

fn deadline(now_ms: u64, ttl_secs: i64) -> u64 {
    let ttl_ms = u64::try_from(ttl_secs).unwrap_or(0).saturating_mul(1000);
    now_ms.saturating_add(ttl_ms)
}

fn kv_bytes(kv: &KeyValue) -> usize {
    kv.key.len() + kv.value.len() + ENTRY_OVERHEAD_BYTES
}

fn event_bytes(event: &Event) -> usize {
    kv_bytes(&event.kv) + event.prev_kv.as_ref().map_or(0, |prev| prev.value.len())
}
