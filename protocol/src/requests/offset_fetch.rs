//! OffsetFetch (key 9) request decoding, versions 0–9. v0–v7 name one group and its topics
//! (null topics = all, from v2); v8 batches groups; v9 (KIP-848) adds each group's member id and
//! epoch, which a consumer group (`group.protocol=consumer`) member's fetch is validated by.

use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{ApiKey, GroupId, OffsetFetchRequest, TopicName};

use super::source::{array, nullable_array, Source};
use super::{array_bytes_min, flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::{GROUPS_PER_REQUEST_MAX, PARTITIONS_PER_TOPIC_MAX, TOPICS_PER_REQUEST_MAX};

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<OffsetFetchRequest, DecodeError> {
    let c = flexible(ApiKey::OffsetFetch, version);
    let topic_bytes_min = string_bytes_min(c) + array_bytes_min(c);
    let mut m = OffsetFetchRequest::default();
    if version <= 7 {
        m.group_id = GroupId(s.string(c)?);
        m.topics = nullable_array(s, c, topic_bytes_min, TOPICS_PER_REQUEST_MAX, |s| {
            let mut topic = OffsetFetchRequestTopic::default();
            topic.name = TopicName(s.string(c)?);
            topic.partition_indexes = array(s, c, 4, PARTITIONS_PER_TOPIC_MAX, |s| s.i32())?;
            if c {
                topic.unknown_tagged_fields = s.unknown_tagged_fields()?;
            }
            Ok(topic)
        })?;
        // Null ("all topics") exists only from v2.
        if m.topics.is_none() && version < 2 {
            return Err(DecodeError::UnexpectedNull);
        }
    }
    if version >= 8 {
        let group_bytes_min = string_bytes_min(c) + array_bytes_min(c);
        m.groups = array(s, c, group_bytes_min, GROUPS_PER_REQUEST_MAX, |s| {
            let mut group = OffsetFetchRequestGroup::default();
            group.group_id = GroupId(s.string(c)?);
            if version >= 9 {
                group.member_id = s.nullable_string(c)?;
                group.member_epoch = s.i32()?;
            }
            group.topics = nullable_array(s, c, topic_bytes_min, TOPICS_PER_REQUEST_MAX, |s| {
                let mut topic = OffsetFetchRequestTopics::default();
                topic.name = TopicName(s.string(c)?);
                topic.partition_indexes = array(s, c, 4, PARTITIONS_PER_TOPIC_MAX, |s| s.i32())?;
                if c {
                    topic.unknown_tagged_fields = s.unknown_tagged_fields()?;
                }
                Ok(topic)
            })?;
            if c {
                group.unknown_tagged_fields = s.unknown_tagged_fields()?;
            }
            Ok(group)
        })?;
    }
    if version >= 7 {
        m.require_stable = s.bool()?;
    }
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
