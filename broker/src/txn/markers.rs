//! The marker writer (Kafka's `TransactionMarkerChannelManager`): once a transaction is in
//! PrepareCommit or PrepareAbort, WriteTxnMarkers v1 goes to the leader of each of its partitions
//! (this broker included, over the same inter-broker client), one request per leader with all the
//! partitions it leads. Retriable answers and leader moves are retried with a growing pause; a
//! partition whose topic is gone counts as done (Kafka drops it too); TRANSACTION_COORDINATOR_FENCED
//! or INVALID_PRODUCER_EPOCH, or this broker no longer leading the transaction's state partition
//! at the coordinator epoch, stops the job (the new coordinator resends after its load). When
//! every partition answered, the driver is told (`Event::MarkersWritten`) and writes the
//! Complete record. Every job stops when the broker shuts down.
//!
//! Bounds: at most [`MARKER_JOBS_MAX`] transactions' markers in flight at once (the others wait
//! for a slot); a response body at most [`MARKER_RESPONSE_BYTES_MAX`] bytes, decoded by the
//! protocol crate's bounded decoder.
//!
//! Must never: report a transaction's markers written before every partition answered NONE (or
//! is gone), or keep retrying after this broker stopped coordinating it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{ApiKey, ProducerId, TopicName, WriteTxnMarkersRequest};
use kafka_protocol::protocol::StrBytes;
use skiff_cluster::records::NO_LEADER;
use skiff_cluster::topics::TRANSACTION_STATE_TOPIC;
use skiff_protocol::error_code::ErrorCode;
use skiff_protocol::records::txn::MarkerType;
use skiff_protocol::responses::txn_peer::{
    decode_write_txn_markers_response, WRITE_TXN_MARKERS_VERSION,
};
use skiff_protocol::DecodeError;
use skiff_txn::TopicPartition;
use tokio::sync::{mpsc, watch, Semaphore};

use super::driver::Event;
use crate::cluster::roles::Role;
use crate::cluster::ClusterHandle;
use crate::interbroker::InterBrokerClient;

/// Transactions whose markers are written at once; more wait for a slot.
pub const MARKER_JOBS_MAX: usize = 256;
/// Largest WriteTxnMarkers response read: an error code per partition of one transaction.
pub const MARKER_RESPONSE_BYTES_MAX: usize = 4 * 1024 * 1024;
/// First pause before a retry; doubles up to [`MARKER_RETRY_PAUSE_MAX`].
const MARKER_RETRY_PAUSE_MIN: Duration = Duration::from_millis(50);
/// Longest pause between retries.
const MARKER_RETRY_PAUSE_MAX: Duration = Duration::from_secs(2);

/// One transaction's markers to write.
#[derive(Debug, Clone)]
pub struct MarkerJob {
    /// The transactional id.
    pub transactional_id: String,
    /// The producer id of the ending transaction.
    pub producer_id: i64,
    /// The epoch the markers carry.
    pub producer_epoch: i16,
    /// COMMIT or ABORT.
    pub marker: MarkerType,
    /// The coordinator epoch the markers carry.
    pub coordinator_epoch: i32,
    /// The transaction's `__transaction_state` partition (the job stops when it is led elsewhere).
    pub state_partition: i32,
    /// The transaction's partitions.
    pub partitions: Vec<TopicPartition>,
}

/// Starts marker jobs, bounded by [`MARKER_JOBS_MAX`].
#[derive(Clone)]
pub(crate) struct MarkerWriter {
    client: InterBrokerClient,
    cluster: ClusterHandle,
    slots: Arc<Semaphore>,
    /// Turns true when the broker shuts down: every job stops (the next coordinator resends).
    shutdown: watch::Receiver<bool>,
}

/// What a partition's answer means for its marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Written,
    Retry,
    /// The coordinator epoch or the producer epoch is stale: another coordinator took over.
    Fenced,
}

