//! OffsetsForLeaderEpoch (key 23) request decoding, versions 0–4: per partition the epoch whose
//! end offset is asked (`leader_epoch`), from v2 the asker's `current_leader_epoch` (fencing), from
//! v3 the asker's `replica_id` (−1 consumer, −2 not given), v4 flexible.

use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{ApiKey, BrokerId, OffsetForLeaderEpochRequest, TopicName};

use super::source::{array, Source};
use super::{array_bytes_min, flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::{PARTITIONS_PER_TOPIC_MAX, TOPICS_PER_REQUEST_MAX};

/// First version with `current_leader_epoch` (KIP-320).
const CURRENT_LEADER_EPOCH_VERSION_MIN: i16 = 2;
/// First version with `replica_id`.
const REPLICA_ID_VERSION_MIN: i16 = 3;

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<OffsetForLeaderEpochRequest, DecodeError> {
    let c = flexible(ApiKey::OffsetForLeaderEpoch, version);
    let mut m = OffsetForLeaderEpochRequest::default();
    if version >= REPLICA_ID_VERSION_MIN {
        m.replica_id = BrokerId(s.i32()?);
    }
    // partition int32 + leader epoch int32, + current leader epoch int32 from v2
    let partition_bytes_min = if version >= CURRENT_LEADER_EPOCH_VERSION_MIN {
        12
    } else {
        8
    };
    let topic_bytes_min = string_bytes_min(c) + array_bytes_min(c);
    m.topics = array(s, c, topic_bytes_min, TOPICS_PER_REQUEST_MAX, |s| {
        let mut topic = OffsetForLeaderTopic::default();
        topic.topic = TopicName(s.string(c)?);
        topic.partitions = array(s, c, partition_bytes_min, PARTITIONS_PER_TOPIC_MAX, |s| {
            let mut partition = OffsetForLeaderPartition::default();
            partition.partition = s.i32()?;
            if version >= CURRENT_LEADER_EPOCH_VERSION_MIN {
                partition.current_leader_epoch = s.i32()?;
            }
            partition.leader_epoch = s.i32()?;
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
