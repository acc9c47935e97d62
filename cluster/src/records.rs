//! The values stored under each key of [`crate::layout`], as JSON (docs/design/cluster.md §2a:
//! small, inspectable with `etcdctl`, rarely written), and their one decoder.
//!
//! Values come from the store, which any process with etcd access can write: decoding is bounded
//! (the store caps a value at [`skiff_meta::limits::VALUE_BYTES_MAX`], serde_json caps nesting) and
//! a record that does not decode is an error the image reports, never a panic.
//!
//! Must never: hold broker state or talk to a store.

use std::collections::BTreeMap;

use serde::{de::DeserializeOwned, Deserialize, Serialize};
use skiff_placement::{LoadReport, NodeId};

/// The layout version written in [`ClusterRecord::layout`] (the `v1` of the root).
pub const LAYOUT_VERSION: u32 = 1;

/// No leader: Kafka's `-1` leader id.
pub const NO_LEADER: NodeId = -1;

/// A value that is not the record its key promises.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the value of {key} is not a valid {record}: {reason}")]
pub struct RecordError {
    /// The key (relative to the root).
    pub key: String,
    /// The record type expected.
    pub record: &'static str,
    /// serde_json's explanation.
    pub reason: String,
}

/// Decodes the JSON `value` of `key` as a `T`.
pub fn decode<T: DeserializeOwned>(
    key: &impl std::fmt::Display,
    value: &[u8],
) -> Result<T, RecordError> {
    serde_json::from_slice(value).map_err(|error| RecordError {
        key: key.to_string(),
        record: std::any::type_name::<T>()
            .rsplit("::")
            .next()
            .unwrap_or("record"),
        reason: error.to_string(),
    })
}

/// Encodes a record as the JSON stored under its key.
pub fn encode<T: Serialize>(record: &T) -> Vec<u8> {
    // INVARIANT: serialising these plain structs (strings, numbers, vectors, string-keyed maps)
    // cannot fail.
    #[allow(clippy::expect_used)]
    serde_json::to_vec(record).expect("records serialise to JSON")
}

/// `R/cluster`: written once by the first broker ever to boot; a broker whose data directory
/// belongs to another cluster id refuses to start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterRecord {
    /// Kafka's cluster id (22 characters of URL-safe base64, as Kafka's `Uuid.toString`).
    pub cluster_id: String,
    /// [`LAYOUT_VERSION`].
    pub layout: u32,
    /// When it was created, in Unix milliseconds.
    pub created_ms: u64,
}

/// A listener a broker accepts clients on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// The listener name (Metadata answers each client with the endpoint of the listener it came
    /// in on).
    pub name: String,
    /// The advertised host.
    pub host: String,
    /// The advertised port.
    pub port: u16,
    /// PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
    pub security_protocol: String,
}

/// Whether a registered broker takes new leaderships.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BrokerState {
    /// Serving.
    Running,
    /// Controlled shutdown: the controller moves its leaderships away.
    ShuttingDown,
}

/// `R/brokers/<id>`, on the broker's session lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    /// `node.id`.
    pub node_id: NodeId,
    /// The identity stored in the broker's data directory: a restart on the same directory may
    /// replace a registration of its own, a live one from another directory is refused.
    pub directory_id: String,
    /// A fresh id per process start.
    pub incarnation: String,
    /// `broker.rack`.
    pub rack: Option<String>,
    /// Every listener, by name.
    pub listeners: Vec<Endpoint>,
    /// Running or shutting down.
    pub state: BrokerState,
}

/// `R/controller`, on the controller's lease. Its `create_revision` is the controller epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerRecord {
    /// The controller's `node.id`.
    pub broker_id: NodeId,
    /// The controller's broker epoch (its registration's `create_revision`).
    pub broker_epoch: i64,
}

/// Where a topic is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TopicState {
    /// Its partition keys are being written; brokers ignore it. The controller finishes the
    /// creation if the author dies.
    Creating,
    /// Complete and served.
    Ready,
    /// DeleteTopics was accepted; the controller deletes its partitions, then the topic key.
    Deleting,
}