fn classify(code: ErrorCode) -> Answer {
    match code {
        ErrorCode::NONE => Answer::Written,
        ErrorCode::INVALID_PRODUCER_EPOCH | ErrorCode::TRANSACTION_COORDINATOR_FENCED => {
            Answer::Fenced
        }
        // Markers of a topic whose partitions cannot take them (an old message format) are
        // dropped, as Kafka does; anything else is retried (leader moves, ISR too small, the
        // partition not known yet on the new leader, timeouts).
        ErrorCode::UNSUPPORTED_FOR_MESSAGE_FORMAT => Answer::Written,
        _ => Answer::Retry,
    }
}

impl MarkerWriter {
    pub(crate) fn new(
        client: InterBrokerClient,
        cluster: ClusterHandle,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        Self {
            client,
            cluster,
            slots: Arc::new(Semaphore::new(MARKER_JOBS_MAX)),
            shutdown,
        }
    }

    /// Writes `job`'s markers beside the caller, then sends `Event::MarkersWritten` to `done`.
    pub(crate) fn start(&self, job: MarkerJob, done: mpsc::UnboundedSender<Event>) {
        let writer = self.clone();
        let mut shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            let written = async {
                let Ok(_slot) = writer.slots.clone().acquire_owned().await else {
                    return false;
                };
                writer.write(&job).await
            };
            let stopped = shutdown.wait_for(|stopping| *stopping);
            let written = tokio::select! {
                written = written => written,
                _ = stopped => false,
            };
            if written {
                let _ = done.send(Event::MarkersWritten {
                    transactional_id: job.transactional_id,
                    producer_id: job.producer_id,
                    producer_epoch: job.producer_epoch,
                    coordinator_epoch: job.coordinator_epoch,
                });
            }
        });
    }

    /// Whether this broker still coordinates the job's transaction at its coordinator epoch.
    fn still_coordinating(&self, job: &MarkerJob) -> bool {
        self.cluster
            .role(TRANSACTION_STATE_TOPIC, job.state_partition)
            == Role::Leader {
                leader_epoch: job.coordinator_epoch,
            }
    }

    /// Retries until every partition has its marker (true), or the job is fenced (false).
    async fn write(&self, job: &MarkerJob) -> bool {
        let mut remaining: BTreeSet<TopicPartition> = job.partitions.iter().cloned().collect();
        let mut pause = MARKER_RETRY_PAUSE_MIN;
        loop {
            if !self.still_coordinating(job) {
                tracing::debug!(id = %job.transactional_id, "markers abandoned: no longer the coordinator");
                return false;
            }
            for (leader, partitions) in self.leaders(&mut remaining) {
                match self.send(job, leader, &partitions).await {
                    Ok(answers) => {
                        for (tp, code) in answers {
                            match classify(code) {
                                Answer::Written => {
                                    remaining.remove(&tp);
                                }
                                Answer::Fenced => {
                                    tracing::info!(id = %job.transactional_id, ?code, "markers fenced");
                                    return false;
                                }
                                Answer::Retry => {}
                            }
                        }
                    }
                    Err(error) => {
                        tracing::debug!(leader, %error, "WriteTxnMarkers failed; retrying")
                    }
                }
            }
            if remaining.is_empty() {
                return true;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MARKER_RETRY_PAUSE_MAX);
        }
    }

    /// The leader of each remaining partition, grouped; partitions whose topic or partition is
    /// gone are removed from `remaining` (nothing to mark), those without a leader wait.
    fn leaders(
        &self,
        remaining: &mut BTreeSet<TopicPartition>,
    ) -> BTreeMap<i32, Vec<TopicPartition>> {
        let mut states: BTreeMap<String, BTreeMap<i32, i32>> = BTreeMap::new();
        let mut by_leader: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
        remaining.retain(|tp| {
            let leaders = states.entry(tp.topic.clone()).or_insert_with(|| {
                self.cluster
                    .partition_states(&tp.topic)
                    .into_iter()
                    .map(|(partition, state)| (partition, state.leader))
                    .collect()
            });
            match leaders.get(&tp.partition) {
                None => false,
                Some(&leader) => {
                    if leader != NO_LEADER {
                        by_leader.entry(leader).or_default().push(tp.clone());
                    }
                    true
                }
            }
        });
        by_leader
    }

    async fn send(
        &self,
        job: &MarkerJob,
        leader: i32,
        partitions: &[TopicPartition],
    ) -> Result<Vec<(TopicPartition, ErrorCode)>, MarkerError> {
        let request = marker_request(job, partitions);
        let body = self
            .client
            .call(
                leader,
                ApiKey::WriteTxnMarkers,
                WRITE_TXN_MARKERS_VERSION,
                &request,
                MARKER_RESPONSE_BYTES_MAX,
            )
            .await
            .map_err(|error| MarkerError::Call(error.to_string()))?;
        let response = decode_write_txn_markers_response(&body, WRITE_TXN_MARKERS_VERSION)?;
        Ok(answers_for(job.producer_id, response))
    }
}

