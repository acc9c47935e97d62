//! DeleteRecords (key 21) request decoding, versions 0–2 (v2 flexible): per partition, the offset
//! below which records go (−1 = the high watermark).

use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::{ApiKey, DeleteRecordsRequest, TopicName};

use super::source::{array, Source};
use super::{array_bytes_min, flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::{PARTITIONS_PER_TOPIC_MAX, TOPICS_PER_REQUEST_MAX};

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<DeleteRecordsRequest, DecodeError> {
    let c = flexible(ApiKey::DeleteRecords, version);
    let mut m = DeleteRecordsRequest::default();
    let topic_bytes_min = string_bytes_min(c) + array_bytes_min(c);
    m.topics = array(s, c, topic_bytes_min, TOPICS_PER_REQUEST_MAX, |s| {
        let mut topic = DeleteRecordsTopic::default();
        topic.name = TopicName(s.string(c)?);
        // partition int32, offset int64
        topic.partitions = array(s, c, 12, PARTITIONS_PER_TOPIC_MAX, |s| {
            let mut partition = DeleteRecordsPartition::default();
            partition.partition_index = s.i32()?;
            partition.offset = s.i64()?;
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
    m.timeout_ms = s.i32()?;
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
