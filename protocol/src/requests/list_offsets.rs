//! ListOffsets (key 2) request decoding, versions 0–7. v0 asks for up to `max_num_offsets`
//! offsets per partition (answered with `old_style_offsets`).

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, ListOffsetsRequest, TopicName};

use super::source::{array, Source};
use super::{array_bytes_min, flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::{PARTITIONS_PER_TOPIC_MAX, TOPICS_PER_REQUEST_MAX};

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<ListOffsetsRequest, DecodeError> {
    let c = flexible(ApiKey::ListOffsets, version);
    let mut m = ListOffsetsRequest::default();
    m.replica_id = BrokerId(s.i32()?);
    if version >= 2 {
        m.isolation_level = s.i8()?;
    }
    let topic_bytes_min = string_bytes_min(c) + array_bytes_min(c);
    m.topics = array(s, c, topic_bytes_min, TOPICS_PER_REQUEST_MAX, |s| {
        let mut topic = ListOffsetsTopic::default();
        topic.name = TopicName(s.string(c)?);
        // partition index int32 + timestamp int64
        topic.partitions = array(s, c, 12, PARTITIONS_PER_TOPIC_MAX, |s| {
            let mut partition = ListOffsetsPartition::default();
            partition.partition_index = s.i32()?;
            if version >= 4 {
                partition.current_leader_epoch = s.i32()?;
            }
            partition.timestamp = s.i64()?;
            if version == 0 {
                partition.max_num_offsets = s.i32()?;
            }
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
