//! ListPartitionReassignments (key 46) request decoding, version 0 (flexible from the start). Null
//! topics = every reassignment.

use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::{ApiKey, ListPartitionReassignmentsRequest, TopicName};

use super::source::{array, nullable_array, Source};
use super::{array_bytes_min, flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::{PARTITIONS_PER_TOPIC_MAX, TOPICS_PER_REQUEST_MAX};

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<ListPartitionReassignmentsRequest, DecodeError> {
    let c = flexible(ApiKey::ListPartitionReassignments, version);
    let mut m = ListPartitionReassignmentsRequest::default();
    m.timeout_ms = s.i32()?;
    let topic_bytes_min = string_bytes_min(c) + array_bytes_min(c);
    m.topics = nullable_array(s, c, topic_bytes_min, TOPICS_PER_REQUEST_MAX, |s| {
        let mut topic = ListPartitionReassignmentsTopics::default();
        topic.name = TopicName(s.string(c)?);
        topic.partition_indexes = array(s, c, 4, PARTITIONS_PER_TOPIC_MAX, |s| s.i32())?;
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
