//! Produce: v0–v2 message sets are up-converted to one v2 batch; v3+ batches are validated (layout,
//! CRC32C, `max.message.bytes`, zstd only from v7) and appended as they are, with offsets assigned
//! by the log. Errors are per partition; acks=0 gets no response at all.
//!
//! Every stored batch carries the partition's leader epoch (from the image, as the role check
//! read it): the log stamps it in place on append (outside the CRC), up-converted legacy batches
//! included, and records each new epoch's start in its leader-epoch cache.
//!
//! Idempotent batches (a producer id in the v2 header) pass the partition's sequence checks under
//! its producer lock, held across check, append and record (the partition's
//! [`append_as_leader`](crate::partition::partition::Partition::append_as_leader) does them): a
//! retry of a batch already in the log is acknowledged with its original offsets and not appended
//! again; a gap is OUT_OF_ORDER_SEQUENCE_NUMBER; an old epoch INVALID_PRODUCER_EPOCH.
//!
//! Authorization (Kafka 3.x): Write on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions),
//! checked before the topic's existence; idempotent batches also need IdempotentWrite on the
//! cluster or Write on some topic, transactional ones Write on the transactional id (else every
//! partition gets CLUSTER_ / TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
//!
//! Transactional batches (KIP-890): before the append, the transactional id's coordinator
//! confirms each partition is in the producer's transaction (Produce v11 and older; a partition
//! it is not in gets the coordinator's error, INVALID_TXN_STATE) or adds it (v12), unless the
//! producer already has a transaction open there at that epoch (`crate::txn_verify`).
//!
//! Must never: append a batch the sequence checks called a duplicate, or a transactional batch
//! its coordinator did not confirm.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, RequestHeader};
use kafka_protocol::protocol::StrBytes;
use skiff_protocol::records::compression::DECOMPRESSED_BYTES_MAX;
use skiff_protocol::records::record::batch_records;
use skiff_protocol::records::{v2, Compression, RecordError};
use skiff_protocol::up_convert::{up_convert, UpConvertOptions};

use super::common::errors::storage_error_code;
use super::common::remote::RemoteTime;
use super::error_code;
use crate::context::Ctx;
use crate::partition::partition::{AppendError, AppendOrigin, LeaderAppend, LeaderAppended};
use crate::partition::producer_state::NO_PRODUCER_ID;
use crate::partition::replica::{ProposalSender, ReplicationWait};
use crate::partition::topic_config::TimestampType;
use crate::partition::topics::{Partition, Topic, TopicError};
use crate::security::acl::{Access, Operation, ResourceType};
use crate::security::session::Session;
use crate::txn_verify;
use crate::txn_verify::client::Verified;
use crate::txn_verify::plan::{transactional_producer, Verification};
use skiff_cluster::replica::Acks;

/// First Produce version whose batches may be zstd-compressed (KIP-110).
const ZSTD_PRODUCE_VERSION_MIN: i16 = 7;
/// First Produce version that carries v2 batches rather than v0/v1 message sets.
const V2_PRODUCE_VERSION_MIN: i16 = 3;

/// First Produce response version with `log_append_time_ms`.
const LOG_APPEND_TIME_VERSION_MIN: i16 = 2;
/// First Produce response version with `record_errors` and `error_message` (KIP-467).
const RECORD_ERRORS_VERSION_MIN: i16 = 8;
/// First Produce response version with `log_start_offset`.
const LOG_START_OFFSET_VERSION_MIN: i16 = 5;

/// Why one partition's records were not appended: the error code, and for INVALID_RECORD the
/// records at fault (Produce v8+, KIP-467) with a message.
#[derive(Debug)]
struct Refusal {
    code: i16,
    message: Option<String>,
    /// (index of the record in the partition's records, why).
    record_errors: Vec<(i32, String)>,
}

