//! DescribeLogDirs (key 35) request decoding, versions 0–4 (v2+ flexible). Null topics = every
//! partition.

use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::{ApiKey, DescribeLogDirsRequest};

use super::source::{nullable_array, Source};
use super::{flexible, topic_partition_indexes, topic_partition_indexes_bytes_min};
use crate::error::DecodeError;
use crate::limits::TOPICS_PER_REQUEST_MAX;

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<DescribeLogDirsRequest, DecodeError> {
    let c = flexible(ApiKey::DescribeLogDirs, version);
    let mut m = DescribeLogDirsRequest::default();
    let topic_bytes_min = topic_partition_indexes_bytes_min(c);
    m.topics = nullable_array(s, c, topic_bytes_min, TOPICS_PER_REQUEST_MAX, |s| {
        let (topic, partitions, tags) = topic_partition_indexes(s, c)?;
        let mut entry = DescribableLogDirTopic::default();
        entry.topic = topic;
        entry.partitions = partitions;
        entry.unknown_tagged_fields = tags;
        Ok(entry)
    })?;
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
