//! Creating a topic or growing one, for every caller: CreateTopics and CreatePartitions, the
//! auto-creation of Metadata and Produce, and `__consumer_offsets` on the first FindCoordinator,
//! group request or offsets migration. It validates the topic, asks placement for the replica
//! assignment over the running brokers (or checks the one a client gave), checks that this
//! broker has room for its share, and writes the topic to the metadata store
//! (`Cluster::create_topic`), which answers once this broker's image and logs show it.
//!
//! Must never: decide who may create a topic (handlers ask the ACLs first), or read a request's
//! wire form (handlers turn requests into the [`Replicas`] and configs given here).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use skiff_cluster::preferred_leaders::preferred_leaders;
use skiff_placement::{PlacementError, PreferredLeader};

use super::Cluster;
use crate::config::Config;
use crate::partition::topics::{Topic, TopicError, Topics};
use crate::placement::state::PlacementState;

/// How long an auto-creation (from Metadata or Produce) waits for the topic; the client's
/// request has no timeout of its own for it.
const AUTO_CREATE_WAIT: Duration = Duration::from_secs(10);

/// What creating a topic reads and writes: this broker's image and store client, its topics,
/// placement's view of the cluster, and the broker's topic defaults.
pub(crate) struct TopicCreation<'a> {
    /// The image (names taken, running brokers) and the store the topic is written to.
    pub(crate) cluster: &'a Cluster,
    /// This broker's topics: names served here, config resolution, room in the log directory.
    pub(crate) topics: &'a Arc<Topics>,
    /// Replica assignment over the running brokers.
    pub(crate) placement: &'a PlacementState,
    /// `node.id`, and the defaults of auto-created topics and of `__consumer_offsets`.
    pub(crate) config: &'a Config,
}

/// Where a new topic's replicas come from.
pub(crate) enum Replicas {
    /// Placement chooses them.
    Placed {
        partition_count: i32,
        replication_factor: i16,
    },
    /// The client assigned them (checked), partition by partition.
    Assigned(Vec<Vec<i32>>),
}

/// Why a client's replica assignment is refused (INVALID_REPLICA_ASSIGNMENT, with Kafka's
/// messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AssignmentError {
    /// A partition names no broker.
    #[error("An assignment must name at least one broker.")]
    NoBroker,
    /// A partition names a broker that is not registered.
    #[error(
        "The manual partition assignment includes broker {0}, but no such broker is registered."
    )]
    Unregistered(i32),
    /// A partition names a broker twice.
    #[error("The manual partition assignment includes the broker {0} more than once.")]
    Twice(i32),
    /// A partition has another replica count than the others (or than the topic).
    #[error("The manual partition assignment includes a partition with {found} replica(s), but this is not consistent with previous partitions, which have {expected} replica(s).")]
    Inconsistent {
        /// Replicas of the misfit.
        found: usize,
        /// Replicas of the others.
        expected: usize,
    },
}

/// Checks a replication factor: at least 1 (placement then needs that many running brokers).
pub(crate) fn check_replication_factor(factor: i16) -> Result<usize, TopicError> {
    match usize::try_from(factor) {
        Ok(replicas) if replicas >= 1 => Ok(replicas),
        _ => Err(TopicError::InvalidReplicationFactor {
            factor,
            why: "must be at least 1".to_owned(),
        }),
    }
}

