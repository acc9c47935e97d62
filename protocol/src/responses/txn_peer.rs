//! Bounded decoders for the transaction responses one broker reads from another: the
//! WriteTxnMarkers v1 response (a transaction coordinator reading a partition leader's answer) and
//! the AddPartitionsToTxn v4–v5 response (a partition leader reading the coordinator's answer to
//! its KIP-890 verification or add). Each takes the response body, after the response header
//! (the inter-broker client checks the correlation id and strips the header), and fills
//! kafka-protocol's structs; the requests are encoded with kafka-protocol's `Encodable`.
//!
//! Must never: call kafka-protocol's `Decodable` on a peer's bytes, allocate by a peer's count
//! before it is checked against the bytes remaining and a named maximum, or accept a version the
//! peer's request could not have been sent at.

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnResponse, ProducerId, TopicName, TransactionalId, WriteTxnMarkersResponse,
};

use crate::error::DecodeError;
use crate::limits::{
    PARTITIONS_PER_TOPIC_MAX, TOPICS_PER_REQUEST_MAX, TRANSACTIONS_PER_REQUEST_MAX,
};
use crate::requests::source::{array, BytesSource, Source};

/// The one WriteTxnMarkers version Kafka 4.x and Skiff speak (flexible).
pub const WRITE_TXN_MARKERS_VERSION: i16 = 1;

/// The AddPartitionsToTxn versions of the broker's batched form (flexible).
pub const ADD_PARTITIONS_TO_TXN_BATCHED_VERSIONS: std::ops::RangeInclusive<i16> = 4..=5;

/// Fewest bytes of a compact string or array: its varint length.
const COMPACT_PREFIX_BYTES_MIN: usize = 1;

/// Fewest bytes of a topic result: name, partition array, tagged fields.
const TOPIC_RESULT_BYTES_MIN: usize = 3 * COMPACT_PREFIX_BYTES_MIN;

/// Fewest bytes of a partition result: index int32, error int16, tagged fields.
const PARTITION_RESULT_BYTES_MIN: usize = 4 + 2 + COMPACT_PREFIX_BYTES_MIN;

/// Decodes a WriteTxnMarkers response body (after the response header). Only v1 exists.
pub fn decode_write_txn_markers_response(
    body: &Bytes,
    version: i16,
) -> Result<WriteTxnMarkersResponse, DecodeError> {
    if version != WRITE_TXN_MARKERS_VERSION {
        return Err(DecodeError::Invalid {
            reason: "a WriteTxnMarkers response version other than 1",
        });
    }
    let s = &mut BytesSource::new(body);
    let mut m = WriteTxnMarkersResponse::default();
    // producer id int64, topics, tagged fields
    let marker_bytes_min = 8 + 2 * COMPACT_PREFIX_BYTES_MIN;
    m.markers = array(
        s,
        true,
        marker_bytes_min,
        TRANSACTIONS_PER_REQUEST_MAX,
        |s| {
            let mut marker = WritableTxnMarkerResult::default();
            marker.producer_id = ProducerId(s.i64()?);
            marker.topics = array(
                s,
                true,
                TOPIC_RESULT_BYTES_MIN,
                TOPICS_PER_REQUEST_MAX,
                |s| {
                    let mut topic = WritableTxnMarkerTopicResult::default();
                    topic.name = TopicName(s.string(true)?);
                    topic.partitions =
                        partition_results(s, |partition_index, error_code, tags| {
                            let mut result = WritableTxnMarkerPartitionResult::default();
                            result.partition_index = partition_index;
                            result.error_code = error_code;
                            result.unknown_tagged_fields = tags;
                            result
                        })?;
                    topic.unknown_tagged_fields = s.unknown_tagged_fields()?;
                    Ok(topic)
                },
            )?;
            marker.unknown_tagged_fields = s.unknown_tagged_fields()?;
            Ok(marker)
        },
    )?;
    m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    s.finish()?;
    Ok(m)
}

/// Decodes an AddPartitionsToTxn response body of the batched form, v4 or v5 (after the
/// response header). The client form's versions 0–3 are never read by a broker.
pub fn decode_add_partitions_to_txn_response(
    body: &Bytes,
    version: i16,
) -> Result<AddPartitionsToTxnResponse, DecodeError> {
    if !ADD_PARTITIONS_TO_TXN_BATCHED_VERSIONS.contains(&version) {
        return Err(DecodeError::Invalid {
            reason: "an AddPartitionsToTxn response version outside 4 to 5",
        });
    }
    let s = &mut BytesSource::new(body);
    let mut m = AddPartitionsToTxnResponse::default();
    m.throttle_time_ms = s.i32()?;
    m.error_code = s.i16()?;
    // transactional id, topic results, tagged fields
    let result_bytes_min = 3 * COMPACT_PREFIX_BYTES_MIN;
    m.results_by_transaction = array(
        s,
        true,
        result_bytes_min,
        TRANSACTIONS_PER_REQUEST_MAX,
        |s| {
            let mut result = AddPartitionsToTxnResult::default();
            result.transactional_id = TransactionalId(s.string(true)?);
            result.topic_results = array(
                s,
                true,
                TOPIC_RESULT_BYTES_MIN,
                TOPICS_PER_REQUEST_MAX,
                |s| {
                    let mut topic = AddPartitionsToTxnTopicResult::default();
                    topic.name = TopicName(s.string(true)?);
                    topic.results_by_partition =
                        partition_results(s, |partition_index, error_code, tags| {
                            let mut partition = AddPartitionsToTxnPartitionResult::default();
                            partition.partition_index = partition_index;
                            partition.partition_error_code = error_code;
                            partition.unknown_tagged_fields = tags;
                            partition
                        })?;
                    topic.unknown_tagged_fields = s.unknown_tagged_fields()?;
                    Ok(topic)
                },
            )?;
            result.unknown_tagged_fields = s.unknown_tagged_fields()?;
            Ok(result)
        },
    )?;
    m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    s.finish()?;
    Ok(m)
}

/// A compact array of (partition index, error code, tagged fields), the partition result shape
/// both responses share, each built by `make`.
fn partition_results<T>(
    s: &mut BytesSource<'_>,
    mut make: impl FnMut(i32, i16, crate::requests::source::TaggedFields) -> T,
) -> Result<Vec<T>, DecodeError> {
    array(
        s,
        true,
        PARTITION_RESULT_BYTES_MIN,
        PARTITIONS_PER_TOPIC_MAX,
        |s| {
            let partition_index = s.i32()?;
            let error_code = s.i16()?;
            let tags = s.unknown_tagged_fields()?;
            Ok(make(partition_index, error_code, tags))
        },
    )
}

#[cfg(test)]
mod tests;
