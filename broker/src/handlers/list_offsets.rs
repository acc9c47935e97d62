//! ListOffsets: v0's `old_style_offsets` list and v1+'s single (timestamp, offset), for the
//! special timestamps latest (−1), earliest (−2) and max timestamp (−3), and by time index. Each
//! topic needs Describe (TOPIC_AUTHORIZATION_FAILED for its partitions otherwise). Consumers see
//! offsets below the high watermark only, and none while a new leader's HW lags its epoch start
//! (KIP-207: OFFSET_NOT_AVAILABLE from v5, LEADER_NOT_AVAILABLE in v1–v4). A read_committed
//! consumer (v2+ `isolation_level` 1) sees offsets below the last stable offset only: its
//! "latest" is the last stable offset, as Kafka answers; an isolation byte other than 0 and 1 is
//! INVALID_REQUEST for every partition.

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse, RequestHeader};

use skiff_protocol::records::txn::IsolationLevel;

use super::error_code;
use crate::context::Ctx;
use crate::partition::topics::Partition;
use crate::security::acl::{Operation, ResourceType};
use crate::security::session::Session;

const LATEST_TIMESTAMP: i64 = -1;
const EARLIEST_TIMESTAMP: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
/// First ListOffsets version with leader epochs.
const LEADER_EPOCH_VERSION_MIN: i16 = 4;
/// First ListOffsets version that may answer OFFSET_NOT_AVAILABLE (KIP-207).
const OFFSET_NOT_AVAILABLE_VERSION_MIN: i16 = 5;
/// First ListOffsets version with `isolation_level` (KIP-98).
const ISOLATION_VERSION_MIN: i16 = 2;

/// The request's isolation level (read_uncommitted before v2); `None` for a byte that is
/// neither 0 nor 1.
fn isolation_of(version: i16, request: &ListOffsetsRequest) -> Option<IsolationLevel> {
    if version < ISOLATION_VERSION_MIN {
        return Some(IsolationLevel::ReadUncommitted);
    }
    IsolationLevel::from_byte(request.isolation_level)
}

/// The end a consumer's offsets stay below: the high watermark, or for read_committed the last
/// stable offset (Kafka's `lastFetchableOffset`).
fn fetchable_end(partition: &Partition, isolation: IsolationLevel) -> i64 {
    match isolation {
        IsolationLevel::ReadCommitted => partition.last_stable_offset(),
        IsolationLevel::ReadUncommitted => partition.high_watermark(),
    }
}

/// A partition's answer with an error and no offset.
fn failed(index: i32, code: i16) -> ListOffsetsPartitionResponse {
    ListOffsetsPartitionResponse::default()
        .with_partition_index(index)
        .with_error_code(code)
        .with_timestamp(-1)
        .with_offset(-1)
}

