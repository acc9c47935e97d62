//! ListPartitionReassignments (key 46) request decoding, version 0 (flexible from the start). Null
//! topics = every reassignment.

use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::{ApiKey, ListPartitionReassignmentsRequest};

use super::source::{nullable_array, Source};
use super::{flexible, topic_partition_indexes, topic_partition_indexes_bytes_min};
use crate::error::DecodeError;
use crate::limits::TOPICS_PER_REQUEST_MAX;

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<ListPartitionReassignmentsRequest, DecodeError> {
    let c = flexible(ApiKey::ListPartitionReassignments, version);
    let mut m = ListPartitionReassignmentsRequest::default();
    m.timeout_ms = s.i32()?;
    let topic_bytes_min = topic_partition_indexes_bytes_min(c);
    m.topics = nullable_array(s, c, topic_bytes_min, TOPICS_PER_REQUEST_MAX, |s| {
        let (name, partition_indexes, tags) = topic_partition_indexes(s, c)?;
        let mut topic = ListPartitionReassignmentsTopics::default();
        topic.name = name;
        topic.partition_indexes = partition_indexes;
        topic.unknown_tagged_fields = tags;
        Ok(topic)
    })?;
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
