//! Fills a topic with KIP-283's data: 1 kB values, key `k<offset>`, in uncompressed v2 batches,
//! with several Produce requests in flight, and measures how fast the broker takes them.
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
    /// Produce requests in flight.
    pub in_flight: usize,
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
    let mut builder = BatchBuilder::new(0, Compression::None);
    builder.reserve(usize::try_from(count)? * (RECORD_VALUE_BYTES + 32));
    let mut value = vec![0u8; RECORD_VALUE_BYTES];
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
    let mut connection = Connection::connect(bootstrap).await?;
    connection
        .create_topic(&spec.topic, spec.partition_count)
        .await?;
    connection
        .await_partitions_ready(&spec.topic, spec.partition_count)
        .await?;
    let started = Instant::now();
    let mut pending = VecDeque::new();
    let mut batch_bytes = 0u64;
    let mut next = 0u64;
    while next < spec.records_per_partition {
        let count = spec
            .records_per_batch
            .min(spec.records_per_partition - next);
        let mut per_partition = Vec::with_capacity(usize::try_from(spec.partition_count)?);
        for partition in 0..spec.partition_count {
            let one = batch(next, count)?;
            batch_bytes += u64::try_from(one.len())?;
            per_partition.push((partition, Bytes::from(one)));
        }
        next += count;
        if pending.len() >= spec.in_flight.max(1) {
            let id = pending.pop_front().context("pending")?;
            connection.receive_produce(id).await?;
        }
        pending.push_back(connection.send_produce(&spec.topic, &per_partition).await?);
    }
    while let Some(id) = pending.pop_front() {
        connection.receive_produce(id).await?;
    }
    Ok(ProduceOutcome {
        record_count: spec.records_per_partition * u64::try_from(spec.partition_count)?,
        batch_bytes,
        seconds: started.elapsed().as_secs_f64(),
    })
}
