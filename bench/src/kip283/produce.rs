//! Fills a topic with KIP-283's data: 1 kB values, key `k<offset>`, in uncompressed v2 batches,
//! with several Produce requests in flight, and measures how fast the broker takes them. Like
//! Kafka's producer, it puts one batch per partition in a request until the request would pass
//! [`ProduceSpec::request_bytes_max`] (`max.request.size`), so a topic of many partitions is
//! filled with requests of the same size as a topic of few, not with one huge request a round.
//!
//! Must never: produce to a topic it did not create (offsets must start at 0 for verification), or
//! keep more than [`ProduceSpec::in_flight`] requests outstanding.

use std::collections::VecDeque;
use std::time::Instant;

use anyhow::Context;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use skiff_protocol::records::record::{BatchBuilder, NewRecord};
use skiff_protocol::records::Compression;

use super::{record_key, value_byte, RECORD_VALUE_BYTES};
use crate::client::Connection;

/// Record timestamp (fixed, so runs are byte-identical).
const TIMESTAMP_MS: i64 = 1_700_000_000_000;

/// The default cap on one Produce request's batch bytes: Kafka's producer `max.request.size`
/// default, 1,048,576 bytes (librdkafka's `message.max.bytes` is the same). Without it, 1,000
/// partitions of 16 kB batches made 16 MB requests that the broker (one request at a time per
/// connection, as Kafka) could not overlap with the client's next one.
pub const PRODUCE_REQUEST_BYTES_MAX: usize = 1 << 20;

/// What to produce.
#[derive(Debug, Clone)]
pub struct ProduceSpec {
    /// Topic (created here).
    pub topic: String,
    /// Partitions.
    pub partition_count: i32,
    /// Records per partition.
    pub records_per_partition: u64,
    /// Records per v2 batch (KIP-283's producer used the 16 kB default `batch.size`).
    pub records_per_batch: u64,
    /// Bytes of each record's value ([`RECORD_VALUE_BYTES`] for every reader that verifies).
    pub value_bytes: usize,
    /// Produce requests in flight.
    pub in_flight: usize,
    /// Batch bytes per Produce request at most (one batch goes alone if larger): see
    /// [`PRODUCE_REQUEST_BYTES_MAX`].
    pub request_bytes_max: usize,
    /// Produce `acks`: [`crate::client::ACKS_LEADER`] (the leader's append) or [`crate::client::ACKS_ALL`]
    /// (every in-sync replica's).
    pub acks: i16,
}

/// How producing went.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProduceOutcome {
    /// Records acknowledged.
    pub record_count: u64,
    /// Batch bytes sent.
    pub batch_bytes: u64,
    /// Wall time from the first request to the last acknowledgement.
    pub seconds: f64,
}

impl ProduceOutcome {
    /// Batch bytes per second.
    pub fn bytes_per_second(&self) -> f64 {
        self.batch_bytes as f64 / self.seconds.max(f64::MIN_POSITIVE)
    }
}

/// One v2 batch holding offsets `first..first + count` of a partition.
pub fn batch(first: u64, count: u64) -> anyhow::Result<Vec<u8>> {
    batch_of(first, count, RECORD_VALUE_BYTES)
}

/// [`batch`] with values of `value_bytes` (only [`RECORD_VALUE_BYTES`] reads back verified).
pub fn batch_of(first: u64, count: u64, value_bytes: usize) -> anyhow::Result<Vec<u8>> {
    let mut builder = BatchBuilder::new(0, Compression::None);
    builder.reserve(usize::try_from(count)? * (value_bytes + 32));
    let mut value = vec![0u8; value_bytes];
    for index in 0..count {
        let offset = i64::try_from(first + index)?;
        value.fill(value_byte(offset));
        let key = record_key(offset);
        builder.push(&NewRecord {
            offset_delta: i32::try_from(index)?,
            timestamp: TIMESTAMP_MS,
            key: Some(key.as_bytes()),
            value: Some(&value),
            headers: &[],
        })?;
    }
    Ok(builder.build()?)
}

/// Creates the topic and fills every partition with `records_per_partition` records.
pub async fn produce(bootstrap: &str, spec: &ProduceSpec) -> anyhow::Result<ProduceOutcome> {
    create_ready(bootstrap, &spec.topic, spec.partition_count).await?;
    produce_created(bootstrap, spec).await
}

/// Creates `topic` and waits until every partition has a leader.
pub async fn create_ready(
    bootstrap: &str,
    topic: &str,
    partition_count: i32,
) -> anyhow::Result<()> {
    let mut connection = Connection::connect(bootstrap).await?;
    connection.create_topic(topic, partition_count).await?;
    connection
        .await_partitions_ready(topic, partition_count)
        .await
}

/// [`produce`] into a topic [`create_ready`] made: what a broker spends creating a topic (files,
/// indexes, at 1,000 partitions a large part of a round) is not counted with its appends.
pub async fn produce_created(
    bootstrap: &str,
    spec: &ProduceSpec,
) -> anyhow::Result<ProduceOutcome> {
    produce_over(bootstrap, spec, 1).await
}

