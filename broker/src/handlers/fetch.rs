//! Fetch: reads slices of the partition logs up to the request's limits, long-polls until
//! `min_bytes` are there or `max_wait_ms` passes (woken only by an advance of the readable end of
//! one of the request's own partitions, [`crate::partition::readable_end`]), and answers with a
//! response *plan*: fixed fields as bytes, stored batches as file regions sent with sendfile (Fetch
//! v4+), and legacy record sets (Fetch v0–v3) as lazy down-conversions that produce one chunk at a
//! time while the socket drains.
//!
//! Decisions beyond Kafka's:
//! - Every version returns at least one whole batch for the first partition that has data, even
//!   v0–v2, whose "hard" partition limit in Kafka 3.x makes a legacy consumer re-fetch forever when
//!   the first batch is bigger than its limit (docs/design/downconversion.md §3.7 D4). An old
//!   client then gets a complete message bigger than it asked for, which every client tested
//!   parses.
//! - Errored partitions carry a record-set size of 0, never −1 (§4.6).
//!
//! The record bytes a response carries count as each partition's bytes out once the response is
//! laid out (`crate::metrics::traffic`).
//!
//! Authorization: a consumer needs Read on each topic, a follower (replica id ≥ 0) ClusterAction
//! on the cluster; a refused partition is an errored partition like any other (error code, empty
//! record set).
//!
//! Must never: build a converted record set in memory (outside the benchmark-only eager mode), or
//! let a partition's error fail the whole response.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::fetch_request::FetchTopic;
use kafka_protocol::messages::{FetchRequest, RequestHeader};
use skiff_cluster::replica::{FetchAnswer, FollowerFetch};
use skiff_protocol::down_convert::AbortedFilter;
use skiff_protocol::records::txn::{IsolationLevel, CONTROL_BATCH_BYTES_MAX};
use skiff_protocol::records::v2;
use skiff_protocol::records::Magic;
use skiff_protocol::responses::fetch::{
    encode_fetch_response, AbortedTransactionShape, DivergingEpoch, FetchPart, FetchPartitionShape,
    FetchResponseShape, FetchTopicShape,
};
use skiff_storage::FetchSlice;

use super::common::leadership::led_partition;
use super::common::remote::RemoteTime;
use super::common::throttle::Turn;
use super::error_code;
use crate::config::LegacyIsolationLevel;
use crate::context::Ctx;
use crate::partition::readable_end::any_advanced;
use crate::partition::topics::{Partition, Topic};
use crate::response::conversion::{
    declared_size, ConversionError, ConversionSettings, LegacyResponseBuilder, PlannedSet,
};
use crate::response::ResponsePart;
use crate::security::acl::{Operation, ResourceType};
use crate::security::session::Session;

/// First Fetch version that reads v2 batches as stored (zero-copy); below it, conversion.
const STORED_FORMAT_FETCH_VERSION_MIN: i16 = 4;
/// First Fetch version that may carry zstd batches (KIP-110).
const ZSTD_FETCH_VERSION_MIN: i16 = 10;
/// First Fetch version with a response-level `max_bytes` (KIP-74).
const MAX_BYTES_FETCH_VERSION_MIN: i16 = 3;
/// Highest Fetch version that cannot express KAFKA_STORAGE_ERROR (56); it gets 6 instead
/// (docs/design/downconversion.md §4.4).
const STORAGE_ERROR_FETCH_VERSION_MAX: i16 = 5;
/// First Fetch version that names topics by id.
const TOPIC_ID_FETCH_VERSION_MIN: i16 = 13;
/// First Fetch version a follower may use: `last_fetched_epoch` and `DivergingEpoch` (KIP-320,
/// KIP-595); Skiff's own fetcher sends it, and an older replica fetch cannot be fenced.
const REPLICA_FETCH_VERSION_MIN: i16 = 12;
/// First Fetch version with `isolation_level` (KIP-98).
const ISOLATION_FETCH_VERSION_MIN: i16 = 4;
const UNKNOWN_TOPIC_ID: i16 = 100;

/// What one partition of the request found.
enum PartitionRead {
    Failed {
        error_code: i16,
    },
    /// A follower's fetch offset outside the leader's log: OFFSET_OUT_OF_RANGE with the
    /// leader's log start and HW filled in, so the follower can reset or cut its log without
    /// another request.
    FollowerOutOfRange {
        log_start_offset: i64,
        high_watermark: i64,
    },
    Read {
        partition: Arc<Partition>,
        topic: Arc<Topic>,
        fetch_offset: i64,
        slice: Option<FetchSlice>,
        high_watermark: i64,
        last_stable_offset: i64,
        /// read_committed: the aborted transactions the records returned overlap.
        aborted: Vec<AbortedTransactionShape>,
        log_start_offset: i64,
        convert_to: Option<Magic>,
        /// A follower's log diverges here (KIP-279): no records, the leader's epoch end.
        diverging_epoch: Option<DivergingEpoch>,
    },
}

