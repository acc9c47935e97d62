//! One revision being built: the writes of a Txn (or of a lease revocation, or of a replayed
//! journal record) held in an overlay over the committed map, so later ops of the same Txn see
//! earlier ones, and nothing is committed until every check has passed.

use std::collections::BTreeMap;

use super::{kv_bytes, MetaCore};
use crate::types::{Event, EventKind, KeyRange, KeyValue, LeaseId};

pub(super) struct Staging {
    revision: i64,
    /// Key → its state after the ops so far (`None`: deleted).
    overlay: BTreeMap<Vec<u8>, Option<KeyValue>>,
    events: Vec<Event>,
}

impl Staging {
    pub(super) fn new(revision: i64) -> Self {
        Self {
            revision,
            overlay: BTreeMap::new(),
            events: Vec::new(),
        }
    }

    fn current(&self, core: &MetaCore, key: &[u8]) -> Option<KeyValue> {
        match self.overlay.get(key) {
            Some(staged) => staged.clone(),
            None => core.kvs.get(key).cloned(),
        }
    }

    /// Puts a key at this revision; returns its previous state.
    pub(super) fn put(
        &mut self,
        core: &MetaCore,
        key: &[u8],
        value: &[u8],
        lease: LeaseId,
    ) -> Option<KeyValue> {
        let prev = self.current(core, key);
        let kv = KeyValue {
            key: key.to_vec(),
            value: value.to_vec(),
            // etcd: a re-created key starts again at version 1 with a new create revision.
            create_revision: prev
                .as_ref()
                .map_or(self.revision, |prev| prev.create_revision),
            mod_revision: self.revision,
            version: prev.as_ref().map_or(1, |prev| prev.version + 1),
            lease,
        };
        self.overlay.insert(key.to_vec(), Some(kv.clone()));
        self.events.push(Event {
            kind: EventKind::Put,
            kv,
            prev_kv: prev.clone(),
        });
        prev
    }

    /// Deletes every existing key of the range at this revision; returns them as they were.
    /// Deleting nothing records nothing (and so creates no revision).
    pub(super) fn delete(&mut self, core: &MetaCore, range: &KeyRange) -> Vec<KeyValue> {
        let deleted = self.read(core, range);
        for prev in &deleted {
            self.overlay.insert(prev.key.clone(), None);
            let tombstone = KeyValue {
                key: prev.key.clone(),
                mod_revision: self.revision,
                ..KeyValue::default()
            };
            self.events.push(Event {
                kind: EventKind::Delete,
                kv: tombstone,
                prev_kv: Some(prev.clone()),
            });
        }
        deleted
    }

    /// The range as this Txn sees it, in key order.
    pub(super) fn read(&self, core: &MetaCore, range: &KeyRange) -> Vec<KeyValue> {
        let mut view: BTreeMap<Vec<u8>, KeyValue> = core
            .range(range)
            .map(|kv| (kv.key.clone(), kv.clone()))
            .collect();
        for (key, staged) in &self.overlay {
            if !range.contains(key) {
                continue;
            }
            match staged {
                Some(kv) => view.insert(key.clone(), kv.clone()),
                None => view.remove(key),
            };
        }
        view.into_values().collect()
    }

    /// Keys and bytes this revision adds to the store (0 when it shrinks it).
    pub(super) fn growth(&self, core: &MetaCore) -> (usize, usize) {
        let (mut keys, mut bytes) = (0isize, 0isize);
        for (key, staged) in &self.overlay {
            let before = core.kvs.get(key);
            keys += isize::from(staged.is_some()) - isize::from(before.is_some());
            bytes += staged.as_ref().map_or(0, kv_bytes) as isize;
            bytes -= before.map_or(0, kv_bytes) as isize;
        }
        // A shrinking revision grows nothing: a negative sum reads as 0.
        (
            usize::try_from(keys).unwrap_or(0),
            usize::try_from(bytes).unwrap_or(0),
        )
    }

    pub(super) fn finish(self) -> (i64, Vec<Event>) {
        (self.revision, self.events)
    }
}
