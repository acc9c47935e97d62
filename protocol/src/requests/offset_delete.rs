//! OffsetDelete (key 47) request decoding, version 0 (never flexible): a group and the partitions
//! whose committed offsets go.

use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::{ApiKey, GroupId, OffsetDeleteRequest, TopicName};

use super::source::{array, Source};
use super::{array_bytes_min, flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::{PARTITIONS_PER_TOPIC_MAX, TOPICS_PER_REQUEST_MAX};

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<OffsetDeleteRequest, DecodeError> {
    let c = flexible(ApiKey::OffsetDelete, version);
    let mut m = OffsetDeleteRequest::default();
    m.group_id = GroupId(s.string(c)?);
    let topic_bytes_min = string_bytes_min(c) + array_bytes_min(c);
    m.topics = array(s, c, topic_bytes_min, TOPICS_PER_REQUEST_MAX, |s| {
        let mut topic = OffsetDeleteRequestTopic::default();
        topic.name = TopicName(s.string(c)?);
        topic.partitions = array(s, c, 4, PARTITIONS_PER_TOPIC_MAX, |s| {
            Ok(OffsetDeleteRequestPartition::default().with_partition_index(s.i32()?))
        })?;
        Ok(topic)
    })?;
    Ok(m)
}
