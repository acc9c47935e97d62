//! WriteTxnMarkers (v1): the transaction coordinator's end-transaction markers, one per producer,
//! each for a list of partitions. Per partition, as Kafka's `ReplicaManager` appends a marker
//! with the coordinator's origin: the marker is appended through the partition as its leader
//! ([`crate::partition::partition::Partition::append_marker`]: checked against the producer's
//! epoch and the last coordinator epoch, the transaction ended, an ABORT's index entry written),
//! stamped with the leader epoch, and answered once the high watermark passed it (acks=all), or
//! REQUEST_TIMED_OUT after [`MARKER_REPLICATION_TIMEOUT_MS`].
//!
//! Errors are per partition, Kafka's: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
//! NOT_ENOUGH_REPLICAS, INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, REQUEST_TIMED_OUT,
//! KAFKA_STORAGE_ERROR. Authorization: ClusterAction on the cluster (the coordinator's broker, or
//! an admin's `kafka-transactions.sh abort`); without it every partition gets
//! CLUSTER_AUTHORIZATION_FAILED.
//!
//! Markers in `__consumer_offsets` end transactional offset commits: once replicated, the group
//! coordinator is told (`GroupHandle::complete_transaction`) and answers when it applied it.
//!
//! Must never: answer a partition before its marker is replicated, or append a marker to a
//! partition this broker does not lead at the image's epoch.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{RequestHeader, WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use skiff_cluster::replica::Acks;
use skiff_protocol::records::txn::{EndTxnMarker, MarkerType};

use super::common::errors::storage_error_code;
use super::error_code;
use crate::context::Ctx;
use crate::partition::partition::txn::MarkerAppend;
use crate::partition::partition::AppendError;
use crate::partition::replica::ReplicationWait;
use crate::partition::topics::Partition;
use crate::security::acl::Operation;
use crate::security::session::Session;

/// How long a marker waits for the high watermark to pass it before its partition answers
/// REQUEST_TIMED_OUT (Kafka waits `request.timeout.ms`, 30 s by default); the coordinator retries.
pub(crate) const MARKER_REPLICATION_TIMEOUT_MS: u64 = 30_000;
/// A backstop beyond the replica machine's own deadline (which answers REQUEST_TIMED_OUT at the
/// leader's next poll); never the answer in a healthy broker.
const REPLICATION_WAIT_GRACE: Duration = Duration::from_secs(5);
/// The bytes of one marker batch, as the log's may-block estimate needs them (61-byte header and
/// one record of a few bytes).
const MARKER_BATCH_BYTES: u64 = 90;
/// The name of the group coordinator's topic.
const GROUP_TOPIC: &str = "__consumer_offsets";

/// One partition's appended marker waiting for replication.
struct Pending {
    at: (usize, usize, usize),
    marker: EndTxnMarker,
    wait: ReplicationWait,
}

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let access = ctx.access(session, header.request_api_key);
    let authorized = access.allows_cluster(Operation::ClusterAction);
    let mut results = Vec::with_capacity(request.markers.len());
    let mut pending = Vec::new();
    for (marker_index, marker) in request.markers.into_iter().enumerate() {
        let end = EndTxnMarker {
            producer_id: marker.producer_id.0,
            producer_epoch: marker.producer_epoch,
            coordinator_epoch: marker.coordinator_epoch,
            marker_type: if marker.transaction_result {
                MarkerType::Commit
            } else {
                MarkerType::Abort
            },
        };
        let mut topics = Vec::with_capacity(marker.topics.len());
        for (topic_index, topic) in marker.topics.into_iter().enumerate() {
            let mut partitions = Vec::with_capacity(topic.partition_indexes.len());
            for (partition_slot, index) in topic.partition_indexes.into_iter().enumerate() {
                let outcome = if authorized {
                    append(ctx, topic.name.as_str(), index, end).await
                } else {
                    Err(error_code::CLUSTER_AUTHORIZATION_FAILED)
                };
                let error_code = match outcome {
                    Ok(wait) => {
                        pending.push(Pending {
                            at: (marker_index, topic_index, partition_slot),
                            marker: end,
                            wait,
                        });
                        error_code::NONE
                    }
                    Err(code) => code,
                };
                partitions.push(
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(index)
                        .with_error_code(error_code),
                );
            }
            topics.push(
                WritableTxnMarkerTopicResult::default()
                    .with_name(topic.name)
                    .with_partitions(partitions),
            );
        }
        results.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(marker.producer_id)
                .with_topics(topics),
        );
    }
    await_replication(ctx, &mut results, pending).await;
    WriteTxnMarkersResponse::default().with_markers(results)
}

