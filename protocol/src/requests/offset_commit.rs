//! OffsetCommit (key 8) request decoding, versions 0–9. v1 has a per-partition commit timestamp;
//! v2–v4 a request-level retention time. v9 is v8's bytes; it is the first version a consumer
//! group (KIP-848) member may commit with, its `generation_id_or_member_epoch` being the member
//! epoch (Kafka 4.1.1 answers an older version from such a member UNSUPPORTED_VERSION).

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{ApiKey, GroupId, OffsetCommitRequest, TopicName};

use super::source::{array, Source};
use super::{array_bytes_min, flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::{PARTITIONS_PER_TOPIC_MAX, TOPICS_PER_REQUEST_MAX};

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<OffsetCommitRequest, DecodeError> {
    let c = flexible(ApiKey::OffsetCommit, version);
    let mut m = OffsetCommitRequest::default();
    m.group_id = GroupId(s.string(c)?);
    if version >= 1 {
        m.generation_id_or_member_epoch = s.i32()?;
        m.member_id = s.string(c)?;
    }
    if version >= 7 {
        m.group_instance_id = s.nullable_string(c)?;
    }
    if (2..=4).contains(&version) {
        m.retention_time_ms = s.i64()?;
    }
    let topic_bytes_min = string_bytes_min(c) + array_bytes_min(c);
    m.topics = array(s, c, topic_bytes_min, TOPICS_PER_REQUEST_MAX, |s| {
        let mut topic = OffsetCommitRequestTopic::default();
        topic.name = TopicName(s.string(c)?);
        // partition int32, offset int64, metadata length
        let partition_bytes_min = 12 + string_bytes_min(c);
        topic.partitions = array(s, c, partition_bytes_min, PARTITIONS_PER_TOPIC_MAX, |s| {
            let mut partition = OffsetCommitRequestPartition::default();
            partition.partition_index = s.i32()?;
            partition.committed_offset = s.i64()?;
            if version >= 6 {
                partition.committed_leader_epoch = s.i32()?;
            }
            if version == 1 {
                partition.commit_timestamp = s.i64()?;
            }
            partition.committed_metadata = s.nullable_string(c)?;
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
