//! The cluster image: what one broker (or the controller) knows of the metadata store, built from
//! one GET of the root and kept current by a watch from the GET's revision + 1
//! (docs/design/cluster.md §2a, "How a broker follows the layout").
//!
//! Every key carries the store's revisions because they are the cluster's epochs: a
//! registration's `create_revision` is the broker epoch, the controller key's is the controller
//! epoch, a partition state's `mod_revision` is the partition epoch.
//!
//! Must never: write to the store or decide anything (that is [`crate::controller`] and the
//! broker); it only mirrors.

use std::collections::BTreeMap;

use skiff_meta::{EventKind, GetResponse, KeyValue, LeaseId, WatchBatch};
use skiff_placement::{BundleId, NodeId};

use crate::layout::{Key, Layout};
use crate::records::{
    decode, BrokerRegistration, BrokerState, BundleRecord, ClusterRecord, ControllerRecord,
    LoadRecord, PartitionState, ProducerIdBlockRecord, ReassignRecord, RecordError, TopicRecord,
    TopicState,
};

/// A record with the store's revisions of its key.
#[derive(Debug, Clone, PartialEq)]
pub struct Versioned<T> {
    /// The decoded value.
    pub value: T,
    /// Revision of the key's creation.
    pub create_revision: i64,
    /// Revision of the key's last change.
    pub mod_revision: i64,
    /// The lease the key lives on (0 for none).
    pub lease: LeaseId,
}

impl<T> Versioned<T> {
    fn of(kv: &KeyValue, value: T) -> Self {
        Self {
            value,
            create_revision: kv.create_revision,
            mod_revision: kv.mod_revision,
            lease: kv.lease,
        }
    }
}

/// The metadata of one cluster at one store revision.
#[derive(Debug, Clone)]
pub struct ClusterImage {
    layout: Layout,
    revision: i64,
    cluster: Option<ClusterRecord>,
    brokers: BTreeMap<NodeId, Versioned<BrokerRegistration>>,
    controller: Option<Versioned<ControllerRecord>>,
    topics: BTreeMap<String, Versioned<TopicRecord>>,
    partitions: BTreeMap<String, BTreeMap<i32, Versioned<PartitionState>>>,
    loads: BTreeMap<NodeId, Versioned<LoadRecord>>,
    producer_id_block: Option<Versioned<ProducerIdBlockRecord>>,
    bundles: BTreeMap<BundleId, Versioned<BundleRecord>>,
    reassignments: BTreeMap<(String, i32), Versioned<ReassignRecord>>,
    undecodable: BTreeMap<Key, RecordError>,
}

impl ClusterImage {
    /// An empty image at revision 0, before the first GET.
    pub fn new(layout: Layout) -> Self {
        Self {
            layout,
            revision: 0,
            cluster: None,
            brokers: BTreeMap::new(),
            controller: None,
            topics: BTreeMap::new(),
            partitions: BTreeMap::new(),
            loads: BTreeMap::new(),
            producer_id_block: None,
            bundles: BTreeMap::new(),
            reassignments: BTreeMap::new(),
            undecodable: BTreeMap::new(),
        }
    }

    /// Replaces the whole image with a GET of the root prefix: at start, and after a watch was
    /// cancelled because its revision was compacted. Returns every key that differs from before,
    /// so the owner can react as it would to watch events.
    pub fn reload(&mut self, snapshot: &GetResponse) -> Vec<Key> {
        let before = self.keys();
        let mut fresh = ClusterImage::new(self.layout.clone());
        for kv in &snapshot.kvs {
            fresh.put(kv);
        }
        fresh.revision = snapshot.revision;
        let mut changed: Vec<Key> = before
            .iter()
            .filter(|(key, revision)| fresh.mod_revision_of(key) != Some(**revision))
            .map(|(key, _)| key.clone())
            .collect();
        for (key, revision) in fresh.keys() {
            if before.get(&key) != Some(&revision) && !changed.contains(&key) {
                changed.push(key);
            }
        }
        *self = fresh;
        changed
    }

    /// Applies one watch batch (all the events of one revision, one Txn) and returns the keys it
    /// changed. A batch at or below the image's revision was already applied (a resumed stream
    /// may repeat one) and changes nothing.
    pub fn apply(&mut self, batch: &WatchBatch) -> Vec<Key> {
        if batch.revision <= self.revision {
            return Vec::new();
        }
        let mut changed = Vec::with_capacity(batch.events.len());
        for event in &batch.events {
            let Some(key) = self.layout.parse(&event.kv.key) else {
                continue;
            };
            match event.kind {
                EventKind::Put => {
                    self.put(&event.kv);
                }
                EventKind::Delete => self.remove(&key),
            }
            changed.push(key);
        }
        self.revision = batch.revision;
        changed
    }