impl From<i16> for Refusal {
    fn from(code: i16) -> Self {
        Self {
            code,
            message: None,
            record_errors: Vec::new(),
        }
    }
}

/// Record errors a response shows, as Kafka's message about them does.
const RECORD_ERRORS_SHOWN_MAX: usize = 3;
/// Record errors one partition's answer lists: a batch of keyless records gets one entry per
/// record, so a request of many small records is bounded here rather than by its size.
const RECORD_ERRORS_LISTED_MAX: usize = 1000;

/// One partition's outcome.
struct Appended {
    base_offset: i64,
    log_append_time_ms: i64,
    log_start_offset: i64,
    /// acks=all: the wait for the high watermark to pass the batch.
    replication: Option<ReplicationWait>,
}

/// How long an acks=all produce may wait beyond its `timeout_ms` for the replica machine's own
/// deadline (which answers REQUEST_TIMED_OUT at the next leader poll): a backstop, never the
/// answer in a healthy broker.
const REPLICATION_WAIT_GRACE: Duration = Duration::from_secs(5);

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    remote: &RemoteTime,
    header: &RequestHeader,
    request: ProduceRequest,
) -> Option<ProduceResponse> {
    let version = header.request_api_version;
    let (acks, acks_valid) = (request.acks, matches!(request.acks, -1..=1));
    let mut responses = Vec::with_capacity(request.topic_data.len());
    let mut waits: Vec<(usize, usize, ReplicationWait)> = Vec::new();
    let access = ctx.access(session, header.request_api_key);
    let refused_all = refused_producer(&access, &request);
    let verified = verify_transaction(ctx, version, &request).await;
    for topic_data in request.topic_data {
        let name = topic_data.name.0.to_string();
        // Write is checked before existence, as Kafka does, so a refused principal cannot probe
        // which topics exist.
        let refused = refused_all.or_else(|| {
            (!access.allows(Operation::Write, ResourceType::Topic, &name))
                .then_some(error_code::TOPIC_AUTHORIZATION_FAILED)
        });
        let topic = match (refused, ctx.topics.get(&name)) {
            (Some(code), _) => Err(code),
            (None, Some(topic)) => Ok(topic),
            (None, None) if ctx.config.auto_create_topics_enable => {
                if super::common::topic_access::may_create(&access, &name) {
                    ctx.topic_creation()
                        .auto_create(&name)
                        .await
                        .map_err(|error| error.code())
                } else {
                    Err(error_code::TOPIC_AUTHORIZATION_FAILED)
                }
            }
            (None, None) => Err(TopicError::Unknown.code()),
        };
        let mut partition_responses = Vec::with_capacity(topic_data.partition_data.len());
        for partition_data in topic_data.partition_data {
            let outcome = if acks_valid {
                let records = partition_data.records.unwrap_or_default();
                let index = partition_data.index;
                let at = (version, acks, request.timeout_ms, &verified);
                partition_outcome(ctx, &topic, &name, index, records, at).await
            } else {
                Err(error_code::INVALID_REQUIRED_ACKS.into())
            };
            let response = PartitionProduceResponse::default().with_index(partition_data.index);
            partition_responses.push(match outcome {
                Ok(mut appended) => {
                    if let Some(wait) = appended.replication.take() {
                        waits.push((responses.len(), partition_responses.len(), wait));
                    }
                    let mut response = response
                        .with_error_code(error_code::NONE)
                        .with_base_offset(appended.base_offset);
                    if version >= LOG_APPEND_TIME_VERSION_MIN {
                        response = response.with_log_append_time_ms(appended.log_append_time_ms);
                    }
                    if version >= LOG_START_OFFSET_VERSION_MIN {
                        response = response.with_log_start_offset(appended.log_start_offset);
                    }
                    response
                }
                Err(refusal) => refused_response(response, version, refusal),
            });
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic_data.name)
                .with_partition_responses(partition_responses),
        );
    }
    // acks=all: every partition appended, now wait for their high watermarks together.
    let wait_max = Duration::from_millis(u64::try_from(request.timeout_ms).unwrap_or(0))
        + REPLICATION_WAIT_GRACE;
    for (topic_index, partition_index, wait) in waits {
        // The wait for the followers is remote time, not this broker's work.
        let error = match remote.wait(tokio::time::timeout(wait_max, wait)).await {
            Ok(Ok(error)) => error.map(|code| code.code()),
            // The replica went away (its topic deleted) without answering.
            Ok(Err(_)) => Some(error_code::NOT_LEADER_OR_FOLLOWER),
            Err(_) => Some(error_code::REQUEST_TIMED_OUT),
        };
        if let Some(code) = error {
            if let Some(partition) = responses
                .get_mut(topic_index)
                .and_then(|topic| topic.partition_responses.get_mut(partition_index))
            {
                // Kafka keeps the base offset of a batch appended but not replicated in time.
                partition.error_code = code;
            }
        }
    }
    (acks != 0).then(|| ProduceResponse::default().with_responses(responses))
}

