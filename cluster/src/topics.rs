//! Topic changes a broker writes itself (docs/design/cluster.md §2a): creation (in steps for large
//! topics), added partitions, replaced config overrides and the deletion intent; what one broker
//! materializes of the image (the partitions it replicates). Which `__consumer_offsets` partition
//! coordinates a group is `skiff-group`'s (`coordinator_partition`).
//!
//! Every change is guarded on the topic key's revision as the writer saw it, so two brokers
//! changing one topic at once never both succeed, and a change made on a stale image is refused
//! by the store instead of undoing a newer one.
//!
//! Must never: submit anything (the broker does), read the clock, or decide leadership (the
//! controller's plan does; a new partition's first state comes from
//! [`crate::controller::initial_partition_state`]).

use std::collections::BTreeMap;

use skiff_meta::{Compare, CompareOp, Txn, TxnOp, TxnResponse};
use skiff_placement::NodeId;

use crate::controller::{initial_partition_state, PARTITIONS_PER_TXN_MAX};
use crate::image::{ClusterImage, Versioned};
use crate::layout::{Key, Layout};
use crate::records::{encode, PartitionState, TopicRecord, TopicState, Writer};

/// The internal topic whose partition leaders coordinate consumer groups (Kafka's name).
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// The internal topic whose partition leaders coordinate transactions (Kafka's name).
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// Whether `topic` is internal: clients may not produce to it, and Metadata marks it.
pub fn is_internal(topic: &str) -> bool {
    topic == OFFSETS_TOPIC || topic == TRANSACTION_STATE_TOPIC
}

/// Marks a ready topic for deletion; the controller removes it (docs/design/cluster.md §3,
/// "Requests that need the controller").
pub fn request_deletion(layout: &Layout, topic: &str, seen: &Versioned<TopicRecord>) -> Txn {
    let key = layout.key(&Key::Topic(topic.to_owned()));
    let deleting = TopicRecord {
        state: TopicState::Deleting,
        ..seen.value.clone()
    };
    Txn::new()
        .when(vec![topic_unchanged(&key, seen)])
        .and_then(vec![TxnOp::put(key, encode(&deleting))])
}

/// Replaces a ready topic's config overrides with `configs` (AlterConfigs and
/// IncrementalAlterConfigs, computed from `seen`'s overrides).
pub fn replace_configs(
    layout: &Layout,
    topic: &str,
    seen: &Versioned<TopicRecord>,
    configs: BTreeMap<String, String>,
) -> Txn {
    let key = layout.key(&Key::Topic(topic.to_owned()));
    let altered = TopicRecord {
        configs,
        ..seen.value.clone()
    };
    Txn::new()
        .when(vec![topic_unchanged(&key, seen)])
        .and_then(vec![TxnOp::put(key, encode(&altered))])
}

fn topic_unchanged(key: &str, seen: &Versioned<TopicRecord>) -> Compare {
    Compare::mod_revision(key.to_owned(), CompareOp::Equal, seen.mod_revision)
}

/// The first states of partitions `first..first + replicas.len()` of `topic`: led by the first
/// running replica. A partition key already there (left by a growth that was interrupted, and so
/// not part of the topic) is replaced at a higher leader epoch, so epochs of one key only grow.
pub fn new_partition_states(
    image: &ClusterImage,
    topic: &str,
    first: usize,
    replicas: &[Vec<NodeId>],
) -> Vec<PartitionState> {
    (first..)
        .zip(replicas)
        .map(|(partition, replicas)| {
            let mut state = initial_partition_state(image, replicas, Writer::Creator);
            let partition = i32::try_from(partition).unwrap_or(i32::MAX);
            if let Some(left) = image.partition(topic, partition) {
                state.leader_epoch = left.value.leader_epoch.saturating_add(1);
            }
            state
        })
        .collect()
}

/// Where a [`TopicChange`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreationProgress {
    /// More Txns to submit.
    Continue,
    /// The topic is ready with every partition.
    Done,
    /// The topic already existed: TOPIC_ALREADY_EXISTS.
    AlreadyExists,
    /// The topic key changed under the change (the controller finished a creation, another
    /// request deleted the topic or grew it first): stop; the image tells what became of it.
    Interrupted,
}

