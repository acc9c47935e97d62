//! ElectLeaders (key 43) request decoding, versions 0–2: v0 has no election type (preferred),
//! v1 adds `election_type` (int8, first), v2 is flexible. Null `topic_partitions` = every
//! partition of the cluster.

use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{ApiKey, ElectLeadersRequest};

use super::source::{nullable_array, Source};
use super::{flexible, topic_partition_indexes, topic_partition_indexes_bytes_min};
use crate::error::DecodeError;
use crate::limits::TOPICS_PER_REQUEST_MAX;

/// First version with `election_type` (KIP-460).
const ELECTION_TYPE_VERSION_MIN: i16 = 1;

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<ElectLeadersRequest, DecodeError> {
    let c = flexible(ApiKey::ElectLeaders, version);
    let mut m = ElectLeadersRequest::default();
    if version >= ELECTION_TYPE_VERSION_MIN {
        m.election_type = s.i8()?;
    }
    let topic_bytes_min = topic_partition_indexes_bytes_min(c);
    m.topic_partitions = nullable_array(s, c, topic_bytes_min, TOPICS_PER_REQUEST_MAX, |s| {
        let (name, partitions, tags) = topic_partition_indexes(s, c)?;
        let mut topic = TopicPartitions::default();
        topic.topic = name;
        topic.partitions = partitions;
        topic.unknown_tagged_fields = tags;
        Ok(topic)
    })?;
    m.timeout_ms = s.i32()?;
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