/// [`produce_created`] over `connections` connections side by side, each producing to every
/// `connections`-th partition (Kafka's producers spread over a broker's connections the same way:
/// each partition's batches on one connection, in order).
pub async fn produce_over(
    bootstrap: &str,
    spec: &ProduceSpec,
    connections: usize,
) -> anyhow::Result<ProduceOutcome> {
    let connections = connections.max(1);
    let started = Instant::now();
    let mut lanes = tokio::task::JoinSet::new();
    for lane in 0..connections {
        let (bootstrap, spec) = (bootstrap.to_owned(), spec.clone());
        lanes.spawn(async move { produce_lane(&bootstrap, &spec, lane, connections).await });
    }
    let (mut record_count, mut batch_bytes) = (0u64, 0u64);
    while let Some(lane) = lanes.join_next().await {
        let (records, bytes) = lane??;
        record_count += records;
        batch_bytes += bytes;
    }
    Ok(ProduceOutcome {
        record_count,
        batch_bytes,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// One connection's share of [`produce_over`]: partitions `lane`, `lane + lanes`, ...; returns
/// the records and batch bytes it sent.
async fn produce_lane(
    bootstrap: &str,
    spec: &ProduceSpec,
    lane: usize,
    lanes: usize,
) -> anyhow::Result<(u64, u64)> {
    let mut connection = Connection::connect(bootstrap).await?;
    let partitions: Vec<i32> = (0..spec.partition_count)
        .skip(lane)
        .step_by(lanes)
        .collect();
    let mut pending = VecDeque::new();
    let mut batch_bytes = 0u64;
    let mut next = 0u64;
    while next < spec.records_per_partition {
        let count = spec
            .records_per_batch
            .min(spec.records_per_partition - next);
        // Each request goes as soon as it is full, while the rest of the round is built, as
        // Kafka's sender drains full batches while the application adds records.
        let mut filler = RequestFiller::new(spec.request_bytes_max);
        for &partition in &partitions {
            let one = batch_of(next, count, spec.value_bytes)?;
            batch_bytes += u64::try_from(one.len())?;
            if let Some(full) = filler.push(partition, Bytes::from(one)) {
                send(&mut connection, spec, &mut pending, &full).await?;
            }
        }
        if let Some(last) = filler.finish() {
            send(&mut connection, spec, &mut pending, &last).await?;
        }
        next += count;
    }
    while let Some(id) = pending.pop_front() {
        connection.receive_produce(id).await?;
    }
    let records = spec.records_per_partition * u64::try_from(partitions.len())?;
    Ok((records, batch_bytes))
}

/// Gathers batches, in order, into requests of at most `request_bytes_max` batch bytes each (a
/// longer batch alone), as Kafka's producer drains a node's batches up to `max.request.size`.
struct RequestFiller {
    request_bytes_max: usize,
    bytes: usize,
    batches: Vec<(i32, Bytes)>,
}

impl RequestFiller {
    fn new(request_bytes_max: usize) -> Self {
        Self {
            request_bytes_max,
            bytes: 0,
            batches: Vec::new(),
        }
    }

    /// Adds a batch; returns the request it closed, if it did not fit there.
    fn push(&mut self, partition: i32, batch: Bytes) -> Option<Vec<(i32, Bytes)>> {
        let full = (!self.batches.is_empty()
            && self.bytes.saturating_add(batch.len()) > self.request_bytes_max)
            .then(|| {
                self.bytes = 0;
                std::mem::take(&mut self.batches)
            });
        self.bytes = self.bytes.saturating_add(batch.len());
        self.batches.push((partition, batch));
        full
    }

    /// The last request, if any batch is left.
    fn finish(&mut self) -> Option<Vec<(i32, Bytes)>> {
        self.bytes = 0;
        (!self.batches.is_empty()).then(|| std::mem::take(&mut self.batches))
    }
}

/// Sends one Produce request of `batches` to the spec's topic with its acks, first waiting for
/// the oldest answer if the spec's `in_flight` are outstanding.
async fn send(
    connection: &mut Connection,
    spec: &ProduceSpec,
    pending: &mut VecDeque<i32>,
    batches: &[(i32, Bytes)],
) -> anyhow::Result<()> {
    if pending.len() >= spec.in_flight.max(1) {
        let id = pending.pop_front().context("pending")?;
        connection.receive_produce(id).await?;
    }
    pending.push_back(
        connection
            .send_produce(&spec.topic, spec.acks, batches)
            .await?,
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The partitions of each request a filler makes of batches of these lengths.
    fn requests(lengths: &[usize], request_bytes_max: usize) -> Vec<Vec<i32>> {
        let mut filler = RequestFiller::new(request_bytes_max);
        let partitions = |request: Vec<(i32, Bytes)>| -> Vec<i32> {
            request
                .into_iter()
                .map(|(partition, _)| partition)
                .collect()
        };
        let mut requests = Vec::new();
        for (partition, &len) in (0..).zip(lengths) {
            if let Some(full) = filler.push(partition, Bytes::from(vec![0; len])) {
                requests.push(partitions(full));
            }
        }
        requests.extend(filler.finish().map(partitions));
        requests
    }

    #[test]
    fn batches_fill_requests_up_to_the_cap_in_order() {
        assert_eq!(
            requests(&[400, 400, 400, 100], 1000),
            [vec![0, 1], vec![2, 3]]
        );
        assert_eq!(requests(&[400, 600, 1], 1000), [vec![0, 1], vec![2]]);
    }

    #[test]
    fn a_batch_over_the_cap_goes_alone_and_nothing_is_left_out() {
        assert_eq!(requests(&[10, 5000, 10], 1000), [vec![0], vec![1], vec![2]]);
        assert!(requests(&[], 1000).is_empty());
        let spread = requests(&[16_800; 1000], PRODUCE_REQUEST_BYTES_MAX);
        assert_eq!(spread.first().map(Vec::len), Some(62));
        let all: Vec<i32> = spread.into_iter().flatten().collect();
        assert_eq!(all, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn an_unbounded_cap_keeps_one_request_a_round() {
        assert_eq!(requests(&[16_800; 1000], usize::MAX).len(), 1);
    }
}