/// Waits for every appended marker's replication together and writes each outcome into its
/// partition's result; a `__consumer_offsets` marker then completes the group coordinator's
/// transactional offsets.
async fn await_replication(
    ctx: &Ctx,
    results: &mut [WritableTxnMarkerResult],
    pending: Vec<Pending>,
) {
    let wait_max = Duration::from_millis(MARKER_REPLICATION_TIMEOUT_MS) + REPLICATION_WAIT_GRACE;
    for Pending { at, marker, wait } in pending {
        let error = match tokio::time::timeout(wait_max, wait).await {
            Ok(Ok(error)) => error.map(|code| code.code()),
            // The replica went away (its topic deleted, leadership lost) without answering.
            Ok(Err(_)) => Some(error_code::NOT_LEADER_OR_FOLLOWER),
            Err(_) => Some(error_code::REQUEST_TIMED_OUT),
        };
        let (marker_index, topic_index, partition_slot) = at;
        let Some(result) = results.get_mut(marker_index) else {
            continue;
        };
        let Some(topic) = result.topics.get_mut(topic_index) else {
            continue;
        };
        let is_group_topic = topic.name.as_str() == GROUP_TOPIC;
        let Some(partition) = topic.partitions.get_mut(partition_slot) else {
            continue;
        };
        match error {
            Some(code) => partition.error_code = code,
            None if is_group_topic => {
                // The group coordinator makes the producer's pending offsets committed (COMMIT)
                // or drops them (ABORT). A stopped task (shutdown) is NOT_COORDINATOR: the
                // coordinator retries, and the next leader replays the marker from the log.
                let applied = ctx
                    .groups
                    .complete_transaction(
                        partition.partition_index,
                        marker.producer_id,
                        marker.producer_epoch,
                        marker.marker_type,
                    )
                    .await;
                if applied.is_none() {
                    partition.error_code = error_code::NOT_COORDINATOR;
                }
            }
            None => {}
        }
    }
}

/// Appends `marker` to partition `index` of `topic` as its leader; returns the wait for its
/// replication.
async fn append(
    ctx: &Ctx,
    topic: &str,
    index: i32,
    marker: EndTxnMarker,
) -> Result<ReplicationWait, i16> {
    let Some(found) = ctx.topics.get(topic) else {
        return Err(super::common::leadership::unserved_partition(
            ctx, topic, index,
        ));
    };
    let (partition, image_epoch) = super::common::leadership::led_partition_at(ctx, &found, index)?;
    let partition = partition.clone();
    let leader_epoch = partition
        .admit_produce(Acks::All)
        .map_err(|error| error.code())?;
    if leader_epoch != image_epoch {
        return Err(error_code::NOT_LEADER_OR_FOLLOWER);
    }
    let now_ms = ctx.now_ms();
    let append = MarkerAppend {
        marker,
        leader_epoch,
        now_ms,
        timeout_ms: MARKER_REPLICATION_TIMEOUT_MS,
    };
    let may_block = partition
        .log()
        .append_may_block(MARKER_BATCH_BYTES, 1, now_ms)
        .map_err(|error| storage_error_code(&error))?;
    if !may_block {
        return append_now(&partition, append, ctx);
    }
    let proposals = ctx.isr_proposals.clone();
    tokio::task::spawn_blocking(move || {
        partition
            .append_marker(append, &proposals)
            .map(|appended| appended.replication)
            .map_err(|error| append_error_code(&error))
    })
    .await
    .unwrap_or(Err(error_code::KAFKA_STORAGE_ERROR))
}

/// Appends on this task (a page-cache copy).
fn append_now(
    partition: &Arc<Partition>,
    append: MarkerAppend,
    ctx: &Ctx,
) -> Result<ReplicationWait, i16> {
    partition
        .append_marker(append, &ctx.isr_proposals)
        .map(|appended| appended.replication)
        .map_err(|error| append_error_code(&error))
}

/// The partition's error code for a marker append that stored nothing.
fn append_error_code(error: &AppendError) -> i16 {
    match error {
        AppendError::Producer(error) => error.error_code(),
        AppendError::Storage(error) => storage_error_code(error),
        AppendError::RetryWithNewBatches
        | AppendError::ProducersPoisoned
        | AppendError::Marker(_) => error_code::KAFKA_STORAGE_ERROR,
    }
}