/// A partition's answer when its records were not appended: the code, and from v8 the message
/// and the records at fault.
fn refused_response(
    response: PartitionProduceResponse,
    version: i16,
    refusal: Refusal,
) -> PartitionProduceResponse {
    let response = response.with_error_code(refusal.code).with_base_offset(-1);
    if version < RECORD_ERRORS_VERSION_MIN {
        return response;
    }
    let record_errors = refusal
        .record_errors
        .into_iter()
        .map(|(index, why)| {
            BatchIndexAndErrorMessage::default()
                .with_batch_index(index)
                .with_batch_index_error_message(Some(StrBytes::from_string(why)))
        })
        .collect();
    response
        .with_error_message(refusal.message.map(StrBytes::from_string))
        .with_record_errors(record_errors)
}

/// One partition's append, or why there is none: the topic's error, or for a topic unknown
/// here the partition's answer as the image has it (the logs may be following it).
async fn partition_outcome(
    ctx: &Ctx,
    topic: &Result<Arc<Topic>, i16>,
    name: &str,
    index: i32,
    records: Bytes,
    (version, acks, timeout_ms, verified): (i16, i16, i32, &Verified),
) -> Result<Appended, Refusal> {
    if !verified.is_empty() {
        // KIP-890: a partition its transaction's coordinator did not confirm is not appended.
        match verified.get(&(name.to_owned(), index)) {
            Some(&code) if code != error_code::NONE => return Err(code.into()),
            _ => {}
        }
    }
    match topic {
        Ok(topic) => append(ctx, topic, version, index, records, (acks, timeout_ms)).await,
        Err(error_code::UNKNOWN_TOPIC_OR_PARTITION) => {
            Err(super::common::leadership::unserved_partition(ctx, name, index).into())
        }
        Err(code) => Err((*code).into()),
    }
}

/// KIP-890: the partitions of a transactional Produce whose transaction the coordinator must
/// confirm (Produce v11 and older) or extend (v12), asked in one call, with each one's outcome
/// (0: append it). Empty for a request without transactional records. A partition whose
/// transactional records come from another producer than the request's first is
/// INVALID_TXN_STATE (one transactional id, one producer).
async fn verify_transaction(ctx: &Ctx, version: i16, request: &ProduceRequest) -> Verified {
    let Some(transactional_id) = request.transactional_id.as_ref() else {
        return without_transactional_id(request);
    };
    if !ctx.config.transaction_partition_verification_enable {
        return Verified::new();
    }
    let mut verification: Option<Verification> = None;
    let mut mismatched = Verified::new();
    for topic in &request.topic_data {
        let name = topic.name.0.as_str();
        let found = ctx.topics.get(name);
        for data in &topic.partition_data {
            let records = data.records.as_deref().unwrap_or_default();
            let Some(producer) = transactional_producer(records) else {
                continue;
            };
            let verification = verification
                .get_or_insert_with(|| Verification::new(transactional_id, producer, version));
            if (verification.producer_id, verification.producer_epoch) != producer {
                mismatched.insert((name.to_owned(), data.index), error_code::INVALID_TXN_STATE);
                continue;
            }
            let partition = found.as_ref().and_then(|topic| topic.partition(data.index));
            if verification.needs(partition.and_then(|p| p.open_transaction(producer.0))) {
                verification.push(name, data.index);
            }
        }
    }
    let mut verified = match verification {
        Some(verification) if !verification.is_empty() => {
            let timeout = Duration::from_millis(u64::try_from(request.timeout_ms).unwrap_or(0));
            txn_verify::client::verify(ctx, &verification, version, timeout).await
        }
        _ => Verified::new(),
    };
    verified.append(&mut mismatched);
    verified
}