/// Each partition's answer for `producer_id`'s marker.
fn answers_for(
    producer_id: i64,
    response: kafka_protocol::messages::WriteTxnMarkersResponse,
) -> Vec<(TopicPartition, ErrorCode)> {
    response
        .markers
        .into_iter()
        .filter(|marker| marker.producer_id.0 == producer_id)
        .flat_map(|marker| marker.topics)
        .flat_map(|topic| {
            let name = topic.name.to_string();
            topic.partitions.into_iter().map(move |partition| {
                (
                    TopicPartition::new(name.clone(), partition.partition_index),
                    ErrorCode(partition.error_code),
                )
            })
        })
        .collect()
}

/// Why one WriteTxnMarkers exchange failed (the job retries).
#[derive(Debug, thiserror::Error)]
enum MarkerError {
    #[error("inter-broker call: {0}")]
    Call(String),
    #[error("WriteTxnMarkers response: {0}")]
    Decode(#[from] DecodeError),
}

/// WriteTxnMarkers v1 for `partitions` of `job`.
fn marker_request(job: &MarkerJob, partitions: &[TopicPartition]) -> WriteTxnMarkersRequest {
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        topics.entry(&tp.topic).or_default().push(tp.partition);
    }
    let topics = topics
        .into_iter()
        .map(|(topic, indexes)| {
            WritableTxnMarkerTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partition_indexes(indexes)
        })
        .collect();
    WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
        .with_producer_id(ProducerId(job.producer_id))
        .with_producer_epoch(job.producer_epoch)
        .with_transaction_result(job.marker == MarkerType::Commit)
        .with_topics(topics)
        .with_coordinator_epoch(job.coordinator_epoch)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::write_txn_markers_response::{
        WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
    };
    use kafka_protocol::messages::WriteTxnMarkersResponse;
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn answers_are_read_per_partition_for_the_job_producer_only() {
        let response = WriteTxnMarkersResponse::default().with_markers(vec![
            WritableTxnMarkerResult::default()
                .with_producer_id(ProducerId(9))
                .with_topics(vec![WritableTxnMarkerTopicResult::default()
                    .with_name(TopicName(StrBytes::from_static_str("t")))
                    .with_partitions(vec![
                        WritableTxnMarkerPartitionResult::default()
                            .with_partition_index(0)
                            .with_error_code(0),
                        WritableTxnMarkerPartitionResult::default()
                            .with_partition_index(3)
                            .with_error_code(6),
                    ])]),
            WritableTxnMarkerResult::default().with_producer_id(ProducerId(10)),
        ]);
        let mut body = BytesMut::new();
        response.encode(&mut body, 1).expect("encode");
        let decoded = decode_write_txn_markers_response(&body.freeze(), 1).expect("decode");
        assert_eq!(
            answers_for(9, decoded),
            vec![
                (TopicPartition::new("t", 0), ErrorCode::NONE),
                (
                    TopicPartition::new("t", 3),
                    ErrorCode::NOT_LEADER_OR_FOLLOWER
                ),
            ]
        );
    }

    #[test]
    fn answers_are_classified_as_kafka_does() {
        assert_eq!(classify(ErrorCode::NONE), Answer::Written);
        assert_eq!(classify(ErrorCode::NOT_LEADER_OR_FOLLOWER), Answer::Retry);
        assert_eq!(
            classify(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION),
            Answer::Retry
        );
        assert_eq!(
            classify(ErrorCode::TRANSACTION_COORDINATOR_FENCED),
            Answer::Fenced
        );
        assert_eq!(classify(ErrorCode::INVALID_PRODUCER_EPOCH), Answer::Fenced);
    }
}