    fn put(&mut self, kv: &KeyValue) -> Option<Key> {
        let key = self.layout.parse(&kv.key)?;
        self.undecodable.remove(&key);
        let result = match &key {
            Key::Cluster => decode(&key, &kv.value).map(|v| self.cluster = Some(v)),
            Key::Broker(id) => decode(&key, &kv.value).map(|v| {
                self.brokers.insert(*id, Versioned::of(kv, v));
            }),
            Key::Controller => {
                decode(&key, &kv.value).map(|v| self.controller = Some(Versioned::of(kv, v)))
            }
            Key::Topic(topic) => decode(&key, &kv.value).map(|v| {
                self.topics.insert(topic.clone(), Versioned::of(kv, v));
            }),
            Key::Partition(topic, partition) => decode(&key, &kv.value).map(|v| {
                self.partitions
                    .entry(topic.clone())
                    .or_default()
                    .insert(*partition, Versioned::of(kv, v));
            }),
            Key::Load(id) => decode(&key, &kv.value).map(|v| {
                self.loads.insert(*id, Versioned::of(kv, v));
            }),
            Key::ProducerIdBlock => {
                decode(&key, &kv.value).map(|v| self.producer_id_block = Some(Versioned::of(kv, v)))
            }
            Key::Bundle(bundle) => decode(&key, &kv.value).map(|v| {
                self.bundles.insert(bundle.clone(), Versioned::of(kv, v));
            }),
            Key::Reassign(topic, partition) => decode(&key, &kv.value).map(|v| {
                self.reassignments
                    .insert((topic.clone(), *partition), Versioned::of(kv, v));
            }),
        };
        if let Err(error) = result {
            // An undecodable value means the key is unusable: it is dropped from the image (as
            // if absent) and reported, never half-applied.
            self.remove(&key);
            self.undecodable.insert(key.clone(), error);
        }
        Some(key)
    }

    fn remove(&mut self, key: &Key) {
        self.undecodable.remove(key);
        match key {
            Key::Cluster => self.cluster = None,
            Key::Broker(id) => {
                self.brokers.remove(id);
            }
            Key::Controller => self.controller = None,
            Key::Topic(topic) => {
                self.topics.remove(topic);
            }
            Key::Partition(topic, partition) => {
                if let Some(partitions) = self.partitions.get_mut(topic) {
                    partitions.remove(partition);
                    if partitions.is_empty() {
                        self.partitions.remove(topic);
                    }
                }
            }
            Key::Load(id) => {
                self.loads.remove(id);
            }
            Key::ProducerIdBlock => self.producer_id_block = None,
            Key::Bundle(bundle) => {
                self.bundles.remove(bundle);
            }
            Key::Reassign(topic, partition) => {
                self.reassignments.remove(&(topic.clone(), *partition));
            }
        }
    }

    fn mod_revision_of(&self, key: &Key) -> Option<i64> {
        match key {
            Key::Cluster => self.cluster.as_ref().map(|_| 0),
            Key::Broker(id) => self.brokers.get(id).map(|v| v.mod_revision),
            Key::Controller => self.controller.as_ref().map(|v| v.mod_revision),
            Key::Topic(topic) => self.topics.get(topic).map(|v| v.mod_revision),
            Key::Partition(topic, partition) => {
                self.partition(topic, *partition).map(|v| v.mod_revision)
            }
            Key::Load(id) => self.loads.get(id).map(|v| v.mod_revision),
            Key::ProducerIdBlock => self.producer_id_block.as_ref().map(|v| v.mod_revision),
            Key::Bundle(bundle) => self.bundles.get(bundle).map(|v| v.mod_revision),
            Key::Reassign(topic, partition) => self
                .reassignments
                .get(&(topic.clone(), *partition))
                .map(|v| v.mod_revision),
        }
    }

    fn keys(&self) -> BTreeMap<Key, i64> {
        let mut keys = BTreeMap::new();
        if self.cluster.is_some() {
            keys.insert(Key::Cluster, 0);
        }
        for (id, v) in &self.brokers {
            keys.insert(Key::Broker(*id), v.mod_revision);
        }
        if let Some(v) = &self.controller {
            keys.insert(Key::Controller, v.mod_revision);
        }
        for (topic, v) in &self.topics {
            keys.insert(Key::Topic(topic.clone()), v.mod_revision);
        }
        for (topic, partitions) in &self.partitions {
            for (partition, v) in partitions {
                keys.insert(Key::Partition(topic.clone(), *partition), v.mod_revision);
            }
        }
        for (id, v) in &self.loads {
            keys.insert(Key::Load(*id), v.mod_revision);
        }
        if let Some(v) = &self.producer_id_block {
            keys.insert(Key::ProducerIdBlock, v.mod_revision);
        }
        for (bundle, v) in &self.bundles {
            keys.insert(Key::Bundle(bundle.clone()), v.mod_revision);
        }
        for ((topic, partition), v) in &self.reassignments {
            keys.insert(Key::Reassign(topic.clone(), *partition), v.mod_revision);
        }
        keys
    }

