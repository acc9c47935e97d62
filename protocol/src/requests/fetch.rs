//! Fetch (key 1) request decoding, versions 0–13 (0–3 are the legacy versions served by
//! down-conversion). v13 names topics by id instead of name. The one known tagged field in this
//! range is the top-level `cluster_id` (tag 0, v12+).

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, TopicName};

use super::source::{array, tagged_with, Source};
use super::{array_bytes_min, flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::{PARTITIONS_PER_TOPIC_MAX, TOPICS_PER_REQUEST_MAX};

/// Tag of `cluster_id` in the top-level tagged fields (v12+).
const CLUSTER_ID_TAG: i32 = 0;
/// Top-level tag of `replica_state`, a v15+ field: meaningless in the versions Skiff decodes.
const REPLICA_STATE_TAG: i32 = 1;
/// Partition tag of `replica_directory_id`, a v17+ field: meaningless in the versions Skiff decodes.
const REPLICA_DIRECTORY_ID_TAG: i32 = 0;

pub(crate) fn decode<S: Source>(s: &mut S, version: i16) -> Result<FetchRequest, DecodeError> {
    let c = flexible(ApiKey::Fetch, version);
    let mut m = FetchRequest::default();
    m.replica_id = BrokerId(s.i32()?);
    m.max_wait_ms = s.i32()?;
    m.min_bytes = s.i32()?;
    if version >= 3 {
        m.max_bytes = s.i32()?;
    }
    if version >= 4 {
        m.isolation_level = s.i8()?;
    }
    if version >= 7 {
        m.session_id = s.i32()?;
        m.session_epoch = s.i32()?;
    }
    let name_bytes_min = if version >= 13 {
        16
    } else {
        string_bytes_min(c)
    };
    m.topics = array(
        s,
        c,
        name_bytes_min + array_bytes_min(c),
        TOPICS_PER_REQUEST_MAX,
        |s| {
            let mut topic = FetchTopic::default();
            if version <= 12 {
                topic.topic = TopicName(s.string(c)?);
            }
            if version >= 13 {
                topic.topic_id = s.uuid()?;
            }
            // partition int32, fetch offset int64, partition max bytes int32
            topic.partitions = array(s, c, 16, PARTITIONS_PER_TOPIC_MAX, |s| {
                let mut partition = FetchPartition::default();
                partition.partition = s.i32()?;
                if version >= 9 {
                    partition.current_leader_epoch = s.i32()?;
                }
                partition.fetch_offset = s.i64()?;
                if version >= 12 {
                    partition.last_fetched_epoch = s.i32()?;
                }
                if version >= 5 {
                    partition.log_start_offset = s.i64()?;
                }
                partition.partition_max_bytes = s.i32()?;
                if c {
                    // Dropped rather than kept as unknown: the tag belongs to a later version,
                    // and kafka-protocol's encoder miscounts an unknown tag inside its known range.
                    partition.unknown_tagged_fields = s.unknown_tagged_fields()?;
                    partition
                        .unknown_tagged_fields
                        .remove(&REPLICA_DIRECTORY_ID_TAG);
                }
                Ok(partition)
            })?;
            if c {
                topic.unknown_tagged_fields = s.unknown_tagged_fields()?;
            }
            Ok(topic)
        },
    )?;
    if version >= 7 {
        m.forgotten_topics_data = array(
            s,
            c,
            name_bytes_min + array_bytes_min(c),
            TOPICS_PER_REQUEST_MAX,
            |s| {
                let mut topic = ForgottenTopic::default();
                if version <= 12 {
                    topic.topic = TopicName(s.string(c)?);
                }
                if version >= 13 {
                    topic.topic_id = s.uuid()?;
                }
                topic.partitions = array(s, c, 4, PARTITIONS_PER_TOPIC_MAX, |s| s.i32())?;
                if c {
                    topic.unknown_tagged_fields = s.unknown_tagged_fields()?;
                }
                Ok(topic)
            },
        )?;
    }
    if version >= 11 {
        m.rack_id = s.string(c)?;
    }
    if c {
        let (cluster_id, mut unknown) = tagged_with(s.tagged_fields()?, CLUSTER_ID_TAG, |t| {
            t.nullable_string(true)
        })?;
        m.cluster_id = cluster_id.flatten();
        // A later version's field (see REPLICA_DIRECTORY_ID_TAG).
        unknown.remove(&REPLICA_STATE_TAG);
        m.unknown_tagged_fields = unknown;
    }
    Ok(m)
}
