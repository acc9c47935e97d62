//! Test fixture shared by the controller's, the elections' and the reassignments' unit tests: a store with a
//! controller, brokers and one-partition topics, and the plans run on it.

use skiff_meta::{Txn, TxnOp};
use skiff_placement::NodeId;

use crate::controller::{plan, ControllerWrite, PlanLimits, WriteReason};
use crate::image::ClusterImage;
use crate::layout::Key;
use crate::layout::Layout;
use crate::records::{encode, PartitionState, TopicRecord, TopicState, Writer};
use crate::records::{BrokerRegistration, BrokerState, ControllerRecord};
use skiff_meta::{GetRequest, MetaCore};

/// A store with a controller, brokers, and one-partition topics, and the plans run on it.
pub(crate) struct World {
    pub(crate) core: MetaCore,
    pub(crate) layout: Layout,
    pub(crate) epoch: i64,
}

fn put(core: &mut MetaCore, key: String, value: Vec<u8>) -> i64 {
    let response = core
        .txn(&Txn::new().and_then(vec![TxnOp::put(key, value)]))
        .unwrap();
    response.revision
}

impl World {
    pub(crate) fn new(brokers: &[NodeId]) -> Self {
        let layout = Layout::new("t").unwrap();
        let mut core = MetaCore::new();
        let record = ControllerRecord {
            broker_id: brokers[0],
            broker_epoch: 1,
        };
        let epoch = put(&mut core, layout.key(&Key::Controller), encode(&record));
        let mut world = Self {
            core,
            layout,
            epoch,
        };
        for id in brokers {
            world.register(*id, BrokerState::Running);
        }
        world
    }

    pub(crate) fn register(&mut self, id: NodeId, state: BrokerState) {
        let registration = BrokerRegistration {
            node_id: id,
            directory_id: format!("dir-{id}"),
            incarnation: "i".into(),
            rack: None,
            listeners: Vec::new(),
            state,
        };
        let key = self.layout.key(&Key::Broker(id));
        put(&mut self.core, key, encode(&registration));
    }

    pub(crate) fn deregister(&mut self, id: NodeId) {
        let key = self.layout.key(&Key::Broker(id));
        self.core
            .txn(&Txn::new().and_then(vec![TxnOp::delete(key)]))
            .unwrap();
    }

    /// Topic `name` with one partition in `state`, and topic configs `configs`.
    pub(crate) fn topic(&mut self, name: &str, state: PartitionState, configs: &[(&str, &str)]) {
        let record = TopicRecord {
            topic_id: "0".repeat(32),
            state: TopicState::Ready,
            replicas: vec![state.replicas.clone()],
            configs: configs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            author: 0,
            author_epoch: 0,
        };
        let key = self.layout.key(&Key::Topic(name.into()));
        put(&mut self.core, key, encode(&record));
        let key = self.layout.key(&Key::Partition(name.into(), 0));
        put(&mut self.core, key, encode(&state));
    }

    /// Topic `name` with one partition per state in `states` (replicas from each state).
    pub(crate) fn topic_with(&mut self, name: &str, states: Vec<PartitionState>) {
        let record = TopicRecord {
            topic_id: "0".repeat(32),
            state: TopicState::Ready,
            replicas: states.iter().map(|state| state.replicas.clone()).collect(),
            configs: Default::default(),
            author: 0,
            author_epoch: 0,
        };
        let key = self.layout.key(&Key::Topic(name.into()));
        put(&mut self.core, key, encode(&record));
        for (partition, state) in (0..).zip(&states) {
            self.put_state(name, partition, state);
        }
    }

    /// Writes partition `partition` of `name` as a leader's ISR change would.
    pub(crate) fn put_state(&mut self, name: &str, partition: i32, state: &PartitionState) {
        let key = self.layout.key(&Key::Partition(name.into(), partition));
        put(&mut self.core, key, encode(state));
    }

    /// Another controller term: the controller key is replaced, and the world's epoch with it (a
    /// plan of the old term is refused).
    pub(crate) fn new_controller(&mut self) {
        let key = self.layout.key(&Key::Controller);
        let value = self.core.get(&GetRequest::key(key.clone())).unwrap().kvs[0]
            .value
            .clone();
        self.core
            .txn(&Txn::new().and_then(vec![TxnOp::delete(key.clone())]))
            .unwrap();
        self.epoch = put(&mut self.core, key, value);
    }

    /// Puts `value` under `key` (no guard): a broker's or an operator's write.
    pub(crate) fn put_key<T: serde::Serialize>(&mut self, key: &Key, value: &T) {
        let key = self.layout.key(key);
        put(&mut self.core, key, encode(value));
    }

    /// Deletes `key`.
    pub(crate) fn delete_key(&mut self, key: &Key) {
        let key = self.layout.key(key);
        self.core
            .txn(&Txn::new().and_then(vec![TxnOp::delete(key)]))
            .unwrap();
    }

    /// Submits `writes`; returns the reasons of those that landed.
    pub(crate) fn submit(&mut self, writes: Vec<ControllerWrite>) -> Vec<WriteReason> {
        writes
            .into_iter()
            .filter(|write| self.core.txn(&write.txn).unwrap().succeeded)
            .map(|write| write.reason)
            .collect()
    }

    pub(crate) fn image(&self) -> ClusterImage {
        let mut image = ClusterImage::new(self.layout.clone());
        image.reload(
            &self
                .core
                .get(&GetRequest::prefix(self.layout.root()))
                .unwrap(),
        );
        image
    }

    pub(crate) fn plan(&self, unclean_default: bool) -> Vec<ControllerWrite> {
        let limits = PlanLimits {
            unclean_leader_election_default: unclean_default,
            ..PlanLimits::default()
        };
        plan(&self.image(), self.epoch, limits)
    }

    /// Plans and submits until the plan is empty; returns the reasons of the writes that
    /// landed.
    pub(crate) fn settle(&mut self, unclean_default: bool) -> Vec<WriteReason> {
        let mut reasons = Vec::new();
        for _ in 0..10 {
            let writes = self.plan(unclean_default);
            if writes.is_empty() {
                return reasons;
            }
            for write in writes {
                let response = self.core.txn(&write.txn).unwrap();
                assert!(response.succeeded, "{:?} refused", write.reason);
                reasons.push(write.reason);
            }
        }
        panic!("the plan never settled: {reasons:?}");
    }

    pub(crate) fn state(&self, name: &str) -> PartitionState {
        self.state_of(name, 0)
    }

    pub(crate) fn state_of(&self, name: &str, partition: i32) -> PartitionState {
        self.image()
            .partition(name, partition)
            .unwrap()
            .value
            .clone()
    }
}

pub(crate) fn state(
    leader: NodeId,
    epoch: i32,
    isr: &[NodeId],
    replicas: &[NodeId],
) -> PartitionState {
    PartitionState {
        leader,
        leader_epoch: epoch,
        isr: isr.to_vec(),
        replicas: replicas.to_vec(),
        writer: Writer::Controller,
    }
}