    /// The layout the image reads.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The last store revision applied.
    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// `R/cluster`, once some broker wrote it.
    pub fn cluster(&self) -> Option<&ClusterRecord> {
        self.cluster.as_ref()
    }

    /// Every registered (live) broker, by id.
    pub fn brokers(&self) -> &BTreeMap<NodeId, Versioned<BrokerRegistration>> {
        &self.brokers
    }

    /// A broker's epoch (its registration's `create_revision`) while it is registered.
    pub fn broker_epoch(&self, id: NodeId) -> Option<i64> {
        self.brokers.get(&id).map(|v| v.create_revision)
    }

    /// Whether `id` is registered.
    pub fn is_live(&self, id: NodeId) -> bool {
        self.brokers.contains_key(&id)
    }

    /// Whether `id` is registered and not shutting down: eligible to take leaderships.
    pub fn is_running(&self, id: NodeId) -> bool {
        self.brokers
            .get(&id)
            .is_some_and(|v| v.value.state == BrokerState::Running)
    }

    /// The controller and its epoch (`create_revision` of `R/controller`).
    pub fn controller(&self) -> Option<(NodeId, i64)> {
        self.controller
            .as_ref()
            .map(|v| (v.value.broker_id, v.create_revision))
    }

    /// Every topic record, by name, in any state.
    pub fn topics(&self) -> &BTreeMap<String, Versioned<TopicRecord>> {
        &self.topics
    }

    /// A topic in the `ready` state: the only ones brokers serve.
    pub fn ready_topic(&self, topic: &str) -> Option<&Versioned<TopicRecord>> {
        self.topics
            .get(topic)
            .filter(|v| v.value.state == TopicState::Ready)
    }

    /// The partition states of a topic, by partition.
    pub fn partitions(&self, topic: &str) -> Option<&BTreeMap<i32, Versioned<PartitionState>>> {
        self.partitions.get(topic)
    }

    /// One partition's state.
    pub fn partition(&self, topic: &str, partition: i32) -> Option<&Versioned<PartitionState>> {
        self.partitions.get(topic)?.get(&partition)
    }

    /// Partitions without a live leader (none elected, or the leader's registration gone):
    /// Kafka's OfflinePartitionsCount as the controller sees it in this image.
    pub fn offline_partitions(&self) -> usize {
        self.all_partitions()
            .filter(|(_, _, state)| !self.is_live(state.value.leader))
            .count()
    }

