//! The replica fetcher (Kafka's `ReplicaFetcherThread`): one task per leader this broker follows
//! partitions of. It asks each followed partition whether its machine wants to fetch, sends one
//! Fetch v12 (`replica_id` = this broker, names, `last_fetched_epoch`) for all that do over one
//! PLAINTEXT connection to the leader's inter-broker listener, reads the answer with the bounded
//! `skiff_protocol::responses::fetch_reader` (never kafka-protocol's decoders: the bytes come from
//! a peer), and hands each partition its result on a blocking thread
//! ([`Partition::apply_fetch_result`] carries out the appends and truncations its machine
//! decides, under its lock).
//!
//! Bounds: one request in flight per leader; a response frame at most
//! `replica.fetch.response.max.bytes` plus [`RESPONSE_FRAMING_BYTES_MAX`]; one answer awaited
//! at most `replica.fetch.wait.max.ms` plus [`RESPONSE_GRACE`]. Partitions this broker catches up
//! for a reassignment share the broker's [`TokenBucket`]
//! (`skiff.reassignment.throttle.bytes.per.second`): a request asks them for at most what the
//! bucket allows, leaves them out while it is empty, and the bytes they bring are charged to it.
//!
//! Must never: append a batch the machine did not accept, keep a partition's fetch "in flight"
//! after its answer was lost (the machine is told `Lost`), or decode peer bytes with
//! kafka-protocol.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, RequestHeader, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};
use skiff_cluster::replica::{FetchResult, FetchedBatch, FollowerFetch};
use skiff_placement::NodeId;
use skiff_protocol::error_code::ErrorCode;
use skiff_protocol::records::v2;
use skiff_protocol::responses::fetch_reader::{decode_fetch_response, FetchResponseView};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::throttle::{Allowance, TokenBucket};
use crate::context::Ctx;
use crate::partition::topics::{Partition, Topic};

/// The Fetch version followers send: the first flexible one, with `last_fetched_epoch` and the
/// `DivergingEpoch` answer (v13's topic ids would need the leader's ids to match ours, which the
/// image guarantees, but names keep the request readable in captures).
pub const REPLICA_FETCH_VERSION: i16 = 12;
/// Bytes a response frame may carry beyond `replica.fetch.response.max.bytes`: headers, topic
/// and partition fields (a first batch larger than the limits still comes whole, bounded by
/// the leader's `max.message.bytes`).
pub const RESPONSE_FRAMING_BYTES_MAX: usize = 2 * 1024 * 1024;
/// How much longer than `replica.fetch.wait.max.ms` an answer may take before it counts as lost.
const RESPONSE_GRACE: Duration = Duration::from_secs(10);
/// How long a connection attempt to the leader may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Pause while no followed partition wants to fetch (all backing off after errors).
const IDLE_PAUSE: Duration = Duration::from_millis(50);

/// A partition this broker follows.
#[derive(Clone)]
pub struct Followed {
    /// Its topic.
    pub topic: Arc<Topic>,
    /// The partition.
    pub partition: Arc<Partition>,
}

/// Whether two assignments name the same partitions (of the same opened logs).
pub fn same_partitions(a: &[Followed], b: &[Followed]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            Arc::ptr_eq(&x.partition, &y.partition) && Arc::ptr_eq(&x.topic, &y.topic)
        })
}

/// One partition of a request in flight.
struct Sent {
    followed: Followed,
    fetch: FollowerFetch,
    /// The bytes asked of it (`replica.fetch.max.bytes`, or less when throttled).
    max_bytes: i32,
    /// Whether it is caught up for a reassignment: its bytes are charged to the throttle.
    throttled: bool,
}

/// The throttle of reassignment catch-up, shared by this broker's fetchers.
pub(crate) type Throttle = Arc<Mutex<TokenBucket>>;

