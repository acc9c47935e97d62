//! Produce (key 0) request decoding, versions 0–12. Record sets stay zero-copy slices of the frame
//! (`Bytes::slice_ref`); v0–v2 carry v0/v1 message sets, v3+ v2 batches — the record modules
//! parse them, not this one. v10–v12 add no request field: v11 allows TRANSACTION_ABORTABLE in
//! the answer, v12 marks a transaction version 2 producer (KIP-890).

use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, TopicName, TransactionalId};

use super::source::{array, Source};
use super::{array_bytes_min, flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::{PARTITIONS_PER_TOPIC_MAX, TOPICS_PER_REQUEST_MAX};

pub(crate) fn decode<S: Source>(s: &mut S, version: i16) -> Result<ProduceRequest, DecodeError> {
    let c = flexible(ApiKey::Produce, version);
    let mut m = ProduceRequest::default();
    if version >= 3 {
        m.transactional_id = s.nullable_string(c)?.map(TransactionalId);
    }
    m.acks = s.i16()?;
    m.timeout_ms = s.i32()?;
    let topic_bytes_min = string_bytes_min(c) + array_bytes_min(c);
    m.topic_data = array(s, c, topic_bytes_min, TOPICS_PER_REQUEST_MAX, |s| {
        let mut topic = TopicProduceData::default();
        topic.name = TopicName(s.string(c)?);
        // partition index int32 + records length (int32, or a varint in flexible versions)
        let partition_bytes_min = 4 + array_bytes_min(c);
        topic.partition_data = array(s, c, partition_bytes_min, PARTITIONS_PER_TOPIC_MAX, |s| {
            let mut partition = PartitionProduceData::default();
            partition.index = s.i32()?;
            partition.records = s.nullable_bytes(c)?;
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
