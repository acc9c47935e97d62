//! TxnOffsetCommit (key 28) request decoding, versions 0–5 (v3+ flexible). v2 adds the committed
//! leader epoch; v3 the group's generation, member id and instance id (KIP-447's fencing); v5
//! (past kafka-protocol 0.15.1, same bytes as v4) marks a transaction version 2 client.

use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    ApiKey, GroupId, ProducerId, TopicName, TransactionalId, TxnOffsetCommitRequest,
};

use super::source::{array, Source};
use super::{array_bytes_min, flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::{PARTITIONS_PER_TOPIC_MAX, TOPICS_PER_REQUEST_MAX};

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<TxnOffsetCommitRequest, DecodeError> {
    let c = flexible(ApiKey::TxnOffsetCommit, version);
    let mut m = TxnOffsetCommitRequest::default();
    m.transactional_id = TransactionalId(s.string(c)?);
    m.group_id = GroupId(s.string(c)?);
    m.producer_id = ProducerId(s.i64()?);
    m.producer_epoch = s.i16()?;
    if version >= 3 {
        m.generation_id = s.i32()?;
        m.member_id = s.string(c)?;
        m.group_instance_id = s.nullable_string(c)?;
    }
    let topic_bytes_min = string_bytes_min(c) + array_bytes_min(c);
    m.topics = array(s, c, topic_bytes_min, TOPICS_PER_REQUEST_MAX, |s| {
        let mut topic = TxnOffsetCommitRequestTopic::default();
        topic.name = TopicName(s.string(c)?);
        // partition int32, offset int64, metadata length
        let partition_bytes_min = 12 + string_bytes_min(c);
        topic.partitions = array(s, c, partition_bytes_min, PARTITIONS_PER_TOPIC_MAX, |s| {
            let mut partition = TxnOffsetCommitRequestPartition::default();
            partition.partition_index = s.i32()?;
            partition.committed_offset = s.i64()?;
            if version >= 2 {
                partition.committed_leader_epoch = s.i32()?;
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
