//! DeleteTopics (key 20) request decoding, versions 0–6. v6 names topics by name or id.

use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::{ApiKey, DeleteTopicsRequest, TopicName};

use super::source::{array, Source};
use super::{flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::TOPICS_PER_REQUEST_MAX;

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<DeleteTopicsRequest, DecodeError> {
    let c = flexible(ApiKey::DeleteTopics, version);
    let mut m = DeleteTopicsRequest::default();
    if version >= 6 {
        // nullable name + uuid
        let topic_bytes_min = string_bytes_min(c) + 16;
        m.topics = array(s, c, topic_bytes_min, TOPICS_PER_REQUEST_MAX, |s| {
            let mut topic = DeleteTopicState::default();
            topic.name = s.nullable_string(c)?.map(TopicName);
            topic.topic_id = s.uuid()?;
            if c {
                topic.unknown_tagged_fields = s.unknown_tagged_fields()?;
            }
            Ok(topic)
        })?;
    } else {
        m.topic_names = array(s, c, string_bytes_min(c), TOPICS_PER_REQUEST_MAX, |s| {
            Ok(TopicName(s.string(c)?))
        })?;
    }
    m.timeout_ms = s.i32()?;
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
