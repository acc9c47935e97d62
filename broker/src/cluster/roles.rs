//! What the image says this broker is for each request: the leader of a partition (Produce,
//! Fetch, ListOffsets), the coordinator of a group (FindCoordinator and the group APIs), and the
//! brokers and partition states Metadata lists.
//!
//! Must never: answer "leader" without the session fence (`skiff_cluster::session`): a broker
//! whose session may have lapsed accepts no write, whatever its image still says.

use std::collections::BTreeMap;

use skiff_cluster::records::{BrokerRegistration, PartitionState, NO_LEADER};
use skiff_cluster::topics::{OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC};
use skiff_group::{coordinator_partition, Coordinated};
use skiff_placement::{LoadReport, Node};

use super::Cluster;

/// This broker's role for one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// It leads the partition, at this leader epoch, and its session is provably alive.
    Leader {
        /// The partition's leader epoch.
        leader_epoch: i32,
    },
    /// Another broker leads it, it has no leader, or this broker's session may have lapsed
    /// (NOT_LEADER_OR_FOLLOWER: the client refreshes its metadata and retries).
    NotLeader,
    /// The image has no such partition.
    Unknown,
}

/// Where a group's coordinator is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupCoordinator {
    /// `__consumer_offsets` does not exist yet: FindCoordinator creates it.
    NoOffsetsTopic,
    /// The leader of the group's offsets partition.
    Broker(BrokerRegistration),
    /// That partition has no live leader (COORDINATOR_NOT_AVAILABLE).
    Unavailable,
}

impl Cluster {
    /// This broker's role for `topic`/`partition`.
    /// One image read per call: this runs for every partition of every Produce and Fetch.
    pub fn role(&self, topic: &str, partition: i32) -> Role {
        let state = self.with_image(|image| {
            image
                .ready_topic(topic)
                .and_then(|_| image.partition(topic, partition))
                .map(|state| {
                    (
                        state.value.leader,
                        state.value.leader_epoch,
                        image.revision(),
                    )
                })
        });
        match state.flatten() {
            None => Role::Unknown,
            Some((leader, leader_epoch, revision))
                if leader == self.node_id && self.may_lead_at(revision) =>
            {
                Role::Leader { leader_epoch }
            }
            Some(_) => Role::NotLeader,
        }
    }

    /// Whether `__consumer_offsets` exists (ready) in the image.
    pub fn has_offsets_topic(&self) -> bool {
        self.with_image(|image| image.ready_topic(OFFSETS_TOPIC).is_some())
            .unwrap_or(false)
    }

    /// The state of every partition of `topic` (a ready one), by index.
    pub fn partition_states(&self, topic: &str) -> Vec<(i32, PartitionState)> {
        self.with_image(|image| {
            image
                .ready_topic(topic)
                .and_then(|_| image.partitions(topic))
                .map(|states| {
                    states
                        .iter()
                        .map(|(partition, state)| (*partition, state.value.clone()))
                        .collect()
                })
                .unwrap_or_default()
        })
        .unwrap_or_default()
    }

    /// Whether broker `id` is registered (alive) in the image.
    pub fn is_live(&self, id: i32) -> bool {
        self.with_image(|image| image.is_live(id)).unwrap_or(false)
    }

    /// Where `group`'s coordinator is.
    pub fn coordinator_of(&self, group: &str) -> GroupCoordinator {
        self.coordinator_in(OFFSETS_TOPIC, group)
    }

    /// Where the coordinator of `transactional_id` is: the leader of its `__transaction_state`
    /// partition (`NoOffsetsTopic` here means that topic does not exist yet).
    pub fn transaction_coordinator_of(&self, transactional_id: &str) -> GroupCoordinator {
        self.coordinator_in(TRANSACTION_STATE_TOPIC, transactional_id)
    }

    /// The leader of `key`'s partition of the internal topic `internal` (Kafka's hash of the key
    /// over its partitions).
    fn coordinator_in(&self, internal: &str, key: &str) -> GroupCoordinator {
        self.with_image(|image| {
            let Some(topic) = image.ready_topic(internal) else {
                return GroupCoordinator::NoOffsetsTopic;
            };
            let count = i32::try_from(topic.value.replicas.len()).unwrap_or(i32::MAX);
            if count == 0 {
                return GroupCoordinator::Unavailable;
            }
            let partition = coordinator_partition(key, count);
            let leader = image
                .partition(internal, partition)
                .map_or(NO_LEADER, |state| state.value.leader);
            match image.brokers().get(&leader) {
                Some(registration) if leader != NO_LEADER => {
                    GroupCoordinator::Broker(registration.value.clone())
                }
                _ => GroupCoordinator::Unavailable,
            }
        })
        .unwrap_or(GroupCoordinator::Unavailable)
    }

    /// The groups this broker coordinates now, and the leader epoch of each `__consumer_offsets`
    /// partition it leads (a coordinator loaded at another epoch is stale: the partition was led
    /// elsewhere in between, so it must be loaded again). Nothing while this broker's session is
    /// not provably alive ([`Self::may_lead`]): a broker cut off from the metadata store may
    /// already have been replaced as leader, and must not answer from what it loaded.
    pub fn coordinated(&self) -> (Coordinated, BTreeMap<i32, i32>) {
        let (partitions, led) = self.led_partitions(OFFSETS_TOPIC);
        let coordinated = Coordinated {
            partitions,
            led: led.keys().copied().collect(),
        };
        (coordinated, led)
    }

    /// `topic`'s partition count and the partitions of it this broker leads, with their leader
    /// epochs; none while the session is not provably alive or the topic is not ready.
    pub fn led_partitions(&self, topic: &str) -> (i32, BTreeMap<i32, i32>) {
        let may_lead = self.may_lead();
        self.with_image(|image| {
            let Some(ready) = image.ready_topic(topic) else {
                return (0, BTreeMap::new());
            };
            let count = i32::try_from(ready.value.replicas.len()).unwrap_or(i32::MAX);
            if !may_lead {
                return (count, BTreeMap::new());
            }
            let led = image
                .partitions(topic)
                .map(|states| {
                    states
                        .iter()
                        .filter(|(_, state)| state.value.leader == self.node_id)
                        .map(|(partition, state)| (*partition, state.value.leader_epoch))
                        .collect()
                })
                .unwrap_or_default();
            (count, led)
        })
        .unwrap_or((0, BTreeMap::new()))
    }

    /// The running brokers as placement sees them: rack from the registration, load from
    /// `R/load/<id>` (this broker's own `local_load` while its report is not in the store yet).
    pub fn placement_nodes(&self, local_load: Option<(LoadReport, u64)>) -> Vec<Node> {
        self.with_image(|image| {
            image
                .brokers()
                .iter()
                .filter(|(id, _)| image.is_running(**id))
                .map(|(id, registration)| {
                    let (load, capacity) = match image.loads().get(id) {
                        Some(record) => (
                            record.value.report,
                            record.value.write_capacity_bytes_per_second,
                        ),
                        None if *id == self.node_id => {
                            local_load.unwrap_or((LoadReport::unknown(), 0))
                        }
                        None => (LoadReport::unknown(), 0),
                    };
                    Node {
                        id: *id,
                        rack: registration.value.rack.clone(),
                        load,
                        write_capacity_bytes_per_second: capacity,
                    }
                })
                .collect()
        })
        .unwrap_or_default()
    }
}
