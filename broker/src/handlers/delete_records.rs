//! DeleteRecords: raises each partition's log start offset (Kafka's `kafka-delete-records`).
//! Each topic needs Delete (TOPIC_AUTHORIZATION_FAILED for its partitions otherwise); an unknown
//! partition gets UNKNOWN_TOPIC_OR_PARTITION. The offset −1 means the high watermark (the log end
//! on one node); an offset above it, or any other negative one, is OFFSET_OUT_OF_RANGE, as in
//! Kafka's `UnifiedLog.maybeIncrementLogStartOffset`. The answer's low watermark is the log start
//! offset afterwards (−1 with an error). The new log start is in memory when it answers, and
//! written by the next periodic offset checkpoint (`log.flush.offset.checkpoint.interval.ms`)
//! or the clean shutdown, as Kafka's `log-start-offset-checkpoint` is: a power cut before then
//! may bring back the records between the checkpointed start and this one (the segments deleted
//! wholly below it stay deleted), never a start below the checkpointed one
//! (docs/operating/durability.md). A topic whose `cleanup.policy` lacks `delete` (compact only)
//! answers POLICY_VIOLATION, as Kafka does.
//!
//! Must never: lower a log start offset, or answer success before the segments it deleted are
//! unlinked.

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse, RequestHeader};

use super::error_code;
use crate::context::Ctx;
use crate::security::acl::{Operation, ResourceType};
use crate::security::session::Session;

/// The offset that names the high watermark.
const HIGH_WATERMARK: i64 = -1;
/// The low watermark answered with an error (Kafka's
/// `DeleteRecordsResponse.INVALID_LOW_WATERMARK`).
const INVALID_LOW_WATERMARK: i64 = -1;

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let access = ctx.access(session, header.request_api_key);
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.0.as_str();
        let allowed = access.allows(Operation::Delete, ResourceType::Topic, name);
        let found = ctx.topics.get(name);
        // Kafka's `Partition.deleteRecordsOnLeader`: only a log that deletes by policy may lose
        // its head on request; a compact-only log keeps every key's latest record.
        let delete_policy = found
            .as_ref()
            .is_none_or(|topic| topic.config.cleanup_policy.delete);
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for asked in topic.partitions {
            let result = DeleteRecordsPartitionResult::default()
                .with_partition_index(asked.partition_index)
                .with_low_watermark(INVALID_LOW_WATERMARK);
            let partition = match &found {
                Some(topic) => {
                    super::common::leadership::led_partition(ctx, topic, asked.partition_index)
                }
                None => Err(super::common::leadership::unserved_partition(
                    ctx,
                    name,
                    asked.partition_index,
                )),
            };
            let outcome = match partition {
                _ if !allowed => Err(error_code::TOPIC_AUTHORIZATION_FAILED),
                Err(code) => Err(code),
                Ok(_) if !delete_policy => Err(error_code::POLICY_VIOLATION),
                Ok(partition) => {
                    // Deleting whole segments unlinks files and fsyncs the directory: a blocking
                    // thread's work.
                    let log = partition.log().clone();
                    let offset = asked.offset;
                    let high_watermark = partition.high_watermark();
                    tokio::task::spawn_blocking(move || delete_before(&log, offset, high_watermark))
                        .await
                        .unwrap_or(Err(error_code::KAFKA_STORAGE_ERROR))
                }
            };
            partitions.push(match outcome {
                Ok(low_watermark) => result.with_low_watermark(low_watermark),
                Err(code) => result.with_error_code(code),
            });
        }
        topics.push(
            DeleteRecordsTopicResult::default()
                .with_name(topic.name)
                .with_partitions(partitions),
        );
    }
    DeleteRecordsResponse::default().with_topics(topics)
}

/// Raises the log start of `log` to `offset` (−1: the high watermark); the new log start, or the
/// error code to answer. Past the high watermark is OFFSET_OUT_OF_RANGE, as in Kafka: records
/// not yet on every ISR member cannot be deleted (a follower's log start follows the leader's).
fn delete_before(log: &skiff_storage::Log, offset: i64, high_watermark: i64) -> Result<i64, i16> {
    let log_end = log
        .log_end_offset()
        .map_err(|_| error_code::KAFKA_STORAGE_ERROR)?;
    let high_watermark = high_watermark.min(log_end);
    let offset = if offset == HIGH_WATERMARK {
        high_watermark
    } else {
        offset
    };
    if !(0..=high_watermark).contains(&offset) {
        return Err(error_code::OFFSET_OUT_OF_RANGE);
    }
    log.delete_records_before(offset)
        .map_err(|error| match error {
            skiff_storage::Error::OffsetOutOfRange { .. } => error_code::OFFSET_OUT_OF_RANGE,
            _ => error_code::KAFKA_STORAGE_ERROR,
        })
}