/// Transactional records in a Produce without a transactional id: every partition is refused
/// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka refuses the request (no coordinator could ever
/// end their transaction). Empty when the request has no transactional records.
fn without_transactional_id(request: &ProduceRequest) -> Verified {
    let partitions = || {
        request.topic_data.iter().flat_map(|topic| {
            let name = topic.name.0.as_str();
            topic.partition_data.iter().map(move |data| (name, data))
        })
    };
    let transactional = partitions().any(|(_, data)| {
        transactional_producer(data.records.as_deref().unwrap_or_default()).is_some()
    });
    if !transactional {
        return Verified::new();
    }
    partitions()
        .map(|(name, data)| {
            let code = error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
            ((name.to_owned(), data.index), code)
        })
        .collect()
}

/// The error every partition gets when the request's producer may not produce at all (Kafka
/// 3.x): transactional batches need Write on the transactional id; idempotent ones IdempotentWrite
/// on the cluster or Write on some topic.
fn refused_producer(access: &Access<'_>, request: &ProduceRequest) -> Option<i16> {
    if !access.enforced() {
        // No ACLs: skip the scan of the batch headers.
        return None;
    }
    let mut idempotent = false;
    let mut transactional = false;
    let batches = request
        .topic_data
        .iter()
        .flat_map(|topic| topic.partition_data.iter())
        .filter_map(|partition| partition.records.as_ref())
        .flat_map(|records| v2::batch_positions(records).flatten());
    for (_, header) in batches {
        idempotent |= header.producer_id != NO_PRODUCER_ID;
        transactional |= header.is_transactional();
    }
    if transactional {
        let transactional_id = request
            .transactional_id
            .as_ref()
            .map_or("", |id| id.as_str());
        return (!access.allows(
            Operation::Write,
            ResourceType::TransactionalId,
            transactional_id,
        ))
        .then_some(error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    }
    (idempotent && !access.allows_idempotent_write())
        .then_some(error_code::CLUSTER_AUTHORIZATION_FAILED)
}

/// The `error_message` of NOT_ENOUGH_REPLICAS (issue 39 item 7): the partition, its replication
/// factor and the min.insync.replicas in force, and when the factor is below it, that no acks=all
/// write can ever succeed (clients otherwise retry silently until their timeout).
fn not_enough_replicas_message(topic: &Topic, partition: i32) -> String {
    let replication_factor = usize::try_from(partition)
        .ok()
        .and_then(|index| topic.record.replicas.get(index))
        .map_or(0, Vec::len);
    let min_isr = topic.config.min_insync_replicas;
    let mut message = format!(
        "The in-sync replicas of partition {}-{partition} are fewer than min.insync.replicas={min_isr} \
         (replication factor {replication_factor}), so acks=all is refused",
        topic.name
    );
    if u32::try_from(replication_factor).unwrap_or(u32::MAX) < min_isr {
        message.push_str(
            ": the replication factor is below min.insync.replicas, so no acks=all write can ever \
             succeed; lower the topic's min.insync.replicas or add replicas",
        );
    }
    message
}

/// Validates (or up-converts) one partition's records and appends them.
async fn append(
    ctx: &Ctx,
    topic: &Topic,
    version: i16,
    partition_index: i32,
    records: Bytes,
    (acks, timeout_ms): (i16, i32),
) -> Result<Appended, Refusal> {
    if topic.is_internal() {
        return Err(error_code::INVALID_TOPIC_EXCEPTION.into());
    }
    let (partition, image_epoch) =
        super::common::leadership::led_partition_at(ctx, topic, partition_index)?;
    let acks = if acks == -1 { Acks::All } else { Acks::Leader };
    // The replica machine has the last word: it may not lead yet (the image moved first), and
    // acks=all needs min.insync.replicas in the ISR (19 before anything is appended).
    let leader_epoch = partition.admit_produce(acks).map_err(|error| {
        let code = error.code();
        let message = (code == error_code::NOT_ENOUGH_REPLICAS)
            .then(|| not_enough_replicas_message(topic, partition_index));
        Refusal {
            message,
            ..Refusal::from(code)
        }
    })?;
    if leader_epoch != image_epoch {
        return Err(error_code::NOT_LEADER_OR_FOLLOWER.into());
    }
    let now_ms = ctx.now_ms();
    let batches = prepare_batches(topic, version, records, now_ms)?;
    if topic.config.cleanup_policy.compact {
        refuse_keyless_records(&batches, &topic.name, partition_index)?;
    }
    let records_count: u64 = v2::batch_positions(&batches)
        .flatten()
        .map(|(_, header)| u64::try_from(header.records_count).unwrap_or(0))
        .sum();
    let log_append_time = topic.config.timestamp_type == TimestampType::LogAppendTime;
    let appended = append_as_leader(
        ctx,
        partition,
        batches,
        records_count,
        (leader_epoch, now_ms),
        (acks, u64::try_from(timeout_ms).unwrap_or(0)),
    )
    .await
    .map_err(Refusal::from)?;
    if appended.stored {
        partition
            .traffic()
            .count_produced(appended.bytes, records_count);
    }
    Ok(Appended {
        base_offset: appended.base_offset,
        log_append_time_ms: if appended.stored && log_append_time {
            now_ms
        } else {
            -1
        },
        log_start_offset: appended.log_start_offset,
        // Dropped only by the test-only mutation ack-before-hw (config/test_mutation.rs).
        replication: appended
            .replication
            .filter(|_| ctx.config.acks_all_waits_for_high_watermark()),
    })
}

/// Appends a partition's batches as its leader, on this task when the append is a page-cache copy,
/// the common case, and on a blocking thread when the log says it would roll a segment or fsync
/// (so a current-thread runtime is never blocked on a disk, and a multi-threaded one keeps its
/// workers).
async fn append_as_leader(
    ctx: &Ctx,
    partition: &Arc<Partition>,
    batches: Vec<u8>,
    records_count: u64,
    (leader_epoch, now_ms): (i32, i64),
    (acks, timeout_ms): (Acks, u64),
) -> Result<LeaderAppended, i16> {
    let may_block = partition
        .log()
        .append_may_block(batches.len() as u64, records_count, now_ms)
        .map_err(|error| storage_error_code(&error))?;
    if !may_block {
        let at = (leader_epoch, now_ms);
        return append_now(
            partition,
            batches,
            at,
            (acks, timeout_ms),
            &ctx.isr_proposals,
        );
    }
    let (partition, proposals) = (partition.clone(), ctx.isr_proposals.clone());
    tokio::task::spawn_blocking(move || {
        let at = (leader_epoch, now_ms);
        append_now(&partition, batches, at, (acks, timeout_ms), &proposals)
    })
    .await
    .unwrap_or(Err(error_code::KAFKA_STORAGE_ERROR))
}

/// Appends a client's batches as the partition's leader (the idempotence checks, the high
/// watermark and, for acks=all, the wait are the partition's). Blocking: a roll or an fsync may
/// happen inside.
fn append_now(
    partition: &Partition,
    mut batches: Vec<u8>,
    (leader_epoch, now_ms): (i32, i64),
    (acks, timeout_ms): (Acks, u64),
    proposals: &ProposalSender,
) -> Result<LeaderAppended, i16> {
    let append = LeaderAppend {
        batches: std::slice::from_mut(&mut batches),
        origin: AppendOrigin::Client,
        leader_epoch,
        now_ms,
        acks,
        timeout_ms,
    };
    partition
        .append_as_leader(append, proposals)
        .map_err(|error| match error {
            AppendError::Producer(error) => error.error_code(),
            AppendError::RetryWithNewBatches => error_code::INVALID_RECORD,
            AppendError::ProducersPoisoned => error_code::KAFKA_STORAGE_ERROR,
            AppendError::Storage(error) => storage_error_code(&error),
            // A client's append never encodes a marker.
            AppendError::Marker(_) => error_code::INVALID_RECORD,
        })
}

/// The v2 batches to store for one partition's `records`: v0/v1 message sets up-converted, v2
/// batches validated, log-append time stamped where the topic asks for it.
fn prepare_batches(
    topic: &Topic,
    version: i16,
    records: Bytes,
    now_ms: i64,
) -> Result<Vec<u8>, i16> {
    let max_message_bytes = topic.config.max_message_bytes as usize;
    let log_append_time = topic.config.timestamp_type == TimestampType::LogAppendTime;
    let mut batches: Vec<u8> = if version < V2_PRODUCE_VERSION_MIN {
        let options = UpConvertOptions {
            log_append_time_ms: log_append_time.then_some(now_ms),
            ..UpConvertOptions::default()
        };
        let converted = up_convert(&records, &options).map_err(|error| error.error_code())?;
        if converted.batch.len() > max_message_bytes {
            return Err(error_code::MESSAGE_TOO_LARGE);
        }
        converted.batch
    } else {
        validate_v2(&records, version, max_message_bytes)?;
        records.to_vec()
    };
    if log_append_time && version >= V2_PRODUCE_VERSION_MIN {
        v2::set_log_append_time(&mut batches, now_ms).map_err(|error| error.error_code())?;
    }
    Ok(batches)
}

/// A compacted topic keeps the latest record per key, so a record without one has no place in it:
/// Kafka refuses the partition's records with INVALID_RECORD and names each keyless record.
fn refuse_keyless_records(batches: &[u8], topic: &str, partition: i32) -> Result<(), Refusal> {
    let mut scratch = Vec::new();
    let mut index = 0i32;
    let mut keyless = Vec::new();
    for item in v2::batch_positions(batches) {
        let (position, header) = item.map_err(|error| error.error_code())?;
        let batch = batches
            .get(position..position + header.total_bytes())
            .ok_or(error_code::CORRUPT_MESSAGE)?;
        let records = batch_records(batch, &header, &mut scratch, DECOMPRESSED_BYTES_MAX)
            .map_err(|error| error.error_code())?;
        for record in records {
            let record = record.map_err(|error| error.error_code())?;
            if record.key.is_none() && keyless.len() < RECORD_ERRORS_LISTED_MAX {
                keyless.push(index);
            }
            index = index.saturating_add(1);
        }
    }
    if keyless.is_empty() {
        return Ok(());
    }
    let why = format!(
        "Compacted topic cannot accept message without key in topic partition {topic}-{partition}."
    );
    let record_errors: Vec<(i32, String)> = keyless
        .into_iter()
        .map(|index| (index, why.clone()))
        .collect();
    let shown: Vec<String> = record_errors
        .iter()
        .take(RECORD_ERRORS_SHOWN_MAX)
        .map(|(index, why)| format!("RecordError(batchIndex={index}, message='{why}')"))
        .collect();
    Err(Refusal {
        code: error_code::INVALID_RECORD,
        message: Some(format!(
            "One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: [{}]",
            record_errors.len(),
            shown.join(", ")
        )),
        record_errors,
    })
}

/// Checks the v2 batches of a Produce v3+ request before anything is appended.
fn validate_v2(records: &[u8], version: i16, max_message_bytes: usize) -> Result<(), i16> {
    if records.is_empty() {
        return Err(error_code::INVALID_RECORD);
    }
    let mut covered = 0usize;
    for item in v2::batch_positions(records) {
        let (position, header) = item.map_err(|error| error.error_code())?;
        if header.total_bytes() > max_message_bytes {
            return Err(error_code::MESSAGE_TOO_LARGE);
        }
        let batch = records
            .get(position..position + header.total_bytes())
            .ok_or(error_code::CORRUPT_MESSAGE)?;
        v2::validate(batch).map_err(|error| error.error_code())?;
        if header.is_control() {
            // Markers are the transaction coordinator's (WriteTxnMarkers), never a client's.
            return Err(error_code::INVALID_RECORD);
        }
        match header.compression() {
            Ok(Compression::Zstd) if version < ZSTD_PRODUCE_VERSION_MIN => {
                return Err(error_code::UNSUPPORTED_COMPRESSION_TYPE)
            }
            Ok(_) => {}
            Err(RecordError::UnknownCompression { .. }) | Err(_) => {
                return Err(error_code::CORRUPT_MESSAGE)
            }
        }
        covered = position + header.total_bytes();
    }
    if covered != records.len() {
        // A partial batch at the end: the producer sent a truncated request.
        return Err(error_code::CORRUPT_MESSAGE);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use skiff_protocol::records::record::{BatchBuilder, NewRecord};

    fn batch(keys: &[Option<&[u8]>], compression: Compression) -> Vec<u8> {
        let mut builder = BatchBuilder::new(0, compression);
        for (delta, key) in keys.iter().enumerate() {
            let record = NewRecord {
                offset_delta: i32::try_from(delta).expect("small"),
                timestamp: 1_000,
                key: *key,
                value: Some(b"v"),
                headers: &[],
            };
            builder.push(&record).expect("fits");
        }
        builder.build().expect("builds")
    }

    #[test]
    fn keyless_records_are_named_by_index_across_batches() {
        let mut batches = batch(&[Some(b"a"), None], Compression::None);
        batches.extend(batch(&[None, Some(b"b")], Compression::Gzip));
        let refusal = refuse_keyless_records(&batches, "t", 3).expect_err("keyless");
        assert_eq!(refusal.code, error_code::INVALID_RECORD);
        let indexes: Vec<i32> = refusal.record_errors.iter().map(|(i, _)| *i).collect();
        assert_eq!(indexes, [1, 2]);
        assert!(refusal.record_errors[0].1.contains("t-3"));
        assert!(refusal
            .message
            .expect("message")
            .contains("2 record errors in total"));
        let keyed = batch(&[Some(b"a"), Some(b"b")], Compression::Lz4);
        assert!(refuse_keyless_records(&keyed, "t", 3).is_ok());
    }

    #[test]
    fn record_errors_reach_only_versions_that_carry_them() {
        let refusal = || Refusal {
            code: error_code::INVALID_RECORD,
            message: Some("why".to_owned()),
            record_errors: vec![(0, "no key".to_owned())],
        };
        let old = refused_response(PartitionProduceResponse::default(), 7, refusal());
        assert!(old.record_errors.is_empty() && old.error_message.is_none());
        let new = refused_response(PartitionProduceResponse::default(), 8, refusal());
        assert_eq!(new.error_code, error_code::INVALID_RECORD);
        assert_eq!(new.record_errors.len(), 1);
        assert_eq!(new.base_offset, -1);
    }
}
