//! Bounded decoders for the responses skiff-bench reads from a broker under test: CreateTopics v2,
//! Produce v3 and Fetch v4 (the lowest versions Apache Kafka 4.x still serves, and all Skiff and
//! Tansu serve). Built on skiff-protocol's [`Reader`], which checks every length and count against
//! the bytes that remain, because the broker under test is a peer like any other: a broken one
//! must give a clear error, not an allocation sized by a count it sent.
//!
//! Must never: allocate by a count read from the response before [`capacity_for`] has checked it,
//! decode with kafka-protocol's decoders, or panic on any input.

use skiff_protocol::codec::{capacity_for, Reader};
use skiff_protocol::DecodeError;

/// Most topics a response to one of our requests may carry (we name one).
pub const TOPICS_MAX: usize = 64;
/// Most partitions per topic a response may carry.
pub const PARTITIONS_MAX: usize = 100_000;
/// Most aborted transactions per fetched partition.
pub const ABORTED_TRANSACTIONS_MAX: usize = 100_000;

/// Smallest encoded topic entry: a string length and an array count.
const TOPIC_BYTES_MIN: usize = 2 + 4;

/// One partition's outcome in a Produce response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducedPartition {
    /// Partition index.
    pub partition: i32,
    /// Kafka error code (0 = none).
    pub error_code: i16,
    /// Offset of the first appended record.
    pub base_offset: i64,
}

/// One partition of a Fetch response, borrowing its record bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchedPartition<'a> {
    /// Partition index.
    pub partition: i32,
    /// Kafka error code (0 = none).
    pub error_code: i16,
    /// The partition's high watermark.
    pub high_watermark: i64,
    /// The record batches (possibly ending with a partial one); empty for null.
    pub records: &'a [u8],
}

/// A response's header: checks the correlation id and returns a reader over the body.
fn body(frame: &[u8], correlation_id: i32) -> Result<Reader<'_>, DecodeError> {
    let mut reader = Reader::new(frame);
    if reader.i32()? != correlation_id {
        return Err(DecodeError::Invalid {
            reason: "response carries another correlation id",
        });
    }
    Ok(reader)
}

/// An array that must be present (−1 is an error here).
fn required_len(
    reader: &mut Reader<'_>,
    element_bytes_min: usize,
    count_max: usize,
) -> Result<usize, DecodeError> {
    reader
        .array_len(element_bytes_min, count_max)?
        .ok_or(DecodeError::UnexpectedNull)
}

/// Decodes a CreateTopics v2 response body (after the size prefix); returns each topic's name
/// and error code.
pub fn create_topics_v2(
    frame: &[u8],
    correlation_id: i32,
) -> Result<Vec<(String, i16)>, DecodeError> {
    let mut reader = body(frame, correlation_id)?;
    let _throttle_time_ms = reader.i32()?;
    // name (2+), error code (2), error message (2+).
    const TOPIC_RESULT_BYTES_MIN: usize = 2 + 2 + 2;
    let count = required_len(&mut reader, TOPIC_RESULT_BYTES_MIN, TOPICS_MAX)?;
    let mut topics = Vec::with_capacity(capacity_for(
        count,
        reader.remaining(),
        TOPIC_RESULT_BYTES_MIN,
        TOPICS_MAX,
    )?);
    for _ in 0..count {
        let name = reader.string()?.to_owned();
        let error_code = reader.i16()?;
        let _error_message = reader.nullable_string()?;
        topics.push((name, error_code));
    }
    reader.expect_end()?;
    Ok(topics)
}

/// Decodes a Produce v3 response body (after the size prefix).
pub fn produce_v3(
    frame: &[u8],
    correlation_id: i32,
) -> Result<Vec<ProducedPartition>, DecodeError> {
    // index (4), error code (2), base offset (8), log append time (8).
    const PARTITION_BYTES: usize = 4 + 2 + 8 + 8;
    let mut reader = body(frame, correlation_id)?;
    let topic_count = required_len(&mut reader, TOPIC_BYTES_MIN, TOPICS_MAX)?;
    let mut partitions = Vec::new();
    for _ in 0..topic_count {
        let _name = reader.string()?;
        let count = required_len(&mut reader, PARTITION_BYTES, PARTITIONS_MAX)?;
        partitions.reserve(capacity_for(
            count,
            reader.remaining(),
            PARTITION_BYTES,
            PARTITIONS_MAX,
        )?);
        for _ in 0..count {
            let partition = reader.i32()?;
            let error_code = reader.i16()?;
            let base_offset = reader.i64()?;
            let _log_append_time_ms = reader.i64()?;
            partitions.push(ProducedPartition {
                partition,
                error_code,
                base_offset,
            });
        }
    }
    let _throttle_time_ms = reader.i32()?;
    reader.expect_end()?;
    Ok(partitions)
}

