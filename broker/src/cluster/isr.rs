//! The leader's writes of its partitions' ISR (docs/design/replication.md §4): a compare-and-set of
//! the partition key on the `mod_revision` its replica read, and on this broker's own registration
//! still being the one the session holds, so a broker whose lease lapsed (a zombie leader) cannot
//! write.
//!
//! Must never: retry a refused write on its own (the replica re-reads through the watch and
//! proposes again), or write a state the replica machine did not propose.

use std::time::Duration;

use skiff_cluster::records::{encode, PartitionState};
use skiff_cluster::Key;
use skiff_meta::{Compare, CompareOp, Txn, TxnOp};

use super::Cluster;

/// How long an ISR write may take before it counts as failed (the machine proposes again).
const ISR_WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// What became of an ISR proposal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsrOutcome {
    /// The store took it (the watch delivers the new state).
    Written,
    /// A compare failed: the state moved (another ISR change, an election) or this broker's
    /// registration is not the one its session holds.
    Refused,
    /// Not sent: a member it adds is not running in the image (unregistered, or in controlled
    /// shutdown, which the controller just took out of the ISR). Kafka's leader refuses to add
    /// such a replica too (KIP-841); the follower keeps fetching and is proposed again each time.
    Ineligible,
    /// The store did not answer: maybe written. The replica proposes again after the watch
    /// delivered whatever happened; a stale retry fails its compare, so nothing is written twice.
    Unknown,
}

impl Cluster {
    /// Writes `state` over partition `partition` of `topic` if its key is still at
    /// `expected_revision` and this broker is still registered under its session.
    pub async fn propose_partition_state(
        &self,
        topic: &str,
        partition: i32,
        expected_revision: i64,
        state: &PartitionState,
    ) -> IsrOutcome {
        let Some(session) = self.session.lock().ok().and_then(|s| *s) else {
            return IsrOutcome::Refused;
        };
        let key = self
            .layout
            .key(&Key::Partition(topic.to_owned(), partition));
        let mut compares = vec![
            Compare::mod_revision(key.clone(), CompareOp::Equal, expected_revision),
            Compare::create_revision(
                self.layout.key(&Key::Broker(self.node_id)),
                CompareOp::Equal,
                session.broker_epoch,
            ),
        ];
        // A member joining the ISR must be registered and running, under the registration this
        // broker saw (Kafka's controller refuses fenced brokers in AlterPartition): a follower
        // that died since its last fetch is not added back, nor one shutting down (the
        // controller takes those out; adding them back would have acks=all wait on them).
        let current = self.partition_state(topic, partition);
        for joining in state
            .isr
            .iter()
            .filter(|id| current.as_ref().is_none_or(|(s, _)| !s.isr.contains(id)))
        {
            let Some(registration_revision) = self
                .with_image(|image| {
                    image
                        .brokers()
                        .get(joining)
                        .filter(|_| image.is_running(*joining))
                        .map(|registration| registration.mod_revision)
                })
                .flatten()
            else {
                return IsrOutcome::Ineligible;
            };
            compares.push(Compare::mod_revision(
                self.layout.key(&Key::Broker(*joining)),
                CompareOp::Equal,
                registration_revision,
            ));
        }
        let txn = Txn::new()
            .when(compares)
            .and_then(vec![TxnOp::put(key, encode(state))]);
        match tokio::time::timeout(ISR_WRITE_TIMEOUT, self.store.txn(txn)).await {
            Ok(Ok(response)) if response.succeeded => IsrOutcome::Written,
            Ok(Ok(_)) => IsrOutcome::Refused,
            Ok(Err(error)) => {
                self.store_error("ISR change", &error);
                IsrOutcome::Unknown
            }
            Err(_) => {
                self.counters
                    .store_errors
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                IsrOutcome::Unknown
            }
        }
    }

    /// The state of partition `partition` of `topic` in the image, with its `mod_revision`.
    pub fn partition_state(&self, topic: &str, partition: i32) -> Option<(PartitionState, i64)> {
        self.with_image(|image| {
            image
                .partition(topic, partition)
                .map(|versioned| (versioned.value.clone(), versioned.mod_revision))
        })
        .flatten()
    }

    /// The address of broker `id`'s listener named `listener` (or its first listener when it has
    /// none of that name), if it is registered: where a follower fetches from its leader.
    pub fn broker_address(&self, id: i32, listener: &str) -> Option<(String, u16, String)> {
        self.with_image(|image| {
            let registration = &image.brokers().get(&id)?.value;
            let endpoint = registration
                .listeners
                .iter()
                .find(|endpoint| endpoint.name == listener)
                .or_else(|| registration.listeners.first())?;
            Some((
                endpoint.host.clone(),
                endpoint.port,
                endpoint.security_protocol.clone(),
            ))
        })
        .flatten()
    }
}
