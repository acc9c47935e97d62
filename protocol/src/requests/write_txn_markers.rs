//! WriteTxnMarkers (key 27) request decoding, version 1 only (flexible): a transaction
//! coordinator asks a partition leader to write COMMIT or ABORT markers. Kafka 4.0 removed v0 and
//! Kafka 4.1.1 refuses it as an unsupported version; so does Skiff (the version table has no v0).

use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{ApiKey, ProducerId, TopicName, WriteTxnMarkersRequest};

use super::source::{array, Source};
use super::{array_bytes_min, flexible, string_bytes_min};
use crate::error::DecodeError;
use crate::limits::{
    PARTITIONS_PER_TOPIC_MAX, TOPICS_PER_REQUEST_MAX, TRANSACTIONS_PER_REQUEST_MAX,
};

pub(crate) fn decode<S: Source>(
    s: &mut S,
    version: i16,
) -> Result<WriteTxnMarkersRequest, DecodeError> {
    let c = flexible(ApiKey::WriteTxnMarkers, version);
    let mut m = WriteTxnMarkersRequest::default();
    // producer id int64, epoch int16, result bool, topics, coordinator epoch int32
    let marker_bytes_min = 11 + array_bytes_min(c) + 4;
    m.markers = array(s, c, marker_bytes_min, TRANSACTIONS_PER_REQUEST_MAX, |s| {
        let mut marker = WritableTxnMarker::default();
        marker.producer_id = ProducerId(s.i64()?);
        marker.producer_epoch = s.i16()?;
        marker.transaction_result = s.bool()?;
        let topic_bytes_min = string_bytes_min(c) + array_bytes_min(c);
        marker.topics = array(s, c, topic_bytes_min, TOPICS_PER_REQUEST_MAX, |s| {
            let mut topic = WritableTxnMarkerTopic::default();
            topic.name = TopicName(s.string(c)?);
            topic.partition_indexes = array(s, c, 4, PARTITIONS_PER_TOPIC_MAX, |s| s.i32())?;
            if c {
                topic.unknown_tagged_fields = s.unknown_tagged_fields()?;
            }
            Ok(topic)
        })?;
        marker.coordinator_epoch = s.i32()?;
        if c {
            marker.unknown_tagged_fields = s.unknown_tagged_fields()?;
        }
        Ok(marker)
    })?;
    if c {
        m.unknown_tagged_fields = s.unknown_tagged_fields()?;
    }
    Ok(m)
}