/// A topic creation or growth as the handling broker writes it (docs/design/cluster.md §2a, "Large
/// topics").
///
/// A creation is one Txn when the partitions fit, otherwise the topic as `creating`, its
/// partitions in Txns of at most `partitions_per_txn`, then `ready`. A growth writes the new
/// partitions in Txns of that size, then the topic record naming them. Every step after the
/// first (every step of a growth) is guarded on the topic key's revision, so a creation the
/// controller took over (its author looked dead) is never written twice and two growths of one
/// topic never interleave.
#[derive(Debug, Clone)]
pub struct TopicChange {
    topic_key: String,
    /// The keys of the partitions this change writes, in order.
    partition_keys: Vec<String>,
    record: TopicRecord,
    states: Vec<PartitionState>,
    partitions_per_txn: usize,
    written: usize,
    topic_revision: Option<i64>,
    /// A growth replaces partition keys left by an interrupted one instead of requiring them
    /// absent (they are not part of the topic).
    replaces_partitions: bool,
    done: bool,
}

impl TopicChange {
    /// Plans the creation of `topic` with its record (any state: it is set here) and the first
    /// state of each partition.
    pub fn new(
        layout: &Layout,
        topic: &str,
        record: TopicRecord,
        states: Vec<PartitionState>,
        partitions_per_txn: usize,
    ) -> Self {
        debug_assert_eq!(record.replicas.len(), states.len());
        Self::planned(layout, topic, 0, record, states, partitions_per_txn, None)
    }

    /// Plans growing `seen` (a ready topic) to `replicas`: the existing partitions' replicas
    /// first, unchanged, then the new ones, whose first states are `states`.
    pub fn grow(
        layout: &Layout,
        topic: &str,
        seen: &Versioned<TopicRecord>,
        replicas: Vec<Vec<NodeId>>,
        states: Vec<PartitionState>,
        partitions_per_txn: usize,
    ) -> Self {
        let first = seen.value.replicas.len();
        debug_assert_eq!(replicas.len(), first + states.len());
        debug_assert_eq!(replicas.get(..first), Some(seen.value.replicas.as_slice()));
        let record = TopicRecord {
            replicas,
            ..seen.value.clone()
        };
        Self::planned(
            layout,
            topic,
            first,
            record,
            states,
            partitions_per_txn,
            Some(seen.mod_revision),
        )
    }

    fn planned(
        layout: &Layout,
        topic: &str,
        first: usize,
        record: TopicRecord,
        states: Vec<PartitionState>,
        partitions_per_txn: usize,
        topic_revision: Option<i64>,
    ) -> Self {
        // Partition numbers `first..first + states.len()`, as i32 without a narrowing cast.
        let partition_keys = (0_i32..)
            .skip(first)
            .take(states.len())
            .map(|p| layout.key(&Key::Partition(topic.to_owned(), p)))
            .collect();
        Self {
            topic_key: layout.key(&Key::Topic(topic.to_owned())),
            partition_keys,
            record,
            states,
            partitions_per_txn: partitions_per_txn.clamp(1, PARTITIONS_PER_TXN_MAX),
            written: 0,
            replaces_partitions: topic_revision.is_some(),
            topic_revision,
            done: false,
        }
    }

    fn topic_value(&self, state: TopicState) -> Vec<u8> {
        encode(&TopicRecord {
            state,
            ..self.record.clone()
        })
    }

    fn partition_ops(&self, range: std::ops::Range<usize>) -> (Vec<Compare>, Vec<TxnOp>) {
        let keys = self.partition_keys.get(range.clone()).unwrap_or_default();
        let states = self.states.get(range).unwrap_or_default();
        let compares = if self.replaces_partitions {
            Vec::new()
        } else {
            keys.iter()
                .map(|key| Compare::absent(key.clone()))
                .collect()
        };
        let ops = keys
            .iter()
            .zip(states)
            .map(|(key, state)| TxnOp::put(key.clone(), encode(state)))
            .collect();
        (compares, ops)
    }