impl PartitionRead {
    /// The stored bytes this read takes of the response's budget (none unless it read some).
    fn stored_bytes(&self) -> usize {
        match self {
            Self::Read {
                slice: Some(slice), ..
            } => usize::try_from(slice.len()).unwrap_or(usize::MAX),
            _ => 0,
        }
    }
}

struct ReadTopic {
    name: String,
    topic_id: uuid::Uuid,
    partitions: Vec<(i32, PartitionRead)>,
}

/// Who reads a partition: a follower (replica id ≥ 0), or a consumer at an isolation level.
#[derive(Debug, Clone, Copy)]
struct Reader {
    replica_id: i32,
    isolation: IsolationLevel,
}

impl Reader {
    /// The request's reader (read_uncommitted for an isolation byte that is neither 0 nor 1:
    /// such a request's partitions are all refused before any read).
    fn of(version: i16, request: &FetchRequest) -> Self {
        Self {
            replica_id: request.replica_id.0,
            isolation: isolation_of(version, request).unwrap_or_default(),
        }
    }
}

/// The request's isolation level: read_uncommitted below v4 and for followers; `None` for a byte
/// that is neither 0 nor 1 (every partition answers INVALID_REQUEST).
fn isolation_of(version: i16, request: &FetchRequest) -> Option<IsolationLevel> {
    if version < ISOLATION_FETCH_VERSION_MIN || request.replica_id.0 >= 0 {
        return Some(IsolationLevel::ReadUncommitted);
    }
    IsolationLevel::from_byte(request.isolation_level)
}

/// The magic a legacy Fetch version reads (docs/design/downconversion.md §2.4).
fn target_magic(version: i16) -> Option<Magic> {
    match version {
        0 | 1 => Some(Magic::V0),
        2 | 3 => Some(Magic::V1),
        _ => None,
    }
}