/// Every partition of the request answered `code` (an isolation byte that is neither 0 nor 1).
fn refuse_all(request: ListOffsetsRequest, code: i16) -> ListOffsetsResponse {
    let topics = request.topics.into_iter().map(|topic| {
        let partitions = topic.partitions.iter();
        let partitions = partitions
            .map(|p| failed(p.partition_index, code))
            .collect();
        ListOffsetsTopicResponse::default()
            .with_name(topic.name)
            .with_partitions(partitions)
    });
    ListOffsetsResponse::default().with_topics(topics.collect())
}

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: ListOffsetsRequest,
) -> ListOffsetsResponse {
    let version = header.request_api_version;
    let access = ctx.access(session, header.request_api_key);
    // A consumer (replica id −1) sees offsets below the high watermark only, as its fetches do
    // (Kafka's lastFetchableOffset); a replica id ≥ 0 (a debugging tool) sees the log end.
    let consumer = request.replica_id.0 < 0;
    let Some(isolation) = isolation_of(version, &request) else {
        return refuse_all(request, error_code::INVALID_REQUEST);
    };
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let described = access.allows(
                Operation::Describe,
                ResourceType::Topic,
                topic.name.as_str(),
            );
            let found = ctx.topics.get(topic.name.0.as_str());
            let partitions = topic
                .partitions
                .into_iter()
                .map(|request| {
                    let response = ListOffsetsPartitionResponse::default()
                        .with_partition_index(request.partition_index);
                    if !described {
                        return failed(
                            request.partition_index,
                            error_code::TOPIC_AUTHORIZATION_FAILED,
                        );
                    }
                    let led = match &found {
                        Some(topic) => super::common::leadership::led_partition(
                            ctx,
                            topic,
                            request.partition_index,
                        ),
                        None => Err(super::common::leadership::unserved_partition(
                            ctx,
                            topic.name.0.as_str(),
                            request.partition_index,
                        )),
                    };
                    let partition = match led {
                        Ok(partition) => partition,
                        Err(code) => return failed(request.partition_index, code),
                    };
                    let log = partition.log();
                    let (Ok(log_end), Ok(log_start)) =
                        (log.log_end_offset(), log.log_start_offset())
                    else {
                        // Not recovered yet (after a crash) is retriable; anything else is not.
                        let code = if log.is_recovering() {
                            error_code::NOT_LEADER_OR_FOLLOWER
                        } else {
                            error_code::KAFKA_STORAGE_ERROR
                        };
                        return failed(request.partition_index, code);
                    };
                    let log_end = if consumer {
                        fetchable_end(partition, isolation).clamp(log_start, log_end)
                    } else {
                        log_end
                    };
                    // KIP-207: a new leader whose HW has not reached its epoch's start offset
                    // answers a consumer's latest (or a time lookup at or past the HW) with a
                    // retriable error rather than an offset below what the old leader answered.
                    // Kafka skips v0 and says LEADER_NOT_AVAILABLE below v5, which added 78.
                    let hw_lags = consumer
                        && version >= 1
                        && (request.timestamp == LATEST_TIMESTAMP || request.timestamp >= 0)
                        && partition.high_watermark_lags_epoch_start();
                    let not_available = || {
                        let code = if version >= OFFSET_NOT_AVAILABLE_VERSION_MIN {
                            error_code::OFFSET_NOT_AVAILABLE
                        } else {
                            error_code::LEADER_NOT_AVAILABLE
                        };
                        failed(request.partition_index, code)
                    };
                    if hw_lags && request.timestamp == LATEST_TIMESTAMP {
                        return not_available();
                    }
                    let found: Option<(i64, i64)> = match request.timestamp {
                        LATEST_TIMESTAMP => Some((-1, log_end)),
                        EARLIEST_TIMESTAMP => Some((-1, log_start)),
                        MAX_TIMESTAMP => log
                            .max_timestamp()
                            .ok()
                            .flatten()
                            .map(|found| (found.timestamp_ms, found.offset))
                            .filter(|(_, offset)| *offset < log_end),
                        timestamp if timestamp >= 0 => {
                            let found = log
                                .offset_for_timestamp(timestamp)
                                .ok()
                                .flatten()
                                .map(|found| (found.timestamp_ms, found.offset));
                            if hw_lags && found.is_some_and(|(_, offset)| offset >= log_end) {
                                return not_available();
                            }
                            found.filter(|(_, offset)| *offset < log_end)
                        }
                        _ => {
                            return failed(request.partition_index, error_code::UNSUPPORTED_VERSION)
                        }
                    };
                    if version == 0 {
                        // v0: a descending list of offsets, at most max_num_offsets of them.
                        let mut offsets: Vec<i64> = match request.timestamp {
                            LATEST_TIMESTAMP => vec![log_end, log_start],
                            _ => found.map(|(_, offset)| vec![offset]).unwrap_or_default(),
                        };
                        offsets.dedup();
                        offsets.truncate(usize::try_from(request.max_num_offsets).unwrap_or(0));
                        return response
                            .with_error_code(error_code::NONE)
                            .with_old_style_offsets(offsets);
                    }
                    let (timestamp, offset) = found.unwrap_or((-1, -1));
                    let response = response
                        .with_error_code(error_code::NONE)
                        .with_timestamp(timestamp)
                        .with_offset(offset);
                    if version >= LEADER_EPOCH_VERSION_MIN {
                        let epoch = match request.timestamp {
                            LATEST_TIMESTAMP if log_end == log.log_end_offset().unwrap_or(-1) => {
                                log.latest_epoch().ok().flatten()
                            }
                            LATEST_TIMESTAMP => log.epoch_for_offset(log_end).ok().flatten(),
                            _ => log.epoch_for_offset(offset).ok().flatten(),
                        };
                        response.with_leader_epoch(epoch.unwrap_or(skiff_storage::UNDEFINED_EPOCH))
                    } else {
                        response
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}