/// Runs the fetcher for `leader` until its assignment's sender is dropped or the broker stops.
pub(crate) async fn run(
    ctx: Arc<Ctx>,
    leader: NodeId,
    mut assigned: watch::Receiver<Vec<Followed>>,
    throttle: Throttle,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut connection: Option<TcpStream> = None;
    let mut correlation_id: i32 = 0;
    let backoff = Duration::from_millis(ctx.config.replica_fetch_backoff_ms);
    tracing::info!(leader, "replica fetcher started");
    loop {
        if *shutdown.borrow() || assigned.has_changed().is_err() {
            tracing::info!(leader, "replica fetcher stopped");
            return;
        }
        let followed = assigned.borrow_and_update().clone();
        let sent = wanted(&ctx, leader, &followed, &throttle);
        if sent.is_empty() {
            tokio::select! {
                _ = tokio::time::sleep(IDLE_PAUSE) => {}
                _ = assigned.changed() => {}
                _ = shutdown.changed() => {}
            }
            continue;
        }
        correlation_id = correlation_id.wrapping_add(1);
        let exchanged = tokio::select! {
            result = exchange(&ctx, leader, &mut connection, correlation_id, &sent) => result,
            _ = shutdown.changed() => return,
        };
        match exchanged {
            Ok(frame) => {
                let applying = ctx.clone();
                let done = tokio::task::spawn_blocking(move || {
                    apply_response(&applying, leader, correlation_id, &frame, sent)
                })
                .await;
                match done {
                    Ok(0) => {}
                    Ok(throttled_bytes) => {
                        if let Ok(mut bucket) = throttle.lock() {
                            bucket.take(throttled_bytes, crate::clock::mono_ms());
                        }
                    }
                    Err(_) => tracing::error!(leader, "applying a fetch response failed"),
                }
            }
            Err(error) => {
                tracing::warn!(leader, %error, "replica fetch failed; retrying after backoff");
                connection = None;
                let now = crate::clock::mono_ms();
                for sent in &sent {
                    sent.followed.partition.fetch_lost(now, leader, &sent.fetch);
                }
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = shutdown.changed() => {}
                }
            }
        }
    }
}

/// The partitions whose machines want to fetch from `leader` now, with what to ask: those caught
/// up for a reassignment only within the throttle's allowance, which they share in order.
fn wanted(ctx: &Ctx, leader: NodeId, followed: &[Followed], throttle: &Throttle) -> Vec<Sent> {
    let now = crate::clock::mono_ms();
    let max_bytes = i32::try_from(ctx.config.replica_fetch_max_bytes).unwrap_or(i32::MAX);
    let mut allowance = throttle
        .lock()
        .map_or(Allowance::Unlimited, |mut bucket| bucket.allowance(now));
    let catching_up: BTreeSet<(String, i32)> = if allowance == Allowance::Unlimited {
        BTreeSet::new()
    } else {
        ctx.cluster.reassignment_catch_up()
    };
    let mut sent = Vec::new();
    for followed in followed {
        let partition = &followed.partition;
        let throttled = catching_up.contains(&(followed.topic.name.clone(), partition.index()));
        let max_bytes = match (throttled, allowance) {
            (false, _) | (true, Allowance::Unlimited) => max_bytes,
            (true, Allowance::Empty) => continue, // not even asked: nothing is in flight
            (true, Allowance::Bytes(bytes)) => {
                let asked = i32::try_from(bytes).unwrap_or(i32::MAX).min(max_bytes);
                let left = bytes.saturating_sub(u64::try_from(asked).unwrap_or(0));
                allowance = if left == 0 {
                    Allowance::Empty
                } else {
                    Allowance::Bytes(left)
                };
                asked
            }
        };
        // A fetch the machine wants sent to another leader (the partition moved since the driver
        // assigned it here) is not sent, and the partition tells its machine so.
        partition.poll_as_follower(now, leader, |fetch| {
            sent.push(Sent {
                followed: followed.clone(),
                fetch,
                max_bytes,
                throttled,
            })
        });
    }
    sent
}