pub(crate) async fn handle(
    ctx: &Ctx,
    session: &Session,
    (turn, remote): (&Turn<'_>, &RemoteTime),
    header: &RequestHeader,
    request: FetchRequest,
) -> Vec<ResponsePart> {
    let version = header.request_api_version;
    let follower = request.replica_id.0 >= 0;
    if follower {
        // Replication is not a client: no client quota applies to it.
        turn.exempt();
    }
    let refused = match isolation_of(version, &request) {
        Some(_) => refused_topics(ctx, session, header, &request),
        None => vec![Some(error_code::INVALID_REQUEST); request.topics.len()],
    };
    let wait_ms = u64::try_from(request.max_wait_ms)
        .unwrap_or(0)
        .min(ctx.config.fetch_wait_max_ms);
    let deadline = crate::clock::deadline_after(Duration::from_millis(wait_ms));
    let min_bytes = usize::try_from(request.min_bytes).unwrap_or(0);
    let mut shutdown = ctx.shutdown.subscribe();
    let reads = loop {
        // Registered on every partition read before reading, so an append between the read and
        // the wait still wakes us; dropped (unregistered) when this iteration ends.
        // Each topic is looked up once per iteration (by id it scans the topic map), and the
        // same lookup serves the waiters and the read.
        let topics: Vec<Option<Arc<Topic>>> = request
            .topics
            .iter()
            .map(|fetch_topic| find_topic(ctx, version, fetch_topic))
            .collect();
        let watched = watched_partitions(&request, &topics, &refused);
        let mut waiters: Vec<_> = watched.iter().map(|partition| partition.waiter()).collect();
        let (reads, available_bytes) = read_partitions(ctx, version, &request, &topics, &refused);
        let failed = reads
            .iter()
            .flat_map(|topic| topic.partitions.iter())
            .any(|(_, read)| {
                matches!(
                    read,
                    PartitionRead::Failed { .. } | PartitionRead::FollowerOutOfRange { .. }
                )
            });
        let stopping = *shutdown.borrow_and_update();
        if available_bytes >= min_bytes.max(1)
            || failed
            || stopping
            || crate::clock::timer_now() >= deadline
        {
            break reads;
        }
        // Waiting for data is the long poll's remote time, not this broker's work.
        remote
            .wait(async {
                tokio::select! {
                    _ = any_advanced(&mut waiters) => {}
                    _ = shutdown.changed() => {}
                    _ = tokio::time::sleep_until(deadline) => {}
                }
            })
            .await;
    };
    let quota = (!follower).then_some(turn);
    build_response(ctx, version, header.correlation_id, reads, quota)
}

/// Per requested topic, the error its partitions get from the ACLs (checked once per request,
/// not at every long-poll wake-up): a follower fetch (replica id ≥ 0) needs ClusterAction on the
/// cluster (CLUSTER_AUTHORIZATION_FAILED), a consumer Read on the topic
/// (TOPIC_AUTHORIZATION_FAILED). Topics named by an unknown id are left to the read, which
/// answers UNKNOWN_TOPIC_ID.
fn refused_topics(
    ctx: &Ctx,
    session: &Session,
    header: &RequestHeader,
    request: &FetchRequest,
) -> Vec<Option<i16>> {
    let access = ctx.access(session, header.request_api_key);
    if !access.enforced() {
        return Vec::new();
    }
    if request.replica_id.0 >= 0 {
        let refused = (!access.allows_cluster(Operation::ClusterAction))
            .then_some(error_code::CLUSTER_AUTHORIZATION_FAILED);
        return vec![refused; request.topics.len()];
    }
    let by_id = header.request_api_version >= TOPIC_ID_FETCH_VERSION_MIN;
    request
        .topics
        .iter()
        .map(|fetch_topic| {
            let name = if by_id {
                find_topic(ctx, header.request_api_version, fetch_topic)?
                    .name
                    .clone()
            } else {
                fetch_topic.topic.0.to_string()
            };
            (!access.allows(Operation::Read, ResourceType::Topic, &name))
                .then_some(error_code::TOPIC_AUTHORIZATION_FAILED)
        })
        .collect()
}

/// The topic a request entry names: by id from [`TOPIC_ID_FETCH_VERSION_MIN`], else by name.
fn find_topic(ctx: &Ctx, version: i16, fetch_topic: &FetchTopic) -> Option<Arc<Topic>> {
    if version >= TOPIC_ID_FETCH_VERSION_MIN {
        ctx.topics.get_by_id(fetch_topic.topic_id.as_bytes())
    } else {
        ctx.topics.get(fetch_topic.topic.0.as_str())
    }
}

/// The partitions of the request that exist and were not refused: those a long poll waits on.
fn watched_partitions(
    request: &FetchRequest,
    topics: &[Option<Arc<Topic>>],
    refused: &[Option<i16>],
) -> Vec<Arc<Partition>> {
    let mut watched = Vec::new();
    for (topic_index, (fetch_topic, topic)) in request.topics.iter().zip(topics).enumerate() {
        let Some(topic) = topic else { continue };
        if refused.get(topic_index).copied().flatten().is_some() {
            continue;
        }
        watched.extend(
            fetch_topic
                .partitions
                .iter()
                .filter_map(|fetch_partition| topic.partition(fetch_partition.partition).cloned()),
        );
    }
    watched
}

fn read_partitions(
    ctx: &Ctx,
    version: i16,
    request: &FetchRequest,
    resolved: &[Option<Arc<Topic>>],
    refused: &[Option<i16>],
) -> (Vec<ReadTopic>, usize) {
    let response_bytes_max = if version >= MAX_BYTES_FETCH_VERSION_MIN {
        usize::try_from(request.max_bytes).unwrap_or(0)
    } else {
        usize::MAX
    }
    .min(ctx.config.fetch_max_bytes as usize);
    let reader = Reader::of(version, request);
    let mut taken_bytes = 0usize;
    let mut topics = Vec::with_capacity(request.topics.len());
    for (topic_index, fetch_topic) in request.topics.iter().enumerate() {
        let refused = refused.get(topic_index).copied().flatten();
        let topic = resolved.get(topic_index).cloned().flatten();
        let mut partitions = Vec::with_capacity(fetch_topic.partitions.len());
        for fetch_partition in &fetch_topic.partitions {
            let read = match &topic {
                // Refused before existence, as Kafka does: no probing which topics exist.
                _ if refused.is_some() => PartitionRead::Failed {
                    error_code: refused.unwrap_or(error_code::TOPIC_AUTHORIZATION_FAILED),
                },
                None if version >= TOPIC_ID_FETCH_VERSION_MIN => PartitionRead::Failed {
                    error_code: UNKNOWN_TOPIC_ID,
                },
                None => PartitionRead::Failed {
                    error_code: error_code::UNKNOWN_TOPIC_OR_PARTITION,
                },
                Some(topic) => {
                    let partition_bytes_max = usize::try_from(fetch_partition.partition_max_bytes)
                        .unwrap_or(0)
                        .min(response_bytes_max.saturating_sub(taken_bytes));
                    let read = match led_partition(ctx, topic, fetch_partition.partition) {
                        Ok(partition) => for_follower(
                            read_partition(
                                ctx,
                                version,
                                reader,
                                topic,
                                partition,
                                fetch_partition,
                                partition_bytes_max,
                                taken_bytes == 0,
                            ),
                            reader.replica_id,
                            partition,
                        ),
                        Err(error_code) => PartitionRead::Failed { error_code },
                    };
                    taken_bytes = taken_bytes.saturating_add(read.stored_bytes());
                    read
                }
            };
            partitions.push((fetch_partition.partition, read));
        }
        topics.push(ReadTopic {
            name: topic
                .as_ref()
                .map(|topic| topic.name.clone())
                .unwrap_or_else(|| fetch_topic.topic.0.to_string()),
            topic_id: fetch_topic.topic_id,
            partitions,
        });
    }
    (topics, taken_bytes)
}

/// What a read may return: consumers up to the high watermark (read_uncommitted) or the last
/// stable offset (read_committed), a follower what its leader's machine answered (records up to
/// the log end, or where its log diverges).
enum ReadBound {
    Consumer {
        read_end: i64,
        high_watermark: i64,
        last_stable_offset: i64,
    },
    Follower(FetchAnswer),
}

impl ReadBound {
    /// A consumer's bound. The last stable offset is read before the high watermark: both only
    /// rise and it never passes the high watermark it was computed from, so the pair answered
    /// keeps last stable offset ≤ high watermark.
    fn consumer(partition: &Partition, isolation: IsolationLevel) -> Self {
        let last_stable_offset = partition.last_stable_offset();
        let high_watermark = partition.high_watermark();
        let read_end = match isolation {
            IsolationLevel::ReadCommitted => last_stable_offset,
            IsolationLevel::ReadUncommitted => high_watermark,
        };
        Self::Consumer {
            read_end,
            high_watermark,
            last_stable_offset,
        }
    }
}

/// The reader of a legacy consumer's read (Fetch v0–v3 carries no isolation level): at its
/// topic's `skiff.legacy.isolation.level` (docs/design/downconversion.md §3.8), so a
/// `read_committed` topic's legacy read ends at the last stable offset and returns the aborted
/// transactions its converter leaves out. Every other reader as it asked.
fn legacy_reader(reader: Reader, topic: &Topic, convert_to: Option<Magic>) -> Reader {
    let committed = topic.config.legacy_isolation_level == LegacyIsolationLevel::ReadCommitted;
    if convert_to.is_some() && reader.replica_id < 0 && committed {
        Reader {
            isolation: IsolationLevel::ReadCommitted,
            ..reader
        }
    } else {
        reader
    }
}

/// A follower's fetch as the leader's partition answers it (the ISR changes, acks=all
/// completions and wake-ups it causes are the partition's).
fn follower_answer(
    ctx: &Ctx,
    version: i16,
    replica_id: i32,
    partition: &Arc<Partition>,
    fetch_partition: &kafka_protocol::messages::fetch_request::FetchPartition,
) -> Result<FetchAnswer, i16> {
    if version < REPLICA_FETCH_VERSION_MIN {
        return Err(error_code::UNSUPPORTED_VERSION);
    }
    let fetch = FollowerFetch {
        replica: replica_id,
        fetch_offset: fetch_partition.fetch_offset,
        last_fetched_epoch: (fetch_partition.last_fetched_epoch >= 0)
            .then_some(fetch_partition.last_fetched_epoch),
        current_leader_epoch: fetch_partition.current_leader_epoch,
    };
    let now = crate::clock::mono_ms();
    let answer = partition
        .answer_follower_fetch(now, fetch, &ctx.isr_proposals)
        .map_err(|_| error_code::KAFKA_STORAGE_ERROR)?;
    Ok(answer)
}

/// A follower's OFFSET_OUT_OF_RANGE with the leader's log start and HW filled in.
fn for_follower(read: PartitionRead, replica_id: i32, partition: &Partition) -> PartitionRead {
    match read {
        PartitionRead::Failed {
            error_code: error_code::OFFSET_OUT_OF_RANGE,
        } if replica_id >= 0 => match partition.log().log_start_offset() {
            Ok(log_start_offset) => PartitionRead::FollowerOutOfRange {
                log_start_offset,
                high_watermark: partition.high_watermark(),
            },
            Err(_) => read,
        },
        read => read,
    }
}

#[allow(clippy::too_many_arguments)]
fn read_partition(
    ctx: &Ctx,
    version: i16,
    reader: Reader,
    topic: &Arc<Topic>,
    partition: &Arc<Partition>,
    fetch_partition: &kafka_protocol::messages::fetch_request::FetchPartition,
    bytes_max: usize,
    first_with_data: bool,
) -> PartitionRead {
    let fetch_offset = fetch_partition.fetch_offset;
    if version < ZSTD_FETCH_VERSION_MIN && topic.config.compression_type == "zstd" {
        return PartitionRead::Failed {
            error_code: error_code::UNSUPPORTED_COMPRESSION_TYPE,
        };
    }
    let convert_to = target_magic(version);
    let reader = legacy_reader(reader, topic, convert_to);
    let replica_id = reader.replica_id;
    let is_consumer = replica_id < 0;
    if convert_to.is_some() && is_consumer && !topic.config.downconversion_enable {
        return PartitionRead::Failed {
            error_code: error_code::UNSUPPORTED_VERSION,
        };
    }
    let log = partition.log();
    if log.is_recovering() {
        // Retriable: the partition serves once recovered (a restart after a crash).
        return PartitionRead::Failed {
            error_code: error_code::NOT_LEADER_OR_FOLLOWER,
        };
    }
    let storage_error_code = if version <= STORAGE_ERROR_FETCH_VERSION_MAX {
        error_code::NOT_LEADER_OR_FOLLOWER
    } else {
        error_code::KAFKA_STORAGE_ERROR
    };
    let Ok(log_start_offset) = log.log_start_offset() else {
        return PartitionRead::Failed {
            error_code: storage_error_code,
        };
    };
    let bound = if is_consumer {
        ReadBound::consumer(partition, reader.isolation)
    } else {
        match follower_answer(ctx, version, replica_id, partition, fetch_partition) {
            Ok(answer) => ReadBound::Follower(answer),
            Err(error_code) => return PartitionRead::Failed { error_code },
        }
    };
    // Consumers read below the HW; a follower up to the leader's log end as its answer says.
    let (read_end, (high_watermark, last_stable_offset), diverging_epoch) = match bound {
        ReadBound::Consumer {
            read_end,
            high_watermark,
            last_stable_offset,
        } => (read_end, (high_watermark, last_stable_offset), None),
        ReadBound::Follower(FetchAnswer::Records {
            to, high_watermark, ..
        }) => (to, (high_watermark, high_watermark), None),
        ReadBound::Follower(FetchAnswer::Diverging {
            epoch,
            end_offset,
            high_watermark,
        }) => (
            fetch_offset,
            (high_watermark, high_watermark),
            Some(DivergingEpoch { epoch, end_offset }),
        ),
        ReadBound::Follower(FetchAnswer::Error(error)) => {
            return PartitionRead::Failed {
                error_code: error.code(),
            }
        }
    };
    let mut read = SliceRead {
        fetch_offset,
        read_end,
        log_start_offset,
        bytes_max: (bytes_max > 0 || first_with_data).then_some(bytes_max),
        first_with_data,
        committed: reader.isolation == IsolationLevel::ReadCommitted,
    };
    // Legacy read_committed: an old client cannot be told to move past records it is not given.
    let found = read_slice(log, &read).and_then(|found| match convert_to {
        Some(_) if read.committed => skip_left_out(log, &mut read, found),
        _ => Ok(found),
    });
    let (slice, aborted) = match found {
        Ok(read) => read,
        Err(None) => {
            return PartitionRead::Failed {
                error_code: error_code::OFFSET_OUT_OF_RANGE,
            }
        }
        Err(Some(error)) => {
            tracing::warn!(topic = %topic.name, partition = partition.index(), %error, "fetch read failed");
            return PartitionRead::Failed {
                error_code: storage_error_code,
            };
        }
    };
    PartitionRead::Read {
        partition: partition.clone(),
        topic: topic.clone(),
        fetch_offset: read.fetch_offset,
        slice,
        high_watermark,
        last_stable_offset,
        aborted,
        log_start_offset,
        convert_to: convert_to.filter(|_| version < STORED_FORMAT_FETCH_VERSION_MIN),
        diverging_epoch,
    }
}

/// Where one partition's read starts and what bounds it.
struct SliceRead {
    fetch_offset: i64,
    /// Records at and past it are not read (the high watermark, the last stable offset, or a
    /// follower's bound).
    read_end: i64,
    log_start_offset: i64,
    /// Bytes the read may take; `None`: none left in the response for this partition.
    bytes_max: Option<usize>,
    /// The first partition with data gets at least one whole batch.
    first_with_data: bool,
    /// read_committed: the aborted transactions the records overlap are read too.
    committed: bool,
}

/// What one partition's read found: its stored records (`None` when there are none to return)
/// and, read_committed, the aborted transactions they overlap.
type SliceFound = (Option<FetchSlice>, Vec<AbortedTransactionShape>);

/// The stored records of a read and, read_committed, the aborted transactions they overlap.
/// `Err(None)`: the fetch offset is out of range; `Err(Some(error))`: the log failed.
fn read_slice(
    log: &skiff_storage::Log,
    read: &SliceRead,
) -> Result<SliceFound, Option<skiff_storage::Error>> {
    let fetch_offset = read.fetch_offset;
    let Some(bytes_max) = read.bytes_max.filter(|_| fetch_offset < read.read_end) else {
        // Past the HW but within the log (a consumer ahead of a new leader's HW) is no error:
        // Kafka answers no records. Past the log end is OFFSET_OUT_OF_RANGE.
        let log_end = log.log_end_offset().map_err(Some)?;
        if fetch_offset > log_end || fetch_offset < read.log_start_offset {
            return Err(None);
        }
        return Ok((None, Vec::new()));
    };
    let max_bytes = u64::try_from(bytes_max).unwrap_or(u64::MAX);
    let slice = match log.read_below(fetch_offset, read.read_end, max_bytes, read.first_with_data) {
        Ok(slice) if slice.is_empty() => return Ok((None, Vec::new())),
        Ok(slice) => slice,
        Err(skiff_storage::Error::OffsetOutOfRange { .. }) => return Err(None),
        Err(error) => return Err(Some(error)),
    };
    // Up to the end of the slice's segment, as Kafka bounds it: not every aborted transaction up
    // to the last stable offset, which a consumer far behind would make long (and past
    // `ABORTED_TXNS_PER_READ_MAX`, unanswerable).
    let aborted = if read.committed {
        let upper_bound = read.read_end.min(slice.segment_end_offset());
        aborted_transactions(log, fetch_offset, upper_bound).map_err(Some)?
    } else {
        Vec::new()
    };
    Ok((Some(slice), aborted))
}

/// Bytes of stored batches a legacy read_committed fetch may read past (their headers only) when
/// everything from its offset is left out: a run of aborted transactions this long, with nothing
/// committed between, still leaves the consumer where it is (docs/design/downconversion.md §3.8).
pub const LEGACY_SKIP_BYTES_MAX: u64 = 1 << 30;

/// Legacy read_committed (§3.8): a slice whose every batch the converter would leave out (the
/// data of aborted transactions, markers) would give an old client nothing, and it has no other
/// way to move past records it is not given than being given later ones: it would fetch the same
/// offset forever behind an aborted transaction larger than its fetch size. So the read moves on
/// past such slices (at most [`LEGACY_SKIP_BYTES_MAX`] bytes), and the response starts at the
/// first batch that converts to something; the client accepts the gap as it accepts a compacted
/// topic's. Up to the last stable offset only: past it the client waits, as it should.
fn skip_left_out(
    log: &skiff_storage::Log,
    read: &mut SliceRead,
    mut found: SliceFound,
) -> Result<SliceFound, Option<skiff_storage::Error>> {
    let mut skipped = 0u64;
    while skipped < LEGACY_SKIP_BYTES_MAX {
        let (Some(slice), aborted) = &found else {
            break;
        };
        let Some(next_offset) = left_out_until(slice, aborted) else {
            break;
        };
        if next_offset >= read.read_end || next_offset <= read.fetch_offset {
            break;
        }
        skipped = skipped.saturating_add(slice.len());
        read.fetch_offset = next_offset;
        found = read_slice(log, read)?;
    }
    Ok(found)
}

/// The offset after `slice`'s last whole batch when the legacy read_committed converter would
/// leave out every whole batch of it; `None` when one converts to something (or there is no
/// whole batch, or the bytes cannot be read: the converter then says what is wrong).
fn left_out_until(slice: &FetchSlice, aborted: &[AbortedTransactionShape]) -> Option<i64> {
    let mut filter = AbortedFilter::from_first_offsets(
        aborted
            .iter()
            .map(|txn| (txn.producer_id, txn.first_offset)),
    );
    let mut header_bytes = [0u8; v2::BATCH_HEADER_BYTES];
    let mut control = Vec::new();
    let (mut position, mut next_offset) = (0u64, None);
    while position.saturating_add(header_bytes.len() as u64) <= slice.len() {
        let read = slice.read_at(position, &mut header_bytes).ok()?;
        let header = v2::BatchHeader::parse(header_bytes.get(..read)?).ok()?;
        let total = u64::try_from(header.total_bytes()).ok()?;
        if position.saturating_add(total) > slice.len() {
            break;
        }
        let left_out = if header.is_control() {
            control.resize(header.total_bytes().min(CONTROL_BATCH_BYTES_MAX), 0);
            let read = slice.read_at(position, &mut control).ok()?;
            filter.skips(control.get(..read)?, &header);
            true
        } else {
            filter.skips(&header_bytes, &header)
        };
        if !left_out {
            return None;
        }
        next_offset = Some(header.next_offset());
        position = position.saturating_add(total);
    }
    next_offset
}

/// The aborted transactions a read_committed fetch from `fetch_offset` must report: those whose
/// records lie at or past it and start below `read_end` (the last stable offset), from the
/// log's aborted-transaction index (Kafka's `collectAbortedTransactions`).
fn aborted_transactions(
    log: &skiff_storage::Log,
    fetch_offset: i64,
    read_end: i64,
) -> Result<Vec<AbortedTransactionShape>, skiff_storage::Error> {
    Ok(log
        .aborted_transactions(fetch_offset, read_end)?
        .into_iter()
        .map(|entry| AbortedTransactionShape {
            producer_id: entry.producer_id,
            first_offset: entry.first_offset,
        })
        .collect())
}

/// A throttled Fetch: answered at once with its throttle and no partitions, as Kafka's
/// `getThrottledResponse` answers it (the records read are not sent, nor counted as sent).
fn throttled_response(version: i16, correlation_id: i32, turn: &Turn<'_>) -> Vec<ResponsePart> {
    let shape = FetchResponseShape {
        throttle_time_ms: turn.throttle_field(),
        ..FetchResponseShape::default()
    };
    match encode_fetch_response(version, correlation_id, &shape) {
        Ok(layout) => layout
            .into_iter()
            .filter_map(|part| match part {
                FetchPart::Bytes(bytes) => Some(ResponsePart::Bytes(bytes)),
                FetchPart::Records { .. } => None,
            })
            .collect(),
        Err(error) => {
            tracing::error!(%error, "cannot lay out a throttled fetch response");
            Vec::new()
        }
    }
}

/// One partition's records in a response: stored batches sent as they are, or a legacy record
/// set planned (its size known, nothing converted).
enum Records {
    Stored(FetchSlice),
    Converted(PlannedSet),
}

impl Records {
    fn wire_len(&self) -> usize {
        match self {
            Self::Stored(slice) => usize::try_from(slice.len()).unwrap_or(usize::MAX),
            Self::Converted(set) => set.declared_len(),
        }
    }
}

/// One partition's records in a response, with the partition whose traffic they count as.
type Hole = (Records, Arc<Partition>);

fn build_response(
    ctx: &Ctx,
    version: i16,
    correlation_id: i32,
    reads: Vec<ReadTopic>,
    quota: Option<&Turn<'_>>,
) -> Vec<ResponsePart> {
    let mut shape = FetchResponseShape::default();
    let mut holes: Vec<Vec<Option<Hole>>> = Vec::with_capacity(reads.len());
    for read_topic in reads {
        let mut topic_shape = FetchTopicShape {
            name: read_topic.name,
            topic_id: read_topic.topic_id,
            partitions: Vec::with_capacity(read_topic.partitions.len()),
        };
        let mut topic_holes = Vec::with_capacity(read_topic.partitions.len());
        for (partition_index, read) in read_topic.partitions {
            let (partition_shape, hole) = match read {
                PartitionRead::Failed { error_code } => (
                    FetchPartitionShape {
                        partition_index,
                        error_code,
                        ..FetchPartitionShape::default()
                    },
                    None,
                ),
                PartitionRead::FollowerOutOfRange {
                    log_start_offset,
                    high_watermark,
                } => (
                    FetchPartitionShape {
                        partition_index,
                        error_code: error_code::OFFSET_OUT_OF_RANGE,
                        high_watermark,
                        last_stable_offset: high_watermark,
                        log_start_offset,
                        ..FetchPartitionShape::default()
                    },
                    None,
                ),
                PartitionRead::Read {
                    partition,
                    topic,
                    fetch_offset,
                    slice,
                    high_watermark,
                    last_stable_offset,
                    aborted,
                    log_start_offset,
                    convert_to,
                    diverging_epoch,
                } => {
                    // Legacy read_committed (§3.8): the converter leaves out what this names.
                    let legacy_filter = (convert_to.is_some() && !aborted.is_empty()).then(|| {
                        AbortedFilter::from_first_offsets(
                            aborted
                                .iter()
                                .map(|txn| (txn.producer_id, txn.first_offset)),
                        )
                    });
                    let base = FetchPartitionShape {
                        partition_index,
                        error_code: error_code::NONE,
                        high_watermark,
                        last_stable_offset,
                        log_start_offset,
                        aborted_transactions: (version >= ISOLATION_FETCH_VERSION_MIN)
                            .then_some(aborted),
                        diverging_epoch,
                        ..FetchPartitionShape::default()
                    };
                    let (error_code, hole) = match (slice, convert_to) {
                        (None, _) => (error_code::NONE, None),
                        (Some(slice), None) => (error_code::NONE, Some(Records::Stored(slice))),
                        (Some(slice), Some(magic)) => {
                            match declared_size(
                                &conversion_settings(ctx),
                                (&slice, magic, fetch_offset),
                                legacy_filter.as_ref(),
                            ) {
                                Ok(0) => (error_code::NONE, None),
                                Ok(declared) => (
                                    error_code::NONE,
                                    Some(Records::Converted(PlannedSet::new(
                                        (slice, fetch_offset, declared),
                                        &topic,
                                        legacy_filter,
                                    ))),
                                ),
                                Err(ConversionError::UnsupportedCompression) => {
                                    (error_code::UNSUPPORTED_COMPRESSION_TYPE, None)
                                }
                                Err(error) => {
                                    tracing::warn!(topic = %topic.name, partition = partition.index(), %error, "down-conversion failed");
                                    (error_code::CORRUPT_MESSAGE, None)
                                }
                            }
                        }
                    };
                    let records_bytes = hole.as_ref().map_or(0, Records::wire_len);
                    (
                        FetchPartitionShape {
                            error_code,
                            records_bytes,
                            ..base
                        },
                        hole.map(|hole| (hole, partition)),
                    )
                }
            };
            topic_shape.partitions.push(partition_shape);
            topic_holes.push(hole);
        }
        shape.topics.push(topic_shape);
        holes.push(topic_holes);
    }
    lay_out(ctx, version, correlation_id, &shape, holes, quota)
}

/// The down-conversion settings of this broker's config.
fn conversion_settings(ctx: &Ctx) -> ConversionSettings {
    ConversionSettings {
        chunk_bytes: ctx.config.down_conversion_chunk_bytes,
        read_bytes: ctx.config.down_conversion_read_bytes,
        mode: ctx.config.down_conversion_mode,
    }
}

/// The response plan of `shape` with its records in `holes`; when the client is over its
/// consumer or request quota ([`Turn::fetch_throttled`]), the throttled empty answer instead.
fn lay_out(
    ctx: &Ctx,
    version: i16,
    correlation_id: i32,
    shape: &FetchResponseShape,
    mut holes: Vec<Vec<Option<Hole>>>,
    quota: Option<&Turn<'_>>,
) -> Vec<ResponsePart> {
    let layout = match encode_fetch_response(version, correlation_id, shape) {
        Ok(layout) => layout,
        Err(error) => {
            tracing::error!(%error, "cannot lay out fetch response");
            return Vec::new();
        }
    };
    if let Some(turn) = quota {
        let response_bytes: usize = layout.iter().map(FetchPart::len).sum();
        if turn.fetch_throttled(response_bytes) {
            return throttled_response(version, correlation_id, turn);
        }
    }
    if let Some(target) = target_magic(version) {
        return plan_legacy(ctx, target, layout, &mut holes);
    }
    layout
        .into_iter()
        .filter_map(|part| match part {
            FetchPart::Bytes(bytes) => Some(ResponsePart::Bytes(bytes)),
            FetchPart::Records {
                topic_index,
                partition_index,
                ..
            } => match take_hole(&mut holes, topic_index, partition_index)? {
                Records::Stored(slice) => Some(ResponsePart::File(Box::new(slice))),
                Records::Converted(_) => None,
            },
        })
        .collect()
}

/// The records of a layout's hole, counted as sent by their partition: counted once the response
/// is laid out, what goes on the wire (stored bytes, or a legacy fetch's declared converted size).
fn take_hole(
    holes: &mut [Vec<Option<Hole>>],
    topic_index: usize,
    partition_index: usize,
) -> Option<Records> {
    let (records, partition) = holes
        .get_mut(topic_index)
        .and_then(|topic| topic.get_mut(partition_index))
        .and_then(Option::take)?;
    let sent = u64::try_from(records.wire_len()).unwrap_or(u64::MAX);
    partition.traffic().count_sent(sent);
    Some(records)
}

/// A legacy response's plan: one part holding its header bytes and its planned record sets, each
/// converted at its turn on the wire (eager mode: all of them now).
fn plan_legacy(
    ctx: &Ctx,
    target: Magic,
    layout: Vec<FetchPart>,
    holes: &mut [Vec<Option<Hole>>],
) -> Vec<ResponsePart> {
    let (header_bytes, sets) = layout
        .iter()
        .fold((0, 0), |(bytes, sets), part| match part {
            FetchPart::Bytes(part) => (bytes + part.len(), sets),
            FetchPart::Records { .. } => (bytes, sets + 1),
        });
    let mut builder = LegacyResponseBuilder::new(
        (target, conversion_settings(ctx), &ctx.metrics),
        header_bytes,
        sets,
    );
    for part in layout {
        match part {
            FetchPart::Bytes(bytes) => builder.bytes(&bytes),
            FetchPart::Records {
                topic_index,
                partition_index,
                ..
            } => {
                if let Some(Records::Converted(set)) =
                    take_hole(holes, topic_index, partition_index)
                {
                    builder.records(set);
                }
            }
        }
    }
    match builder.finish() {
        Ok(response) => {
            ctx.metrics.legacy_plan_held(response.held_bytes());
            vec![ResponsePart::Legacy(Box::new(response))]
        }
        Err(error) => {
            tracing::error!(%error, "cannot convert a legacy fetch response (eager mode)");
            Vec::new()
        }
    }
}