/// Decodes a Fetch v4 response body (after the size prefix), borrowing each partition's records.
pub fn fetch_v4(
    frame: &[u8],
    correlation_id: i32,
) -> Result<Vec<FetchedPartition<'_>>, DecodeError> {
    // index (4), error (2), high watermark (8), last stable offset (8), aborted (4), records (4).
    const PARTITION_BYTES_MIN: usize = 4 + 2 + 8 + 8 + 4 + 4;
    // producer id (8), first offset (8).
    const ABORTED_BYTES: usize = 16;
    let mut reader = body(frame, correlation_id)?;
    let _throttle_time_ms = reader.i32()?;
    let topic_count = required_len(&mut reader, TOPIC_BYTES_MIN, TOPICS_MAX)?;
    let mut partitions = Vec::new();
    for _ in 0..topic_count {
        let _name = reader.string()?;
        let count = required_len(&mut reader, PARTITION_BYTES_MIN, PARTITIONS_MAX)?;
        partitions.reserve(capacity_for(
            count,
            reader.remaining(),
            PARTITION_BYTES_MIN,
            PARTITIONS_MAX,
        )?);
        for _ in 0..count {
            let partition = reader.i32()?;
            let error_code = reader.i16()?;
            let high_watermark = reader.i64()?;
            let _last_stable_offset = reader.i64()?;
            if let Some(aborted) = reader.array_len(ABORTED_BYTES, ABORTED_TRANSACTIONS_MAX)? {
                reader.skip(aborted * ABORTED_BYTES)?;
            }
            let records = reader.nullable_bytes()?.unwrap_or_default();
            partitions.push(FetchedPartition {
                partition,
                error_code,
                high_watermark,
                records,
            });
        }
    }
    reader.expect_end()?;
    Ok(partitions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::produce_response::{
        PartitionProduceResponse, TopicProduceResponse,
    };
    use kafka_protocol::messages::{
        CreateTopicsResponse, FetchResponse, ProduceResponse, TopicName,
    };
    use kafka_protocol::protocol::{Encodable, StrBytes};
    use proptest::prelude::*;

    /// `message` encoded at `version` after a v0 response header with `correlation_id`.
    fn frame<M: Encodable>(message: &M, version: i16, correlation_id: i32) -> Vec<u8> {
        let mut out = BytesMut::new();
        out.extend_from_slice(&correlation_id.to_be_bytes());
        message.encode(&mut out, version).unwrap();
        out.to_vec()
    }

    fn topic_name(name: &str) -> TopicName {
        TopicName(StrBytes::from_string(name.to_owned()))
    }

    fn produce_response() -> ProduceResponse {
        ProduceResponse::default().with_responses(vec![TopicProduceResponse::default()
            .with_name(topic_name("t"))
            .with_partition_responses(vec![
                PartitionProduceResponse::default()
                    .with_index(0)
                    .with_base_offset(41),
                PartitionProduceResponse::default()
                    .with_index(1)
                    .with_error_code(6),
            ])])
    }

    fn fetch_response(records: &'static [u8]) -> FetchResponse {
        FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
            .with_topic(topic_name("t"))
            .with_partitions(vec![PartitionData::default()
                .with_partition_index(3)
                .with_high_watermark(99)
                .with_records(Some(bytes::Bytes::from_static(records)))])])
    }

    #[test]
    fn decodes_what_kafka_protocol_encodes() {
        let produced = produce_v3(&frame(&produce_response(), 3, 7), 7).unwrap();
        assert_eq!(
            produced,
            vec![
                ProducedPartition {
                    partition: 0,
                    error_code: 0,
                    base_offset: 41
                },
                ProducedPartition {
                    partition: 1,
                    error_code: 6,
                    base_offset: 0
                },
            ]
        );
        let fetch_frame = frame(&fetch_response(b"abc"), 4, 8);
        let fetched = fetch_v4(&fetch_frame, 8).unwrap();
        assert_eq!(
            fetched,
            vec![FetchedPartition {
                partition: 3,
                error_code: 0,
                high_watermark: 99,
                records: b"abc"
            }]
        );
        let created =
            CreateTopicsResponse::default().with_topics(vec![CreatableTopicResult::default()
                .with_name(topic_name("x"))
                .with_error_code(36)]);
        assert_eq!(
            create_topics_v2(&frame(&created, 2, 1), 1).unwrap(),
            vec![("x".to_owned(), 36)]
        );
    }

    #[test]
    fn another_correlation_id_and_trailing_bytes_are_errors() {
        let mut bytes = frame(&produce_response(), 3, 7);
        assert!(produce_v3(&bytes, 8).is_err());
        bytes.push(0);
        assert!(produce_v3(&bytes, 7).is_err());
    }

    #[test]
    fn a_huge_count_is_refused_before_any_allocation() {
        // correlation id, throttle, one topic "t", then 2^31−1 partitions in a few bytes.
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&1i32.to_be_bytes());
        bytes.extend_from_slice(&0i32.to_be_bytes());
        bytes.extend_from_slice(&1i32.to_be_bytes());
        bytes.extend_from_slice(&1i16.to_be_bytes());
        bytes.push(b't');
        bytes.extend_from_slice(&i32::MAX.to_be_bytes());
        assert!(matches!(
            fetch_v4(&bytes, 1),
            Err(DecodeError::CountTooLarge { .. } | DecodeError::Truncated { .. })
        ));
    }

    proptest! {
        #[test]
        fn any_bytes_decode_or_fail_without_panicking(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let _ = produce_v3(&bytes, 0);
            let _ = fetch_v4(&bytes, 0);
            let _ = create_topics_v2(&bytes, 0);
        }

        #[test]
        fn every_truncation_of_a_fetch_response_is_an_error(cut in 0usize..60) {
            let whole = frame(&fetch_response(b"records"), 4, 5);
            let cut = cut.min(whole.len() - 1);
            prop_assert!(fetch_v4(&whole[..cut], 5).is_err());
        }
    }
}