impl TopicCreation<'_> {
    /// Replicas for `added` new partitions of `topic` (after `existing` ones) with
    /// `replication_factor` replicas each, from placement over the running brokers. Each
    /// partition's preferred leader is its bundle's owner (`skiff_cluster::preferred_leaders`):
    /// the running owner of the image's bundle record, else one drawn per bundle by placement.
    pub(crate) fn assign_replicas(
        &self,
        topic: &str,
        existing: usize,
        added: i32,
        replication_factor: i16,
    ) -> Result<Vec<Vec<i32>>, TopicError> {
        if !(1..=crate::partition::topics::PARTITIONS_PER_TOPIC_MAX).contains(&added) {
            return Err(TopicError::InvalidPartitions(added));
        }
        let replicas = check_replication_factor(replication_factor)?;
        let added_count = usize::try_from(added).unwrap_or(0);
        let nodes = self.cluster.placement_nodes(self.placement.local_load());
        let running: BTreeSet<i32> = nodes.iter().map(|node| node.id).collect();
        let first = i32::try_from(existing).unwrap_or(i32::MAX);
        let leaders = self
            .cluster
            .with_image(|image| preferred_leaders(image, topic, first, added_count, &running))
            // An unreadable image also left `nodes` empty: placement answers NotEnoughNodes.
            .unwrap_or_else(|| vec![PreferredLeader::Any; added_count]);
        self.placement.set_nodes(nodes);
        self.placement
            .assign_added(topic, &leaders, replicas)
            .map_err(|error| match error {
                PlacementError::TooManyPartitions { .. } => TopicError::InvalidPartitions(added),
                PlacementError::NotEnoughNodes { node_count, .. } => {
                    TopicError::InvalidReplicationFactor {
                        factor: replication_factor,
                        why: format!("{node_count} running broker(s) to place it on"),
                    }
                }
                other => TopicError::InvalidReplicationFactor {
                    factor: replication_factor,
                    why: other.to_string(),
                },
            })
    }

    /// Refuses new partitions whose replicas include this broker when its log directory cannot
    /// hold them (POLICY_VIOLATION naming the limit), before anything is written to the store.
    /// (A broker that cannot hold its share of a topic another broker created refuses to serve
    /// it and logs why.)
    pub(crate) async fn check_room_here(&self, replicas: &[Vec<i32>]) -> Result<(), TopicError> {
        let here = replicas
            .iter()
            .filter(|replicas| replicas.contains(&self.config.node_id))
            .count();
        let topics = self.topics.clone();
        // The check waits for the log directory, which recovery after a crash holds.
        tokio::task::spawn_blocking(move || topics.check_room(here))
            .await
            .unwrap_or_else(|join| Err(TopicError::Storage(join.to_string())))
    }

    /// Broker lists a client assigned to partitions (CreateTopics, CreatePartitions), checked as
    /// Kafka checks them: each names at least one broker, only registered ones, none twice, and
    /// all have the same number of replicas (`replication_factor` when the topic has one
    /// already). The first misfit is the error.
    pub(crate) fn checked_broker_lists(
        &self,
        lists: impl Iterator<Item = Vec<i32>>,
        replication_factor: Option<usize>,
    ) -> Result<Vec<Vec<i32>>, AssignmentError> {
        checked_broker_lists(|id| self.cluster.is_live(id), lists, replication_factor)
    }

    /// Creates `name` (validated first); returns its id (zeros for a validate-only creation).
    pub(crate) async fn create(
        &self,
        name: &str,
        requested: Replicas,
        configs: BTreeMap<String, String>,
        validate_only: bool,
        wait: Duration,
    ) -> Result<[u8; 16], TopicError> {
        crate::partition::topics::validate_topic_name(name)?;
        let taken = self
            .cluster
            .with_image(|image| image.topics().contains_key(name))
            .unwrap_or(false);
        if taken || self.topics.get(name).is_some() {
            return Err(TopicError::AlreadyExists);
        }
        let resolved = self.topics.resolve_config(name, &configs)?;
        let replicas = match requested {
            Replicas::Placed {
                partition_count,
                replication_factor,
            } => self.assign_replicas(name, 0, partition_count, replication_factor)?,
            Replicas::Assigned(replicas) => replicas,
        };
        self.check_room_here(&replicas).await?;
        if validate_only {
            return Ok([0; 16]);
        }
        let replication_factor = replicas.first().map_or(0, Vec::len);
        let topic_id = self
            .cluster
            .create_topic(name, replicas, configs, wait)
            .await?;
        warn_below_min_isr(name, replication_factor, resolved.min_insync_replicas);
        Ok(crate::partition::topics::parse_topic_id(&topic_id))
    }

    /// Creates `name` with the broker defaults, or returns it if a concurrent request just did.
    pub(crate) async fn auto_create(&self, name: &str) -> Result<Arc<Topic>, TopicError> {
        if skiff_cluster::topics::is_internal(name) {
            return Err(TopicError::Internal(name.to_owned()));
        }
        let created = self
            .create(
                name,
                Replicas::Placed {
                    partition_count: self.config.num_partitions,
                    replication_factor: self.config.default_replication_factor,
                },
                BTreeMap::new(),
                false,
                AUTO_CREATE_WAIT,
            )
            .await;
        match created {
            Ok(_) => tracing::info!(topic = name, "auto-created topic"),
            // Taken in the store or the image, but not served here yet: the materializer (or
            // the image) is behind. Answering UNKNOWN_TOPIC_OR_PARTITION for a topic that exists
            // would be wrong; wait for it, bounded.
            Err(TopicError::AlreadyExists) if self.topics.get(name).is_none() => {
                self.cluster
                    .wait_topic_served(name, AUTO_CREATE_WAIT)
                    .await?;
            }
            Err(TopicError::AlreadyExists) => {}
            Err(error) => return Err(error),
        }
        self.topics.get(name).ok_or(TopicError::Unknown)
    }

    /// Creates `__consumer_offsets` with `offsets.topic.num.partitions` partitions spread by
    /// placement, unless it exists (Kafka creates it on the first FindCoordinator too).
    pub(crate) async fn ensure_offsets_topic(&self) -> Result<(), TopicError> {
        let config = self.config;
        let created = self
            .create(
                skiff_cluster::topics::OFFSETS_TOPIC,
                Replicas::Placed {
                    partition_count: config.offsets_topic_num_partitions,
                    replication_factor: config.offsets_topic_replication_factor,
                },
                // Kafka's offsets topic: its own segment size, and compacted by key (the latest
                // commit of each group's partition), never deleted by retention.
                BTreeMap::from([
                    (
                        "segment.bytes".to_owned(),
                        config.offsets_topic_segment_bytes.to_string(),
                    ),
                    ("cleanup.policy".to_owned(), "compact".to_owned()),
                ]),
                false,
                AUTO_CREATE_WAIT,
            )
            .await;
        match created {
            Ok(_) => {
                tracing::info!(
                    partitions = config.offsets_topic_num_partitions,
                    "created {}",
                    skiff_cluster::topics::OFFSETS_TOPIC
                );
                Ok(())
            }
            Err(TopicError::AlreadyExists) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Creates `__transaction_state` with `transaction.state.log.num.partitions` partitions,
    /// `transaction.state.log.replication.factor` replicas and `transaction.state.log.min.isr`,
    /// compacted by key (the latest state of each transactional id) with its own segment size,
    /// unless it exists (Kafka creates it on the first FindCoordinator for a transactional id).
    pub(crate) async fn ensure_transaction_state_topic(&self) -> Result<(), TopicError> {
        let config = self.config;
        let created = self
            .create(
                skiff_cluster::topics::TRANSACTION_STATE_TOPIC,
                Replicas::Placed {
                    partition_count: config.transaction_state_log_num_partitions,
                    replication_factor: config.transaction_state_log_replication_factor,
                },
                BTreeMap::from([
                    (
                        "segment.bytes".to_owned(),
                        config.transaction_state_log_segment_bytes.to_string(),
                    ),
                    ("cleanup.policy".to_owned(), "compact".to_owned()),
                    (
                        "min.insync.replicas".to_owned(),
                        config.transaction_state_log_min_isr.to_string(),
                    ),
                ]),
                false,
                AUTO_CREATE_WAIT,
            )
            .await;
        match created {
            Ok(_) => {
                tracing::info!(
                    partitions = config.transaction_state_log_num_partitions,
                    "created {}",
                    skiff_cluster::topics::TRANSACTION_STATE_TOPIC
                );
                Ok(())
            }
            Err(TopicError::AlreadyExists) => Ok(()),
            Err(error) => Err(error),
        }
    }
}

/// [`TopicCreation::checked_broker_lists`] over any view of which brokers are registered.
/// A topic whose replication factor is below its min.insync.replicas is created, as Kafka
/// creates it, but no acks=all write to it can succeed: said once, at creation, with the numbers.
fn warn_below_min_isr(topic: &str, replication_factor: usize, min_insync_replicas: u32) {
    if u32::try_from(replication_factor).unwrap_or(u32::MAX) < min_insync_replicas {
        tracing::warn!(
            topic,
            replication_factor,
            min_insync_replicas,
            "topic {topic} has replication factor {replication_factor}, below its \
             min.insync.replicas {min_insync_replicas}: every acks=all produce to it will be \
             refused with NOT_ENOUGH_REPLICAS"
        );
    }
}

fn checked_broker_lists(
    is_live: impl Fn(i32) -> bool,
    lists: impl Iterator<Item = Vec<i32>>,
    replication_factor: Option<usize>,
) -> Result<Vec<Vec<i32>>, AssignmentError> {
    let mut replicas: Vec<Vec<i32>> = Vec::new();
    for brokers in lists {
        if brokers.is_empty() {
            return Err(AssignmentError::NoBroker);
        }
        if let Some(unknown) = brokers.iter().find(|id| !is_live(**id)) {
            return Err(AssignmentError::Unregistered(*unknown));
        }
        let mut distinct = BTreeSet::new();
        if let Some(twice) = brokers.iter().find(|id| !distinct.insert(**id)) {
            return Err(AssignmentError::Twice(*twice));
        }
        let expected = replication_factor.or_else(|| replicas.first().map(Vec::len));
        if let Some(expected) = expected.filter(|n| *n != brokers.len()) {
            return Err(AssignmentError::Inconsistent {
                found: brokers.len(),
                expected,
            });
        }
        replicas.push(brokers);
    }
    Ok(replicas)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_lists_are_checked_as_kafka_checks_them() {
        let live = |id: i32| (1..=3).contains(&id);
        let lists = |lists: &[&[i32]]| lists.iter().map(|l| l.to_vec()).collect::<Vec<_>>();
        assert_eq!(
            checked_broker_lists(live, lists(&[&[1, 2], &[2, 3]]).into_iter(), None),
            Ok(lists(&[&[1, 2], &[2, 3]]))
        );
        let refused = |given: &[&[i32]], factor| {
            checked_broker_lists(live, lists(given).into_iter(), factor).unwrap_err()
        };
        assert_eq!(refused(&[&[]], None), AssignmentError::NoBroker);
        assert_eq!(refused(&[&[1, 9]], None), AssignmentError::Unregistered(9));
        assert_eq!(refused(&[&[2, 2]], None), AssignmentError::Twice(2));
        assert_eq!(
            refused(&[&[1, 2], &[3]], None).to_string(),
            "The manual partition assignment includes a partition with 1 replica(s), but this is \
             not consistent with previous partitions, which have 2 replica(s)."
        );
        assert_eq!(
            refused(&[&[1]], Some(2)),
            AssignmentError::Inconsistent {
                found: 1,
                expected: 2
            }
        );
        assert!(check_replication_factor(0).is_err());
        assert_eq!(check_replication_factor(3).ok(), Some(3));
    }
}