    /// Every partition state, by topic and partition (topics in any state).
    pub fn all_partitions(
        &self,
    ) -> impl Iterator<Item = (&str, i32, &Versioned<PartitionState>)> + '_ {
        self.partitions.iter().flat_map(|(topic, partitions)| {
            partitions
                .iter()
                .map(move |(partition, state)| (topic.as_str(), *partition, state))
        })
    }

    /// The live brokers' load reports.
    pub fn loads(&self) -> &BTreeMap<NodeId, Versioned<LoadRecord>> {
        &self.loads
    }

    /// `R/ids/producer_id_block`, if any block was ever taken.
    pub fn producer_id_block(&self) -> Option<&Versioned<ProducerIdBlockRecord>> {
        self.producer_id_block.as_ref()
    }

    /// Every bundle record (cluster-wide owners and moves), by bundle.
    pub fn bundles(&self) -> &BTreeMap<BundleId, Versioned<BundleRecord>> {
        &self.bundles
    }

    /// Every reassignment in progress, by topic and partition.
    pub fn reassignments(&self) -> &BTreeMap<(String, i32), Versioned<ReassignRecord>> {
        &self.reassignments
    }

    /// The reassignment of one partition, if one is in progress.
    pub fn reassignment(&self, topic: &str, partition: i32) -> Option<&Versioned<ReassignRecord>> {
        self.reassignments.get(&(topic.to_owned(), partition))
    }

    /// Keys whose values did not decode, with why: left out of the image, reported by the owner.
    pub fn undecodable(&self) -> &BTreeMap<Key, RecordError> {
        &self.undecodable
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{encode, Writer};
    use skiff_meta::{Event, GetRequest, MetaCore, Txn, TxnOp};

    fn state(leader: NodeId, epoch: i32) -> PartitionState {
        PartitionState {
            leader,
            leader_epoch: epoch,
            isr: vec![leader],
            replicas: vec![leader],
            writer: Writer::Controller,
        }
    }

    #[test]
    fn an_image_kept_by_watch_equals_a_fresh_get() {
        let layout = Layout::new("t").unwrap();
        let mut core = MetaCore::new();
        let watch = core
            .watch(skiff_meta::KeyRange::prefix(layout.root()), 1)
            .unwrap();
        let mut watched = ClusterImage::new(layout.clone());
        let key = |k: Key| layout.key(&k);
        core.txn(&Txn::new().and_then(vec![
            TxnOp::put(key(Key::Partition("a".into(), 0)), encode(&state(1, 0))),
            TxnOp::put(key(Key::Partition("a".into(), 1)), encode(&state(2, 0))),
            TxnOp::put("/elsewhere", "x"),
        ]))
        .unwrap();
        core.txn(&Txn::new().and_then(vec![TxnOp::put(
            key(Key::Partition("a".into(), 0)),
            encode(&state(3, 1)),
        )]))
        .unwrap();
        core.txn(&Txn::new().and_then(vec![TxnOp::delete(key(Key::Partition("a".into(), 1)))]))
            .unwrap();
        core.txn(&Txn::new().and_then(vec![TxnOp::put(key(Key::Broker(4)), "not json")]))
            .unwrap();
        while let Some(batch) = core.watch_poll(watch).unwrap() {
            watched.apply(&batch);
        }
        let mut fresh = ClusterImage::new(layout.clone());
        let changed = fresh.reload(&core.get(&GetRequest::prefix(layout.root())).unwrap());
        assert_eq!(fresh.revision(), watched.revision());
        assert_eq!(fresh.keys(), watched.keys());
        assert_eq!(changed.len(), 1, "{changed:?}");
        let p0 = watched.partition("a", 0).unwrap();
        assert_eq!((p0.value.leader, p0.value.leader_epoch), (3, 1));
        assert!(watched.partition("a", 1).is_none());
        assert!(watched.undecodable().contains_key(&Key::Broker(4)));
        assert!(!watched.is_live(4));
    }

    #[test]
    fn a_partition_is_offline_without_a_leader_or_when_its_leader_is_not_registered() {
        let layout = Layout::new("t").unwrap();
        let mut core = MetaCore::new();
        let key = |k: Key| layout.key(&k);
        core.txn(&Txn::new().and_then(vec![
            TxnOp::put(key(Key::Partition("a".into(), 0)), encode(&state(1, 0))),
            TxnOp::put(key(Key::Partition("a".into(), 1)), encode(&state(2, 0))),
            TxnOp::put(
                key(Key::Partition("a".into(), 2)),
                encode(&state(crate::records::NO_LEADER, 0)),
            ),
        ]))
        .unwrap();
        let mut image = ClusterImage::new(layout.clone());
        image.reload(&core.get(&GetRequest::prefix(layout.root())).unwrap());
        assert_eq!(image.offline_partitions(), 3, "no broker is registered");
        let registration = crate::records::BrokerRegistration {
            node_id: 1,
            directory_id: "dir-1".into(),
            incarnation: "i".into(),
            rack: None,
            listeners: Vec::new(),
            state: crate::records::BrokerState::Running,
        };
        core.txn(
            &Txn::new().and_then(vec![TxnOp::put(key(Key::Broker(1)), encode(&registration))]),
        )
        .unwrap();
        image.reload(&core.get(&GetRequest::prefix(layout.root())).unwrap());
        assert!(image.is_live(1));
        assert_eq!(
            image.offline_partitions(),
            2,
            "a/1 (leader 2 gone) and a/2 (no leader)"
        );
    }

    #[test]
    fn a_repeated_batch_changes_nothing() {
        let layout = Layout::new("t").unwrap();
        let mut image = ClusterImage::new(layout.clone());
        let kv = KeyValue {
            key: layout.key(&Key::Partition("a".into(), 0)).into_bytes(),
            value: encode(&state(1, 0)),
            create_revision: 2,
            mod_revision: 2,
            version: 1,
            lease: 0,
        };
        let batch = WatchBatch {
            revision: 2,
            events: vec![Event {
                kind: EventKind::Put,
                kv,
                prev_kv: None,
            }],
        };
        assert_eq!(image.apply(&batch).len(), 1);
        assert!(image.apply(&batch).is_empty());
        assert_eq!(image.revision(), 2);
    }
}