/// `R/topics/<t>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicRecord {
    /// Kafka's topic id (16 bytes as 32 hex digits).
    pub topic_id: String,
    /// Creating, ready or deleting.
    pub state: TopicState,
    /// The replicas of each partition (index = partition), preferred leader first.
    pub replicas: Vec<Vec<NodeId>>,
    /// Topic configs given at creation (overrides of the broker defaults).
    #[serde(default)]
    pub configs: BTreeMap<String, String>,
    /// The broker that wrote the `creating` record, and its broker epoch: the controller finishes
    /// the creation when that registration is gone.
    pub author: NodeId,
    /// The author's broker epoch.
    pub author_epoch: i64,
}

/// Who wrote a partition state last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Writer {
    /// The creating broker (the first state).
    Creator,
    /// The controller (elections, removing dead brokers from the ISR).
    Controller,
    /// The partition's leader (ISR shrink and expand).
    Leader,
}

/// `R/partitions/<t>/<p>`. Its `mod_revision` is the partition epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    /// The leader, or [`NO_LEADER`].
    pub leader: NodeId,
    /// Grows by one with every leader change.
    pub leader_epoch: i32,
    /// The in-sync replicas. Never empty: the last member stays while it is down, so it can
    /// return and lead (Kafka's rule without unclean election).
    pub isr: Vec<NodeId>,
    /// A copy of the topic's replicas for this partition.
    pub replicas: Vec<NodeId>,
    /// Who wrote this state.
    pub writer: Writer,
}

/// `R/load/<id>`, on the broker's lease: what placement weighs (BP-65) and what the shedder
/// weighs (the broker's traffic, per partition).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadRecord {
    /// The figures.
    pub report: LoadReport,
    /// Write throughput at which the log disk counts as fully used (0 = unknown).
    pub write_capacity_bytes_per_second: u64,
    /// When it was sampled, in Unix milliseconds.
    pub sample_ms: u64,
    /// Bytes and records per second through this broker, over the last sampling interval
    /// (absent in reports of brokers from before the shedder: read as no traffic).
    #[serde(default)]
    pub traffic: TrafficRecord,
}

/// Most partitions one load report lists (the busiest by bytes in): bounds the report's size
/// (about 150 bytes of JSON each, so ≤ 300 KB, far below the store's value limit) whatever the
/// partition count. The broker totals always cover every partition.
pub const LOAD_REPORT_PARTITIONS_MAX: usize = 2_000;

/// One broker's traffic: totals, and per partition for the busiest partitions.
///
/// Load, as the shedder and every report define it, is bytes in from clients plus replication
/// bytes in ([`TrafficRecord::load_bytes_per_second`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrafficRecord {
    /// Record bytes appended from Produce requests (this broker leading).
    pub bytes_in_per_second: f64,
    /// Record bytes appended from its own follower fetches (this broker following).
    pub replication_bytes_in_per_second: f64,
    /// Record bytes sent in Fetch responses, to consumers and followers.
    pub bytes_out_per_second: f64,
    /// Records appended from Produce requests.
    pub messages_in_per_second: f64,
    /// The busiest partitions (at most [`LOAD_REPORT_PARTITIONS_MAX`]), idle ones left out.
    pub partitions: Vec<PartitionTraffic>,
}

impl TrafficRecord {
    /// Load: bytes in from clients plus replication bytes in.
    pub fn load_bytes_per_second(&self) -> f64 {
        self.bytes_in_per_second + self.replication_bytes_in_per_second
    }
}

/// One partition's traffic on one broker.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PartitionTraffic {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Record bytes appended from Produce requests.
    pub bytes_in_per_second: f64,
    /// Record bytes appended from follower fetches.
    pub replication_bytes_in_per_second: f64,
    /// Record bytes sent in Fetch responses.
    pub bytes_out_per_second: f64,
    /// Records appended from Produce requests.
    pub messages_in_per_second: f64,
}

