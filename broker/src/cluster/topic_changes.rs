//! Topic changes through the metadata store (docs/design/cluster.md §2a, §3): CreateTopics,
//! CreatePartitions, the config alters and DeleteTopics on any broker write the store with
//! `skiff_cluster::topics`' guarded Txns, then wait (bounded) until this broker's image shows the
//! change and its logs follow, so a client that gets a success finds the topic here at once. The
//! single-node registry of earlier releases is migrated the same way at start.
//!
//! Must never: change a topic anywhere but in the store (the materializer makes the logs follow),
//! or wait without a deadline.

use std::collections::BTreeMap;
use std::time::Duration;

use skiff_cluster::controller::PARTITIONS_PER_TXN_MAX;
use skiff_cluster::records::{TopicRecord, TopicState};
use skiff_cluster::topics::{self, CreationProgress, TopicChange};
use skiff_cluster::{ClusterImage, Versioned};
use skiff_meta::{Txn, TxnResponse};

use super::{Cluster, ClusterError};
use crate::partition::materialized::TopicRecord as LocalTopicRecord;
use crate::partition::topics::{new_topic_id, TopicError};

/// Times a read-modify-write of a topic record is tried again after another writer changed the
/// record first (each try re-reads the image the failed compare left behind).
const TOPIC_CHANGE_ATTEMPTS_MAX: usize = 5;
/// The shortest wait a change gets for the image to show it, whatever the request's timeout says
/// (a timeout of 0 asks not to wait for the outcome, but the change itself must be answered).
const TOPIC_CHANGE_WAIT_MS_MIN: u64 = 1_000;
/// The longest wait, whatever the request's timeout says.
const TOPIC_CHANGE_WAIT_MS_MAX: u64 = 60_000;

/// How long the migration of one topic may take.
const MIGRATION_WAIT: Duration = Duration::from_secs(30);

/// How long a change with the request's `timeout_ms` waits for the image.
pub fn change_wait(timeout_ms: i32) -> Duration {
    let ms = u64::try_from(timeout_ms).unwrap_or(0);
    Duration::from_millis(ms.clamp(TOPIC_CHANGE_WAIT_MS_MIN, TOPIC_CHANGE_WAIT_MS_MAX))
}

fn pending(what: impl std::fmt::Display) -> TopicError {
    TopicError::MetadataPending(what.to_string())
}

impl Cluster {
    /// Reads the image.
    pub fn with_image<R>(&self, read: impl FnOnce(&ClusterImage) -> R) -> Option<R> {
        self.image.read().ok().map(|image| read(&image))
    }