/// The Fetch request for `sent`.
fn request(ctx: &Ctx, sent: &[Sent]) -> FetchRequest {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for sent in sent {
        let name = &sent.followed.topic.name;
        let log_start_offset = sent
            .followed
            .partition
            .log()
            .log_start_offset()
            .unwrap_or(-1);
        let partition = FetchPartition::default()
            .with_partition(sent.followed.partition.index())
            .with_current_leader_epoch(sent.fetch.current_leader_epoch)
            .with_fetch_offset(sent.fetch.fetch_offset)
            .with_last_fetched_epoch(sent.fetch.last_fetched_epoch.unwrap_or(-1))
            .with_log_start_offset(log_start_offset)
            .with_partition_max_bytes(sent.max_bytes);
        match topics
            .iter_mut()
            .find(|topic| topic.topic.0.as_str() == name)
        {
            Some(topic) => topic.partitions.push(partition),
            None => topics.push(
                FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(name.clone())))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    FetchRequest::default()
        .with_replica_id(BrokerId(ctx.config.node_id))
        .with_max_wait_ms(i32::try_from(ctx.config.replica_fetch_wait_max_ms).unwrap_or(500))
        .with_min_bytes(1)
        .with_max_bytes(
            i32::try_from(ctx.config.replica_fetch_response_max_bytes).unwrap_or(i32::MAX),
        )
        .with_isolation_level(0)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(topics)
}

/// Why one fetch exchange failed.
#[derive(Debug, thiserror::Error)]
enum ExchangeError {
    #[error("leader {0} is not registered or has no listener to fetch from")]
    NoEndpoint(NodeId),
    #[error(
        "leader {leader}'s listener {listener} is {protocol}: the fetcher speaks PLAINTEXT only"
    )]
    NotPlaintext {
        leader: NodeId,
        listener: String,
        protocol: String,
    },
    #[error("connecting: {0}")]
    Connect(String),
    #[error("encoding the request: {0}")]
    Encode(String),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("a response frame of {0} bytes is over the bound")]
    TooLarge(usize),
    #[error("no answer within the fetch wait and its grace")]
    Timeout,
}

/// Sends one request and reads its response frame (the bytes after the size prefix).
async fn exchange(
    ctx: &Ctx,
    leader: NodeId,
    connection: &mut Option<TcpStream>,
    correlation_id: i32,
    sent: &[Sent],
) -> Result<Vec<u8>, ExchangeError> {
    if connection.is_none() {
        let listener = ctx.config.inter_broker_listener().unwrap_or_default();
        let (host, port, protocol) = ctx
            .cluster
            .broker_address(leader, &listener)
            .ok_or(ExchangeError::NoEndpoint(leader))?;
        if protocol != "PLAINTEXT" {
            return Err(ExchangeError::NotPlaintext {
                leader,
                listener,
                protocol,
            });
        }
        let stream =
            tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect((host.as_str(), port)))
                .await
                .map_err(|_| ExchangeError::Connect(format!("{host}:{port}: timed out")))?
                .map_err(|error| ExchangeError::Connect(format!("{host}:{port}: {error}")))?;
        let _ = stream.set_nodelay(true);
        *connection = Some(stream);
    }
    let stream = connection
        .as_mut()
        .ok_or(ExchangeError::NoEndpoint(leader))?;
    let frame = request_frame(ctx, correlation_id, &request(ctx, sent))?;
    let wait = Duration::from_millis(ctx.config.replica_fetch_wait_max_ms) + RESPONSE_GRACE;
    let bound = ctx.config.replica_fetch_response_max_bytes as usize + RESPONSE_FRAMING_BYTES_MAX;
    tokio::time::timeout(wait, async {
        stream.write_all(&frame).await?;
        let size = stream.read_i32().await?;
        let size = usize::try_from(size).map_err(|_| ExchangeError::TooLarge(0))?;
        if size > bound {
            return Err(ExchangeError::TooLarge(size));
        }
        let mut body = vec![0u8; size];
        stream.read_exact(&mut body).await?;
        Ok(body)
    })
    .await
    .map_err(|_| ExchangeError::Timeout)?
}

/// Size prefix, request header v2 (flexible) and the request at [`REPLICA_FETCH_VERSION`].
fn request_frame(
    ctx: &Ctx,
    correlation_id: i32,
    request: &FetchRequest,
) -> Result<Vec<u8>, ExchangeError> {
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::Fetch as i16)
        .with_request_api_version(REPLICA_FETCH_VERSION)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_string(format!(
            "skiff-replica-fetcher-{}",
            ctx.config.node_id
        ))));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, 2)
        .map_err(|error| ExchangeError::Encode(error.to_string()))?;
    request
        .encode(&mut body, REPLICA_FETCH_VERSION)
        .map_err(|error| ExchangeError::Encode(error.to_string()))?;
    let size = i32::try_from(body.len()).map_err(|_| ExchangeError::TooLarge(body.len()))?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&size.to_be_bytes());
    frame.extend_from_slice(&body);
    Ok(frame)
}

