//! AlterPartitionReassignments (key 45) request decoding, version 0 (flexible from the start).
//! Null `replicas` cancels a partition's reassignment.

use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::{AlterPartitionReassignmentsRequest, ApiKey, BrokerId, TopicName};

use super::source::{array, nullable_array, Source};
use super::{array_bytes_min, flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::{PARTITIONS_PER_TOPIC_MAX, REPLICAS_PER_PARTITION_MAX, TOPICS_PER_REQUEST_MAX};

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<AlterPartitionReassignmentsRequest, DecodeError> {
    let c = flexible(ApiKey::AlterPartitionReassignments, version);
    let mut m = AlterPartitionReassignmentsRequest::default();
    m.timeout_ms = s.i32()?;
    // name, partitions array
    let topic_bytes_min = string_bytes_min(c) + array_bytes_min(c);
    m.topics = array(s, c, topic_bytes_min, TOPICS_PER_REQUEST_MAX, |s| {
        let mut topic = ReassignableTopic::default();
        topic.name = TopicName(s.string(c)?);
        // partition_index int32, nullable replicas array
        let partition_bytes_min = 4 + array_bytes_min(c);
        topic.partitions = array(s, c, partition_bytes_min, PARTITIONS_PER_TOPIC_MAX, |s| {
            let mut partition = ReassignablePartition::default();
            partition.partition_index = s.i32()?;
            partition.replicas = nullable_array(s, c, 4, REPLICAS_PER_PARTITION_MAX, |s| {
                Ok(BrokerId(s.i32()?))
            })?;
            if c {
                partition.unknown_tagged_fields = s.unknown_tagged_fields()?;
            }
            Ok(partition)
        })?;
        if c {
            topic.unknown_tagged_fields = s.unknown_tagged_fields()?;
        }
        Ok(topic)
    })?;
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