    /// Submits one Txn within `wait`; a store error or a timeout is a retriable error.
    async fn submit(&self, txn: Txn, wait: Duration) -> Result<TxnResponse, TopicError> {
        match tokio::time::timeout(wait, self.store.txn(txn)).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(error)) => {
                self.store_error("topic change", &error);
                Err(pending(format!(
                    "metadata store {} unavailable: {error}",
                    self.address
                )))
            }
            Err(_) => {
                self.counters
                    .store_errors
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Err(pending(format!(
                    "metadata store {} did not answer within {} ms",
                    self.address,
                    wait.as_millis()
                )))
            }
        }
    }

    /// Waits until the image has reached `revision` and the logs followed it (the materializer
    /// reconciled at or past it).
    pub async fn wait_materialized(&self, revision: i64, wait: Duration) -> Result<(), TopicError> {
        let mut materialized = self.materialized.subscribe();
        let reached = tokio::time::timeout(wait, materialized.wait_for(|seen| *seen >= revision))
            .await
            .map(|seen| seen.map(|_| ()));
        match reached {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err(pending("the broker is shutting down")),
            Err(_) => Err(pending(format!(
                "the change is in the metadata store (revision {revision}) but this broker's \
                 image did not show it within {} ms",
                wait.as_millis()
            ))),
        }
    }

    /// Waits (bounded) until the image shows `name` ready, or being deleted, and the logs
    /// followed that revision. For a request that found the name taken in the store, or in the
    /// image, while this broker does not serve the topic yet: the materializer is behind the
    /// image, or the image behind the store (a broker just woken from a pause, say).
    pub async fn wait_topic_served(&self, name: &str, wait: Duration) -> Result<(), TopicError> {
        let revision = self
            .wait_for_image(wait, "the existing topic to be served here", |image| {
                image
                    .topics()
                    .get(name)
                    .is_some_and(|topic| topic.value.state != TopicState::Creating)
            })
            .await?;
        self.wait_materialized(revision, wait).await
    }

    /// Whether the image names partition `index` of the ready topic `name`: Kafka answers a
    /// request for a partition it knows of but does not serve NOT_LEADER_OR_FOLLOWER, not
    /// UNKNOWN_TOPIC_OR_PARTITION.
    pub fn knows_partition(&self, name: &str, index: i32) -> bool {
        self.with_image(|image| {
            image.ready_topic(name).is_some_and(|topic| {
                usize::try_from(index).is_ok_and(|index| index < topic.value.replicas.len())
            })
        })
        .unwrap_or(false)
    }

    /// Waits until `done` holds of the image; returns the image's revision then.
    async fn wait_for_image(
        &self,
        wait: Duration,
        what: &str,
        done: impl Fn(&ClusterImage) -> bool,
    ) -> Result<i64, TopicError> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut revisions = self.image_revision.subscribe();
        loop {
            let reached = self
                .with_image(|image| done(image).then(|| image.revision()))
                .flatten();
            if let Some(revision) = reached {
                return Ok(revision);
            }
            match tokio::time::timeout_at(deadline, revisions.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(pending("the broker is shutting down")),
                Err(_) => {
                    return Err(pending(format!(
                        "{what} did not complete within {} ms",
                        wait.as_millis()
                    )))
                }
            }
        }
    }

    /// The id (hex) of the topic named `name` in the image, in any state.
    fn topic_id_of(&self, name: &str) -> Option<String> {
        self.with_image(|image| image.topics().get(name).map(|t| t.value.topic_id.clone()))
            .flatten()
    }

    /// This broker's epoch, to stamp a creation with (the controller finishes it if that
    /// registration dies first).
    fn author_epoch(&self) -> Result<i64, TopicError> {
        self.session
            .lock()
            .ok()
            .and_then(|session| session.map(|s| s.broker_epoch))
            .ok_or_else(|| pending("this broker is not registered (its session is being renewed)"))
    }

    /// Creates `name` with `replicas` (from placement) and `configs` (validated by the caller).
    /// Returns the topic id (hex). TOPIC_ALREADY_EXISTS when the name is taken (also while a
    /// topic of that name is being created or deleted).
    pub async fn create_topic(
        &self,
        name: &str,
        replicas: Vec<Vec<i32>>,
        configs: BTreeMap<String, String>,
        wait: Duration,
    ) -> Result<String, TopicError> {
        let record = TopicRecord {
            topic_id: new_topic_id(),
            state: TopicState::Ready,
            replicas,
            configs,
            author: self.node_id,
            author_epoch: self.author_epoch()?,
        };
        let (topic_id, revision) = self.write_creation(name, record, wait).await?;
        self.wait_materialized(revision, wait).await?;
        Ok(topic_id)
    }

    /// Writes a creation; returns the topic id and the revision at which the image shows the
    /// topic ready.
    async fn write_creation(
        &self,
        name: &str,
        record: TopicRecord,
        wait: Duration,
    ) -> Result<(String, i64), TopicError> {
        let topic_id = record.topic_id.clone();
        let states = self
            .with_image(|image| topics::new_partition_states(image, name, 0, &record.replicas))
            .ok_or_else(|| pending("image unavailable"))?;
        let mut change =
            TopicChange::new(&self.layout, name, record, states, PARTITIONS_PER_TXN_MAX);
        while let Some(txn) = change.next_txn() {
            let response = self.submit(txn, wait).await?;
            match change.on_response(&response) {
                CreationProgress::Continue => {}
                CreationProgress::Done => return Ok((topic_id, response.revision)),
                CreationProgress::AlreadyExists => return Err(TopicError::AlreadyExists),
                CreationProgress::Interrupted => break,
            }
        }
        // The controller took the creation over (this broker looked dead to it) or the topic
        // was deleted meanwhile: the image says which.
        let revision = self
            .wait_for_image(wait, "the topic creation", |image| {
                image
                    .ready_topic(name)
                    .is_some_and(|t| t.value.topic_id == topic_id)
                    || image
                        .topics()
                        .get(name)
                        .is_none_or(|t| t.value.topic_id != topic_id)
            })
            .await?;
        match self.with_image(|image| image.ready_topic(name).map(|t| t.value.topic_id.clone())) {
            Some(Some(id)) if id == topic_id => Ok((topic_id, revision)),
            _ => Err(pending("the topic was deleted while it was being created")),
        }
    }

    /// A read-modify-write of a ready topic's record: `txn_for` builds the Txn from the record as
    /// the image has it (or refuses); tried again when another writer changed the record first.
    async fn change_topic(
        &self,
        name: &str,
        wait: Duration,
        txn_for: impl Fn(
            &ClusterImage,
            &Versioned<TopicRecord>,
        ) -> Result<Option<TopicChangeTxns>, TopicError>,
    ) -> Result<(), TopicError> {
        for _ in 0..TOPIC_CHANGE_ATTEMPTS_MAX {
            let planned = self
                .with_image(|image| match image.ready_topic(name) {
                    Some(seen) => txn_for(image, seen),
                    None => Err(TopicError::Unknown),
                })
                .ok_or_else(|| pending("image unavailable"))??;
            let Some(mut planned) = planned else {
                return Ok(()); // nothing to change
            };
            let mut last = None;
            let mut interrupted = false;
            loop {
                let txn = match &mut planned {
                    TopicChangeTxns::One(txn) => txn.take(),
                    TopicChangeTxns::Steps(change) => change.next_txn(),
                };
                let Some(txn) = txn else { break };
                let response = self.submit(txn, wait).await?;
                last = Some(response.revision);
                let progress = match &mut planned {
                    TopicChangeTxns::One(_) if response.succeeded => CreationProgress::Done,
                    TopicChangeTxns::One(_) => CreationProgress::Interrupted,
                    TopicChangeTxns::Steps(change) => change.on_response(&response),
                };
                match progress {
                    CreationProgress::Continue => {}
                    CreationProgress::Done => break,
                    CreationProgress::AlreadyExists | CreationProgress::Interrupted => {
                        interrupted = true;
                        break;
                    }
                }
            }
            let revision = last.unwrap_or(0);
            if !interrupted {
                return self.wait_materialized(revision, wait).await;
            }
            // Another writer was first: wait for the image to show what it did, then re-plan.
            let mut revisions = self.image_revision.subscribe();
            let caught_up =
                tokio::time::timeout(wait, revisions.wait_for(|seen| *seen >= revision))
                    .await
                    .map(|seen| seen.map(|_| ()));
            if !matches!(caught_up, Ok(Ok(()))) {
                return Err(pending("the topic kept changing and the image fell behind"));
            }
        }
        Err(pending(format!(
            "the topic changed under {TOPIC_CHANGE_ATTEMPTS_MAX} tries in a row"
        )))
    }

    /// Grows `name` to the partitions `assign` gives: called with the topic's current record, it
    /// returns the whole assignment (the current partitions' replicas first, unchanged), or
    /// `None` when the topic already has that many.
    pub async fn grow_topic(
        &self,
        name: &str,
        wait: Duration,
        assign: impl Fn(&TopicRecord) -> Result<Option<Vec<Vec<i32>>>, TopicError>,
    ) -> Result<(), TopicError> {
        let layout = self.layout.clone();
        self.change_topic(name, wait, |image, seen| {
            let Some(replicas) = assign(&seen.value)? else {
                return Ok(None);
            };
            let first = seen.value.replicas.len();
            let added = match replicas.split_at_checked(first) {
                Some((current, added))
                    if !added.is_empty() && current == seen.value.replicas.as_slice() =>
                {
                    added
                }
                _ => {
                    return Err(TopicError::InvalidPartitions(
                        i32::try_from(replicas.len()).unwrap_or(i32::MAX),
                    ))
                }
            };
            let states = topics::new_partition_states(image, name, first, added);
            Ok(Some(TopicChangeTxns::Steps(TopicChange::grow(
                &layout,
                name,
                seen,
                replicas,
                states,
                PARTITIONS_PER_TXN_MAX,
            ))))
        })
        .await
    }

    /// Replaces `name`'s overrides with what `alter` makes of the current ones (validated by it),
    /// or changes nothing when it returns `None`.
    pub async fn alter_topic_configs(
        &self,
        name: &str,
        wait: Duration,
        alter: impl Fn(
            &BTreeMap<String, String>,
        ) -> Result<Option<BTreeMap<String, String>>, TopicError>,
    ) -> Result<(), TopicError> {
        let layout = self.layout.clone();
        self.change_topic(name, wait, |_, seen| {
            Ok(alter(&seen.value.configs)?.map(|configs| {
                TopicChangeTxns::One(Some(topics::replace_configs(&layout, name, seen, configs)))
            }))
        })
        .await
    }

    /// Marks `name` for deletion and waits until the controller removed it and the logs here
    /// followed.
    pub async fn delete_topic(&self, name: &str, wait: Duration) -> Result<(), TopicError> {
        if topics::is_internal(name) {
            return Err(TopicError::Internal(name.to_owned()));
        }
        let topic_id = self.topic_id_of(name).ok_or(TopicError::Unknown)?;
        let already = self
            .with_image(|image| {
                image
                    .topics()
                    .get(name)
                    .is_some_and(|t| t.value.state == TopicState::Deleting)
            })
            .unwrap_or(false);
        if !already {
            let layout = self.layout.clone();
            self.change_topic(name, wait, |_, seen| {
                if seen.value.topic_id != topic_id {
                    return Ok(None); // deleted and created again meanwhile: ours is gone
                }
                Ok(Some(TopicChangeTxns::One(Some(topics::request_deletion(
                    &layout, name, seen,
                )))))
            })
            .await
            .or_else(|error| match error {
                // Deleted (or being deleted) by someone else meanwhile.
                TopicError::Unknown => Ok(()),
                other => Err(other),
            })?;
        }
        let revision = self
            .wait_for_image(wait, "the topic deletion", |image| {
                image
                    .topics()
                    .get(name)
                    .is_none_or(|t| t.value.topic_id != topic_id)
            })
            .await?;
        self.wait_materialized(revision, wait).await
    }

    /// Writes the topics of a single-node registry (`skiff-topics.json` of an earlier release)
    /// into the store, each with its id, overrides and partition count, every partition on this
    /// broker. A topic the store already has with the same id was migrated before; with another
    /// id, the start is refused (nothing is deleted or overwritten).
    pub async fn migrate(&self, legacy: &[LocalTopicRecord]) -> Result<usize, ClusterError> {
        let mut migrated = 0;
        let mut last_revision = 0;
        for old in legacy {
            let in_store = self.topic_id_of(&old.name);
            match in_store {
                Some(id) if id == old.topic_id => continue,
                Some(id) => {
                    return Err(ClusterError::MigrationConflict {
                        topic: old.name.clone(),
                        file_id: old.topic_id.clone(),
                        store_id: id,
                    })
                }
                None => {}
            }
            let record = TopicRecord {
                topic_id: old.topic_id.clone(),
                state: TopicState::Ready,
                // The registry's replicas always meant "this node" (its node.id may have been
                // changed since).
                replicas: vec![vec![self.node_id]; old.replicas.len()],
                configs: old.configs.clone(),
                author: self.node_id,
                author_epoch: self
                    .author_epoch()
                    .map_err(|e| ClusterError::Migration(e.to_string()))?,
            };
            match self.write_creation(&old.name, record, MIGRATION_WAIT).await {
                Ok((_, revision)) => {
                    migrated += 1;
                    last_revision = last_revision.max(revision);
                }
                // Raced by another broker: the loop's check tells which id it has.
                Err(TopicError::AlreadyExists) => {
                    let id = self.topic_id_of(&old.name);
                    if id.as_deref() != Some(old.topic_id.as_str()) {
                        return Err(ClusterError::MigrationConflict {
                            topic: old.name.clone(),
                            file_id: old.topic_id.clone(),
                            store_id: id.unwrap_or_default(),
                        });
                    }
                }
                Err(error) => {
                    return Err(ClusterError::Migration(format!("{}: {error}", old.name)))
                }
            }
        }
        let mut revisions = self.image_revision.subscribe();
        let caught_up = tokio::time::timeout(
            MIGRATION_WAIT,
            revisions.wait_for(|seen| *seen >= last_revision),
        )
        .await
        .map(|seen| seen.map(|_| ()));
        match caught_up {
            Ok(Ok(_)) => Ok(migrated),
            _ => Err(ClusterError::Migration(format!(
                "the image did not reach the migration's revision {last_revision}"
            ))),
        }
    }
}

/// What one try of a read-modify-write submits.
enum TopicChangeTxns {
    /// A single guarded Txn.
    One(Option<Txn>),
    /// A growth in steps.
    Steps(TopicChange),
}