    /// The next Txn to submit, or `None` when finished.
    pub fn next_txn(&self) -> Option<Txn> {
        if self.done {
            return None;
        }
        let count = self.states.len();
        let Some(revision) = self.topic_revision else {
            if count <= self.partitions_per_txn {
                let (mut compares, mut ops) = self.partition_ops(0..count);
                compares.insert(0, Compare::absent(self.topic_key.clone()));
                ops.insert(
                    0,
                    TxnOp::put(self.topic_key.clone(), self.topic_value(TopicState::Ready)),
                );
                return Some(Txn::new().when(compares).and_then(ops));
            }
            return Some(
                Txn::new()
                    .when(vec![Compare::absent(self.topic_key.clone())])
                    .and_then(vec![TxnOp::put(
                        self.topic_key.clone(),
                        self.topic_value(TopicState::Creating),
                    )]),
            );
        };
        let guard = Compare::mod_revision(self.topic_key.clone(), CompareOp::Equal, revision);
        if self.written < count {
            let end = (self.written + self.partitions_per_txn).min(count);
            let (mut compares, ops) = self.partition_ops(self.written..end);
            compares.insert(0, guard);
            return Some(Txn::new().when(compares).and_then(ops));
        }
        Some(Txn::new().when(vec![guard]).and_then(vec![TxnOp::put(
            self.topic_key.clone(),
            self.topic_value(TopicState::Ready),
        )]))
    }

    /// Takes the answer to the Txn [`Self::next_txn`] gave.
    pub fn on_response(&mut self, response: &TxnResponse) -> CreationProgress {
        let first = self.topic_revision.is_none();
        if !response.succeeded {
            self.done = true;
            return if first {
                CreationProgress::AlreadyExists
            } else {
                CreationProgress::Interrupted
            };
        }
        let count = self.states.len();
        if first {
            if count <= self.partitions_per_txn {
                self.done = true;
                return CreationProgress::Done;
            }
            self.topic_revision = Some(response.revision);
            return CreationProgress::Continue;
        }
        if self.written < count {
            self.written = (self.written + self.partitions_per_txn).min(count);
            return CreationProgress::Continue;
        }
        self.done = true;
        CreationProgress::Done
    }
}

/// One ready topic as a broker materializes it: the whole record (for Metadata, configs and
/// partition counts) and the partitions whose replicas include the broker (the logs it keeps).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalTopic {
    /// The topic's name.
    pub name: String,
    /// The record as the image holds it.
    pub record: TopicRecord,
    /// The partitions `node` replicates, ascending (the internal topic's too: each holds the
    /// offsets log of the groups it coordinates).
    pub partitions: Vec<i32>,
}

