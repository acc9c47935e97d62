//! DescribeLogDirs (key 35) request decoding, versions 0–4 (v2+ flexible). Null topics = every
//! partition.

use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::{ApiKey, DescribeLogDirsRequest, TopicName};

use super::source::{array, nullable_array, Source};
use super::{array_bytes_min, flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::{PARTITIONS_PER_TOPIC_MAX, TOPICS_PER_REQUEST_MAX};

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<DescribeLogDirsRequest, DecodeError> {
    let c = flexible(ApiKey::DescribeLogDirs, version);
    let mut m = DescribeLogDirsRequest::default();
    let topic_bytes_min = string_bytes_min(c) + array_bytes_min(c);
    m.topics = nullable_array(s, c, topic_bytes_min, TOPICS_PER_REQUEST_MAX, |s| {
        let mut topic = DescribableLogDirTopic::default();
        topic.topic = TopicName(s.string(c)?);
        topic.partitions = array(s, c, 4, PARTITIONS_PER_TOPIC_MAX, |s| s.i32())?;
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