/// Where a bundle is in a move (docs/design/cluster.md §5.3–5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BundleState {
    /// The owner leads the bundle's partitions (or is the one they are to be led by).
    Owned,
    /// The controller is moving the bundle's leaderships from the owner to the target; a new
    /// controller resumes the move from this record.
    Assigning,
}

/// One completed bundle move, kept for the cooldown and ping-pong accounting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleMoveRecord {
    /// The owner the bundle left.
    pub from: NodeId,
    /// The owner it went to.
    pub to: NodeId,
    /// When the move was decided, in Unix milliseconds.
    pub started_ms: u64,
    /// When every partition was led by `to`, in Unix milliseconds.
    pub finished_ms: u64,
}

/// Moves a bundle record keeps (the newest last): enough for a ping-pong check over any
/// cooldown, bounded so the record stays small however often the bundle moves.
pub const BUNDLE_MOVE_HISTORY_MAX: usize = 8;

/// `R/bundles/<namespace>/<0xLO_0xHI>`: written by the controller only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleRecord {
    /// The broker meant to lead the bundle's partitions (the preferred leader of new ones).
    pub owner: NodeId,
    /// Owned, or being moved to `target`.
    pub state: BundleState,
    /// The new owner while `Assigning`.
    pub target: Option<NodeId>,
    /// When the current state began, in Unix milliseconds.
    pub since_ms: u64,
    /// Why the current state was entered (the shedder's reason, "created", "split", …).
    pub reason: String,
    /// The last moves, oldest first, at most [`BUNDLE_MOVE_HISTORY_MAX`].
    #[serde(default)]
    pub moves: Vec<BundleMoveRecord>,
}

/// Why a partition is being reassigned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReassignReason {
    /// An operator's AlterPartitionReassignments.
    Admin,
    /// A bundle move whose target was not a replica.
    BundleMove,
}

/// `R/reassign/<t>/<p>`: a reassignment in progress (Kafka's KIP-455 semantics: the target
/// replicas are added, caught up and made the ISR, then the others are removed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReassignRecord {
    /// The id of the topic it was written for (its [`TopicRecord::topic_id`]): a topic deleted
    /// and created again under the same name before the controller removed the record must not
    /// inherit it. Empty in records written before the field existed (they match any id).
    #[serde(default)]
    pub topic_id: String,
    /// The replicas the partition is to end with, preferred leader first.
    pub target: Vec<NodeId>,
    /// The replicas when the reassignment began (ListPartitionReassignments' removing set, and
    /// what a cancellation returns to).
    pub original: Vec<NodeId>,
    /// Who asked.
    pub reason: ReassignReason,
    /// When it was written, in Unix milliseconds.
    pub started_ms: u64,
}

impl ReassignRecord {
    /// Whether the record was written for the topic whose id is `topic_id` (a record without an
    /// id predates the field and is taken as its topic's).
    pub fn is_for(&self, topic_id: &str) -> bool {
        self.topic_id.is_empty() || self.topic_id == topic_id
    }
}

/// `R/ids/producer_id_block`: the first producer id of the next free block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerIdBlockRecord {
    /// The next block starts here.
    pub next_block_start: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_state_round_trips_and_reads_like_the_design() {
        let state = PartitionState {
            leader: 2,
            leader_epoch: 5,
            isr: vec![2, 1],
            replicas: vec![2, 1, 3],
            writer: Writer::Controller,
        };
        let json = encode(&state);
        assert_eq!(
            std::str::from_utf8(&json).unwrap(),
            r#"{"leader":2,"leader_epoch":5,"isr":[2,1],"replicas":[2,1,3],"writer":"controller"}"#
        );
        assert_eq!(decode::<PartitionState>(&"p", &json).unwrap(), state);
    }

    #[test]
    fn garbage_is_an_error_that_names_the_key_and_the_record() {
        let error = decode::<PartitionState>(&"partitions/t/0", b"{\"leader\":").unwrap_err();
        assert_eq!(error.key, "partitions/t/0");
        assert_eq!(error.record, "PartitionState");
        let deep = "[".repeat(100_000);
        assert!(decode::<TopicRecord>(&"topics/t", deep.as_bytes()).is_err());
    }
}