/// What `node` serves of `image`: every ready topic, with the partitions it replicates.
/// Creating and deleting topics are left out (brokers ignore the first, stop serving the
/// second at once).
pub fn local_topics(image: &ClusterImage, node: NodeId) -> Vec<LocalTopic> {
    image
        .topics()
        .iter()
        .filter(|(_, record)| record.value.state == TopicState::Ready)
        .map(|(name, record)| LocalTopic {
            name: name.clone(),
            partitions: (0i32..)
                .zip(&record.value.replicas)
                .filter(|(_, replicas)| replicas.contains(&node))
                .map(|(partition, _)| partition)
                .collect(),
            record: record.value.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use skiff_meta::{GetRequest, MetaCore};

    fn record(replicas: Vec<Vec<NodeId>>) -> TopicRecord {
        TopicRecord {
            topic_id: "00".repeat(16),
            state: TopicState::Ready,
            replicas,
            configs: BTreeMap::new(),
            author: 1,
            author_epoch: 1,
        }
    }

    fn image_of(core: &MetaCore, layout: &Layout) -> ClusterImage {
        let mut image = ClusterImage::new(layout.clone());
        image.reload(&core.get(&GetRequest::prefix(layout.root())).expect("get"));
        image
    }

    fn run(core: &mut MetaCore, change: &mut TopicChange) -> (CreationProgress, usize) {
        let mut txns = 0;
        loop {
            let Some(txn) = change.next_txn() else {
                unreachable!("a finished change gives no Txn");
            };
            txns += 1;
            let response = core.txn(&txn).expect("txn");
            let progress = change.on_response(&response);
            if progress != CreationProgress::Continue {
                return (progress, txns);
            }
        }
    }

    #[test]
    fn a_growth_adds_partitions_in_steps_and_a_concurrent_change_interrupts_it() {
        let layout = Layout::new("grow").expect("layout");
        let mut core = MetaCore::new();
        let mut creation = TopicChange::new(
            &layout,
            "t",
            record(vec![vec![1]; 2]),
            vec![
                PartitionState {
                    leader: 1,
                    leader_epoch: 0,
                    isr: vec![1],
                    replicas: vec![1],
                    writer: Writer::Creator,
                };
                2
            ],
            PARTITIONS_PER_TXN_MAX,
        );
        assert_eq!(run(&mut core, &mut creation), (CreationProgress::Done, 1));
        let image = image_of(&core, &layout);
        let seen = image.ready_topic("t").expect("ready").clone();
        let added = vec![vec![1]; 5];
        let states = new_partition_states(&image, "t", 2, &added);
        let mut replicas = seen.value.replicas.clone();
        replicas.extend(added);
        let mut growth = TopicChange::grow(&layout, "t", &seen, replicas.clone(), states, 2);
        // 5 partitions in Txns of 2, then the record.
        assert_eq!(run(&mut core, &mut growth), (CreationProgress::Done, 4));
        let image = image_of(&core, &layout);
        assert_eq!(image.ready_topic("t").expect("t").value.replicas, replicas);
        assert_eq!(image.partitions("t").expect("states").len(), 7);
        assert_eq!(
            local_topics(&image, 1)[0].partitions,
            (0..7).collect::<Vec<_>>()
        );
        assert!(local_topics(&image, 2)[0].partitions.is_empty());

        // A growth planned on the old record is refused once the topic changed.
        let mut stale = TopicChange::grow(
            &layout,
            "t",
            &seen,
            vec![vec![1]; 3],
            new_partition_states(&image, "t", 2, &[vec![1]]),
            2,
        );
        assert_eq!(
            run(&mut core, &mut stale),
            (CreationProgress::Interrupted, 1)
        );
        // ...and so is a config change on it.
        let response = core
            .txn(&replace_configs(&layout, "t", &seen, BTreeMap::new()))
            .expect("txn");
        assert!(!response.succeeded);
        let current = image.ready_topic("t").expect("t").clone();
        let configs = BTreeMap::from([("retention.ms".to_owned(), "5".to_owned())]);
        let response = core
            .txn(&replace_configs(&layout, "t", &current, configs.clone()))
            .expect("txn");
        assert!(response.succeeded);
        assert_eq!(
            image_of(&core, &layout)
                .ready_topic("t")
                .expect("t")
                .value
                .configs,
            configs
        );
    }

    #[test]
    fn a_left_partition_key_is_replaced_at_a_higher_epoch() {
        let layout = Layout::new("left").expect("layout");
        let mut core = MetaCore::new();
        let state = PartitionState {
            leader: 1,
            leader_epoch: 4,
            isr: vec![1],
            replicas: vec![1],
            writer: Writer::Controller,
        };
        core.txn(&Txn::new().and_then(vec![TxnOp::put(
            layout.key(&Key::Partition("t".into(), 3)),
            encode(&state),
        )]))
        .expect("txn");
        let image = image_of(&core, &layout);
        let states = new_partition_states(&image, "t", 2, &[vec![1], vec![1]]);
        assert_eq!(states[0].leader_epoch, 0);
        assert_eq!(states[1].leader_epoch, 5);
    }

    #[test]
    fn unready_topics_materialize_no_logs_and_the_internal_one_its_replicas() {
        let layout = Layout::new("local").expect("layout");
        let mut core = MetaCore::new();
        for (name, state) in [
            (OFFSETS_TOPIC, TopicState::Ready),
            ("creating", TopicState::Creating),
            ("deleting", TopicState::Deleting),
        ] {
            let value = TopicRecord {
                state,
                ..record(vec![vec![1], vec![2], vec![1]])
            };
            core.txn(&Txn::new().and_then(vec![TxnOp::put(
                layout.key(&Key::Topic(name.into())),
                encode(&value),
            )]))
            .expect("txn");
        }
        let local = local_topics(&image_of(&core, &layout), 1);
        assert_eq!(local.len(), 1);
        assert_eq!(local[0].name, OFFSETS_TOPIC);
        assert_eq!(local[0].partitions, vec![0, 2]);
    }
}
