//! Metadata (key 3) request decoding, versions 0–12. In v0 an empty topic list means "all
//! topics"; from v1 null means all (the broker interprets this, the decoder keeps what was sent).

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{ApiKey, MetadataRequest, TopicName};

use super::source::{nullable_array, Source};
use super::{flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::TOPICS_PER_REQUEST_MAX;

pub(crate) fn decode<S: Source>(s: &mut S, version: i16) -> Result<MetadataRequest, DecodeError> {
    let c = flexible(ApiKey::Metadata, version);
    let mut m = MetadataRequest::default();
    m.topics = nullable_array(s, c, string_bytes_min(c), TOPICS_PER_REQUEST_MAX, |s| {
        let mut topic = MetadataRequestTopic::default();
        if version >= 10 {
            topic.topic_id = s.uuid()?;
        }
        // A null name (look the topic up by id) exists only from v10.
        topic.name = if version >= 10 {
            s.nullable_string(c)?.map(TopicName)
        } else {
            Some(TopicName(s.string(c)?))
        };
        if c {
            topic.unknown_tagged_fields = s.unknown_tagged_fields()?;
        }
        Ok(topic)
    })?;
    // Only v1+ may send null ("all topics"); v0 says "all" with an empty list.
    if m.topics.is_none() && version == 0 {
        return Err(DecodeError::UnexpectedNull);
    }
    if version >= 4 {
        m.allow_auto_topic_creation = s.bool()?;
    }
    if (8..=10).contains(&version) {
        m.include_cluster_authorized_operations = s.bool()?;
    }
    if version >= 8 {
        m.include_topic_authorized_operations = s.bool()?;
    }
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