/// Decodes a response and hands each sent partition its result. Blocking (appends, truncation).
/// Returns the record bytes the throttled partitions brought.
fn apply_response(
    ctx: &Ctx,
    leader: NodeId,
    correlation_id: i32,
    frame: &[u8],
    sent: Vec<Sent>,
) -> u64 {
    let now = crate::clock::mono_ms();
    let view = match decode_fetch_response(frame, REPLICA_FETCH_VERSION) {
        Ok(view) if view.correlation_id == correlation_id && view.error_code == 0 => view,
        Ok(view) => {
            tracing::warn!(
                leader,
                error_code = view.error_code,
                correlation_id = view.correlation_id,
                "replica fetch answered as a whole with an error or out of turn"
            );
            for sent in &sent {
                sent.followed.partition.fetch_lost(now, leader, &sent.fetch);
            }
            return 0;
        }
        Err(error) => {
            ctx.metrics.record_replica_fetch_decode_error();
            tracing::warn!(leader, %error, "a replica fetch response did not decode");
            for sent in &sent {
                sent.followed.partition.fetch_lost(now, leader, &sent.fetch);
            }
            return 0;
        }
    };
    let mut throttled_bytes = 0u64;
    for sent in sent {
        let found = find(
            &view,
            &sent.followed.topic.name,
            sent.followed.partition.index(),
        );
        let (result, records, leader_log_start) = match found {
            None => (FetchResult::Lost, &[][..], -1),
            Some((fields, records)) => (
                fetch_result(fields, records),
                records,
                fields.log_start_offset,
            ),
        };
        sent.followed.partition.apply_fetch_result(
            (crate::clock::mono_ms(), ctx.now_ms()),
            leader,
            &sent.fetch,
            &result,
            records,
        );
        if matches!(result, FetchResult::Records { .. }) {
            follow_log_start(&sent.followed, leader_log_start);
        }
        if sent.throttled {
            throttled_bytes += u64::try_from(records.len()).unwrap_or(u64::MAX);
        }
    }
    throttled_bytes
}

/// The response's partition `index` of `topic`.
fn find<'a>(
    view: &'a FetchResponseView<'a>,
    topic: &str,
    index: i32,
) -> Option<(
    &'a skiff_protocol::responses::fetch::FetchPartitionShape,
    &'a [u8],
)> {
    view.topics
        .iter()
        .filter(|t| t.name == topic)
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.fields.partition_index == index)
        .map(|p| (&p.fields, p.records))
}

/// What one partition's answer says, for the machine.
fn fetch_result(
    fields: &skiff_protocol::responses::fetch::FetchPartitionShape,
    records: &[u8],
) -> FetchResult {
    if fields.error_code == ErrorCode::OFFSET_OUT_OF_RANGE.code() && fields.log_start_offset >= 0 {
        return FetchResult::OutOfRange {
            log_start_offset: fields.log_start_offset,
            high_watermark: fields.high_watermark,
        };
    }
    if fields.error_code != 0 {
        return FetchResult::Error(ErrorCode(fields.error_code));
    }
    if let Some(diverging) = fields.diverging_epoch {
        return FetchResult::Diverging {
            epoch: diverging.epoch,
            end_offset: diverging.end_offset,
        };
    }
    // Whole batches only: a record set may end inside one (the leader's byte limit), and a
    // malformed header ends the list (the append's own checks refuse what follows anyway).
    let batches = v2::batch_positions(records)
        .map_while(Result::ok)
        .filter(|(position, header)| position + header.total_bytes() <= records.len())
        .map(|(_, header)| FetchedBatch {
            base: header.base_offset,
            last: header.last_offset(),
            epoch: header.partition_leader_epoch,
        })
        .collect();
    FetchResult::Records {
        batches,
        high_watermark: fields.high_watermark,
    }
}

/// Moves the follower's log start up to the leader's (DeleteRecords and retention on the leader,
/// Kafka's `maybeIncrementLogStartOffset`), never past its own end: records the leader deleted
/// must not come back if this replica leads next.
fn follow_log_start(followed: &Followed, leader_log_start: i64) {
    let log = followed.partition.log();
    let (Ok(start), Ok(end)) = (log.log_start_offset(), log.log_end_offset()) else {
        return;
    };
    let target = leader_log_start.min(end);
    if target > start {
        if let Err(error) = log.delete_records_before(target) {
            tracing::warn!(topic = %followed.topic.name, partition = followed.partition.index(), %error, "log start not moved to the leader's");
        }
    }
}
