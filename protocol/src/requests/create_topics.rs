//! CreateTopics (key 19) request decoding, versions 0–7.

use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::{ApiKey, BrokerId, CreateTopicsRequest, TopicName};

use super::source::{array, Source};
use super::{array_bytes_min, flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::{
    CONFIGS_PER_REQUEST_MAX, PARTITIONS_PER_TOPIC_MAX, REPLICAS_PER_PARTITION_MAX,
    TOPICS_PER_REQUEST_MAX,
};

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<CreateTopicsRequest, DecodeError> {
    let c = flexible(ApiKey::CreateTopics, version);
    let mut m = CreateTopicsRequest::default();
    // name, num partitions int32, replication factor int16, two arrays
    let topic_bytes_min = string_bytes_min(c) + 6 + 2 * array_bytes_min(c);
    m.topics = array(s, c, topic_bytes_min, TOPICS_PER_REQUEST_MAX, |s| {
        let mut topic = CreatableTopic::default();
        topic.name = TopicName(s.string(c)?);
        topic.num_partitions = s.i32()?;
        topic.replication_factor = s.i16()?;
        let assignment_bytes_min = 4 + array_bytes_min(c);
        topic.assignments = array(s, c, assignment_bytes_min, PARTITIONS_PER_TOPIC_MAX, |s| {
            let mut assignment = CreatableReplicaAssignment::default();
            assignment.partition_index = s.i32()?;
            assignment.broker_ids = array(s, c, 4, REPLICAS_PER_PARTITION_MAX, |s| {
                Ok(BrokerId(s.i32()?))
            })?;
            if c {
                assignment.unknown_tagged_fields = s.unknown_tagged_fields()?;
            }
            Ok(assignment)
        })?;
        let config_bytes_min = 2 * string_bytes_min(c);
        topic.configs = array(s, c, config_bytes_min, CONFIGS_PER_REQUEST_MAX, |s| {
            let mut config = CreatableTopicConfig::default();
            config.name = s.string(c)?;
            config.value = s.nullable_string(c)?;
            if c {
                config.unknown_tagged_fields = s.unknown_tagged_fields()?;
            }
            Ok(config)
        })?;
        if c {
            topic.unknown_tagged_fields = s.unknown_tagged_fields()?;
        }
        Ok(topic)
    })?;
    m.timeout_ms = s.i32()?;
    if version >= 1 {
        m.validate_only = s.bool()?;
    }
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
