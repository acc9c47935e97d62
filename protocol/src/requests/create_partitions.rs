//! CreatePartitions (key 37) request decoding, versions 0–3 (flexible from 2).

use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::{ApiKey, BrokerId, CreatePartitionsRequest, TopicName};

use super::source::{array, nullable_array, Source};
use super::{array_bytes_min, flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::{PARTITIONS_PER_TOPIC_MAX, REPLICAS_PER_PARTITION_MAX, TOPICS_PER_REQUEST_MAX};

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<CreatePartitionsRequest, DecodeError> {
    let c = flexible(ApiKey::CreatePartitions, version);
    let mut m = CreatePartitionsRequest::default();
    // name, count int32, nullable assignments array
    let topic_bytes_min = string_bytes_min(c) + 4 + array_bytes_min(c);
    m.topics = array(s, c, topic_bytes_min, TOPICS_PER_REQUEST_MAX, |s| {
        let mut topic = CreatePartitionsTopic::default();
        topic.name = TopicName(s.string(c)?);
        topic.count = s.i32()?;
        // Each new partition's replica list; a topic never has more partitions than the bound.
        topic.assignments =
            nullable_array(s, c, array_bytes_min(c), PARTITIONS_PER_TOPIC_MAX, |s| {
                let mut assignment = CreatePartitionsAssignment::default();
                assignment.broker_ids = array(s, c, 4, REPLICAS_PER_PARTITION_MAX, |s| {
                    Ok(BrokerId(s.i32()?))
                })?;
                if c {
                    assignment.unknown_tagged_fields = s.unknown_tagged_fields()?;
                }
                Ok(assignment)
            })?;
        if c {
            topic.unknown_tagged_fields = s.unknown_tagged_fields()?;
        }
        Ok(topic)
    })?;
    m.timeout_ms = s.i32()?;
    m.validate_only = s.bool()?;
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
